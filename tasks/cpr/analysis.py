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

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from cooplab.evals import stats  # noqa: E402
from cooplab.graphs import rundir  # noqa: E402

POPS = ["altruistic", "mixed", "selfish"]
ABLS = ["full", "osl", "ogd", "neither"]


def model_label(cfg: dict[str, Any]) -> str:
    llm = cfg.get("llm") or {}
    if not llm:
        return "rule-based"
    base = str(llm.get("model") or "?")
    label = base.split("/")[-1] if base.startswith("scripted:") else base
    return label + (" (+per-agent)" if llm.get("agent_models") else "")


def load_runs(run_dirs: list[Path], with_norms: bool = True) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(one row per society, per-round efficiency table, per-(society, round) norm similarity)."""
    societies, eff, norms = [], [], []
    for k, d in enumerate(run_dirs):
        d = Path(d)
        if not (d / "summary.json").exists() or not (d / "config.json").exists():
            raise rundir.RunDirError(f"{d} is not a finished cooplab run (no summary.json); run or resume it first")
        cfg, summ = rundir.read_config(d), rundir.read_json(d / "summary.json")
        if cfg.get("task") != "cpr":
            raise rundir.RunDirError(f"{d} is a {cfg.get('task')!r} run, not cpr")
        meta = {"run": k, "run_dir": str(d), "model": model_label(cfg), "population": (cfg.get("params") or {}).get("population"),
                "env": (cfg.get("params") or {}).get("env"), "ablation": (cfg.get("params") or {}).get("ablation"), "status": summ.get("status")}
        for rep, (ts, e) in enumerate(zip(summ["survival_time"]["values"], summ["efficiency"]["values"])):
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
            from cooplab.evals.norms import agent_norm_texts, norm_similarity

            texts = agent_norm_texts(dec, bel, rounds)
            sim = norm_similarity(texts)
            if len(sim):
                norms.append(sim.assign(**meta))
    return (pd.DataFrame(societies), pd.concat(eff) if eff else pd.DataFrame(),
            pd.concat(norms) if norms else pd.DataFrame())


def _sem(x: pd.Series) -> float:
    return float(x.std(ddof=1) / np.sqrt(len(x))) if len(x) > 1 else 0.0


def analyze(run_dirs: list[Path], out: Path) -> dict[str, Any]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    soc, eff, norms = load_runs(run_dirs)
    if soc.empty:
        raise rundir.RunDirError("no societies found in the given run directories")
    result: dict[str, Any] = {"runs": len(run_dirs), "societies": len(soc), "figures": [], "tables": [], "notes": []}
    cells = soc.groupby(["env", "model", "population", "ablation"])["survival_time"].agg(["mean", _sem, "count"]).reset_index()
    cells = cells.rename(columns={"_sem": "sem", "count": "n"})
    cells.to_csv(out / "cells.csv", index=False)
    result["tables"].append("cells.csv")
    md = ["# CPR LLM society: statistics", ""]
    full = soc[soc["ablation"] == "full"]
    letters_by_env: dict[str, dict[str, str]] = {}
    notes = result["notes"]
    for env, g in full.groupby("env"):
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
        letters_by_env[env] = {m: "" for m in g["model"].unique()}
        if g["model"].nunique() >= 2:
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
    if soc["ablation"].nunique() >= 2:
        full_t = soc[soc["ablation"] == "full"]["survival_time"]
        for abl in ABLS:
            a = soc[soc["ablation"] == abl]["survival_time"]
            if a.empty:
                continue
            pairs = [(f"{abl} vs others", soc[soc["ablation"] != abl]["survival_time"])]
            if abl != "full" and len(full_t):
                pairs.append((f"{abl} vs full", full_t))
            for name, b in pairs:
                row: dict[str, Any] = {"comparison": name, "mean_a": float(a.mean()), "mean_b": float(b.mean()),
                                       "n_a": len(a), "n_b": len(b)}
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
        md += ["**Welch t-tests, survival time by ablation**", "", "| comparison | n | mean | mean (other) | t | df | p |",
               "|---|---|---|---|---|---|---|"]
        for r in welch_rows:
            stat = (f"not estimable: {r['not_estimable']} | | |" if r["not_estimable"]
                    else f"{r['t']:.2f} | {r['df']:.1f} | {r['p']:.3g} |")
            md.append(f"| {r['comparison']} | {r['n_a']} vs {r['n_b']} | {r['mean_a']:.2f} | {r['mean_b']:.2f} | {stat}")
        md.append("")
    (out / "statistics.md").write_text("\n".join(md) + "\n" + "".join(f"- {n}\n" for n in result["notes"]))
    result["tables"].append("statistics.md")
    result["figures"] += _plots(soc, eff, norms, letters_by_env, out)
    if len(norms):
        from cooplab.evals.norms import embedder_record

        norms.to_csv(out / "norm_similarity.csv", index=False)
        result["tables"].append("norm_similarity.csv")
        result["embedder"] = embedder_record()  # which files (SHA-256) and which code made the vectors
    result["cells"] = cells.to_dict(orient="records")
    rundir.write_json(out / "analysis.json", result)
    return result


def _plots(soc, eff, norms, letters, out: Path) -> list[str]:
    made = []
    full = soc[soc["ablation"] == "full"] if (soc["ablation"] == "full").any() else soc
    for env, g in full.groupby("env"):  # Figs. 5 and 6
        models = sorted(g["model"].unique())
        pops = [p for p in POPS if p in set(g["population"])]
        fig, ax = plt.subplots(figsize=(max(5, 1.8 * len(models) + 2), 4.2), constrained_layout=True)
        w = 0.8 / max(len(pops), 1)
        top = 0
        for k, pop in enumerate(pops):
            m = [g[(g.model == mo) & (g.population == pop)]["survival_time"] for mo in models]
            means = [x.mean() if len(x) else np.nan for x in m]
            sems = [_sem(x) for x in m]
            ax.bar(np.arange(len(models)) + (k - (len(pops) - 1) / 2) * w, means, w, yerr=sems, capsize=3, label=pop)
            top = max(top, np.nanmax(np.array(means) + np.array(sems)) if len(means) else 0)
        for j, mo in enumerate(models):
            ax.text(j, top * 1.05 + 0.5, letters.get(env, {}).get(mo, ""), ha="center", fontsize=11, weight="bold")
        ax.set_xticks(range(len(models)), models, rotation=15)
        ax.set(ylabel="survival time T_s (rounds)", title=f"Survival by model and population, {env}\n(±1 s.e.m.; letters: Tukey HSD groups)", ylim=(0, top * 1.2 + 1))
        ax.legend(fontsize=8)
        name = f"fig5_6_survival_{env}.png"
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        made.append(name)
    if soc["ablation"].nunique() >= 2:  # Fig. 7
        envs = sorted(soc["env"].unique())
        fig, axes = plt.subplots(1, len(envs), figsize=(6 * len(envs), 4), constrained_layout=True, squeeze=False)
        for ax, env in zip(axes[0], envs):
            g = soc[soc.env == env]
            abls = [a for a in ABLS if a in set(g["ablation"])]
            pops = [p for p in POPS if p in set(g["population"])]
            w = 0.8 / max(len(pops), 1)
            for k, pop in enumerate(pops):
                xs = [g[(g.ablation == a) & (g.population == pop)]["survival_time"] for a in abls]
                ax.bar(np.arange(len(abls)) + (k - (len(pops) - 1) / 2) * w, [x.mean() for x in xs], w, yerr=[_sem(x) for x in xs], capsize=3, label=pop)
            ax.set_xticks(range(len(abls)), [a.upper() if a != "full" else "Full" for a in abls])
            ax.set(title=f"Ablations, {env}", ylabel="survival time T_s (±1 s.e.m.)")
            ax.legend(fontsize=8)
        fig.savefig(out / "fig7_ablations.png", dpi=110)
        plt.close(fig)
        made.append("fig7_ablations.png")
    if len(norms):  # Fig. 14: final-round S_ind vs S_align per society
        last = norms.sort_values("round").groupby(["run", "society"]).tail(1)
        fig, ax = plt.subplots(figsize=(6, 5), constrained_layout=True)
        markers = {"altruistic": "o", "mixed": "s", "selfish": "^"}
        for (model, pop), g in last.groupby(["model", "population"]):
            ax.scatter(g["S_ind"], g["S_align"], marker=markers.get(pop, "x"), label=f"{model} / {pop}", alpha=0.8)
        ax.set(xlabel="individual similarity S_ind", ylabel="alignment S_align", title="Within-society norms at the end of each run")
        ax.legend(fontsize=7)
        fig.savefig(out / "fig14_norm_similarity.png", dpi=110)
        plt.close(fig)
        made.append("fig14_norm_similarity.png")
    if len(eff):  # Fig. 15
        envs = sorted(eff["env"].unique())
        fig, axes = plt.subplots(1, len(envs), figsize=(6 * len(envs), 4), constrained_layout=True, squeeze=False)
        for ax, env in zip(axes[0], envs):
            g = eff[(eff.env == env) & (eff.ablation == "full")] if (eff.ablation == "full").any() else eff[eff.env == env]
            for model, gm in g.groupby("model"):
                st = gm.groupby("round")["eta_t"].agg(["mean", "std", "count"]).reset_index()
                half = st["std"].fillna(0) / np.sqrt(st["count"].clip(lower=1))
                line = ax.plot(st["round"], st["mean"], label=model)[0]
                ax.fill_between(st["round"], st["mean"] - half, st["mean"] + half, alpha=0.2, color=line.get_color(), lw=0)
            ax.axhline(1.0, color="grey", ls=":", lw=1)
            ax.set(title=f"Efficiency eta(t), {env} (running societies, ±1 s.e.m.)", xlabel="round t", ylabel="eta(t)")
            ax.legend(fontsize=8)
        fig.savefig(out / "fig15_efficiency.png", dpi=110)
        plt.close(fig)
        made.append("fig15_efficiency.png")
    return made


__all__ = ["analyze", "load_runs", "json"]
