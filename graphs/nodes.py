"""Generic pieces of a society's phase nodes: masking, views of the running societies, and the
node of an LLM policy.

A phase node is a LangGraph node ``state -> update``. A rule policy is a plain function of the
state and a seeded generator (see :func:`cooplab.graphs.rng.phase_rng`); an LLM policy is an
async callable ``(state, rng, context, config) -> PolicyResult`` that a node awaits with the
runtime context (model service, ledger). Task modules build their phases from these.
"""

from __future__ import annotations

import contextvars
import inspect
import weakref
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

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
    """(S, N) mask of living agents (``alive``) in societies that are still running (``active``)."""
    return state["alive"] & state["active"][:, None]


class _ByArray:
    """Values derived from an array, remembered while that very array lives (by identity, with a
    weak reference: no array is kept alive, and a reused ``id`` never matches)."""

    def __init__(self) -> None:
        self._d: dict[int, tuple[weakref.ref, Any, Any]] = {}

    def get(self, arr: np.ndarray, tag: Any = None, default: Any = None) -> Any:
        entry = self._d.get(id(arr))
        if entry is not None and entry[1] is tag and entry[0]() is arr:
            return entry[2]
        return default

    def put(self, arr: np.ndarray, tag: Any, value: Any) -> None:
        key, d = id(arr), self._d

        def forget(ref: weakref.ref) -> None:
            if (entry := d.get(key)) is not None and entry[0] is ref:
                d.pop(key, None)

        d[key] = (weakref.ref(arr, forget), tag, value)


class _SharedRows:
    """What the nodes of one graph run share: the running societies of each ``active`` array, and
    the running rows of each (S, ...) array, gathered or scattered by one node, for the next nodes
    (a run never modifies a state array in place: every node returns new arrays)."""

    def __init__(self) -> None:
        self.running = _ByArray()  # ``active`` -> indices of its running societies (None: all run)
        self.rows = _ByArray()  # full array -> its rows at the index array ``tag`` (read-only)


_MISSING = object()
_shared: contextvars.ContextVar[_SharedRows | None] = contextvars.ContextVar("cooplab_shared_rows", default=None)


@contextmanager
def shared_rows() -> Iterator[None]:
    """Within this block (one graph run: wrap the ``invoke`` or the ``stream`` loop), the rule
    nodes hand the running rows they gather or scatter to the next nodes instead of gathering them
    again. Only for a run whose state arrays nobody modifies in place (LangGraph's contract, kept by
    every cooplab node); outside such a block every node gathers its own rows."""
    token = _shared.set(_SharedRows())
    try:
        yield
    finally:
        _shared.reset(token)


def running_societies(state: State) -> np.ndarray | None:
    """Indices of the societies still running, or None when all of them run (nothing to drop).
    Within :func:`shared_rows`, the same (read-only) index array for the same ``active`` array, so
    the nodes of a round share it (and the rows gathered with it)."""
    active = state["active"]
    shared = _shared.get()
    rows = _MISSING if shared is None else shared.running.get(active, None, _MISSING)
    if rows is _MISSING:
        rows = None if active.all() else np.flatnonzero(active)
        if shared is not None:
            if rows is not None:
                rows.flags.writeable = False
            shared.running.put(active, None, rows)
    return rows


def _frozen(a: np.ndarray) -> np.ndarray:
    """A read-only view of ``a``."""
    v = a.view()
    v.flags.writeable = False
    return v


class SocietyRows(Mapping):
    """A read-only view of a batch state restricted to the societies ``rows`` (sorted indices).

    Arrays whose first axis is the batch's ``S`` societies (per-society ``(S,)``, per-agent
    ``(S, N)``, memories ``(S, N, K)``), including those in ``params``, are indexed on first
    access (and cached); everything else (round, seed, lists such as the history) passes through.
    Nodes run their rule policies on this view to compute only the running societies. Within
    :func:`shared_rows`, the rows handed out are read-only and shared with the other nodes that
    read the same rows of the same array (with the index array :func:`running_societies` returns)."""

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
            shared = _shared.get()
            part = None if shared is None else shared.rows.get(v, self._rows)
            if part is None:
                part = np.take(v, self._rows, axis=0)  # faster than v[rows] for index arrays
                if shared is not None:
                    part.flags.writeable = False
                    shared.rows.put(v, self._rows, part)
            v = part
        self._cache[key] = v
        return v

    def __iter__(self):
        return iter(self._state)

    def __len__(self) -> int:
        return len(self._state)


def scatter(base: np.ndarray, rows: np.ndarray, part: np.ndarray, *, copy: bool = True) -> np.ndarray:
    """A copy of ``base`` with ``part`` written into the societies ``rows`` (``copy=False``:
    written into ``base`` itself, for an array the caller has just made). Within :func:`shared_rows`,
    the result's rows are handed to the next :class:`SocietyRows` view with the same ``rows``."""
    out = np.array(base, copy=True) if copy else base
    part = np.asarray(part, dtype=out.dtype)
    whole = part.shape == (len(rows), *out.shape[1:])
    if out.ndim > 1 and whole and out.flags.c_contiguous and part.flags.c_contiguous:
        # one opaque item per society: a 1-D put, faster than a 2-D fancy assignment
        width = int(np.prod(out.shape[1:]))
        if width and len(rows):
            row = np.dtype((np.void, out.itemsize * width))
            np.put(out.reshape(len(out), width).view(row).reshape(-1), rows, part.reshape(len(part), width).view(row).reshape(-1))
    else:
        out[rows] = part
    if whole and (shared := _shared.get()) is not None:
        shared.rows.put(out, rows, _frozen(part))
    return out


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


def ledger_node(node: Callable[[State, RunnableConfig, Runtime], Awaitable[dict]]) -> Callable[..., Awaitable[dict]]:
    """The async node ``node(state, config, runtime)`` with the charges it made added to its
    update under ``ledger`` (see :func:`charged`)."""

    async def wrapped(state: State, config: RunnableConfig, runtime: Runtime) -> dict:
        update, rows = await charged(runtime.context, node(state, config, runtime))
        return update if rows is None else {**update, LEDGER_KEY: rows}

    wrapped.__name__ = getattr(node, "__name__", "node")
    return wrapped


def is_async_policy(policy: Callable) -> bool:
    """LLM policies are coroutine functions (or objects with an ``async __call__``) with the
    signature ``(state, rng, context, config) -> PolicyResult``."""
    return inspect.iscoroutinefunction(policy) or inspect.iscoroutinefunction(getattr(policy, "__call__", None))


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
