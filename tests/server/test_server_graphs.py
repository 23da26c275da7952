"""The graphs served to LangGraph's own server (cooplab.runs.server_graphs), run in this process
with LangGraph's in-memory checkpointer: the same settings and seed give the same numbers as
``cooplab.run``; settings come from the context or the config (the context wins); a bad setting is
one line before any run directory is made; langgraph.json names every factory."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TypedDict

import numpy as np
import pandas as pd
import pytest
from langgraph.checkpoint.memory import InMemorySaver

import cooplab
from cooplab.graphs.state import AppendLog
from cooplab.graphs.task import Task
from cooplab.limits import ConfigError
from cooplab.runs import server_graphs as sg
from cooplab.runs.config import RunConfig
from tests.helpers.served import run_runtime

ROOT = Path(__file__).resolve().parents[2]
SCRIPTED = ROOT / "examples" / "scripted" / "cautious.json"
#: what differs between two runs of the same config: the time they took
VARYING = ("wall_seconds",)


@pytest.fixture(autouse=True)
def no_opt_ins(monkeypatch):
    """The operator's opt-ins of this shell do not reach the tests: each test sets the ones it needs."""
    for variable in sg.OPT_INS:
        monkeypatch.delenv(variable, raising=False)


def serve_and_run(graph_id: str, runs: Path, monkeypatch, *, context=None, configurable=None, run_id="r1"):
    """Build the served graph as the server would (factory with config and runtime) and run it to the end."""
    monkeypatch.setenv(sg.RUNS_ENV, str(runs))
    config = {"configurable": {**(configurable or {}), "thread_id": "t", "run_id": run_id}}
    graph = getattr(sg, graph_id)(config=config, runtime=run_runtime(context))
    graph = graph.copy(update={"checkpointer": InMemorySaver()})
    return asyncio.run(graph.ainvoke({}, config, context=context))


def same_summary(served: dict, run_dir: Path) -> None:
    mine = json.loads((run_dir / "summary.json").read_text())
    assert {k: v for k, v in served.items() if k not in VARYING} == {k: v for k, v in mine.items() if k not in VARYING}


def test_served_rule_cpr_gives_the_numbers_of_cooplab_run(tmp_path, monkeypatch):
    options = {"n_agents": 4, "rounds": 6, "replicates": 3}
    state = serve_and_run("cpr", tmp_path / "served", monkeypatch, context={"seed": 7, "options": options})
    ref = cooplab.run(task="cpr", seed=7, out=tmp_path / "ref", quiet=True, **options)
    same_summary(state["summary"], ref.out)
    served_dir = Path(state["run_dir"])
    assert served_dir.parent == tmp_path / "served" and served_dir.name == "cpr-r1"
    pd.testing.assert_frame_equal(pd.read_parquet(served_dir / "rounds.parquet"), ref.rounds)
    # the state the server holds is the final state: one history record per round, none twice
    assert [h["round"] for h in state["history"]] == list(range(1, 7))
    assert isinstance(state["P"], np.ndarray) and state["P"].shape == (3, 4)


def test_served_llm_cpr_with_a_scripted_model_gives_the_numbers_of_cooplab_run(tmp_path, monkeypatch):
    monkeypatch.setenv(sg.ALLOW_PATHS, "1")  # the operator allows model files (scripted:FILE)
    settings = {"agents": "llm", "model": f"scripted:{SCRIPTED}", "seed": 4, "options": {"n_agents": 3, "rounds": 3}}
    state = serve_and_run("cpr", tmp_path / "served", monkeypatch, context=settings)
    ref = cooplab.run(
        task="cpr",
        agents="llm",
        model=f"scripted:{SCRIPTED}",
        seed=4,
        n_agents=3,
        rounds=3,
        cache="off",
        out=tmp_path / "ref",
        quiet=True,
    )
    assert state["summary"]["status"] == "completed" and state["summary"]["ledger"]["calls"] > 0
    same_summary(state["summary"], ref.out)
    assert len(state["decisions"]) == len(ref.decisions) and len(state["ledger"]) == len(ref.ledger)


def test_a_second_run_on_the_same_thread_starts_from_its_own_initial_state(tmp_path, monkeypatch):
    """Studio runs a graph again on the same thread: the new run must not inherit the logs of the first."""
    monkeypatch.setenv(sg.RUNS_ENV, str(tmp_path))
    context = {"seed": 5, "options": {"n_agents": 3, "rounds": 4, "replicates": 1}}
    graph = sg.cpr(config={"configurable": {}}, runtime=run_runtime(context))
    graph = graph.copy(update={"checkpointer": InMemorySaver()})
    # as the server does, the context goes in as the client's JSON object (LangGraph makes the
    # context_schema of it; its stubs want the schema itself)
    asyncio.run(graph.ainvoke({}, {"configurable": {"thread_id": "t", "run_id": "a"}}, context=context))  # pyright: ignore[reportArgumentType]
    second = asyncio.run(graph.ainvoke({}, {"configurable": {"thread_id": "t", "run_id": "b"}}, context=context))  # pyright: ignore[reportArgumentType]
    assert [h["round"] for h in second["history"]] == [1, 2, 3, 4]
    same_summary(second["summary"], tmp_path / "cpr-a")
    pd.testing.assert_frame_equal(
        pd.read_parquet(tmp_path / "cpr-b" / "rounds.parquet"), pd.read_parquet(tmp_path / "cpr-a" / "rounds.parquet")
    )


def test_the_context_wins_over_the_config_and_defaults_fill_the_rest(tmp_path, monkeypatch):
    state = serve_and_run(
        "cpr",
        tmp_path,
        monkeypatch,
        context={"seed": 2},
        configurable={"seed": 9, "options": {"rounds": 2, "replicates": 1}},
    )
    assert (
        state["summary"]["seed"] == 2
        and state["summary"]["rounds_completed"] == 2
        and state["summary"]["replicates"] == 1
    )


@pytest.mark.parametrize("graph_id", ["cpr", "diners", "game"])
def test_a_bare_run_does_something_small(tmp_path, monkeypatch, graph_id):
    """A run with no settings (Studio's plain "run"): rule agents, a few rounds, completed."""
    state = serve_and_run(graph_id, tmp_path, monkeypatch)
    assert state["summary"]["status"] == "completed" and state["summary"]["agents"] == "rule"
    assert (Path(state["run_dir"]) / "summary.json").is_file()


@pytest.mark.parametrize(
    "context, says",
    [
        ({"seed": -1}, "--seed"),
        ({"seed": True}, "settings: seed"),
        ({"options": {"n_agents": "many"}}, "--n-agents"),
        ({"options": {"colour": 1}}, "no option 'colour'"),
        ({"agents": "robots"}, "--agents"),
        ({"sandbox": {"speed": 1}}, "sandbox has no setting 'speed'"),
        ({"llm": {"temprature": 1}}, "llm has no setting 'temprature'"),
        ({"llm": {"seed": 1}}, "llm has no setting 'seed'"),
        ({"budget": float("nan"), "agents": "llm", "model": f"scripted:{SCRIPTED}"}, "budget"),
        ({"model": "scripted:/nonexistent.json", "agents": "llm"}, "/nonexistent.json"),
        ({"unknown": 1}, "settings: unknown"),
        ("not settings", "the context must be an object"),
    ],
)
def test_a_bad_setting_is_one_line_before_any_run_directory(tmp_path, monkeypatch, context, says):
    monkeypatch.setenv(sg.RUNS_ENV, str(tmp_path / "runs"))
    monkeypatch.setenv(sg.ALLOW_PATHS, "1")  # past the refusals (test_serve_refusals.py): the checks of cooplab run
    with pytest.raises(ConfigError) as e:
        sg.cpr(config={"configurable": {}}, runtime=run_runtime(context))
    assert says in str(e.value) and "\n" not in str(e.value)
    assert isinstance(e.value, ValueError)  # the server passes a ValueError's message on to the client
    assert not (tmp_path / "runs").exists()


def test_langgraph_json_names_one_factory_per_built_in_task():
    spec = json.loads((ROOT / "langgraph.json").read_text())
    assert set(spec["graphs"]) == set(sg.GRAPHS) == {"cpr", "diners", "game", "science"}
    # the server's own checkpoints decode only LangGraph's safe types (the served graphs' state is plain data)
    assert spec["env"] == {"LANGGRAPH_STRICT_MSGPACK": "true"}
    for graph_id, where in spec["graphs"].items():
        module, _, name = where.partition(":")
        assert module == sg.__name__ and callable(getattr(sg, name))
        graph = getattr(sg, name)(config={"configurable": {}}, runtime=run_runtime(None))
        assert graph.checkpointer is None and graph.get_context_jsonschema()["properties"]["options"]["default"]
        assert list(graph.get_graph().nodes) == ["__start__", "setup", sg.GRAPHS[graph_id][0], "__end__"]
        # the task's own graph is a subgraph: Studio draws (xray) and steps through its nodes
        inner = [n for n in graph.get_graph(xray=True).nodes if n.startswith(f"{graph_id}:") and not n.endswith("__")]
        assert len(inner) >= 2, inner


class TinyState(TypedDict, total=False):
    seed: int
    round: int
    max_round: int
    history: AppendLog


class Tiny(Task):
    """A task whose initial state already holds a record in its log."""

    name = "tiny-served"
    state_schema = TinyState
    agent_kinds = ("rule",)

    def phases(self, config):
        return {"step": lambda s: {"round": s["round"] + 1, "history": [{"round": s["round"]}]}}

    def init_state(self, config):
        return {"seed": 0, "round": 1, "max_round": 3, "history": [{"round": 0}]}

    def outputs(self, final, config, run):
        return {"records": len(final["history"])}


def test_a_log_the_initial_state_already_holds_is_not_doubled(tmp_path, monkeypatch):
    """served_graph takes any task: its append-only logs reach the server's state once, even when the
    initial state already holds records."""
    monkeypatch.setenv(sg.RUNS_ENV, str(tmp_path))
    config = {
        "version": 2,
        "task": "tiny-served",
        "agents": "rule",
        "seed": 0,
        "csv": False,
        "params": {},
        "llm": None,
        "sandbox": None,
        "record": {},
    }
    graph = sg.served_graph(Tiny(), RunConfig.model_validate(config)).copy(update={"checkpointer": InMemorySaver()})
    state = asyncio.run(graph.ainvoke({}, {"configurable": {"thread_id": "t", "run_id": "r"}}))
    assert [h["round"] for h in state["history"]] == [0, 1, 2, 3] and state["summary"]["records"] == 4


class Failing(Tiny):
    """A task whose node breaks in its second round."""

    name = "failing-served"

    def phases(self, config):
        def step(s):
            if s["round"] == 2:
                raise RuntimeError("the node broke")
            return {"round": s["round"] + 1, "history": [{"round": s["round"]}]}

        return {"step": step}


def test_an_unexpected_error_leaves_error_log_and_a_failed_summary(tmp_path, monkeypatch):
    """As cooplab run does: the error reaches the caller, and the run directory says what happened."""
    monkeypatch.setenv(sg.RUNS_ENV, str(tmp_path))
    config = {
        "version": 2,
        "task": "failing-served",
        "agents": "rule",
        "seed": 0,
        "csv": False,
        "params": {},
        "llm": None,
        "sandbox": None,
        "record": {},
    }
    graph = sg.served_graph(Failing(), RunConfig.model_validate(config)).copy(update={"checkpointer": InMemorySaver()})
    with pytest.raises(RuntimeError, match="the node broke"):
        asyncio.run(graph.ainvoke({}, {"configurable": {"thread_id": "t", "run_id": "r"}}))
    out = tmp_path / "failing-served-r"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["message"] == "RuntimeError: the node broke"
    assert summary["records"] == 2  # the last state the run reached: the initial record and round 1's
    assert "the node broke" in (out / "error.log").read_text() and not (out / "checkpoints.sqlite").exists()


def test_a_spent_budget_ends_the_served_run_as_it_ends_cooplab_run(tmp_path, monkeypatch):
    monkeypatch.setenv(sg.ALLOW_PATHS, "1")
    settings = {
        "agents": "llm",
        "model": f"scripted:{SCRIPTED}",
        "seed": 1,
        "budget": 0.02,
        "options": {"n_agents": 3, "rounds": 20},
    }
    state = serve_and_run("cpr", tmp_path / "served", monkeypatch, context=settings)
    ref = cooplab.run(
        task="cpr",
        agents="llm",
        model=f"scripted:{SCRIPTED}",
        seed=1,
        budget=0.02,
        n_agents=3,
        rounds=20,
        cache="off",
        out=tmp_path / "ref",
        quiet=True,
    )
    assert state["summary"]["status"] == "budget_exhausted" and state["summary"]["ledger"]["cost_usd_float"] <= 0.02
    same_summary(state["summary"], ref.out)


def test_a_served_run_computes_money_in_its_own_decimal_context(tmp_path, monkeypatch):
    """The server's (or a notebook's) decimal context of two digits neither rounds the ledger's sums
    of a served run nor is changed by it."""
    import decimal

    monkeypatch.setenv(sg.ALLOW_PATHS, "1")
    settings = {"agents": "llm", "model": f"scripted:{SCRIPTED}", "seed": 4, "options": {"n_agents": 3, "rounds": 2}}
    ref = cooplab.run(
        task="cpr",
        agents="llm",
        model=f"scripted:{SCRIPTED}",
        seed=4,
        n_agents=3,
        rounds=2,
        cache="off",
        out=tmp_path / "ref",
        quiet=True,
    )
    with decimal.localcontext() as mine:
        mine.prec = 2
        state = serve_and_run("cpr", tmp_path / "served", monkeypatch, context=settings)
        assert decimal.getcontext().prec == 2
    assert state["summary"]["ledger"]["calls"] > 0
    same_summary(state["summary"], ref.out)
