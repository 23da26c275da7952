"""A run's state round by round, read back from its checkpoints (``checkpoints.sqlite``).

A society's tables hold per-round means; who caught, earned and believed what in each round lives in
the graph's checkpoints, one after every node. :func:`updates` replays them in order (read-only, the
top-level graph only, and only the values a cooplab checkpoint may hold: see
:mod:`cooplab.graphs.checkpoint_serde`; a file holding anything else is refused in one line) and yields, per checkpoint,
the channels its node wrote and the state after
it. A damaged or missing file yields nothing and the caller says so.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cooplab.graphs.rundir import readonly_uri

CHECKPOINTS = "checkpoints.sqlite"
#: checkpoints replayed at most (a 10,000-round run is read in part, and the page says so)
MAX_CHECKPOINTS = 20_000


class HistoryError(ValueError):
    """The checkpoints cannot be read (one line)."""


def updates(out: Path) -> Iterator[tuple[set[str], dict[str, Any]]]:
    """(channels written, state after) for each top-level checkpoint of the run, oldest first."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    from cooplab.graphs.checkpoint_serde import CheckpointRefused, CheckpointSerializer

    path = out / CHECKPOINTS
    if not path.is_file():
        raise HistoryError("this run has no checkpoints.sqlite, so its per-agent rounds cannot be shown")
    try:
        conn = sqlite3.connect(readonly_uri(path), uri=True, check_same_thread=False)
    except sqlite3.Error as exc:
        raise HistoryError(f"cannot open checkpoints.sqlite: {exc}") from None
    try:
        saver = SqliteSaver(conn, serde=CheckpointSerializer())  # only what cooplab stores is read back
        cps = [
            c
            for c in saver.list(None, limit=MAX_CHECKPOINTS)
            if not c.config.get("configurable", {}).get("checkpoint_ns")
        ]
    except CheckpointRefused as exc:
        conn.close()
        raise HistoryError(f"{out.name}/checkpoints.sqlite is not shown: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - damaged file or an unknown serializer format
        conn.close()
        raise HistoryError(f"checkpoints.sqlite could not be read ({type(exc).__name__}: {str(exc)[:200]})") from None
    try:
        for c in sorted(cps, key=lambda c: (c.metadata or {}).get("step", -2)):
            cp = c.checkpoint
            yield set(cp.get("updated_channels") or ()), dict(cp.get("channel_values") or {})
    finally:
        conn.close()
