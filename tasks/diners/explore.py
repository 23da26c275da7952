"""The diners run's page in the explorer (the task's ``explore`` hook): one society of the run's
batch (``?society=KEY``), the strategies over iterations, every diner's orders and scores, who
punished whom; one iteration (``?round=R``) or one diner across iterations (``?agent=ID``). And its
key numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cooplab.evals.explorer.views.common import Spec, agents_by_round, fines, pick_society, society_picker, with_society
from cooplab.evals.explorer.views.societies import agent_focus, known, natural_key, page, round_focus, rows_of
from cooplab.evals.values import cut, fmt
from cooplab.graphs import explore as ex

DINERS = Spec(
    noun="Diner", society=("condition", "replicate"), round="iteration", agent="agent", round_unit="iteration"
)


def view(run: Any, query: Mapping[str, str]) -> list[ex.Section]:
    util = with_society(run.table("utilities"), DINERS)
    orders = with_society(run.table("orders"), DINERS)
    pun = with_society(run.table("punishments"), DINERS)
    counts = with_society(run.table("strategy_counts"), DINERS)
    base = next((d for d in (util, orders, counts) if d is not None), None)
    keys = sorted(set(base["_society"]), key=natural_key) if base is not None else []
    chosen = pick_society(keys, query)
    keep = {"society": chosen} if len(keys) > 1 else {}
    u, o, p, c = (rows_of(d, "_society", chosen) for d in (util, orders, pun, counts))
    if u is not None and o is not None and len(o):
        u = u.merge(o[["iteration", "agent", "venue", "order"]], on=["iteration", "agent"], how="left")

    state: list[ex.Block] = society_picker(keys, chosen, "society")
    if c is not None and len(c):
        strat = [k for k in ("P", "R1", "E", "M", "D") if k in c.columns]
        state.append(
            ex.Plot(
                c["iteration"].tolist(),
                {k: c[k].tolist() for k in strat},
                title="strategies in the society",
                xlabel="iteration",
                ylabel="diners",
                key="strategies",
                caption="diners playing each strategy after each iteration (P, R1, E, M, D as in the paper)",
            )
        )
    agent_blocks: list[ex.Block] = []
    if u is not None and len(u):
        agent_blocks = agents_by_round(
            u,
            DINERS,
            [
                "group",
                "strategy",
                "venue",
                "order",
                "meal_utility",
                "punishments_given",
                "punishments_received",
                "utility",
                "score",
            ],
            title="every diner, every iteration",
            key_prefix="diners",
            plots=["score"],
            keep=keep,
        )
    pairs = (
        [
            {"round": r["iteration"], "punisher": r["punisher"], "target": r["target"], "stage": r.get("stage")}
            for _, r in p.iterrows()
        ]
        if p is not None
        else []
    )
    punish: list[ex.Block] = (
        fines(pairs, DINERS, verb="punished", keep=keep) if p is not None else [ex.Note("no punishments table")]
    )
    body: list[ex.Section | None] = [
        ex.Section("The society", state, id="state"),
        ex.Section("Diners by iteration", agent_blocks, id="agents"),
        ex.Section("Punishments: who punished whom", punish, id="fines"),
    ]
    focus = [
        round_focus(run, query, DINERS, u, pairs, keep, "punished"),
        agent_focus(run, query, DINERS, u, pairs, keep, "punished"),
    ]
    return page(run, key_numbers(run.summary), focus, body)


def key_numbers(summary: Mapping[str, Any]) -> dict[str, Any]:
    """Iterations, and the final share of each strategy, the cost."""
    shares = summary.get("final_shares")
    text = (
        ", ".join(f"{cut(str(k), 10)} {fmt(v)}" for k, v in list(shares.items())[:8])
        if isinstance(shares, Mapping)
        else None
    )
    return known({"iterations": summary.get("iterations_completed"), "final shares": text}, summary)
