"""A budget cap reached in the middle of a tool loop inside a compiled LangGraph graph with a SQLite
checkpointer: the run ends with BudgetExhausted, spending never passes the cap, nothing recorded
before it is lost, the last checkpoint loads and the run resumes; its trace loads as LangSmith runs
with the tool runs nested under the agent's run (in its ``tools`` steps)."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from typing import TypedDict
from uuid import UUID

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph
from langsmith.schemas import Run

from cooplab.agents.cache import ResponseCache
from cooplab.agents.models.scripted import ScriptedChatModel
from cooplab.agents.tools import ToolLoopLimits, tool_agent_node
from cooplab.graphs.context import CoopContext
from cooplab.graphs.ledger import BudgetExhausted, Ledger
from cooplab.graphs.state import AppendLog
from cooplab.graphs.tracing import load_runs, tracing_callbacks

from ._support import USAGE, Counter, RecordingLedger, call, loop_of, service


class TeamState(TypedDict, total=False):
    round: int
    messages: AppendLog
    tool_loops: AppendLog
    ledger: AppendLog


A_SCRIPT = [
    call("add", usage=USAGE, a=1, b=2),
    call("add", usage=USAGE, a=3, b=4),
    {"text": "a is done", "usage": USAGE},
]
B_SCRIPT = [
    call("add", USAGE, "b1", a=10, b=1),
    call("add", USAGE, "b2", a=10, b=2),
    call("add", USAGE, "b3", a=10, b=3),
    {"text": "b is done", "usage": USAGE},
]
LIMITS = ToolLoopLimits(max_steps=10)
TeamGraph = StateGraph[TeamState, CoopContext, TeamState, TeamState]


def build(counter: Counter) -> TeamGraph:
    g = StateGraph(TeamState, context_schema=CoopContext)
    g.add_node(
        "modeling",
        tool_agent_node(  # pyright: ignore[reportArgumentType]  # LangGraph passes (state, config, runtime); StateNode does not name that form
            "modeling.lead",
            counter.tools,
            lambda s: [HumanMessage(content="fit the model")],
            team="modeling",
            limits=LIMITS,
            ledger_key="ledger",
        ),
    )
    g.add_node(
        "data",
        tool_agent_node(  # pyright: ignore[reportArgumentType]  # LangGraph passes (state, config, runtime); StateNode does not name that form
            "data.lead",
            counter.tools,
            lambda s: [HumanMessage(content="clean the data")],
            team="data",
            limits=LIMITS,
            ledger_key="ledger",
        ),
    )
    g.add_edge(START, "modeling")
    g.add_edge("modeling", "data")
    g.add_edge("data", END)
    return g


def team_service(ledger: Ledger, cache: ResponseCache | None = None):
    return service(per_agent={"modeling.lead": A_SCRIPT, "data.lead": B_SCRIPT}, ledger=ledger, cache=cache)


async def _run(g: TeamGraph, db, svc, cfg, inp):
    async with AsyncSqliteSaver.from_conn_string(str(db)) as saver:
        graph = g.compile(checkpointer=saver)
        return await graph.ainvoke(inp, cfg, context=CoopContext(llm=svc), durability="sync")


async def _state(g: TeamGraph, db, thread: str):
    async with AsyncSqliteSaver.from_conn_string(str(db)) as saver:  # a fresh connection: what a new process sees
        return await g.compile(checkpointer=saver).aget_state({"configurable": {"thread_id": thread}})


def test_a_budget_cap_mid_loop_ends_the_run_cleanly_with_nothing_lost(tmp_path):
    # 1. an uncapped run tells us every call's reservation (upper bound) and cost
    free = RecordingLedger()
    out = asyncio.run(
        _run(
            build(Counter()),
            tmp_path / "free.sqlite",
            team_service(free),
            {"configurable": {"thread_id": "f"}},
            {"round": 1},
        )
    )
    assert [r["stop_reason"] for r in out["tool_loops"]] == ["final", "final"] and len(free.entries) == 7
    costs = [Decimal(e.cost) for e in free.entries]
    # the cap: modeling's 3 calls and data's first 2 fit, the upper bound of data's 3rd call does not
    cap = sum(costs[:5]) + free.reservations[5] - Decimal("0.000000001")
    assert all(sum(costs[:k]) + free.reservations[k] <= cap for k in range(5))

    # 2. the capped run, traced, checkpointed in SQLite
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    db = tmp_path / "checkpoints.sqlite"
    cache = ResponseCache(tmp_path / "cache.sqlite")
    ledger = RecordingLedger(budget=cap)
    svc = team_service(ledger, cache)
    counter = Counter()
    cfg = {"configurable": {"thread_id": "t"}, "callbacks": tracing_callbacks(run_dir)}
    with pytest.raises(BudgetExhausted) as ei:
        asyncio.run(_run(build(counter), db, svc, cfg, {"round": 1}))

    # spending never passed the cap, nothing is left in flight, the refused call was never made
    assert ledger.spent <= cap and ledger.peak <= cap and ledger.in_flight == 0
    assert ledger.spent == sum(Decimal(e.cost) for e in ledger.entries) == sum(costs[:5])
    assert svc.live_calls == 5
    assert counter.calls == [("add", 1, 2), ("add", 3, 4), ("add", 10, 1), ("add", 10, 2)]
    partial = loop_of(ei.value)  # the interrupted loop: 2 calls, 2 tool results
    assert partial.agent_id == "data.lead" and partial.steps == 2 and len(partial.tool_calls) == 2
    assert [type(m).__name__ for m in partial.messages] == ["AIMessage", "ToolMessage"] * 2

    # the last checkpoint loads (fresh connection): modeling's loop is in it, data's node is next
    st = asyncio.run(_state(build(Counter()), db, "t"))
    assert st.next == ("data",)
    assert [r["agent"] for r in st.values["tool_loops"]] == ["modeling.lead"]
    assert isinstance(st.values["messages"][1], AIMessage) and isinstance(st.values["messages"][2], ToolMessage)
    assert len(st.values["messages"]) == 1 + 5
    # nothing lost: the checkpointed audit trail plus the interrupted loop's charges = the whole ledger
    kept = st.values["ledger"] + [e.as_dict() for e in partial.entries]
    assert kept == [e.as_dict() for e in ledger.entries]
    assert {r["team"] for r in st.values["ledger"]} == {"modeling"} and {e.team for e in partial.entries} == {"data"}

    # 3. resume with a larger budget: the ledger restored from the checkpoint, data's loop redone,
    # its first two calls replayed from the cache (and charged again), the rest live
    ledger2 = Ledger(budget=Decimal("1"))
    ledger2.restore(st.values["ledger"])
    svc2 = team_service(ledger2, cache)
    scripted = svc2.models["data.lead"][1]
    assert isinstance(scripted, ScriptedChatModel)
    scripted._counters["*"] = 2  # the script resumes where the model left off
    final = asyncio.run(_run(build(Counter()), db, svc2, {"configurable": {"thread_id": "t"}}, None))
    assert [r["stop_reason"] for r in final["tool_loops"]] == ["final", "final"]
    assert [r["cached_calls"] for r in final["tool_loops"]] == [0, 2]
    assert ledger2.spent == free.spent and len(ledger2.entries) == 7
    assert [(e.agent, e.call_id, e.cost) for e in ledger2.entries] == [
        (e.agent, e.call_id, e.cost) for e in free.entries
    ]
    assert final["ledger"] == [e.as_dict() for e in ledger2.entries]

    # 4. the trace of the capped run: LangSmith runs, the tools nested under their agent's run (in its steps)
    runs = load_runs(run_dir, validate=True)
    parsed = [Run(**r) for r in runs]
    by_id: dict[UUID | None, Run] = {r.id: r for r in parsed}  # looked up by parent ids, which may be None
    root = next(r for r in parsed if r.parent_run_id is None)
    assert root.error and "BudgetExhausted" in root.error
    agents = {r.name: r for r in parsed if r.run_type == "chain" and r.name in ("modeling.lead", "data.lead")}
    assert set(agents) == {"modeling.lead", "data.lead"}
    assert by_id[agents["data.lead"].parent_run_id].name == "data"  # the agent's run is inside its graph node
    assert (
        agents["data.lead"].error
        and "BudgetExhausted" in agents["data.lead"].error
        and not agents["modeling.lead"].error
    )
    # each step of a loop is a node run of the agent's run: model calls under "model", tool calls under "tools"
    steps = {
        name: sorted((r for r in parsed if r.parent_run_id == a.id), key=lambda r: r.start_time)
        for name, a in agents.items()
    }
    assert [r.name for r in steps["modeling.lead"]] == [
        "__start__",
        "model",
        "tools",
        "model",
        "tools",
        "model",
        "finish",
    ]
    assert [r.name for r in steps["data.lead"]] == ["__start__", "model", "tools", "model", "tools", "model"]
    assert "BudgetExhausted" in (steps["data.lead"][-1].error or "")  # the step whose call was refused
    for name, n_tools, n_llm in (("modeling.lead", 2, 3), ("data.lead", 2, 2)):
        kind_of: dict[UUID | None, str] = {r.id: r.name for r in steps[name]}
        tools = [r for r in parsed if r.run_type == "tool" and kind_of.get(r.parent_run_id) == "tools"]
        llms = [r for r in parsed if r.run_type == "llm" and kind_of.get(r.parent_run_id) == "model"]
        assert len(tools) == n_tools and all(t.name == "add" and t.trace_id == root.id for t in tools)
        assert len(llms) == n_llm  # the refused call left no llm run: it was never made
    assert not [
        r for r in parsed if r.run_type == "tool" and by_id[by_id[r.parent_run_id].parent_run_id].name not in agents
    ]
    data_tools = sorted(
        (r for r in parsed if r.run_type == "tool" and by_id[r.parent_run_id].parent_run_id == agents["data.lead"].id),
        key=lambda r: r.start_time,
    )
    assert [t.outputs for t in data_tools] and "11" in str(data_tools[0].outputs)
