"""Hand-computed payoffs of the six games (paper §3.1.1), including the couplings across groups:
one low-effort player in the other group, one group failing O-Ring (and one group's withdrawals
making the other fail), the global pool, the shared CPR pool and the collective threshold.

Players are numbered group by group: with two groups of five, 0..4 are group 0 and 5..9 group 1."""

from __future__ import annotations

import numpy as np
import pytest

from cooplab.tasks.games import model as pf
from cooplab.tasks.games.params import CPRSanctionParams
from cooplab.tasks.games.phases import ActionError, check_actions, clean_sanctions

G55 = np.repeat([0, 1], 5)


def row(*xs):
    return np.array([xs])


# --- Weakest-Link ----------------------------------------------------------------------------------------
def test_weakest_link_everyone_at_ten():
    assert pf.weakest_link(row(*[10] * 10)).tolist() == [[10.0] * 10]  # 2*10 - 10


def test_weakest_link_one_low_effort_player_in_the_other_group_drags_everyone_down():
    # group 0 coordinates perfectly on 10; player 9 (group 1) chooses 3: the global minimum is 3
    u = pf.weakest_link(row(10, 10, 10, 10, 10, 10, 10, 10, 10, 3))[0]
    assert u[:9].tolist() == [2 * 3 - 10] * 9 == [-4] * 9
    assert u[9] == 2 * 3 - 3 == 3  # the low-effort player gains from its own low effort


def test_weakest_link_constants_are_parameters():
    u = pf.weakest_link(row(4, 6), min_weight=3.0, effort_cost=0.5)[0]
    assert u.tolist() == [3 * 4 - 0.5 * 4, 3 * 4 - 0.5 * 6]


# --- CPR -----------------------------------------------------------------------------------------------
def test_cpr_restraint_by_one_group_is_exploited_by_the_other():
    # group 0 extracts 0, group 1 extracts 10 each: 50 extracted, 50 left, 3 * 50 / 10 = 15 each
    u = pf.cpr(row(*[0] * 5, *[10] * 5))[0]
    assert u.tolist() == [15.0] * 5 + [25.0] * 5


def test_cpr_nash_and_pareto_payoffs():
    assert pf.cpr(row(*[10] * 10)).tolist() == [[10.0] * 10]  # pool empty: 10 + 0
    assert pf.cpr(row(*[0] * 10)).tolist() == [[30.0] * 10]  # 0 + 3 * 100 / 10


def test_cpr_pool_never_goes_negative():
    u = pf.cpr(np.full((1, 20), 10))  # two groups of ten extract 200 > C = 100
    assert np.all(u == 10.0)


# --- CPR with sanctioning ---------------------------------------------------------------------------------
def sanctions(N, *triples):
    s = np.zeros((1, N, N), dtype=int)
    for i, j, t in triples:
        s[0, i, j] = t
    return s


def test_cpr_sanction_hand_computed():
    x = row(2, 2, 2, 2, 10, *[10] * 5)  # 68 extracted, 32 left: share 3 * 32 / 10 = 9.6
    s = sanctions(10, (0, 4, 3), (1, 4, 2))  # players 0 and 1 sanction the over-extractor 4 of their group
    r = pf.cpr_sanction(x, s, G55)
    u = r["payoff"][0]
    assert u[0] == pytest.approx(2 + 9.6 - 3)  # cost 1 per token given
    assert u[1] == pytest.approx(2 + 9.6 - 2)
    assert u[2] == pytest.approx(2 + 9.6)
    assert u[4] == pytest.approx(10 + 9.6 - 2 * 5)  # damage 2 per token received
    assert u[5:].tolist() == pytest.approx([19.6] * 5)  # group 1 untouched
    assert r["given"][0].tolist() == [3, 2, 0, 0, 0, 0, 0, 0, 0, 0]
    assert r["received"][0].tolist() == [0, 0, 0, 0, 5, 0, 0, 0, 0, 0]


def test_an_out_of_group_sanction_is_impossible():
    P = CPRSanctionParams(simulations=1)
    state = {"simulations": 1, "group": G55}
    x = row(*[5] * 10)
    # player 0 (group 0) tries to sanction player 7 (group 1) and itself; player 1 sanctions player 2 (allowed)
    attempt = sanctions(10, (0, 7, 4), (0, 0, 1), (1, 2, 3))
    out = clean_sanctions(P, state, attempt)
    assert out["sanction"][0, 0, 7] == 0 and out["sanction"][0, 0, 0] == 0 and out["sanction"][0, 1, 2] == 3
    assert out["dropped"].tolist() == [5]
    u = pf.cpr_sanction(x, out["sanction"], G55)["payoff"][0]
    base = pf.cpr(x)[0]
    assert u[7] == base[7] and u[0] == base[0]  # neither the target nor the would-be sanctioner pays anything
    # the payoff function itself also ignores anything across groups
    assert np.array_equal(
        pf.cpr_sanction(x, attempt, G55)["payoff"], pf.cpr_sanction(x, out["sanction"], G55)["payoff"]
    )


def test_sanctions_above_the_cap_or_negative_are_a_policy_error():
    P = CPRSanctionParams(simulations=1, max_sanction=4)
    state = {"simulations": 1, "group": G55}
    with pytest.raises(ActionError, match="max_sanction"):
        clean_sanctions(P, state, sanctions(10, (0, 1, 3), (0, 2, 2)))
    with pytest.raises(ActionError, match="in 0..max_sanction"):
        clean_sanctions(P, state, sanctions(10, (0, 1, -1)))


# --- Collective Risk ---------------------------------------------------------------------------------------
def contributions(per_player, R=10):
    return np.array([[per_player] * R])  # (1, R, N): the same contributions every round


def test_collective_risk_threshold_missed_by_one_player_of_the_other_group():
    c = contributions([1] * 9 + [0])  # 9 players give 1 per round (90 in all): player 9 (group 1) free-rides
    lost = pf.collective_risk(c, np.array([0.3]))  # u = 0.3 < 0.5: the loss happens
    assert lost["total"].tolist() == [90] and not lost["met"][0] and lost["lost"][0]
    assert lost["payoff"][0].tolist() == [0.0] * 10  # everyone, in both groups, loses all savings
    assert lost["savings"][0].tolist() == [90.0] * 9 + [100.0]
    assert lost["expected_payoff"][0].tolist() == [45.0] * 9 + [50.0]  # savings x (1 - 0.5)
    spared = pf.collective_risk(c, np.array([0.7]))  # u = 0.7 >= 0.5: no loss this time
    assert spared["payoff"][0].tolist() == [90.0] * 9 + [100.0] and not spared["lost"][0]


def test_collective_risk_threshold_met_keeps_the_savings_whatever_the_draw():
    c = contributions([1] * 10)  # exactly T = 100: the fair share 1 per player and round
    for u in (0.0, 0.3, 0.99):
        r = pf.collective_risk(c, np.array([u]))
        assert r["met"][0] and not r["lost"][0]
        assert r["payoff"][0].tolist() == r["expected_payoff"][0].tolist() == [90.0] * 10


def test_collective_risk_uneven_rounds():
    c = np.zeros((1, 10, 10), dtype=int)
    c[0, 0, :] = 10  # everyone gives all of round 1: 100, met
    r = pf.collective_risk(c, np.array([0.1]))
    assert r["met"][0] and r["payoff"][0].tolist() == [90.0] * 10


# --- O-Ring ------------------------------------------------------------------------------------------------
def test_o_ring_all_six_succeeds():
    r = pf.o_ring(row(*[6] * 10), G55)
    # 60 withdrawn: pool factor 140/200 = 0.7; quality 0.6 each: P_g = 1000 * 0.7 * 0.6^5 = 54.432 >= 50
    assert r["production"][0].tolist() == pytest.approx([54.432, 54.432])
    assert r["success"][0]
    assert r["payoff"][0].tolist() == [200 / 10 - 6] * 10 == [14.0] * 10


def test_o_ring_one_group_failing_fails_everyone():
    r = pf.o_ring(row(*[6] * 5, 6, 6, 6, 6, 5), G55)  # player 9 (group 1) withdraws 5
    # 59 withdrawn: factor 0.705; group 0: 705 * 0.6^5 = 54.82 (fine); group 1: 705 * 0.6^4 * 0.5 = 45.68 < 50
    assert r["production"][0].tolist() == pytest.approx([705 * 0.6**5, 705 * 0.6**4 * 0.5])
    assert r["production"][0, 0] >= 50 and not r["success"][0]
    assert r["payoff"][0].tolist() == [-6.0] * 9 + [-5.0]  # no reward for anyone, each pays its withdrawal


def test_o_ring_one_groups_withdrawals_deplete_the_pool_of_the_other():
    ok = pf.o_ring(row(*[6] * 10), G55)
    greedy = pf.o_ring(row(*[10] * 5, *[6] * 5), G55)  # group 0 takes 10 each: 80 withdrawn, factor 0.6
    assert ok["success"][0] and not greedy["success"][0]
    assert greedy["production"][0].tolist() == pytest.approx([600.0, 600 * 0.6**5])  # 46.66 < 50 for group 1
    assert greedy["payoff"][0].tolist() == [-10.0] * 5 + [-6.0] * 5


def test_o_ring_a_zero_in_a_group_zeroes_its_production():
    r = pf.o_ring(row(10, 10, 10, 10, 0, *[10] * 5), G55)
    assert r["production"][0, 0] == 0 and not r["success"][0]


# --- Public Goods ------------------------------------------------------------------------------------------
def test_public_goods_group_and_global_pools():
    a = np.array([[[0, 10, 0]] + [[10, 0, 0]] * 4 + [[0, 0, 10]] * 5])  # (1, 10, 3)
    r = pf.public_goods(a, G55)
    # group 0's pool: 10 -> 2.0 * 10 / 5 = 4 to each of group 0; global pool 50 -> 1.5 * 50 / 10 = 7.5 to all
    u = r["payoff"][0]
    assert u[0] == 0 + 4 + 7.5
    assert u[1:5].tolist() == [10 + 4 + 7.5] * 4
    assert u[5:].tolist() == [0 + 0 + 7.5] * 5  # group 1's global contributions benefit group 0 as much as itself
    assert r["group_pools"][0].tolist() == [10, 0] and r["global_pool"].tolist() == [50]


def test_public_goods_unequal_groups_split_by_their_own_size():
    g = np.array([0, 0, 0, 1, 1])
    a = np.array([[[0, 10, 0]] * 3 + [[0, 10, 0]] * 2])
    u = pf.public_goods(a, g)["payoff"][0]
    assert u.tolist() == [2.0 * 30 / 3] * 3 + [2.0 * 20 / 2] * 2


def test_public_goods_allocations_must_add_up_to_the_endowment():
    from cooplab.tasks.games.params import PublicGoodsParams

    P = PublicGoodsParams(simulations=1)
    state = {"simulations": 1, "group": G55}
    bad = np.array([[[3, 3, 3]] * 10])
    with pytest.raises(ActionError, match="endowment 10"):
        check_actions(P, state, bad)
    assert check_actions(P, state, np.array([[[3, 3, 4]] * 10])).shape == (1, 10, 3)


def test_actions_outside_their_range_are_a_policy_error():
    from cooplab.tasks.games.params import WeakestLinkParams

    P = WeakestLinkParams(simulations=1)
    state = {"simulations": 1, "group": G55}
    for bad in (row(*[11] * 10), row(*[-1] * 10), row(*[0.5] * 10)):
        with pytest.raises(ActionError):
            check_actions(P, state, bad)
