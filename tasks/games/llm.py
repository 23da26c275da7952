"""LLM players of the six behavioral games (paper §3.1, Appendix B).

Every player of every simulation is one agent (``society`` = simulation, ``agent`` = player
index); all players of all simulations decide a phase concurrently through
:class:`cooplab.agents.batch.Batch`, one structured decision each (validated with pydantic, the
validation error fed back, at most ``MAX_ATTEMPTS`` attempts, then the documented fallback,
recorded as ``fallback_used`` in the decision row):

============  =====================================================  ==========================================
phase         the player answers                                     fallback (no valid answer)
============  =====================================================  ==========================================
effort        ``{"effort": 0..max_effort}``                          its own previous action; round 1: Nash (0)
extract       ``{"extract": 0..max_extract}``                        its own previous action; round 1: Nash (max)
contribute    ``{"contribute": 0..endowment}``                       its own previous action; round 1: Nash (0)
withdraw      ``{"withdraw": 0..max_withdraw}``                      its own previous action; round 1: Nash (0)
allocate      ``{"keep": k, "group": g, "global": n}``, sum = E      its own previous allocation; round 1: keep all
sanction      ``{"sanctions": {"<member>": tokens, ...}}``           no sanctions
deliberate    ``{"message": "1-3 sentences"}`` (``--deliberation``)  no message
============  =====================================================  ==========================================

Sanction targets must be other members of the player's own group (numbers as shown, 1..N); a
player outside the group or oneself is refused with the validation error and asked again, and
the total may not exceed ``max_sanction``.

Prompts (text files in ``tasks/games/prompts``) are written in our own words from Appendix B:
a system prompt (B.1, standard or alternate style) holding the game's description (B.4, with the
CONFIGURED group sizes and numbers of players, never the paper's inconsistent counts) and, for
the ``cot`` and ``tom`` conditions, a reasoning instruction (then the JSON schema has a
``reasoning`` field before the action); a decision prompt per round (B.2) with the history of
the earlier rounds as the player learns it (:func:`cooplab.tasks.games.society.round_view`: own
action and payoff, its group's actions, the population aggregates its payoff depends on,
sanctions of its own group only), the group's deliberation messages of this round when
deliberation is on (B.3), and Collective Risk's status update (B.4.4).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Any

import numpy as np
from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel, ConfigDict, Field, create_model

from cooplab.agents.batch import Batch
from cooplab.agents.decisions import DecisionSpec
from cooplab.agents.decisions import validate as validate_answer  # noqa: F401 - (spec, text, ctx) -> value; tests use it
from cooplab.graphs import prompts
from cooplab.graphs.nodes import PolicyResult
from cooplab.graphs.prompts import ORIGINAL
from cooplab.tasks.games import equilibria as eq
from cooplab.tasks.games.params import PROMPTS
from cooplab.tasks.games.phases import DECISION
from cooplab.tasks.games.players import action_range
from cooplab.tasks.games.society import round_view

MAX_ATTEMPTS = 3
HISTORY_SHOWN = 10  #: earlier rounds shown in full (older ones are summarized by one line)
REASONING_TOKENS = 320  #: output cap of a cot/tom decision (reasoning, then the action)
MESSAGE_TOKENS = 120  #: output cap of a deliberation message
MAX_MESSAGE_CHARS = 500

#: the JSON field of each decision (Public Goods: keep, group, global)
FIELD = {"effort": "effort", "extract": "extract", "contribute": "contribute", "withdraw": "withdraw"}


def prompt(name: str, variant: str = ORIGINAL) -> str:
    """The prompt ``name`` as ``variant`` words it (:mod:`cooplab.graphs.prompts`; a file the variant lacks is the
    original's)."""
    return prompts.text("cooplab.tasks.games", f"{name}.txt", variant)


def style(condition: str) -> str:
    """The wording of the prompts: the alternate condition uses the alternate texts, the others the standard ones."""
    return "alternate" if condition == "alternate" else "standard"


def reasoning(condition: str) -> bool:
    return condition in ("cot", "tom")


# --- decisions -----------------------------------------------------------------------------
class _Strict(BaseModel):
    model_config = ConfigDict(populate_by_name=True)


@lru_cache(maxsize=None)
def action_spec(game: str, hi: int, endowment: int, condition: str) -> DecisionSpec:
    """The decision of ``game``'s decision phase under a prompt condition (cot/tom: a
    ``reasoning`` field before the action)."""
    phase = DECISION[game]
    fields: dict[str, Any] = {}
    if reasoning(condition):
        fields["reasoning"] = (str, Field(max_length=4000, description="your reasoning, before the decision"))
    Int = Annotated[int, Field(ge=0, le=hi)]
    if game == "public-goods":
        fields["keep"] = (Int, Field(description="tokens kept"))
        fields["group"] = (Int, Field(description="tokens to your group's pool"))
        fields["global_"] = (Int, Field(alias="global", description="tokens to the global pool"))

        def check(v: Any, ctx: dict[str, Any]) -> None:
            total = v.keep + v.group + v.global_
            if total != endowment:
                raise ValueError(
                    f"keep + group + global must equal exactly {endowment} tokens, got {v.keep} + {v.group} + "
                    f"{v.global_} = {total}"
                )

        example = '{"keep": <integer>, "group": <integer>, "global": <integer>}'
    else:
        fields[FIELD[phase]] = (Int, Field(description=f"your {phase} from 0 to {hi}"))
        check = lambda v, ctx: None  # noqa: E731 - the range is the schema's
        example = f'{{"{FIELD[phase]}": <integer from 0 to {hi}>}}'
    if reasoning(condition):
        example = '{"reasoning": "<your reasoning>", ' + example[1:]
    schema = create_model(f"{phase.title()}Decision_{hi}_{condition}", __base__=_Strict, **fields)

    def fallback(ctx: dict[str, Any]) -> BaseModel:
        prev = ctx["fallback"]
        data: dict[str, Any] = {"reasoning": ""} if reasoning(condition) else {}
        if game == "public-goods":
            data.update(keep=int(prev[0]), group=int(prev[1]), **{"global": int(prev[2])})
        else:
            data[FIELD[phase]] = int(prev)
        return schema.model_validate(data)

    return DecisionSpec(
        phase=phase,
        schema=schema,
        check=check,
        fallback=fallback,
        max_attempts=MAX_ATTEMPTS,
        max_tokens=REASONING_TOKENS if reasoning(condition) else None,
        instructions=f"Reply with one JSON object only: {example}.",
    )


def action_example(game: str, hi: int, condition: str) -> str:
    return (
        action_spec(game, hi, 0, condition).instructions.removeprefix("Reply with one JSON object only: ").rstrip(".")
    )


class _SanctionBase(_Strict):
    sanctions: dict[int, Annotated[int, Field(ge=0)]] = Field(
        default_factory=dict, description="member number -> sanction tokens; {} for none"
    )


def _check_sanctions(v: Any, ctx: dict[str, Any]) -> None:
    allowed, me = ctx["allowed"], ctx["me"]
    for j in v.sanctions:
        if j == me:
            raise ValueError(
                f"you cannot sanction yourself (Player {me}); sanction only other members of your group "
                f"({', '.join(map(str, allowed))})"
            )
        if j not in allowed:
            raise ValueError(
                f"Player {j} is not a member of your group; you can only sanction the other members of your group "
                f"({', '.join(map(str, allowed))})"
            )
    total = sum(v.sanctions.values())
    if total > ctx["max_sanction"]:
        raise ValueError(f"you may spend at most {ctx['max_sanction']} sanction tokens in total, got {total}")


def _only_own_group(schema: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
    """Per-call decoding constraint (grammar-constrained models, e.g. llama.cpp): the sanctions may
    only name the other members of the player's own group, each with 0..max_sanction tokens (the
    total is checked after the answer)."""
    tokens = {"enum": list(range(int(ctx["max_sanction"]) + 1))}
    prop = {"type": "object", "properties": {str(j): tokens for j in ctx["allowed"]}, "additionalProperties": False}
    return {**schema, "properties": {**schema.get("properties", {}), "sanctions": prop}, "required": ["sanctions"]}


@lru_cache(maxsize=None)
def sanction_spec(condition: str) -> DecisionSpec:
    fields: dict[str, Any] = {}
    if reasoning(condition):
        fields["reasoning"] = (str, Field(max_length=4000))
    schema = create_model(f"SanctionDecision_{condition}", __base__=_SanctionBase, **fields)
    example = '{"sanctions": {"<member number>": <tokens>, ...}}'
    if reasoning(condition):
        example = '{"reasoning": "<your reasoning>", "sanctions": {"<member number>": <tokens>, ...}}'

    def fallback(ctx: dict[str, Any]) -> BaseModel:
        return schema.model_validate({"reasoning": "", "sanctions": {}} if reasoning(condition) else {"sanctions": {}})

    return DecisionSpec(
        phase="sanction",
        schema=schema,
        check=_check_sanctions,
        fallback=fallback,
        max_attempts=MAX_ATTEMPTS,
        constrain=_only_own_group,
        max_tokens=REASONING_TOKENS if reasoning(condition) else None,
        instructions=f"Reply with one JSON object only: {example} (an empty object {{}} for no sanctions).",
    )


class MessageDecision(_Strict):
    message: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)


DELIBERATE = DecisionSpec(
    phase="deliberate",
    schema=MessageDecision,
    max_attempts=MAX_ATTEMPTS,
    max_tokens=MESSAGE_TOKENS,
    fallback=lambda ctx: None,  # no message (the group sees nothing from this player)
    instructions='Reply with one JSON object only: {"message": "<1 to 3 sentences>"}.',
)


# --- prompt pieces -------------------------------------------------------------------------
def _num(x: float) -> str:
    return f"{x:g}"


def groups_phrase(P: Any, unit: str = "player", group: str = "group") -> str:
    """ "2 groups of 5 players each (10 players total)" from the configured sizes."""
    sizes, n = list(P.group_sizes), P.n_players
    if len(sizes) == 1:
        return f"1 {group} of {n} {unit}s"
    if len(set(sizes)) == 1:
        return f"{len(sizes)} {group}s of {sizes[0]} {unit}s each ({n} {unit}s total)"
    listed = ", ".join(map(str, sizes[:-1])) + f" and {sizes[-1]}"
    return f"{len(sizes)} {group}s of {listed} {unit}s ({n} {unit}s total)"


def description(P: Any, condition: str, group_size: int, variant: str = ORIGINAL) -> str:
    """The game's description (B.4) with the configured sizes and constants."""
    values = {k: (_num(v) if isinstance(v, float) else v) for k, v in P.model_dump().items() if not isinstance(v, list)}
    values.update(
        groups=groups_phrase(P),
        groups_teams=groups_phrase(P, "worker", "team"),
        n=P.n_players,
        others=P.n_players - 1,
        group_size=group_size,
    )
    if P.GAME == "collective-risk":
        values["loss_pct"] = _num(100 * P.loss_probability)
    return prompt(f"{P.GAME}.{style(condition)}", variant).format(**values).strip()


def members_of(group: np.ndarray, i: int) -> list[int]:
    g = np.asarray(group)
    return [int(j) for j in np.flatnonzero(g == g[i])]


def system(P: Any, state: Any, i: int, condition: str, variant: str = ORIGINAL) -> SystemMessage:
    g = np.asarray(state["group"])
    strategy = prompt(f"strategy.{condition}", variant) if reasoning(condition) else ""
    text = prompt(f"system.{style(condition)}", variant).format(
        player=i + 1,
        group=int(g[i]) + 1,
        description=description(P, condition, len(members_of(g, i)), variant),
        strategy=strategy,
    )
    return SystemMessage(content=text.strip())


def _who(j: int, i: int) -> str:
    return f"Player {j + 1}" + (" (you)" if j == i else "")


def _action_text(P: Any, a: Any) -> str:
    if P.GAME == "public-goods":
        return f"keep {a[0]}, group pool {a[1]}, global pool {a[2]}"
    return str(a)


def round_summary(P: Any, view: dict[str, Any], i: int) -> str:
    """One earlier round as the player learned it (:func:`round_view`)."""
    verb = {
        "effort": "effort",
        "extract": "extracted",
        "contribute": "contributed",
        "withdraw": "withdrew",
        "allocate": "allocated",
    }[DECISION[P.GAME]]
    lines = [
        "Your group: "
        + "; ".join(f"{_who(j, i)} {verb} {_action_text(P, a)}" for j, a in view["group_actions"].items())
    ]
    game = P.GAME
    if game == "weakest-link":
        lines.append(f"Minimum effort across all {P.n_players} players: {view['minimum_effort']}")
    elif game in ("cpr", "cpr-sanction"):
        lines.append(
            f"All {P.n_players} players extracted {view['total_extracted']} tokens; {view['pool_remaining']} of "
            f"{P.capacity} remained in the pool"
        )
        if game == "cpr-sanction":
            s = view["sanctions"]
            lines.append(
                "Sanctions in your group: "
                + (
                    "; ".join(f"Player {a + 1} gave Player {b + 1} {t} token{'s' if t != 1 else ''}" for a, b, t in s)
                    if s
                    else "none"
                )
            )
    elif game == "collective-risk":
        lines.append(
            f"Cumulative contributions of all {P.n_players} players: {view['total_contributed']} / {P.threshold}"
        )
        if "threshold_met" in view:
            lines.append(
                "Threshold met"
                if view["threshold_met"]
                else (
                    "Threshold missed; all savings were lost"
                    if view["savings_lost"]
                    else "Threshold missed; savings were kept"
                )
            )
    elif game == "o-ring":
        prod = ", ".join(f"team {g + 1} {p:.1f}" for g, p in enumerate(view["production"]))
        lines.append(
            f"Pool remaining: {view['pool_remaining']} of {P.pool}; production: {prod}; "
            f"the system {'succeeded' if view['success'] else 'failed'}"
        )
    elif game == "public-goods":
        lines.append(f"Your group's pool: {view['your_group_pool']} tokens; global pool: {view['global_pool']} tokens")
    if "your_payoff" in view and not (game == "collective-risk" and "threshold_met" not in view):
        lines.append(f"Your payoff: {view['your_payoff']:.2f}")
    return "\n".join(lines)


def history_text(P: Any, state: Any, s: int, i: int) -> str:
    hist = list(state.get("history") or [])
    if not hist:
        return "None: this is the first round."
    shown = hist[-HISTORY_SHOWN:]
    parts = [f"({len(hist) - len(shown)} earlier rounds not shown)"] if len(hist) > len(shown) else []
    for rec in shown:
        parts.append(
            f"--- Round {int(rec['round'])} ---\n" + round_summary(P, round_view(P, rec, state["group"], s, i), i)
        )
    return "\n".join(parts)


def deliberation_text(state: Any, s: int, i: int) -> str:
    """This round's messages of the player's group (B.2's GROUP DELIBERATION block)."""
    t = int(state["round"])
    g = np.asarray(state["group"])
    rows = [
        m for m in (state.get("messages") or []) if m["round"] == t and m["simulation"] == s and g[m["player"]] == g[i]
    ]
    if not rows:
        return ""
    lines = "\n".join(f"[{_who(m['player'], i)}]: {m['message']}" for m in sorted(rows, key=lambda m: m["player"]))
    return f"\nGROUP DELIBERATION (your group's discussion before this decision):\n{lines}\n"


def status_text(P: Any, state: Any, s: int) -> str:
    if P.GAME != "collective-risk":
        return ""
    hist = state.get("history") or []
    total = int(np.asarray(hist[-1]["total"])[s]) if hist else 0
    t = int(state["round"])
    lines = [
        f"\nCOLLECTIVE RISK STATUS (Round {t} of {P.rounds}):",
        f"Cumulative contributions so far: {total} / {P.threshold} ({100 * total / P.threshold:.0f}%)",
        (
            f"Still need {P.threshold - total} more tokens across all players to avoid catastrophe."
            if total < P.threshold
            else "The threshold has been reached."
        ),
    ]
    if t == P.rounds:
        lines.append(
            f"THIS IS THE FINAL ROUND. If the threshold is not met, there is a {_num(100 * P.loss_probability)}% "
            "chance "
            "ALL savings are lost."
        )
    return "\n".join(lines) + "\n"


def ask_text(P: Any) -> str:
    hi = action_range(P)
    if P.GAME == "public-goods":
        return f"Your total allocation must equal exactly {P.endowment} tokens."
    return {
        "weakest-link": f"Choose your effort level, an integer from 0 to {hi}.",
        "cpr": f"Choose how many tokens to extract, an integer from 0 to {hi}.",
        "cpr-sanction": f"Choose how many tokens to extract (Phase 1), an integer from 0 to {hi}.",
        "collective-risk": f"You have {hi} tokens this round. Decide how many to contribute, an integer from 0 to "
        f"{hi}.",
        "o-ring": f"Choose how many units to withdraw, an integer from 0 to {hi}.",
    }[P.GAME]


def decision_messages(P: Any, state: Any, s: int, i: int, condition: str, variant: str = ORIGINAL) -> list:
    human = prompt(f"decision.{style(condition)}", variant).format(
        round=int(state["round"]),
        rounds=P.rounds,
        history=history_text(P, state, s, i),
        deliberation=deliberation_text(state, s, i),
        status=status_text(P, state, s),
        ask=ask_text(P),
        example=action_example(P.GAME, action_range(P), condition),
    )
    return [system(P, state, i, condition, variant), HumanMessage(content=human.strip())]


def sanction_messages(P: Any, state: Any, s: int, i: int, condition: str, variant: str = ORIGINAL) -> list:
    g = np.asarray(state["group"])
    mine = members_of(g, i)
    a, pay = np.asarray(state["action"])[s], np.asarray(state["stage_payoff"])[s]
    ext = "\n".join(f"- {_who(j, i)}: extracted {int(a[j])}, phase 1 payoff: {pay[j]:.2f}" for j in mine)
    total = int(a.sum())
    example = (
        sanction_spec(condition).instructions.removeprefix("Reply with one JSON object only: ").split(" (an empty")[0]
    )
    human = prompt("sanction", variant).format(
        round=int(state["round"]),
        rounds=P.rounds,
        extractions=ext,
        capacity=P.capacity,
        total=total,
        n_players=P.n_players,
        remaining=max(0, P.capacity - total),
        my_payoff=f"{pay[i]:.2f}",
        members=", ".join(f"Player {j + 1}" for j in mine if j != i),
        cost=_num(P.sanction_cost),
        damage=_num(P.sanction_damage),
        max_sanction=P.max_sanction,
        example=example,
    )
    return [system(P, state, i, condition, variant), HumanMessage(content=human.strip())]


def deliberation_messages(P: Any, state: Any, s: int, i: int, condition: str, variant: str = ORIGINAL) -> list:
    g = np.asarray(state["group"])
    human = prompt("deliberation", variant).format(
        round=int(state["round"]),
        rounds=P.rounds,
        group=int(g[i]) + 1,
        members=", ".join(_who(j, i) for j in members_of(g, i)),
        history=history_text(P, state, s, i),
    )
    return [system(P, state, i, condition, variant), HumanMessage(content=human.strip())]


# --- policies ------------------------------------------------------------------------------
def _previous(P: Any, state: Any) -> np.ndarray:
    """Each player's fallback action: its own previous action, or the Nash action in round 1."""
    hist = state.get("history") or []
    if hist:
        return np.asarray(hist[-1]["action"])
    row = eq.profile("nash", P)[0]
    return np.broadcast_to(row, (state["simulations"], *row.shape))


def _row(rec: Any, condition: str) -> dict[str, Any]:
    d = rec.as_dict()
    d["prompt"] = condition
    return d


def _ruled(invader: Any, round_: int) -> tuple[str, int] | None:
    """(kind, seat) of a rule-based invader playing in ``round_`` (it arrived at K <= round_), or None."""
    from cooplab.tasks.games.invaders import RULE_KINDS

    if not invader or invader.get("kind") not in RULE_KINDS or round_ < int(invader["round"]):
        return None
    return str(invader["kind"]), int(invader["agent"])


class LLMDecidePolicy:
    """The decision phase of ``P.GAME``: every player of every simulation, concurrently. A rule-based
    ``invader``'s seat is not asked from its round K on: it plays the invader's action
    (tasks/games/invaders.py)."""

    def __init__(self, P: Any, condition: str, variant: str = ORIGINAL, invader: Any = None):
        self.P, self.condition, self.variant, self.invader = P, condition, variant, invader

    async def __call__(self, state, rng, context, config) -> PolicyResult:
        P = self.P
        S, N = state["simulations"], len(state["group"])
        spec = action_spec(P.GAME, action_range(P), getattr(P, "endowment", 0), self.condition)
        prev = _previous(P, state)
        ruled = _ruled(self.invader, int(state["round"]))
        jobs = [
            (s, i, decision_messages(P, state, s, i, self.condition, self.variant), {"fallback": prev[s, i].tolist()})
            for s in range(S)
            for i in range(N)
            if ruled is None or i != ruled[1]
        ]
        out = np.zeros((S, N, 3) if P.GAME == "public-goods" else (S, N), dtype=np.int64)
        if ruled is not None:
            from cooplab.tasks.games.invaders import invader_action

            out[:, ruled[1]] = invader_action(P, ruled[0], int(state["round"]), ruled[1])
        batch = Batch(context.llm)
        for s, i, value, rec in await batch.ask(spec, jobs, int(state["round"]), config):
            out[s, i] = (
                [value.keep, value.group, value.global_]
                if P.GAME == "public-goods"
                else getattr(value, FIELD[spec.phase])
            )
            batch.record(_row(rec, self.condition))
        return PolicyResult(out, batch.updates())


class LLMSanctionPolicy:
    """CPR with sanctioning, phase 2: every player decides whom of its own group to sanction (a
    rule-based invader's seat is not asked from K on: it sanctions nobody)."""

    def __init__(self, P: Any, condition: str, variant: str = ORIGINAL, invader: Any = None):
        self.P, self.condition, self.variant, self.invader = P, condition, variant, invader

    async def __call__(self, state, rng, context, config) -> PolicyResult:
        P = self.P
        S, N = state["simulations"], len(state["group"])
        g = np.asarray(state["group"])
        jobs = []
        ruled = _ruled(self.invader, int(state["round"]))
        for s in range(S):
            for i in range(N):
                if ruled is not None and i == ruled[1]:
                    continue
                allowed = [j + 1 for j in members_of(g, i) if j != i]
                jobs.append(
                    (
                        s,
                        i,
                        sanction_messages(P, state, s, i, self.condition, self.variant),
                        {"allowed": allowed, "me": i + 1, "max_sanction": P.max_sanction},
                    )
                )
        out = np.zeros((S, N, N), dtype=np.int64)
        batch = Batch(context.llm)
        for s, i, value, rec in await batch.ask(sanction_spec(self.condition), jobs, int(state["round"]), config):
            for j, tokens in value.sanctions.items():
                out[s, i, j - 1] = tokens
            batch.record(_row(rec, self.condition))
        return PolicyResult(out, batch.updates())


class LLMDeliberatePolicy:
    """Optional within-group deliberation (B.3) before the decision: every member writes one short
    message at the same time; its group sees the messages in this round's decision prompt (a
    rule-based invader writes none from K on)."""

    def __init__(self, P: Any, condition: str, variant: str = ORIGINAL, invader: Any = None):
        self.P, self.condition, self.variant, self.invader = P, condition, variant, invader

    async def __call__(self, state, rng, context, config) -> PolicyResult:
        P = self.P
        S, N = state["simulations"], len(state["group"])
        g = np.asarray(state["group"])
        ruled = _ruled(self.invader, int(state["round"]))
        jobs = [
            (s, i, deliberation_messages(P, state, s, i, self.condition, self.variant), {})
            for s in range(S)
            for i in range(N)
            if ruled is None or i != ruled[1]
        ]
        batch = Batch(context.llm)
        rows = []
        t = int(state["round"])
        for s, i, value, rec in await batch.ask(DELIBERATE, jobs, t, config):
            if value is not None:
                rows.append(
                    {
                        "simulation": s,
                        "round": t,
                        "player": i,
                        "group": int(g[i]),
                        "message": " ".join(value.message.split()),
                    }
                )
            batch.record(_row(rec, self.condition))
        return PolicyResult(None, {"messages": rows, **batch.updates()})


def llm_policies(
    P: Any, condition: str, deliberation: bool, variant: str = ORIGINAL, invader: Any = None
) -> dict[str, Any]:
    """The policy slots of an LLM run: ``decide``, ``sanction`` (CPR with sanctioning) and
    ``deliberate`` (with deliberation), their prompts as ``variant`` words them; a rule-based
    ``invader`` (a dict) plays its seat from its round on without being asked."""
    if condition not in PROMPTS:
        raise ValueError(f"prompt must be one of {', '.join(PROMPTS)}, got {condition!r}")
    out: dict[str, Any] = {"decide": LLMDecidePolicy(P, condition, variant, invader)}
    if P.GAME == "cpr-sanction":
        out["sanction"] = LLMSanctionPolicy(P, condition, variant, invader)
    if deliberation:
        out["deliberate"] = LLMDeliberatePolicy(P, condition, variant, invader)
    return out
