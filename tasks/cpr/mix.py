"""Per-model outcomes of a mixed CPR society, its cross-play table, and an invader's effect.

From the run's tables (``decisions``, ``rounds``, ``agents``, ``norms_adopted``) and its stored LLM
block (who used which model, :func:`cooplab.agents.mix.model_of`):

- ``by_model`` (one row per model): agents, catch per agent (a round's catch H split in
  proportion to the efforts decided, as the harvest rule splits it), mean effort, fines given and
  received per agent, norms proposed and adopted (an adopted norm counts for every model whose
  agent proposed that text), final wealth per agent and the share alive;
- ``crossplay`` (one row per ordered pair of models A, B): fines agents of A gave agents of B,
  per pair of such agents (self excluded) and round.

An invader (``params.invader``): the stock's recovery (:mod:`cooplab.evals.recovery`) per society,
and the invader seat's final wealth against the residents' mean.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from cooplab.agents.mix import model_of
from cooplab.evals.typed import as_frame, cell, column, groups


def models_by_agent(llm: Mapping[str, Any] | None, n_agents: int) -> dict[int, str]:
    return {a: model_of(dict(llm or {}), a) for a in range(n_agents)}


def is_mixed(llm: Mapping[str, Any] | None, n_agents: int) -> bool:
    return llm is not None and len(set(models_by_agent(llm, n_agents).values())) > 1


def _parsed(d: pd.DataFrame) -> list[dict[str, Any]]:
    return [json.loads(p) if isinstance(p, str) else (p or {}) for p in d["parsed"]]


def per_model(
    decisions: pd.DataFrame,
    rounds: pd.DataFrame,
    agents: pd.DataFrame,
    norms: pd.DataFrame | None,
    models: dict[int, str],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(by_model rows, crossplay rows) of an LLM CPR run (see the module)."""
    d = decisions.copy()
    d["value"] = _parsed(d)
    d["m"] = [models[int(a)] for a in d["agent"]]
    names = list(dict.fromkeys(models.values()))
    n_of = {m: sum(1 for x in models.values() if x == m) for m in names}
    S = int(column(agents, "society").nunique()) if len(agents) else 1
    n_rounds = int(column(rounds, "round").max()) if len(rounds) else 0
    catch = {m: 0.0 for m in names}
    efforts: dict[str, list[float]] = {m: [] for m in names}
    hv = d[d["phase"] == "harvest"]
    soc_col = "replicate" if "replicate" in rounds.columns else "society"
    H = {(int(cell(r, soc_col)), int(cell(r, "round"))): float(cell(r, "H")) for _, r in rounds.iterrows()}
    for (s, t), g in groups(as_frame(hv), ["society", "round"]):
        e = np.array([float(v.get("effort", 0.0)) for v in g["value"]])
        total = e.sum()
        for m, ei in zip(g["m"], e, strict=False):
            efforts[m].append(ei)
            if total > 0:
                catch[m] += H.get((int(s), int(t)), 0.0) * ei / total
    given = {m: 0 for m in names}
    received = {m: 0 for m in names}
    cross = {(a, b): 0 for a in names for b in names}
    for (_, row), v in zip(d[d["phase"] == "punish"].iterrows(), d[d["phase"] == "punish"]["value"], strict=False):
        target = v.get("punish")
        if target is None:
            continue
        tm = models[int(target) - 1]
        given[cell(row, "m")] += 1
        received[tm] += 1
        cross[(cell(row, "m"), tm)] += 1
    pr = as_frame(d[d["phase"] == "propose"])
    proposed = {m: int((column(pr, "m") == m).sum()) for m in names}
    adopted = {m: 0 for m in names}
    if norms is not None and len(norms):
        texts = [
            (int(s), int(t), str(v.get("proposal", "")).strip(), m)
            for s, t, v, m in zip(pr["society"], pr["round"], pr["value"], pr["m"], strict=False)
        ]
        for _, n in norms.iterrows():
            by = {
                m
                for s, t, text, m in texts
                if s == int(cell(n, "society")) and t == int(cell(n, "round")) and text == str(n["norm"]).strip()
            }
            for m in by:
                adopted[m] += 1
    rows = []
    for m in names:
        ag = as_frame(agents[column(agents, "agent").map(lambda a, m=m: models[int(a)] == m)])
        k = n_of[m] * S
        rows.append(
            {
                "model": m,
                "agents": n_of[m],
                "catch_per_agent": catch[m] / k,
                "mean_effort": float(np.mean(efforts[m])) if efforts[m] else None,
                "fines_given_per_agent": given[m] / k,
                "fines_received_per_agent": received[m] / k,
                "norms_proposed": proposed[m],
                "norms_adopted": adopted[m],
                "wealth_per_agent": float(column(ag, "wealth").mean()) if len(ag) else None,
                "alive_share": float(column(ag, "alive").mean()) if len(ag) else None,
            }
        )
    cp = []
    for a in names:
        for b in names:
            pairs = n_of[a] * (n_of[b] - (1 if a == b else 0)) * S * max(n_rounds, 1)
            cp.append(
                {
                    "model": a,
                    "with": b,
                    "fines": cross[(a, b)],
                    "pairs_rounds": pairs,
                    "fines_per_pair_round": cross[(a, b)] / pairs if pairs else None,
                }
            )
    return rows, cp


def invader_effect(
    rounds: pd.DataFrame, agents: pd.DataFrame, invader: Mapping[str, Any], rounds_total: int
) -> dict[str, Any]:
    """The stock's recovery per society and the invader seat's final wealth against the residents'."""
    from cooplab.evals.recovery import recovery

    K, seat = int(invader["round"]), int(invader["agent"])
    soc_col = "replicate" if "replicate" in rounds.columns else "society"
    per = []
    for s, g in groups(rounds.sort_values("round"), soc_col):
        stock = column(g.set_index("round"), "R").reindex(range(1, int(column(g, "round").max()) + 1))
        per.append(
            {
                "society": int(s),
                **(
                    recovery(stock.to_numpy(), K)
                    if K <= len(stock)
                    else {"K": K, "recovered": None, "note": "ended before the event"}
                ),
            }
        )
    inv = as_frame(agents[agents["agent"] == seat])
    res = as_frame(agents[agents["agent"] != seat])
    recovered = [p.get("rounds_to_recover") for p in per if p.get("recovered")]
    return {
        "invader": dict(invader),
        "series": "fish stock R at the start of each round",
        "societies": per,
        "recovered_share": float(np.mean([bool(p.get("recovered")) for p in per])) if per else None,
        "mean_rounds_to_recover": float(np.mean(recovered)) if recovered else None,
        "mean_drop": float(np.mean([p["drop"] for p in per if p.get("drop") is not None])) if per else None,
        "invader_wealth": float(column(inv, "wealth").mean()) if len(inv) else None,
        "resident_wealth": float(column(res, "wealth").mean()) if len(res) else None,
        "payoff_basis": "final wealth of the invader's seat against the residents' mean (the seat's wealth before K "
        "included)",
    }


def report_lines(summary: Mapping[str, Any]) -> list[str]:
    """The report's lines of a mixed society and of an invasion (none for a run with neither)."""
    from cooplab.evals.recovery import recovery_text
    from cooplab.graphs.invaders import text

    lines = []
    for r in summary.get("by_model") or []:
        lines.append(
            f"model {r['model']} ({r['agents']} agents): catch {r['catch_per_agent']:.1f} per agent, fines given "
            f"{r['fines_given_per_agent']:.2f} / received {r['fines_received_per_agent']:.2f} per agent, norms "
            "proposed "
            f"{r['norms_proposed']}, adopted {r['norms_adopted']}, final wealth {_f(r['wealth_per_agent'])} per agent"
        )
    if summary.get("crossplay"):
        lines.append(
            "fines per pair of agents and round (row fines column): "
            + "; ".join(f"{c['model']} -> {c['with']} {_f(c['fines_per_pair_round'], 3)}" for c in summary["crossplay"])
        )
    inv = summary.get("invasion")
    if inv:
        lines.append(
            f"invader: {text(inv['invader'])}; recovered in {_f(inv['recovered_share'], 2)} of societies"
            f" (mean {_f(inv['mean_rounds_to_recover'], 1)} rounds), mean drop of the stock {_f(inv['mean_drop'], 1)}; "
            f"final wealth: invader {_f(inv['invader_wealth'])}, residents {_f(inv['resident_wealth'])}"
        )
        if len(inv["societies"]) == 1 and inv["societies"][0].get("pre_level") is not None:
            lines.append(recovery_text(inv["societies"][0], "stock"))
    return lines


def _f(x: Any, nd: int = 1) -> str:
    return "n/a" if x is None else f"{x:.{nd}f}"


def figures(summary: Mapping[str, Any], rounds: pd.DataFrame, where: Any) -> None:
    """``figures/by_model.png`` (a mixed society) and ``figures/invasion.png`` (an invader: the
    stock of each society around K, the first society's level and band)."""
    from pathlib import Path

    from cooplab.evals.plots_mix import by_model_figure, recovery_figure

    where = Path(where)
    if summary.get("by_model"):
        by_model_figure(
            summary["by_model"],
            [
                ("catch_per_agent", "catch per agent"),
                ("fines_given_per_agent", "fines given per agent"),
                ("fines_received_per_agent", "fines received per agent"),
                ("wealth_per_agent", "final wealth per agent"),
            ],
            "Outcomes per model in one society",
            where / "by_model.png",
        )
    inv = summary.get("invasion")
    if inv and inv["societies"] and inv["societies"][0].get("pre_level") is not None:
        soc_col = "replicate" if "replicate" in rounds.columns else "society"
        series = {f"society {s}": g.sort_values("round")["R"].to_numpy() for s, g in rounds.groupby(soc_col)}
        first = dict(list(series.items())[:6])
        recovery_figure(
            first,
            int(inv["invader"]["round"]),
            inv["societies"][0],
            "fish stock R",
            f"Stock around the invader ({inv['invader']['kind']}, round {inv['invader']['round']})",
            where / "invasion.png",
        )
