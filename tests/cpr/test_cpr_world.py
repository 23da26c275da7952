"""The CPR equations and one round of the graph against a hand computation."""

import math

import numpy as np
import pytest
from langgraph.checkpoint.memory import InMemorySaver

from cooplab.tasks.cpr import model as world
from cooplab.tasks.cpr import rules as rb
from cooplab.tasks.cpr.society import build_cpr_graph, cpr_phases
from tests.conftest import set_traits


def test_logistic_regrowth_and_msy():
    assert world.logistic_regrowth(np.array([500.0]), 0.2, 1000.0)[0] == pytest.approx(550.0)
    assert world.logistic_regrowth(np.array([0.0]), 0.6, 1000.0)[0] == 0.0
    assert world.h_opt(0.2, 1000.0) == pytest.approx(50.0)
    # the MSY is the largest surplus r R (1 - R/K) over R
    R = np.linspace(0, 1000, 10001)
    assert (0.6 * R * (1 - R / 1000)).max() == pytest.approx(world.h_opt(0.6, 1000.0))


def test_imitation_probability_is_the_logit_rule():
    p = world.imitation_probability(np.array([[3.0]]), np.array([[1.0]]), 0.5)
    assert p[0, 0] == pytest.approx(1 / (1 + math.exp(-1.0)))
    assert world.imitation_probability(np.array([[1.0]]), np.array([[1.0]]), 5.0)[0, 0] == pytest.approx(0.5)


def test_median_norm_ignores_dead_agents():
    proposals = np.array([[1.0, 2.0, 100.0], [4.0, 5.0, 6.0]])
    alive = np.array([[True, True, False], [True, True, True]])
    assert world.median_norm(proposals, alive).tolist() == [1.5, 5.0]


def test_ration_never_takes_more_than_the_stock():
    h = np.array([[60.0, 60.0], [1.0, 2.0]])
    out = world.ration(h, np.array([100.0, 100.0]))
    assert out[0].sum() == pytest.approx(100.0) and out[0, 0] == pytest.approx(50.0)
    assert out[1].tolist() == [1.0, 2.0]


def test_one_round_matches_hand_computation(small_state):
    # Two agents, so each inspects the other for sure; m = p = 1.
    st = small_state(
        N=2, T=1, K=1000, R0=1000, r=0.2, alpha=0.1, c=4, P0=20, beta=10, gamma=1, ema=0.5, social_learning=False
    )
    set_traits(st, e=[0.5, 0.1], g=[100.0, 100.0], m=1.0, p=1.0)
    st["G"] = np.array([20.0])
    graph = build_cpr_graph(cpr_phases(social_learning=False), checkpointer=InMemorySaver())
    out = graph.invoke(st, {"configurable": {"thread_id": "hand"}})
    # harvest: h = alpha e R = 0.1 * 0.5 * 1000 = 50 and 0.1 * 0.1 * 1000 = 10
    assert out["h"][0].tolist() == pytest.approx([50.0, 10.0])
    # agent 1 finds h_0 = 50 > G = 20 and punishes; agent 0 finds h_1 = 10 <= 20
    assert out["B"][0].tolist() == [0, 1] and out["V"][0].tolist() == [1, 0]
    # P(t+1) = P + h - c - gamma B - beta V
    assert out["P"][0].tolist() == pytest.approx([20 + 50 - 4 - 0 - 10, 20 + 10 - 4 - 1 - 0])
    # smoothed payoff with weight 0.5 from 0
    assert out["P_bar"][0].tolist() == pytest.approx([0.5 * 36, 0.5 * 5])
    # R+ = 1000 - 60 = 940; R(2) = 940 + 0.2 * 940 * (1 - 0.94)
    assert out["R_plus"][0] == pytest.approx(940.0)
    assert out["R"][0] == pytest.approx(940 + 0.2 * 940 * 0.06)
    # eta(1) = 60 / (r K / 4) = 60 / 50; survival capped at T = 1
    assert out["eta_sum"][0] == pytest.approx(1.2)
    assert out["T_s"][0] == 1 and out["collapse"][0] == 0
    # a finished society votes no more: the norm stays as it was
    assert out["G"][0] == pytest.approx(20.0)
    rec = out["history"][0]
    assert rec["n_punished"][0] == 1 and rec["n_violations"][0] == 1 and rec["n_inspections"][0] == 2
    assert rec["G"][0] == 20.0 and rec["compliance"][0] == pytest.approx(0.5)


def test_median_of_proposals_is_the_next_rounds_norm(small_state):
    st = small_state(N=3, T=2, social_learning=False, punishment=False)
    set_traits(st, g=[5.0, 9.0, 30.0])
    st["G"] = np.array([1.0])
    out = build_cpr_graph(cpr_phases(social_learning=False, punishment=False)).invoke(st)
    assert out["history"][0]["G"][0] == 1.0
    assert out["history"][1]["G"][0] == 9.0  # median(5, 9, 30), in force in round 2


def test_capped_effort_respects_personal_cap(small_state):
    st = small_state(N=2, alpha=0.1, R0=1000)
    set_traits(st, e=[1.0, 0.05], g=[20.0, 20.0])
    eff = rb.capped_effort(st, np.random.default_rng(0))
    # agent 0 would catch 100 but caps at 20 -> effort 0.2; agent 1 catches 5 < 20
    assert eff[0].tolist() == pytest.approx([0.2, 0.05])


def test_sample_peer_is_uniform_over_living_others():
    rng = np.random.default_rng(1)
    alive = np.ones((20000, 4), dtype=bool)
    alive[:, 2] = False
    j = rb.sample_peer(alive, rng)
    assert (j != np.arange(4)).all()
    assert not (j == 2).any()
    counts = np.bincount(j[:, 0], minlength=4)  # agent 0 picks 1 or 3, half each
    assert counts[0] == 0 and counts[2] == 0
    assert abs(counts[1] / 20000 - 0.5) < 0.02
    lonely = np.zeros((1, 3), dtype=bool)
    lonely[0, 0] = True
    assert rb.sample_peer(lonely, rng)[0, 0] == -1


def test_imitation_frequency_matches_logit_probability(small_state):
    # Agent 1 earns 5 more (smoothed); delta = ln 3 / 5 -> agent 0 adopts with Pr 0.75
    S = 8000
    st = small_state(replicates=S, N=2, learn_prob=1.0, delta=math.log(3) / 5, sigma=0.0)
    set_traits(st, e=[0.2, 0.9], m=[0.1, 0.7], g=[5.0, 25.0], P_bar=[0.0, 5.0])
    out = rb.payoff_biased_imitation(st, np.random.default_rng(3))
    adopted0 = out["e"][:, 0] == 0.9
    assert abs(adopted0.mean() - 0.75) < 0.02
    assert (out["g"][adopted0, 0] == 25.0).all() and (out["m"][adopted0, 0] == 0.7).all()
    adopted1 = out["e"][:, 1] == 0.2
    assert abs(adopted1.mean() - 0.25) < 0.02


def test_mutation_adds_gaussian_noise(small_state):
    st = small_state(replicates=5000, N=2, learn_prob=1.0, delta=100.0, sigma=0.1, e_min=0.0, e_max=1.0)
    set_traits(st, e=[0.5, 0.5], m=0.5, g=[10.0, 10.0], P_bar=[0.0, 100.0])
    out = rb.payoff_biased_imitation(st, np.random.default_rng(4))
    d = out["e"][:, 0] - 0.5  # agent 0 always adopts (delta huge); noise s.d. 0.1 * width 1
    assert abs(d.std() - 0.1) < 0.01 and abs(d.mean()) < 0.01
