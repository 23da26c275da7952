"""Benchmark: the same sweep on the local executor (threads) and on Ray (issue 13), and a projection
of the science-teams paper's 7,310 team simulations on N nodes.

    .venv/bin/python benchmarks/bench_sweep.py            # about 8-12 min on 2 cores; writes "## Sweeps: local vs Ray"
    in RESULTS.md
    .venv/bin/python benchmarks/bench_sweep.py --quick    # smoke run (12 cells, 10 replicates, 2 science runs); prints
    only
    .venv/bin/python benchmarks/bench_sweep.py --quick --betas 2 --rs 1 --replicates 1 --science-runs 1 --sandbox local
    # tiniest (tests)

(a) **The CPR Fig. 3 grid split into cells**: 11 beta x 10 r = 110 cells (mixed population, 10
    agents, 50 rounds, ``--replicates`` societies each, default 100: the 11,000 societies of Fig. 3),
    one run directory per cell, as ``cooplab sweep`` runs them: a grid sweep with grid
    ``{"set.beta": [...], "set.r": [...]}``. Run on the local executor (2 threads) and on a
    private Ray instance with 2 CPUs, in the same process, alternating per repeat. Ray's start-up
    is timed separately (``ray.init``), so the per-cell numbers are for a running cluster. The
    tables of the two executors are checked equal before any number is written.
    Overhead per cell = (Ray wall - local wall) x workers / cells.
(b) **Science runs on Ray**: a science sweep of the scripted oracle team in the Docker sandbox
    (``--science-runs`` runs) on the Ray executor: seconds per run, from which the projection of
    7,310 runs on N nodes of this machine's kind (2 CPUs each) follows:
    T(N) = ceil(7310 / (2 N)) x (run seconds + overhead per cell). LLM-bound runs scale the same way
    as long as the model endpoint keeps up; their run seconds are the model's latency x calls.
"""

from __future__ import annotations

import argparse
import math
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _results import (  # benchmarks/ is on sys.path when run as a script
    emit,
    machine_info,
)

ROOT = Path(__file__).resolve().parents[1]
SECTION = "Sweeps: local vs Ray"


def fig3_jobs(out: Path, replicates: int, betas: list[float], rs: list[float]) -> list[dict]:
    from cooplab.runs import grid

    sw = grid.load(
        {
            "task": "cpr",
            "out": str(out),
            "fixed": {"agents": "rule", "population": "mixed", "replicates": replicates},
            "grid": {"set.beta": betas, "set.r": rs},
            "seeds": [1],
            "parallel": 2,
        },
        "bench",
    )
    return grid.jobs(sw, "bench")  # every cell's config checked, as `cooplab sweep` does


def comparable(rows: list[dict]) -> list[dict]:
    drop = ("seconds", "wall", "created", "time", "date")
    return sorted(
        ({k: v for k, v in r.items() if not any(s in k for s in drop)} for r in rows), key=lambda r: r["cell"]
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--quick",
        action="store_true",
        help="12 cells, 10 replicates, 2 science runs; print only (unless --out); "
        "--betas, --rs, --replicates and --science-runs given explicitly still apply",
    )
    ap.add_argument("--replicates", type=int, default=None, help="societies per cell (default 100; 10 with --quick)")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--science-runs", type=int, default=None, help="science runs in (b) (default 6; 2 with --quick)")
    ap.add_argument(
        "--betas", type=int, default=None, help="use the first K beta values of Fig. 3 (default all 11; 4 with --quick)"
    )
    ap.add_argument(
        "--rs", type=int, default=None, help="use the first K r values of Fig. 3 (default all 10; 3 with --quick)"
    )
    ap.add_argument("--sandbox", default="docker", choices=("docker", "local"))
    ap.add_argument("--out", type=Path, help="write the section to this file instead of RESULTS.md")
    a = ap.parse_args()
    for name in ("replicates", "science_runs", "betas", "rs"):
        if getattr(a, name) is not None and getattr(a, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1")
    import ray

    from cooplab.runs import sweeps
    from cooplab.tasks.cpr.validation import FIG3_BETAS, FIG3_RS

    betas, rs = list(FIG3_BETAS), list(FIG3_RS)
    n_betas, n_rs = (4, 3) if a.quick else (len(betas), len(rs))
    betas, rs = betas[: a.betas or n_betas], rs[: a.rs or n_rs]
    reps = a.replicates or (10 if a.quick else 100)
    a.science_runs = a.science_runs or (2 if a.quick else 6)
    n = len(betas) * len(rs)
    work = Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    walls: dict[str, list[float]] = {"local": [], "ray": []}
    tables: dict[str, list[dict]] = {}
    try:
        t0 = time.perf_counter()
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
        ray_start = time.perf_counter() - t0
        for rep in range(a.repeats):
            for ex in ("local", "ray") if rep % 2 == 0 else ("ray", "local"):
                out = work / f"{ex}-{rep}"
                jobs = fig3_jobs(out, reps, betas, rs)
                res = sweeps.run_jobs(jobs, parallel=2, noun="cell", executor=ex)
                assert not res["failed"] and len(res["ran"]) == n, res["failed"][:2]
                walls[ex].append(res["seconds"])
                tables[ex] = comparable(sweeps.table(jobs, res, "cell"))
                print(f"(a) {ex} repeat {rep}: {n} cells in {res['seconds']:.1f} s", flush=True)
                shutil.rmtree(out, ignore_errors=True)
        if tables["local"] != tables["ray"]:
            print("the local and the Ray tables differ: no numbers written", file=sys.stderr)
            return 1
        loc, on_ray = statistics.median(walls["local"]), statistics.median(walls["ray"])

        # (a2) one worker each, no GIL sharing between cells: the overhead of a cell on Ray itself
        ray.shutdown()
        ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False, configure_logging=False)
        sub = betas[: max(2, len(betas) // 5)]
        one: dict[str, list[float]] = {"local": [], "ray": []}
        for rep in range(a.repeats):
            for ex in ("local", "ray") if rep % 2 == 0 else ("ray", "local"):
                out = work / f"one-{ex}-{rep}"
                jobs = fig3_jobs(out, reps, sub, rs)
                res = sweeps.run_jobs(jobs, parallel=1, noun="cell", executor=ex)
                assert not res["failed"], res["failed"][:2]
                one[ex].append(res["seconds"])
                print(f"(a2) {ex} 1 worker, repeat {rep}: {len(jobs)} cells in {res['seconds']:.1f} s", flush=True)
                shutil.rmtree(out, ignore_errors=True)
        n1 = len(sub) * len(rs)
        loc1, ray1 = statistics.median(one["local"]), statistics.median(one["ray"])
        overhead_ms = (ray1 - loc1) / n1 * 1000
        ray.shutdown()
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)

        # (b) science runs on Ray
        from cooplab.runs import grid

        sci = grid.load(
            {
                "task": "science",
                "out": str(work / "science"),
                "seeds": list(range(a.science_runs)),
                "parallel": 2,
                "fixed": {"team": "oracle", "task": "ecology", "sandbox_backend": a.sandbox, "cache": "off"},
            },
            "bench",
        )
        t1 = time.perf_counter()
        sres = grid.run(sci, executor="ray")
        sci_wall = time.perf_counter() - t1
        assert not sres["failed"], sres["failed"][:2]
        per_run = sci_wall * min(2, a.science_runs) / a.science_runs  # 2 runs at a time (1 if there is only one)
    finally:
        if ray.is_initialized():
            ray.shutdown()
        shutil.rmtree(work, ignore_errors=True)

    def proj(nodes: int) -> str:
        s = math.ceil(7310 / (2 * nodes)) * (per_run + max(overhead_ms, 0) / 1000)
        return f"{s / 3600:.2f} h" if s >= 3600 else f"{s / 60:.1f} min"

    lines = [
        f"## {SECTION}",
        "",
        f"`benchmarks/bench_sweep.py{' --quick' if a.quick else ''}`",
        "",
        *machine_info(versions=True),
        f"- ray {ray.__version__}",
        "",
        f"### (a) The CPR Fig. 3 grid as {n} cells ({len(betas)} beta x {len(rs)} r, {reps} replicates each, 10 "
        "agents, 50 rounds)",
        "",
        "Both executors run 2 cells at a time; the tables of the two were checked equal (every summary number of every "
        "cell).",
        "",
        "| executor | wall (median of %d) | per cell (x 2 workers) |" % a.repeats,
        "|---|---:|---:|",
        f"| local (threads) | {loc:.1f} s | {loc * 2 / n * 1000:.0f} ms |",
        f"| Ray (2 CPUs, running) | {on_ray:.1f} s | {on_ray * 2 / n * 1000:.0f} ms |",
        "",
        f"- Ray / local wall time with 2 workers: **{on_ray / loc:.2f}x**. The local executor's cells are threads of "
        "one "
        "process and share its GIL (the CPR ABM is numpy plus Python per round), Ray's are processes.",
        f"- Ray's start-up (`ray.init`, a new local instance): {ray_start:.1f} s, once per sweep.",
        "",
        f"**One worker each** ({n1} of the cells, no sharing): local {loc1:.1f} s, Ray {ray1:.1f} s, so the "
        f"**overhead of a cell on Ray is {overhead_ms:.0f} ms** ({loc1 / n1 * 1000:.0f} ms per cell locally); "
        "it is the task's submission, the worker's first import of cooplab, and collecting the result.",
        "",
        "### (b) Science runs on Ray, and 7,310 of them on N nodes",
        "",
        f"{a.science_runs} runs of the scripted oracle team (ecology task, {a.sandbox} sandbox) on the Ray executor: "
        f"{sci_wall:.1f} s, so **{per_run:.1f} s per run** per CPU.",
        "",
        "| nodes (2 CPUs each) | 1 | 4 | 16 | 64 | 256 |",
        "|---|---:|---:|---:|---:|---:|",
        "| 7,310 oracle-team runs | " + " | ".join(proj(k) for k in (1, 4, 16, 64, 256)) + " |",
        "",
        "The projection is T(N) = ceil(7310 / 2N) x (seconds per run + overhead per cell). It assumes the "
        "cluster's nodes are like this one and that cells are independent (they are). For LLM teams, seconds per "
        "run are the model's latency x calls per run (about 45 calls for the oracle's shape), and the endpoint's "
        "rate limit, not the cluster, usually bounds the sweep.",
        "",
    ]
    emit(SECTION, "\n".join(lines), write=not a.quick or a.out is not None, out=a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
