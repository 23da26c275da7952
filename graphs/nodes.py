"""Generic pieces of a society's phase nodes: masking, and the node of an LLM policy.

A phase node is a LangGraph node ``state -> update``. A rule policy is a plain function of the
state and a seeded generator (see :func:`cooplab.graphs.rng.phase_rng`); an LLM policy is an
async callable ``(state, rng, context, config) -> PolicyResult`` that a node awaits with the
runtime context (model service, ledger). Task modules build their phases from these.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime
from langgraph.typing import ContextT

from cooplab.graphs.rng import phase_rng

State = Mapping[str, Any]


def where(mask: np.ndarray, a: np.ndarray, b: Any) -> np.ndarray:
    """``np.where(mask, a, b)``, or ``a`` itself (not a copy) when the mask is set everywhere and
    that is the same array: the common case of masking dead agents when all are alive. Callers
    treat the result as read-only, like every array in a graph state."""
    if isinstance(a, np.ndarray) and a.shape == np.shape(mask) and mask.all() and np.result_type(a, b) == a.dtype:
        return a
    return np.where(mask, a, b)


def running_agents(state: State) -> np.ndarray:
    """(S, N) mask of living agents (``alive``) in societies that are still running (``active``):
    ``alive`` itself (read-only, like every state array) when every society runs."""
    active = state["active"]
    return state["alive"] if active.all() else state["alive"] & active[:, None]


@dataclass
class PolicyResult:
    """What an LLM (async) policy returns: the decided values plus extra state updates (e.g.
    decision rows) for the node to merge. The ledger's rows are not among them: the node adds
    the charges it recorded (:func:`charged`)."""

    value: Any
    updates: dict[str, Any] = field(default_factory=dict)


#: the state channel of the ledger's audit trail (an append-only log)
LEDGER_KEY = "ledger"

T = TypeVar("T")


async def charged(context: Any, work: Awaitable[T]) -> tuple[T, list[dict[str, Any]] | None]:
    """Await ``work``, recording what it charges to the run's ledger (``context.ledger``): (its
    result, those charges as audit-trail rows, or None without a ledger). A node returns the rows
    as its ``ledger`` update, so every checkpoint holds every charge made before it and a resumed
    run restores its ledger from them; only this node's charges are recorded, whatever else runs
    at the same time."""
    ledger = getattr(context, "ledger", None)
    if ledger is None:
        return await work, None
    with ledger.recording() as entries:
        value = await work
    return value, [e.as_dict() for e in entries]


#: a graph's state as a node reads it (its schema: a TypedDict, any mapping)
S = TypeVar("S")


def ledger_node(
    node: Callable[[S, RunnableConfig, Runtime[ContextT]], Awaitable[dict]],
) -> Callable[..., Awaitable[dict]]:
    """The async node ``node(state, config, runtime)`` with the charges it made added to its
    update under ``ledger`` (see :func:`charged`)."""

    async def wrapped(state: S, config: RunnableConfig, runtime: Runtime[ContextT]) -> dict:
        update, rows = await charged(runtime.context, node(state, config, runtime))
        return update if rows is None else {**update, LEDGER_KEY: rows}

    wrapped.__name__ = getattr(node, "__name__", "node")
    return wrapped


def is_async_policy(policy: Callable) -> bool:
    """LLM policies are coroutine functions (or objects with an ``async __call__``) with the
    signature ``(state, rng, context, config) -> PolicyResult``."""
    return inspect.iscoroutinefunction(policy) or (
        callable(policy) and inspect.iscoroutinefunction(type(policy).__call__)
    )


def llm_node(phase: str, policy: Callable, apply: Callable[[State, Any], dict] | None = None) -> Callable[..., Any]:
    """The async node of an LLM policy: a seeded generator for (round, ``phase``), the policy
    awaited with the runtime context (model service, ledger), then ``apply(state, value)`` (the
    same bookkeeping the rule node does) merged with the policy's extra updates and the charges
    the policy made (``ledger``)."""

    async def node(state: State, runtime: Runtime, config: RunnableConfig) -> dict:
        rng = phase_rng(state["seed"], state["round"], phase)
        res, rows = await charged(runtime.context, policy(state, rng, runtime.context, config))
        update = {**(apply(state, res.value) if apply is not None else {}), **res.updates}
        return update if rows is None else {**update, LEDGER_KEY: rows}

    node.__name__ = phase
    return node
