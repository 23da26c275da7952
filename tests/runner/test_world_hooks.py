"""A world reaches the engine and the explorer only through its Task's hooks (issue 39 step 3): a task's
earlier sweep format is read through ``Task.earlier_sweep``, and a task's whole explorer page through
``Task.explore`` with ``explore_whole_page`` (tests/graphs/test_layering.py checks that nothing in the
engine or the evals imports a world)."""

from __future__ import annotations

import json

from cooplab.graphs import explore as ex
from cooplab.graphs.task import Task


class OldFormat(Task):
    """A task whose earlier sweep files hold ``old_cells``: read as a CPR grid sweep of that many rounds."""

    name = "old-format"

    def earlier_sweep(self, raw):
        if "old_cells" not in raw:
            return None
        return "old-format sweep", lambda r, where: {
            "task": "cpr",
            "out": r["out"],
            "fixed": {"rounds": r["old_cells"]},
            "grid": {"env": ["harsh", "rich"]},
            "seeds": [0],
        }


def test_an_earlier_sweep_format_of_any_task_is_read_through_its_hook(tmp_path, monkeypatch):
    from cooplab.runs import grid, registry

    task = OldFormat()
    monkeypatch.setitem(registry._REGISTERED, task.name, task)
    monkeypatch.setitem(registry._CACHE, task.name, task)
    f = tmp_path / "old.json"
    f.write_text(json.dumps({"task": "old-format", "old_cells": 2, "out": str(tmp_path / "o")}))
    sw, notice = grid.load_file(f)
    assert sw.task == "cpr" and sw.fixed["rounds"] == 2 and sw.grid == {"env": ["harsh", "rich"]}
    assert notice is not None and notice.startswith(
        f"{f} is in the earlier old-format sweep format; read as a grid sweep"
    )
    from cooplab.runs import migrate

    assert migrate.sweep_converter({"task": "old-format", "out": "o", "grid": {"x": [1]}}) is None  # the hook: not mine


def test_a_task_s_whole_page_is_shown_as_it_returns_it():
    """With ``explore_whole_page`` the explorer adds nothing to the task's sections (the built-in worlds
    frame their pages with their summary first); without it the generic sections follow."""
    from cooplab.evals.explorer import views

    class Whole(Task):
        name = "whole"
        explore_whole_page = True

        def explore(self, run, query):
            return [ex.Section("Mine", [ex.Text("all of it")])]

    assert views.sections(object(), {}, Whole()) == [ex.Section("Mine", [ex.Text("all of it")])]
    assert views.noun("cpr", None) == "Agent" and views.noun("x", Whole()) == "Agent"
    assert views.noun("anything", type("T", (), {"agent_noun": "Fisher"})()) == "Fisher"


def test_the_built_in_worlds_name_their_agents_and_numbers_through_their_tasks():
    from cooplab.runs import registry

    assert {n: registry.get(n).agent_noun for n in ("cpr", "diners", "game")} == {
        "cpr": "Fisher",
        "diners": "Diner",
        "game": "Player",
    }
    for n in ("cpr", "diners", "game", "science"):
        t = registry.get(n)
        assert type(t).explore is not Task.explore and type(t).key_numbers is not Task.key_numbers, n
