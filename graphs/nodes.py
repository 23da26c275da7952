"""Generic pieces of a society's phase nodes: masking, and the node of an LLM policy.

A phase node is a LangGraph node ``state -> update``. A rule policy is a plain function of the
state and a seeded generator (see :func:`cooplab.graphs.rng.phase_rng`); an LLM policy is an
async callable ``(state, rng, context, config) -> PolicyResult`` that a node awaits with the
runtime context (model service, ledger). Task modules build their phases from these.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from cooplab.graphs.rng import phase_rng

State = Mapping[str, Any]


def running_agents(state: State) -> np.ndarray:
    """(S, N) mask of living agents (``alive``) in societies that are still running (``active``)."""
    return state["alive"] & state["active"][:, None]


@dataclass
class PolicyResult:
    """What an LLM (async) policy returns: the decided values plus extra state updates
    (decision rows, the ledger's audit-trail entries) for the node to merge."""

    value: Any
    updates: dict[str, Any] = field(default_factory=dict)


def is_async_policy(policy: Callable) -> bool:
    """LLM policies are coroutine functions (or objects with an ``async __call__``) with the
    signature ``(state, rng, context, config) -> PolicyResult``."""
    return inspect.iscoroutinefunction(policy) or inspect.iscoroutinefunction(getattr(policy, "__call__", None))


def llm_node(phase: str, policy: Callable, apply: Callable[[State, Any], dict] | None = None) -> Callable[..., Any]:
    """The async node of an LLM policy: a seeded generator for (round, ``phase``), the policy
    awaited with the runtime context (model service, ledger), then ``apply(state, value)`` (the
    same bookkeeping the rule node does) merged with the policy's extra updates."""

    async def node(state: State, runtime: Runtime, config: RunnableConfig) -> dict:
        rng = phase_rng(state["seed"], state["round"], phase)
        res: PolicyResult = await policy(state, rng, runtime.context, config)
        return {**(apply(state, res.value) if apply is not None else {}), **res.updates}

    node.__name__ = phase
    return node
