"""The n-player Diner's Dilemma with punishment and metanorms (Warnakulasuriya et al., "Evolution
of Cooperation in LLM-Agent Societies: A Preliminary Study Using Different Punishment Strategies";
Boyd and Richerson 1992's strategies; Fermi imitation) as a task of the one runner.

A run's settings are a :class:`~cooplab.tasks.diners.params.DinersParams` (``config.params``):
``groups`` (strategy codes per group), ``p`` and ``k`` (punishment costs), ``costs_stated``, ``beta``,
``accumulate``, ``meal``, ``iterations``, ``replicates``, and the labels ``combination`` and ``pk``.

Run directory: the per-iteration tables ``strategy_counts``, ``orders``, ``punishments``,
``utilities``, ``imitation`` (Parquet, or CSV with ``csv=True``); LLM runs add ``decisions`` and
``ledger`` (written by the runner); ``figures/run.png``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from cooplab.graphs import rundir
from cooplab.graphs.runfiles import RunSummary
from cooplab.graphs.task import RunInfo, Task, TaskConfig
from cooplab.tasks.diners.results import DinersResults
from cooplab.tasks.diners import model as dm
from cooplab.tasks.diners.metrics import per_agent_tables, share_summary, strategy_counts
from cooplab.tasks.diners.params import DinersParams
from cooplab.tasks.diners.society import (
    Condition,
    DinersState,
    build_diners_graph,
    diners_phases,
    init_state,
)


# --- the task ------------------------------------------------------------------------------
def init_llm_state(cond: Condition, replicates: int, seed: int, iterations: int) -> dict[str, Any]:
    state = init_state([cond], replicates, seed, iterations)
    S, N = state["strategy"].shape
    state.update(personas=[list(range(N)) for _ in range(S)], decisions=[], ledger=[])
    return state


def condition_of(config: TaskConfig[DinersParams]) -> Condition:
    """The condition a run's settings describe."""
    return config.params.condition()


def condition_config(cond: Condition) -> dict[str, Any]:
    """The ``params`` fields of a condition (the inverse of :func:`condition_of`)."""
    return {"groups": [list(g) for g in cond.groups], "p": cond.p, "k": cond.k, "costs_stated": cond.stated, "beta": cond.beta,
            "accumulate": cond.accumulate, "meal": cond.meal}


Config = TaskConfig[DinersParams]


class DinersTask(Task):
    name = "diners"
    title = "The n-player Diner's Dilemma with punishment and metanorm punishment, Fermi imitation."
    Params = DinersParams
    Results = DinersResults
    state_schema = DinersState
    round_node = "swap"
    agent_noun = "Diner"
    round_unit = "iteration"

    def options(self, agents: str, *, combination: int | None = None, groups: str | None = None, pk: str = "3:1", iterations: int = 10,
                replicates: int | None = None, beta: float = 1.0) -> dict[str, Any]:
        """``cooplab run diners``' own options: the paper's initial ``combination`` 1 or 2 (default 1) or any
        ``groups`` ("M,P,E,R1;M,M,P,R1"), the punishment costs ``pk`` (unstated, 3:1, 6:1 or P:K),
        ``iterations`` (paper: 10), ``replicates`` (default 200 rule-based, 1 LLM) and the Fermi rule's ``beta``."""
        import cooplab.limits as co

        if combination is not None and groups is not None:
            raise co.ConfigError("give either --combination or --groups, not both")
        if not isinstance(pk, str) or (groups is not None and not isinstance(groups, str)):
            raise co.ConfigError(f"--pk and --groups are text such as '3:1' and 'M,P,E,R1;M,M,P,R1', got {co.show(pk)} and {co.show(groups)}")
        if replicates is None:
            replicates = 1 if agents == "llm" else 200
        names = co.flags({"combination": "--combination", "iterations": "--iterations", "replicates": "--replicates", "beta": "--beta",
                          "groups": "--groups", "p": "--pk", "k": "--pk"})
        co.validate(DinersParams, {"combination": combination}, names)  # the choice of the paper's, before it is looked up
        try:
            grp = dm.parse_groups(groups) if groups is not None else dm.COMBINATIONS[combination or 1]
            p, k, stated = dm.parse_pk(pk)
        except dm.DinersError as exc:
            raise co.ConfigError(str(exc)) from None
        values = {"combination": None if groups is not None else (combination or 1), "pk": pk.strip().lower(), "groups": [list(g) for g in grp],
                  "p": p, "k": k, "costs_stated": stated, "beta": beta, "iterations": iterations, "replicates": replicates}
        return {"params": co.validate(DinersParams, values, names, context={"agents": agents})}

    def build(self, config: Config, *, checkpointer: Any = None):
        if config.agents == "llm":
            from cooplab.tasks.diners.llm import llm_phases

            from cooplab.graphs.prompts import variant_of

            return build_diners_graph(llm_phases(variant_of(config)), checkpointer=checkpointer)
        return build_diners_graph(diners_phases(), checkpointer=checkpointer)

    def init_state(self, config: Config) -> dict[str, Any]:
        P = config.params
        args = (P.condition(), P.replicates, config.seed, P.iterations)
        return init_llm_state(*args) if config.agents == "llm" else init_state([args[0]], *args[1:])

    def total_rounds(self, config: Config) -> int:
        return config.params.iterations

    def _initial(self, config: Config) -> np.ndarray:
        P = config.params
        return init_state([P.condition()], P.replicates, config.seed, P.iterations)["strategy"]

    def outputs(self, final: Mapping[str, Any], config: Config, run: RunInfo) -> DinersResults:
        counts = strategy_counts(final, self._initial(config))
        rundir.write_table(counts, run.out, "strategy_counts", csv=run.csv)
        for stem, df in per_agent_tables(final).items():
            rundir.write_table(df, run.out, stem, csv=run.csv)
        S, N = np.asarray(final["strategy"]).shape
        P = config.params
        summary: dict[str, Any] = {
            "combination": P.combination, "groups": P.groups, "pk": P.pk, "p": P.p,
            "k": P.k, "costs_stated": P.costs_stated, "beta": P.beta, "replicates": S, "n_agents": N,
            "iterations_completed": len(final.get("history") or []), **share_summary(counts),
        }
        if run.llm:
            from cooplab.tasks.diners.llm import accuracy

            summary.update(accuracy(final.get("decisions") or []))
        return DinersResults.of(summary)

    def figure(self, summary: RunSummary[DinersResults], run: RunInfo) -> None:
        from cooplab.tasks.diners.figures import run_figure

        run_figure(rundir.read_table(run.out, "strategy_counts"), summary.as_json(), run.out / "figures")

    def report(self, summary: RunSummary[DinersResults]) -> list[str]:
        r = summary.results
        if r is None:
            return super().report(summary)
        shares = ", ".join(f"{n} {v:.3f}" for n, v in r.final_shares.items() if v or n != "D")
        lines = [f"final strategy shares after {r.iterations_completed} iterations (mean of {r.replicates} replicates): {shares}"]
        if r.decision_accuracy_n is not None:
            fmt = lambda v: "n/a" if v is None else f"{v:.3f}"  # noqa: E731
            lines.append(f"decision accuracy {fmt(r.decision_accuracy)} ({r.decision_accuracy_n} orders), "
                         f"punishment accuracy {fmt(r.punishment_accuracy)} ({r.punishment_accuracy_n} decisions)")
        lines.append("tables: summary.json, strategy_counts.*, orders.*, punishments.*, utilities.*, imitation.*, figures/run.png")
        return lines


TASK = DinersTask()
