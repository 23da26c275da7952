"""Sweeps of any task on the local and the Ray executors (cooplab/runs/sweeps.py, cooplab/runs/grid.py).

The Ray tests use real Ray: a private instance started with ``ray.init`` in the test, and a
cluster of two nodes made with ``ray start --head`` and ``ray start --address`` (one CPU each). A
worker process is killed while it runs a cell; Ray runs the cell again and the retry resumes it
from its checkpoint. Under CI a missing Ray fails these tests (Ray is installed by test.sh).
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from cooplab.cli import main
from cooplab.evals.typed import as_frame, column, scalar
from cooplab.runs import grid, sweeps
from tests.helpers.progress import run_progress

EXE = str(Path(sys.executable).parent / "cooplab")
RAY = str(Path(sys.executable).parent / "ray")

if os.environ.get("CI") and shutil.which(RAY) is None and not Path(RAY).exists():
    pytest.fail(
        "Ray is not installed: scripts/setup.sh installs the 'ray' extra (pip install -e .[ray])", pytrace=False
    )
ray = pytest.importorskip("ray", reason="the Ray executor needs 'pip install cooplab[ray]'")

#: summary fields that depend on when and where a cell ran, not on what it computed
_VOLATILE = ("time", "wall", "second", "date", "dir", "path", "created", "elapsed", "host", "pid", "latency")


def numbers(obj, prefix=""):
    if isinstance(obj, dict):
        for k, v in obj.items():
            if not any(s in k.lower() for s in _VOLATILE):
                yield from numbers(v, f"{prefix}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from numbers(v, f"{prefix}[{i}]")
    elif isinstance(obj, (int, float, str)) and not isinstance(obj, bool):
        yield prefix, obj


def summaries(out: Path) -> dict[str, dict]:
    return {
        p.parent.name: dict(numbers(json.loads(p.read_text()))) for p in sorted((out / "cells").glob("*/summary.json"))
    }


def table(out: Path) -> pd.DataFrame:
    df = pd.read_csv(out / "table.csv")
    return (
        as_frame(df[[c for c in df.columns if not any(s in c.lower() for s in _VOLATILE)]])
        .sort_values(df.columns[0])
        .reset_index(drop=True)
    )


def script(tmp_path: Path, name: str, latency: float = 0.0) -> Path:
    """One of the example scripted models, with ``latency`` seconds added to each call."""
    f = tmp_path / f"{name}.json"
    data = json.loads((Path(__file__).parents[2] / "examples" / "scripted" / f"{name}.json").read_text())
    f.write_text(json.dumps({**data, "latency": latency}))
    return f


def cpr_config(
    tmp_path: Path,
    out: Path,
    *,
    latency: float = 0.0,
    rounds: int = 3,
    cache: str = "off",
    ablations: tuple[str, ...] = ("full", "neither"),
) -> Path:
    a = script(tmp_path, "cautious", latency)
    b = script(tmp_path, "greedy", latency)
    c = {
        "task": "cpr",
        "out": str(out),
        "fixed": {
            "agents": "llm",
            "env": "harsh",
            "population": "mixed",
            "replicates": 2,
            "n_agents": 3,
            "rounds": rounds,
            "cache": cache,
            "max_concurrency": 1,
        },
        "grid": {"model": [f"scripted:{a}", f"scripted:{b}"], "ablation": list(ablations)},
        "seeds": [3],
        "parallel": 2,
    }
    p = tmp_path / f"{out.name}.json"
    p.write_text(json.dumps(c))
    return p


def diners_config(tmp_path: Path, out: Path, **more) -> Path:
    c = {
        "task": "diners",
        "out": str(out),
        "fixed": {"agents": "rule", "iterations": 3, "replicates": 4},
        "grid": {"pk": ["3:1", "6:1"]},
        "seeds": [0, 1],
        "parallel": 2,
        **more,
    }
    p = tmp_path / f"{out.name}.json"
    p.write_text(json.dumps(c))
    return p


def sweep(args: list[str], capsys) -> tuple[int, Any, str]:
    """The exit code, the --json answer (JSON: None when nothing was printed) and stderr."""
    code = main(["sweep", *args, "--json"])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else None), err


# --- any task, local executor -----------------------------------------------------------------
def test_a_diners_grid_runs_every_cell_once_then_skips_them(tmp_path, capsys):
    out = tmp_path / "d"
    code, res, err = sweep([str(diners_config(tmp_path, out))], capsys)
    assert code == 0, err
    assert sorted(res["ran"]) == ["pk-3-1__s0", "pk-3-1__s1", "pk-6-1__s0", "pk-6-1__s1"] and res["executor"] == "local"
    t = pd.read_csv(out / "table.csv")
    assert len(t) == 4 and set(t["status"]) == {"completed"} and sorted(t["pk"]) == ["3:1", "3:1", "6:1", "6:1"]
    for _, row in t.iterrows():  # each cell ran exactly the options of its grid point
        cfg = json.loads((out / "cells" / row["cell"] / "config.json").read_text())
        assert (
            cfg["task"] == "diners"
            and cfg["params"]["pk"] == row["pk"]
            and cfg["seed"] == row["seed"]
            and cfg["params"]["iterations"] == 3
        )
    # a cell equals the same run made by hand
    code = main(
        [
            "run",
            "diners",
            "--agents",
            "rule",
            "--iterations",
            "3",
            "--replicates",
            "4",
            "--pk",
            "6:1",
            "--seed",
            "1",
            "--out",
            str(tmp_path / "by-hand"),
            "-q",
        ]
    )
    assert code == 0
    capsys.readouterr()
    by_hand = dict(numbers(json.loads((tmp_path / "by-hand" / "summary.json").read_text())))
    assert summaries(out)["pk-6-1__s1"] == by_hand
    code, again, _ = sweep([str(diners_config(tmp_path, out))], capsys)
    assert code == 0 and sorted(again["skipped"]) == sorted(res["ran"]) and not again["ran"]
    pd.testing.assert_frame_equal(table(out), table(out))


def test_an_interrupted_cell_is_resumed_not_restarted(tmp_path, capsys):
    out = tmp_path / "d"
    cfg = diners_config(tmp_path, out, seeds=[0])
    assert sweep([str(cfg)], capsys)[0] == 0
    ref = summaries(out)
    cell = out / "cells" / "pk-3-1__s0"
    (cell / "summary.json").unlink()  # as if it was killed after its last checkpoint
    code, res, err = sweep([str(cfg)], capsys)
    assert code == 0, err
    assert res["resumed"] == ["pk-3-1__s0"] and res["skipped"] == ["pk-6-1__s0"]
    assert summaries(out) == ref


@pytest.mark.parametrize("executor", ["local", "ray"])
def test_a_failing_cell_is_recorded_and_the_others_finish(tmp_path, executor, ray_local):
    good = grid.jobs(grid.load(json.loads(diners_config(tmp_path, tmp_path / "d", seeds=[0]).read_text()), "t"))
    bad = sweeps.job(
        tmp_path / "d" / "cells" / "broken",
        "diners",
        {**good[0]["config"], "params": {**good[0]["config"]["params"], "groups": "not a group list"}},
    )
    res = sweeps.run_jobs([*good, bad], parallel=2, noun="cell", executor=executor)
    assert sorted(res["ran"]) == sorted(Path(j["dir"]).name for j in good)
    assert [f["cell"] for f in res["failed"]] == ["broken"] and "\n" not in res["failed"][0]["error"]
    rows = {r["cell"]: r for r in sweeps.table([*good, bad], res, "cell")}
    assert rows["broken"]["status"] == "failed" and rows["broken"]["error"] == res["failed"][0]["error"]
    assert all(rows[Path(j["dir"]).name]["status"] == "completed" for j in good)


@pytest.mark.parametrize(
    "change,needle",
    [
        ({"grid": []}, "grid must be an object"),
        ({"grid": {"pk": []}}, "non-empty list"),
        ({"grid": {"pk": [True]}}, "--pk and --groups are text"),
        ({"grid": {"pk": [float("nan")]}}, "values must be finite"),
        ({"grid": {"pk": [[1, 2]]}}, "--pk and --groups are text"),
        ({"grid": {"out": ["x"]}}, "out is set by the sweep"),
        ({"fixed": {"seed": 3}}, "seed is set by the sweep"),
        ({"fixed": "--agents rule"}, "fixed must be an object"),
        ({"fixed": {"pk": "3:1"}}, "'pk' is both in fixed and grid"),
        ({"fixed": {"agents": "rule", "replicates": 4, "iterations": 3, "model": 5}}, "cell pk-3-1__s0"),
        ({"seeds": []}, "seeds must be a non-empty list"),
        ({"seeds": [1, 1]}, "duplicates"),
        ({"seeds": [-1]}, "seeds"),
        ({"seeds": ["0"]}, "seeds must be a non-empty list of integers"),
        ({"parallel": 0}, "parallel"),
        ({"parallel": 10**9}, "parallel"),
        ({"parallel": 2.5}, "parallel"),
        ({"task": "nope"}, "task 'nope' is not installed"),
        ({"task": 3}, "task must be a non-empty string"),
        ({"grid": {"pk": ["9:x"]}}, "cell pk-9-x__s0"),
        ({"grid": {"bogus": [1]}}, "has no option 'bogus'"),
        ({"grid": {"iterations": [-3]}, "fixed": {}}, "--iterations"),
        ({"grid": {"pk": ["3:1"], "iterations": [1] * 3}, "fixed": {}}, "share the directory"),
        ({"unknown": 1}, "unknown"),
    ],
)
def test_bad_task_sweep_configs_are_one_line_errors(tmp_path, capsys, change, needle):
    cfg = json.loads(diners_config(tmp_path, tmp_path / "d").read_text())
    cfg.update(change)
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(cfg))  # NaN is written as the JSON extension NaN, which Python reads back
    code, res, err = sweep([str(p)], capsys)
    assert code == 2 and res is None and err.count("\n") == 1 and needle in err and "Traceback" not in err, err
    assert not (tmp_path / "d").exists()  # nothing ran


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--executor", "dask"], "--executor must be one of local, ray"),
        (["--address", "auto"], "--address is for --executor ray"),
        (["--executor", "ray", "--address", "no-port"], "--address must be auto or HOST:PORT"),
        (["--executor", "ray", "--address", "h:99999"], "--address must be auto or HOST:PORT"),
    ],
)
def test_bad_executor_options_are_one_line_errors(tmp_path, capsys, args, needle):
    code, _, err = sweep([str(diners_config(tmp_path, tmp_path / "d")), *args], capsys)
    assert code == 2 and err.count("\n") == 1 and needle in err, err
    assert not (tmp_path / "d" / "cells").exists()


def test_a_cluster_that_is_not_there_is_one_line(tmp_path, capsys):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = subprocess.run(
        [
            EXE,
            "sweep",
            str(diners_config(tmp_path, tmp_path / "d")),
            "--executor",
            "ray",
            "--address",
            f"127.0.0.1:{port}",
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 2 and "cannot reach a Ray cluster" in p.stderr and "Traceback" not in p.stderr, p.stderr[
        -600:
    ]


# --- Ray ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ray_local():
    """A private local Ray instance with two CPUs, started the way a user's script would."""
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def load_config(path: Path) -> grid.GridSweep:
    return grid.load_file(path)[0].model_copy(update={"analysis": False})


def run_sweep(sw: grid.GridSweep, executor: str) -> dict:
    return grid.run(sw, executor=executor)


@pytest.fixture
def drivers_collector():
    """This process's garbage collector set as a notebook user might have it, then put back."""
    import gc

    saved = gc.get_threshold()
    gc.set_threshold(2345, 11, 12)
    yield [2345, 11, 12]
    gc.set_threshold(*saved)


def test_cpr_sweep_on_ray_equals_the_local_executor(tmp_path, capsys, ray_local, drivers_collector):
    loc = run_sweep(load_config(cpr_config(tmp_path, tmp_path / "loc")), executor="local")
    on_ray = run_sweep(load_config(cpr_config(tmp_path, tmp_path / "ray")), executor="ray")
    assert len(loc["ran"]) == 4 and sorted(on_ray["ran"]) == sorted(loc["ran"]) and not on_ray["failed"]
    assert {p["pid"] for p in on_ray["placement"].values()} - {os.getpid()}  # cells ran in Ray worker processes
    assert all(p["node"] for p in on_ray["placement"].values())
    # each worker ran its cell under the collector of the process that made the jobs (Ray's start with Python's)
    assert [p["gc"] for p in on_ray["placement"].values()] == [drivers_collector] * 4
    assert [p["gc"] for p in loc["placement"].values()] == [drivers_collector] * 4
    assert summaries(tmp_path / "loc") == summaries(tmp_path / "ray")
    pd.testing.assert_frame_equal(table(tmp_path / "loc"), table(tmp_path / "ray"))
    assert scalar(column(table(tmp_path / "ray"), "ledger.calls").min()) > 0


def test_diners_sweep_on_ray_equals_the_local_executor(tmp_path, capsys, ray_local):
    for name, ex in (("loc", "local"), ("ray", "ray")):
        code, res, err = sweep([str(diners_config(tmp_path, tmp_path / name)), "--executor", ex], capsys)
        assert code == 0 and len(res["ran"]) == 4 and res["executor"] == ex, err
    assert summaries(tmp_path / "loc") == summaries(tmp_path / "ray")
    pd.testing.assert_frame_equal(table(tmp_path / "loc"), table(tmp_path / "ray"))


def test_science_sweep_on_ray_equals_the_local_executor(tmp_path, capsys, ray_local):
    """The oracle team with the local sandbox backend (no Docker needed here; the Docker sandbox on
    Ray is exercised by benchmarks/bench_sweep.py)."""
    for name, ex in (("loc", "local"), ("ray", "ray")):
        cfg = tmp_path / f"{name}.json"
        cfg.write_text(
            json.dumps(
                {
                    "task": "science",
                    "out": str(tmp_path / name),
                    "team": "oracle",
                    "science_tasks": ["ecology"],
                    "simulations": 2,
                    "sandbox_backend": "local",
                    "parallel": 2,
                    "llm": {"cache": "off"},
                }
            )
        )
        code, res, err = sweep([str(cfg), "--executor", ex], capsys)
        assert code == 0 and len(res["ran"]) == 2 and res["executor"] == ex, err
        assert Path(res["table_csv"]).exists() and Path(res["scores_csv"]).exists()
    a, b = pd.read_csv(tmp_path / "loc" / "scores.csv"), pd.read_csv(tmp_path / "ray" / "scores.csv")
    assert list(a["accuracy"]) == list(b["accuracy"]) == [1.0, 1.0]
    pd.testing.assert_frame_equal(a.drop(columns=["run_dir"]), b.drop(columns=["run_dir"]))


def _cell_workers() -> list[int]:
    """Pids of Ray worker processes that are running a cell right now (Ray titles them ray::execute_job)."""
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if (d / "cmdline").read_bytes().startswith(b"ray::execute_job"):
                    pids.append(int(d.name))
            except OSError:
                continue
    return pids


def test_a_worker_killed_mid_cell_is_retried_and_resumes_nothing_lost_nothing_paid_twice(tmp_path, ray_local):
    # two cells of two different models: their cache keys differ (a key names the model and the
    # agent), so every row of the shared cache belongs to exactly one cell's calls
    one = ("full",)
    ref = run_sweep(
        load_config(cpr_config(tmp_path, tmp_path / "ref", rounds=6, cache=str(tmp_path / "c1.sqlite"), ablations=one)),
        executor="local",
    )
    assert len(ref["ran"]) == 2
    cfg = load_config(
        cpr_config(tmp_path, tmp_path / "run", latency=0.03, rounds=6, cache=str(tmp_path / "c2.sqlite"), ablations=one)
    )
    cache = tmp_path / "c2.sqlite"
    box: dict = {}
    th = threading.Thread(target=lambda: box.update(run_sweep(cfg, executor="ray")))
    th.start()

    def mid_cell() -> bool:
        """With every cell worker frozen: a running cell is past round 2, and the cache holds calls that
        no checkpoint (nor a finished cell's bill) accounts for, so a cell is in the middle of a node."""
        try:
            with sqlite3.connect(str(cache), timeout=0.2) as db:
                rows = db.execute("SELECT count(*) FROM responses").fetchone()[0]
        except sqlite3.Error:
            return False
        accounted, past_round_2 = 0, False
        for c in (tmp_path / "run" / "cells").glob("*"):
            if (c / "summary.json").exists():
                accounted += json.loads((c / "summary.json").read_text())["ledger"]["calls"]
                continue
            if not (c / "checkpoints.sqlite").exists():
                continue
            p = run_progress(c, cache)
            if p is None:
                return False
            accounted += p[1]
            past_round_2 = past_round_2 or p[0] >= 2
        return past_round_2 and rows > accounted

    killed: list[int] = []
    deadline = time.time() + 240
    while not killed and th.is_alive() and time.time() < deadline:
        frozen = []
        for pid in _cell_workers():
            try:
                os.kill(pid, signal.SIGSTOP)
                frozen.append(pid)
            except ProcessLookupError:
                continue
        if frozen and mid_cell():
            for pid in frozen:  # every running cell dies; Ray retries each, and each retry resumes
                os.kill(pid, signal.SIGKILL)
            killed = frozen
            break
        for pid in frozen:
            os.kill(pid, signal.SIGCONT)
        time.sleep(0.02)
    th.join(timeout=300)
    assert killed, "every cell finished before a worker could be killed mid-cell; raise the latency"
    res = box
    assert not res["failed"] and len(res["ran"]) + len(res["resumed"]) == 2, res
    assert res["resumed"], "no killed cell was resumed from its checkpoint"
    assert not {p["pid"] for p in res["placement"].values()} & set(killed)
    a, b = summaries(tmp_path / "ref"), summaries(tmp_path / "run")
    assert a.keys() == b.keys()
    for cell in a:  # the same results and the same bill as an uninterrupted sweep: nothing lost, nothing paid twice
        # replays are cache hits, and they read no prompt (the local model's prompt_reuse counts live calls only)
        same = lambda d: {k: v for k, v in d.items() if "cache" not in k and "prompt_reuse" not in k}  # noqa: E731
        assert same(a[cell]) == same(b[cell]), cell
    assert (
        sum(v for s in b.values() for k, v in s.items() if k == ".llm.cache_hits") > 0
    )  # the retry replayed calls made before the kill
    for cell in a:
        da = pd.read_parquet(tmp_path / "ref" / "cells" / cell / "decisions.parquet").drop(
            columns=["latency", "cached_calls"]
        )
        db = pd.read_parquet(tmp_path / "run" / "cells" / cell / "decisions.parquet").drop(
            columns=["latency", "cached_calls"]
        )
        pd.testing.assert_frame_equal(da, db)


@pytest.fixture
def ray_cluster(tmp_path):
    """A two-node Ray cluster on this machine: 'ray start --head' and a second 'ray start --address'
    (its own raylet and worker processes), one CPU each. Torn down with 'ray stop'."""
    if ray.is_initialized():
        ray.shutdown()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_USAGE_STATS_ENABLED": "0"}
    subprocess.run([RAY, "get-auth-token", "--generate"], env=env, capture_output=True, timeout=60)
    common = ["--num-cpus", "1", "--disable-usage-stats"]
    try:
        h = subprocess.run(
            [RAY, "start", "--head", "--port", str(port), "--include-dashboard", "false", *common],
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert h.returncode == 0, h.stderr[-800:]
        address = next(
            line.split("--address=")[1].strip().strip("'\"")
            for line in h.stdout.splitlines() + h.stderr.splitlines()
            if "ray start --address=" in line
        )
        w = subprocess.run(
            [RAY, "start", "--address", address, *common], env=env, capture_output=True, text=True, timeout=180
        )
        assert w.returncode == 0, w.stderr[-800:]
        yield address, env
    finally:
        subprocess.run([RAY, "stop", "--force"], env=env, capture_output=True, timeout=120)


def test_a_two_node_ray_start_cluster_gives_the_local_table(tmp_path, ray_cluster):
    address, env = ray_cluster
    cfg_loc, cfg_ray = (
        cpr_config(tmp_path, tmp_path / "loc", latency=0.01),
        cpr_config(tmp_path, tmp_path / "ray", latency=0.01),
    )
    loc = subprocess.run(
        [EXE, "sweep", str(cfg_loc), "--no-analysis", "--json"], capture_output=True, text=True, timeout=600, env=env
    )
    assert loc.returncode == 0, loc.stderr[-800:]
    p = subprocess.run(
        [EXE, "sweep", str(cfg_ray), "--executor", "ray", "--address", address, "--no-analysis", "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert p.returncode == 0, p.stderr[-800:]
    res = json.loads(p.stdout)
    assert res["ray"]["nodes"] == 2 and res["ray"]["cpus"] == 2 and len(res["ran"]) == 4
    assert len({x["node"] for x in res["placement"].values()}) == 2  # both nodes ran cells
    assert summaries(tmp_path / "loc") == summaries(tmp_path / "ray")
    pd.testing.assert_frame_equal(table(tmp_path / "loc"), table(tmp_path / "ray"))


# --- the response cache shared by processes --------------------------------------------------------
def _hammer(path: str, worker: int, n: int) -> None:
    from cooplab.agents.cache import CachedResponse, ResponseCache

    c = ResponseCache(path)
    for i in range(n):
        c.put(f"w{worker}-{i}", CachedResponse(f"text {worker} {i}" * 20, i, worker, 0.1), "m")
        assert c.get(f"w{worker}-{i}") is not None
        c.get(f"w{(worker + 1) % 4}-{i}")  # read what another process may be writing
    assert c.write_errors == 0
    c.close()


def test_processes_writing_one_cache_file_lose_nothing_and_do_not_corrupt_it(tmp_path):
    path = str(tmp_path / "shared.sqlite")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_hammer, args=(path, w, 300)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows = db.execute("SELECT key, text, input_tokens, output_tokens FROM responses").fetchall()
    assert len(rows) == 1200
    for key, text, i, w in rows:
        assert key == f"w{w}-{i}" and text == f"text {w} {i}" * 20
    assert not math.isnan(len(rows))
