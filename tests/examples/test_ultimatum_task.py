"""The example task of examples/ultimatum, a separate distribution: installed (isolated, into a
temporary target directory on PYTHONPATH, so the real environment is never changed) and found
through the ``cooplab.tasks`` entry-point group, then driven only through the real CLI: params,
graph, a rule run, an LLM run with a scripted model and its trace, kill -9 and resume, bad input."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from cooplab.evals.typed import as_frame, column, scalar
from tests.helpers.progress import kill_when

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "ultimatum"
SCRIPT = EXAMPLE / "scripted.json"
COOPLAB = str(Path(sys.executable).parent / "cooplab")


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict[str, str]:
    """An environment in which ``cooplab`` sees the example installed: a non-editable install of a
    copy (the build leaves nothing in examples/) into a fresh target directory, offline."""
    src = tmp_path_factory.mktemp("src") / "ultimatum"
    shutil.copytree(EXAMPLE, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    site = tmp_path_factory.mktemp("site")
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--quiet",
            "--disable-pip-version-check",
            "--target",
            str(site),
            str(src),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    assert (next(site.glob("cooplab_ultimatum-*.dist-info")) / "entry_points.txt").read_text().count(
        "cooplab_ultimatum:TASK"
    ) == 1
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, "COOPLAB_CACHE": str(site / "no-default-cache.sqlite")}


def cli(env, *args, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([COOPLAB, *map(str, args)], env=env, capture_output=True, text=True, timeout=timeout)


def ok(res: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert res.returncode == 0, res.stderr
    return res


def test_params_and_graph_of_the_installed_task(env):
    rows = json.loads(ok(cli(env, "params", "ultimatum", "--json")).stdout)
    by = {r["name"]: r for r in rows}
    assert {"n_players", "replicates", "rounds", "pie", "offer", "threshold", "imitation", "beta", "noise"} <= set(by)
    assert by["n_players"]["default"] == 4 and by["pie"]["default"] == 10.0
    assert all(r["meaning"] and r["source"] == "task" for r in rows)
    for agents in ("rule", "llm"):
        mermaid = ok(cli(env, "graph", "ultimatum", "--agents", agents)).stdout
        assert all(f"{n}({n})" in mermaid for n in ("pair", "offer", "respond", "settle"))
        assert "settle -.-> pair" in mermaid and "settle -.-> __end__" in mermaid  # the round loop


def test_rule_run_with_fixed_traits(env, tmp_path):
    out = tmp_path / "rule"
    res = ok(
        cli(
            env,
            "run",
            "ultimatum",
            "--set",
            "n_players=6",
            "--set",
            "replicates=3",
            "--set",
            "rounds=20",
            "--set",
            "imitation=0",
            "--seed",
            7,
            "--out",
            out,
            "--json",
            "-q",
        )
    )
    s = json.loads(res.stdout)
    assert s["task"] == "ultimatum" and s["agents"] == "rule" and s["status"] == "completed"
    assert s["rounds_completed"] == 20 and s["replicates"] == 3 and s["n_players"] == 6
    games, rounds = pd.read_parquet(out / "games.parquet"), pd.read_parquet(out / "rounds.parquet")
    assert len(games) == 3 * 20 * 3 and len(rounds) == 3 * 20
    # every player is in exactly one game a round, as proposer or responder
    per_round = games.groupby(["replicate", "round"]).apply(
        lambda g: sorted([*g["proposer"], *g["responder"]]), include_groups=False
    )
    assert all(players == list(range(6)) for players in per_round)
    # without imitation a rule player always offers the same share (its trait), within +-spread of the mean
    assert bool(games.groupby(["replicate", "proposer"])["share"].nunique().eq(1).all())
    assert games["share"].between(0.3 - 1e-12, 0.5 + 1e-12).all()
    assert s["mean_offer"] == pytest.approx(games["share"].mean())
    assert s["acceptance_rate"] == pytest.approx(games["accepted"].mean())
    assert s["mean_payoff"] == pytest.approx(10.0 * s["acceptance_rate"] / 2)
    assert scalar(column(rounds, "mean_payoff").mean()) == pytest.approx(s["mean_payoff"])
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["task"] == "ultimatum" and cfg["params"]["imitation"] == 0 and cfg["params"]["pie"] == 10.0
    # the human report: the task's lines and the run directory
    human = ok(cli(env, "run", "ultimatum", "--set", "rounds=3", "--out", tmp_path / "h", "-q")).stdout
    assert human.startswith("ultimatum: 3 rounds, 1 x 4 players: mean offer") and "run directory:" in human
    # a resumed run's config.json is hostile input: checked by the task's Params, one line, nothing changed
    cfg["params"]["offer"] = 1.5
    (out / "config.json").write_text(json.dumps(cfg))
    res = cli(env, "resume", out)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and res.stderr.startswith("cooplab: error:")
    assert "params.offer" in res.stderr and "less than or equal to 1" in res.stderr
    del cfg["params"]  # not silently the defaults
    (out / "config.json").write_text(json.dumps(cfg))
    res = cli(env, "resume", out)
    assert (
        res.returncode == 2 and res.stderr.count("\n") == 1 and "params must be a JSON object, got None" in res.stderr
    )


def test_llm_run_with_a_scripted_model_is_traced(env, tmp_path):
    from langsmith.schemas import Run

    from cooplab.graphs.tracing import load_runs

    out = tmp_path / "llm"
    res = ok(
        cli(
            env,
            "run",
            "ultimatum",
            "--agents",
            "llm",
            "--model",
            f"scripted:{SCRIPT}",
            "--set",
            "rounds=4",
            "--set",
            "replicates=2",
            "--cache",
            "off",
            "--out",
            out,
            "--json",
            "-q",
        )
    )
    s = json.loads(res.stdout)
    assert s["agents"] == "llm" and s["status"] == "completed" and s["rounds_completed"] == 4
    d = pd.read_parquet(out / "decisions.parquet")
    assert len(d) == 2 * (4 * 2 * 2) == s["decisions"]["count"]  # an offer and a response per game
    assert d.groupby("phase").size().to_dict() == {"offer": 16, "respond": 16}
    assert (
        s["ledger"]["calls"] == int(scalar(column(d, "attempts").sum())) == len(pd.read_parquet(out / "ledger.parquet"))
    )
    # the script's invalid answers ("I offer half.", an offer above the pie) were retried; offers within the pie
    assert bool((d["attempts"] > 1).any()) and bool((d["attempts"] <= 3).all())
    games = pd.read_parquet(out / "games.parquet")
    assert games["offer"].between(0, 10).all() and len(games) == 16
    offers = as_frame(d[d["phase"] == "offer"]).sort_values(["round", "society"], kind="stable")
    assert sorted(json.loads(p)["offer"] for p in offers["parsed"]) == sorted(games["offer"])
    # traces.jsonl: LangSmith runs, one root (the graph), its nodes and every model call nested under it
    runs = load_runs(out, validate=True)
    parsed = [Run(**r) for r in runs]
    roots = [r for r in parsed if r.parent_run_id is None]
    assert len(roots) == 1 and all(r.trace_id == roots[0].id for r in parsed)
    llm_runs = [r for r in parsed if r.run_type == "llm"]
    assert len(llm_runs) == s["ledger"]["calls"]
    names = {r.name for r in parsed}
    assert {"pair", "offer", "respond", "settle"} <= names


def _checkpoints_and_cache(run_dir: Path, cache: Path) -> tuple[int, int, int] | None:
    """(checkpoints, round of the last one, responses in the cache) of a run in progress, or None
    while a file is missing or locked."""
    if not (run_dir / "checkpoints.sqlite").exists() or not cache.exists():
        return None
    try:
        with sqlite3.connect(f"file:{cache}?mode=ro", uri=True, timeout=0.2) as db:
            cached = db.execute("SELECT count(*) FROM responses").fetchone()[0]
        with sqlite3.connect(f"file:{run_dir / 'checkpoints.sqlite'}?mode=ro", uri=True, timeout=0.2) as db:
            n = db.execute("SELECT count(*) FROM checkpoints").fetchone()[0]
        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(str(run_dir / "checkpoints.sqlite"), timeout=0.2, check_same_thread=False)
        try:
            thread = json.loads((run_dir / "config.json").read_text())["record"]["thread_id"]  # the run's own id
            tup = SqliteSaver(conn).get_tuple({"configurable": {"thread_id": thread}})
        finally:
            conn.close()
    except (sqlite3.Error, OSError, ValueError, KeyError):
        return None
    if tup is None:
        return None
    return n, int(tup.checkpoint["channel_values"].get("round", 0)), cached


def test_kill_9_mid_node_then_resume_matches_the_uninterrupted_run(env, tmp_path):
    from cooplab.graphs.tracing import load_runs

    slow = tmp_path / "slow.json"  # the example's script, each answer 30 ms late: time to look
    slow.write_text(json.dumps({**json.loads(SCRIPT.read_text()), "latency": 0.03}))

    def args(out, cache):
        return [
            "run",
            "ultimatum",
            "--agents",
            "llm",
            "--model",
            f"scripted:{slow}",
            "--set",
            "n_players=4",
            "--set",
            "rounds=8",
            "--max-concurrency",
            1,
            "--cache",
            cache,
            "--out",
            out,
            "--json",
            "-q",
        ]

    ref = ok(cli(env, *args(tmp_path / "ref", tmp_path / "c1.sqlite")))
    run_dir, cache = tmp_path / "run", tmp_path / "c2.sqlite"
    proc = subprocess.Popen(
        [COOPLAB, *map(str, args(run_dir, cache))], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    # Killed on observable progress, never after a fixed time: the process is frozen (SIGSTOP) while
    # we look, and killed once it is past round 2 with model calls answered (in the cache) since its
    # last checkpoint: a node is half done, so the resumed run must redo it, replaying those calls.
    seen: dict[int, int] = {}

    def mid_node() -> bool:
        p = _checkpoints_and_cache(run_dir, cache)
        if p is None:
            return False
        n, round_, cached = p
        seen.setdefault(n, cached)  # responses cached when checkpoint n was first seen
        return round_ >= 3 and cached > seen[n]

    assert kill_when(proc, mid_node), "the run finished (or hung) before it could be killed mid-node; raise the latency"
    assert not (run_dir / "summary.json").exists()
    res = ok(cli(env, "resume", run_dir, "--json", "-q"))
    a, b = json.loads(ref.stdout), json.loads(res.stdout)
    assert b["status"] == "completed" and b["llm"]["cache_hits"] > 0  # the calls made before the kill, replayed ...
    assert (
        a["ledger"]["cached_calls"] == b["ledger"]["cached_calls"] == 0
    )  # ... and charged once, as the live calls they were
    for key in ("rounds_completed", "mean_offer", "mean_offer_last_round", "acceptance_rate", "mean_payoff"):
        assert a[key] == b[key], key
    assert a["ledger"]["calls"] == b["ledger"]["calls"] and a["ledger"]["cost_usd"] == b["ledger"]["cost_usd"]
    for stem in ("games", "rounds"):
        pd.testing.assert_frame_equal(
            pd.read_parquet(tmp_path / "ref" / f"{stem}.parquet"), pd.read_parquet(run_dir / f"{stem}.parquet")
        )
    drop = ["latency", "cached_calls"]
    pd.testing.assert_frame_equal(
        pd.read_parquet(tmp_path / "ref" / "decisions.parquet").drop(columns=drop),
        pd.read_parquet(run_dir / "decisions.parquet").drop(columns=drop),
    )
    # one coherent trace file: the killed run's tree (root recovered as interrupted), then the resumed run's
    runs = load_runs(run_dir, validate=True)
    roots = [r for r in runs if r["parent_run_id"] is None]
    assert len(roots) == 2 and roots[0]["error"].startswith("interrupted") and "resumed" in roots[1]["tags"]
    by_id = {r["id"]: r for r in runs}
    assert len(by_id) == len(runs) and all(r["parent_run_id"] is None or r["parent_run_id"] in by_id for r in runs)


def test_a_broken_plugin_says_why_and_spares_the_others(env, tmp_path):
    dist = tmp_path / "broken" / "cooplab_broken-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: cooplab-broken\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[cooplab.tasks]\nbroken = cooplab_no_such_module:TASK\n")
    env = {**env, "PYTHONPATH": os.pathsep.join([str(tmp_path / "broken"), env["PYTHONPATH"]])}
    res = cli(env, "run", "broken", "--set", "rounds=2", "--out", tmp_path / "x")
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    assert res.stderr.startswith(
        "cooplab: error: task 'broken' (cooplab_no_such_module:TASK) failed to load: ModuleNotFoundError"
    )
    assert not (tmp_path / "x").exists()
    assert ok(cli(env, "run", "ultimatum", "--set", "rounds=2", "--out", tmp_path / "y", "-q", "--json")).stdout


@pytest.mark.parametrize(
    "setting,needle",
    [
        ("n_players=5", "--set n_players must be a multiple of 2, got 5"),
        ("offer=NaN", "--set offer must be less than or equal to 1, got nan"),
        ('rounds="5"', "--set rounds must be an integer, got '5'"),
        ("rounds=100000", "--set rounds: replicates x n_players / 2 x rounds must be at most 10,000,000 games"),
        ("colour=red", "unknown parameter 'colour'"),
    ],
)
def test_bad_set_values_are_one_line_errors(env, tmp_path, setting, needle):
    more = ["--set", "replicates=1000"] if setting.startswith("rounds=1") else []
    res = cli(env, "run", "ultimatum", *more, "--set", setting, "--out", tmp_path / "x")
    assert res.returncode == 2, res.stderr
    assert res.stderr.startswith("cooplab: error: ") and res.stderr.count("\n") == 1 and needle in res.stderr
    assert not (tmp_path / "x").exists()
