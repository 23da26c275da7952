"""A science run killed with SIGKILL mid-run resumes from its last checkpoint: the finished team
passes are not redone (their calls are in the ledger once), the result equals an uninterrupted
run's, and the cost is the same (no call paid twice)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd

from tests.helpers.progress import checkpoints, kill_when


def test_kill_9_mid_run_then_resume_equals_the_uninterrupted_run(tmp_path):
    exe = str(Path(sys.executable).parent / "cooplab")

    def args(out, cache):
        return [
            exe,
            "run",
            "science",
            "--task",
            "anomaly",
            "--team",
            "oracle",
            "--sandbox-backend",
            "local",
            "--seed",
            "5",
            "--cache",
            str(cache),
            "--out",
            str(out),
            "-q",
            "--json",
        ]

    ref = subprocess.run(args(tmp_path / "ref", tmp_path / "ref.sqlite"), capture_output=True, text=True, timeout=600)
    assert ref.returncode == 0, ref.stderr
    proc = subprocess.Popen(
        args(tmp_path / "run", tmp_path / "run.sqlite"), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    # 5 nodes per team pass: killed inside the model team's pass, after the data team finished
    assert kill_when(proc, lambda: checkpoints(tmp_path / "run") >= 8, timeout=300), (
        "the run ended before 8 checkpoints"
    )
    assert not (tmp_path / "run" / "summary.json").exists()
    res = subprocess.run(
        [exe, "resume", str(tmp_path / "run"), "-q", "--json"], capture_output=True, text=True, timeout=600
    )
    assert res.returncode == 0, res.stderr
    a, b = json.loads(ref.stdout), json.loads(res.stdout)
    assert (
        b["status"] == "completed"
        and a["scores"] == b["scores"]
        and a["passes"] == b["passes"]
        and a["facts"] == b["facts"]
    )
    for name in ("dataset_description", "model_architecture", "evaluation_report", "final_paper"):
        assert (tmp_path / "ref" / "artifacts" / f"{name}.v1.md").read_text() == (
            tmp_path / "run" / "artifacts" / f"{name}.v1.md"
        ).read_text()
    assert not (tmp_path / "run" / "artifacts" / "dataset_description.v2.md").exists()
    # the data team's pass ran once: its model calls are in the ledger once
    lg = pd.read_parquet(tmp_path / "run" / "ledger.parquet")
    tok = lg[lg.kind == "tokens"]
    assert (tok.phase == "data:plan").sum() == 1 and not tok.call_id.duplicated().any()
    assert len(tok) == a["ledger"]["calls"] == b["ledger"]["calls"]
    assert abs(b["ledger"]["cost_usd_float"] - a["ledger"]["cost_usd_float"]) <= 0.02 * a["ledger"]["cost_usd_float"]
