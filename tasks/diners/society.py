"""The Diner's Dilemma society as a LangGraph graph built with ``build_society``.

One graph invocation advances ``S`` replicate societies (of possibly different conditions,
all with the same number of agents) through the phases of one iteration, in order::

    order -> punish -> metanorm -> utility -> imitate -> swap -> (next iteration | END)

``order``, ``punish`` and ``metanorm`` take a policy: a rule (``(state, rng) -> array``, the
strategies executed exactly, vectorized over replicates) or an LLM policy (an async callable
``(state, rng, context, config) -> PolicyResult``, see :mod:`.llm_agents`); the node factory
detects which with ``is_async_policy``, as the CPR phase nodes do. ``utility``, ``imitate``
(Fermi rule) and ``swap`` (venues rotate, the iteration's record is appended) are the same for
both kinds of agents. Every draw comes from ``phase_rng(seed, iteration, phase)``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

import numpy as np

from cooplab.agents.rule_based import sample_peer
from cooplab.graphs.context import CoopContext
from cooplab.graphs.nodes import is_async_policy, llm_node
from cooplab.graphs.rng import phase_rng
from cooplab.graphs.society import build_society
from cooplab.graphs.state import AppendLog
from cooplab.tasks.diners import model as dm

State = Mapping[str, Any]
PHASES = ("order", "punish", "metanorm", "utility", "imitate", "swap")


class DinersState(TypedDict, total=False):
    seed: int
    round: int  # current iteration t (1-based); > max_round once the run is over
    max_round: int
    params: dict[str, np.ndarray]  # per-society (S,) arrays: p, k, beta, c_b, v_b, c_p, v_p, accumulate, stated
    condition: np.ndarray  # (S,)
    replicate: np.ndarray  # (S,)
    group: np.ndarray  # (S, N) group index of each agent (groups are fixed)
    venue: np.ndarray  # (S, N) venue index of each agent's group this iteration
    strategy: np.ndarray  # (S, N) strategy codes (model.STRATEGIES)
    reformed: np.ndarray  # (S, N) bool: has been punished while playing R1 (R1 then cooperates)
    defect: np.ndarray  # (S, N) bool: ordered the premium meal this iteration
    punish1: np.ndarray  # (S, N, N) bool: i punished j in stage 2
    punish2: np.ndarray  # (S, N, N) bool: i punished j in stage 3 (metanorm)
    meal: np.ndarray  # (S, N) meal value - bill share
    utility: np.ndarray  # (S, N) this iteration's utility
    score: np.ndarray  # (S, N) pi: accumulated utility (or the last iteration's, accumulate = 0)
    active: np.ndarray  # (S,) bool
    played: np.ndarray  # (S, N) the strategies played this iteration (before imitation)
    imitation: dict[str, np.ndarray]  # this iteration's role models, probabilities, adoptions
    history: AppendLog  # one record per iteration
    # LLM agents
    personas: list[list[int]]  # (S x N) persona index of each agent
    decisions: AppendLog
    ledger: AppendLog


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
            raise dm.DinersError(f"accumulate (the score's memory) must be true, false or a number in [0, 1], got {self.accumulate}")
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
            out.append((comb, pk, Condition(groups, p, k, stated, beta, accumulate=float(ch["memory"]), meal=meal,
                                            label=f"combination {comb}, p:k {pk}")))
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
        "p": arr(lambda c: c.p), "k": arr(lambda c: c.k), "beta": arr(lambda c: c.beta),
        "accumulate": arr(lambda c: c.accumulate), "stated": arr(lambda c: c.stated),
        **{name: arr(lambda c, name=name: c.meal[name]) for name in ("c_b", "v_b", "c_p", "v_p")},
    }
    return DinersState(
        seed=int(seed), round=1, max_round=int(iterations), params=params, condition=cidx, replicate=np.tile(np.arange(replicates), C),
        group=group, venue=venues(group, 1), strategy=strat, reformed=np.zeros((S, N), dtype=bool),
        defect=np.zeros((S, N), dtype=bool), punish1=np.zeros((S, N, N), dtype=bool), punish2=np.zeros((S, N, N), dtype=bool),
        meal=np.zeros((S, N)), utility=np.zeros((S, N)), score=np.zeros((S, N)), active=np.ones(S, dtype=bool), history=[],
    )


def venues(group: np.ndarray, round_: int) -> np.ndarray:
    """(S, N) venue of each agent in iteration ``round_``: its group's venue (groups rotate)."""
    n_groups = int(group.max()) + 1
    return dm.venue_of_groups(n_groups, round_)[group]


# --- rule policies (the strategies, executed exactly) --------------------------------------
def order_rule(state: State, rng: np.random.Generator) -> np.ndarray:
    return dm.rule_orders(state["strategy"], state["reformed"])


def punish_rule(state: State, rng: np.random.Generator) -> np.ndarray:
    return dm.rule_punish(state["strategy"], state["defect"], dm.same_group(state["group"]))


def metanorm_rule(state: State, rng: np.random.Generator) -> np.ndarray:
    return dm.rule_metanorm(state["strategy"], state["defect"], state["punish1"], dm.same_group(state["group"]))


# --- node factories ------------------------------------------------------------------------
def _decision_node(phase: str, key: str, policy: Callable, clean: Callable[[State, Any], np.ndarray],
                   also: Callable[[State], dict] = lambda state: {}):
    """A node writing ``key`` from ``policy``'s answer; ``clean`` masks what a policy may not do
    (punishing outside the group, oneself, or in a finished society) without changing the rest."""
    if is_async_policy(policy):
        return llm_node(phase, policy, lambda state, value: {key: clean(state, value), **also(state)})

    def node(state: State) -> dict:
        rng = phase_rng(state["seed"], state["round"], phase)
        return {key: clean(state, policy(state, rng)), **also(state)}

    node.__name__ = phase
    return node


def _clean_orders(state: State, value: Any) -> np.ndarray:
    return np.asarray(value, dtype=bool) & state["active"][:, None]


def _clean_pairs(state: State, value: Any) -> np.ndarray:
    return np.asarray(value, dtype=bool) & dm.same_group(state["group"]) & state["active"][:, None, None]


def order_node(policy: Callable = order_rule):
    # the strategies played this iteration are kept for the record (imitation changes them)
    return _decision_node("order", "defect", policy, _clean_orders, also=lambda state: {"played": state["strategy"].copy()})


def punish_node(policy: Callable = punish_rule):
    return _decision_node("punish", "punish1", policy, _clean_pairs)


def metanorm_node(policy: Callable = metanorm_rule):
    return _decision_node("metanorm", "punish2", policy, _clean_pairs)


def utility_node():
    """Stage 4: utilities, the accumulated score pi, and R1's switch after being punished."""

    def utility(state: State) -> dict:
        P = state["params"]
        act = state["active"][:, None]
        out = dm.utility(state["defect"], state["group"], state["punish1"], state["punish2"], P)
        u = np.where(act, out["utility"], 0.0)
        memory = P["accumulate"][:, None]  # 1: accumulated (1 * pi + u is exactly pi + u), 0: this iteration's (0 * pi + u = u)
        score = np.where(act, memory * state["score"] + u, state["score"])
        punished = out["received"] > 0
        reformed = state["reformed"] | (act & (state["strategy"] == dm.R1) & punished)
        return {"meal": np.where(act, out["meal"], 0.0), "utility": u, "score": score, "reformed": reformed}

    return utility


def imitate_node():
    """Stage 5: pairwise Fermi imitation of a uniformly random role model from the whole population.
    Adopting a different strategy starts it afresh (an adopted R1 defects until punished)."""

    def imitate(state: State) -> dict:
        rng = phase_rng(state["seed"], state["round"], "imitate")
        S, N = state["strategy"].shape
        role = sample_peer(np.ones((S, N), dtype=bool), rng)
        u = rng.random((S, N))
        res = dm.fermi_update(state["strategy"], state["score"], role, u, state["params"]["beta"])
        act = state["active"][:, None]
        new = np.where(act, res["strategy"], state["strategy"]).astype(np.int8)
        changed = new != state["strategy"]
        return {"strategy": new, "reformed": state["reformed"] & ~changed,
                "imitation": {"role": role, "prob": res["prob"], "adopt": res["adopt"] & act, "changed": changed}}

    return imitate


def swap_node():
    """Close the iteration: append its record, rotate the venues, advance the counter."""

    def swap(state: State) -> dict:
        t = int(state["round"])
        imi = state.get("imitation") or {}
        rec = {
            "round": t,
            "active": state["active"].copy(),
            "venue": state["venue"].copy(),
            "strategy_played": state["played"].copy(),
            "defect": state["defect"].copy(),
            "punish1": state["punish1"].copy(),
            "punish2": state["punish2"].copy(),
            "meal": state["meal"].copy(),
            "utility": state["utility"].copy(),
            "score": state["score"].copy(),
            "strategy": state["strategy"].copy(),
            **{f"imitation_{k}": np.asarray(v).copy() for k, v in imi.items()},
        }
        active = state["active"] & (t < int(state["max_round"]))
        return {"history": [rec], "round": t + 1, "venue": venues(state["group"], t + 1), "active": active}

    return swap


def diners_phases(order_policy: Callable = order_rule, punish_policy: Callable = punish_rule,
                  metanorm_policy: Callable = metanorm_rule) -> "OrderedDict[str, Callable]":
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
    return build_society(phases or diners_phases(), DinersState, checkpointer=checkpointer, should_continue=should_continue,
                         name="diners", context_schema=CoopContext)


def recursion_limit(state: State, n_phases: int = len(PHASES)) -> int:
    return int(state["max_round"]) * (n_phases + 1) + 10


def run_diners(conditions: Sequence[Condition], replicates: int, seed: int, iterations: int = 10, *,
               checkpointer: Any = None, thread_id: str = "diners", durability: str | None = None) -> DinersState:
    """Run a rule-based batch (conditions x replicates) in one graph invocation; the final state."""
    graph = build_diners_graph(checkpointer=checkpointer)
    state = init_state(conditions, replicates, seed, iterations)
    cfg = {"configurable": {"thread_id": thread_id}, "recursion_limit": recursion_limit(state)}
    kw = {"durability": durability} if (durability and checkpointer is not None) else {}
    return graph.invoke(state, cfg, **kw)
