"""The CPR fishery society: default phases, initial state, and batch runs.

``cpr_phases(...)`` returns the ordered phase nodes of one round; edit that mapping to
compose a new society, then ``build_cpr_graph(phases)``. ``run_cpr`` runs a batch of
conditions x replicates in a single graph invocation.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
from langchain_core.runnables import RunnableConfig
from langgraph.types import Durability

from cooplab.graphs.rng import phase_rng
from cooplab.graphs.society import build_society
from cooplab.tasks.cpr import phases as ph
from cooplab.tasks.cpr.model import median_norm
from cooplab.tasks.cpr.params import ABLATIONS, CPRParams, population_ranges
from cooplab.tasks.cpr.state import CPRState, full_state

PHASE_ORDER = ("harvest", "punish", "environment", "adapt", "learn", "propose", "vote")


def cpr_phases(
    *,
    punishment: bool = True,
    social_learning: bool = True,
    group_decision: bool = True,
    individual_learning: bool = True,
    end_on_starvation: bool = True,
) -> "OrderedDict[str, Callable]":
    """The phases of one round, in order. A switch that is off removes its node(s) from the
    graph, so the graph itself shows what runs (``cooplab graph cpr``). Individual learning
    (``adapt``) is on in every ablation; the node also skips, society by society, those whose
    ``individual_learning`` is off or whose ``il_rate`` is 0 (a batch may mix them)."""
    nodes: OrderedDict[str, Callable] = OrderedDict()
    nodes["harvest"] = ph.harvest_node()
    if punishment:
        nodes["punish"] = ph.punish_node()
    nodes["environment"] = ph.environment_node(end_on_starvation=end_on_starvation)
    if individual_learning:
        nodes["adapt"] = ph.adapt_node()
    if social_learning:
        nodes["learn"] = ph.learn_node()
    if group_decision:
        nodes["propose"] = ph.propose_node()
        nodes["vote"] = ph.vote_node()
    return nodes


def phases_for_batch(params: "list[CPRParams]") -> "OrderedDict[str, Callable]":
    """The phases of a batch of conditions: a phase is in the graph when any condition needs it;
    its node then skips, society by society, those whose switch is off (punishment, social
    learning, group decision and individual learning are all per-society switches in the nodes)."""
    return cpr_phases(
        punishment=any(p.punishment for p in params),
        social_learning=any(p.social_learning for p in params),
        group_decision=any(p.group_decision for p in params),
        individual_learning=any(p.individual_learning and p.il_rate > 0 for p in params),
    )


def phases_for(params: CPRParams) -> "OrderedDict[str, Callable]":
    return cpr_phases(
        punishment=params.punishment,
        social_learning=params.social_learning,
        group_decision=params.group_decision,
        individual_learning=params.individual_learning and params.il_rate > 0,
    )


def build_cpr_graph(phases: "OrderedDict[str, Callable] | None" = None, *, checkpointer: Any = None):
    """Compile the CPR society graph (default: all phases on)."""
    return build_society(
        phases if phases is not None else cpr_phases(), CPRState, checkpointer=checkpointer, name="cpr"
    )


def apply_ablation(values: dict[str, Any], ablation: str) -> dict[str, Any]:
    """Merge an ablation preset (full, osl, ogd, neither) into parameter values."""
    if ablation not in ABLATIONS:
        raise ValueError(f"unknown ablation {ablation!r}; choose one of {', '.join(ABLATIONS)}")
    return {**values, **ABLATIONS[ablation]}


@dataclass
class Condition:
    """One experimental cell: parameters and an initial population."""

    params: CPRParams
    population: str = "mixed"
    label: str = ""
    meta: dict[str, Any] = field(default_factory=dict)


ARRAY_FIELDS = [n for n, f in CPRParams.model_fields.items() if n not in ("m_range", "p_range", "N")]


def init_state(conditions: Sequence[Condition], replicates: int, seed: int) -> CPRState:
    """The initial state of ``len(conditions) * replicates`` societies (condition-major)."""
    if replicates < 1:
        raise ValueError("replicates must be at least 1")
    Ns = {c.params.N for c in conditions}
    if len(Ns) != 1:
        raise ValueError("all conditions in one batch must have the same number of agents N")
    N = Ns.pop()
    C = len(conditions)
    S = C * replicates
    rng = phase_rng(seed, 0, "init")
    params: dict[str, np.ndarray] = {}
    for name in ARRAY_FIELDS:
        vals = []
        for c in conditions:
            v = getattr(c.params, name)
            if name == "punish_off_round":
                v = np.inf if v is None else v
            vals.append(float(v))
        params[name] = np.repeat(np.asarray(vals, dtype=float), replicates)
    lo = np.zeros((S, N, 4))
    hi = np.zeros((S, N, 4))
    for ci, c in enumerate(conditions):
        ranges = population_ranges(c.params, c.population)
        sl = slice(ci * replicates, (ci + 1) * replicates)
        for i, rg in enumerate(ranges):
            lo[sl, i] = (rg.e[0], c.params.m_range[0], c.params.p_range[0], rg.g[0])
            hi[sl, i] = (rg.e[1], c.params.m_range[1], c.params.p_range[1], rg.g[1])
    traits = lo + (hi - lo) * rng.random((S, N, 4))
    e, m, p, g = (traits[..., k] for k in range(4))
    alive = np.ones((S, N), dtype=bool)
    gd = params["group_decision"].astype(bool)
    G0 = np.where(gd, median_norm(g, alive), np.nan)  # the first norm: the median of initial beliefs
    zeros = np.zeros((S, N))
    return CPRState(
        seed=int(seed),
        round=1,
        max_round=int(params["T"].max()),
        params=params,
        condition=np.repeat(np.arange(C), replicates),
        replicate=np.tile(np.arange(replicates), C),
        R=params["R0"].copy(),
        R_plus=params["R0"].copy(),
        alive=alive,
        e=e,
        m=m,
        p=p,
        g=g,
        P=np.repeat(params["P0"][:, None], N, axis=1),
        P_bar=zeros.copy(),
        effort=zeros.copy(),
        h=zeros.copy(),
        B=np.zeros((S, N), dtype=np.int8),
        V=np.zeros((S, N), dtype=np.int8),
        I=np.zeros((S, N), dtype=np.int8),
        tau_V=np.full((S, N), np.inf),
        payoff=zeros.copy(),
        n_inspections=np.zeros(S, dtype=int),
        n_violations=np.zeros(S, dtype=int),
        proposals=np.full((S, N), np.nan),
        G=G0,
        active=np.ones(S, dtype=bool),
        T_s=np.zeros(S, dtype=int),
        collapse=np.zeros(S, dtype=int),
        eta_sum=np.zeros(S),
        history=[],
        n_societies=S,
        rows=np.arange(S),
        finished=[],
    )


def recursion_limit(state: Mapping[str, Any], n_phases: int) -> int:
    return int(state["max_round"]) * (n_phases + 1) + 10


def run_cpr(
    conditions: Sequence[Condition],
    replicates: int,
    seed: int,
    *,
    phases: "OrderedDict[str, Callable] | None" = None,
    checkpointer: Any = None,
    thread_id: str = "run",
    durability: Durability | None = None,
    progress: Callable[[dict], None] | None = None,
) -> CPRState:
    """Run a batch in one graph invocation and return the final state.

    The graph's switches come from the first condition (all conditions in a batch share one
    graph); per-society values such as beta, r or ``punish_off_round`` may differ."""
    if phases is None:
        phases = phases_for_batch([c.params for c in conditions])
    graph = build_cpr_graph(phases, checkpointer=checkpointer)
    state = init_state(conditions, replicates, seed)
    cfg: RunnableConfig = {
        "configurable": {"thread_id": thread_id},
        "recursion_limit": recursion_limit(state, len(phases)),
    }
    kw = {"durability": durability} if (durability and checkpointer is not None) else {}
    return drive(graph, state, cfg, progress=progress, **kw)


def drive(
    graph, inp: Any, cfg: RunnableConfig, *, progress: Callable[[dict], None] | None = None, **kw: Any
) -> CPRState:
    """Invoke (``inp`` a state) or resume (``inp`` None) a graph; report rounds to ``progress``.
    The state returned covers the whole batch (:func:`~cooplab.tasks.cpr.state.full_state`)."""
    if progress is None:
        out = graph.invoke(inp, cfg, version="v2", **kw)  # v2 streams only the values (v1 also every update)
        final = full_state(out.value)
        whole = {**final, "__interrupt__": list(out.interrupts)} if out.interrupts else final  # as v1 returns them
        return cast(CPRState, whole)  # full_state keeps the state's keys
    final = None
    for chunk in graph.stream(inp, cfg, stream_mode=["updates", "values"], **kw):
        mode, data = chunk
        if mode == "updates" and "environment" in data:
            progress(data["environment"])
        elif mode == "values":
            final = data
    # the values mode streams the input state first, so a run started from a state always has one
    assert final is not None, "the graph streamed no state"
    return cast(CPRState, full_state(final))  # full_state keeps the state's keys
