"""Invaders of the Diner's Dilemma (:mod:`cooplab.graphs.invaders`): from iteration K on, one seat
plays a fixed strategy of the paper's strategy set (:mod:`.model`), pinned at the start of every
iteration by a node that runs first (``invade``) and kept through the imitation stage, so the
seat never adopts another strategy while the others may adopt its own (that is how an invader
spreads). The node draws nothing: before K the run is the unperturbed run, number for number.

- ``defector``: the Defector D, the premium meal every iteration and never a punishment;
- ``greedy``: the same as ``defector`` here: the premium meal is the largest self-serving order
  and a punishment only costs the punisher, so the greediest diner is the Defector;
- ``free-rider``: the Easy-going Cooperator E, the budget meal but never a punishment, so it never
  pays the punisher's cost k that keeps the others ordering budget (a second-order free rider).

In an LLM run the seat is not asked from K on: its orders and punishments are its pinned
strategy's, as the rule-based diners play it (the LLM policies leave it out of their calls); an
invader of another model (``model:SPEC@K``) keeps asking, the seat's calls going to SPEC.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from cooplab.tasks.diners import model as dm

RULE_KINDS = ("greedy", "defector", "free-rider")
#: the strategy each rule-based kind plays
STRATEGY = {"greedy": dm.D, "defector": dm.D, "free-rider": dm.E}


def _seat(invader: Mapping[str, Any] | None) -> tuple[int, int, int] | None:
    """(K, seat, strategy code) of a rule-based invader, or None."""
    if not invader or invader.get("kind") not in RULE_KINDS:
        return None
    return int(invader["round"]), int(invader["agent"]), STRATEGY[invader["kind"]]


def rule_mask(invader: Mapping[str, Any] | None) -> Callable[[Mapping[str, Any]], np.ndarray]:
    """``state -> (S, N) bool``: the seats played by a rule this iteration (the invader's from K on)."""
    found = _seat(invader)

    def mask(state: Mapping[str, Any]) -> np.ndarray:
        out = np.zeros(np.shape(state["strategy"]), dtype=bool)
        if found is not None and int(state["round"]) >= found[0]:
            out[:, found[1]] = True
        return out

    return mask


def invade_node(invader: Mapping[str, Any]) -> Callable[[Mapping[str, Any]], dict]:
    K, j, code = _seat(invader)  # type: ignore[misc]

    def invade(state: Mapping[str, Any]) -> dict:
        if int(state["round"]) < K or not np.asarray(state["active"]).any():
            return {}
        strategy = np.array(state["strategy"], copy=True)
        reformed = np.array(state["reformed"], copy=True)
        strategy[:, j] = code
        reformed[:, j] = False
        return {"strategy": strategy, "reformed": reformed}

    return invade


def _keep_seat(imitate: Callable, invader: Mapping[str, Any]) -> Callable:
    K, j, code = _seat(invader)  # type: ignore[misc]

    def node(state: Mapping[str, Any]) -> dict:
        out = imitate(state)
        if int(state["round"]) < K:
            return out
        strategy = np.array(out["strategy"], copy=True)
        strategy[:, j] = code
        imi = dict(out["imitation"])
        for key in ("adopt", "changed"):
            imi[key] = np.array(imi[key], copy=True)
            imi[key][:, j] = False
        return {**out, "strategy": strategy, "imitation": imi}

    node.__name__ = "imitate"
    return node


def with_invader(
    phases: "OrderedDict[str, Callable]", invader: Mapping[str, Any] | None
) -> "OrderedDict[str, Callable]":
    """``phases`` with the ``invade`` node first and the imitation keeping the seat's strategy when a
    rule-based invader is set (else unchanged)."""
    if _seat(invader) is None:
        return phases
    out: OrderedDict[str, Callable] = OrderedDict(invade=invade_node(invader))  # type: ignore[arg-type]
    for name, node in phases.items():
        out[name] = _keep_seat(node, invader) if name == "imitate" else node  # type: ignore[arg-type]
    return out
