"""OTLP export of traces (evals/otlp_export.py, ``cooplab traces export DIR --otlp URL``).

Unit tests convert real run directories (a scripted CPR run, a tool-using agent's run) and hostile
files, with the SDK's in-memory exporter and an in-process OTLP/HTTP receiver on 127.0.0.1 that
decodes the protobuf requests. The integration test starts a real Arize Phoenix server (its own
virtual environment, ``bash scripts/ensure-phoenix.sh``) on loopback, exports both runs through the
CLI and reads the spans back with Phoenix's own client. Under CI a missing Phoenix fails the test.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from datetime import datetime, timedelta
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypedDict

import click
import pandas as pd
import pytest
from click.testing import CliRunner

from cooplab.cli import main
from cooplab.evals import otlp_export as ox
from cooplab.evals.typed import as_frame, tuples
from cooplab.graphs.state import AppendLog
from cooplab.graphs.tracing import load_runs

ROOT = Path(__file__).resolve().parents[2]
PHOENIX_VENV = ROOT / ".venv-phoenix"


# ---------------------------------------------------------------------------------------------
# run directories: a scripted CPR society and a tool-using agent (no Docker)
@pytest.fixture(scope="module")
def cpr_run(tmp_path_factory) -> Path:
    """A real run of the CLI: 3 scripted LLM fishers, 2 rounds. The response cache is off, so every
    model call is made (and traced as an ``llm`` run) instead of replayed."""
    d = tmp_path_factory.mktemp("otlp") / "cpr"
    with pytest.MonkeyPatch.context() as mp:
        for k in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2"):
            mp.delenv(k, raising=False)
        code = main(
            [
                "run",
                "cpr",
                "--agents",
                "llm",
                "--model",
                f"scripted:{ROOT / 'examples/scripted/cautious.json'}",
                "--n-agents",
                "3",
                "--rounds",
                "2",
                "--out",
                str(d),
                "-q",
                "--cache",
                "off",
            ]
        )
    assert code in (0, None) and (d / "traces.jsonl").is_file()
    return d


class _ToolState(TypedDict, total=False):
    round: int
    messages: AppendLog
    tool_loops: AppendLog


@pytest.fixture(scope="module")
def tool_run(tmp_path_factory) -> Path:
    """A LangGraph graph whose node is a tool-using agent (a scripted model calling ``add``, then the
    failing ``explode``, then answering), traced like every cooplab run."""
    from langchain_core.messages import HumanMessage
    from langgraph.graph import END, START, StateGraph

    from cooplab.agents.tools import ToolLoopLimits, tool_agent_node
    from cooplab.graphs.context import CoopContext
    from cooplab.graphs.tracing import tracing_callbacks
    from tests.agents._support import USAGE, Counter, call, service

    d = tmp_path_factory.mktemp("otlp") / "tools"
    d.mkdir()
    counter = Counter()
    g = StateGraph(_ToolState, context_schema=CoopContext)
    g.add_node(
        "data",
        tool_agent_node(  # pyright: ignore[reportArgumentType] - a (state, config, runtime) node: LangGraph's StateNode protocols do not name it
            "data.lead",
            counter.tools,
            lambda s: [HumanMessage(content="add 1 and 2")],
            team="data",
            limits=ToolLoopLimits(max_steps=5),
        ),
    )
    g.add_edge(START, "data")
    g.add_edge("data", END)
    svc = service([call("add", USAGE, a=1, b=2), call("explode", USAGE, what="x"), {"text": "3", "usage": USAGE}])
    with pytest.MonkeyPatch.context() as mp:
        for k in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2"):
            mp.delenv(k, raising=False)
        asyncio.run(
            g.compile().ainvoke({"round": 1}, {"callbacks": tracing_callbacks(d)}, context=CoopContext(llm=svc))
        )
    assert counter.calls == [("add", 1, 2), ("explode", "x")]
    return d


def convert(run_dir: Path, project: str = "p") -> tuple[list, ox.OtlpExportResult]:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
        InMemorySpanExporter,
    )

    mem = InMemorySpanExporter()
    res = ox.export_otlp(run_dir, "memory", project=project, exporter=mem)
    return list(mem.get_finished_spans()), res


def iso_ns(s: str) -> int:
    return (datetime.fromisoformat(s) - ox._EPOCH) // timedelta(microseconds=1) * 1000


# ---------------------------------------------------------------------------------------------
# conversion
def test_a_cpr_run_becomes_one_span_per_run_with_the_tree_ids_times_and_tokens_kept(cpr_run):
    runs = load_runs(cpr_run, validate=True)
    spans, res = convert(cpr_run, "cpr-proj")
    assert len(spans) == len(runs) == res.spans and res.n_skipped == 0 and res.orphans == 0 and res.traces == 1
    llm_runs = [r for r in runs if r["run_type"] == "llm"]
    assert len(llm_runs) >= 6  # 3 fishers x (harvest, punish, ...) per round: the model calls were traced
    by_run = {s.attributes["langsmith.run_id"]: s for s in spans}
    assert set(by_run) == {r["id"] for r in runs}
    for r in runs:
        s = by_run[r["id"]]
        assert s.name == r["name"]
        assert s.context.trace_id == uuid.UUID(r["trace_id"]).int  # the LangSmith trace id, as is
        assert s.context.span_id == ox.span_id_of(r["id"])
        if r["parent_run_id"] is None:
            assert s.parent is None
        else:  # the parent span is the span of the parent run
            assert s.parent.span_id == by_run[r["parent_run_id"]].context.span_id
            assert s.parent.trace_id == s.context.trace_id
        assert (s.start_time, s.end_time) == (iso_ns(r["start_time"]), iso_ns(r["end_time"]))
        assert s.status.status_code.name == "OK"
        kind = {"llm": "LLM", "chain": "CHAIN"}[r["run_type"]]
        assert s.attributes["openinference.span.kind"] == kind
        meta = json.loads(s.attributes["metadata"])
        assert meta["cooplab.task"] == "cpr" and meta["cooplab.run_dir"] == str(cpr_run.resolve())
        assert meta["langsmith.run_id"] == r["id"]
    for r in llm_runs:
        a = by_run[r["id"]].attributes
        # the scripted model names no model: cooplab's spec id (metadata "model") stands for it
        assert (
            a["llm.model_name"]
            == r["extra"]["metadata"]["model"]
            == f"scripted:{ROOT / 'examples/scripted/cautious.json'}"
        )
        assert (a["llm.token_count.prompt"], a["llm.token_count.completion"], a["llm.token_count.total"]) == (
            r["prompt_tokens"],
            r["completion_tokens"],
            r["total_tokens"],
        )
        prompt = r["inputs"]["messages"][0]
        assert a["llm.input_messages.0.message.role"] == "system"
        assert a["llm.input_messages.0.message.content"] == prompt[0]["kwargs"]["content"]
        assert a["llm.input_messages.1.message.role"] == "user"
        answer = r["outputs"]["generations"][0][0]["text"]
        assert a["llm.output_messages.0.message.role"] == "assistant"
        assert a["llm.output_messages.0.message.content"] == answer
        assert json.loads(a["input.value"]) == r["inputs"] and a["input.mime_type"] == "application/json"
        assert a["graph.node.id"] == r["extra"]["metadata"]["langgraph_node"]
    resource = spans[0].resource.attributes
    assert resource["openinference.project.name"] == "cpr-proj" and resource["service.name"] == "cooplab"
    # the same file gives the same ids again
    again, _ = convert(cpr_run)
    assert [(s.context.trace_id, s.context.span_id) for s in again] == [
        (s.context.trace_id, s.context.span_id) for s in spans
    ]


def ledger_costs(run_dir: Path) -> dict[str, list[tuple[Decimal, int, int]]]:
    """The ledger's live (not replayed) charges by call id, in ledger order: (cost, input tokens, output tokens)."""
    lg = pd.read_parquet(run_dir / "ledger.parquet")
    out: dict[str, list[tuple[Decimal, int, int]]] = {}
    for row in tuples(as_frame(lg[lg["kind"] == "tokens"])):
        if not row.cached:
            out.setdefault(row.call_id, []).append((Decimal(row.cost_usd_exact), row.input_tokens, row.output_tokens))
    return out


def test_each_model_call_carries_the_cost_the_ledger_charged_and_every_span_the_run_as_session(cpr_run):
    runs = load_runs(cpr_run, validate=True)
    spans, _ = convert(cpr_run)
    run_id = json.loads((cpr_run / "config.json").read_text())["record"]["thread_id"]
    assert {s.attributes["session.id"] for s in spans} == {run_id}
    by_run = {s.attributes["langsmith.run_id"]: s for s in spans}
    costs, total = ledger_costs(cpr_run), Decimal(0)
    llm = json.loads((cpr_run / "config.json").read_text())["llm"]
    ((price_in, price_out),) = [
        tuple(Decimal(str(x)) for x in pair) for pair in llm["prices"].values()
    ]  # the run's one model
    assert llm["price_in"] is None and llm["price_out"] is None  # no run-wide override: the model's own price
    for r in sorted((r for r in runs if r["run_type"] == "llm"), key=lambda r: r["start_time"]):
        a = by_run[r["id"]].attributes
        cost, tin, tout = costs[r["extra"]["metadata"]["call_id"]].pop(0)
        assert Decimal(str(a["llm.cost.total"])) == cost and (
            a["cooplab.charged_tokens.prompt"],
            a["cooplab.charged_tokens.completion"],
        ) == (tin, tout)
        assert (
            Decimal(str(a["llm.cost.prompt"])) == tin * price_in / 1000
            and Decimal(str(a["llm.cost.completion"])) == tout * price_out / 1000
        )
        total += cost
    summary = json.loads((cpr_run / "summary.json").read_text())
    assert float(total) == pytest.approx(summary["ledger"]["cost_usd_float"]) and not any(costs.values())
    assert not any("llm.cost.total" in s.attributes for s in spans if s.attributes["openinference.span.kind"] != "LLM")


def test_a_damaged_ledger_or_config_leaves_cost_out_and_a_run_without_id_is_its_directory(tmp_path, cpr_run):
    import shutil

    d = tmp_path / "run"
    shutil.copytree(cpr_run, d)
    lg = pd.read_parquet(d / "ledger.parquet")
    lg.loc[0, "cost_usd_exact"], lg.loc[1, "input_tokens"] = "nan", -5
    lg.to_parquet(d / "ledger.parquet")
    cfg = json.loads((d / "config.json").read_text())
    del cfg["record"]["thread_id"]
    cfg["llm"]["price_in"] = "x"
    cfg["llm"]["prices"] = {m: ["x", p[1]] for m, p in cfg["llm"]["prices"].items()}
    (d / "config.json").write_text(json.dumps(cfg))
    bad = set(lg.loc[[0, 1], "call_id"])
    spans, _ = convert(d)
    llm = {
        s.attributes["langsmith.run_id"]: s.attributes
        for s in spans
        if s.attributes["openinference.span.kind"] == "LLM"
    }
    for r in load_runs(d):
        if r["run_type"] == "llm":
            a = llm[r["id"]]
            assert ("llm.cost.total" in a) == (r["extra"]["metadata"]["call_id"] not in bad)
            assert "llm.cost.prompt" not in a  # the prices cannot be read: only the row's total
    (d / "ledger.parquet").write_bytes(b"not parquet")
    spans, _ = convert(d)
    assert not any("llm.cost.total" in s.attributes for s in spans)
    (d / "traces.jsonl").write_text(
        "".join(
            json.dumps({**json.loads(line), "extra": {}}) + "\n"
            for line in (d / "traces.jsonl").read_text().splitlines()
        )
    )
    spans, _ = convert(d)  # runs that name no session: the run directory is the session
    assert {s.attributes["session.id"] for s in spans} == {str(d.resolve())}


def test_a_charged_call_counts_the_charged_tokens_and_keeps_the_reported_ones_apart(tmp_path, cpr_run):
    """A reply longer than the call's cap: the ledger charges the cap, the model reports more. The
    span's llm.token_count.* (what Phoenix prices) are the charged counts."""
    import shutil

    d = tmp_path / "run"
    shutil.copytree(cpr_run, d)
    lines = []
    for line in (d / "traces.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r["run_type"] == "llm":
            r["completion_tokens"] += 1000
            r["total_tokens"] += 1000
        lines.append(json.dumps(r) + "\n")
    (d / "traces.jsonl").write_text("".join(lines))
    spans, _ = convert(d)
    by_run = {s.attributes["langsmith.run_id"]: s.attributes for s in spans}
    costs = ledger_costs(d)
    llm = sorted((r for r in load_runs(d) if r["run_type"] == "llm"), key=lambda r: r["start_time"])
    assert llm
    for r in llm:
        a = by_run[r["id"]]
        _, tin, tout = costs[r["extra"]["metadata"]["call_id"]].pop(0)
        assert (a["llm.token_count.prompt"], a["llm.token_count.completion"], a["llm.token_count.total"]) == (
            tin,
            tout,
            tin + tout,
        )
        assert (a["cooplab.charged_tokens.prompt"], a["cooplab.charged_tokens.completion"]) == (tin, tout)
        assert (
            a["cooplab.reported_tokens.prompt"],
            a["cooplab.reported_tokens.completion"],
            a["cooplab.reported_tokens.total"],
        ) == (r["prompt_tokens"], r["completion_tokens"], r["total_tokens"])
        assert r["completion_tokens"] != tout


def test_phoenix_prices_are_the_ledger_rates_that_reproduce_its_charges(tmp_path, cpr_run):
    import shutil

    from cooplab.evals import phoenix_prices as pp

    d = tmp_path / "run"
    shutil.copytree(cpr_run, d)
    path = d / "traces.jsonl"
    by_model = ox.charges_by_model(path, ox.run_charges(path))
    model = f"scripted:{ROOT / 'examples/scripted/cautious.json'}"
    assert list(by_model) == [model] and len(by_model[model]) == sum(map(len, ledger_costs(d).values()))
    (price,) = pp.model_prices(d, by_model)  # summary.json's default rates: the config's prices
    assert (price.input_per_1k, price.output_per_1k) == (Decimal("0.0005"), Decimal("0.003"))
    assert price.per_million() == (0.5, 3.0) and price.pattern == "^" + __import__("re").escape(model) + "$"
    summary = json.loads((d / "summary.json").read_text())
    summary["ledger"]["rates_per_1k"] = {"default": ["0.1", "0.2"], model: ["0.0005", "0.003"], "other": ["nan", "-1"]}
    (d / "summary.json").write_text(json.dumps(summary))
    assert pp.model_prices(d, by_model) == [price]  # the model's own rates, the default does not reproduce
    summary["ledger"]["rates_per_1k"] = {"default": ["0.1", "0.2"]}
    (d / "summary.json").write_text(json.dumps(summary))
    cfg = json.loads((d / "config.json").read_text())
    cfg["llm"]["price_in"], cfg["llm"]["price_out"] = 7, 0.003
    cfg["llm"]["prices"] = {model: [7, 0.003]}
    (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(pp.PhoenixPriceError, match="no rate .* reproduces what the ledger charged") as e:
        pp.model_prices(d, by_model)
    assert "\n" not in str(e.value)


def test_phoenix_prices_against_a_server_that_is_not_phoenix_fail_in_one_line_before_any_span(cpr_run, receiver):
    res = traces(["export", str(cpr_run), "--otlp", receiver.url, "--phoenix-prices", "--timeout", "2"])
    line = one_error_line(res)
    assert (
        res.exit_code == 2
        and "HTTP 404" in line
        and "is this a Phoenix server?" in line
        and receiver.url + "/graphql" in line
    )
    assert receiver.spans() == []
    res = traces(["export", str(cpr_run), "--phoenix-prices"])
    assert res.exit_code == 2 and "needs --otlp" in one_error_line(res)


class FakePhoenix:
    """A loopback server with Phoenix's two endpoints, answering GraphQL with canned (often hostile)
    bodies chosen by the operation the query names; counts the OTLP requests it accepts."""

    def __init__(self, answers: dict[str, Any]):
        self.answers, self.asked, self.otlp = answers, [], 0
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                return

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path.endswith("/v1/traces"):
                    outer.otlp += 1
                    out = b""
                else:
                    query = json.loads(body)["query"]
                    op = next(k for k in outer.answers if k in query)
                    outer.asked.append(op)
                    out = json.dumps(outer.answers[op]).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


_NO_MODELS = {"data": {"generativeModels": {"edges": []}}}


@pytest.mark.parametrize(
    "answers, expected",
    [
        (
            {"generativeModels": {"errors": [{"message": "boom\nsecond line"}]}},
            "Phoenix refused a request: boom second line",
        ),
        ({"generativeModels": {"data": None}}, "gave no data"),
        (
            {"generativeModels": {"data": {"generativeModels": None}}, "createModel": {"data": {"createModel": None}}},
            "createModel answer names no model id",
        ),
        (
            {
                "generativeModels": {
                    "data": {"generativeModels": {"edges": [None, 5, {"node": {"kind": "CUSTOM", "id": 3}}]}}
                },
                "createModel": {"errors": ["not an object"]},
            },
            "refused a request: not an object",
        ),
    ],
)
def test_hostile_phoenix_answers_give_one_line_exit_2_and_no_span_is_sent(cpr_run, answers, expected):
    fake = FakePhoenix(answers)
    try:
        res = traces(["export", str(cpr_run), "--otlp", fake.url, "--phoenix-prices", "--timeout", "5"])
    finally:
        fake.close()
    assert res.exit_code == 2 and expected in one_error_line(res) and fake.otlp == 0


def test_phoenix_that_never_prices_the_probe_is_given_up_on_at_the_deadline(cpr_run):
    from cooplab.evals import phoenix_prices as pp

    unpriced = {
        "data": {
            "getProjectByName": {
                "id": "UHJvamVjdDox",
                "spans": {
                    "edges": [
                        {"node": {"costSummary": {"total": {"cost": None}}}},
                        {"node": {"costSummary": None}},
                        {"node": 7},
                    ]
                },
            }
        }
    }
    fake = FakePhoenix({"getProjectByName": unpriced, "deleteProject": {"data": {"deleteProject": {}}}})
    ticks = iter(range(10**6))
    sent = []
    try:
        with pytest.raises(pp.PhoenixPriceError, match="did not price model 'm' at the new rates within 30 s"):
            pp.wait_until_priced(
                pp.GraphQL(fake.url, 5),
                lambda span: sent.append(span) or True,
                pp.ModelPrice("m", Decimal("0.0005"), Decimal("0.003")),
                deadline=30,
                clock=lambda: float(next(ticks)),
            )
    finally:
        fake.close()
    # probes that arrived unpriced were followed by more; the deadline ran on the clock given; the
    # scratch project was deleted
    assert len(sent) >= 2 and fake.asked.count("getProjectByName") == 31 and fake.asked[-1] == "deleteProject"
    a = sent[0].attributes
    assert (a["llm.model_name"], a["llm.token_count.prompt"], a["llm.token_count.completion"]) == ("m", 10**6, 10**6)


def test_a_tool_agent_run_has_agent_and_tool_spans_and_the_failed_tool_is_an_error(tool_run):
    runs = load_runs(tool_run, validate=True)
    spans, res = convert(tool_run)
    assert len(spans) == len(runs) and res.n_skipped == 0
    by_run = {s.attributes["langsmith.run_id"]: s for s in spans}
    kinds = {r["name"]: by_run[r["id"]].attributes["openinference.span.kind"] for r in runs if r["run_type"] != "llm"}
    assert (
        kinds["data.lead"] == "AGENT"
        and kinds["add"] == "TOOL"
        and kinds["explode"] == "TOOL"
        and kinds["data"] == "CHAIN"
    )
    agent = next(r for r in runs if r["name"] == "data.lead")
    assert by_run[agent["id"]].attributes["agent.name"] == "data.lead"
    by_id = {r["id"]: r for r in runs}
    for r in runs:
        s = by_run[r["id"]]
        if r["run_type"] == "tool":  # under a "tools" step of the agent's loop
            step = by_id[r["parent_run_id"]]
            assert step["name"] == "tools" and step["parent_run_id"] == agent["id"]
            assert s.attributes["tool.name"] == r["name"] and s.parent.span_id == by_run[step["id"]].context.span_id
            assert s.attributes["tool.id"] == r["extra"]["tool_call_id"]
    add = by_run[next(r["id"] for r in runs if r["name"] == "add")]
    assert add.status.status_code.name == "OK" and json.loads(add.attributes["input.value"]) == {"a": 1, "b": 2}
    boom = by_run[next(r["id"] for r in runs if r["name"] == "explode")]
    assert boom.status.status_code.name == "ERROR" and "boom: x" in boom.status.description
    assert "Traceback" not in boom.status.description  # one line; the traceback is in the event
    (ev,) = boom.events
    assert ev.name == "exception" and ev.attributes["exception.type"] == "RuntimeError"
    assert "Traceback" in ev.attributes["exception.stacktrace"]
    # the model's tool calls are in its output messages
    first_llm = min((r for r in runs if r["run_type"] == "llm"), key=lambda r: r["start_time"])
    a = by_run[first_llm["id"]].attributes
    assert a["llm.output_messages.0.message.tool_calls.0.tool_call.function.name"] == "add"
    assert json.loads(a["llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments"]) == {"a": 1, "b": 2}
    assert json.loads(a["llm.invocation_parameters"])["tools"][0]["function"]["name"] == "add"


def _root(i: int = 0, **kw) -> dict:
    rid = str(uuid.UUID(int=0xABC0000 + i))
    base = {
        "id": rid,
        "trace_id": rid,
        "parent_run_id": None,
        "name": "root",
        "run_type": "chain",
        "start_time": "2025-01-01T00:00:00+00:00",
        "end_time": "2025-01-01T00:00:01+00:00",
        "status": "success",
    }
    return {**base, **kw}


def _child(parent: dict, i: int, **kw) -> dict:
    rid = str(uuid.UUID(int=0xDEF0000 + i))
    base = {
        "id": rid,
        "trace_id": parent["trace_id"],
        "parent_run_id": parent["id"],
        "name": f"c{i}",
        "run_type": "llm",
        "start_time": "2025-01-01T00:00:00.100000+00:00",
        "end_time": "2025-01-01T00:00:00.200000+00:00",
    }
    return {**base, **kw}


def test_hostile_lines_are_skipped_and_counted_and_bad_values_never_reach_the_wire(tmp_path):
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    root = _root()
    good = [
        root,
        _child(root, 1, prompt_tokens=float("nan"), completion_tokens=-3, total_tokens=10**30),  # no count survives
        _child(
            root,
            2,
            prompt_tokens="12",
            completion_tokens=True,
            extra={"usage_metadata": {"input_tokens": 7, "output_tokens": 2.0}},
        ),
        _child(root, 3, end_time="2024-12-31T00:00:00+00:00", inputs={"big": "x" * 200_000}, name="\ud800bad"),
        _child(
            root,
            4,
            start_time="2025-01-01T00:00:00",
            end_time=None,
            extra="not a dict",
            inputs=[1, 2],
            outputs="plain",
            tags=["a", 3, None],
            run_type="no-such-type",
            error={"weird": "error object"},
        ),
        _child(root, 5, parent_run_id=str(uuid.UUID(int=999))),  # its parent is not in the file: an orphan
        _child(root, 6, trace_id=None, dotted_order=f"20250101T000000000000Z{root['id']}.x"),  # trace from dotted_order
        _child(
            root,
            7,
            inputs={"messages": [[{"role": "user", "content": [{"type": "text", "text": "hi"}, 5]}, "bare", 7]]},
            outputs={"generations": [[{"text": "ok"}, "junk"]]},
        ),
    ]
    bad = [
        "{not json",
        "[1, 2, 3]",
        json.dumps({"name": "no id"}),
        json.dumps(_child(root, 10, id=["a", "list"])),
        json.dumps(_child(root, 11, start_time=None)),
        json.dumps(_child(root, 12, start_time="yesterday")),
        json.dumps(_child(root, 13, start_time="1900-01-01T00:00:00+00:00")),
        json.dumps(_child(root, 14, parent_run_id={"x": 1})),
        json.dumps(_child(root, 15, parent_run_id=str(uuid.UUID(int=0xDEF0000 + 15)))),  # its own parent
        json.dumps(root),  # a repeated id
        "[" * 100_000 + "]" * 100_000,  # nested too deep for json
        json.dumps(_child(root, 16, trace_id=None, parent_run_id=root["id"])),  # no way to know its trace
    ]
    lines = (
        [json.dumps(r, allow_nan=True) for r in good[:1]]
        + bad[:3]
        + [json.dumps(r, allow_nan=True) for r in good[1:]]
        + bad[3:]
    )
    (tmp_path / "traces.jsonl").write_text("\n".join(lines) + "\n\n", encoding="utf-8", errors="surrogatepass")
    spans, res = convert(tmp_path)
    assert res.spans == len(spans) == len(good)
    assert res.skipped == {
        "not JSON": 2,
        "not a run object": 1,
        "no usable id": 2,
        "no usable start_time": 3,
        "unusable parent_run_id": 1,
        "a run that is its own parent": 1,
        "a repeated run id": 1,
        "no trace_id": 1,
    }
    assert res.n_skipped == len(bad) and res.lines == len(good) + len(bad)
    assert res.first_skip == "line 2: not JSON" and res.orphans == 1
    by_name = {s.name: s for s in spans}
    a1 = by_name["c1"].attributes
    assert not [k for k in a1 if k.startswith("llm.token_count")]
    a2 = by_name["c2"].attributes  # the strings and bools are not counts; usage_metadata fills in
    assert (a2["llm.token_count.prompt"], a2["llm.token_count.completion"], a2["llm.token_count.total"]) == (7, 2, 9)
    s3 = next(s for s in spans if s.attributes["langsmith.run_id"] == good[3]["id"])
    assert s3.end_time == s3.start_time  # an end before the start is clamped
    assert len(s3.attributes["input.value"]) < ox.MAX_VALUE_CHARS + 40 and "more chars]" in s3.attributes["input.value"]
    assert s3.name == "?bad"  # a lone surrogate cannot be UTF-8: replaced
    s4 = next(s for s in spans if s.attributes["langsmith.run_id"] == good[4]["id"])
    assert s4.attributes["openinference.span.kind"] == "UNKNOWN" and s4.end_time == s4.start_time
    assert s4.attributes["tag.tags"] == ("a",) or list(s4.attributes["tag.tags"]) == ["a"]
    assert s4.attributes["output.value"] == "plain" and s4.status.status_code.name == "ERROR"
    assert by_name["c6"].context.trace_id == uuid.UUID(root["id"]).int
    a7 = by_name["c7"].attributes
    assert a7["llm.input_messages.0.message.content"] == "hi" and a7["llm.input_messages.1.message.content"] == "bare"
    assert a7["llm.output_messages.0.message.content"] == "ok"
    for s in spans:  # every attribute is a plain OTLP value and the whole batch encodes
        for v in s.attributes.values():
            assert isinstance(v, (str, bool, int, float, tuple, list))
            assert not isinstance(v, float) or math.isfinite(v)
            assert not isinstance(v, int) or -(2**63) <= v < 2**63
    assert len(encode_spans(spans).SerializeToString()) > 0


def test_secrets_are_scrubbed_again_before_export(tmp_path, monkeypatch):
    secret = "sk-otlp-test-4f9a8b7c6d5e"
    root = _root(inputs={"prompt": f"use {secret} please", "api_key": "plain-key-value"}, outputs={"echo": secret})
    (tmp_path / "traces.jsonl").write_text(json.dumps(root) + "\n")
    monkeypatch.setenv("OTLP_TEST_API_KEY", secret)
    (span,), _ = convert(tmp_path)
    text = json.dumps(dict(span.attributes))
    assert secret not in text and "plain-key-value" not in text and "***" in span.attributes["input.value"]


def test_an_empty_file_exports_nothing_and_a_missing_one_is_a_clear_error(tmp_path):
    (tmp_path / "traces.jsonl").write_text("\n \n")
    spans, res = convert(tmp_path)
    assert spans == [] and res.spans == 0 and res.requests == 0
    with pytest.raises(ox.OtlpConfigError, match="no traces.jsonl"):
        convert(tmp_path / "nowhere")


@pytest.mark.parametrize(
    "url, expected",
    [
        ("http://127.0.0.1:6006", "http://127.0.0.1:6006/v1/traces"),
        ("http://127.0.0.1:6006/", "http://127.0.0.1:6006/v1/traces"),
        ("http://127.0.0.1:6006/v1/traces", "http://127.0.0.1:6006/v1/traces"),
        ("https://collector.example:4318/prefix/", "https://collector.example:4318/prefix/v1/traces"),
        (" http://[::1]:4318/v1/traces/ ", "http://[::1]:4318/v1/traces"),
    ],
)
def test_base_and_full_urls_name_the_traces_endpoint(url, expected):
    assert ox.otlp_traces_url(url) == expected


@pytest.mark.parametrize(
    "url",
    [
        "",
        "127.0.0.1:6006",
        "ftp://h/x",
        "http://",
        "http://h:99999",
        "http://h:abc",
        "http://h/ x",
        "http://h:0",
        "http://h/?q=1",
        None,
        6006,
    ],
)
def test_urls_that_are_not_http_endpoints_are_refused(url):
    with pytest.raises(ox.OtlpConfigError):
        ox.otlp_traces_url(url)


# ---------------------------------------------------------------------------------------------
# over HTTP: an in-process OTLP receiver on 127.0.0.1
class Receiver:
    """A minimal OTLP/HTTP traces endpoint: decodes every ``POST .../v1/traces`` protobuf request;
    ``status`` sets its answer; ``hang`` makes it hold requests until closed."""

    def __init__(self, status: int = 200, hang: bool = False):
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        self.requests: list[tuple[str, str | None, Any]] = []  # path, Content-Type, the request
        self.status, self.release = status, threading.Event()
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                return

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if not self.path.endswith("/v1/traces"):  # a collector answers only its traces path
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if hang:
                    outer.release.wait(30)
                    return
                req = ExportTraceServiceRequest()
                req.ParseFromString(body)
                outer.requests.append((self.path, self.headers.get("Content-Type"), req))
                self.send_response(outer.status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def spans(self) -> list:
        return [
            (rs, s)
            for _, _, req in self.requests
            for rs in req.resource_spans
            for ss in rs.scope_spans
            for s in ss.spans
        ]

    def close(self):
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


@click.command(context_settings={"ignore_unknown_options": True, "help_option_names": []})
@click.argument("argv", nargs=-1, type=click.UNPROCESSED)
def _cooplab(argv):
    sys.exit(main(list(argv)))


def traces(args: list[str]):
    """``cooplab traces ARGS`` through the real entry point, as a CliRunner result."""
    return CliRunner().invoke(_cooplab, ["traces", *args])


def one_error_line(res) -> str:
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("cooplab: error: ") and "Traceback" not in res.output, res.output
    return lines[0]


def test_the_cli_sends_protobuf_to_the_traces_path_in_batches(cpr_run, receiver):
    runs = load_runs(cpr_run)
    res = traces(["export", str(cpr_run), "--otlp", receiver.url, "--project", "proj-x", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["spans"] == len(runs) and out["skipped"] == 0 and out["project"] == "proj-x"
    assert out["endpoint"] == receiver.url + "/v1/traces" and out["requests"] == 1
    assert [(p, ct) for p, ct, _ in receiver.requests] == [("/v1/traces", "application/x-protobuf")]
    got = receiver.spans()
    assert len(got) == len(runs)
    rs = got[0][0]
    res_attrs = {kv.key: kv.value.string_value for kv in rs.resource.attributes}
    assert res_attrs["openinference.project.name"] == "proj-x" and res_attrs["cooplab.task"] == "cpr"
    ids = {s.span_id.hex(): s for _, s in got}
    for r in runs:  # the wire carries the same tree
        s = ids[format(ox.span_id_of(r["id"]), "016x")]
        assert s.trace_id.hex() == uuid.UUID(r["trace_id"]).hex
        assert s.parent_span_id.hex() == (
            "" if r["parent_run_id"] is None else format(ox.span_id_of(r["parent_run_id"]), "016x")
        )
        attrs = {kv.key: kv.value for kv in s.attributes}
        if r["run_type"] == "llm":
            assert attrs["llm.token_count.total"].int_value == r["total_tokens"]
    # a full URL works the same, and small batches make several requests
    receiver.requests.clear()
    r2 = ox.export_otlp(cpr_run, receiver.url + "/v1/traces/", batch_size=10)
    assert r2.requests == math.ceil(len(runs) / 10) == len(receiver.requests) and len(receiver.spans()) == len(runs)
    human = traces(["export", str(cpr_run), "--otlp", receiver.url])
    assert human.exit_code == 0 and f"exported {len(runs)} spans (1 trace)" in human.stdout


@pytest.mark.parametrize("status, why", [(400, "HTTP 400"), (404, "HTTP 404"), (503, "HTTP 503")])
def test_a_server_answering_an_error_gives_one_line_and_exit_1(cpr_run, status, why):
    r = Receiver(status=status)
    try:
        res = traces(["export", str(cpr_run), "--otlp", r.url, "--timeout", "1.5"])
    finally:
        r.close()
    assert res.exit_code == 1
    line = one_error_line(res)
    assert why in line and r.url in line


def test_a_server_that_is_down_or_hangs_gives_one_line_and_exit_1(cpr_run):
    with socket.socket() as s:  # a port that is bound but not listening: connections are refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        res = traces(["export", str(cpr_run), "--otlp", f"http://127.0.0.1:{port}", "--timeout", "1"])
    assert res.exit_code == 1
    assert "nothing answers there" in one_error_line(res) and "Connection refused" in res.stderr
    r = Receiver(hang=True)
    try:
        res = traces(["export", str(cpr_run), "--otlp", r.url, "--timeout", "0.5"])
    finally:
        r.close()
    assert res.exit_code == 1 and "failed" in one_error_line(res)


def test_cli_mistakes_are_one_line_with_exit_2(cpr_run, tmp_path, monkeypatch):
    for args, expected in [
        (["--otlp", "localhost:6006"], "must be an http(s) URL"),
        (["--otlp", "http://127.0.0.1:6006", "--endpoint", "http://127.0.0.1:1"], "not both"),
        (["--otlp", "http://127.0.0.1:6006", "--timeout", "nan"], "--timeout"),
        (["--otlp", "http://127.0.0.1:6006", "--timeout", "-1"], "--timeout"),
        (["--otlp", "http://127.0.0.1:6006", "--project", " "], "--project"),
    ]:
        res = traces(["export", str(cpr_run), *args])
        assert res.exit_code == 2 and expected in one_error_line(res), (args, res.output)
    res = traces(["export", str(tmp_path / "nope"), "--otlp", "http://127.0.0.1:6006"])
    assert res.exit_code == 2 and "does not exist" in one_error_line(res)
    monkeypatch.setitem(sys.modules, "openinference", None)  # the 'viewer' extra not installed
    res = traces(["export", str(cpr_run), "--otlp", "http://127.0.0.1:6006"])
    assert res.exit_code == 2 and "cooplab[viewer]" in one_error_line(res)
    assert "--otlp URL" in traces(["export", "--help"]).stdout


# ---------------------------------------------------------------------------------------------
# a real Arize Phoenix server
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status
    except (urllib.error.URLError, OSError):
        return 0


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory):
    """A Phoenix server on 127.0.0.1 (free ports, its own working directory, offline, no telemetry),
    stopped at the end. Yields its base URL."""
    exe = PHOENIX_VENV / "bin" / "phoenix"
    if not exe.exists():
        msg = f"Arize Phoenix is not installed ({exe} missing): run `bash scripts/ensure-phoenix.sh`"
        if os.environ.get("CI"):
            pytest.fail(msg + " (CI is set, so the Phoenix test must not be skipped)", pytrace=False)
        pytest.skip(msg)
    work = tmp_path_factory.mktemp("phoenix")
    port, grpc = _free_port(), _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PHOENIX_", "OTEL_"))}
    env.update(
        PHOENIX_HOST="127.0.0.1",
        PHOENIX_PORT=str(port),
        PHOENIX_GRPC_PORT=str(grpc),
        PHOENIX_WORKING_DIR=str(work),
        PHOENIX_TELEMETRY_ENABLED="false",
        PHOENIX_ALLOW_EXTERNAL_RESOURCES="false",
    )
    log = open(work / "phoenix.log", "wb")
    proc = subprocess.Popen(
        [str(exe), "serve"],
        cwd=work,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180  # generous: a cold start on a busy 2-core machine
        while _get(url + "/healthz") != 200:
            if proc.poll() is not None:
                tail = (work / "phoenix.log").read_text(errors="replace")[-2000:]
                pytest.fail(f"Phoenix exited with {proc.returncode} before answering:\n{tail}", pytrace=False)
            if time.monotonic() > deadline:
                pytest.fail("Phoenix did not answer /healthz within 180 s", pytrace=False)
            time.sleep(0.2)  # polling interval, not a wait for a fixed time
        yield url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        log.close()


def _phoenix_spans(client, project: str, expected: int) -> list[dict]:
    """The project's spans once Phoenix has ingested ``expected`` of them (it ingests asynchronously)."""
    import httpx

    deadline = time.monotonic() + 60
    spans: list[dict] = []
    while time.monotonic() < deadline:
        try:
            spans = client.spans.get_spans(project_identifier=project, limit=10_000)
        except httpx.HTTPStatusError:  # the project is created with its first span
            spans = []
        if len(spans) >= expected:
            return spans
        time.sleep(0.2)
    return spans


@pytest.mark.integration
def test_phoenix_shows_the_exported_runs_as_the_same_tree(phoenix, cpr_run, tool_run):
    from phoenix.client import Client

    client = Client(base_url=phoenix)
    for run_dir, project in ((cpr_run, "cooplab-cpr"), (tool_run, "cooplab-tools")):
        runs = load_runs(run_dir, validate=True)
        res = traces(["export", str(run_dir), "--otlp", phoenix, "--project", project, "--json", "--phoenix-prices"])
        assert res.exit_code == 0, res.output
        assert json.loads(res.stdout)["spans"] == len(runs)
        assert [e["action"] for e in json.loads(res.stdout)["prices"]] == (["created"] if run_dir == cpr_run else [])
        spans = _phoenix_spans(client, project, len(runs))
        assert len(spans) == len(runs), f"Phoenix has {len(spans)} spans of {len(runs)} runs"
        by_run = {s["attributes"]["langsmith.run_id"]: s for s in spans}
        assert set(by_run) == {r["id"] for r in runs}
        for r in runs:  # the tree Phoenix stores is the LangSmith tree
            s = by_run[r["id"]]
            assert s["name"] == r["name"] and s["context"]["trace_id"] == uuid.UUID(r["trace_id"]).hex
            if r["parent_run_id"] is None:
                assert not s.get("parent_id")
            else:
                assert s["parent_id"] == by_run[r["parent_run_id"]]["context"]["span_id"]
            assert datetime.fromisoformat(s["start_time"]) == datetime.fromisoformat(r["start_time"])
            a = s["attributes"]
            if r["run_type"] == "llm":
                assert s["span_kind"] == "LLM"
                md = r["extra"]["metadata"]
                assert a["llm.model_name"] == (md.get("ls_model_name") or md.get("model") or r["name"])
                if r.get("total_tokens") is not None:
                    assert (
                        a["llm.token_count.prompt"],
                        a["llm.token_count.completion"],
                        a["llm.token_count.total"],
                    ) == (r["prompt_tokens"], r["completion_tokens"], r["total_tokens"])
            elif r["run_type"] == "tool":
                assert s["span_kind"] == "TOOL" and a["tool.name"] == r["name"]
                assert s["status_code"] == ("ERROR" if r["error"] else "OK")
        # exactly one session: the run (its id, or the directory of a run that records none), holding every trace
        sessions = client.sessions.list(project_name=project)
        ids = {s["attributes"]["session.id"] for s in spans}
        assert len(ids) == 1 and [x["session_id"] for x in sessions] == list(ids)
        assert {t["trace_id"] for t in sessions[0]["traces"]} == {uuid.UUID(r["trace_id"]).hex for r in runs}
        if run_dir == cpr_run:
            assert ids == {json.loads((cpr_run / "config.json").read_text())["record"]["thread_id"]}
            llm = [r for r in runs if r["run_type"] == "llm"]
            # every model call's cost as the ledger charged it; together the ledger's total
            costs = ledger_costs(cpr_run)
            for r in sorted(llm, key=lambda r: r["start_time"]):
                a = by_run[r["id"]]["attributes"]
                cost, tin, tout = costs[r["extra"]["metadata"]["call_id"]].pop(0)
                assert Decimal(str(a["llm.cost.total"])) == cost
                assert a["llm.cost.prompt"] + a["llm.cost.completion"] == pytest.approx(a["llm.cost.total"])
            total = sum(by_run[r["id"]]["attributes"]["llm.cost.total"] for r in llm)
            assert total == pytest.approx(
                json.loads((cpr_run / "summary.json").read_text())["ledger"]["cost_usd_float"]
            )
            _phoenix_own_costs_are_the_ledgers(phoenix, project, cpr_run, runs)
        else:
            assert sorted(s["attributes"]["tool.name"] for s in spans if s["span_kind"] == "TOOL") == ["add", "explode"]
            assert [s["name"] for s in spans if s["span_kind"] == "AGENT"] == ["data.lead"]


def _gql(base: str, query: str, **variables) -> dict:
    """The data of a query to Phoenix's GraphQL API (the one its web UI uses)."""
    req = urllib.request.Request(
        base + "/graphql",
        json.dumps({"query": query, "variables": variables}).encode(),
        {"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        body = json.loads(r.read())
    assert not body.get("errors"), body["errors"]
    return body["data"]


_COSTS = """query($name: String!) { getProjectByName(name: $name) { costSummary { total { cost } }
  sessions(first: 10) { edges { node { sessionId costSummary { total { cost } } } } }
  spans(first: 1000) { edges { node { attributes costSummary { total { cost } prompt { tokens } completion { tokens } }
    trace { traceId costSummary { total { cost } } } } } } } }"""
_MODELS = (
    "query { generativeModels(first: 10000) { edges { node "
    "{ name namePattern kind tokenPrices { costPerMillionTokens } } } } }"
)


def _phoenix_own_costs_are_the_ledgers(base: str, project: str, run_dir: Path, runs: list[dict]) -> None:
    """Phoenix's own cost (computed by Phoenix from token counts and its price table, what its UI
    shows) of every model call, trace, session and the project is what the ledger charged; a
    second export reuses the price entry."""
    import re

    proj = _gql(base, _COSTS, name=project)["getProjectByName"]
    spans = {json.loads(e["node"]["attributes"])["langsmith"]["run_id"]: e["node"] for e in proj["spans"]["edges"]}
    costs = ledger_costs(run_dir)
    for r in sorted((r for r in runs if r["run_type"] == "llm"), key=lambda r: r["start_time"]):
        node = spans[r["id"]]
        cost, tin, tout = costs[r["extra"]["metadata"]["call_id"]].pop(0)
        assert node["costSummary"]["total"]["cost"] == pytest.approx(float(cost), rel=1e-9, abs=0)
        assert (node["costSummary"]["prompt"]["tokens"], node["costSummary"]["completion"]["tokens"]) == (tin, tout)
    assert not any(costs.values())
    ledger_total = json.loads((run_dir / "summary.json").read_text())["ledger"]["cost_usd_float"]
    assert proj["costSummary"]["total"]["cost"] == pytest.approx(ledger_total, rel=1e-9, abs=0)
    (trace,) = {n["trace"]["traceId"]: n["trace"] for n in spans.values()}.values()
    assert trace["costSummary"]["total"]["cost"] == pytest.approx(ledger_total, rel=1e-9, abs=0)
    (session,) = [e["node"] for e in proj["sessions"]["edges"]]
    assert session["sessionId"] == json.loads((run_dir / "config.json").read_text())["record"]["thread_id"]
    assert session["costSummary"]["total"]["cost"] == pytest.approx(ledger_total, rel=1e-9, abs=0)
    # exporting again (here to another project) reuses the entry: one per model, no probe project left
    res = traces(
        ["export", str(run_dir), "--otlp", base, "--project", project + "-again", "--json", "--phoenix-prices"]
    )
    assert res.exit_code == 0, res.output
    assert [e["action"] for e in json.loads(res.stdout)["prices"]] == ["reused"]
    model = next(r for r in runs if r["run_type"] == "llm")["extra"]["metadata"]["model"]
    pattern = "^" + re.escape(model) + "$"
    ours = [e["node"] for e in _gql(base, _MODELS)["generativeModels"]["edges"] if e["node"]["namePattern"] == pattern]
    assert [n["kind"] for n in ours] == ["CUSTOM"]
    # other rates for the same model name update that entry in place (still one entry)
    from cooplab.evals import phoenix_prices as pp

    gql = pp.GraphQL(base, 30)
    (first,) = json.loads(res.stdout)["prices"]
    (upd,) = pp.upsert_prices(gql, [pp.ModelPrice(model, Decimal("0.001"), Decimal("0.004"))])
    assert (upd.action, upd.id) == ("updated", first["id"])
    ours = [e["node"] for e in _gql(base, _MODELS)["generativeModels"]["edges"] if e["node"]["namePattern"] == pattern]
    assert len(ours) == 1 and sorted(p["costPerMillionTokens"] for p in ours[0]["tokenPrices"]) == [1.0, 4.0]
    names = [
        e["node"]["name"]
        for e in _gql(base, "query { projects(first: 100) { edges { node { name } } } }")["projects"]["edges"]
    ]
    assert not any(n.startswith("cooplab-price-probe-") for n in names)


def test_each_ledger_row_is_split_at_its_own_models_prices(tmp_path):
    """Runs with two models at two prices (config.json's llm.prices): a call's prompt and
    completion costs come from its own model's prices; an unknown model falls back to the
    run-wide price_in/price_out, and without those has its total only."""
    from cooplab.graphs.tracing.charges import ledger_charges

    (tmp_path / "config.json").write_text(
        json.dumps({"llm": {"price_in": None, "price_out": None, "prices": {"a": [0.001, 0.002], "b": [0.01, 0.02]}}})
    )
    rows = [
        {
            "kind": "tokens",
            "call_id": "c1",
            "model": "a",
            "input_tokens": 1000,
            "output_tokens": 1000,
            "cost_usd_exact": 0.003,
        },
        {
            "kind": "tokens",
            "call_id": "c2",
            "model": "b",
            "input_tokens": 1000,
            "output_tokens": 1000,
            "cost_usd_exact": 0.03,
        },
        {
            "kind": "tokens",
            "call_id": "c3",
            "model": "z",
            "input_tokens": 1000,
            "output_tokens": 1000,
            "cost_usd_exact": 0.5,
        },
    ]
    got = ledger_charges(tmp_path, rows)
    assert (got["c1"][0].prompt_cost, got["c1"][0].completion_cost) == (Decimal("0.001"), Decimal("0.002"))
    assert (got["c2"][0].prompt_cost, got["c2"][0].completion_cost) == (Decimal("0.01"), Decimal("0.02"))
    assert got["c3"][0].prompt_cost is None and got["c3"][0].cost == Decimal("0.5")
    (tmp_path / "config.json").write_text(json.dumps({"llm": {"price_in": 0.25, "price_out": 0.25}}))
    got = ledger_charges(tmp_path, rows)
    assert got["c3"][0].prompt_cost == Decimal("0.25") and got["c1"][0].prompt_cost is None  # 0.5 != 0.003
