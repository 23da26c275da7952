"""Watch a run in another process and kill it on observable progress (never after a fixed time)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import time
from pathlib import Path
from typing import Callable


def run_progress(run_dir: Path, cache: Path) -> tuple[int, int, int] | None:
    """(round, ledger entries in the last checkpoint, responses in the cache) of a run in progress, or
    None while a file is missing or locked. The ledger is an append-only log (a DeltaChannel), so the
    state is rebuilt through the task's graph, as the runner does on resume."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    from cooplab.graphs.checkpoint_serde import serializer
    from cooplab.limits import ConfigError, flags
    from cooplab.runs import registry, runner
    from cooplab.runs.config import RunConfig, task_params

    if not (run_dir / "checkpoints.sqlite").exists() or not cache.exists():
        return None
    try:
        with sqlite3.connect(str(cache), timeout=0.2) as db:
            rows = db.execute("SELECT count(*) FROM responses").fetchone()[0]
        raw = json.loads((run_dir / "config.json").read_text())
        task = registry.get(
            raw["task"]
        )  # the settings the graph is built from (the model files and cache are the run's business)
        config = RunConfig(
            task=task.name,
            agents=raw["agents"],
            seed=raw["seed"],
            record=raw["record"],
            params=task_params(task, raw["params"], raw["agents"], flags()),
        )
        conn = sqlite3.connect(str(run_dir / "checkpoints.sqlite"), timeout=0.2, check_same_thread=False)
        try:
            values = (
                task.build(config, checkpointer=SqliteSaver(conn, serde=serializer(task)))
                .get_state({"configurable": {"thread_id": runner.thread_id(task, config)}})
                .values
            )
        finally:
            conn.close()
    except (sqlite3.Error, OSError, ValueError, ConfigError):
        return None
    if not values:
        return None
    return int(values.get("round", 0)), len(values.get("ledger") or []), rows


def checkpoints(run_dir: Path) -> int:
    """Checkpoints of the run's graph written so far by a run in progress (not its subgraphs', such
    as the steps of tool loops; 0 while the file is missing or locked)."""
    db = run_dir / "checkpoints.sqlite"
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(str(db), timeout=0.2) as c:
            return c.execute("SELECT count(*) FROM checkpoints WHERE checkpoint_ns = ''").fetchone()[0]
    except sqlite3.Error:
        return 0


def kill_when(proc, ready: Callable[[], bool], timeout: float = 120.0) -> bool:
    """SIGKILL ``proc`` as soon as ``ready()`` holds, checked while the process is frozen (SIGSTOP) so
    that what was seen is what the killed process had written. False if it ended first."""
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        os.kill(proc.pid, signal.SIGSTOP)
        if ready():
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            return True
        os.kill(proc.pid, signal.SIGCONT)
        time.sleep(0.02)
    return False
