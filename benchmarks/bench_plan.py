"""Benchmark: how close ``cooplab plan`` comes to what a sweep then uses (issue 40 point 5).

    .venv/bin/python benchmarks/bench_plan.py                    # the local model (SmolLM2): writes "## Plan: predicted
    vs used" in RESULTS.md
    .venv/bin/python benchmarks/bench_plan.py --model scripted --rounds 5 --out /tmp/r.md   # smoke run, a scripted
    model

A small sweep of the CPR game (``game=cpr``, one simulation, ``--rounds`` rounds) over ``--group-sizes``
(default 2 and 3) and ``--seeds`` (0 and 1): ``cooplab plan`` on it (a pilot of ``--pilot-rounds`` rounds per grid point
on the sweep's own model), then the sweep itself; the calls, input and output tokens predicted
against those the cells' ledgers recorded, per grid point and in total, with the relative error.
The pilot's own calls are reported too (what the plan cost in model time).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from _results import emit, machine_info  # benchmarks/ is on sys.path when run as a script

ROOT = Path(__file__).resolve().parents[1]
SECTION = "Plan: predicted vs used"
SCRIPT = {
    "select": "prompt_hash",
    "by_phase": {
        "extract": ['{"extract": 2}', '{"extract": 5}', '{"extract": 10}'],
        "deliberate": ['{"message": "Let us all take little."}'],
    },
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    ap.add_argument("--model", default="local", help="local (default) or scripted (a scripted model, for smoke runs)")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--pilot-rounds", type=int, default=4)
    ap.add_argument("--group-sizes", type=int, nargs="+", default=[2, 3], help="the grid: players per group")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--out", type=Path, default=None, help="write the section to this file instead of RESULTS.md")
    ap.add_argument("--print", dest="just_print", action="store_true", help="print the section, write nothing")
    a = ap.parse_args(argv)
    import cooplab
    from cooplab.runs import grid

    with tempfile.TemporaryDirectory(prefix="bench-plan-") as tmp:
        tmp = Path(tmp)
        model = a.model
        if model == "scripted":
            (tmp / "game.json").write_text(json.dumps(SCRIPT))
            model = f"scripted:{tmp / 'game.json'}"
        spec = {
            "task": "game",
            "out": str(tmp / "sweep"),
            "analysis": False,
            "fixed": {
                "agents": "llm",
                "game": "cpr",
                "model": model,
                "simulations": 1,
                "rounds": a.rounds,
                "cache": "off",
            },
            "grid": {"group_size": a.group_sizes},
            "seeds": a.seeds,
        }
        t0 = time.perf_counter()
        p = cooplab.plan(spec, pilot_rounds=a.pilot_rounds)
        t_plan = time.perf_counter() - t0
        pilot_calls = sum(
            sum(ph["calls"] for ph in r.values()) for pt in p["points"] for r in pt["pilot"]["by_round"].values()
        )
        sw = grid.load(spec, "bench")
        t0 = time.perf_counter()
        res = grid.run(sw, grid.jobs(sw))
        t_sweep = time.perf_counter() - t0
        failed = [r for r in res["table"] if r.get("status") != "completed"]
        if failed:
            print(f"cells did not complete: {failed}", file=sys.stderr)
            return 1
        used = {k: 0 for k in ("calls", "input_tokens", "output_tokens")}
        by_point: dict[int, dict[str, int]] = {}
        for r in res["table"]:
            d = by_point.setdefault(r["group_size"], {k: 0 for k in used})
            for k in used:
                d[k] += int(r[f"ledger.{k}"])
                used[k] += int(r[f"ledger.{k}"])
    lines = [
        f"## {SECTION}",
        "",
        *machine_info(),
        "",
        f"Sweep: the CPR game (`game=cpr`), model `{a.model}`, 1 simulation, {a.rounds} rounds, cache off; grid "
        f"group_size {a.group_sizes}, seeds {a.seeds} ({len(a.group_sizes) * len(a.seeds)} cells). Plan: a pilot of "
        f"{a.pilot_rounds} rounds per grid point on the "
        f"same model ({pilot_calls} calls, {t_plan:.0f} s); the sweep: {t_sweep:.0f} s.",
        "",
        "| | predicted calls | used calls | predicted input tokens | used input tokens | predicted output tokens | "
        "used output tokens |",
        "|---|---|---|---|---|---|---|",
    ]

    def err(pred: int, got: int) -> str:
        return f"{(pred - got) / got * 100:+.1f}%" if got else "n/a"

    for pt in p["points"]:
        g = pt["labels"]["group_size"]
        c, u = pt["per_cell"], by_point[g]
        n = pt["seeds"]
        lines.append(
            f"| group_size {g} ({n} cells) | {c['calls'] * n} | {u['calls']} | {c['input_tokens'] * n} | "
            f"{u['input_tokens']} | "
            f"{c['output_tokens'] * n} | {u['output_tokens']} |"
        )
    t = p["total"]
    lines.append(
        f"| **total** | {t['calls']} | {used['calls']} | {t['input_tokens']} | {used['input_tokens']} | "
        f"{t['output_tokens']} | "
        f"{used['output_tokens']} |"
    )
    lines.append(
        f"| error | {err(t['calls'], used['calls'])} | | {err(t['input_tokens'], used['input_tokens'])} | | "
        f"{err(t['output_tokens'], used['output_tokens'])} | |"
    )
    text = "\n".join(lines) + "\n"
    emit(SECTION, text, write=not a.just_print, out=a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
