"""``cooplab analyze cpr``: the paper's LLM-society analysis over a set of run directories.

Figures (analogs of the paper's): survival by model and population per environment with
±1 s.e.m. and CLD letters (Figs. 5, 6), the ablation comparison (Fig. 7), S_ind vs S_align
(Fig. 14), efficiency over time (Fig. 15). Tables: two-way type II ANOVA of survival time by
model x population per environment with eta^2 (Table 1), Tukey HSD across models, Welch
t-tests for the ablations (§4.2.5); CSV and Markdown.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cooplab.evals import stats
from cooplab.evals.canvas import Figure, subplots
from cooplab.evals.text import model_display_name
from cooplab.evals.typed import as_frame, column, groups
from cooplab.graphs import rundir, runfiles
from cooplab.tasks.cpr.figures import timeseries_stats
from cooplab.tasks.cpr.results import CPRResults

POPS = ["altruistic", "mixed", "selfish"]
ABLS = ["full", "osl", "ogd", "neither"]


def model_label(cfg: dict[str, Any]) -> str:
    """The model a run's societies are shown under: its readable name (``gpt-4o-mini``,
    ``SmolLM2-135M-Instruct``, ``cautious (scripted)``), ``rule-based`` without an LLM."""
    llm = cfg.get("llm") or {}
    if not llm:
        return "rule-based"
    return model_display_name(llm.get("model")) + (" (+per-agent)" if llm.get("agent_models") else "")


def load_runs(run_dirs: list[Path], with_norms: bool = True) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(one row per society, per-round efficiency table, per-(society, round) norm similarity)."""
    societies, eff, norms = [], [], []
    for k, d in enumerate(run_dirs):
        d = Path(d)
        if not (d / "summary.json").exists() or not (d / "config.json").exists():
            raise rundir.RunDirError(f"{d} is not a finished cooplab run (no summary.json); run or resume it first")
        cfg = rundir.read_config(d)
        if cfg.get("task") != "cpr":
            raise rundir.RunDirError(f"{d} is a {cfg.get('task')!r} run, not cpr")
        summ = runfiles.read_summary(d, CPRResults)  # a damaged one: one line naming the field
        if summ.results is None:
            raise rundir.RunDirError(
                f"{d} failed before it had results ({summ.message}); it has no societies to analyse"
            )
        meta = {
            "run": k,
            "run_dir": str(d),
            "model": model_label(cfg),
            "population": (cfg.get("params") or {}).get("population"),
            "env": (cfg.get("params") or {}).get("env"),
            "ablation": (cfg.get("params") or {}).get("ablation"),
            "status": summ.status,
        }
        for rep, (ts, e) in enumerate(
            zip(summ.results.survival_time.values, summ.results.efficiency.values, strict=False)
        ):
            societies.append({**meta, "society": rep, "survival_time": ts, "efficiency": e})
        rounds = rundir.read_table(d, "rounds")
        if len(rounds):
            eff.append(rounds[["replicate", "round", "eta_t"]].assign(**meta))
        if with_norms and ((d / "decisions.parquet").exists() or (d / "decisions.csv").exists()):
            try:
                dec = rundir.read_table(d, "decisions")
                bel = rundir.read_table(d, "beliefs_final")
            except rundir.RunDirError:
                continue
            from cooplab.tasks.cpr.norms import agent_norm_texts, norm_similarity

            texts = agent_norm_texts(dec, bel, rounds)
            sim = norm_similarity(texts)
            if len(sim):
                norms.append(sim.assign(**meta))
    return (
        pd.DataFrame(societies),
        pd.concat(eff) if eff else pd.DataFrame(),
        pd.concat(norms) if norms else pd.DataFrame(),
    )


def _sem(x: pd.Series) -> float:
    return float(x.std(ddof=1) / np.sqrt(len(x))) if len(x) > 1 else 0.0


def analyze(run_dirs: list[Path], out: Path) -> dict[str, Any]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    soc, eff, norms = load_runs(run_dirs)
    if soc.empty:
        raise rundir.RunDirError("no societies found in the given run directories")
    result: dict[str, Any] = {"runs": len(run_dirs), "societies": len(soc), "figures": [], "tables": [], "notes": []}
    cells = (
        soc.groupby(["env", "model", "population", "ablation"])["survival_time"]
        .agg(["mean", _sem, "count"])
        .reset_index()
    )
    cells = cells.rename(columns={"_sem": "sem", "count": "n"})
    cells.to_csv(out / "cells.csv", index=False)
    result["tables"].append("cells.csv")
    md = ["# CPR LLM society: statistics", ""]
    full = as_frame(soc[soc["ablation"] == "full"])
    letters_by_env: dict[str, dict[str, str]] = {}
    notes = result["notes"]
    for env, g in groups(full, "env"):
        anova_title = f"Two-way ANOVA (type II) of survival time, {env} environment"
        try:
            with stats.collect_warnings(notes, f"{env} ANOVA"):
                table = stats.two_way_anova(g, "survival_time", "model", "population")
        except stats.NotEstimable as e:
            md += [f"**{anova_title}**: not estimable ({e}).", ""]
            notes.append(f"{env}: ANOVA not estimable ({e})")
        else:
            table.to_csv(out / f"anova_{env}.csv")
            md.append(stats.anova_markdown(table, anova_title))
            result["tables"].append(f"anova_{env}.csv")
        letters_by_env[env] = {m: "" for m in column(g, "model").unique()}
        if column(g, "model").nunique() >= 2:
            try:
                with stats.collect_warnings(notes, f"{env} Tukey HSD"):
                    tk = stats.tukey_hsd(g, "survival_time", "model")
                    letters_by_env[env] = stats.cld_from_tukey(g, "survival_time", "model")
            except stats.NotEstimable as e:
                notes.append(f"{env}: Tukey HSD across models not estimable ({e}); no letters in the figure")
            else:
                tk.to_csv(out / f"tukey_{env}.csv", index=False)
                result["tables"].append(f"tukey_{env}.csv")
    # Welch t-tests for the ablations (§4.2.5): each reduced condition vs the rest, and vs full
    welch_rows = []
    if column(soc, "ablation").nunique() >= 2:
        full_t = column(as_frame(soc[soc["ablation"] == "full"]), "survival_time")
        for abl in ABLS:
            a = column(as_frame(soc[soc["ablation"] == abl]), "survival_time")
            if a.empty:
                continue
            pairs = [(f"{abl} vs others", column(as_frame(soc[soc["ablation"] != abl]), "survival_time"))]
            if abl != "full" and len(full_t):
                pairs.append((f"{abl} vs full", full_t))
            for name, b in pairs:
                row: dict[str, Any] = {
                    "comparison": name,
                    "mean_a": float(a.mean()),
                    "mean_b": float(b.mean()),
                    "n_a": len(a),
                    "n_b": len(b),
                }
                try:
                    with stats.collect_warnings(notes, f"Welch {name}"):
                        row.update(stats.welch(a, b), not_estimable="")
                except stats.NotEstimable as e:
                    row.update(t=np.nan, df=np.nan, p=np.nan, not_estimable=str(e))
                welch_rows.append(row)
    if welch_rows:
        wt = pd.DataFrame(welch_rows)
        wt.to_csv(out / "welch_ablations.csv", index=False)
        result["tables"].append("welch_ablations.csv")
        md += [
            "**Welch t-tests, survival time by ablation**",
            "",
            "| comparison | n | mean | mean (other) | t | df | p |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in welch_rows:
            stat = (
                f"not estimable: {r['not_estimable']} | | |"
                if r["not_estimable"]
                else f"{r['t']:.2f} | {r['df']:.1f} | {r['p']:.3g} |"
            )
            md.append(
                f"| {r['comparison']} | {r['n_a']} vs {r['n_b']} | {r['mean_a']:.2f} | {r['mean_b']:.2f} | {stat}"
            )
        md.append("")
    (out / "statistics.md").write_text("\n".join(md) + "\n" + "".join(f"- {n}\n" for n in result["notes"]))
    result["tables"].append("statistics.md")
    result["figures"] += _plots(soc, eff, norms, letters_by_env, out)
    if len(norms):
        from cooplab.tasks.cpr.norms import embedder_record

        norms.to_csv(out / "norm_similarity.csv", index=False)
        result["tables"].append("norm_similarity.csv")
        result["embedder"] = embedder_record()  # which files (SHA-256) and which code made the vectors
    result["cells"] = cells.to_dict(orient="records")
    rundir.write_json(out / "analysis.json", result)
    return result


def _caption(fig, text: str) -> None:
    """A figure's caption under its panels: what the bars, lines, bands and markers are."""
    import textwrap

    fig.supxlabel("\n".join(textwrap.wrap(text, max(60, int(15 * fig.get_figwidth())))), fontsize=8, color="dimgrey")


def _n_text(counts: list[int]) -> str:
    """``n = 3 societies per bar`` or ``n = 1-5 societies per bar`` (bars with n = 1 have no error bar)."""
    counts = [c for c in counts if c > 0]
    if not counts:
        return "no societies"
    lo, hi = min(counts), max(counts)
    text = f"n = {lo} societies per bar" if lo == hi else f"n = {lo}-{hi} societies per bar"
    return text + ("; a bar of one society has no error bar" if lo == 1 else "")


def _bars(ax, g: pd.DataFrame, key: str, levels: list[str]) -> tuple[float, list[int]]:
    """Grouped bars of mean survival time (±1 s.e.m.) per ``key`` level and population; returns the
    top of the highest bar and the number of societies behind each bar."""
    from matplotlib.ticker import MaxNLocator

    pops = [p for p in POPS if p in set(g["population"])]
    w = 0.8 / max(len(pops), 1)
    top, ns = 0.0, []
    for k, pop in enumerate(pops):
        xs = [column(as_frame(g[(g[key] == lev) & (g.population == pop)]), "survival_time") for lev in levels]
        means = np.array([x.mean() if len(x) else np.nan for x in xs], dtype=float)
        sems = np.array([_sem(x) for x in xs], dtype=float)
        ns += [len(x) for x in xs]
        ax.bar(np.arange(len(levels)) + (k - (len(pops) - 1) / 2) * w, means, w, yerr=sems, capsize=3, label=pop)
        if np.isfinite(means).any():
            top = max(top, float(np.nanmax(means + sems)))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(title="population", fontsize=8, title_fontsize=8)
    return top, ns


def survival_figure(g: pd.DataFrame, env: str, letters: dict[str, str]) -> Figure:
    """Figs. 5 and 6: mean survival time by model and population in one environment, ±1 s.e.m.,
    with the Tukey HSD letters of the models above their bars."""
    models = sorted(g["model"].unique())
    fig, ax = subplots(figsize=(max(5, 1.8 * len(models) + 2), 4.6), constrained_layout=True)
    top, ns = _bars(ax, g, "model", models)
    shown = any(letters.get(mo) for mo in models)
    for j, mo in enumerate(models):
        ax.text(j, top * 1.05 + 0.5, letters.get(mo, ""), ha="center", fontsize=11, weight="bold")
    ax.set_xticks(range(len(models)), models, rotation=15)
    ax.set(
        xlabel="model",
        ylabel="survival time T_s (rounds)",
        title=f"Survival by model and population, {env}",
        ylim=(0, top * 1.2 + 1),
    )
    _caption(
        fig,
        f"Bars: mean survival time over the societies of each model and population; error bars: ±1 s.e.m. over "
        f"those societies ({_n_text(ns)}). "
        + (
            "Letters: Tukey HSD groups of the models (models sharing a letter do not differ at the 5% level)."
            if shown
            else "No letters: the Tukey HSD across models needs two models and is estimable only with "
            "varying survival times (see statistics.md)."
        ),
    )
    return fig


def ablation_figure(soc: pd.DataFrame) -> Figure:
    """Fig. 7: mean survival time by ablation and population, one panel per environment, ±1 s.e.m."""
    envs = sorted(soc["env"].unique())
    fig, axes = subplots(1, len(envs), figsize=(6 * len(envs), 4.4), constrained_layout=True, squeeze=False)
    ns: list[int] = []
    for ax, env in zip(axes[0], envs, strict=False):
        g = as_frame(soc[soc.env == env])
        abls = [a for a in ABLS if a in set(g["ablation"])]
        _, n = _bars(ax, g, "ablation", abls)
        ns += n
        ax.set_xticks(range(len(abls)), [a.upper() if a != "full" else "Full" for a in abls])
        ax.set(title=f"Ablations, {env}", xlabel="condition", ylabel="survival time T_s (rounds)")
    _caption(
        fig,
        "Bars: mean survival time over the societies of each condition and population, all models pooled; error "
        f"bars: ±1 s.e.m. over those societies ({_n_text(ns)}). Full: social learning and group decisions; "
        "OSL: only social learning; OGD: only group decisions; NEITHER: neither.",
    )
    return fig


def norms_figure(norms: pd.DataFrame) -> Figure:
    """Fig. 14: each society's individual norm similarity against its alignment, at its last round."""
    last = norms.sort_values("round").groupby(["run", "society"]).tail(1)
    fig, ax = subplots(figsize=(6, 5.3), constrained_layout=True)
    markers = {"altruistic": "o", "mixed": "s", "selfish": "^"}
    for (model, pop), g in groups(last, ["model", "population"]):
        ax.scatter(g["S_ind"], g["S_align"], marker=markers.get(pop, "x"), label=f"{model} / {pop}", alpha=0.8)
    ax.set(
        xlabel="individual similarity S_ind",
        ylabel="alignment S_align",
        title="Within-society norms at the end of each run",
    )
    ax.legend(title="model / population", fontsize=7, title_fontsize=7)
    _caption(
        fig,
        "Each point: one society at its last round (colour and shape: model and population); S_ind: mean "
        "pairwise cosine similarity of the agents' norm-text embeddings; S_align: their mean cosine similarity "
        "to the society's common direction (the normalized sum of the embeddings).",
    )
    return fig


def efficiency_figure(eff: pd.DataFrame) -> Figure:
    """Fig. 15: efficiency eta(t) per model over the rounds, one panel per environment (full
    condition when present): the mean over the societies still running, with its 95% CI."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator

    envs = sorted(eff["env"].unique())
    fig, axes = subplots(1, len(envs), figsize=(6 * len(envs), 4.4), constrained_layout=True, squeeze=False)
    for ax, env in zip(axes[0], envs, strict=False):
        g = as_frame(
            eff[(eff.env == env) & (eff.ablation == "full")] if (eff.ablation == "full").any() else eff[eff.env == env]
        )
        handles = []
        for model, gm in g.groupby("model"):
            st = timeseries_stats(gm, "eta_t")
            half = st["ci95"]
            line = ax.plot(st["round"], st["mean"], label=model)[0]
            ax.fill_between(
                st["round"],
                np.clip(st["mean"] - half, 0, None),
                st["mean"] + half,
                alpha=0.2,
                color=line.get_color(),
                lw=0,
            )
            handles.append(line)
        ax.axhline(1.0, color="grey", ls=":", lw=1)
        handles += [
            Patch(facecolor="grey", alpha=0.3, label="95% CI over running societies"),
            Line2D([], [], color="grey", ls=":", lw=1, label="eta = 1: harvest at the maximum sustainable yield"),
        ]
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set(title=f"Efficiency eta(t), {env}", xlabel="round t", ylabel="eta(t)")
        ax.legend(handles=handles, fontsize=8)
    _caption(
        fig,
        "Lines: mean efficiency eta(t) = harvest / (rK/4) over the societies of each model still running at round t "
        "(full condition when present); bands: 95% confidence intervals (1.96 s.e.m.) over those societies, "
        "none where one society runs.",
    )
    return fig


def _save(fig: Figure, out: Path, name: str) -> str:
    fig.savefig(out / name, dpi=110)
    return name


def _plots(soc, eff, norms, letters, out: Path) -> list[str]:
    made = []
    full = as_frame(soc[soc["ablation"] == "full"]) if (soc["ablation"] == "full").any() else soc
    for env, g in groups(full, "env"):
        made.append(_save(survival_figure(g, env, letters.get(env, {})), out, f"fig5_6_survival_{env}.png"))
    if soc["ablation"].nunique() >= 2:
        made.append(_save(ablation_figure(soc), out, "fig7_ablations.png"))
    if len(norms):
        made.append(_save(norms_figure(norms), out, "fig14_norm_similarity.png"))
    if len(eff):
        made.append(_save(efficiency_figure(eff), out, "fig15_efficiency.png"))
    return made


__all__ = ["analyze", "load_runs", "json"]
