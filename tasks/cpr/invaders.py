"""Invaders of the rule-based CPR society (:mod:`cooplab.graphs.invaders`): one seat's traits are
pinned from round K on by a node that runs first in each round (``invade``), so the harvest,
punish, learning and vote rules act on them as on anyone's. It draws nothing: before K the run is
the unperturbed run, number for number.

What each kind holds, in the terms of the paper's agents (§3.1: effort e, monitoring m,
punishing p, personal harvest cap g; §4.1 (c): selfish agents start at the top of the ranges):

- ``greedy``: effort 1 (the physical maximum) and no cap of its own (g = K, the lake), never
  monitors or fines;
- ``defector``: the selfish type at the top of the initial ranges (e = e_max, g = g_max), never
  monitors or fines;
- ``free-rider``: fishes up to the group's norm (g = G while one is in force, else its own cap)
  with effort e_max, but never monitors or fines, so it never pays the punisher's cost gamma that
  keeps the norm in force (a second-order free rider).

Others may still imitate the invader (social learning copies its e, m and g when it earns more):
that is how an invader spreads. An LLM society takes an invader of another model
(``model:SPEC@K``; ``model:scripted:examples/scripted/greedy.json@K`` is a greedy one).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

RULE_KINDS = ("greedy", "defector", "free-rider")


def pinned_traits(state: Mapping[str, Any], kind: str, j: int) -> dict[str, np.ndarray]:
    """(e, m, p, g) of every society's row with seat ``j`` set as ``kind`` holds them."""
    P = state["params"]
    out = {k: np.array(state[k], copy=True) for k in ("e", "m", "p", "g")}
    if kind == "greedy":
        e, g = np.ones(len(out["e"])), np.asarray(P["K"], dtype=float)
    elif kind == "defector":
        e, g = np.asarray(P["e_max"], dtype=float), np.asarray(P["g_max"], dtype=float)
    elif kind == "free-rider":
        G = np.asarray(state["G"], dtype=float)
        e, g = np.asarray(P["e_max"], dtype=float), np.where(np.isfinite(G), G, out["g"][:, j])
    else:
        raise ValueError(f"no rule-based invader {kind!r}; use one of {', '.join(RULE_KINDS)}")
    out["e"][:, j] = e
    out["g"][:, j] = g
    out["m"][:, j] = 0.0
    out["p"][:, j] = 0.0
    return out


def invade_node(invader: Mapping[str, Any]) -> Callable[[Mapping[str, Any]], dict]:
    kind, K, j = invader["kind"], int(invader["round"]), int(invader["agent"])

    def invade(state: Mapping[str, Any]) -> dict:
        if int(state["round"]) < K or not np.asarray(state["active"]).any():
            return {}
        return pinned_traits(state, kind, j)

    return invade


def with_invader(
    phases: "OrderedDict[str, Callable]", invader: Mapping[str, Any] | None
) -> "OrderedDict[str, Callable]":
    """``phases`` with the ``invade`` node first when a rule-based invader is set (else unchanged)."""
    if not invader or invader.get("kind") not in RULE_KINDS:
        return phases
    out: OrderedDict[str, Callable] = OrderedDict(invade=invade_node(invader))
    out.update(phases)
    return out
