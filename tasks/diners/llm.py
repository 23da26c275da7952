"""LLM policies of the Diner's Dilemma society (paper §3.2, Figs. 3-5).

Each agent gets its strategy's definition in natural language (``prompts/strategies.json``)
and a persona with a lifestyle (``prompts/personas.json``) in its system prompt, and decides
in context, one structured decision each (validated with pydantic, retried, with a fallback):

=========  ===============================================  ==================================
phase      who decides, what                                 prompt
=========  ===============================================  ==================================
order      every diner: ``{"meal": "budget" | "premium"}``   ``order.txt`` (own history shown)
punish     every diner: ``{"punish": [member numbers]}``     ``punish.txt`` (orders, history)
metanorm   Moralists only: ``{"punish": [member numbers]}``  ``metanorm.txt`` (who punished whom)
=========  ===============================================  ==================================

Punishment costs are stated as ``p`` and ``k`` or left unstated (``params["stated"]``).
Member numbers are validated (members of the diner's own group, not itself, no repeats).

Accuracy. Every decision row also carries the strategy the agent held, the action its
strategy's definition prescribes in that exact situation (:mod:`.model`'s rules applied to
the actual orders and punishments), the action chosen, and ``accurate``. Chosen actions are
applied as answered, never corrected. A decision that fell back (no valid answer after the
retries) is applied as its fallback (budget meal / punish nobody) and counts as inaccurate.
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import lru_cache
from typing import Annotated, Any, Literal

import numpy as np
from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel, Field, create_model

from cooplab.agents.batch import Batch
from cooplab.agents.decisions import DecisionSpec, LLMService
from cooplab.graphs import prompts
from cooplab.graphs.nodes import PolicyResult
from cooplab.graphs.prompts import ORIGINAL
from cooplab.tasks.diners import model as dm


def prompt(name: str, variant: str = ORIGINAL) -> str:
    """The prompt file ``name`` as ``variant`` words it (:mod:`cooplab.graphs.prompts`; a file the variant lacks is the
    original's)."""
    return prompts.text("cooplab.tasks.diners", name, variant)


@lru_cache(maxsize=None)
def strategy_texts(variant: str = ORIGINAL) -> dict[str, str]:
    texts = json.loads(prompt("strategies.json", variant))
    if not isinstance(texts, dict) or not all(
        isinstance(texts.get(k), str) and texts[k].strip() for k in dm.STRATEGIES
    ):
        raise ValueError(
            f"strategies.json of prompt variant {variant!r} must give a text for each of {', '.join(dm.STRATEGIES)}"
        )
    return texts


@lru_cache(maxsize=None)
def personas(variant: str = ORIGINAL) -> list[dict[str, str]]:
    """The diners' personas (a name and a lifestyle each), as the prompt ``variant`` gives them (the persona axis)."""
    ps = json.loads(prompt("personas.json", variant))
    if (
        not isinstance(ps, list)
        or not ps
        or not all(
            isinstance(p, dict)
            and isinstance(p.get("name"), str)
            and p["name"].strip()
            and isinstance(p.get("lifestyle"), str)
            for p in ps
        )
    ):
        raise ValueError(
            f'personas.json of prompt variant {variant!r} must be a non-empty list of {{"name": ..., "lifestyle": ...}}'
        )
    return ps


# --- decisions -----------------------------------------------------------------------------
class OrderDecision(BaseModel):
    meal: Literal["budget", "premium"]


class PunishDecision(BaseModel):
    punish: list[int] = Field(default_factory=list, description="member numbers to punish; [] for nobody")


def _check_punish(v: PunishDecision, ctx: dict[str, Any]) -> None:
    allowed = ctx["allowed"]
    for j in v.punish:
        if j not in allowed:
            raise ValueError(
                f"member {j} is not one of the other members of your group ({', '.join(map(str, allowed))})"
            )
    if len(set(v.punish)) != len(v.punish):
        raise ValueError("each member may be listed at most once")


ORDER = DecisionSpec(
    phase="order",
    schema=OrderDecision,
    max_attempts=3,
    fallback=lambda ctx: OrderDecision(meal="budget"),
    instructions='Reply with one JSON object only: {"meal": "budget"} or {"meal": "premium"}.',
)
PUNISH = DecisionSpec(
    phase="punish",
    schema=PunishDecision,
    check=_check_punish,
    max_attempts=3,
    fallback=lambda ctx: PunishDecision(punish=[]),
    instructions='Reply with one JSON object only: {"punish": [member numbers, or none]}.',
)
METANORM = DecisionSpec(
    phase="metanorm",
    schema=PunishDecision,
    check=_check_punish,
    max_attempts=3,
    fallback=lambda ctx: PunishDecision(punish=[]),
    instructions='Reply with one JSON object only: {"punish": [member numbers, or none]}.',
)


@lru_cache(maxsize=None)
def punish_spec(phase: str, n_agents: int, max_targets: int) -> DecisionSpec:
    """The punish decision with its JSON schema bounded to this society: member numbers in
    1..N and at most (group size - 1) of them (a schema-constrained model, e.g. llama.cpp's
    grammar, cannot produce anything else); membership of the agent's own group is checked."""
    schema = create_model(
        f"PunishDecision_{n_agents}_{max_targets}",
        __base__=PunishDecision,
        punish=(
            list[Annotated[int, Field(ge=1, le=n_agents)]],
            Field(default_factory=list, max_length=max_targets, description="member numbers to punish; [] for nobody"),
        ),
    )
    base = PUNISH if phase == "punish" else METANORM
    return replace(base, schema=schema, constrain=_only_members)


def _only_members(schema: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
    """Per-call decoding constraint: the list may only hold the other members of the agent's
    own group, each at most once (llama.cpp's grammar ignores numeric bounds)."""
    allowed = sorted(int(j) for j in ctx["allowed"])
    prop = {"type": "array", "items": {"enum": allowed}, "maxItems": len(allowed)}
    return {**schema, "properties": {**schema.get("properties", {}), "punish": prop}, "required": ["punish"]}


# --- prompt pieces -------------------------------------------------------------------------
def _money(x: float) -> str:
    return f"${x:g}"


def _points(x: float) -> str:
    return f"{x:g} point{'' if x == 1 else 's'}"


def member(state: dict[str, Any], s: int, j: int, variant: str = ORIGINAL) -> str:
    ps = personas(variant)
    return f"member {j + 1} ({ps[state['personas'][s][j] % len(ps)]['name']})"


def group_of(state: dict[str, Any], s: int, i: int) -> list[int]:
    return [int(j) for j in np.flatnonzero(state["group"][s] == state["group"][s, i])]


def system(state: dict[str, Any], s: int, i: int, variant: str = ORIGINAL) -> SystemMessage:
    per = personas(variant)[state["personas"][s][i] % len(personas(variant))]
    name = dm.STRATEGIES[int(state["strategy"][s, i])]
    text = prompt("system.txt", variant).format(
        name=per["name"],
        me=i + 1,
        lifestyle=per["lifestyle"],
        group_size=len(group_of(state, s, i)),
        venue=dm.VENUES[int(state["venue"][s, i]) % len(dm.VENUES)],
        strategy_text=strategy_texts(variant)[name],
    )
    return SystemMessage(content=text.strip())


def cost_line(state: dict[str, Any], s: int) -> str:
    P = state["params"]
    if bool(P["stated"][s]):
        return (
            f"Punishing a member costs you {_points(P['k'][s])} of utility per member punished, and costs each "
            "punished "
            f"member {_points(P['p'][s])} per punisher."
        )
    return "Punishing a member has a cost for you and a cost for the punished member."


def own_history(state: dict[str, Any], s: int, i: int) -> str:
    hist = state.get("history") or []
    if not hist:
        return "- Nothing yet: this is the first iteration."
    lines = []
    for rec in hist:
        got = int(rec["punish1"][s, :, i].sum() + rec["punish2"][s, :, i].sum())
        meal = "premium" if rec["defect"][s, i] else "budget"
        lines.append(
            f"- Iteration {rec['round']}: you ordered the {meal} meal; "
            + (f"you were punished by {got} member{'s' if got != 1 else ''}." if got else "nobody punished you.")
        )
    return "\n".join(lines)


def orders_now(state: dict[str, Any], s: int, i: int, variant: str = ORIGINAL) -> str:
    return "\n".join(
        f"- {member(state, s, j, variant)}{' (you)' if j == i else ''}: "
        f"{'premium meal (defected)' if state['defect'][s, j] else 'budget meal (cooperated)'}"
        for j in group_of(state, s, i)
    )


def order_history(state: dict[str, Any], s: int, i: int) -> str:
    hist = state.get("history") or []
    if not hist:
        return "- None: this is the first iteration."
    grp = group_of(state, s, i)
    return "\n".join(
        f"- Iteration {rec['round']}: "
        + ", ".join(
            f"member {j + 1}{' (you)' if j == i else ''} {'premium' if rec['defect'][s, j] else 'budget'}" for j in grp
        )
        for rec in hist
    )


def punishments_now(state: dict[str, Any], s: int, i: int, variant: str = ORIGINAL) -> str:
    grp = group_of(state, s, i)
    lines = []
    for a in grp:
        targets = [j for j in grp if state["punish1"][s, a, j]]
        who = "you" if a == i else member(state, s, a, variant)
        lines.append(
            f"- {who}: "
            + (f"punished {', '.join(member(state, s, j, variant) for j in targets)}" if targets else "punished nobody")
        )
    return "\n".join(lines)


def order_messages(state: dict[str, Any], s: int, i: int, variant: str = ORIGINAL) -> list:
    P = state["params"]
    comp = ", ".join(member(state, s, j, variant) for j in group_of(state, s, i) if j != i)
    human = prompt("order.txt", variant).format(
        round=int(state["round"]),
        c_b=_money(P["c_b"][s]),
        c_p=_money(P["c_p"][s]),
        group_size=len(group_of(state, s, i)),
        companions=comp,
        own_history=own_history(state, s, i),
    )
    return [system(state, s, i, variant), HumanMessage(content=human.strip())]


def punish_messages(state: dict[str, Any], s: int, i: int, variant: str = ORIGINAL) -> list:
    human = prompt("punish.txt", variant).format(
        round=int(state["round"]),
        venue=dm.VENUES[int(state["venue"][s, i]) % len(dm.VENUES)],
        cost_line=cost_line(state, s),
        orders=orders_now(state, s, i, variant),
        order_history=order_history(state, s, i),
    )
    return [system(state, s, i, variant), HumanMessage(content=human.strip())]


def metanorm_messages(state: dict[str, Any], s: int, i: int, variant: str = ORIGINAL) -> list:
    human = prompt("metanorm.txt", variant).format(
        round=int(state["round"]),
        venue=dm.VENUES[int(state["venue"][s, i]) % len(dm.VENUES)],
        cost_line=cost_line(state, s),
        orders=orders_now(state, s, i, variant),
        punishments=punishments_now(state, s, i, variant),
    )
    return [system(state, s, i, variant), HumanMessage(content=human.strip())]


# --- policies ------------------------------------------------------------------------------
def _row(rec, state, s: int, i: int, prescribed: Any, chosen: Any) -> dict[str, Any]:
    d = rec.as_dict()
    d.update(
        strategy=dm.STRATEGIES[int(state["strategy"][s, i])],
        prescribed=json.dumps(prescribed),
        chosen=json.dumps(chosen),
        accurate=bool(not rec.fallback_used and prescribed == chosen),
    )
    return d


def _nobody(state) -> np.ndarray:
    return np.zeros(np.shape(state["strategy"]), dtype=bool)


class LLMOrderPolicy:
    """Fig. 3: each diner orders in context; prescribed = the strategy's order rule. ``rule_seats``
    (``state -> (S, N) bool``): seats not asked, whose order is the rule's (a rule-based invader's)."""

    def __init__(self, variant: str = ORIGINAL, rule_seats: Any = None):
        self.variant = variant  # the prompt variant (docs/robustness.md)
        self.rule_seats = rule_seats or _nobody

    async def __call__(self, state, rng, context, config) -> PolicyResult:
        service: LLMService = context.llm
        S, N = state["strategy"].shape
        batch = Batch(service)
        ruled = self.rule_seats(state)
        jobs = [
            (s, i, order_messages(state, s, i, self.variant), {})
            for s in range(S)
            if state["active"][s]
            for i in range(N)
            if not ruled[s, i]
        ]
        prescribed = dm.rule_orders(state["strategy"], state["reformed"])
        defect = np.where(ruled, prescribed, False)
        for s, i, value, rec in await batch.ask(ORDER, jobs, int(state["round"]), config):
            defect[s, i] = value.meal == "premium"
            batch.record(_row(rec, state, s, i, "premium" if prescribed[s, i] else "budget", value.meal))
        return PolicyResult(defect, batch.updates())


class _LLMPunishBase:
    spec: DecisionSpec
    key = "punish1"

    def __init__(self, variant: str = ORIGINAL, rule_seats: Any = None):
        self.variant = variant  # the prompt variant (docs/robustness.md)
        self.rule_seats = rule_seats or _nobody  # seats not asked, whose punishments are the rule's

    def who(self, state) -> np.ndarray:
        raise NotImplementedError

    def messages(self, state, s, i) -> list:
        raise NotImplementedError

    def prescribed(self, state) -> np.ndarray:
        raise NotImplementedError

    async def __call__(self, state, rng, context, config) -> PolicyResult:
        service: LLMService = context.llm
        S, N = state["strategy"].shape
        batch = Batch(service)
        ruled = self.rule_seats(state)
        asked = self.who(state) & state["active"][:, None] & ~ruled
        jobs = [
            (
                s,
                int(i),
                self.messages(state, s, int(i)),
                {"allowed": [j + 1 for j in group_of(state, s, int(i)) if j != i]},
            )
            for s in range(S)
            for i in np.flatnonzero(asked[s])
        ]
        presc = self.prescribed(state)
        out = np.where((ruled & self.who(state))[:, :, None], presc, False)
        largest = int(max(np.bincount(g).max() for g in np.asarray(state["group"])))
        spec = punish_spec(self.spec.phase, N, largest - 1)
        for s, i, value, rec in await batch.ask(spec, jobs, int(state["round"]), config):
            for j in value.punish:
                out[s, i, j - 1] = True
            batch.record(
                _row(rec, state, s, i, sorted(int(j) + 1 for j in np.flatnonzero(presc[s, i])), sorted(value.punish))
            )
        return PolicyResult(out, batch.updates())


class LLMPunishPolicy(_LLMPunishBase):
    """Fig. 4: every diner decides whom of its group to punish for their order."""

    spec = PUNISH

    def who(self, state):
        return np.ones_like(state["strategy"], dtype=bool)

    def messages(self, state, s, i):
        return punish_messages(state, s, i, self.variant)

    def prescribed(self, state):
        return dm.rule_punish(state["strategy"], state["defect"], dm.same_group(state["group"]))


class LLMMetanormPolicy(_LLMPunishBase):
    """Fig. 5: Moralists decide whom to punish for failing to enforce the norm."""

    spec = METANORM

    def who(self, state):
        return state["strategy"] == dm.M

    def messages(self, state, s, i):
        return metanorm_messages(state, s, i, self.variant)

    def prescribed(self, state):
        return dm.rule_metanorm(state["strategy"], state["defect"], state["punish1"], dm.same_group(state["group"]))


def llm_phases(variant: str = ORIGINAL, invader: Any = None):
    """The diners' graph nodes with LLM policies whose prompts ``variant`` words (its personas and
    strategy texts read, and checked, now: a broken file is one line before the first call). A
    rule-based ``invader``'s seat is left out of the calls from its iteration on and plays its
    strategy's rule (tasks/diners/invaders.py)."""
    from cooplab.tasks.diners.invaders import rule_mask
    from cooplab.tasks.diners.society import diners_phases

    personas(variant), strategy_texts(variant)
    mask = rule_mask(invader)
    return diners_phases(
        LLMOrderPolicy(variant, mask), LLMPunishPolicy(variant, mask), LLMMetanormPolicy(variant, mask)
    )


def accuracy(decisions: list[dict[str, Any]]) -> dict[str, Any]:
    """Decision accuracy (orders) and punishment accuracy (stages 2 and 3), overall and by strategy."""
    out: dict[str, Any] = {}
    for name, phases in (("decision_accuracy", ("order",)), ("punishment_accuracy", ("punish", "metanorm"))):
        rows = [d for d in decisions if d["phase"] in phases]
        by: dict[str, list[bool]] = {}
        for d in rows:
            by.setdefault(d["strategy"], []).append(bool(d["accurate"]))
        out[name] = None if not rows else sum(bool(d["accurate"]) for d in rows) / len(rows)
        out[f"{name}_n"] = len(rows)
        out[f"{name}_by_strategy"] = {k: sum(v) / len(v) for k, v in sorted(by.items())}
    return out
