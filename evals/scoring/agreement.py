"""How far two scorers agree over the same reports.

:func:`judge_agreement` compares two paired lists of scores (Pearson r, mean absolute
difference, the two means); :func:`compare_judges` does so per dimension for two scorers'
results, whether LLM judges or the heuristic scorer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, TypeGuard

import numpy as np

from cooplab.evals.scoring.facts import HeuristicScore
from cooplab.evals.scoring.judge import DIMENSIONS, JudgeResult


def judge_agreement(scores_a: Sequence[float | None], scores_b: Sequence[float | None]) -> dict[str, Any]:
    """Agreement of two scorers over the same reports (paired lists). Pairs where either score
    is None or NaN are dropped (counted in ``n_dropped``). Returns ``n``, ``pearson_r`` (None
    with a ``reason`` if fewer than two pairs or either side is constant), ``mean_abs_diff``
    (None if no pair) and ``mean_a``/``mean_b`` (a calibration difference shows there: Appendix
    L's judges correlate at r = 0.59 on accuracy but differ in mean). Raises ValueError if the
    lists differ in length."""
    if len(scores_a) != len(scores_b):
        raise ValueError(f"the two score lists differ in length ({len(scores_a)} vs {len(scores_b)})")

    def ok(x: Any) -> TypeGuard[float | np.floating | np.integer]:
        return (
            x is not None
            and not isinstance(x, bool)
            and isinstance(x, (int, float, np.floating, np.integer))
            and math.isfinite(float(x))
        )

    pairs = [(float(a), float(b)) for a, b in zip(scores_a, scores_b, strict=False) if ok(a) and ok(b)]
    out: dict[str, Any] = {
        "n": len(pairs),
        "n_dropped": len(scores_a) - len(pairs),
        "pearson_r": None,
        "reason": None,
        "mean_abs_diff": None,
        "mean_a": None,
        "mean_b": None,
    }
    if not pairs:
        out["reason"] = "no pair of valid scores"
        return out
    a = np.array([p[0] for p in pairs])
    b = np.array([p[1] for p in pairs])
    out["mean_abs_diff"] = round(float(np.abs(a - b).mean()), 6)
    out["mean_a"], out["mean_b"] = round(float(a.mean()), 6), round(float(b.mean()), 6)
    if len(pairs) < 2:
        out["reason"] = "fewer than two pairs"
        return out
    constant = [
        name
        for name, x in (("first", a), ("second", b))
        if float(x.max() - x.min()) <= 1e-12 * max(1.0, float(np.abs(x).max()))
    ]
    if constant:
        out["reason"] = f"the {' and the '.join(constant)} scores are constant: correlation undefined"
        return out
    da, db = a - a.mean(), b - b.mean()
    r = float((da * db).sum() / np.sqrt((da * da).sum() * (db * db).sum()))
    out["pearson_r"] = round(max(-1.0, min(1.0, r)), 6)
    return out


def compare_judges(
    results_a: Sequence[JudgeResult | HeuristicScore | dict[str, Any] | None],
    results_b: Sequence[JudgeResult | HeuristicScore | dict[str, Any] | None],
) -> dict[str, dict[str, Any]]:
    """:func:`judge_agreement` per dimension between two scorers' results over the same reports
    (a judge's :class:`JudgeResult`, a :class:`HeuristicScore`, or a dict of the three scores)."""

    def get(r: Any, d: str) -> float | None:
        if r is None:
            return None
        if isinstance(r, dict):
            return r.get(d)
        return getattr(r, d, None)

    return {d: judge_agreement([get(r, d) for r in results_a], [get(r, d) for r in results_b]) for d in DIMENSIONS}


__all__ = ["compare_judges", "judge_agreement"]
