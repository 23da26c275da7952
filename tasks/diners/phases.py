"""The phase nodes of one Diner's Dilemma iteration (paper §3-4)::

    order -> punish -> metanorm -> utility -> imitate -> swap

``order``, ``punish`` and ``metanorm`` take a policy: a rule (``(state, rng) -> array``, the
strategies of :mod:`.model` executed exactly, vectorized over replicates) or an LLM policy
(:mod:`.llm`); ``_decision_node`` tells them apart with ``is_async_policy``, as the CPR
phases do, and masks what no policy may do (punishing outside one's group, oneself, or in a
finished society). ``utility``, ``imitate`` (the Fermi rule) and ``swap`` (the record, the
venues' rotation) are the same for both kinds of agents. Each node draws from
``phase_rng(seed, iteration, phase)``, so a resumed run draws what an uninterrupted one did.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from cooplab.agents.rule_based import sample_peer
from cooplab.graphs.nodes import is_async_policy, llm_node
from cooplab.graphs.rng import phase_rng
from cooplab.tasks.diners import model as dm
from cooplab.tasks.diners.state import State


def venues(group: np.ndarray, round_: int) -> np.ndarray:
    """(S, N) venue of each agent in iteration ``round_``: its group's venue (groups rotate)."""
    n_groups = int(group.max()) + 1
    return dm.venue_of_groups(n_groups, round_)[group]


# --- rule policies (the strategies, executed exactly) --------------------------------------
def order_rule(state: State, rng: np.random.Generator) -> np.ndarray:
    return dm.rule_orders(state["strategy"], state["reformed"])


def punish_rule(state: State, rng: np.random.Generator) -> np.ndarray:
    return dm.rule_punish(state["strategy"], state["defect"], dm.same_group(state["group"]))


def metanorm_rule(state: State, rng: np.random.Generator) -> np.ndarray:
    return dm.rule_metanorm(state["strategy"], state["defect"], state["punish1"], dm.same_group(state["group"]))


# --- node factories ------------------------------------------------------------------------
def _decision_node(
    phase: str,
    key: str,
    policy: Callable,
    clean: Callable[[State, Any], np.ndarray],
    also: Callable[[State], dict] = lambda state: {},
):
    """A node writing ``key`` from ``policy``'s answer; ``clean`` masks what a policy may not do
    (punishing outside the group, oneself, or in a finished society) without changing the rest."""
    if is_async_policy(policy):
        return llm_node(phase, policy, lambda state, value: {key: clean(state, value), **also(state)})

    def node(state: State) -> dict:
        rng = phase_rng(state["seed"], state["round"], phase)
        return {key: clean(state, policy(state, rng)), **also(state)}

    node.__name__ = phase
    return node


def _clean_orders(state: State, value: Any) -> np.ndarray:
    return np.asarray(value, dtype=bool) & state["active"][:, None]


def _clean_pairs(state: State, value: Any) -> np.ndarray:
    return np.asarray(value, dtype=bool) & dm.same_group(state["group"]) & state["active"][:, None, None]


def order_node(policy: Callable = order_rule):
    # the strategies played this iteration are kept for the record (imitation changes them)
    return _decision_node(
        "order", "defect", policy, _clean_orders, also=lambda state: {"played": state["strategy"].copy()}
    )


def punish_node(policy: Callable = punish_rule):
    return _decision_node("punish", "punish1", policy, _clean_pairs)


def metanorm_node(policy: Callable = metanorm_rule):
    return _decision_node("metanorm", "punish2", policy, _clean_pairs)


def utility_node():
    """Stage 4: utilities, the accumulated score pi, and R1's switch after being punished."""

    def utility(state: State) -> dict:
        P = state["params"]
        act = state["active"][:, None]
        out = dm.utility(state["defect"], state["group"], state["punish1"], state["punish2"], P)
        u = np.where(act, out["utility"], 0.0)
        memory = P["accumulate"][
            :, None
        ]  # 1: accumulated (1 * pi + u is exactly pi + u), 0: this iteration's (0 * pi + u = u)
        score = np.where(act, memory * state["score"] + u, state["score"])
        punished = out["received"] > 0
        reformed = state["reformed"] | (act & (state["strategy"] == dm.R1) & punished)
        return {"meal": np.where(act, out["meal"], 0.0), "utility": u, "score": score, "reformed": reformed}

    return utility


def imitate_node():
    """Stage 5: pairwise Fermi imitation of a uniformly random role model from the whole population.
    Adopting a different strategy starts it afresh (an adopted R1 defects until punished)."""

    def imitate(state: State) -> dict:
        rng = phase_rng(state["seed"], state["round"], "imitate")
        S, N = state["strategy"].shape
        role = sample_peer(np.ones((S, N), dtype=bool), rng)
        u = rng.random((S, N))
        res = dm.fermi_update(state["strategy"], state["score"], role, u, state["params"]["beta"])
        act = state["active"][:, None]
        new = np.where(act, res["strategy"], state["strategy"]).astype(np.int8)
        changed = new != state["strategy"]
        return {
            "strategy": new,
            "reformed": state["reformed"] & ~changed,
            "imitation": {"role": role, "prob": res["prob"], "adopt": res["adopt"] & act, "changed": changed},
        }

    return imitate


def swap_node():
    """Close the iteration: append its record, rotate the venues, advance the counter."""

    def swap(state: State) -> dict:
        t = int(state["round"])
        imi = state.get("imitation") or {}
        rec = {
            "round": t,
            "active": state["active"].copy(),
            "venue": state["venue"].copy(),
            "strategy_played": state["played"].copy(),
            "defect": state["defect"].copy(),
            "punish1": state["punish1"].copy(),
            "punish2": state["punish2"].copy(),
            "meal": state["meal"].copy(),
            "utility": state["utility"].copy(),
            "score": state["score"].copy(),
            "strategy": state["strategy"].copy(),
            **{f"imitation_{k}": np.asarray(v).copy() for k, v in imi.items()},
        }
        active = state["active"] & (t < int(state["max_round"]))
        return {"history": [rec], "round": t + 1, "venue": venues(state["group"], t + 1), "active": active}

    return swap
