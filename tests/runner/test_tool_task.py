"""A tool-using task through the one runner: run_code on the real Docker sandbox from the runner's
sandbox pool, sandbox seconds charged to the run's ledger, and a budget cap reached in the middle of
the tool loop ending the run cleanly (status budget_exhausted) with nothing lost: every charge in
ledger.parquet, the last checkpoint loadable, the trace's tool runs nested under the agent run."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any, TypedDict

import pandas as pd
import pytest
from langchain_core.messages import HumanMessage
from langgraph.graph import END, START, StateGraph
from langsmith.schemas import Run

from cooplab.agents.tools import run_code_tool, tool_agent_node
from cooplab.evals.typed import as_frame, column
from cooplab.graphs.context import CoopContext
from cooplab.graphs.state import AppendLog
from cooplab.graphs.task import RunInfo, Task
from cooplab.graphs.tracing import load_runs
from cooplab.runs import registry, runner
from cooplab.runs.config import RunConfig

USAGE = {"input_tokens": 120, "output_tokens": 12}
# USD per sandbox second: a run_code call reserves its timeout's worth (20 s: $0.00002), then pays what it used
RATE = 1e-6


class TeamState(TypedDict, total=False):
    round: int
    max_round: int
    messages: AppendLog
    tool_loops: AppendLog
    ledger: AppendLog


class AnalystTask(Task):
    name = "analyst-test"
    title = "one analyst with run_code"
    state_schema = TeamState
    agent_kinds = ("llm",)
    uses_sandbox = True

    def build(self, config, *, checkpointer=None):
        g = StateGraph(TeamState, context_schema=CoopContext)
        g.add_node(
            "analyst",
            tool_agent_node(  # pyright: ignore[reportArgumentType] - a (state, config, runtime) node: LangGraph's StateNode protocols do not name it
                "data.lead",
                [run_code_tool()],
                lambda s: [HumanMessage(content="compute 6 x 7")],
                team="data",
                ledger_key="ledger",
            ),
        )
        g.add_edge(START, "analyst")
        g.add_edge("analyst", END)
        return g.compile(checkpointer=checkpointer, name=self.name)

    def init_state(self, config):
        return {"round": 1, "max_round": 1, "messages": [], "tool_loops": [], "ledger": []}

    def total_rounds(self, config):
        return 1

    def outputs(self, final, config, run: RunInfo) -> dict[str, Any]:
        loops = final.get("tool_loops") or []
        return {"stop_reasons": [r["stop_reason"] for r in loops], "answer": loops[-1]["final"] if loops else None}


def runs_of(run_dir: Path) -> list[Run]:
    """The run's traces as LangSmith ``Run`` objects (what a LangSmith-compatible viewer loads)."""
    return [Run(**r) for r in load_runs(run_dir / "traces.jsonl")]


def script(path: Path) -> Path:
    answers = [
        {"tool_calls": [{"name": "run_code", "args": {"code": "x = 6 * 7\nx"}}], "usage": USAGE},
        {"tool_calls": [{"name": "run_code", "args": {"code": "x + 1"}}], "usage": USAGE},
        {"tool_calls": [{"name": "run_code", "args": {"code": "x + 2"}}], "usage": USAGE},
        {"text": "x is 42", "usage": USAGE},
    ]
    path.write_text(json.dumps({"answers": answers, "cycle": False}))
    return path


def config(tmp_path: Path, budget: float | None) -> dict[str, Any]:
    from cooplab.agents.settings import LLMSettings

    llm = LLMSettings(
        model=f"scripted:{script(tmp_path / 's.json')}",
        temperature=0.0,
        max_concurrency=1,
        budget=budget,
        cache=str(tmp_path / "cache.sqlite"),
    ).resolve()
    return {
        "version": 2,
        "agents": "llm",
        "seed": 0,
        "csv": False,
        "params": {},
        "llm": llm.model_dump(mode="json"),
        "sandbox": {"backend": "docker", "timeout": 20.0, "rate": RATE},
        "record": {},
    }


@pytest.fixture
def task(monkeypatch):
    t = AnalystTask()
    monkeypatch.setitem(registry._CACHE, t.name, t)  # as if installed through the entry-point group
    return t


@pytest.mark.docker
def test_a_tool_task_runs_code_in_docker_and_a_budget_cap_mid_loop_ends_it_cleanly(tmp_path, task, docker_ready):
    # 1. uncapped: three run_code calls in the real Docker sandbox, then the final answer
    free = tmp_path / "free"
    free.mkdir()
    s = runner.start(task, free, config(tmp_path, None), quiet=True)
    assert s["status"] == "completed" and s["stop_reasons"] == ["final"] and s["answer"] == "x is 42"
    ledger = pd.read_parquet(free / "ledger.parquet")
    model_calls = ledger[ledger["kind"] == "tokens"]
    seconds = ledger[ledger["kind"] == "sandbox_seconds"]
    assert (
        len(model_calls) == 4
        and len(seconds) == 3
        and bool((seconds["agent_id"] == "data.lead").all())
        and bool((seconds["team"] == "data").all())
    )
    assert all(Decimal(c) > 0 for c in seconds["cost_usd_exact"])  # sandbox time is charged at the run's rate
    tool_msgs = [r for r in runs_of(free) if r.run_type == "tool"]
    assert len(tool_msgs) == 3 and "42" in json.dumps(tool_msgs[0].outputs)

    # 2. the cap: the first model call and its run_code's reservation (timeout x rate, with room) fit;
    #    the second model call does not (its reservation is at least its cost, twice the room left).
    #    A run_code reservation bounds timeout + grace + margin + one sandbox restart (start_timeout): ~145 s.
    call_costs = column(as_frame(model_calls), "cost_usd_exact")
    call_cost = Decimal(str(call_costs.iloc[0]))
    budget = float(call_cost + Decimal(200) * Decimal(str(RATE)) + Decimal(str(call_costs.iloc[1])) / 2)
    capped = tmp_path / "capped"
    capped.mkdir()
    s2 = runner.start(task, capped, config(tmp_path, budget), quiet=True)
    assert s2["status"] == "budget_exhausted" and "budget" in s2["message"]
    assert Decimal(s2["ledger"]["cost_usd"]) <= Decimal(str(budget))
    charged = pd.read_parquet(capped / "ledger.parquet")
    assert list(charged["kind"])[:2] == ["tokens", "sandbox_seconds"]  # nothing charged is missing from the table
    assert sum(Decimal(c) for c in charged["cost_usd_exact"]) == Decimal(s2["ledger"]["cost_usd"])
    # the last checkpoint loads; resuming the finished run as it is would only replay its stop: one line, nothing
    # changed
    values = runner.last_values(task, capped, RunConfig.load(capped))  # the typed configuration, as the runner reads it
    assert values["round"] == 1
    with pytest.raises(runner.runstore.RunDirError, match="raise the budget"):
        runner.resume(capped, quiet=True)
    # with a raised cap it goes on: the stopped loop runs again, its paid calls replayed from the cache
    s3 = runner.resume(capped, quiet=True, budget=budget * 100, notice=lambda line: None)
    assert s3["status"] == "completed" and s3["ledger"]["cached_calls"] >= 1 and s3["answer"] == "x is 42"
    # the trace: the agent's loop is a graph run; its steps are its children, the tool runs theirs
    runs = runs_of(capped)
    by_id = {r.id: r for r in runs}

    def parent(r):
        assert r.parent_run_id is not None, r.name  # a tool run is nested in its loop's tools step
        return by_id[r.parent_run_id]

    agent = [r for r in runs if r.name == "data.lead"]
    tools = [r for r in runs if r.run_type == "tool"]
    assert agent and tools and all(parent(t).name == "tools" for t in tools)
    assert all(parent(t).parent_run_id in {a.id for a in agent} for t in tools)


def test_sandbox_settings_of_a_run_are_checked_on_resume(tmp_path, task):
    from cooplab.limits import ConfigError
    from cooplab.runs.config import check_stored

    good = {"task": task.name, **config(tmp_path, None)}
    sandbox = check_stored(good, "c", task).sandbox
    assert sandbox is not None
    assert sandbox.model_dump() == {"backend": "docker", "timeout": 20.0, "rate": RATE}
    bad = {**good, "sandbox": {"backend": "auto"}}
    with pytest.raises(ConfigError, match="backend must be docker or local"):
        check_stored(bad, "c", task)
    for value in (float("nan"), -1, "30", True):
        with pytest.raises(ConfigError, match="sandbox"):
            check_stored({**good, "sandbox": {"backend": "docker", "timeout": value}}, "c", task)
