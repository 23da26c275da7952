"""Where the runner and the CLI find tasks by name.

Built-in tasks are listed here; a task defined in Python (a notebook, a script) registers with
:func:`register_task` for the life of the process (its runs resume in that process); any
installed distribution can add tasks through the
``cooplab.tasks`` entry-point group, each entry naming a :class:`~cooplab.graphs.task.Task`
instance (or class) as ``module:attribute``::

    [project.entry-points."cooplab.tasks"]
    ultimatum = "cooplab_ultimatum:TASK"

Entry points are imported lazily: only when their task is asked for by name (:func:`get`), never
by :func:`names`, which reads the installed metadata alone. A broken third-party entry point never
breaks anything else: whatever its import raises (any exception, and ``SystemExit`` too: only
Ctrl-C's KeyboardInterrupt goes through) becomes a one-line :class:`UnknownTask` naming the entry
point, remembered for the rest of the process (the module is not imported again), and reported
when that task is asked for (and listed by ``cooplab doctor``).
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

from cooplab.graphs.runfiles import check_results
from cooplab.graphs.task import Task
from cooplab.limits import one_line

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
    """Every registered task name: built-in first, then third-party and registered in Python, in name order."""
    return [*BUILTIN, *sorted(set(third_party()) | set(_REGISTERED) - set(BUILTIN))]


_CACHE: dict[str, Task] = {}
_REGISTERED: dict[str, Task] = {}
_FAILED: dict[str, str] = {}  # name -> why its entry point failed to load (one line)


def failures() -> dict[str, str]:
    """The tasks whose entry points failed to load in this process so far: name -> one line."""
    return dict(_FAILED)


def find(name: str) -> Task | None:
    """The task of this name, or None when none is installed or it fails to load (a run of a task not
    installed here is shown with the generic pages: the explorer's ``task_for``)."""
    try:
        return get(name)
    except Exception:  # noqa: BLE001 - unknown or broken plug-in: the caller's generic view
        return None


def registered(name: str) -> Task | None:
    """The task registered from Python (:func:`register_task`) as ``name`` in this process, else None."""
    return _REGISTERED.get(name)


def register_task(task: Task | type[Task], *, replace: bool = False) -> Task:
    """Make ``task`` (an instance, or a class built with no arguments) runnable by its name for
    the rest of the process: ``cooplab.run(task=NAME)``, ``cooplab.resume`` of its runs, sweeps.
    A name already taken (built-in, installed or registered) is refused unless ``replace``."""
    from cooplab.limits import ConfigError

    obj = task() if isinstance(task, type) else task
    if not isinstance(obj, Task):
        raise ConfigError(
            f"register_task needs a cooplab.graphs.task.Task (an instance or a subclass), got {type(obj).__name__}"
        )
    name = obj.name
    if not isinstance(name, str) or not name.strip() or not name.replace("-", "").replace("_", "").isalnum():
        raise ConfigError(
            f"a task's name must be letters, digits, '-' or '_', got {name!r}; set the class attribute name"
        )
    taken = name in BUILTIN or name in third_party() or name in _REGISTERED
    if taken and not replace:
        raise ConfigError(
            f"a task named {name!r} is already registered; give it another name, or register_task(..., replace=True)"
        )
    try:
        check_results(obj.Results, name)
    except TypeError as exc:
        raise ConfigError(str(exc)) from None
    _REGISTERED[name] = obj
    _CACHE[name] = obj
    return obj


def get(name: str) -> Task:
    """The task registered as ``name``, else :class:`UnknownTask`."""
    if name in _CACHE:
        return _CACHE[name]
    if name in _REGISTERED:
        return _REGISTERED[name]
    if name in _FAILED:
        raise UnknownTask(_FAILED[name])
    target = BUILTIN.get(name) or third_party().get(name)
    if target is None:
        raise UnknownTask(
            f"no task named {name!r} is installed; installed tasks: {', '.join(names())} "
            f"(a third-party task registers in the {GROUP!r} entry-point group)"
        )
    try:
        task = _load(target)
        own_name = task.name
        check_results(task.Results, name)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - SystemExit included: a plug-in must not end the process it is loaded in
        _FAILED[name] = f"task {name!r} ({target}) failed to load: {one_line(f'{type(exc).__name__}: {exc}', 250)}"
        raise UnknownTask(_FAILED[name]) from None
    if own_name != name:
        raise UnknownTask(f"task registered as {name!r} ({target}) calls itself {own_name!r}; the names must match")
    _CACHE[name] = task
    return task
