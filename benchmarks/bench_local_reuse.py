"""Benchmark: the local model reuses what it has read (issue 41, point 5), before and after, in one session.

    .venv/bin/python benchmarks/bench_local_reuse.py --before ../base/.venv/bin/python
                                                            # writes "## Local model: prompt reuse" in
                                                            benchmarks/RESULTS.md
    .venv/bin/python benchmarks/bench_local_reuse.py --quick    # smoke run (tiny sizes); writes nothing unless --out is
    given

Configurations, each a ``cooplab`` command line run by its own Python:

- ``before``: the code before this change (``--before PYTHON``: the interpreter of a checkout of
  the baseline commit, e.g. a worktree at main's 7b8adcb with its own ``.venv``): llama-cpp-python
  reuses only the prefix the next prompt shares with the last call; the science system prompt
  carries the live budget status in Appendix C.1's place; the CPR prompts end with their
  instructions.
- ``after, no kept states``: this checkout with ``COOPLAB_LOCAL_REUSE_MB=0``: the new prompt layout,
  only the live KV cache reused (what the last call read). Same prompts as ``after``, so the same calls, tokens
  and answers (the benchmark checks it): the difference is the reuse alone.
- ``after``: this checkout as it ships (kept KV states, 512 MB).

Workloads, the configurations interleaved so that the machine's load hits them alike:

(a) **The local model's speed** (after only): one cold read of a prompt with a one-token answer
    (prompt tokens read per second) and one short prompt with up to 48 tokens generated, in a
    model process with ``OMP_WAIT_POLICY=passive`` and one with ``active``; then two agents'
    conversations interleaved, each call one more turn, straight through ``LocalModelProcess``:
    prompt tokens, tokens read and reused, seconds, every prompt read cold, then in a fresh
    process with the kept states (what its own earlier calls read: the other agent's system
    prompt, the agent's earlier turns), and whether the answers are the same.
(b) **Science bench**: ``cooplab bench science examples/bench-suite/suite.jsonl --team llm --model
    local --team-size 2 --cache off`` item by item (``--limit 1``, then 2, ...: a bench resumes
    its finished items), per configuration: wall seconds per item (the item run's own
    ``wall_seconds``), calls, tokens in/out, cost, prompt tokens reused. ``after, no kept
    states`` runs the first ``--off-items`` items only (1: a science item takes long).
(c) **The main job's LLM society** (run.sh): ``cooplab run cpr --agents llm --model local --env
    harsh --population mixed --n-agents 4 --rounds 8 --seed 0 --cache off``, per configuration:
    wall seconds, calls, tokens, and how many of the decisions (society, agent, round, phase)
    differ from the first configuration's.

The machine's load average and ``OMP_WAIT_POLICY`` (llama.cpp's OpenMP threads: ``passive`` makes
them sleep at barriers instead of spinning, which matters on a busy machine) are recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _results import cooplab_json, emit, machine_info  # benchmarks/ is on sys.path when run as a script

ROOT = Path(__file__).resolve().parents[1]
SECTION = "Local model: prompt reuse"
SUITE = ROOT / "examples" / "bench-suite"
OFF = "after, no kept states"
CPR = [
    "--agents",
    "llm",
    "--model",
    "local",
    "--env",
    "harsh",
    "--population",
    "mixed",
    "--seed",
    "0",
    "--cache",
    "off",
]


def cli(python: str, args: list[str], env: dict[str, str], timeout: float = 6 * 3600) -> dict:
    """``cooplab ARGS --json -q`` run by ``python`` (cwd outside the checkout: nothing shadows its install)."""
    return cooplab_json(python, args, env, who="bench_local_reuse", timeout=timeout)


def configs(before: str | None) -> dict[str, tuple[str, dict[str, str]]]:
    base = {k: v for k, v in os.environ.items() if k != "COOPLAB_LOCAL_REUSE_MB"}
    out = {}
    if before:
        out["before"] = (before, base)
    out[OFF] = (sys.executable, {**base, "COOPLAB_LOCAL_REUSE_MB": "0"})
    out["after"] = (sys.executable, base)
    return out


# --- (a) reading speed ---------------------------------------------------------------------------
RULES = (
    "You work in a team of two analysts on a data set of orders. Read what the other teams wrote, run short code, "
    "store what you find, and tell your teammate what you did. Keep every answer short. "
)


def convo(agent: int, turn: int) -> list[dict]:
    """Agent ``agent``'s prompt at ``turn`` of its conversation (two agents' system prompts
    differ only at their end)."""
    msgs = [{"role": "system", "content": f"{RULES * 6}You are analyst {agent + 1}."}]
    for t in range(turn):
        msgs += [
            {"role": "user", "content": f"Step {t + 1}: the table has {1000 + 37 * t + agent} rows. What next?"},
            {"role": "assistant", "content": f"I will check column {t + 1} of the table."},
        ]
    return msgs + [{"role": "user", "content": f"Step {turn + 1}: what do you do now?"}]


def model_process(wait: str | None = None):
    """A fresh model process (``wait``: its ``OMP_WAIT_POLICY``), loaded."""
    from cooplab.agents.local_model import LocalModelProcess
    from cooplab.agents.models.local import local_model_path

    old = os.environ.get("OMP_WAIT_POLICY")
    if wait is not None:
        os.environ["OMP_WAIT_POLICY"] = wait
    try:
        p = LocalModelProcess(str(local_model_path()), n_ctx=4096)
        p.chat(
            {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, "temperature": 0.0, "seed": 0}
        )  # started in this environment
    finally:
        if wait is not None:
            os.environ.pop("OMP_WAIT_POLICY") if old is None else os.environ.__setitem__("OMP_WAIT_POLICY", old)
    return p


def speeds(turns: int, wait: str | None) -> dict[str, float]:
    """Prompt reading (one cold read of the longest prompt, a one-token answer) and generation
    (a short prompt, up to 48 tokens) in tokens per second."""
    p = model_process(wait)
    try:
        t0 = time.perf_counter()
        out = p.chat(
            {"messages": convo(1, max(turns, 1) - 1), "max_tokens": 1, "temperature": 0.0, "seed": 0}, reuse=False
        )
        read = out["usage"]["prompt_tokens"], time.perf_counter() - t0
        msgs = [{"role": "user", "content": "Write a long list of things a fisher does in a day."}]
        t0 = time.perf_counter()
        out = p.chat({"messages": msgs, "max_tokens": 48, "temperature": 0.0, "seed": 0}, reuse=False)
        gen = out["usage"]["completion_tokens"], time.perf_counter() - t0
    finally:
        p.close()
    return {"read_tokens": read[0], "read_tps": read[0] / read[1], "gen_tokens": gen[0], "gen_tps": gen[0] / gen[1]}


def micro(turns: int, max_tokens: int, waits: list[str | None]) -> dict[str, Any]:
    res: dict[str, Any] = {"speeds": {w or "as set": speeds(turns, w) for w in waits}}
    for mode in ("cold", "reuse"):  # each in a fresh model process: the reuse pass reuses only what its own calls read
        p = model_process()
        try:
            n0, k0, t0, texts = p.prompt_tokens, p.reused_tokens, time.perf_counter(), []
            for turn in range(turns):
                for agent in (0, 1):
                    out = p.chat(
                        {
                            "messages": convo(agent, turn),
                            "max_tokens": max_tokens,
                            "temperature": 0.7,
                            "seed": 11 * turn + agent,
                        },
                        reuse=mode == "reuse",
                    )
                    texts.append(out["choices"][0]["message"]["content"])
            res[mode] = {
                "calls": 2 * turns,
                "prompt_tokens": p.prompt_tokens - n0,
                "reused": p.reused_tokens - k0,
                "seconds": time.perf_counter() - t0,
                "texts": texts,
            }
        finally:
            p.close()
    res["same_texts"] = res["cold"]["texts"] == res["reuse"]["texts"]
    return res


# --- (b) science bench and (c) the CPR society -----------------------------------------------------
def science(
    cfgs: dict, items: int, team_size: int, work: Path, off_items: int, together: bool = False
) -> dict[str, list[dict]]:
    from concurrent.futures import ThreadPoolExecutor

    per: dict[str, list[dict]] = {name: [] for name in cfgs}
    for k in range(1, items + 1):
        names = [name for name in cfgs if not (name == OFF and k > off_items)]
        if together:  # every configuration's item at the same time: the machine's load hits them alike
            with ThreadPoolExecutor(len(names)) as pool:
                rows = list(pool.map(lambda name, k=k: science_item(cfgs, name, k, team_size, work), names))
        else:
            rows = [science_item(cfgs, name, k, team_size, work) for name in names]
        for name, row in zip(names, rows, strict=False):
            per[name].append(row)
    return per


def science_item(cfgs: dict, name: str, k: int, team_size: int, work: Path) -> dict:
    python, env = cfgs[name]
    out = work / f"science-{name.replace(' ', '-').replace(',', '')}"
    cli(
        python,
        [
            "bench",
            "science",
            str(SUITE / "suite.jsonl"),
            "--tables",
            str(SUITE / "tables"),
            "--labels",
            str(SUITE / "labels.jsonl"),
            "--team",
            "llm",
            "--model",
            "local",
            "--team-size",
            str(team_size),
            "--limit",
            str(k),
            "--cache",
            "off",
            "--out",
            str(out),
        ],
        env,
    )
    runs = out / "cells" if (out / "cells").is_dir() else out / "items"  # a bench's items: cells/item-ID__sSEED
    item = sorted(p.name for p in runs.iterdir())[k - 1]
    s = json.loads((runs / item / "summary.json").read_text())
    led, reuse = s.get("ledger") or {}, (s.get("llm") or {}).get("prompt_reuse") or {}
    print(
        f"(b) {item} {name}: {s['wall_seconds']:.0f} s, {led.get('calls')} calls, {led.get('input_tokens')} tokens in, "
        f"{reuse.get('tokens_reused', '-')} reused",
        flush=True,
    )
    return {
        "item": item,
        "wall": s["wall_seconds"],
        "calls": led.get("calls"),
        "in": led.get("input_tokens"),
        "out": led.get("output_tokens"),
        "cost": led.get("cost_usd_float"),
        "reused": reuse.get("tokens_reused"),
        "status": s.get("status"),
    }


def society(cfgs: dict, agents: int, rounds: int, work: Path) -> dict[str, dict]:
    import pandas as pd

    res = {}
    for name, (python, env) in cfgs.items():
        out = work / f"cpr-{name.replace(' ', '-').replace(',', '')}"
        s = cli(
            python,
            ["run", "cpr", *CPR, "--n-agents", str(agents), "--rounds", str(rounds), "--out", str(out), "--force"],
            env,
        )
        d = pd.read_parquet(out / "decisions.parquet")
        led, reuse = s.get("ledger") or {}, (s.get("llm") or {}).get("prompt_reuse") or {}
        res[name] = {
            "wall": s["wall_seconds"],
            "calls": led.get("calls"),
            "in": led.get("input_tokens"),
            "out": led.get("output_tokens"),
            "reused": reuse.get("tokens_reused"),
            "survival": s.get("survival_time", {}).get("values"),
            "decisions": {
                (r["society"], r["agent"], r["round"], r["phase"]): r["parsed"] for r in d.to_dict("records")
            },
        }
        print(
            f"(c) {name}: {s['wall_seconds']:.0f} s, {led.get('calls')} calls, {led.get('input_tokens')} tokens in",
            flush=True,
        )
    first = next(iter(res.values()))["decisions"]
    for r in res.values():
        keys = set(first) | set(r["decisions"])
        r["differ"] = sum(first.get(k) != r["decisions"].get(k) for k in keys)
        off = res[OFF]["decisions"] if OFF in res else None
        r["differ_off"] = (
            None if off is None else sum(off.get(k) != r["decisions"].get(k) for k in set(off) | set(r["decisions"]))
        )
        r["n_decisions"] = len(r["decisions"])
    return res


# --- the report ------------------------------------------------------------------------------------
def fmt(x: Any, spec: str = ",") -> str:
    return "–" if x is None else format(x, spec)


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    return f"{fields.get('Model name', '?').strip()}, {fields.get('CPU(s)', '?').strip()} CPUs"


def usd(x: Any) -> str:
    return "–" if x is None else f"${x:.4f}"


def report(a: dict | None, b: dict | None, c: dict | None, head: list[str], args: argparse.Namespace) -> str:
    lines = [
        f"## {SECTION}",
        "",
        *head,
        f"- OMP_WAIT_POLICY: {os.environ.get('OMP_WAIT_POLICY', '(unset: llama.cpp threads spin at barriers)')}",
        f"- command: `python benchmarks/bench_local_reuse.py {' '.join(sys.argv[1:])}`",
        "",
    ]
    if a:
        lines += [
            "### (a) The local model's speed (SmolLM2-135M, llama.cpp, 2 threads)",
            "",
            "| OMP_WAIT_POLICY of the model process | prompt read (tokens) | read, tokens/s | generated (tokens) | "
            "generated, tokens/s |",
            "|---|---:|---:|---:|---:|",
        ]
        for w, v in a["speeds"].items():
            lines.append(f"| {w} | {v['read_tokens']} | {v['read_tps']:.0f} | {v['gen_tokens']} | {v['gen_tps']:.1f} |")
        lines += [
            "",
            f"Two agents' conversations interleaved, {a['cold']['calls']} calls, answers of at most {args.max_tokens} "
            "tokens "
            "(OMP_WAIT_POLICY as set for the whole benchmark):",
            "",
            "| prompts | calls | prompt tokens | read | reused | seconds | prompt tokens per second (charged) |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for mode, label in (("cold", "every prompt read in full"), ("reuse", "kept states reused")):
            m = a[mode]
            lines.append(
                f"| {label} | {m['calls']} | {m['prompt_tokens']:,} | {m['prompt_tokens'] - m['reused']:,} | "
                f"{m['reused']:,} | "
                f"{m['seconds']:.1f} | {m['prompt_tokens'] / m['seconds']:.0f} |"
            )
        lines += ["", f"Same answers with and without reuse: **{'yes' if a['same_texts'] else 'NO'}**.", ""]
    b = {name: rows for name, rows in (b or {}).items() if rows}  # a configuration given no item (--off-items 0)
    if b:
        lines += [
            f"### (b) Science bench, team of {args.team_size}, local model, first {args.items} items",
            "",
            "| configuration | item | wall s | calls | tokens in / out | cost | prompt tokens reused | status |",
            "|---|---|---:|---:|---:|---:|---:|---|",
        ]
        for name, rows in b.items():
            for r in rows:
                lines.append(
                    f"| {name} | {r['item']} | {r['wall']:.0f} | {fmt(r['calls'])} | {fmt(r['in'])} / {fmt(r['out'])} "
                    "| "
                    f"{usd(r['cost'])} | {fmt(r['reused'])} | {r['status']} |"
                )
        lines += [
            "",
            "| configuration | items | wall s per item (mean) | seconds per 1,000 prompt tokens charged | speed-up per "
            "item vs first, same items |",
            "|---|---:|---:|---:|---:|",
        ]
        first = next(iter(b.values()))
        for name, rows in b.items():
            wall = statistics.mean(r["wall"] for r in rows)
            ref = statistics.mean(r["wall"] for r in first[: len(rows)])
            tin = sum(r["in"] or 0 for r in rows)
            lines.append(
                f"| {name} | {len(rows)} | {wall:.0f} | {1000 * sum(r['wall'] for r in rows) / max(tin, 1):.2f} | "
                f"{ref / wall:.2f}x |"
            )
        lines.append("")
    if c:
        lines += [
            f"### (c) The main job's LLM society (`cooplab run cpr {' '.join(CPR[:-2])} --n-agents {args.cpr_agents} "
            f"--rounds {args.cpr_rounds}`)",
            "",
            "| configuration | wall s | calls | tokens in / out | prompt tokens reused | survival | decisions | differ "
            "from first | speed-up vs first "
            f"| differ from {OFF} |",
            "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|",
        ]
        base = next(iter(c.values()))["wall"]
        for name, r in c.items():
            lines.append(
                f"| {name} | {r['wall']:.0f} | {fmt(r['calls'])} | {fmt(r['in'])} / {fmt(r['out'])} | "
                f"{fmt(r['reused'])} | "
                f"{r['survival']} | {r['n_decisions']} | {r['differ']} | {base / r['wall']:.2f}x | "
                f"{fmt(r['differ_off'])} |"
            )
        lines.append("")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--before", help="the Python interpreter of a checkout of the baseline commit (its .venv/bin/python)"
    )
    ap.add_argument("--items", type=int, default=4, help="(b) science bench items (0: skip)")
    ap.add_argument("--team-size", type=int, default=2)
    ap.add_argument(
        "--off-items",
        type=int,
        default=1,
        help="(b) items also run without kept states (the same calls and answers expected)",
    )
    ap.add_argument(
        "--together", action="store_true", help="(b) run the configurations' item at the same time (a busy machine)"
    )
    ap.add_argument("--cpr-agents", type=int, default=4)
    ap.add_argument("--cpr-rounds", type=int, default=8, help="(c) rounds of the CPR society (0: skip)")
    ap.add_argument("--turns", type=int, default=6, help="(a) turns of each conversation (0: skip)")
    ap.add_argument("--max-tokens", type=int, default=16, help="(a) answer cap")
    ap.add_argument(
        "--waits",
        default="passive,active",
        help="(a) the OMP_WAIT_POLICY values whose speeds are measured, comma-separated (passive, active, as-set)",
    )
    ap.add_argument("--quick", action="store_true", help="smoke size: (a) 2 turns, no (b), (c) 2 agents for 1 round")
    ap.add_argument("--out", type=Path, default=None, help="write the section into this file instead of RESULTS.md")
    a = ap.parse_args()
    if a.quick:
        a.turns, a.items, a.cpr_agents, a.cpr_rounds, a.max_tokens = 2, 0, 2, 1, 4
    if a.before and not Path(a.before).exists():
        raise SystemExit(
            f"bench_local_reuse: --before {a.before} does not exist (the baseline checkout's .venv/bin/python)"
        )
    for flag in ("items", "turns", "cpr_rounds", "max_tokens", "cpr_agents", "off_items"):
        if getattr(a, flag) < 0 or (flag in ("max_tokens", "cpr_agents") and getattr(a, flag) < 1):
            raise SystemExit(
                f"bench_local_reuse: --{flag.replace('_', '-')} must be a positive whole number, got {getattr(a, flag)}"
            )
    waits = [w.strip() for w in a.waits.split(",")]
    if not all(w in ("passive", "active", "as-set") for w in waits):
        raise SystemExit(
            f"bench_local_reuse: --waits must list passive, active or as-set, comma-separated, got {a.waits!r}"
        )
    waits = [None if w == "as-set" else w for w in waits]
    head = machine_info(versions=True)
    head.insert(2, f"- CPU (lscpu): {cpu_model()}")
    cfgs = configs(a.before)
    work = Path(tempfile.mkdtemp(prefix="bench-reuse-"))
    try:
        ra = micro(a.turns, a.max_tokens, [None] if a.quick else waits) if a.turns else None
        if ra:
            print(
                f"(a) {ra['speeds']}; cold {ra['cold']['seconds']:.1f} s, reuse {ra['reuse']['seconds']:.1f} s, "
                f"same answers: {ra['same_texts']}",
                flush=True,
            )
        rc = society(cfgs, a.cpr_agents, a.cpr_rounds, work) if a.cpr_rounds else None
        rb = science(cfgs, a.items, a.team_size, work, a.off_items, a.together) if a.items else None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    try:
        load = os.getloadavg()
        head.append(f"- load average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    except OSError:
        pass
    emit(SECTION, report(ra, rb, rc, head, a), write=not a.quick or a.out is not None, out=a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
