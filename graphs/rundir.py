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

# the format's versions and the converters of earlier config.json files: cooplab.graphs.formats
from cooplab.graphs.formats import CONFIG_FIELDS, CONFIG_VERSION, upgrade_config, upgrade_llm  # noqa: F401
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
        raise RunDirBusy(
            f"{out} is in use by another cooplab process ({holder}); wait for it to end (or stop it), "
            f"then run or resume this directory again"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def _holder(fd: int) -> str:
    """ "pid N" as the lock file says, or "pid unknown"."""
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
    return f"file:{quote(os.fsencode(Path(path).resolve()))}?mode=ro" + (
        "" if wal.exists() and wal.stat().st_size else "&immutable=1"
    )


def code_version(git: dict[str, Any] | None = ...) -> str:  # type: ignore[assignment]
    """cooplab's version, plus the short commit when it runs from a checkout (``git``: a
    :func:`git_commit` already looked up)."""
    git = git_commit() if git is ... else git
    return f"{__version__}+{git['commit'][:7]}" if git else __version__


def ensure_writable(out: Path, error: type[Exception] = None) -> Path:  # type: ignore[assignment]
    """Create ``out`` (and parents) and check that a file can be written there; ``error`` (default
    :class:`RunDirError`) with one line otherwise."""
    out = Path(out)
    probe = out / ".cooplab-write-test"
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe.write_text("ok")
    except OSError as exc:
        raise (error or RunDirError)(f"cannot write to --out {out}: {exc.strerror or exc}") from None
    finally:
        with contextlib.suppress(OSError):
            probe.unlink(missing_ok=True)
    return out


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
        sha = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
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


def write_jsonl(path: Path, rows: Any) -> None:
    """Write ``rows`` as JSON lines (UTF-8; values JSON cannot hold as their text; a lone surrogate
    written as U+FFFD, so no record a model wrote can make the file fail)."""
    with open(path, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(clean_text(json.dumps(row, ensure_ascii=False, default=str)) + "\n")


def read_json(path: Path) -> Any:
    """The JSON value in ``path``: a one-line :class:`RunDirError` when it is not JSON (or is nested
    absurdly deep, :func:`cooplab.limits.parse_json`); OSError when it cannot be read."""
    from cooplab.limits import parse_json

    return parse_json(Path(path).read_bytes(), str(path), error=RunDirError)


def _clean_cell(value: Any) -> Any:
    """A table cell with every lone surrogate in its strings replaced (lists, tuples and dicts too)."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {_clean_cell(k): _clean_cell(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_clean_cell(v) for v in value)
    if isinstance(value, np.ndarray) and value.dtype == object:
        return np.array([_clean_cell(v) for v in value.tolist()], dtype=object)
    return value


def frame(rows: Any) -> pd.DataFrame:
    """A table of records (a list of dicts), every string in it, column names included, with its
    lone surrogates replaced: pandas' text columns (Arrow strings) refuse a lone surrogate when the
    frame is made, before any writer could replace it."""
    return pd.DataFrame([{_clean_cell(str(k)): _clean_cell(v) for k, v in dict(r).items()} for r in rows])


def write_table(df: pd.DataFrame | list[dict[str, Any]], out: Path, stem: str, csv: bool = False) -> Path:
    """Write ``out/stem.parquet`` (or ``.csv``) and return its path. ``df`` is a DataFrame or a list of
    records (:func:`frame`). Strings that UTF-8 cannot hold (a lone surrogate), also inside lists
    and dicts in a cell and in column names, are written with U+FFFD in their place."""
    if not isinstance(df, pd.DataFrame):
        df = frame(df)
    path = out / f"{stem}.{'csv' if csv else 'parquet'}"
    try:
        _write(df, path, csv)
    except UnicodeEncodeError:
        clean = df.map(_clean_cell)
        clean.columns = [_clean_cell(str(c)) for c in clean.columns]
        _write(clean, path, csv)
    return path


def _write(df: pd.DataFrame, path: Path, csv: bool) -> None:
    # through a file Python opened: a folder whose name is not UTF-8 (bytes of another encoding) is
    # written like any other (pyarrow would refuse the name itself, after the run's work was done)
    if csv:
        with open(path, "w", encoding="utf-8", newline="") as fh:
            df.to_csv(fh, index=False)
    else:
        with open(path, "wb") as fh:
            df.to_parquet(fh, index=False)


#: a table is read only when its footer promises at most this many cells (rows x columns)
MAX_TABLE_CELLS = 50_000_000
#: ... and at most this many bytes once decoded (a CSV file: at most this many bytes on disk)
MAX_TABLE_BYTES = 1 << 30
#: bytes one value of a Parquet physical type takes once decoded (byte arrays: measured)
_WIDTH = {"BOOLEAN": 1, "INT32": 4, "INT64": 8, "INT96": 12, "FLOAT": 4, "DOUBLE": 8}
#: what pandas adds per text value (a Python str object) beyond its characters
_OBJECT_BYTES = 56


def _gb(n: float) -> str:
    return f"{n / (1 << 30):.1f} GB" if n >= 1 << 30 else f"{n / (1 << 20):.0f} MB"


def inside(out: Path, name: str) -> Path:
    """``out/name``, refused (a one-line :class:`RunDirError`) when it resolves outside ``out``: a
    symbolic link (or ``..``) that leaves the run directory is not the run's file."""
    base = Path(out).resolve()
    path = Path(out) / name
    try:
        path.resolve().relative_to(base)
    except ValueError:
        raise RunDirError(
            f"{path} leads outside its run directory (a symbolic link to "
            f"{os.fsdecode(os.path.realpath(path))!r}); it is not read"
        ) from None
    except (OSError, RuntimeError) as exc:  # a symlink loop
        raise RunDirError(f"{path} cannot be resolved ({exc}); it is not read") from None
    return path


def table_footprint(path: Path, fh: Any = None) -> tuple[int, int, int]:
    """(rows, columns, bytes once decoded, estimated) of a Parquet file from its footer, without
    reading its data; a one-line :class:`RunDirError` when it is over :data:`MAX_TABLE_CELLS` or
    :data:`MAX_TABLE_BYTES`. Text columns are counted by their stored (uncompressed) size here;
    :func:`read_table` measures their decoded size before expanding them. ``fh``: the file, opened
    (else ``path`` is opened here)."""
    import pyarrow.parquet as pq

    if fh is None:
        with open(path, "rb") as own:
            return table_footprint(path, own)
    try:
        md = pq.ParquetFile(fh).metadata
    except Exception as exc:  # noqa: BLE001 - not Parquet, damaged footer
        raise RunDirError(f"{path} is not a readable Parquet file ({type(exc).__name__}: {str(exc)[:160]})") from None
    rows, cols = md.num_rows, md.num_columns
    if rows < 0 or cols < 0 or rows * max(cols, 1) > MAX_TABLE_CELLS:
        raise RunDirError(
            f"{path} holds {rows:,} rows x {cols:,} columns by its footer, over the {MAX_TABLE_CELLS:,} cells "
            "cooplab reads; it is not read (is it a cooplab table?)"
        )
    est = 0
    for g in range(md.num_row_groups):
        rg = md.row_group(g)
        for c in range(rg.num_columns):
            ch = rg.column(c)
            width = _WIDTH.get(ch.physical_type)
            if ch.physical_type == "FIXED_LEN_BYTE_ARRAY":
                width = max(1, int(md.schema.column(c).length or 1))
            stored = max(0, int(ch.total_uncompressed_size or 0))
            if width is not None:
                est += max(stored, int(ch.num_values) * width)
            else:
                dict_bytes = stored if ch.has_dictionary_page and "." in ch.path_in_schema else 0
                # text: measured by read_table; a nested text column: each value may be the longest entry of its
                # dictionary
                est += max(stored, int(ch.num_values) * (_OBJECT_BYTES + (dict_bytes if dict_bytes else 0)))
    if est > MAX_TABLE_BYTES:
        raise RunDirError(
            f"{path} would take about {_gb(est)} of memory to read ({rows:,} rows x {cols:,} columns by its footer), "
            f"over the {_gb(MAX_TABLE_BYTES)} cooplab reads; it is not read (is it a cooplab table?)"
        )
    return rows, cols, est


def text_columns(schema: Any) -> list[str]:
    """The names of an Arrow schema's top-level text and binary columns (read as dictionaries, then
    measured, by :func:`expand`)."""
    import pyarrow as pa

    return [
        f.name
        for f in schema
        if pa.types.is_string(f.type)
        or pa.types.is_large_string(f.type)
        or pa.types.is_binary(f.type)
        or pa.types.is_large_binary(f.type)
    ]


def expand(table: Any, path: Path, text: list[str], base: int = 0) -> Any:
    """``table`` (its ``text`` columns read as dictionaries) with those columns decoded, after
    measuring what decoding them takes: over :data:`MAX_TABLE_BYTES` (with ``base`` bytes already
    counted) is a one-line :class:`RunDirError` naming ``path``, and nothing is decoded."""
    import pyarrow as pa
    import pyarrow.compute as pc

    decoded = base
    for name in text:
        for chunk in table.column(name).chunks:
            if isinstance(chunk, pa.DictionaryArray) and len(chunk):
                # pyarrow.compute makes its functions when imported: its stubs name neither sum nor binary_length
                lengths = pc.binary_length(chunk.dictionary)  # pyright: ignore[reportAttributeAccessIssue]  # unstubbed
                total = pc.sum(pc.take(lengths, chunk.indices))  # pyright: ignore[reportAttributeAccessIssue]  # unstubbed
                decoded += int(total.as_py() or 0)
        if decoded > MAX_TABLE_BYTES:
            raise RunDirError(
                f"{path} would take more than {_gb(MAX_TABLE_BYTES)} of memory once its text column {name!r} is "
                f"expanded ({table.num_rows:,} rows); it is not read (is it a cooplab table?)"
            )
    if not text:
        return table
    plain = pa.schema(
        [
            pa.field(
                f.name, f.type.value_type if f.name in text and pa.types.is_dictionary(f.type) else f.type, f.nullable
            )
            for f in table.schema
        ],
        metadata=table.schema.metadata,
    )
    return table.cast(plain)


def _read_parquet(path: Path) -> pd.DataFrame:
    """A Parquet table, checked against the bounds before any value is decoded: the footer first
    (:func:`table_footprint`), then text columns read as dictionaries (their stored size) and their
    decoded size measured before they are expanded (:func:`expand`: a short file of one long text
    repeated would otherwise ask for gigabytes)."""
    try:
        import pyarrow.parquet as pq
    except ImportError:  # the light core has fastparquet only (pyarrow comes with the analysis extra)
        return _read_parquet_fastparquet(path)

    with open(path, "rb") as fh:  # Python opens it: a folder name that is not UTF-8 reads like any other
        _rows, _cols, est = table_footprint(path, fh)
        text = text_columns(pq.ParquetFile(fh).schema_arrow)
        table = pq.ParquetFile(fh, read_dictionary=text or None).read(use_pandas_metadata=True)
    return expand(table, path, text, est).to_pandas()


#: Parquet physical types of fastparquet's footer (thrift enum numbers) -> bytes one value takes
_FP_WIDTH = {0: 1, 1: 4, 2: 8, 3: 12, 4: 4, 5: 8}


def _read_parquet_fastparquet(path: Path) -> pd.DataFrame:
    """A Parquet table read with fastparquet (installs without pyarrow), checked against the same
    bounds from its footer first. fastparquet decodes a dictionary-encoded text column into
    references to the dictionary's strings, so a repeated long text costs one pointer per row
    (counted here), not one copy per row as in Arrow."""
    import fastparquet

    with open(path, "rb") as fh:
        try:
            pf = fastparquet.ParquetFile(fh)
            rows, cols = int(pf.count()), len(pf.columns)
        except Exception as exc:  # noqa: BLE001 - not Parquet, damaged footer
            raise RunDirError(
                f"{path} is not a readable Parquet file ({type(exc).__name__}: {str(exc)[:160]})"
            ) from None
        if rows < 0 or cols < 0 or rows * max(cols, 1) > MAX_TABLE_CELLS:
            raise RunDirError(
                f"{path} holds {rows:,} rows x {cols:,} columns by its footer, over the {MAX_TABLE_CELLS:,} cells "
                "cooplab reads; it is not read (is it a cooplab table?)"
            )
        est = 0
        for rg in pf.fmd.row_groups or []:
            for ch in rg.columns or []:
                md = ch.meta_data
                stored = max(0, int(md.total_uncompressed_size or 0))
                width = _FP_WIDTH.get(md.type, _OBJECT_BYTES)
                est += max(stored, max(0, int(md.num_values or 0)) * width)
        if est > MAX_TABLE_BYTES:
            raise RunDirError(
                f"{path} would take about {_gb(est)} of memory to read ({rows:,} rows x {cols:,} columns by its "
                f"footer), over the {_gb(MAX_TABLE_BYTES)} cooplab reads; it is not read (is it a cooplab table?)"
            )
        return pf.to_pandas()


#: columns of cooplab's tables that hold identifiers: read from a CSV table as text, never as numbers
#: (a call id such as ``5e41512851534475`` or ``0123456789abcdef`` is not a number)
ID_COLUMNS = ("call_id", "model", "run_id", "thread_id", "trace_id")


#: columns that are text whatever they look like (a CSV reader would make "5e415128" a number)
TEXT_COLUMNS = ("agent_id", "call_id", "cost_usd_exact", "units", "rate")


def read_table(out: Path, stem: str, *, as_written: bool = False) -> pd.DataFrame:
    """``out/stem.parquet`` or ``out/stem.csv``, whichever exists (else a one-line RunDirError), in
    today's shape (:func:`cooplab.graphs.tables.upgrade`: the agent key and the money columns), or
    with ``as_written`` as the file holds it (``cooplab migrate`` converts it).

    A run directory is data, never trusted: a file that is a symbolic link leaving ``out`` is
    refused (:func:`inside`), and so is a table whose footer (Parquet) or size (CSV) says it would
    take more than :data:`MAX_TABLE_BYTES` of memory or hold more than :data:`MAX_TABLE_CELLS`
    cells, each in one line naming the file, before its values are read."""
    from cooplab.graphs.tables import upgrade as today

    def upgrade(name: str, df: pd.DataFrame) -> pd.DataFrame:
        return df if as_written else today(name, df)

    for ext in ("parquet", "csv"):
        p = Path(out) / f"{stem}.{ext}"
        if p.exists() or p.is_symlink():
            p = inside(out, p.name)
            if ext == "parquet":
                return upgrade(stem, _read_parquet(p))
            size = p.stat().st_size
            if size > MAX_TABLE_BYTES // 4:
                raise RunDirError(
                    f"{p} is {_gb(size)}, over the {_gb(MAX_TABLE_BYTES // 4)} of CSV cooplab reads; it is not read"
                )
            return upgrade(stem, _read_csv(p))
    raise RunDirError(f"{out} has no {stem}.parquet or {stem}.csv; is it a cooplab run directory?")


def _read_csv(path: Path) -> pd.DataFrame:
    """A CSV table, its identifier and exact-amount columns (:data:`ID_COLUMNS`, :data:`TEXT_COLUMNS`) as text."""
    return pd.read_csv(path, dtype={c: "string" for c in (*ID_COLUMNS, *TEXT_COLUMNS)})


def read_config(out: Path) -> dict[str, Any]:
    """A run directory's config.json in the current shape (:func:`upgrade_config`); readers of
    finished runs (analyses, reports) use this, so runs of every version read alike."""
    raw = read_json(Path(out) / "config.json")
    if not isinstance(raw, dict):
        raise RunDirError(f"{out}/config.json is not a JSON object")
    return upgrade_config(raw)
