"""Per-model outcomes of a Diner's Dilemma society of LLM diners of several models, its cross-play
table, and an invader's effect. Everything is read from the run's iteration records (``history``:
orders, punishments, utilities, scores, strategies; the first society's seats are every
replicate's seats) and the stored LLM block (who used which model, :func:`cooplab.agents.mix.model_of`).

- ``by_model`` (one row per model): diners, the share of their orders that were the premium meal
  (``premium_share``; the defection rate), punishments given and received per diner and iteration
  (stages 2 and 3 together), mean utility per iteration, the final score pi per diner, and the
  share of its diners' orders and punishment decisions that followed their strategy
  (``decision_accuracy``, ``punishment_accuracy``; from the decisions, None when there are none);
- ``crossplay`` (one row per ordered pair of models A, B): punishments diners of A gave diners of
  B per pair of such diners of one group (self excluded) and iteration (``pairs``: how many such
  pairs the groups hold; 0 when the draw put no such pair in one group), and the premium share of
  the A diners that shared a group with a B diner.

An invader (``params.invader``): the residents' budget share per iteration (the cooperation rate,
the invader's seat left out, over every replicate) and its recovery (:mod:`cooplab.evals.recovery`),
and the invader's mean utility per iteration from K on against the residents'.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from cooplab.agents.mix import model_of


def models_by_agent(llm: Mapping[str, Any] | None, n_agents: int) -> dict[int, str]:
    return {a: model_of(dict(llm or {}), a) for a in range(n_agents)}


def is_mixed(llm: Mapping[str, Any] | None, n_agents: int) -> bool:
    return llm is not None and len(set(models_by_agent(llm, n_agents).values())) > 1


def _num(x: Any) -> float | None:
    x = float(x)
    return x if np.isfinite(x) else None


def _stack(history: Sequence[Mapping[str, Any]], key: str) -> np.ndarray:
    return np.stack([np.asarray(h[key]) for h in history])


def _active(history: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """(T, S) whether each society played each iteration."""
    return _stack(history, "active").astype(bool)


def per_model(
    history: Sequence[Mapping[str, Any]],
    group: np.ndarray,
    decisions: Sequence[Mapping[str, Any]],
    llm: Mapping[str, Any],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(by_model rows, crossplay rows) of a run (see the module); ``group`` is (S, N)."""
    defect = _stack(history, "defect").astype(bool)  # (T, S, N)
    p1, p2 = _stack(history, "punish1").astype(int), _stack(history, "punish2").astype(int)  # (T, S, N, N)
    pun = p1 + p2
    util, score = _stack(history, "utility").astype(float), _stack(history, "score").astype(float)
    act = _active(history)  # (T, S)
    T, S, N = defect.shape
    models = models_by_agent(llm, N)
    names = list(dict.fromkeys(models.values()))
    g = np.asarray(group)[0]
    plays = act.sum()  # society-iterations played
    rows = []
    for name in names:
        seats = [a for a in range(N) if models[a] == name]
        k = len(seats) * plays
        mine = [d for d in decisions if isinstance(d, Mapping) and str(d.get("agent")) in {str(a) for a in seats}]
        acc = {}
        for key, phases in (("decision_accuracy", ("order",)), ("punishment_accuracy", ("punish", "metanorm"))):
            ds = [bool(d.get("accurate")) for d in mine if d.get("phase") in phases]
            acc[key] = sum(ds) / len(ds) if ds else None
        rows.append(
            {
                "model": name,
                "diners": len(seats),
                "premium_share": _num(defect[:, :, seats][act].mean()) if k else None,
                "punishments_given_per_iteration": _num(pun[:, :, seats, :].sum(axis=-1)[act].sum() / k) if k else None,
                "punishments_received_per_iteration": _num(pun[:, :, :, seats].sum(axis=-2)[act].sum() / k)
                if k
                else None,
                "utility_per_iteration": _num(util[:, :, seats][act].mean()) if k else None,
                "final_score": _num(score[-1][:, seats].mean()),
                **acc,
            }
        )
    cross = []
    for a in names:
        for b in names:
            pairs = [
                (i, j)
                for i in range(N)
                for j in range(N)
                if i != j and g[i] == g[j] and models[i] == a and models[j] == b
            ]
            n = len(pairs) * plays
            given = sum(int(pun[:, :, i, j][act].sum()) for i, j in pairs)
            firsts = sorted({i for i, _ in pairs})
            cross.append(
                {
                    "model": a,
                    "with": b,
                    "pairs": len(pairs),
                    "punishments": given,
                    "punishments_per_pair_iteration": given / n if n else None,
                    "premium_share": _num(defect[:, :, firsts][act].mean()) if firsts and plays else None,
                }
            )
    return rows, cross


def invader_effect(history: Sequence[Mapping[str, Any]], invader: Mapping[str, Any]) -> dict[str, Any]:
    """The residents' budget share around K, its recovery, and the invader's utility against theirs."""
    from cooplab.evals.recovery import recovery

    K, seat = int(invader["round"]), int(invader["agent"])
    defect = _stack(history, "defect").astype(bool)
    util = _stack(history, "utility").astype(float)
    act = _active(history)
    T, S, N = defect.shape
    residents = [a for a in range(N) if a != seat]
    series = [_num((~defect[t][:, residents])[act[t]].mean()) if act[t].any() else None for t in range(T)]
    out: dict[str, Any] = {
        "invader": dict(invader),
        "series": "residents' budget share per iteration (the cooperation rate; the invader's seat left out)",
    }
    if K <= T:
        y = np.array([np.nan if v is None else v for v in series])
        out["recovery"] = recovery(y, K, direction="up")
        later = act[K - 1 :]
        out["invader_utility_per_iteration"] = _num(util[K - 1 :, :, seat][later].mean()) if later.any() else None
        out["resident_utility_per_iteration"] = (
            _num(util[K - 1 :][:, :, residents][later].mean()) if later.any() else None
        )
        strat = _stack(history, "strategy")
        kind = int(strat[-1][0, seat])
        out["residents_adopting_invader_strategy"] = _num((strat[-1][:, residents] == kind).mean())
    else:
        out["recovery"] = {"K": K, "recovered": None, "note": "the run ended before the event"}
    out["residents_budget_share_by_iteration"] = series
    return out


def report_lines(summary: Mapping[str, Any]) -> list[str]:
    """The report's lines of diners of several models and of an invasion (none otherwise)."""
    from cooplab.evals.recovery import recovery_text
    from cooplab.graphs.invaders import text

    def f(x: Any, nd: int = 3) -> str:
        return "n/a" if x is None else f"{x:.{nd}f}"

    lines = [
        f"model {r['model']} ({r['diners']} diners): premium share {f(r['premium_share'])}, punishments given "
        f"{f(r['punishments_given_per_iteration'])} / received {f(r['punishments_received_per_iteration'])} per "
        "iteration, "
        f"utility {f(r['utility_per_iteration'])} per iteration, final score {f(r['final_score'], 2)}"
        for r in summary.get("by_model") or []
    ]
    if summary.get("crossplay"):
        lines.append(
            "punishments per pair of one group and iteration (row punishes column): "
            + "; ".join(
                f"{c['model']} -> {c['with']} {f(c['punishments_per_pair_iteration'])} ({c['pairs']} pairs)"
                for c in summary["crossplay"]
            )
        )
    inv = summary.get("invasion")
    if inv:
        lines.append(
            f"invader: {text(inv['invader'])}; utility per iteration from K: invader "
            f"{f(inv.get('invader_utility_per_iteration'))}, residents {f(inv.get('resident_utility_per_iteration'))}"
        )
        lines.append(recovery_text(inv["recovery"], "residents' budget share").replace("round", "iteration"))
    return lines


def figures(summary: Mapping[str, Any], where: Any) -> None:
    """``figures/by_model.png`` (diners of several models) and ``figures/invasion.png`` (an invader)."""
    from pathlib import Path

    from cooplab.evals.plots_mix import by_model_figure, recovery_figure

    where = Path(where)
    if summary.get("by_model"):
        by_model_figure(
            summary["by_model"],
            [
                ("premium_share", "premium share"),
                ("punishments_given_per_iteration", "punishments given per iteration"),
                ("utility_per_iteration", "utility per iteration"),
            ],
            "Diner's Dilemma: outcomes per model",
            where / "by_model.png",
        )
    inv = summary.get("invasion")
    if inv and inv.get("recovery", {}).get("pre_level") is not None:
        y = [np.nan if v is None else v for v in inv["residents_budget_share_by_iteration"]]
        recovery_figure(
            {"residents": y},
            int(inv["invader"]["round"]),
            inv["recovery"],
            "residents' budget share",
            f"Diner's Dilemma: residents around the invader ({inv['invader']['kind']})",
            where / "invasion.png",
        )
