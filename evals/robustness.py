"""How much a sweep's results depend on the wording of the prompts (docs/robustness.md).

A sweep over prompt variants (a grid with ``prompt_variant``, :mod:`cooplab.graphs.prompts`)
runs the same conditions with the prompts worded several ways. :func:`robustness` reads its
cells (``OUT/table.csv`` for the grid values, each cell's ``config.json``, ``summary.json`` and
decisions table) and reports, per model:

- **spread**: for every outcome (each number of summary.json with a ``mean``: CPR's survival time
  and efficiency, a game's metric and Pareto proximity ...) under every condition, the mean of
  each variant (with its 95% interval over the societies or seeds), and across the variants their
  mean, minimum, maximum, range and standard deviation;
- **parsing**: per variant, the share of decisions whose first answer did not parse or validate
  (the model was asked again) and the share that ended on the task's fallback. These are the
  model failing the format, kept apart from what it chose;
- **effects**: every condition difference the grid holds (each other grid keyword with two or
  more values, e.g. CPR's ``ablation`` or a game's ``prompt``; each level against the first, the
  other keywords held fixed): its size and Welch test per variant, and **fragile** when across
  the variants it changes sign or is significant under some and not under others.

Observations are a cell's per-society values when summary.json lists them (``values``), else the
cell's mean (one per seed). Reads run folders as data: a cell whose files are missing or
malformed is skipped and named in ``skipped``.
"""

from __future__ import annotations

import csv
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any, TypeGuard

import numpy as np

from cooplab.limits import ConfigError

#: the grid keyword of the prompt variant; model and seed are not conditions either
VARIANT = "prompt_variant"
NOT_CONDITIONS = {VARIANT, "model", "seed"}
#: summary.json blocks that say how a run went, not what its agents did
NOT_OUTCOMES = {"ledger", "llm", "decisions", "fallback", "convergence", "collapse", "outcomes"}
#: significance level of the Welch tests
ALPHA = 0.05
#: at most this many cells are read
MAX_CELLS = 100_000


class RobustnessError(ConfigError):
    """A folder that is not a finished sweep over prompt variants (one line)."""


def _finite(x: Any) -> TypeGuard[float]:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _short_model(spec: Any) -> str:
    text = str(spec)
    if text.startswith("scripted:"):
        return "scripted:" + Path(text[len("scripted:") :]).name
    return text


def outcomes_of(summary: dict[str, Any]) -> dict[str, list[float]]:
    """The outcomes of one run: each summary block with a finite ``mean``, as its observations
    (``values`` when it lists one per society, else the mean alone)."""
    out: dict[str, list[float]] = {}
    for key, block in summary.items():
        if key in NOT_OUTCOMES or not isinstance(block, dict) or not _finite(block.get("mean")):
            continue
        values = block.get("values")
        if (
            isinstance(values, list)
            and values
            and all(_finite(v) for v in values)
            and len(values) == block.get("n", len(values))
        ):
            out[key] = [float(v) for v in values]
        else:
            out[key] = [float(block["mean"])]
    return out


def _parsing(d: Path, summary: dict[str, Any]) -> dict[str, float]:
    """Counts of a run's decisions: all, those whose first answer failed (asked again), fallbacks."""
    from cooplab.graphs import rundir

    try:
        t = rundir.read_table(d, "decisions")
        if len(t) and {"attempts", "fallback_used"} <= set(t.columns):
            attempts = np.asarray(t["attempts"], dtype=float)
            fallback = np.asarray(t["fallback_used"], dtype=bool)
            return {
                "decisions": float(len(t)),
                "retried": float(np.sum((attempts > 1) | fallback)),
                "fallbacks": float(fallback.sum()),
            }
    except Exception:  # noqa: BLE001 - a missing or unreadable table: the summary's counts instead
        pass
    dec = summary.get("decisions")
    dec = dec if isinstance(dec, dict) else {}
    n, fb = dec.get("count"), dec.get("fallback_used")
    if _finite(n) and _finite(fb) and n > 0:
        return {"decisions": float(n), "retried": float("nan"), "fallbacks": float(fb)}
    return {"decisions": 0.0, "retried": 0.0, "fallbacks": 0.0}


def _labels(sweep: Path) -> dict[str, dict[str, str]]:
    """Each cell's grid values by cell name, from ``table.csv`` (the columns between ``cell`` and ``status``)."""
    p = sweep / "table.csv"
    try:
        with p.open(newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh))
    except (OSError, UnicodeDecodeError) as exc:
        raise RobustnessError(
            f"{sweep} has no readable table.csv ({getattr(exc, 'strerror', None) or exc}); give the folder a sweep "
            f"wrote ('cooplab sweep FILE' or cooplab.sweep(...), with prompt_variant in its grid)"
        ) from None
    if not rows or rows[0][:1] != ["cell"] or "status" not in rows[0]:
        raise RobustnessError(f"{p} is not a sweep's table (its first columns must be cell, the grid values, status)")
    head = rows[0]
    keys = head[1 : head.index("status")]
    if len(rows) - 1 > MAX_CELLS:
        raise RobustnessError(f"{p} lists {len(rows) - 1} cells; at most {MAX_CELLS}")
    return {r[0]: dict(zip(keys, r[1 : len(keys) + 1], strict=False)) for r in rows[1:] if r and len(r) > len(keys)}


def load_cells(sweep: str | Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The finished cells of a sweep folder, each with its model, variant, condition (the other
    grid values), outcomes and decision counts; and the names of the cells left out, with why."""
    from cooplab.graphs import rundir

    sweep = Path(sweep)
    if not sweep.is_dir():
        raise RobustnessError(f"{sweep} is not a folder; give the output folder of a sweep over prompt variants")
    labels = _labels(sweep)
    cells, skipped = [], []
    for name, lab in labels.items():
        d = sweep / "cells" / name
        if "/" in name or name in ("", ".", "..") or not d.is_dir():
            skipped.append(f"{name}: no folder")
            continue
        try:
            config, summary = rundir.read_json(d / "config.json"), rundir.read_json(d / "summary.json")
        except Exception as exc:  # noqa: BLE001 - a cell not run or damaged
            skipped.append(f"{name}: {' '.join(str(exc).split())[:120] or type(exc).__name__}")
            continue
        if not isinstance(config, dict) or not isinstance(summary, dict):
            skipped.append(f"{name}: config.json or summary.json is not an object")
            continue
        if summary.get("status") != "completed":
            skipped.append(f"{name}: status {summary.get('status')!r}")
            continue
        llm = config.get("llm")
        llm = llm if isinstance(llm, dict) else {}
        variant = llm.get(VARIANT)
        variant = variant if isinstance(variant, str) else "original"
        model = _short_model(llm.get("model", "(rule-based)") if llm else "(rule-based)")
        condition = tuple(sorted((k, v) for k, v in lab.items() if k not in NOT_CONDITIONS))
        cells.append(
            {
                "cell": name,
                "model": model,
                "variant": variant,
                "condition": condition,
                "seed": lab.get("seed"),
                "outcomes": outcomes_of(summary),
                "parsing": _parsing(d, summary),
            }
        )
    if not cells:
        raise RobustnessError(
            f"{sweep} has no finished cell to read ({'; '.join(skipped[:3]) or 'table.csv lists none'})"
        )
    return cells, skipped


def _order(variants: set[str]) -> list[str]:
    return sorted(variants, key=lambda v: (v != "original", v))


def _interval(y: np.ndarray) -> tuple[float | None, float | None]:
    """A 95% t interval of the mean (None with fewer than two values)."""
    if len(y) < 2:
        return None, None
    from scipy import stats

    half = float(stats.t.ppf(0.975, len(y) - 1) * y.std(ddof=1) / math.sqrt(len(y)))
    return float(y.mean() - half), float(y.mean() + half)


def _test(a: np.ndarray, b: np.ndarray) -> float | None:
    """Welch's p of b against a; with no variance in either group, 0 when the means differ and 1
    when they agree (the limit of the test); None with fewer than two values in a group."""
    from cooplab.evals import stats

    if len(a) < 2 or len(b) < 2:
        return None
    try:
        return float(stats.welch(b, a)["p"])
    except stats.NotEstimable:
        return 0.0 if not math.isclose(float(a.mean()), float(b.mean()), rel_tol=1e-12, abs_tol=1e-12) else 1.0


def _label(condition: tuple) -> str:
    return ", ".join(f"{k}={v}" for k, v in condition) or "all"


def spread(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per model, condition and outcome: each variant's mean, interval and n, and across
    the variants their mean, min, max, range and s.d. (of the variants' means)."""
    groups: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for c in cells:
        for outcome, values in c["outcomes"].items():
            groups[(c["model"], c["condition"], outcome)][c["variant"]].extend(values)
    rows = []
    for (model, condition, outcome), by_variant in sorted(
        groups.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2])
    ):
        per = {}
        for v in _order(set(by_variant)):
            y = np.asarray(by_variant[v], dtype=float)
            lo, hi = _interval(y)
            per[v] = {"mean": float(y.mean()), "low": lo, "high": hi, "n": int(len(y))}
        means = np.asarray([p["mean"] for p in per.values()])
        rows.append(
            {
                "model": model,
                "condition": _label(condition),
                "outcome": outcome,
                "variants": per,
                "mean": float(means.mean()),
                "min": float(means.min()),
                "max": float(means.max()),
                "range": float(np.ptp(means)),
                "sd": float(means.std(ddof=1)) if len(means) > 1 else 0.0,
                "n_variants": int(len(means)),
            }
        )
    return rows


def parsing(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per model and variant: decisions, the share whose first answer failed to parse or
    validate, and the share that fell back."""
    acc: dict[tuple, dict[str, float]] = defaultdict(lambda: {"decisions": 0.0, "retried": 0.0, "fallbacks": 0.0})
    for c in cells:
        a = acc[(c["model"], c["variant"])]
        for k in a:
            a[k] += c["parsing"][k]
    rows = []
    for model in sorted({m for m, _ in acc}):
        for v in _order({v for m, v in acc if m == model}):
            a = acc[(model, v)]
            n = a["decisions"]
            rows.append(
                {
                    "model": model,
                    "variant": v,
                    "decisions": int(n),
                    "parse_failure_share": (a["retried"] / n if n and math.isfinite(a["retried"]) else None),
                    "fallback_share": a["fallbacks"] / n if n else None,
                }
            )
    return rows


def effects(cells: list[dict[str, Any]], alpha: float = ALPHA) -> list[dict[str, Any]]:
    """Every condition difference of the grid, per model and outcome: for each grid keyword with
    two or more values, each value against the first (the others held fixed), per variant its
    difference of means and Welch p; ``fragile`` when across the variants the difference changes
    sign or is significant (p < alpha) under some and not under others."""
    axes: dict[str, list[str]] = defaultdict(list)
    for c in cells:
        for k, v in c["condition"]:
            if v not in axes[k]:
                axes[k].append(v)
    data: dict[tuple, list[float]] = defaultdict(list)
    for c in cells:
        for outcome, values in c["outcomes"].items():
            data[(c["model"], c["variant"], c["condition"], outcome)].extend(values)
    rows = []
    models = sorted({c["model"] for c in cells})
    outcomes = sorted({o for c in cells for o in c["outcomes"]})
    variants = _order({c["variant"] for c in cells})
    conditions = sorted({c["condition"] for c in cells})
    for axis, levels in axes.items():
        if len(levels) < 2:
            continue
        ref = levels[0]
        others = sorted({tuple((k, v) for k, v in cond if k != axis) for cond in conditions})
        for model in models:
            for outcome in outcomes:
                for at in others:

                    def cond(level: str, at: tuple = at, axis: str = axis) -> tuple:
                        return tuple(sorted(at + ((axis, level),)))

                    for level in levels[1:]:
                        per = {}
                        for v in variants:
                            a = np.asarray(data.get((model, v, cond(ref), outcome), []), dtype=float)
                            b = np.asarray(data.get((model, v, cond(level), outcome), []), dtype=float)
                            if not len(a) or not len(b):
                                continue
                            diff = float(b.mean() - a.mean())
                            p = _test(a, b)
                            per[v] = {
                                "difference": diff,
                                "p": p,
                                "significant": None if p is None else bool(p < alpha),
                                "n": [int(len(a)), int(len(b))],
                            }
                        if len(per) < 2:
                            continue
                        rows.append(
                            {
                                "model": model,
                                "outcome": outcome,
                                "effect": f"{axis}: {level} vs {ref}",
                                "at": _label(at),
                                "variants": per,
                                **_verdict(per),
                            }
                        )
    return rows


def _verdict(per: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Whether an effect holds across variants: its signs and its significance."""
    scale = max((abs(x["difference"]) for x in per.values()), default=0.0)
    signs = {
        int(np.sign(x["difference"])) if abs(x["difference"]) > 1e-9 * max(scale, 1.0) else 0 for x in per.values()
    }
    tested = [x["significant"] for x in per.values() if x["significant"] is not None]
    changes_sign = 1 in signs and -1 in signs
    loses = bool(tested) and any(tested) and not all(tested)
    why = []
    if changes_sign:
        pos = [v for v, x in per.items() if x["difference"] > 0]
        neg = [v for v, x in per.items() if x["difference"] < 0]
        why.append(f"changes sign (positive under {', '.join(pos)}; negative under {', '.join(neg)})")
    if loses:
        why.append(f"significant under {', '.join(v for v, x in per.items() if x['significant'])} only")
    return {
        "fragile": changes_sign or loses,
        "changes_sign": changes_sign,
        "loses_significance": loses,
        "why": "; ".join(why)
        or (
            ("no difference under any variant" if signs == {0} else "same sign under every variant")
            + ("" if not tested else (", significant under all" if all(tested) else ", significant under none"))
        ),
    }


def robustness(
    sweep: str | Path, *, out: str | Path | None = None, alpha: float = ALPHA, figure: bool = True
) -> dict[str, Any]:
    """The robustness report of a sweep over prompt variants (see the module): ``spread``,
    ``parsing``, ``effects`` (with ``fragile``), the variants, models and skipped cells; written
    to ``out`` (default ``SWEEP/robustness``) as robustness.json and, with ``figure``,
    robustness.png."""
    if not _finite(alpha) or not 0 < alpha < 1:
        raise RobustnessError(f"alpha must be a number between 0 and 1, got {alpha!r}")
    sweep = Path(sweep)
    cells, skipped = load_cells(sweep)
    variants = _order({c["variant"] for c in cells})
    if len(variants) < 2:
        raise RobustnessError(
            f"{sweep} ran one prompt variant only ({variants[0]}); sweep over two or more "
            f'(grid {{"prompt_variant": ["original", "reword-a", ...]}})'
        )
    report = {
        "sweep": str(sweep),
        "variants": variants,
        "models": sorted({c["model"] for c in cells}),
        "cells": len(cells),
        "skipped": skipped,
        "alpha": alpha,
        "spread": spread(cells),
        "parsing": parsing(cells),
        "effects": effects(cells, alpha),
    }
    report["fragile"] = [
        f"{e['model']}: {e['outcome']}, {e['effect']} ({e['at']}): {e['why']}"
        for e in report["effects"]
        if e["fragile"]
    ]
    dest = Path(out) if out is not None else sweep / "robustness"
    dest.mkdir(parents=True, exist_ok=True)
    from cooplab.graphs.rundir import jsonable

    (dest / "robustness.json").write_text(
        json.dumps(jsonable(report), indent=2, allow_nan=False) + "\n", encoding="utf-8"
    )
    report["json"] = str(dest / "robustness.json")
    if figure:
        fig = draw(report)
        fig.savefig(dest / "robustness.png", dpi=110)
        report["figure"] = str(dest / "robustness.png")
    return report


def draw(report: dict[str, Any]):
    """One panel per outcome: each variant's mean (a dot) with its 95% interval (a bar), one
    series per model and condition; a dashed line at the mean across variants of each series."""
    from cooplab.evals.canvas import subplots
    from cooplab.evals.text import model_display_name

    outcomes = sorted({r["outcome"] for r in report["spread"]})
    variants = report["variants"]
    fig, axes = subplots(
        len(outcomes),
        1,
        figsize=(max(6.0, 1.1 * len(variants) + 3), 2.8 * len(outcomes) + 0.8),
        squeeze=False,
        constrained_layout=True,
    )
    for ax, outcome in zip(axes[:, 0], outcomes, strict=False):
        rows = [r for r in report["spread"] if r["outcome"] == outcome]
        width = 0.8 / max(len(rows), 1)
        for k, r in enumerate(rows):
            xs, ys, lo, hi = [], [], [], []
            for i, v in enumerate(variants):
                p = r["variants"].get(v)
                if p is None:
                    continue
                xs.append(i - 0.4 + width * (k + 0.5))
                ys.append(p["mean"])
                lo.append(p["mean"] - p["low"] if p["low"] is not None else 0.0)
                hi.append(p["high"] - p["mean"] if p["high"] is not None else 0.0)
            label = f"{model_display_name(r['model'])} | {r['condition']}"
            line = ax.errorbar(xs, ys, yerr=[lo, hi], fmt="o", capsize=3, label=label)
            ax.axhline(
                r["mean"],
                color=line[0].get_color(),
                linestyle="--",
                linewidth=0.8,
                label=f"{label}: mean across variants",
            )
        ax.set_xticks(range(len(variants)), variants, rotation=20, ha="right", fontsize=8)
        ax.set_ylabel(outcome)
        fragile = [e for e in report["effects"] if e["outcome"] == outcome and e["fragile"]]
        ax.set_title(
            f"{outcome}: mean per prompt variant" + (f"  (FRAGILE: {len(fragile)} effect(s))" if fragile else ""),
            fontsize=9,
        )
        ax.legend(fontsize=7, loc="best")
    import textwrap

    fig.suptitle(
        textwrap.fill(
            "Dots: a variant's mean; bars: its 95% t interval over societies or seeds (none with one value); "
            "dashed: that series' mean across the variants",
            width=int(fig.get_figwidth() * 14),
        ),
        fontsize=8,
    )
    return fig


def text(report: dict[str, Any]) -> list[str]:
    """The report as lines for a terminal."""
    lines = [
        f"{report['cells']} cells, variants: {', '.join(report['variants'])}; models: {', '.join(report['models'])}"
    ]
    for r in report["spread"]:
        lines.append(
            f"{r['model']} | {r['condition']} | {r['outcome']}: mean {r['mean']:.4g}, range {r['range']:.4g} "
            f"({r['min']:.4g} to {r['max']:.4g}), s.d. {r['sd']:.4g} across {r['n_variants']} variants"
        )
    for r in report["parsing"]:
        pf = "n/a" if r["parse_failure_share"] is None else f"{r['parse_failure_share']:.1%}"
        fb = "n/a" if r["fallback_share"] is None else f"{r['fallback_share']:.1%}"
        lines.append(
            f"{r['model']} | {r['variant']}: {r['decisions']} decisions, first answer failed {pf}, fell back {fb}"
        )
    for e in report["effects"]:
        lines.append(
            f"{'FRAGILE' if e['fragile'] else 'robust '} {e['model']} | {e['outcome']} | {e['effect']} ({e['at']}): "
            f"{e['why']}"
        )
    if report["skipped"]:
        lines.append(f"skipped {len(report['skipped'])} cell(s): {'; '.join(report['skipped'][:3])}")
    lines.append(f"written: {report['json']}" + (f", {report['figure']}" if report.get("figure") else ""))
    return lines
