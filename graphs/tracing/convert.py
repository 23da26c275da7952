"""JSON conversion of traced values: a compact, JSON-safe copy of anything a graph run holds.

:func:`to_jsonable` never raises: numpy arrays above :data:`MAX_ARRAY_ITEMS` elements are
summarized (shape, dtype, min/max/mean), long lists keep their ends, long strings are cut,
pydantic models, dataclasses and LangChain objects become objects, and anything unknown
becomes its ``repr``. :func:`fit_line` shrinks a run record whose JSON line is too long, and
:func:`safe_value` is conversion followed by :func:`~cooplab.graphs.tracing.scrubbing.scrub`.
The limits are the module constants below (see docs/traces.md, "Keeping the file small
and always JSON").
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import math
import uuid
from collections.abc import Iterable, Mapping
from decimal import Decimal
from enum import Enum
from pathlib import PurePath
from typing import Any

from .scrubbing import REDACTED, is_secret_key, prepared_secrets, redactable, scrub, scrub_prepared, scrub_text, share

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
    t = type(obj)
    if t is str and len(obj) <= MAX_STR_CHARS or t is int or t is bool or obj is None:  # the common leaves first
        return obj
    if t is not dict and t is not list and _MEMO and depth <= MEMO_MAX_DEPTH:  # a message converted before
        hit = _memo_get(obj, max_list)
        if hit is not None:
            return hit
    if not _is_numpy(obj) and isinstance(obj, (bool, int)):  # (this order keeps obj's type Any below, for pyright)
        return obj
    if isinstance(obj, float):
        return _finite(float(obj))
    if isinstance(obj, str):
        if len(obj) > MAX_STR_CHARS:
            return obj[:MAX_STR_CHARS] + f"...[{len(obj) - MAX_STR_CHARS} more chars]"
        return obj
    if depth > MAX_DEPTH:
        return {"__truncated__": "max depth", "type": type(obj).__name__}
    if t is dict or t is list:  # the common case first (a graph state, a record's parts): the same result as below
        key = id(obj)
        if key in seen:
            return {"__cycle__": t.__name__}
        seen.add(key)
        try:
            if t is dict:
                return {
                    k if type(k) is str else str(k): _to_jsonable(v, depth + 1, seen, max_list)
                    for k, v in list(obj.items())
                }
            if len(obj) > max_list:
                return (
                    [_to_jsonable(v, depth + 1, seen, max_list) for v in obj[:LIST_KEEP]]
                    + [{"__truncated__": len(obj) - 2 * LIST_KEEP}]
                    + [_to_jsonable(v, depth + 1, seen, max_list) for v in obj[-LIST_KEEP:]]
                )
            return [_to_jsonable(v, depth + 1, seen, max_list) for v in list(obj)]
        finally:
            seen.discard(key)
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
            hit = _memo_get(obj, max_list) if depth <= MEMO_MAX_DEPTH else None
            if hit is not None:
                return hit
            from langchain_core.load import dumpd

            out = _to_jsonable(dumpd(obj), depth + 1, seen, max_list)
            if depth <= MEMO_MAX_DEPTH:
                _memo_put(obj, max_list, out)
            return out
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


# --- memo of converted LangChain objects -----------------------------------------------------
# A tool loop's model calls carry the whole conversation: every message would be converted again at
# every call (and again in the node's and the graph's runs). Converted messages are remembered by
# object identity, checked with a weak reference (an id is never reused while the object lives)
# and the identity of its content, so a message is converted once per process. The converted
# value is shared: callers must not change it (scrub and fit_line copy, never mutate nested values).
MEMO_SIZE = 4096
MEMO_MAX_DEPTH = MAX_DEPTH - 12  # a message's own nesting fits below the depth cap from here
_MEMO: dict[tuple[int, int], tuple[Any, Any, Any, Any]] = {}


def _memo_get(obj: Any, max_list: int) -> Any:
    entry = _MEMO.get((id(obj), max_list))
    if entry is None:
        return None
    ref, content, extra, value = entry
    if (
        ref() is not obj
        or getattr(obj, "content", None) is not content
        or getattr(obj, "additional_kwargs", None) is not extra
    ):
        return None
    return value


def _memo_put(obj: Any, max_list: int, value: Any) -> None:
    import weakref

    try:
        ref = weakref.ref(obj)
    except TypeError:  # not weakly referenceable: not remembered
        return
    if len(_MEMO) >= MEMO_SIZE:
        _MEMO.pop(next(iter(_MEMO)))
    _MEMO[(id(obj), max_list)] = (ref, getattr(obj, "content", None), getattr(obj, "additional_kwargs", None), value)
    share(value)


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


def safe_value(obj: Any, secrets: Iterable[str] | None = None, *, max_list: int | None = None) -> Any:
    """``scrub(to_jsonable(obj, max_list=max_list), secrets)``, the same value, made in one walk
    over ``obj``: plain dicts, lists, strings and numbers are converted and scrubbed as they are
    copied; any other value is converted by :func:`to_jsonable`'s rules, then scrubbed (a converted
    message from the memo is scrubbed once per set of secrets). Never raises."""
    exact, long = prepared_secrets(secrets)
    try:
        return _safe(obj, 0, set(), MAX_LIST_ITEMS if max_list is None else max_list, exact, long)
    except Exception:  # to_jsonable's own fallback, as the two steps would give it
        return scrub(to_jsonable(obj, max_list=max_list), secrets)


def _safe(obj: Any, depth: int, seen: set[int], max_list: int, exact: frozenset[str], long: tuple[str, ...]) -> Any:
    # the common cases of _to_jsonable then scrub_prepared, in one step; the rest as the two steps do it
    t = type(obj)
    if t is str and len(obj) <= MAX_STR_CHARS:
        return scrub_text(obj, exact, long)
    if t is int or t is bool or obj is None:
        return obj
    if t is float:
        x = _finite(obj)
        return x if type(x) is float else scrub_text(x, exact, long)
    if (t is dict or t is list) and depth <= MAX_DEPTH:
        key = id(obj)
        if key in seen:
            return {"__cycle__": t.__name__}
        seen.add(key)
        try:
            if t is dict:
                out: dict[str, Any] = {}
                for k, v in list(obj.items()):
                    k = k if type(k) is str else str(k)
                    v = _safe(v, depth + 1, seen, max_list, exact, long)
                    if is_secret_key(k) and redactable(k, v):
                        out[k] = REDACTED
                    else:
                        out[scrub_text(k, exact, long)] = v
                return out
            if len(obj) > max_list:
                return (
                    [_safe(v, depth + 1, seen, max_list, exact, long) for v in obj[:LIST_KEEP]]
                    + [{"__truncated__": len(obj) - 2 * LIST_KEEP}]
                    + [_safe(v, depth + 1, seen, max_list, exact, long) for v in obj[-LIST_KEEP:]]
                )
            return [_safe(v, depth + 1, seen, max_list, exact, long) for v in list(obj)]
        finally:
            seen.discard(key)
    return scrub_prepared(_to_jsonable(obj, depth, seen, max_list), exact, long)


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
