"""Generic society builder: an ordered list of phase nodes run once per round.

A society is a LangGraph ``StateGraph`` whose nodes are the phases of one round, wired as a
chain ``START -> phase_1 -> ... -> phase_k`` with a conditional edge from the last phase back
to the first (next round) or to ``END``. Composing a new society is editing the ordered
mapping of phases: swap a node, drop one, or insert one, then build.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from langgraph.graph import END, START, StateGraph

#: a phase's node: ``node(state)`` (a rule) or ``async node(state, runtime, config)`` (an LLM policy,
#: :func:`cooplab.graphs.nodes.llm_node`), returning its state update, as LangGraph calls it
Node = Callable[..., Any]


def default_should_continue(state: Mapping[str, Any]) -> bool:
    """Continue while some society is still running and the round cap is not reached."""
    active = state.get("active")
    more_rounds = int(state["round"]) <= int(state["max_round"])
    return bool(more_rounds and (active is None or bool(active.any())))


def _is_async(node: Node) -> bool:
    return inspect.iscoroutinefunction(node) or (callable(node) and inspect.iscoroutinefunction(type(node).__call__))


def on_the_loop(node: Node) -> Node:
    """``node`` (a plain function) as a coroutine function that calls it on the event loop's own
    thread, with the same signature (LangGraph passes it the same config/runtime arguments).

    LangGraph runs a plain node of an async run in a worker thread (``run_in_executor``): a thread
    hop per phase per round that costs more CPU and latency than a rule phase's vectorized numpy
    work. Inside an LLM society (a graph that is awaited anyway) the rule phases are cheap and
    never wait on I/O, so they run inline."""

    async def inline(*args: Any, **kwargs: Any) -> Any:
        return node(*args, **kwargs)

    inline.__name__ = getattr(node, "__name__", "node")
    inline.__qualname__ = getattr(node, "__qualname__", inline.__name__)
    inline.__doc__ = getattr(node, "__doc__", None)
    inline.__signature__ = inspect.signature(node)  # type: ignore[attr-defined]
    return inline


def build_society(
    phases: Mapping[str, Node],
    state_schema: type,
    *,
    checkpointer: Any = None,
    should_continue: Callable[[Mapping[str, Any]], bool] = default_should_continue,
    name: str = "society",
    context_schema: type | None = None,
):
    """Compile a round-based society graph from ordered ``phases`` (name -> node).

    When some phase is async (an LLM policy's node), the graph can only be awaited, and its plain
    (rule) phases run on the event loop's thread instead of a worker thread (:func:`on_the_loop`);
    a graph of plain phases only is left as it is (``invoke`` and ``ainvoke`` both work)."""
    if not phases:
        raise ValueError("a society needs at least one phase node")
    if any(_is_async(fn) for fn in phases.values()):
        phases = {n: fn if _is_async(fn) else on_the_loop(fn) for n, fn in phases.items()}
    kwargs = {"context_schema": context_schema} if context_schema is not None else {}
    g = StateGraph(state_schema, **kwargs)
    names = list(phases)
    for n in names:
        g.add_node(n, phases[n])
    g.add_edge(START, names[0])
    for a, b in zip(names, names[1:], strict=False):
        g.add_edge(a, b)
    first = names[0]

    def route(state: Mapping[str, Any]) -> str:
        return first if should_continue(state) else END

    g.add_conditional_edges(names[-1], route, [first, END])
    return g.compile(checkpointer=checkpointer, name=name)


def insert_phase(
    phases: Mapping[str, Node], name: str, node: Node, *, after: str | None = None, before: str | None = None
) -> dict[str, Node]:
    """A copy of ``phases`` with ``node`` added under ``name`` right after ``after`` or right before
    ``before`` (exactly one of them; a ValueError names the phases there are)."""
    if (after is None) == (before is None):
        raise ValueError("give exactly one of after= or before=")
    anchor = after if after is not None else before
    if anchor not in phases:
        raise ValueError(f"no phase {anchor!r}; the phases are {', '.join(phases)}")
    if name in phases:
        raise ValueError(f"a phase named {name!r} is already there; pick another name")
    out: dict[str, Node] = {}
    for key, value in phases.items():
        if key == before:
            out[name] = node
        out[key] = value
        if key == after:
            out[name] = node
    return out
