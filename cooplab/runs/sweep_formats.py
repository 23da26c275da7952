"""The sweep formats before the one grid format (:mod:`cooplab.runs.grid`), read and converted.

- **args** (``"task"`` with ``"args"`` and a grid of ``--option`` keys): a task's command-line
  options times seeds (this module);
- a task's own earlier format, reached through the task registry and the task's
  :meth:`~cooplab.graphs.task.Task.earlier_sweep` hook (CPR's: ``tasks/cpr/sweep_format.py``, no
  ``"task"`` key; science's: ``tasks/science/sweep_format.py``, ``models``, ``science_tasks``,
  ``budgets`` ...).

Each is checked as before (the same one-line messages) and turned into the grid format's JSON
object; :func:`cooplab.runs.grid.load_file` then reads it like any other and says, in one line,
that it converted the file. Their paths stay relative to the current directory, as they were.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cooplab.limits import ConfigError, explain
from cooplab.runs.sweeps import SweepError

ARGS = "command-line options"
#: a task's earlier format: its name for the notice and its converter ``(raw, where) -> grid JSON``
Earlier = tuple[str, Callable[[dict[str, Any], str], dict[str, Any]]]


def kind_of(raw: Any) -> Literal["grid", "args"] | Earlier:
    """Which format a sweep file's object is in: "grid", "args", or a task's earlier format (what its
    :meth:`~cooplab.graphs.task.Task.earlier_sweep` hook returns: the task the file names is asked, or
    every installed task when it names none)."""
    if not isinstance(raw, dict) or "fixed" in raw or "analysis" in raw:
        return "grid"
    grid = raw.get("grid")
    if "task" in raw and ("args" in raw or (isinstance(grid, dict) and any(k.startswith("-") for k in grid))):
        return "args"
    from cooplab.runs import registry

    named = raw.get("task")
    for name in [named] if isinstance(named, str) else registry.names():
        task = registry.find(name)
        found = task.earlier_sweep(raw) if task is not None else None
        if found is not None:
            return found
    return "grid"


def format_name(kind: Literal["args"] | Earlier) -> str:
    """The name of a format for the notice ("CPR sweep", "command-line options")."""
    return ARGS if kind == "args" else kind[0]


def convert(kind: Literal["args"] | Earlier, raw: dict[str, Any], where: str, *,
            convert_args: Callable[[str, list[str]], dict[str, Any]] | None) -> dict[str, Any]:
    """A file of an earlier format as a grid sweep's JSON object (checked as before; one-line ConfigError)."""
    try:
        if kind == "args":
            return _from_args(load_args(raw, where), where, convert_args)
        return kind[1](raw, where)
    except SweepError as exc:
        raise ConfigError(str(exc)) from None


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
    parallel: int = Field(default=2, ge=1, le=64)


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
