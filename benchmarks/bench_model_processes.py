"""Benchmark: model processes (issue 41 point 1, ``--model-processes``): an LLM society against a hosted-style
model, its model calls made in the run's process or in worker processes.

    .venv/bin/python benchmarks/bench_model_processes.py                 # writes its section of RESULTS.md (~3 min)
    .venv/bin/python benchmarks/bench_model_processes.py --quick         # smoke run (tiny sizes; writes nothing)

One CPR society of ``--agents`` LLM agents (``cooplab run cpr --agents llm``, the whole runner: SQLite
checkpoints, traces, the ledger's journal; cache off) against an OpenAI-compatible server on loopback
(``openai:stub`` with ``--base-url``; a child process answering every request at once with a valid decision
for any phase, so the client's side is what is measured). The same run is made with ``--model-processes``
0 (every model call in the run's process: the OpenAI SDK's client, LangChain's integration and cooplab's
response checks on the run's event loop), 1 and 2, the variants in turns, ``--repeats`` times.

Per run: the run's own time (``wall_seconds`` of summary.json: the graph, without the interpreter's start-up
but with the workers' start), decisions per second of it, and the CPU of the whole command and its workers
(``RUSAGE_CHILDREN``). Every run's decisions (but their latency) and ledger (sorted by call id) are checked
equal to the first one-process run's: the benchmark stops if they differ.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _results import CLI, emit, machine_info  # noqa: E402 - benchmarks/ is on sys.path when run as a script
from _stub import start  # noqa: E402

TITLE = "Model processes: a society's model calls in worker processes"
#: a valid answer for every CPR phase (each decision's schema ignores the fields of the others)
ANSWER = json.dumps(
    {
        "effort": 0.3,
        "punish": None,
        "vote": 1,
        "belief": "We should all fish less.",
        "proposal": "Everyone fishes at most half of the usual effort.",
    }
)


# --- one run ------------------------------------------------------------------------------------------
def one_run(port: int, out: Path, args: argparse.Namespace, processes: int) -> dict[str, Any]:
    cmd = [
        *("run", "cpr", "--agents", "llm", "--model", "openai:stub", "--base-url", f"http://127.0.0.1:{port}/v1"),
        *("--n-agents", str(args.agents), "--rounds", str(args.rounds), "--cache", "off"),
        *("--max-concurrency", str(args.concurrency), "--model-processes", str(processes)),
        *("--out", str(out), "--force", "-q", "--json"),
    ]
    env = {**os.environ, "OPENAI_API_KEY": "sk-bench"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", CLI, *cmd], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode != 0:
        raise SystemExit(f"bench_model_processes: the run failed ({res.returncode}): {res.stderr.strip()[-400:]}")
    summary = json.loads((out / "summary.json").read_text())
    import pandas as pd

    decisions = pd.read_parquet(out / "decisions.parquet")
    return {
        "processes": processes,
        "run_s": float(summary["wall_seconds"]),
        "command_s": wall,
        "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "decisions": len(decisions),
        "calls": int(summary["ledger"]["calls"]),
    }


def same_results(a: Path, b: Path) -> str | None:
    """What differs between two runs' decisions (but latency) and ledgers (sorted by call id), or None."""
    import pandas as pd

    da, db = (pd.read_parquet(p / "decisions.parquet").drop(columns=["latency"]) for p in (a, b))
    if not da.equals(db):
        return "decisions"
    la, lb = (pd.read_parquet(p / "ledger.parquet").sort_values("call_id").reset_index(drop=True) for p in (a, b))
    if not la.equals(lb):
        return "ledger"
    return None


def measure(args: argparse.Namespace) -> list[dict[str, Any]]:
    tmp = Path(tempfile.mkdtemp(prefix="bench-mp-"))
    server, port = start(tmp, ANSWER, 300, 40)
    rows: list[dict[str, Any]] = []
    try:
        for rep in range(args.repeats):
            for p in args.processes:
                out = tmp / f"p{p}-r{rep}"
                row = one_run(port, out, args, p)
                row["repeat"] = rep
                reference = tmp / f"p{args.processes[0]}-r0"
                if out != reference:
                    diff = same_results(reference, out)
                    if diff is not None:
                        raise SystemExit(f"bench_model_processes: {p} processes changed the run's {diff}")
                    shutil.rmtree(out)
                rows.append(row)
                print(
                    f"repeat {rep + 1}/{args.repeats}, {p} model processes: run {row['run_s']:.2f} s, "
                    f"{row['decisions'] / row['run_s']:.0f} decisions/s, CPU {row['cpu_s']:.2f} s",
                    file=sys.stderr,
                )
    finally:
        server.kill()
        server.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    return rows


def report(rows: list[dict[str, Any]], head: list[str], args: argparse.Namespace) -> str:
    base = [r for r in rows if r["processes"] == args.processes[0]]
    L = [
        f"## {TITLE}",
        "",
        *head,
        f"- command: `benchmarks/bench_model_processes.py --agents {args.agents} --rounds {args.rounds} "
        f"--concurrency {args.concurrency} --repeats {args.repeats}`",
        "",
        f"One CPR society of {args.agents} LLM agents, {args.rounds} rounds, through `cooplab run cpr` (SQLite "
        "checkpoints, traces, ledger journal; cache off), against an OpenAI-compatible server on loopback that "
        f"answers at once (a child process); `--max-concurrency {args.concurrency}`. The variants ran in turns. "
        "run = summary.json's `wall_seconds` (the workers' start included); CPU = the command's and its workers' "
        "user + system time. Every run's decisions and ledger were checked equal to the first one-process run's.",
        "",
        "| model processes | decisions | run s (median; min-max) | decisions / s | run / one process "
        "| CPU s (median) |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    base_run = statistics.median(r["run_s"] for r in base)
    for p in args.processes:
        mine = [r for r in rows if r["processes"] == p]
        run = statistics.median(r["run_s"] for r in mine)
        lo, hi = min(r["run_s"] for r in mine), max(r["run_s"] for r in mine)
        d = mine[0]["decisions"]
        cpu = statistics.median(r["cpu_s"] for r in mine)
        L.append(f"| {p} | {d} | {run:.2f} ({lo:.2f}-{hi:.2f}) | {d / run:.0f} | {run / base_run:.2f} | {cpu:.2f} |")
    L.append("")
    return "\n".join(L)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--agents", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=256, help="--max-concurrency of the runs")
    ap.add_argument("--processes", default="0,1,2", help="comma-separated --model-processes values, the first the base")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="smoke size: 6 agents, 1 round, 1 repeat")
    ap.add_argument("--out", type=Path, default=None, help="write the section into this file instead of RESULTS.md")
    args = ap.parse_args(argv)
    try:
        args.processes = [int(x) for x in args.processes.split(",") if x.strip()]
    except ValueError:
        ap.error("--processes must be comma-separated whole numbers, e.g. 0,1,2")
    if not args.processes or any(not 0 <= p <= 64 for p in args.processes):
        ap.error("--processes must list numbers in 0..64")
    if args.quick:
        args.agents, args.rounds, args.repeats = 6, 1, 1
    if args.agents < 2 or args.rounds < 1 or args.repeats < 1 or not 1 <= args.concurrency <= 1024:
        ap.error("--agents must be at least 2, --rounds and --repeats at least 1, --concurrency in 1..1024")
    head = machine_info(versions=True)
    rows = measure(args)
    emit(TITLE, report(rows, head, args), write=not args.quick or args.out is not None, out=args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
