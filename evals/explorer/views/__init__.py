"""The explorer's views: the generic view, and what the society pages share (:mod:`.societies`).

A view is a function ``(run: RunDir, query: Mapping[str, str]) -> list[Section]``. :func:`sections`
picks, in order: the task's own :meth:`~cooplab.graphs.task.Task.explore` (when it returns a list;
the generic sections follow the task's unless the task sets ``explore_whole_page``), or
:func:`generic.view`. Every world's page, key numbers and agent noun come through its ``Task``
hooks (the built-in worlds' pages are in ``tasks/<world>/explore.py``); nothing here names a world.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cooplab.evals.values import cut
from cooplab.graphs import explore as ex

from . import generic


def noun(task_name: str, task: Any = None) -> str:
    """What a task calls one agent: its ``agent_noun`` (e.g. "Fisher": agent 2 is "Fisher 3"), else "Agent"."""
    own = getattr(task, "agent_noun", None)
    return own if isinstance(own, str) and own else "Agent"


def _problem(what: str, exc: BaseException) -> ex.Note:
    return ex.Note(f"{what} failed: {cut(f'{type(exc).__name__}: {exc}', 300)}; the generic view is shown instead")


def sections(run: Any, query: Mapping[str, str], task: Any = None) -> list[ex.Section]:
    """The sections of ``run``'s page (``task``: its registered Task, or None when not installed)."""
    notes: list[ex.Block] = []
    fn = getattr(task, "explore", None)
    if fn is not None:
        try:
            secs = fn(run, query)
        except Exception as exc:  # noqa: BLE001 - a broken view never takes the page down
            notes.append(_problem("the task's explore()", exc))
            secs = None
        if isinstance(secs, list):
            if (
                getattr(task, "explore_whole_page", False) is not True
            ):  # the task's sections, then every page's generic ones
                secs = [*secs, generic.summary_section(run, key_numbers(run, task)), *generic.tail(run)]
            return secs
    secs = [generic.summary_section(run, key_numbers(run, task)), *generic.tail(run)]
    return secs if not notes else [ex.Section("Problems", notes), *secs]


def key_numbers(run: Any, task: Any = None) -> dict[str, Any]:
    """The run's key numbers for the list and the comparison: its task's ``key_numbers``, else the generic ones."""
    typed = getattr(run, "run_summary", None)
    fn = getattr(task, "key_numbers", None)
    try:
        got = fn(typed) if fn is not None and typed is not None else None
        if isinstance(got, Mapping):
            return dict(got)
    except Exception:  # noqa: BLE001 - a broken hook falls back to the generic numbers
        pass
    return generic.key_numbers(run.summary)
