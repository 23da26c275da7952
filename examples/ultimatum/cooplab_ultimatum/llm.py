"""LLM players of the ultimatum game: one structured decision per offer and per response.

Each player sees the rules, its own last game and the question; the answer is a JSON object
validated by a pydantic schema (an offer must lie between 0 and the pie) and retried with the
error shown, up to three attempts (:func:`cooplab.world.decide`). Then the documented
fallback is the player's rule: offer its share p of the pie; accept iff the offer is at least its
threshold q. Every call is cached, charged to the run's ledger and traced by the runner.
"""

from __future__ import annotations

import numpy as np
from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from cooplab.world import DecisionSpec, PolicyResult, decide_all, llm_node


class Offer(BaseModel):
    offer: float = Field(ge=0, description="coins offered to the responder")


class Response(BaseModel):
    accept: bool


def _check_offer(v: Offer, ctx: dict) -> None:
    if v.offer > ctx["pie"]:
        raise ValueError(f"the offer must be between 0 and {ctx['pie']:g} coins")


OFFER = DecisionSpec(
    phase="offer",
    schema=Offer,
    check=_check_offer,
    fallback=lambda c: Offer(offer=c["rule"] * c["pie"]),
    instructions='Reply with one JSON object only: {"offer": <coins, from 0 to the pie>}.',
)
RESPOND = DecisionSpec(
    phase="respond",
    schema=Response,
    fallback=lambda c: Response(accept=c["offer"] >= c["rule"]),
    instructions='Reply with one JSON object only: {"accept": true or false}.',
)


def chat(state, s: int, i: int, pie: float, ask: str) -> list:
    """Player i's messages: the rules, its last game, the question."""
    last = "This is the first round."
    if state.get("history"):
        h = state["history"][-1]
        role = "proposer" if i in h["proposer"][s] else "responder"
        k = int(np.flatnonzero(h[role][s] == i)[0])
        last = (
            f"Last round you were the {role}; the offer was {h['offer'][s, k] * pie:g} coins and it was "
            f"{'accepted' if h['accepted'][s, k] else 'rejected'}. You have earned {state['earned'][s, i]:g} coins so "
            "far."
        )
    rules = (
        f"You are player {i + 1} of {state['p'].shape[1]} in a repeated ultimatum game. Each round you meet a random "
        "other "
        f"player: the proposer offers the responder part of {pie:g} coins; if the responder accepts, the coins are "
        "split as "
        f"offered, otherwise both get nothing."
    )
    return [SystemMessage(content=rules), HumanMessage(content=f"Round {state['round']}. {last}\n{ask}")]


def llm_phase(spec: DecisionSpec, who: str, key: str, pie: float, ask, read):
    """The node of an LLM decision taken by every proposer (or responder): ``ask(state, s, k, i)``
    gives the question and the fallback's context, ``read(value)`` the number stored under ``key``."""

    async def policy(state, rng, context, config) -> PolicyResult:
        service = context.llm
        jobs = [
            (s, i, chat(state, s, i, pie, text), ctx)
            for s, row in enumerate(state[who].tolist())
            for k, i in enumerate(row)
            for text, ctx in [ask(state, s, k, i)]
        ]
        done = await decide_all(service, spec, jobs, int(state["round"]), config)  # in job order
        values = np.array([read(v) for _, _, v, _ in done]).reshape(state[who].shape)
        return PolicyResult(
            values, {"decisions": [r.as_dict() for *_, r in done]}
        )  # the node adds the ledger's charges

    return llm_node(spec.phase, policy, lambda state, values: {key: values})


def llm_offer(pie: float):
    def ask(state, s: int, k: int, i: int) -> tuple[str, dict]:
        return f"You are the proposer. How many of the {pie:g} coins do you offer?", {
            "pie": pie,
            "rule": state["p"][s, i],
        }

    return llm_phase(OFFER, "proposer", "offer", pie, ask, lambda v: v.offer / pie)  # stored as a share of the pie


def llm_respond(pie: float):
    def ask(state, s: int, k: int, i: int) -> tuple[str, dict]:
        x = state["offer"][s, k]
        return (
            f"You are the responder: you are offered {x * pie:g} of the {pie:g} coins. Do you accept?",
            {"offer": x, "rule": state["q"][s, i]},
        )

    return llm_phase(RESPOND, "responder", "accepted", pie, ask, lambda v: v.accept)
