"""Figures of ``cooplab calibrate TASK`` (evals/calibration.py): where a claim holds over two
parameters, and the first-order sensitivity of every output."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from cooplab.evals.canvas import Figure, subplots
from cooplab.evals.typed import as_frame


def claim_map_figure(
    df: pd.DataFrame,
    claim: str,
    x: str,
    y: str,
    xlog: bool,
    ylog: bool,
    path: Path,
    *,
    unit: str = "rounds of T_s",
    label: str | None = None,
) -> Path:
    """Where claim ``claim`` holds over the two parameters ``x`` and ``y``: one point per sample,
    filled when the claim holds, its colour the claim's effect size (in ``unit``)."""
    label = label or f"({claim})"
    held = df[f"holds_{claim}"].astype(bool).to_numpy()
    eff = df[f"effect_{claim}"].to_numpy(dtype=float)
    fig, ax = subplots(figsize=(6.2, 5), constrained_layout=True)
    lim = float(np.nanmax(np.abs(eff))) if np.isfinite(eff).any() and np.nanmax(np.abs(eff)) > 0 else 1.0
    sc = ax.scatter(
        df[x][~held],
        df[y][~held],
        c=eff[~held],
        cmap="coolwarm_r",
        vmin=-lim,
        vmax=lim,
        marker="o",
        s=36,
        edgecolors="0.4",
        linewidths=0.6,
        label=f"does not hold ({(~held).sum()})",
    )
    ax.scatter(
        df[x][held],
        df[y][held],
        c=eff[held],
        cmap="coolwarm_r",
        vmin=-lim,
        vmax=lim,
        marker="*",
        s=140,
        edgecolors="k",
        linewidths=0.8,
        label=f"holds ({held.sum()})",
    )
    if xlog:
        ax.set_xscale("log")
    if ylog:
        ax.set_yscale("log")
    ax.set(xlabel=x, ylabel=y, title=f"claim {label} over its two most influential parameters")
    ax.legend(loc="best", fontsize=8)
    fig.colorbar(sc, ax=ax, label=f"effect size of {label}" + (f" ({unit})" if unit else ""))
    fig.savefig(path, dpi=110)
    return path


def sensitivity_figure(sens: pd.DataFrame, path: Path) -> Path:
    """``path``: :func:`sensitivity_figure_of` saved."""
    fig = sensitivity_figure_of(sens)
    fig.savefig(path, dpi=110)
    return path


#: what the sensitivity figure's bars, error bars and line are
SENSITIVITY_CAPTION = (
    "Bars: first-order sensitivity index S1 (RBD-FAST) of each output to each parameter over the calibration's "
    "samples; error bars: the 95% confidence half-width of S1 from 100 bootstrap resamples (SALib); "
    "grey line: S1 = 0. A parameter without a bar has no estimate (see the panel's note)."
)


def sensitivity_figure_of(sens: pd.DataFrame) -> Figure:
    """First-order sensitivity (RBD-FAST S1 with its confidence) of every output to every parameter."""
    import textwrap

    outputs = list(dict.fromkeys(sens["output"]))
    cols = 3
    rows = int(np.ceil(len(outputs) / cols))
    fig, axes = subplots(
        rows,
        cols,
        figsize=(5.2 * cols, 0.28 * sens["parameter"].nunique() * rows + 1.5 * rows),
        constrained_layout=True,
        squeeze=False,
    )
    for ax, o in zip(axes.flat, outputs, strict=False):
        sub = as_frame(sens[sens["output"] == o]).sort_values("S1", na_position="first")
        ax.barh(
            sub["parameter"], sub["S1"].fillna(0), xerr=sub["S1_conf"].fillna(0), color="tab:blue", alpha=0.8, capsize=2
        )
        ax.axvline(0, color="0.5", lw=0.8)
        note = sub["note"].dropna().iloc[0] if "note" in sub and bool(sub["note"].astype(bool).any()) else ""
        ax.set_title(o + (f"\n({note})" if note else ""), fontsize=9)
        ax.tick_params(labelsize=8)
        ax.set_xlabel("S1 (RBD-FAST)", fontsize=8)
    for ax in list(axes.flat)[len(outputs) :]:
        ax.axis("off")
    fig.supxlabel(
        "\n".join(textwrap.wrap(SENSITIVITY_CAPTION, int(15 * fig.get_figwidth()))), fontsize=8, color="dimgrey"
    )
    return fig
