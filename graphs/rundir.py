"""Run directories as files: the reading and writing every layer shares.

A run directory (config -> graph -> run dir -> evals) holds JSON files, Parquet (or CSV) tables,
``traces.jsonl`` and ``checkpoints.sqlite``. Tasks write their outputs and the evals read them
through these helpers; the engine (:mod:`cooplab.runs.store`) adds the run's life cycle on top:
making the directory, checking it before a resume, recording the environment.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import platform
import subprocess
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pandas as pd

from cooplab._version import __version__
from cooplab.limits import clean_text

#: the trace file of a run directory (LangSmith run format, one run per line)
TRACES_FILE = "traces.jsonl"


class RunDirError(ValueError):
    """A user-facing problem with a run directory."""


# --- one writer at a time ------------------------------------------------------------------
#: the file in a run directory whose lock a process writing the directory holds
LOCK_FILE = ".cooplab.lock"


class RunDirBusy(RunDirError):
    """Another process (or another thread of this one) is writing the run directory (one line)."""


_held: dict[str, list[Any]] = {}  # resolved directory -> [descriptor, owning thread, depth]
_held_guard = threading.Lock()


@contextmanager
def locked(out: Path) -> Iterator[Path]:
    """Hold ``out``'s lock while the block runs: every process that writes a run directory (a run,
    a resume, a sweep's cell, a judge's score) takes it first, so a second one stops at once with a
    :class:`RunDirBusy` line naming the holder's pid, before it changes anything. The lock is the
    kernel's (``flock`` on ``out/.cooplab.lock``), so a process that dies, even by ``kill -9``,
    releases it; it is not inherited by the programs a run starts. The same thread may take it again
    (a run that judges itself); another thread of the process may not. ``out`` must exist."""
    out = Path(out)
    key = str(out.resolve())
    me = threading.get_ident()
    with _held_guard:
        held = _held.get(key)
        if held is not None and held[1] == me:
            held[2] += 1
        elif held is not None:
            raise RunDirBusy(f"{out} is being written by another run in this process; wait for it to end")
        else:
            _held[key] = [_acquire(out), me, 1]
    try:
        yield out
    finally:
        with _held_guard:
            held = _held[key]
            held[2] -= 1
            if held[2] == 0:
                del _held[key]
                os.close(held[0])  # closing the descriptor releases the lock


def _acquire(out: Path) -> int:
    """A descriptor of ``out/LOCK_FILE`` holding its exclusive lock (our pid written in it), or a
    one-line RunDirBusy / RunDirError."""
    import fcntl

    path = out / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise RunDirError(f"cannot lock {out} for writing ({path}: {exc.strerror or exc})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = _holder(fd)
        os.close(fd)
        raise RunDirBusy(f"{out} is in use by another cooplab process ({holder}); wait for it to end (or stop it), "
                         f"then run or resume this directory again") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def _holder(fd: int) -> str:
    """"pid N" as the lock file says, or "pid unknown"."""
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        text = ""
    return f"pid {text}" if text.isdigit() else "pid unknown"


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
    """``x`` with numpy values, paths and tuples turned into JSON types (non-finite floats become
    null, lone surrogates in strings U+FFFD: the file is UTF-8 text)."""
    if isinstance(x, str):
        return clean_text(x)
    if isinstance(x, dict):
        return {clean_text(str(k)): jsonable(v) for k, v in x.items()}
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


def write_atomic(path: Path, data: bytes, tmp: Path | None = None) -> None:
    """Write ``data`` to ``path`` all or nothing: into ``tmp`` (default ``path`` + ``.tmp``), flushed
    to disk, then renamed over ``path``. If any step fails (a full disk, a read-only folder) the
    OSError is raised, ``path`` is as it was and ``tmp`` is removed where the file system allows."""
    path = Path(path)
    tmp = Path(str(path) + ".tmp") if tmp is None else Path(tmp)
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        tmp.replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise


def write_json(path: Path, obj: Any) -> None:
    """Write ``obj`` as indented JSON, atomically (:func:`write_atomic`)."""
    write_atomic(path, (json.dumps(jsonable(obj), indent=2) + "\n").encode())


def read_json(path: Path) -> Any:
    """The JSON value in ``path``: a one-line :class:`RunDirError` when it is not JSON (or is nested
    absurdly deep, :func:`cooplab.limits.parse_json`); OSError when it cannot be read."""
    from cooplab.limits import parse_json

    return parse_json(Path(path).read_bytes(), str(path), error=RunDirError)


def write_table(df: pd.DataFrame, out: Path, stem: str, csv: bool = False) -> Path:
    """Write ``out/stem.parquet`` (or ``.csv``) and return its path. Strings that UTF-8 cannot hold
    (a lone surrogate) are written with U+FFFD in its place."""
    path = out / f"{stem}.{'csv' if csv else 'parquet'}"
    try:
        _write(df, path, csv)
    except UnicodeEncodeError:
        _write(df.map(lambda v: clean_text(v) if isinstance(v, str) else v), path, csv)
    return path


def _write(df: pd.DataFrame, path: Path, csv: bool) -> None:
    if csv:
        df.to_csv(path, index=False)
    else:
        df.to_parquet(path, index=False)


#: columns that are text whatever they look like (a CSV reader would make "5e415128" a number)
TEXT_COLUMNS = ("agent_id", "call_id", "cost_usd_exact", "units", "rate")


def read_table(out: Path, stem: str) -> pd.DataFrame:
    """``out/stem.parquet`` or ``out/stem.csv``, whichever exists (else a one-line RunDirError), in
    today's shape (:func:`cooplab.graphs.tables.upgrade`: the agent key and the money columns)."""
    from cooplab.graphs.tables import upgrade

    def csv(p: Path) -> pd.DataFrame:
        return pd.read_csv(p, dtype={c: str for c in TEXT_COLUMNS})

    for ext, reader in (("parquet", pd.read_parquet), ("csv", csv)):
        p = Path(out) / f"{stem}.{ext}"
        if p.exists():
            return upgrade(stem, reader(p))
    raise RunDirError(f"{out} has no {stem}.parquet or {stem}.csv; is it a cooplab run directory?")


# --- config.json versions ---------------------------------------------------------------------
#: the version of config.json this code writes (``"version"``; files without it are version 1)
CONFIG_VERSION = 2
#: the fields of every config.json (version 2): the run's settings, and ``record`` for what was
#: noted when it started (not a setting: the code version, the time, the environment, a dataset's hash)
CONFIG_FIELDS = ("version", "task", "agents", "seed", "csv", "params", "llm", "sandbox", "record")
#: version-1 top-level keys that were records, not settings
_V1_RECORDS = ("code_version", "created", "environment", "dataset", "sweep_cell", "sweep_condition", "bench_item")
#: version-1 names of the LLM block -> version 2 (one spelling per setting)
_V1_LLM = {"price_in_per_1k": "price_in", "price_out_per_1k": "price_out"}


def upgrade_config(raw: Any) -> Any:
    """A run's config.json in the current shape (version 2), from any version this code wrote.

    Version 1 (before the typed run configuration) kept each task's options beside the runner's
    fields at the top level (CPR's ``population`` and ``replicates``, every diners option, the
    game's ``game`` and ``players``, science's ``judge``), spelled the LLM prices ``price_in_per_1k``,
    listed models as ``{"default": ..., "1": ...}`` and put the sandbox's price in the LLM block.
    Version 2 puts every option of the task under ``params``, the LLM block in the fields of
    :class:`cooplab.agents.settings.LLMSettings`, the sandbox's in ``sandbox`` and what was only
    recorded under ``record``. Anything that is not an object is returned as it is (the checks
    that follow say what is wrong with it); the input is never changed."""
    if not isinstance(raw, dict) or "version" in raw:
        return raw
    runner = {"task", "agents", "seed", "csv", "llm", "sandbox", "params", *_V1_RECORDS}
    params = dict(raw["params"]) if isinstance(raw.get("params"), dict) else {}
    for key, value in raw.items():
        if key not in runner:
            params[key] = value  # a task option kept at the top level in version 1
    out: dict[str, Any] = {"version": CONFIG_VERSION, **{k: raw[k] for k in ("task", "agents", "seed", "csv") if k in raw}}
    out.setdefault("csv", False)
    out["params"] = raw["params"] if "params" in raw and not isinstance(raw["params"], dict) else params
    llm, rate = upgrade_llm(raw.get("llm"))
    out["llm"] = llm
    sandbox = raw.get("sandbox")
    if isinstance(sandbox, dict):
        sandbox = {**sandbox, "rate": sandbox.get("rate", rate if rate is not None else 0.0)}
    out["sandbox"] = sandbox
    out["record"] = {k: raw[k] for k in _V1_RECORDS if k in raw}
    return out


def upgrade_llm(llm: Any) -> tuple[Any, Any]:
    """A version-1 LLM block in version 2's spelling, and the sandbox price it held (0.0 if none);
    a version-2 block (or anything not an object) comes back as it is."""
    if not isinstance(llm, dict) or ("models" not in llm and not set(_V1_LLM) & set(llm) and "sandbox_usd_per_second" not in llm):
        return llm, 0.0
    llm = dict(llm)
    models = llm.pop("models", None)
    if isinstance(models, dict):
        llm["model"] = models.get("default")
        llm["agent_models"] = {k: v for k, v in models.items() if k != "default"}
    elif models is not None:
        llm["model"] = models  # wrong; the checks say so
    for old, new in _V1_LLM.items():
        if old in llm:
            llm[new] = llm.pop(old)
    return llm, llm.pop("sandbox_usd_per_second", 0.0)


def read_config(out: Path) -> dict[str, Any]:
    """A run directory's config.json in the current shape (:func:`upgrade_config`); readers of
    finished runs (analyses, reports) use this, so runs of every version read alike."""
    raw = read_json(Path(out) / "config.json")
    if not isinstance(raw, dict):
        raise RunDirError(f"{out}/config.json is not a JSON object")
    return upgrade_config(raw)
