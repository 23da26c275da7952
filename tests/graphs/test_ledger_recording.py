"""A node's charges reach the state in one place: ``Ledger.recording`` and the node helpers of
``cooplab.graphs.nodes`` (``charged``, ``llm_node``, ``ledger_node``)."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from types import SimpleNamespace
from typing import TypedDict, cast

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from cooplab.graphs.context import CoopContext
from cooplab.graphs.ledger import Ledger
from cooplab.graphs.nodes import PolicyResult, charged, ledger_node, llm_node
from cooplab.graphs.state import AppendLog


def charge(ledger: Ledger, agent: str, tokens: int = 10):
    return ledger.charge(
        call_id=agent, model="m", agent=agent, round=1, phase="p", input_tokens=tokens, output_tokens=1
    )


def test_a_recording_holds_what_its_block_and_the_tasks_and_threads_it_starts_charge():
    ledger, other = Ledger(), Ledger()

    async def main():
        charge(ledger, "before")
        with ledger.recording() as rows:
            charge(ledger, "in")
            charge(other, "another ledger")
            await asyncio.gather(
                asyncio.create_task(asyncio.sleep(0, charge(ledger, "task"))),
                asyncio.to_thread(charge, ledger, "thread"),
            )
        charge(ledger, "after")
        return rows

    rows = asyncio.run(main())
    assert [e.agent for e in rows] == ["in", "task", "thread"]
    assert [e.agent for e in ledger.entries] == ["before", "in", "task", "thread", "after"]


def test_concurrent_recordings_see_only_their_own_charges_and_nested_ones_see_both():
    ledger = Ledger()

    async def node(name: str, n: int):
        with ledger.recording() as rows:
            for k in range(n):
                charge(ledger, f"{name}{k}")
                await asyncio.sleep(0)  # interleave with the other node
        return rows

    async def main():
        return await asyncio.gather(node("a", 3), node("b", 2))

    a, b = asyncio.run(main())
    assert [e.agent for e in a] == ["a0", "a1", "a2"] and [e.agent for e in b] == ["b0", "b1"]
    with ledger.recording() as outer:
        with ledger.recording() as inner:
            charge(ledger, "x")
        charge(ledger, "y")
    assert [e.agent for e in inner] == ["x"] and [e.agent for e in outer] == ["x", "y"]


def test_a_refused_charge_is_not_recorded():
    ledger = Ledger(budget=Decimal(0))
    with ledger.recording() as rows:
        try:
            charge(ledger, "too much")
        except Exception:  # noqa: BLE001 - BudgetExhausted
            pass
    assert rows == [] and ledger.entries == []


def test_charged_gives_the_rows_of_the_awaited_work_or_none_without_a_ledger():
    ledger = Ledger()

    async def work():
        charge(ledger, "w", 7)
        return "done"

    value, rows = asyncio.run(charged(SimpleNamespace(ledger=ledger), work()))
    assert rows is not None
    assert value == "done" and rows == [ledger.entries[0].as_dict()] and rows[0]["input_tokens"] == 7
    assert asyncio.run(charged(SimpleNamespace(ledger=None), work())) == ("done", None)


def test_llm_and_ledger_nodes_put_exactly_their_charges_in_the_state():
    """Two nodes in a graph: the state's ledger log equals the ledger's entries, and a charge
    made outside any node (e.g. a concurrent judge) is not in it."""
    ledger = Ledger()

    class State(TypedDict, total=False):
        seed: int
        round: int
        value: int
        decisions: AppendLog
        ledger: AppendLog

    async def policy(state, rng, context, config):
        charge(context.ledger, "policy")
        await asyncio.sleep(0)
        charge(context.ledger, "policy")
        return PolicyResult(5, {"decisions": [{"d": 1}]})

    async def tool_node(state, config, runtime: Runtime):
        # the graph's context_schema is CoopContext (ledger_node's type names a bare Runtime)
        context = cast(CoopContext, runtime.context)
        assert context.ledger is not None
        charge(context.ledger, "tool")
        return {"value": state["value"] + 1}

    g = StateGraph(State, context_schema=CoopContext)
    g.add_node("decide", llm_node("harvest", policy, lambda state, value: {"value": value}))
    g.add_node("tools", ledger_node(tool_node))
    g.add_edge(START, "decide")
    g.add_edge("decide", "tools")
    g.add_edge("tools", END)
    graph = g.compile()
    charge(ledger, "outside")
    out = asyncio.run(graph.ainvoke({"seed": 1, "round": 1, "value": 0}, context=CoopContext(ledger=ledger)))
    assert out["value"] == 6 and out["decisions"] == [{"d": 1}]
    assert [r["agent"] for r in out["ledger"]] == ["policy", "policy", "tool"]
    assert out["ledger"] == [e.as_dict() for e in ledger.entries[1:]]
    # the log restores the ledger exactly (as on resume)
    again = Ledger()
    again.restore(out["ledger"])
    assert again.entries == ledger.entries[1:] and again.spent == ledger.spent - Decimal(ledger.entries[0].cost)
