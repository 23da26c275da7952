"""The JSON tool-call grammar for models without native tool calling (the local llama.cpp model):
the schema, parsing answers, malformed answers fed back with a counted limit, and one run of the
real local model (marked ``integration``)."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from pydantic import BaseModel, Field

from cooplab.agents.tools import (
    JSON_INSTRUCTIONS,
    MalformedToolAnswer,
    ToolAgent,
    ToolLoopLimits,
    parse_tool_answer,
    render_json_protocol,
    tool_call_schema,
)
from cooplab.graphs.context import CoopContext

from ._support import Counter, service


class Effort(BaseModel):
    effort: float = Field(ge=0, le=1, description="how hard to fish")
    note: str = ""


@tool(args_schema=Effort)
def set_effort(effort: float, note: str = "") -> str:
    """Set the fishing effort."""
    return f"effort set to {effort}"


def test_the_schema_has_one_variant_per_tool_and_a_final_answer():
    c = Counter()
    schema = tool_call_schema([c.add, set_effort])
    variants = schema["oneOf"]
    assert len(variants) == 3
    add_v, eff_v, final_v = variants
    assert add_v["properties"]["tool"] == {"const": "add"} and add_v["required"] == ["tool", "args"]
    assert add_v["additionalProperties"] is False
    assert add_v["properties"]["args"]["properties"] == {"a": {"type": "integer"}, "b": {"type": "integer"}}
    assert sorted(add_v["properties"]["args"]["required"]) == ["a", "b"]
    assert eff_v["properties"]["args"]["properties"]["effort"]["maximum"] == 1
    assert final_v == {
        "type": "object",
        "properties": {"final": {"type": "string"}},
        "required": ["final"],
        "additionalProperties": False,
    }
    # for llama.cpp's decoder (which ignores minimum/maximum) a bounded number becomes an enum
    dec = tool_call_schema([set_effort], for_decoder=True)["oneOf"][0]["properties"]["args"]["properties"]["effort"]
    assert dec["enum"][0] == 0 and dec["enum"][-1] == 1 and len(dec["enum"]) == 21
    json.dumps(schema)


def test_answers_parse_into_tool_calls_or_a_final_answer():
    m = parse_tool_answer('{"tool": "add", "args": {"a": 1, "b": 2}}', call_id="call_7")
    assert m.tool_calls == [{"name": "add", "args": {"a": 1, "b": 2}, "id": "call_7", "type": "tool_call"}]
    m = parse_tool_answer('Sure! ```json\n{"final": "it is 3"}\n```', call_id="x")  # prose and fences tolerated
    assert m.tool_calls == [] and "it is 3" in m.content


@pytest.mark.parametrize(
    "text, needle",
    [
        ("", "empty"),
        ("no json here", "no JSON object"),
        ('{"tool": "add", "args": {"a": 1', "unclosed"),
        ("[1, 2]", "JSON object"),
        ('{"tool": "add"}', "expected the keys"),
        ('{"final": 3}', "'final' must be a string"),
        ('{"tool": "add", "args": [1, 2]}', "'args' must be a JSON object"),
        ('{"tool": 5, "args": {}}', "name of a tool"),
        ('{"tool": "add", "args": {}, "final": "x"}', "expected the keys"),
        ('{"answer": "x"}', "expected the keys"),
    ],
)
def test_malformed_answers_are_refused_with_a_message_for_the_model(text, needle):
    with pytest.raises(MalformedToolAnswer, match=needle):
        parse_tool_answer(text, call_id="c")


def test_the_conversation_is_rendered_for_a_model_without_tool_calling():
    c = Counter()
    convo = [
        SystemMessage(content="You are a fisher."),
        HumanMessage(content="go"),
        AIMessage(content="", tool_calls=[{"name": "add", "args": {"a": 1, "b": 2}, "id": "c1", "type": "tool_call"}]),
        ToolMessage(content="3", tool_call_id="c1", name="add"),
    ]
    out = render_json_protocol(convo, c.tools)
    assert [type(m).__name__ for m in out] == ["SystemMessage", "HumanMessage", "AIMessage", "HumanMessage"]
    system, call = out[0].content, out[2].content
    assert isinstance(system, str) and isinstance(call, str)
    assert system.startswith("You are a fisher.") and "- add: Add two integers." in system
    assert JSON_INSTRUCTIONS in system
    assert json.loads(call) == {"tool": "add", "args": {"a": 1, "b": 2}}
    assert out[3].content == "Result of add:\n3"


def test_the_tools_go_between_the_fixed_system_prompt_and_the_live_one():
    """Leading system messages: the first (what never changes), then the tools (fixed for the
    loop), then the others (the live lines: a budget status), so that a model keeping what it
    read reuses everything before the live lines (issue 41, point 5)."""
    c = Counter()
    out = render_json_protocol(
        [
            SystemMessage(content="You are a fisher."),
            SystemMessage(content="BUDGET STATUS: $1 spent."),
            HumanMessage(content="go"),
        ],
        c.tools,
    )
    assert [type(m).__name__ for m in out] == ["SystemMessage", "HumanMessage"]
    system = out[0].content
    assert isinstance(system, str)
    first, tools, live = (
        system.partition("You can use these tools:")[0],
        system.index("- add:"),
        system.index("BUDGET"),
    )
    assert first == "You are a fisher.\n\n" and tools < live and system.endswith("\n\nBUDGET STATUS: $1 spent.")


def test_a_malformed_answer_is_fed_back_and_the_loop_goes_on():
    c = Counter()
    seen = {}

    def fixed(messages):
        seen["feedback"] = messages[-1].content
        return '{"tool": "add", "args": {"a": 20, "b": 22}}'

    def final(messages):  # quotes the tool's result, as the model sees it (a user message in this protocol)
        return json.dumps({"final": f"the answer is {messages[-1].content.split()[-1]}"})

    svc = service(['{"tool": "add", "args": {"a": 1', fixed, final])
    res = asyncio.run(
        ToolAgent("a", c.tools, protocol="json").arun([HumanMessage(content="add")], context=CoopContext(llm=svc))
    )
    assert res.protocol == "json" and res.stop_reason == "final" and res.final == "the answer is 42"
    assert res.malformed == 1 and res.steps == 3 and len(svc.ledger.entries) == 3  # the malformed call was charged too
    assert (
        "That answer was invalid" in seen["feedback"]
        and "unclosed" in seen["feedback"]
        and JSON_INSTRUCTIONS in seen["feedback"]
    )
    assert c.calls == [("add", 20, 22)]
    kinds = [type(m).__name__ for m in res.messages]
    assert kinds == ["AIMessage", "HumanMessage", "AIMessage", "ToolMessage", "AIMessage"]


@pytest.mark.parametrize("limit", [0, 2])
def test_malformed_answers_stop_the_loop_after_a_counted_limit(limit):
    c = Counter()
    svc = service(["not json"] * 50)
    res = asyncio.run(
        ToolAgent("a", c.tools, protocol="json", limits=ToolLoopLimits(max_steps=40, max_malformed=limit)).arun(
            [HumanMessage(content="add")], context=CoopContext(llm=svc)
        )
    )
    assert res.stop_reason == "malformed" and res.malformed == limit + 1 == res.steps == svc.live_calls
    assert len(svc.ledger.entries) == limit + 1 and c.calls == []


def test_the_step_cap_also_bounds_malformed_retries():
    svc = service(["garbage"] * 50)
    res = asyncio.run(
        ToolAgent("a", Counter().tools, protocol="json", limits=ToolLoopLimits(max_steps=2, max_malformed=10)).arun(
            [HumanMessage(content="add")], context=CoopContext(llm=svc)
        )
    )
    assert res.stop_reason == "step_cap" and res.steps == 2 == svc.live_calls


@pytest.mark.integration
def test_the_real_local_model_runs_a_bounded_tool_loop_and_every_call_is_charged():
    from cooplab.agents.decisions import LLMService
    from cooplab.agents.models import make_chat_model, parse_model_spec
    from cooplab.graphs.ledger import Ledger

    c = Counter()
    spec = parse_model_spec("local", max_tokens=48)
    svc = LLMService(models={"default": (spec, make_chat_model(spec))}, ledger=Ledger())
    agent = ToolAgent("solo", [c.add], limits=ToolLoopLimits(max_steps=3, max_malformed=1))
    assert agent.protocol_for(svc.models["default"][1]) == "json"
    res = asyncio.run(
        agent.arun(
            [HumanMessage(content="What is 2 + 3? Use the add tool, then give the final answer.")],
            context=CoopContext(llm=svc),
        )
    )
    # a 135M model is not smart; the loop must still end with a recorded reason, every call charged
    assert res.stop_reason in ("final", "step_cap", "repeated_call", "malformed", "credit_cap")
    assert 1 <= res.steps <= 3 and svc.live_calls == res.steps
    calls = [e for e in svc.ledger.entries if e.kind == "tokens"]
    assert len(calls) == res.steps and all(
        e.agent == "solo" and e.input_tokens > 0 and e.usage_error is None for e in calls
    )
    assert svc.ledger.spent == res.cost > 0
    for m in res.messages:  # grammar-constrained: every answer of the model is a JSON object
        if isinstance(m, AIMessage):
            assert isinstance(m.content, str) and isinstance(json.loads(m.content), dict)
    assert "llama_cpp" not in sys.modules  # the model ran in its own process
