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

``settle`` computes the round's payoffs (:mod:`.payoffs`), appends the round's record to
``history`` and advances ``round``. Every random draw comes from ``phase_rng(seed, round, phase)``,
so a resumed run draws what the uninterrupted run drew.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, TypedDict

import numpy as np

from cooplab.graphs.context import CoopContext
from cooplab.graphs.nodes import is_async_policy, llm_node
from cooplab.graphs.rng import phase_rng
from cooplab.graphs.society import build_society
from cooplab.graphs.state import AppendLog
from cooplab.tasks.games import equilibria as eq
from cooplab.tasks.games import payoffs as pf
from cooplab.tasks.games.players import action_range

State = Mapping[str, Any]

#: the decision phase (node name) of each game
DECISION = {"weakest-link": "effort", "cpr": "extract", "cpr-sanction": "extract", "collective-risk": "contribute",
            "o-ring": "withdraw", "public-goods": "allocate"}


def small_int(hi: int) -> type:
    """The smallest signed integer type holding 0..hi (actions and sanctions are checkpointed every round)."""
    return np.int8 if hi <= 127 else np.int16 if hi <= 32_767 else np.int32


class GameState(TypedDict, total=False):
    seed: int
    round: int  # the round being played (1-based); > max_round once the run is over
    max_round: int
    simulations: int  # S
    group: np.ndarray  # (N,) group index of each player (players numbered group by group)
    action: np.ndarray  # (S, N) this round's actions (Public Goods: (S, N, 3) keep, group, global)
    stage_payoff: np.ndarray  # (S, N) CPR with sanctioning: the extraction stage's payoff (what sanctioners see)
    sanction: np.ndarray  # (S, N, N) CPR with sanctioning: tokens i spends on j this round
    dropped: np.ndarray  # (S,) sanction tokens aimed outside the group or at oneself (refused)
    history: AppendLog  # one record per round
    # LLM players: decision rows, the ledger's audit trail, deliberation messages
    decisions: AppendLog
    ledger: AppendLog
    messages: AppendLog


def init_state(P: Any, seed: int) -> dict[str, Any]:
    """The state of a new run of ``P.simulations`` simulations of the game ``P.GAME``."""
    return {"seed": int(seed), "round": 1, "max_round": P.rounds, "simulations": P.simulations, "group": eq.groups_of(P),
            "history": [], "decisions": [], "ledger": [], "messages": []}


# --- decision nodes -----------------------------------------------------------------------------------
class ActionError(ValueError):
    """A policy returned actions outside the game's rules (a bug in a reference policy: LLM answers
    are validated, retried and fall back before they reach a node)."""


def check_actions(P: Any, state: State, value: Any) -> np.ndarray:
    """``value`` as an (S, N) (Public Goods: (S, N, 3)) integer array within the game's rules."""
    S, N = state["simulations"], len(state["group"])
    shape = (S, N, 3) if P.GAME == "public-goods" else (S, N)
    a = np.asarray(value)
    if a.shape != shape:
        raise ActionError(f"{DECISION[P.GAME]}: expected actions of shape {shape}, got {a.shape}")
    if not np.issubdtype(a.dtype, np.integer):
        if not np.all(np.isfinite(a)) or not np.all(a == np.round(a)):
            raise ActionError(f"{DECISION[P.GAME]}: actions must be integers")
    a = a.astype(np.int64)
    hi = action_range(P)
    if a.min(initial=0) < 0 or a.max(initial=0) > hi:
        raise ActionError(f"{DECISION[P.GAME]}: actions must be in 0..{hi}, got {a.min()}..{a.max()}")
    if P.GAME == "public-goods" and not np.all(a.sum(axis=-1) == P.endowment):
        raise ActionError(f"allocate: keep + group + global must equal the endowment {P.endowment}")
    return a.astype(small_int(hi))


def clean_sanctions(P: Any, state: State, value: Any) -> dict[str, np.ndarray]:
    """Sanctions (S, N, N) with everything outside one's own group (and on oneself) dropped: an
    out-of-group sanction is impossible. Negative tokens or more than ``max_sanction`` in total per
    sanctioner are a policy error."""
    S, N = state["simulations"], len(state["group"])
    s = np.asarray(value)
    if s.shape != (S, N, N):
        raise ActionError(f"sanction: expected sanctions of shape {(S, N, N)}, got {s.shape}")
    if not np.issubdtype(s.dtype, np.integer) and (not np.all(np.isfinite(s)) or not np.all(s == np.round(s))):
        raise ActionError("sanction: tokens must be integers")
    if s.size and (s.min() < 0 or s.max() > P.max_sanction):
        raise ActionError(f"sanction: tokens must be in 0..max_sanction = {P.max_sanction}")
    dt = small_int(P.max_sanction)
    s = s.astype(dt, copy=False)
    kept = np.where(pf.same_group(state["group"]), s, dt(0))
    given = kept.sum(axis=-1, dtype=np.int64)
    if given.size and given.max() > P.max_sanction:
        raise ActionError(f"sanction: a player may spend at most max_sanction = {P.max_sanction} tokens per round")
    return {"sanction": kept, "dropped": s.sum(axis=(1, 2), dtype=np.int64) - given.sum(axis=1)}


def decision_node(phase: str, policy: Callable, apply: Callable[[State, Any], dict]) -> Callable[..., Any]:
    """A decision phase's node: ``policy`` is a reference policy ``(state, rng) -> value`` or an LLM
    policy (async, through ``llm_node``); ``apply(state, value)`` checks the value and returns the
    node's update, the same for both."""
    if is_async_policy(policy):
        return llm_node(phase, policy, apply)

    def node(state: State) -> dict:
        return apply(state, policy(state, phase_rng(state["seed"], state["round"], phase)))

    node.__name__ = phase
    return node


def decide_apply(P: Any) -> Callable[[State, Any], dict]:
    def apply(state: State, value: Any) -> dict:
        a = check_actions(P, state, value)
        out: dict[str, Any] = {"action": a}
        if P.GAME == "cpr-sanction":  # what the sanctioners see: the extraction stage's payoffs
            out["stage_payoff"] = pf.cpr(a, capacity=P.capacity, multiplier=P.multiplier)
        return out

    return apply


def sanction_apply(P: Any) -> Callable[[State, Any], dict]:
    return lambda state, value: clean_sanctions(P, state, value)


# --- settle ---------------------------------------------------------------------------------------------
def round_outcome(P: Any, state: State) -> dict[str, Any]:
    """This round's payoffs and outcomes (the record's fields besides round and action)."""
    a, g = state["action"], state["group"]
    game = P.GAME
    if game == "weakest-link":
        return {"payoff": pf.weakest_link(a, min_weight=P.min_weight, effort_cost=P.effort_cost)}
    if game == "cpr":
        return {"payoff": pf.cpr(a, capacity=P.capacity, multiplier=P.multiplier)}
    if game == "cpr-sanction":
        r = pf.cpr_sanction(a, state["sanction"], g, capacity=P.capacity, multiplier=P.multiplier, sanction_cost=P.sanction_cost,
                            sanction_damage=P.sanction_damage)
        return {"payoff": r["payoff"], "cpr_payoff": r["cpr_payoff"], "sanction": state["sanction"], "dropped": state["dropped"]}
    if game == "o-ring":
        r = pf.o_ring(a, g, pool=P.pool, max_withdraw=P.max_withdraw, scale=P.scale, success_threshold=P.success_threshold,
                      reward=P.reward, withdraw_cost=P.withdraw_cost)
        return {"payoff": r["payoff"], "production": r["production"], "success": r["success"]}
    if game == "public-goods":
        r = pf.public_goods(a, g, group_multiplier=P.group_multiplier, global_multiplier=P.global_multiplier)
        return {"payoff": r["payoff"], "group_pools": r["group_pools"], "global_pool": r["global_pool"]}
    raise ValueError(f"round_outcome: {game!r} is settled by collective_risk_settle")


def settle_node(P: Any) -> Callable[[State], dict]:
    """Payoffs of the round, the round's record, the next round."""

    def settle(state: State) -> dict:
        t = int(state["round"])
        rec: dict[str, Any] = {"round": t, "action": state["action"]}
        if P.GAME == "collective-risk":
            hist = state.get("history") or []
            before = hist[-1]["total"] if hist else 0
            rec["total"] = before + state["action"].sum(axis=1, dtype=np.int64)  # everyone's contributions so far
            if t == int(state["max_round"]):  # the end of the game: threshold and risk
                done = np.stack([h["action"] for h in hist] + [state["action"]], axis=1)  # (S, R, N)
                u = phase_rng(state["seed"], t, "risk").random(state["simulations"])
                r = pf.collective_risk(done, u, endowment=P.endowment, threshold=P.threshold, loss_probability=P.loss_probability)
                rec.update(payoff=r["payoff"], expected_payoff=r["expected_payoff"], met=r["met"], lost=r["lost"])
            else:  # payoffs are paid at the end of round R
                zero = np.zeros(state["action"].shape)
                rec.update(payoff=zero, expected_payoff=zero)
        else:
            rec.update(round_outcome(P, state))
        return {"history": [rec], "round": t + 1}

    return settle


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
    return build_society(game_phases(P, policies), GameState, checkpointer=checkpointer, name=f"game:{P.GAME}",
                         context_schema=CoopContext)


def run_game(P: Any, policies: Mapping[str, Callable], seed: int = 0, *, checkpointer: Any = None) -> dict[str, Any]:
    """Run a game to the end in one graph invocation (no run directory); the final state."""
    graph = build_game_graph(P, policies, checkpointer=checkpointer)
    state = init_state(P, seed)
    cfg = {"configurable": {"thread_id": P.GAME}, "recursion_limit": P.rounds * (len(graph.nodes) + 1) + 10}
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
    view: dict[str, Any] = {"round": int(record["round"]), "you": int(player), "your_action": a[player].tolist(),
                            "group_actions": {int(j): a[j].tolist() for j in mine}}
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
