"""What a game profile costs against what a science run costs, from the ledgers (the paper's §4.2
"computational efficiency" and its Appendix K, Table 10).

The paper argues that a model's cooperative profile is a cheap stand-in for running its science
teams: a few games of tens of output tokens per decision against 67K-481K tokens per science run.
:func:`compare` measures that on your own runs: per model, the tokens (input, output, total), the
cost and the wall time of its profile (every game, every simulation) against the same per science
run (mean over runs), and the ratios. Tokens and cost are the ledger's: what each call was charged
(a reported count above the call's bound is charged at the bound), cached replays excluded, so a
rerun that replayed its answers does not look free, and the science judge's calls are not part of
a run's workflow and are left out. Sandbox seconds are priced separately in a science ledger
(``kind == "sandbox_seconds"``) and reported as their own column.

The paper's own Table 10 (mean tokens per science run of its 34 models) ships as
``data/paper_science_tokens.csv``; a model found there gets the paper's figure beside ours.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import pandas as pd

from cooplab.evals.bayes import bare_model_name
from cooplab.evals.typed import column
from cooplab.evals.values import num
from cooplab.graphs import runfiles
from cooplab.graphs.rundir import RunDirError, read_json
from cooplab.limits import ConfigError

#: the paper's Table 10: model, conditions, mean input, output and total tokens per science run
PAPER_TABLE_10 = Path(__file__).resolve().parent / "data" / "paper_science_tokens.csv"


class EfficiencyError(ConfigError):
    """Inputs the comparison cannot use (one line)."""


def _ledger(run_dir: Path) -> pd.DataFrame | None:
    from cooplab.graphs.rundir import read_table

    try:
        return read_table(run_dir, "ledger")
    except (RunDirError, OSError, ValueError):
        return None


def _num(v: Any) -> float:
    """A count or amount from a ledger or summary: a finite number of at least 0, else 0."""
    x = num(v)
    return x if x is not None and x >= 0 else 0.0


def ledger_totals(ledger: pd.DataFrame | None) -> dict[str, float]:
    """The paid token calls of a ledger: calls, input, output and total tokens, their cost (USD),
    and the sandbox's cost. Cached replays and rows with unreadable numbers count as nothing."""
    out = {
        "calls": 0.0,
        "input_tokens": 0.0,
        "output_tokens": 0.0,
        "total_tokens": 0.0,
        "cost_usd": 0.0,
        "sandbox_usd": 0.0,
    }
    if ledger is None or ledger.empty:
        return out
    kind = ledger["kind"].astype(str) if "kind" in ledger else pd.Series("tokens", index=ledger.index)
    cached = ledger["cached"].fillna(False).astype(bool) if "cached" in ledger else pd.Series(False, index=ledger.index)
    tokens = ledger[(kind == "tokens") & ~cached]
    out["calls"] = float(len(tokens))
    for col in ("input_tokens", "output_tokens"):
        if col in tokens:
            out[col] = float(sum(_num(v) for v in tokens[col]))
    out["total_tokens"] = out["input_tokens"] + out["output_tokens"]
    if "cost_usd_exact" in tokens:  # the exact text: summed as numbers one by one, an unreadable one as 0
        out["cost_usd"] = float(sum(_num(v) for v in tokens["cost_usd_exact"]))
    if "cost_usd_exact" in ledger:
        out["sandbox_usd"] = float(
            sum(_num(v) for v in ledger[(kind == "sandbox_seconds") & ~cached]["cost_usd_exact"])
        )
    return out


def _read_json(p: Path) -> dict[str, Any]:
    """A JSON object file, or {} when it is missing, unreadable or not an object."""
    try:
        data = read_json(p)
    except (OSError, RunDirError):
        return {}
    return data if isinstance(data, dict) else {}


def _model_of_run(run_dir: Path) -> str | None:
    llm = _read_json(run_dir / "config.json").get("llm")
    return llm.get("model") if isinstance(llm, dict) and isinstance(llm.get("model"), str) else None


def profile_row(d: Path) -> dict[str, Any]:
    """One profile directory's costs: its model, games, simulations, decisions and the ledger totals."""
    prof = _read_json(d / "profile.json")
    if not prof:
        raise EfficiencyError(f"{d}: no readable profile.json; give a directory written by 'cooplab profile'")
    model = prof.get("model") or prof.get("players")
    if not isinstance(model, str) or not model:
        raise EfficiencyError(f"{d}/profile.json names no model")
    games = prof.get("games")
    games = games if isinstance(games, dict) else {}
    try:
        dirs = runfiles.dirs_by(d, "game")  # cells/game-GAME__sN (games/GAME before the grid layout)
    except runfiles.RunDirError as exc:
        raise EfficiencyError(str(exc).splitlines()[0]) from None
    frames = [lg for g in games if (lg := _ledger(dirs.get(str(g), d / "games" / str(g)))) is not None]
    totals = ledger_totals(pd.concat(frames, ignore_index=True) if frames else None)
    t = prof.get("totals")
    t = t if isinstance(t, dict) else {}
    return {
        "model": model,
        "profile": str(d),
        "games": len(games),
        "simulations": prof.get("simulations"),
        "decisions": int(_num(t.get("decisions"))),
        "wall_seconds": _num(t.get("wall_seconds")),
        **totals,
    }


def science_runs(dirs: list[Path]) -> list[Path]:
    """The science run directories among ``dirs``: each a run, or a sweep's ``cells/*``."""
    runs: list[Path] = []
    for d in dirs:
        if not d.is_dir():
            raise EfficiencyError(f"--science {d} is not a directory; give a science run or a science sweep directory")
        if (d / "config.json").is_file():
            runs.append(d)
        else:
            cells = sorted(p for p in (d / "cells").glob("*") if (p / "config.json").is_file())
            if not cells:
                raise EfficiencyError(f"--science {d} holds no run (no config.json, no cells/*/config.json)")
            runs += cells
    return runs


def science_row(run_dir: Path) -> dict[str, Any] | None:
    """One science run's costs (None for a run of another task)."""
    cfg = _read_json(run_dir / "config.json")
    if cfg.get("task") != "science":
        return None
    from cooplab.graphs import runfiles

    summary, problem = runfiles.try_summary(run_dir)  # the runner's fields typed; a damaged file: its line, no numbers
    if problem:
        raise EfficiencyError(problem)
    return {
        "model": _model_of_run(run_dir) or "?",
        "run": str(run_dir),
        "status": summary.status if summary else None,
        "wall_seconds": summary.wall_seconds if summary else None,
        **ledger_totals(_ledger(run_dir)),
    }


def compare(profiles: list[Path], science: list[Path]) -> dict[str, Any]:
    """Per model: the profile's costs, the mean science run's, and the ratios (science per run over
    the profile). Models with a profile but no science run, or the reverse, keep their own columns."""
    if not profiles and not science:
        raise EfficiencyError("give at least one --profiles or --science directory")
    prof = pd.DataFrame([profile_row(Path(d)) for d in profiles])
    runs = [r for d in science_runs([Path(s) for s in science]) if (r := science_row(d)) is not None]
    if science and not runs:
        raise EfficiencyError("no science runs among --science (their config.json names another task)")
    sci = pd.DataFrame(runs)
    metrics = ("input_tokens", "output_tokens", "total_tokens", "cost_usd", "wall_seconds")
    rows: dict[Hashable, dict[str, Any]] = {}  # by the model column's values
    if not prof.empty:
        for model, g in prof.groupby("model", sort=True):
            rows.setdefault(model, {"model": model})
            rows[model].update(
                {
                    "profiles": len(g),
                    "profile_decisions": int(column(g, "decisions").sum()),
                    "profile_calls": int(column(g, "calls").sum()),
                    **{f"profile_{m}": float(column(g, m).mean()) for m in metrics},
                }
            )
            dec = column(g, "decisions").sum()
            rows[model]["profile_output_tokens_per_decision"] = (
                float(column(g, "output_tokens").sum() / dec) if dec else None
            )
    if not sci.empty:
        for model, g in sci.groupby("model", sort=True):
            rows.setdefault(model, {"model": model})
            rows[model].update(
                {
                    "science_runs": len(g),
                    **{f"science_{m}_per_run": float(column(g, m).mean()) for m in metrics},
                    "science_sandbox_usd_per_run": float(column(g, "sandbox_usd").mean()),
                }
            )
    paper = pd.read_csv(PAPER_TABLE_10).set_index("model")
    for r in rows.values():
        for m in ("total_tokens", "output_tokens", "cost_usd", "wall_seconds"):
            a, b = r.get(f"science_{m}_per_run"), r.get(f"profile_{m}")
            r[f"ratio_{m}"] = a / b if a is not None and b else None
        bare = bare_model_name(r["model"])
        r["paper_science_total_tokens_per_run"] = (
            float(paper.loc[bare, "total_per_run"]) if bare in paper.index else None
        )
    table = pd.DataFrame(list(rows.values()))
    notes = []
    if not sci.empty and bool((column(sci, "status") != "completed").any()):
        notes.append(
            f"{int((column(sci, 'status') != 'completed').sum())} of {len(sci)} science runs did not complete; "
            "their costs are included"
        )
    if not prof.empty and bool((column(prof, "calls") == 0).all()):
        notes.append(
            "the profiles made no paid model calls (rule-based players or all answers replayed from the cache)"
        )
    return {"table": table, "notes": notes, "profiles": len(prof), "science_runs": len(sci)}


def write(result: dict[str, Any], out: Path) -> dict[str, Path]:
    """efficiency.csv, efficiency.md (the table in words) and efficiency.png in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    table: pd.DataFrame = result["table"]
    paths = {"csv": out / "efficiency.csv", "md": out / "efficiency.md", "png": out / "efficiency.png"}
    table.to_csv(paths["csv"], index=False)
    paths["md"].write_text(markdown(result), encoding="utf-8")
    figure(table, paths["png"])
    return paths


def _fmt(v: Any, digits: int = 0) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    return f"{v:,.{digits}f}"


def markdown(result: dict[str, Any]) -> str:
    table: pd.DataFrame = result["table"]
    lines = [
        "# A profile's cost against a science run's",
        "",
        f"{result['profiles']} profile(s), {result['science_runs']} science run(s). Tokens and USD are what the "
        "ledgers "
        "charged for paid calls (cached replays and the science judge left out); a science column is the mean per run; "
        "a ratio is science per run over the whole profile.",
        "",
        "| model | profile tokens | profile output/decision | science tokens/run | tokens ratio | profile USD | "
        "science USD/run | "
        "cost ratio | time ratio | paper's tokens/run (Table 10) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in table.to_dict("records"):
        g = r.get
        lines.append(
            f"| {r['model']} | {_fmt(g('profile_total_tokens'))} | {_fmt(g('profile_output_tokens_per_decision'), 1)} "
            "| "
            f"{_fmt(g('science_total_tokens_per_run'))} | {_fmt(g('ratio_total_tokens'), 1)} | "
            f"{_fmt(g('profile_cost_usd'), 4)} | "
            f"{_fmt(g('science_cost_usd_per_run'), 4)} | {_fmt(g('ratio_cost_usd'), 1)} | "
            f"{_fmt(g('ratio_wall_seconds'), 1)} | "
            f"{_fmt(g('paper_science_total_tokens_per_run'))} |"
        )
    lines += [""] + [f"- note: {n}" for n in result["notes"]]
    return "\n".join(lines).rstrip() + "\n"


def figure(table: pd.DataFrame, path: Path) -> None:
    """Tokens of each model's profile and of its mean science run, side by side on a log axis."""
    import numpy as np

    from cooplab.evals.canvas import subplots

    models = list(table["model"]) if not table.empty else []
    fig, ax = subplots(figsize=(max(5.0, 1.2 * len(models) + 2), 4))
    x = np.arange(len(models))
    cols = [
        ("profile_total_tokens", "whole profile (all games)", "tab:blue"),
        ("science_total_tokens_per_run", "one science run (mean)", "tab:orange"),
        ("paper_science_total_tokens_per_run", "paper's science run (Table 10)", "tab:gray"),
    ]
    width = 0.27
    for i, (col, label, colour) in enumerate(cols):
        vals = [
            float(v) if isinstance(v, (int, float)) and v and math.isfinite(v) else np.nan
            for v in (table[col] if col in table else [None] * len(models))
        ]
        ax.bar(x + (i - 1) * width, vals, width, label=label, color=colour)
    ax.set_xticks(x, [str(m) for m in models], rotation=20, ha="right")
    ax.set_yscale("log")
    ax.set_ylabel("tokens charged (input + output), log scale")
    ax.set_title("What a profile costs against a science run")
    ax.legend(fontsize=8)
    fig.supxlabel("Bars: ledger totals of paid calls; a missing bar means no such runs for that model.", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
