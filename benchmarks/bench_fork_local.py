"""Benchmark: what a fork of a local-model run reads again (issue 40, point 4), in one session.

    .venv/bin/python benchmarks/bench_fork_local.py          # writes "## Local model: forks" in RESULTS.md
    .venv/bin/python benchmarks/bench_fork_local.py --quick  # smoke run (tiny sizes); writes only with --out

A parent LLM CPR society on the local model (SmolLM2-135M; ``cooplab run cpr --agents llm --model
local --cache off``), then, each ``cooplab`` command in a Python of its own (a model process of its
own, as a user's command has):

- ``fork``: ``cooplab fork PARENT --at-round K --set r=R`` (the lake regrows at another rate from
  round K+1 on: the harvest prompts show the stock, so the rounds after K differ from the parent's);
  the local model's kept KV states on (as it ships, 512 MB);
- ``fork, no kept states``: the same fork with ``COOPLAB_LOCAL_REUSE_MB=0`` (only what llama.cpp
  holds from the last call is reused);
- ``fresh run``: ``cooplab run cpr ... --set r=R`` from round 1, the fork's settings from the start
  (what a user without forks runs to ask the same question; its rounds 1..K differ from the
  parent's, since the lake regrows at the other rate from the start).

The parent and the runs use no response cache (``--cache off``): every call of the fork's rounds
K+1.. is live, so the reuse measured is the model's alone. Per configuration: the live calls, prompt
tokens, tokens reused from earlier calls of the same process and read, the reused share, the model
seconds per live call (per round, the span from its first call's start to its last answer, from
traces.jsonl: the calls of a round wait for one another at the one model, so their own latencies
overlap), the tokens read per live call and the wall seconds; per round, the same from the traces;
for the fresh run also its rounds after K alone.

What a fork cannot reuse: its model process starts empty (the parent's process, and with it what
it read, ended with the parent), so each agent's first call of round K+1 reads its whole prompt,
system prompt included, where the parent's process would have read only what changed. From then on
the fork keeps and reuses its own calls' states like any run. The seconds move with the machine's
load (recorded); the token counts do not.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from _results import cooplab_json, emit, machine_info  # benchmarks/ is on sys.path when run as a script

SECTION = "Local model: forks"
OFF = "fork, no kept states"
ON = "fork"
FRESH = "fresh run"


def cli(args: list[str], env: dict[str, str], timeout: float = 3 * 3600) -> dict[str, Any]:
    """``cooplab ARGS --json -q`` in a Python of its own (cwd outside the checkout)."""
    return cooplab_json(sys.executable, args, env, who="bench_fork_local", timeout=timeout)


def society_args(a: argparse.Namespace) -> list[str]:
    return [
        "--agents",
        "llm",
        "--model",
        "local",
        "--env",
        "harsh",
        "--population",
        "mixed",
        "--n-agents",
        str(a.agents),
        "--rounds",
        str(a.rounds),
        "--seed",
        "0",
        "--max-tokens",
        str(a.max_tokens),
        "--cache",
        "off",
        *(["--set", "punishment=false", "--set", "group_decision=false"] if a.effort_only else []),
    ]


def measured(out: Path, summary: dict[str, Any], after: int) -> dict[str, Any]:
    """What a run spent on its live calls (summary.json), and its rounds after ``after`` alone (the
    decisions table: a fork's holds the parent's rows of rounds 1..K, which it did not ask)."""
    import pandas as pd

    led = summary.get("ledger") or {}
    reuse = (summary.get("llm") or {}).get("prompt_reuse") or {}
    rows: list[dict[str, Any]] = pd.read_parquet(out / "decisions.parquet").to_dict(orient="records")
    late = [r for r in rows if r["round"] > after]

    def total(rs: list[dict[str, Any]], col: str) -> float:
        return float(sum(float(r[col]) for r in rs if r[col] is not None and r[col] == r[col]))  # NaN: none

    return {
        "wall": float(summary.get("wall_seconds") or 0.0),
        "calls": int(led.get("calls") or 0),
        "prompt": int(reuse.get("prompt_tokens") or 0),
        "reused": int(reuse.get("tokens_reused") or 0),
        "read": int(reuse.get("tokens_read") or 0),
        "share": reuse.get("reused_share"),
        "late_calls": len(late),
        "late_tokens": int(total(late, "input_tokens")),
        "decisions": {(r["society"], r["agent"], r["round"], r["phase"]): r["parsed"] for r in late},
    }


def per_round(out: Path) -> dict[int, dict[str, float]]:
    """Per round, the live model calls' prompt tokens, the tokens reused and the seconds from the first
    call's start to the last one's end, from the
    run's traces.jsonl (each LLM call's usage as the model process reported it; a fork's file
    holds only its own calls)."""
    import datetime as dt

    rounds: dict[int, dict[str, float]] = {}
    path = out / "traces.jsonl"
    for line in path.read_text().splitlines() if path.is_file() else []:
        r = json.loads(line)
        if r.get("run_type") != "llm" or r.get("error"):
            continue
        meta = (r.get("extra") or {}).get("metadata") or {}
        gens = (r.get("outputs") or {}).get("generations") or [[{}]]
        msg = (gens[0][0].get("message") or {}).get("kwargs") or {}
        usage = (msg.get("response_metadata") or {}).get("usage_raw") or {}
        if not isinstance(meta.get("round"), int) or not isinstance(usage.get("prompt_tokens"), int):
            continue
        row = rounds.setdefault(meta["round"], {"calls": 0, "prompt": 0, "reused": 0, "start": math.inf, "end": 0.0})
        row["calls"] += 1
        row["prompt"] += usage["prompt_tokens"]
        row["reused"] += (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
        t0, t1 = (dt.datetime.fromisoformat(r[k]).timestamp() for k in ("start_time", "end_time"))
        row["start"], row["end"] = min(row["start"], t0), max(row["end"], t1)
    for row in rounds.values():  # the calls of a round wait for one another at the model: their span
        row["seconds"] = row["end"] - row["start"]
    return rounds


def done(out: Path) -> dict[str, Any] | None:
    """A finished run's summary.json in ``out`` (a benchmark continued with ``--work``), else None."""
    try:
        s = json.loads((out / "summary.json").read_text())
    except (OSError, ValueError):
        return None
    return s if isinstance(s, dict) and s.get("status") == "completed" else None


def run(a: argparse.Namespace, work: Path) -> dict[str, dict[str, Any]]:
    base = {k: v for k, v in os.environ.items() if k != "COOPLAB_LOCAL_REUSE_MB"}
    off = {**base, "COOPLAB_LOCAL_REUSE_MB": "0"}
    change = f"r={a.r}"
    parent = work / "parent"
    plan = [
        ("parent", parent, ["run", "cpr", *society_args(a), "--out", str(parent), "--force"], base, 0),
        *(
            (name, work / slug, ["fork", str(parent), "--at-round", str(a.at_round), "--set", change], env, a.at_round)
            for name, slug, env in ((ON, "fork", base), (OFF, "fork-no-kept-states", off))
        ),
        (FRESH, work / "fresh", ["run", "cpr", *society_args(a), "--set", change, "--force"], base, 0),
    ]
    res: dict[str, dict[str, Any]] = {}
    for name, out, args, env, after in plan:
        s = done(out)
        if s is None:
            shutil.rmtree(out, ignore_errors=True)
            s = cli([*args, "--out", str(out)], env)
        else:
            print(f"{name}: finished before, read back from {out}", flush=True)
        res[name] = measured(out, s, after)
        res[name]["rounds"] = per_round(out)
        res[name]["model_s"] = sum(c["seconds"] for k, c in res[name]["rounds"].items() if k > after)
        print(f"{name}: {res[name]['wall']:.0f} s, {res[name]['calls']} calls", flush=True)
    res[FRESH]["late"] = measured(work / "fresh", done(work / "fresh") or {}, a.at_round)
    for name in res:  # the model's seconds of the rounds after K (the spans of their calls)
        res[name]["late_model_s"] = sum(c["seconds"] for k, c in res[name]["rounds"].items() if k > a.at_round)
    res[FRESH]["late"]["late_model_s"] = res[FRESH]["late_model_s"]
    return res


def ratio(x: float, y: float) -> str:
    return f"{x / y:.2f}x" if y else "–"


def report(res: dict[str, dict[str, Any]], head: list[str], a: argparse.Namespace) -> str:
    lines = [
        f"## {SECTION}",
        "",
        *head,
        f"- command: `python benchmarks/bench_fork_local.py {' '.join(sys.argv[1:])}`",
        f"- the society: `cooplab run cpr {' '.join(society_args(a))}`; the fork: `cooplab fork PARENT --at-round "
        f"{a.at_round} --set r={a.r}`; the fresh run: the society with `--set r={a.r}`",
        "",
        "| run | live calls | prompt tokens | reused | read | reused share | model s per live call | "
        "tokens read per live call | wall s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name in ("parent", ON, OFF, FRESH):
        r = res[name]
        calls = max(r["calls"], 1)
        share = "–" if r["share"] is None else f"{r['share']:.3f}"
        lines.append(
            f"| {name} | {r['calls']} | {r['prompt']:,} | {r['reused']:,} | {r['read']:,} | {share} | "
            f"{r['model_s'] / calls:.2f} | {r['read'] / calls:.0f} | {r['wall']:.0f} |"
        )
    on, off, fresh = res[ON], res[OFF], res[FRESH]
    late = fresh["late"]
    same = on["decisions"] == off["decisions"]
    lines += [
        "",
        f"Rounds {a.at_round + 1}..{a.rounds} (the rounds a fork runs):",
        "",
        "| run | calls | prompt tokens | model s |",
        "|---|---:|---:|---:|",
        f"| {ON} | {on['late_calls']} | {on['late_tokens']:,} | {on['late_model_s']:.0f} |",
        f"| {OFF} | {off['late_calls']} | {off['late_tokens']:,} | {off['late_model_s']:.0f} |",
        f"| {FRESH} (its rounds after {a.at_round} only) | {late['late_calls']} | {late['late_tokens']:,} | "
        f"{late['late_model_s']:.0f} |",
        "",
        "Per round, what the model process reused of the live calls' prompt tokens, the calls, and the seconds from "
        "the round's first call to its last answer (from each run's traces.jsonl):",
        "",
        "| run | " + " | ".join(f"round {k}" for k in range(1, a.rounds + 1)) + " |",
        "|---|" + "---:|" * a.rounds,
        *(
            f"| {name} | "
            + " | ".join(
                (
                    f"{int(c['reused']):,} of {int(c['prompt']):,} ({c['reused'] / c['prompt']:.0%}), "
                    f"{int(c['calls'])} calls, {c['seconds']:.0f} s"
                    if (c := res[name]["rounds"].get(k)) and c["prompt"]
                    else "–"
                )
                for k in range(1, a.rounds + 1)
            )
            + " |"
            for name in ("parent", ON, OFF, FRESH)
        ),
        "",
        "Ratios, this session:",
        "",
        f"- the fork against the same fork without kept states: tokens read {ratio(on['read'], off['read'])}, "
        f"model seconds {ratio(on['model_s'], off['model_s'])}, wall {ratio(on['wall'], off['wall'])}; the same "
        f"decisions: **{'yes' if same else 'NO'}**",
        f"- the fork against the fresh run of its settings: live calls {ratio(on['calls'], fresh['calls'])}, tokens "
        f"read {ratio(on['read'], fresh['read'])}, model seconds {ratio(on['model_s'], fresh['model_s'])}, wall "
        f"{ratio(on['wall'], fresh['wall'])}",
        f"- reused share: the fork {on['share']}, the fresh run {fresh['share']} (its rounds 1..{a.at_round} warm "
        "its kept states; the fork's model process starts empty and each agent's first call reads its whole "
        "prompt)",
        "",
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--agents", type=int, default=3, help="fishers of the society (default 3)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the parent and the fresh run (default 3)")
    ap.add_argument("--at-round", type=int, default=1, help="the fork's K (default 1)")
    ap.add_argument("--r", type=float, default=0.6, help="the fork's regrowth rate (default 0.6; the parent's 0.2)")
    ap.add_argument("--max-tokens", type=int, default=64, help="answer cap per call (default 64)")
    ap.add_argument(
        "--effort-only", action="store_true", help="punishment and group decisions off (fewer prompts per round)"
    )
    ap.add_argument(
        "--quick", action="store_true", help="smoke size: 2 agents, 2 rounds, K = 1, 8-token answers, --effort-only"
    )
    ap.add_argument("--out", type=Path, default=None, help="write the section into this file instead of RESULTS.md")
    ap.add_argument(
        "--work",
        type=Path,
        default=None,
        help="keep the runs in this folder (default: a temporary one, removed); runs finished there before are "
        "read back, not run again",
    )
    a = ap.parse_args()
    if a.quick:
        a.agents, a.rounds, a.at_round, a.max_tokens, a.effort_only = 2, 2, 1, 8, True
    for flag in ("agents", "rounds", "at_round", "max_tokens"):
        if getattr(a, flag) < 1:
            raise SystemExit(
                f"bench_fork_local: --{flag.replace('_', '-')} must be a positive whole number, got {getattr(a, flag)}"
            )
    if a.agents < 2 or a.at_round >= a.rounds:
        raise SystemExit("bench_fork_local: give --agents 2 or more and --at-round below --rounds")
    if not 0 < a.r <= 5:
        raise SystemExit(f"bench_fork_local: --r must be in (0, 5], got {a.r}")
    head = machine_info(versions=True)
    work = a.work.resolve() if a.work else Path(tempfile.mkdtemp(prefix="bench-fork-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        res = run(a, work)
    finally:
        if a.work is None:
            shutil.rmtree(work, ignore_errors=True)
    try:
        load = os.getloadavg()
        head.append(f"- load average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    except OSError:
        pass
    emit(SECTION, report(res, head, a), write=not a.quick or a.out is not None, out=a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
