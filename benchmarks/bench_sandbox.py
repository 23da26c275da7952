"""Sandbox latency benchmark: cold start, warm-pool start, trivial round trip,
next to ``docker run --rm`` per call.

    .venv/bin/python benchmarks/bench_sandbox.py            # n=50 each, ~4 min
    .venv/bin/python benchmarks/bench_sandbox.py --n 10 --no-write
    .venv/bin/python benchmarks/bench_sandbox.py --n 1 --roundtrip-n 1 --out /tmp/results.md   # smoke run, written
    elsewhere

Writes (replaces) the ``## Sandbox`` section of benchmarks/RESULTS.md.
Targets: warm start < 0.3 s, trivial round trip < 50 ms p50.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _results import (  # benchmarks/ is on sys.path when run as a script
    RESULTS,
    machine_info,
    write_section,
)

from cooplab.sandbox import SandboxConfig, SandboxPool, SandboxSession, docker_backend


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def summary(xs: list[float]) -> dict:
    return {"n": len(xs), "p50": pct(xs, 50), "p95": pct(xs, 95), "mean": statistics.fmean(xs)}


def fmt(s: float) -> str:
    return f"{s * 1000:.1f} ms" if s < 1 else f"{s:.2f} s"


def bench_cold(cfg: SandboxConfig, backend: str, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        s = SandboxSession(cfg, backend=backend).start()
        out.append(time.perf_counter() - t)
        s.close()
    return out


def bench_warm(cfg: SandboxConfig, backend: str, n: int) -> list[float]:
    out = []
    with SandboxPool(cfg, size=2, backend=backend) as pool:
        for _ in range(n):
            if not pool.wait_ready(1, timeout=120):
                raise RuntimeError(f"pool did not fill: {pool.last_error}")
            t = time.perf_counter()
            s = pool.session().start()
            out.append(time.perf_counter() - t)
            s.close()
    return out


def bench_roundtrip(cfg: SandboxConfig, backend: str, n: int) -> list[float]:
    out = []
    with SandboxSession(cfg, backend=backend) as s:
        for _ in range(5):
            s.run_code("1 + 1")
        for _ in range(n):
            t = time.perf_counter()
            r = s.run_code("1 + 1")
            out.append(time.perf_counter() - t)
            assert r.result == "2", r
    return out


def bench_docker_run(image: str, n: int) -> list[float]:
    docker = shutil.which("docker")
    if docker is None:
        return []
    cmd = [
        docker,
        "run",
        "--rm",
        "--network",
        "none",
        "--read-only",
        "--memory",
        "2g",
        "--user",
        "10001:10001",
        image,
        "python3",
        "-c",
        "import pandas, numpy; print(1 + 1)",
    ]
    out = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        out.append(time.perf_counter() - t)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=50, help="runs per measurement (default 50)")
    ap.add_argument("--roundtrip-n", type=int, default=200)
    ap.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    ap.add_argument(
        "--out", type=Path, default=None, help="write the section to this file instead of benchmarks/RESULTS.md"
    )
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="cooplab-bench-"))
    data = tmp / "data.csv"
    data.write_text("a,b\n" + "".join(f"{i},{i * 2}\n" for i in range(1000)))
    os.chmod(data, 0o644)
    info = machine_info(docker=True)
    rows: list[tuple[str, dict]] = []
    have_docker = docker_backend.daemon_available() and docker_backend.image_available(SandboxConfig().image)
    for backend in (["docker"] if have_docker else []) + ["local"]:
        cfg = SandboxConfig(dataset=data)
        print(f"[{backend}] cold start x{args.n} ...", file=sys.stderr, flush=True)
        rows.append(
            (f"{backend}: cold session start (create + imports + df load)", summary(bench_cold(cfg, backend, args.n)))
        )
        print(f"[{backend}] warm-pool start x{args.n} ...", file=sys.stderr, flush=True)
        rows.append((f"{backend}: warm-pool session start", summary(bench_warm(cfg, backend, args.n))))
        print(f"[{backend}] round trip x{args.roundtrip_n} ...", file=sys.stderr, flush=True)
        rows.append(
            (
                f"{backend}: trivial run_code round trip (`1 + 1`)",
                summary(bench_roundtrip(cfg, backend, args.roundtrip_n)),
            )
        )
    if have_docker:
        print(f"[docker] docker run --rm x{args.n} ...", file=sys.stderr, flush=True)
        xs = bench_docker_run(SandboxConfig().image, args.n)
        if xs:
            rows.append(("baseline: `docker run --rm` per call (python3 -c 'import pandas, numpy; 1+1')", summary(xs)))
    shutil.rmtree(tmp, ignore_errors=True)

    table = ["| measurement | n | p50 | p95 | mean |", "| --- | ---: | ---: | ---: | ---: |"]
    for name, s in rows:
        table.append(f"| {name} | {s['n']} | {fmt(s['p50'])} | {fmt(s['p95'])} | {fmt(s['mean'])} |")
    verdict = []
    d = {name: s for name, s in rows}
    warm = d.get("docker: warm-pool session start")
    rt = d.get("docker: trivial run_code round trip (`1 + 1`)")
    if warm:
        verdict.append(
            f"- warm start target < 0.3 s: p50 {fmt(warm['p50'])} -> {'MET' if warm['p50'] < 0.3 else 'MISSED'}"
        )
    if rt:
        verdict.append(
            f"- round trip target < 50 ms p50: {fmt(rt['p50'])} -> {'MET' if rt['p50'] < 0.05 else 'MISSED'}"
        )
    if not have_docker:
        verdict.append("- Docker unavailable: only the local backend was measured")
    text = "\n".join(
        [
            "## Sandbox",
            "",
            "`benchmarks/bench_sandbox.py` (one command; docker backend with the default limits: "
            "1 CPU, 2 GB, network none).",
            "",
            *info,
            "",
            *table,
            "",
            *verdict,
            "",
            "Warm-pool start = taking an already started, hand-shaken sandbox (imports done, df loaded) "
            "from the pool and checking it with one ping; the pool refills in the background (one cold start per "
            "taken sandbox, in a thread), so sessions requested faster than ~1 per cold-start time per pool slot "
            "fall back to cold starts. Cold start = create + start a container, attach, the worker imports "
            "numpy/pandas/matplotlib and loads df. The local backend's round trip includes a scan of the host's "
            "/proc for stray processes after each call.",
            "",
        ]
    )
    print(text)
    if not args.no_write:
        write_section("Sandbox", text, args.out or RESULTS)
        print(f"updated {args.out or RESULTS}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
