"""Benchmark: the local model's speed on a loaded machine, by how its threads wait (issue 41).

    .venv/bin/python benchmarks/bench_local_load.py --loads 0 2 3 --out benchmarks/RESULTS.md
    .venv/bin/python benchmarks/bench_local_load.py --loads 0 --configs passive   # smoke: prints only

For each load (that many ``python -c "while True: pass"`` burners, started before and killed after
each measurement), each configuration of the model process is started fresh and measured: one cold
read of a prompt with a one-token answer (prompt tokens read per second) and one short prompt with
up to 48 tokens generated (tokens per second), as in ``bench_local_reuse.py`` part (a).

Configurations (the model process's environment / thread count). All but ``adapt`` fix two threads,
as the model process ran before its count followed the free cores (``threads_for_call`` in
``agents/llama_worker.py``):

- ``default``: OpenMP's default wait policy (``OMP_WAIT_POLICY`` unset);
- ``active``: ``OMP_WAIT_POLICY=active`` (llama.cpp's OpenMP threads spin at barriers);
- ``passive``: ``OMP_WAIT_POLICY=passive`` (they sleep);
- ``spin0``: ``GOMP_SPINCOUNT=0`` with no wait policy;
- ``1thread``: ``n_threads=1``, default policy;
- ``adapt``: the model process as it ships (the count follows the free cores), default policy.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from _results import emit, machine_info  # benchmarks/ is on sys.path when run as a script

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_local_reuse import convo  # noqa: E402

CONFIGS = {
    "default": ({}, 2),
    "active": ({"OMP_WAIT_POLICY": "active"}, 2),
    "passive": ({"OMP_WAIT_POLICY": "passive"}, 2),
    "spin0": ({"GOMP_SPINCOUNT": "0"}, 2),
    "1thread": ({}, 1),
    "adapt": ({}, None),
}


def measure(env: dict[str, str], n_threads: int | None) -> dict[str, float]:
    from cooplab.agents.local_model import LocalModelProcess
    from cooplab.agents.models.local import local_model_path

    saved = {k: os.environ.get(k) for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    for k in saved:
        os.environ.pop(k, None)
    os.environ.update(env)
    try:
        p = LocalModelProcess(str(local_model_path()), n_ctx=4096, n_threads=n_threads)
        p.chat({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, "temperature": 0.0, "seed": 0})
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    try:
        t0 = time.perf_counter()
        out = p.chat({"messages": convo(1, 3), "max_tokens": 1, "temperature": 0.0, "seed": 0}, reuse=False)
        read = out["usage"]["prompt_tokens"] / (time.perf_counter() - t0)
        msgs = [{"role": "user", "content": "Write a long list of things a fisher does in a day."}]
        t0 = time.perf_counter()
        out = p.chat({"messages": msgs, "max_tokens": 48, "temperature": 0.0, "seed": 0}, reuse=False)
        gen = out["usage"]["completion_tokens"] / (time.perf_counter() - t0)
    finally:
        p.close()
    return {"read_tps": read, "gen_tps": gen}


def burners(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--loads", type=int, nargs="+", default=[0, 2, 3], help="CPU burners per episode")
    ap.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    info = machine_info()  # before the burners
    rows = []
    for load in a.loads:
        for name in a.configs:
            procs = burners(load)
            try:
                la = os.getloadavg()[0]
                r = measure(*CONFIGS[name])
            finally:
                for pr in procs:
                    pr.kill()
                    pr.wait()
            rows.append((load, name, r, la))
            print(f"load {load} {name}: read {r['read_tps']:.0f} tok/s, gen {r['gen_tps']:.1f} tok/s", flush=True)
    title = "Local model under load (2026-11-28)"
    cmd = "python benchmarks/bench_local_load.py " + " ".join(sys.argv[1:])
    lines = [f"## {title}", "", *info, f"- command: `{cmd}`", ""]
    lines += [
        "| burners | configuration | read, tokens/s | generated, tokens/s | load avg (1 min) |",
        "|---|---|---:|---:|---:|",
    ]
    lines += [f"| {ld} | {n} | {r['read_tps']:.0f} | {r['gen_tps']:.1f} | {la:.2f} |" for ld, n, r, la in rows]
    emit(title, "\n".join(lines), write=a.out is not None, out=a.out)


if __name__ == "__main__":
    main()
