"""Where the runner and the CLI find tasks by name.

Built-in tasks are listed here; any installed distribution can add tasks through the
``cooplab.tasks`` entry-point group, each entry naming a :class:`~cooplab.graphs.task.Task`
instance (or class) as ``module:attribute``::

    [project.entry-points."cooplab.tasks"]
    ultimatum = "cooplab_ultimatum:TASK"

A broken third-party entry point never breaks the built-in tasks: it is reported by name when
that task is asked for (and listed by ``cooplab doctor``).
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

from cooplab.cli_options import one_line
from cooplab.graphs.task import Task

GROUP = "cooplab.tasks"
BUILTIN = {
    "cpr": "cooplab.tasks.cpr.task:TASK",
    "diners": "cooplab.tasks.diners.task:TASK",
    "game": "cooplab.tasks.games.task:TASK",
    "science": "cooplab.tasks.science.task:TASK",
}


class UnknownTask(LookupError):
    """No task of that name is installed, or its entry point is broken (one line)."""


def _load(target: str) -> Task:
    module, _, attr = target.partition(":")
    obj = getattr(importlib.import_module(module), attr)
    task = obj() if isinstance(obj, type) else obj
    if not isinstance(task, Task):
        raise TypeError(f"{target} is a {type(task).__name__}, not a cooplab.graphs.task.Task")
    return task


def third_party() -> dict[str, str]:
    """Installed entry points of the ``cooplab.tasks`` group: name -> ``module:attribute``."""
    return {ep.name: ep.value for ep in entry_points(group=GROUP) if ep.name not in BUILTIN}


def names() -> list[str]:
    """Every registered task name: built-in first, then third-party in name order."""
    return [*BUILTIN, *sorted(third_party())]


_CACHE: dict[str, Task] = {}


def get(name: str) -> Task:
    """The task registered as ``name``, else :class:`UnknownTask`."""
    if name in _CACHE:
        return _CACHE[name]
    target = BUILTIN.get(name) or third_party().get(name)
    if target is None:
        raise UnknownTask(f"no task named {name!r} is installed; installed tasks: {', '.join(names())} "
                          f"(a third-party task registers in the {GROUP!r} entry-point group)")
    try:
        task = _load(target)
    except Exception as exc:  # noqa: BLE001 - a broken plug-in is reported, not raised as a traceback
        raise UnknownTask(f"task {name!r} ({target}) failed to load: {one_line(f'{type(exc).__name__}: {exc}', 250)}") from None
    if task.name != name:
        raise UnknownTask(f"task registered as {name!r} ({target}) calls itself {task.name!r}; the names must match")
    _CACHE[name] = task
    return task
