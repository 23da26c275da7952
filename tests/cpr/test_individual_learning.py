"""Individual learning (the ``adapt`` node): Bush-Mosteller reinforcement with a subsistence
aspiration, against hand computations; its bookkeeping (tau_V, I), its switches, its place in
the graph and the validation of its parameters."""

import asyncio
import math
from types import SimpleNamespace

import numpy as np
import pytest

from cooplab.graphs.nodes import PolicyResult
from cooplab.tasks.cpr import phases as ph
from cooplab.tasks.cpr import rules as rb
from cooplab.tasks.cpr.params import (
    ABLATIONS,
    PRESETS,
    CPRParams,
    ParamError,
    make_params,
    preset_values,
)
from cooplab.tasks.cpr.society import Condition, build_cpr_graph, phases_for, run_cpr
from cooplab.tasks.cpr.task import resolve_params
from tests.conftest import set_traits

from ._support import plain

LAM, C, BETA, GAMMA = 0.2, 4.0, 10.0, 1.0


class ScriptedRng:
    """Peer offsets chosen by the test; every uniform draw 0 (so u < m and u < p when m, p > 0)."""

    def __init__(self, offsets):
        self.offsets = np.asarray(offsets)

    def integers(self, low, high, size):
        return np.broadcast_to(self.offsets, size).copy()

    def random(self, size):
        return np.zeros(size)


def _punish(st, h):
    """Agents 1 and 2 both inspect agent 0, agent 0 inspects agent 1 (N = 3)."""
    st["h"] = np.asarray([h], dtype=float)
    rng = ScriptedRng([[1, 2, 1]])
    return rb.sample_inspect_punish(st, ph.threshold(st), rng)  # pyright: ignore[reportArgumentType]  # a scripted stand-in for the Generator


def _settle(st, out):
    """Write the punish results and this round's payoff (pi = h - c - gamma B - beta V) as the
    punish and environment nodes do."""
    for k in ("B", "V", "I", "tau_V"):
        st[k] = out[k]
    st["payoff"] = st["h"] - C - GAMMA * out["B"] - BETA * out["V"]
    return st


def _adapt(st):
    return ph.adapt_node()(st)


def test_hand_computation_with_a_group_norm(small_state):
    st = small_state(N=3, c=C, beta=BETA, gamma=GAMMA, il_rate=LAM)
    st["G"] = np.array([10.0])
    set_traits(st, e=[0.5, 0.3, 0.6], m=[0.5, 0.4, 0.8], p=[0.5, 0.6, 0.2], g=[20.0, 5.0, 12.0])
    out = _punish(st, [15.0, 3.0, 6.0])
    # agent 0 finds h_1 = 3 <= G: inspected, punished nobody; agents 1 and 2 find h_0 = 15 > G = 10
    assert out["I"][0].tolist() == [1, 1, 1] and out["B"][0].tolist() == [0, 1, 1] and out["V"][0].tolist() == [1, 0, 0]
    assert out["tau_V"][0, 0] == 10.0 and np.isinf(out["tau_V"][0, 1:]).all()  # +inf: not fined
    _settle(st, out)
    # payoffs: 15 - 4 - 10 = 1, 3 - 4 - 1 = -2, 6 - 4 - 1 = 1; stimuli 0.25, -0.5, 0.25
    assert st["payoff"][0].tolist() == [1.0, -2.0, 1.0]
    new = _adapt(st)
    # (i) fined with G = 10 in force: g 20 - 0.2 (20 - 10) = 18, e 0.8 * 0.5 = 0.4;
    # (v) it inspected and fined nobody: m 0.5 + 0.2 * 0.25 * 0.5 = 0.525, p unchanged 0.5
    # (iii)+(iv) agent 1, below subsistence, punished with s = -0.5: e 0.3 + 0.2 * 0.7 = 0.44,
    #     m 0.4 - 0.2 * 0.5 * 0.4 = 0.36, p 0.6 - 0.2 * 0.5 * 0.6 = 0.54, g unchanged
    # (iv) agent 2 punished with s = 0.25: e unchanged (pi >= 0), m 0.8 + 0.2 * 0.25 * 0.2 = 0.81,
    #     p 0.2 + 0.2 * 0.25 * 0.8 = 0.24
    assert new["g"][0].tolist() == pytest.approx([18.0, 5.0, 12.0], abs=1e-12)
    assert new["e"][0].tolist() == pytest.approx([0.4, 0.44, 0.6], abs=1e-12)
    assert new["m"][0].tolist() == pytest.approx([0.525, 0.36, 0.81], abs=1e-12)
    assert new["p"][0].tolist() == pytest.approx([0.5, 0.54, 0.24], abs=1e-12)


def test_hand_computation_without_a_group_norm_takes_the_lower_punisher_threshold(small_state):
    st = small_state(N=3, c=C, beta=BETA, gamma=GAMMA, il_rate=LAM, group_decision=False)
    assert np.isnan(st["G"]).all()
    set_traits(st, e=[0.5, 0.3, 0.6], m=1.0, p=1.0, g=[20.0, 8.0, 6.0])
    out = _punish(st, [12.0, 3.0, 5.0])
    # each inspector's own g is its threshold: agent 0 (20) lets h_1 = 3 pass; 1 (8) and 2 (6) fine agent 0
    assert out["B"][0].tolist() == [0, 1, 1] and out["V"][0].tolist() == [1, 0, 0]
    assert out["tau_V"][0, 0] == 6.0  # the lower of the two punishers' thresholds
    _settle(st, out)
    new = _adapt(st)
    # (ii) g 20 - 0.2 (20 - 6) = 17.2 (17.6 with the higher threshold 8), e 0.8 * 0.5 = 0.4
    assert new["g"][0, 0] == pytest.approx(17.2, abs=1e-12)
    assert new["e"][0, 0] == pytest.approx(0.4, abs=1e-12)


def test_a_fined_agent_below_the_norm_keeps_its_cap_and_its_effort_rise_waits(small_state):
    st = small_state(N=3, c=C, il_rate=LAM)
    set_traits(st, e=[0.5, 0.5, 0.5], m=0.3, p=0.3, g=[5.0, 5.0, 5.0], payoff=[-3.0, -3.0, 0.0])
    st["V"] = np.array([[1, 0, 0]], dtype=np.int8)
    st["tau_V"] = np.array([[10.0, np.inf, np.inf]])
    st["B"] = np.zeros((1, 3), dtype=np.int8)
    st["I"] = np.zeros((1, 3), dtype=np.int8)
    new = _adapt(st)
    # fined: cap 5 < norm 10 stays; effort falls (0.4), not raised although pi < 0;
    # agent 1, not fined with pi < 0: 0.5 + 0.2 * 0.5 = 0.6; agent 2 at pi = 0 exactly: unchanged
    assert new["g"][0].tolist() == [5.0, 5.0, 5.0]
    assert new["e"][0].tolist() == pytest.approx([0.4, 0.6, 0.5], abs=1e-12)
    # nobody inspected or punished: propensities unchanged
    assert new["m"][0].tolist() == [0.3, 0.3, 0.3] and new["p"][0].tolist() == [0.3, 0.3, 0.3]


def test_stimulus_is_clipped_to_minus_one_one(small_state):
    st = small_state(N=2, c=C, il_rate=LAM)
    set_traits(st, e=0.5, m=0.5, p=0.5, g=10.0, payoff=[40.0, -40.0])  # pi / c = +-10 -> +-1
    st["V"] = np.zeros((1, 2), dtype=np.int8)
    st["tau_V"] = np.full((1, 2), np.inf)
    st["B"] = np.ones((1, 2), dtype=np.int8)
    st["I"] = np.ones((1, 2), dtype=np.int8)
    new = _adapt(st)
    assert new["p"][0].tolist() == pytest.approx([0.5 + 0.2 * 0.5, 0.5 - 0.2 * 0.5], abs=1e-12)
    assert new["m"][0].tolist() == pytest.approx([0.6, 0.4], abs=1e-12)


def _two_societies(small_state):
    st = small_state(replicates=2, N=3, c=C, il_rate=LAM)
    set_traits(st, e=0.5, m=0.5, p=0.5, g=20.0, payoff=[1.0, -2.0, -2.0])
    st["V"] = np.array([[1, 0, 1]] * 2, dtype=np.int8)
    st["tau_V"] = np.where(st["V"] == 1, 10.0, np.inf)
    st["B"] = np.array([[0, 1, 1]] * 2, dtype=np.int8)
    st["I"] = np.array([[1, 1, 1]] * 2, dtype=np.int8)
    st["alive"][0, 2] = False  # a dead agent in a running society
    st["active"] = np.array([True, False])  # society 1 has finished
    return st


def test_dead_agents_and_finished_societies_keep_their_traits(small_state):
    st = _two_societies(small_state)
    before = {k: st[k].copy() for k in ("e", "m", "p", "g")}
    new = _adapt(st)
    for k in ("e", "m", "p", "g"):
        np.testing.assert_array_equal(new[k][1], before[k][1], err_msg=k)  # finished society
        assert new[k][0, 2] == before[k][0, 2], k  # dead agent (fined, punished, pi < 0: would change)
    # the living agents of the running society did change (the test is not vacuous)
    assert new["g"][0, 0] == pytest.approx(18.0) and new["e"][0, 1] == pytest.approx(0.6)
    assert new["p"][0, 1] == pytest.approx(0.5 - 0.2 * 0.5 * 0.5)


def test_a_finished_society_kept_in_the_state_changes_nothing_for_the_running_one(small_state):
    """The node on a state that keeps a finished society (masked) gives the running society what
    it gives on the running block alone (the finished society dropped from every array)."""
    st = _two_societies(small_state)
    whole = _adapt(st)
    alone = {k: v[:1] if isinstance(v, np.ndarray) and v.shape[:1] == (2,) else v for k, v in st.items()}
    alone["params"] = {k: v[:1] for k, v in st["params"].items()}
    part = _adapt(alone)
    for k in ("e", "m", "p", "g"):
        np.testing.assert_array_equal(whole[k][:1], part[k], err_msg=k)
    assert not np.array_equal(part["g"], st["g"][:1])  # the running society did learn


@pytest.mark.parametrize("finished", [False, True])
@pytest.mark.parametrize("off", [{"individual_learning": False}, {"il_rate": 0.0}])
def test_switched_off_society_keeps_its_traits_in_a_mixed_batch(off, finished):
    """A batch mixing a society without individual learning (0), one with it (1) and, if
    ``finished``, a finished one (2; then only the running rows are computed): only society 1
    learns."""
    from cooplab.tasks.cpr.society import init_state

    conds = [
        Condition(make_params(**off), "mixed"),
        Condition(make_params(), "mixed"),
        Condition(make_params(), "mixed"),
    ]
    st = plain(init_state(conds, 1, 0))
    set_traits(st, payoff=-1.0, e=0.5)
    st["I"] = np.ones_like(st["I"])
    st["active"] = np.array([True, True, not finished])
    new = _adapt(st)
    for k in ("e", "m"):
        np.testing.assert_array_equal(new[k][0], st[k][0], err_msg=k)
        assert (new[k][1] != st[k][1]).all(), k
        assert (new[k][2] != st[k][2]).all() if not finished else np.array_equal(new[k][2], st[k][2]), k


def test_switch_off_or_rate_zero_reproduces_the_v1_model_bit_for_bit():
    """(vii) full runs: v1 preset (node removed), the switch off, and il_rate 0 with the node in
    the graph all give the same numbers; individual learning on gives others."""
    kw = {"r": 0.6, "T": 20, "beta": 10.0}
    base = {**preset_values("v1"), **kw}  # the first version's values; only the switch and the rate move
    v1 = make_params(**base)
    off = make_params(**{**base, "individual_learning": False, "il_rate": 0.43})
    zero = make_params(**{**base, "individual_learning": True, "il_rate": 0.0})
    on = make_params(**{**base, "individual_learning": True})
    assert "adapt" not in phases_for(v1) and "adapt" not in phases_for(off) and "adapt" not in phases_for(zero)
    runs = {
        "v1": plain(run_cpr([Condition(v1, "mixed")], 40, 3)),
        "off": plain(run_cpr([Condition(off, "mixed")], 40, 3)),
        "zero_node": plain(run_cpr([Condition(zero, "mixed")], 40, 3, phases=phases_for(on))),  # node present, skipped
        "on": plain(run_cpr([Condition(on, "mixed")], 40, 3)),
    }
    assert "adapt" in phases_for(on)
    for k in ("T_s", "eta_sum", "e", "m", "p", "g", "P", "R", "G"):
        np.testing.assert_array_equal(runs["off"][k], runs["v1"][k], err_msg=k)
        np.testing.assert_array_equal(runs["zero_node"][k], runs["v1"][k], err_msg=k)
    assert not np.array_equal(runs["on"]["p"], runs["v1"]["p"])


@pytest.mark.parametrize("ablation", list(ABLATIONS))
def test_adapt_runs_between_environment_and_learn_in_every_ablation(ablation):
    params = resolve_params("harsh", ablation, None, 2, {})
    assert params.individual_learning is True
    phases = phases_for(params)
    names = list(phases)
    assert names[names.index("environment") + 1] == "adapt"
    if "learn" in names:
        assert names.index("learn") == names.index("adapt") + 1
    graph = build_cpr_graph(phases).get_graph()
    edges = {(e.source, e.target) for e in graph.edges}
    assert ("environment", "adapt") in edges
    nxt = (
        "learn"
        if ABLATIONS[ablation]["social_learning"]
        else ("propose" if ABLATIONS[ablation]["group_decision"] else None)
    )
    if nxt:
        assert ("adapt", nxt) in edges and ("environment", nxt) not in edges
    else:  # neither: adapt is the last node of the round
        assert ("adapt", "harvest") in edges
    # it runs every round, right after the environment step
    from cooplab.tasks.cpr.society import init_state

    st = init_state([Condition(params, "mixed")], 2, 0)
    seen = []
    for upd in build_cpr_graph(phases).stream(st, {"recursion_limit": 100}, stream_mode="updates"):
        seen.extend(upd)
    assert seen == names * 2


def test_cli_graph_shows_the_adapt_node():
    from typer.testing import CliRunner

    from cooplab.cli import app

    for ablation in ABLATIONS:
        res = CliRunner().invoke(app, ["graph", "cpr", "--ablation", ablation])
        assert res.exit_code == 0
        assert "environment --> adapt;" in res.output, ablation


def test_llm_punish_policy_without_tau_and_inspections_gets_the_defaults(small_state):
    st = small_state(N=3)

    async def policy(state, rng, context, config):
        B = np.array([[1, 0, 0]], dtype=np.int8)
        V = np.array([[0, 1, 0]], dtype=np.int8)
        return PolicyResult({"B": B, "V": V, "n_inspections": np.array([1]), "n_violations": np.array([1])})

    node = ph.punish_node(policy)
    out = asyncio.run(node(st, SimpleNamespace(context=None), {}))
    assert out["V"][0].tolist() == [0, 1, 0] and out["I"].dtype == np.int8
    assert out["I"][0].tolist() == [0, 0, 0] and np.isinf(out["tau_V"]).all()


def test_punish_node_fills_finished_societies_and_switched_off_punishment():
    params = make_params(punish_off_round=1)  # punishment off from round 1
    from cooplab.tasks.cpr.society import init_state

    st = plain(init_state([Condition(params, "mixed"), Condition(make_params(), "mixed")], 2, 0))
    st["h"] = np.full(st["alive"].shape, 100.0)  # everybody violates
    set_traits(st, m=1.0, p=1.0)
    st["active"] = np.array([True, True, True, False])
    out = ph.punish_node()(st)
    assert (out["I"][:2] == 0).all() and np.isinf(out["tau_V"][:2]).all()  # punishment off
    assert (out["I"][2] == 1).all() and np.isfinite(out["tau_V"][2]).any()  # on: everybody inspects
    assert (out["I"][3] == 0).all() and np.isinf(out["tau_V"][3]).all()  # finished
    assert np.isfinite(out["tau_V"]).sum() == out["V"].sum()  # finite exactly where fined


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, -1, -0.01, 2, 1.01, "0.2", True, None, [0.2]])
def test_hostile_il_rate_is_rejected_in_one_line(bad):
    with pytest.raises(ParamError) as exc:
        make_params(il_rate=bad)
    msg = str(exc.value)
    assert "il_rate" in msg and "\n" not in msg


@pytest.mark.parametrize("bad", [1, 0, "true", None, 1.0])
def test_individual_learning_must_be_a_bool(bad):
    with pytest.raises(ParamError) as exc:
        make_params(individual_learning=bad)
    assert "individual_learning" in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.parametrize("ok", [0, 0.0, 0.5, 1, 1.0])
def test_il_rate_accepts_its_domain(ok):
    assert make_params(il_rate=ok).il_rate == ok


def test_v1_preset_is_the_first_versions_defaults_with_individual_learning_off():
    v1 = preset_values("v1")
    assert v1["individual_learning"] is False
    first = dict(
        K=1000.0,
        R0=1000.0,
        R_min=50.0,
        alpha=0.1,
        c=4.0,
        P0=20.0,
        gamma=1.0,
        delta=0.2,
        sigma=0.05,
        learn_prob=0.2,
        ema=0.5,
        e_min=0.04,
        g_min=4.0,
        e_max=1.0,
        g_max=30.0,
        m_range=(0.0, 1.0),
        p_range=(0.0, 1.0),
        il_rate=0.2,
    )
    assert make_params(**v1) == make_params(**first, individual_learning=False)
    assert make_params(**v1) != CPRParams(individual_learning=False)  # the defaults moved on (calibrated)
    # choices made by other options are not part of a preset
    assert not {"r", "beta", "N", "T", "social_learning", "group_decision", "punishment", "punish_off_round"} & set(v1)
    v1["c"] = 99.0  # a copy: the preset itself is untouched
    assert PRESETS["v1"]["c"] == 4.0
    with pytest.raises(ValueError) as exc:
        preset_values("v2")
    assert "v2" in str(exc.value) and "v1" in str(exc.value) and "\n" not in str(exc.value)


def test_params_table_lists_the_new_parameters_with_sources():
    from cooplab.tasks.cpr.params import params_table

    rows = {r["name"]: r for r in params_table()}
    assert rows["il_rate"]["default"] == 0.43 and rows["il_rate"]["source"].startswith("chosen")
    assert rows["individual_learning"]["default"] is True and "abstract" in rows["individual_learning"]["source"]


def test_a_run_config_written_before_individual_learning_resumes_as_v1():
    from cooplab.runs.config import RunConfig
    from cooplab.tasks.cpr.task import TASK

    old = RunConfig(
        task="cpr",
        params={k: v for k, v in CPRParams().model_dump().items() if k not in ("individual_learning", "il_rate")},
    )
    old = old.resolve()  # stored settings, as a config.json holds them
    assert old.params.individual_learning is False
    assert "adapt" not in TASK.phases(old)
    new = RunConfig(task="cpr", params=CPRParams().model_dump()).resolve()
    assert new.params.individual_learning is True
    assert "adapt" in TASK.phases(new)


def test_a_batch_mixing_ablations_runs_each_condition_with_its_own_switches():
    """A batch's graph has every phase some condition needs, and each node skips the societies
    whose switch is off. The first condition (Neither with individual learning off: nobody adapts
    or imitates, no group norm) must not decide the graph for the others."""
    from cooplab.tasks.cpr.society import apply_ablation, init_state

    conds = [
        Condition(make_params(**apply_ablation({"r": 0.6, "individual_learning": False}, "neither")), "mixed"),
        Condition(make_params(**apply_ablation({"r": 0.6}, "full")), "mixed"),
    ]
    start = plain(init_state(conds, 8, 3))
    final = plain(run_cpr(conds, 8, 3))
    idx = np.asarray(final["condition"]) == 0
    for k in ("e", "m", "p", "g"):  # Neither without adapt: every trait as drawn at the start
        assert np.array_equal(np.asarray(final[k])[idx], np.asarray(start[k])[idx]), k
        assert not np.array_equal(np.asarray(final[k])[~idx], np.asarray(start[k])[~idx]), k  # full: learned
    assert np.isnan(np.asarray(final["G"])[idx]).all() and np.isfinite(np.asarray(final["G"])[~idx]).all()


def test_the_defaults_are_the_calibrated_preset_and_v1_keeps_the_first_values():
    """Issue 14: the calibrated set became the defaults; v1 keeps the first version's numbers."""
    d = CPRParams().model_dump()
    assert {k: (tuple(v) if isinstance(v, list) else v) for k, v in PRESETS["calibrated-punishment"].items()} == {
        k: d[k] for k in PRESETS["calibrated-punishment"]
    }
    assert set(PRESETS["calibrated-punishment"]) | {"K", "R0"} >= set(PRESETS["v1"]) - {"individual_learning"}
    assert (PRESETS["v1"]["c"], PRESETS["v1"]["alpha"], PRESETS["v1"]["individual_learning"]) == (4.0, 0.1, False)
    assert d["c"] == 3.1 and d["alpha"] == 0.082 and d["individual_learning"] is True


def test_presets_hold_only_our_choices_never_what_the_paper_or_the_experiments_set():
    """A preset merged over the conditions of Figs. 2-4 must not override the conditions' own r,
    beta, punishment round, N or T (an earlier preset held beta = 10, which turned the beta = 14 and
    the beta grid of Figs. 2 and 3 into beta = 10 under --preset)."""
    from cooplab.tasks.cpr.params import params_table

    chosen = {r["name"] for r in params_table() if str(r["source"]).startswith("chosen")}
    for name, values in PRESETS.items():
        assert set(values) <= chosen | {"individual_learning"}, (name, set(values) - chosen)


def test_figures_under_the_default_preset_equal_figures_under_the_defaults_it_now_is():
    """The whole figures pipeline: --preset calibrated-punishment (merged over every condition) gives the
    numbers of the defaults, beta grid included."""
    import pandas as pd

    from cooplab.tasks.cpr import validation as af

    a = af.run_experiments(4, 3, preset_values("calibrated-punishment"))
    b = af.run_experiments(4, 3, {})
    frames = [*a["fig2"], a["grid"], *a["fig4"]], [*b["fig2"], b["grid"], *b["fig4"]]
    assert len(frames[0]) == 6
    for x, y in zip(*frames, strict=False):
        pd.testing.assert_frame_equal(x, y)
    assert a["grid"]["beta"].nunique() == len(af.FIG3_BETAS)  # the beta grid survived the preset
    assert set(a["fig2"][2]["beta"]) == set(af.FIG2_BETAS)
