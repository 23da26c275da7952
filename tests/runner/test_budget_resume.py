"""A budget-limited run comes out the same however often it is interrupted (issue 37, point 5),
and a run that ended ``budget_exhausted`` continues only with a raised budget (issue 38, item 5).

The kill loop: a real ``cooplab run`` of LLM fishers (scripted model, a budget that stops the run
in its fourth round), killed with SIGKILL at seeded points chosen by observable progress (lines of
its ledger journal: every budget decision and every charge is one line, written before the call
is sent or refused), then ``cooplab resume``d and killed again, until a last resume ends it. Its
rounds, calls, cost, stop message, ledger entries and decisions equal the uninterrupted run's.

Why these kill points. A kill can leave a run in four states: between nodes (a clean checkpoint),
with reservations granted and their calls still at the model, with answers paid that no checkpoint
holds yet, or with the budget's refusal decided while the phase's other calls finish. The journal
of the uninterrupted run says at which line each state arises (its ``reserve`` lines, its charge
lines, its ``refuse`` line), and it is line for line the journal a killed and resumed run writes;
so one seeded kill lands in each of the last three (the first, a clean checkpoint, is what every
other kill-and-resume test of the suite covers), plus one seeded kill anywhere: four kills, every
state covered, each kill a process start (a few seconds), not the issue's twenty.
"""

from __future__ import annotations

import json
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from cooplab.cli import main
from tests.helpers.cli import fail_line
from tests.helpers.figures import figures_recorded  # noqa: F401 - a fixture
from tests.helpers.progress import kill_when

# no run here checks its figure: none is drawn (tests/helpers/figures.py)
pytestmark = pytest.mark.usefixtures("figures_recorded")

ROOT = Path(__file__).resolve().parents[2]
EXE = str(Path(sys.executable).parent / "cooplab")
BUDGET = "0.01"
SEED = 37


def script(tmp_path: Path) -> Path:
    """The cautious fishers, some of whose effort answers are invalid (retried), answering after 20 ms."""
    s = json.loads((ROOT / "examples" / "scripted" / "cautious.json").read_text())
    s["by_phase"]["harvest"] += ["no idea", '{"effort": 3}']
    s["latency"] = 0.02
    f = tmp_path / "fishers.json"
    f.write_text(json.dumps(s))
    return f


def args(f: Path, out: Path, cache: Path) -> list[str]:
    return [
        EXE,
        "run",
        "cpr",
        "--agents",
        "llm",
        "--model",
        f"scripted:{f}",
        "--n-agents",
        "4",
        "--rounds",
        "8",
        "--budget",
        BUDGET,
        "--out",
        str(out),
        "--cache",
        str(cache),
        "-q",
        "--json",
    ]


def journal(run: Path) -> list[dict]:
    path = run / "ledger-journal.jsonl"
    rows = []
    for line in path.read_text().splitlines() if path.exists() else []:
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue
    return rows


def settled(run: Path, cache: Path) -> bool:
    """Every call the journal says was paid is in the cache. A kill in between (one SQLite write
    long) makes the resumed run pay that call again, both payments kept (docs/llm.md): a real
    outcome, but not the uninterrupted run's, so the loop does not kill there."""
    paid = sum(1 for r in journal(run) if "event" not in r and not r.get("cached"))
    if not paid:
        return True
    try:
        with sqlite3.connect(str(cache), timeout=0.2) as db:
            return db.execute("SELECT count(*) FROM responses").fetchone()[0] >= paid
    except sqlite3.Error:
        return False


def lines(run: Path) -> int:
    try:
        return (run / "ledger-journal.jsonl").read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def kill_points(ref: list[dict]) -> list[int]:
    """Journal line counts to kill at: one seeded line of each kind of state, one anywhere."""
    rng = random.Random(SEED)
    kinds = {
        "held": [i for i, r in enumerate(ref) if r.get("event") == "reserve"],
        "paid": [i for i, r in enumerate(ref) if "event" not in r],
        "refused": [i for i, r in enumerate(ref) if r.get("event") == "refuse"],
    }
    assert all(kinds.values()), {k: len(v) for k, v in kinds.items()}
    points = {rng.choice(v) + 1 for v in kinds.values()} | {rng.randrange(1, len(ref))}
    return sorted(points)


def files(run: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(run.iterdir()) if p.is_file() and p.name != ".cooplab.lock"}


def test_a_budget_run_killed_four_times_ends_as_the_uninterrupted_run(tmp_path, capsys):
    f = script(tmp_path)
    ref_dir, run = tmp_path / "ref", tmp_path / "run"
    done = subprocess.run(args(f, ref_dir, tmp_path / "c1.sqlite"), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    a = json.loads(done.stdout)
    assert a["status"] == "budget_exhausted" and 1 < a["rounds_completed"] < 8, (
        a
    )  # the budget, not the round cap, ends it
    ref = journal(ref_dir)

    cache = tmp_path / "c2.sqlite"
    cmd, landed = args(f, run, cache), []
    for point in kill_points(ref):
        if lines(run) >= point:  # an earlier kill landed past it
            continue
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert kill_when(proc, lambda point=point: lines(run) >= point and settled(run, cache), timeout=300), (
            f"the run ended before journal line {point}"
        )
        landed.append(lines(run))
        assert not (run / "summary.json").exists()
        cmd = [EXE, "resume", str(run), "-q", "--json"]
    assert len(landed) >= 3, landed
    last = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert last.returncode == 0, last.stderr
    b = json.loads(last.stdout)
    why = f"killed at journal lines {landed} of {len(ref)}"
    for key in ("status", "message", "rounds_completed", "survival_time", "efficiency"):
        assert a[key] == b[key], (key, why)
    for key in ("calls", "cost_usd", "cached_calls", "input_tokens", "output_tokens"):
        assert a["ledger"][key] == b["ledger"][key], (key, why)

    # the same charges; within a phase they are listed in the order its concurrent calls answered (the
    # uninterrupted run's own order varies with the model's threads), so they are compared in call order
    def charges(d: Path) -> pd.DataFrame:
        led = pd.read_parquet(d / "ledger.parquet")
        return led.sort_values(["round", "phase", "agent_id", "call_id"], kind="stable").reset_index(drop=True)

    pd.testing.assert_frame_equal(charges(ref_dir), charges(run))
    da = pd.read_parquet(ref_dir / "decisions.parquet").drop(columns=["latency", "cached_calls"])
    db = pd.read_parquet(run / "decisions.parquet").drop(columns=["latency", "cached_calls"])
    pd.testing.assert_frame_equal(da, db)
    pd.testing.assert_frame_equal(pd.read_parquet(ref_dir / "rounds.parquet"), pd.read_parquet(run / "rounds.parquet"))
    assert len(journal(run)) == len(ref)  # every decision and charge once, however often it was interrupted

    # the finished budget_exhausted run: resuming it is one line, exit 2, and changes nothing
    before = files(run)
    line = fail_line(capsys, ["resume", str(run), "-q"])
    assert "budget" in line and "--budget" in line and "budget=" in line
    assert files(run) == before


def test_resume_raises_the_budget_of_an_exhausted_run_and_says_so(tmp_path, capsys):
    f = script(tmp_path)
    out = tmp_path / "run"
    cache = tmp_path / "c.sqlite"
    assert main(args(f, out, cache)[1:]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["status"] == "budget_exhausted"
    before = files(out)
    for bad, needle in (
        ("0.005", "must be above the run's budget of $0.01"),
        ("0.01", "must be above"),
        ("nan", "--budget"),
        ("-1", "--budget"),
        ("2e6", "--budget"),
    ):
        assert needle in fail_line(capsys, ["resume", str(out), "--budget", bad, "-q"])
        assert files(out) == before
    code = main(["resume", str(out), "--budget", "0.03", "-q", "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    notes = [ln for ln in captured.err.splitlines() if ln.strip()]
    assert len(notes) == 1 and "raised from $0.01 to $0.03" in notes[0]
    s = json.loads(captured.out)
    assert s["ledger"]["calls"] > first["ledger"]["calls"] and s["rounds_completed"] > first["rounds_completed"]
    assert float(s["ledger"]["cost_usd"]) <= 0.03 and s["ledger"]["budget_usd"] == "0.03"
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["llm"]["budget"] == 0.03 and cfg["record"]["budget_raised"][0]["from"] == 0.01


def test_the_python_api_raises_the_budget_and_refuses_without_it(tmp_path):
    import cooplab
    from cooplab.graphs.rundir import RunDirError

    f = script(tmp_path)
    out = tmp_path / "run"
    run = cooplab.run(
        task="cpr",
        agents="llm",
        model=f"scripted:{f}",
        n_agents=4,
        rounds=8,
        budget=0.01,
        out=out,
        quiet=True,
        cache=str(tmp_path / "c.sqlite"),
    )
    assert run.summary["status"] == "budget_exhausted"
    try:
        cooplab.resume(out, quiet=True)
    except RunDirError as exc:
        assert "\n" not in str(exc) and "budget=" in str(exc)
    else:
        raise AssertionError("a budget_exhausted run resumed without a raised budget")
    notes: list[str] = []
    more = cooplab.resume(out, quiet=True, budget=0.02, notice=notes.append)
    assert len(notes) == 1 and "raised from $0.01 to $0.02" in notes[0]
    assert more.summary["ledger"]["calls"] > run.summary["ledger"]["calls"]


def test_budget_on_resume_of_a_rule_run_or_a_run_without_a_cap_is_one_line(tmp_path, capsys):
    assert (
        main(
            [
                "run",
                "cpr",
                "--n-agents",
                "3",
                "--rounds",
                "2",
                "--replicates",
                "2",
                "--out",
                str(tmp_path / "rule"),
                "-q",
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert "makes none" in fail_line(capsys, ["resume", str(tmp_path / "rule"), "--budget", "1", "-q"])
    f = script(tmp_path)
    out = tmp_path / "uncapped"
    assert (
        main(
            [
                "run",
                "cpr",
                "--agents",
                "llm",
                "--model",
                f"scripted:{f}",
                "--n-agents",
                "2",
                "--rounds",
                "1",
                "--out",
                str(out),
                "--cache",
                "off",
                "-q",
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert "no budget cap" in fail_line(capsys, ["resume", str(out), "--budget", "1", "-q"])


def test_a_science_run_stopped_by_its_budget_continues_from_the_step_it_cut_short(tmp_path, capsys):
    """Science keeps a budget stop in its state (the team's partial work is kept) and ends at its
    route: raised, the run forks from the checkpoint before the step the stop cut short and runs on."""
    out = tmp_path / "sci"
    base = [
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
        "off",
        "-q",
        "--json",
    ]
    assert main([*base, "--budget", "0.002", "--out", str(out)]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["status"] == "budget_exhausted" and first["ledger"]["calls"] == 0
    assert "budget" in fail_line(capsys, ["resume", str(out), "-q"])
    assert main(["resume", str(out), "--budget", "0.1", "-q", "--json"]) == 0
    captured = capsys.readouterr()
    assert (
        "continues from the checkpoint before its plan step" in captured.err
        and len(captured.err.strip().splitlines()) == 1
    )
    s = json.loads(captured.out)
    assert s["status"] == "completed" and s["ledger"]["calls"] > 0 and float(s["ledger"]["cost_usd"]) <= 0.1
