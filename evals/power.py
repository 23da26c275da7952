"""How many seeds per cell a comparison needs: the sample size of a two-sided t-test at a power.

The question: two cells of a sweep (two conditions) differ in an outcome's mean by ``d`` (the
smallest difference worth finding). With ``n`` seeds per cell, how large must ``n`` be for a
two-sided test at level ``alpha`` to find that difference with probability ``power``?

The formula (normal approximation, then a t correction):

* **unpaired** (independent seeds in each cell, outcome standard deviation ``sd`` within a cell):
  the difference of two means of ``n`` values has standard error ``sd * sqrt(2 / n)``, so the
  test reaches the power when ``d / (sd * sqrt(2 / n)) >= z(1 - alpha/2) + z(power)``, i.e.
  ``n >= 2 * (z(1 - alpha/2) + z(power))**2 * sd**2 / d**2``.
* **paired** (the same seeds in both cells, so each seed gives one difference; ``sd`` is the
  standard deviation of those per-seed differences): one mean of ``n`` differences, standard
  error ``sd / sqrt(n)``, so ``n >= (z(1 - alpha/2) + z(power))**2 * sd**2 / d**2``.

The test actually run on a few seeds is a t-test, whose quantiles are wider than the normal's:
the t correction replaces both ``z`` quantiles by Student t quantiles with the test's degrees of
freedom (``2n - 2`` unpaired, ``n - 1`` paired) and solves again, starting from the normal
answer, until ``n`` stops changing (:func:`seeds_needed`). ``n`` is rounded up and is at least 2.
:func:`power_of` gives the other direction (the approximate power of ``n`` seeds), the same
approximation. A Monte-Carlo simulation checks both (``tests/evals/test_power.py``).

Where the standard deviation comes from (:func:`outcome_sd`): the per-seed values of an outcome
in a sweep's table (a pilot sweep or an earlier one): the pooled within-cell standard deviation
(unpaired), or the standard deviation of the per-seed differences between cells that share a
seed, pooled over every pair of cells (paired).
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Sequence

#: the most seeds per cell this module reports (beyond it the difference is too small to plan for)
MAX_SEEDS = 1_000_000


class PowerError(ValueError):
    """A difference, power, level or standard deviation that cannot be used; the message is one line."""


def check_inputs(d: Any, sd: Any, alpha: Any, power: Any) -> tuple[float, float, float, float]:
    def num(v: Any, what: str) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(float(v)):
            raise PowerError(f"{what} must be a finite number, got {v!r}")
        return float(v)

    d, sd, alpha, power = (
        num(d, "the difference"),
        num(sd, "the standard deviation"),
        num(alpha, "alpha"),
        num(power, "power"),
    )
    if d <= 0:
        raise PowerError(
            f"the difference must be above 0 (the smallest difference in the outcome worth finding), got {d:g}"
        )
    if sd < 0:
        raise PowerError(f"the standard deviation must not be negative, got {sd:g}")
    if not 0 < alpha < 1:
        raise PowerError(f"alpha must be between 0 and 1 (e.g. 0.05), got {alpha:g}")
    if not 0 < power < 1:
        raise PowerError(f"power must be between 0 and 1 (e.g. 0.8), got {power:g}")
    return d, sd, alpha, power


def _df(n: float, paired: bool) -> float:
    return max(n - 1, 1) if paired else max(2 * n - 2, 1)


def seeds_needed(
    d: float, sd: float, *, alpha: float = 0.05, power: float = 0.8, paired: bool = False
) -> dict[str, Any]:
    """Seeds per cell to find a difference ``d`` in an outcome with standard deviation ``sd`` (see the
    module's formula): ``{"seeds", "normal_seeds", "d", "sd", "alpha", "power", "paired", "formula"}``;
    ``seeds`` has the t correction, ``normal_seeds`` is the plain normal answer."""
    from scipy.stats import norm, t

    d, sd, alpha, power = check_inputs(d, sd, alpha, power)
    k = 1.0 if paired else 2.0
    z = norm.ppf(1 - alpha / 2) + norm.ppf(power)
    n_normal = k * z * z * sd * sd / (d * d)
    n = max(2, math.ceil(n_normal))
    for _ in range(100):
        if n > MAX_SEEDS:
            break
        df = _df(n, paired)
        q = t.ppf(1 - alpha / 2, df) + t.ppf(power, df)
        nxt = max(2, math.ceil(k * q * q * sd * sd / (d * d)))
        if nxt == n:
            break
        n = nxt
    if n > MAX_SEEDS:
        raise PowerError(
            f"finding a difference of {d:g} in an outcome with standard deviation {sd:g} needs more than "
            f"{MAX_SEEDS} seeds per cell; plan for a larger difference"
        )
    formula = (
        "n = (t(1-alpha/2, n-1) + t(power, n-1))^2 * sd_diff^2 / d^2"
        if paired
        else "n = 2 * (t(1-alpha/2, 2n-2) + t(power, 2n-2))^2 * sd^2 / d^2"
    )
    return {
        "seeds": int(n),
        "normal_seeds": max(2, math.ceil(n_normal)),
        "d": d,
        "sd": sd,
        "alpha": alpha,
        "power": power,
        "paired": bool(paired),
        "formula": formula,
    }


def power_of(n: int, d: float, sd: float, *, alpha: float = 0.05, paired: bool = False) -> float:
    """The approximate power of ``n`` seeds per cell (the module's formula read the other way:
    the noncentral shift less the t quantile, through the t distribution)."""
    from scipy.stats import t

    d, sd, alpha, _ = check_inputs(d, sd, alpha, 0.5)
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise PowerError(f"the number of seeds must be a whole number of at least 2, got {n!r}")
    if sd == 0:
        return 1.0
    se = sd / math.sqrt(n) if paired else sd * math.sqrt(2 / n)
    df = _df(n, paired)
    return float(t.cdf(d / se - t.ppf(1 - alpha / 2, df), df))


def outcome_sd(
    rows: Iterable[Mapping[str, Any]], outcome: str, *, by: Sequence[str], seed: str = "seed", paired: bool = False
) -> dict[str, Any]:
    """The standard deviation of ``outcome`` from per-seed rows (a sweep's table): cells are the
    distinct values of the ``by`` columns, seeds the ``seed`` column. Unpaired: the pooled
    within-cell standard deviation. Paired: the standard deviation of the per-seed differences
    between every two cells sharing seeds, pooled. ``{"sd", "df", "cells", "values"}``; a
    PowerError when there is too little to estimate from (fewer than two seeds in every cell)."""
    groups: dict[tuple, dict[Any, float]] = {}
    for r in rows:
        v = r.get(outcome)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(float(v)):
            continue
        key = tuple(str(r.get(c)) for c in by)
        groups.setdefault(key, {})[str(r.get(seed))] = float(v)
    n_values = sum(len(g) for g in groups.values())
    if n_values == 0:
        raise PowerError(
            f"no finite values of {outcome!r} to estimate its spread from (is it a column of the sweep's table?)"
        )
    ss, df = 0.0, 0
    if paired:
        keys = sorted(groups)
        for i, a in enumerate(keys):
            for b in keys[i + 1 :]:
                common = sorted(set(groups[a]) & set(groups[b]))
                if len(common) < 2:
                    continue
                diffs = [groups[a][s] - groups[b][s] for s in common]
                m = sum(diffs) / len(diffs)
                ss += sum((x - m) ** 2 for x in diffs)
                df += len(diffs) - 1
        if df == 0:
            raise PowerError(
                f"a paired design needs two cells with at least two seeds in common to estimate the spread of "
                f"{outcome!r}'s differences; have {len(groups)} cell(s)"
            )
    else:
        for g in groups.values():
            if len(g) < 2:
                continue
            m = sum(g.values()) / len(g)
            ss += sum((x - m) ** 2 for x in g.values())
            df += len(g) - 1
        if df == 0:
            raise PowerError(
                f"estimating the spread of {outcome!r} needs a cell with at least two seeds; "
                f"every one of the {len(groups)} cell(s) has one (run the pilot with more seeds)"
            )
    return {"sd": math.sqrt(ss / df), "df": df, "cells": len(groups), "values": n_values}


__all__ = ["MAX_SEEDS", "PowerError", "outcome_sd", "power_of", "seeds_needed"]
