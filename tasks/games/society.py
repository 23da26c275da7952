"""The six games as LangGraph graphs: one node per phase of a round, ``S`` simulations side by
side as numpy arrays, built with :func:`cooplab.graphs.society.build_society`::

    weakest-link      effort   -> settle
    cpr               extract  -> settle
    cpr-sanction      extract  -> sanction -> settle
    collective-risk   contribute -> settle        (the risk is resolved in round R's settle)
    o-ring            withdraw -> settle
    public-goods      allocate -> settle

then back to the first node while ``round <= max_round``, else END. The decision nodes
(``effort``, ``extract``, ``contribute``, ``withdraw``, ``allocate`` and ``sanction``) each have a
policy slot: a reference policy ``(state, rng) -> array`` (:mod:`.players`) or an LLM policy
(async ``(state, rng, context, config) -> PolicyResult``); :func:`decision_node` wraps either, as
the CPR and diners societies do (``is_async_policy`` / ``llm_node``), and applies the same checks
to both: actions in range, Public Goods allocations adding up to the endowment, sanctions only
within one's own group (anything else aimed outside the group or at oneself is dropped and
counted). LLM players' optional deliberation (``--deliberation``) is one more node, ``deliberate``,
before the decision node, writing messages to the ``messages`` ``AppendLog``.

``settle`` computes the round's payoffs (:mod:`.model`), appends the round's record to
``history`` and advances ``round``. Every random draw comes from ``phase_rng(seed, round, phase)``,
so a resumed run draws what the uninterrupted run drew.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from langchain_core.runnables import RunnableConfig

from cooplab.graphs.context import CoopContext
from cooplab.graphs.society import build_society
from cooplab.tasks.games import equilibria as eq
from cooplab.tasks.games.phases import DECISION, decide_apply, decision_node, sanction_apply, settle_node
from cooplab.tasks.games.state import GameState


def init_state(P: Any, seed: int) -> dict[str, Any]:
    """The state of a new run of ``P.simulations`` simulations of the game ``P.GAME``."""
    return {
        "seed": int(seed),
        "round": 1,
        "max_round": P.rounds,
        "simulations": P.simulations,
        "group": eq.groups_of(P),
        "history": [],
        "decisions": [],
        "ledger": [],
        "messages": [],
    }


# --- the graph ------------------------------------------------------------------------------------------
def game_phases(P: Any, policies: Mapping[str, Callable]) -> "OrderedDict[str, Callable]":
    """The ordered nodes of one round of ``P.GAME``; ``policies`` fills the policy slots:
    ``decide`` (every game), ``sanction`` (CPR with sanctioning) and optionally ``deliberate``
    (LLM players' within-group messages before the decision)."""
    nodes: OrderedDict[str, Callable] = OrderedDict()
    if policies.get("deliberate") is not None:  # LLM players with --deliberation: messages to the group first
        nodes["deliberate"] = decision_node("deliberate", policies["deliberate"], lambda state, value: {})
    nodes[DECISION[P.GAME]] = decision_node(DECISION[P.GAME], policies["decide"], decide_apply(P))
    if P.GAME == "cpr-sanction":
        nodes["sanction"] = decision_node("sanction", policies["sanction"], sanction_apply(P))
    nodes["settle"] = settle_node(P)
    return nodes


def build_game_graph(P: Any, policies: Mapping[str, Callable], *, checkpointer: Any = None):
    return build_society(
        game_phases(P, policies),
        GameState,
        checkpointer=checkpointer,
        name=f"game:{P.GAME}",
        context_schema=CoopContext,
    )


def run_game(P: Any, policies: Mapping[str, Callable], seed: int = 0, *, checkpointer: Any = None) -> dict[str, Any]:
    """Run a game to the end in one graph invocation (no run directory); the final state."""
    graph = build_game_graph(P, policies, checkpointer=checkpointer)
    state = init_state(P, seed)
    cfg: RunnableConfig = {
        "configurable": {"thread_id": P.GAME},
        "recursion_limit": P.rounds * (len(graph.nodes) + 1) + 10,
    }
    return graph.invoke(state, cfg)


# --- what a player sees ---------------------------------------------------------------------------------
def visible_sanctions(sanction: np.ndarray, group: np.ndarray, viewer: int) -> list[tuple[int, int, int]]:
    """The sanctions (sanctioner, target, tokens) of one simulation's round that player ``viewer``
    sees: those inside its own group only (§3.1.1: "Sanctions are only visible within groups")."""
    g = np.asarray(group)
    mine = np.nonzero(g == g[viewer])[0]
    return [(int(i), int(j), int(sanction[i, j])) for i in mine for j in mine if sanction[i, j] > 0]


def round_view(P: Any, record: Mapping[str, Any], group: np.ndarray, sim: int, player: int) -> dict[str, Any]:
    """What ``player`` of simulation ``sim`` learns about one finished round (the basis of the
    history LLM players will be shown): its own action and payoff, its group's actions, and the
    aggregates of the whole population its payoff depends on; sanctions only within its group."""
    g = np.asarray(group)
    mine = np.nonzero(g == g[player])[0]
    a = np.asarray(record["action"])[sim]
    view: dict[str, Any] = {
        "round": int(record["round"]),
        "you": int(player),
        "your_action": a[player].tolist(),
        "group_actions": {int(j): a[j].tolist() for j in mine},
    }
    if "payoff" in record:
        view["your_payoff"] = float(np.asarray(record["payoff"])[sim, player])
    game = P.GAME
    if game == "weakest-link":
        view["minimum_effort"] = int(a.min())
    elif game in ("cpr", "cpr-sanction"):
        view["total_extracted"] = int(a.sum())
        view["pool_remaining"] = max(0, int(P.capacity - a.sum()))
        if game == "cpr-sanction":
            view["sanctions"] = visible_sanctions(np.asarray(record["sanction"])[sim], g, player)
    elif game == "collective-risk":
        view["total_contributed"] = int(np.asarray(record["total"])[sim])
        if "met" in record:
            view["threshold_met"] = bool(np.asarray(record["met"])[sim])
            view["savings_lost"] = bool(np.asarray(record["lost"])[sim])
    elif game == "o-ring":
        view["pool_remaining"] = max(0, int(P.pool - a.sum()))
        view["production"] = [round(float(x), 6) for x in np.asarray(record["production"])[sim]]
        view["success"] = bool(np.asarray(record["success"])[sim])
    elif game == "public-goods":
        view["your_group_pool"] = int(np.asarray(record["group_pools"])[sim, g[player]])
        view["global_pool"] = int(np.asarray(record["global_pool"])[sim])
    return view
