"""A traced tool loop's records repeat the whole conversation: the tracer serializes each (converted,
scrubbed) message once and splices its JSON text into every record that holds it (issue 41, tool
steps). The file must stay exactly what a plain ``json.dumps`` of each record writes, every reader
(``load_runs``, langsmith's ``Run``, the explorer, the OTLP export) reads it as before, and a secret
that appears between two traces is scrubbed from the messages the first trace already serialized."""

from __future__ import annotations

import asyncio
import json

from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool

from cooplab.agents.cache import ResponseCache
from cooplab.agents.decisions import LLMService
from cooplab.agents.models import ModelSpec, ScriptedChatModel
from cooplab.agents.tools import ToolAgent, ToolLoopLimits
from cooplab.graphs.context import CoopContext
from cooplab.graphs.ledger import Ledger
from cooplab.graphs.tracing import JsonlTracer, load_runs
from cooplab.graphs.tracing import tracer as tracer_mod

STEPS = 4
SECRET = "sk-splice-0123456789abcdef"


@tool
def echo(text: str) -> str:
    """Say the text back."""
    return "heard: " + text


def _answer(messages):
    k = sum(isinstance(m, ToolMessage) for m in messages)
    return {"tool_calls": [{"name": "echo", "args": {"text": f"step {k}"}}]} if k < STEPS else "done"


def _loop(path, prompt):
    svc = LLMService(
        models={
            "default": (ModelSpec("scripted", "m", max_tokens=64), ScriptedChatModel(answers=[_answer], cycle=True))
        },
        ledger=Ledger(),
        cache=ResponseCache(None),
        seed=1,
    )
    agent = ToolAgent("agent.0", [echo], limits=ToolLoopLimits(max_steps=STEPS + 1))
    res = asyncio.run(agent.arun(prompt, context=CoopContext(llm=svc), config={"callbacks": [JsonlTracer(path)]}))
    assert res.stop_reason == "final" and len(res.tool_calls) == STEPS


def _plain(rec):
    return json.dumps(rec, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def test_a_tool_loop_s_messages_are_serialized_once_and_the_lines_are_plain_json(tmp_path, monkeypatch):
    dumped = []
    real = json.dumps

    def counting(*a, **k):  # every JSON text the tracer makes, by length
        out = real(*a, **k)
        dumped.append(len(out))
        return out

    monkeypatch.setattr(tracer_mod.json, "dumps", counting)
    path = tmp_path / "traces.jsonl"
    prompt = [HumanMessage(content="a long task description " * 40)]
    _loop(path, prompt)
    monkeypatch.setattr(tracer_mod.json, "dumps", real)
    lines = path.read_text(encoding="utf-8").splitlines()
    # each line is exactly the plain JSON of the record it holds
    assert lines and all(line == _plain(json.loads(line)) for line in lines)
    # the prompt is in every model call's record (and the loop's node records), but serialized far fewer times
    carrying = sum(line.count("a long task description") // 40 for line in lines)
    assert carrying >= 2 * STEPS
    assert sum(dumped) < sum(map(len, lines)) - (carrying - 2) * len(prompt[0].content)
    # every reader sees the whole conversation in each model call, as before
    runs = load_runs(tmp_path, validate=True)
    llm = sorted((r for r in runs if r["run_type"] == "llm"), key=lambda r: r["start_time"])
    assert len(llm) == STEPS + 1
    for i, r in enumerate(llm):
        msgs = r["inputs"]["messages"][0]
        assert msgs[0]["kwargs"]["content"] == prompt[0].content
        assert len(msgs) == 1 + 2 * i  # the prompt, then an answer and a tool result per step before it
        assert [m["kwargs"]["content"] for m in msgs if m["id"][-1] == "ToolMessage"] == [
            f"heard: step {k}" for k in range(i)
        ]


def test_the_explorer_and_the_otlp_reader_read_the_spliced_calls(tmp_path):
    from collections import Counter

    from cooplab.evals import otlp_export
    from cooplab.evals.explorer.traces import read_trace_file

    path = tmp_path / "traces.jsonl"
    _loop(path, [HumanMessage(content="find the mean")])
    tf = read_trace_file(path)
    assert tf.bad == 0 and len(tf.calls) == STEPS + 1
    last = max(tf.calls, key=lambda c: c["start"])
    assert [m["text"] for m in last["messages"]][0] == "find the mean" and len(last["messages"]) == 1 + 2 * STEPS
    counts: Counter = Counter()
    recs = [rec for _, rec in otlp_export.iter_records(path, counts, [])]
    assert len(recs) == len(path.read_text().splitlines()) and not counts


def test_a_secret_set_between_two_traces_is_scrubbed_from_messages_already_serialized(tmp_path, monkeypatch):
    monkeypatch.delenv("COOPLAB_SPLICE_TEST_KEY", raising=False)
    prompt = [HumanMessage(content=f"use the key {SECRET} to log in")]
    first, second = tmp_path / "a" / "traces.jsonl", tmp_path / "b" / "traces.jsonl"
    _loop(first, prompt)  # the same message objects, serialized while the value is not a secret
    assert SECRET in first.read_text(encoding="utf-8")
    monkeypatch.setenv("COOPLAB_SPLICE_TEST_KEY", SECRET)
    _loop(second, prompt)
    text = second.read_text(encoding="utf-8")
    assert SECRET not in text and "use the key *** to log in" in text


def test_text_that_looks_like_a_splice_marker_is_written_as_it_is(tmp_path):
    sneaky = f"\x00{tracer_mod._NONCE}:0\x00 and \x00abc:0\x00"
    path = tmp_path / "traces.jsonl"
    _loop(path, [HumanMessage(content=sneaky)])
    for r in load_runs(tmp_path):
        if r["run_type"] == "llm":
            assert r["inputs"]["messages"][0][0]["kwargs"]["content"] == sneaky
