"""LLM policies for the CPR society (the effort decision; more phases come with the LLM society).

Prompts are text files in ``tasks/cpr/prompts``. The payoff function and the resource
dynamics are never shown: agents see their own recent outcomes, (if social learning is on)
a few randomly sampled peers' recent actions and outcomes, their personal belief, the group
norm verbatim (if one is in force) and the stock.
"""

from __future__ import annotations

import asyncio
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np
from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from cooplab.agents.decisions import DecisionSpec, LLMService, decide
from cooplab.graphs.phases import PolicyResult

N_PEERS_SHOWN = 3


@lru_cache(maxsize=None)
def prompt(name: str) -> str:
    return resources.files("cooplab.tasks.cpr").joinpath("prompts", f"{name}.txt").read_text()


class EffortDecision(BaseModel):
    """An effort in [0, 1]."""

    effort: float = Field(ge=0.0, le=1.0, description="fishing effort between 0 and 1")


def effort_fallback(ctx: dict[str, Any]) -> EffortDecision:
    """Documented fallback: keep last round's effort (in round 1: the agent's initial effort trait)."""
    return EffortDecision(effort=float(np.clip(ctx["previous_effort"], 0.0, 1.0)))


EFFORT = DecisionSpec(phase="harvest", schema=EffortDecision, fallback=effort_fallback, max_attempts=3,
                      instructions='Reply with one JSON object only: {"effort": <a number from 0 to 1>}.')


def _fmt(x: float) -> str:
    return f"{x:.1f}"


def effort_messages(state: dict[str, Any], s: int, i: int, peers: list[int]) -> list:
    P = state["params"]
    N = state["alive"].shape[1]
    t = int(state["round"])
    gd = bool(P["group_decision"][s]) and np.isfinite(state["G"][s])
    norm_line = (f"The group's agreed rule: no fisher should catch more than {_fmt(state['G'][s])} tonnes per round."
                 if gd else "The group has no agreed rule about fishing.")
    belief = f"you think a fisher should catch at most {_fmt(state['g'][s, i])} tonnes per round."
    if t == 1:
        own = "- This is the first round; you have caught nothing yet. Your savings: " + _fmt(state["P"][s, i]) + "."
    else:
        fined = " You were fined by a neighbour for overfishing." if state["V"][s, i] else ""
        own = (f"- Last round you fished with effort {state['effort'][s, i]:.2f} and caught {_fmt(state['h'][s, i])} tonnes.{fined}\n"
               f"- Your savings now: {_fmt(state['P'][s, i])}.")
    if peers and t > 1:
        lines = [f"- Fisher {j + 1}: effort {state['effort'][s, j]:.2f}, caught {_fmt(state['h'][s, j])} tonnes, savings {_fmt(state['P'][s, j])}"
                 + (", was fined" if state["V"][s, j] else "") for j in peers]
        peer_block = "\nWhat a few other fishers did last round:\n" + "\n".join(lines) + "\n"
    else:
        peer_block = ""
    system = prompt("system").format(name=f"Fisher {i + 1}", n_agents=N)
    human = prompt("effort").format(round=t, stock=_fmt(state["R"][s]), norm_line=norm_line, belief=belief,
                                    own_history=own, peer_block=peer_block)
    return [SystemMessage(content=system.strip()), HumanMessage(content=human.strip())]


class LLMEffortPolicy:
    """e_i(t) = f_E(O_i(t)) decided by each agent's model, all agents of all societies concurrently."""

    async def __call__(self, state: dict[str, Any], rng: np.random.Generator, context: Any, config: Any) -> PolicyResult:
        service: LLMService = context.llm
        S, N = state["alive"].shape
        run = state["alive"] & state["active"][:, None]
        learn = state["params"]["social_learning"].astype(bool)
        effort = np.zeros((S, N))
        n_before = len(service.ledger.entries)
        jobs = []
        for s in range(S):
            alive_idx = np.flatnonzero(run[s])
            for i in alive_idx:
                others = [int(j) for j in alive_idx if j != i]
                peers = sorted(rng.choice(others, size=min(N_PEERS_SHOWN, len(others)), replace=False).tolist()) if (learn[s] and others) else []
                prev = state["effort"][s, i] if state["round"] > 1 else state["e"][s, i]
                jobs.append((s, int(i), effort_messages(state, s, int(i), peers), {"previous_effort": float(prev)}))

        async def one(job):
            s, i, msgs, ctx = job
            return s, i, await decide(service, EFFORT, msgs, society=s, agent=i, round=int(state["round"]), ctx=ctx, config=config)

        # every call runs to completion (a reserved call is never cancelled half-way), then the
        # first failure (budget exhausted, model unavailable) is raised
        results = await asyncio.gather(*(one(j) for j in jobs), return_exceptions=True)
        failures = [r for r in results if isinstance(r, BaseException)]
        if failures:
            raise failures[0]
        records = []
        for s, i, (value, rec) in results:
            effort[s, i] = value.effort if value is not None else 0.0
            records.append(rec.as_dict())
        entries = [e.as_dict() for e in service.ledger.entries[n_before:]]
        return PolicyResult(effort, {"decisions": records, "ledger": entries})
