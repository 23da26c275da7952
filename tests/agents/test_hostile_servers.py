"""What a hostile OpenAI-compatible server sends cannot break a run: text that is not UTF-8 text,
a body that never ends, a body too large to hold, answers of another server; and every call a
server was paid for is in the ledger, resumed or not (docs/llm.md, "Hostile servers").

Every test talks to a real chat-completions server on 127.0.0.1 (``misbehaving_server``)."""

from __future__ import annotations

import asyncio
import json
from decimal import Decimal

import pandas as pd
import pytest
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool

from cooplab.agents.cache import CachedResponse, ResponseCache
from cooplab.agents.models import make_chat_model, parse_model_spec
from cooplab.evals.typed import column
from cooplab.graphs.tracing import JsonlTracer

from .misbehaving_server import ANSWER, MisbehavingServer, Reply, completion
from .test_llm_budget import one_line, run, server_run, summary_of

SURROGATE = "\ud800"  # valid in JSON ("\\ud800"), never in UTF-8 text
CLEAN = "\ufffd"


def _with_surrogates(req: dict) -> Reply:
    """A valid answer whose every string carries a lone surrogate: the answer, the id, the model's name."""
    # the character itself in the answer's text, and spelled ("\\ud800") inside the answer's own JSON
    body = completion(content=ANSWER[:-1] + ', "note": "' + SURROGATE + '", "spelled": "\\ud800"}')
    body.update(id="chatcmpl-" + SURROGATE, model="x" + SURROGATE, system_fingerprint="fp" + SURROGATE)
    return Reply(200, json.dumps(body).encode())  # ensure_ascii: the body spells "\ud800"


# --- item 3: lone surrogates --------------------------------------------------------------------
def test_lone_surrogates_in_answers_and_ids_neither_crash_a_run_nor_lose_its_trace(tmp_path, capsys):
    out, cache = tmp_path / "run", tmp_path / "cache.sqlite"
    with MisbehavingServer(_with_surrogates) as srv:
        args = [str(cache) if a == "off" else str(a) for a in server_run(srv.url, out)]
        code, stdout, err = run(args, capsys)
        assert code == 0, err
        assert json.loads(stdout)["status"] == "completed"
        calls = len(srv.requests)
        # every resume of the finished run works too, and a rerun replays the cached answers
        code, _, err = run(["resume", out, "-q", "--json"], capsys)
        assert code == 0, err
        code, _, err = run([a if a != str(out) else str(tmp_path / "again") for a in args], capsys)
        assert code == 0, err
        assert len(srv.requests) == calls > 0
    d = pd.read_parquet(out / "decisions.parquet")
    assert column(d, "raw").str.contains(CLEAN).all() and not column(d, "fallback_used").any()
    lines = (out / "traces.jsonl").read_bytes().decode("utf-8").splitlines()  # strict UTF-8
    assert lines and not list(out.glob(".traces.jsonl.*.part"))
    llm_runs = [r for r in map(json.loads, lines) if r["run_type"] == "llm"]
    assert len(llm_runs) == calls
    assert all(CLEAN in json.dumps(r["outputs"], ensure_ascii=False) for r in llm_runs)
    assert SURROGATE not in (out / "traces.jsonl").read_text(encoding="utf-8")


def test_a_lone_surrogate_in_an_error_text_gives_one_clean_line(tmp_path, capsys, fast_backoff):
    out = tmp_path / "run"
    body = json.dumps({"error": {"message": "no such key " + SURROGATE, "type": "invalid_request_error"}}).encode()
    with MisbehavingServer(lambda r: Reply(401, body)) as srv:
        code, stdout, err = run(server_run(srv.url, out), capsys)
    line = one_line(err)
    assert code == 1 and "HTTP 401" in line and SURROGATE not in line
    s = summary_of(out)
    assert s["status"] == "stopped" and SURROGATE not in s["message"]


def test_tool_calls_with_lone_surrogates_arrive_clean():
    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    call = {
        "id": "call_" + SURROGATE,
        "type": "function",
        "function": {"name": "add", "arguments": json.dumps({"a": 1, "b": 2, "note": SURROGATE})},
    }
    body = completion(
        content="thinking " + SURROGATE, message={"role": "assistant", "content": None, "tool_calls": [call]}
    )
    with MisbehavingServer(lambda r: Reply(200, json.dumps(body).encode())) as srv:
        model = make_chat_model(parse_model_spec("openai:x", base_url=srv.url)).bind_tools([add])
        msg = asyncio.run(model.ainvoke([HumanMessage("add 1 and 2")]))
    assert msg.tool_calls[0]["args"] == {"a": 1, "b": 2, "note": CLEAN} and msg.tool_calls[0]["id"] == "call_" + CLEAN
    json.dumps(msg.model_dump(), ensure_ascii=False).encode("utf-8")  # any writer takes it


def test_json_inside_answers_is_cleaned_too():
    from cooplab.agents.decisions import parse_json

    assert parse_json('{"belief": "fish less \\ud800", "pair": "\\ud83d\\ude00"}') == {
        "belief": "fish less " + CLEAN,
        "pair": "\U0001f600",
    }
    with pytest.raises(ValueError, match="nested too deeply"):
        parse_json("[" * 100_000 + "]" * 100_000)


def test_writers_take_lone_surrogates(tmp_path):
    """Defence behind the edge: the cache, the tracer and the run directory's writers never raise on one."""
    from cooplab.graphs.rundir import read_json, write_json, write_table

    cache = ResponseCache(tmp_path / "c.sqlite")
    cache.put("k", CachedResponse("a" + SURROGATE, 1, 2, 0.1, "bad " + SURROGATE), "m" + SURROGATE)
    hit = cache.get("k")
    assert hit is not None and hit.text == "a" + CLEAN and cache.write_errors == 0
    write_json(tmp_path / "s.json", {"k" + SURROGATE: ["v" + SURROGATE]})
    assert read_json(tmp_path / "s.json") == {"k" + CLEAN: ["v" + CLEAN]}
    write_table(pd.DataFrame({"raw": ["x" + SURROGATE]}, dtype=object), tmp_path, "t")
    assert pd.read_parquet(tmp_path / "t.parquet")["raw"].tolist() == ["x" + CLEAN]

    from langchain_core.runnables import RunnableLambda

    tracer = JsonlTracer(tmp_path / "traces.jsonl")

    def step(x: str) -> dict:
        return {"answer": x + SURROGATE}

    RunnableLambda(step, name="step").invoke("q" + SURROGATE, {"callbacks": [tracer]})
    rec = json.loads((tmp_path / "traces.jsonl").read_bytes().decode("utf-8"))
    assert rec["outputs"] == {"answer": "q" + CLEAN + CLEAN} and not list(tmp_path.glob(".traces.jsonl.*.part"))


def test_table_writers_take_lone_surrogates_in_records_nested_values_and_column_names(tmp_path):
    """pandas refuses a lone surrogate when a frame of text columns is made: the writers clean the
    records themselves, and the strings inside a cell's lists and dicts (issue 37.4)."""
    from cooplab.graphs.rundir import frame, write_jsonl, write_table

    rows = [{"raw": "x" + SURROGATE, "parsed": {"k" + SURROGATE: ["v" + SURROGATE]}, "n" + SURROGATE: 1}]
    for csv in (False, True):
        path = write_table(rows, tmp_path, "decisions", csv=csv)
        back = pd.read_csv(path) if csv else pd.read_parquet(path)
        assert back["raw"].tolist() == ["x" + CLEAN] and list(back.columns)[2] == "n" + CLEAN
    assert frame(rows)["parsed"].tolist() == [{"k" + CLEAN: ["v" + CLEAN]}]
    nested = pd.DataFrame({"turns": [["a" + SURROGATE, "b"]], "meta": [{"who": "c" + SURROGATE}]}, dtype=object)
    write_table(nested, tmp_path, "nested")
    back = pd.read_parquet(tmp_path / "nested.parquet")
    assert list(column(back, "turns").iloc[0]) == ["a" + CLEAN, "b"]
    assert column(back, "meta").iloc[0] == {"who": "c" + CLEAN}
    write_jsonl(tmp_path / "messages.jsonl", rows)
    assert json.loads((tmp_path / "messages.jsonl").read_bytes().decode("utf-8"))["parsed"] == {
        "k" + CLEAN: ["v" + CLEAN]
    }


# --- item 4: a wall-clock bound on every call ---------------------------------------------------
def test_a_server_trickling_its_answer_is_cut_at_the_call_timeout(tmp_path, capsys, fast_backoff):
    """One byte every 50 ms of a body that would take minutes to arrive: the per-read timeout never
    fires, the call timeout does, every attempt, and the run stops cleanly with one line."""
    body = (
        b" " * 5000 + json.dumps(completion()).encode()
    )  # JSON may start with blanks: a valid answer, if it ever ends
    out = tmp_path / "run"
    with MisbehavingServer(lambda r: Reply(200, body, trickle=0.05)) as srv:
        code, stdout, err = run(server_run(srv.url, out, "--call-timeout", "0.5", rounds=1), capsys)
        requests = len(srv.requests)
        deliveries = srv.wait_deliveries(requests)  # each ends when the server finds its client gone
    line = one_line(err)
    assert code == 1 and stdout == ""
    assert "no complete answer within the call timeout of 0.5 s, 5 times" in line and "cooplab resume" in line
    s = summary_of(out)
    assert s["status"] == "stopped" and s["ledger"]["calls"] == 0
    # both calls of the first phase, 1 + 4 retries each; the client gave up on every delivery
    assert requests == 2 * 5
    assert len(deliveries) == requests and not any(d.complete for d in deliveries)
    assert all(d.sent < len(body) for d in deliveries)


def test_a_server_that_sends_its_headers_then_nothing_stops_the_run_at_the_call_deadline(tmp_path, capsys):
    """Issue 38, item 10: the headers of a 200, then silence. With the default call timeout (300 s)
    and a small call deadline, each call's first attempt is cut at the deadline and no retry starts:
    the run stops with one line naming the stalled server (host:port), the model and how long."""
    out = tmp_path / "run"
    srv = MisbehavingServer()

    def headers_then_nothing(req: dict) -> Reply:
        def body():  # a chunked body whose first chunk never comes (until the server stops)
            srv.release.wait(120)
            yield from ()

        return Reply(200, chunks=body())

    srv.mode = headers_then_nothing
    with srv:
        code, stdout, err = run(server_run(srv.url, out, "--call-deadline", "1.5", rounds=1), capsys)
        requests = len(srv.requests)
    line = one_line(err)
    port = srv.httpd.server_address[1]
    assert code == 1 and stdout == ""
    assert (
        f"model openai:x at 127.0.0.1:{port} stalled: no complete answer within the call deadline of 1.5 s (1 attempt "
        "in " in line
    )
    assert "raise --call-deadline" in line and "cooplab resume" in line
    s = summary_of(out)
    assert s["status"] == "stopped" and "stalled" in s["message"] and s["ledger"]["calls"] == 0
    # the first phase's two calls, one attempt each: the retries (4 per call) never started
    assert requests == 2 < 2 * 5


@pytest.mark.parametrize("bad", ["0", "-1", "nan", "inf", "86401"])
def test_a_bad_call_deadline_is_one_line_before_any_work(bad, tmp_path, capsys):
    out = tmp_path / "run"
    code, _, err = run(server_run("http://127.0.0.1:9/v1", out, "--call-deadline", bad), capsys)
    assert code == 2 and "--call-deadline must be" in one_line(err) and not out.exists()


@pytest.mark.parametrize("bad", ["0", "-1", "nan", "inf", "86401"])
def test_a_bad_call_timeout_is_one_line_before_any_work(bad, tmp_path, capsys):
    out = tmp_path / "run"
    code, _, err = run(server_run("http://127.0.0.1:9/v1", out, "--call-timeout", bad), capsys)
    assert code == 2 and "--call-timeout must be" in one_line(err) and not out.exists()


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), 10**9, "10", True])
def test_a_bad_call_timeout_in_a_config_file_is_one_line(bad):
    from cooplab.agents.settings import LLMSettings
    from cooplab.limits import ConfigError, in_file, validate

    with pytest.raises(ConfigError, match=r"^sweep x.json: llm.call_timeout must be") as e:
        validate(LLMSettings, {"call_timeout": bad}, in_file("sweep x.json", "llm"), strict=False)
    assert "\n" not in str(e.value)


# --- item 5: a cap on what is read and stored ----------------------------------------------------
HUGE = 300 * 2**20  # the 300 MB answers
BUFFERS = 32 * 2**20  # more than the socket buffers between the server and the client can hold


def _huge_answer(status: int = 200, declared: bool = False):
    """A chat completion whose answer is ``HUGE`` bytes of 'x', made chunk by chunk as it is sent."""
    head, tail = (
        b'{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"',
        b'"}}]}',
    )
    block = b"x" * 2**16

    def reply(req: dict) -> Reply:
        chunks = (
            head if i < 0 else tail if i == HUGE // len(block) else block for i in range(-1, HUGE // len(block) + 1)
        )
        return Reply(status, chunks=chunks, declared_length=len(head) + HUGE + len(tail) if declared else None)

    return reply


@pytest.mark.parametrize(
    "status,declared,says",
    [
        (200, False, "cooplab stopped reading it"),
        (200, True, "bytes, more than the"),
        (500, False, "cooplab stopped reading it"),
    ],
)
def test_a_huge_body_is_not_read_past_its_cap(status, declared, says, tmp_path, capsys, fast_backoff):
    out = tmp_path / "run"
    with MisbehavingServer(_huge_answer(status, declared)) as srv:
        code, stdout, err = run(server_run(srv.url, out, rounds=1), capsys)
        requests = len(srv.requests)
        deliveries = srv.wait_deliveries(requests)  # each ends when the client hangs up
    line = one_line(err)
    assert code == 1 and stdout == "" and "returned malformed responses 5 times" in line and says in line
    s = summary_of(out)
    assert s["status"] == "stopped" and s["ledger"]["calls"] == 0
    assert requests == 2 * 5 and not any(d.complete for d in deliveries)
    assert max(d.sent for d in deliveries) < BUFFERS, [d.sent for d in deliveries]  # of 300 MB each
    assert (out / "checkpoints.sqlite").stat().st_size < 2**20


def test_an_answer_longer_than_its_tokens_can_be_is_not_stored(tmp_path, capsys, fast_backoff):
    """Under the body cap (JSON escapes make a body up to 6 times its text) but still impossible for
    64 tokens: refused like any malformed response, and nothing of it reaches the run's files."""
    from cooplab.agents.usage import answer_bytes_bound

    text = "y" * (answer_bytes_bound(64) + 1)
    out = tmp_path / "run"
    with MisbehavingServer(lambda r: Reply(200, json.dumps(completion(content=text)).encode())) as srv:
        code, _, err = run(server_run(srv.url, out, rounds=1), capsys)
    assert code == 1 and "more than 64 tokens can hold" in one_line(err)
    assert summary_of(out)["ledger"]["calls"] == 0
    assert all(text[:1000] not in p.read_bytes().decode("utf-8", "replace") for p in out.rglob("*") if p.is_file())


def test_the_caps_follow_max_tokens():
    from cooplab.agents.usage import answer_bytes_bound, body_bytes_bound

    assert answer_bytes_bound(64) < answer_bytes_bound(65) and body_bytes_bound(64) < 2**20 < body_bytes_bound(1000)
    assert body_bytes_bound(100_000) < HUGE  # even the largest --max-tokens never lets a 300 MB body in


# --- item 6: the cache knows which server answered -----------------------------------------------
def _answering(effort: float):
    return lambda r: Reply(200, json.dumps(completion(content=json.dumps({"effort": effort, "punish": None}))).encode())


def test_the_cache_never_replays_another_servers_answers(tmp_path, capsys):
    cache = tmp_path / "shared.sqlite"

    def cached_run(url: str, name: str) -> pd.DataFrame:
        args = [str(cache) if a == "off" else str(a) for a in server_run(url, tmp_path / name, rounds=1)]
        code, _, err = run(args, capsys)
        assert code == 0, err
        return pd.read_parquet(tmp_path / name / "decisions.parquet")

    with MisbehavingServer(_answering(0.3)) as a, MisbehavingServer(_answering(0.7)) as b:
        first = cached_run(a.url, "a")
        assert len(a.requests) == len(first) > 0
        # the same model name at another server: its own calls, its own answers
        other = cached_run(b.url, "b")
        assert len(b.requests) == len(other) and other["raw"].str.contains("0.7").all()
        # the first server again, spelled another way (scheme in capitals, a trailing slash): replayed
        again = cached_run(a.url.replace("http://", "HTTP://") + "/", "a2")
        assert len(a.requests) == len(first) and again["raw"].str.contains("0.3").all()
        assert column(again, "cached_calls").sum() == len(again)


def test_keys_made_before_the_endpoint_counted_stay_valid_where_it_is_the_default(monkeypatch):
    """The local model, scripted models and OpenAI's own API have no endpoint in their identity:
    their cache keys are those main made (fixed here), so existing caches keep replaying."""
    from cooplab.agents.cache import cache_key
    from cooplab.agents.models import ModelSpec

    for var in ("OPENAI_API_BASE", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)

    def key(spec: ModelSpec) -> str:
        return cache_key(
            model=spec.identity(),
            messages=[("human", "hi")],
            agent="0:0",
            round=1,
            phase="harvest",
            seed=0,
            attempt=0,
            schema=None,
        )

    assert (
        key(ModelSpec("local", "SmolLM2-135M-Instruct-Q4_1.gguf"))
        == "fe6680003e24dfc55d6b9f9014711789f06bdad7300248aded86dbf07c3de189"
    )
    assert key(ModelSpec("openai", "gpt-4o-mini")) == "97c8eb468972d7910df934f9fa1f13a56acb382ef7281bd7abb375ed7cd8aed7"
    assert key(ModelSpec("openai", "gpt-4o-mini", "HTTPS://api.openai.com:443/v1/")) == key(
        ModelSpec("openai", "gpt-4o-mini")
    )
    assert key(ModelSpec("scripted", "a.json")) == "6a1074b6284c413e51ab0a2011def7b77d0be8465ea3dd7fe12288648a365e87"
    # a server named by the environment, as the OpenAI client reads it, is a server of its own
    monkeypatch.setenv("OPENAI_BASE_URL", "http://10.0.0.5:8000/v1")
    assert ModelSpec("openai", "gpt-4o-mini").endpoint() == "http://10.0.0.5:8000/v1"
    assert key(ModelSpec("openai", "gpt-4o-mini")) != "97c8eb468972d7910df934f9fa1f13a56acb382ef7281bd7abb375ed7cd8aed7"


# --- item 12: every paid call is in the ledger, resumed or not ------------------------------------
@pytest.mark.parametrize("cache", ["off", "file"])
@pytest.mark.parametrize("stops", [1, 2])
def test_every_paid_call_is_in_the_ledger_after_resumes(cache, stops, tmp_path, capsys, fast_backoff):
    """The first phase's 2 calls succeed, then of the next phase's 2 one is paid and the other
    fails until the run stops (``stops`` times, resuming in between): the paid call of the failed
    node is in no checkpoint. After the last resume the ledger holds exactly the calls the server
    answered, each as the live call it was; with a cache the resumed node replays it instead of
    paying again, and the ledger equals an uninterrupted run's."""
    out = tmp_path / "run"
    args = [
        str(tmp_path / "cache.sqlite") if a == "off" and cache == "file" else str(a) for a in server_run("URL", out)
    ]
    with MisbehavingServer("500", script=["ok"] * 3) as srv:
        code, _, err = run([srv.url if a == "URL" else a for a in args], capsys)
        assert code == 1 and "HTTP 500" in one_line(err)
        for _ in range(stops - 1):  # one more call paid, one more failing: stopped again
            srv.script = ["ok"] * 2 if cache == "file" else ["ok"]  # with a cache one answer of the node is replayed
            code, _, err = run(["resume", out, "-q", "--json"], capsys)
            assert code == 1 and "HTTP 500" in one_line(err)
        srv.mode = "ok"
        code, stdout, err = run(["resume", out, "-q", "--json"], capsys)
        paid = srv.modes_seen().count("ok")
    assert code == 0, err
    s = json.loads(stdout)
    led = pd.read_parquet(out / "ledger.parquet")
    assert s["status"] == "completed" and s["ledger"]["calls"] == len(led) == paid
    assert s["ledger"]["cached_calls"] == 0 and not column(led, "cached").any()
    per_call = (Decimal(120) * Decimal("0.0005") + Decimal(12) * Decimal("0.003")) / 1000
    assert Decimal(s["ledger"]["cost_usd"]) == paid * per_call
    if cache == "file":  # 2 rounds x 2 phases x 2 agents, each paid once
        assert paid == 8
    else:  # the failed node's paid calls, paid again on resume
        assert paid == 8 + stops
    # a finished run resumed again keeps its ledger
    code, stdout, err = run(["resume", out, "-q", "--json"], capsys)
    assert code == 0 and json.loads(stdout)["ledger"] == s["ledger"]


def test_a_new_run_in_the_same_directory_starts_a_new_journal(tmp_path, capsys):
    out = tmp_path / "run"
    with MisbehavingServer("ok") as srv:
        for extra in ([], ["--force"]):
            code, stdout, err = run(server_run(srv.url, out, *extra), capsys)
            assert code == 0, err
            assert json.loads(stdout)["ledger"]["calls"] == 8
