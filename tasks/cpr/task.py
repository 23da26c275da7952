"""The CPR fishery society (Gupta, Zhong, Yakura, Eisenmann and Rahwan 2025, "The Role of Social
Learning and Collective Norm Formation in Fostering Cooperation in LLM Multi-Agent Systems") as a
task of the one runner: configuration, graph, initial state and outputs.

A run's settings are a :class:`~cooplab.tasks.cpr.params.CPRSettings` (``config.params``; config.json's
``params``): every :class:`~cooplab.tasks.cpr.params.CPRParams` value and, beside them, ``env``
(harsh | rich) and ``ablation`` (full | osl | ogd | neither) the values came from, ``population``
(altruistic | selfish | mixed), ``replicates`` and, if one was used, ``preset``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd

from cooplab.evals.text import counts_text, mean_sem_text
from cooplab.evals.typed import column
from cooplab.graphs import prompts, rundir
from cooplab.graphs.formats import Converter
from cooplab.graphs.rng import phase_rng
from cooplab.graphs.runfiles import RunSummary
from cooplab.graphs.tables import agent_id
from cooplab.graphs.task import RunInfo, Task, TaskConfig
from cooplab.tasks.cpr import metrics as cpr_metrics
from cooplab.tasks.cpr import phases as ph
from cooplab.tasks.cpr.outcomes import summarize
from cooplab.tasks.cpr.params import (
    ENVIRONMENTS,
    RUN_SETTINGS,
    CPRParams,
    CPRSettings,
    ParamError,
    agent_types,
    invader_kinds,
    make_params,
)
from cooplab.tasks.cpr.results import CPRResults
from cooplab.tasks.cpr.society import Condition, apply_ablation, init_state, phases_for
from cooplab.tasks.cpr.state import CPRState, full_state


def presets() -> dict[str, dict[str, Any]]:
    """The named parameter sets of ``tasks/cpr/params.py`` (``PRESETS``; none when it has none)."""
    from cooplab.tasks.cpr import params as params_module

    found = getattr(params_module, "PRESETS", None)
    return dict(found) if isinstance(found, Mapping) else {}


def preset_values(name: str | None) -> dict[str, Any]:
    """The parameter values of preset ``name`` (``--preset NAME``; {} for None), or a one-line
    :class:`ParamError` naming the presets there are."""
    if name is None:
        return {}
    known = presets()
    if name not in known:
        listed = f"known presets: {', '.join(sorted(known))}" if known else "no presets are defined"
        raise ParamError(f"unknown preset {name!r} for --preset; {listed}")
    values = known[name]
    if not isinstance(values, Mapping):
        raise ParamError(f"preset {name!r} must map parameter names to values, got {type(values).__name__}")
    unknown = sorted(set(values) - set(CPRParams.model_fields))
    if unknown:
        raise ParamError(f"preset {name!r} sets unknown parameters: {', '.join(unknown)} (see 'cooplab params cpr')")
    return dict(values)


def resolve_params(
    env: str,
    ablation: str,
    n_agents: int | None,
    rounds: int | None,
    overrides: dict[str, Any],
    preset: str | None = None,
) -> CPRParams:  # the earlier CPR sweep format's cells (tasks/cpr/sweep_format.py)
    """CLI choices -> validated parameters. Precedence: --set > --n-agents/--rounds > --env/--ablation
    > --preset (a named parameter set) > the defaults."""
    values: dict[str, Any] = {**preset_values(preset), "r": ENVIRONMENTS[env]}
    values = apply_ablation(values, ablation)
    if n_agents is not None:
        values["N"] = n_agents
    if rounds is not None:
        values["T"] = rounds
    values.update(overrides)
    return make_params(**values)


def llm_phases(
    params: CPRParams, variant: str = "original", invader: dict[str, Any] | None = None
) -> "OrderedDict[str, Callable]":
    """The CPR graph with LLM agents: the same phase nodes with LLM policies plugged in
    (Figs. 8-11). Social learning happens in context (peers shown in the prompts), so the
    parameter-copying ``learn`` node is not part of an LLM society. A rule-based ``invader``'s seat
    is played by its rule from its round on, never asked (tasks/cpr/llm.py, :func:`invader_effort`)."""
    from cooplab.tasks.cpr import llm as la

    nodes: OrderedDict[str, Callable] = OrderedDict()
    nodes["harvest"] = ph.harvest_node(la.LLMEffortPolicy(variant, invader))
    if params.punishment:
        nodes["punish"] = ph.punish_node(la.LLMPunishPolicy(variant, invader))
    nodes["environment"] = ph.environment_node()
    if params.group_decision:
        nodes["propose"] = ph.propose_node(la.LLMProposePolicy(variant, invader))
        nodes["vote"] = ph.vote_node(la.LLMVotePolicy(variant, invader))
    return nodes


def _as_dict(state: CPRState) -> dict[str, Any]:
    """The state as the plain dict it is at runtime (a TypedDict is a dict), read and filled by key."""
    return cast(dict[str, Any], state)


def init_llm_state(conditions, replicates: int, seed: int, variant: str = "original") -> dict[str, Any]:
    """The rule-based initial state plus what LLM agents carry: belief texts drawn from the
    template bank by type, an empty group norm, and a short memory of recent outcomes."""
    from cooplab.tasks.cpr.llm import MEMORY, initial_beliefs

    state = _as_dict(init_state(conditions, replicates, seed))
    S, N = state["alive"].shape
    types = [agent_types(N, conditions[int(c)].population) for c in state["condition"]]
    beliefs = initial_beliefs(types, phase_rng(seed, 0, "beliefs"), variant)
    state.update(
        agent_types=types,
        beliefs=beliefs,
        beliefs_initial=[list(row) for row in beliefs],
        proposal_texts=[[None] * N for _ in range(S)],
        norm_text=[None] * S,
        norm_history=[],
        h_recent=np.zeros((S, N, MEMORY)),
        effort_recent=np.zeros((S, N, MEMORY)),
        V_recent=np.zeros((S, N, MEMORY)),
        G=np.full(S, np.nan),  # LLM societies have no numeric norm: compliance is judged in language
        decisions=[],
        ledger=[],
    )
    return state


POPULATIONS = ("altruistic", "selfish", "mixed")
ABLATIONS = ("full", "osl", "ogd", "neither")
__all__ = ["RUN_SETTINGS", "CPRTask", "TASK"]

Config = TaskConfig[CPRSettings]


class CPRTask(Task):
    name = "cpr"
    title = "The common-pool fishery society (Gupta et al. 2025): harvest, punish, learn, propose, vote."
    Params = CPRSettings
    Results = CPRResults
    state_schema = CPRState
    round_node = "environment"
    agent_noun = "Fisher"
    explore_whole_page = True  # its page: tasks/cpr/explore.py
    sweep_columns = ("survival_time.mean", "efficiency.mean", "ledger.calls", "ledger.cost_usd_float")
    #: the per-round curves ``cooplab compare`` draws (columns of rounds.parquet)
    curve_columns = ("R", "n_alive", "mean_effort", "H")

    def options(
        self,
        agents: str,
        *,
        env: str = "harsh",
        population: str = "mixed",
        ablation: str = "full",
        n_agents: int | None = None,
        rounds: int | None = None,
        replicates: int | None = None,
        set: Any = None,
        preset: str | None = None,
        invader: Any = None,
    ) -> dict[str, Any]:  # noqa: A002
        """``cooplab run cpr``'s own options: ``env`` harsh | rich, ``population`` altruistic | selfish |
        mixed, ``ablation`` full | osl | ogd | neither, ``n_agents`` (N, default 10), ``rounds`` (T,
        default 50), ``replicates`` (default 100 rule-based, 1 LLM), ``set`` (any parameter: a dict or
        ``name=value`` strings), ``preset`` (a named set of values; explicit options win over it) and
        ``invader`` (``"KIND@K[:AGENT]"`` or a dict: an agent replaced at round K, tasks/cpr/invaders.py)."""
        import cooplab.limits as co
        from cooplab.tasks.cpr.params import parse_set

        names = {
            "env": "--env",
            "population": "--population",
            "ablation": "--ablation",
            "replicates": "--replicates",
            "preset": "--preset",
        }
        for key, value, allowed in (
            ("env", env, ENVIRONMENTS),
            ("ablation", ablation, ABLATIONS),
        ):  # read before the model sees them
            if value not in allowed:
                co.validate(CPRSettings, {key: value}, co.flags(names))  # the model's own message
                raise co.ConfigError(f"--{key} must be {' or '.join(allowed)}, got {co.show(value)}")
        if replicates is None:
            replicates = 1 if agents == "llm" else 100
        try:
            overrides = (
                parse_set(set)
                if set is None or isinstance(set, (list, tuple))
                else co.parse_set(set, CPRParams.model_fields, "cpr")
            )
            values: dict[str, Any] = {**preset_values(preset), "r": ENVIRONMENTS[env]}
        except ParamError as exc:
            raise co.ConfigError(str(exc)) from None
        values = apply_ablation(values, ablation)
        if n_agents is not None:
            values["N"], names["N"] = n_agents, "--n-agents"
        if rounds is not None:
            values["T"], names["T"] = rounds, "--rounds"
        for key in overrides:
            names[key] = f"--set {key}"
        values.update(overrides)
        run = {"env": env, "ablation": ablation, "population": population, "replicates": replicates, "preset": preset}
        name = co.flags(names, rest=lambda f: f"--set {f}")
        settings = co.validate(CPRSettings, {**values, **run}, name, context={"agents": agents})
        if invader is not None:  # an agent replaced at round K: checked against the society the settings describe
            from cooplab.graphs import invaders

            run["invader"] = invaders.parse(
                invader, n_agents=settings.N, rounds=settings.T, agents=agents, kinds=invader_kinds(agents)
            )
            settings = co.validate(CPRSettings, {**values, **run}, name, context={"agents": agents})
        return {"params": settings}

    def phases(self, config: Config) -> "OrderedDict[str, Callable]":
        invader = config.params.invader
        if config.agents == "llm":
            return llm_phases(
                config.params, prompts.variant_of(config), invader.as_dict() if invader is not None else None
            )
        from cooplab.tasks.cpr.invaders import with_invader

        return with_invader(phases_for(config.params), invader.as_dict() if invader is not None else None)

    def init_state(self, config: Config) -> dict[str, Any]:
        P = config.params
        conds = [Condition(P, P.population)]
        if config.agents == "llm":
            return init_llm_state(conds, P.replicates, config.seed, prompts.variant_of(config))
        return _as_dict(init_state(conds, P.replicates, config.seed))

    def total_rounds(self, config: Config) -> int:
        return config.params.T

    #: parameters that only shape a run's start (the stock, wealth and traits drawn at round 0, the
    #: number of agents): a fork keeps its parent's start, so it cannot change them
    START_ONLY = ("N", "R0", "P0", "e_min", "e_max", "g_min", "g_max", "m_range", "p_range")

    def fork_state(self, state: Mapping[str, Any], old: Config, new: Config) -> dict[str, Any]:
        """A fork's changed parameters in the state: every per-society parameter array that differs
        is set to the new value (the rounds after the fork compute with it), the round cap too.
        Parameters of the start (:data:`START_ONLY`) and the run settings (population, replicates)
        cannot change, nor can the cap end before the fork's first round."""
        from cooplab.limits import ConfigError
        from cooplab.tasks.cpr.society import ARRAY_FIELDS

        before, after = old.params, new.params
        arrives = after.invader if before.invader is None else None  # a newcomer after the fork's round
        for key in (*RUN_SETTINGS, *self.START_ONLY):
            if key == "invader" and arrives is not None and arrives.round >= int(state["round"]):
                continue
            if getattr(before, key) != getattr(after, key) and key not in ("env", "ablation", "preset"):
                raise ConfigError(
                    f"{key} sets the start of a run, which a fork keeps from its parent; start a new run to change it"
                )
        p_old, p_new = before, after
        t = int(state["round"])
        if p_new.T < t and p_new.T != p_old.T:
            raise ConfigError(
                f"T={p_new.T} would end the run before the fork's first round ({t}); give T of {t} or more"
            )
        params = dict(state["params"])
        changed = False
        for name in ARRAY_FIELDS:
            a, b = getattr(p_old, name), getattr(p_new, name)
            if a == b:
                continue
            value = np.inf if (name == "punish_off_round" and b is None) else float(b)
            params[name] = np.full(np.shape(params[name]), value, dtype=float)
            changed = True
        if not changed:
            return {}
        return {
            "params": params,
            "max_round": int(np.max(params["T"])) if np.size(params["T"]) else int(state["max_round"]),
        }

    def outputs(self, final: Mapping[str, Any], config: Config, run: RunInfo) -> CPRResults:
        final = full_state(final)  # a run stopped early may end with finished societies out of the running block
        if run.status != "completed":  # societies still running were censored at the last completed round
            running = np.asarray(final["active"])
            last = int(final["round"]) - 1
            final["T_s"] = np.where(running & (np.asarray(final["T_s"]) == 0), max(last, 0), final["T_s"])
        rounds = cpr_metrics.history_frame(final)
        rundir.write_table(rounds, run.out, "rounds", csv=run.csv)
        rundir.write_table(cpr_metrics.agents_frame(final), run.out, "agents", csv=run.csv)
        S, N = final["alive"].shape
        P = config.params
        summary = {
            "env": P.env,
            "population": P.population,
            "ablation": P.ablation,
            "replicates": S,
            "n_agents": N,
            "rounds_completed": int(final["round"]) - 1,
            **summarize(final),
            "agent_steps": int(column(rounds, "n_alive").sum()) if len(rounds) else 0,
        }
        if run.status != "completed":
            summary["censored"] = bool(np.asarray(final["active"]).any())
        if final.get("norm_history"):
            rundir.write_table(list(final["norm_history"]), run.out, "norms_adopted", csv=run.csv)
        summary.update(_mix_and_invader(final, config, run, rounds, N))
        if final.get("beliefs") is not None:
            types = final.get("agent_types") or []
            init = final.get("beliefs_initial") or final["beliefs"]
            rows = [
                {
                    "society": s_,
                    "agent": i_,
                    "agent_id": agent_id(s_, i_),
                    "type": types[s_][i_] if types else None,
                    "initial_belief": init[s_][i_],
                    "final_belief": b_,
                }
                for s_, row in enumerate(final["beliefs"])
                for i_, b_ in enumerate(row)
            ]
            rundir.write_table(rows, run.out, "beliefs_final", csv=run.csv)
        return CPRResults.of(summary)

    def figure(self, summary: RunSummary[CPRResults], run: RunInfo) -> None:
        from cooplab.tasks.cpr.figures import run_figure

        rounds = rundir.read_table(run.out, "rounds")
        if not len(rounds):
            return
        extra: dict[str, Any] = {}
        if run.llm:  # what only an LLM run has: each agent's effort and the adopted norms' text
            from cooplab.tasks.cpr.figures import agent_efforts

            extra["efforts"] = agent_efforts(_table_or_none(run.out, "decisions"))
            extra["norms"] = _table_or_none(run.out, "norms_adopted")
        whole = summary.as_json()
        from cooplab.evals.figcache import figure_cache

        with figure_cache(run.cache) as cache:  # a figure drawn before from the same tables is copied from it
            run_figure(rounds, whole, run.out / "figures", cache=cache, **extra)
        from cooplab.tasks.cpr.mix import figures as mix_figures

        mix_figures(whole, rounds, run.out / "figures")

    def report(self, summary: RunSummary[CPRResults]) -> list[str]:
        res = summary.results
        if res is None:
            return super().report(summary)
        st, ef = res.survival_time, res.efficiency
        n = st.n
        how = " (mean ± s.e.m. over societies)" if n > 1 else ""
        from cooplab.tasks.cpr.mix import report_lines

        whole = summary.as_json()
        return [
            f"survival time T_s = {mean_sem_text(st.model_dump(), 2)}, efficiency eta = "
            f"{mean_sem_text(ef.model_dump(), 3)}{how}, "
            f"n = {n} {'society' if n == 1 else 'societies'}; collapse causes: {counts_text(res.collapse)}",
            *report_lines(whole),
            "tables: summary.json, rounds.*, agents.*"
            + (", by_model.*, crossplay.*" if whole.get("by_model") else "")
            + ", figures/run.png",
        ]

    def earlier_sweep(self, raw: Mapping[str, Any]) -> Converter | None:
        """The earlier CPR sweep format (no "task" key): ``tasks/cpr/sweep_format.py``."""
        from cooplab.tasks.cpr import sweep_format

        return sweep_format.converter(resolve_params) if sweep_format.claims(dict(raw)) else None

    def analyze_sweep(
        self, cells: list[dict[str, Any]], out: Path, *, analysis_out: Path | None = None
    ) -> dict[str, Any]:
        """``cooplab analyze cpr`` over the finished cells (into ``OUT/analysis`` unless told otherwise)."""
        from cooplab.evals.mixsweep import sweep_tables
        from cooplab.tasks.cpr.analysis import analyze

        dest = Path(analysis_out) if analysis_out is not None else Path(out) / "analysis"
        result = {"analysis": analyze([Path(c["dir"]) for c in cells], dest), "analysis_dir": str(dest)}
        mixed = sweep_tables(cells, dest)  # per-model rows, cross-play and invasions of the cells (when any)
        return {**result, "mix_tables": mixed} if mixed else result

    # --- the run explorer: tasks/cpr/explore.py ---------------------------------------------------
    def explore(self, run: Any, query: Mapping[str, str]) -> list[Any]:
        from cooplab.tasks.cpr.explore import view

        return view(run, query)

    def key_numbers(self, summary: RunSummary[Any]) -> dict[str, Any]:
        from cooplab.tasks.cpr.explore import key_numbers

        return key_numbers(summary.as_json())


def _mix_and_invader(
    final: Mapping[str, Any], config: Config, run: RunInfo, rounds: pd.DataFrame, N: int
) -> dict[str, Any]:
    """A mixed society's per-model outcomes and cross-play (tables ``by_model``, ``crossplay``) and an
    invader's effect (tasks/cpr/mix.py); nothing for a run with neither."""
    from cooplab.tasks.cpr import mix

    out: dict[str, Any] = {}
    invader = config.params.invader.as_dict() if config.params.invader is not None else None
    llm = config.llm.model_dump(mode="json") if config.llm is not None else None
    mixed = config.agents == "llm" and mix.is_mixed(llm, N) and final.get("decisions")
    if not mixed and not invader:
        return out
    agents = cpr_metrics.agents_frame(final)
    if mixed:
        norms = pd.DataFrame(list(final["norm_history"])) if final.get("norm_history") else None
        by_model, cross = mix.per_model(
            rundir.frame(list(final["decisions"])), rounds, agents, norms, mix.models_by_agent(llm, N)
        )
        rundir.write_table(by_model, run.out, "by_model", csv=run.csv)
        rundir.write_table(cross, run.out, "crossplay", csv=run.csv)
        out["by_model"], out["crossplay"] = by_model, cross
    if invader and len(rounds):
        out["invasion"] = mix.invader_effect(rounds, agents, invader, config.params.T)
    return out


TASK = CPRTask()


def _table_or_none(out: Path, stem: str) -> pd.DataFrame | None:
    """A table of the run directory, or None when the run did not write it (no decisions, no norm)."""
    try:
        return rundir.read_table(out, stem)
    except rundir.RunDirError:
        return None
