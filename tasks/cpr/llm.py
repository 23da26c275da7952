"""LLM policies of the CPR society (Gupta et al. 2025, §3.1.3-3.1.5, Figs. 8-11).

Four prompts (text files in ``tasks/cpr/prompts``), written in our own words from the paper's
descriptions; one structured decision each:

=========  ===================================================  ==========================
phase      the agent decides                                    paper
=========  ===================================================  ==========================
harvest    an effort in [0, 1]                                  Fig. 8
punish     whom to fine among the peers it watched, or nobody   Fig. 9
propose    its updated personal belief and a group-norm text    Fig. 10
vote       one of the distinct proposals                        Fig. 11
=========  ===================================================  ==========================

The payoff function and the resource dynamics are never shown. Social learning happens in
context: with social learning on, the effort and propose prompts summarize a few randomly
sampled peers' recent actions and outcomes. With group decision on, the winning norm is
broadcast verbatim and shown in the next round's prompts. Calls per living agent per round:
Full 4, OGD 4 (no peer information), OSL 2 and Neither 2 (no proposals, no vote, no shared
norm; beliefs keep their initial text). A society's last round (round cap or collapse) has no
propose/vote calls: no later round would be governed by the norm. Propose and vote run after
the environment step of round t and are recorded as decisions of round t.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import numpy as np
from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from cooplab.agents.batch import Batch
from cooplab.agents.decisions import DecisionSpec, LLMService
from cooplab.graphs import prompts
from cooplab.graphs.prompts import ORIGINAL
from cooplab.tasks.cpr.phases import PolicyResult, punishment_enabled, running_agents

N_PEERS_SHOWN = 3
MEMORY = 3  # rounds of personal history shown


def prompt(name: str, variant: str = ORIGINAL) -> str:
    """The prompt ``name`` as ``variant`` words it (:mod:`cooplab.graphs.prompts`; a file the variant lacks is the
    original's)."""
    return prompts.text("cooplab.tasks.cpr", f"{name}.txt", variant)


@lru_cache(maxsize=None)
def belief_bank(variant: str = ORIGINAL) -> dict[str, list[str]]:
    """The initial beliefs by agent type (the personas altruistic and selfish agents start with), as ``variant`` words
    them."""
    bank = json.loads(prompts.text("cooplab.tasks.cpr", "beliefs.json", variant))
    for kind in ("altruistic", "selfish"):
        rows = bank.get(kind) if isinstance(bank, dict) else None
        if not isinstance(rows, list) or not rows or not all(isinstance(x, str) and x.strip() for x in rows):
            raise ValueError(f"beliefs.json of prompt variant {variant!r} must map {kind} to a non-empty list of texts")
    return bank


# --- decisions -----------------------------------------------------------------------------
class EffortDecision(BaseModel):
    effort: float = Field(ge=0.0, le=1.0, description="fishing effort between 0 and 1")


class PunishDecision(BaseModel):
    punish: int | None = Field(default=None, description="number of the fisher to fine, or null")


class ProposeDecision(BaseModel):
    belief: str = Field(min_length=3, max_length=400)
    proposal: str = Field(min_length=3, max_length=300)


class VoteDecision(BaseModel):
    vote: int


def _check_punish(v: PunishDecision, ctx: dict[str, Any]) -> None:
    if v.punish is not None and v.punish not in ctx["shown"]:
        raise ValueError(
            f"fisher {v.punish} was not among the fishers shown ({', '.join(map(str, ctx['shown']))}); use one of them "
            "or null"
        )


def _check_vote(v: VoteDecision, ctx: dict[str, Any]) -> None:
    if not 1 <= v.vote <= ctx["n_options"]:
        raise ValueError(f"vote must be a rule number from 1 to {ctx['n_options']}")


def _only(field: str, values: list | Callable[[dict[str, Any]], list]) -> Any:
    """A decoding constraint: ``field`` may only take ``values`` (a list, or one made from the
    decision's context; for grammar-constrained models)."""

    def constrain(schema: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        allowed = values(ctx) if callable(values) else values
        return {**schema, "properties": {**schema["properties"], field: {"enum": allowed}}, "required": [field]}

    return constrain


EFFORT = DecisionSpec(
    phase="harvest",
    schema=EffortDecision,
    max_attempts=3,
    fallback=lambda ctx: EffortDecision(
        effort=float(np.clip(ctx["previous_effort"], 0.0, 1.0))
    ),  # keep last round's effort
    instructions='Reply with one JSON object only: {"effort": <a number from 0 to 1>}.',
)
PUNISH = DecisionSpec(
    phase="punish",
    schema=PunishDecision,
    check=_check_punish,
    max_attempts=3,
    constrain=_only("punish", lambda ctx: list(ctx["shown"]) + [None]),
    fallback=lambda ctx: PunishDecision(punish=None),  # fine nobody
    instructions='Reply with one JSON object only: {"punish": <a fisher number shown, or null>}.',
)
PROPOSE = DecisionSpec(
    phase="propose",
    schema=ProposeDecision,
    max_attempts=3,
    max_tokens=160,  # two sentences of JSON
    fallback=lambda ctx: ProposeDecision(belief=ctx["belief"], proposal=ctx["belief"]),  # keep belief, propose it
    instructions='Reply with one JSON object only: {"belief": "<one sentence>", "proposal": "<one sentence>"}.',
)
VOTE = DecisionSpec(
    phase="vote",
    schema=VoteDecision,
    check=_check_vote,
    max_attempts=3,
    constrain=_only("vote", lambda ctx: list(range(1, ctx["n_options"] + 1))),
    fallback=lambda ctx: VoteDecision(vote=ctx["own_option"]),  # vote for one's own proposal
    instructions='Reply with one JSON object only: {"vote": <a rule number>}.',
)


# --- prompt pieces -------------------------------------------------------------------------
def _t(x: float) -> str:
    return f"{x:.1f}"


def norm_line(state: dict[str, Any], s: int) -> str:
    text = (state.get("norm_text") or [None] * (s + 1))[s]
    if bool(state["params"]["group_decision"][s]) and text:
        return f'The rule your group adopted by vote: "{text}"'
    if bool(state["params"]["group_decision"][s]):
        return "Your group has not adopted any rule yet."
    return "Your group has no shared rule about fishing."


def own_history(state: dict[str, Any], s: int, i: int, rounds_done: int) -> str:
    if rounds_done <= 0:
        return f"- Nothing yet: this is the first round. Your savings: {_t(state['P'][s, i])}."
    lines = []
    for k in range(min(MEMORY, rounds_done)):
        fined = ", and you were fined for overfishing" if state["V_recent"][s, i, k] else ""
        lines.append(
            f"- {'Last round' if k == 0 else f'{k + 1} rounds ago'}: effort {state['effort_recent'][s, i, k]:.2f}, "
            f"you caught {_t(state['h_recent'][s, i, k])} tonnes{fined}."
        )
    lines.append(f"- Your savings now: {_t(state['P'][s, i])}.")
    return "\n".join(lines)


def peer_block(state: dict[str, Any], s: int, peers: list[int], rounds_done: int) -> str:
    if not peers or rounds_done <= 0:
        return ""
    lines = [
        f"- Fisher {j + 1}: effort {state['effort_recent'][s, j, 0]:.2f}, caught {_t(state['h_recent'][s, j, 0])} "
        "tonnes, "
        f"savings {_t(state['P'][s, j])}" + (", was fined" if state["V_recent"][s, j, 0] else "")
        for j in peers
    ]
    return "\nWhat a few other fishers did last round:\n" + "\n".join(lines) + "\n"


def system(state: dict[str, Any], i: int, variant: str = ORIGINAL) -> SystemMessage:
    return SystemMessage(
        content=prompt("system", variant).format(name=f"Fisher {i + 1}", n_agents=state["alive"].shape[1]).strip()
    )


def _peers(rng: np.random.Generator, alive_idx: np.ndarray, i: int, k: int = N_PEERS_SHOWN) -> list[int]:
    """``k`` distinct living peers of agent ``i`` (``alive_idx``: the living agents, ascending), sorted.

    The draw is the one ``rng.choice(others, k, replace=False)`` makes on the list ``others`` of the
    living agents but ``i``: it draws positions in that list, so the positions are drawn here and
    mapped onto ``alive_idx`` past ``i``'s own place, without building the list (which made every
    decision cost O(N) in a society of N)."""
    n = len(alive_idx)
    pos = int(np.searchsorted(alive_idx, i))
    mine = pos < n and int(alive_idx[pos]) == i
    n_others = n - 1 if mine else n
    if n_others <= 0:
        return []
    idx = rng.choice(n_others, size=min(k, n_others), replace=False)
    if mine:
        idx = idx + (idx >= pos)
    return sorted(alive_idx[idx].tolist())


def effort_messages(state: dict[str, Any], s: int, i: int, peers: list[int], variant: str = ORIGINAL) -> list:
    t = int(state["round"])
    human = prompt("effort", variant).format(
        round=t,
        stock=_t(state["R"][s]),
        norm_line=norm_line(state, s),
        belief=state["beliefs"][s][i],
        own_history=own_history(state, s, i, t - 1),
        peer_block=peer_block(state, s, peers, t - 1),
    )
    return [system(state, i, variant), HumanMessage(content=human.strip())]


def punish_messages(state: dict[str, Any], s: int, i: int, shown: list[int], variant: str = ORIGINAL) -> list:
    lines = "\n".join(
        f"- Fisher {j + 1}: effort {state['effort'][s, j]:.2f}, caught {_t(state['h'][s, j])} tonnes" for j in shown
    )
    human = prompt("punish", variant).format(
        round=int(state["round"]), peers=lines, norm_line=norm_line(state, s), belief=state["beliefs"][s][i]
    )
    return [system(state, i, variant), HumanMessage(content=human.strip())]


def propose_messages(state: dict[str, Any], s: int, i: int, peers: list[int], variant: str = ORIGINAL) -> list:
    done = int(state["round"]) - 1  # the environment step has advanced the round
    human = prompt("propose", variant).format(
        round=done,
        stock=_t(state["R"][s]),
        own_history=own_history(state, s, i, done),
        peer_block=peer_block(state, s, peers, done),
        norm_line=norm_line(state, s),
        belief=state["beliefs"][s][i],
    )
    return [system(state, i, variant), HumanMessage(content=human.strip())]


def vote_messages(state: dict[str, Any], s: int, i: int, options: list[str], variant: str = ORIGINAL) -> list:
    listing = "\n".join(f"{k + 1}. {text}" for k, text in enumerate(options))
    human = prompt("vote", variant).format(options=listing, belief=state["beliefs"][s][i])
    return [system(state, i, variant), HumanMessage(content=human.strip())]


# --- running many decisions ----------------------------------------------------------------
def _jobs_with_peers(state: dict[str, Any], rng: np.random.Generator, build: Any) -> list:
    """One job (society, agent, messages, ctx) per living agent of each running society; with
    social learning on, ``build(s, i, peers)`` gets a few randomly sampled living peers."""
    run = running_agents(state)
    learn = state["params"]["social_learning"].astype(bool)
    jobs = []
    for s in range(run.shape[0]):
        alive_idx = np.flatnonzero(run[s])
        for i in alive_idx:
            peers = _peers(rng, alive_idx, int(i)) if learn[s] else []
            jobs.append((s, int(i), *build(s, int(i), peers)))
    return jobs


def _ruled(invader: Any, round_: int) -> tuple[str, int] | None:
    """(kind, seat) of a rule-based invader playing in ``round_`` (it arrived at K <= round_), or None."""
    from cooplab.tasks.cpr.invaders import RULE_KINDS

    if not invader or invader.get("kind") not in RULE_KINDS or round_ < int(invader["round"]):
        return None
    return str(invader["kind"]), int(invader["agent"])


def _without(jobs: list, ruled: tuple[str, int] | None) -> list:
    """``jobs`` without the rule-based invader's seat (it is not asked)."""
    return jobs if ruled is None else [j for j in jobs if j[1] != ruled[1]]


def invader_effort(state: dict[str, Any], kind: str, seat: int) -> np.ndarray:
    """(S,) the effort of a rule-based invader in an LLM society (tasks/cpr/invaders.py's kinds as an
    LLM society can hold them: it has no numeric norm): ``greedy`` 1 (the physical maximum),
    ``defector`` e_max (the selfish type's top), ``free-rider`` the residents' mean effort of the last
    round (it goes along with what the group does, but never monitors or fines)."""
    S, N = state["alive"].shape
    if kind == "greedy":
        return np.ones(S)
    if kind == "defector":
        return np.asarray(state["params"]["e_max"], dtype=float).reshape(S)
    prev = np.asarray(state["effort"] if state["round"] > 1 else state["e"], dtype=float)
    alive = np.asarray(state["alive"], dtype=bool).copy()
    alive[:, seat] = False
    n = alive.sum(axis=1)
    return np.where(n > 0, (prev * alive).sum(axis=1) / np.maximum(n, 1), prev[:, seat])


class LLMEffortPolicy:
    """Fig. 8: e_i(t) = f_E(O_i(t)), decided in context by each agent's model. A rule-based
    ``invader``'s seat is not asked from its round K on (:func:`invader_effort`)."""

    def __init__(self, variant: str = ORIGINAL, invader: Any = None):
        self.variant = variant  # the prompt variant (docs/robustness.md)
        self.invader = invader

    async def __call__(self, state, rng, context, config) -> PolicyResult:
        service: LLMService = context.llm
        S, N = state["alive"].shape
        batch = Batch(service)
        prev = state["effort"] if state["round"] > 1 else state["e"]
        jobs = _jobs_with_peers(
            state,
            rng,
            lambda s, i, peers: (
                effort_messages(state, s, i, peers, self.variant),
                {"previous_effort": float(prev[s, i])},
            ),
        )
        ruled = _ruled(self.invader, int(state["round"]))
        jobs = _without(jobs, ruled)
        effort = np.zeros((S, N))
        if ruled is not None:
            effort[:, ruled[1]] = np.where(running_agents(state)[:, ruled[1]], invader_effort(state, *ruled), 0.0)
        for s, i, value, rec in await batch.ask(EFFORT, jobs, int(state["round"]), config):
            effort[s, i] = value.effort
            batch.record(rec.as_dict())
        return PolicyResult(effort, batch.updates())


class LLMPunishPolicy:
    """Fig. 9: each agent watches a few random peers' catch this round and judges, against the
    group norm in language (no numeric threshold), whether and whom to fine. B and V as in the
    ABM (indicators), so the payoff update is the same: gamma to the punisher, beta to the punished."""

    def __init__(self, variant: str = ORIGINAL, invader: Any = None):
        self.variant = variant  # the prompt variant (docs/robustness.md)
        self.invader = invader  # a rule-based invader's seat is not asked from its round on

    async def __call__(self, state, rng, context, config) -> PolicyResult:
        service: LLMService = context.llm
        S, N = state["alive"].shape
        run = running_agents(state) & punishment_enabled(state)[:, None]
        batch = Batch(service)
        jobs = []
        for s in range(S):
            alive_idx = np.flatnonzero(running_agents(state)[s])
            for i in np.flatnonzero(run[s]):
                shown = _peers(rng, alive_idx, int(i))
                if shown:
                    jobs.append(
                        (
                            s,
                            int(i),
                            punish_messages(state, s, int(i), shown, self.variant),
                            {"shown": [j + 1 for j in shown]},
                        )
                    )
        jobs = _without(jobs, _ruled(self.invader, int(state["round"])))
        B = np.zeros((S, N), dtype=np.int8)
        V = np.zeros((S, N), dtype=np.int8)
        inspections = np.zeros(S, dtype=int)
        for s, i, value, rec in await batch.ask(PUNISH, jobs, int(state["round"]), config):
            inspections[s] += 1
            if value.punish is not None:
                B[s, i] = 1
                V[s, value.punish - 1] = 1
            batch.record(rec.as_dict())
        n_viol = B.sum(axis=1)
        return PolicyResult({"B": B, "V": V, "n_inspections": inspections, "n_violations": n_viol}, batch.updates())


class LLMProposePolicy:
    """Fig. 10: update the personal belief and propose a short natural-language group norm."""

    def __init__(self, variant: str = ORIGINAL, invader: Any = None):
        self.variant = variant  # the prompt variant (docs/robustness.md)
        self.invader = invader  # a rule-based invader's seat is not asked from its round on

    async def __call__(self, state, rng, context, config) -> PolicyResult:
        service: LLMService = context.llm
        S, N = state["alive"].shape
        batch = Batch(service)
        jobs = _jobs_with_peers(
            state,
            rng,
            lambda s, i, peers: (
                propose_messages(state, s, i, peers, self.variant),
                {"belief": state["beliefs"][s][i]},
            ),
        )
        jobs = _without(jobs, _ruled(self.invader, int(state["round"]) - 1))
        beliefs = [list(row) for row in state["beliefs"]]
        proposals: list[list[str | None]] = [[None] * N for _ in range(S)]
        for s, i, value, rec in await batch.ask(PROPOSE, jobs, int(state["round"]) - 1, config):
            beliefs[s][i] = value.belief.strip()
            proposals[s][i] = value.proposal.strip()
            batch.record(rec.as_dict())
        return PolicyResult(None, {"beliefs": beliefs, "proposal_texts": proposals, **batch.updates()})


def distinct_proposals(proposals: list[str | None]) -> list[str]:
    """The distinct proposals in first-seen order (exact text after trimming)."""
    seen: dict[str, None] = {}
    for p in proposals:
        if p:
            seen.setdefault(p, None)
    return list(seen)


def plurality_winner(options: list[str], votes: list[int], rng: np.random.Generator) -> tuple[str, bool]:
    """The option with most votes; a tie is broken uniformly at random by the seeded generator.
    Returns (winner, was_tie)."""
    counts = Counter(votes)
    best = max(counts.values())
    tied = sorted(k for k, c in counts.items() if c == best)
    pick = tied[int(rng.integers(len(tied)))] if len(tied) > 1 else tied[0]
    return options[pick - 1], len(tied) > 1


class LLMVotePolicy:
    """Fig. 11: vote among the distinct proposals; the winner is broadcast verbatim."""

    def __init__(self, variant: str = ORIGINAL, invader: Any = None):
        self.variant = variant  # the prompt variant (docs/robustness.md)
        self.invader = invader  # a rule-based invader's seat is not asked from its round on

    async def __call__(self, state, rng, context, config) -> PolicyResult:
        service: LLMService = context.llm
        S, N = state["alive"].shape
        run = running_agents(state)
        batch = Batch(service)
        options = {s: distinct_proposals(state["proposal_texts"][s]) for s in range(S)}
        jobs = []
        for s in range(S):
            if len(options[s]) < 2:
                continue  # a single proposal is adopted without a vote
            for i in np.flatnonzero(run[s]):
                own = state["proposal_texts"][s][i]
                own_k = options[s].index(own) + 1 if own in options[s] else 1
                jobs.append(
                    (
                        s,
                        int(i),
                        vote_messages(state, s, int(i), options[s], self.variant),
                        {"n_options": len(options[s]), "own_option": own_k},
                    )
                )
        jobs = _without(jobs, _ruled(self.invader, int(state["round"]) - 1))
        votes: dict[int, list[int]] = {s: [] for s in range(S)}
        for s, _i, value, rec in await batch.ask(VOTE, jobs, int(state["round"]) - 1, config):
            votes[s].append(value.vote)
            batch.record(rec.as_dict())
        norm = list(state.get("norm_text") or [None] * S)
        history = []
        for s in range(S):
            if not state["active"][s] or not options[s]:
                continue
            tie = False
            if len(options[s]) == 1:
                norm[s] = options[s][0]
            else:
                norm[s], tie = plurality_winner(options[s], votes[s], rng)
            history.append(
                {
                    "society": s,
                    "round": int(state["round"]) - 1,
                    "norm": norm[s],
                    "options": len(options[s]),
                    "votes": json.dumps(sorted(Counter(votes[s]).items())),
                    "tie": tie,
                }
            )
        return PolicyResult(None, {"norm_text": norm, "norm_history": history, **batch.updates()})


def initial_beliefs(agent_types: list[list[str]], rng: np.random.Generator, variant: str = ORIGINAL) -> list[list[str]]:
    """Each agent draws one template of its type from the bank (§4.2) of the prompt ``variant``."""
    bank = belief_bank(variant)
    return [[bank[t][int(rng.integers(len(bank[t])))] for t in row] for row in agent_types]
