"""One sweep format for every task: a grid over the keywords of :func:`cooplab.run`, times seeds.

A sweep file (JSON) and :func:`cooplab.sweep` in Python say the same things::

    {"task": "cpr", "out": "../runs/grid",
     "fixed": {"agents": "llm", "n_agents": 4, "rounds": 12, "replicates": 4, "cache": "off"},
     "grid": {"model": ["scripted:scripted/cautious.json", "scripted:scripted/greedy.json"],
              "env": ["harsh", "rich"], "set.beta": [0, 10]},
     "seeds": [0, 1], "parallel": 2}

``fixed`` and ``grid`` take any keyword of :func:`cooplab.run`: who decides, the LLM and sandbox
settings, the task's own options (``cooplab run TASK --help``); a grid key ``set.NAME`` sweeps one
parameter of the task's ``set`` option. Every cell is one run directory ``OUT/cells/NAME``
(``NAME`` from its grid values and seed), its configuration built and checked by
:class:`~cooplab.runs.config.RunConfig` before any cell runs, so a bad value anywhere is one line
naming the cell. Paths in a file (``out``, ``scripted:FILE`` models and players, ``cache``,
``dataset``, ``task_file``, ``truth``) are relative to the file's folder, so a sweep file runs
from any directory. After the cells, the task's :meth:`~cooplab.graphs.task.Task.analyze_sweep`
(CPR: ``cooplab analyze cpr``; science: ``scores.csv`` and ``conditions.csv``) runs on the
finished ones unless ``"analysis": false``. ``budget`` (a run keyword) caps each cell;
``"sweep_budget": USD`` caps what all cells spend together (:class:`~cooplab.runs.sweeps.SweepBudget`).

Every many-run job of a world goes through this runner: a game profile (``cooplab profile``,
:mod:`cooplab.tasks.games.profiles`) is a sweep of one cell per game, run in turn (``in_turn``),
its manifest of kind ``profile``, its files written by the game task's ``analyze_sweep``; a
science bench (``cooplab bench science``, :mod:`cooplab.tasks.science.bench`) is a sweep of one
cell per item (``cells/item-ID__sSEED``), its manifest of kind ``bench``, its results, summary
and report written by the science task's ``analyze_sweep``. The finished cells handed to
``analyze_sweep`` say what this invocation did with each (``step``: "ran", "resumed", "skipped").

Files in the three earlier formats (CPR's models x envs x populations x ablations, science's
conditions, a task's command-line ``args``) are converted to this one with a one-line notice
(:mod:`cooplab.runs.migrate`, which also upgrades run folders: ``cooplab migrate``).
"""

from __future__ import annotations

import json
import math
import os
from itertools import product
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cooplab.graphs.formats import slug
from cooplab.graphs.runfiles import ManifestKind
from cooplab.limits import ConfigError, check_seeds, explain, parse_json, show
from cooplab.runs.sweeps import SweepBudget, job, run_jobs, table, write_manifest, write_table

#: at most this many cells in one sweep
MAX_CELLS = 100_000
#: keywords a cell sets itself
_OWN = {"out", "seed", "force", "quiet"}
#: keywords whose values are files (relative to a sweep file's folder)
PATH_KEYWORDS = ("cache", "dataset", "task_file", "truth")
#: keywords whose values are model specs (``scripted:FILE`` is a file)
SPEC_KEYWORDS = ("model", "players", "judge", "agent_model", "agent_models", "model_mix")


class GridSweep(BaseModel):
    """A sweep: ``task``, ``out``, the keywords every cell shares (``fixed``), the grid (keyword ->
    values), the ``seeds`` every grid point runs with, how many cells run at once (``parallel``),
    whether the task's analysis runs at the end (``analysis``) and the cap in USD on what all
    cells spend together (``sweep_budget``; a cell's own cap is the run keyword ``budget``)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    task: str
    out: str
    fixed: dict[str, Any] = Field(default_factory=dict)
    grid: dict[str, list[Any]] = Field(default_factory=dict)
    seeds: list[int] = Field(default_factory=lambda: [0])
    parallel: int = 1
    analysis: bool = True
    sweep_budget: float | None = None
    sample: dict[str, Any] | None = None


class Sample(BaseModel):
    """A weighted draw of grid points instead of every one: ``points`` of them, drawn without
    replacement with the generator seeded by ``seed``; a point's weight is the product of its
    values' ``weights`` (``{"keyword": {"value": weight}}``, the value as text; 1 where none is given)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    points: int
    seed: int = 0
    weights: dict[str, dict[str, float]] = Field(default_factory=dict)


def _check_value(where: str, v: Any, depth: int = 0) -> None:
    if isinstance(v, float) and not math.isfinite(v):
        raise ConfigError(f"{where}: values must be finite, got {v}")
    if depth > 4:
        raise ConfigError(f"{where}: values nest too deep")
    if isinstance(v, list):
        for x in v:
            _check_value(where, x, depth + 1)
    elif isinstance(v, dict):
        for x in v.values():
            _check_value(where, x, depth + 1)
    elif not isinstance(v, (str, int, float, bool, type(None))):
        raise ConfigError(f"{where}: values must be JSON values, got {show(v)}")


def load(raw: Any, where: str, *, base: Path | None = None) -> GridSweep:
    """A sweep from its JSON object, checked (one-line ConfigError); ``base``: the folder relative
    paths are resolved against (a sweep file's folder; None: leave them as they are)."""
    from cooplab.limits import check
    from cooplab.runs import registry

    if not isinstance(raw, dict):
        raise ConfigError(f"{where} must be a JSON object (see docs/scale.md)")
    for key in ("task", "out"):
        if key in raw and (not isinstance(raw[key], str) or not raw[key].strip()):
            raise ConfigError(f"{where}: {key} must be a non-empty string, got {show(raw[key])}")
    if not isinstance(raw.get("fixed", {}), dict):
        raise ConfigError(
            f'{where}: fixed must be an object {{"keyword": value}} of cooplab.run keywords, got {show(raw["fixed"])}'
        )
    grid = raw.get("grid", {})
    if not isinstance(grid, dict):
        raise ConfigError(f'{where}: grid must be an object {{"keyword": [values, ...]}}, got {show(grid)}')
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            raise ConfigError(f"{where}: grid {key} must be a non-empty list of values, got {show(values)}")
        _check_value(f"{where}: grid {key}", values)
    _check_value(f"{where}: fixed", raw.get("fixed", {}))
    if "seeds" not in raw or raw["seeds"] is None:  # the task's simulations per condition
        task_seeds = registry.get(raw["task"]).sweep_seeds if raw.get("task") in registry.names() else (0,)
        raw = {**raw, "seeds": list(task_seeds)}
    check_seeds(where, raw["seeds"])
    if "parallel" in raw:
        check(f"{where}: parallel", raw["parallel"], "parallel")
    if raw.get("sweep_budget") is not None:
        check(f"{where}: sweep_budget", raw["sweep_budget"], "budget")
        raw = {**raw, "sweep_budget": float(raw["sweep_budget"])}
    own = sorted((set(raw.get("fixed", {})) | set(grid)) & _OWN)
    if own:
        raise ConfigError(
            f'{where}: {own[0]} is set by the sweep for each cell; remove it from fixed/grid (use "seeds" and "out")'
        )
    clash = sorted(set(raw.get("fixed", {})) & set(grid))
    if clash:
        raise ConfigError(f"{where}: {clash[0]!r} is both in fixed and grid; give it in one place")
    try:
        sw = GridSweep(**raw)
    except ValidationError as exc:
        raise ConfigError(f"{where}: {explain(exc)}") from None
    if sw.task not in registry.names():
        raise ConfigError(f"{where}: task {sw.task!r} is not installed; installed tasks: {', '.join(registry.names())}")
    points = math.prod(len(v) for v in sw.grid.values())
    if sw.sample is not None:
        points = _check_sample(sw, points, where).points
    n = len(sw.seeds) * points
    if n > MAX_CELLS:
        raise ConfigError(f"{where}: the grid has {n} cells; at most {MAX_CELLS} per sweep (split it)")
    if base is not None:
        sw = sw.model_copy(
            update={
                "out": str(_path(sw.out, base)),
                "fixed": resolve_paths(sw.fixed, base),
                "grid": {k: [resolve_paths({k: v}, base)[k] for v in vs] for k, vs in sw.grid.items()},
            }
        )
    return sw


def _check_sample(sw: GridSweep, points: int, where: str) -> Sample:
    """A sweep's ``sample``, checked against its grid (one-line ConfigError)."""
    from cooplab.limits import check

    try:
        sample = Sample.model_validate(sw.sample, strict=False)
    except ValidationError as exc:
        raise ConfigError(
            f'{where}: sample: {explain(exc)} (sample is {{"points": N, "seed": S, "weights": '
            f'{{"keyword": {{"value": weight}}}}}})'
        ) from None
    raw = sw.sample
    assert raw is not None  # None does not validate as a Sample (a ConfigError above)
    if isinstance(raw.get("points"), bool) or not 1 <= sample.points <= points:
        raise ConfigError(
            f"{where}: sample.points must be a whole number from 1 to the grid's {points} points, got "
            f"{show(raw.get('points'))}"
        )
    check(f"{where}: sample.seed", sample.seed, "seed")
    for key, by_value in sample.weights.items():
        if key not in sw.grid:
            raise ConfigError(
                f"{where}: sample.weights names {key!r}, which is not a grid keyword "
                f"({', '.join(sw.grid) or 'no grid'})"
            )
        texts = {_text(v) for v in sw.grid[key]}
        for value, w in by_value.items():
            if value not in texts:
                raise ConfigError(
                    f"{where}: sample.weights.{key} names {value!r}, not one of the grid's values "
                    f"({', '.join(sorted(texts))})"
                )
            if isinstance(w, bool) or not math.isfinite(w) or w < 0 or w > 1e6:
                raise ConfigError(
                    f"{where}: sample.weights.{key}.{value} must be a weight from 0 to 1e6, got {show(w)}"
                )
    weighted = sum(1 for w in _point_weights(sw.grid, sample) if w > 0)
    if weighted < sample.points:
        raise ConfigError(
            f"{where}: sample.points is {sample.points}, but only {weighted} grid points have a weight above 0"
        )
    return sample


def _point_weights(grid: dict[str, list[Any]], sample: Sample) -> list[float]:
    """The weight of each grid point, in the order of :func:`itertools.product` over the grid."""
    keys = list(grid)
    return [
        math.prod(sample.weights.get(k, {}).get(_text(v), 1.0) for k, v in zip(keys, values, strict=False))
        for values in product(*(grid[k] for k in keys))
    ]


def sampled_points(grid: dict[str, list[Any]], sample: Sample) -> list[int]:
    """The indices (in product order, ascending) of the grid points a sample draws: ``points``
    of them without replacement, each draw in proportion to the weights of the points left
    (NumPy's ``Generator.choice``), seeded by ``sample.seed`` alone, so the same file draws the
    same points on every machine."""
    import numpy as np

    w = np.asarray(_point_weights(grid, sample), dtype=float)
    picked = np.random.default_rng(sample.seed).choice(len(w), size=sample.points, replace=False, p=w / w.sum())
    return sorted(int(i) for i in picked)


def _path(text: str, base: Path) -> Path:
    p = Path(text).expanduser()
    return p if p.is_absolute() else Path(os.path.normpath(base / p))


def _spec(text: Any, base: Path) -> Any:
    """A model spec with its ``scripted:FILE`` made absolute against ``base``."""
    if isinstance(text, str) and text.startswith("scripted:"):
        return "scripted:" + str(_path(text[len("scripted:") :], base))
    return text


def resolve_paths(keywords: dict[str, Any], base: Path) -> dict[str, Any]:
    """``keywords`` with every file they name made absolute against ``base`` (see the module)."""
    out = dict(keywords)
    for key, v in keywords.items():
        if key in PATH_KEYWORDS and isinstance(v, str) and v != "off":
            out[key] = str(_path(v, base))
        elif key in PATH_KEYWORDS and isinstance(v, list):
            out[key] = [str(_path(x, base)) if isinstance(x, str) else x for x in v]
        elif key in ("model", "players", "judge"):
            out[key] = _spec(v, base)
        elif key == "agent_model" and isinstance(v, list):  # ["2=scripted:f.json", ...]
            out[key] = [
                f"{x.split('=', 1)[0]}={_spec(x.split('=', 1)[1], base)}" if isinstance(x, str) and "=" in x else x
                for x in v
            ]
        elif key == "agent_models" and isinstance(v, dict):
            out[key] = {a: _spec(m, base) for a, m in v.items()}
        elif key == "model_mix" and isinstance(v, dict):  # {spec: count}: the specs are the keys
            out[key] = {_spec(m, base) if isinstance(m, str) else m: n for m, n in v.items()}
    return out


def _text(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v)


def keywords_of(fixed: dict[str, Any], point: dict[str, Any]) -> dict[str, Any]:
    """The :func:`cooplab.run` keywords of one grid point: ``fixed``, then the point's values (a
    ``set.NAME`` key goes into the ``set`` option)."""
    kw = dict(fixed)
    for key, v in point.items():
        if key.startswith("set."):
            name = key[len("set.") :]
            have = kw.get("set")
            if have is None or isinstance(have, dict):
                kw["set"] = {**(have or {}), name: v}
            elif isinstance(have, list):
                kw["set"] = [*have, f"{name}={_text(v)}"]
            else:
                raise ConfigError(f"set must be an object or a list of name=value, got {show(have)}")
        else:
            kw[key] = v
    return kw


def cells(sw: GridSweep) -> list[dict[str, Any]]:
    """Every cell: its directory name, its keywords and its labels (grid values and seed)."""
    keys = list(sw.grid)
    out, names = [], set()
    points = list(product(*(sw.grid[k] for k in keys)))
    if sw.sample is not None:
        points = [points[i] for i in sampled_points(sw.grid, Sample.model_validate(sw.sample, strict=False))]
    for values in points:
        point = dict(zip(keys, values, strict=False))
        for seed in sw.seeds:
            name = "__".join([f"{k.removeprefix('set.')}-{slug(_text(v))}" for k, v in point.items()] + [f"s{seed}"])
            if name in names:
                raise ConfigError(
                    f"two cells would share the directory {name!r}: make the grid values differ in letters or digits"
                )
            names.add(name)
            out.append(
                {
                    "name": name,
                    "keywords": {**keywords_of(sw.fixed, point), "seed": seed},
                    "labels": {**{k.removeprefix("set."): v for k, v in point.items()}, "seed": seed},
                }
            )
    return out


def jobs(
    sw: GridSweep, where: str = "sweep", *, config_of: Callable[[dict[str, Any]], dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """Every cell as a job of :mod:`cooplab.runs.sweeps`, its config built and checked (nothing runs).
    ``config_of(labels)``: the cell's config.json object, when the caller builds it (a game profile:
    one game per cell); otherwise built from the cell's keywords."""
    from cooplab.runs import registry
    from cooplab.runs.config import RunConfig

    task = registry.get(sw.task)
    out = []
    for c in cells(sw):
        try:
            if config_of is not None:
                raw = config_of(c["labels"])
                config = RunConfig.load(raw, where="config")  # checked as a stored config is
            else:
                config = RunConfig.from_keywords(sw.task, **c["keywords"]).resolve(task)
                raw = config.to_json()
        except ConfigError as exc:
            raise ConfigError(f"{where}: cell {c['name']}: {exc}") from None
        j = job(
            Path(sw.out) / "cells" / c["name"],
            sw.task,
            raw,
            labels=c["labels"],
            done=("completed", "budget_exhausted"),
        )
        j["cap"] = task.cost_cap(config)
        if sw.sweep_budget is not None and j["cap"] is None:
            raise ConfigError(
                f"{where}: cell {c['name']} has no budget of its own; with sweep_budget every cell needs one "
                f'("budget" in fixed or grid, USD per cell), so that what it may spend is known before it starts'
            )
        out.append(j)
    return out


def run(
    sw: GridSweep,
    todo: list[dict[str, Any]] | None = None,
    *,
    executor: str = "local",
    address: str | None = None,
    log: Callable[[str], None] = lambda s: None,
    quiet: bool = True,
    analysis_out: Path | None = None,
    kind: ManifestKind = "sweep",
    outputs: dict[str, str] | None = None,
    in_turn: bool = False,
    warn: Callable[[str], None] | None = None,
    announce: Callable[[dict[str, Any], str], None] | None = None,
) -> dict[str, Any]:
    """Run a sweep's cells (``todo``: its jobs, if already built), write ``OUT/table.csv``,
    ``OUT/manifest.json`` and, unless the sweep says not to, the task's analysis of the finished
    cells. The result has the cells' outcomes, the table, where it is, and the analysis (or the
    one line saying why it failed).

    ``kind``: the manifest's kind, ``outputs`` the folder's own files it names (a game profile:
    "profile", its profile.json...); a folder of another kind than "sweep" is analyzed even when
    no cell finished (its files say what it has), reading the manifest, which is written before
    the analysis and again after it. ``in_turn``: the cells run one after another and each gets
    what the ones before it left of ``sweep_budget`` (:func:`~cooplab.runs.sweeps.run_jobs`,
    :class:`~cooplab.runs.sweeps.SweepBudget`); ``warn`` and ``announce`` as there."""
    from cooplab.graphs import rundir
    from cooplab.runs import registry

    todo = jobs(sw) if todo is None else todo
    budget = None if sw.sweep_budget is None else SweepBudget(sw.sweep_budget, todo, in_turn=in_turn)
    res = run_jobs(
        todo,
        parallel=sw.parallel,
        noun="cell",
        executor=executor,
        address=address,
        log=log,
        quiet=quiet,
        budget=budget,
        in_turn=in_turn,
        warn=warn,
        announce=announce,
    )
    rows = table(todo, res, "cell")
    result = {**res, "cells": len(todo), "table": rows, "table_csv": str(write_table(rows, Path(sw.out)))}
    failed = {f["cell"] for f in res["failed"]} | set(res["not_started"])
    steps = {name: step for step in ("ran", "resumed", "skipped") for name in res[step]}
    finished = [
        {"dir": j["dir"], "labels": j["labels"], "step": steps.get(Path(j["dir"]).name)}
        for j in todo
        if Path(j["dir"]).name not in failed and (Path(j["dir"]) / "summary.json").is_file()
    ]
    result["run_dirs"] = [c["dir"] for c in finished]
    outputs = {"table": "table.csv", **(outputs if outputs is not None else {"analysis": "analysis"})}
    write_manifest(Path(sw.out), kind, sw.task, todo, res, outputs=outputs)
    if sw.analysis and (finished or kind != "sweep"):
        try:
            extra = registry.get(sw.task).analyze_sweep(finished, Path(sw.out), analysis_out=analysis_out)
        except (rundir.RunDirError, ConfigError, ValueError) as exc:
            result["analysis_error"] = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        else:
            result.update(extra or {})
        write_manifest(Path(sw.out), kind, sw.task, todo, res, outputs=outputs)
    return result


def load_file(
    path: Path, *, convert_args: Callable[[str, list[str]], dict[str, Any]] | None = None
) -> tuple[GridSweep, str | None]:
    """A sweep file, in this format or an earlier one (converted: the second value is the one-line
    notice saying so). ``convert_args(task, args)``: how the command line turns a task's option
    flags into keywords, for files of the ``args`` format (without it they are refused, one line)."""
    from cooplab.runs import migrate

    path = Path(path)
    where = f"sweep config {path}"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read {where}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{where} is not a UTF-8 text file") from None
    raw = parse_json(text, where)
    conv = migrate.sweep_converter(raw)
    if conv is None:
        return load(raw, where, base=path.resolve().parent), None
    converted = migrate.convert_sweep(conv, raw, where, convert_args=convert_args)
    # the earlier formats meant paths relative to the current directory; they still do
    sw = load(converted, where, base=Path.cwd())
    return sw, (
        f"{path} is in the earlier {conv.reads} format; read as a grid sweep "
        f'(rewrite it as {{"task", "out", "fixed", "grid", "seeds"}}: docs/scale.md)'
    )
