"""Per-model outcomes of a game played by players of several models, its cross-play table, and an
invader's effect.

- ``by_model`` (one row per model): players, the mean primary metric of its players (their
  contribution, extraction, effort, ...), its Pareto proximity (the game's reference applied to
  that mean: 0 = Pareto, 1 = Nash or further), the mean payoff per round;
- ``crossplay`` (one row per ordered pair of models A, B): over every pair of distinct players of
  one group with the first of A and the second of B, the first's mean metric and payoff per round
  (``pairs``: how many such pairs a simulation has; 0 when the assignment put no such pair in one
  group).

An invader: the residents' mean metric per round (the invader's seat left out) and its recovery
(:mod:`cooplab.evals.recovery`; ``direction`` from the game: down where less is more cooperative,
CPR extraction and O-Ring withdrawal), and the invader's mean payoff per round from K on against
the residents'.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from cooplab.agents.mix import model_of
from cooplab.tasks.games import equilibria as eq
from cooplab.tasks.games.metrics import metric_of


def _arrays(P: Any, history: Sequence[Mapping[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    """(rounds, S, N) metric and payoff per player."""
    m = np.stack([metric_of(P.GAME, h["action"]).astype(float) for h in history])
    pay = np.stack([np.asarray(h["payoff"], dtype=float) for h in history])
    return m, pay


def _num(x: Any) -> float | None:
    x = float(x)
    return x if np.isfinite(x) else None


def per_model(
    P: Any, history: Sequence[Mapping[str, Any]], llm: Mapping[str, Any]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    N = P.n_players
    models = {a: model_of(dict(llm), a) for a in range(N)}
    names = list(dict.fromkeys(models.values()))
    m, pay = _arrays(P, history)
    ref = eq.reference(P)
    group = eq.groups_of(P)
    rows = []
    for name in names:
        seats = [a for a in range(N) if models[a] == name]
        mean = m[:, :, seats].mean()
        rows.append(
            {
                "model": name,
                "players": len(seats),
                "metric": _num(mean),
                "proximity": _num(ref.proximity(mean)),
                "payoff_per_round": _num(pay[:, :, seats].mean()),
            }
        )
    cross = []
    for a in names:
        for b in names:
            pairs = [
                (i, j)
                for i in range(N)
                for j in range(N)
                if i != j and group[i] == group[j] and models[i] == a and models[j] == b
            ]
            firsts = [i for i, _ in pairs]
            cross.append(
                {
                    "model": a,
                    "with": b,
                    "pairs": len(pairs),
                    "metric": _num(m[:, :, firsts].mean()) if pairs else None,
                    "payoff_per_round": _num(pay[:, :, firsts].mean()) if pairs else None,
                }
            )
    return rows, cross


#: games where a lower metric is the cooperative side (recovery reads them downwards)
LOWER_IS_BETTER = ("cpr", "cpr-sanction", "o-ring")


def invader_effect(P: Any, history: Sequence[Mapping[str, Any]], invader: Mapping[str, Any]) -> dict[str, Any]:
    from cooplab.evals.recovery import recovery

    K, seat = int(invader["round"]), int(invader["agent"])
    m, pay = _arrays(P, history)
    residents = [a for a in range(P.n_players) if a != seat]
    series = m[:, :, residents].mean(axis=(1, 2))
    out: dict[str, Any] = {
        "invader": dict(invader),
        "series": "residents' mean metric per round (the invader's seat left out)",
    }
    if K <= len(series):
        out["recovery"] = recovery(series, K, direction="down" if P.GAME in LOWER_IS_BETTER else "up")
        out["invader_payoff_per_round"] = _num(pay[K - 1 :, :, seat].mean())
        out["resident_payoff_per_round"] = _num(pay[K - 1 :, :, residents].mean())
    else:
        out["recovery"] = {"K": K, "recovered": None, "note": "the run ended before the event"}
    out["residents_metric_by_round"] = [_num(x) for x in series]
    return out


def report_lines(summary: Mapping[str, Any]) -> list[str]:
    """The report's lines of players of several models and of an invasion (none otherwise)."""
    from cooplab.evals.recovery import recovery_text
    from cooplab.graphs.invaders import text

    def f(x: Any, nd: int = 3) -> str:
        return "n/a" if x is None else f"{x:.{nd}f}"

    lines = [
        f"model {r['model']} ({r['players']} players): metric {f(r['metric'])}, proximity {f(r['proximity'])}, payoff "
        f"{f(r['payoff_per_round'])} per round"
        for r in summary.get("by_model") or []
    ]
    if summary.get("crossplay"):
        lines.append(
            "cross-play, metric of the first with the second in one group: "
            + "; ".join(
                f"{c['model']} with {c['with']} {f(c['metric'])} ({c['pairs']} pairs)" for c in summary["crossplay"]
            )
        )
    inv = summary.get("invasion")
    if inv:
        lines.append(
            f"invader: {text(inv['invader'])}; payoff per round from K: invader "
            f"{f(inv.get('invader_payoff_per_round'))}, "
            f"residents {f(inv.get('resident_payoff_per_round'))}"
        )
        lines.append(recovery_text(inv["recovery"], "residents' metric"))
    return lines


def figures(summary: Mapping[str, Any], where: Any) -> None:
    """``figures/by_model.png`` (players of several models) and ``figures/invasion.png`` (an invader)."""
    from pathlib import Path

    from cooplab.evals.plots_mix import by_model_figure, recovery_figure

    where = Path(where)
    if summary.get("by_model"):
        by_model_figure(
            summary["by_model"],
            [
                ("metric", "mean metric"),
                ("proximity", "Pareto proximity (0 = Pareto)"),
                ("payoff_per_round", "payoff per round"),
            ],
            f"{summary.get('game')}: outcomes per model",
            where / "by_model.png",
        )
    inv = summary.get("invasion")
    if inv and inv.get("recovery", {}).get("pre_level") is not None:
        recovery_figure(
            {"residents": inv["residents_metric_by_round"]},
            int(inv["invader"]["round"]),
            inv["recovery"],
            "residents' mean metric",
            f"{summary.get('game')}: residents around the invader ({inv['invader']['kind']})",
            where / "invasion.png",
        )
