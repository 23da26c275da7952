"""Figs. 9 and 10 analogs: strategy shares per iteration, one panel per punishment setting.

Rule-based agents: the paper's six conditions (2 combinations x 3 punishment settings) run as
one graph invocation over ``replicates`` replicates each; the mean share per iteration with a
band of +-1 s.d. and the 5-95 % range over replicates. An LLM run (``--llm-run DIR``) is drawn
from its ``strategy_counts`` table. PNG + CSV, and ``claims.md`` comparing with the paper.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd
from langgraph.checkpoint.memory import InMemorySaver

from cooplab.evals.typed import as_frame, column
from cooplab.graphs import rundir
from cooplab.graphs.checkpoint_serde import CheckpointSerializer
from cooplab.tasks.diners import model as dm
from cooplab.tasks.diners.metrics import strategy_counts
from cooplab.tasks.diners.society import paper_conditions, run_diners

COLORS = {"P": "tab:blue", "R1": "tab:red", "E": "tab:green", "M": "tab:purple", "D": "black"}
PK_ORDER = ("unstated", "3:1", "6:1")
PK_TITLE = {"unstated": "(a) p, k unstated (p = k = 1)", "3:1": "(b) p:k = 3:1", "6:1": "(c) p:k = 6:1"}


def share_stats(counts: pd.DataFrame, by: list[str] | None = None) -> pd.DataFrame:
    """Long table: (by..., iteration, strategy) -> mean, sd, q05, q95 of the share over replicates."""
    by = by or []
    names = list(dm.STRATEGIES)
    n = counts[names].sum(axis=1)
    shares = counts[names].div(n, axis=0)
    shares[by + ["iteration"]] = counts[by + ["iteration"]]
    long = shares.melt(id_vars=by + ["iteration"], value_vars=names, var_name="strategy", value_name="share")
    g = long.groupby(by + ["iteration", "strategy"], sort=False)["share"]
    out = g.agg(mean="mean", sd="std", n="count")
    out.insert(2, "q05", g.quantile(0.05))  # vectorized (a lambda per group took seconds per call)
    out.insert(3, "q95", g.quantile(0.95))
    out = as_frame(out[["mean", "sd", "q05", "q95", "n"]]).reset_index()
    out["sd"] = out["sd"].fillna(0.0)
    return out


def _panel(ax, st: pd.DataFrame, title: str, bands: bool = True) -> bool:
    """One panel: the mean share of each strategy per iteration; with more than one replicate, a
    band of ±1 s.d. and dotted 5th and 95th percentiles over the replicates. Returns whether it
    drew bands. Iterations are whole numbers on the x axis."""
    from matplotlib.ticker import MaxNLocator

    drew = False
    for name in dm.STRATEGIES:
        d = as_frame(st[st["strategy"] == name]).sort_values("iteration")
        if not len(d) or (column(d, "mean").max() == 0 and column(d, "q95").max() == 0):
            continue
        x = d["iteration"].to_numpy()
        ax.plot(x, 100 * d["mean"], marker="o", ms=3, color=COLORS[name], label=f"{name} ({dm.STRATEGY_NAMES[name]})")
        if bands and column(d, "n").max() > 1:
            drew = True
            ax.fill_between(
                x,
                100 * np.clip(d["mean"] - d["sd"], 0, 1),
                100 * np.clip(d["mean"] + d["sd"], 0, 1),
                color=COLORS[name],
                alpha=0.15,
                lw=0,
            )
            ax.plot(x, 100 * d["q05"], color=COLORS[name], lw=0.6, ls=":")
            ax.plot(x, 100 * d["q95"], color=COLORS[name], lw=0.6, ls=":")
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("iteration")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(-2, 102)
    ax.grid(alpha=0.3)
    return drew


def _legend(ax, bands: bool, **kw) -> None:
    """The strategies' lines, and (when drawn) what the band and the dotted lines are."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles, _ = ax.get_legend_handles_labels()
    if bands:
        handles += [
            Patch(facecolor="grey", alpha=0.3, label="band: mean ± 1 s.d. over replicates"),
            Line2D([], [], color="grey", lw=0.6, ls=":", label="dotted: 5th and 95th percentiles over replicates"),
        ]
    ax.legend(handles=handles, fontsize=7, **kw)


def combination_figure_of(st: pd.DataFrame, comb: int, suptitle: str):
    """Figs. 9 and 10: one panel per punishment setting of one initial combination."""
    from cooplab.evals.canvas import subplots

    fig, axes = subplots(1, 3, figsize=(13, 3.8), sharey=True)
    bands = False
    for ax, pk in zip(axes, PK_ORDER, strict=False):
        bands |= _panel(ax, as_frame(st[(st["combination"] == comb) & (st["pk"] == pk)]), PK_TITLE[pk])
    axes[0].set_ylabel("% of agents")
    _legend(axes[-1], bands, loc="center right")
    fig.suptitle(suptitle, fontsize=10)
    fig.tight_layout()
    return fig


def combination_figure(st: pd.DataFrame, comb: int, path: Path, suptitle: str) -> Path:
    return _save(combination_figure_of(st, comb, suptitle), path)


def run_figure_of(counts: pd.DataFrame, summary: dict[str, Any]):
    """One run's strategy shares per iteration (mean over its replicates)."""
    from cooplab.evals.canvas import subplots

    st = share_stats(counts)
    fig, ax = subplots(figsize=(6.4, 4.2))
    pk = summary.get("pk") or f"{summary.get('p')}:{summary.get('k')}"
    reps = summary.get("replicates")
    bands = _panel(ax, st, f"{summary.get('agents')} agents, p:k {pk}, {reps} replicate{'' if reps == 1 else 's'}")
    ax.set_ylabel("% of agents")
    _legend(ax, bands)
    fig.tight_layout()
    return fig


def run_figure(counts: pd.DataFrame, summary: dict[str, Any], outdir: Path) -> Path:
    """``outdir/run.png``: :func:`run_figure_of` saved."""
    return _save(run_figure_of(counts, summary), Path(outdir) / "run.png")


def _save(fig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path


def rule_experiment(
    replicates: int, seed: int, iterations: int = 10, beta: float = 1.0, choices: dict[str, float] | None = None
) -> pd.DataFrame:
    """The six paper conditions x ``replicates``; the strategy-count table with labels. ``choices``:
    our free choices (:data:`model.CHOICES`: the menu, the p, k of "unstated", memory), default ours."""
    conds = paper_conditions(beta, choices)
    final = run_diners(
        [c for _, _, c in conds],
        replicates,
        seed,
        iterations,
        checkpointer=InMemorySaver(serde=CheckpointSerializer()),
        durability="exit",
    )
    counts = strategy_counts(final, _initial(final))
    meta = pd.DataFrame([{"combination": comb, "pk": pk} for comb, pk, _ in conds])
    return counts.join(meta, on="condition")


def _initial(final: Mapping[str, Any]) -> np.ndarray:
    h = final["history"]
    return h[0]["strategy_played"] if h else final["strategy"]


def final_table(counts: pd.DataFrame) -> pd.DataFrame:
    """Mean final shares per condition (rows: combination, pk; columns: strategies)."""
    last = as_frame(counts[counts["iteration"] == counts["iteration"].max()])
    names = list(dm.STRATEGIES)
    sh = as_frame(last[names]).div(last[names].sum(axis=1), axis=0)
    sh[["combination", "pk"]] = last[["combination", "pk"]]
    return as_frame(sh.groupby(["combination", "pk"], sort=False)[names].mean()).reset_index()


#: the paper's strategy leaders (§5, Figs. 9 and 10: one LLM run per condition): (combination, p:k) -> (figure, leader)
PAPER_LEADERS = {
    (1, "unstated"): ("9(a)", "P"),
    (1, "3:1"): ("9(b)", "M"),
    (1, "6:1"): ("9(c)", "M"),
    (2, "unstated"): ("10(a)", "R1"),
    (2, "3:1"): ("10(b)", "P"),
    (2, "6:1"): ("10(c)", "M"),
}


def check_claims(counts: pd.DataFrame) -> list[dict[str, Any]]:
    """The paper's qualitative findings (§5) and B&R's predictions, checked on mean shares.

    Each claim has ``holds``, its ``evidence`` as text and a signed ``effect`` (share of agents),
    positive when it holds (0: a tie): for a leader claim the mean final share of the paper's
    leader minus the largest other share; see :data:`EFFECTS`."""
    st = share_stats(counts, ["combination", "pk"])
    T = int(column(counts, "iteration").max())
    means = {
        (c, pk, n, int(t)): float(m)
        for c, pk, n, t, m in st[["combination", "pk", "strategy", "iteration", "mean"]].itertuples(
            index=False, name=None
        )
    }

    def mean_at(comb, pk, name, t=T) -> float:
        return means[(comb, pk, name, t)]

    def r1_area(comb, pk) -> float:  # mean R1 share over iterations 1..T
        return float(np.mean([mean_at(comb, pk, "R1", t) for t in range(1, T + 1)]))

    def leader(comb, pk) -> str:
        return max(dm.STRATEGIES, key=lambda n: mean_at(comb, pk, n))

    claims = []

    def add(cid, claim, holds, evidence, effect, **extra):
        claims.append(
            {"id": cid, "claim": claim, "holds": bool(holds), "evidence": evidence, "effect": float(effect), **extra}
        )

    for comb in (1, 2):
        r = {pk: mean_at(comb, pk, "R1") for pk in PK_ORDER}
        add(
            f"c{comb}-explicit-r1",
            f"combination {comb}: explicit punishment (3:1, 6:1) leaves fewer R1 at iteration {T} than unstated",
            r["3:1"] < r["unstated"] and r["6:1"] < r["unstated"],
            f"final R1 share unstated {r['unstated']:.3f}, 3:1 {r['3:1']:.3f}, 6:1 {r['6:1']:.3f}",
            r["unstated"] - max(r["3:1"], r["6:1"]),
        )
        a = {pk: r1_area(comb, pk) for pk in PK_ORDER}
        add(
            f"c{comb}-larger-p",
            f"combination {comb}: larger p (6:1) drives R1 out faster than 3:1 (lower mean R1 share over iterations)",
            a["6:1"] < a["3:1"],
            f"mean R1 share over iterations 1-{T}: 3:1 {a['3:1']:.3f}, 6:1 {a['6:1']:.3f}",
            a["3:1"] - a["6:1"],
        )
        for pk in ("3:1", "6:1"):
            sh = {n: mean_at(comb, pk, n) for n in dm.STRATEGIES}
            mp = sh["M"] + sh["P"]
            add(
                f"c{comb}-{pk}-mp",
                f"combination {comb}, p:k {pk}: M or P dominate at iteration {T} (M + P > 50 %, one of them the "
                "largest)",
                mp > 0.5 and leader(comb, pk) in ("M", "P"),
                f"M + P = {mp:.3f}; largest: {leader(comb, pk)}",
                min(mp - 0.5, max(sh["M"], sh["P"]) - max(v for n, v in sh.items() if n not in ("M", "P"))),
            )
    for (comb, pk), (fig, who) in PAPER_LEADERS.items():
        shares = ", ".join(f"{n} {mean_at(comb, pk, n):.3f}" for n in dm.STRATEGIES if n != "D")
        add(
            f"c{comb}-{pk}-leader",
            f"combination {comb}, p:k {pk}: the paper's single run ends with {who} the largest strategy",
            leader(comb, pk) == who,
            f"mean final shares: {shares}; largest here: {leader(comb, pk)}",
            mean_at(comb, pk, who) - max(mean_at(comb, pk, n) for n in dm.STRATEGIES if n != who),
            figure=fig,
        )
    return claims


#: what each claim's signed effect is (share of agents; positive in the claim's direction)
EFFECTS = {
    "explicit-r1": "final R1 share unstated - max(final R1 share at 3:1, at 6:1)",
    "larger-p": "mean R1 share over iterations 1-T at 3:1 - at 6:1",
    "mp": "min(M + P - 0.5, max(M, P) - the largest other final share)",
    "leader": "final share of the paper's leader - the largest other final share",
}


def llm_run_figure(run_dir: Path, out: Path) -> Path:
    counts = rundir.read_table(run_dir, "strategy_counts")
    from cooplab.graphs import runfiles
    from cooplab.tasks.diners.results import DinersResults

    summary = (
        runfiles.read_summary(run_dir, DinersResults).as_json() if (run_dir / runfiles.SUMMARY_FILE).exists() else {}
    )
    share_stats(counts).to_csv(out / "llm_run_shares.csv", index=False)
    path = run_figure(counts, summary, out / "llm_run")
    target = out / "llm_run.png"
    path.replace(target)
    (out / "llm_run").rmdir()
    return target


def make_figures(
    out: Path,
    replicates: int = 200,
    seed: int = 0,
    iterations: int = 10,
    beta: float = 1.0,
    llm_run: Path | None = None,
    log: Callable[[str], None] = lambda s: None,
    choices: dict[str, float] | None = None,
) -> dict[str, Any]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    choices = {**dm.CHOICES, **(choices or {})}
    counts = rule_experiment(replicates, seed, iterations, beta, choices)
    log(f"six conditions x {replicates} replicates in {time.perf_counter() - t0:.1f} s")
    st = share_stats(counts, ["combination", "pk"])
    counts.to_csv(out / "rule_strategy_counts.csv", index=False)
    st.to_csv(out / "rule_shares.csv", index=False)
    final = final_table(counts)
    final.to_csv(out / "rule_final_shares.csv", index=False)
    combination_figure(
        st,
        1,
        out / "fig9_rule.png",
        f"Fig. 9 analog: combination 1 (M,P,E,R1 | M,M,P,R1), rule-based, {replicates} replicates",
    )
    combination_figure(
        st,
        2,
        out / "fig10_rule.png",
        f"Fig. 10 analog: combination 2 (R1,R1,E,M | R1,P,P,M), rule-based, {replicates} replicates",
    )
    claims = check_claims(counts)
    lines = [
        f"# Diner's Dilemma, rule-based agents: {replicates} replicates per condition, {iterations} iterations, seed "
        f"{seed}, beta {beta}",
        "",
        "Free choices: "
        + ", ".join(f"{k} = {v:g}" for k, v in choices.items())
        + (" (ours, docs/diners.md)" if choices == dm.CHOICES else " (set with --set; ours: docs/diners.md)"),
        "",
    ]
    lines += [
        f"- **{c['id']}**{' (Fig. ' + c['figure'] + ')' if c.get('figure') else ''} "
        f"({'holds' if c['holds'] else 'does not hold'}): "
        f"{c['claim']}. {c['evidence']}; effect {c['effect']:+.3f}"
        for c in claims
    ]
    (out / "claims.md").write_text("\n".join(lines) + "\n")
    res: dict[str, Any] = {
        "replicates": replicates,
        "seed": seed,
        "iterations": iterations,
        "beta": beta,
        "choices": choices,
        "final_shares": final.to_dict(orient="records"),
        "claims": claims,
        "files": sorted(p.name for p in out.iterdir() if p.is_file()),
    }
    if llm_run is not None:
        res["llm_figure"] = str(llm_run_figure(Path(llm_run), out))
        res["files"] = sorted(p.name for p in out.iterdir() if p.is_file())
    res["seconds"] = round(time.perf_counter() - t0, 3)
    return res
