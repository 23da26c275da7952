"""The Nash and Pareto references of :mod:`cooplab.tasks.games.equilibria`, checked by brute force:
every action profile of a small version of each game is evaluated at once (the payoff functions are
vectorized over simulations, so one row per profile), then

- Nash: no player gains by any unilateral deviation (checked against every alternative action);
- Pareto: the reference profile reaches the largest total payoff of all profiles.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from cooplab.tasks.games import equilibria as eq
from cooplab.tasks.games import model as pf
from cooplab.tasks.games.params import (
    TABLE4,
    CollectiveRiskParams,
    CPRParams,
    CPRSanctionParams,
    ORingParams,
    PublicGoodsParams,
    WeakestLinkParams,
    model_of,
)
from cooplab.tasks.games.players import allocations

EPS = 1e-9


def all_profiles(n_players: int, n_actions: int) -> np.ndarray:
    """(n_actions^n_players, n_players) every profile of action indices."""
    return np.array(list(itertools.product(range(n_actions), repeat=n_players)))


def nash_mask(profiles: np.ndarray, payoff, actions: np.ndarray) -> np.ndarray:
    """(M,) bool: profile k is a Nash equilibrium of ``payoff`` ((M, N) action indices -> (M, N) payoffs)."""
    u = payoff(profiles)
    ok = np.ones(len(profiles), dtype=bool)
    for i in range(profiles.shape[1]):
        for d in range(len(actions)):
            dev = profiles.copy()
            dev[:, i] = d
            ok &= payoff(dev)[:, i] <= u[:, i] + EPS
    return ok


def welfare(profiles, payoff) -> np.ndarray:
    return payoff(profiles).sum(axis=1)


# --- Weakest-Link -------------------------------------------------------------------------------------------
def test_weakest_link_nash_are_the_symmetric_profiles_and_pareto_is_all_max():
    P = WeakestLinkParams(group_sizes=[2, 2])
    acts = np.arange(P.max_effort + 1)
    prof = all_profiles(4, len(acts))
    pay = lambda p: pf.weakest_link(acts[p], min_weight=P.min_weight, effort_cost=P.effort_cost)  # noqa: E731
    nash = nash_mask(prof, pay, acts)
    symmetric = (prof == prof[:, :1]).all(axis=1)
    assert np.array_equal(nash, symmetric)
    assert nash[np.all(prof == 0, axis=1)].all()  # the reference: e = 0
    w = welfare(prof, pay)
    best = prof[w == w.max()]
    assert best.tolist() == [[10] * 4] and np.array_equal(eq.profile("pareto", P)[0], [10] * 4)
    assert eq.reference(P) == eq.Reference(0.0, 10.0)


# --- CPR ----------------------------------------------------------------------------------------------------
def test_cpr_nash_is_maximum_extraction_and_pareto_zero():
    P = CPRParams(group_sizes=[2, 2])  # N = 4 > multiplier 3
    acts = np.arange(P.max_extract + 1)
    prof = all_profiles(4, len(acts))
    pay = lambda p: pf.cpr(acts[p], capacity=P.capacity, multiplier=P.multiplier)  # noqa: E731
    nash = nash_mask(prof, pay, acts)
    assert prof[nash].tolist() == [[10] * 4]
    w = welfare(prof, pay)
    assert prof[w == w.max()].tolist() == [[0] * 4]
    assert np.array_equal(eq.profile("nash", P)[0], [10] * 4) and np.array_equal(eq.profile("pareto", P)[0], [0] * 4)


def test_cpr_with_large_groups_where_the_pool_can_run_dry():
    N = sum(CPRParams(group_sizes=[10, 10]).group_sizes)  # N X = 200 > C: extraction beyond the pool
    rng = np.random.default_rng(0)
    x = rng.integers(0, 11, size=(2000, N))
    for i in range(N):  # extracting the maximum is dominant: never worse than any other choice
        for d in range(11):
            dev = x.copy()
            dev[:, i] = d
            top = x.copy()
            top[:, i] = 10
            assert np.all(pf.cpr(top)[:, i] >= pf.cpr(dev)[:, i] - EPS)
    assert pf.cpr(np.zeros((1, N))).sum() > pf.cpr(x).sum(axis=1).max()


def test_cpr_sanction_best_response_is_never_to_sanction():
    P = CPRSanctionParams(group_sizes=[2, 2])
    g = eq.groups_of(P)
    rng = np.random.default_rng(1)
    x = rng.integers(0, 11, size=(500, 4))
    for tokens in range(1, P.max_sanction + 1):  # player 0 sanctions player 1 (same group) with 1..10 tokens
        s = np.zeros((500, 4, 4), dtype=int)
        s[:, 0, 1] = tokens
        with_s = pf.cpr_sanction(x, s, g)
        without = pf.cpr_sanction(x, np.zeros_like(s), g)
        assert np.all(with_s["payoff"][:, 0] < without["payoff"][:, 0])  # costly to the sanctioner, no gain
        assert np.all(with_s["payoff"].sum(axis=1) < without["payoff"].sum(axis=1))  # and destroys welfare
    assert eq.reference(P) == eq.Reference(10.0, 0.0)


# --- Collective Risk ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("T", [5, 12, 19])  # p R E = 5 <= T < p N R E = 20 (at 20 free riding ties)
def test_collective_risk_free_riding_is_nash_and_the_fair_share_is_pareto(T):
    P = CollectiveRiskParams(group_sizes=[2, 2], rounds=1, threshold=T)
    acts = np.arange(P.endowment + 1)
    prof = all_profiles(4, len(acts))

    def pay(p):  # expected payoffs (one round: the strategy is the contribution)
        return pf.collective_risk(
            acts[p][:, None, :],
            np.zeros(len(p)),
            endowment=P.endowment,
            threshold=P.threshold,
            loss_probability=P.loss_probability,
        )["expected_payoff"]

    nash = nash_mask(prof, pay, acts)
    assert nash[np.all(prof == 0, axis=1)].all()  # free riding is an equilibrium
    w = welfare(prof, pay)
    fair = eq.fair_share_schedule(P)
    assert fair.sum() == T and fair.max() - fair.min() <= 1
    assert pay(fair).sum() == pytest.approx(w.max())  # the fair share reaches the largest expected welfare
    assert set(prof[w == w.max()].sum(axis=1).tolist()) == {T}  # and every optimum meets T exactly
    assert eq.reference(P).pareto == T / 4


def test_collective_risk_default_fair_share_schedule():
    P = CollectiveRiskParams()
    fair = eq.fair_share_schedule(P)
    assert fair.shape == (10, 10) and fair.sum() == 100 and np.all(fair == 1)
    assert eq.reference(P) == eq.Reference(0.0, 1.0)  # T / (N R) = 100 / (10 x 10); the paper's 1.25 is N = 8
    P8 = CollectiveRiskParams(group_sizes=[4, 4])
    assert eq.reference(P8).pareto == 1.25
    uneven = CollectiveRiskParams(group_sizes=[3, 3])  # 100 / 6 per player: 17, 17, 17, 17, 16, 16 over 10 rounds
    f = eq.fair_share_schedule(uneven)
    assert f.sum() == 100 and f.sum(axis=0).tolist() == [17, 17, 17, 17, 16, 16] and f.max() <= 2


# --- O-Ring -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sizes", [[2, 2], [2, 3], [3, 2]])
def test_o_ring_all_zero_is_nash_and_pareto_is_the_cheapest_success(sizes):
    P = ORingParams(group_sizes=sizes)
    g = eq.groups_of(P)
    acts = np.arange(P.max_withdraw + 1)
    prof = all_profiles(P.n_players, len(acts))

    def pay(p):
        return pf.o_ring(acts[p], g)["payoff"]

    zero = np.zeros((1, P.n_players), dtype=int)
    assert nash_mask(zero, pay, acts).all()
    w = welfare(prof, pay)
    best = eq.profile("pareto", P)[0]
    assert pay(best[None, :]).sum() == pytest.approx(w.max())
    t = eq.oring_min_total(P)
    assert t is not None  # the default O-Ring game has a successful total
    assert w.max() == pytest.approx(P.reward - P.withdraw_cost * t)
    assert eq.reference(P) == eq.Reference(0.0, t / P.n_players)


def test_o_ring_default_pareto_is_six_each():
    P = ORingParams()
    best = eq.profile("pareto", P)[0]
    assert best.tolist() == [6] * 10 and eq.reference(P).pareto == 6.0
    g = eq.groups_of(P)
    for i in range(10):  # anyone withdrawing one less breaks the success: all-6 is also an equilibrium
        w = best.copy()
        w[i] -= 1
        assert not pf.o_ring(w[None, :], g)["success"][0]


def test_o_ring_table4_sizes_have_a_success_and_ten_has_none():
    for k in TABLE4["o-ring"]:
        P = ORingParams(group_sizes=[k, k])
        assert pf.o_ring(eq.profile("pareto", P)[:1], eq.groups_of(P))["success"][0]
    with pytest.raises(ValueError, match="no withdrawals reach"):
        ORingParams(group_sizes=[10, 10])


# --- Public Goods -------------------------------------------------------------------------------------------
def test_public_goods_keeping_is_dominant_and_the_group_pool_is_pareto():
    P = PublicGoodsParams(group_sizes=[3, 3], endowment=2)
    g = eq.groups_of(P)
    table = allocations(P.endowment)  # 6 allocations of 2 tokens
    prof = all_profiles(6, len(table))

    def pay(p):
        return pf.public_goods(table[p], g, group_multiplier=P.group_multiplier, global_multiplier=P.global_multiplier)[
            "payoff"
        ]

    nash = nash_mask(prof, pay, np.arange(len(table)))
    keep = int(np.nonzero((table == [2, 0, 0]).all(axis=1))[0][0])
    give = int(np.nonzero((table == [0, 2, 0]).all(axis=1))[0][0])
    assert prof[nash].tolist() == [[keep] * 6]
    w = welfare(prof, pay)
    assert prof[w == w.max()].tolist() == [[give] * 6]
    assert np.array_equal(eq.profile("pareto", P)[0], [[0, 2, 0]] * 6)


def test_allocations_are_every_split():
    t = allocations(10)
    assert len(t) == 66 and np.all(t.sum(axis=1) == 10) and len({tuple(r) for r in t.tolist()}) == 66


# --- every game, every Table 4 size ---------------------------------------------------------------------------
@pytest.mark.parametrize("game", list(TABLE4))
def test_table4_sizes_are_valid_and_the_references_differ(game):
    for P in [model_of(game)(group_sizes=[k, k]) for k in TABLE4[game]]:
        ref = eq.reference(P)
        assert ref.nash != ref.pareto
        assert ref.proximity(ref.nash) == 1.0 and ref.proximity(ref.pareto) == 0.0
