"""The paper's statistics (§4.2): two-way ANOVA (type II, with eta^2), Tukey HSD with a
compact letter display, and Welch t-tests. statsmodels / scipy do the statistics; only the
letter display is our own (the insert-and-absorb algorithm of Piepho 2004).

Each test first checks that it can be estimated on the data at hand and raises
:class:`NotEstimable` (with the reason, in one line) where it cannot: no variance at all, none
within the groups, a group of one. That is common with LLM societies (every society survives to
the round cap) and would otherwise come out as F ratios of rounding noise, NaN rows and library
warnings. Warnings the libraries still raise are collected by :func:`collect_warnings` and
reported as one line each, never printed raw."""

from __future__ import annotations

import contextlib
import itertools
import warnings
from collections.abc import Iterator
from typing import Any, cast

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from cooplab.evals.typed import as_frame, as_series, cell, column
from cooplab.extras import require

require("analysis", "statistics (cooplab analyze, cooplab figures cpr-abm, cooplab sweep)", ("scipy", "statsmodels"))

from scipy import stats  # noqa: E402

#: variation below this share of the data's scale is rounding noise, not variance
RELATIVE_TOL = 1e-9


class NotEstimable(ValueError):
    """A test that the data cannot support; the message says why, in one line."""


def _spread(y: np.ndarray) -> float:
    """The data's scale, for telling variance from rounding noise."""
    return max(float(np.max(np.abs(y))) if y.size else 0.0, 1.0)


def _check_values(y: ArrayLike, what: str) -> np.ndarray:
    y = np.asarray(y, dtype=float)
    if y.size == 0:
        raise NotEstimable(f"{what}: no values")
    if not np.all(np.isfinite(y)):
        raise NotEstimable(f"{what}: missing or infinite values")
    return y


def _check_within_variance(df: pd.DataFrame, y: str, by: list[str]) -> None:
    """Refuse when the values vary not at all, or not within any cell of ``by``."""
    vals = _check_values(df[y].to_numpy(), y)
    tol = RELATIVE_TOL * _spread(vals)
    if np.ptp(vals) <= tol:
        raise NotEstimable(f"every {y} value is {vals[0]:g}: no variance to test")
    resid = df[y] - df.groupby(by)[y].transform("mean")
    if float(np.max(np.abs(resid.to_numpy(dtype=float)))) <= tol:
        raise NotEstimable(f"{y} does not vary within any {' x '.join(by)} cell, so there is no error variance")


@contextlib.contextmanager
def collect_warnings(notes: list[str], where: str) -> Iterator[None]:
    """Run a block with library warnings captured; each distinct one becomes one line in ``notes``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    seen: set[str] = set()
    for w in caught:
        text = " ".join(str(w.message).split())
        if text not in seen:
            seen.add(text)
            notes.append(f"{where}: {w.category.__name__} from {w.filename.rsplit('/', 1)[-1]}: {text}")


def two_way_anova(df: pd.DataFrame, y: str, a: str, b: str) -> pd.DataFrame:
    """Type II two-way ANOVA of ``y`` by factors ``a``, ``b`` and their interaction, with
    eta^2 = SS_effect / SS_total. Rows: a, b, a:b, Residual."""
    import statsmodels.api as sm
    from statsmodels.formula.api import ols

    data = as_frame(df[[y, a, b]]).rename(columns={y: "y", a: "A", b: "B"}).copy()
    if column(data, "A").nunique() < 2 or column(data, "B").nunique() < 2:
        raise NotEstimable(f"a two-way ANOVA needs at least two levels of {a} and of {b}")
    if len(data) <= data.groupby(["A", "B"]).ngroups:
        raise NotEstimable(f"no {a} x {b} cell has a replicate, so there is no error variance")
    _check_within_variance(data.rename(columns={"y": y}), y, ["A", "B"])
    data["A"] = data["A"].astype(str)
    data["B"] = data["B"].astype(str)
    model = ols("y ~ C(A) + C(B) + C(A):C(B)", data=data).fit()
    table = sm.stats.anova_lm(model, typ=2)
    table = table.rename(index={"C(A)": a, "C(B)": b, "C(A):C(B)": f"{a} x {b}"})
    ys = column(data, "y")
    ss_total = float(((ys - ys.mean()) ** 2).sum())
    table["eta_sq"] = table["sum_sq"] / ss_total if ss_total > 0 else np.nan
    table.loc["Residual", ["F", "PR(>F)", "eta_sq"]] = np.nan
    return table.rename(columns={"PR(>F)": "p"})


def tukey_hsd(df: pd.DataFrame, y: str, group: str, alpha: float = 0.05) -> pd.DataFrame:
    """Pairwise Tukey HSD (statsmodels). Columns: group1, group2, meandiff, p_adj, lower, upper, reject."""
    from statsmodels.stats.multicomp import pairwise_tukeyhsd

    sizes = as_series(df.groupby(group)[y].size())
    if len(sizes) < 2:
        raise NotEstimable(f"Tukey HSD needs at least two {group} groups")
    if bool((sizes < 2).any()):
        raise NotEstimable(f"Tukey HSD needs two or more values per {group}; {sizes.idxmin()} has {int(sizes.min())}")
    _check_within_variance(df, y, [group])
    res = pairwise_tukeyhsd(df[y].to_numpy(dtype=float), df[group].astype(str).to_numpy(), alpha=alpha)
    t = pd.DataFrame(res.summary().data[1:], columns=res.summary().data[0])
    return t.rename(columns={"p-adj": "p_adj"})


def compact_letters(
    groups: list[str], significant_pairs: set[frozenset[str]], order: list[str] | None = None
) -> dict[str, str]:
    """Compact letter display: groups sharing a letter do not differ significantly.

    Insert-and-absorb (Piepho 2004): start with one column holding every group; for each
    significant pair, split every column containing both into two (one without each), then
    drop columns contained in another. Letters are assigned in the order of ``order`` (e.g.
    groups sorted by mean, highest first)."""
    cols: list[set[str]] = [set(groups)]
    for pair in significant_pairs:
        x, y = tuple(pair)
        new: list[set[str]] = []
        for c in cols:
            if x in c and y in c:
                new.extend([c - {x}, c - {y}])
            else:
                new.append(c)
        # absorb: remove columns that are subsets of other columns
        uniq = []
        for c in new:
            if c and not any(c < d for d in new) and c not in uniq:
                uniq.append(c)
        cols = uniq
    order = order or groups
    rank = {g: k for k, g in enumerate(order)}
    cols.sort(key=lambda c: min(rank.get(g, 1e9) for g in c))
    letters = {g: "" for g in groups}
    for k, c in enumerate(cols):
        letter = chr(ord("a") + k) if k < 26 else f"[{k}]"
        for g in c:
            letters[g] += letter
    return {g: "".join(sorted(v)) for g, v in letters.items()}


def cld_from_tukey(df: pd.DataFrame, y: str, group: str, alpha: float = 0.05) -> dict[str, str]:
    groups = list(as_series(df.groupby(group)[y].mean()).sort_values(ascending=False).index.astype(str))
    if len(groups) < 2:
        return {g: "a" for g in groups}
    t = tukey_hsd(df, y, group, alpha)
    sig = {
        frozenset((str(g1), str(g2)))
        for g1, g2, rej in zip(t["group1"], t["group2"], t["reject"], strict=True)
        if bool(rej)
    }
    return compact_letters(groups, sig, order=groups)


def welch(a: ArrayLike, b: ArrayLike) -> dict[str, Any]:
    """Welch's t-test (scipy) with the Welch-Satterthwaite degrees of freedom."""
    a, b = _check_values(a, "the first group"), _check_values(b, "the second group")
    if len(a) < 2 or len(b) < 2:
        raise NotEstimable(f"a Welch test needs two or more values per group (n = {len(a)} and {len(b)})")
    if np.ptp(a) <= RELATIVE_TOL * _spread(a) and np.ptp(b) <= RELATIVE_TOL * _spread(b):
        raise NotEstimable(f"both groups are constant ({a[0]:g} and {b[0]:g}): no variance to test")
    res = stats.ttest_ind(a, b, equal_var=False)
    # TtestResult is the tuple (statistic, pvalue) with more attributes, which its stubs do not name
    statistic, pvalue = cast("tuple[float, float]", (res[0], res[1]))
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1)) if (va + vb) > 0 else float("nan")
    return {
        "t": float(statistic),
        "p": float(pvalue),
        "df": float(df),
        "mean_a": float(a.mean()),
        "mean_b": float(b.mean()),
        "n_a": int(len(a)),
        "n_b": int(len(b)),
    }


def anova_markdown(table: pd.DataFrame, title: str) -> str:
    lines = [f"**{title}**", "", "| effect | df | F | p | eta^2 |", "|---|---|---|---|---|"]
    for name, r in table.iterrows():
        if name == "Residual":
            lines.append(f"| Residual | {r['df']:.0f} | | | |")
            continue
        p = "<0.001" if cell(r, "p") < 0.001 else f"{r['p']:.3f}"
        lines.append(f"| {name} | {r['df']:.0f} | {r['F']:.2f} | {p} | {r['eta_sq']:.2f} |")
    return "\n".join(lines) + "\n"


__all__ = [
    "NotEstimable",
    "anova_markdown",
    "cld_from_tukey",
    "collect_warnings",
    "compact_letters",
    "tukey_hsd",
    "two_way_anova",
    "welch",
    "itertools",
]
