"""A call answered from the response cache is traced like any other model call (issue 38, item 9):
the rerun of a scripted CPR society into a new folder sharing the cache holds the same ``llm`` runs
as the first run, marked cached, cost zero, with the original call's usage and latency; the
explorer shows the conversation, the OTLP spans say cached, a tool loop's replayed calls keep
their tool calls, live LangSmith tracing receives them, and an old cache's rows replay traced."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from datetime import datetime
from pathlib import Path
from typing import Any, TypedDict
from urllib.parse import urlencode

import httpx
import pandas as pd
import pytest
from langchain_core.messages import HumanMessage

import cooplab
from cooplab.agents.cache import ResponseCache
from cooplab.graphs.state import AppendLog
from cooplab.graphs.tracing import ledger_charges, load_runs, match_charges, tracing_callbacks

# fixtures: a fake LangSmith endpoint; no live tracing unless a test says so (around every test)
from .test_tracing import _clear_langsmith_env_cache, _no_live_tracing  # noqa: F401

EFFORTS = ['{"effort": 0.1}', '{"effort": 0.25}', '{"effort": 0.4}', "no idea", '{"effort": 3}']


def _llm_runs(run_dir: Path) -> list[dict[str, Any]]:
    return [r for r in load_runs(run_dir, validate=True) if r["run_type"] == "llm"]


def _key(r: dict[str, Any]) -> tuple[str, str]:
    return r["name"], json.dumps(r["inputs"], sort_keys=True)


def _answer(r: dict[str, Any]) -> tuple[str, list]:
    msg = r["outputs"]["generations"][0][0]["message"]["kwargs"]
    return msg["content"], [(c["name"], c["args"]) for c in msg.get("tool_calls") or []]


def _said(r: dict[str, Any]) -> list[tuple]:
    """The messages an llm run was sent: (type, content, tool calls) of each."""
    return [
        (m["kwargs"]["type"], m["kwargs"]["content"], m["kwargs"].get("tool_calls")) for m in r["inputs"]["messages"][0]
    ]


def _md(r: dict[str, Any]) -> dict[str, Any]:
    return r["extra"]["metadata"]


@pytest.fixture(scope="module")
def reruns(tmp_path_factory) -> Path:
    """A scripted LLM CPR society (3 fishers, 2 rounds) in ``first``, then the same config again in
    ``rerun``, both with one response cache: every call of the rerun is a replay."""
    root = tmp_path_factory.mktemp("replay") / "runs"
    root.mkdir()
    script = root.parent / "script.json"
    script.write_text(json.dumps({"answers": EFFORTS, "select": "prompt_hash"}))
    cache = root.parent / "cache.sqlite"
    with pytest.MonkeyPatch.context() as mp:
        for k in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2"):
            mp.delenv(k, raising=False)
        for name in ("first", "rerun"):
            cooplab.run(
                task="cpr",
                agents="llm",
                model=f"scripted:{script}",
                n_agents=3,
                rounds=2,
                seed=3,
                out=root / name,
                quiet=True,
                cache=str(cache),
            )
    return root


def test_a_rerun_from_the_cache_traces_every_call_marked_cached_and_free(reruns):
    first, rerun = sorted(_llm_runs(reruns / "first"), key=_key), sorted(_llm_runs(reruns / "rerun"), key=_key)
    assert len(rerun) == len(first) >= 6  # every call of the rerun is in its traces
    charged = pd.read_parquet(reruns / "first" / "ledger.parquet").set_index("call_id")
    for live, replay in zip(first, rerun, strict=False):
        assert _key(replay) == _key(live) and _answer(replay) == _answer(live)  # same name, inputs, answer
        assert "cached" not in _md(live) and "cached" not in live["tags"] and "total_cost" not in live
        md = _md(replay)
        assert md["cached"] is True and "cached" in replay["tags"]
        assert replay["total_cost"] == replay["prompt_cost"] == replay["completion_cost"] == 0
        assert replay["extra"]["usage_metadata"]["total_cost"] == 0
        # the labels of the live call: who, when, which model, the ledger's call id, LangSmith's model labels
        for k in ("agent_id", "agent_name", "round", "phase", "model", "call_id", "ls_provider", "ls_model_type"):
            assert md[k] == _md(live)[k], k
        assert replay["extra"]["invocation_params"] == live["extra"]["invocation_params"]
        # what the original call took: the tokens it was charged, its latency, when it was stored
        row = charged.loc[md["call_id"]]
        assert md["original_usage"] == {
            "input_tokens": row["input_tokens"],
            "output_tokens": row["output_tokens"],
            "total_tokens": row["input_tokens"] + row["output_tokens"],
        }
        assert isinstance(md["original_latency_s"], float) and md["original_latency_s"] >= 0
        assert datetime.fromisoformat(md["cached_at"]).tzinfo is not None
    # the replay's parent is the node that asked, as the live call's is
    parents = {r["id"]: r["name"] for r in load_runs(reruns / "rerun")}
    assert all(parents[r["parent_run_id"]] == _md(r)["phase"] for r in rerun)


def test_the_rerun_s_ledger_makes_no_live_charge_and_no_replay_takes_a_charge(reruns):
    led = pd.read_parquet(reruns / "rerun" / "ledger.parquet")
    rerun = _llm_runs(reruns / "rerun")
    assert len(led) == len(rerun) and bool(led["cached"].all())  # nothing was paid to a model
    s = json.loads((reruns / "rerun" / "summary.json").read_text())
    assert s["ledger"]["cached_calls"] == s["ledger"]["calls"] == len(rerun)
    assert match_charges(rerun, ledger_charges(reruns / "rerun")) == {}  # a replay is never shown a cost
    first = _llm_runs(reruns / "first")
    assert len(match_charges(first, ledger_charges(reruns / "first"))) == len(first)


def test_the_explorer_shows_the_rerun_s_conversation_marked_cached(reruns):
    from cooplab.cli.view import task_for
    from cooplab.evals.explorer.app import serve, stop

    n = len(_llm_runs(reruns / "rerun"))
    server, url = serve([reruns], task_for=task_for)
    try:
        calls = httpx.get(url + "traces?" + urlencode({"id": "0/rerun"})).text
        assert calls.count('<article class="call">') == n and calls.count(">cached</span>") == n
        assert "{&#34;effort&#34;" in calls or '{"effort"' in calls  # the answers are there
        # a replay is charged nothing; the live calls each show their charge
        assert calls.count("<dt>charged (ledger)</dt><dd>nothing: answered from the response cache") == n
        assert f"model calls</dt><dd>{n} ({n} answered from the response cache)</dd>" in calls
        live = httpx.get(url + "traces?" + urlencode({"id": "0/first"})).text
        assert live.count('<article class="call">') == n and ">cached</span>" not in live
        assert live.count("<dt>charged (ledger)</dt><dd>") == n and "answered from the response cache" not in live
        # a round of one society: each fisher's conversation, every call marked
        page = httpx.get(url + "run?" + urlencode({"id": "0/rerun", "society": 0, "round": 1})).text
        asked = [
            r
            for r in _llm_runs(reruns / "rerun")
            if (_md(r)["society"], _md(r)["round"], _md(r)["phase"]) == (0, 1, "harvest")
        ]
        assert len(asked) >= 3 and page.count("\u00b7 harvest \u00b7 round 1 \u00b7 cached") == len(asked)
        assert "no model calls recorded" not in page
    finally:
        stop(server)


def test_otlp_spans_of_replayed_calls_say_cached_and_cost_nothing(reruns):
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from cooplab.evals import otlp_export as ox

    def spans(d: Path) -> list:
        mem = InMemorySpanExporter()
        ox.export_otlp(d, "memory", project="p", exporter=mem)
        return [s for s in mem.get_finished_spans() if (s.attributes or {}).get("openinference.span.kind") == "LLM"]

    replayed = spans(reruns / "rerun")
    usage = {r["id"]: _md(r)["original_usage"] for r in _llm_runs(reruns / "rerun")}
    assert len(replayed) == len(usage)
    for s in replayed:
        a = s.attributes
        assert a["cooplab.cached"] is True
        assert a["llm.cost.total"] == a["llm.cost.prompt"] == a["llm.cost.completion"] == 0.0
        assert a["llm.token_count.prompt"] == a["llm.token_count.completion"] == a["llm.token_count.total"] == 0
        u = usage[a["langsmith.run_id"]]
        assert (a["cooplab.original_tokens.prompt"], a["cooplab.original_tokens.completion"]) == (
            u["input_tokens"],
            u["output_tokens"],
        )
        assert a["cooplab.original_latency_s"] >= 0
    for s in spans(reruns / "first"):  # live calls: the ledger's cost, never marked
        assert "cooplab.cached" not in s.attributes and s.attributes["llm.cost.total"] > 0


# --- a tool loop ---------------------------------------------------------------------------------
class _LoopState(TypedDict, total=False):
    round: int
    messages: AppendLog
    tool_loops: AppendLog


def _tool_loop_traces(out: Path, cache: Path) -> list[tuple]:
    """A graph whose node is a tool-using agent (calls ``add``, then answers), traced into ``out``;
    the tools it ran."""
    from langgraph.graph import END, START, StateGraph

    from cooplab.agents.tools import ToolLoopLimits, tool_agent_node
    from cooplab.graphs.context import CoopContext
    from tests.agents._support import USAGE, Counter, call, service

    counter = Counter()
    g = StateGraph(_LoopState, context_schema=CoopContext)
    g.add_node(
        "data",
        tool_agent_node(  # pyright: ignore[reportArgumentType] - a (state, config, runtime) node: LangGraph's StateNode protocols do not name it
            "data.lead",
            counter.tools,
            lambda s: [HumanMessage(content="add 1 and 2")],
            team="data",
            limits=ToolLoopLimits(max_steps=4),
        ),
    )
    g.add_edge(START, "data")
    g.add_edge("data", END)
    svc = service([call("add", USAGE, a=1, b=2), {"text": "3", "usage": USAGE}], cache=ResponseCache(cache))
    out.mkdir()
    asyncio.run(g.compile().ainvoke({"round": 1}, {"callbacks": tracing_callbacks(out)}, context=CoopContext(llm=svc)))
    return counter.calls


def test_a_tool_loop_s_replayed_model_calls_are_traced_with_their_tool_calls(tmp_path):
    cache = tmp_path / "cache.sqlite"
    assert _tool_loop_traces(tmp_path / "live", cache) == [("add", 1, 2)]
    assert _tool_loop_traces(tmp_path / "replay", cache) == [
        ("add", 1, 2)
    ]  # the tool runs again; the model is replayed
    live, replay = _llm_runs(tmp_path / "live"), _llm_runs(tmp_path / "replay")
    assert len(replay) == len(live) == 2
    assert [_answer(r) for r in replay] == [_answer(r) for r in live] == [("", [("add", {"a": 1, "b": 2})]), ("3", [])]
    # the same conversation sent (message ids are made anew by each run; the tool loop marks its own
    # answers' response_metadata cached or not)
    assert [_said(r) for r in replay] == [_said(r) for r in live]
    assert all(_md(r)["cached"] is True and r["total_cost"] == 0 for r in replay)
    assert all(_md(r)["team"] == "data" and _md(r)["agent_id"] == "data.lead" for r in replay)
    # the tools bound to the model are in the replay's invocation parameters, as in the live call's
    assert [r["extra"]["invocation_params"] for r in replay] == [r["extra"]["invocation_params"] for r in live]
    assert "tools" in replay[0]["extra"]["invocation_params"]


# --- live LangSmith tracing, and a cache written by an older cooplab ------------------------------
def _ask(cache: ResponseCache, out: Path) -> tuple[str, bool]:
    from tests.agents._support import service

    svc = service(['{"effort": 0.5}'], cache=cache)
    hs = tracing_callbacks(out)

    async def go():
        return await svc.ask(
            agent=1,
            society=0,
            round=2,
            phase="harvest",
            messages=[HumanMessage(content="how much?")],
            schema=None,
            attempt=0,
            config={"callbacks": hs},
        )

    reply = asyncio.run(go())
    for h in hs[1:]:
        h.wait_for_futures()
        h.client.flush()
    return reply.response.text, reply.cached


def test_live_langsmith_tracing_receives_a_replayed_call_marked_cached(tmp_path, fake_langsmith, monkeypatch):
    cache = ResponseCache(tmp_path / "cache.sqlite")
    assert _ask(cache, tmp_path / "a") == ('{"effort": 0.5}', False)
    monkeypatch.setenv("LANGSMITH_TRACING", "true")
    monkeypatch.setenv("LANGSMITH_ENDPOINT", fake_langsmith.url)
    monkeypatch.setenv("LANGSMITH_API_KEY", "lsv2-fake-key-0123456789")
    _clear_langsmith_env_cache()
    assert _ask(cache, tmp_path / "b") == ('{"effort": 0.5}', True)
    (replay,) = _llm_runs(tmp_path / "b")
    sent = b"".join(rq["body"] for rq in fake_langsmith.requests if rq["method"] in ("POST", "PATCH"))
    assert replay["id"].encode() in sent  # the replay reached LangSmith as it happened
    assert b'"cached":true' in sent.replace(b" ", b"") and b'"total_cost":0' in sent.replace(b" ", b"")
    assert b"original_latency_s" in sent and b"lsv2-fake-key" not in sent


def test_rows_of_a_cache_written_before_usage_errors_were_kept_replay_traced(tmp_path):
    """The cache's first schema (no usage_error column): its rows replay, and are traced with the
    usage, latency and time stored in them."""
    path = tmp_path / "old.sqlite"
    assert _ask(ResponseCache(path), tmp_path / "a")[1] is False
    db = sqlite3.connect(path)  # rebuild the file as the first cooplab wrote it
    rows = db.execute("SELECT key, text, input_tokens, output_tokens, latency, model FROM responses").fetchall()
    db.execute("DROP TABLE responses")
    db.execute(
        "CREATE TABLE responses (key TEXT PRIMARY KEY, text TEXT NOT NULL, input_tokens INTEGER, output_tokens INTEGER,"
        " latency REAL, model TEXT, created TEXT DEFAULT CURRENT_TIMESTAMP)"
    )
    db.executemany(
        "INSERT INTO responses (key, text, input_tokens, output_tokens, latency, model) VALUES (?, ?, ?, ?, ?, ?)",
        [(k, t, i, o, 1.25, m) for k, t, i, o, _, m in rows],
    )
    db.commit()
    db.close()
    assert _ask(ResponseCache(path), tmp_path / "b") == ('{"effort": 0.5}', True)
    (live,), (replay,) = _llm_runs(tmp_path / "a"), _llm_runs(tmp_path / "b")
    md = _md(replay)
    assert md["cached"] is True and md["original_latency_s"] == 1.25 and "cached_at" in md
    assert md["original_usage"]["input_tokens"] == rows[0][2] and _answer(replay) == _answer(live)
