"""Run directories as files: the reading and writing every layer shares.

A run directory (config -> graph -> run dir -> evals) holds JSON files, Parquet (or CSV) tables,
``traces.jsonl`` and ``checkpoints.sqlite``. Tasks write their outputs and the evals read them
through these helpers; the engine (:mod:`cooplab.runs.store`) adds the run's life cycle on top:
making the directory, checking it before a resume, recording the environment.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cooplab._version import __version__

#: the trace file of a run directory (LangSmith run format, one run per line)
TRACES_FILE = "traces.jsonl"


class RunDirError(ValueError):
    """A user-facing problem with a run directory."""


def readonly_uri(path: Path) -> str:
    """An SQLite URI that reads ``path`` without creating or changing anything next to it: read-only,
    and immutable (no -wal/-shm files made) unless a -wal file left by a killed writer holds data."""
    from urllib.parse import quote

    wal = Path(str(path) + "-wal")
    return f"file:{quote(str(Path(path).resolve()))}?mode=ro" + ("" if wal.exists() and wal.stat().st_size else "&immutable=1")


def code_version(git: dict[str, Any] | None = ...) -> str:  # type: ignore[assignment]
    """cooplab's version, plus the short commit when it runs from a checkout (``git``: a
    :func:`git_commit` already looked up)."""
    git = git_commit() if git is ... else git
    return f"{__version__}+{git['commit'][:7]}" if git else __version__


def machine() -> str:
    """This machine in one line (system, architecture, cores, Python)."""
    return f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def now() -> str:
    """The time now, UTC, ISO 8601 to the second."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def git_commit() -> dict[str, Any] | None:
    """The commit (and whether the tree has uncommitted changes) of the checkout cooplab runs from,
    or None when it runs from an installed wheel (no source tree around the package)."""
    here = Path(__file__).resolve().parent.parent  # the checkout (graphs/ is one of its folders)
    if not (here / "pyproject.toml").exists() or not (here / ".git").exists():
        return None
    try:
        sha = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": sha, "dirty": bool(dirty)} if sha else None



def jsonable(x: Any) -> Any:
    """``x`` with numpy values, paths and tuples turned into JSON types (non-finite floats become null)."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    if isinstance(x, np.bool_):
        return bool(x)
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating, float)):
        v = float(x)
        return v if np.isfinite(v) else None
    if isinstance(x, Path):
        return str(x)
    return x


def write_json(path: Path, obj: Any) -> None:
    """Write ``obj`` as indented JSON, atomically (a temporary file renamed over ``path``)."""
    tmp = Path(str(path) + ".tmp")
    tmp.write_text(json.dumps(jsonable(obj), indent=2) + "\n")
    tmp.replace(path)


def read_json(path: Path) -> Any:
    """The JSON value in ``path``."""
    return json.loads(Path(path).read_text())


def write_table(df: pd.DataFrame, out: Path, stem: str, csv: bool = False) -> Path:
    """Write ``out/stem.parquet`` (or ``.csv``) and return its path."""
    path = out / f"{stem}.{'csv' if csv else 'parquet'}"
    if csv:
        df.to_csv(path, index=False)
    else:
        df.to_parquet(path, index=False)
    return path


def read_table(out: Path, stem: str) -> pd.DataFrame:
    """``out/stem.parquet`` or ``out/stem.csv``, whichever exists (else a one-line RunDirError)."""
    for ext, reader in (("parquet", pd.read_parquet), ("csv", pd.read_csv)):
        p = Path(out) / f"{stem}.{ext}"
        if p.exists():
            return reader(p)
    raise RunDirError(f"{out} has no {stem}.parquet or {stem}.csv; is it a cooplab run directory?")
