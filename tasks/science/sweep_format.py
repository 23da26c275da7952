"""The science task's earlier sweep-file format (before the one grid format of :mod:`cooplab.runs.grid`):
``"task": "science"`` with ``models``, ``science_tasks``, ``budgets`` ... and ``simulations`` runs per
condition. The engine reaches it only through the task's ``earlier_sweep`` hook
(:meth:`cooplab.graphs.task.Task.earlier_sweep`): each file is checked as before (the same one-line
messages) and turned into the grid format's JSON object.
"""

from __future__ import annotations

from itertools import product
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cooplab.agents.models.factory import check_model
from cooplab.agents.models.spec import parse_model_spec
from cooplab.agents.prices import run_prices
from cooplab.agents.settings import sweep_llm_block
from cooplab.graphs.formats import Converter, grid_sweep, read_earlier
from cooplab.limits import ConfigError, explain

from .params import ScienceParams

NAME = "science sweep"
#: keys only the earlier science format has
KEYS = {
    "models",
    "team",
    "science_tasks",
    "budgets",
    "visibilities",
    "team_sizes",
    "prompts",
    "simulations",
    "seed",
    "sandbox_backend",
    "sandbox_timeout",
    "llm",
    "set",
    "judge",
}


def claims(raw: dict[str, Any]) -> bool:
    """A sweep file's object is of this format: a science task without the grid format's keys."""
    return raw.get("task") == "science" and "grid" not in raw and "seeds" not in raw and bool(set(raw) & KEYS)


def converter() -> Converter:
    """This format's converter, as the task's ``earlier_sweep`` hook registers it."""
    return Converter("sweep file", NAME, "grid sweep", convert, owner="science")


def convert(raw: dict[str, Any], where: str) -> dict[str, Any]:
    """The file as a grid sweep's JSON object (checked as before; one-line ConfigError)."""
    return from_science(load_science(raw, where))


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


def load_science(raw: dict[str, Any], where: str) -> ScienceSweep:
    import cooplab.limits as co

    for key in ("models", "science_tasks", "visibilities", "prompts"):
        if key in raw and (
            not isinstance(raw[key], list) or not raw[key] or not all(isinstance(x, str) for x in raw[key])
        ):
            raise ConfigError(f"{where}: {key} must be a non-empty list of strings, got {raw[key]!r}")
    for key, rule in (("simulations", "replicates"), ("seed", "seed"), ("parallel", "parallel")):
        if key in raw:
            try:
                co.check(f"{where}: {key}", raw[key], rule)
            except ConfigError as exc:
                raise ConfigError(str(exc)) from None
    for b in raw.get("budgets", []) if isinstance(raw.get("budgets", []), list) else [None, "x"]:
        if b is not None:
            try:
                co.check(f"{where}: budgets", b, "budget")
            except ConfigError as exc:
                raise ConfigError(str(exc)) from None
    if "llm" in raw:
        try:
            sweep_llm_block(raw["llm"], where)
        except ConfigError as exc:
            raise ConfigError(str(exc)) from None
    judge = raw.get("judge")
    if judge is not None and (
        not isinstance(judge, dict)
        or not set(judge) <= {"model", "samples", "budget"}
        or not isinstance(judge.get("model"), str)
    ):
        raise ConfigError(
            f'{where}: judge must be {{"model": SPEC, "samples": 1..20, "budget": USD}} (samples and budget '
            f"optional), got {str(judge)[:200]!r}"
        )
    cfg = read_earlier(ScienceSweep, raw, where, see="docs/science.md")
    try:  # every condition's parameters, before anything runs
        for t, size, vis, prompt in product(cfg.science_tasks, cfg.team_sizes, cfg.visibilities, cfg.prompts):
            ScienceParams(
                **{**cfg.set, "task": t, "team": cfg.team, "team_size": size, "visibility": vis, "prompt": prompt}
            )
    except ValidationError as exc:
        raise ConfigError(f"{where}: {explain(exc)}") from None
    if cfg.team == "llm":
        for m in cfg.models:
            try:
                check_model(m, cfg.llm.get("base_url"), f"{where}: models")
                budget = next(
                    (b for b in cfg.budgets if b is not None), None
                )  # a capped condition needs the model's price
                run_prices(
                    {"m": parse_model_spec(m, base_url=cfg.llm.get("base_url"))},
                    cfg.llm.get("price_in"),
                    cfg.llm.get("price_out"),
                    budget,
                    f"{where}: budgets",
                )
            except ConfigError as exc:
                raise ConfigError(str(exc)) from None
    return cfg


def from_science(cfg: ScienceSweep) -> dict[str, Any]:
    fixed: dict[str, Any] = {
        "team": cfg.team,
        "sandbox_backend": cfg.sandbox_backend,
        "sandbox_timeout": cfg.sandbox_timeout,
        **cfg.llm,
    }  # no max_tokens given: the science task's own (build_config)
    if cfg.set:
        fixed["set"] = dict(cfg.set)  # before the judge's keywords, as it always was
    if cfg.judge is not None:  # the task's own options: checked with each cell (samples 1..20, the budget's rule)
        fixed.update(
            {
                "judge": cfg.judge["model"],
                "judge_samples": cfg.judge.get("samples", 3),
                "judge_budget": cfg.judge.get("budget"),
            }
        )
    grid = {
        "task": list(cfg.science_tasks),
        "budget": list(cfg.budgets),
        "visibility": list(cfg.visibilities),
        "team_size": list(cfg.team_sizes),
        "prompt": list(cfg.prompts),
    }
    seeds = list(range(cfg.seed, cfg.seed + cfg.simulations))
    models = list(cfg.models) if cfg.team == "llm" else None
    return grid_sweep("science", cfg.out, fixed, grid, seeds, cfg.parallel, models=models)
