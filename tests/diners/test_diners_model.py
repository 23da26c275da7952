"""Diner's Dilemma (issue 6), rule-based agents: payoffs by hand, each strategy's rule, the
metanorm, the Fermi rule's frequency, seeds, venue swap, and the CLI."""

import json
import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from langgraph.checkpoint.memory import InMemorySaver

from cooplab.cli import figures_app, main
from cooplab.cli.diners import register
from cooplab.tasks.cpr import model as world
from cooplab.tasks.diners import model as dm
from cooplab.tasks.diners.phases import imitate_node, metanorm_node, order_node, punish_node, utility_node
from cooplab.tasks.diners.society import Condition, init_state, run_diners

register(figures_app)


def one(groups, iterations=1, p=3.0, k=1.0, seed=0, replicates=1, beta=1.0) -> dict[str, Any]:
    """The final state of one run (a plain dict: DinersState is total=False for the nodes' updates)."""
    cond = Condition(tuple(tuple(g) for g in groups), p, k, True, beta)
    return dict(run_diners([cond], replicates, seed, iterations, checkpointer=InMemorySaver()))


def idx(names):
    return [dm.CODE[n] for n in names]


# --- the game ------------------------------------------------------------------------------
def test_groups_of_two_are_refused_with_the_default_menu():
    # (c_p - c_b) / 2 = 4 = v_p - v_b: defecting would not pay in a pair
    with pytest.raises(dm.DinersError, match="defecting must pay"):
        init_state([Condition((("R1", "P"), ("M", "E")))], 1, 0, 1)


def test_default_menu_is_a_true_n_player_diners_dilemma():
    c_b, v_b, c_p, v_p = (dm.MEAL[k] for k in ("c_b", "v_b", "c_p", "v_p"))
    n = 4
    # defecting pays individually whatever the others order (x = number of other defectors)
    for x in range(n):
        others = x * c_p + (n - 1 - x) * c_b
        assert v_p - (others + c_p) / n > v_b - (others + c_b) / n
    assert v_p - c_p < v_b - c_b  # all-defect is worse for everyone than all-cooperate
    dm.check_dilemma(c_b, v_b, c_p, v_p, n)
    with pytest.raises(dm.DinersError):
        dm.check_dilemma(4, 6, 12, 7, 4)  # defecting does not pay: 1 < 8/4
    with pytest.raises(dm.DinersError):
        dm.check_dilemma(4, 6, 12, 15, 4)  # all-defect better than all-cooperate


def test_payoffs_by_hand_first_iteration_combination_1():
    f = one(dm.COMBINATIONS[1])  # group 1: M P E R1 (agents 0-3), group 2: M M P R1 (agents 4-7)
    h = f["history"][0]
    # Group 1: R1 defects; bill 4+4+4+12 = 24 -> 6 each; meal utility: cooperators 6-6 = 0, R1 10-6 = 4.
    # Stage 2: M and P punish R1 (k = 1 each; R1 receives 2p = 6).
    # Stage 3: E is a non-punisher; P and R1 fail to punish E; M punishes E, P, R1 (3k = 3; p = 3 each).
    # M: 0 - 1 - 3 = -4; P: 0 - 1 - 3 = -4; E: 0 - 3 = -3; R1: 4 - 6 - 3 = -5.
    # Group 2: M, M, P punish R1 (-1 each); nobody left a defector unpunished: no metanorm. R1: 4 - 9 = -5.
    np.testing.assert_allclose(h["utility"][0], [-4, -4, -3, -5, -1, -1, -1, -5])
    np.testing.assert_allclose(h["meal"][0], [0, 0, 0, 4, 0, 0, 0, 4])
    assert h["defect"][0].tolist() == [False, False, False, True, False, False, False, True]
    assert np.argwhere(h["punish1"][0]).tolist() == [[0, 3], [1, 3], [4, 7], [5, 7], [6, 7]]
    assert np.argwhere(h["punish2"][0]).tolist() == [[0, 1], [0, 2], [0, 3]]
    np.testing.assert_allclose(f["score"][0], h["utility"][0])


def test_payoffs_by_hand_first_iteration_combination_2_and_unstated_costs():
    for p, k, want in ((3.0, 1.0, [-4, -4, -5, -7, -5, -1, -1, -1]), (1.0, 1.0, [0, 0, -3, -7, 1, -1, -1, -1])):
        f = one(dm.COMBINATIONS[2], p=p, k=k)  # group 1: R1 R1 E M, group 2: R1 P P M
        h = f["history"][0]
        # Group 1: two defectors; bill 12+12+4+4 = 32 -> 8 each: R1 10-8 = 2, cooperators 6-8 = -2.
        # Stage 2: M punishes both R1 (2k). Stage 3: each R1 left the other defector unpunished and E left both:
        # all three are non-punishers (and fail to punish non-punishers); M punishes R1, R1, E (3k).
        # R1: 2 - p - p; E: -2 - p; M: -2 - 5k.
        # Group 2: bill 24 -> 6: R1 4 - 3p; P, P, M punish R1: -k each; no non-punisher, no metanorm.
        np.testing.assert_allclose(h["utility"][0], want)
        assert np.argwhere(h["punish2"][0]).tolist() == [[3, 0], [3, 1], [3, 2]]


# --- each strategy's rule ------------------------------------------------------------------
def test_orders_by_strategy():
    strat = np.array([idx(["P", "R1", "E", "M", "D", "R1"])])
    reformed = np.array([[False, False, False, False, False, True]])
    assert dm.rule_orders(strat, reformed).tolist() == [[False, True, False, False, True, False]]


def _play(state):
    """Stages 1-4 of one iteration, node by node."""
    for node in (order_node(), punish_node(), metanorm_node(), utility_node()):
        state = {**state, **node(state)}
    return state


def test_r1_switches_after_being_punished_and_never_punishes():
    s = init_state([Condition((("R1", "P", "E"), ("R1", "E", "E")))], 1, 0, 3)
    s1 = _play(s)
    assert s1["defect"][0].tolist() == [True, False, False, True, False, False]
    assert np.argwhere(s1["punish1"][0]).tolist() == [[1, 0]]  # P punishes R1; neither R1 punishes anyone
    assert not s1["punish2"][0].any()  # no Moralist, no metanorm
    # R1 next to a punisher was punished: reformed, it cooperates from now on (for good);
    # R1 among easy-going cooperators was not: it keeps defecting
    assert s1["reformed"][0].tolist() == [True, False, False, False, False, False]
    s2 = _play({**s1, "round": 2})
    assert s2["defect"][0].tolist() == [False, False, False, True, False, False]
    assert not s2["punish1"][0].any() and s2["reformed"][0, 0]
    # R1 punished only in the metanorm stage also counts as punished (any punishment)
    s3 = _play(init_state([Condition((("R1", "R1", "M", "E"),))], 1, 0, 1))
    assert s3["reformed"][0].tolist() == [True, True, False, False]


def test_r1_reform_persists_and_resets_on_adoption():
    s = init_state([Condition((("R1", "P", "M", "M"),), 3.0, 1.0, True, beta=0.0)], 1, 0, 2)
    assert "reformed" in s and "score" in s
    s["reformed"][:] = True  # pretend everyone had been punished while R1
    s["score"][:] = 0.0
    s["strategy"] = np.array([idx(["R1", "P", "M", "M"])], dtype=np.int8)
    out = imitate_node()(s)
    changed = out["strategy"] != s["strategy"]
    assert (out["reformed"] == (~changed)).all()  # a new strategy starts afresh, an unchanged one keeps its memory


def test_p_punishes_defectors_only_and_m_enforces_the_metanorm():
    groups = np.zeros((1, 4), dtype=int)
    same = dm.same_group(groups)
    strat = np.array([idx(["M", "P", "E", "R1"])])
    defect = np.array([[False, False, False, True]])
    p1 = dm.rule_punish(strat, defect, same)
    assert np.argwhere(p1[0]).tolist() == [[0, 3], [1, 3]]
    assert dm.non_punishers(defect, p1, same)[0].tolist() == [False, False, True, False]
    assert dm.metanorm_targets(strat, defect, p1, same)[0].tolist() == [False, True, True, True]
    p2 = dm.rule_metanorm(strat, defect, p1, same)
    assert np.argwhere(p2[0]).tolist() == [[0, 1], [0, 2], [0, 3]]  # only M punishes in stage 3
    # nobody defects: nobody is punished at all
    none = np.zeros((1, 4), bool)
    assert (
        not dm.rule_punish(strat, none, same).any()
        and not dm.rule_metanorm(strat, none, dm.rule_punish(strat, none, same), same).any()
    )
    # a group where every non-defector punished: no non-punisher, no second-order target
    strat2 = np.array([idx(["M", "M", "P", "R1"])])
    p1b = dm.rule_punish(strat2, defect, same)
    assert not dm.rule_metanorm(strat2, defect, p1b, same).any()
    # punishment never crosses groups
    two = dm.same_group(np.array([[0, 0, 1, 1]]))
    s3 = np.array([idx(["P", "E", "R1", "E"])])
    d3 = dm.rule_orders(s3, np.zeros((1, 4), bool))
    assert not dm.rule_punish(s3, d3, two).any()


def test_e_and_d_never_punish():
    same = dm.same_group(np.zeros((1, 3), dtype=int))
    strat = np.array([idx(["E", "D", "D"])])
    defect = dm.rule_orders(strat, np.zeros((1, 3), bool))
    p1 = dm.rule_punish(strat, defect, same)
    assert not p1.any() and not dm.rule_metanorm(strat, defect, p1, same).any()


# --- the Fermi rule ------------------------------------------------------------------------
def test_fermi_is_the_cpr_logit_rule():
    a, b = np.array([[0.0, 2.0]]), np.array([[1.0, -1.0]])
    np.testing.assert_allclose(world.imitation_probability(a, b, 0.7), 1 / (1 + np.exp(-0.7 * (a - b))))


@pytest.mark.parametrize("beta,diff", [(1.0, 1.0), (1.0, -2.0), (0.5, 3.0), (0.0, 5.0)])
def test_fermi_adoption_frequency(beta, diff):
    S = 20000
    s = init_state([Condition((("P", "E", "E"),), 3.0, 1.0, True, beta=beta)], S, 7, 1)
    s["score"] = np.tile(np.array([[0.0, diff, diff]]), (S, 1))  # agent 0 (P) looks at an E: pi_B - pi_A = diff
    out = imitate_node()(s)
    freq = (out["strategy"][:, 0] == dm.E).mean()
    want = 1.0 / (1.0 + math.exp(-beta * diff))
    assert abs(freq - want) < 4 * math.sqrt(want * (1 - want) / S) + 1e-9
    np.testing.assert_allclose(out["imitation"]["prob"][:, 0], want)
    assert (out["imitation"]["role"] >= 0).all() and (out["imitation"]["role"] != np.arange(3)).all()


def test_role_models_come_from_the_whole_population():
    S = 4000
    s = init_state([Condition(dm.COMBINATIONS[1])], S, 3, 1)
    assert "group" in s
    role = imitate_node()(s)["imitation"]["role"]
    other_group = (s["group"][np.arange(S)[:, None], role] != s["group"]).mean()
    assert abs(other_group - 4 / 7) < 0.02  # 4 of the 7 possible role models sit in the other group


# --- seeds, venues -------------------------------------------------------------------------
def test_seeds_reproduce_and_differ():
    a = one(dm.COMBINATIONS[2], iterations=10, seed=5, replicates=50)
    b = one(dm.COMBINATIONS[2], iterations=10, seed=5, replicates=50)
    c = one(dm.COMBINATIONS[2], iterations=10, seed=6, replicates=50)
    for ha, hb in zip(a["history"], b["history"], strict=False):
        for key in ("strategy", "defect", "punish1", "punish2", "utility", "imitation_role"):
            np.testing.assert_array_equal(ha[key], hb[key])
    assert any((ha["strategy"] != hc["strategy"]).any() for ha, hc in zip(a["history"], c["history"], strict=False))


def test_venues_swap_every_iteration():
    f = one(dm.COMBINATIONS[1], iterations=4)
    v = [h["venue"][0] for h in f["history"]]
    assert v[0].tolist() == [0, 0, 0, 0, 1, 1, 1, 1]  # group 1 at the pub, group 2 at the café
    assert v[1].tolist() == [1, 1, 1, 1, 0, 0, 0, 0]
    assert v[2].tolist() == v[0].tolist() and v[3].tolist() == v[1].tolist()
    assert dm.venue_of_groups(3, 2).tolist() == [1, 2, 0]  # more groups rotate through the venues


# --- CLI -----------------------------------------------------------------------------------
def test_cli_rule_run_writes_the_run_dir(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(
        [
            "run",
            "diners",
            "--combination",
            "2",
            "--pk",
            "6:1",
            "--replicates",
            "20",
            "--iterations",
            "5",
            "--seed",
            "3",
            "--out",
            str(out),
            "--json",
            "-q",
            "--csv",
        ]
    )
    stdout, err = capsys.readouterr()
    assert code == 0, err
    s = json.loads(stdout)
    assert (
        s["task"] == "diners"
        and s["replicates"] == 20
        and s["iterations_completed"] == 5
        and (s["p"], s["k"]) == (6.0, 1.0)
    )
    assert abs(sum(s["final_shares"].values()) - 1) < 1e-9
    for stem in ("strategy_counts", "orders", "punishments", "utilities", "imitation"):
        assert (out / f"{stem}.csv").exists(), stem
    assert (
        (out / "config.json").exists()
        and (out / "checkpoints.sqlite").exists()
        and (out / "figures" / "run.png").exists()
    )
    counts = pd.read_csv(out / "strategy_counts.csv")
    assert len(counts) == 20 * 6 and (counts[list(dm.STRATEGIES)].sum(axis=1) == 8).all()
    first = counts[counts["iteration"] == 0].iloc[0]
    assert (first["R1"], first["P"], first["M"], first["E"]) == (3, 2, 2, 1)
    u = pd.read_csv(out / "utilities.csv")
    assert len(u) == 20 * 5 * 8
    orders = pd.read_csv(out / "orders.csv")
    assert set(orders["venue"]) == {"pub", "café"}


@pytest.mark.parametrize(
    "args,msg",
    [
        (["--groups", "M,X;P,P"], "unknown strategy"),
        (["--pk", "abc"], "--pk"),
        (["--combination", "3"], "--combination"),
        (["--combination", "1", "--groups", "M,P"], "either"),
        (["--iterations", "0"], "--iterations"),
        (["--agents", "robot"], "--agents"),
    ],
)
def test_cli_user_errors_are_one_line_exit_2(tmp_path, capsys, args, msg):
    code = main(["run", "diners", "--out", str(tmp_path / "r"), *args])
    _, err = capsys.readouterr()
    assert code == 2 and err.startswith("cooplab: error:") and msg in err and len(err.strip().splitlines()) == 1


def test_cli_figures(tmp_path, capsys):
    out = tmp_path / "figs"
    code = main(["figures", "diners", "--out", str(out), "--replicates", "10", "--json"])
    stdout, err = capsys.readouterr()
    assert code == 0, err
    res = json.loads(stdout)
    assert {"fig9_rule.png", "fig10_rule.png", "rule_shares.csv", "rule_final_shares.csv", "claims.md"} <= set(
        res["files"]
    )
    assert len(res["final_shares"]) == 6 and len(res["claims"]) == 14


def test_graph_has_the_phase_nodes_in_order():
    from cooplab.tasks.diners.society import build_diners_graph

    nodes = [n for n in build_diners_graph().get_graph().nodes if not n.startswith("__")]
    assert nodes == ["order", "punish", "metanorm", "utility", "imitate", "swap"]
