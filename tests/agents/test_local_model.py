"""The local model behind a process boundary: crashes of native code stay in the child.

Unit tests drive :class:`LocalModelProcess` with a stand-in worker (tests/helpers/fake_llama_worker.py)
that speaks the protocol and crashes for real (SIGSEGV) on demand; integration tests use the real
model: a crash injected into the real model process mid-run stops the run cleanly at its
checkpoint, and the run resumes."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from langchain_core.messages import HumanMessage

from cooplab.agents import local_model as lm
from cooplab.agents.decisions import LLMService, ModelUnavailable, decide, is_transient
from cooplab.agents.llama_worker import non_portable_features, parse_system_info
from cooplab.agents.models import LlamaCppChat, ModelSpec
from cooplab.cli import main
from cooplab.cli.doctor import cpu_features

FAKE = [sys.executable, str(Path(__file__).resolve().parents[1] / "helpers" / "fake_llama_worker.py")]
ROOT = Path(__file__).resolve().parents[2]


def fake(monkeypatch, mode: str, **kw) -> lm.LocalModelProcess:
    monkeypatch.setenv("FAKE_WORKER_MODE", mode)
    return lm.LocalModelProcess("/nonexistent.gguf", argv=FAKE, **kw)


def call(text: str = "hi") -> dict:
    return {"messages": [{"role": "user", "content": text}], "max_tokens": 8}


def test_a_call_goes_through_the_child_and_back(monkeypatch):
    p = fake(monkeypatch, "ok")
    try:
        out = p.chat(call("hello"))
        assert out["choices"][0]["message"]["content"] == "echo: hello"
        assert p.chat(call("again"))["choices"][0]["message"]["content"] == "echo: again"
        assert p.proc is not None
        assert p.calls == 2 and p.restarts == 0 and p.proc.pid != os.getpid()
    finally:
        p.close()
    assert p.proc is None


def test_a_native_crash_is_a_transient_error_and_the_next_call_restarts_the_process(monkeypatch):
    p = fake(monkeypatch, "segv:1")
    try:
        p.chat(call())
        assert p.proc is not None
        first_pid = p.proc.pid
        with pytest.raises(lm.LocalModelCrashed, match="SIGSEGV") as ei:
            p.chat(call())
        assert is_transient(ei.value)  # the caller's retry loop counts it and backs off
        assert p.chat(call("after"))["choices"][0]["message"]["content"] == "echo: after"
        assert p.proc is not None
        assert p.proc.pid != first_pid and p.restarts == 1 and len(p.crashes) == 1
    finally:
        p.close()


def test_a_hanging_model_is_killed_at_the_timeout(monkeypatch):
    p = fake(monkeypatch, "hang", timeout=0.5)
    try:
        with pytest.raises(lm.LocalModelCrashed, match="did not answer within 0.5 s"):
            p.chat(call())
        assert p.proc is not None and p.proc.poll() is not None  # killed, not left running
    finally:
        p.close()


@pytest.mark.parametrize(
    "mode,exc,needle",
    [
        ("garbage", lm.LocalModelCrashed, "malformed frame"),
        ("null", lm.LocalModelCrashed, "malformed frame"),
        ("wrongid", lm.LocalModelCrashed, "instead of"),
        ("reject", lm.LocalModelError, r"refused it \(ValueError: bad grammar\)"),
        ("notready", lm.LocalModelError, "could not be loaded: ValueError: no such model"),
    ],
)
def test_protocol_violations_and_refusals_are_named(monkeypatch, mode, exc, needle):
    p = fake(monkeypatch, mode)
    try:
        with pytest.raises(exc, match=needle):
            p.chat(call())
    finally:
        p.close()


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0", "abc"])
def test_a_hostile_timeout_from_the_environment_is_refused(monkeypatch, value):
    monkeypatch.setenv("COOPLAB_LOCAL_TIMEOUT", value)
    with pytest.raises(lm.LocalModelError, match="COOPLAB_LOCAL_TIMEOUT"):
        lm.LocalModelProcess("/x.gguf", argv=FAKE)


def test_a_crashing_model_stops_decide_with_model_unavailable(monkeypatch):
    """Through the real service: retries counted, then ModelUnavailable (the clean-stop signal)."""
    monkeypatch.setenv("FAKE_WORKER_MODE", "segv:0")
    key = ("/fake-crash.gguf", LlamaCppChat.model_fields["n_ctx"].default, None)
    monkeypatch.setitem(lm._PROCS, key, lm.LocalModelProcess(key[0], argv=FAKE))
    spec = ModelSpec("local", "fake-crash.gguf")
    svc = LLMService(
        models={"default": (spec, LlamaCppChat(model_path=key[0]))}, max_transport_retries=2, backoff_base=0.01
    )
    from cooplab.tasks.cpr.llm import EFFORT

    with pytest.raises(ModelUnavailable, match="after 3 attempts.*SIGSEGV"):
        asyncio.run(
            decide(svc, EFFORT, [HumanMessage(content="x")], society=0, agent=0, round=1, ctx={"previous_effort": 0.5})
        )
    assert len(lm._PROCS[key].crashes) == 3 and svc.ledger.spent == 0 and svc.ledger.in_flight == 0
    lm._PROCS[key].close()


@pytest.mark.parametrize(
    "mode,needle",
    [
        ("reject", r"rejected the request: llama.cpp refused it \(ValueError: bad grammar\)"),  # permanent: no retry
        ("nochoices", "malformed responses 3 times: malformed response: no choices"),  # transient: retried
    ],
)
def test_refusals_and_garbled_answers_of_the_model_process_stop_cleanly(monkeypatch, mode, needle):
    monkeypatch.setenv("FAKE_WORKER_MODE", mode)
    key = (f"/fake-{mode}.gguf", LlamaCppChat.model_fields["n_ctx"].default, None)
    monkeypatch.setitem(lm._PROCS, key, lm.LocalModelProcess(key[0], argv=FAKE))
    spec = ModelSpec("local", key[0])
    svc = LLMService(
        models={"default": (spec, LlamaCppChat(model_path=key[0]))}, max_transport_retries=2, backoff_base=0.01
    )
    from cooplab.tasks.cpr.llm import EFFORT

    try:
        with pytest.raises(ModelUnavailable, match=needle):
            asyncio.run(
                decide(
                    svc, EFFORT, [HumanMessage(content="x")], society=0, agent=0, round=1, ctx={"previous_effort": 0.5}
                )
            )
        assert svc.ledger.spent == 0 and svc.ledger.in_flight == 0
    finally:
        lm._PROCS[key].close()


def test_system_info_parsing_and_the_portability_rule():
    native_amx = (
        "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX_VNNI = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | AVX512 = 1 | "
        "AVX512_VBMI = 1 | AVX512_VNNI = 1 | AVX512_BF16 = 1 | AMX_INT8 = 1 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 |"
    )
    portable = (
        "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | LLAMAFILE = 1 | "
        "OPENMP = 1 | REPACK = 1 |"
    )
    assert parse_system_info(portable)["AVX2"] == "1" and "AVX512" not in parse_system_info(portable)
    assert non_portable_features(portable) == []
    assert non_portable_features(native_amx) == [
        "AVX512",
        "AVX512_VBMI",
        "AVX512_VNNI",
        "AVX512_BF16",
        "AMX_INT8",
        "AVX_VNNI",
    ]


def test_cpu_features_read_amx_and_avx512_from_cpuinfo():
    info = (
        "processor : 0\nmodel name : Intel(R) Xeon(R) Platinum 8488C\nflags : fpu sse4_2 avx avx2 fma f16c bmi2 "
        "avx512f "
        "avx512_vnni avx512_bf16 amx_tile amx_int8 amx_bf16\n\nprocessor : 1\nflags : fpu\n"
    )
    c = cpu_features(info)
    assert c["amx"] and c["avx512"] and c["model"].startswith("Intel")
    assert c["flags"] == [
        "sse4_2",
        "avx",
        "avx2",
        "fma",
        "f16c",
        "bmi2",
        "avx512f",
        "avx512_vnni",
        "avx512_bf16",
        "amx_tile",
        "amx_int8",
        "amx_bf16",
    ]
    assert not cpu_features("flags : fpu sse4_2 avx2\n")["amx"]


def test_doctor_reports_the_cpu_and_json(capsys):
    code = main(["doctor", "--no-model", "--no-docker", "--no-chromium", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["ok"] is True
    assert [c["name"] for c in out["checks"]] == ["cpu", "extras"] and out["checks"][0]["details"]["arch"]
    extras = out["checks"][1]["details"]
    assert extras["extras"] == {
        name: True
        for name in (
            "local",
            "analysis",
            "dev",
            "ray",
            "bayes",
            "viewer",
            "server",
            "view",
            "anthropic",
            "google",
            "ollama",
        )
    } and {"cpr", "diners"} <= set(extras["tasks"])


def test_doctor_names_missing_extras_and_the_local_model_s_fix(capsys, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # hidden, as on a core install
    code = main(["doctor", "--no-docker", "--no-chromium", "--json"])
    out = {c["name"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    assert code == 1  # the local model was asked for and is not there
    assert out["extras"]["details"]["extras"]["local"] is False and "cooplab[local]" in out["extras"]["fix"]
    assert out["local model"]["ok"] is False and "llama_cpp" in out["local model"]["summary"]


def test_doctor_names_a_missing_model_file_and_the_command_that_fetches_it(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("COOPLAB_MODELS_DIR", str(tmp_path / "empty"))
    code = main(["doctor", "--no-docker", "--no-chromium", "--json"])
    out = {c["name"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    assert code == 1
    assert (
        out["local model"]["ok"] is False
        and "SmolLM2-135M-Instruct.Q4_1.gguf is missing" in out["local model"]["summary"]
    )
    assert out["local model"]["fix"] == "cooplab models fetch smollm2"


def test_setup_s_check_prints_one_line_when_the_model_crashes():
    env = {**os.environ, "COOPLAB_LOCAL_FAULT": "segv", "PYTHON": sys.executable}
    p = subprocess.run(
        ["bash", str(ROOT / "scripts" / "check-local-model.sh")], capture_output=True, text=True, env=env, timeout=600
    )
    assert p.returncode == 1
    assert p.stderr.count("\n") == 1 and "crashed (SIGSEGV)" in p.stderr and "cooplab doctor" in p.stderr


# ---------------------------------------------------------------------------------------------
# the real model
# ---------------------------------------------------------------------------------------------
@pytest.fixture
def fresh_model_processes():
    lm._close_all()
    lm._PROCS.clear()
    yield
    lm._close_all()
    lm._PROCS.clear()


@pytest.mark.integration
def test_the_installed_build_is_portable_and_generates():
    r = lm.check_local_model()
    assert r["ok"], r
    assert r["non_portable"] == [] and "AVX512 = 1" not in r["system_info"] and "AMX" not in r["system_info"]
    assert r["completion_tokens"] >= 1 and r["extra_bufts"] is False


@pytest.mark.integration
def test_doctor_fails_with_one_named_check_when_the_model_crashes(monkeypatch, capsys):
    monkeypatch.setenv("COOPLAB_LOCAL_FAULT", "segv")
    code = main(["doctor", "--no-docker", "--no-chromium"])
    out = capsys.readouterr().out
    assert code == 1
    line = [ln for ln in out.splitlines() if "local model" in ln][0]
    assert line.startswith("FAIL") and "SIGSEGV" in line


@pytest.mark.integration
def test_a_crash_of_the_real_model_process_stops_the_run_cleanly_and_it_resumes(
    tmp_path, capsys, monkeypatch, fresh_model_processes
):
    out = tmp_path / "run"
    # only social learning: the model decides effort and punishment (short JSON answers), 4 calls a
    # round; every call after the 5th crashes the model process for real (SIGSEGV), so round 2 (the
    # last) is cut and the resume finishes it
    monkeypatch.setenv("COOPLAB_LOCAL_FAULT", "segv-after:5")
    args = [
        "run",
        "cpr",
        "--agents",
        "llm",
        "--model",
        "local",
        "--ablation",
        "osl",
        "--n-agents",
        "2",
        "--rounds",
        "2",
        "--out",
        str(out),
        "--cache",
        str(tmp_path / "c.sqlite"),
        "-q",
        "--json",
    ]
    code = main(args)
    _, err = capsys.readouterr()
    assert code == 1, err
    assert err.count("\n") == 1 and "SIGSEGV" in err and "cooplab resume" in err
    s = json.loads((out / "summary.json").read_text())
    assert s["status"] == "stopped" and s["rounds_completed"] < 2
    monkeypatch.delenv("COOPLAB_LOCAL_FAULT")
    lm._close_all()
    lm._PROCS.clear()
    code = main(["resume", str(out), "-q", "--json"])
    stdout, err = capsys.readouterr()
    assert code == 0, err
    s2 = json.loads(stdout)
    assert s2["status"] == "completed"
    d = pd.read_parquet(out / "decisions.parquet")
    assert not d.duplicated(["society", "agent", "round", "phase"]).any()  # nothing redone after the crash
    assert sorted(d["round"].unique()) == list(range(1, s2["survival_time"]["values"][0] + 1))  # nothing lost
    # native code never ran in this process
    assert "llama_cpp" not in sys.modules
