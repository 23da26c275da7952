"""The bounded tool loop with scripted models: stop reasons, guards, tool errors, charging."""

from __future__ import annotations

import asyncio
import json
from decimal import Decimal
from typing import Annotated, TypedDict

import pytest
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from cooplab.agents.cache import ResponseCache
from cooplab.agents.decisions import ModelUnavailable
from cooplab.agents.models import EndpointResponseError, ScriptedChatModel
from cooplab.agents.models.openai_compat import checked_completion
from cooplab.agents.tools import (
    ToolAgent,
    ToolLoopLimits,
    ToolSetupError,
    run_tool_loop,
    tool_agent_node,
)
from cooplab.graphs.context import CoopContext
from cooplab.graphs.ledger import BudgetExhausted, Ledger
from cooplab.graphs.state import AppendLog

from ._support import (
    COST_PER_CALL,
    USAGE,
    Counter,
    RecordingLedger,
    call,
    loop_of,
    quoting_final,
    service,
)


class S(TypedDict, total=False):
    round: int
    messages: AppendLog
    tool_loops: AppendLog
    ledger: AppendLog


class SM(TypedDict, total=False):
    round: int
    messages: Annotated[list[AnyMessage], add_messages]
    tool_loops: AppendLog
    ledger: AppendLog


PROMPT = [SystemMessage(content="You are the data lead."), HumanMessage(content="Add 2 and 3.")]


def run(agent: ToolAgent, svc, **kw):
    return asyncio.run(agent.arun(PROMPT, context=CoopContext(llm=svc), **kw))


def assert_well_formed(messages):
    """Every tool call of an AIMessage is answered by exactly one ToolMessage, in order."""
    pending: list[str | None] = []
    for m in messages:
        if isinstance(m, AIMessage):
            assert not pending, f"unanswered tool calls {pending}"
            pending = [c["id"] for c in m.tool_calls] + [c["id"] for c in m.invalid_tool_calls]
        elif isinstance(m, ToolMessage):
            assert m.tool_call_id == pending.pop(0)
    assert not pending


def test_a_tool_result_goes_back_to_the_model_and_the_loop_ends_with_its_final_answer():
    c = Counter()
    svc = service([call("add", a=2, b=3), quoting_final("The sum is")])
    res = run(ToolAgent("data.lead", c.tools, team="data"), svc, round=4)
    assert res.stop_reason == "final" and res.final == "The sum is 5"
    assert c.calls == [("add", 2, 3)] and res.steps == 2 and svc.live_calls == 2
    assert [type(m).__name__ for m in res.messages] == ["AIMessage", "ToolMessage", "AIMessage"]
    assert_well_formed(res.messages)
    # every call charged to the agent, with its team and round
    assert [(e.agent, e.team, e.round, e.kind) for e in svc.ledger.entries] == [("data.lead", "data", 4, "tokens")] * 2
    assert res.cost == svc.ledger.spent == sum(Decimal(e.cost) for e in svc.ledger.entries) > 0
    rec = res.record()
    assert (
        rec["stop_reason"] == "final"
        and rec["steps"] == 2
        and rec["n_tool_calls"] == 1
        and rec["tool_calls"][0]["status"] == "success"
    )
    json.dumps(rec)  # a plain row


def test_the_repeated_call_guard_stops_the_loop_instead_of_spinning():
    c = Counter()
    # the model would call add(1, 2) for ever; the 2nd identical call is not run
    svc = service([call("add", a=1, b=2), call("add", a=2, b=1), call("add", b=2, a=1)] + [call("add", a=1, b=2)] * 20)
    res = run(ToolAgent("a", c.tools, limits=ToolLoopLimits(max_steps=50)), svc)
    assert res.stop_reason == "repeated_call" and "add" in res.stop_detail
    assert c.calls == [("add", 1, 2), ("add", 2, 1)]  # the repeat (arguments in another order) never ran
    assert res.steps == 3 and svc.live_calls == 3  # no model call after the repeat
    assert res.final is None
    last = res.messages[-1]
    assert (
        isinstance(last, ToolMessage) and last.status == "error" and "repeats an earlier identical call" in last.content
    )
    assert_well_formed(res.messages)
    assert [t["status"] for t in res.tool_calls] == ["success", "success", "not_run"]


def test_two_identical_calls_in_one_answer_are_a_repeat():
    c = Counter()
    svc = service(
        [{"tool_calls": [{"name": "add", "args": {"a": 1, "b": 1}}, {"name": "add", "args": {"a": 1, "b": 1}}]}]
    )
    res = run(ToolAgent("a", c.tools), svc)
    assert res.stop_reason == "repeated_call" and c.calls == []
    assert_well_formed(res.messages)


def test_the_step_cap_bounds_the_model_calls():
    c = Counter()
    svc = service([call("add", a=i, b=i) for i in range(100)])  # never gives a final answer, never repeats
    res = run(ToolAgent("a", c.tools, limits=ToolLoopLimits(max_steps=3)), svc)
    assert res.stop_reason == "step_cap" and res.final is None
    assert res.steps == 3 and svc.live_calls == 3 and len(svc.ledger.entries) == 3
    assert c.calls == [("add", 0, 0), ("add", 1, 1), ("add", 2, 2)]  # the last call's tools ran: well formed
    assert_well_formed(res.messages)


def test_tool_errors_bad_arguments_and_unknown_tools_are_answered_to_the_model_and_the_loop_goes_on():
    c = Counter()
    seen = {}

    def check_errors(messages):
        seen["errors"] = [m for m in messages if isinstance(m, ToolMessage)]
        return "I saw the errors"

    svc = service(
        [
            {"tool_calls": [{"name": "explode", "args": {"what": "the dataset"}}]},
            call("add", a="not a number", b=1),
            call("no_such_tool", x=1),
            {"invalid_tool_calls": [{"name": "add", "args": "{a: 1", "error": "Expecting property name"}]},
            check_errors,
        ]
    )
    res = run(ToolAgent("a", c.tools), svc)
    assert res.stop_reason == "final" and res.final == "I saw the errors" and res.steps == 5
    errors = seen["errors"]
    assert len(errors) == 4 and all(m.status == "error" for m in errors)
    assert "RuntimeError: boom: the dataset" in errors[0].content
    assert "add" in errors[1].content and "valid integer" in errors[1].content
    assert "no_such_tool is not a valid tool" in errors[2].content and "add, explode" in errors[2].content
    assert "could not be parsed" in errors[3].content and "Expecting property name" in errors[3].content
    assert c.calls == [("explode", "the dataset")]  # bad arguments never reach the tool
    assert [t["status"] for t in res.tool_calls] == ["error", "error", "error", "error"]
    assert_well_formed(res.messages)


@pytest.mark.parametrize("fatal", [BudgetExhausted("no room for the sandbox"), ModelUnavailable("gone")])
def test_budget_and_model_failures_inside_a_tool_propagate_with_the_partial_loop(fatal):
    @tool
    def spend(x: int) -> str:
        """Raises a run-ending error."""
        raise fatal

    c = Counter()
    svc = service([call("add", a=1, b=1), call("spend", x=1), "never"])
    with pytest.raises(type(fatal)) as ei:
        run(ToolAgent("a", [c.add, spend]), svc)
    part = loop_of(ei.value)
    assert part.steps == 2 and part.stop_reason is None and [t["name"] for t in part.tool_calls] == ["add"]
    assert len(part.entries) == 2 and part.cost == svc.ledger.spent


def test_the_credit_cap_is_checked_with_the_next_calls_bound_before_the_call():
    c = Counter()
    answers = [call("add", usage=USAGE, a=i, b=0) for i in range(10)]
    recording = RecordingLedger()
    probe = service(answers, ledger=recording)
    run(ToolAgent("a", c.tools, limits=ToolLoopLimits(max_steps=3)), probe)
    r = recording.reservations  # the upper bounds of the first three calls (they grow with the history)
    costs = [Decimal(e.cost) for e in probe.ledger.entries]
    assert costs == [COST_PER_CALL] * 3 and r[0] < r[1] < r[2]
    cap = costs[0] + costs[1] + r[2] - Decimal("0.000000001")  # two calls fit; the third's bound does not
    svc = service(answers)
    res = run(ToolAgent("a", c.tools, limits=ToolLoopLimits(max_steps=10, max_cost=cap)), svc)
    assert res.stop_reason == "credit_cap" and "next call may cost up to" in res.stop_detail
    assert res.steps == 2 and svc.live_calls == 2 and res.cost == 2 * COST_PER_CALL <= cap
    assert_well_formed(res.messages)


def test_the_token_cap_and_the_run_wide_scope():
    c = Counter()
    answers = [call("add", usage=USAGE, a=i, b=0) for i in range(40)]
    svc = service(answers)
    lim = ToolLoopLimits(max_steps=20, max_tokens=1500)
    res = run(ToolAgent("a", c.tools, limits=lim), svc)
    assert res.stop_reason == "credit_cap" and "tokens" in res.stop_detail and res.tokens <= 1500 and res.steps >= 2
    # scope "run": what the agent spent before counts; a second loop of the same agent stops at once
    res2 = run(
        ToolAgent("a", c.tools, limits=ToolLoopLimits(max_steps=20, max_tokens=res.tokens + 1, cap_scope="run")), svc
    )
    assert res2.stop_reason == "credit_cap" and res2.steps == 0
    assert svc.ledger.agent_spent("a")[1] == res.tokens


def test_the_global_budget_stops_the_loop_before_a_call_that_does_not_fit():
    c = Counter()
    svc = service([call("add", usage=USAGE, a=i, b=0) for i in range(10)], budget=Decimal("0.0006"))
    with pytest.raises(BudgetExhausted) as ei:
        run(ToolAgent("a", c.tools, limits=ToolLoopLimits(max_steps=10)), svc)
    part = loop_of(ei.value)
    assert part.steps >= 1 and svc.ledger.spent <= Decimal("0.0006") and svc.ledger.in_flight == 0
    assert svc.live_calls == part.steps  # the refused call was never made
    assert len(c.calls) == part.steps  # the tools of every completed call ran


def test_cached_replays_are_charged_again_and_give_the_same_loop(tmp_path):
    db = tmp_path / "cache.sqlite"
    answers = [call("add", usage=USAGE, a=2, b=3), {"text": "five", "usage": USAGE}]
    c1, c2 = Counter(), Counter()
    svc1 = service(answers, cache=ResponseCache(db))
    r1 = run(ToolAgent("a", c1.tools), svc1, round=1)
    svc2 = service([], cache=ResponseCache(db))  # a model with no answers: everything must come from the cache
    r2 = run(ToolAgent("a", c2.tools), svc2, round=1)
    assert svc2.live_calls == 0 and r2.cached_calls == 2 and all(e.cached for e in svc2.ledger.entries)
    assert r2.final == r1.final == "five" and c2.calls == c1.calls == [("add", 2, 3)]  # tools run again
    assert svc2.ledger.spent == svc1.ledger.spent == 2 * COST_PER_CALL
    assert [m.content for m in r2.messages] == [m.content for m in r1.messages]
    # and a replay must fit the budget too
    svc3 = service([], cache=ResponseCache(db), budget=COST_PER_CALL + Decimal("0.00001"))
    with pytest.raises(BudgetExhausted):
        run(ToolAgent("a", c2.tools), svc3, round=1)
    assert svc3.ledger.spent == COST_PER_CALL


def test_the_native_path_binds_the_tools_and_counts_them_in_the_reservation():
    seen = {}

    class Spy(ScriptedChatModel):
        async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
            seen.setdefault("tools", kwargs.get("tools"))
            return await super()._agenerate(messages, stop, run_manager, **kwargs)

    c = Counter()
    ledger = Ledger()
    reserved = []
    orig = ledger.reserve
    ledger.reserve = lambda amount, call_id=None: reserved.append(amount) or orig(amount, call_id)
    svc = service(ledger=ledger)
    svc.models["default"] = (svc.models["default"][0], Spy(answers=["done"]))
    res = run(ToolAgent("a", c.tools), svc)
    assert res.protocol == "native" and [t["function"]["name"] for t in seen["tools"]] == ["add", "explode"]
    tools_bytes = len(json.dumps(seen["tools"], sort_keys=True, ensure_ascii=False).encode())
    assert reserved[0] >= ledger.cost("scripted:t", tools_bytes, 64)


def test_an_openai_completion_with_tool_calls_is_checked_and_kept():
    body = {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}}
                    ],
                }
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 7},
    }
    checked, usage = checked_completion(body)
    assert checked["choices"][0]["message"]["tool_calls"][0]["function"] == {
        "name": "add",
        "arguments": '{"a": 1, "b": 2}',
    }
    assert usage == {"prompt_tokens": 5, "completion_tokens": 7}
    for bad in (
        [{"id": "c1"}],
        "x",
        [{"id": 3, "function": {"name": "a", "arguments": "{}"}}],
        [{"id": "c", "function": {"name": "a", "arguments": {"a": 1}}}],
    ):
        with pytest.raises(EndpointResponseError, match="tool_calls"):
            checked_completion({"choices": [{"message": {"content": "", "tool_calls": bad}}]})


@pytest.mark.parametrize("state", [S, SM], ids=["AppendLog", "add_messages"])
def test_the_node_factory_returns_append_only_updates(state):
    c = Counter()
    svc = service(per_agent={"x": [call("add", a=1, b=1), "two"], "y": [call("add", a=2, b=2), "four"]})
    g = StateGraph(state, context_schema=CoopContext)
    x = tool_agent_node("x", c.tools, lambda s: [HumanMessage(content=f"round {s['round']}")], ledger_key="ledger")
    y = tool_agent_node("y", c.tools, lambda s: [HumanMessage(content="y")], ledger_key="ledger", include_prompt=False)
    g.add_node("x", x)  # pyright: ignore[reportArgumentType]  # LangGraph passes (state, config, runtime); its StateNode protocols do not name that form
    g.add_node("y", y)  # pyright: ignore[reportArgumentType]  # LangGraph passes (state, config, runtime); its StateNode protocols do not name that form
    g.add_edge(START, "x")
    g.add_edge("x", "y")
    g.add_edge("y", END)
    out = asyncio.run(g.compile().ainvoke({"round": 3}, context=CoopContext(llm=svc)))
    assert [r["agent"] for r in out["tool_loops"]] == ["x", "y"] and [r["final"] for r in out["tool_loops"]] == [
        "two",
        "four",
    ]
    assert [r["round"] for r in out["tool_loops"]] == [3, 3]
    assert len(out["messages"]) == 1 + 3 + 3 and out["messages"][0].content == "round 3"
    assert out["ledger"] == [e.as_dict() for e in svc.ledger.entries]
    assert_well_formed(out["messages"])


def test_run_tool_loop_needs_a_model_service():
    with pytest.raises(ToolSetupError):
        asyncio.run(run_tool_loop("a", Counter().tools, PROMPT, context=CoopContext()))


@pytest.mark.parametrize(
    "bad",
    [
        {"max_steps": 0},
        {"max_steps": 1.5},
        {"max_steps": True},
        {"max_malformed": -1},
        {"max_tokens": 0},
        {"max_cost": float("nan")},
        {"max_cost": -1},
        {"max_cost": "abc"},
        {"cap_scope": "team"},
        {"max_calls_per_step": 0},
    ],
)
def test_hostile_limits_are_refused(bad):
    with pytest.raises(ValueError):
        ToolLoopLimits(**bad)


def test_agent_ids_and_tool_names_are_checked():
    with pytest.raises(ValueError):
        ToolAgent("", Counter().tools)
    with pytest.raises(ValueError):
        ToolAgent(7, Counter().tools)  # type: ignore[arg-type]
    c = Counter()
    with pytest.raises(ValueError, match="unique"):
        ToolAgent("a", [c.add, c.add])
    with pytest.raises(ValueError):
        ToolAgent("a", c.tools, protocol="xml")  # type: ignore[arg-type]


def test_calls_beyond_the_per_answer_limit_are_not_run_and_may_be_asked_again():
    c = Counter()
    many = {"tool_calls": [{"name": "add", "args": {"a": i, "b": 0}} for i in range(4)]}
    svc = service([many, call("add", a=3, b=0), "done"])
    res = run(ToolAgent("a", c.tools, limits=ToolLoopLimits(max_calls_per_step=2)), svc)
    assert res.stop_reason == "final"
    assert c.calls == [("add", 0, 0), ("add", 1, 0), ("add", 3, 0)]  # add(3, 0) was refused, then run when asked again
    assert [t["status"] for t in res.tool_calls] == ["success", "success", "not_run", "not_run", "success"]
    assert_well_formed(res.messages)


def test_rounds_must_be_integers():
    with pytest.raises(ValueError, match="round"):
        run(ToolAgent("a", Counter().tools), service(["x"]), round=1.5)


def test_sandbox_failures_end_the_run_instead_of_being_answered_to_the_model():
    from cooplab.agents.tools import run_code_tool
    from cooplab.sandbox import SandboxError, SandboxUnavailable
    from cooplab.sandbox.pool import AgentSandboxPool

    pool = AgentSandboxPool(backend="local")
    pool.close()
    svc = service([call("run_code", code="1"), "never"])
    with pytest.raises(SandboxError) as ei:
        asyncio.run(ToolAgent("a", [run_code_tool()]).arun(PROMPT, context=CoopContext(llm=svc, sandbox=pool)))
    assert "closed" in str(ei.value) and loop_of(ei.value).steps == 1 and svc.ledger.in_flight == 0

    class Gone:
        def max_call_seconds(self, timeout=None):
            return 10.0

        def session(self, agent_id):
            raise SandboxUnavailable("no Docker daemon answers")

        def close(self):
            pass

        async def arun(self, agent_id, code, timeout=None):
            raise SandboxUnavailable("no Docker daemon answers")

    svc = service([call("run_code", code="1"), "never"])
    with pytest.raises(SandboxUnavailable):
        asyncio.run(ToolAgent("a", [run_code_tool()]).arun(PROMPT, context=CoopContext(llm=svc, sandbox=Gone())))
    assert svc.ledger.in_flight == 0


def test_an_openai_compatible_endpoint_calls_tools_natively(monkeypatch):
    """End to end over HTTP on loopback: the tools are sent, the endpoint's tool calls run, the
    unparseable one is answered as an error, its usage is charged."""
    import http.server
    import threading

    from cooplab.agents.decisions import LLMService
    from cooplab.agents.models import make_chat_model, parse_model_spec

    replies = [
        {
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 20, "b": 22}'}},
                {"id": "c2", "type": "function", "function": {"name": "add", "arguments": "{a: 1"}},
            ]
        },
        {"content": "it is 42"},
    ]
    requests = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            requests.append(body)
            msg = {"role": "assistant", "content": None, **replies[len(requests) - 1]}
            out = json.dumps(
                {
                    "id": "x",
                    "object": "chat.completion",
                    "model": "m",
                    "choices": [{"index": 0, "message": msg, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 80, "completion_tokens": 9},
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        spec = parse_model_spec("openai:m", base_url=f"http://127.0.0.1:{srv.server_address[1]}/v1")
        svc = LLMService(models={"default": (spec, make_chat_model(spec))}, ledger=Ledger())
        c = Counter()
        res = run(ToolAgent("data.lead", c.tools), svc)
    finally:
        srv.shutdown()
    assert res.protocol == "native" and res.stop_reason == "final" and res.final == "it is 42"
    assert [t["function"]["name"] for t in requests[0]["tools"]] == ["add", "explode"]
    assert c.calls == [("add", 20, 22)]
    sent_back = [m for m in requests[1]["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in sent_back] == ["c1", "c2"]
    assert sent_back[0]["content"] == "42" and "could not be parsed" in sent_back[1]["content"]
    assert_well_formed(res.messages)
    assert [(e.input_tokens, e.output_tokens) for e in svc.ledger.entries] == [(80, 9), (80, 9)]
