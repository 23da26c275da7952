"""``cooplab sweep CONFIG``: models x populations x environments x ablations x trials.

Each cell (model, env, population, ablation) is one run directory whose replicate societies
are the trials (they run side by side in one graph invocation). Cells run concurrently
(``parallel``), cells already completed are skipped, interrupted cells are resumed, and the
result feeds ``cooplab analyze cpr``.

Config (JSON)::

    {"out": "runs/sweep", "agents": "llm", "models": ["local"], "envs": ["harsh"],
     "populations": ["mixed"], "ablations": ["full", "osl", "ogd", "neither"],
     "trials": 2, "n_agents": 3, "rounds": 5, "seed": 0, "parallel": 2,
     "llm": {"max_concurrency": 8, "budget": null, "cache": null, "temperature": 0.7, "max_tokens": 64},
     "set": {"beta": 10}}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cooplab.agents.cache import check_cache
from cooplab.agents.models import check_model
from cooplab.agents.settings import LLMSettings
from cooplab.limits import ConfigError
from cooplab.runs.sweeps import SweepError, job, run_jobs, table, write_table
from cooplab.runs.sweeps import slug as _slug


class SweepConfig(BaseModel):
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


def load_config(path: Path) -> SweepConfig:
    import json

    try:
        raw = json.loads(Path(path).read_text())
    except OSError as exc:
        raise SweepError(f"cannot read sweep config {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise SweepError(f"sweep config {path} is not a UTF-8 text file") from None
    except json.JSONDecodeError as exc:
        raise SweepError(f"sweep config {path} is not valid JSON: {exc.msg} at line {exc.lineno}") from None
    if not isinstance(raw, dict):
        raise SweepError(f"sweep config {path} must be a JSON object (see examples/grid-scripted.json)")
    try:
        check_raw(raw, f"sweep config {path}")
    except ConfigError as exc:
        raise SweepError(str(exc)) from None
    try:
        cfg = SweepConfig(**raw)
    except ValidationError as exc:
        e = exc.errors()[0]
        raise SweepError(f"sweep config {path}: {'.'.join(map(str, e['loc']))}: {e['msg']}") from None
    from cooplab.tasks.cpr.params import ABLATIONS, ENVIRONMENTS

    for name, values, allowed in (("envs", cfg.envs, ENVIRONMENTS), ("populations", cfg.populations, ("altruistic", "selfish", "mixed")),
                                  ("ablations", cfg.ablations, ABLATIONS)):
        bad = [v for v in values if v not in allowed]
        if bad or not values:
            raise SweepError(f"sweep config {path}: {name} must be a non-empty list from {', '.join(allowed)}; got {values}")
    if not cfg.models:
        raise SweepError(f"sweep config {path}: models must not be empty")
    check_cells(cfg, f"sweep config {path}")
    return cfg


#: numeric fields of a sweep config -> the CLI rule they follow (cooplab/cli_options.py)
NUMERIC_FIELDS = {"trials": "replicates", "n_agents": "n-agents", "rounds": "rounds", "seed": "seed", "parallel": "parallel"}
#: keys of a sweep config's "llm"
#: what a sweep config's "llm" may set: every LLM setting but the models (the sweep's own field)
LLM_KEYS = set(LLMSettings.model_fields) - {"model", "agent_models"}


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
        LLMSettings.from_file(raw["llm"], f"{where}: llm", allowed=LLM_KEYS)
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


def cells(cfg: SweepConfig) -> list[dict[str, Any]]:
    out = []
    models = cfg.models if cfg.agents == "llm" else ["rule"]
    for model in models:
        for env in cfg.envs:
            for pop in cfg.populations:
                for abl in cfg.ablations:
                    out.append({"model": model, "env": env, "population": pop, "ablation": abl,
                                "dir": Path(cfg.out) / "cells" / f"{_slug(model)}__{env}__{pop}__{abl}"})
    return out


def jobs(cfg: SweepConfig) -> list[dict[str, Any]]:
    """Every cell as a job (cooplab.runs.sweeps): its run directory, task and complete run config."""
    from cooplab.runs.config import RunConfig
    from cooplab.tasks.cpr.task import TASK, resolve_params

    out = []
    for cell in cells(cfg):
        params = resolve_params(cell["env"], cell["ablation"], cfg.n_agents, cfg.rounds, dict(cfg.set))
        llm = LLMSettings.from_file(cfg.llm, "llm", model=cell["model"]) if cfg.agents == "llm" else None
        d: Path = cell["dir"]
        run = {"env": cell["env"], "ablation": cell["ablation"], "population": cell["population"], "replicates": cfg.trials}
        config = RunConfig(task="cpr", agents=cfg.agents, seed=cfg.seed, params={**run, **params.model_dump()}, llm=llm,
                           record={"sweep_cell": d.name}).to_config(TASK)
        out.append(job(d, "cpr", config, labels={k: cell[k] for k in ("model", "env", "population", "ablation")}))
    return out


def run_sweep(cfg: SweepConfig, log: Callable[[str], None] = lambda s: None, *, executor: str = "local", address: str | None = None,
              quiet: bool = True) -> dict[str, Any]:
    todo = jobs(cfg)
    res = run_jobs(todo, parallel=cfg.parallel, noun="cell", executor=executor, address=address, log=log, quiet=quiet)
    rows = table(todo, res, "cell")
    failed = {f["cell"] for f in res["failed"]}
    return {"cells": len(todo), **res, "table": rows, "table_csv": str(write_table(rows, Path(cfg.out))),
            "run_dirs": [j["dir"] for j in todo if Path(j["dir"]).name not in failed]}
