"""Benchmark: the local model's speed beside busy processes, with the thread count following the
free cores (the default) against a fixed count (issue 41: the local model on a shared machine).

    .venv/bin/python benchmarks/bench_local_threads.py              # ~5 min; writes "## Local model: threads
                                                                    # on a busy machine" in RESULTS.md
    .venv/bin/python benchmarks/bench_local_threads.py --quick      # smoke run: no busy process, short answers,
                                                                    # prints only

For 0, 1 and 2 busy processes (``python -c "while True: pass"``, started before and killed after
each configuration's calls) and three configurations of the model process (SmolLM2-135M through
llama.cpp): the thread count chosen before each call (one per core the busy processes leave free,
``agents/llama_worker.py``), a count fixed at the number of cores (what every call used before),
and a count fixed at 1. Each configuration runs in a fresh model process: a cold read of a
~400-token prompt with a one-token answer (prompt tokens per second), then a short prompt with an
answer of up to 48 tokens (generated tokens per second), each ``--repeats`` times; medians. The
answers of the three configurations are compared (the thread count must not change a word).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _results import emit, machine_info  # noqa: E402

TITLE = "Local model: threads on a busy machine"
RULES = (
    "You work in a team of two analysts on a data set of orders. Read what the other teams wrote, run short code, "
    "store what you find, and tell your teammate what you did. Keep every answer short. "
) * 6
CONFIGS = {"follows the free cores (default)": None, "fixed at the cores": "cores", "fixed at 1": 1}


def measure(threads: int | None, repeats: int, gen_tokens: int, rules: str = RULES) -> dict[str, Any]:
    from cooplab.agents.local_model import LocalModelProcess
    from cooplab.agents.models.local import local_model_path

    p = LocalModelProcess(str(local_model_path()), n_ctx=2048, n_threads=threads)
    read, gen, texts = [], [], []
    try:
        p.chat({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, "temperature": 0.0, "seed": 0})
        for k in range(repeats):
            msgs = [{"role": "system", "content": rules}, {"role": "user", "content": f"Step {k + 1}: what now?"}]
            t0 = time.perf_counter()
            out = p.chat({"messages": msgs, "max_tokens": 1, "temperature": 0.0, "seed": k}, reuse=False)
            read.append(out["usage"]["prompt_tokens"] / (time.perf_counter() - t0))
            ask = [{"role": "user", "content": "Write a long list of things a fisher does in a day."}]
            t0 = time.perf_counter()
            out = p.chat({"messages": ask, "max_tokens": gen_tokens, "temperature": 0.7, "seed": k}, reuse=False)
            gen.append(out["usage"]["completion_tokens"] / (time.perf_counter() - t0))
            texts.append(out["choices"][0]["message"]["content"])
        used = dict(p.threads_used)
    finally:
        p.close()
    return {"read": statistics.median(read), "gen": statistics.median(gen), "texts": texts, "used": used}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument(
        "--quick", action="store_true", help="smoke run: no busy process, 1 repeat, short prompts and answers"
    )
    ap.add_argument("--busy", default="0,1,2", help="numbers of busy processes, comma-separated (default 0,1,2)")
    ap.add_argument("--repeats", type=int, default=3, help="calls of each kind per configuration (median)")
    ap.add_argument("--out", type=Path, help="write the section here instead of benchmarks/RESULTS.md")
    a = ap.parse_args(argv)
    try:
        busy = [int(x) for x in ("0" if a.quick else a.busy).split(",")]
    except ValueError:
        ap.error(f"--busy takes whole numbers separated by commas, got {a.busy!r}")
    if any(b < 0 or b > 64 for b in busy) or not 1 <= a.repeats <= 100:
        ap.error("--busy takes 0..64 processes and --repeats 1..100")
    repeats, gen_tokens = (1, 4) if a.quick else (a.repeats, 48)
    cores = os.cpu_count() or 1
    head = machine_info()
    rows, same = [], True
    for b in busy:
        burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(b)]
        try:
            res = {}
            for name, t in CONFIGS.items():
                res[name] = measure(
                    cores if t == "cores" else t, repeats, gen_tokens, RULES[: len(RULES) // 6] if a.quick else RULES
                )
                r = res[name]
                print(
                    f"busy {b}, {name}: read {r['read']:.0f} tok/s, generate {r['gen']:.1f} tok/s, threads {r['used']}"
                )
        finally:
            for p in burners:
                p.kill()
                p.wait()
        texts = [r["texts"] for r in res.values()]
        same = same and all(t == texts[0] for t in texts)
        base = res["fixed at the cores"]
        for name, r in res.items():
            used = ", ".join(f"{n} thread{'s' if n > 1 else ''} x {c}" for n, c in sorted(r["used"].items()))
            rows.append(
                f"| {b} | {name} | {used} | {r['read']:.0f} | {r['gen']:.1f} | "
                f"{r['read'] / base['read']:.2f}x | {r['gen'] / base['gen']:.2f}x |"
            )
    try:
        load = os.getloadavg()
        head.append(f"- load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    except OSError:
        pass
    cmd = "python benchmarks/bench_local_threads.py" + (
        " --quick" if a.quick else f" --busy {a.busy} --repeats {a.repeats}"
    )
    text = "\n".join(
        [
            f"## {TITLE}",
            "",
            *head,
            f"- command: `{cmd}`",
            f"- {cores} cores; SmolLM2-135M-Instruct Q4_1 through llama-cpp-python; a fresh model process per row",
            "",
            "| busy processes | thread count | threads the calls used | prompt read, tokens/s | generated, tokens/s | "
            "read / fixed at the cores | generated / fixed at the cores |",
            "|---:|---|---|---:|---:|---:|---:|",
            *rows,
            "",
            f"Same answers in every configuration: **{'yes' if same else 'NO'}**.",
            "",
        ]
    )
    emit(TITLE, text, write=not a.quick or a.out is not None, out=a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
