"""Invaders and newcomers: one agent of a society is replaced at round K by an agent of another kind.

The invader takes the seat of agent ``agent`` (its number, text) from round ``round`` (K) on; before
K the run is the unperturbed run, draw for draw (every phase's generator is keyed by the seed,
the round and the phase, and the invader draws nothing). Kinds (what each does is the task's:
``tasks/cpr/invaders.py``, ``tasks/games/invaders.py``):

- ``greedy``: a greedy newcomer, the largest self-serving action every round;
- ``defector``: a rule-based defector (the CPR society: the selfish type's traits pinned; the
  games: the one-shot Nash action);
- ``free-rider``: takes part without paying for the common good (the CPR society: keeps to the norm
  but never monitors or fines, so it never pays the enforcement cost; the games: contributes
  nothing and never sanctions);
- ``model``: an agent of another model (LLM runs): the seat's calls go to ``model`` from K on.

A task stores the invader in ``params.invader`` as ``{"kind", "round", "agent", "model"}``; the
command line's ``--invader KIND@K[:AGENT]`` (``model:SPEC@K[:AGENT]`` for another model) and
Python's ``invader="greedy@5"`` or a dict say the same.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, StrictStr, model_serializer

from cooplab.limits import RULES, ConfigError, show

KINDS = ("greedy", "defector", "free-rider", "model")


def parse(
    value: Any, *, n_agents: int, rounds: int, agents: str, kinds: tuple[str, ...] = KINDS, where: str = "--invader"
) -> dict[str, Any] | None:
    """``value`` (None, ``"KIND@K[:AGENT]"`` or a dict with kind, round and optionally agent and
    model) as the stored invader, checked against the society (``n_agents`` seats, ``rounds``
    rounds, ``agents`` rule or llm); one line on anything else. The default seat is the last agent."""
    if value is None:
        return None
    if isinstance(value, str):
        head, sep, tail = value.strip().rpartition("@")
        if not sep or not head:
            raise ConfigError(
                f"{where} expects KIND@ROUND or KIND@ROUND:AGENT with KIND one of {', '.join(kinds)} "
                f"(model:SPEC for another model), got {show(value)}"
            )
        round_text, _, agent_text = tail.partition(":")
        kind, model = ("model", head[6:]) if head.startswith("model:") else (head, None)
        raw: dict[str, Any] = {
            "kind": kind,
            "round": _int_text(round_text, f"{where} {value}: the round"),
            "agent": agent_text.strip() or None,
            "model": model,
        }
    elif isinstance(value, dict):
        unknown = sorted(set(map(str, value)) - {"kind", "round", "agent", "model"})
        if unknown:
            raise ConfigError(f"{where}: unknown field {unknown[0]!r}; an invader has kind, round, agent and model")
        raw = {
            "kind": value.get("kind"),
            "round": value.get("round"),
            "agent": value.get("agent"),
            "model": value.get("model"),
        }
    else:
        raise ConfigError(
            f"{where} must be KIND@ROUND (e.g. greedy@5) or an object with kind and round, got {show(value)}"
        )
    kind = raw["kind"]
    if kind not in kinds:
        raise ConfigError(f"{where}: the kind must be one of {', '.join(kinds)}, got {show(kind)}")
    K = raw["round"]
    if isinstance(K, bool) or not isinstance(K, int) or not 2 <= K <= rounds:
        raise ConfigError(
            f"{where}: the round K must be a whole number in 2..{rounds} (the run's rounds; round 1 has no level "
            f"before it to recover to), got {show(K)}"
        )
    agent = raw["agent"]
    if agent is None:
        agent = str(n_agents - 1)
    if (
        isinstance(agent, bool)
        or not isinstance(agent, (int, str))
        or not str(agent).strip().isdigit()
        or not str(agent).strip().isascii()
        or not 0 <= int(str(agent).strip()) < n_agents
    ):
        raise ConfigError(
            f"{where}: the agent must be a number in 0..{n_agents - 1} (agents count from 0), got {show(agent)}"
        )
    agent = str(int(str(agent).strip()))
    model = raw["model"]
    if kind == "model":
        if agents != "llm":
            raise ConfigError(f"{where}: an invader of another model needs LLM agents (--agents llm)")
        if not isinstance(model, str) or not model.strip():
            raise ConfigError(
                f"{where}: an invader of another model needs its spec: model:SPEC@ROUND, got {show(model)}"
            )
        model = model.strip()
    elif model is not None:
        raise ConfigError(
            f"{where}: only an invader of kind model names a model, got kind {kind!r} with model {show(model)}"
        )
    return {"kind": kind, "round": K, "agent": agent, "model": model}


def check_stored(
    value: Any, *, n_agents: int, rounds: int, agents: str, kinds: tuple[str, ...] = KINDS
) -> dict[str, Any] | None:
    """A stored ``params.invader`` (config.json) checked like a new one; the same object back."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ConfigError(f"params.invader must be an object with kind, round, agent and model, got {show(value)}")
    out = parse(value, n_agents=n_agents, rounds=rounds, agents=agents, kinds=kinds, where="params.invader")
    if out != value:
        raise ConfigError(f"params.invader must be {out}, got {show(value)}")
    return out


def _int_text(text: str, where: str) -> int:
    text = text.strip()
    if not text.isdigit() or not text.isascii():
        raise ConfigError(f"{where} must be a whole number, got {text!r}")
    return int(text)


def text(invader: dict[str, Any] | None) -> str:
    """``greedy at round 5 in agent 3's seat`` (for reports)."""
    if not invader:
        return "none"
    who = f"model {invader['model']}" if invader["kind"] == "model" else invader["kind"]
    return f"{who} at round {invader['round']} in agent {invader['agent']}'s seat"


class Invader(BaseModel):
    """A run's invader as its settings hold it (config.json's ``params.invader``): the kind, the round K
    it arrives, the seat it takes (an agent number, text) and, for kind ``model``, the model's spec.
    What depends on the society (K within its rounds, the seat among its agents, ``model`` only for
    LLM agents) is checked by the settings that hold it (:func:`check_in`)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["greedy", "defector", "free-rider", "model"]
    round: Annotated[
        int, RULES["rounds"].within(2, hint="the round K the invader arrives (round 1 has no level before it)")
    ]
    agent: StrictStr
    model: StrictStr | None = None

    def as_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def check_in(
    invader: Invader | None, *, n_agents: int, rounds: int, agents: str | None, kinds: tuple[str, ...]
) -> None:
    """``invader`` checked against its society (by :func:`parse`'s rules), or a pydantic error of
    the one formatter naming the setting ``invader`` as the place does (``--invader``,
    ``config.json: params.invader``)."""
    if invader is None:
        return
    from cooplab.limits import cross

    raw = invader.as_dict()
    try:
        out = parse(
            raw,
            n_agents=n_agents,
            rounds=rounds,
            agents=agents or ("llm" if invader.kind == "model" else "rule"),
            kinds=kinds,
            where="<invader>",
        )
    except ConfigError as exc:
        raise cross(("invader",), str(exc)) from None
    if out != raw:
        raise cross(("invader",), f"<invader> must be {out}, got {show(raw)}")


class InvaderWhenSet(BaseModel):
    """A world's settings with an optional ``invader`` field: config.json holds ``invader`` only when
    the run has one, so the files of runs without one stay as they always were."""

    @model_serializer(mode="wrap")
    def _no_invader(self, handler: Any) -> dict[str, Any]:
        out = handler(self)
        if isinstance(out, dict) and out.get("invader", 0) is None:
            out.pop("invader")
        return out
