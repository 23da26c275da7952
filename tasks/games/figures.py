"""Figures of the games: a run's figure, and the bootstrap convergence figure of Appendix D (Fig. 1)."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cooplab.evals.typed import as_frame, as_series, column
from cooplab.tasks.games.metrics import METRIC_LABEL, bootstrap_convergence


def run_figure_of(rounds: pd.DataFrame, convergence: pd.DataFrame, summary: Mapping[str, Any]):
    """Left: the primary metric per round (mean over simulations, with its 95% CI over the
    simulations), with the Nash and Pareto references. Right: the bootstrap convergence of the
    run's metric (mean absolute error against the number of simulations, ±1 s.d. over the
    resamples, 95th percentile). Every line and band has a legend entry."""
    from matplotlib.ticker import MaxNLocator

    from cooplab.evals.canvas import subplots

    game = summary["game"]
    m = summary["metric"]
    fig, (ax, bx) = subplots(1, 2, figsize=(10, 3.8))
    if len(rounds):
        g = rounds.groupby("round")["metric"]
        mean, sd, n = as_series(g.mean()), as_series(g.std(ddof=1)).fillna(0.0), as_series(g.count())
        half = 1.96 * sd / np.sqrt(n)
        ax.plot(
            mean.index,
            mean.values,
            marker="o",
            color="tab:blue",
            label=f"mean over simulations ({summary['players']} players)",
        )
        if int(n.max()) > 1:
            ax.fill_between(
                mean.index, mean - half, mean + half, color="tab:blue", alpha=0.2, lw=0, label="95% CI over simulations"
            )
    ax.axhline(m["nash"], color="tab:red", ls="--", lw=1, label=f"Nash ({m['nash']:g})")
    basis = m.get("pareto_basis")
    ax.axhline(
        m["pareto"],
        color="tab:green",
        ls="--",
        lw=1,
        label=f"Pareto ({m['pareto']:g}" + (f"; {basis})" if basis and basis != "derived" else ")"),
    )
    ax.set_xlabel("round")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel(f"mean {METRIC_LABEL[game]}")
    sizes = "+".join(str(k) for k in summary["group_sizes"])
    ax.set_title(f"{game}: {sizes} players, {summary['simulations']} simulations", fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    _convergence_panel(bx, convergence, "C0", "mean absolute error")
    if len(convergence):
        bx.legend(fontsize=7)
    bx.set_title("bootstrap convergence (App. D, 200 resamples)", fontsize=9)
    fig.tight_layout()
    return fig


def run_figure(rounds: pd.DataFrame, convergence: pd.DataFrame, summary: Mapping[str, Any], path: Path) -> Path:
    """``path``: :func:`run_figure_of` saved."""
    fig = run_figure_of(rounds, convergence, summary)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path


def _convergence_panel(ax, cv: pd.DataFrame, color: str, label: str, column: str = "mae") -> None:
    """The error of the metric's estimate against the simulations used: for ``mae``, with a band of
    ±1 s.d. and a dashed 95th percentile over the bootstrap resamples (each with its legend label)."""
    from matplotlib.ticker import MaxNLocator

    if not len(cv):
        return
    ax.plot(cv["n"], cv[column], color=color, label=label)
    if column == "mae":
        ax.fill_between(
            cv["n"],
            np.maximum(cv["mae"] - cv["sd"], 0),
            cv["mae"] + cv["sd"],
            color=color,
            alpha=0.2,
            lw=0,
            label="±1 s.d. over resamples",
        )
        ax.plot(cv["n"], cv["p95"], color=color, ls="--", lw=0.8, label="95th percentile over resamples")
    ax.set_xlabel("simulations used")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("mean absolute error" if column == "mae" else "MAE / s.d. of the full data")
    ax.grid(alpha=0.3)


def convergence_figure(per_game: Mapping[str, Any], path: Path, *, resamples: int = 200, seed: int = 0) -> pd.DataFrame:
    """Appendix D, Fig. 1: the error of each game's metric estimate against the number of
    simulations used, from ``resamples`` bootstrap samples of each game's per-simulation metric
    (``per_game``: game -> values, one per simulation). Left: the absolute error pooled over all
    games (mean, shaded +-1 s.d., dashed 95th percentile); right: per game, in units of the full
    data's s.d. Returns the per-game table (game, n, mae, sd, p95, mae_sd_units)."""
    rng = np.random.default_rng(seed)
    tables, pooled = [], {}
    for game, values in per_game.items():
        cv = bootstrap_convergence(values, resamples=resamples, rng=rng, errors=True)
        for n, err in zip(cv["n"], cv["errors"], strict=False):
            pooled.setdefault(int(n), []).append(err)
        tables.append(cv.drop(columns=["errors"]).assign(game=game))
    table = (
        as_frame(pd.concat(tables, ignore_index=True)[["game", "n", "mae", "sd", "p95", "mae_sd_units"]])
        if tables
        else pd.DataFrame()
    )
    agg = pd.DataFrame(
        [
            {
                "n": n,
                "mae": float(np.concatenate(e).mean()),
                "sd": float(np.concatenate(e).std(ddof=1)),
                "p95": float(np.percentile(np.concatenate(e), 95)),
            }
            for n, e in sorted(pooled.items())
            if len(e) == len(per_game)
        ]
    )
    from cooplab.evals.canvas import subplots

    fig, (ax, bx) = subplots(1, 2, figsize=(10, 3.8))
    _convergence_panel(ax, agg, "black", "all games: mean absolute error")
    if len(agg):
        ax.legend(fontsize=7)
    ax.set_title(f"all games ({len(per_game)}): mean absolute error", fontsize=9)
    for k, (game, cv) in enumerate(table.groupby("game", sort=False)):
        if column(cv, "mae_sd_units").notna().any():
            _convergence_panel(bx, cv, f"C{k}", str(game), column="mae_sd_units")
    bx.set_title("per game, in units of the full-data s.d.", fontsize=9)
    bx.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return table


# --- Figure 2: cooperative profiles side by side ---------------------------------------------------------
TITLES = {
    "weakest-link": "Weakest-Link",
    "cpr": "Common-Pool Resource",
    "cpr-sanction": "CPR + Sanction",
    "collective-risk": "Collective Risk",
    "o-ring": "O-Ring",
    "public-goods": "Public Goods",
}
GAME_ORDER = tuple(TITLES)
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "h", "<", ">", "p")  #: one per model within a family (then repeated)
SIZE_BASE, SIZE_STEP = (
    4.0,
    1.6,
)  #: marker diameter (points) = base + step x (log2 of the parameters - log2 of the smallest's)


class ModelInfoError(ValueError):
    """A profile's model has no row in the model info (one line)."""


def model_key(profile: Mapping[str, Any]) -> str:
    """The name a profile's model goes by in a models.csv: its model spec, or the reference players' kind."""
    return str(profile.get("model") or profile.get("players") or "")


def encoding(
    profiles: Sequence[Mapping[str, Any]], labels: Sequence[str], info: Mapping[str, Mapping[str, Any]] | None = None
) -> dict[str, Any]:
    """How Figure 2 draws each profile. Without ``info`` every profile gets its own colour, a circle
    and one size, in the order given. With ``info`` (model -> {"family", "size_b"}: a models.csv) as
    in the paper: profiles sorted by family and size, colour by family, marker shape by model within
    its family, marker size growing with log2 of the parameter count; ``legend`` lists what each
    colour, shape and size means. Returns ``points`` (one per profile, in drawing order: index into
    ``profiles``, label, model, family, size_b, color, marker, size) and ``legend`` (kind, text,
    color, marker, size)."""
    import matplotlib

    def palette(n: int):
        return matplotlib.colormaps["tab10" if n <= 10 else "tab20"]

    if info is None:
        cmap = palette(len(profiles))
        points = [
            {
                "index": i,
                "label": labels[i],
                "model": model_key(p),
                "family": None,
                "size_b": None,
                "color": cmap(i % cmap.N),
                "marker": "o",
                "size": 7.0,
            }
            for i, p in enumerate(profiles)
        ]
        return {
            "points": points,
            "legend": [("colour", "one colour per profile (named on the x axis)", "0.3", "o", 7.0)],
        }
    rows = []
    for i, p in enumerate(profiles):
        key = model_key(p)
        if key not in info:
            raise ModelInfoError(f"model {key!r} is not in --model-info; add a row model,family,size_b,thinking for it")
        rows.append((str(info[key]["family"]), float(info[key]["size_b"]), labels[i], i, key))
    rows.sort()
    families = sorted({r[0] for r in rows})
    cmap = palette(len(families))
    color = {f: cmap(k % cmap.N) for k, f in enumerate(families)}
    marker: dict[str, str] = {}
    for fam in families:
        models = sorted({(r[1], r[4]) for r in rows if r[0] == fam})
        marker.update({m: MARKERS[k % len(MARKERS)] for k, (_, m) in enumerate(models)})
    smallest = min(r[1] for r in rows)

    def size(size_b: float) -> float:
        return SIZE_BASE + SIZE_STEP * (np.log2(size_b) - np.log2(smallest))

    points = [
        {
            "index": i,
            "label": lab,
            "model": key,
            "family": fam,
            "size_b": sz,
            "color": color[fam],
            "marker": marker[key],
            "size": float(size(sz)),
        }
        for fam, sz, lab, i, key in rows
    ]
    legend: list[tuple[str, str, Any, str, float]] = [
        ("family", f"family {f} (colour)", color[f], "s", 8.0) for f in families
    ]
    seen: set[str] = set()
    for pt in points:
        if pt["model"] not in seen:
            seen.add(pt["model"])
            legend.append(("model", f"{pt['model']} ({pt['size_b']:g}B; shape)", pt["color"], pt["marker"], 7.0))
    sizes = sorted({r[1] for r in rows})
    for sz in dict.fromkeys([sizes[0], sizes[len(sizes) // 2], sizes[-1]]):
        legend.append(("size", f"{sz:g}B parameters (size: log2 of the parameter count)", "0.55", "o", float(size(sz))))
    return {"points": points, "legend": legend}


def _reference_lines(entries: Sequence[Mapping[str, Any] | None]) -> list[tuple[float, float, str]]:
    """The distinct (nash, pareto, basis) references of one game's entries, in order of appearance."""
    out: list[tuple[float, float, str]] = []
    for e in entries:
        if e is None:
            continue
        m = e["metric"]
        ref = (m.get("nash"), m.get("pareto"), m.get("pareto_basis") or "derived")
        if None not in ref[:2] and ref not in out:
            out.append(ref)
    return out


def reference_caption(profiles: Sequence[Mapping[str, Any]]) -> str:
    """The Pareto values that rest on a choice (Collective Risk, O-Ring: derived by a stated rule or
    set), with their basis; every panel's legend has all the values."""
    parts = []
    for game in GAME_ORDER:
        refs = [r for r in _reference_lines([p["games"].get(game) for p in profiles]) if r[2] != "derived"]
        if refs:
            parts.append(f"{TITLES[game]} " + " / ".join(f"{q:g} ({b})" for _, q, b in refs))
    return ("Pareto references: " + "; ".join(parts)) if parts else ""


def profile_figure(
    profiles: Sequence[Mapping[str, Any]],
    path: Path,
    labels: Sequence[str] | None = None,
    info: Mapping[str, Mapping[str, Any]] | None = None,
) -> Path:
    """``path``: :func:`profile_figure_of` saved."""
    fig = profile_figure_of(profiles, labels, info)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    return path


def profile_figure_of(
    profiles: Sequence[Mapping[str, Any]],
    labels: Sequence[str] | None = None,
    info: Mapping[str, Mapping[str, Any]] | None = None,
):
    """The paper's Figure 2 for one or more profiles: one panel per game, the profiles along the x
    axis, the primary metric on the y axis with its 95% interval, the Nash (red) and Pareto (green)
    references as dashed lines (labelled with their values; the caption lists them) and the range
    between them shaded. Points follow :func:`encoding` (with ``info``: colour by family, shape by
    model, size by log2 of the parameters). A game left out of a profile for its fallbacks is drawn
    as a hollow grey point."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    games = [g for g in GAME_ORDER if any(g in p["games"] for p in profiles)]
    labels = (
        list(labels)
        if labels is not None
        else [str(p.get("label", f"profile {i + 1}")) for i, p in enumerate(profiles)]
    )
    enc = encoding(profiles, labels, info)
    points = enc["points"]
    ncol = min(len(games), 3 if len(profiles) <= 8 else 2)  # many profiles: wider panels, two to a row
    nrow = math.ceil(len(games) / ncol)
    width = min(40.0, max(9.0, ncol * (1.2 + 0.45 * len(profiles))))
    legend_cols = max(2, min(6, int(width // 4.5)))
    legend_rows = math.ceil((len(enc["legend"]) + 1) / legend_cols) if info is not None else 1
    from cooplab.evals.canvas import subplots

    fig, axes = subplots(nrow, ncol, figsize=(width, 3.3 * nrow + 0.22 * legend_rows + 0.8), squeeze=False)
    excluded_any = missing_any = False
    for k, game in enumerate(games):
        ax = axes[k // ncol][k % ncol]
        entries = [profiles[pt["index"]]["games"].get(game) for pt in points]
        refs = _reference_lines(entries)
        first = next(e for e in entries if e is not None)
        for r, (nash, pareto, basis) in enumerate(refs):
            ls = ("--", ":", "-.")[r % 3]
            ax.axhspan(
                min(nash, pareto),
                max(nash, pareto),
                color="0.92",
                zorder=0,
                label="between Nash and Pareto" if r == 0 else None,
            )
            ax.axhline(nash, color="tab:red", ls=ls, lw=1.2, label=f"Nash {nash:g}")
            ax.axhline(
                pareto,
                color="tab:green",
                ls=ls,
                lw=1.2,
                label=f"Pareto {pareto:g}" + (f" ({basis})" if basis != "derived" else ""),
            )
        for x, (pt, e) in enumerate(zip(points, entries, strict=False)):
            if e is None or e["metric"].get("mean") is None:
                ax.plot([x], [0], marker="x", color="0.6", ls="none")
                missing_any = True
                continue
            m = e["metric"]
            ci = m.get("ci95")
            yerr = None if not ci else [[m["mean"] - ci[0]], [ci[1] - m["mean"]]]
            out = e.get("included", True) is False
            excluded_any |= out
            ax.errorbar(
                [x],
                [m["mean"]],
                yerr=yerr,
                fmt=pt["marker"],
                ms=pt["size"],
                capsize=4,
                color="0.6" if out else pt["color"],
                mfc="none" if out else pt["color"],
            )
        ax.set_xticks(range(len(points)))
        many = len(points) > 1
        ax.set_xticklabels(
            [pt["label"] for pt in points], rotation=30 if many else 0, ha="right" if many else "center", fontsize=8
        )
        ax.set_xlim(-0.6, len(points) - 0.4)
        ax.set_title(TITLES[game], fontsize=10)
        ax.set_ylabel(first["metric"].get("label", "metric"), fontsize=9)
        hi = max([v for r in refs for v in r[:2]] + [10.0])
        ax.set_ylim(-0.05 * hi - 0.3, 1.05 * hi + 0.3)
        ax.legend(fontsize=7, loc="best")
    for k in range(len(games), nrow * ncol):
        axes[k // ncol][k % ncol].axis("off")
    handles = [
        Patch(color=c, label=text)
        if kind == "family"
        else Line2D([], [], ls="none", marker=mk, ms=sz, color=c, label=text)
        for kind, text, c, mk, sz in enc["legend"]
    ]
    if excluded_any:
        handles.append(
            Line2D(
                [],
                [],
                ls="none",
                marker="o",
                ms=7,
                color="0.6",
                mfc="none",
                label="hollow grey: game left out of that profile (fallback share above max_fallback)",
            )
        )
    if missing_any:
        handles.append(
            Line2D(
                [],
                [],
                ls="none",
                marker="x",
                ms=7,
                color="0.6",
                label="grey x at 0: no result of that game in that profile",
            )
        )
    if info is not None or excluded_any or missing_any:
        fig.legend(handles=handles, loc="lower center", ncol=legend_cols, fontsize=7, frameon=False)
    caption = "\n".join(
        [
            "Cooperative profile: primary metric per game (point: mean over simulations; bar: 95% CI)",
            *textwrap.wrap(reference_caption(profiles), 150),
        ]
    )
    fig.suptitle(caption, fontsize=8)
    bottom = (
        (0.22 * legend_rows + 0.3) / fig.get_figheight() if (info is not None or excluded_any or missing_any) else 0.0
    )
    fig.tight_layout(rect=(0, bottom, 1, 0.94))
    return fig
