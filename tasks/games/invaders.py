"""Invaders of the behavioral games (:mod:`cooplab.graphs.invaders`): from round K on, one seat's
decision (and, in CPR with sanctioning, its sanctions) is replaced by the invader's. The
reference players' policy is still called for every seat, so every generator draws what it
draws in the unperturbed run: rounds before K are that run's, number for number.

- ``greedy``: the largest self-serving action (the most extraction or withdrawal, no effort,
  no contribution, the whole endowment kept), and no sanctions;
- ``defector``: the one-shot Nash action of the seat (:func:`~cooplab.tasks.games.equilibria.profile`),
  and no sanctions;
- ``free-rider``: contributes nothing to what the group shares and never sanctions. In these six
  games that is the greedy action (keeping everything is what the greedy player does), so the two
  kinds play alike here; they differ in the CPR society (``tasks/cpr/invaders.py``).

LLM players take an invader of another model (``model:SPEC@K``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from cooplab.tasks.games import equilibria as eq

RULE_KINDS = ("greedy", "defector", "free-rider")


def invader_action(P: Any, kind: str, round_: int, seat: int) -> Any:
    """The invader's action in ``round_`` (an int, or [keep, group, global] in Public Goods)."""
    if kind == "defector":
        return eq.profile("nash", P)[min(round_, P.rounds) - 1, seat]
    if kind not in ("greedy", "free-rider"):
        raise ValueError(f"no rule-based invader {kind!r}; use one of {', '.join(RULE_KINDS)}")
    game = P.GAME
    if game in ("cpr", "cpr-sanction"):
        return P.max_extract
    if game == "o-ring":
        return P.max_withdraw
    if game == "public-goods":
        return np.array([P.endowment, 0, 0])
    return 0  # weakest-link: no effort; collective-risk: no contribution


def _wrap_decide(P: Any, policy: Callable, kind: str, K: int, seat: int) -> Callable:
    def decide(state: Mapping[str, Any], rng: np.random.Generator) -> np.ndarray:
        out = policy(state, rng)
        t = int(state["round"])
        if t < K:
            return out
        out = np.array(out, copy=True)
        out[:, seat] = invader_action(P, kind, t, seat)
        return out

    return decide


def _wrap_sanction(policy: Callable, K: int, seat: int) -> Callable:
    def sanction(state: Mapping[str, Any], rng: np.random.Generator) -> np.ndarray:
        out = policy(state, rng)
        if int(state["round"]) < K:
            return out
        out = np.array(out, copy=True)
        out[:, seat, :] = 0
        return out

    return sanction


def with_invader(P: Any, policies: dict[str, Any], invader: Mapping[str, Any] | None) -> dict[str, Any]:
    """The reference players' policies with a rule-based invader's seat replaced from round K on."""
    if not invader or invader.get("kind") not in RULE_KINDS:
        return policies
    kind, K, seat = invader["kind"], int(invader["round"]), int(invader["agent"])
    out = dict(policies)
    out["decide"] = _wrap_decide(P, policies["decide"], kind, K, seat)
    if "sanction" in policies:
        out["sanction"] = _wrap_sanction(policies["sanction"], K, seat)
    return out
