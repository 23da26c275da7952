"""The sweep formats before the one grid format (:mod:`cooplab.runs.grid`), read and converted.

- **cpr** (no ``"task"``): models x envs x populations x ablations, ``trials`` societies per cell;
- **science** (``"task": "science"`` with ``models``, ``science_tasks``, ``budgets`` ...):
  science conditions, ``simulations`` runs each;
- **args** (``"task"`` with ``"args"`` and a grid of ``--option`` keys): a task's command-line
  options times seeds.

Each is checked as before (the same one-line messages) and turned into the grid format's JSON
object; :func:`cooplab.runs.grid.load_file` then reads it like any other and says, in one line,
that it converted the file. Their paths stay relative to the current directory, as they were.
"""

from __future__ import annotations

import math
from itertools import product
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cooplab.agents.cache import check_cache
from cooplab.agents.models.factory import check_model
from cooplab.agents.models.spec import parse_model_spec
from cooplab.agents.prices import run_prices
from cooplab.agents.settings import LLMSettings
from cooplab.limits import ConfigError, explain
from cooplab.runs.sweeps import SweepError

FORMAT_NAMES = {"cpr": "CPR sweep", "science": "science sweep", "args": "command-line options"}
#: keys only the earlier science format has
_SCIENCE_KEYS = {"models", "team", "science_tasks", "budgets", "visibilities", "team_sizes", "prompts", "simulations", "seed",
                 "sandbox_backend", "sandbox_timeout", "llm", "set", "judge"}


def kind_of(raw: Any) -> str:
    """Which format a sweep file's object is in: grid, cpr, science or args."""
    if not isinstance(raw, dict) or "fixed" in raw or "analysis" in raw:
        return "grid"
    if "task" not in raw:
        return "cpr"
    grid = raw.get("grid")
    if "args" in raw or (isinstance(grid, dict) and any(k.startswith("-") for k in grid)):
        return "args"
    if raw.get("task") == "science" and "grid" not in raw and "seeds" not in raw and set(raw) & _SCIENCE_KEYS:
        return "science"
    return "grid"


def convert(kind: str, raw: dict[str, Any], where: str, *, convert_args: Callable[[str, list[str]], dict[str, Any]] | None) -> dict[str, Any]:
    """A file of an earlier format as a grid sweep's JSON object (checked as before; one-line ConfigError)."""
    try:
        if kind == "cpr":
            return _from_cpr(load_cpr(raw, where))
        if kind == "science":
            return _from_science(load_science(raw, where))
        return _from_args(load_args(raw, where), where, convert_args)
    except SweepError as exc:
        raise ConfigError(str(exc)) from None


# --- cpr ---------------------------------------------------------------------------------------
class SweepConfig(BaseModel):
    """An earlier CPR sweep file."""

    model_config = ConfigDict(extra="forbid")
    out: str
    agents: str = Field("llm", pattern="^(llm|rule)$")
    models: list[str] = ["local"]
    envs: list[str] = ["harsh"]
    populations: list[str] = ["mixed"]
    ablations: list[str] = ["full"]
    trials: int = Field(2, ge=1)
    n_agents: int = Field(3, ge=2)
    rounds: int = Field(5, ge=1)
    seed: int = 0
    parallel: int = Field(2, ge=1)
    llm: dict[str, Any] = {}
    set: dict[str, Any] = {}


def load_cpr(raw: Any, where: str) -> SweepConfig:
    """An earlier CPR sweep file, checked as it always was (one-line SweepError)."""
    if not isinstance(raw, dict):
        raise SweepError(f"{where} must be a JSON object (see examples/grid-scripted.json)")
    try:
        check_raw(raw, where)
    except ConfigError as exc:
        raise SweepError(str(exc)) from None
    try:
        cfg = SweepConfig(**raw)
    except ValidationError as exc:
        e = exc.errors()[0]
        raise SweepError(f"{where}: {'.'.join(map(str, e['loc']))}: {e['msg']}") from None
    from cooplab.tasks.cpr.params import ABLATIONS, ENVIRONMENTS

    for name, values, allowed in (("envs", cfg.envs, ENVIRONMENTS), ("populations", cfg.populations, ("altruistic", "selfish", "mixed")),
                                  ("ablations", cfg.ablations, ABLATIONS)):
        bad = [v for v in values if v not in allowed]
        if bad or not values:
            raise SweepError(f"{where}: {name} must be a non-empty list from {', '.join(allowed)}; got {values}")
    if not cfg.models:
        raise SweepError(f"{where}: models must not be empty")
    check_cells(cfg, where)
    return cfg


#: numeric fields of an earlier CPR sweep file -> the rule they follow (cooplab/limits.py)
NUMERIC_FIELDS = {"trials": "replicates", "n_agents": "n-agents", "rounds": "rounds", "seed": "seed", "parallel": "parallel"}
#: what an earlier CPR sweep file's "llm" may set: every LLM setting but the models (the sweep's own field)
LLM_KEYS = set(LLMSettings.model_fields) - {"model", "agent_models"}


def llm_block(raw: Any, where: str) -> LLMSettings:
    """An earlier sweep file's ``llm`` object: the LLM settings but the models (the sweep's own field),
    each checked by its field's rule (one line naming ``{where}: llm.FIELD``)."""
    from cooplab.limits import in_file, validate

    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: llm must be a JSON object, got {raw!r}")
    other = sorted(set(raw) - LLM_KEYS)
    if other:
        raise ConfigError(f"{where}: llm: unknown field {other[0]!r}; use {', '.join(sorted(LLM_KEYS))}")
    return validate(LLMSettings, raw, in_file(where, "llm"), strict=False)


def check_raw(raw: dict[str, Any], where: str) -> None:
    """Types and rules of every field, before pydantic (which would coerce true to 1 and "3" to 3)."""
    import cooplab.limits as co

    for key, rule in NUMERIC_FIELDS.items():
        if key in raw:
            co.check(f"{where}: {key}", raw[key], rule)
    for key in ("out", "agents"):
        if key in raw and not isinstance(raw[key], str):
            raise ConfigError(f"{where}: {key} must be a string, got {raw[key]!r}")
    for key in ("models", "envs", "populations", "ablations"):
        if key in raw and (not isinstance(raw[key], list) or not all(isinstance(x, str) for x in raw[key])):
            raise ConfigError(f"{where}: {key} must be a list of strings, got {raw[key]!r}")
    if "llm" in raw:
        llm_block(raw["llm"], where)
    if "set" in raw and not isinstance(raw["set"], dict):
        raise ConfigError(f"{where}: set must be a JSON object of parameters (see 'cooplab params cpr'), got {raw['set']!r}")


def check_cells(cfg: SweepConfig, where: str) -> None:
    """Everything a cell would refuse, refused before any cell runs: parameters, sizes, models, cache."""
    import cooplab.limits as co
    from cooplab.tasks.cpr.params import ParamError
    from cooplab.tasks.cpr.task import resolve_params

    try:
        for env in cfg.envs:
            for abl in cfg.ablations:
                params = resolve_params(env, abl, cfg.n_agents, cfg.rounds, dict(cfg.set))
        co.check_size(cfg.trials, params.N, params.T, names=("trials", "n_agents", "rounds"))
        if cfg.agents == "llm":
            for model in cfg.models:
                check_model(model, cfg.llm.get("base_url"), f"{where}: models")
            cache = cfg.llm.get("cache")
            if cache != "off":
                from cooplab.agents.cache import default_cache_path

                check_cache(cache or default_cache_path(), f"{where}: llm.cache")
    except ParamError as exc:
        raise SweepError(f"{where}: set: {exc}") from None
    except co.ConfigError as exc:
        raise SweepError(f"{where}: {exc}" if not str(exc).startswith(where) else str(exc)) from None


def _from_cpr(cfg: SweepConfig) -> dict[str, Any]:
    fixed: dict[str, Any] = {"agents": cfg.agents, "n_agents": cfg.n_agents, "rounds": cfg.rounds, "replicates": cfg.trials}
    if cfg.set:
        fixed["set"] = dict(cfg.set)
    grid: dict[str, list[Any]] = {}
    if cfg.agents == "llm":
        fixed.update(cfg.llm)
        grid["model"] = list(cfg.models)
    grid.update(env=list(cfg.envs), population=list(cfg.populations), ablation=list(cfg.ablations))
    return {"task": "cpr", "out": cfg.out, "fixed": fixed, "grid": grid, "seeds": [cfg.seed], "parallel": cfg.parallel}


# --- science -----------------------------------------------------------------------------------
class ScienceSweep(BaseModel):
    """An earlier science sweep file."""

    model_config = ConfigDict(extra="forbid")
    task: str = Field("science", pattern="^science$")
    out: str
    models: list[str] = ["local"]
    team: str = Field("llm", pattern="^(llm|oracle|garbage)$")
    science_tasks: list[str] = ["ecology"]
    budgets: list[float | None] = [1.0]
    visibilities: list[str] = ["full"]
    team_sizes: list[int] = [2]
    prompts: list[str] = ["standard"]
    simulations: int = Field(1, ge=1, le=1000)
    seed: int = Field(0, ge=0)
    parallel: int = Field(1, ge=1, le=64)
    sandbox_backend: str = Field("docker", pattern="^(docker|local)$")
    sandbox_timeout: float = Field(30.0, gt=0, le=600, allow_inf_nan=False)
    llm: dict[str, Any] = {}
    set: dict[str, Any] = {}
    judge: dict[str, Any] | None = None  # {"model": SPEC, "samples": K, "budget": USD}: every run is also judged


#: what a sweep config's "llm" may set: every LLM setting but the models (the sweep's own field) and the budget (per condition)
LLM_KEYS = set(LLMSettings.model_fields) - {"model", "agent_models", "budget"}


def load_science(raw: dict[str, Any], where: str) -> ScienceSweep:
    import cooplab.limits as co
    from cooplab.tasks.science.params import ScienceParams

    for key in ("models", "science_tasks", "visibilities", "prompts"):
        if key in raw and (not isinstance(raw[key], list) or not raw[key] or not all(isinstance(x, str) for x in raw[key])):
            raise SweepError(f"{where}: {key} must be a non-empty list of strings, got {raw[key]!r}")
    for key, rule in (("simulations", "replicates"), ("seed", "seed"), ("parallel", "parallel")):
        if key in raw:
            try:
                co.check(f"{where}: {key}", raw[key], rule)
            except ConfigError as exc:
                raise SweepError(str(exc)) from None
    for b in raw.get("budgets", []) if isinstance(raw.get("budgets", []), list) else [None, "x"]:
        if b is not None:
            try:
                co.check(f"{where}: budgets", b, "budget")
            except ConfigError as exc:
                raise SweepError(str(exc)) from None
    if "llm" in raw:
        try:
            llm_block(raw["llm"], where)
        except ConfigError as exc:
            raise SweepError(str(exc)) from None
    judge = raw.get("judge")
    if judge is not None and (not isinstance(judge, dict) or not set(judge) <= {"model", "samples", "budget"}
                              or not isinstance(judge.get("model"), str)):
        raise SweepError(f'{where}: judge must be {{"model": SPEC, "samples": 1..20, "budget": USD}} (samples and budget '
                         f"optional), got {str(judge)[:200]!r}")
    try:
        cfg = ScienceSweep(**raw)
    except ValidationError as exc:
        raise SweepError(f"{where}: {explain(exc)}") from None
    try:  # every condition's parameters, before anything runs
        for t, size, vis, prompt in product(cfg.science_tasks, cfg.team_sizes, cfg.visibilities, cfg.prompts):
            ScienceParams(**{**cfg.set, "task": t, "team": cfg.team, "team_size": size, "visibility": vis, "prompt": prompt})
    except ValidationError as exc:
        raise SweepError(f"{where}: {explain(exc)}") from None
    if cfg.team == "llm":
        for m in cfg.models:
            try:
                check_model(m, cfg.llm.get("base_url"), f"{where}: models")
                budget = next((b for b in cfg.budgets if b is not None), None)  # a capped condition needs the model's price
                run_prices({"m": parse_model_spec(m, base_url=cfg.llm.get("base_url"))}, cfg.llm.get("price_in"),
                           cfg.llm.get("price_out"), budget, f"{where}: budgets")
            except ConfigError as exc:
                raise SweepError(str(exc)) from None
    return cfg


def _from_science(cfg: ScienceSweep) -> dict[str, Any]:
    fixed: dict[str, Any] = {"team": cfg.team, "sandbox_backend": cfg.sandbox_backend, "sandbox_timeout": cfg.sandbox_timeout,
                             **cfg.llm}  # no max_tokens given: the science task's own (build_config)
    if cfg.set:
        fixed["set"] = dict(cfg.set)
    if cfg.judge is not None:  # the task's own options: checked with each cell (samples 1..20, the budget's rule)
        fixed.update({"judge": cfg.judge["model"], "judge_samples": cfg.judge.get("samples", 3), "judge_budget": cfg.judge.get("budget")})
    grid: dict[str, list[Any]] = {}
    if cfg.team == "llm":
        grid["model"] = list(cfg.models)
    grid.update(task=list(cfg.science_tasks), budget=list(cfg.budgets), visibility=list(cfg.visibilities),
                team_size=list(cfg.team_sizes), prompt=list(cfg.prompts))
    return {"task": "science", "out": cfg.out, "fixed": fixed, "grid": grid,
            "seeds": list(range(cfg.seed, cfg.seed + cfg.simulations)), "parallel": cfg.parallel}


# --- args --------------------------------------------------------------------------------------
#: options a cell sets itself (a config must not give them in "args" or "grid")
_OWN = {"--out", "--seed", "--json", "-q", "--quiet", "--force", "--help", "--csv"}


class TaskSweep(BaseModel):
    """An earlier sweep file of a task's command-line options."""

    model_config = ConfigDict(extra="forbid")
    task: str
    out: str
    args: list[str] = []
    grid: dict[str, list[Any]] = {}
    seeds: list[int] = Field(default_factory=lambda: [0])
    parallel: int = Field(2, ge=1, le=64)


def _check_raw(raw: dict[str, Any], where: str) -> None:
    """Types before pydantic (which would turn true into 1 and "3" into 3)."""
    for key in ("task", "out"):
        if key in raw and (not isinstance(raw[key], str) or not raw[key].strip()):
            raise SweepError(f"{where}: {key} must be a non-empty string, got {raw[key]!r}")
    if "args" in raw and (not isinstance(raw["args"], list) or not all(isinstance(a, str) for a in raw["args"])):
        raise SweepError(f'{where}: args must be a list of strings (options of \'cooplab run TASK\'), got {raw["args"]!r}')
    grid = raw.get("grid", {})
    if not isinstance(grid, dict):
        raise SweepError(f'{where}: grid must be an object {{"--option": [values, ...]}}, got {grid!r}')
    for opt, values in grid.items():
        if not opt.startswith("-") or (" " in opt.strip() and not (opt.startswith("--set ") and len(opt.split()) == 2)):
            raise SweepError(f"{where}: grid keys are options of 'cooplab run TASK' such as \"--pk\", or \"--set NAME\"; got {opt!r}")
        if not isinstance(values, list) or not values:
            raise SweepError(f"{where}: grid {opt} must be a non-empty list of values, got {values!r}")
        for v in values:
            if isinstance(v, bool) or not isinstance(v, str | int | float) or (isinstance(v, float) and not math.isfinite(v)):
                raise SweepError(f"{where}: grid {opt}: every value must be a string or a finite number, got {v!r}")
    seeds = raw.get("seeds", [0])
    if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
        raise SweepError(f"{where}: seeds must be a non-empty list of integers, got {seeds!r}")
    import cooplab.limits as co

    try:
        for s in seeds:
            co.check(f"{where}: seeds", s, "seed")
        if "parallel" in raw:
            co.check(f"{where}: parallel", raw["parallel"], "parallel")
    except ConfigError as exc:
        raise SweepError(str(exc)) from None
    if len(set(seeds)) != len(seeds):
        raise SweepError(f"{where}: seeds has duplicates: {seeds}")
    given = [a.split("=", 1)[0] for a in raw.get("args", []) if isinstance(a, str)] + list(grid)
    own = sorted(set(given) & _OWN)
    if own:
        raise SweepError(f"{where}: {', '.join(own)} is set by the sweep for each cell; remove it from args/grid (use \"seeds\" and \"out\")")


def load_args(raw: Any, where: str) -> TaskSweep:
    if not isinstance(raw, dict):
        raise SweepError(f"{where} must be a JSON object (see docs/scale.md)")
    _check_raw(raw, where)
    try:
        cfg = TaskSweep(**raw)
    except ValidationError as exc:
        raise SweepError(f"{where}: {explain(exc)}") from None
    return cfg  # the task and the number of cells are checked on the converted grid (grid.load)


def _from_args(cfg: TaskSweep, where: str, convert_args: Callable[[str, list[str]], dict[str, Any]] | None) -> dict[str, Any]:
    if convert_args is None:
        raise ConfigError(f"{where} names the options of 'cooplab run {cfg.task}' (\"args\", \"--option\" grid keys): run it with "
                          f"'cooplab sweep', or write the keywords: {{\"task\", \"out\", \"fixed\", \"grid\", \"seeds\"}} (docs/scale.md)")
    fixed = convert_args(cfg.task, list(cfg.args))
    grid: dict[str, list[Any]] = {}
    for option, values in cfg.grid.items():
        if option.startswith("--set "):
            grid["set." + option.split(None, 1)[1]] = list(values)
            continue
        keys: list[str] = []
        converted = []
        for v in values:
            kw = convert_args(cfg.task, [option, v if isinstance(v, str) else str(v)])
            keys = list(kw)
            converted.append(kw[keys[0]] if keys else v)
        if len(keys) != 1:
            raise ConfigError(f"{where}: grid {option} is not one option of 'cooplab run {cfg.task}'")
        grid[keys[0]] = converted
    return {"task": cfg.task, "out": cfg.out, "fixed": fixed, "grid": grid, "seeds": list(cfg.seeds), "parallel": cfg.parallel}
