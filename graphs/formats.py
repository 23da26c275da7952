"""The on-disk format of cooplab's run folders, declared stable for 0.1, and every converter of an
earlier shape of its files, each registered with what it reads and what it writes.

:data:`FORMAT` names the format; :data:`VERSIONS` the version each file of it carries (its
``"version"`` field). What *stable* promises (docs/run-config.md, "The format is stable"): a run
folder written by cooplab 0.1 reads in every later 0.x release; a change to a file's fields, their
meaning or their types comes with a new version of that file and a converter registered here, so
``cooplab migrate`` brings an older folder up to date and the readers still read it meanwhile.

Two kinds of converter:

- **run files** (:data:`CONVERTERS`): ``config.json`` and ``summary.json`` of version 1 (before the
  typed configuration and the schema) to version 2, the decisions, ledger and tool-loops tables
  written before their ``agent_id`` and ``cost_usd`` columns, a folder of many runs made before
  ``manifest.json`` to one with it, a game profile's ``games/GAME`` runs to the grid sweep's
  ``cells/`` (:func:`profile_cells`), and a science bench's ``items/ID`` runs likewise
  (:func:`bench_cells`). The readers (:func:`cooplab.graphs.rundir.read_config`,
  :func:`cooplab.graphs.runfiles.parse_summary`, :func:`cooplab.graphs.runfiles.manifest_of`) convert
  on read through the same functions; :mod:`cooplab.runs.migrate` rewrites the files in place.
- **sweep files**: the formats before the one grid format, converted on read with a one-line
  notice (:func:`cooplab.runs.migrate.sweep_converter`): the command-line ``args`` format (the
  engine's) and each world's own earlier format, which stays in the world's folder and is reached
  through its :meth:`~cooplab.graphs.task.Task.earlier_sweep` hook, returning a :class:`Converter`.
  :func:`read_earlier` and :func:`grid_sweep` are the shape every one of them shares.

This module sits at the bottom of the graph layer: it imports nothing of cooplab but
:mod:`cooplab.limits`, so the readers and every layer above use it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: the on-disk format this cooplab writes and promises to read in every later 0.x release
FORMAT = "0.1"
#: the version of config.json this code writes (``"version"``; files without it are version 1)
CONFIG_VERSION = 2
#: the version of summary.json this code writes (files without ``version`` are version 1)
SUMMARY_VERSION = 2
#: the version of manifest.json this code writes
MANIFEST_VERSION = 1
#: the files of the format and the version of each (FORMAT 0.1)
VERSIONS = {"config.json": CONFIG_VERSION, "summary.json": SUMMARY_VERSION, "manifest.json": MANIFEST_VERSION}


@dataclass(frozen=True)
class Converter:
    """One converter of an earlier format: the file it reads (``config.json``, ``summary.json``,
    ``manifest.json``, ``sweep file``), the format or version it reads and the one it writes, and
    the function. For run files ``convert(raw, **context) -> the current JSON``; for sweep files
    ``convert(raw, where) -> the grid format's JSON object`` (checked; one-line ConfigError)."""

    file: str
    reads: str
    writes: str
    convert: Callable[..., Any] = field(compare=False)
    #: who registered it: "cooplab" or the world (task) whose folder holds it
    owner: str = "cooplab"

    def describe(self) -> str:
        return f"{self.file}: {self.reads} -> {self.writes}"


# --- config.json ----------------------------------------------------------------------------------
#: the fields of every config.json (version 2): the run's settings, and ``record`` for what was
#: noted when it started (not a setting: the code version, the time, the environment, a dataset's hash)
CONFIG_FIELDS = ("version", "task", "agents", "seed", "csv", "params", "llm", "sandbox", "record")
#: version-1 top-level keys that were records, not settings
_V1_RECORDS = ("code_version", "created", "environment", "dataset", "sweep_cell", "sweep_condition", "bench_item")
#: version-1 names of the LLM block -> version 2 (one spelling per setting)
_V1_LLM = {"price_in_per_1k": "price_in", "price_out_per_1k": "price_out"}


def upgrade_config(raw: Any) -> Any:
    """A run's config.json in the current shape (version 2), from any version this code wrote.

    Version 1 (before the typed run configuration) kept each task's options beside the runner's
    fields at the top level (CPR's ``population`` and ``replicates``, every diners option, the
    game's ``game`` and ``players``, science's ``judge``), spelled the LLM prices ``price_in_per_1k``,
    listed models as ``{"default": ..., "1": ...}`` and put the sandbox's price in the LLM block.
    Version 2 puts every option of the task under ``params``, the LLM block in the fields of
    :class:`cooplab.agents.settings.LLMSettings`, the sandbox's in ``sandbox`` and what was only
    recorded under ``record``. Anything that is not an object is returned as it is (the checks
    that follow say what is wrong with it); the input is never changed."""
    if not isinstance(raw, dict) or "version" in raw:
        return raw
    runner = {"task", "agents", "seed", "csv", "llm", "sandbox", "params", *_V1_RECORDS}
    params = dict(raw["params"]) if isinstance(raw.get("params"), dict) else {}
    for key, value in raw.items():
        if key not in runner:
            params[key] = value  # a task option kept at the top level in version 1
    out: dict[str, Any] = {
        "version": CONFIG_VERSION,
        **{k: raw[k] for k in ("task", "agents", "seed", "csv") if k in raw},
    }
    out.setdefault("csv", False)
    out["params"] = raw["params"] if "params" in raw and not isinstance(raw["params"], dict) else params
    llm, rate = upgrade_llm(raw.get("llm"))
    out["llm"] = llm
    sandbox = raw.get("sandbox")
    if isinstance(sandbox, dict):
        sandbox = {**sandbox, "rate": sandbox.get("rate", rate if rate is not None else 0.0)}
    out["sandbox"] = sandbox
    out["record"] = {k: raw[k] for k in _V1_RECORDS if k in raw}
    return out


def upgrade_llm(llm: Any) -> tuple[Any, Any]:
    """A version-1 LLM block in version 2's spelling, and the sandbox price it held (0.0 if none);
    a version-2 block (or anything not an object) comes back as it is."""
    if not isinstance(llm, dict) or (
        "models" not in llm and not set(_V1_LLM) & set(llm) and "sandbox_usd_per_second" not in llm
    ):
        return llm, 0.0
    llm = dict(llm)
    models = llm.pop("models", None)
    if isinstance(models, dict):
        llm["model"] = models.get("default")
        llm["agent_models"] = {k: v for k, v in models.items() if k != "default"}
    elif models is not None:
        llm["model"] = models  # wrong; the checks say so
    for old, new in _V1_LLM.items():
        if old in llm:
            llm[new] = llm.pop(old)
    return llm, llm.pop("sandbox_usd_per_second", 0.0)


# --- summary.json ---------------------------------------------------------------------------------
def upgrade_summary(raw: Any, results: Any = None) -> Any:
    """A summary.json's JSON in the current shape (version 2), from any version this code wrote.

    Version 1 (every summary before the schema) had no ``version`` and the same fields, except
    what earlier code did not write yet: the ledger's ``usage_errors``, ``by_kind`` and
    ``unit_rates`` (null: not recorded), and the task's fields its ``Results.since_v1`` names
    (``results``: the task's :class:`~cooplab.graphs.runfiles.Results` model, or None).
    Anything that is not an object, and a version this code does not know, is returned as it is
    (the checks that follow say what is wrong); the input is never changed."""
    if not isinstance(raw, dict) or "version" in raw:
        return raw
    out = {"version": SUMMARY_VERSION, **raw}
    led = raw.get("ledger")
    if isinstance(led, dict):
        out["ledger"] = {**{k: None for k in ("usage_errors", "by_kind", "unit_rates")}, **led}
    if raw.get("ledger", 0) is None:
        del out["ledger"]  # a failed run whose trail could not be read wrote null: no totals
    if results is not None and raw.get("status") != "failed":
        for k, v in getattr(results, "since_v1", {}).items():
            out.setdefault(k, v)
    return out


# --- tables ---------------------------------------------------------------------------------------
def upgrade_table(name: str, df: Any) -> Any:
    """A decisions, ledger or tool-loops table (a DataFrame) written before the agent key and the
    money columns, in today's shape (:func:`cooplab.graphs.tables.upgrade`, which the readers use)."""
    from cooplab.graphs.tables import upgrade

    return upgrade(name, df)


# --- a game profile's folder -----------------------------------------------------------------------
#: a game profile folder's own files, as its manifest's ``outputs`` names them
PROFILE_OUTPUTS = {"profile": "profile.json", "settings": "profile-config.json", "figure": "figures/profile.png"}


def profile_cells(games: Any, seed: Any) -> dict[str, str]:
    """Where a game profile written before the grid layout keeps each game's run (``games/GAME``,
    relative to the profile's folder) -> where the grid layout keeps it (``cells/game-GAME__sSEED``,
    the name :func:`cooplab.runs.grid.cells` gives the cell of the grid ``{"game": [...]}`` and that
    seed). ``games``: the games of the profile; an unusable list or seed is a ValueError (one line)."""
    if not isinstance(games, list) or not all(isinstance(g, str) and g.replace("-", "").isalnum() for g in games):
        raise ValueError(f"games must be a list of game names, got {games!r}"[:200])
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an integer, got {seed!r}"[:200])
    return {f"games/{g}": f"cells/game-{g}__s{seed}" for g in games}


# --- a science bench's folder -----------------------------------------------------------------------
#: a bench folder's own files, as its manifest's ``outputs`` names them
BENCH_OUTPUTS = {
    "settings": "bench.json",
    "results": "results.parquet",
    "summary": "summary.json",
    "report": "report.md",
    "figure": "figures/accuracy-cost.png",
}


def slug(text: str) -> str:
    """A name as a directory-name part (``openai:gpt-4o`` -> ``openai-gpt-4o``): what the grid's cell
    names are made of (:func:`cooplab.runs.grid.cells`)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text.split("/")[-1]).strip("-")


def bench_cell(item: str, seed: int) -> str:
    """The cell of a bench's item: ``item-ID__sSEED``, the name :func:`cooplab.runs.grid.cells` gives
    the cell of the grid ``{"item": [...]}`` and that seed (:func:`slug` of the id, as the grid does)."""
    return f"item-{slug(str(item))}__s{seed}"


def bench_cells(items: Any, seed: Any) -> dict[str, str]:
    """Where a bench written before the grid layout keeps each item's run (``items/ID``, relative to
    the bench's folder) -> where the grid layout keeps it (``cells/item-ID__sSEED``,
    :func:`bench_cell`). ``items``: the ids of its run folders; unusable ids, two ids with one cell or an
    unusable seed are a ValueError (one line)."""
    if not isinstance(items, list) or not all(isinstance(i, str) and BENCH_ID.match(i) for i in items):
        raise ValueError(f"items must be a list of bench item ids, got {items!r}"[:200])
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an integer, got {seed!r}"[:200])
    out: dict[str, str] = {}
    for i in items:
        cell = f"cells/{bench_cell(i, seed)}"
        if cell in out.values():
            raise ValueError(f"two items would share the run folder {cell}: rename one of them"[:200])
        out[f"items/{i}"] = cell
    return out


#: a bench item's id (it names a folder; tasks/science/bench.py checks a suite's ids with it)
BENCH_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


#: the converters of run files, by the file they read; ``cooplab migrate`` applies them in place
#: (a folder of many runs without manifest.json gets the one its layout shows: the engine's driver
#: writes it with :func:`cooplab.graphs.runfiles.manifest_of`)
CONVERTERS: dict[str, Converter] = {
    "config.json": Converter("config.json", "version 1", f"version {CONFIG_VERSION}", upgrade_config),
    "summary.json": Converter("summary.json", "version 1", f"version {SUMMARY_VERSION}", upgrade_summary),
    "table": Converter(
        "table",
        "decisions, ledger, tool_loops before agent_id and cost_usd (agent, cost)",
        "agent_id, cost_usd, cost_usd_exact",
        upgrade_table,
    ),
    "manifest.json": Converter(
        "manifest.json",
        "a layout before manifests (cells/, runs/, games/, items/)",
        f"version {MANIFEST_VERSION}",
        lambda raw: raw,
    ),
    "games/": Converter(
        "games/",
        "a game profile's games/GAME run folders (before profiles were grid sweeps)",
        "cells/game-GAME__sSEED, with the manifest and profile.json naming them",
        profile_cells,
    ),
    "items/": Converter(
        "items/",
        "a science bench's items/ID run folders (before benches were grid sweeps)",
        "cells/item-ID__sSEED, with the manifest and results.parquet naming them",
        bench_cells,
    ),
}


# --- sweep files ----------------------------------------------------------------------------------
def read_earlier(
    model: Any, raw: Any, where: str, *, see: str, check: Callable[[dict[str, Any], str], None] | None = None
):
    """An earlier sweep file's object read into its pydantic ``model``: a JSON object (else one
    line naming ``see``, where the format is shown), its raw values checked by ``check(raw, where)``
    first (pydantic would turn true into 1 and "3" into 3), then validated; one-line ConfigError."""
    from pydantic import ValidationError

    from cooplab.limits import ConfigError, explain

    if not isinstance(raw, dict):
        raise ConfigError(f"{where} must be a JSON object (see {see})")
    if check is not None:
        check(raw, where)
    try:
        return model(**raw)
    except ValidationError as exc:
        raise ConfigError(f"{where}: {explain(exc)}") from None


def grid_sweep(
    task: str,
    out: str,
    fixed: dict[str, Any],
    grid: dict[str, list[Any]],
    seeds: list[int],
    parallel: int,
    *,
    set_: dict[str, Any] | None = None,
    models: list[str] | None = None,
) -> dict[str, Any]:
    """The grid format's JSON object of a converted sweep file: ``set_`` (the task's parameters)
    goes with the fixed keywords, ``models`` (an LLM sweep's) is the grid's first axis."""
    fixed = dict(fixed)
    if set_:
        fixed["set"] = dict(set_)
    axes: dict[str, list[Any]] = {"model": list(models)} if models is not None else {}
    axes.update(grid)
    return {"task": task, "out": out, "fixed": fixed, "grid": axes, "seeds": list(seeds), "parallel": parallel}
