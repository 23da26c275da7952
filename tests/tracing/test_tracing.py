"""Tracing of graph runs in the LangSmith run format (the graphs/tracing/ package).

No network: the LangSmith endpoint is a tiny fake HTTP server on 127.0.0.1 started here.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypedDict

import numpy as np
import pytest
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langsmith.schemas import Run

from cooplab.graphs import tracing
from cooplab.graphs.tracing import (
    ExportError,
    JsonlTracer,
    TraceFileError,
    export_traces,
    load_runs,
    scrub,
    to_jsonable,
    tracing_callbacks,
)
from cooplab.graphs.tracing import live as tracing_live

ENV_SECRET = "sk-envsecret-0123456789abcdef"
STATE_SECRET = "state-api-key-value-42"


def _clear_langsmith_env_cache():
    from langsmith import utils as ls_utils

    for fn in (ls_utils.get_env_var, ls_utils.get_tracer_project):
        if hasattr(fn, "cache_clear"):
            fn.cache_clear()


@pytest.fixture(autouse=True)
def _no_live_tracing(monkeypatch):
    """No test traces live unless it says so. langsmith caches environment reads, so the
    cache is cleared around every test (the env changes made here must be seen)."""
    monkeypatch.setattr(tracing_live, "_clients", {})  # scrubbing_client's cache
    for k in (
        "LANGSMITH_TRACING",
        "LANGCHAIN_TRACING_V2",
        "LANGSMITH_ENDPOINT",
        "LANGCHAIN_ENDPOINT",
        "LANGSMITH_API_KEY",
        "LANGCHAIN_API_KEY",
        "LANGSMITH_PROJECT",
        "LANGCHAIN_PROJECT",
    ):
        monkeypatch.delenv(k, raising=False)
    _clear_langsmith_env_cache()
    yield
    monkeypatch.undo()
    _clear_langsmith_env_cache()


# ----------------------------------------------------------------------------------------
# a tiny chat model reporting token usage, a tool, and two graphs
class UsageChatModel(BaseChatModel):
    """Answers 'harvest 3' and reports 11 input / 2 output tokens."""

    answer: str = "harvest 3"

    @property
    def _llm_type(self) -> str:
        return "usage-fake"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        msg = AIMessage(
            content=self.answer, usage_metadata={"input_tokens": 11, "output_tokens": 2, "total_tokens": 13}
        )
        return ChatResult(generations=[ChatGeneration(message=msg)])

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        await asyncio.sleep(0)
        return self._generate(messages, stop, **kwargs)


@tool
def harvest_tool(amount: int) -> int:
    """Harvest some fish."""
    return amount * 2


class State(TypedDict, total=False):
    stock: Any
    big: Any
    answer: str
    api_key: str
    headers: Any
    odd: Any


async def think(state: State) -> dict:
    assert "stock" in state
    ask = f"Stock is {np.asarray(state['stock']).sum():.0f}. How much? (do not leak {ENV_SECRET})"
    msg = await UsageChatModel().ainvoke([HumanMessage(content=ask)])
    await harvest_tool.ainvoke({"amount": 3})
    return {"answer": msg.content}


def think_sync(state: State) -> dict:
    msg = UsageChatModel().invoke([HumanMessage(content="How much?")])
    harvest_tool.invoke({"amount": 3})
    return {"answer": msg.content}


def act(state: State) -> dict:
    assert "stock" in state
    stock = np.asarray(state["stock"], dtype=float)
    stock -= 1.0  # in place: the recorded inputs must not change
    return {"stock": stock}


def build_graph(async_think: bool = True):
    g = StateGraph(State)
    g.add_node("think", think if async_think else think_sync)
    g.add_node("act", act)
    g.add_edge(START, "think")
    g.add_edge("think", "act")
    g.add_edge("act", END)
    return g.compile(name="society")


def initial_state() -> State:
    return {
        "stock": np.array([10.0, 20.0, 30.0]),
        "big": np.random.default_rng(0).random((300, 400)),
        "answer": "",
        "api_key": STATE_SECRET,
        "headers": {"Authorization": "Bearer abc.def.ghi", "accept": "json"},
        "odd": threading.Lock(),  # not serializable: must not crash
    }


def make_traces(run_dir: Path, mode: str = "ainvoke") -> list[dict]:
    """Run the test graph once with tracing into run_dir; return the runs of traces.jsonl."""
    cfg: RunnableConfig = {"callbacks": tracing_callbacks(run_dir)}
    if mode == "ainvoke":
        asyncio.run(build_graph().ainvoke(initial_state(), cfg))
    elif mode == "astream":

        async def go():
            async for _ in build_graph().astream(initial_state(), cfg, stream_mode=["updates", "values"]):
                pass

        asyncio.run(go())
    else:
        build_graph(async_think=False).invoke(initial_state(), cfg)
    return load_runs(run_dir)


def read_lines(run_dir: Path) -> list[str]:
    return [ln for ln in (run_dir / "traces.jsonl").read_text().splitlines() if ln.strip()]


def check_tree(runs: list[dict]) -> dict[str, dict]:
    """Every run validates; ids unique; parent links and dotted_order consistent."""
    by_id = {r["id"]: r for r in runs}
    assert len(by_id) == len(runs)
    for r in runs:
        parsed = Run(**r)
        assert str(parsed.id) == r["id"] and str(parsed.trace_id) == r["trace_id"]
        assert parsed.dotted_order == r["dotted_order"]
        assert parsed.start_time is not None and parsed.end_time is not None
        assert parsed.end_time >= parsed.start_time
        assert r["dotted_order"].endswith(r["id"])
        if r["parent_run_id"] is None:
            assert r["trace_id"] == r["id"]
            assert "." not in r["dotted_order"]
        else:
            parent = by_id[r["parent_run_id"]]
            assert r["trace_id"] == parent["trace_id"]
            assert r["dotted_order"].startswith(parent["dotted_order"] + ".")
            assert r["dotted_order"].count(".") == parent["dotted_order"].count(".") + 1
    return by_id


# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["ainvoke", "astream", "invoke"])
def test_graph_run_recorded_as_langsmith_runs(tmp_path, mode):
    runs = make_traces(tmp_path, mode)
    by_id = check_tree(runs)
    roots = [r for r in runs if r["parent_run_id"] is None]
    assert len(roots) == 1 and roots[0]["name"] == "society" and roots[0]["run_type"] == "chain"
    root = roots[0]
    assert runs[0] is root or runs[0]["id"] == root["id"]  # parent-first file order
    names = {(r["run_type"], r["name"]) for r in runs}
    assert {("chain", "think"), ("chain", "act"), ("llm", "UsageChatModel"), ("tool", "harvest_tool")} <= names
    nodes = {r["name"]: r for r in runs if r["parent_run_id"] == root["id"]}
    assert {"think", "act"} <= set(nodes)
    llm = next(r for r in runs if r["run_type"] == "llm")
    assert by_id[llm["parent_run_id"]]["name"] == "think"
    assert (llm["prompt_tokens"], llm["completion_tokens"], llm["total_tokens"]) == (11, 2, 13)
    assert llm["extra"]["usage_metadata"] == {"input_tokens": 11, "output_tokens": 2, "total_tokens": 13}
    assert llm["extra"]["metadata"]["langgraph_node"] == "think"
    assert llm["inputs"]["messages"][0][0]["kwargs"]["content"].startswith(
        "Stock is 60" if mode != "invoke" else "How much?"
    )
    assert llm["outputs"]["generations"][0][0]["text"] == "harvest 3"
    tool_run = next(r for r in runs if r["run_type"] == "tool")
    assert tool_run["outputs"]["output"] == 6
    # the act node mutated the stock array in place after it started; its inputs were copied
    assert nodes["act"]["inputs"]["stock"] == [10.0, 20.0, 30.0]
    assert nodes["act"]["outputs"]["stock"] == [9.0, 19.0, 29.0]
    assert root["outputs"]["answer"] == "harvest 3"
    assert all(r["error"] is None and r["status"] == "success" for r in runs)


def test_runs_append_across_invocations(tmp_path):
    make_traces(tmp_path, "ainvoke")
    n1 = len(read_lines(tmp_path))
    runs = make_traces(tmp_path, "invoke")  # e.g. a resumed run adds more root runs
    assert len(runs) == 2 * n1
    check_tree(runs)
    assert len({r["trace_id"] for r in runs}) == 2
    assert sum(r["parent_run_id"] is None for r in runs) == 2


def test_one_tracer_shared_by_concurrent_runs(tmp_path):
    cbs = tracing_callbacks(tmp_path)

    async def go():
        g = build_graph()
        await asyncio.gather(*(g.ainvoke(initial_state(), {"callbacks": cbs}) for _ in range(4)))

    asyncio.run(go())
    runs = load_runs(tmp_path)
    check_tree(runs)
    assert sum(r["parent_run_id"] is None for r in runs) == 4
    assert sum(r["run_type"] == "llm" for r in runs) == 4
    assert not cbs[0]._pending and not cbs[0].run_map  # nothing left behind


def test_numpy_state_is_compact_and_odd_objects_do_not_crash(tmp_path):
    runs = make_traces(tmp_path, "ainvoke")
    root = next(r for r in runs if r["parent_run_id"] is None)
    assert root["inputs"]["stock"] == [10.0, 20.0, 30.0]
    big = root["inputs"]["big"]
    assert big["__ndarray__"] == [300, 400] and big["dtype"] == "float64"
    assert 0.0 <= big["min"] <= big["mean"] <= big["max"] <= 1.0
    assert "lock object" in str(root["inputs"]["odd"])
    # 120,000 floats in the state, yet every line stays small
    assert max(len(ln) for ln in read_lines(tmp_path)) < 8000


def test_to_jsonable_edge_cases():
    out = to_jsonable(
        {
            "nan": float("nan"),
            "inf": np.float64("inf"),
            "i": np.int64(3),
            "b": np.bool_(True),
            "small": np.array([[1, 2], [3, 4]], dtype=np.int32),
            "empty": np.zeros((0, 5)),
            "objarr": np.array([object()] * 2, dtype=object),
            "bytes": b"abc",
            "set": {3, 1},
            "long": "x" * 30000,
            "list": list(range(1000)),
            "path": Path("/a/b"),
            "fn": lambda x: x,
        }
    )
    json.dumps(out, allow_nan=False)
    assert out["nan"] == "nan" and out["inf"] == "inf" and out["i"] == 3 and out["b"] is True
    assert out["small"] == [[1, 2], [3, 4]]
    assert out["empty"] == [] or out["empty"]["__ndarray__"] == [0, 5]
    assert out["objarr"]["__ndarray__"] == [2]
    assert out["bytes"] == {"__bytes__": 3} and out["set"] == [1, 3]
    assert len(out["long"]) < 20100 and out["long"].endswith("more chars]")
    keep = tracing.LIST_KEEP
    assert out["list"] == list(range(keep)) + [{"__truncated__": 1000 - 2 * keep}] + list(range(1000 - keep, 1000))
    assert to_jsonable(list(range(tracing.MAX_LIST_ITEMS))) == list(range(tracing.MAX_LIST_ITEMS))
    assert out["path"] == "/a/b" and "lambda" in out["fn"]
    rec = {"id": "x", "inputs": {"a": "y" * 5000, "b": "small"}, "outputs": {"c": ["z" * 100] * 30}, "extra": {}}
    fitted = tracing.fit_line(rec, limit=2000)
    assert len(json.dumps(fitted)) <= 2000 and fitted["inputs"]["b"] == "small"
    assert fitted["inputs"]["a"]["__truncated__"] == "too large"
    cyc: dict = {}
    cyc["self"] = cyc
    assert to_jsonable(cyc) == {"self": {"__cycle__": "dict"}}


def test_no_secret_in_any_trace(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", ENV_SECRET)
    monkeypatch.setenv("COOPLAB_DB_PASSWORD", "hunter2-hunter2")
    runs = make_traces(tmp_path, "ainvoke")
    text = (tmp_path / "traces.jsonl").read_text()
    for secret in (ENV_SECRET, STATE_SECRET, "abc.def.ghi"):
        assert secret not in text
    root = next(r for r in runs if r["parent_run_id"] is None)
    assert root["inputs"]["api_key"] == "***"
    assert root["inputs"]["headers"] == {"Authorization": "***", "accept": "json"}
    llm = next(r for r in runs if r["run_type"] == "llm")
    assert "(do not leak ***)" in llm["inputs"]["messages"][0][0]["kwargs"]["content"]
    assert llm["total_tokens"] == 13  # token counts are not secrets


def test_secret_values_from_environment():
    env = {
        "OPENAI_API_KEY": "sk-abc123456",
        "TOKENIZERS_PARALLELISM": "false",
        "MAX_TOKENS": "512",
        "GH_TOKEN": "ghp_x",
        "PATH": "/usr/bin",
        "DB_PASSWORD": "hunter2-hunter2",
        "EMPTY_SECRET": "",
    }
    assert tracing.secret_values(env) == ["hunter2-hunter2", "sk-abc123456", "ghp_x"]


def test_scrub_rules():
    secrets = ["hunter2-hunter2", "short"]
    out = scrub(
        {
            "password": "x",
            "client_secret": "y",
            "x-api-key": "z",
            "token": "t",
            "access_token": "a",
            "max_tokens": 64,
            "input_tokens": 5,
            "total_tokens": 9,
            "nested": [{"Authorization": "Bearer q"}],
            "msg": "pw is hunter2-hunter2!",
            "exact": "short",
            "other": "shorter",
            "n": None,
        },
        secrets,
    )
    assert out["password"] == out["client_secret"] == out["x-api-key"] == out["token"] == out["access_token"] == "***"
    assert (out["max_tokens"], out["input_tokens"], out["total_tokens"]) == (64, 5, 9)
    assert out["nested"] == [{"Authorization": "***"}]
    assert out["msg"] == "pw is ***!" and out["exact"] == "***" and out["other"] == "shorter"
    assert out["n"] is None


def test_error_run_is_recorded(tmp_path):
    def boom(state):
        raise RuntimeError(f"node failed with key {ENV_SECRET}")

    g = StateGraph(State)
    g.add_node("boom", boom)
    g.add_edge(START, "boom")
    g.add_edge("boom", END)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SOME_TOKEN", ENV_SECRET)
        with pytest.raises(RuntimeError):
            g.compile(name="failing").invoke({"answer": ""}, {"callbacks": tracing_callbacks(tmp_path)})
    runs = load_runs(tmp_path, validate=True)
    check_tree(runs)
    root = next(r for r in runs if r["parent_run_id"] is None)
    assert root["status"] == "error" and "RuntimeError" in root["error"]
    assert ENV_SECRET not in (tmp_path / "traces.jsonl").read_text()


def test_tracing_callbacks_live_switch(tmp_path, monkeypatch, fake_langsmith):
    from langchain_core.tracers.langchain import LangChainTracer

    assert [type(h) for h in tracing_callbacks(tmp_path)] == [JsonlTracer]
    monkeypatch.setenv("LANGSMITH_TRACING", "true")
    monkeypatch.setenv("LANGSMITH_ENDPOINT", fake_langsmith.url)
    _clear_langsmith_env_cache()
    hs = tracing_callbacks(tmp_path)
    assert [type(h) for h in hs] == [JsonlTracer, LangChainTracer]
    # LangChain adds its own LangChainTracer when tracing is on only if none is given:
    from langchain_core.callbacks.manager import CallbackManager

    cm = CallbackManager.configure(inheritable_callbacks=hs)
    assert sum(isinstance(h, LangChainTracer) for h in cm.handlers) == 1
    cm_default = CallbackManager.configure(inheritable_callbacks=hs[:1])
    assert sum(isinstance(h, LangChainTracer) for h in cm_default.handlers) == 1


# ----------------------------------------------------------------------------------------
# a fake LangSmith-compatible endpoint
class FakeLangSmith:
    def __init__(self, status: int = 200):
        self.requests: list[dict[str, Any]] = []
        self.status = status
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _handle(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                outer.requests.append(
                    {
                        "method": self.command,
                        "path": self.path,
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                        "body": body,
                    }
                )
                code = 200 if self.path.startswith("/info") else outer.status
                data = json.dumps(
                    {"version": "fake"}
                    if self.path.startswith("/info")
                    else ({} if code < 400 else {"detail": "refused by fake"})
                ).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def batch_posts(self) -> list[dict]:
        out = []
        for rq in self.requests:
            if rq["method"] == "POST" and rq["path"].startswith("/runs/batch"):
                out.extend(json.loads(rq["body"]).get("post") or [])
        return out

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_export_to_fake_endpoint(tmp_path, fake_langsmith, monkeypatch):
    make_traces(tmp_path, "ainvoke")
    make_traces(tmp_path, "invoke")
    runs = load_runs(tmp_path)
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-9f8e7d6c5b4a")
    n = export_traces(tmp_path, endpoint=fake_langsmith.url, api_key="tok-9f8e7d6c5b4a", project="cpr-test")
    assert n == len(runs)
    posted = fake_langsmith.batch_posts()
    assert sorted(p["id"] for p in posted) == sorted(r["id"] for r in runs)
    by_id = {r["id"]: r for r in runs}
    pos = {p["id"]: i for i, p in enumerate(posted)}
    for p in posted:
        r = by_id[p["id"]]
        assert p["trace_id"] == r["trace_id"] and p["dotted_order"] == r["dotted_order"]
        assert p.get("parent_run_id") == r["parent_run_id"]
        assert p["session_name"] == "cpr-test" and p["name"] == r["name"] and p["run_type"] == r["run_type"]
        if r["parent_run_id"]:
            assert pos[r["parent_run_id"]] < pos[p["id"]]  # parents first
    llm = next(p for p in posted if p["run_type"] == "llm")
    assert llm["extra"]["usage_metadata"]["total_tokens"] == 13
    batch_reqs = [rq for rq in fake_langsmith.requests if rq["path"].startswith("/runs/batch")]
    assert batch_reqs and all(rq["headers"].get("x-api-key") == "tok-9f8e7d6c5b4a" for rq in batch_reqs)
    assert all(b"tok-9f8e7d6c5b4a" not in rq["body"] for rq in fake_langsmith.requests)


def test_cut_off_last_line_is_skipped(tmp_path, fake_langsmith):
    runs = make_traces(tmp_path, "invoke")
    with open(tmp_path / "traces.jsonl", "a") as fh:
        fh.write(
            '{"id": "01a2',
        )  # a crash mid-write
    assert load_runs(tmp_path, validate=True) == runs
    assert export_traces(tmp_path, endpoint=fake_langsmith.url) == len(runs)


def test_export_errors(tmp_path):
    with pytest.raises(TraceFileError):
        export_traces(tmp_path / "missing", endpoint="http://127.0.0.1:9")
    (tmp_path / "traces.jsonl").write_text('{"id": "not-a-uuid", "name": 1}\n{"id": "x"}\n')
    with pytest.raises(TraceFileError, match="traces.jsonl:1"):
        export_traces(tmp_path, endpoint="http://127.0.0.1:9")
    good = tmp_path / "good"
    make_traces(good, "invoke")
    with pytest.raises(tracing.ExportConfigError):  # would go to LangSmith's servers without a key
        export_traces(good)
    refusing = FakeLangSmith(status=403)
    try:
        with pytest.raises(ExportError, match="failed"):
            export_traces(good, endpoint=refusing.url, api_key="k")
    finally:
        refusing.close()


def test_live_tracing_sends_each_run_once(tmp_path, fake_langsmith, monkeypatch):
    monkeypatch.setenv("LANGSMITH_TRACING", "true")
    monkeypatch.setenv("LANGSMITH_ENDPOINT", fake_langsmith.url)
    monkeypatch.setenv("LANGSMITH_API_KEY", "lsv2-fake-key-0123456789")
    monkeypatch.setenv("OPENAI_API_KEY", ENV_SECRET)
    _clear_langsmith_env_cache()  # so LangChain would add its own tracer if ours were missing
    hs = tracing_callbacks(tmp_path)
    asyncio.run(build_graph().ainvoke(initial_state(), {"callbacks": hs}))
    hs[1].wait_for_futures()
    hs[1].client.flush()
    runs = load_runs(tmp_path)
    bodies = b"".join(rq["body"] for rq in fake_langsmith.requests if rq["method"] in ("POST", "PATCH"))
    assert bodies, "no run reached the fake endpoint"
    batch_ids = [p["id"] for p in fake_langsmith.batch_posts()]
    for r in runs:  # every run was sent as a create, exactly once (no second, automatic tracer)
        sent = bodies.count(f'name="post.{r["id"]}"'.encode()) + batch_ids.count(r["id"])
        assert sent == 1, (r["name"], sent)
    for secret in (ENV_SECRET, STATE_SECRET, b"lsv2-fake-key"):
        assert (secret.encode() if isinstance(secret, str) else secret) not in bodies


@pytest.mark.parametrize("use_async", [False, True])
def test_interrupted_run_is_still_written(tmp_path, use_async):
    def stop(state):
        raise KeyboardInterrupt

    g = StateGraph(State)
    g.add_node("think", think if use_async else think_sync)
    g.add_node("stop", stop)
    g.add_edge(START, "think")
    g.add_edge("think", "stop")
    g.add_edge("stop", END)
    app = g.compile(name="society")
    cfg: RunnableConfig = {"callbacks": tracing_callbacks(tmp_path)}
    with pytest.raises(KeyboardInterrupt):
        if use_async:
            asyncio.run(app.ainvoke(initial_state(), cfg))
        else:
            app.invoke(initial_state(), cfg)
    runs = load_runs(tmp_path, validate=True)
    check_tree(runs)
    root = next(r for r in runs if r["parent_run_id"] is None)
    assert root["status"] == "error"
    assert "KeyboardInterrupt" in root["error"] or "CancelledError" in root["error"]  # asyncio cancels
    assert any(r["run_type"] == "llm" and r["total_tokens"] == 13 for r in runs)


# ----------------------------------------------------------------------------------------
_KILLED_SCRIPT = r"""
import os, sys
from typing import Any, TypedDict
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langgraph.graph import END, START, StateGraph
from cooplab.graphs.tracing import tracing_callbacks

class S(TypedDict, total=False):
    x: Any

def think(state):
    FakeListChatModel(responses=["harvest 3"]).invoke("How much?")
    return {"x": 1}

def act(state):
    return {"x": 2}

def die(state):
    os._exit(9)  # as if killed with kill -9: no callback, no flush

g = StateGraph(S)
for name, fn in (("think", think), ("act", act), ("die", die)):
    g.add_node(name, fn)
g.add_edge(START, "think"); g.add_edge("think", "act"); g.add_edge("act", "die"); g.add_edge("die", END)
g.compile(name="society").invoke({"x": 0}, {"callbacks": tracing_callbacks(sys.argv[1])})
"""


def test_a_killed_run_s_finished_nodes_are_recovered_into_one_coherent_trace_file(tmp_path):
    """kill -9 mid-run loses no finished node: the next tracer on the file writes the journaled
    nodes and the interrupted root (status error), then the resumed run's tree follows; every
    parent link is valid and no run id appears twice."""
    import subprocess
    import sys

    res = subprocess.run(
        [sys.executable, "-c", _KILLED_SCRIPT, str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 9, res.stderr
    assert not (tmp_path / "traces.jsonl").exists()  # the root never ended
    journals = list(tmp_path.glob(".traces.jsonl.*.part"))
    assert len(journals) == 1
    runs = make_traces(tmp_path, "ainvoke")  # the resumed run: its tracer recovers the journal first
    assert not list(tmp_path.glob(".traces.jsonl.*.part"))
    by_id = check_tree(runs)
    roots = [r for r in runs if r["parent_run_id"] is None]
    assert len(roots) == 2 and [r["name"] for r in roots] == ["society", "society"]
    first = roots[0]
    assert runs[0]["id"] == first["id"]  # the interrupted tree first, parents first
    assert first["status"] == "error" and first["error"].startswith("interrupted")
    kids = {r["name"] for r in runs if r["parent_run_id"] == first["id"]}
    assert {"think", "act"} <= kids and "die" not in kids  # finished nodes kept; the running one is lost
    assert any(
        r["run_type"] == "llm" and by_id[r["parent_run_id"]]["name"] == "think" and r["trace_id"] == first["id"]
        for r in runs
    )
    # a second recovery finds nothing to do, and a cut-off last line is dropped before appending
    with open(tmp_path / "traces.jsonl", "a") as fh:
        fh.write('{"id": "cut-off')
    assert JsonlTracer(tmp_path / "traces.jsonl").runs_recovered == 0
    runs2 = make_traces(tmp_path, "invoke")
    check_tree(runs2)
    assert len([r for r in runs2 if r["parent_run_id"] is None]) == 3


# ----------------------------------------------------------------------------------------
# the package's shape: every name of the former graphs/tracing.py, and the lower-layers rule
FORMER_NAMES = {
    "TRACES_FILE",
    "REDACTED",
    "MAX_ARRAY_ITEMS",
    "MAX_LIST_ITEMS",
    "LIST_KEEP",
    "MAX_MESSAGES",
    "MAX_LINE_CHARS",
    "MAX_STR_CHARS",
    "MAX_DEPTH",
    "INTERRUPTED",
    "to_jsonable",
    "secret_values",
    "is_secret_key",
    "scrub",
    "safe_value",
    "fit_line",
    "JsonlTracer",
    "journal_path",
    "recover_interrupted",
    "live_tracing_enabled",
    "scrubbing_client",
    "tracing_callbacks",
    "TraceFileError",
    "ExportError",
    "ExportConfigError",
    "traces_path",
    "load_runs",
    "export_traces",
}


def test_package_re_exports_every_former_name():
    assert FORMER_NAMES <= set(tracing.__all__)
    assert all(hasattr(tracing, n) for n in tracing.__all__)


def test_tracing_imports_no_higher_layer():
    """graphs/ is a lower layer: importing the tracing package loads no task, agent, eval or
    sandbox module."""
    import subprocess
    import sys

    code = (
        "import sys, cooplab.graphs.tracing; "
        "print(sorted(m for m in sys.modules if m.startswith(('cooplab.tasks', 'cooplab.agents', "
        "'cooplab.evals', 'cooplab.sandbox'))))"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"


# ----------------------------------------------------------------------------------------
# a round's node runs grouped under one "round N" run
_ROUNDS_SCRIPT = r"""
import os, sys
from typing import Any, TypedDict
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langgraph.graph import END, START, StateGraph
from cooplab.graphs.tracing import tracing_callbacks

class S(TypedDict, total=False):
    round: int
    x: Any

def act(state):
    FakeListChatModel(responses=["harvest 3"]).invoke("How much?")
    return {"x": state["round"]}

def settle(state):
    if state["round"] == int(sys.argv[2]):
        os._exit(9)  # killed in this round's last node (kill -9: no callback, no flush)
    return {"round": state["round"] + 1}

g = StateGraph(S)
g.add_node("act", act); g.add_node("settle", settle)
g.add_edge(START, "act"); g.add_edge("act", "settle")
g.add_conditional_edges("settle", lambda s: END if s["round"] > 3 else "act", ["act", END])
g.compile(name="society").invoke({"round": 1, "x": 0}, {"callbacks": tracing_callbacks(sys.argv[1]), "metadata": {"session_id": "S1"}})
"""  # noqa: E501 (text kept verbatim)


def _rounds_run(tmp_path: Path, kill_in: int) -> subprocess.CompletedProcess:
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-c", _ROUNDS_SCRIPT, str(tmp_path), str(kill_in)], capture_output=True, text=True, timeout=120
    )


def test_the_nodes_of_a_round_are_grouped_under_a_round_run(tmp_path):
    assert _rounds_run(tmp_path, 0).returncode == 0
    runs = load_runs(tmp_path, validate=True)
    by_id = check_tree(runs)
    root = next(r for r in runs if r["parent_run_id"] is None)
    groups = [r for r in runs if r["parent_run_id"] == root["id"]]
    assert [g["name"] for g in groups] == ["round 1", "round 2", "round 3"]  # the root's only children
    for n, g in enumerate(groups, 1):
        kids = [r for r in runs if r["parent_run_id"] == g["id"]]
        assert [k["name"] for k in kids] == ["act", "settle"] and all(k["inputs"]["round"] == n for k in kids)
        assert g["start_time"] == kids[0]["start_time"] and g["end_time"] == max(k["end_time"] for k in kids)
        assert g["status"] == "success" and g["run_type"] == "chain" and f"round:{n}" in g["tags"]
        assert g["extra"]["metadata"]["session_id"] == "S1" and g["extra"]["metadata"]["round"] == n
    llm = [r for r in runs if r["run_type"] == "llm"]
    assert len(llm) == 3 and all(
        by_id[by_id[r["parent_run_id"]]["parent_run_id"]]["name"].startswith("round ") for r in llm
    )


def test_a_run_killed_mid_round_recovers_its_finished_rounds_and_the_open_one_as_interrupted(tmp_path):
    assert _rounds_run(tmp_path, 2).returncode == 9
    runs = make_traces(tmp_path, "ainvoke")  # the next tracer on the file recovers the journal first
    check_tree(runs)
    first = next(r for r in runs if r["parent_run_id"] is None)
    groups = {r["name"]: r for r in runs if r["parent_run_id"] == first["id"]}
    assert set(groups) == {"round 1", "round 2"}
    assert groups["round 1"]["status"] == "success" and groups["round 2"]["status"] == "error"
    assert groups["round 2"]["error"].startswith("interrupted")
    assert [r["name"] for r in runs if r["parent_run_id"] == groups["round 2"]["id"]] == ["act"]  # settle never ended


def test_round_runs_export_to_langsmith_parents_first_with_the_run_s_thread(tmp_path, fake_langsmith):
    assert _rounds_run(tmp_path, 0).returncode == 0
    runs = load_runs(tmp_path, validate=True)
    assert export_traces(tmp_path, endpoint=fake_langsmith.url, api_key="k-0123456789", project="p") == len(runs)
    posted = fake_langsmith.batch_posts()
    pos = {p["id"]: i for i, p in enumerate(posted)}
    rounds = [p for p in posted if p["name"].startswith("round ")]
    assert len(rounds) == 3 and all(p["extra"]["metadata"]["session_id"] == "S1" for p in rounds)
    for p in posted:
        if p.get("parent_run_id"):
            assert pos[p["parent_run_id"]] < pos[p["id"]]


def test_a_flush_mid_round_writes_each_round_run_once_and_the_tree_stays_whole(tmp_path):
    tracer = JsonlTracer(tmp_path / "traces.jsonl")

    class S(TypedDict, total=False):
        round: int

    def act(state):
        if state["round"] == 2:
            tracer.flush()  # e.g. before an abrupt stop: round 1 and round 2 so far are written
        return {}

    def settle(state):
        return {"round": state["round"] + 1}

    g = StateGraph(S)
    g.add_node("act", act)
    g.add_node("settle", settle)
    g.add_edge(START, "act")
    g.add_edge("act", "settle")
    g.add_conditional_edges("settle", lambda s: END if s["round"] > 3 else "act", ["act", END])
    g.compile(name="society").invoke({"round": 1}, {"callbacks": [tracer]})
    runs = load_runs(tmp_path, validate=True)
    check_tree(runs)
    groups = [r["name"] for r in runs if r["name"].startswith("round ")]
    assert sorted(groups) == ["round 1", "round 2", "round 3"]
    root = next(r for r in runs if r["parent_run_id"] is None)
    assert root["status"] == "success"
