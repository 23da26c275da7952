"""The tool loop as a LangGraph graph: the guards of its conditional edge (a pure function of the
loop's state), the compiled graph's nodes and edges, and whole loops run with a ``scripted:FILE``
model inside a parent graph with a checkpointer: each step a node run of its own, streamed, and
checkpointed under the loop's namespace."""

from __future__ import annotations

import asyncio
import copy
import json
from decimal import Decimal
from pathlib import Path
from typing import TypedDict

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from cooplab.agents.decisions import LLMService
from cooplab.agents.models import make_chat_model, parse_model_spec
from cooplab.agents.tools import (
    Stop,
    ToolAgent,
    ToolLoopLimits,
    loop_result,
    route,
    tool_agent_node,
)
from cooplab.graphs.context import CoopContext
from cooplab.graphs.ledger import BudgetExhausted, Ledger
from cooplab.graphs.state import AppendLog

from ._support import USAGE, Counter, RecordingLedger, call, loop_of, service

LIMITS = ToolLoopLimits(max_steps=4, max_malformed=1)


# --------------------------------------------------------------------------------------------
# the edge: a pure function of the state
def state(**kw):
    s = {
        "messages": [HumanMessage(content="go")],
        "n_prompt": 1,
        "agent_id": "a",
        "team": None,
        "round": None,
        "phase": "tools",
        "model": "scripted:t",
        "protocol": "native",
        "steps": 0,
        "malformed": 0,
        "last": "start",
        "final": None,
        "note": None,
        "last_note": None,
        "tool_calls": [],
        "entries": [],
        "stop_reason": None,
        "stop_detail": "",
    }
    s.update(kw)
    return s


def stopped(s, limits) -> Stop:
    """The edge's decision on ``s``, which must be a stop."""
    r = route(s, limits)
    assert isinstance(r, Stop), r
    return r


def answer(*calls, invalid=(), text=""):
    return AIMessage(
        content=text,
        tool_calls=[{"name": n, "args": a, "id": f"c{i}", "type": "tool_call"} for i, (n, a) in enumerate(calls)],
        invalid_tool_calls=[
            {"name": n, "args": a, "id": f"bad{i}", "error": "no JSON", "type": "invalid_tool_call"}
            for i, (n, a) in enumerate(invalid)
        ],
    )


def answered(name, args, status="success"):
    return {
        "step": 1,
        "id": "x",
        "name": name,
        "args": json.dumps(args, sort_keys=True),
        "status": status,
        "seconds": 0.0,
    }


def spent(cost, tokens, next_cost, next_tokens):
    """The state's ``spending``: spent so far, and the next call's upper bound."""
    return {"cost": str(cost), "tokens": tokens, "next_cost": str(next_cost), "next_tokens": next_tokens}


def test_a_loop_starts_with_a_model_call_and_runs_the_tools_an_answer_asks_for():
    assert route(state(), LIMITS) == "model"
    s = state(messages=[HumanMessage(content="go"), answer(("add", {"a": 1, "b": 2}))], last="answer", steps=1)
    assert route(s, LIMITS) == "tools"
    assert route(state(last="tools", steps=1), LIMITS) == "model"


@pytest.mark.parametrize(
    "protocol, text, final", [("native", "it is 3", "it is 3"), ("json", '{"final": "it is 3"}', "it is 3")]
)
def test_an_answer_without_tool_calls_is_the_final_answer(protocol, text, final):
    s = state(messages=[HumanMessage(content="go"), AIMessage(content=text)], last="answer", steps=1, protocol=protocol)
    r = stopped(s, LIMITS)
    assert r == Stop("final", final=final)
    assert r.update() == {"stop_reason": "final", "stop_detail": "", "final": final}


def test_a_call_repeating_an_answered_call_stops_the_loop_and_none_of_the_answer_runs():
    ai = answer(("add", {"a": 3, "b": 3}), ("add", {"b": 2, "a": 1}))  # the 2nd repeats add(1, 2), arguments reordered
    s = state(
        messages=[HumanMessage(content="go"), ai],
        last="answer",
        steps=2,
        tool_calls=[answered("add", {"a": 1, "b": 2})],
    )
    r = stopped(s, LIMITS)
    assert isinstance(r, Stop) and r.reason == "repeated_call" and r.detail == "add with the same arguments as before"
    results = [m for m in r.messages if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in results] == ["c0", "c1"] and len(results) == len(r.messages)
    assert all(m.status == "error" and "repeats an earlier identical call" in m.content for m in results)
    assert [(t["step"], t["status"]) for t in r.tool_calls] == [(2, "not_run"), (2, "not_run")]
    assert r.update() == {
        "stop_reason": "repeated_call",
        "stop_detail": r.detail,
        "messages": list(r.messages),
        "tool_calls": list(r.tool_calls),
    }


def test_what_counts_as_a_repeat():
    one = answer(("add", {"a": 1, "b": 2}))
    # a call that was refused (not run) before may be asked for again; other arguments are another call
    for records in (
        [answered("add", {"a": 1, "b": 2}, "not_run")],
        [answered("add", {"a": 1, "b": 3})],
        [answered("mul", {"a": 1, "b": 2})],
    ):
        assert route(state(messages=[one], last="answer", steps=1, tool_calls=records), LIMITS) == "tools"
    # a failed call counts (its error was answered); so does the same call twice in one answer, and a repeated
    # unparsable call
    assert (
        stopped(
            state(messages=[one], last="answer", tool_calls=[answered("add", {"a": 1, "b": 2}, "error")]), LIMITS
        ).reason
        == "repeated_call"
    )
    assert (
        stopped(state(messages=[answer(("add", {"a": 1}), ("add", {"a": 1}))], last="answer"), LIMITS).reason
        == "repeated_call"
    )
    bad = answer(invalid=[("add", "{a: 1")])
    assert route(state(messages=[bad], last="answer"), LIMITS) == "tools"
    assert (
        stopped(state(messages=[bad], last="answer", tool_calls=[answered("add", "{a: 1", "error")]), LIMITS).reason
        == "repeated_call"
    )


def test_a_finishing_tool_ends_the_loop_before_any_other_guard():
    s = state(last="tools", final="the report is written", steps=LIMITS.max_steps)
    assert route(s, LIMITS) == Stop("completed", "a finishing tool succeeded")


@pytest.mark.parametrize("malformed, expected", [(1, "model"), (2, "malformed")])
def test_malformed_answers_are_retried_up_to_their_limit(malformed, expected):
    r = route(state(last="malformed", malformed=malformed, steps=malformed), LIMITS)
    assert (r if isinstance(r, str) else r.reason) == expected
    if expected == "malformed":
        assert isinstance(r, Stop) and r.detail == "2 malformed answers (limit 1)"


@pytest.mark.parametrize("last", ["tools", "malformed"])
def test_the_step_cap_comes_before_the_credit_cap(last):
    capped = ToolLoopLimits(max_steps=4, max_cost=Decimal("0.001"), max_malformed=9)
    over = spent(1, 0, 1, 0)
    assert route(state(last=last, steps=4, malformed=1, spending=over), capped) == Stop("step_cap", "4 model calls")
    assert stopped(state(last=last, steps=3, malformed=1, spending=over), capped).reason == "credit_cap"
    assert route(state(last=last, steps=3, malformed=1, spending=spent(0, 0, 0, 0)), capped) == "model"


def test_the_credit_cap_compares_what_was_spent_plus_the_next_calls_bound_with_the_cap():
    by_cost = ToolLoopLimits(max_cost=Decimal("1.0"))
    assert (
        route(state(last="tools", steps=1, spending=spent("0.5", 10, "0.5", 10)), by_cost) == "model"
    )  # = the cap: fits
    r = stopped(state(last="tools", steps=1, spending=spent("0.5", 10, "0.51", 10)), by_cost)
    assert r.reason == "credit_cap" and r.detail == "spent $0.5 of $1.0; the next call may cost up to $0.51"
    by_tokens = ToolLoopLimits(max_tokens=100)
    assert route(state(spending=spent(9, 0, 9, 100)), by_tokens) == "model"
    r = stopped(state(spending=spent(0, 1, 0, 100)), by_tokens)
    assert r.reason == "credit_cap" and r.detail == "used 1 of 100 tokens; the next call may use up to 100"
    # without a cap the spending is not looked at; with one it must be there
    assert route(state(last="tools", steps=1, spending=spent(9, 9, 9, 9)), ToolLoopLimits()) == "model"
    with pytest.raises(ValueError, match="spending"):
        route(state(last="tools", steps=1), by_cost)


def test_a_note_due_before_the_refused_call_is_kept_with_the_stop():
    cap = ToolLoopLimits(max_cost=Decimal("0.1"))
    over = spent("0.1", 0, "0.01", 0)
    assert [m.content for m in stopped(state(note="20 % of the budget left", spending=over), cap).messages] == [
        "20 % of the budget left"
    ]
    assert stopped(state(note="20 % left", last_note="20 % left", spending=over), cap).messages == ()  # already said


def test_the_edge_never_changes_the_state():
    s = state(
        messages=[HumanMessage(content="go"), answer(("add", {"a": 1}), ("add", {"a": 1}))],
        last="answer",
        steps=1,
        tool_calls=[answered("add", {"a": 2})],
    )
    before = copy.deepcopy(s)
    route(s, LIMITS)
    assert s == before


# --------------------------------------------------------------------------------------------
# the compiled graph
def test_the_compiled_graph_is_a_model_node_a_tools_node_and_the_guarded_edges():
    agent = ToolAgent("data.lead", Counter().tools)
    g = agent.graph.get_graph()
    assert agent.graph.name == "data.lead"
    assert set(g.nodes) == {"__start__", "model", "tools", "finish", "__end__"}
    assert {(e.source, e.target, e.conditional) for e in g.edges} == {
        ("__start__", "model", True),
        ("__start__", "finish", True),
        ("model", "model", True),
        ("model", "tools", True),
        ("model", "finish", True),
        ("tools", "model", True),
        ("tools", "finish", True),
        ("finish", "__end__", False),
    }


# --------------------------------------------------------------------------------------------
# whole loops, inside a parent graph with a checkpointer
class Parent(TypedDict, total=False):
    round: int
    messages: AppendLog
    tool_loops: AppendLog


def scripted(tmp_path: Path, answers: list, ledger: Ledger | None = None) -> LLMService:
    """A model service whose model is ``scripted:FILE``, the file holding ``answers`` in order."""
    path = tmp_path / "model.json"
    path.write_text(json.dumps({"answers": answers, "cycle": False}))
    spec = parse_model_spec(f"scripted:{path}")
    return LLMService(models={"default": (spec, make_chat_model(spec))}, ledger=ledger or Ledger())


def parent_graph(tools, limits: ToolLoopLimits, saver):
    g = StateGraph(Parent, context_schema=CoopContext)
    node = tool_agent_node("a", tools, lambda s: [HumanMessage(content="add numbers")], limits=limits)
    g.add_node("agent", node)  # pyright: ignore[reportArgumentType]  # LangGraph passes (state, config, runtime); its StateNode protocols do not name that form
    g.add_edge(START, "agent")
    g.add_edge("agent", END)
    return g.compile(checkpointer=saver)


def run_streamed(graph, svc, thread="t"):
    """Run the parent graph to its end; the loop's steps as (namespace, node) in stream order, and the output."""

    async def go():
        steps, out = [], None
        cfg = {
            "configurable": {"thread_id": thread},
            "recursion_limit": 5,
        }  # the parent's own: 2 steps; the loop has its own
        async for ns, upd in graph.astream(
            {"round": 1}, cfg, context=CoopContext(llm=svc), stream_mode="updates", subgraphs=True
        ):
            if ns:
                steps += [(ns, node) for node in upd]
        out = (await graph.aget_state(cfg)).values
        return steps, out

    return asyncio.run(go())


def loop_checkpoints(saver: InMemorySaver, thread="t") -> dict[str, list]:
    """The thread's checkpoints of graphs below the root (namespace -> checkpoints, oldest first)."""
    out: dict[str, list] = {}
    for c in reversed(list(saver.list({"configurable": {"thread_id": thread}}))):
        ns = c.config.get("configurable", {})["checkpoint_ns"]
        if ns:
            out.setdefault(ns, []).append(c)
    return out


def test_a_loop_runs_model_tools_model_and_ends_each_step_a_checkpointed_node_run(tmp_path):
    c = Counter()
    svc = scripted(tmp_path, [call("add", USAGE, a=2, b=3), {"text": "it is 5", "usage": USAGE}])
    saver = InMemorySaver()
    steps, out = run_streamed(parent_graph(c.tools, ToolLoopLimits(), saver), svc)
    assert [node for _, node in steps] == ["model", "tools", "model", "finish"]
    (ns,) = {ns for ns, _ in steps}  # one loop: its own namespace below the node's
    assert len(ns) == 2 and ns[0].startswith("agent:") and ns[1].startswith("a:")
    (rec,) = out["tool_loops"]
    assert (
        rec["stop_reason"] == "final" and rec["final"] == "it is 5" and rec["steps"] == 2 and c.calls == [("add", 2, 3)]
    )

    # the parent's checkpointer holds every step of the loop, under the loop's namespace
    (saved,) = loop_checkpoints(saver).values()
    assert saved[0].config["configurable"]["checkpoint_ns"] == "|".join(ns)
    assert [(cp.metadata["source"], cp.checkpoint["channel_values"].get("last")) for cp in saved] == [
        ("input", None),
        ("loop", "start"),
        ("loop", "answer"),
        ("loop", "tools"),
        ("loop", "answer"),
        ("loop", "answer"),
    ]
    assert [cp.checkpoint["channel_values"].get("steps") for cp in saved[1:]] == [0, 1, 1, 2, 2]
    assert saved[-1].checkpoint["channel_values"]["stop_reason"] == "final"
    # and the last checkpoint is the whole loop: its state gives the record the node returned
    agent = ToolAgent("a", c.tools)
    st = agent.graph.builder.compile(checkpointer=saver).get_state(
        {"configurable": {"thread_id": "t", "checkpoint_ns": "|".join(ns)}}
    )
    assert st.next == () and loop_result(st.values).record() == rec
    assert [type(m).__name__ for m in st.values["messages"]] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
    ]


@pytest.mark.parametrize("max_steps", [1, 30])  # 30 calls: 61 graph steps, more than the parent graph's recursion limit
def test_the_step_cap_stops_the_loop_after_the_last_calls_tools(tmp_path, max_steps):
    c = Counter()
    svc = scripted(tmp_path, [call("add", a=i, b=0) for i in range(max_steps + 5)])
    steps, out = run_streamed(parent_graph(c.tools, ToolLoopLimits(max_steps=max_steps), InMemorySaver()), svc)
    assert [node for _, node in steps] == ["model", "tools"] * max_steps + ["finish"]
    (rec,) = out["tool_loops"]
    assert (
        rec["stop_reason"] == "step_cap" and rec["steps"] == max_steps == len(c.calls) and svc.live_calls == max_steps
    )


def test_the_repeated_call_stop(tmp_path):
    c = Counter()
    svc = scripted(tmp_path, [call("add", a=1, b=2), call("add", b=2, a=1), "never asked"])
    steps, out = run_streamed(parent_graph(c.tools, ToolLoopLimits(max_steps=9), InMemorySaver()), svc)
    assert [node for _, node in steps] == ["model", "tools", "model", "finish"]
    (rec,) = out["tool_loops"]
    assert rec["stop_reason"] == "repeated_call" and c.calls == [("add", 1, 2)] and svc.live_calls == 2
    assert [t["status"] for t in rec["tool_calls"]] == ["success", "not_run"]
    assert (
        isinstance(out["messages"][-1], ToolMessage)
        and "repeats an earlier identical call" in out["messages"][-1].content
    )


def test_the_credit_cap_stops_the_loop_before_a_call_that_could_pass_it(tmp_path):
    answers = [call("add", USAGE, a=i, b=0) for i in range(5)]
    recording = RecordingLedger()  # every call's bound (its reservation) and cost
    probe = scripted(tmp_path, answers, recording)
    run_streamed(parent_graph(Counter().tools, ToolLoopLimits(max_steps=3), InMemorySaver()), probe)
    cost_1, bound_2 = Decimal(recording.entries[0].cost), recording.reservations[1]
    c = Counter()
    svc = scripted(tmp_path, answers)
    cap = cost_1 + bound_2 - Decimal("0.000000001")  # the first call fits, the second's bound does not
    steps, out = run_streamed(parent_graph(c.tools, ToolLoopLimits(max_steps=9, max_cost=cap), InMemorySaver()), svc)
    assert [node for _, node in steps] == ["model", "tools", "finish"]
    (rec,) = out["tool_loops"]
    assert (
        rec["stop_reason"] == "credit_cap"
        and rec["steps"] == 1 == svc.live_calls
        and Decimal(rec["cost"]) == cost_1 <= cap
    )
    # a cap below the first call's bound: the loop ends before its first model call
    steps, out = run_streamed(
        parent_graph(c.tools, ToolLoopLimits(max_cost=bound_2 / 10), InMemorySaver()), scripted(tmp_path, answers)
    )
    assert [node for _, node in steps] == ["finish"] and out["tool_loops"][0]["steps"] == 0


def test_a_node_run_again_starts_its_loop_afresh_under_a_new_namespace(tmp_path):
    """A run-ending error in the middle of a loop, then the run resumed: the loop is redone from its
    first step (its tools run again; the sandbox sessions and the ledger are not in checkpoints),
    not continued from the interrupted loop's last checkpoint, which stays where it was."""
    fail = {"on": True}

    @tool
    def charge(x: int) -> str:
        """Charges something; the first time, the budget is gone."""
        if fail["on"]:
            fail["on"] = False
            raise BudgetExhausted("no room")
        return "charged"

    c = Counter()
    svc = scripted(
        tmp_path, [call("add", a=1, b=1), call("charge", x=1), call("add", a=1, b=1), call("charge", x=1), "done"]
    )
    saver = InMemorySaver()
    graph = parent_graph([c.add, charge], ToolLoopLimits(max_steps=9), saver)
    cfg: RunnableConfig = {"configurable": {"thread_id": "t"}}
    with pytest.raises(BudgetExhausted) as ei:
        asyncio.run(graph.ainvoke({"round": 1}, cfg, context=CoopContext(llm=svc)))
    assert loop_of(ei.value).steps == 2 and [t["name"] for t in loop_of(ei.value).tool_calls] == ["add"]
    ((first_ns, first),) = loop_checkpoints(saver).items()
    out = asyncio.run(graph.ainvoke(None, cfg, context=CoopContext(llm=svc)))
    assert out["tool_loops"][0]["stop_reason"] == "final" and out["tool_loops"][0]["steps"] == 3
    assert c.calls == [("add", 1, 1), ("add", 1, 1)]  # add ran again: the loop started over
    after = loop_checkpoints(saver)
    old = after.pop(first_ns)
    (new,) = after.values()
    assert [cp.checkpoint["id"] for cp in old] == [cp.checkpoint["id"] for cp in first]  # untouched
    assert (
        first[-1].checkpoint["channel_values"]["steps"] == 2
        and new[-1].checkpoint["channel_values"]["stop_reason"] == "final"
    )


def test_concurrent_loops_of_one_node_keep_their_own_checkpoints(tmp_path):
    """As the science teams' members work: loops run at once in one node. An agent id holding the
    namespace's separators does not break it."""
    svc = service(per_agent={"x": [call("add", a=1, b=1), "two"], "y|z:1": [call("add", a=2, b=2), "four"]})
    c = Counter()
    agents = [ToolAgent(a, c.tools) for a in ("x", "y|z:1")]

    async def both(state, config, runtime):
        res = await asyncio.gather(
            *(a.arun([HumanMessage(content="add")], context=runtime.context, config=config) for a in agents)
        )
        return {"tool_loops": [r.record() for r in res]}

    g = StateGraph(Parent, context_schema=CoopContext)
    g.add_node("team", both)  # pyright: ignore[reportArgumentType]  # LangGraph passes (state, config, runtime); its StateNode protocols do not name that form
    g.add_edge(START, "team")
    g.add_edge("team", END)
    saver = InMemorySaver()
    out = asyncio.run(
        g.compile(checkpointer=saver).ainvoke(
            {"round": 1}, {"configurable": {"thread_id": "t"}}, context=CoopContext(llm=svc)
        )
    )
    assert [r["final"] for r in out["tool_loops"]] == ["two", "four"]
    names = sorted(ns.split("|")[1].split(":")[0] for ns in loop_checkpoints(saver))
    assert names == ["x", "y_z_1"] and sorted(c.calls) == [("add", 1, 1), ("add", 2, 2)]
