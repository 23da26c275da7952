"""Figures of the games: a run's figure, and the bootstrap convergence figure of Appendix D (Fig. 1)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cooplab.tasks.games.metrics import METRIC_LABEL, bootstrap_convergence


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def run_figure(rounds: pd.DataFrame, convergence: pd.DataFrame, summary: Mapping[str, Any], path: Path) -> Path:
    """Left: the primary metric per round (mean over simulations, 95% band of the per-simulation
    values' mean), with the Nash and Pareto references. Right: the bootstrap convergence of the
    run's metric (mean absolute error against the number of simulations, +-1 s.d., 95th percentile)."""
    plt = _plt()
    game = summary["game"]
    m = summary["metric"]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 3.8))
    if len(rounds):
        g = rounds.groupby("round")["metric"]
        mean, sd, n = g.mean(), g.std(ddof=1).fillna(0.0), g.count()
        half = 1.96 * sd / np.sqrt(n)
        ax.plot(mean.index, mean.values, marker="o", color="tab:blue", label=f"{summary['players']} players")
        ax.fill_between(mean.index, mean - half, mean + half, color="tab:blue", alpha=0.2, lw=0)
    ax.axhline(m["nash"], color="tab:red", ls="--", lw=1, label=f"Nash ({m['nash']:g})")
    ax.axhline(m["pareto"], color="tab:green", ls="--", lw=1, label=f"Pareto ({m['pareto']:g})")
    ax.set_xlabel("round")
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel(f"mean {METRIC_LABEL[game]}")
    sizes = "+".join(str(k) for k in summary["group_sizes"])
    ax.set_title(f"{game}: {sizes} players, {summary['simulations']} simulations", fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    _convergence_panel(bx, convergence, "C0", f"{game}")
    bx.set_title("bootstrap convergence (App. D, 200 resamples)", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _convergence_panel(ax, cv: pd.DataFrame, color: str, label: str, column: str = "mae") -> None:
    if not len(cv):
        return
    ax.plot(cv["n"], cv[column], color=color, label=label)
    if column == "mae":
        ax.fill_between(cv["n"], np.maximum(cv["mae"] - cv["sd"], 0), cv["mae"] + cv["sd"], color=color, alpha=0.2, lw=0)
        ax.plot(cv["n"], cv["p95"], color=color, ls="--", lw=0.8)
    ax.set_xlabel("simulations used")
    ax.set_ylabel("mean absolute error" if column == "mae" else "MAE / s.d. of the full data")
    ax.grid(alpha=0.3)


def convergence_figure(per_game: Mapping[str, Any], path: Path, *, resamples: int = 200, seed: int = 0) -> pd.DataFrame:
    """Appendix D, Fig. 1: the error of each game's metric estimate against the number of
    simulations used, from ``resamples`` bootstrap samples of each game's per-simulation metric
    (``per_game``: game -> values, one per simulation). Left: the absolute error pooled over all
    games (mean, shaded +-1 s.d., dashed 95th percentile); right: per game, in units of the full
    data's s.d. Returns the per-game table (game, n, mae, sd, p95, mae_sd_units)."""
    plt = _plt()
    rng = np.random.default_rng(seed)
    tables, pooled = [], {}
    for game, values in per_game.items():
        cv = bootstrap_convergence(values, resamples=resamples, rng=rng, errors=True)
        for n, err in zip(cv["n"], cv["errors"]):
            pooled.setdefault(int(n), []).append(err)
        tables.append(cv.drop(columns=["errors"]).assign(game=game))
    table = pd.concat(tables, ignore_index=True)[["game", "n", "mae", "sd", "p95", "mae_sd_units"]] if tables else pd.DataFrame()
    agg = pd.DataFrame([{"n": n, "mae": float(np.concatenate(e).mean()), "sd": float(np.concatenate(e).std(ddof=1)),
                         "p95": float(np.percentile(np.concatenate(e), 95))} for n, e in sorted(pooled.items()) if len(e) == len(per_game)])
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 3.8))
    _convergence_panel(ax, agg, "black", "all games")
    ax.set_title(f"all games ({len(per_game)}): mean absolute error", fontsize=9)
    for k, (game, cv) in enumerate(table.groupby("game", sort=False)):
        if cv["mae_sd_units"].notna().any():
            _convergence_panel(bx, cv, f"C{k}", game, column="mae_sd_units")
    bx.set_title("per game, in units of the full-data s.d.", fontsize=9)
    bx.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return table
