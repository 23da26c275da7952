"""The CPR state's running block (tasks/cpr/state.py): while a run goes on, the state's arrays hold
only the societies still running; the graph's final state covers the whole batch; a run resumed
from a checkpoint taken after societies left the block, or from a state written before the
block existed, gives the uninterrupted run's numbers; a viewer of the checkpoints finds every
society's agents in every round it ran."""

import sqlite3

import numpy as np
import pandas as pd
import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver

from cooplab.evals.typed import as_frame, as_series, column
from cooplab.tasks.cpr import metrics as cm
from cooplab.tasks.cpr import phases as ph
from cooplab.tasks.cpr.params import make_params
from cooplab.tasks.cpr.society import Condition, build_cpr_graph, cpr_phases, init_state, recursion_limit, run_cpr
from cooplab.tasks.cpr.state import full_state, unpacked

from ._support import plain

FINAL = (
    "T_s",
    "collapse",
    "eta_sum",
    "alive",
    "e",
    "m",
    "p",
    "g",
    "P",
    "P_bar",
    "R",
    "R_plus",
    "G",
    "effort",
    "h",
    "B",
    "V",
    "payoff",
    "proposals",
    "active",
    "condition",
    "replicate",
)


def _conditions():
    """Societies that starve within a few rounds beside societies that run to the cap of 12."""
    return [Condition(make_params(P0=2.0, c=6.0, T=12), "mixed"), Condition(make_params(r=0.6, T=12), "mixed")]


def _same(a, b, keys=FINAL):
    for k in keys:
        np.testing.assert_array_equal(np.asarray(a[k]), np.asarray(b[k]), err_msg=k)
        assert np.asarray(a[k]).dtype == np.asarray(b[k]).dtype, k
    for k in b["params"]:
        np.testing.assert_array_equal(a["params"][k], b["params"][k], err_msg=k)


def test_the_block_holds_only_running_societies_and_the_final_state_the_whole_batch():
    conds, S = _conditions(), 2 * 8
    state = init_state(conds, 8, 3)
    graph = build_cpr_graph(cpr_phases())
    sizes, final = [], None
    for values in graph.stream(state, {"recursion_limit": recursion_limit(state, 7)}, stream_mode="values"):
        rows = values["rows"]
        n = len(rows)
        assert values["n_societies"] == S and np.all(np.diff(rows) > 0)
        for k in ("active", "R", "G", "T_s", "condition", "e", "alive", "P", "h"):
            assert values[k].shape[0] == n, k  # every per-society array lines up with every other
        assert all(v.shape == (n,) for v in values["params"].values())
        gone = {int(i) for f in values.get("finished") or [] for i in f["rows"]}
        if n < S:  # the finished societies are in the log, each once, with their survival time
            assert gone == set(range(S)) - set(rows.tolist())
            assert all((unpacked(f)["T_s"] > 0).all() for f in values["finished"])
        sizes.append(n)
        final = values
    assert final is not None
    assert min(sizes) < S and sizes[-1] == S  # societies left the block, and the batch came back together
    assert final["e"].shape == (S, 10) and final["rows"].tolist() == list(range(S))
    assert final["T_s"][:8].max() < final["T_s"][8:].min() == 12  # the starving ones ended early, the others at the cap
    _same(final, run_cpr(conds, 8, 3))  # what run_cpr (full_state of the graph's output) gives


def test_a_checkpoint_taken_after_societies_left_resumes_to_the_uninterrupted_result(tmp_path):
    conds = _conditions()
    ref = plain(run_cpr(conds, 8, 5))
    crash = {"on": True}
    learn = ph.learn_node()
    seen = {}

    def flaky_learn(state):
        if crash["on"] and state["round"] == 9:
            seen["rows"] = len(state["rows"])
            raise RuntimeError("simulated crash")
        return learn(state)

    phases = cpr_phases()
    phases["learn"] = flaky_learn
    conn = sqlite3.connect(str(tmp_path / "ck.sqlite"), check_same_thread=False)
    graph = build_cpr_graph(phases, checkpointer=SqliteSaver(conn))
    cfg: RunnableConfig = {"configurable": {"thread_id": "t"}, "recursion_limit": 1000}
    with pytest.raises(RuntimeError, match="simulated crash"):
        graph.invoke(init_state(conds, 8, 5), cfg)
    assert seen["rows"] < 16  # the checkpoint resumed from holds the running block only
    mid = full_state(graph.get_state(cfg).values)  # a checkpoint's state over the whole batch
    done = mid["T_s"] > 0
    assert done.any() and (mid["T_s"][done] == ref["T_s"][done]).all()
    for k in ("e", "g", "P", "alive", "R", "G", "collapse"):
        np.testing.assert_array_equal(mid[k][done], ref[k][done], err_msg=k)  # finished societies: their final values
    crash["on"] = False
    out = full_state(graph.invoke(None, cfg))
    conn.close()
    _same(out, ref)
    pd.testing.assert_frame_equal(cm.history_frame(out), cm.history_frame(ref))


def test_a_state_written_before_the_block_existed_runs_to_the_same_result():
    """A checkpoint of the code before the running block holds the whole batch (no ``rows``, no
    ``finished``; finished societies masked by ``active``) and whole-batch history records:
    resumed, it gives the numbers of a run that had the block from the start."""
    conds = _conditions()
    ref = plain(run_cpr(conds, 8, 7, checkpointer=InMemorySaver()))
    graph = build_cpr_graph(cpr_phases(), checkpointer=InMemorySaver())
    cfg: RunnableConfig = {"configurable": {"thread_id": "t"}, "recursion_limit": 1000}
    graph.invoke(init_state(conds, 8, 7), cfg, interrupt_before=["harvest"])
    for _ in range(7):  # seven rounds, then the state as the former code kept it
        graph.invoke(None, cfg, interrupt_before=["harvest"])
    whole = full_state(graph.get_state(cfg).values)
    assert whole["round"] == 8 and (whole["T_s"] > 0).any() and (whole["T_s"] == 0).any()  # some finished, others run
    old = {k: v for k, v in whole.items() if k not in ("rows", "n_societies", "finished", "ended")}
    old["history"] = cm.full_history(whole)  # whole-batch records, with ``active``
    out = full_state(build_cpr_graph(cpr_phases()).invoke(old, {"recursion_limit": 1000}))
    _same(out, ref)
    assert "rows" not in out["history"][0] and "rows" in out["history"][-1]  # both kinds of records, read alike
    pd.testing.assert_frame_equal(cm.history_frame(out), cm.history_frame(ref))
    for a, b in zip(cm.full_history(out), cm.full_history(ref), strict=False):
        assert a.keys() == b.keys()
        for k in a:
            np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def test_the_explorer_finds_every_society_in_every_round_it_ran(tmp_path):
    """A rule run's checkpoints hold the running block; the explorer's table of every fisher in
    every round maps the block's rows to societies and takes the agents of the societies that
    ended a round from ``ended``: each society in rounds 1 to its survival time, its efforts those
    of the rounds table."""
    import cooplab
    from cooplab.evals.explorer.runs import RunDir
    from cooplab.tasks.cpr.explore import cpr_history

    out = tmp_path / "run"
    cooplab.run(task="cpr", replicates=6, rounds=25, seed=2, out=str(out), quiet=True, set={"P0": 2.0})
    agents, _, note = cpr_history(RunDir(id="0/run", out=out, root=tmp_path))
    assert note is None and agents is not None
    rounds = pd.read_parquet(out / "rounds.parquet")
    T = as_series(rounds.groupby("replicate")["round"].max())
    assert T.min() < T.max()  # societies ended in different rounds
    for s, T_s in T.items():  # one condition: the society index is the replicate
        mine = agents[agents.society == s]
        assert sorted(set(mine["round"])) == list(range(1, T_s + 1)), s
        # every fisher was alive at the start of each of these rounds (a starvation ends the society)
        want = column(as_frame(rounds[rounds.replicate == s]).set_index("round"), "mean_effort")
        assert as_series(mine.groupby("round")["effort"].mean()).tolist() == pytest.approx(want.tolist(), rel=1e-12), s


def test_environment_node_compact_false_keeps_the_whole_batch_with_the_same_numbers():
    conds = _conditions()
    phases = cpr_phases()
    phases["environment"] = ph.environment_node(compact=False)
    state = init_state(conds, 8, 3)
    sizes = [
        len(v["rows"]) for v in build_cpr_graph(phases).stream(state, {"recursion_limit": 1000}, stream_mode="values")
    ]
    assert set(sizes) == {16}
    _same(run_cpr(conds, 8, 3, phases=phases), run_cpr(conds, 8, 3))
