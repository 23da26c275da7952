"""Figures of the CPR society: one run's dynamics (stock, efforts, norms) and the plots of the ABM validation (Figs.
2-4, run by :mod:`.validation`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cooplab.evals.canvas import Figure, subplots
from cooplab.evals.figcache import draw_or_copy, figure_key
from cooplab.evals.text import mean_sem_text
from cooplab.evals.typed import as_frame, column, groups


def _band(ax, x, mean, half, label, color=None, ls="-", bounds=(-np.inf, np.inf)):
    """A mean line and its band (``mean ± half``), the band clipped to ``bounds`` (a share stays in [0, 1])."""
    line = ax.plot(x, mean, ls=ls, color=color, label=label, lw=1.8)[0]
    lo, hi = bounds
    ax.fill_between(
        x, np.clip(mean - half, lo, hi), np.clip(mean + half, lo, hi), color=line.get_color(), alpha=0.18, lw=0
    )
    return line


def _band_legend(ax, lines, band_label: str, **kw) -> None:
    """A legend naming each line and saying what its shaded band is."""
    from matplotlib.patches import Patch

    handles = list(lines) + [Patch(facecolor="grey", alpha=0.3, label=band_label)]
    ax.legend(handles=handles, fontsize=8, **kw)


def timeseries_stats(rounds: pd.DataFrame, value: str, by: list[str] | None = None) -> pd.DataFrame:
    """Mean and 95% CI (1.96 s.e.m.) of ``value`` over the societies still running at each round."""
    keys = (by or []) + ["round"]
    g = rounds.groupby(keys)[value]
    out = g.agg(["mean", "std", "count"]).reset_index()
    out["ci95"] = 1.96 * out["std"].fillna(0) / np.sqrt(out["count"].clip(lower=1))
    return out


def survival_curve(Ts: np.ndarray, T: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Share of societies still running after each round t = 0..T, with its 95% CI."""
    t = np.arange(0, T + 1)
    n = max(len(Ts), 1)
    surv = np.array([(np.asarray(Ts) > k).mean() if k < T else (np.asarray(Ts) >= T).mean() for k in t])
    ci = 1.96 * np.sqrt(surv * (1 - surv) / n)
    return t, surv, ci


#: the LLM run figure's norm panel: at most this many adopted norms, each cut to this many characters
MAX_NORMS_SHOWN, MAX_NORM_CHARS = 4, 240
#: per-agent effort lines get one legend entry each up to this many agents (then one entry for all)
MAX_AGENTS_NAMED = 10


def agent_efforts(decisions: pd.DataFrame | None) -> pd.DataFrame:
    """Each agent's effort per round (society, agent, round, effort) from an LLM run's decisions
    table: the harvest decisions as applied (a fallback's value where the model's answer failed).
    Rows whose effort is missing, malformed or outside [0, 1] are left out."""
    cols = ["society", "agent", "round", "effort"]
    if (
        decisions is None
        or not len(decisions)
        or not {"phase", "parsed", "society", "agent", "round"} <= set(decisions.columns)
    ):
        return pd.DataFrame(columns=cols)
    harvest = as_frame(decisions[decisions["phase"] == "harvest"])

    def effort(parsed: Any) -> float:
        if isinstance(parsed, str):
            try:
                parsed = json.loads(parsed)
            except ValueError:
                return np.nan
        value = parsed.get("effort") if isinstance(parsed, dict) else None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and 0.0 <= value <= 1.0:
            return float(value)
        return np.nan

    out = as_frame(harvest[["society", "agent", "round"]]).assign(effort=column(harvest, "parsed").map(effort))
    return as_frame(out.dropna(subset=["effort"]).reset_index(drop=True)[cols])


def norm_lines(norms: pd.DataFrame | None, society: int = 0, width: int = 70) -> list[str]:
    """The adopted norms of one society as wrapped text: each change of norm with its round (the
    last :data:`MAX_NORMS_SHOWN`, each cut to :data:`MAX_NORM_CHARS` characters, a cut ending in
    an ellipsis)."""
    import textwrap

    if norms is None or not len(norms) or not {"society", "round", "norm"} <= set(norms.columns):
        return ["No norm was adopted."]
    own = as_frame(norms[norms["society"] == society]).sort_values("round", kind="stable")
    changes: list[tuple[int, str]] = []
    for rnd, text in zip(own["round"], own["norm"], strict=False):
        text = " ".join(str(text).split()) if isinstance(text, str) else ""
        if text and (not changes or changes[-1][1] != text):
            changes.append((int(rnd), text))
    if not changes:
        return ["No norm was adopted."]
    lines = [f"({len(changes) - MAX_NORMS_SHOWN} earlier norms not shown)"] if len(changes) > MAX_NORMS_SHOWN else []
    for rnd, text in changes[-MAX_NORMS_SHOWN:]:
        cut = text if len(text) <= MAX_NORM_CHARS else text[: MAX_NORM_CHARS - 1].rstrip() + "\u2026"
        lines += textwrap.wrap(f"from round {rnd}: \u201c{cut}\u201d", width) + [""]
    return lines[:-1] if lines[-1] == "" else lines


def _effort_panel(ax, efforts: pd.DataFrame, society: int, societies: int) -> None:
    """One line per agent: the effort it applied in each round (one society)."""
    own = as_frame(efforts[efforts["society"] == society])
    agents = sorted(column(own, "agent").unique())
    named = len(agents) <= MAX_AGENTS_NAMED
    for a in agents:
        d = as_frame(own[own["agent"] == a]).sort_values("round")
        ax.plot(
            d["round"],
            d["effort"],
            marker="o",
            ms=3,
            lw=1.2 if named else 0.6,
            alpha=1.0 if named else 0.5,
            label=f"Fisher {int(a) + 1}" if named else None,
        )
    if not named:
        ax.plot([], [], color="grey", lw=0.6, label=f"one line per fisher ({len(agents)})")
    where = f" (society {society + 1} of {societies})" if societies > 1 else ""
    ax.set(
        title=f"Effort per agent{where}",
        xlabel="round t",
        ylabel="effort e_i (share of full effort)",
        ylim=(-0.03, 1.03),
    )
    if agents:
        ax.legend(fontsize=7, ncol=2 if len(agents) > 5 and named else 1, loc="best")
    else:
        ax.text(0.5, 0.5, "No harvest decision was recorded.", ha="center", va="center", transform=ax.transAxes)


def _norm_panel(ax, norms: pd.DataFrame | None, society: int, societies: int) -> None:
    """The adopted norm's text, wrapped and cut, in a panel without axes."""
    ax.axis("off")
    where = f" (society {society + 1} of {societies})" if societies > 1 else ""
    ax.set_title(f"Adopted group norm{where}")
    ax.text(
        0.0,
        1.0,
        "\n".join(norm_lines(norms, society)),
        va="top",
        ha="left",
        fontsize=8,
        family="serif",
        transform=ax.transAxes,
        wrap=False,
    )


#: the fields of summary.json the run figure shows (only these reach :func:`run_figure_of`, so the
#: digest of :func:`run_figure_key` covers everything drawn)
RUN_FIGURE_FIELDS = ("env", "population", "ablation", "survival_time", "efficiency", "replicates")


def run_figure_key(
    rounds: pd.DataFrame,
    summary: dict[str, Any],
    *,
    efforts: pd.DataFrame | None = None,
    norms: pd.DataFrame | None = None,
) -> str | None:
    """The SHA-256 of everything the run figure is drawn from (:func:`~cooplab.evals.figcache.figure_key`):
    the tables (their columns, types and every value), the summary's :data:`RUN_FIGURE_FIELDS`, the
    drawing code (this module, the canvas, the text of numbers) and the library versions; None when
    a table cannot be hashed."""
    import cooplab.evals.canvas as canvas
    import cooplab.evals.text as text

    return figure_key(
        "cpr run figure",
        (__file__, canvas.__file__, text.__file__),
        {k: summary.get(k) for k in RUN_FIGURE_FIELDS},
        (rounds, efforts, norms),
    )


def run_figure(
    rounds: pd.DataFrame,
    summary: dict[str, Any],
    outdir: Path,
    *,
    efforts: pd.DataFrame | None = None,
    norms: pd.DataFrame | None = None,
    cache: Any = None,
) -> Path:
    """``outdir/run.png``: :func:`run_figure_of` saved. With ``cache`` (the run's
    :class:`~cooplab.agents.cache.ResponseCache`), a figure drawn before from the same inputs
    (:func:`run_figure_key`: a rerun answered from the cache has the same tables, bit for bit) is
    copied from it instead of drawn, and a figure drawn is kept there."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    path = outdir / "run.png"
    summary = {k: summary[k] for k in RUN_FIGURE_FIELDS if k in summary}
    key = run_figure_key(rounds, summary, efforts=efforts, norms=norms) if cache is not None else None

    def draw(p: Path) -> None:
        run_figure_of(rounds, summary, efforts=efforts, norms=norms).savefig(p, dpi=110)

    return draw_or_copy(path, key, cache, draw)


def run_figure_of(
    rounds: pd.DataFrame,
    summary: dict[str, Any],
    *,
    efforts: pd.DataFrame | None = None,
    norms: pd.DataFrame | None = None,
) -> Figure:
    """Four panels for one run: survival curve, stock, effort and norm, compliance. Lines are
    means over the societies still running at each round; bands their 95% confidence interval.
    An LLM run (``efforts`` from :func:`agent_efforts`, ``norms``: its norms_adopted table) gets
    two more: each agent's effort per round and the adopted norm's text (the first society)."""
    from matplotlib.ticker import MaxNLocator

    llm = efforts is not None or norms is not None
    fig, grid = subplots(
        3 if llm else 2,
        2,
        figsize=(10, 10.6 if llm else 7.4),
        constrained_layout=True,
        gridspec_kw={"height_ratios": [1, 1, 0.9] if llm else [1, 1]},
    )
    axes = grid[:2]
    if llm:
        societies = int(summary.get("replicates") or 1)
        _effort_panel(grid[2, 0], efforts if efforts is not None else agent_efforts(None), 0, societies)
        _norm_panel(grid[2, 1], norms, 0, societies)
    Ts = np.asarray(summary["survival_time"]["values"])
    n = len(Ts)
    T = int(column(rounds, "round").max()) if len(rounds) else 1
    ci_label = "95% CI over societies" if n > 1 else "one society: no interval"
    t, s, ci = survival_curve(Ts, T)
    line = _band(axes[0, 0], t, s, ci, "share still running", bounds=(0.0, 1.0))
    axes[0, 0].set(title="Societies still running", xlabel="round t", ylabel="share of societies", ylim=(-0.02, 1.02))
    _band_legend(axes[0, 0], [line], "95% CI (binomial)" if n > 1 else ci_label, loc="lower left")
    panels = (
        (axes[0, 1], "R", "Resource stock R(t)", "stock R (fish)", "mean stock", (0.0, np.inf)),
        (
            axes[1, 0],
            "mean_effort",
            "Mean effort e(t) and group norm G(t)",
            "mean effort e",
            "mean effort",
            (0.0, np.inf),
        ),
        (
            axes[1, 1],
            "compliance",
            "Compliance: share with h_i <= norm",
            "share of agents",
            "mean compliance",
            (0.0, 1.0),
        ),
    )
    for ax, col, title, ylabel, label, bounds in panels:
        st = timeseries_stats(rounds, col)
        lines = [_band(ax, st["round"], st["mean"], st["ci95"], label, bounds=bounds)]
        ax.set(title=title, xlabel="round t", ylabel=ylabel)
        if col == "mean_effort" and column(rounds, "G").notna().any():
            ax2 = ax.twinx()
            stg = timeseries_stats(rounds.dropna(subset=["G"]), "G")
            lines.append(
                _band(
                    ax2,
                    stg["round"],
                    stg["mean"],
                    stg["ci95"],
                    "mean group norm G (right axis)",
                    color="tab:red",
                    ls="--",
                    bounds=bounds,
                )
            )
            ax2.set_ylabel("group norm G (fish)", color="tab:red")
        _band_legend(ax, lines, ci_label, loc="best")
    for ax in grid.flat:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.suptitle(
        f"CPR {summary.get('env')} / {summary.get('population')} / {summary.get('ablation')}: "
        f"T_s = {mean_sem_text(summary['survival_time'], 1)}, eta = {mean_sem_text(summary['efficiency'], 2)} "
        f"({'mean ± s.e.m., ' if summary['survival_time'].get('n', 0) > 1 else ''}n = {summary['survival_time']['n']})"
    )
    fig.supxlabel(
        "Lines: means over the societies still running at each round; bands: 95% confidence intervals "
        "(1.96 s.e.m.; for the running share, the binomial interval).",
        fontsize=8,
        color="dimgrey",
    )
    return fig


def fig2(ts: pd.DataFrame, surv: pd.DataFrame, off_round: int, path: Path) -> Path:
    """``path``: :func:`fig2_of` saved."""
    fig = fig2_of(ts, surv, off_round)
    fig.savefig(path, dpi=110)
    return path


def fig2_of(ts: pd.DataFrame, surv: pd.DataFrame, off_round: int) -> Figure:
    """Fig. 2 analog: punishment disabled at t = off_round vs kept, for each beta. Shares (running
    societies, compliance) keep their bands in [0, 1]; the legend names every line style, the
    bands and the dotted switch-off line."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator

    fig, axes = subplots(1, 3, figsize=(15, 4.4), constrained_layout=True)
    colors: dict[float, str] = {}
    share = (0.0, 1.0)
    for (beta, off), grp in groups(surv, ["beta", "punishment_off"]):
        c = colors.setdefault(beta, f"C{len(colors)}")
        ls = "--" if off else "-"
        lab = f"beta = {beta:g}, " + (f"off at t = {off_round}" if off else "always on")
        _band(axes[0], grp["round"], grp["share"], grp["ci95"], lab, color=c, ls=ls, bounds=share)
    axes[0].set(title="Societies still running", xlabel="round t", ylabel="share of societies")
    panels = (
        (axes[1], "R", "Resource stock R(t)", "stock R (fish)", (0.0, np.inf)),
        (axes[2], "compliance", "Cooperation: share with h_i <= G", "share of agents", share),
    )
    for ax, metric, title, ylabel, bounds in panels:
        for (beta, off), grp in groups(as_frame(ts[ts["metric"] == metric]), ["beta", "punishment_off"]):
            _band(
                ax,
                grp["round"],
                grp["mean"],
                grp["ci95"],
                None,
                color=colors.get(beta, "grey"),
                ls="--" if off else "-",
                bounds=bounds,
            )
        ax.set(title=title + " (running societies)", xlabel="round t", ylabel=ylabel)
    for ax in axes:
        ax.axvline(off_round, color="grey", lw=0.8, ls=":")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    handles, _ = axes[0].get_legend_handles_labels()
    handles += [
        Patch(facecolor="grey", alpha=0.3, label="95% CI over societies"),
        Line2D([], [], color="grey", lw=0.8, ls=":", label=f"t = {off_round}: punishment switched off"),
    ]
    axes[0].legend(handles=handles, fontsize=8)
    fig.suptitle("Punishment disabled at t = %d (dashed) vs kept (solid); mean and 95%% CI" % off_round)
    fig.supxlabel(
        "Colours as in the left legend (one per beta). Lines: the running share (left), and means over the societies "
        "still running (middle, right); bands: 95% confidence intervals over those societies.",
        fontsize=8,
        color="dimgrey",
    )
    return fig


def fig3(grid: pd.DataFrame, path: Path) -> Path:
    """Fig. 3 analog: mean survival time over beta x r."""
    piv = grid.pivot(index="r", columns="beta", values="survival_mean").sort_index(ascending=False)
    fig, ax = subplots(figsize=(8.5, 6), constrained_layout=True)
    im = ax.imshow(piv.values, aspect="auto", cmap="viridis", vmin=0, vmax=float(column(grid, "rounds").max()))
    ax.set_xticks(range(piv.shape[1]), [f"{b:g}" for b in piv.columns])
    ax.set_yticks(range(piv.shape[0]), [f"{r:.2f}" for r in piv.index])
    for i in range(piv.shape[0]):
        for j in range(piv.shape[1]):
            v = piv.values[i, j]
            ax.text(j, i, f"{v:.0f}", ha="center", va="center", fontsize=7, color="white" if v < 30 else "black")
    ax.set(
        xlabel="punishment strength beta", ylabel="growth rate r", title="Mean survival time T_s (100 runs per cell)"
    )
    fig.colorbar(im, ax=ax, label="T_s (rounds)")
    fig.savefig(path, dpi=110)
    return path


def fig4(bars: pd.DataFrame, path: Path) -> Path:
    """Fig. 4 analog: survival by population x environment, mean ± s.e.m."""
    pops = ["altruistic", "mixed", "selfish"]
    envs = ["harsh", "rich"]
    fig, ax = subplots(figsize=(7, 4.5), constrained_layout=True)
    w = 0.26
    for k, pop in enumerate(pops):
        sub = bars.set_index(["env", "population"])
        means = [sub.loc[(e, pop), "survival_mean"] for e in envs]
        sems = [sub.loc[(e, pop), "survival_sem"] for e in envs]
        ax.bar(np.arange(len(envs)) + (k - 1) * w, means, w, yerr=sems, capsize=4, label=pop)
    ax.set_xticks(range(len(envs)), [f"{e} (r = {bars[bars.env == e].r.iloc[0]:g})" for e in envs])
    ax.set(ylabel="survival time T_s (rounds)", title="Survival by population and environment (mean ± s.e.m.)")
    ax.legend()
    fig.savefig(path, dpi=110)
    return path
