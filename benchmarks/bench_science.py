"""Benchmark: science teams (issue 12).

    .venv/bin/python benchmarks/bench_science.py            # ~3-10 min; writes "## Science teams" in
    benchmarks/RESULTS.md
    .venv/bin/python benchmarks/bench_science.py --quick    # oracle on one task, local backend, no local model; prints
    only

Measurements:

(a) **Framework time per agent step** with the scripted oracle team (zero model latency) and the
    garbage team (no code: no sandbox at all), one agent step being one model call and the tool
    calls it asks for. The main reading is the framework's CPU per step: the run's process CPU
    (``time.process_time``) over the graph's execution (``cooplab.runs.runner._stream``: prompts,
    the decision layer, the ledger, the tools' client side, trace records, checkpoints; the
    sandbox's own process is not counted) over the model calls, beside the same CPU per step of the
    bare tool loop (``bench_tools``' bare variant) in the same run: issue 41 point 2 asks for at
    most 1.5x. The older reading, node wall time minus the ledger's sandbox seconds, is kept beside
    it; it undercounts when a team's agents run code at the same time (their sandbox seconds add
    up, the wall time does not). Target <= 5 ms.
(b) **The oracle team on each task** with the Docker sandbox: wall time, model calls, tokens,
    cost at the default rates, sandbox seconds, scores.
(c) **One local-model run** (SmolLM2-135M, Docker sandbox, small caps): wall time, calls, tokens,
    cost, status and scores.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _results import (  # benchmarks/ is on sys.path when run as a script
    apply_gc,
    emit,
    machine_info,
)

SECTION = "Science teams"
EXE = str(Path(sys.executable).parent / "cooplab")
TIMING_ENV = "COOPLAB_BENCH_TIMING"  #: where the worker writes the graph's timing


def run(out: Path, *args: str, timing: Path | None = None) -> tuple[dict, float]:
    """``cooplab run science ... --cache off --out OUT``: (its summary, the process's wall time). With
    ``timing``, the command line runs in this script's worker (:func:`worker`), which also writes the
    graph's CPU and wall time to that file."""
    cmd, env = [EXE], None
    if timing is not None:
        cmd, env = [sys.executable, __file__, "--worker"], {**os.environ, TIMING_ENV: str(timing)}
    t0 = time.perf_counter()
    res = subprocess.run(
        [*cmd, "run", "science", *args, "--cache", "off", "--out", str(out), "-q", "--json"],
        capture_output=True,
        text=True,
        timeout=3600,
        env=env,
    )
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"bench_science: run failed: {res.stderr.strip()[-400:]}")
    return json.loads(res.stdout), wall


def run_timed(out: Path, *args: str) -> tuple[dict, dict]:
    """:func:`run` in the worker: (the run's summary, its graph's CPU and wall seconds)."""
    timing = out.parent / f"{out.name}.timing.json"
    summary, _wall = run(out, *args, timing=timing)
    return summary, json.loads(timing.read_text())


def worker(argv: list[str]) -> int:
    """The child of :func:`run_timed`: the ``cooplab`` command line in this process, under the console
    script's collector, with the graph's execution timed into ``$COOPLAB_BENCH_TIMING``."""
    from cooplab.runs import runner

    apply_gc("cooplab")
    inner = runner._stream
    timing: dict[str, float] = {}

    async def timed(*a, **k):
        c0, w0 = time.process_time(), time.perf_counter()
        try:
            return await inner(*a, **k)
        finally:
            timing["graph_cpu_s"] = time.process_time() - c0
            timing["graph_wall_s"] = time.perf_counter() - w0

    runner._stream = timed
    from cooplab.cli import entry

    sys.argv = ["cooplab", *argv]
    try:
        entry()
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise
    Path(os.environ[TIMING_ENV]).write_text(json.dumps(timing))
    return 0


def step_overhead(out: Path, summary: dict, timing: dict) -> dict:
    import pandas as pd

    from cooplab.evals.typed import scalar

    tl = pd.read_parquet(out / "timeline.parquet")
    lg = pd.read_parquet(out / "ledger.parquet")
    sandbox = scalar(lg.loc[lg.kind == "sandbox_seconds", "units"].astype(float).sum()) if "units" in lg else 0.0
    nodes = scalar(tl["seconds"].sum())
    calls = int((lg.kind == "tokens").sum())
    return {
        "nodes_s": nodes,
        "sandbox_s": sandbox,
        "calls": calls,
        "per_step_ms": 1000 * (nodes - sandbox) / max(1, calls),
        "cpu_s": timing["graph_cpu_s"],
        "cpu_step_ms": 1000 * timing["graph_cpu_s"] / max(1, calls),
        "wall": summary["wall_seconds"],
    }


def bare_tool_step(steps: int) -> tuple[float, float]:
    """A bare tool-loop step in this run (ms, medians): its framework time and its process CPU.
    ``bench_tools``' bare variant (``ToolAgent.arun``, no cache, no tracer) on the local sandbox
    backend, as (a) uses."""
    import asyncio

    from bench_tools import AGENT, CODE, pct, run_variant

    from cooplab.sandbox import SandboxConfig
    from cooplab.sandbox.pool import AgentSandboxPool

    with AgentSandboxPool(SandboxConfig(), backend="local") as pool:
        for k in range(5):
            pool.run(AGENT, CODE.format(k=k))
        asyncio.run(run_variant(pool, 20, 5, cache_path=None, run_dir=None))  # warm the code paths
        fw, _sandbox, _steps, cpu = asyncio.run(run_variant(pool, steps, 5, cache_path=None, run_dir=None))
    return 1000 * pct(fw, 50), 1000 * pct(cpu, 50)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-local", action="store_true", help="skip (c)")
    ap.add_argument("--backend", default="docker", choices=("docker", "local"))
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--repeats", type=int, default=5, help="runs of each team in (a) (default 5)")
    if sys.argv[1:2] == ["--worker"]:
        return worker(sys.argv[2:])
    a = ap.parse_args()
    if a.repeats < 1:
        ap.error("--repeats must be at least 1")
    apply_gc("cooplab")  # the bare loop measured under the collector the runs have (the console script's)
    backend = "local" if a.quick else a.backend
    head = machine_info(versions=True, docker=backend == "docker")
    t_start = time.perf_counter()
    from cooplab.tasks.science.datasets import TASKS

    tasks = TASKS[:1] if a.quick else TASKS
    bare_steps = 20 if a.quick else 200
    bare, bare_cpu = bare_tool_step(bare_steps)
    print(f"(a) bare tool step: {bare:.2f} ms framework, {bare_cpu:.2f} ms CPU per step", flush=True)
    rows, steps = [], []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        for team in ("oracle", "garbage"):
            for rep in range(1 if a.quick else a.repeats):
                out = d / f"steps-{team}-{rep}"
                s, timing = run_timed(out, "--task", "ecology", "--team", team, "--sandbox-backend", "local")
                steps.append({"team": team, **step_overhead(out, s, timing)})
                print(
                    f"(a) {team}: {steps[-1]['cpu_step_ms']:.2f} ms CPU per step, {steps[-1]['per_step_ms']:.2f} ms "
                    f"node wall - sandbox per step ({steps[-1]['calls']} calls)",
                    flush=True,
                )
        for task in tasks:
            out = d / f"oracle-{task}"
            s, wall = run(out, "--task", task, "--team", "oracle", "--sandbox-backend", backend)
            lg = s["ledger"]
            rows.append(
                {
                    "task": task,
                    "wall": wall,
                    "run_wall": s["wall_seconds"],
                    "calls": lg["calls"],
                    "in": lg["input_tokens"],
                    "out": lg["output_tokens"],
                    "cost": lg["cost_usd_float"],
                    "sandbox_s": sum(s["sandbox_seconds_by_team"].values()),
                    **s["scores"],
                }
            )
            print(
                f"(b) oracle {task}: {wall:.1f} s, {lg['calls']} calls, ${lg['cost_usd_float']:.4f}, scores "
                f"{s['scores']}",
                flush=True,
            )
        loc = None
        if not (a.quick or a.no_local):
            out = d / "local"
            s, wall = run(
                out,
                "--task",
                "ecology",
                "--model",
                "local",
                "--sandbox-backend",
                backend,
                "--max-tokens",
                "256",
                "--set",
                "data_size=small",
                "--set",
                "max_steps=3",
                "--set",
                "plan_steps=1",
                "--set",
                "synthesis_steps=2",
                "--set",
                "deliberation_rounds=1",
            )
            lg = s["ledger"]
            loc = {
                "wall": wall,
                "calls": lg["calls"],
                "in": lg["input_tokens"],
                "out": lg["output_tokens"],
                "cost": lg["cost_usd_float"],
                "status": s["status"],
                "scores": s["scores"],
                "stops": s["loop_stops"],
            }
            print(
                f"(c) local model: {wall:.0f} s, {lg['calls']} calls, status {s['status']}, scores {s['scores']}",
                flush=True,
            )
    import statistics

    def med(team: str, key: str = "per_step_ms") -> float:
        return statistics.median(r[key] for r in steps if r["team"] == team)

    L = [
        f"## {SECTION}",
        "",
        f"`.venv/bin/python benchmarks/bench_science.py{' --quick' if a.quick else ''}` (took "
        f"{time.perf_counter() - t_start:.0f} s).",
        "",
        *head,
        "",
        "### (a) Framework time per agent step (target <= 5 ms)",
        "",
        "Scripted teams with zero model latency on the ecology task, local sandbox backend, each run in a process "
        "of its own under the console script's collector. One step is one model call with the tool calls it asks "
        "for. **CPU per step** = the run's process CPU over the graph's execution (prompts, the decision layer, the "
        "ledger, the tools' client side, trace records, SQLite checkpoints; not the sandbox's own process) / model "
        "calls. *Wall - sandbox per step* = (the graph's node time from the run's timeline - the ledger's sandbox "
        "seconds) / model calls: the older reading, too low when agents run code at the same time (their sandbox "
        "seconds add up, the node time does not).",
        "",
        "| team | runs | model calls per run | graph CPU per run | **CPU per step** (median) | / bare step's CPU | "
        "wall - sandbox per step (median) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for team in ("oracle", "garbage"):
        rs = [r for r in steps if r["team"] == team]
        L.append(
            f"| {team} | {len(rs)} | {rs[0]['calls']} | {statistics.median(r['cpu_s'] for r in rs):.3f} s | "
            f"**{med(team, 'cpu_step_ms'):.2f} ms** | {med(team, 'cpu_step_ms') / max(bare_cpu, 1e-9):.2f}x | "
            f"{med(team):.2f} ms |"
        )
    L.append(
        f"| bare tool step (`bench_tools` bare loop, local backend, same run) | {bare_steps} steps | | | "
        f"**{bare_cpu:.2f} ms** | 1.00x | {bare:.2f} ms (framework wall) |"
    )
    cpu_or, cpu_ga = med("oracle", "cpu_step_ms"), med("garbage", "cpu_step_ms")
    r_or, r_ga = cpu_or / max(bare_cpu, 1e-9), cpu_ga / max(bare_cpu, 1e-9)
    L += [
        "",
        f"Target <= 5 ms of CPU per step: {'met' if max(cpu_or, cpu_ga) <= 5.0 else 'NOT met'}.",
        f"Issue 41 target, a science team's step <= 1.5x the bare tool step of the same run (CPU): oracle "
        f"{r_or:.2f}x, garbage {r_ga:.2f}x ({'met' if max(r_or, r_ga) <= 1.5 else 'NOT met'}).",
        "",
        f"### (b) The oracle team on each task ({backend} sandbox)",
        "",
        "| task | wall (process) | run wall | model calls | tokens in / out | cost | sandbox seconds | completeness | "
        "quality | accuracy |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        L.append(
            f"| {r['task']} | {r['wall']:.1f} s | {r['run_wall']:.1f} s | {r['calls']} | {r['in']:,} / {r['out']:,} | "
            f"${r['cost']:.4f} | "
            f"{r['sandbox_s']:.2f} | {r['completeness']:.2f} | {r['quality']:.2f} | {r['accuracy']:.2f} |"
        )
    if loc is not None:
        L += [
            "",
            "### (c) One local-model run",
            "",
            f"SmolLM2-135M-Instruct, ecology (small data), {backend} sandbox, team size 2, max_steps 3, plan_steps 1, "
            "synthesis_steps 2, 1 deliberation round, --max-tokens 256, no budget cap.",
            "",
            "| wall | model calls | tokens in / out | cost at default rates | status | completeness | quality | "
            "accuracy | loop stops |",
            "|---:|---:|---:|---:|---|---:|---:|---:|---|",
            f"| {loc['wall']:.0f} s | {loc['calls']} | {loc['in']:,} / {loc['out']:,} | ${loc['cost']:.4f} | "
            f"{loc['status']} | "
            f"{loc['scores']['completeness']:.2f} | {loc['scores']['quality']:.2f} | {loc['scores']['accuracy']:.2f} | "
            f"{loc['stops']} |",
        ]
    L.append("")
    text = "\n".join(L)
    emit(SECTION, text, write=not a.quick or a.out is not None, out=a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
