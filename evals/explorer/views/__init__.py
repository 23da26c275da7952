"""The explorer's built-in views: one module per built-in society task, and the generic view.

A view is a function ``(run: RunDir, query: Mapping[str, str]) -> list[Section]``. :func:`sections`
picks, in order: the task's own :meth:`~cooplab.graphs.task.Task.explore` (when it returns a list;
the generic sections follow the task's), the built-in view of the task's name (:data:`VIEWS`), or
:func:`generic.view`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from cooplab.evals.values import cut
from cooplab.graphs import explore as ex

from . import generic

#: task name -> its built-in view (filled in by the modules below)
VIEWS: dict[str, Callable[[Any, Mapping[str, str]], list[ex.Section]]] = {}
#: task name -> its key numbers from summary.json
KEY_NUMBERS: dict[str, Callable[[Mapping[str, Any]], dict[str, Any]]] = {}


#: task name -> what the built-in view calls one agent ("Fisher": agent 2 is "Fisher 3")
NOUNS: dict[str, str] = {}


def noun(task_name: str, task: Any = None) -> str:
    """What a task calls one agent: its ``agent_noun`` when it sets one, the built-in view's, else "Agent"."""
    own = getattr(task, "agent_noun", None)
    if isinstance(own, str) and own and own != "Agent":
        return own
    return NOUNS.get(task_name, "Agent")


def _problem(what: str, exc: BaseException) -> ex.Note:
    return ex.Note(f"{what} failed: {cut(f'{type(exc).__name__}: {exc}', 300)}; the generic view is shown instead")


def sections(run: Any, query: Mapping[str, str], task: Any = None) -> list[ex.Section]:
    """The sections of ``run``'s page (``task``: its registered Task, or None when not installed)."""
    notes: list[ex.Block] = []
    for what, fn in (("the task's explore()", getattr(task, "explore", None)), ("the built-in view", VIEWS.get(run.task))):
        if fn is None:
            continue
        try:
            secs = fn(run, query)
        except Exception as exc:  # noqa: BLE001 - a broken view never takes the page down
            notes.append(_problem(what, exc))
            continue
        if isinstance(secs, list):
            if what == "the task's explore()":  # a task's own page: its sections, then every page's generic ones
                secs = [*secs, generic.summary_section(run, key_numbers(run, task)), *generic.tail(run)]
            return secs if not notes else [ex.Section("Problems", notes), *secs]
    secs = [generic.summary_section(run, key_numbers(run, task)), *generic.tail(run)]
    return secs if not notes else [ex.Section("Problems", notes), *secs]


def key_numbers(run: Any, task: Any = None) -> dict[str, Any]:
    """The run's key numbers for the list and the comparison."""
    summary = run.summary
    typed = getattr(run, "run_summary", None)
    fn = getattr(task, "key_numbers", None)
    try:
        got = fn(typed) if fn is not None and typed is not None else None
        if isinstance(got, Mapping):
            return dict(got)
        if run.task in KEY_NUMBERS:
            return KEY_NUMBERS[run.task](summary)
    except Exception:  # noqa: BLE001 - a broken hook falls back to the generic numbers
        pass
    return generic.key_numbers(summary)


from . import societies as _societies  # noqa: E402,F401 - registers the built-in views
