"""A fixture for tests of runs whose figure is not what they check (the provider and budget tests run
a CPR society through the CLI a hundred times over; drawing its PNG with matplotlib took about half
of each run). ``run_figure`` is swapped for a recorder: the run still reaches its figure step, with
its rounds table and summary, and the test may look at what it was given; nothing is drawn.

The figure itself is tested where it is the subject (tests/cpr/test_run_figure.py and the explorer's
tests); a figure error never fails a run (it is recorded in summary.json), so these tests could not
see one anyway."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any, Iterator

import pytest


@pytest.fixture
def figures_recorded(monkeypatch) -> Iterator[list[dict[str, Any]]]:
    """CPR runs skip drawing ``figures/run.png``; each call's arguments are recorded by name (rounds, summary, outdir,
    ...)."""
    from cooplab.tasks.cpr import figures

    calls: list[dict[str, Any]] = []
    wrong: list[str] = []
    real = inspect.signature(figures.run_figure)

    def record(*args: Any, **kwargs: Any) -> Path:
        try:
            bound = real.bind(*args, **kwargs)  # called as the real one would accept
        except TypeError as exc:
            wrong.append(f"run_figure called in a way it refuses: {exc}")
            raise
        bound.apply_defaults()
        a = dict(bound.arguments)
        if not (len(a["rounds"]) and isinstance(a["summary"], dict)):
            wrong.append("run_figure called without the run's rounds or summary")
        a["outdir"] = Path(a["outdir"])
        calls.append(a)
        return a["outdir"] / "run.png"

    monkeypatch.setattr(figures, "run_figure", record)
    yield calls
    # a figure error never fails a run (summary.json records it): a wrong call fails the test here instead
    assert not wrong, wrong


def check_a_rerun_copies_its_figure(tmp_path: Path, run: Any, png: str) -> None:
    """``run(out, cache)`` makes a run into ``out`` with the response cache ``cache`` and returns the
    figures it drew. A first run draws ``figures/PNG`` once; its rerun from the same cache draws
    nothing and has the same bytes; a run with the cache off draws it."""
    cache = str(tmp_path / "cache.sqlite")
    assert len(run(tmp_path / "first", cache)) == 1
    assert len(run(tmp_path / "rerun", cache)) == 0
    first, rerun = ((tmp_path / d / "figures" / png).read_bytes() for d in ("first", "rerun"))
    assert rerun == first and first.startswith(b"\x89PNG")
    assert len(run(tmp_path / "off", "off")) == 1  # without a cache: drawn, nothing kept
