"""Figs. 9 and 10 analogs: strategy shares per iteration, one panel per punishment setting.

Rule-based agents: the paper's six conditions (2 combinations x 3 punishment settings) run as
one graph invocation over ``replicates`` replicates each; the mean share per iteration with a
band of +-1 s.d. and the 5-95 % range over replicates. An LLM run (``--llm-run DIR``) is drawn
from its ``strategy_counts`` table. PNG + CSV, and ``claims.md`` comparing with the paper.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd
from langgraph.checkpoint.memory import InMemorySaver

from cooplab import runstore
from cooplab.tasks.diners import model as dm
from cooplab.tasks.diners.task import strategy_counts
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
    out = g.agg(mean="mean", sd="std", q05=lambda x: x.quantile(0.05), q95=lambda x: x.quantile(0.95), n="count").reset_index()
    out["sd"] = out["sd"].fillna(0.0)
    return out


def _panel(ax, st: pd.DataFrame, title: str, bands: bool = True) -> None:
    for name in dm.STRATEGIES:
        d = st[st["strategy"] == name].sort_values("iteration")
        if not len(d) or (d["mean"].max() == 0 and d["q95"].max() == 0):
            continue
        x = d["iteration"].to_numpy()
        ax.plot(x, 100 * d["mean"], marker="o", ms=3, color=COLORS[name], label=f"{name} ({dm.STRATEGY_NAMES[name]})")
        if bands and d["n"].max() > 1:
            ax.fill_between(x, 100 * np.clip(d["mean"] - d["sd"], 0, 1), 100 * np.clip(d["mean"] + d["sd"], 0, 1),
                            color=COLORS[name], alpha=0.15, lw=0)
            ax.plot(x, 100 * d["q05"], color=COLORS[name], lw=0.6, ls=":")
            ax.plot(x, 100 * d["q95"], color=COLORS[name], lw=0.6, ls=":")
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("iteration")
    ax.set_ylim(-2, 102)
    ax.grid(alpha=0.3)


def combination_figure(st: pd.DataFrame, comb: int, path: Path, suptitle: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8), sharey=True)
    for ax, pk in zip(axes, PK_ORDER):
        _panel(ax, st[(st["combination"] == comb) & (st["pk"] == pk)], PK_TITLE[pk])
    axes[0].set_ylabel("% of agents")
    axes[-1].legend(fontsize=7, loc="center right")
    fig.suptitle(suptitle, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def run_figure(counts: pd.DataFrame, summary: dict[str, Any], outdir: Path) -> Path:
    """One run's strategy shares per iteration (mean over its replicates)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    st = share_stats(counts)
    fig, ax = plt.subplots(figsize=(6, 3.8))
    pk = summary.get("pk") or f"{summary.get('p')}:{summary.get('k')}"
    _panel(ax, st, f"{summary.get('agents')} agents, p:k {pk}, {summary.get('replicates')} replicate(s)")
    ax.set_ylabel("% of agents")
    ax.legend(fontsize=7)
    fig.tight_layout()
    outdir.mkdir(parents=True, exist_ok=True)
    path = outdir / "run.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def rule_experiment(replicates: int, seed: int, iterations: int = 10, beta: float = 1.0) -> pd.DataFrame:
    """The six paper conditions x ``replicates``; the strategy-count table with labels."""
    conds = paper_conditions(beta)
    final = run_diners([c for _, _, c in conds], replicates, seed, iterations, checkpointer=InMemorySaver(), durability="exit")
    counts = strategy_counts(final, _initial(final))
    meta = pd.DataFrame([{"combination": comb, "pk": pk} for comb, pk, _ in conds])
    return counts.join(meta, on="condition")


def _initial(final: dict[str, Any]) -> np.ndarray:
    h = final["history"]
    return h[0]["strategy_played"] if h else final["strategy"]


def final_table(counts: pd.DataFrame) -> pd.DataFrame:
    """Mean final shares per condition (rows: combination, pk; columns: strategies)."""
    last = counts[counts["iteration"] == counts["iteration"].max()]
    names = list(dm.STRATEGIES)
    sh = last[names].div(last[names].sum(axis=1), axis=0)
    sh[["combination", "pk"]] = last[["combination", "pk"]]
    return sh.groupby(["combination", "pk"], sort=False)[names].mean().reset_index()


def check_claims(counts: pd.DataFrame) -> list[dict[str, Any]]:
    """The paper's qualitative findings (§5) and B&R's predictions, checked on mean shares."""
    st = share_stats(counts, ["combination", "pk"])
    T = int(counts["iteration"].max())

    def mean_at(comb, pk, name, t=T) -> float:
        d = st[(st["combination"] == comb) & (st["pk"] == pk) & (st["strategy"] == name) & (st["iteration"] == t)]
        return float(d["mean"].iloc[0])

    def r1_area(comb, pk) -> float:  # mean R1 share over iterations 1..T
        d = st[(st["combination"] == comb) & (st["pk"] == pk) & (st["strategy"] == "R1") & (st["iteration"] >= 1)]
        return float(d["mean"].mean())

    def leader(comb, pk) -> str:
        return max(dm.STRATEGIES, key=lambda n: mean_at(comb, pk, n))

    claims = []

    def add(cid, claim, holds, evidence):
        claims.append({"id": cid, "claim": claim, "holds": bool(holds), "evidence": evidence})

    for comb in (1, 2):
        r = {pk: mean_at(comb, pk, "R1") for pk in PK_ORDER}
        add(f"c{comb}-explicit-r1", f"combination {comb}: explicit punishment (3:1, 6:1) leaves fewer R1 at iteration {T} than unstated",
            r["3:1"] < r["unstated"] and r["6:1"] < r["unstated"],
            f"final R1 share unstated {r['unstated']:.3f}, 3:1 {r['3:1']:.3f}, 6:1 {r['6:1']:.3f}")
        a = {pk: r1_area(comb, pk) for pk in PK_ORDER}
        add(f"c{comb}-larger-p", f"combination {comb}: larger p (6:1) drives R1 out faster than 3:1 (lower mean R1 share over iterations)",
            a["6:1"] < a["3:1"], f"mean R1 share over iterations 1-{T}: 3:1 {a['3:1']:.3f}, 6:1 {a['6:1']:.3f}")
        for pk in ("3:1", "6:1"):
            mp = mean_at(comb, pk, "M") + mean_at(comb, pk, "P")
            add(f"c{comb}-{pk}-mp", f"combination {comb}, p:k {pk}: M or P dominate at iteration {T} (M + P > 50 %, one of them the largest)",
                mp > 0.5 and leader(comb, pk) in ("M", "P"), f"M + P = {mp:.3f}; largest: {leader(comb, pk)}")
    paper_leaders = {(1, "unstated"): "P", (1, "3:1"): "M", (1, "6:1"): "M", (2, "unstated"): "R1", (2, "3:1"): "P", (2, "6:1"): "M"}
    for (comb, pk), who in paper_leaders.items():
        shares = ", ".join(f"{n} {mean_at(comb, pk, n):.3f}" for n in dm.STRATEGIES if n != "D")
        add(f"c{comb}-{pk}-leader", f"combination {comb}, p:k {pk}: the paper's single run ends with {who} the largest strategy",
            leader(comb, pk) == who, f"mean final shares: {shares}; largest here: {leader(comb, pk)}")
    return claims


def llm_run_figure(run_dir: Path, out: Path) -> Path:
    counts = runstore.read_table(run_dir, "strategy_counts")
    summary = runstore.read_json(run_dir / "summary.json") if (run_dir / "summary.json").exists() else {}
    share_stats(counts).to_csv(out / "llm_run_shares.csv", index=False)
    path = run_figure(counts, summary, out / "llm_run")
    target = out / "llm_run.png"
    path.replace(target)
    (out / "llm_run").rmdir()
    return target


def make_figures(out: Path, replicates: int = 200, seed: int = 0, iterations: int = 10, beta: float = 1.0,
                 llm_run: Path | None = None, log: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    counts = rule_experiment(replicates, seed, iterations, beta)
    log(f"six conditions x {replicates} replicates in {time.perf_counter() - t0:.1f} s")
    st = share_stats(counts, ["combination", "pk"])
    counts.to_csv(out / "rule_strategy_counts.csv", index=False)
    st.to_csv(out / "rule_shares.csv", index=False)
    final = final_table(counts)
    final.to_csv(out / "rule_final_shares.csv", index=False)
    combination_figure(st, 1, out / "fig9_rule.png", f"Fig. 9 analog: combination 1 (M,P,E,R1 | M,M,P,R1), rule-based, {replicates} replicates")
    combination_figure(st, 2, out / "fig10_rule.png", f"Fig. 10 analog: combination 2 (R1,R1,E,M | R1,P,P,M), rule-based, {replicates} replicates")
    claims = check_claims(counts)
    lines = [f"# Diner's Dilemma, rule-based agents: {replicates} replicates per condition, {iterations} iterations, seed {seed}, beta {beta}", ""]
    lines += [f"- **{c['id']}** ({'holds' if c['holds'] else 'does not hold'}): {c['claim']}. {c['evidence']}" for c in claims]
    (out / "claims.md").write_text("\n".join(lines) + "\n")
    res: dict[str, Any] = {"replicates": replicates, "seed": seed, "iterations": iterations, "beta": beta,
                           "final_shares": final.to_dict(orient="records"), "claims": claims,
                           "files": sorted(p.name for p in out.iterdir() if p.is_file())}
    if llm_run is not None:
        res["llm_figure"] = str(llm_run_figure(Path(llm_run), out))
        res["files"] = sorted(p.name for p in out.iterdir() if p.is_file())
    res["seconds"] = round(time.perf_counter() - t0, 3)
    return res
