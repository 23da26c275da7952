"""The CPR society graph: reproducibility, ending rules, switches, composition, resume."""

import sqlite3

import numpy as np
import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver

from cooplab.tasks.cpr import phases as ph
from cooplab.tasks.cpr import rules as rb
from cooplab.tasks.cpr.metrics import full_history
from cooplab.tasks.cpr.params import ABLATIONS, make_params
from cooplab.tasks.cpr.society import (
    Condition,
    build_cpr_graph,
    cpr_phases,
    init_state,
    run_cpr,
)
from tests.conftest import set_traits

from ._support import plain


def _nodes_run(graph, state):
    seen = []
    for upd in graph.stream(state, {"recursion_limit": 1000}, stream_mode="updates"):
        seen.extend(upd.keys())
    return seen


def test_same_seed_same_result_and_different_seed_differs():
    conds = [Condition(make_params(r=0.6), "mixed")]
    a, b, c = plain(run_cpr(conds, 30, 7)), plain(run_cpr(conds, 30, 7)), plain(run_cpr(conds, 30, 8))
    for k in ("T_s", "eta_sum", "e", "g", "P", "R"):
        np.testing.assert_array_equal(a[k], b[k])
    assert not np.array_equal(a["g"], c["g"])
    assert len(a["history"]) == len(b["history"])


def test_depletion_ends_the_run_at_the_right_round(small_state):
    # r = 0: each round removes 20% of the stock; R^+(t) = 1000 * 0.8^t <= 50 first at t = 14
    st = small_state(
        N=10,
        T=50,
        r=0.0,
        R_min=50.0,
        alpha=0.1,
        c=0.1,
        P0=1000,
        punishment=False,
        social_learning=False,
        group_decision=False,
    )
    set_traits(st, e=0.2, g=1e9)
    out = build_cpr_graph(cpr_phases(punishment=False, social_learning=False, group_decision=False)).invoke(
        st, {"recursion_limit": 500}
    )
    assert out["T_s"][0] == 14 and out["collapse"][0] == 1
    assert len(out["history"]) == 14  # the run stops at the collapse round


def test_starvation_ends_the_run_at_the_right_round(small_state):
    # nobody fishes: wealth 10 - 4 t < 0 first at t = 3 (without individual learning, which
    # would raise the effort of agents below subsistence)
    st = small_state(N=4, T=50, c=4.0, P0=10.0, punishment=False, social_learning=False, individual_learning=False)
    set_traits(st, e=0.0)
    out = build_cpr_graph(cpr_phases(punishment=False, social_learning=False, individual_learning=False)).invoke(
        st, {"recursion_limit": 500}
    )
    assert out["T_s"][0] == 3 and out["collapse"][0] == 2
    assert not out["alive"][0].any()


def test_round_cap_gives_survival_time_T(small_state):
    st = small_state(N=3, T=7, c=0.01, punishment=False, social_learning=False)
    set_traits(st, e=0.0)
    out = build_cpr_graph(cpr_phases(punishment=False, social_learning=False)).invoke(st, {"recursion_limit": 500})
    assert out["T_s"][0] == 7 and out["collapse"][0] == 0 and out["round"] == 8


def test_finished_societies_are_frozen_while_others_run():
    # one condition starves fast, the other runs to the cap; same batch
    quick = make_params(c=50.0, P0=0.0, social_learning=False)
    slow = make_params(c=0.01, social_learning=False)
    out = plain(
        run_cpr([Condition(quick, "mixed"), Condition(slow, "mixed")], 5, 1, phases=cpr_phases(social_learning=False))
    )
    assert (out["T_s"][:5] == 1).all() and (out["T_s"][5:] > 1).all()
    rounds_run = [int(h["active"][:5].sum()) for h in full_history(out)]
    assert rounds_run[0] == 5 and sum(rounds_run[1:]) == 0
    assert [set(h["rows"].tolist()) & set(range(5)) for h in out["history"]][1:] == [set()] * (len(out["history"]) - 1)


@pytest.mark.parametrize(
    "ablation,expected",
    [
        ("full", ["harvest", "punish", "environment", "adapt", "learn", "propose", "vote"]),
        ("osl", ["harvest", "punish", "environment", "adapt", "learn"]),
        ("ogd", ["harvest", "punish", "environment", "adapt", "propose", "vote"]),
        ("neither", ["harvest", "punish", "environment", "adapt"]),
    ],
)
def test_ablation_presets_change_what_runs(ablation, expected):
    sw = ABLATIONS[ablation]
    st = init_state([Condition(make_params(T=2, **sw), "mixed")], 3, 0)
    seen = _nodes_run(build_cpr_graph(cpr_phases(**sw)), st)
    assert seen == expected * 2
    if not sw["group_decision"]:
        assert np.isnan(plain(st)["G"]).all()


def test_punishment_switch_removes_the_node_and_off_round_stops_it():
    st = init_state([Condition(make_params(T=2, punishment=False), "mixed")], 2, 0)
    assert "punish" not in _nodes_run(build_cpr_graph(cpr_phases(punishment=False)), st)
    # punishment on until round 3: punishments happen in rounds 1-2, never from round 3 on
    p = make_params(r=0.6, T=10, punish_off_round=3, beta=1.0)
    out = plain(run_cpr([Condition(p, "selfish")], 200, 2))
    punished = [int(h["n_punished"].sum()) for h in out["history"]]
    assert sum(punished[:2]) > 0 and sum(punished[2:]) == 0


def test_without_a_group_norm_inspectors_use_their_own_belief(small_state):
    st = small_state(N=2, group_decision=False)
    set_traits(st, g=[5.0, 50.0])
    thr = ph.threshold(st)
    assert thr[0].tolist() == [5.0, 50.0]
    st2 = small_state(N=2)
    st2["G"] = np.array([7.0])
    assert ph.threshold(st2)[0].tolist() == [7.0, 7.0]


def test_social_learning_changes_traits_only_when_on():
    # individual learning off in both: it would move the caps of fined agents on its own
    p_on = make_params(T=5, r=0.6, learn_prob=1.0, individual_learning=False)
    p_off = make_params(T=5, r=0.6, social_learning=False, individual_learning=False)
    on = plain(run_cpr([Condition(p_on, "mixed")], 20, 3))
    off = plain(run_cpr([Condition(p_off, "mixed")], 20, 3))
    init = plain(init_state([Condition(p_on, "mixed")], 20, 3))
    assert not np.array_equal(on["g"], init["g"])
    np.testing.assert_array_equal(off["g"], init["g"])


def test_compose_a_new_society_swap_drop_and_add_nodes(small_state):
    """Swap the effort policy, drop learning, add a wealth-tax node: it runs each round."""
    calls = []

    def tax(state):
        calls.append(state["round"])
        run = state["alive"] & state["active"][:, None]
        return {"P": np.where(run, state["P"] * 0.9, state["P"])}

    phases = cpr_phases()
    phases["harvest"] = ph.harvest_node(rb.trait_effort)  # ignore personal caps
    del phases["learn"]
    phases["tax"] = tax
    st = small_state(N=2, T=3, c=0.01, P0=100.0, alpha=0.1, R0=1000, K=1000, punishment=True)
    set_traits(st, e=[0.1, 0.1], g=[1.0, 1.0], m=0.0)
    out = build_cpr_graph(phases).invoke(st)
    assert calls == [2, 3, 4]  # once per round (after the environment step advanced the round)
    # trait_effort ignores the cap of 1: harvest 0.1 * 0.1 * 1000 = 10 in round 1
    assert out["history"][0]["H"][0] == pytest.approx(20.0)
    assert out["P"][0, 0] < 100 + 3 * 10  # the tax took its share


def test_interrupted_run_resumes_to_the_uninterrupted_result(tmp_path):
    p = make_params(r=0.6, T=20)
    conds = [Condition(p, "mixed")]
    ref = plain(run_cpr(conds, 25, 11, checkpointer=InMemorySaver()))

    crash = {"on": True}
    learn = ph.learn_node()

    def flaky_learn(state):
        if crash["on"] and state["round"] == 9:
            raise RuntimeError("simulated crash")
        return learn(state)

    phases = cpr_phases()
    phases["learn"] = flaky_learn
    conn = sqlite3.connect(str(tmp_path / "ck.sqlite"), check_same_thread=False)
    graph = build_cpr_graph(phases, checkpointer=SqliteSaver(conn))
    cfg: RunnableConfig = {"configurable": {"thread_id": "t"}, "recursion_limit": 1000}
    with pytest.raises(RuntimeError, match="simulated crash"):
        graph.invoke(init_state(conds, 25, 11), cfg)
    assert graph.get_state(cfg).values["round"] == 9
    crash["on"] = False
    out = graph.invoke(None, cfg)
    conn.close()
    for k in ("T_s", "eta_sum", "g", "e", "P", "R", "G"):
        np.testing.assert_array_equal(out[k], ref[k])
    assert [h["round"] for h in out["history"]] == [h["round"] for h in ref["history"]]
