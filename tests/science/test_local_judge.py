"""Judging a science run with the local model (issue 29, item 17), and a judge that fails.

The judge's schema once became a llama.cpp grammar that crashed the model process (SIGSEGV) on
every call: the rationales' 2000-character bound is written out as 2000 nested repetitions.
The integration tests use the real local model: ``science score --judge local`` scores a run,
and a model process that crashes on every call ends the command in one line, not an internal
error. A scripted judge that never answers checks the same one-line exit without the model."""

from __future__ import annotations

import json

import pytest

from cooplab.agents import local_model as lm
from cooplab.cli import main


@pytest.fixture(scope="module")
def garbage_run(tmp_path_factory):
    """A finished science run with a short final paper (the scripted garbage team)."""
    out = tmp_path_factory.mktemp("judge") / "run"
    code = main(
        [
            "run",
            "science",
            "--task",
            "anomaly",
            "--team",
            "garbage",
            "--seed",
            "1",
            "--sandbox-backend",
            "local",
            "--cache",
            "off",
            "--out",
            str(out),
            "-q",
            "--json",
        ]
    )
    assert code == 0
    return out


@pytest.fixture
def fresh_model_processes():
    lm._close_all()
    lm._PROCS.clear()
    yield
    lm._close_all()
    lm._PROCS.clear()


def score(capsys, run, *args):
    code = main(["science", "score", str(run), *args])
    out, err = capsys.readouterr()
    return code, out, err


def judges(run) -> list[dict]:
    return json.loads((run / "scores.json").read_text()).get("judges") or []


def test_a_judge_that_never_answers_ends_the_command_in_one_line(garbage_run, capsys, tmp_path):
    before = (garbage_run / "scores.json").read_text()
    dead = tmp_path / "dead.json"
    dead.write_text(json.dumps({"answers": [{"error": "500"}]}))
    code, _, err = score(capsys, garbage_run, "--judge", f"scripted:{dead}", "--samples", "1", "--cache", "off")
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 1 and len(lines) == 1, err
    assert lines[0].startswith("cooplab: error: the judge scripted:") and "could not score" in lines[0]
    assert "internal error" not in err and "Traceback" not in err and "event loop" not in err
    assert (garbage_run / "scores.json").read_text() == before  # nothing written


@pytest.mark.integration
@pytest.mark.slow
def test_the_local_judge_scores_a_run_with_the_real_model(garbage_run, capsys, fresh_model_processes):
    code, out, err = score(capsys, garbage_run, "--judge", "local", "--samples", "1", "--cache", "off", "--json")
    assert code == 0, err
    (row,) = json.loads(out)
    assert row["judge"] == "local" and row["n_fallback"] == 0
    assert all(0.0 <= row[d] <= 1.0 for d in ("completeness", "quality", "accuracy")), row
    (entry,) = [j for j in judges(garbage_run) if j["judge"] == "local"]
    assert entry["ledger"]["calls"] >= 1 and entry["verdicts"][0]["accuracy_rationale"].strip()


@pytest.mark.integration
def test_a_crashing_local_model_ends_the_command_in_one_line(garbage_run, capsys, monkeypatch, fresh_model_processes):
    monkeypatch.setenv("COOPLAB_LOCAL_FAULT", "segv")  # every call crashes the model process for real
    before = (garbage_run / "scores.json").read_text()
    code, _, err = score(capsys, garbage_run, "--judge", "local", "--samples", "1", "--cache", "off")
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 1 and len(lines) == 1, err
    assert "could not score" in lines[0] and "SIGSEGV" in lines[0] and "internal error" not in err
    assert (garbage_run / "scores.json").read_text() == before
