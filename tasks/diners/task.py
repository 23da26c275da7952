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
from typing import Any, cast

import numpy as np

from cooplab.graphs import rundir
from cooplab.graphs.runfiles import RunSummary
from cooplab.graphs.task import RunInfo, Task, TaskConfig
from cooplab.tasks.diners import model as dm
from cooplab.tasks.diners.metrics import per_agent_tables, share_summary, strategy_counts
from cooplab.tasks.diners.params import DinersParams
from cooplab.tasks.diners.results import DinersResults
from cooplab.tasks.diners.society import (
    Condition,
    DinersState,
    build_diners_graph,
    diners_phases,
    init_state,
)


# --- the task ------------------------------------------------------------------------------
def _as_dict(state: DinersState) -> dict[str, Any]:
    """The state as the plain dict it is at runtime (a TypedDict is a dict), read and filled by key."""
    return cast(dict[str, Any], state)


def init_llm_state(cond: Condition, replicates: int, seed: int, iterations: int) -> dict[str, Any]:
    state = _as_dict(init_state([cond], replicates, seed, iterations))
    S, N = state["strategy"].shape
    state.update(personas=[list(range(N)) for _ in range(S)], decisions=[], ledger=[])
    return state


def condition_of(config: TaskConfig[DinersParams]) -> Condition:
    """The condition a run's settings describe."""
    return config.params.condition()


def condition_config(cond: Condition) -> dict[str, Any]:
    """The ``params`` fields of a condition (the inverse of :func:`condition_of`)."""
    return {
        "groups": [list(g) for g in cond.groups],
        "p": cond.p,
        "k": cond.k,
        "costs_stated": cond.stated,
        "beta": cond.beta,
        "accumulate": cond.accumulate,
        "meal": cond.meal,
    }


Config = TaskConfig[DinersParams]


class DinersTask(Task):
    name = "diners"
    title = "The n-player Diner's Dilemma with punishment and metanorm punishment, Fermi imitation."
    Params = DinersParams
    Results = DinersResults
    state_schema = DinersState
    round_node = "swap"
    agent_noun = "Diner"
    explore_whole_page = True  # its page: tasks/diners/explore.py
    round_unit = "iteration"

    def options(
        self,
        agents: str,
        *,
        combination: int | None = None,
        groups: str | None = None,
        pk: str = "3:1",
        iterations: int = 10,
        replicates: int | None = None,
        beta: float = 1.0,
        invader: Any = None,
    ) -> dict[str, Any]:
        """``cooplab run diners``' own options: the paper's initial ``combination`` 1 or 2 (default 1) or any
        ``groups`` ("M,P,E,R1;M,M,P,R1"), the punishment costs ``pk`` (unstated, 3:1, 6:1 or P:K),
        ``iterations`` (paper: 10), ``replicates`` (default 200 rule-based, 1 LLM), the Fermi rule's ``beta``
        and ``invader`` (``"KIND@K[:AGENT]"`` or a dict: a diner replaced at iteration K, tasks/diners/invaders.py)."""
        import cooplab.limits as co

        if combination is not None and groups is not None:
            raise co.ConfigError("give either --combination or --groups, not both")
        if not isinstance(pk, str) or (groups is not None and not isinstance(groups, str)):
            raise co.ConfigError(
                f"--pk and --groups are text such as '3:1' and 'M,P,E,R1;M,M,P,R1', got {co.show(pk)} and "
                f"{co.show(groups)}"
            )
        if replicates is None:
            replicates = 1 if agents == "llm" else 200
        names = co.flags(
            {
                "combination": "--combination",
                "iterations": "--iterations",
                "replicates": "--replicates",
                "beta": "--beta",
                "groups": "--groups",
                "p": "--pk",
                "k": "--pk",
            }
        )
        co.validate(
            DinersParams, {"combination": combination}, names
        )  # the choice of the paper's, before it is looked up
        try:
            grp = dm.parse_groups(groups) if groups is not None else dm.COMBINATIONS[combination or 1]
            p, k, stated = dm.parse_pk(pk)
        except dm.DinersError as exc:
            raise co.ConfigError(str(exc)) from None
        values = {
            "combination": None if groups is not None else (combination or 1),
            "pk": pk.strip().lower(),
            "groups": [list(g) for g in grp],
            "p": p,
            "k": k,
            "costs_stated": stated,
            "beta": beta,
            "iterations": iterations,
            "replicates": replicates,
        }
        settings = co.validate(DinersParams, values, names, context={"agents": agents})
        if invader is not None:  # a diner replaced at iteration K: checked against the society the settings describe
            from cooplab.graphs import invaders
            from cooplab.tasks.diners.params import invader_kinds

            values["invader"] = invaders.parse(
                invader,
                n_agents=settings.n_agents,
                rounds=settings.iterations,
                agents=agents,
                kinds=invader_kinds(agents),
            )
            settings = co.validate(DinersParams, values, names, context={"agents": agents})
        return {"params": settings}

    def build(self, config: Config, *, checkpointer: Any = None):
        from cooplab.tasks.diners.invaders import with_invader

        invader = config.params.invader.as_dict() if config.params.invader is not None else None
        if config.agents == "llm":
            from cooplab.graphs.prompts import variant_of
            from cooplab.tasks.diners.llm import llm_phases

            return build_diners_graph(
                with_invader(llm_phases(variant_of(config), invader), invader), checkpointer=checkpointer
            )
        return build_diners_graph(with_invader(diners_phases(), invader), checkpointer=checkpointer)

    def init_state(self, config: Config) -> dict[str, Any]:
        P = config.params
        args = (P.condition(), P.replicates, config.seed, P.iterations)
        return init_llm_state(*args) if config.agents == "llm" else _as_dict(init_state([args[0]], *args[1:]))

    def total_rounds(self, config: Config) -> int:
        return config.params.iterations

    def _initial(self, config: Config) -> np.ndarray:
        P = config.params
        return _as_dict(init_state([P.condition()], P.replicates, config.seed, P.iterations))["strategy"]

    #: settings a fork keeps from its parent: the agents and their groups (the shapes of the state's
    #: arrays), the replicates, and the labels of the start (``pk`` names the costs the run began with)
    FORK_FIXED = ("groups", "combination", "replicates", "pk")

    def fork_state(self, state: Mapping[str, Any], old: Config, new: Config) -> dict[str, Any]:
        """A fork's changed settings in the state: the per-society arrays under ``params`` (p, k,
        beta, accumulate, costs stated, the meal's costs and values) take the new values, so the
        iterations after the fork compute with them; a changed ``iterations`` moves the round cap.
        :data:`FORK_FIXED` cannot change (one line naming it: give p and k with ``--set p=6 --set k=1``
        rather than a new ``pk`` label), nor can the cap end before the fork's first iteration. An
        invader the parent did not have may arrive after the fork's iteration (``--invader``)."""
        from cooplab.graphs.forks import check_rounds, refuse_fixed

        a, b = old.params, new.params
        refuse_fixed(a, b, (*self.FORK_FIXED, "invader"), state, task="diners")
        check_rounds(a.iterations, b.iterations, state, "iterations")

        def values(P: DinersParams) -> dict[str, float]:
            return {
                "p": float(P.p),
                "k": float(P.k),
                "beta": float(P.beta),
                "accumulate": float(P.accumulate),
                "stated": float(P.costs_stated),
                **{name: float(v) for name, v in P.meal.model_dump().items()},
            }

        before, after = values(a), values(b)
        out: dict[str, Any] = {}
        changed = [name for name in after if after[name] != before[name]]
        if changed:
            params = dict(state["params"])
            for name in changed:
                params[name] = np.full(np.shape(params[name]), after[name], dtype=float)
            out["params"] = params
        if b.iterations != a.iterations:
            out["max_round"] = int(b.iterations)
            if not np.asarray(state["active"]).any() and int(state["round"]) <= b.iterations:
                out["active"] = np.ones(np.shape(state["active"]), dtype=bool)  # a run that had ended goes on
        return out

    def outputs(self, final: Mapping[str, Any], config: Config, run: RunInfo) -> DinersResults:
        counts = strategy_counts(final, self._initial(config))
        rundir.write_table(counts, run.out, "strategy_counts", csv=run.csv)
        for stem, df in per_agent_tables(final).items():
            rundir.write_table(df, run.out, stem, csv=run.csv)
        S, N = np.asarray(final["strategy"]).shape
        P = config.params
        summary: dict[str, Any] = {
            "combination": P.combination,
            "groups": P.groups,
            "pk": P.pk,
            "p": P.p,
            "k": P.k,
            "costs_stated": P.costs_stated,
            "beta": P.beta,
            "replicates": S,
            "n_agents": N,
            "iterations_completed": len(final.get("history") or []),
            **share_summary(counts),
        }
        if run.llm:
            from cooplab.tasks.diners.llm import accuracy

            summary.update(accuracy(final.get("decisions") or []))
        summary.update(_mix_and_invader(final, config, run))
        return DinersResults.of(summary)

    def figure(self, summary: RunSummary[DinersResults], run: RunInfo) -> None:
        from cooplab.tasks.diners.figures import run_figure

        run_figure(rundir.read_table(run.out, "strategy_counts"), summary.as_json(), run.out / "figures")
        from cooplab.tasks.diners.mix import figures as mix_figures

        mix_figures(summary.as_json(), run.out / "figures")

    def report(self, summary: RunSummary[DinersResults]) -> list[str]:
        r = summary.results
        if r is None:
            return super().report(summary)
        shares = ", ".join(f"{n} {v:.3f}" for n, v in r.final_shares.items() if v or n != "D")
        lines = [
            f"final strategy shares after {r.iterations_completed} iterations (mean of {r.replicates} replicates): "
            f"{shares}"
        ]
        if r.decision_accuracy_n is not None:
            fmt = lambda v: "n/a" if v is None else f"{v:.3f}"  # noqa: E731
            lines.append(
                f"decision accuracy {fmt(r.decision_accuracy)} ({r.decision_accuracy_n} orders), "
                f"punishment accuracy {fmt(r.punishment_accuracy)} ({r.punishment_accuracy_n} decisions)"
            )
        from cooplab.tasks.diners.mix import report_lines

        whole = summary.as_json()
        lines += report_lines(whole)
        lines.append(
            "tables: summary.json, strategy_counts.*, orders.*, punishments.*, utilities.*, imitation.*"
            + (", by_model.*, crossplay.*" if whole.get("by_model") else "")
            + ", figures/run.png"
        )
        return lines

    def analyze_sweep(
        self, cells: list[dict[str, Any]], out: Any, *, analysis_out: Any = None
    ) -> dict[str, Any] | None:
        """The cells' per-model rows, cross-play and invasions side by side (when any cell has them)."""
        from cooplab.evals.mixsweep import analyze_mixed_cells

        return analyze_mixed_cells(cells, out, analysis_out=analysis_out)

    # --- the run explorer: tasks/diners/explore.py ----------------------------------------
    def explore(self, run: Any, query: Mapping[str, str]) -> list[Any]:
        from cooplab.tasks.diners.explore import view

        return view(run, query)

    def key_numbers(self, summary: RunSummary[Any]) -> dict[str, Any]:
        from cooplab.tasks.diners.explore import key_numbers

        return key_numbers(summary.as_json())


def _mix_and_invader(final: Mapping[str, Any], config: Config, run: RunInfo) -> dict[str, Any]:
    """Diners of several models: per-model outcomes and cross-play (tables ``by_model``, ``crossplay``);
    an invader: its effect (tasks/diners/mix.py). Nothing for a run with neither."""
    from cooplab.tasks.diners import mix

    out: dict[str, Any] = {}
    history = list(final.get("history") or [])
    if not history:
        return out
    llm = config.llm.model_dump(mode="json") if config.llm is not None else None
    N = int(np.asarray(final["strategy"]).shape[1])
    if config.agents == "llm" and mix.is_mixed(llm, N):
        by_model, cross = mix.per_model(
            history, np.asarray(final["group"]), list(final.get("decisions") or []), llm or {}
        )
        rundir.write_table(by_model, run.out, "by_model", csv=run.csv)
        rundir.write_table(cross, run.out, "crossplay", csv=run.csv)
        out["by_model"], out["crossplay"] = by_model, cross
    if config.params.invader is not None:
        out["invasion"] = mix.invader_effect(history, config.params.invader.as_dict())
    return out


TASK = DinersTask()
