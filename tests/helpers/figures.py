"""A fixture for tests of runs whose figure is not what they check (the provider and budget tests run
a CPR society through the CLI a hundred times over; drawing its PNG with matplotlib took about half
of each run). ``run_figure`` is swapped for a recorder: the run still reaches its figure step, with
its rounds table and summary, and the test may look at what it was given; nothing is drawn.

The figure itself is tested where it is the subject (tests/cpr/test_run_figure.py and the explorer's
tests); a figure error never fails a run (it is recorded in summary.json), so these tests could not
see one anyway."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def figures_recorded(monkeypatch) -> list[dict[str, Any]]:
    """CPR runs skip drawing ``figures/run.png``; each call is recorded (rounds, summary, outdir)."""
    from cooplab.tasks.cpr import figures

    calls: list[dict[str, Any]] = []

    def record(rounds, summary, outdir, *, efforts=None, norms=None) -> Path:
        assert len(rounds) and isinstance(summary, dict), "a run's figure needs its rounds and summary"
        calls.append({"rounds": rounds, "summary": summary, "outdir": Path(outdir), "efforts": efforts, "norms": norms})
        return Path(outdir) / "run.png"

    monkeypatch.setattr(figures, "run_figure", record)
    return calls
