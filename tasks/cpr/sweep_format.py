"""CPR's earlier sweep-file format (before the one grid format of :mod:`cooplab.runs.grid`): models x
envs x populations x ablations, ``trials`` societies per cell, and no ``"task"`` key. The engine reaches
it only through the task's ``earlier_sweep`` hook (:meth:`cooplab.graphs.task.Task.earlier_sweep`): each
file is checked as before (the same one-line messages) and turned into the grid format's JSON object.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cooplab.agents.cache import check_cache
from cooplab.agents.models.factory import check_model
from cooplab.agents.settings import sweep_llm_block
from cooplab.graphs.formats import Converter, grid_sweep, read_earlier
from cooplab.limits import ConfigError

from .params import ABLATIONS, ENVIRONMENTS, ParamError

NAME = "CPR sweep"


def converter(resolve: Callable[..., Any]) -> Converter:
    """This format's converter, as the task's ``earlier_sweep`` hook registers it (``resolve``: the
    task's :func:`~cooplab.tasks.cpr.task.resolve_params`, which checks each cell's parameters)."""
    return Converter(
        "sweep file", NAME, "grid sweep", lambda raw, where: convert(raw, where, resolve=resolve), owner="cpr"
    )


def claims(raw: dict[str, Any]) -> bool:
    """A sweep file's object is of this format: it names no task (the grid format and the others do)."""
    return "task" not in raw


def convert(raw: dict[str, Any], where: str, *, resolve: Callable[..., Any]) -> dict[str, Any]:
    """The file as a grid sweep's JSON object (checked as before; one-line ConfigError). ``resolve``:
    the task's :func:`~cooplab.tasks.cpr.task.resolve_params`, which checks each cell's parameters."""
    return from_cpr(load_cpr(raw, where, resolve=resolve))


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


def load_cpr(raw: Any, where: str, *, resolve: Callable[..., Any]) -> SweepConfig:
    """An earlier CPR sweep file, checked as it always was (one-line ConfigError)."""
    cfg = read_earlier(SweepConfig, raw, where, see="examples/grid-scripted.json", check=check_raw)
    for name, values, allowed in (
        ("envs", cfg.envs, ENVIRONMENTS),
        ("populations", cfg.populations, ("altruistic", "selfish", "mixed")),
        ("ablations", cfg.ablations, ABLATIONS),
    ):
        bad = [v for v in values if v not in allowed]
        if bad or not values:
            raise ConfigError(f"{where}: {name} must be a non-empty list from {', '.join(allowed)}; got {values}")
    if not cfg.models:
        raise ConfigError(f"{where}: models must not be empty")
    check_cells(cfg, where, resolve)
    return cfg


#: numeric fields of an earlier CPR sweep file -> the rule they follow (cooplab/limits.py)
NUMERIC_FIELDS = {
    "trials": "replicates",
    "n_agents": "n-agents",
    "rounds": "rounds",
    "seed": "seed",
    "parallel": "parallel",
}


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
        sweep_llm_block(raw["llm"], where)
    if "set" in raw and not isinstance(raw["set"], dict):
        raise ConfigError(
            f"{where}: set must be a JSON object of parameters (see 'cooplab params cpr'), got {raw['set']!r}"
        )


def check_cells(cfg: SweepConfig, where: str, resolve: Callable[..., Any]) -> None:
    """Everything a cell would refuse, refused before any cell runs: parameters, sizes, models, cache."""
    import cooplab.limits as co

    try:
        for env in cfg.envs:
            for abl in cfg.ablations:
                params = resolve(env, abl, cfg.n_agents, cfg.rounds, dict(cfg.set))
        co.check_size(cfg.trials, params.N, params.T, names=("trials", "n_agents", "rounds"))
        if cfg.agents == "llm":
            for model in cfg.models:
                check_model(model, cfg.llm.get("base_url"), f"{where}: models")
            cache = cfg.llm.get("cache")
            if cache != "off":
                from cooplab.agents.cache import default_cache_path

                check_cache(cache or default_cache_path(), f"{where}: llm.cache")
    except ParamError as exc:
        raise ConfigError(f"{where}: set: {exc}") from None
    except co.ConfigError as exc:
        raise ConfigError(f"{where}: {exc}" if not str(exc).startswith(where) else str(exc)) from None


def from_cpr(cfg: SweepConfig) -> dict[str, Any]:
    fixed: dict[str, Any] = {
        "agents": cfg.agents,
        "n_agents": cfg.n_agents,
        "rounds": cfg.rounds,
        "replicates": cfg.trials,
    }
    if cfg.agents == "llm":
        fixed.update(cfg.llm)
    grid = {"env": list(cfg.envs), "population": list(cfg.populations), "ablation": list(cfg.ablations)}
    models = list(cfg.models) if cfg.agents == "llm" else None
    return grid_sweep("cpr", cfg.out, fixed, grid, [cfg.seed], cfg.parallel, set_=cfg.set, models=models)
