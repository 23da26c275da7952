"""Integration: science teams with the real Docker sandbox, and one run of the real local model
(SmolLM2-135M) end to end. A 135M model is not expected to do science: the test checks that the
run completes (or stops on a recorded cap) and is scored, not the scores."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from cooplab.cli import main

pytestmark = [pytest.mark.integration, pytest.mark.docker]


def run(tmp_path, capsys, *args):
    code = main(["run", "science", *args, "--out", str(tmp_path / "run"), "-q", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out), tmp_path / "run"


def test_oracle_team_in_the_docker_sandbox(tmp_path, capsys, docker_ready):
    s, out = run(
        tmp_path, capsys, "--task", "biomarker", "--team", "oracle", "--sandbox-backend", "docker", "--cache", "off"
    )
    assert s["status"] == "completed" and min(s["scores"].values()) >= 0.9, s["scores"]
    lg = pd.read_parquet(out / "ledger.parquet")
    sb = lg[lg.kind == "sandbox_seconds"]
    assert len(sb) == 3 and set(sb.model) == {"sandbox:docker"} and (sb.units.astype(float) > 0).all()


def test_local_model_science_run_completes_and_is_scored(tmp_path, capsys, docker_ready):
    # the smallest project that still passes every team: each team its lead alone, 1 step per loop
    s, out = run(
        tmp_path,
        capsys,
        "--task",
        "ecology",
        "--model",
        "local",
        "--sandbox-backend",
        "docker",
        "--max-tokens",
        "160",
        "--set",
        "data_size=small",
        "--set",
        "team_size=1",
        "--set",
        "max_steps=1",
        "--set",
        "plan_steps=1",
        "--set",
        "synthesis_steps=1",
        "--set",
        "deliberation_rounds=0",
        "--cache",
        str(tmp_path / "c.sqlite"),
    )
    assert s["status"] == "completed"
    assert s["passes"][-1] == "writing#1" and set(s["scores"]) == {"completeness", "quality", "accuracy"}
    assert all(0.0 <= v <= 1.0 for v in s["scores"].values())
    scores = json.loads((out / "scores.json").read_text())
    assert scores["heuristic"]["facts"] and (out / "report.html").exists()
    loops = pd.read_parquet(out / "tool_loops.parquet")
    # every loop ended for a recorded reason; the JSON tool protocol was used for the llama.cpp model
    assert loops.stop_reason.notna().all() and set(loops.protocol) == {"json"}
    assert s["ledger"]["input_tokens"] > 1000 and s["ledger"]["output_tokens"] > 0


def test_local_model_bench_on_two_items_completes_and_is_scored(tmp_path, capsys, docker_ready):
    """The example suite's first two items, the local model as the solo analyst, the Docker
    sandbox: both items finish (completed or at their budget) and are scored; a rerun skips them
    and charges nothing again."""
    from pathlib import Path

    ex = Path(__file__).resolve().parents[2] / "examples" / "bench-suite"
    args = [
        "bench",
        "science",
        str(ex / "suite.jsonl"),
        "--tables",
        str(ex / "tables"),
        "--labels",
        str(ex / "labels.jsonl"),
        "--team",
        "llm",
        "--model",
        "local",
        "--team-size",
        "1",
        "--limit",
        "2",
        "--max-tokens",
        "160",
        "--budget-per-item",
        "0.02",
        "--sandbox-backend",
        "docker",
        "--cache",
        str(tmp_path / "c.sqlite"),
        "--out",
        str(tmp_path / "b"),
        "--json",
    ]
    assert main(args) == 0
    s = json.loads(capsys.readouterr()[0])
    assert s["items"] == s["scored"] == 2 and sum(s["statuses"].values()) == 2
    assert set(s["statuses"]) <= {"completed", "budget_exhausted"}, s["statuses"]
    assert s["tokens_in"] > 0 and 0 < s["cost_usd"] <= 0.04 and s["accuracy"] in (0.0, 0.5, 1.0)
    df = pd.read_parquet(tmp_path / "b" / "results.parquet")
    assert list(df["id"]) == ["q01", "q02"] and bool(df["correct"].notna().all())
    assert main(args) == 0
    again = json.loads(capsys.readouterr()[0])
    assert again["skipped"] == ["q01", "q02"] and again["cost_usd"] == pytest.approx(s["cost_usd"])
