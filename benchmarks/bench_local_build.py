"""Benchmark: the local model's build and run configuration (issue 9), compared in one run.

    .venv/bin/python benchmarks/bench_local_build.py             # writes "## Local model build" in
    benchmarks/RESULTS.md
    .venv/bin/python benchmarks/bench_local_build.py --quick     # smoke run; writes nothing unless --out is given

Configurations, each in a fresh Python process with its own copy of llama-cpp-python (the wheel
installed with ``pip install --no-deps --target``), measured round-robin so that load on the
machine hits them alike:

1. ``native, in-process, extra bufts on``: the configuration before issue 9: llama-cpp-python
   compiled with pip's defaults (GGML_NATIVE=ON: tuned to the build machine's CPU), the model in
   the caller's process, llama.cpp's extra CPU buffer types (weight repacking; AMX where present).
2. ``portable, in-process, extra bufts on``: the portable build of scripts/setup.sh (x86-64-v3 or
   v2, no AVX-512, no AMX), otherwise as 1.
3. ``portable, in-process, extra bufts off``.
4. ``portable, model process, extra bufts off``: the product path since issue 9:
   ``cooplab.agents.local_model.LocalModelProcess`` (the model in a child process behind a pipe).

Workload: the same EFFORT prompts as ``bench_llm.py`` (d) (``effort_messages`` on a real 10-agent
state at round 4), one ``create_chat_completion`` each with the JSON-schema grammar, max_tokens
64, temperature 0.7 and a fixed seed per prompt, one after another. Reported: decisions per second
(median over repeats), output tokens per second, model load time, and whether each configuration
produced the same texts as configuration 1.

The native wheel is taken from ``--native-wheel``, else from pip's wheel cache, else built
(``GGML_NATIVE=ON``, about 6 minutes) into ~/.cache/cooplab/wheels/llama-cpp-python-VERSION-native.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SECTION = "## Local model build"
LLAMA_VERSION = "0.3.36"

CHILD = r"""
import json, os, sys, time
cfg = json.loads(sys.argv[1])
work = json.load(open(cfg["work"]))
res = {"times": [], "texts": [], "out_tokens": []}
if cfg["mode"] == "process":
    from cooplab.agents.local_model import LocalModelProcess
    p = LocalModelProcess(cfg["model_path"], n_ctx=2048, extra_bufts=cfg["extra_bufts"])
    t0 = time.perf_counter()
    p.chat({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, "temperature": 0.0, "seed": 0})
    res["load_s"] = p.meta["load_s"]; res["system_info"] = p.meta["system_info"]
    chat = p.chat
else:
    import llama_cpp.llama_cpp as lib
    from llama_cpp import Llama
    if not cfg["extra_bufts"]:
        d = lib.llama_model_default_params
        def nd():
            q = d(); q.use_extra_bufts = False; return q
        lib.llama_model_default_params = nd
    th = os.cpu_count() or 1
    t0 = time.perf_counter()
    llama = Llama(model_path=cfg["model_path"], n_ctx=2048, n_threads=th, n_threads_batch=th, verbose=False, seed=0)
    res["load_s"] = time.perf_counter() - t0
    res["system_info"] = lib.llama_print_system_info().decode().strip()
    chat = lambda call: llama.create_chat_completion(**call)
for call in work["calls"]:
    t1 = time.perf_counter()
    out = chat(call)
    res["times"].append(time.perf_counter() - t1)
    res["texts"].append(out["choices"][0]["message"].get("content") or "")
    res["out_tokens"].append((out.get("usage") or {}).get("completion_tokens", 0))
print("RESULT " + json.dumps(res))
"""


def sh(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def baseline() -> str:
    flags = ""
    try:
        flags = next((ln for ln in open("/proc/cpuinfo") if ln.startswith("flags")), "")
    except OSError:
        pass
    f = set(flags.split())
    if platform.machine() not in ("x86_64", "amd64"):
        return f"{platform.machine()}-generic"
    return "x86-64-v3" if {"avx2", "fma", "f16c", "bmi2"} <= f else "x86-64-v2"


def find_wheel(d: Path) -> Path | None:
    found = sorted(d.glob(f"llama_cpp_python-{LLAMA_VERSION}-*.whl")) if d.is_dir() else []
    return found[0] if found else None


def native_wheel(arg: Path | None) -> Path:
    if arg:
        return arg
    d = Path.home() / ".cache" / "cooplab" / "wheels" / f"llama-cpp-python-{LLAMA_VERSION}-native"
    w = find_wheel(d)
    if w:
        return w
    cache = Path.home() / ".cache" / "pip" / "wheels"
    hits = sorted(cache.rglob(f"llama_cpp_python-{LLAMA_VERSION}-*.whl")) if cache.is_dir() else []
    if hits:
        return hits[0]
    print(f"building a native llama-cpp-python {LLAMA_VERSION} wheel (GGML_NATIVE=ON, ~6 min) into {d}", flush=True)
    d.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "CMAKE_ARGS": "-DGGML_NATIVE=ON"}
    sh(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-cache-dir",
            "--no-binary",
            "llama-cpp-python",
            "-w",
            str(d),
            f"llama-cpp-python=={LLAMA_VERSION}",
        ],
        env=env,
    )
    wheel = find_wheel(d)
    if wheel is None:
        raise SystemExit(f"bench_local_build: pip built no llama-cpp-python {LLAMA_VERSION} wheel in {d}")
    return wheel


def install(wheel: Path, target: Path) -> Path:
    if not (target / "llama_cpp").is_dir():
        sh([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)])
    return target


def make_calls(n: int) -> list[dict[str, Any]]:
    sys.path.insert(0, str(HERE))
    import bench_llm as bl
    import numpy as np

    from cooplab.agents.decisions import decoding_schema

    la = bl.la
    state = asyncio.run(bl.run_graph(10, 4, bl.scripted_service()))["final"]
    state = {**state, "round": 4, "active": np.ones_like(state["active"])}
    rng = np.random.default_rng(bl.SEED)
    fmt = {"type": "json_object", "schema": decoding_schema(la.EFFORT.json_schema)}
    role = {"human": "user", "ai": "assistant", "system": "system"}
    calls = []
    for k in range(n):
        i = k % 10
        peers = sorted(rng.choice([j for j in range(10) if j != i], size=3, replace=False).tolist())
        msgs = [
            {"role": role.get(m.type, "user"), "content": str(m.content)}
            for m in la.effort_messages(state, 0, i, peers)
        ]
        calls.append({"messages": msgs, "temperature": 0.7, "max_tokens": 64, "response_format": fmt, "seed": 1000 + k})
    return calls


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    ap.add_argument("--quick", action="store_true", help="3 decisions, 1 repeat; writes nothing unless --out")
    ap.add_argument("--decisions", type=int, default=12)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--native-wheel", type=Path, default=None)
    ap.add_argument("--portable-wheel", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    out = args.out if args.out is not None else (None if args.quick else HERE / "RESULTS.md")
    n, reps = (3, 1) if args.quick else (args.decisions, args.repeats)
    start = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M")
    T0 = time.perf_counter()
    from cooplab.agents.models.local import local_model_path
    from cooplab.cli.doctor import cpu_features

    base = baseline()
    pw = args.portable_wheel or find_wheel(
        Path.home() / ".cache" / "cooplab" / "wheels" / f"llama-cpp-python-{LLAMA_VERSION}-{base}"
    )
    if pw is None:
        print("no portable wheel: run bash scripts/setup.sh first", file=sys.stderr)
        return 2
    nw = native_wheel(args.native_wheel)
    tmp = Path(tempfile.gettempdir()) / "cooplab-bench-llama"
    targets = {"native": install(nw, tmp / "native"), "portable": install(pw, tmp / "portable")}
    work = Path(tempfile.mkstemp(suffix=".json")[1])
    work.write_text(json.dumps({"calls": make_calls(n)}))
    configs = [
        ("native, in-process, extra bufts on", "native", "inproc", True),
        ("portable, in-process, extra bufts on", "portable", "inproc", True),
        ("portable, in-process, extra bufts off", "portable", "inproc", False),
        ("portable, model process, extra bufts off", "portable", "process", False),
    ]
    runs: dict[str, list[dict]] = {c[0]: [] for c in configs}
    for r in range(reps):
        for name, build, mode, eb in configs:
            env = {**os.environ, "PYTHONPATH": str(targets[build]) + os.pathsep + os.environ.get("PYTHONPATH", "")}
            cfg = {"work": str(work), "mode": mode, "extra_bufts": eb, "model_path": str(local_model_path())}
            p = subprocess.run([sys.executable, "-c", CHILD, json.dumps(cfg)], capture_output=True, text=True, env=env)
            line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
            if p.returncode != 0 or line is None:
                print(f"  {name}: FAILED (exit {p.returncode}): {p.stderr.strip().splitlines()[-1:]}", flush=True)
                runs[name].append({"failed": p.returncode})
                continue
            res = json.loads(line[7:])
            runs[name].append(res)
            print(f"  repeat {r + 1}: {name}: {n / sum(res['times']):.2f} decisions/s", flush=True)
    work.unlink()
    ref = next((x for x in runs[configs[0][0]] if "times" in x), None)
    rows = []
    for name, _build, _mode, _eb in configs:
        ok = [x for x in runs[name] if "times" in x]
        if not ok:
            rows.append({"name": name, "failed": True})
            continue
        dps = statistics.median(n / sum(x["times"]) for x in ok)
        tps = statistics.median(sum(x["out_tokens"]) / sum(x["times"]) for x in ok)
        same = sum(a == b for a, b in zip(ok[0]["texts"], ref["texts"], strict=False)) if ref else 0
        rows.append(
            {
                "name": name,
                "dps": dps,
                "tps": tps,
                "load": statistics.median(x["load_s"] for x in ok),
                "same": same,
                "system_info": ok[0]["system_info"],
                "reps": len(ok),
            }
        )
    base_dps = rows[0].get("dps")
    cpu = cpu_features()
    L = [
        SECTION,
        "",
        f"Run {start} UTC with `.venv/bin/python benchmarks/bench_local_build.py{' --quick' if args.quick else ''}`; "
        f"took {time.perf_counter() - T0:.0f} s. Machine: `{platform.uname().system} {platform.uname().release} "
        f"{platform.machine()}`, "
        f"{os.cpu_count()} cores, {cpu['model']}; CPU flags that matter to llama.cpp: `{' '.join(cpu['flags'])}` "
        f"(AMX {'yes' if cpu['amx'] else 'no'}, AVX-512 {'yes' if cpu['avx512'] else 'no'}). Load average at end: "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}. llama-cpp-python {LLAMA_VERSION}; portable baseline "
        f"`{base}`; "
        f"native wheel `{nw.name}` from `{nw.parent}`.",
        "",
        f"{n} EFFORT decisions per repeat (JSON-schema grammar, max_tokens 64, temperature 0.7, seeded), {reps} "
        "repeats round-robin; "
        "medians. Ratio = decisions/s over configuration 1 (the configuration before issue 9) in this run.",
        "",
        "| configuration | decisions/s | ratio | output tok/s | model load | same texts as 1 | build (llama.cpp system "
        "info) |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        if r.get("failed"):
            L.append(f"| {r['name']} | failed | | | | | |")
            continue
        ratio = f"{r['dps'] / base_dps:.2f}" if base_dps else "n/a"
        L.append(
            f"| {r['name']} | {r['dps']:.2f} | {ratio} | {r['tps']:.1f} | {r['load'] * 1000:.0f} ms | {r['same']}/{n} "
            "| "
            f"`{r['system_info'].replace('|', chr(92) + '|')}` |"
        )  # escaped: a table cell
    text = "\n".join(L) + "\n"
    print()
    print(text)
    if out is not None:
        sys.path.insert(0, str(HERE))
        import bench_llm as bl

        bl_section = bl.SECTION
        try:
            bl.SECTION = SECTION
            bl.replace_section(out, text)
        finally:
            bl.SECTION = bl_section
        print(f"wrote section '{SECTION}' of {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
