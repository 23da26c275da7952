"""Generic pieces of a society's phase nodes: masking, views of the running societies, and the
node of an LLM policy.

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


def running_societies(state: State) -> np.ndarray | None:
    """Indices of the societies still running, or None when all of them run (nothing to drop)."""
    active = state["active"]
    return None if active.all() else np.flatnonzero(active)


class SocietyRows(Mapping):
    """A read-only view of a batch state restricted to the societies ``rows`` (sorted indices).

    Arrays whose first axis is the batch's ``S`` societies (per-society ``(S,)``, per-agent
    ``(S, N)``, memories ``(S, N, K)``), including those in ``params``, are indexed on first
    access (and cached); everything else (round, seed, lists such as the history) passes through.
    Nodes run their rule policies on this view to compute only the running societies."""

    def __init__(self, state: State, rows: np.ndarray, n_total: int | None = None) -> None:
        self._state, self._rows = state, rows
        self._n = int(len(state["active"])) if n_total is None else int(n_total)
        self._cache: dict[str, Any] = {}

    def __getitem__(self, key: str) -> Any:
        try:
            return self._cache[key]
        except KeyError:
            pass
        v = self._state[key]
        if isinstance(v, Mapping):
            v = SocietyRows(v, self._rows, self._n)
        elif isinstance(v, np.ndarray) and v.ndim >= 1 and v.shape[0] == self._n:
            v = np.take(v, self._rows, axis=0)  # faster than v[rows] for index arrays
        self._cache[key] = v
        return v

    def __iter__(self):
        return iter(self._state)

    def __len__(self) -> int:
        return len(self._state)


def scatter(base: np.ndarray, rows: np.ndarray, part: np.ndarray, *, copy: bool = True) -> np.ndarray:
    """A copy of ``base`` with ``part`` written into the societies ``rows`` (``copy=False``:
    written into ``base`` itself, for an array the caller has just made)."""
    out = np.array(base, copy=True) if copy else base
    part = np.asarray(part, dtype=out.dtype)
    if out.ndim > 1 and part.shape == (len(rows), *out.shape[1:]) and out.flags.c_contiguous and part.flags.c_contiguous:
        # one opaque item per society: a 1-D put, faster than a 2-D fancy assignment
        width = int(np.prod(out.shape[1:]))
        if width and len(rows):
            row = np.dtype((np.void, out.itemsize * width))
            np.put(out.reshape(len(out), width).view(row).reshape(-1), rows, part.reshape(len(part), width).view(row).reshape(-1))
    else:
        out[rows] = part
    return out


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
