"""Complete summary.json files for tests that make run folders by hand: a real summary of a built-in
task (tests/runner/data/summaries, written by the runner) with the fields a test sets, or, for a
task that is not built in, the runner's fields and the given results. Every summary.json is read
through its schema (cooplab.graphs.runfiles), so a hand-made file must be complete to be read as a
run's outcome rather than as a damaged file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[1] / "runner" / "data" / "summaries"
#: the built-in task -> the fixture its summaries start from
BASE = {"cpr": "cpr-rule", "diners": "diners-rule", "game": "game-nash", "science": "science-oracle"}


def summary(task: str = "cpr", base: str | None = None, **fields: Any) -> dict[str, Any]:
    """A complete summary.json of ``task`` with ``fields`` set (top-level keys, replacing)."""
    name = base or BASE.get(task)
    if name is None:
        s: dict[str, Any] = {"task": task, "agents": "rule", "status": "completed", "seed": 0, "wall_seconds": 0.1}
    else:
        s = json.loads((DATA / f"{name}.json").read_text())
    s.update(fields)
    return s


def write_summary(out: Path, task: str = "cpr", base: str | None = None, **fields: Any) -> Path:
    path = Path(out) / "summary.json"
    path.write_text(json.dumps(summary(task, base, **fields)))
    return path
