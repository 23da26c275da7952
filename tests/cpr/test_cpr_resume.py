"""A rule-based CPR run killed with SIGKILL mid-run resumes to the uninterrupted run's tables."""

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd

from tests.helpers.progress import checkpoints, kill_when


def test_a_rule_cpr_run_killed_mid_run_resumes_to_the_same_tables(tmp_path):
    exe = str(Path(sys.executable).parent / "cooplab")

    def args(out):
        return [
            exe,
            "run",
            "cpr",
            "--env",
            "rich",
            "--replicates",
            "2000",
            "--rounds",
            "40",
            "--seed",
            "9",
            "--out",
            str(out),
            "-q",
            "--json",
        ]

    ref = subprocess.run(args(tmp_path / "ref"), capture_output=True, text=True, timeout=600)
    assert ref.returncode == 0, ref.stderr
    proc = subprocess.Popen(args(tmp_path / "run"), stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    # killed a few rounds in (7 nodes a round), far from the end
    assert kill_when(proc, lambda: checkpoints(tmp_path / "run") >= 20, timeout=300), (
        "the run finished before 20 checkpoints were seen; raise --rounds"
    )
    assert not (tmp_path / "run" / "summary.json").exists()
    res = subprocess.run(
        [exe, "resume", str(tmp_path / "run"), "-q", "--json"], capture_output=True, text=True, timeout=600
    )
    assert res.returncode == 0, res.stderr
    a, b = json.loads(ref.stdout), json.loads(res.stdout)
    assert (
        a["survival_time"] == b["survival_time"] and a["efficiency"] == b["efficiency"] and b["status"] == "completed"
    )
    for stem in ("rounds", "agents"):
        pd.testing.assert_frame_equal(
            pd.read_parquet(tmp_path / "ref" / f"{stem}.parquet"), pd.read_parquet(tmp_path / "run" / f"{stem}.parquet")
        )
