"""Figures of a mixed society and of an invasion, on canvases of their own (:mod:`cooplab.evals.canvas`).

- :func:`by_model_figure`: one bar panel per outcome, one bar per model;
- :func:`recovery_figure`: a series around the event round K, with the pre-event level, the
  band it must come back into, and (optionally) the unperturbed run's series beside it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from cooplab.evals.canvas import figure
from cooplab.evals.text import model_display_name


def by_model_figure(
    rows: Sequence[Mapping[str, Any]], outcomes: Sequence[tuple[str, str]], title: str, path: Path | None = None
):
    """Bars of ``outcomes`` ((key, label) pairs of each row) per model; saved to ``path`` when given."""
    fig = figure(figsize=(3.0 * len(outcomes), 3.2), constrained_layout=True)
    axes = fig.subplots(1, len(outcomes), squeeze=False)[0]
    names = [model_display_name(r["model"]) for r in rows]
    colors = [f"C{i}" for i in range(len(rows))]
    for ax, (key, label) in zip(axes, outcomes, strict=False):
        values = [np.nan if r.get(key) is None else float(r[key]) for r in rows]
        ax.bar(range(len(rows)), values, color=colors, label=label)
        ax.set_xticks(range(len(rows)), names, rotation=15, fontsize=8)
        ax.set_title(label, fontsize=9)
    fig.suptitle(title, fontsize=10)
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110)
    return fig


def recovery_figure(
    series: Mapping[str, ArrayLike],
    K: int,
    rec: Mapping[str, Any],
    ylabel: str,
    title: str,
    path: Path | None = None,
):
    """Each named series by round (the first is the perturbed one the figures ``rec`` were taken
    of), the event round K, the pre-event level and the band; saved to ``path`` when given."""
    fig = figure(figsize=(6.4, 3.4), constrained_layout=True)
    ax = fig.subplots()
    for i, (name, y) in enumerate(series.items()):
        y = np.asarray(y, dtype=float)
        ax.plot(np.arange(1, len(y) + 1), y, marker="o", ms=3, color=f"C{i}", label=name, ls="-" if i == 0 else "--")
    ax.axvline(K, color="k", lw=1, ls=":", label=f"event, round {K}")
    level = rec.get("pre_level")
    if level is not None:
        tol = rec["band"] * abs(level) if level != 0 else rec["band"]
        lo, hi = (level - tol, level) if rec.get("direction", "up") == "up" else (level, level + tol)
        ax.axhline(level, color="grey", lw=1, label="level before the event")
        side = "below" if rec.get("direction", "up") == "up" else "above"
        ax.axhspan(lo, hi, color="grey", alpha=0.15, label=f"band ({rec['band']:.0%} {side} the level)")
        r = rec.get("rounds_to_recover")
        if rec.get("recovered") and r:
            ax.axvline(K + r, color="C2", lw=1, label=f"back in the band, round {K + r}")
    ax.set_xlabel("round")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="best")
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110)
    return fig
