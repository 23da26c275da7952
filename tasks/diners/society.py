"""The Diner's Dilemma society as a LangGraph graph built with ``build_society``.

One graph invocation advances ``S`` replicate societies (of possibly different conditions,
all with the same number of agents) through the phases of one iteration, in order::

    order -> punish -> metanorm -> utility -> imitate -> swap -> (next iteration | END)

``order``, ``punish`` and ``metanorm`` take a policy: a rule (``(state, rng) -> array``, the
strategies executed exactly, vectorized over replicates) or an LLM policy (an async callable
``(state, rng, context, config) -> PolicyResult``, see :mod:`.llm`); the node factory
detects which with ``is_async_policy``, as the CPR phase nodes do. ``utility``, ``imitate``
(Fermi rule) and ``swap`` (venues rotate, the iteration's record is appended) are the same for
both kinds of agents. Every draw comes from ``phase_rng(seed, iteration, phase)``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
from langchain_core.runnables import RunnableConfig
from langgraph.types import Durability

from cooplab.graphs.context import CoopContext
from cooplab.graphs.society import build_society
from cooplab.tasks.diners import model as dm
from cooplab.tasks.diners.phases import (
    imitate_node,
    metanorm_node,
    metanorm_rule,
    order_node,
    order_rule,
    punish_node,
    punish_rule,
    swap_node,
    utility_node,
    venues,
)
from cooplab.tasks.diners.state import PHASES, DinersState, State

__all__ = [
    "Condition",
    "DinersState",
    "build_diners_graph",
    "diners_phases",
    "init_state",
    "paper_conditions",
    "recursion_limit",
    "run_diners",
    "should_continue",
]


@dataclass(frozen=True)
class Condition:
    """One condition: the initial groups, the punishment costs and the imitation strength."""

    groups: tuple[tuple[str, ...], ...] = dm.COMBINATIONS[1]
    p: float = 3.0
    k: float = 1.0
    stated: bool = True
    beta: float = 1.0
    # pi = accumulated utility (the paper); False: this iteration's only; a number in [0, 1] is the
    # memory of the score, pi <- accumulate * pi + u (True = 1, False = 0)
    accumulate: bool | float = True
    meal: dict[str, float] = field(default_factory=lambda: dict(dm.MEAL))
    label: str = ""

    @property
    def n_agents(self) -> int:
        return sum(len(g) for g in self.groups)

    def validate(self) -> None:
        if len(self.groups) < 1 or any(len(g) < 2 for g in self.groups):
            raise dm.DinersError("every group needs at least two diners")
        for g in self.groups:
            for s in g:
                if s not in dm.CODE:
                    raise dm.DinersError(f"unknown strategy {s!r}; use {', '.join(dm.STRATEGIES)}")
        if not (0 <= self.p < float("inf") and 0 <= self.k < float("inf")):  # also refuses nan
            raise dm.DinersError(f"p and k must be finite numbers >= 0, got {self.p} and {self.k}")
        if not 0 <= self.beta < float("inf"):
            raise dm.DinersError(f"beta must be a finite number >= 0, got {self.beta}")
        if not 0 <= float(self.accumulate) <= 1:  # also refuses nan
            raise dm.DinersError(
                f"accumulate (the score's memory) must be true, false or a number in [0, 1], got {self.accumulate}"
            )
        if not all(isinstance(v, (int, float)) and 0 <= v < float("inf") for v in self.meal.values()):
            raise dm.DinersError(f"meal costs and values must be finite numbers >= 0, got {self.meal}")
        for n in {len(g) for g in self.groups}:
            dm.check_dilemma(self.meal["c_b"], self.meal["v_b"], self.meal["c_p"], self.meal["v_p"], n)


def paper_conditions(beta: float = 1.0, choices: Mapping[str, float] | None = None) -> list[tuple[int, str, Condition]]:
    """The paper's six simulations: 2 combinations x 3 punishment settings (§4). ``choices``: our
    free choices (:data:`model.CHOICES`; missing ones are ours): the menu, the p and k used for
    "unstated", and the memory of the score."""
    ch = {**dm.CHOICES, **(choices or {})}
    unknown = sorted(set(ch) - set(dm.CHOICES))
    if unknown:
        raise dm.DinersError(f"unknown choice {unknown[0]!r}; use {', '.join(dm.CHOICES)}")
    meal = {name: float(ch[name]) for name in dm.MEAL}
    out = []
    for comb, groups in dm.COMBINATIONS.items():
        for pk, (p, k, stated) in dm.PK_SETTINGS.items():
            if pk == "unstated":
                p, k = float(ch["unstated_p"]), float(ch["unstated_k"])
            out.append(
                (
                    comb,
                    pk,
                    Condition(
                        groups,
                        p,
                        k,
                        stated,
                        beta,
                        accumulate=float(ch["memory"]),
                        meal=meal,
                        label=f"combination {comb}, p:k {pk}",
                    ),
                )
            )
    return out


def init_state(conditions: Sequence[Condition], replicates: int, seed: int, iterations: int) -> DinersState:
    if not conditions:
        raise dm.DinersError("no conditions")
    Ns = {c.n_agents for c in conditions}
    if len(Ns) != 1:
        raise dm.DinersError("all conditions of one batch need the same number of agents")
    if replicates < 1 or iterations < 1:
        raise dm.DinersError("replicates and iterations must be at least 1")
    for c in conditions:
        c.validate()
    C, N = len(conditions), Ns.pop()
    S = C * replicates
    cidx = np.repeat(np.arange(C), replicates)
    strat = np.array([[dm.CODE[s] for g in c.groups for s in g] for c in conditions], dtype=np.int8)[cidx]
    group = np.array([[gi for gi, g in enumerate(c.groups) for _ in g] for c in conditions], dtype=np.int8)[cidx]

    def arr(f: Callable[[Condition], float]) -> np.ndarray:
        return np.array([float(f(c)) for c in conditions])[cidx]

    params = {
        "p": arr(lambda c: c.p),
        "k": arr(lambda c: c.k),
        "beta": arr(lambda c: c.beta),
        "accumulate": arr(lambda c: c.accumulate),
        "stated": arr(lambda c: c.stated),
        **{name: arr(lambda c, name=name: c.meal[name]) for name in ("c_b", "v_b", "c_p", "v_p")},
    }
    return DinersState(
        seed=int(seed),
        round=1,
        max_round=int(iterations),
        params=params,
        condition=cidx,
        replicate=np.tile(np.arange(replicates), C),
        group=group,
        venue=venues(group, 1),
        strategy=strat,
        reformed=np.zeros((S, N), dtype=bool),
        defect=np.zeros((S, N), dtype=bool),
        punish1=np.zeros((S, N, N), dtype=bool),
        punish2=np.zeros((S, N, N), dtype=bool),
        meal=np.zeros((S, N)),
        utility=np.zeros((S, N)),
        score=np.zeros((S, N)),
        active=np.ones(S, dtype=bool),
        history=[],
    )


def diners_phases(
    order_policy: Callable = order_rule,
    punish_policy: Callable = punish_rule,
    metanorm_policy: Callable = metanorm_rule,
) -> "OrderedDict[str, Callable]":
    nodes: OrderedDict[str, Callable] = OrderedDict()
    nodes["order"] = order_node(order_policy)
    nodes["punish"] = punish_node(punish_policy)
    nodes["metanorm"] = metanorm_node(metanorm_policy)
    nodes["utility"] = utility_node()
    nodes["imitate"] = imitate_node()
    nodes["swap"] = swap_node()
    return nodes


def should_continue(state: State) -> bool:
    return int(state["round"]) <= int(state["max_round"]) and bool(np.asarray(state["active"]).any())


def build_diners_graph(phases: "OrderedDict[str, Callable] | None" = None, *, checkpointer: Any = None):
    return build_society(
        phases or diners_phases(),
        DinersState,
        checkpointer=checkpointer,
        should_continue=should_continue,
        name="diners",
        context_schema=CoopContext,
    )


def recursion_limit(state: State, n_phases: int = len(PHASES)) -> int:
    return int(state["max_round"]) * (n_phases + 1) + 10


def run_diners(
    conditions: Sequence[Condition],
    replicates: int,
    seed: int,
    iterations: int = 10,
    *,
    checkpointer: Any = None,
    thread_id: str = "diners",
    durability: Durability | None = None,
) -> DinersState:
    """Run a rule-based batch (conditions x replicates) in one graph invocation; the final state."""
    graph = build_diners_graph(checkpointer=checkpointer)
    state = init_state(conditions, replicates, seed, iterations)
    cfg: RunnableConfig = {"configurable": {"thread_id": thread_id}, "recursion_limit": recursion_limit(state)}
    final = graph.invoke(state, cfg, durability=durability if (durability and checkpointer is not None) else None)
    return cast(DinersState, final)  # LangGraph types the final state as a plain dict
