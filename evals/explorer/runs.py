"""Finding and reading run directories for the explorer, never raising on a damaged one.

:func:`discover` walks the folders given to ``cooplab view`` (recursively, sweeps' cells too) and
returns one :class:`RunDir` per directory holding ``config.json`` or ``summary.json``. A
:class:`RunDir` reads its files lazily; every problem (JSON that does not parse, a table that does
not load) becomes a line in :attr:`RunDir.notes` shown on the page, never an exception.

A run folder is data, never trusted: every file the explorer reads goes through :meth:`RunDir.file`,
which refuses a symbolic link (or ``..``) leading outside the run folder; tables are read by
:func:`cooplab.graphs.rundir.read_table`, which also refuses a table whose footer asks for more
memory than it allows; a folder whose name is not UTF-8 is listed under a readable name
(:func:`shown`), its undecodable bytes written as ``\\xNN``.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cooplab.evals.values import cut, human_bytes
from cooplab.graphs import rundir, runfiles

#: the folders of a sweep or profile directory that hold its run directories
RUN_FOLDERS = ("cells", "runs", "games")
#: JSON files larger than this are not parsed (config.json and summary.json are a few kB)
MAX_JSON_BYTES = 16 << 20

#: folders walked below each root at most (a home directory given by mistake stays quick)
MAX_DIRS = 20_000
#: runs listed at most
MAX_RUNS = 5_000
#: how deep below a root the walk goes
MAX_DEPTH = 8
#: directories never entered
SKIP = {".git", "node_modules", "__pycache__", ".venv", "figures", "artifacts", "sandbox", "workspace"}


def read_json(path: Path) -> tuple[Any, str | None]:
    """(the parsed file, None) or (None, what is wrong with it, in one line); never raises."""
    try:
        if path.stat().st_size > MAX_JSON_BYTES:
            return None, f"{path.name} is {human_bytes(path.stat().st_size)}, too large to show"
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"cannot read {path.name}: {getattr(exc, 'strerror', None) or exc}"
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        return None, f"{path.name} is damaged (not valid JSON: {exc.msg} at line {exc.lineno})"
    except (ValueError, RecursionError) as exc:
        return None, f"{path.name} is damaged ({cut(str(exc), 120)})"


def read_text_head(path: Path, limit: int) -> str:
    """The first ``limit`` bytes of a file as text (undecodable bytes replaced; "" when unreadable)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(limit).decode("utf-8", errors="replace")
    except OSError:
        return ""


def is_run_dir(p: Path) -> bool:
    """Whether ``p`` is a run directory: a folder holding config.json or summary.json (a run of
    cooplab), or traces.jsonl (a graph traced by :class:`~cooplab.graphs.tracing.JsonlTracer`)."""
    return p.is_dir() and any((p / name).is_file() for name in ("config.json", "summary.json", rundir.TRACES_FILE))


def shown(text: Any) -> str:
    """A path or name as text a page can hold: bytes that are not UTF-8 (a folder named in another
    encoding, kept by Python as lone surrogates) written as ``\\xNN``."""
    t = os.fsdecode(text) if isinstance(text, (bytes, os.PathLike)) else str(text)
    try:
        t.encode("utf-8")
        return t
    except UnicodeEncodeError:
        pass
    try:
        return t.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a lone surrogate that stands for no byte
        return t.encode("utf-8", "backslashreplace").decode("utf-8")


class ConfigCache:
    """config.json of each run folder as last read, kept while the file's (inode, mtime_ns, size)
    stay the same: the explorer's pages look up a run's parent and forks among every run served
    (:mod:`cooplab.evals.explorer.forks`), and with this a page view reads only the files that
    changed since the last one. A changed, replaced, removed or new file is read again. The parsed
    objects are shared between the readers of a folder: nothing may change them. Safe to share
    between the server's threads."""

    def __init__(self) -> None:
        self._kept: dict[Path, tuple[tuple[int, int, int], Any, tuple[str, ...]]] = {}
        self._lock = threading.Lock()

    def read(self, path: Path) -> tuple[Any, list[str]]:
        """(config.json as a JSON object, or {}; the notes a reader shows about it)."""
        try:
            st = path.stat()
        except OSError:
            st = None
        if st is None or not stat.S_ISREG(st.st_mode):
            with self._lock:
                self._kept.pop(path, None)
            return {}, [f"no {path.name} (the run has not finished, or the directory is incomplete)"]
        key = (st.st_ino, st.st_mtime_ns, st.st_size)
        hit = self._kept.get(path)
        if hit is not None and hit[0] == key:
            return hit[1], list(hit[2])
        obj, problem = read_json(path)
        notes: tuple[str, ...] = ()
        if problem:
            obj, notes = {}, (problem,)
        elif not isinstance(obj, dict):
            obj, notes = {}, (f"{path.name} is not a JSON object",)
        with self._lock:
            self._kept[path] = (key, obj, notes)
        return obj, list(notes)

    def keep_only(self, folders: set[Path]) -> None:
        """Forget the files of folders no longer served (a removed run)."""
        with self._lock:
            for path in [p for p in self._kept if p.parent not in folders]:
                del self._kept[path]


@dataclass
class RunDir:
    """One run directory as the explorer sees it: ``id`` is its address in the app's URLs
    (``<root number>/<relative path>``), ``out`` the directory."""

    id: str
    out: Path
    root: Path
    page: str = "run"  # the page of the app that shows it ("group": a sweep or a profile)
    notes: list[str] = field(default_factory=list)
    _json: dict[str, Any] = field(default_factory=dict, repr=False)
    _tables: dict[str, Any] = field(default_factory=dict, repr=False)
    traced: Any = field(default=None, repr=False)  # its traces.jsonl once read (explorer.traces.trace_file)
    #: task name -> the registered task (its ``Results`` types the summary's results; None: any JSON)
    task_for: Any = field(default=None, repr=False)
    _summary: Any = field(default=None, repr=False)
    #: what earlier readers of this folder read of its config.json (:class:`ConfigCache`; None: read it)
    configs: ConfigCache | None = field(default=None, repr=False)

    def file(self, name: str) -> Path | None:
        """``out/name`` when it stays inside the run folder, else None and a note (a symbolic link
        leading elsewhere is never read: a shared run folder must not show the reader's own files)."""
        try:
            return rundir.inside(self.out, name)
        except rundir.RunDirError as exc:
            self.notes.append(shown(exc))
            return None

    def _read(self, name: str) -> dict[str, Any]:
        if name not in self._json:
            path = self.file(name)
            obj: Any = {}
            if path is None:
                pass
            elif name == "config.json" and self.configs is not None:
                obj, problems = self.configs.read(path)
                self.notes.extend(problems)
            elif path.is_file():
                obj, problem = read_json(path)
                if problem:
                    self.notes.append(problem)
                    obj = {}
                elif not isinstance(obj, dict):
                    self.notes.append(f"{name} is not a JSON object")
                    obj = {}
                elif name == runfiles.SUMMARY_FILE and self.page == "run" and not runfiles.is_many_runs(self.out):
                    obj = self._typed(obj)
            else:
                self.notes.append(f"no {name} (the run has not finished, or the directory is incomplete)")
            self._json[name] = obj
        return self._json[name]

    def _typed(self, obj: dict[str, Any]) -> dict[str, Any]:
        """A run's summary.json through its schema: the validated file's JSON, or {} and one note
        naming the field that is damaged (never the damaged values shown as if they were results)."""
        try:
            self._summary = runfiles.parse_summary(
                obj, runfiles.SUMMARY_FILE, runfiles.results_for(self.task_for)(obj.get("task"))
            )
        except runfiles.SchemaError as exc:
            self.notes.append(cut(shown(exc), 400))
            return {}
        return self._summary.as_json()

    @property
    def run_summary(self) -> runfiles.RunSummary | None:
        """summary.json as its typed model (None when absent or damaged; a note says which)."""
        self._read(runfiles.SUMMARY_FILE)
        return self._summary

    @property
    def config(self) -> dict[str, Any]:
        """config.json ({} when absent or damaged; a note says which)."""
        return self._read("config.json")

    @property
    def summary(self) -> dict[str, Any]:
        """summary.json ({} when absent or damaged; a note says which)."""
        return self._read("summary.json")

    @property
    def task(self) -> str:
        t = self.summary.get("task") or self.config.get("task")
        return t if isinstance(t, str) and t else "?"

    @property
    def status(self) -> str:
        s = self.summary.get("status")
        return s if isinstance(s, str) and s else ("running or unfinished" if self.config else "?")

    @property
    def name(self) -> str:
        """The run's folder relative to the folder it was found under."""
        rel = self.out.relative_to(self.root).as_posix()
        return shown(self.root.name if rel == "." else rel)

    def has_table(self, name: str) -> bool:
        return any(
            (self.out / f"{name}.{ext}").is_file() or (self.out / f"{name}.{ext}").is_symlink()
            for ext in ("parquet", "csv")
        )

    def table(self, name: str) -> Any:
        """The table ``name`` as a DataFrame, or None when absent or damaged (a note says which)."""
        if name not in self._tables:
            df = None
            if self.has_table(name):
                try:
                    df = rundir.read_table(self.out, name)
                except (
                    rundir.RunDirError
                ) as exc:  # outside the folder, or over the size bounds: one line naming the file
                    self.notes.append(f"table {name} is not shown: {cut(shown(exc), 300)}")
                except Exception as exc:  # noqa: BLE001 - a damaged table is a note, never a crash
                    self.notes.append(
                        f"table {name} could not be read ({cut(shown(f'{type(exc).__name__}: {exc}'), 200)})"
                    )
            self._tables[name] = df
        return self._tables[name]

    @property
    def tables(self) -> list[str]:
        try:
            return sorted(
                {
                    shown(p.stem)
                    for p in self.out.iterdir()
                    if p.suffix in (".parquet", ".csv") and (p.is_file() or p.is_symlink())
                }
            )
        except OSError:
            return []

    @property
    def date(self) -> str:
        """When the run last wrote its summary (else its config), as ``YYYY-MM-DD HH:MM`` UTC."""
        import datetime as dt

        for name in ("summary.json", "config.json"):
            try:
                t = (self.out / name).stat().st_mtime
            except OSError:
                continue
            return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%d %H:%M")
        return ""


def discover(roots: list[Path], task_for: Any = None, configs: ConfigCache | None = None) -> list[RunDir]:
    """Every run directory at or below ``roots`` (sorted by root, then path). Symbolic links are not
    followed; unreadable folders are skipped. ``task_for``: the registered tasks (their results
    models type each summary); ``configs``: config.json as read before (only changed files are read)."""
    found: list[RunDir] = []
    ids: set[str] = set()
    for n, root in enumerate(roots):
        root = root.resolve()
        seen = 0
        for dirpath, dirnames, _files in os.walk(root, followlinks=False, onerror=lambda e: None):
            here = Path(dirpath)
            depth = len(here.relative_to(root).parts)
            seen += 1
            dirnames[:] = (
                sorted(d for d in dirnames if d not in SKIP and not d.startswith(".")) if depth < MAX_DEPTH else []
            )
            if seen > MAX_DIRS or len(found) >= MAX_RUNS:
                dirnames[:] = []
                continue
            if is_run_dir(here):
                rel = shown(here.relative_to(root).as_posix())
                rid = f"{n}/{rel}" if rel != "." else f"{n}"
                while rid in ids:  # a readable name that another folder already has (its bytes differ)
                    rid += "~"
                ids.add(rid)
                found.append(RunDir(id=rid, out=here, root=root, task_for=task_for, configs=configs))
    return found
