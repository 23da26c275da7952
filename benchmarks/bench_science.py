"""Benchmark: science teams (issue 12).

    .venv/bin/python benchmarks/bench_science.py            # ~3-10 min; writes "## Science teams" in
    benchmarks/RESULTS.md
    .venv/bin/python benchmarks/bench_science.py --quick    # oracle on one task, local backend, no local model; prints
    only

Measurements:

(a) **Framework time per agent step** with the scripted oracle team (zero model latency): the
    graph's node time (the run's timeline: plan, work, deliberate, synthesize, route) minus the
    sandbox time (the ledger's sandbox seconds), divided by the model calls (one agent step = one
    model call and the tool calls it asks for). Target <= 5 ms. The same for the garbage team
    (no code: no sandbox at all) as a second reading.
(b) **The oracle team on each task** with the Docker sandbox: wall time, model calls, tokens,
    cost at the default rates, sandbox seconds, scores.
(c) **One local-model run** (SmolLM2-135M, Docker sandbox, small caps): wall time, calls, tokens,
    cost, status and scores.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _results import (  # benchmarks/ is on sys.path when run as a script
    emit,
    machine_info,
)

SECTION = "Science teams"
EXE = str(Path(sys.executable).parent / "cooplab")


def run(out: Path, *args: str) -> tuple[dict, float]:
    t0 = time.perf_counter()
    res = subprocess.run(
        [EXE, "run", "science", *args, "--cache", "off", "--out", str(out), "-q", "--json"],
        capture_output=True,
        text=True,
        timeout=3600,
    )
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"bench_science: run failed: {res.stderr.strip()[-400:]}")
    return json.loads(res.stdout), wall


def step_overhead(out: Path, summary: dict) -> dict:
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
        "wall": summary["wall_seconds"],
    }


def bare_tool_step(steps: int) -> float:
    """The framework time of a bare tool-loop step in this run (ms, median): ``bench_tools``' bare
    variant (``ToolAgent.arun``, no cache, no tracer) on the local sandbox backend, as (a) uses."""
    import asyncio

    from bench_tools import AGENT, CODE, pct, run_variant

    from cooplab.sandbox import SandboxConfig
    from cooplab.sandbox.pool import AgentSandboxPool

    with AgentSandboxPool(SandboxConfig(), backend="local") as pool:
        for k in range(5):
            pool.run(AGENT, CODE.format(k=k))
        asyncio.run(run_variant(pool, 20, 5, cache_path=None, run_dir=None))  # warm the code paths
        fw = asyncio.run(run_variant(pool, steps, 5, cache_path=None, run_dir=None))[0]
    return 1000 * pct(fw, 50)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-local", action="store_true", help="skip (c)")
    ap.add_argument("--backend", default="docker", choices=("docker", "local"))
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    backend = "local" if a.quick else a.backend
    head = machine_info(versions=True, docker=backend == "docker")
    t_start = time.perf_counter()
    from cooplab.tasks.science.datasets import TASKS

    tasks = TASKS[:1] if a.quick else TASKS
    bare = bare_tool_step(20 if a.quick else 200)
    print(f"(a) bare tool step: {bare:.2f} ms framework per step", flush=True)
    rows, steps = [], []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        for team in ("oracle", "garbage"):
            for rep in range(1 if a.quick else 3):
                out = d / f"steps-{team}-{rep}"
                s, _ = run(out, "--task", "ecology", "--team", team, "--sandbox-backend", "local")
                steps.append({"team": team, **step_overhead(out, s)})
                print(
                    f"(a) {team}: {steps[-1]['per_step_ms']:.2f} ms per step ({steps[-1]['calls']} calls)", flush=True
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

    def med(team: str) -> float:
        return statistics.median(r["per_step_ms"] for r in steps if r["team"] == team)

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
        "Scripted teams with zero model latency on the ecology task, local sandbox backend for (a). Per step = (the "
        "graph's node "
        "time from the run's timeline - the sandbox seconds in the ledger) / model calls; one step is one model call "
        "with the tool "
        "calls it asks for (prompt building, the decision layer, the ledger, the tools, the trace records, "
        "checkpoints).",
        "",
        "| team | runs | model calls per run | node time | sandbox time | per step (median) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for team in ("oracle", "garbage"):
        rs = [r for r in steps if r["team"] == team]
        L.append(
            f"| {team} | {len(rs)} | {rs[0]['calls']} | {statistics.median(r['nodes_s'] for r in rs):.2f} s | "
            f"{statistics.median(r['sandbox_s'] for r in rs):.2f} s | **{med(team):.2f} ms** |"
        )
    L.append(f"| bare tool step (`bench_tools` bare loop, local backend, same run) | 1 | | | | **{bare:.2f} ms** |")
    ok = max(med("oracle"), med("garbage")) <= 5.0
    r_or, r_ga = med("oracle") / max(bare, 1e-9), med("garbage") / max(bare, 1e-9)
    L += [
        "",
        f"Target <= 5 ms per step: {'met' if ok else 'NOT met'}.",
        f"Issue 41 target, per step <= 1.5x the bare tool step of the same run: oracle {r_or:.2f}x, garbage "
        f"{r_ga:.2f}x "
        f"({'met' if max(r_or, r_ga) <= 1.5 else 'NOT met'}).",
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
