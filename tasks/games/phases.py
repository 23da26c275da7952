"""The phase nodes of one round of a behavioral game: the decision nodes (a policy slot each,
with the checks every policy's answer must pass) and ``settle`` (the round's payoffs from
:mod:`.model`, its record, the next round). Which decision node a game has is :data:`DECISION`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from cooplab.graphs.nodes import is_async_policy, llm_node
from cooplab.graphs.rng import phase_rng
from cooplab.tasks.games import model as pf
from cooplab.tasks.games.players import action_range
from cooplab.tasks.games.state import State, small_int

#: the decision phase (node name) of each game
DECISION = {
    "weakest-link": "effort",
    "cpr": "extract",
    "cpr-sanction": "extract",
    "collective-risk": "contribute",
    "o-ring": "withdraw",
    "public-goods": "allocate",
}


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
        r = pf.cpr_sanction(
            a,
            state["sanction"],
            g,
            capacity=P.capacity,
            multiplier=P.multiplier,
            sanction_cost=P.sanction_cost,
            sanction_damage=P.sanction_damage,
        )
        return {
            "payoff": r["payoff"],
            "cpr_payoff": r["cpr_payoff"],
            "sanction": state["sanction"],
            "dropped": state["dropped"],
        }
    if game == "o-ring":
        r = pf.o_ring(
            a,
            g,
            pool=P.pool,
            max_withdraw=P.max_withdraw,
            scale=P.scale,
            success_threshold=P.success_threshold,
            reward=P.reward,
            withdraw_cost=P.withdraw_cost,
        )
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
                r = pf.collective_risk(
                    done, u, endowment=P.endowment, threshold=P.threshold, loss_probability=P.loss_probability
                )
                rec.update(payoff=r["payoff"], expected_payoff=r["expected_payoff"], met=r["met"], lost=r["lost"])
            else:  # payoffs are paid at the end of round R
                zero = np.zeros(state["action"].shape)
                rec.update(payoff=zero, expected_payoff=zero)
        else:
            rec.update(round_outcome(P, state))
        return {"history": [rec], "round": t + 1}

    return settle
