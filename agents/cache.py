"""A deterministic SQLite cache of model responses (edsl-style).

The key is the SHA-256 of a canonical JSON of everything that determines a call: the model's
identity (provider, name, the server that answers unless it is the provider's default: see
``ModelSpec.identity``) and decoding parameters, the messages, the agent, the round, the phase,
the run's seed and the attempt (sample) index. Rerunning a config replays every call from the cache
without touching the model; a run killed mid-way and resumed replays the calls it had made.
A row holds the answer and the tokens it was charged (after validation: see ``agents/usage.py``)
and, if the endpoint reported impossible usage, why. The service re-validates the stored counts
on every replay, so a damaged or foreign cache can never charge more than the call's bound.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cooplab.limits import ConfigError, clean_text


def cache_key(**parts: Any) -> str:
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def default_cache_path() -> Path:
    env = os.environ.get("COOPLAB_CACHE")
    if env:
        return Path(env)
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return base / "cooplab" / "llm-cache.sqlite"


@dataclass
class CachedResponse:
    text: str
    input_tokens: int  # as stored: ``get`` returns the raw column values, validated by the caller
    output_tokens: int
    latency: float
    usage_error: str | None = None  # the endpoint's reported usage was rejected; charged at the bound
    created: str | None = None  # when the answer was stored (ISO 8601, UTC), read back by ``get``; None if unknown


_SQLITE_TIME = re.compile(r"(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2})")


def stored_at(value: Any) -> str | None:
    """SQLite's ``CURRENT_TIMESTAMP`` of a row (``2026-11-25 10:04:05``, UTC) as ISO 8601
    (``2026-11-25T10:04:05+00:00``); None for anything else."""
    m = _SQLITE_TIME.fullmatch(value) if isinstance(value, str) else None
    return f"{m.group(1)}T{m.group(2)}+00:00" if m else None


#: a PNG file starts so (the figures the cache keeps: anything else in that table is ignored)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: the largest figure the cache keeps or hands back (a run's figure is about 100-200 kB)
MAX_FIGURE_BYTES = 16 * 1024 * 1024

#: how long a cache write waits for another process's write to finish before giving up on it
BUSY_SECONDS = 60.0


class ResponseCache:
    """Thread-safe SQLite response cache (WAL; one connection guarded by a lock)."""

    def __init__(self, path: str | Path | None):
        self.path = Path(path) if path else None
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self.write_errors = 0
        if self.path is None:
            self._db = None
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # several processes may share one cache file (a sweep's cells on the Ray executor): WAL lets
        # readers and one writer work at once, and a writer waits up to BUSY_SECONDS for the lock
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None, timeout=BUSY_SECONDS)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, text TEXT NOT NULL, input_tokens INTEGER,"
            " output_tokens INTEGER, latency REAL, model TEXT, created TEXT DEFAULT CURRENT_TIMESTAMP, usage_error "
            "TEXT)"
        )
        # side tables: the drawings of a run (its figure), keyed by a digest of everything drawn (see
        # ``put_figure``), and the agents' run_code calls (sandbox/replay.py: the result as JSON and the
        # seconds charged)
        for table, column in (("figures", "png BLOB"), ("sandbox_calls", "value TEXT")):
            try:
                self._db.execute(
                    f"CREATE TABLE IF NOT EXISTS {table} (key TEXT PRIMARY KEY, {column} NOT NULL,"
                    " created TEXT DEFAULT CURRENT_TIMESTAMP)"
                )
            except sqlite3.Error:  # the name is taken by something else (a foreign file): nothing is kept there
                pass
        cols = {row[1] for row in self._db.execute("PRAGMA table_info(responses)")}
        if "usage_error" not in cols:  # a cache written before usage was validated
            try:
                self._db.execute("ALTER TABLE responses ADD COLUMN usage_error TEXT")
            except sqlite3.OperationalError as exc:  # another process added it first
                if "duplicate column" not in str(exc):
                    raise

    def get(self, key: str) -> CachedResponse | None:
        if self._db is None:
            self.misses += 1
            return None
        with self._lock:
            row = self._db.execute(
                "SELECT text, input_tokens, output_tokens, latency, usage_error, created FROM responses WHERE key = ?",
                (key,),
            ).fetchone()
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        try:
            latency = float(row[3])
        except (TypeError, ValueError, OverflowError):
            latency = 0.0
        if not 0 <= latency < math.inf:  # NaN, infinite or negative: not a duration
            latency = 0.0
        return CachedResponse(str(row[0] or ""), row[1], row[2], latency, row[4], stored_at(row[5]))

    def put(self, key: str, resp: CachedResponse, model: str) -> None:
        """Store an answer (text that SQLite's UTF-8 cannot hold, a lone surrogate, is stored replaced)."""
        if self._db is None:
            return
        error = None if resp.usage_error is None else clean_text(resp.usage_error)
        with self._lock:
            try:
                self._db.execute(
                    "INSERT OR REPLACE INTO responses (key, text, input_tokens, output_tokens, latency, model, "
                    "usage_error)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        key,
                        clean_text(resp.text),
                        resp.input_tokens,
                        resp.output_tokens,
                        resp.latency,
                        clean_text(model),
                        error,
                    ),
                )
            except (
                sqlite3.OperationalError
            ):  # locked for BUSY_SECONDS by other writers: the call stands, only its replay is lost
                self.write_errors += 1

    def _side_get(self, sql: str, key: str) -> Any:
        """The one value ``sql`` selects for ``key`` from a side table, or None (no row; a cache
        written before the table existed, opened read-only, or damaged)."""
        if self._db is None:
            return None
        with self._lock:
            try:
                row = self._db.execute(sql, (key,)).fetchone()
            except sqlite3.Error:
                return None
        return row[0] if row is not None else None

    def _side_put(self, sql: str, params: tuple[Any, ...]) -> None:
        """Write a side table's row; a lost write (locked for BUSY_SECONDS, read-only) only costs its reuse."""
        if self._db is None:
            return
        with self._lock:
            try:
                self._db.execute(sql, params)
            except sqlite3.Error:
                self.write_errors += 1

    def get_figure(self, key: str) -> bytes | None:
        """The PNG stored for ``key`` by :meth:`put_figure`, or None. A row that is not a PNG of at
        most :data:`MAX_FIGURE_BYTES` (a damaged or foreign cache) is no answer: the figure is drawn."""
        png = self._side_get("SELECT png FROM figures WHERE key = ?", key)
        if not isinstance(png, bytes) or not png.startswith(PNG_SIGNATURE) or len(png) > MAX_FIGURE_BYTES:
            return None
        return png

    def put_figure(self, key: str, png: bytes) -> None:
        """Keep a drawn figure under ``key``: the SHA-256 of its inputs and of the code and library
        that drew it (:func:`cooplab.tasks.cpr.figures.run_figure`), so a rerun whose tables are
        the same, bit for bit, copies it instead of drawing it again."""
        if png.startswith(PNG_SIGNATURE) and len(png) <= MAX_FIGURE_BYTES:
            self._side_put("INSERT OR REPLACE INTO figures (key, png) VALUES (?, ?)", (key, png))

    def get_sandbox(self, key: str) -> str | None:
        """The stored ``run_code`` call under ``key`` (text for :func:`cooplab.sandbox.replay.decode`
        to check), or None: the code runs."""
        value = self._side_get("SELECT value FROM sandbox_calls WHERE key = ?", key)
        return value if isinstance(value, str) else None

    def put_sandbox(self, key: str, value: str) -> None:
        """Keep a ``run_code`` call."""
        self._side_put("INSERT OR REPLACE INTO sandbox_calls (key, value) VALUES (?, ?)", (key, clean_text(value)))

    def close(self) -> None:
        if self._db is not None:
            with self._lock:
                self._db.close()
                self._db = None


def check_cache(path: str | Path, name: str = "--cache") -> None:
    """A response cache path: a new file in a writable directory, or an existing cooplab cache.
    Nothing is created or changed when the check fails."""
    p = Path(path).expanduser()
    fix = f"point {name} at a new file in a writable directory, or use {name} off"
    if p.is_dir():
        raise ConfigError(f"{name} {p} is a directory, not a file; {fix}")
    if p.exists():
        try:
            with open(p, "rb") as fh:
                head = fh.read(16)
        except OSError as exc:
            raise ConfigError(f"{name} {p} cannot be read ({exc.strerror or exc}); {fix}") from None
        if head and head != b"SQLite format 3\x00":
            raise ConfigError(f"{name} {p} is not an SQLite database; {fix}")
        if head:
            try:
                from cooplab.graphs.rundir import readonly_uri

                db = sqlite3.connect(readonly_uri(p), uri=True)
                try:
                    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
                finally:
                    db.close()
            except sqlite3.Error as exc:
                raise ConfigError(f"{name} {p} is not a readable SQLite database ({exc}); {fix}") from None
            if tables and "responses" not in tables:
                raise ConfigError(
                    f"{name} {p} is an SQLite database but not a cooplab response cache (tables: "
                    f"{', '.join(sorted(tables)[:5])}); {fix}"
                )
        if not os_access(p):
            raise ConfigError(f"{name} {p} is not writable; {fix}")
        return
    # a new file: create it now (as the run would), undoing every directory made if that fails
    made: list[Path] = []
    d = p.parent
    while not d.exists() and d != d.parent:
        made.append(d)
        d = d.parent
    try:
        ResponseCache(p).close()
    except (OSError, sqlite3.Error) as exc:
        for q in (p, Path(str(p) + "-wal"), Path(str(p) + "-shm")):
            try:
                q.unlink()
            except OSError:
                pass
        for q in made:  # deepest first
            try:
                q.rmdir()
            except OSError:
                pass
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ConfigError(f"{name} {p}: cannot create it ({reason}); {fix}") from None


def os_access(p: Path) -> bool:
    return os.access(p, os.W_OK)
