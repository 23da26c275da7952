"""Every registered task walked end to end, as Mesa's ``tests/test_examples.py`` walks its examples.

The tasks are the registry's (:func:`cooplab.runs.registry.names`: the built-in ones and any installed
plug-in) and the example plug-ins under ``examples/`` (each folder whose ``pyproject.toml`` declares a
``cooplab.tasks`` entry point, registered in this process the way a notebook registers a task), so a
task added to either is walked without a change here. Each one runs, with every kind of agents it
has, for a few rounds of a tiny society through the public API (:func:`cooplab.run`): LLM agents
answer from a scripted model, rule agents decide by their rules. Then:

- the run completed, with no figure error;
- summary.json validates through the typed :class:`~cooplab.graphs.runfiles.RunSummary` with the
  task's ``Results`` (its results block present) and reads back to the same file;
- config.json reads back through :func:`~cooplab.runs.config.check_stored` to the configuration
  the run was given, and is written out again unchanged;
- the task's hooks (``report``, ``key_numbers``, ``explore``) run without raising, and the explorer
  (its list of runs and the run's page) shows key numbers and sections, with no "Problems" section
  (the explorer hides a broken hook behind a note: the hooks are also called here directly).

A task of the registry with no case below is walked on its rule agents with its default settings (2
rounds where its ``Params`` has ``rounds``); its LLM agents need a scripted model's answers, so the
walk asks for a case (one entry of :func:`llm_case`). The last tests plant a broken hook in a
temporary task and check that the walk fails on it.
"""

from __future__ import annotations

import importlib
import json
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

import cooplab
from cooplab.graphs import runfiles
from cooplab.runs import registry
from cooplab.runs.config import RunConfig, check_stored

ROOT = Path(__file__).resolve().parents[2]
SCRIPTED = ROOT / "examples" / "scripted"


def example_plugins() -> dict[str, tuple[Path, str]]:
    """The example plug-ins: task name -> (the example's folder, ``module:attribute``), read from the
    ``cooplab.tasks`` entry points of every ``examples/*/pyproject.toml``."""
    found = {}
    for pyproject in sorted((ROOT / "examples").glob("*/pyproject.toml")):
        meta = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        for name, target in meta.get("project", {}).get("entry-points", {}).get(registry.GROUP, {}).items():
            found[name] = (pyproject.parent, target)
    return found


PLUGINS = example_plugins()
TASKS = list(dict.fromkeys([*registry.names(), *PLUGINS]))


def test_the_walk_covers_the_built_in_tasks_and_the_example_plug_in():
    assert set(registry.BUILTIN) <= set(TASKS) and "ultimatum" in PLUGINS


def load_plugin(name: str) -> None:
    """Register the example plug-in ``name`` in this process (its folder on ``sys.path`` while its
    module is imported), unless an installed distribution already provides it."""
    if name not in PLUGINS or name in registry.third_party() or registry.registered(name) is not None:
        return
    folder, target = PLUGINS[name]
    module, _, attr = target.partition(":")
    sys.path.insert(0, str(folder))
    try:
        task = getattr(importlib.import_module(module), attr)
    finally:
        sys.path.remove(str(folder))
    cooplab.register_task(task, replace=True)


def script(path: Path, by_phase: dict[str, list[Any]]) -> str:
    """A scripted model's file answering each phase from its list (JSON answers)."""
    path.write_text(
        json.dumps({"select": "prompt_hash", "by_phase": {k: [json.dumps(a) for a in v] for k, v in by_phase.items()}})
    )
    return f"scripted:{path}"


def llm_case(name: str, tmp: Path) -> dict[str, Any] | None:
    """Keywords of :func:`cooplab.run` for a tiny LLM run of task ``name`` on a scripted model."""
    common = {"agents": "llm", "cache": "off"}
    if name == "cpr":
        return {**common, "model": f"scripted:{SCRIPTED / 'cautious.json'}", "n_agents": 3, "rounds": 2}
    if name == "diners":
        return {
            **common,
            "model": script(
                tmp / "diners.json",
                {
                    "order": [{"meal": "budget"}, {"meal": "luxury"}],
                    "punish": [{"punish": []}],
                    "metanorm": [{"punish": []}],
                },
            ),
            "combination": 1,
            "iterations": 2,
        }
    if name == "game":
        return {
            **common,
            "game": "cpr",
            "players": "llm",
            "model": script(tmp / "game.json", {"extract": [{"extract": 2}, {"extract": 5}]}),
            "simulations": 1,
            "rounds": 2,
            "group_size": 2,
        }
    if name == "science":  # the oracle team: a built-in scripted team (its own fixed model)
        return {**common, "team": "oracle", "pipeline": "solo", "task": "anomaly", "sandbox_backend": "local"}
    if name == "ultimatum":
        return {
            **common,
            "model": f"scripted:{PLUGINS['ultimatum'][0] / 'scripted.json'}",
            "set": {"rounds": 2, "replicates": 1},
        }
    return None


def rule_case(name: str, task: Any) -> dict[str, Any]:
    """Keywords of :func:`cooplab.run` for a tiny run of task ``name`` on its rule agents."""
    if name == "cpr":
        return {"n_agents": 3, "rounds": 3, "replicates": 2}
    if name == "diners":
        return {"iterations": 2, "replicates": 2}
    if name == "game":
        return {"game": "public-goods", "simulations": 2, "rounds": 2}
    if name == "ultimatum":
        return {"set": {"rounds": 3, "replicates": 2}}
    fields = task.Params.model_fields if task.Params is not None else {}
    return {"set": {"rounds": 2}} if "rounds" in fields else {}


def case(name: str, kind: str, task: Any, tmp: Path) -> dict[str, Any]:
    if kind == "llm":
        kw = llm_case(name, tmp)
        if kw is None:
            pytest.fail(
                f"task {name!r} has LLM agents but no case in llm_case() of {Path(__file__).name}: add its smallest "
                "run "
                "on a scripted model (a few rounds, a tiny society)"
            )
        return kw
    return {"agents": kind, **rule_case(name, task)}


def problems(sections: list[dict[str, Any]]) -> list[Any]:
    return [s for s in sections if s["title"] == "Problems"]


def walk(name: str, kind: str, kw: dict[str, Any], tmp: Path) -> None:
    """Run task ``name`` with ``kind`` agents from keywords ``kw`` and check its files and hooks."""
    from cooplab.evals.explorer.pages import Site

    task = registry.get(name)
    given = RunConfig.from_keywords(name, **kw).resolve(task)
    out = tmp / f"{name}-{kind}"
    run = cooplab.run(given, out=out, quiet=True)
    where = f"{name} ({kind} agents)"
    assert run.status == "completed", f"{where}: {run.summary.message}"

    # summary.json: the typed RunSummary with the task's Results, the results block present, read back to the same file
    raw = json.loads((out / runfiles.SUMMARY_FILE).read_text(encoding="utf-8"))
    summary = runfiles.parse_summary(raw, f"{where}: summary.json", task.Results)
    assert summary.task == name and summary.agents == kind and summary.status == "completed"
    assert isinstance(summary.results, task.Results) and summary.results.model_dump(exclude_none=True), (
        f"{where}: no results"
    )
    assert set(summary.results.model_dump(mode="json", exclude_none=True)) <= set(raw), (
        f"{where}: results not at the file's top level"
    )
    assert summary.as_json() == raw, f"{where}: summary.json does not read back to itself"
    assert summary.figure_error is None, f"{where}: {summary.figure_error}"
    if summary.rounds_completed is not None:
        assert summary.rounds_completed == task.total_rounds(given) > 0
    if kind == "llm":
        assert summary.ledger is not None and summary.ledger.calls > 0, f"{where}: no model call in the ledger"

    # config.json: read back through check_stored to the configuration the run was given, and written out the same
    stored_raw = json.loads((out / "config.json").read_text(encoding="utf-8"))
    stored = check_stored(stored_raw, f"{where}: config.json", task)
    assert stored.to_json() == stored_raw
    assert stored.model_dump(exclude={"record"}) == given.model_dump(exclude={"record"}), (
        f"{where}: config.json reads back different"
    )
    assert type(stored.params) is type(given.params) and stored.params == given.params

    # the task's hooks, called directly (the explorer hides a raising hook behind a note)
    lines = task.report(summary)
    assert lines and all(isinstance(x, str) and x.strip() for x in lines), f"{where}: report gave {lines!r}"
    own = task.key_numbers(summary)
    assert own is None or (isinstance(own, dict) and own), f"{where}: key_numbers gave {own!r}"

    # the explorer: the list's key numbers and the run's page
    site = Site(roots=[out], task_for=registry.get)
    rows = site.index({})["runs"]
    assert len(rows) == 1 and rows[0]["task"] == name and rows[0]["numbers"], (
        f"{where}: no key numbers in the explorer's list"
    )
    assert not rows[0]["notes"], f"{where}: {rows[0]['notes']}"
    run_dir = site.get(rows[0]["id"])
    sections = task.explore(run_dir, {})
    assert sections is None or isinstance(sections, list), f"{where}: explore gave {type(sections).__name__}"
    page, code = site.run_page({"id": rows[0]["id"]})
    assert code == 200 and page["sections"], f"{where}: the explorer's page has no sections"
    assert not problems(page["sections"]), f"{where}: {problems(page['sections'])}"
    assert not page["notes"], f"{where}: {page['notes']}"


@pytest.mark.parametrize("name", TASKS)
def test_every_task_runs_a_few_rounds_and_reads_back(name, tmp_path):
    load_plugin(name)
    task = registry.get(name)
    for kind in task.agent_kinds:
        walk(name, kind, case(name, kind, task, tmp_path), tmp_path)


# --- the walk fails on a broken task ----------------------------------------------------------------
def broken_task(hook: str) -> Any:
    """The example plug-in's task under another name, with ``hook`` raising."""
    load_plugin("ultimatum")
    base = type(registry.get("ultimatum"))

    def boom(self, *a, **k):
        raise RuntimeError(f"planted: {hook} is broken")

    return type("Broken", (base,), {"name": f"broken-{hook.replace('_', '-')}", hook: boom})()


@pytest.mark.parametrize(
    "hook",
    [
        "key_numbers",  # the explorer alone would show the generic numbers
        "explore",  # the explorer alone would show the generic page and a note
        "figure",  # the run completes; summary.json says why figures/run.png is missing
    ],
)
def test_the_walk_fails_on_a_task_with_a_broken_hook(hook, tmp_path, monkeypatch):
    monkeypatch.setattr(registry, "_REGISTERED", dict(registry._REGISTERED))  # registered for this test only
    monkeypatch.setattr(registry, "_CACHE", dict(registry._CACHE))
    task = cooplab.register_task(broken_task(hook))
    with pytest.raises((AssertionError, RuntimeError)) as caught:
        walk(task.name, "rule", {"agents": "rule", "set": {"rounds": 2, "replicates": 1}}, tmp_path)
    assert f"planted: {hook} is broken" in str(caught.value), str(caught.value)
