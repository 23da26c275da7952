"""Record every graph run, node run, model call and tool call in the LangSmith run format.

:class:`JsonlTracer` is a LangChain callback handler. Pass it (or everything
:func:`tracing_callbacks` returns) in ``config["callbacks"]`` of ``invoke``/``ainvoke``/
``stream``/``astream``; when a root run ends it appends one JSON line per run of that run's
tree (root graph run, each node's chain run, each ``llm`` run, each ``tool`` run) to
``traces.jsonl``. Each line loads into :class:`langsmith.schemas.Run`.

Every value written goes through :func:`to_jsonable` (numpy arrays summarized above a size,
long strings and lists cut, anything unknown turned into its ``repr``) and :func:`scrub`
(secrets replaced by ``"***"``). See docs/traces.md.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import logging
import math
import os
import re
import threading
import uuid
from collections.abc import Iterable, Mapping
from decimal import Decimal
from enum import Enum
from pathlib import Path, PurePath
from typing import Any

from langchain_core.tracers.base import BaseTracer
from langchain_core.tracers.schemas import Run as _LCRun

logger = logging.getLogger(__name__)

TRACES_FILE = "traces.jsonl"
REDACTED = "***"

# Arrays with more elements than this are written as a summary, not their values.
MAX_ARRAY_ITEMS = 64
# Lists/tuples longer than this keep their first and last LIST_KEEP items and a marker
# {"__truncated__": n} in between (growing logs in the state stay cheap to record).
MAX_LIST_ITEMS = 30
LIST_KEEP = 5
# ... except the messages of a model call, which are kept whole up to this many.
MAX_MESSAGES = 1000
# A run whose JSON line would be longer than this has its largest inputs/outputs/extra
# values replaced by a size note until it fits.
MAX_LINE_CHARS = 256_000
# Strings longer than this are cut.
MAX_STR_CHARS = 20_000
MAX_DEPTH = 24

# Keys whose (string) values are secrets. "token" only as a whole word at the end, so that
# token *counts* (input_tokens, max_tokens, total_tokens) survive.
_SECRET_KEY_RE = re.compile(
    r"(api[_\-]?key|apikey|authorization|secret|passw(or)?d|passphrase|credential|cookie"
    r"|private[_\-]?key|access[_\-]?key|session[_\-]?key|(^|[_\-\s.])token$|^token$)",
    re.IGNORECASE,
)
# Environment variables whose values are secrets.
_SECRET_ENV_RE = re.compile(r"KEY|TOKEN|SECRET|PASSWORD", re.IGNORECASE)
# Environment values of at least _MIN_EXACT_SECRET characters are redacted where a whole
# string equals them, and of at least _MIN_SUBSTRING_SECRET also inside longer strings.
# Shorter values and flag-like values (TOKENIZERS_PARALLELISM=false) are not secrets.
_MIN_EXACT_SECRET = 4
_MIN_SUBSTRING_SECRET = 8
_NOT_SECRET_VALUES = {"true", "false", "yes", "no", "on", "off", "none", "null", "auto", "default"}


# ----------------------------------------------------------------------------------------
# JSON-safe conversion and secret scrubbing
def _finite(x: float) -> Any:
    if math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


def _ndarray(a: Any, depth: int, seen: set[int], max_list: int) -> Any:
    import numpy as np

    if a.size <= MAX_ARRAY_ITEMS and a.dtype.kind in "biufcUSb?":
        if a.dtype.kind == "c":
            return [str(v) for v in a.ravel().tolist()]
        return _to_jsonable(a.tolist(), depth + 1, seen, max_list)
    out: dict[str, Any] = {"__ndarray__": list(a.shape), "dtype": str(a.dtype)}
    if a.size and a.dtype.kind in "biuf?":
        try:
            v = a.astype(float)
            fin = v[np.isfinite(v)]
            if fin.size:
                out.update(min=float(fin.min()), max=float(fin.max()), mean=float(fin.mean()))
            if fin.size != v.size:
                out["nonfinite"] = int(v.size - fin.size)
        except Exception:  # pragma: no cover - exotic dtypes
            pass
    return out


def to_jsonable(obj: Any, *, max_list: int | None = None) -> Any:
    """A compact JSON-safe copy of ``obj``. Never raises: unknown objects become their repr.
    Lists longer than ``max_list`` (default MAX_LIST_ITEMS) keep only their ends."""
    try:
        return _to_jsonable(obj, 0, set(), MAX_LIST_ITEMS if max_list is None else max_list)
    except Exception as exc:  # never crash the traced program
        try:
            text = repr(obj)
        except Exception:
            text = object.__repr__(obj)
        return {"__unserializable__": text[:500], "error": type(exc).__name__}


def _to_jsonable(obj: Any, depth: int, seen: set[int], max_list: int) -> Any:
    if obj is None or isinstance(obj, (bool, int)) and not _is_numpy(obj):
        return obj
    if isinstance(obj, float):
        return _finite(float(obj))
    if isinstance(obj, str):
        if len(obj) > MAX_STR_CHARS:
            return obj[:MAX_STR_CHARS] + f"...[{len(obj) - MAX_STR_CHARS} more chars]"
        return obj
    if depth > MAX_DEPTH:
        return {"__truncated__": "max depth", "type": type(obj).__name__}
    if _is_numpy(obj):
        import numpy as np

        if isinstance(obj, np.ndarray):
            return _ndarray(obj, depth, seen, max_list)
        if isinstance(obj, np.generic):
            return _to_jsonable(obj.item(), depth, seen, max_list)
    if isinstance(obj, (_dt.datetime, _dt.date, _dt.time)):
        return obj.isoformat()
    if isinstance(obj, _dt.timedelta):
        return obj.total_seconds()
    if isinstance(obj, (uuid.UUID, PurePath)):
        return str(obj)
    if isinstance(obj, Decimal):
        return _finite(float(obj))
    if isinstance(obj, Enum):
        return _to_jsonable(obj.value, depth + 1, seen, max_list)
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return {"__bytes__": len(bytes(obj))}
    if _is_secret_type(obj):
        return REDACTED

    key = id(obj)
    if key in seen:
        return {"__cycle__": type(obj).__name__}
    seen.add(key)
    try:
        if isinstance(obj, Mapping):
            return {str(k): _to_jsonable(v, depth + 1, seen, max_list) for k, v in list(obj.items())}
        if isinstance(obj, (list, tuple, set, frozenset, range)) or _is_deque(obj):
            items = list(obj)
            if isinstance(obj, (set, frozenset)):
                items = sorted(items, key=repr)
            if len(items) > max_list:
                head, tail = items[:LIST_KEEP], items[-LIST_KEEP:]
                return (
                    [_to_jsonable(v, depth + 1, seen, max_list) for v in head]
                    + [{"__truncated__": len(items) - 2 * LIST_KEEP}]
                    + [_to_jsonable(v, depth + 1, seen, max_list) for v in tail]
                )
            return [_to_jsonable(v, depth + 1, seen, max_list) for v in items]
        if _is_pandas(obj):
            return _pandas(obj, depth, seen, max_list)
        if hasattr(obj, "to_json") and hasattr(obj, "lc_id"):  # LangChain Serializable
            from langchain_core.load import dumpd

            return _to_jsonable(dumpd(obj), depth + 1, seen, max_list)
        if hasattr(obj, "model_dump") and callable(obj.model_dump):  # pydantic v2
            return _to_jsonable(obj.model_dump(), depth + 1, seen, max_list)
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            return {
                f.name: _to_jsonable(getattr(obj, f.name, None), depth + 1, seen, max_list)
                for f in dataclasses.fields(obj)
            }
        if isinstance(obj, BaseException):
            return f"{type(obj).__name__}: {obj}"
    finally:
        seen.discard(key)
    text = repr(obj)
    return text if len(text) <= 500 else text[:500] + "...]"


def _is_numpy(obj: Any) -> bool:
    return type(obj).__module__ == "numpy"


def _is_deque(obj: Any) -> bool:
    import collections

    return isinstance(obj, collections.deque)


def _is_pandas(obj: Any) -> bool:
    return type(obj).__module__.startswith("pandas.")


def _pandas(obj: Any, depth: int, seen: set[int], max_list: int) -> Any:
    shape = list(getattr(obj, "shape", ()))
    out: dict[str, Any] = {"__pandas__": type(obj).__name__, "shape": shape}
    if hasattr(obj, "columns"):
        out["columns"] = _to_jsonable([str(c) for c in obj.columns], depth + 1, seen, max_list)
    return out


def _is_secret_type(obj: Any) -> bool:
    name = type(obj).__name__
    return name in ("SecretStr", "SecretBytes") and type(obj).__module__.startswith("pydantic")


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of environment variables whose names contain KEY/TOKEN/SECRET/PASSWORD,
    longest first (so a secret containing another is replaced whole)."""
    env = os.environ if environ is None else environ
    vals = {
        v for k, v in env.items()
        if _SECRET_ENV_RE.search(k) and len(v.strip()) >= _MIN_EXACT_SECRET
        and v.strip().lower() not in _NOT_SECRET_VALUES and not _is_number(v)
    }
    return sorted(vals, key=len, reverse=True)


def _is_number(v: str) -> bool:
    try:
        float(v)
        return True
    except ValueError:
        return False


def is_secret_key(key: str) -> bool:
    return bool(_SECRET_KEY_RE.search(str(key)))


def scrub(obj: Any, secrets: Iterable[str] | None = None) -> Any:
    """Replace secrets in a JSON-safe value: values of secret-looking keys, strings equal to a
    secret environment value, and occurrences of longer secret values inside strings."""
    vals = list(secret_values() if secrets is None else secrets)
    exact = set(vals)
    long = [v for v in vals if len(v) >= _MIN_SUBSTRING_SECRET]
    return _scrub(obj, exact, long)


def _redactable(key: str, value: Any) -> bool:
    if isinstance(value, str):
        return True
    # numbers under a *token* key are counts (max_token); under password/secret/key, secrets
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return not key.lower().endswith("token")
    return False


def _scrub(obj: Any, exact: set[str], long: list[str]) -> Any:
    if isinstance(obj, str):
        if obj in exact:
            return REDACTED
        for v in long:
            if v in obj:
                obj = obj.replace(v, REDACTED)
        return obj
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if isinstance(k, str) and is_secret_key(k) and _redactable(k, v):
                out[k] = REDACTED
            else:
                out[_scrub(k, exact, long) if isinstance(k, str) else k] = _scrub(v, exact, long)
        return out
    if isinstance(obj, list):
        return [_scrub(v, exact, long) for v in obj]
    return obj


def safe_value(obj: Any, secrets: Iterable[str] | None = None) -> Any:
    """:func:`to_jsonable` then :func:`scrub`."""
    return scrub(to_jsonable(obj), secrets)


def fit_line(rec: dict[str, Any], limit: int | None = None) -> dict[str, Any]:
    """Shrink a run record whose JSON is longer than ``limit`` characters (default
    MAX_LINE_CHARS): its largest values under inputs/outputs/extra are replaced by
    ``{"__truncated__": "too large", "chars": n}``, largest first, until it fits."""
    limit = MAX_LINE_CHARS if limit is None else limit
    size = len(json.dumps(rec, ensure_ascii=False))
    if size <= limit:
        return rec
    parts = []
    for part in ("inputs", "outputs", "extra"):
        val = rec.get(part)
        if isinstance(val, dict):
            for k, v in val.items():
                if k == "usage_metadata":
                    continue
                parts.append((len(json.dumps(v, ensure_ascii=False)), part, k))
    for n, part, k in sorted(parts, reverse=True):
        if size <= limit or n < 64:
            break
        rec[part][k] = {"__truncated__": "too large", "chars": n}
        size -= n - 50
    return rec


# ----------------------------------------------------------------------------------------
# Token usage
def _usage_from_outputs(outputs: Any) -> dict[str, int] | None:
    """Sum the token usage of an llm run's outputs (an LLMResult dump)."""
    if not isinstance(outputs, Mapping):
        return None
    tot = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
    found = False
    for gens in outputs.get("generations") or []:
        for gen in gens or []:
            msg = gen.get("message") if isinstance(gen, Mapping) else None
            if isinstance(msg, Mapping):
                um = msg.get("usage_metadata") or (msg.get("kwargs") or {}).get("usage_metadata")
            else:
                um = getattr(msg, "usage_metadata", None)
            if isinstance(um, Mapping):
                found = True
                for k in tot:
                    tot[k] += int(um.get(k) or 0)
    if not found:
        tu = (outputs.get("llm_output") or {}).get("token_usage") or (outputs.get("llm_output") or {}).get("usage")
        if isinstance(tu, Mapping):
            found = True
            tot["input_tokens"] = int(tu.get("prompt_tokens") or tu.get("input_tokens") or 0)
            tot["output_tokens"] = int(tu.get("completion_tokens") or tu.get("output_tokens") or 0)
            tot["total_tokens"] = int(tu.get("total_tokens") or 0)
    if not found:
        return None
    if not tot["total_tokens"]:
        tot["total_tokens"] = tot["input_tokens"] + tot["output_tokens"]
    return tot


def _iso(t: _dt.datetime | None) -> str | None:
    if t is None:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.timezone.utc)
    return t.isoformat()


# ----------------------------------------------------------------------------------------
class JsonlTracer(BaseTracer):
    """Append every run of a finished root run's tree to a JSON Lines file (LangSmith format).

    Works with ``invoke``/``stream`` and ``ainvoke``/``astream`` (it runs inline, in the
    thread or event loop that reports the event, and guards its state with a lock). Inputs
    are copied when a run starts (later in-place changes to state arrays do not leak into
    the record) and a run is turned into its compact JSON record as soon as it ends, so only
    those records, not the live objects, are held until the root run ends.

    So that a process killed mid-run loses no finished work, a root run's start and each of its
    finished nodes (with their subtrees) are also appended to a journal next to the file
    (``.traces.jsonl.<trace id>.part``), removed when the root ends. A new tracer on the same
    file first moves what an interrupted process left there into the file
    (:func:`recover_interrupted`): the interrupted root is written with status ``error``, so a
    resumed run's ``traces.jsonl`` is one coherent trace file: the interrupted run's tree,
    then the resumed run's, every parent link valid and no run id twice.
    """

    run_inline = True  # cheap; keeps event order under ainvoke/astream

    def __init__(self, path: str | os.PathLike[str], **kwargs: Any) -> None:
        kwargs.setdefault("_schema_format", "original+chat")
        super().__init__(**kwargs)
        self.path = Path(path)
        self._lock = threading.RLock()
        self._inputs: dict[str, Any] = {}
        self._pending: dict[str, list[dict[str, Any]]] = {}
        self._journaled: dict[str, set[str]] = {}
        self.runs_written = 0
        self.runs_recovered = recover_interrupted(self.path)

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[Any]],
        *,
        run_id: uuid.UUID,
        tags: list[str] | None = None,
        parent_run_id: uuid.UUID | None = None,
        metadata: dict[str, Any] | None = None,
        name: str | None = None,
        **kwargs: Any,
    ) -> _LCRun:
        """A chat model call: an ``llm`` run whose inputs are ``{"messages": [[...]]}``, as
        LangSmith records it (not the flattened prompt strings of the generic fallback)."""
        run = self._create_chat_model_run(
            serialized=serialized, messages=messages, run_id=run_id, parent_run_id=parent_run_id,
            tags=tags, metadata=metadata, name=name, **kwargs,
        )
        run.run_type = "llm"
        self._start_trace(run)
        self._on_chat_model_start(run)
        return run

    # no child_runs tree in memory: each run becomes a record when it ends
    @staticmethod
    def _add_child_run(parent_run: _LCRun, child_run: _LCRun) -> None:  # noqa: ARG004
        return None

    def _persist_run(self, run: _LCRun) -> None:  # records are written in _end_trace
        return None

    def _on_run_create(self, run: _LCRun) -> None:
        snap = to_jsonable(run.inputs, max_list=MAX_MESSAGES if run.run_type == "llm" else None)
        with self._lock:
            self._inputs[str(run.id)] = snap
            if self._is_local_root(run):
                try:
                    start = {"__start__": True, "id": str(run.id), "trace_id": str(run.trace_id),
                             "parent_run_id": str(run.parent_run_id) if run.parent_run_id else None,
                             "dotted_order": run.dotted_order, "name": run.name, "run_type": run.run_type,
                             "start_time": _iso(run.start_time), "inputs": snap if isinstance(snap, dict) else {"input": snap},
                             "extra": to_jsonable(dict(run.extra or {})), "tags": [str(t) for t in (run.tags or [])]}
                    self._journal(str(run.trace_id), [fit_line(scrub(start))])
                except Exception as exc:  # never break the traced program
                    logger.warning("JsonlTracer: could not journal run %s: %r", run.id, exc)

    def _is_local_root(self, run: _LCRun) -> bool:
        if not run.parent_run_id:
            return True
        pid = str(run.parent_run_id)
        return pid not in self.run_map or pid in self._external_run_ids

    def _end_trace(self, run: _LCRun) -> None:
        with self._lock:
            root = self._is_local_root(run)
            parent = self.run_map.get(str(run.parent_run_id)) if run.parent_run_id else None
            node = parent is not None and self._is_local_root(parent)
            super()._end_trace(run)  # calls _on_run_update(run)
            if root:
                self._flush_trace(str(run.trace_id))
            elif node:  # a node of the root finished: journal its subtree
                tid, prefix = str(run.trace_id), run.dotted_order or ""
                done = self._journaled.setdefault(tid, set())
                recs = [r for r in self._pending.get(tid, []) if r["id"] not in done and (r.get("dotted_order") or "").startswith(prefix)]
                if recs:
                    done.update(r["id"] for r in recs)
                    self._journal(tid, recs)

    def journal_path(self, trace_id: str) -> Path:
        return journal_path(self.path, trace_id)

    def _journal(self, trace_id: str, records: list[dict[str, Any]]) -> None:
        path = self.journal_path(trace_id)
        try:
            lines = [json.dumps(r, ensure_ascii=False, allow_nan=False, separators=(",", ":")) for r in records]
            path.parent.mkdir(parents=True, exist_ok=True)
            with _live_lock:
                _LIVE_JOURNALS.add(str(path))
            with open(path, "a", encoding="utf-8") as fh:
                fh.write("\n".join(lines) + "\n")
        except (OSError, TypeError, ValueError) as exc:
            logger.warning("JsonlTracer: could not write the journal %s: %r", path, exc)

    def _on_run_update(self, run: _LCRun) -> None:
        try:
            record = self.record(run)
        except Exception as exc:  # never break the traced program
            logger.warning("JsonlTracer: could not record run %s: %r", run.id, exc)
            return
        with self._lock:
            self._pending.setdefault(str(run.trace_id), []).append(record)

    def record(self, run: _LCRun) -> dict[str, Any]:
        """The JSON-safe, scrubbed LangSmith-format record of a finished run."""
        secrets = secret_values()
        inputs = self._inputs.pop(str(run.id), None)
        if inputs in (None, {}, {"input": ""}, {"input": None}):  # streamed input: known at the end
            inputs = to_jsonable(run.inputs, max_list=MAX_MESSAGES if run.run_type == "llm" else None)
        outputs = to_jsonable(run.outputs) if run.outputs is not None else None
        extra = to_jsonable(dict(run.extra or {}))
        rec: dict[str, Any] = {
            "id": str(run.id),
            "trace_id": str(run.trace_id),
            "parent_run_id": str(run.parent_run_id) if run.parent_run_id else None,
            "dotted_order": run.dotted_order,
            "name": run.name,
            "run_type": run.run_type,
            "start_time": _iso(run.start_time),
            "end_time": _iso(run.end_time),
            "inputs": inputs if isinstance(inputs, dict) else {"input": inputs},
            "outputs": outputs if (outputs is None or isinstance(outputs, dict)) else {"output": outputs},
            "error": run.error,
            "extra": extra if isinstance(extra, dict) else {"value": extra},
            "tags": [str(t) for t in (run.tags or [])],
            "status": "error" if run.error else "success",
        }
        if run.run_type == "llm":
            usage = _usage_from_outputs(rec["outputs"])
            if usage:
                rec["extra"]["usage_metadata"] = usage
                rec["prompt_tokens"] = usage["input_tokens"]
                rec["completion_tokens"] = usage["output_tokens"]
                rec["total_tokens"] = usage["total_tokens"]
        return fit_line(scrub(rec, secrets))

    def _flush_trace(self, trace_id: str) -> None:
        records = self._pending.pop(trace_id, [])
        if not records:
            return
        records.sort(key=lambda r: r.get("dotted_order") or "")  # parents before children
        lines = []
        for r in records:
            try:
                lines.append(json.dumps(r, ensure_ascii=False, allow_nan=False, separators=(",", ":")))
            except (TypeError, ValueError) as exc:  # pragma: no cover - to_jsonable guards this
                logger.warning("JsonlTracer: dropped run %s: %r", r.get("id"), exc)
        try:
            _append_lines(self.path, lines)
            self.runs_written += len(lines)
        except OSError as exc:
            logger.warning("JsonlTracer: could not write %s: %r", self.path, exc)
            return
        self._journaled.pop(trace_id, None)
        jp = self.journal_path(trace_id)
        with _live_lock:
            _LIVE_JOURNALS.discard(str(jp))
        try:
            jp.unlink(missing_ok=True)
        except OSError:  # pragma: no cover
            pass

    def flush(self) -> None:
        """Write the runs of every trace still open (e.g. before an abrupt stop). Runs still
        running are not written; their finished children are."""
        with self._lock:
            for tid in list(self._pending):
                self._flush_trace(tid)

    def __repr__(self) -> str:
        return f"JsonlTracer({str(self.path)!r})"


# ----------------------------------------------------------------------------------------
# Journals of root runs in progress, and their recovery after an interrupted process
_LIVE_JOURNALS: set[str] = set()  # journals of root runs still running in this process
_live_lock = threading.Lock()
INTERRUPTED = "interrupted: the process ended before this run finished (a resumed run follows in this file)"


def journal_path(path: str | os.PathLike[str], trace_id: str) -> Path:
    p = Path(path)
    return p.with_name(f".{p.name}.{trace_id}.part")


def _append_lines(path: Path, lines: list[str]) -> None:
    """Append lines to a JSONL file, first dropping a last line cut short by a crash mid-write."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as fh:
        size = fh.seek(0, os.SEEK_END)
        if size:
            fh.seek(max(0, size - 1))
            if fh.read(1) != b"\n":  # a cut-off last line: drop it (it is not a valid record)
                fh.seek(0)
                data = fh.read()
                fh.truncate(data.rfind(b"\n") + 1)
                fh.seek(0, os.SEEK_END)
        fh.write(("\n".join(lines) + "\n").encode("utf-8"))
        fh.flush()


def _segments(dotted_order: str) -> list[tuple[str, str]]:
    """(start time ISO, run id) of each run on a dotted_order's path, root first."""
    out = []
    for seg in (dotted_order or "").split("."):
        if len(seg) > 36:
            t = _dt.datetime.strptime(seg[:-36], "%Y%m%dT%H%M%S%fZ").replace(tzinfo=_dt.timezone.utc)
            out.append((t.isoformat(), seg[-36:]))
    return out


def recover_interrupted(path: str | os.PathLike[str]) -> int:
    """Move the journals an interrupted process left next to ``path`` into ``path``: their runs
    not already there, and each run still open when the process ended (the root run, from its
    journaled start) completed with status ``error``, parents first. Returns the number of runs
    written. Journals of runs still running in this process are left alone."""
    path = Path(path)
    try:
        journals = sorted(path.parent.glob(f".{path.name}.*.part"))
    except OSError:  # pragma: no cover
        return 0
    with _live_lock:
        journals = [j for j in journals if str(j) not in _LIVE_JOURNALS]
    if not journals:
        return 0
    known: set[str] = set()
    if path.is_file():
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                known.add(json.loads(line)["id"])
            except (ValueError, KeyError, TypeError):
                continue
    written = 0
    for j in journals:
        records: dict[str, dict[str, Any]] = {}
        starts: dict[str, dict[str, Any]] = {}
        for line in j.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                rec = json.loads(line)
            except ValueError:  # a line cut short by the kill
                continue
            if not isinstance(rec, dict) or "id" not in rec:
                continue
            if rec.pop("__start__", False):
                starts[rec["id"]] = rec
            elif rec["id"] not in known:
                records[rec["id"]] = rec
        if not records and not any(s_["id"] not in known for s_ in starts.values()):
            j.unlink(missing_ok=True)
            continue
        last_end = max((r.get("end_time") or r.get("start_time") or "" for r in records.values()), default="")
        missing: dict[str, dict[str, Any]] = {}
        for rec in list(records.values()) + list(starts.values()):
            segs = _segments(rec.get("dotted_order") or "")
            for depth, (t, rid) in enumerate(segs):
                if rid in known or rid in records or rid in missing:
                    continue
                st = starts.get(rid, {})
                missing[rid] = {
                    "id": rid, "trace_id": segs[0][1],
                    "parent_run_id": segs[depth - 1][1] if depth else st.get("parent_run_id"),
                    "dotted_order": ".".join(seg for seg in (rec["dotted_order"].split(".")[: depth + 1])),
                    "name": st.get("name") or "interrupted run", "run_type": st.get("run_type") or "chain",
                    "start_time": st.get("start_time") or t, "end_time": max(last_end, st.get("start_time") or t),
                    "inputs": st.get("inputs") or {}, "outputs": None, "error": INTERRUPTED,
                    "extra": st.get("extra") or {}, "tags": st.get("tags") or [], "status": "error",
                }
        out = sorted(list(records.values()) + list(missing.values()), key=lambda r: r.get("dotted_order") or "")
        lines = []
        for r in out:
            try:
                lines.append(json.dumps(r, ensure_ascii=False, allow_nan=False, separators=(",", ":")))
            except (TypeError, ValueError):  # pragma: no cover
                continue
        try:
            if lines:
                _append_lines(path, lines)
            j.unlink(missing_ok=True)
        except OSError as exc:
            logger.warning("JsonlTracer: could not recover %s: %r", j, exc)
            continue
        known.update(r["id"] for r in out)
        written += len(lines)
    return written


# ----------------------------------------------------------------------------------------
def live_tracing_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """True when LangSmith live tracing is switched on (LANGSMITH_TRACING=true, or the older
    LANGCHAIN_TRACING_V2=true)."""
    env = os.environ if environ is None else environ
    return any(env.get(k, "").strip().lower() == "true" for k in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2"))


_client_lock = threading.Lock()
_clients: dict[tuple[str | None, str | None], Any] = {}


def _hide(d: dict) -> dict:
    # live runs: lists kept whole up to MAX_MESSAGES (a model call's messages must survive)
    out = scrub(to_jsonable(d, max_list=MAX_MESSAGES))
    return out if isinstance(out, dict) else {"value": out}


def scrubbing_client(endpoint: str | None = None, api_key: str | None = None):
    """A ``langsmith.Client`` that converts and scrubs inputs, outputs and metadata before
    sending (shared per endpoint/key; honours LANGSMITH_ENDPOINT/LANGSMITH_API_KEY)."""
    from langsmith import Client

    key = (endpoint, api_key)
    with _client_lock:
        if key not in _clients:
            _clients[key] = Client(
                api_url=endpoint, api_key=api_key, hide_inputs=_hide, hide_outputs=_hide, hide_metadata=_hide
            )
        return _clients[key]


def tracing_callbacks(run_dir: str | os.PathLike[str]) -> list:
    """The callback handlers for ``config["callbacks"]`` of a graph run writing to ``run_dir``.

    Always a :class:`JsonlTracer` on ``run_dir/traces.jsonl``; with LANGSMITH_TRACING=true
    also one ``LangChainTracer`` (sending live to LANGSMITH_ENDPOINT with LANGSMITH_API_KEY,
    project LANGSMITH_PROJECT) whose client scrubs secrets. LangChain adds its own
    LangChainTracer when tracing is on *only if* the callbacks hold none, so passing ours
    means runs are sent once, not twice.
    """
    handlers: list = [JsonlTracer(Path(run_dir) / TRACES_FILE)]
    if live_tracing_enabled():
        from langchain_core.tracers.langchain import LangChainTracer

        handlers.append(LangChainTracer(client=scrubbing_client()))
    return handlers


# ----------------------------------------------------------------------------------------
class TraceFileError(ValueError):
    """A missing or malformed traces.jsonl (user-facing, one line)."""


class ExportError(RuntimeError):
    """The endpoint refused or could not be reached (one line)."""


class ExportConfigError(ValueError):
    """Export asked for without the settings it needs (user-facing, one line)."""


def traces_path(run_dir: str | os.PathLike[str]) -> Path:
    p = Path(run_dir)
    return p if p.is_file() else p / TRACES_FILE


def load_runs(run_dir: str | os.PathLike[str], *, validate: bool = False) -> list[dict[str, Any]]:
    """The runs recorded in ``run_dir/traces.jsonl`` (or a traces file given directly),
    in file order. Blank lines are skipped; a malformed line raises :class:`TraceFileError`
    (a last line cut short by a crash is skipped instead). ``validate``: check every run
    against ``langsmith.schemas.Run``."""
    path = traces_path(run_dir)
    if not path.is_file():
        raise TraceFileError(f"no {TRACES_FILE} in {run_dir}")
    runs: list[dict[str, Any]] = []
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError as exc:
            if i == len(lines):  # a last line cut short by a crash mid-write
                logger.warning("%s: skipped a cut-off last line", path)
                continue
            raise TraceFileError(f"{path}:{i}: not JSON: {exc}") from None
        try:
            if not isinstance(rec, dict) or "id" not in rec:
                raise ValueError("not a run object")
            if validate:
                from langsmith.schemas import Run

                Run(**rec)
        except Exception as exc:
            raise TraceFileError(f"{path}:{i}: not a LangSmith run: {str(exc).splitlines()[0]}") from None
        runs.append(rec)
    return runs


_EXPORT_FIELDS = (
    "id", "trace_id", "parent_run_id", "dotted_order", "name", "run_type", "start_time", "end_time",
    "inputs", "outputs", "error", "extra", "tags", "status",
)


def export_traces(
    run_dir: str | os.PathLike[str],
    endpoint: str | None = None,
    api_key: str | None = None,
    project: str | None = None,
    *,
    batch_size: int = 100,
) -> int:
    """Send a finished run's ``traces.jsonl`` to a LangSmith-compatible endpoint; return the
    number of runs sent. Runs go parent-first (by ``dotted_order``) through the LangSmith
    client's batch ingest (``POST {endpoint}/runs/batch``). ``endpoint``/``api_key``/
    ``project`` default to LANGSMITH_ENDPOINT/LANGSMITH_API_KEY/LANGSMITH_PROJECT. Values
    are scrubbed again before sending. Raises :class:`TraceFileError` (bad file),
    :class:`ExportConfigError` (neither endpoint nor key: nothing is sent) or
    :class:`ExportError` (the endpoint refused or could not be reached).
    """
    from langsmith import Client

    runs = load_runs(run_dir, validate=True)
    seen: set[str] = set()
    uniq = []
    for r in runs:
        if r["id"] not in seen:
            seen.add(r["id"])
            uniq.append(r)
    uniq.sort(key=lambda r: r.get("dotted_order") or "")
    if not uniq:
        return 0
    endpoint = endpoint or os.environ.get("LANGSMITH_ENDPOINT") or os.environ.get("LANGCHAIN_ENDPOINT") or None
    api_key = api_key or os.environ.get("LANGSMITH_API_KEY") or os.environ.get("LANGCHAIN_API_KEY") or None
    project = project or os.environ.get("LANGSMITH_PROJECT") or os.environ.get("LANGCHAIN_PROJECT") or "cooplab"
    if endpoint is None and api_key is None:
        raise ExportConfigError(
            "no endpoint and no API key: set LANGSMITH_API_KEY (and LANGSMITH_ENDPOINT or --endpoint "
            "for a server other than LangSmith's)"
        )
    errors: list[BaseException] = []
    try:
        client = Client(
            api_url=endpoint,
            api_key=api_key,
            auto_batch_tracing=False,
            info={},  # do not ask the endpoint for its capabilities: plain /runs/batch
            tracing_sampling_rate=1.0,
            omit_traced_runtime_info=True,
            tracing_error_callback=errors.append,
        )
    except Exception as exc:
        raise ExportError(f"cannot create a LangSmith client: {str(exc).splitlines()[0]}") from None
    secrets = secret_values()
    ls_logger = logging.getLogger("langsmith")
    old_level = ls_logger.level
    ls_logger.setLevel(logging.CRITICAL)  # failures are reported once, by ExportError
    try:
        for i in range(0, len(uniq), batch_size):
            batch = []
            for r in uniq[i : i + batch_size]:
                body = {k: r.get(k) for k in _EXPORT_FIELDS if r.get(k) is not None}
                body["inputs"] = body.get("inputs") or {}
                body["session_name"] = project
                batch.append(scrub(body, secrets))
            client.batch_ingest_runs(create=batch)
            if errors:
                break
    except Exception as exc:
        errors.append(exc)
    finally:
        ls_logger.setLevel(old_level)
        try:
            client.close() if hasattr(client, "close") else None
        except Exception:
            pass
    if errors:
        msg = scrub(str(errors[0]).splitlines()[0] if str(errors[0]) else type(errors[0]).__name__, secrets)
        raise ExportError(f"export to {endpoint or 'the LangSmith default endpoint'} failed: {msg}")
    return len(uniq)
