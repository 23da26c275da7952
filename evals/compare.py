"""Two runs side by side (``cooplab compare A B``, :func:`cooplab.compare`): from the round they
share on, how their per-round curves go, the first round where they differ, and the difference in
every outcome of their summaries, with a 95% interval when the outcome has replicates.

This module computes from what it is handed (two summaries, two per-round tables, the round the
runs share): the caller reads the run folders and works out the shared round from their fork
records (:func:`cooplab.runs.fork.common_round`).

- **Curves**: per round, the mean over the societies of each chosen column of the per-round table
  (default: the first four numeric ones), drawn on a figure of its own canvas (:mod:`cooplab.evals.canvas`).
- **First difference**: the first round whose rows (society by society) differ in any column; None
  when the tables agree on every round both have.
- **Outcomes**: every summary field with a ``mean`` (and, where kept, its per-replicate ``values``)
  and every plain number a task reports; difference B - A. With two or more values on each side,
  the interval is a paired t interval when the runs share their start (a fork and its parent, two
  forks of one run: society i of one is society i of the other) and the values pair up, else
  Welch's interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence, TypeGuard, cast

import numpy as np
import pandas as pd

from cooplab.evals.typed import as_frame, as_series, column, numeric

#: summary fields that describe the run, not its outcome
NOT_OUTCOMES = {"version", "wall_seconds", "seed", "replicates", "n_agents", "task", "agents", "status", "message"}
#: columns of a per-round table that say which row it is
KEY_COLUMNS = ("condition", "replicate", "society", "round")


@dataclass
class Side:
    """One run as compared: a label, its summary and its per-round table (None: it writes none)."""

    label: str
    summary: Mapping[str, Any]
    rounds: pd.DataFrame | None = None


@dataclass
class Comparison:
    """The comparison of run ``a`` with run ``b`` (see the module docstring)."""

    a: str
    b: str
    common_round: int
    first_difference: int | None
    outcomes: list[dict[str, Any]]
    curves: pd.DataFrame = field(repr=False)
    columns: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: everything but the curves' rows (the curves as {column: {run: [[round, mean], ...]}})."""
        curves: dict[str, dict[str, list]] = {}
        for key, g in self.curves.groupby(["column", "run"], sort=False) if len(self.curves) else []:
            col, run = cast("tuple[str, str]", key)  # grouped by two columns: a (column, run) pair
            curves.setdefault(col, {})[run] = [[int(r), _num(m)] for r, m in zip(g["round"], g["mean"], strict=False)]
        return {
            "a": self.a,
            "b": self.b,
            "common_round": self.common_round,
            "first_difference": self.first_difference,
            "outcomes": [{k: _num(v) for k, v in o.items()} for o in self.outcomes],
            "curves": curves,
        }

    def figure(self):
        """The curves of both runs, one panel per column, the shared rounds shaded (a Figure on its own canvas)."""
        return figure(self)


def _num(v: Any) -> Any:
    if isinstance(v, (float, np.floating)):
        return None if not math.isfinite(float(v)) else float(v)
    if isinstance(v, np.integer):
        return int(v)
    return v


def _numeric(v: Any) -> TypeGuard[int | float | np.integer | np.floating]:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def outcomes(a: Mapping[str, Any], b: Mapping[str, Any], *, paired: bool) -> list[dict[str, Any]]:
    """The difference B - A of every outcome both summaries report (see the module docstring)."""
    rows = []
    for name in a:
        if name in NOT_OUTCOMES or name not in b:
            continue
        va, vb = a[name], b[name]
        if (
            isinstance(va, Mapping)
            and isinstance(vb, Mapping)
            and _numeric(va.get("mean"))
            and _numeric(vb.get("mean"))
        ):
            xa, xb = _values(va), _values(vb)
            rows.append(_difference(name, float(va["mean"]), float(vb["mean"]), xa, xb, paired=paired))
        elif _numeric(va) and _numeric(vb):
            rows.append(_difference(name, float(va), float(vb), None, None, paired=paired))
    return rows


def _values(v: Mapping[str, Any]) -> np.ndarray | None:
    vals = v.get("values")
    if not isinstance(vals, list) or not vals or not all(_numeric(x) for x in vals):
        return None
    arr = np.asarray(vals, dtype=float)
    return arr if np.isfinite(arr).all() else None


def _difference(
    name: str, ma: float, mb: float, xa: np.ndarray | None, xb: np.ndarray | None, *, paired: bool
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "outcome": name,
        "a": ma,
        "b": mb,
        "difference": mb - ma,
        "low": None,
        "high": None,
        "n_a": None,
        "n_b": None,
        "interval": None,
    }
    if xa is None or xb is None:
        return row
    row.update(n_a=len(xa), n_b=len(xb))
    if len(xa) < 2 or len(xb) < 2:
        return row
    try:
        from scipy import stats
    except ImportError:  # the light core: the difference without its interval
        row["interval"] = "not computed: it needs scipy (pip install 'cooplab[analysis]')"
        return row
    if paired and len(xa) == len(xb):
        d = xb - xa
        se = d.std(ddof=1) / math.sqrt(len(d))
        dof = len(d) - 1
        how = "paired t, 95%"
        centre = float(d.mean())
    else:
        va, vb = xa.var(ddof=1) / len(xa), xb.var(ddof=1) / len(xb)
        se = math.sqrt(va + vb)
        dof = (va + vb) ** 2 / (va**2 / (len(xa) - 1) + vb**2 / (len(xb) - 1)) if va + vb > 0 else 1.0
        how = "Welch, 95%"
        centre = float(xb.mean() - xa.mean())
    half = float(stats.t.ppf(0.975, dof)) * se if se > 0 else 0.0
    row.update(low=centre - half, high=centre + half, interval=how)
    return row


def _key_columns(df: pd.DataFrame) -> list[str]:
    return [c for c in KEY_COLUMNS if c in df.columns]


def value_columns(df: pd.DataFrame | None) -> list[str]:
    """The numeric columns of a per-round table that are values (not the row's keys)."""
    if df is None:
        return []
    return [
        c
        for c in df.columns
        if c not in KEY_COLUMNS and pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])
    ]


def first_difference(a: pd.DataFrame | None, b: pd.DataFrame | None) -> int | None:
    """The first round in which the per-round tables differ (a row there in one and not the other,
    or a value), None when they agree on every round both reach."""
    if a is None or b is None or "round" not in a.columns or "round" not in b.columns:
        return None
    keys = _key_columns(a)
    cols = [c for c in value_columns(a) if c in b.columns]
    last = int(min(column(a, "round").max(), column(b, "round").max())) if len(a) and len(b) else 0
    # the rounds either table has (never every number up to the last: a table from a run folder may name round 10**12)
    present = numeric(pd.concat([column(a, "round"), column(b, "round")], ignore_index=True)).dropna()
    for r in sorted({int(x) for x in present if 1 <= x <= last}):
        ra = as_frame(a[a["round"] == r]).sort_values(keys).reset_index(drop=True)
        rb = as_frame(b[b["round"] == r]).sort_values(keys).reset_index(drop=True)
        if len(ra) != len(rb) or not ra[keys].equals(rb[keys]):
            return r
        for c in cols:
            x, y = ra[c].to_numpy(dtype=float), rb[c].to_numpy(dtype=float)
            if not np.array_equal(x, y, equal_nan=True):
                return r
    return None


def curves(sides: Sequence[Side], columns: Sequence[str]) -> pd.DataFrame:
    """Long table (run, column, round, mean over the societies) of ``columns`` of each side's table."""
    frames = []
    for side in sides:
        df = side.rounds
        if df is None or "round" not in df.columns or not len(df):
            continue
        for col in columns:
            if col in df.columns:
                m = as_series(df.groupby("round", sort=True)[col].mean())
                frames.append(
                    pd.DataFrame(
                        {
                            "run": side.label,
                            "column": col,
                            "round": m.index.astype(int),
                            "mean": m.to_numpy(dtype=float),
                        }
                    )
                )
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["run", "column", "round", "mean"])


def compare(
    a: Side, b: Side, *, common_round: int = 0, columns: Sequence[str] | None = None, paired: bool | None = None
) -> Comparison:
    """Compare two runs (see the module docstring). ``columns``: the per-round columns to draw
    (default: the first four numeric ones both tables have); ``paired``: whether their replicates
    pair up (default: when they share rounds, ``common_round`` > 0)."""
    both = [c for c in value_columns(a.rounds) if b.rounds is not None and c in b.rounds.columns]
    cols = [c for c in (columns or both[:4]) if c in both]
    pair = common_round != 0 if paired is None else paired
    la, lb = (a.label, b.label) if a.label != b.label else (f"A: {a.label}", f"B: {b.label}")
    return Comparison(
        a=la,
        b=lb,
        common_round=common_round,
        first_difference=first_difference(a.rounds, b.rounds),
        outcomes=outcomes(a.summary, b.summary, paired=pair),
        curves=curves([Side(la, a.summary, a.rounds), Side(lb, b.summary, b.rounds)], cols),
        columns=cols,
    )


def figure(cmp: Comparison):
    """The curves of a :class:`Comparison` (see :meth:`Comparison.figure`)."""
    from cooplab.evals import canvas

    cols = cmp.columns or ["(no per-round table)"]
    fig, axes = canvas.subplots(1, len(cols), figsize=(3.6 * len(cols), 3.2), squeeze=False, constrained_layout=True)
    for ax, col in zip(axes[0], cols, strict=False):
        for run, style in ((cmp.a, "-"), (cmp.b, "--")):
            g = (
                cmp.curves[(cmp.curves["column"] == col) & (cmp.curves["run"] == run)]
                if len(cmp.curves)
                else cmp.curves
            )
            if len(g):
                ax.plot(g["round"], g["mean"], style, marker="o", ms=3, label=run)
        if cmp.common_round > 0:
            ax.axvspan(
                0.5, cmp.common_round + 0.5, color="0.9", zorder=0, label=f"shared (rounds 1..{cmp.common_round})"
            )
        if cmp.first_difference is not None:
            ax.axvline(
                cmp.first_difference,
                color="tab:red",
                lw=0.8,
                ls=":",
                label=f"first difference (round {cmp.first_difference})",
            )
        ax.set_title(col)
        ax.set_xlabel("round")
    axes[0][0].legend(fontsize=7)
    return fig


__all__ = ["Comparison", "Side", "compare", "curves", "figure", "first_difference", "outcomes", "value_columns"]
