"""A diners run resumes exactly like a CPR run: killed with SIGKILL in the middle of a node, then
``cooplab resume`` reaches the uninterrupted run's result, replaying paid calls from the cache."""

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd

from tests.helpers.progress import checkpoints, kill_when, run_progress


def script(path: Path, latency: float) -> Path:
    answers = {
        "order": ['{"meal": "budget"}', '{"meal": "premium"}'],
        "punish": ['{"punish": []}'],
        "metanorm": ['{"punish": []}'],
    }
    path.write_text(
        json.dumps({"by_phase": answers, "latency": latency, "select": "prompt_hash"})
    )  # a rerun answers alike
    return path


def test_kill_9_mid_run_then_resume_matches_an_uninterrupted_diners_run(tmp_path):
    f = script(tmp_path / "s.json", latency=0.03)
    exe = str(Path(sys.executable).parent / "cooplab")

    def args(out, cache):
        return [
            exe,
            "run",
            "diners",
            "--agents",
            "llm",
            "--model",
            f"scripted:{f}",
            "--combination",
            "1",
            "--iterations",
            "5",
            "--seed",
            "3",
            "--max-concurrency",
            "1",
            "--out",
            str(out),
            "--cache",
            str(cache),
            "-q",
            "--json",
        ]

    ref = subprocess.run(args(tmp_path / "ref", tmp_path / "c1.sqlite"), capture_output=True, text=True, timeout=300)
    assert ref.returncode == 0, ref.stderr
    proc = subprocess.Popen(
        args(tmp_path / "run", tmp_path / "c2.sqlite"), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )

    def mid_node() -> bool:  # past iteration 2, and the cache holds calls the last checkpoint does not account for
        p = run_progress(tmp_path / "run", tmp_path / "c2.sqlite")
        return p is not None and p[0] >= 2 and p[2] > p[1]

    assert kill_when(proc, mid_node), "the run finished before it could be killed mid-node; raise the latency"
    assert not (tmp_path / "run" / "summary.json").exists()
    res = subprocess.run(
        [exe, "resume", str(tmp_path / "run"), "-q", "--json"], capture_output=True, text=True, timeout=300
    )
    assert res.returncode == 0, res.stderr
    a, b = json.loads(ref.stdout), json.loads(res.stdout)
    assert b["llm"]["cache_hits"] > 0  # calls paid before the kill replayed from the cache ...
    assert (
        a["ledger"]["cached_calls"] == b["ledger"]["cached_calls"] == 0
    )  # ... and charged as the live calls they were
    assert a["final_shares"] == b["final_shares"] and b["iterations_completed"] == 5
    assert a["ledger"]["calls"] == b["ledger"]["calls"] and a["ledger"]["cost_usd"] == b["ledger"]["cost_usd"]
    for stem in ("strategy_counts", "utilities", "punishments"):
        pd.testing.assert_frame_equal(
            pd.read_parquet(tmp_path / "ref" / f"{stem}.parquet"), pd.read_parquet(tmp_path / "run" / f"{stem}.parquet")
        )
    da = pd.read_parquet(tmp_path / "ref" / "decisions.parquet").drop(columns=["latency", "cached_calls"])
    db = pd.read_parquet(tmp_path / "run" / "decisions.parquet").drop(columns=["latency", "cached_calls"])
    pd.testing.assert_frame_equal(da, db)


def test_a_rule_diners_run_killed_mid_run_resumes_to_the_same_tables(tmp_path):
    exe = str(Path(sys.executable).parent / "cooplab")

    def args(out):
        return [
            exe,
            "run",
            "diners",
            "--combination",
            "2",
            "--pk",
            "6:1",
            "--iterations",
            "60",
            "--replicates",
            "3000",
            "--seed",
            "5",
            "--out",
            str(out),
            "-q",
            "--json",
        ]

    ref = subprocess.run(args(tmp_path / "ref"), capture_output=True, text=True, timeout=600)
    assert ref.returncode == 0, ref.stderr
    proc = subprocess.Popen(args(tmp_path / "run"), stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    if not kill_when(
        proc, lambda: checkpoints(tmp_path / "run") >= 8, timeout=300
    ):  # pragma: no cover - a machine fast enough to finish first
        raise AssertionError("the run finished before 8 checkpoints were seen; raise --iterations")
    res = subprocess.run(
        [exe, "resume", str(tmp_path / "run"), "-q", "--json"], capture_output=True, text=True, timeout=600
    )
    assert res.returncode == 0, res.stderr
    a, b = json.loads(ref.stdout), json.loads(res.stdout)
    assert a["final_shares"] == b["final_shares"] and b["iterations_completed"] == 60
    for stem in ("strategy_counts", "imitation"):
        pd.testing.assert_frame_equal(
            pd.read_parquet(tmp_path / "ref" / f"{stem}.parquet"), pd.read_parquet(tmp_path / "run" / f"{stem}.parquet")
        )
