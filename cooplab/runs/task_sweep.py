"""A sweep of any registered task (diners, game, cpr, a third-party task): a grid of the options
of ``cooplab run TASK`` times seeds, one run directory per cell (docs/scale.md)::

    {"task": "diners", "out": "runs/diners-grid",
     "args": ["--agents", "rule", "--replicates", "20"],
     "grid": {"--pk": ["3:1", "6:1"], "--combination": [1, 2]},
     "seeds": [0, 1, 2], "parallel": 2}

A grid key ``"--set NAME"`` sweeps one parameter of a task's ``--set NAME=VALUE`` option (``{"--set
beta": [0, 10, 20], "--set r": [0.2, 0.6]}``), so several parameters can be swept at once.

Each cell is ``cooplab run TASK ARGS --GRID-OPTION VALUE ... --seed S --out OUT/cells/NAME``:
its config is built and checked by the task's own run command before any cell runs (so a bad
value in any cell is one line naming the cell), then every cell is a job of
:mod:`cooplab.runs.sweeps` and runs on the local or the Ray executor.
"""

from __future__ import annotations

import json
import math
from itertools import product
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cooplab.limits import ConfigError
from cooplab.graphs.task import first_error
from cooplab.runs.sweeps import SweepError, job, run_jobs, slug, table, write_table

#: options a cell sets itself (a config must not give them in "args" or "grid")
_OWN = {"--out", "--seed", "--json", "-q", "--quiet", "--force", "--help", "--csv"}
#: at most this many cells in one sweep
MAX_CELLS = 100_000


class TaskSweep(BaseModel):
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


def load(raw: Any, where: str) -> TaskSweep:
    if not isinstance(raw, dict):
        raise SweepError(f"{where} must be a JSON object (see docs/scale.md)")
    _check_raw(raw, where)
    try:
        cfg = TaskSweep(**raw)
    except ValidationError as exc:
        raise SweepError(f"{where}: {first_error(exc)}") from None
    from cooplab.runs import registry

    if cfg.task not in registry.names():
        raise SweepError(f"{where}: task {cfg.task!r} is not installed; installed tasks: {', '.join(registry.names())}")
    n = len(cfg.seeds) * math.prod(len(v) for v in cfg.grid.values())
    if n > MAX_CELLS:
        raise SweepError(f"{where}: the grid has {n} cells; at most {MAX_CELLS} per sweep (split it)")
    return cfg


def load_file(path: Path) -> TaskSweep | None:
    """The task sweep of a config file, or None when it is a CPR (no "task") or science sweep."""
    try:
        raw = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None  # the CPR loader reports the problem
    if not isinstance(raw, dict) or "task" not in raw or raw.get("task") == "science":
        return None
    return load(raw, f"sweep config {path}")


def _text(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v)


def _label(option: str) -> str:
    """The table column of a grid option: ``--pk`` -> ``pk``, ``--set beta`` -> ``beta``."""
    return option.split(None, 1)[1] if option.startswith("--set ") else option.lstrip("-")


def cells(cfg: TaskSweep) -> list[dict[str, Any]]:
    opts = list(cfg.grid)
    out = []
    for values in product(*(cfg.grid[o] for o in opts)):
        for seed in cfg.seeds:
            labels = {_label(o): v for o, v in zip(opts, values)}
            parts = [f"{k}-{slug(_text(v))}" for k, v in labels.items()] + [f"s{seed}"]
            args = [*cfg.args]
            for o, v in zip(opts, values):
                args += ["--set", f"{o.split(None, 1)[1]}={_text(v)}"] if o.startswith("--set ") else [o, _text(v)]
            out.append({"name": "__".join(parts), "args": args, "seed": seed, "labels": {**labels, "seed": seed}})
    names = [c["name"] for c in out]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise SweepError(f"two cells would share the directory {dup!r}: make the grid values differ in letters or digits")
    return out


def jobs(cfg: TaskSweep, where: str, config_of: Callable[[str, list[str]], dict[str, Any]]) -> list[dict[str, Any]]:
    """Every cell as a job, its config built and checked by ``config_of(task, args)`` (nothing runs).
    This format names cells by command-line options, so the command line hands in its own parser
    (:func:`cooplab.cli.tasks.config_of`); the engine never imports the command line."""
    out = []
    for c in cells(cfg):
        d = Path(cfg.out) / "cells" / c["name"]
        try:
            config = config_of(cfg.task, [*c["args"], "--seed", str(c["seed"]), "--out", str(d), "-q"])
        except ConfigError as exc:
            raise SweepError(f"{where}: cell {c['name']}: {exc}") from None
        out.append(job(d, cfg.task, config, labels=c["labels"], done=("completed", "budget_exhausted")))
    return out


def run_task_sweep(cfg: TaskSweep, jobs: list[dict[str, Any]], **run: Any) -> dict[str, Any]:
    """Run the jobs of ``cfg`` (``run``: executor, address, log, quiet of :func:`run_jobs`) and
    write its table; the result has the cells' outcomes, the table and where it is."""
    res = run_jobs(jobs, parallel=cfg.parallel, noun="cell", **run)
    rows = table(jobs, res, "cell")
    return {**res, "cells": len(jobs), "table": rows, "table_csv": str(write_table(rows, Path(cfg.out)))}
