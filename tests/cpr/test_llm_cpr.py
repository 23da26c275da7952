"""LLM agents in the CPR society, driven by scripted models through the CLI: decisions and
ledger in the run directory, budget exhaustion, a stopped model, kill -9 and resume."""

import json
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest

from cooplab.cli import main
from cooplab.evals.typed import column
from tests.helpers.figures import figures_recorded  # noqa: F401 - a fixture
from tests.helpers.progress import kill_when, run_progress

# no run here checks its figure: none is drawn (tests/helpers/figures.py)
pytestmark = pytest.mark.usefixtures("figures_recorded")

EFFORTS = ['{"effort": 0.1}', '{"effort": 0.25}', '{"effort": 0.4}', "no idea", '{"effort": 3}']


def script(tmp_path, answers=EFFORTS, **extra):
    f = tmp_path / "script.json"
    f.write_text(json.dumps({"answers": answers, "select": "prompt_hash", **extra}))
    return f


def run(args, capsys):
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def base(tmp_path, f, out, *more):
    return [
        "run",
        "cpr",
        "--agents",
        "llm",
        "--model",
        f"scripted:{f}",
        "--n-agents",
        "3",
        "--rounds",
        "4",
        "--out",
        str(out),
        "--cache",
        str(tmp_path / "cache.sqlite"),
        "-q",
        "--json",
        *more,
    ]


def test_llm_run_writes_decisions_ledger_and_summary(tmp_path, capsys):
    out = tmp_path / "run"
    code, stdout, err = run(base(tmp_path, script(tmp_path), out), capsys)
    assert code == 0, err
    s = json.loads(stdout)
    assert s["agents"] == "llm" and s["status"] == "completed"
    d = pd.read_parquet(out / "decisions.parquet")
    rounds_lived = s["survival_time"]["values"][0]
    assert (d["phase"] == "harvest").sum() == 3 * rounds_lived  # one effort decision per living agent per round
    assert set(d["phase"]) <= {"harvest", "punish", "propose", "vote"}
    assert set(d.columns) >= {
        "agent",
        "round",
        "phase",
        "raw",
        "parsed",
        "attempts",
        "fallback_used",
        "input_tokens",
        "output_tokens",
        "latency",
        "cost_usd",
        "cost_usd_exact",
        "agent_id",
    }
    assert (column(d, "attempts") >= 1).all() and (column(d, "attempts") <= 3).all()
    led = pd.read_parquet(out / "ledger.parquet")
    assert s["ledger"]["calls"] == len(led) == int(column(d, "attempts").sum())
    assert Decimal(s["ledger"]["cost_usd"]) == sum(Decimal(c) for c in led["cost_usd_exact"])
    assert sum(Decimal(c) for c in d["cost_usd_exact"]) == Decimal(s["ledger"]["cost_usd"])
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["llm"]["model"].startswith("scripted:") and "api_key" not in json.dumps(cfg).lower()


def test_rerun_replays_from_the_cache_identically(tmp_path, capsys):
    f = script(tmp_path)
    _, a, _ = run(base(tmp_path, f, tmp_path / "a"), capsys)
    _, b, _ = run(base(tmp_path, f, tmp_path / "b"), capsys)
    ja, jb = json.loads(a), json.loads(b)
    assert jb["ledger"]["cached_calls"] == jb["ledger"]["calls"] > 0 and ja["ledger"]["cached_calls"] == 0
    assert ja["survival_time"] == jb["survival_time"] and ja["ledger"]["cost_usd"] == jb["ledger"]["cost_usd"]
    pd.testing.assert_frame_equal(
        pd.read_parquet(tmp_path / "a" / "rounds.parquet"), pd.read_parquet(tmp_path / "b" / "rounds.parquet")
    )


def test_budget_cap_ends_the_run_gracefully(tmp_path, capsys):
    out = tmp_path / "run"
    code, stdout, err = run(base(tmp_path, script(tmp_path), out, "--budget", "0.003", "--cache", "off"), capsys)
    assert code == 0, err
    s = json.loads(stdout)
    assert s["status"] == "budget_exhausted" and "budget" in s["message"]
    assert Decimal(s["ledger"]["cost_usd"]) <= Decimal("0.003")
    assert s["ledger"]["calls"] > 0 and (out / "ledger.parquet").exists() and (out / "rounds.parquet").exists()


def test_unreachable_model_stops_cleanly_and_resume_continues(tmp_path, capsys):
    out = tmp_path / "run"
    good = script(tmp_path)
    # a model that answers the first calls and then is unreachable
    f_bad = tmp_path / "bad.json"
    f_bad.write_text(json.dumps({"answers": ['{"effort": 0.2}'] * 7 + [{"error": "connection"}] * 50, "cycle": False}))
    args = base(tmp_path, f_bad, out)
    code, _, err = run(args, capsys)
    assert code == 1 and "cooplab resume" in err and "unreachable" in err
    s = json.loads((out / "summary.json").read_text())
    assert s["status"] == "stopped" and 1 <= s["rounds_completed"] < 4
    # point the run at a working model and resume: no round lost or repeated
    cfg = json.loads((out / "config.json").read_text())
    cfg["llm"]["model"] = f"scripted:{good}"
    (out / "config.json").write_text(json.dumps(cfg))
    code, stdout, err = run(["resume", str(out), "-q", "--json"], capsys)
    assert code == 0, err
    s2 = json.loads(stdout)
    assert s2["status"] == "completed"
    rounds = pd.read_parquet(out / "rounds.parquet")
    assert rounds["round"].tolist() == list(range(1, len(rounds) + 1))
    d = pd.read_parquet(out / "decisions.parquet")
    assert not d.duplicated(["society", "agent", "round", "phase"]).any()
    assert sorted(d["round"].unique()) == list(range(1, s2["survival_time"]["values"][0] + 1))


def test_kill_9_mid_run_then_resume_matches_an_uninterrupted_run(tmp_path):
    f = script(tmp_path, latency=0.05)
    exe = str(Path(sys.executable).parent / "cooplab")

    def args(out, cache):
        # 5 rounds: the kill comes in round 2 or later, with rounds still to go after it
        return [
            exe,
            "run",
            "cpr",
            "--agents",
            "llm",
            "--model",
            f"scripted:{f}",
            "--n-agents",
            "4",
            "--rounds",
            "5",
            "--env",
            "rich",
            "--max-concurrency",
            "1",
            "--out",
            str(out),
            "--cache",
            str(cache),
            "-q",
            "--json",
        ]

    # the uninterrupted run goes alongside the one to be killed (each has its own folder and cache)
    ref_proc = subprocess.Popen(
        args(tmp_path / "ref", tmp_path / "c1.sqlite"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    proc = subprocess.Popen(
        args(tmp_path / "run", tmp_path / "c2.sqlite"), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )

    # Kill on observable progress, not after a fixed time: the run is frozen (SIGSTOP) while we look,
    # and killed only when it is past round 2 *and* the cache holds calls the last checkpoint does not
    # account for (a node is half done), so the resumed run must replay them from the cache.
    def mid_node() -> bool:
        p = run_progress(tmp_path / "run", tmp_path / "c2.sqlite")
        return p is not None and p[0] >= 2 and p[2] > p[1]

    assert kill_when(proc, mid_node), "the run finished (or hung) before it could be killed mid-node; raise the latency"
    assert not (tmp_path / "run" / "summary.json").exists()
    ref_out, ref_err = ref_proc.communicate(timeout=300)
    assert ref_proc.returncode == 0, ref_err
    res = subprocess.run(
        [exe, "resume", str(tmp_path / "run"), "-q", "--json"], capture_output=True, text=True, timeout=300
    )
    assert res.returncode == 0, res.stderr
    a, b = json.loads(ref_out), json.loads(res.stdout)
    assert b["llm"]["cache_hits"] > 0  # calls made before the kill replayed from the cache
    # ... and charged as the live calls they were (from the ledger journal): the ledger is the uninterrupted run's
    assert a["ledger"]["cached_calls"] == b["ledger"]["cached_calls"] == 0
    assert a["survival_time"] == b["survival_time"] and a["efficiency"] == b["efficiency"]
    assert a["ledger"]["calls"] == b["ledger"]["calls"] and a["ledger"]["cost_usd"] == b["ledger"]["cost_usd"]
    pd.testing.assert_frame_equal(
        pd.read_parquet(tmp_path / "ref" / "rounds.parquet"), pd.read_parquet(tmp_path / "run" / "rounds.parquet")
    )
    da = pd.read_parquet(tmp_path / "ref" / "decisions.parquet").drop(columns=["latency", "cached_calls"])
    db = pd.read_parquet(tmp_path / "run" / "decisions.parquet").drop(columns=["latency", "cached_calls"])
    pd.testing.assert_frame_equal(da, db)
    # traces.jsonl is one coherent file: the killed run's finished nodes under its (recovered,
    # status error) root, then the resumed run's tree; no run id twice, every parent present
    from cooplab.graphs.tracing import load_runs

    runs = load_runs(tmp_path / "run", validate=True)
    by_id = {r["id"]: r for r in runs}
    assert len(by_id) == len(runs)
    assert all(
        r["parent_run_id"] is None
        or (r["parent_run_id"] in by_id and by_id[r["parent_run_id"]]["trace_id"] == r["trace_id"])
        for r in runs
    )
    roots = [r for r in runs if r["parent_run_id"] is None]
    assert len(roots) == 2 and roots[0]["error"].startswith("interrupted") and "resumed" in roots[1]["tags"]
    assert any(r["run_type"] == "llm" and r["trace_id"] == roots[0]["id"] for r in runs)  # pre-kill model calls kept
    assert not list((tmp_path / "run").glob(".traces.jsonl.*.part"))


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--model", "gpt-4"], "unknown model"),
        (["--model", "scripted:/nonexistent.json"], "not found"),
        (["--agent-model", "x=local"], "--agent-model"),
        (["--max-concurrency", "0"], "--max-concurrency"),
        (["--budget", "-1"], "--budget"),
    ],
)
def test_bad_llm_options_are_one_line_errors(tmp_path, capsys, args, needle):
    code, _, err = run(["run", "cpr", "--agents", "llm", "--out", str(tmp_path / "x"), "-q", *args], capsys)
    assert code == 2 and err.count("\n") == 1 and needle in err


def test_mixed_models_per_agent(tmp_path, capsys):
    a = tmp_path / "a.json"
    a.write_text(json.dumps({"answers": ['{"effort": 0.1}']}))
    b = tmp_path / "b.json"
    b.write_text(json.dumps({"answers": ['{"effort": 0.9}']}))
    out = tmp_path / "run"
    code, _, err = run(
        [
            "run",
            "cpr",
            "--agents",
            "llm",
            "--model",
            f"scripted:{a}",
            "--agent-model",
            f"1=scripted:{b}",
            "--n-agents",
            "3",
            "--rounds",
            "1",
            "--out",
            str(out),
            "--cache",
            "off",
            "-q",
        ],
        capsys,
    )
    assert code == 0, err
    d = pd.read_parquet(out / "decisions.parquet")
    d = d[d["phase"] == "harvest"].set_index("agent")
    assert d.loc[1, "model"] == f"scripted:{b}" and d.loc[0, "model"] == f"scripted:{a}"
    assert json.loads(d.loc[1, "parsed"])["effort"] == 0.9 and json.loads(d.loc[2, "parsed"])["effort"] == 0.1
