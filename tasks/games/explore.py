"""A game run's page in the explorer (the task's ``explore`` hook): one simulation (``?society=KEY``),
the game's metric and Pareto proximity by round, every player's actions and payoffs, who sanctioned
whom; one round (``?round=R``) or one player across rounds (``?agent=ID``). And its key numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cooplab.evals.explorer.views.common import Spec, agents_by_round, fines, pick_society, society_picker, with_society
from cooplab.evals.explorer.views.societies import (
    KEYS,
    agent_focus,
    known,
    natural_key,
    page,
    round_focus,
    rows_of,
    value_at,
)
from cooplab.evals.values import dig
from cooplab.graphs import explore as ex

GAME = Spec(noun="Player", society=("simulation",), round="round", agent="player")


def view(run: Any, query: Mapping[str, str]) -> list[ex.Section]:
    players = with_society(run.table("players"), GAME)
    rounds = with_society(run.table("rounds"), GAME)
    sanc = with_society(run.table("sanctions"), GAME)
    base = players if players is not None else rounds
    keys = sorted(set(base["_society"]), key=natural_key) if base is not None else []
    chosen = pick_society(keys, query)
    keep = {"society": chosen} if len(keys) > 1 else {}
    pl, rd, sc = (rows_of(d, "_society", chosen) for d in (players, rounds, sanc))
    game = run.summary.get("game") or dig(run.config, "params.game") or "game"
    metric = dig(run.summary, "metric.label") or "metric"

    state: list[ex.Block] = society_picker(keys, chosen, "simulation")
    if rounds is not None and len(rounds):
        sims = sorted(set(rounds["_society"]), key=natural_key)[:12]
        xs = sorted(set(rounds["round"].tolist()))
        series = {
            f"simulation {k}": [value_at(rounds[rounds["_society"] == k], "round", x, "metric") for x in xs]
            for k in sims
        }
        state.append(
            ex.Plot(
                xs,
                series,
                title=f"{game}: {metric} by round",
                xlabel="round",
                ylabel=str(metric),
                key="metric",
                caption=f"one line per simulation (first {len(sims)}); summary.json gives the Nash and Pareto values",
            )
        )
        if "proximity" in rounds.columns:
            state.append(
                ex.Plot(
                    xs,
                    {
                        f"simulation {k}": [
                            value_at(rounds[rounds["_society"] == k], "round", x, "proximity") for x in xs
                        ]
                        for k in sims
                    },
                    title="distance from the Pareto outcome (0: Pareto, 1: Nash or beyond)",
                    xlabel="round",
                    ylabel="proximity",
                    key="proximity",
                )
            )
    if rd is not None and len(rd):
        state.append(
            ex.Table(
                rd.drop(columns=["_society"]),
                title=f"simulation {chosen}, round by round",
                links={"round": "round"},
                keep=keep,
            )
        )
    agent_blocks: list[ex.Block] = []
    if pl is not None and len(pl):
        values = [c for c in pl.columns if c not in ("simulation", "round", "player", *KEYS, "_society")]
        action = next((c for c in values if c not in ("group", "payoff", "fallback")), None)
        agent_blocks = agents_by_round(
            pl,
            GAME,
            values,
            title="every player, every round",
            key_prefix="game",
            plots=[c for c in (action, "payoff") if c],
            keep=keep,
        )
    pairs = (
        [
            {"round": r["round"], "punisher": r["sanctioner"], "target": r["target"], "tokens": r.get("tokens")}
            for _, r in sc.iterrows()
        ]
        if sc is not None
        else []
    )
    body: list[ex.Section | None] = [
        ex.Section("The game", state, id="state"),
        ex.Section("Players by round", agent_blocks, id="agents"),
    ]
    if sanc is not None:
        body.append(
            ex.Section(
                "Sanctions: who sanctioned whom",
                fines(pairs, GAME, verb="sanctioned", amount="tokens", keep=keep),
                id="fines",
            )
        )
    focus = [
        round_focus(run, query, GAME, pl, pairs, keep, "sanctioned"),
        agent_focus(run, query, GAME, pl, pairs, keep, "sanctioned"),
    ]
    return page(run, key_numbers(run.summary), focus, body)


def key_numbers(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The game, its metric and the metric's mean, the Pareto proximity, the cost."""
    raw = summary.get("metric")
    metric: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    return known(
        {
            "game": summary.get("game"),
            "metric": metric.get("label") or metric.get("name"),
            "mean": metric.get("mean"),
            "Pareto proximity": dig(summary, "pareto_proximity.mean"),
        },
        summary,
    )
