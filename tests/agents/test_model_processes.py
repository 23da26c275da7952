"""Model processes (``--model-processes``, agents/model_processes.py): a society's model calls made by worker
processes give the run of one process (decisions, ledger, traces, error lines), against a real OpenAI-compatible
server on loopback; a worker that dies fails its calls as retryable; bad values are one line."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

import pandas as pd
import pytest
from langchain_core.messages import AIMessage, HumanMessage

import cooplab
from cooplab.agents import model_processes as mp
from cooplab.agents.models import ModelSpec, ScriptedChatModel, make_chat_model, parse_model_spec
from cooplab.agents.models.errors import FailureFacts, RemoteFailure, TransientModelError

from .misbehaving_server import MisbehavingServer, Reply, completion
from .test_llm_budget import one_line, run, server_run, summary_of

ROOT = Path(__file__).resolve().parents[2]
CAUTIOUS = ROOT / "examples" / "scripted" / "cautious.json"


@pytest.fixture
def counted(monkeypatch):
    """How many calls the run's model processes were sent (the pool's own count, kept after it closes)."""
    sent = {"calls": 0}
    real = mp.ModelProcesses.call

    async def call(self, spec, messages, kwargs):
        sent["calls"] += 1
        return await real(self, spec, messages, kwargs)

    monkeypatch.setattr(mp.ModelProcesses, "call", call)
    return sent


def _llm_runs(out: Path) -> list[tuple]:
    """The trace's model calls, as what a reader sees of each, sorted: name, call id, inputs, the answer, parameters."""
    found = []
    for line in (out / "traces.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec["run_type"] != "llm":
            continue
        meta = rec["extra"].get("metadata", {})
        generation = rec["outputs"]["generations"][0][0]
        answer = generation["message"]["kwargs"]
        found.append(
            (
                rec["name"],
                meta.get("call_id"),
                json.dumps(rec["inputs"], sort_keys=True),
                answer.get("content"),
                json.dumps(answer.get("usage_metadata"), sort_keys=True),
                json.dumps(answer.get("response_metadata"), sort_keys=True),
                json.dumps(generation.get("generation_info"), sort_keys=True),
                json.dumps(rec["outputs"].get("llm_output"), sort_keys=True),
                json.dumps(rec["extra"].get("invocation_params"), sort_keys=True),
                rec.get("error"),
            )
        )
    return sorted(found, key=lambda r: (r[1] or "", r[0]))


def _run_both(tmp_path, capsys, mode, *more, script=(), agents=2):
    """The same run with 0 and with 2 model processes against one server (a model's call ids name its server),
    its ``script`` replayed for each: per variant the exit code, stderr (the run folder's name made the same),
    the run folder and the requests the server read."""
    results = {}
    with MisbehavingServer(mode) as srv:
        for n in (0, 2):
            srv.script, before = list(script), len(srv.requests)
            out = tmp_path / f"p{n}" / "run"
            code, _, err = run(server_run(srv.url, out, "--model-processes", n, *more, agents=agents), capsys)
            results[n] = (code, err.replace(str(out), "RUN"), out, len(srv.requests) - before)
    return results


def test_a_society_gets_the_same_run_from_model_processes(tmp_path, capsys, counted):
    results = _run_both(tmp_path, capsys, "ok", agents=4)
    (c0, e0, out0, r0), (c2, e2, out2, r2) = results[0], results[2]
    assert c0 == c2 == 0, (e0, e2)
    s0, s2 = summary_of(out0), summary_of(out2)
    calls = s0["ledger"]["calls"]
    assert calls == r0 == r2 > 0
    assert counted["calls"] == calls  # every call of the two-process run went through a worker, none of the other's
    assert json.loads((out2 / "config.json").read_text())["llm"]["model_processes"] == 2
    assert {k: v for k, v in s0.items() if k != "wall_seconds"} == {k: v for k, v in s2.items() if k != "wall_seconds"}
    d0, d2 = (pd.read_parquet(o / "decisions.parquet").drop(columns=["latency"]) for o in (out0, out2))
    pd.testing.assert_frame_equal(d0, d2)
    l0, l2 = (pd.read_parquet(o / "ledger.parquet").sort_values("call_id").reset_index(drop=True) for o in (out0, out2))
    pd.testing.assert_frame_equal(l0, l2)
    t0, t2 = _llm_runs(out0), _llm_runs(out2)
    assert len(t0) == calls and t0 == t2  # the trace reads as the one-process run's: the model's own name and labels


@pytest.mark.parametrize(
    "mode, script",
    [
        ("ok", ["500", "502_empty", "not_json"]),  # transient, fewer than a call's attempts: retried, then answered
        ("ok", ["401"]),  # permanent: the run stops at once, with the same line
        ("not_json", []),  # malformed every time: the same line after the same retries
    ],
)
def test_a_failing_server_reads_the_same_through_model_processes(mode, script, tmp_path, capsys, fast_backoff):
    results = _run_both(tmp_path, capsys, mode, script=script)
    (c0, e0, out0, r0), (c2, e2, out2, r2) = results[0], results[2]
    assert (c0, e0) == (c2, e2)
    if c0 != 0:
        assert "model openai:x" in one_line(e2)
    else:  # which call met which failure depends on timing, in one process too: the totals do not
        assert r0 == r2 == summary_of(out0)["ledger"]["calls"] + len(script)
    assert summary_of(out0)["status"] == summary_of(out2)["status"]
    assert summary_of(out0)["ledger"] == summary_of(out2)["ledger"]


def test_a_call_timeout_stops_the_workers_call_too(tmp_path, capsys, fast_backoff):
    """Each attempt is cut in the run's process at the call timeout, and the worker drops it: the server sees
    its client go every time (a worker that kept reading would take the whole trickled body)."""
    body = b" " * 5000 + json.dumps(completion()).encode()  # valid JSON, if it ever ends (minutes at this pace)
    out = tmp_path / "run"
    with MisbehavingServer(lambda r: Reply(200, body, trickle=0.05)) as srv:
        code, _, err = run(
            server_run(srv.url, out, "--call-timeout", "0.5", "--model-processes", "2", rounds=1), capsys
        )
        requests = len(srv.requests)
        deliveries = srv.wait_deliveries(requests)
    assert code == 1
    assert "no complete answer within the call timeout of 0.5 s, 5 times" in one_line(err)
    assert summary_of(out)["status"] == "stopped"
    # a request the client gave up on before sending it never reaches the server (tests/providers): at least one
    assert requests >= 1 and len(deliveries) == requests and not any(d.complete for d in deliveries)


def test_a_cancelled_call_is_dropped_by_its_worker(monkeypatch):
    """A call cancelled in the run's process (its call timeout, a stopped run) is cancelled in the worker: the
    server sees its client go while the worker lives on."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # the worker's environment is this one's
    body = b" " * 5000 + json.dumps(completion()).encode()
    with MisbehavingServer(lambda r: Reply(200, body, trickle=0.05)) as srv:
        spec = parse_model_spec("openai:x", base_url=srv.url)

        async def scenario():
            pool = mp.ModelProcesses(1)
            try:
                call = asyncio.ensure_future(pool.call(spec, [HumanMessage("hi")], {}))
                while not srv.requests:  # the worker has sent it
                    await asyncio.sleep(0.01)
                call.cancel()
                deliveries = await asyncio.to_thread(srv.wait_deliveries, 1, 30)
                return deliveries, pool.pids
            finally:
                pool.close()

        deliveries, pids = asyncio.run(scenario())
    assert len(deliveries) == 1 and not deliveries[0].complete and deliveries[0].sent < len(body)
    assert len(pids) == 1  # the worker was still running when the server saw the client go


def _script(path: Path) -> Path:
    path.write_text(
        json.dumps({"by_phase": {"slow": [{"text": "late", "delay": 120}], "fast": ["quick"]}, "select": "prompt_hash"})
    )
    return path


def test_a_worker_that_dies_fails_its_calls_as_retryable_and_is_started_again(tmp_path):
    spec = parse_model_spec(f"scripted:{_script(tmp_path / 'm.json')}")

    async def scenario():
        pool = mp.ModelProcesses(1)
        try:
            slow = asyncio.ensure_future(pool.call(spec, [HumanMessage("wait")], {"phase": "slow"}))
            while not pool.pids:  # the worker is started by the call
                await asyncio.sleep(0.01)
            first = pool.pids[0]
            os.kill(first, signal.SIGKILL)
            with pytest.raises(
                TransientModelError, match="model process: the worker process (exited|stopped answering)"
            ):
                await slow
            generation, _ = await pool.call(spec, [HumanMessage("now")], {"phase": "fast"})
            return generation.message.content, first, pool.pids, pool.started
        finally:
            pool.close()

    content, first, pids, started = asyncio.run(scenario())
    assert content == "quick" and started == 2 and pids and pids[0] != first


def test_close_ends_the_workers_and_a_failure_keeps_its_kind(tmp_path):
    from cooplab.agents.calls import EndpointFailure, ScriptedAdapter, endpoint_failure, failure_message

    spec = parse_model_spec(f"scripted:{_script(tmp_path / 'm.json')}")

    async def scenario():
        pool = mp.ModelProcesses(2)
        answers = await asyncio.gather(*(pool.call(spec, [HumanMessage(str(i))], {"phase": "fast"}) for i in range(50)))
        pids = pool.pids
        with pytest.raises(RemoteFailure) as e:  # a phase the script lacks: a refusal, as in this process
            await pool.call(spec, [HumanMessage("x")], {"phase": "nowhere"})
        pool.close()
        return answers, pids, e.value

    answers, pids, remote = asyncio.run(scenario())
    assert [g.message.content for g, _ in answers] == ["quick"] * 50 and len(pids) == 2
    model = make_chat_model(spec)
    with pytest.raises(EndpointFailure) as here:
        asyncio.run(ScriptedAdapter(spec, model).invoke(_request(spec, model, "nowhere")))
    original = here.value.cause  # the adapter's classification in this process
    assert endpoint_failure(remote) == endpoint_failure(original) == "permanent"
    for attempts in (None, 1, 5):
        assert failure_message(spec, remote, attempts) == failure_message(spec, original, attempts)
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def _request(spec, model, phase):
    from cooplab.agents.calls import Request, ScriptedAdapter

    adapter = ScriptedAdapter(spec, model)
    return Request(spec, adapter, model, "0" * 64, [HumanMessage("x")], {"phase": phase}, 10, 10, "0:0", 1, phase)


def test_what_moves_to_a_model_process(tmp_path):
    hashed = parse_model_spec(f"scripted:{CAUTIOUS}")
    assert mp.sendable(hashed, make_chat_model(hashed))
    ordered = tmp_path / "ordered.json"
    ordered.write_text(json.dumps({"answers": ['{"effort": 0.1}', '{"effort": 0.2}']}))
    spec = parse_model_spec(f"scripted:{ordered}")
    assert not mp.sendable(spec, make_chat_model(spec))  # its answers follow the calls' order: one counter
    single = tmp_path / "single.json"
    single.write_text(json.dumps({"answers": ['{"effort": 0.1}']}))
    spec = parse_model_spec(f"scripted:{single}")
    assert mp.sendable(spec, make_chat_model(spec))
    once = tmp_path / "once.json"
    once.write_text(json.dumps({"answers": ['{"effort": 0.1}'], "cycle": False}))  # answers once: one counter
    spec = parse_model_spec(f"scripted:{once}")
    assert not mp.sendable(spec, make_chat_model(spec))
    openai = parse_model_spec("openai:gpt-4o-mini", base_url="http://127.0.0.1:9/v1")
    assert mp.sendable(openai, object())
    assert not mp.sendable(parse_model_spec("local"), object())  # it has its own process already
    assert not mp.sendable(ModelSpec("builtin", "science-oracle"), object())  # registered in Python, maybe only here
    obj = ScriptedChatModel(answers=['{"effort": 0.1}'])
    label = cooplab.agents.instances.register(obj)
    assert not mp.sendable(parse_model_spec(label), obj)  # an object from Python stays where it was made


def test_in_a_notebooks_running_loop_a_run_uses_model_processes(tmp_path, counted):
    async def cell():
        return cooplab.run(
            task="cpr",
            out=tmp_path / "run",
            agents="llm",
            model=f"scripted:{CAUTIOUS}",
            model_processes=2,
            cache="off",
            n_agents=3,
            rounds=2,
        )

    result = asyncio.run(cell())
    assert result.summary.status == "completed"
    assert counted["calls"] == result.summary.ledger.calls > 0


@pytest.mark.parametrize("bad", ["-1", "65", "two", "1.5", "nan"])
def test_a_bad_model_processes_value_is_one_line_before_any_work(bad, tmp_path, capsys):
    out = tmp_path / "run"
    code, _, err = run(server_run("http://127.0.0.1:9/v1", out, "--model-processes", bad), capsys)
    assert code == 2 and "--model-processes" in one_line(err)
    assert not out.exists()


class _Planted:
    """What a frame written by anything but a worker might hold: a call of ``target`` on loading."""

    def __init__(self, target, *args):
        self.target, self.args = target, args

    def __reduce__(self):
        return (self.target, self.args)


@pytest.mark.parametrize(
    "planted",
    [
        _Planted(os.system, "echo planted"),  # a function
        _Planted(mp.ModelProcesses, 2),  # a class of cooplab's whose making does something
        _Planted(eval, "1 + 1"),  # a builtin function
    ],
)
def test_a_frame_is_data_never_code(planted):
    import pickle

    with pytest.raises(pickle.UnpicklingError, match="which no frame may hold"):
        mp._loads(pickle.dumps(planted))
    answer = AIMessage(content="x", usage_metadata={"input_tokens": 1, "output_tokens": 1, "total_tokens": 2})
    failure = RemoteFailure("HTTP 500", True, FailureFacts(500, "HTTP 500", None, None, "why"))
    assert mp._loads(pickle.dumps((True, 1, answer))) == (True, 1, answer)
    back = mp._loads(pickle.dumps(failure))
    assert (str(back), back.transient, back.facts) == ("HTTP 500", True, failure.facts)


def test_an_answer_holding_an_sdks_own_objects_arrives_as_plain_text():
    """A provider's metadata may hold its SDK's types (Gemini's safety ratings are enums of google.genai),
    which no frame may hold: the worker sends their text, and the call succeeds."""
    import enum

    from langchain_core.outputs import ChatGeneration

    class Harm(enum.Enum):  # a type of a module no frame may name, as an SDK's would be
        LOW = "HARM_PROBABILITY_LOW"

    msg = AIMessage(content="ok", response_metadata={"safety": [{"probability": Harm.LOW}]})
    generation = ChatGeneration(message=msg, generation_info={"finish_reason": "STOP", "rating": Harm.LOW})
    _, (back, llm_output) = mp._loads(mp._pickled_answer((generation, {"model": Harm.LOW})))
    assert back.message.content == "ok" and back.text == "ok"
    assert back.message.response_metadata == {"safety": [{"probability": "Harm.LOW"}]}
    assert back.generation_info == {"finish_reason": "STOP", "rating": "Harm.LOW"} and llm_output == {
        "model": "Harm.LOW"
    }


def test_a_module_in_the_current_folder_does_not_shadow_the_workers_imports(tmp_path, monkeypatch):
    """The worker starts without the current folder on its import path (``-P``): a ``json.py`` there, which
    would break any import of json, is not read."""
    (tmp_path / "json.py").write_text("raise SystemExit('a json.py of the current folder was imported')\n")
    monkeypatch.chdir(tmp_path)
    spec = parse_model_spec(f"scripted:{_script(tmp_path / 'm.json')}")

    async def scenario():
        pool = mp.ModelProcesses(1)
        try:
            generation, _ = await pool.call(spec, [HumanMessage("hi")], {"phase": "fast"})
            return generation.message.content
        finally:
            pool.close()

    assert asyncio.run(scenario()) == "quick"


def test_a_worker_that_cannot_build_its_model_stops_the_run_with_one_line(tmp_path):
    from cooplab.agents.models.errors import ModelProcessError

    path = _script(tmp_path / "m.json")
    spec = parse_model_spec(f"scripted:{path}")
    path.unlink()  # gone after this process built its model: the worker cannot

    async def scenario():
        pool = mp.ModelProcesses(2)
        try:
            with pytest.raises(ModelProcessError, match="could not build its model") as first:
                await pool.call(spec, [HumanMessage("hi")], {"phase": "fast"})
            started = pool.started
            with pytest.raises(ModelProcessError) as again:  # not started again for every call
                await pool.call(spec, [HumanMessage("hi")], {"phase": "fast"})
            return first.value, again.value, started, pool.started, pool.pids
        finally:
            pool.close()

    first, again, started, after, pids = asyncio.run(scenario())
    assert again is first and started == after == 0 and pids == []
    assert "\n" not in str(first)


def test_a_worker_imports_from_where_this_process_does_but_after_the_interpreters_own(tmp_path, monkeypatch):
    """A folder a notebook added to its import path reaches the workers; the interpreter's own folders (the
    standard library, site-packages) are not put before its standard library, and no empty entry (the
    current folder) is added."""
    import sys
    import sysconfig

    extra = tmp_path / "mine"
    extra.mkdir()
    monkeypatch.syspath_prepend(str(extra))
    monkeypatch.delenv("PYTHONPATH", raising=False)
    paths = mp._worker_env()["PYTHONPATH"].split(os.pathsep)
    assert paths[0] == str(extra) and "" not in paths
    assert sysconfig.get_paths()["purelib"] not in paths and sysconfig.get_paths()["stdlib"] not in paths
    assert all(Path(p).is_dir() for p in paths), paths
    assert sys.prefix not in paths
