"""The n-player Diner's Dilemma with punishment and metanorms (Warnakulasuriya et al., "Evolution
of Cooperation in LLM-Agent Societies: A Preliminary Study Using Different Punishment Strategies";
Boyd and Richerson 1992's strategies; Fermi imitation) as a task of the one runner.

A run's config.json holds, besides the runner's fields: ``groups`` (strategy codes per group),
``p`` and ``k`` (punishment costs), ``costs_stated``, ``beta``, ``accumulate``, ``meal``,
``iterations``, ``replicates``, and the labels ``combination`` and ``pk``.

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
from cooplab.graphs.task import RunInfo, Task, TaskConfigError
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


def condition_of(config: Mapping[str, Any]) -> Condition:
    """The condition a run's config.json records (in its ``params``)."""
    P = config["params"]
    return Condition(tuple(tuple(g) for g in P["groups"]), float(P["p"]), float(P["k"]), bool(P["costs_stated"]),
                     float(P["beta"]), accumulate=bool(P.get("accumulate", True)),
                     meal={k: float(v) for k, v in (P.get("meal") or dm.MEAL).items()})


def condition_config(cond: Condition) -> dict[str, Any]:
    """The ``params`` fields of a condition (the inverse of :func:`condition_of`)."""
    return {"groups": [list(g) for g in cond.groups], "p": cond.p, "k": cond.k, "costs_stated": cond.stated, "beta": cond.beta,
            "accumulate": cond.accumulate, "meal": cond.meal}


class DinersTask(Task):
    name = "diners"
    title = "The n-player Diner's Dilemma with punishment and metanorm punishment, Fermi imitation."
    Params = DinersParams
    Results = DinersResults
    state_schema = DinersState
    round_node = "swap"
    agent_noun = "Diner"
    round_unit = "iteration"

    def check_config(self, config: Mapping[str, Any]) -> None:
        import cooplab.limits as co

        P = config.get("params")
        if not isinstance(P, Mapping):
            raise TaskConfigError(f"params must be a JSON object, got {co.show(P)}")
        unknown = sorted(set(P) - set(DinersParams.model_fields))
        if unknown:
            raise TaskConfigError(f"params: unknown field {unknown[0]!r}; the diners settings are {', '.join(DinersParams.model_fields)}")
        missing = sorted(set(DinersParams.model_fields) - set(P) - {"accumulate", "meal"})  # added after the first runs
        if missing:
            raise TaskConfigError(f"params lacks {', '.join(missing)}")
        for key, rule in (("replicates", "replicates"), ("iterations", "iterations"), ("beta", "beta")):
            co.check(f"params.{key}", P.get(key), rule)
        for key in ("p", "k"):
            co.check(f"params.{key}", P.get(key), co.Num(float, 0, co.MAX_PARAM, hint="punishment cost"))
        for key in ("costs_stated", "accumulate"):
            if not isinstance(P.get(key, False), bool):
                raise TaskConfigError(f"params.{key} must be true or false, got {P.get(key)!r}")
        if P.get("combination") is not None and P.get("combination") not in dm.COMBINATIONS:
            raise TaskConfigError(f"params.combination must be 1, 2 or null, got {co.show(P.get('combination'))}")
        if not isinstance(P.get("pk"), str):
            raise TaskConfigError(f"params.pk must be text such as '3:1', got {co.show(P.get('pk'))}")
        groups = P.get("groups")
        if not isinstance(groups, list) or not all(isinstance(g, list) and all(isinstance(x, str) for x in g) for g in groups):
            raise TaskConfigError(f"params.groups must be a list of lists of strategy codes ({', '.join(dm.STRATEGIES)}), got {groups!r}")
        meal = P.get("meal", dm.MEAL)
        if not isinstance(meal, dict) or set(meal) != set(dm.MEAL):
            raise TaskConfigError(f"params.meal must be an object with {', '.join(dm.MEAL)}, got {meal!r}")
        for key, v in meal.items():
            co.check(f"params.meal.{key}", v, co.Num(float, 0, co.MAX_PARAM))
        try:
            dm.parse_groups(";".join(",".join(g) for g in groups))
            cond = condition_of(config)
            cond.validate()
        except dm.DinersError as exc:
            raise TaskConfigError(str(exc)) from None
        co.check_size(P["replicates"], cond.n_agents, P["iterations"], names=("params.replicates", "diners", "params.iterations"), diners=True)

    def options(self, agents: str, *, combination: int | None = None, groups: str | None = None, pk: str = "3:1", iterations: int = 10,
                replicates: int | None = None, beta: float = 1.0) -> dict[str, Any]:
        """``cooplab run diners``' own options: the paper's initial ``combination`` 1 or 2 (default 1) or any
        ``groups`` ("M,P,E,R1;M,M,P,R1"), the punishment costs ``pk`` (unstated, 3:1, 6:1 or P:K),
        ``iterations`` (paper: 10), ``replicates`` (default 200 rule-based, 1 LLM) and the Fermi rule's ``beta``."""
        import cooplab.limits as co
        from cooplab.tasks.diners.society import Condition

        co.check("--iterations", iterations, "iterations")
        co.check("--beta", beta, "beta")
        if replicates is not None:
            co.check("--replicates", replicates, "replicates")
        if combination is not None and groups is not None:
            raise co.ConfigError("give either --combination or --groups, not both")
        if combination is not None and combination not in dm.COMBINATIONS:
            raise co.ConfigError(f"--combination must be 1 or 2, got {combination}")
        if not isinstance(pk, str) or (groups is not None and not isinstance(groups, str)):
            raise co.ConfigError(f"--pk and --groups are text such as '3:1' and 'M,P,E,R1;M,M,P,R1', got {co.show(pk)} and {co.show(groups)}")
        if replicates is None:
            replicates = 1 if agents == "llm" else 200
        try:
            grp = dm.parse_groups(groups) if groups is not None else dm.COMBINATIONS[combination or 1]
            p, k, stated = dm.parse_pk(pk)
            cond = Condition(grp, p, k, stated, beta)
            cond.validate()
        except dm.DinersError as exc:
            raise co.ConfigError(str(exc)) from None
        co.check_size(replicates, cond.n_agents, iterations, names=("--replicates", "diners", "--iterations"), diners=True)
        return {"params": {"combination": None if groups is not None else (combination or 1), "pk": pk.strip().lower(),
                           **condition_config(cond), "iterations": iterations, "replicates": replicates}}

    def n_agents(self, config: Mapping[str, Any]) -> int:
        return condition_of(config).n_agents

    def default_config(self, agents: str = "rule") -> dict[str, Any]:
        return {**super().default_config(agents), "params": {**DinersParams().model_dump(), "replicates": 1}}

    def build(self, config: Mapping[str, Any], *, checkpointer: Any = None):
        if config.get("agents") == "llm":
            from cooplab.tasks.diners.llm import llm_phases

            from cooplab.graphs.prompts import variant_of

            return build_diners_graph(llm_phases(variant_of(config)), checkpointer=checkpointer)
        return build_diners_graph(diners_phases(), checkpointer=checkpointer)

    def init_state(self, config: Mapping[str, Any]) -> dict[str, Any]:
        P = config["params"]
        args = (condition_of(config), int(P["replicates"]), int(config["seed"]), int(P["iterations"]))
        return init_llm_state(*args) if config.get("agents") == "llm" else init_state([args[0]], *args[1:])

    def total_rounds(self, config: Mapping[str, Any]) -> int:
        return int(config["params"]["iterations"])

    def _initial(self, config: Mapping[str, Any]) -> np.ndarray:
        P = config["params"]
        return init_state([condition_of(config)], int(P["replicates"]), int(config["seed"]), int(P["iterations"]))["strategy"]

    def outputs(self, final: Mapping[str, Any], config: Mapping[str, Any], run: RunInfo) -> DinersResults:
        counts = strategy_counts(final, self._initial(config))
        rundir.write_table(counts, run.out, "strategy_counts", csv=run.csv)
        for stem, df in per_agent_tables(final).items():
            rundir.write_table(df, run.out, stem, csv=run.csv)
        S, N = np.asarray(final["strategy"]).shape
        P = config["params"]
        summary: dict[str, Any] = {
            "combination": P.get("combination"), "groups": P["groups"], "pk": P.get("pk"), "p": P["p"],
            "k": P["k"], "costs_stated": P["costs_stated"], "beta": P["beta"], "replicates": S, "n_agents": N,
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

    def params_table(self) -> list[dict[str, Any]]:
        rows = []
        for row in super().params_table():
            if row["name"] == "groups":
                row["default"] = ";".join(",".join(g) for g in row["default"])
            if row["name"] != "meal":
                rows.append(row)
                continue
            meaning = {"c_b": "cost of the budget meal", "v_b": "value of the budget meal", "c_p": "cost of the premium meal",
                       "v_p": "value of the premium meal"}
            rows += [{"name": f"meal.{k}", "default": v, "meaning": meaning[k], "source": row["source"]} for k, v in dm.MEAL.items()]
        return rows


TASK = DinersTask()
