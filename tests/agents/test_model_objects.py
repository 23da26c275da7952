"""Chat model objects from Python (``model=ChatOpenAI(...)``) and any GGUF file (``local:PATH``)
wherever a model spec string goes."""

from __future__ import annotations

import json
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

import cooplab
from cooplab.agents import instances
from cooplab.agents.models import ModelSpecError, parse_model_spec
from cooplab.agents.models.local import gguf_file, gguf_identity
from cooplab.graphs.rundir import RunDirError
from cooplab.limits import ConfigError

from .misbehaving_server import MisbehavingServer, Reply, completion


def _answering(effort: float):
    return lambda r: Reply(200, json.dumps(completion(content=json.dumps({"effort": effort, "punish": None}))).encode())


def _chat(url: str, **kw) -> ChatOpenAI:
    return ChatOpenAI(model="tiny-fisher", base_url=url, api_key=SecretStr("sk-test"), max_retries=0, **kw)


# --- objects ---------------------------------------------------------------------------------
def test_the_spec_of_an_object_names_its_model_and_changes_with_its_settings():
    a, b = _chat("http://127.0.0.1:9/v1"), _chat("http://127.0.0.1:9/v1")
    assert instances.register(a) == instances.register(b)  # same class and settings: same spec, same cache keys
    spec = instances.register(a)
    assert spec.startswith("instance:tiny-fisher#") and len(spec.rpartition("#")[2]) == 12
    assert instances.register(_chat("http://127.0.0.1:9/v1", temperature=0.1)) != spec
    assert instances.register(_chat("http://127.0.0.1:10/v1")) != spec  # another server
    assert "sk-test" not in spec
    with pytest.raises(TypeError, match="BaseChatModel"):
        instances.register("gpt")


def test_objects_for_two_servers_temperatures_or_context_sizes_never_share_answers():
    """LangChain's own description of a ChatOllama leaves out its server, temperature and context
    size: the identity is built from the class, the endpoint and every field instead."""
    from langchain_ollama import ChatOllama

    def ollama(**kw):
        return instances.register(
            ChatOllama(
                model="fisher", **{"base_url": "http://127.0.0.1:11434", "temperature": 0.2, "num_ctx": 2048, **kw}
            )
        )

    spec = ollama()
    assert ollama() == spec  # same settings, same spec: answers replay
    assert ollama(base_url="HTTP://127.0.0.1:11434/") == spec  # one server, spelled twice
    others = [ollama(base_url="http://127.0.0.1:11435"), ollama(temperature=0.9), ollama(num_ctx=4096), ollama(top_k=5)]
    assert len({spec, *others}) == 5
    assert instances.register(
        _chat("http://127.0.0.1:9/v1", extra_body={"repetition_penalty": 1.1})
    ) != instances.register(_chat("http://127.0.0.1:9/v1"))


class Tuned(BaseChatModel):
    """A user's own chat model class whose settings LangChain's ``_identifying_params`` never sees."""

    endpoint_url: str = "http://127.0.0.1:7000/v1"
    depth: int = 1
    access_token: str = "tok-PRIVATE-0001"

    @property
    def _llm_type(self) -> str:
        return "tuned"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content="{}"))])


def test_a_class_of_ones_own_differs_by_its_own_fields_and_never_shows_a_secret():
    base = instances.register(Tuned())
    assert instances.register(Tuned()) == base
    assert (
        instances.register(Tuned(depth=2)) != base
        and instances.register(Tuned(endpoint_url="http://127.0.0.1:7001/v1")) != base
    )
    assert instances.register(Tuned(access_token="tok-OTHER")) == base  # a secret is masked: it never splits the cache
    text = instances.settings_text(Tuned())
    assert "tok-PRIVATE" not in text and '"depth":1' in text
    secret = ChatOpenAI(
        model="m",
        api_key=SecretStr("sk-SECRET-1"),
        base_url="http://u:pw-SECRET-2@127.0.0.1:9/v1?key=sk-SECRET-3",
        default_headers={"Authorization": "Bearer sk-SECRET-4", "X-Api-Key": "sk-SECRET-5"},
        max_retries=0,
    )
    text = instances.settings_text(secret)
    assert "SECRET" not in text and '"endpoint":"http://127.0.0.1:9/v1?key=%3Csecret%3E"' in text.replace(
        "<secret>", "%3Csecret%3E"
    )
    assert "SECRET" not in instances.register(secret)


def test_an_objects_api_key_is_never_written_to_the_run_or_the_cache(tmp_path):
    with MisbehavingServer(_answering(0.4)) as srv:
        model = ChatOpenAI(
            model="tiny-fisher",
            base_url=srv.url,
            api_key=SecretStr("sk-NEVER-WRITTEN"),
            max_retries=0,
            default_headers={"Authorization": "Bearer sk-NEVER-WRITTEN"},
        )
        run = cooplab.run(
            task="cpr",
            agents="llm",
            model=model,
            n_agents=2,
            rounds=1,
            cache=str(tmp_path / "cache.sqlite"),
            out=tmp_path / "run",
            quiet=True,
        )
        assert run.status == "completed", run.stopped
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "config.json" for p in files) and any(p.name == "cache.sqlite" for p in files)
    assert not [p for p in files if b"sk-NEVER-WRITTEN" in p.read_bytes()]


class Odd(BaseChatModel):
    """A user's chat model class that misbehaves as ``mode`` says (answers a valid effort decision)."""

    mode: str = "ok"
    size: int = 0

    @property
    def _llm_type(self) -> str:
        return "odd"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        answer = json.dumps({"effort": 0.4, "punish": None})
        msg = AIMessage(content=answer, usage_metadata={"input_tokens": 300, "output_tokens": 12, "total_tokens": 312})
        if self.mode == "surrogate":  # as a model reading JSON that spells "\ud800" would hand it on
            msg = AIMessage(
                content=answer + " caf\ud800",
                id="run-\udfff",
                additional_kwargs={"note": "\ud801"},
                response_metadata={"model_name": "odd\ud802"},
                usage_metadata=msg.usage_metadata,
            )
        elif self.mode == "huge":
            msg.content = answer + " " + "x" * self.size
        elif self.mode == "infinite":  # LangChain validates usage when a message is made, not when it is set
            msg.usage_metadata = {"input_tokens": float("inf"), "output_tokens": 12, "total_tokens": float("inf")}  # pyright: ignore[reportAttributeAccessIssue]  # a hostile non-int usage on purpose
        elif self.mode == "zero":
            msg.usage_metadata = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
        return ChatResult(generations=[ChatGeneration(message=msg)])


def _llm_runs(out: Path) -> list[dict]:
    return [
        r
        for r in map(json.loads, (out / "traces.jsonl").read_text(encoding="utf-8").splitlines())
        if r["run_type"] == "llm"
    ]


def test_a_lone_surrogate_in_an_objects_answer_is_replaced_where_it_enters(tmp_path):
    run = cooplab.run(
        task="cpr",
        agents="llm",
        model=Odd(mode="surrogate"),
        n_agents=2,
        rounds=1,
        cache=str(tmp_path / "c.sqlite"),
        out=tmp_path / "run",
        quiet=True,
    )
    assert run.status == "completed", run.stopped
    raw = pd.read_parquet(tmp_path / "run" / "decisions.parquet")["raw"]
    assert raw.str.endswith("caf\ufffd").all() and len(raw) > 0
    assert len(_llm_runs(tmp_path / "run")) == len(run.ledger)
    again = cooplab.resume(
        tmp_path / "run", quiet=True, models=[Odd(mode="surrogate")]
    )  # a finished run resumes without error
    assert again.status == "completed"


def test_an_objects_answer_past_its_size_bound_is_refused_before_anything_stores_it(tmp_path, fast_backoff):
    run = cooplab.run(
        task="cpr",
        agents="llm",
        model=Odd(mode="huge", size=2_000_000),
        n_agents=2,
        rounds=1,
        cache=str(tmp_path / "c.sqlite"),
        out=tmp_path / "run",
        quiet=True,
    )
    assert (
        run.status == "stopped"
        and "more than 64 tokens can hold" in run.stopped
        and "malformed responses 5 times" in run.stopped
    )
    stored = sum(p.stat().st_size for p in tmp_path.rglob("*") if p.is_file())
    assert stored < 1_000_000  # the 2 MB answer is nowhere: not in the cache, the checkpoint or the traces


def test_an_objects_infinite_usage_is_flagged_and_keeps_its_calls_in_the_traces(tmp_path):
    run = cooplab.run(
        task="cpr",
        agents="llm",
        model=Odd(mode="infinite"),
        n_agents=2,
        rounds=1,
        cache="off",
        out=tmp_path / "run",
        quiet=True,
    )
    assert run.status == "completed", run.stopped
    assert len(run.ledger) > 0 and run.ledger["usage_error"].str.contains("prompt tokens is not finite").all()
    assert (run.ledger["output_tokens"] == 64).all()  # charged at the call's bound, as on the HTTP path
    assert len(_llm_runs(tmp_path / "run")) == len(run.ledger)


def test_an_objects_zero_usage_is_charged_an_estimate_and_flagged(tmp_path):
    run = cooplab.run(
        task="cpr",
        agents="llm",
        model=Odd(mode="zero"),
        n_agents=2,
        rounds=1,
        budget=1.0,
        price_in=0.0005,
        price_out=0.003,
        cache="off",
        out=tmp_path / "run",
        quiet=True,
    )
    assert run.status == "completed", run.stopped
    led = run.ledger
    assert len(led) > 0 and led["usage_error"].str.contains("usage implausibly low").all()
    assert (led["input_tokens"] > 100).all() and (led["output_tokens"] > 5).all()
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["ledger"]["usage_errors"] == len(led)


def test_an_unregistered_object_spec_is_one_line():
    with pytest.raises(instances.ModelObjectMissing, match=r"pass the object again.*resume"):
        parse_model_spec("instance:someone-else#0123456789ab")


def test_a_society_runs_on_a_chat_model_object_and_resumes_in_a_new_process(tmp_path):
    with MisbehavingServer(_answering(0.4)) as srv:
        run = cooplab.run(
            task="cpr",
            agents="llm",
            model=_chat(srv.url),
            n_agents=3,
            rounds=2,
            budget=1.0,
            cache=str(tmp_path / "cache.sqlite"),
            out=tmp_path / "run",
            quiet=True,
        )
        assert run.status == "completed", run.stopped
        calls = len(srv.requests)
        assert calls == len(run.ledger) > len(run.decisions) > 0  # every call charged once (learning calls too)
        recorded = json.loads((tmp_path / "run" / "config.json").read_text())["llm"]["model"]
        assert recorded.startswith("instance:tiny-fisher#")
        ledger = run.ledger
        assert set(ledger["model"]) == {recorded}
        # the ledger charged what the server reported (120 in, 12 out per call) at the run's prices
        spent = Decimal(str(ledger["cost_usd_exact"].map(Decimal).sum()))
        assert spent == calls * (Decimal(120) * Decimal("0.0005") + Decimal(12) * Decimal("0.003")) / 1000

        # the same object's settings again: every answer replays from the cache, no request
        again = cooplab.run(
            task="cpr",
            agents="llm",
            model=_chat(srv.url),
            n_agents=3,
            rounds=2,
            budget=1.0,
            cache=str(tmp_path / "cache.sqlite"),
            out=tmp_path / "again",
            quiet=True,
        )
        assert len(srv.requests) == calls and again.decisions["cached_calls"].sum() == calls

    # another process does not hold the object: resuming is one line, exit 2, nothing touched
    before = sorted(p.name for p in (tmp_path / "run").iterdir())
    out = subprocess.run(
        [sys.executable, "-m", "cooplab.cli", "resume", str(tmp_path / "run")], capture_output=True, text=True
    )
    assert out.returncode == 2, out.stderr
    assert "pass the object again" in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == before


def test_per_agent_objects_and_strings_mix(tmp_path):
    with MisbehavingServer(_answering(0.2)) as low, MisbehavingServer(_answering(0.8)) as high:
        run = cooplab.run(
            task="cpr",
            agents="llm",
            model=_chat(low.url),
            agent_models={1: _chat(high.url)},
            n_agents=3,
            rounds=1,
            cache="off",
            out=tmp_path / "mix",
            quiet=True,
        )
        assert run.status == "completed"
        harvest = run.decisions[run.decisions["phase"] == "harvest"]
        by_agent = harvest.groupby("agent")["raw"].first()
        assert "0.8" in by_agent[1] and "0.2" in by_agent[0] and "0.2" in by_agent[2]
        assert len(high.requests) == (run.ledger["agent_id"] == "0:1").sum() > 0
        assert len(low.requests) == (run.ledger["agent_id"] != "0:1").sum() > 0


def test_a_wrong_object_is_one_line_before_any_work(tmp_path):
    with pytest.raises((ConfigError, TypeError), match="BaseChatModel|model"):
        cooplab.run(task="cpr", agents="llm", model=object(), out=tmp_path / "x", quiet=True)
    assert not (tmp_path / "x").exists()


# --- local:PATH.gguf -------------------------------------------------------------------------
def test_local_path_checks_the_file(tmp_path):
    with pytest.raises(ModelSpecError, match="not found"):
        gguf_file(str(tmp_path / "missing.gguf"))
    with pytest.raises(ModelSpecError, match="not a file"):
        gguf_file(str(tmp_path))
    (tmp_path / "fake.gguf").write_bytes(b"PK\x03\x04 not a model")
    with pytest.raises(ModelSpecError, match="not a GGUF file"):
        gguf_file(str(tmp_path / "fake.gguf"))
    with pytest.raises(ModelSpecError, match="needs the path"):
        gguf_file("  ")
    (tmp_path / "tiny.gguf").write_bytes(b"GGUF" + b"\0" * 60)
    spec = parse_model_spec(f"local:{tmp_path / 'tiny.gguf'}")
    assert (spec.kind, spec.name, spec.path) == ("local", "tiny.gguf", str((tmp_path / "tiny.gguf").resolve()))
    # a file of its own is named by its content in cache keys, not by where it lies
    ident = spec.identity()
    assert ident["model"] == "local:tiny.gguf" and len(ident["sha256"]) == 64
    (tmp_path / "moved").mkdir()
    (tmp_path / "tiny.gguf").rename(tmp_path / "moved" / "tiny.gguf")
    assert gguf_identity(str(tmp_path / "moved" / "tiny.gguf"))["sha256"] == ident["sha256"]


def test_a_bad_local_path_is_one_line_exit_2_before_a_run_dir(tmp_path):
    bad = tmp_path / "notes.gguf"
    bad.write_text("hello")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "cooplab.cli",
            "run",
            "cpr",
            "--agents",
            "llm",
            "--model",
            f"local:{bad}",
            "--out",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2 and "not a GGUF file" in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


@pytest.mark.integration
def test_any_gguf_file_runs_a_society_in_the_model_process(tmp_path):
    """A second GGUF made from the shipped one (a copy under another name and folder) proves the
    path: the same llama.cpp build and child process load whatever file ``local:PATH`` names."""
    from cooplab.agents.models.local import local_model_path

    shipped = local_model_path()
    other = tmp_path / "models" / "my-fisher.Q4_1.gguf"
    other.parent.mkdir()
    other.write_bytes(shipped.read_bytes())
    run = cooplab.run(
        task="cpr",
        agents="llm",
        model=f"local:{other}",
        n_agents=2,
        rounds=1,
        max_tokens=48,
        cache=str(tmp_path / "cache.sqlite"),
        out=tmp_path / "run",
        quiet=True,
    )
    assert run.status == "completed", run.stopped
    assert json.loads((tmp_path / "run" / "config.json").read_text())["llm"]["model"] == f"local:{other}"
    assert set(run.ledger["model"]) == {"local:my-fisher.Q4_1.gguf"}
    # same bytes as the shipped model: its answers are the shipped model's, so `local` replays them
    replay = cooplab.run(
        task="cpr",
        agents="llm",
        model="local",
        n_agents=2,
        rounds=1,
        max_tokens=48,
        cache=str(tmp_path / "cache.sqlite"),
        out=tmp_path / "replay",
        quiet=True,
    )
    assert len(replay.ledger) == len(run.ledger) > 0 and replay.ledger["cached"].all()
    pd.testing.assert_series_equal(
        run.decisions["raw"].reset_index(drop=True), replay.decisions["raw"].reset_index(drop=True)
    )


def test_resume_takes_the_objects_again(tmp_path, fast_backoff):
    seen = {"n": 0, "down": True}

    def flaky(req: dict) -> Reply:
        seen["n"] += 1
        if seen["down"] and seen["n"] > 4:
            return Reply(500, b'{"error": {"message": "overloaded"}}')
        return _answering(0.5)(req)

    with MisbehavingServer(flaky) as srv:
        first = cooplab.run(
            task="cpr",
            agents="llm",
            model=_chat(srv.url),
            n_agents=3,
            rounds=2,
            cache="off",
            out=tmp_path / "run",
            quiet=True,
        )
        assert first.status != "completed" and first.stopped
        seen["down"] = False
        instances._REGISTRY.clear()  # as in a new process
        with pytest.raises(RunDirError, match="pass the object again"):
            cooplab.resume(tmp_path / "run", quiet=True)
        done = cooplab.resume(tmp_path / "run", quiet=True, models=[_chat(srv.url)])
        assert done.status == "completed", done.stopped
        assert (done.rounds["round"].max() if "round" in done.rounds else len(done.rounds)) == 2


def test_the_environment_record_names_files_and_objects(tmp_path):
    from cooplab.runs.store import environment

    (tmp_path / "tiny.gguf").write_bytes(b"GGUF" + b"\1" * 60)
    spec = instances.register(_chat("http://127.0.0.1:9/v1"))
    env = environment({"llm": {"model": f"local:{tmp_path / 'tiny.gguf'}", "agent_models": {"1": spec}}})
    rec = env["local_files"][f"local:{tmp_path / 'tiny.gguf'}"]
    assert rec["bytes"] == 64 and len(rec["sha256"]) == 64 and rec["file"].endswith("tiny.gguf")
    assert env["model_objects"][spec] == {
        "class": "langchain_openai.chat_models.base.ChatOpenAI",
        "name": "tiny-fisher",
    }


def test_objects_are_priced_by_their_provider_and_model_name():
    from langchain_anthropic import ChatAnthropic

    from cooplab.agents.models import parse_model_spec as parse
    from cooplab.agents.prices import list_price, price_of

    hosted = parse(instances.register(ChatOpenAI(model="gpt-4o-mini", api_key=SecretStr("sk-x"))))
    assert price_of(hosted) == list_price("openai", "gpt-4o-mini") is not None
    anthropic = ChatAnthropic(model="claude-3-5-haiku-latest", api_key=SecretStr("sk-x"))  # pyright: ignore[reportCallIssue]  # langchain_anthropic's aliased fields with positional Field defaults
    claude = parse(instances.register(anthropic))
    assert price_of(claude) == list_price("anthropic", "claude-3-5-haiku-latest") is not None
    # at a server of your own: the nominal price, as for openai:NAME --base-url
    own = parse(instances.register(_chat("http://127.0.0.1:9/v1")))
    assert price_of(own) == price_of(parse("openai:tiny-fisher", base_url="http://127.0.0.1:9/v1"))
    # a class no price table knows: no price (a budget then needs --price-in/--price-out)
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    assert price_of(parse(instances.register(FakeListChatModel(responses=["x"])))) is None
    assert price_of(parse(instances.register(FakeListChatModel(responses=["x"]))), 0.1, 0.2) == (0.1, 0.2)
