"""Who did what: the metadata, tags and names that label each traced run.

The runner puts :func:`run_metadata` (task, the run's id as thread and session, how the task names
its agents) and :func:`run_tags` at the top of a run's graph config; LangChain hands both down to
every node, model call and tool call. Each model call then adds its own labels with
:func:`call_config` (society, agent id and display name, round, phase, team, pass, model, call id)
and is named for them ("Fisher 3 · harvest · round 2"); a tool call gets the same labels through
:func:`labelled` without a new name. See docs/traces.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:  # a type only: the trace readers (explorer, OTLP export) import this without LangChain
    from langchain_core.runnables import RunnableConfig

#: metadata key of the noun a task calls its agents by ("Fisher": "Fisher 3" is agent 2)
AGENT_NOUN = "agent_noun"
#: metadata key of an agent's display name set by a task for string agent ids (a science role's name)
AGENT_NAME = "agent_name"
#: metadata key matching an llm run to its ledger row (the ledger's ``call_id``)
CALL_ID = "call_id"
#: metadata key (and tag) of a call answered from the response cache (a replay: no model was asked)
CACHED = "cached"
#: metadata keys of what a replayed call's original took: its latency (seconds), its tokens, when it was stored
ORIGINAL_LATENCY = "original_latency_s"
ORIGINAL_USAGE = "original_usage"
CACHED_AT = "cached_at"
#: the labels a call may carry, in the order of its tags
LABELS = ("society", "agent_id", "agent", AGENT_NAME, "round", "phase", "team", "pass", "model", CALL_ID)
SEP = " · "


def run_metadata(task: str, run_id: str, agent_noun: str | None = None) -> dict[str, Any]:
    """The metadata every traced run of one cooplab run inherits: the task, the run's id (also the
    thread and session id by which LangSmith and Phoenix group one run's traces) and the noun its
    agents are named by."""
    md: dict[str, Any] = {"task": task, "run_id": run_id, "thread_id": run_id, "session_id": run_id}
    if agent_noun:
        md[AGENT_NOUN] = agent_noun
    return md


def run_tags(task: str, run_id: str) -> list[str]:
    """The tags every traced run of one cooplab run inherits."""
    return [f"task:{task}", f"run:{run_id}"]


def agent_name(agent: int | str, metadata: Mapping[str, Any] | None) -> str:
    """An agent's display name: the name the task set (``agent_name``), else ``"<noun> <agent + 1>"``
    for a numbered agent ("Fisher 3" for agent 2; noun "Agent" when the task names none), else its id."""
    md = metadata or {}
    name = md.get(AGENT_NAME)
    if isinstance(name, str) and name:
        return name
    if isinstance(agent, int) and not isinstance(agent, bool):
        noun = md.get(AGENT_NOUN)
        return f"{noun if isinstance(noun, str) and noun else 'Agent'} {agent + 1}"
    return str(agent)


def _copy(config: Mapping[str, Any] | None) -> RunnableConfig:
    """A copy of a LangChain config (the caller's, any Mapping with its keys) to add labels to."""
    return cast("RunnableConfig", dict(config or {}))


def labelled(
    config: Mapping[str, Any] | None, labels: Mapping[str, Any], *, run_name: str | None = None
) -> RunnableConfig:
    """``config`` with ``labels`` (None values dropped) added to its metadata and as ``key:value``
    tags, and named ``run_name`` when given (a name is not inherited: it names only the run
    invoked with this config)."""
    cfg = _copy(config)
    labels = {k: v for k, v in labels.items() if v is not None}
    cfg["metadata"] = {**(cfg.get("metadata") or {}), **labels}
    tags = list(cfg.get("tags") or [])
    cfg["tags"] = tags + [t for t in (f"{k}:{v}" for k, v in labels.items() if k != CALL_ID) if t not in tags]
    if run_name is not None:
        cfg["run_name"] = run_name
    return cfg


def call_labels(
    config: Mapping[str, Any] | None,
    *,
    agent: int | str,
    society: int | None,
    round: int | None,
    phase: str,
    team: str | None = None,
    pass_: int | None = None,
) -> dict[str, Any]:
    """The labels of one agent's call or tool run (team and pass from the config's metadata when the
    task set them there). ``agent_id`` is text, the key the run's tables use: ``"SOCIETY:AGENT"``
    for a numbered agent of a society (``"0:2"``, as :func:`cooplab.graphs.tables.agent_id`), else
    the agent's own id (a science role's); a numbered agent's position is also there as ``agent``."""
    md = (config or {}).get("metadata") or {}
    numbered = isinstance(agent, int) and not isinstance(agent, bool)
    return {
        "society": society,
        "agent_id": f"{society}:{agent}" if numbered and isinstance(society, int) else str(agent),
        "agent": agent if numbered else None,
        AGENT_NAME: agent_name(agent, md),
        "round": round,
        "phase": phase,
        "team": team if team is not None else md.get("team"),
        "pass": pass_ if pass_ is not None else md.get("pass"),
    }


def call_name(labels: Mapping[str, Any]) -> str:
    """A model call's run name: who, what, when ("Fisher 3 · harvest · round 2";
    "Data Lead · data:code · pass 1")."""
    parts = [str(labels.get(AGENT_NAME) or labels.get("agent_id")), str(labels.get("phase"))]
    if labels.get("pass") is not None:
        parts.append(f"pass {labels['pass']}")
    elif labels.get("round") is not None:
        parts.append(f"round {labels['round']}")
    return SEP.join(parts)


def is_cached(metadata: Mapping[str, Any] | None) -> bool:
    """Whether a run's metadata says it is a call answered from the cache."""
    return isinstance(metadata, Mapping) and metadata.get(CACHED) is True


def replay_config(
    config: Mapping[str, Any] | None,
    *,
    latency: Any,
    input_tokens: int,
    output_tokens: int,
    usage_error: str | None = None,
    created: str | None = None,
) -> RunnableConfig:
    """The config of a call answered from the cache: ``config`` (the call's own, :func:`call_config`)
    with the metadata ``cached: true`` and what the original call took (its latency in seconds when
    it is a sound number, the tokens it was charged, and when its answer was stored when known), and
    the tag ``cached``."""
    cfg = _copy(config)
    usage: dict[str, Any] = {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "total_tokens": input_tokens + output_tokens,
    }
    if usage_error is not None:
        usage["usage_error"] = usage_error
    md: dict[str, Any] = {**(cfg.get("metadata") or {}), CACHED: True, ORIGINAL_USAGE: usage}
    if isinstance(latency, (int, float)) and not isinstance(latency, bool) and 0 <= latency < float("inf"):
        md[ORIGINAL_LATENCY] = float(latency)
    if isinstance(created, str) and created:
        md[CACHED_AT] = created
    cfg["metadata"] = md
    tags = list(cfg.get("tags") or [])
    cfg["tags"] = tags if CACHED in tags else [*tags, CACHED]
    return cfg


def call_config(
    config: Mapping[str, Any] | None,
    *,
    agent: int | str,
    society: int | None,
    round: int | None,
    phase: str,
    model: str,
    call_id: str,
    team: str | None = None,
) -> RunnableConfig:
    """The config of one model call: ``config`` labelled with who makes it, when, with which model
    (spec id) and its ledger call id, and named for them (:func:`call_name`)."""
    labels = {
        **call_labels(config, agent=agent, society=society, round=round, phase=phase, team=team),
        "model": model,
        CALL_ID: call_id,
    }
    return labelled(config, labels, run_name=call_name(labels))
