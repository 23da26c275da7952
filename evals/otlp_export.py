"""Export a run's ``traces.jsonl`` (LangSmith run format) as OpenTelemetry spans over OTLP/HTTP.

Every LangSmith run record becomes one span with the **OpenInference** semantic conventions, which
Arize Phoenix, Langfuse and other LLM-trace viewers read (and plain OpenTelemetry back ends such as
Jaeger show as attributes):

* ids: the span's trace id is the 128-bit value of the run's ``trace_id`` UUID (so a trace keeps the
  id LangSmith shows); its span id is a 64-bit BLAKE2b hash of the run ``id``; its parent span id the
  same hash of ``parent_run_id``. The same file always gives the same ids, and the tree is kept.
* ``start_time``/``end_time`` become the span's times; an ``error`` (or ``status: "error"``) the span
  status ERROR with its first line and an ``exception`` event carrying the traceback.
* ``openinference.span.kind``: ``llm`` -> LLM, ``tool`` -> TOOL, ``retriever`` -> RETRIEVER,
  ``embedding`` -> EMBEDDING, a ``chain`` run of a tool-using agent (its metadata ``agent_id`` equals
  its name) -> AGENT, other ``chain``/``prompt``/``parser`` runs -> CHAIN, anything else UNKNOWN.
* ``input.value``/``output.value`` (JSON, cut at :data:`MAX_VALUE_CHARS`), ``llm.model_name``,
  ``llm.provider``, ``llm.token_count.prompt``/``completion``/``total``, ``llm.invocation_parameters``,
  ``llm.input_messages``/``llm.output_messages`` (role, content, tool calls), ``tool.name``,
  ``agent.name``, ``graph.node.id``, ``tag.tags`` and ``metadata`` (the run's metadata as JSON, with
  ``cooplab.run_dir``, ``cooplab.task`` and ``langsmith.run_id``/``langsmith.run_type``).

The spans are built from the file (``ReadableSpan`` objects with the recorded ids and times, not
re-timed live spans) and sent through the OpenTelemetry SDK's ``OTLPSpanExporter``
(``opentelemetry-exporter-otlp-proto-http``: protobuf over HTTP, ``POST {url}/v1/traces``) in batches.
The resource carries ``service.name = cooplab`` and ``openinference.project.name`` (the Phoenix project).

Every record is scrubbed of secrets again before it is converted (``cooplab.graphs.tracing.scrub``,
as the LangSmith export does). Hostile files do not stop an export: a line that is not JSON, not a run object, has no
usable id or
start time, repeats an id, or cannot be converted is **skipped and counted** (:class:`OtlpExportResult`
``skipped``, with the first reason); bad values inside a usable run (NaN, negative or huge token
counts, wrong types, end before start) are dropped or clamped. Failures of the endpoint (down,
refusing, an HTTP error) raise :class:`OtlpExportError`, one line; a bad URL or a missing file
:class:`OtlpConfigError`. The OpenTelemetry packages are the optional extra ``viewer``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlsplit, urlunsplit

from cooplab.extras import EXTRAS, MissingExtra, require
from cooplab.graphs.rundir import TRACES_FILE
from cooplab.graphs.tracing.charges import Charge, ledger_charges, match_charges, run_dir_of
from cooplab.graphs.tracing.labels import ORIGINAL_LATENCY, ORIGINAL_USAGE, is_cached

from .otlp_common import OTLP_TRACES_PATH, OtlpConfigError, clean_str, cut_text

DEFAULT_PROJECT = "cooplab"

MAX_VALUE_CHARS = 32_000  #: input.value / output.value / invocation parameters / metadata are cut here
MAX_MESSAGE_CHARS = 8_000  #: one message's content in llm.input_messages / llm.output_messages
MAX_MESSAGES = 64  #: messages kept per side (the last ones: the newest turns matter most)
MAX_NAME_CHARS = 256  #: span names, tool and model names
MAX_ERROR_CHARS = 8_000  #: the traceback in the exception event
MAX_TOKENS = 2**53  #: a token count at or above this is not a count (and could not be a protobuf int64)
MAX_BATCH = 256  #: spans per OTLP request

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def require_viewer() -> None:
    """Raise ``MissingExtra`` (``cooplab: error: OTLP export needs 'pip install cooplab[viewer]'``)
    unless the OpenTelemetry SDK, its OTLP/HTTP exporter and the OpenInference conventions import.
    ``cooplab.extras.require`` looks at top-level packages only, and ``opentelemetry`` (the API) comes
    with the core, so the sub-packages are looked up here as well."""
    import importlib.util

    require("viewer", "OTLP export")
    gone = []
    for mod in EXTRAS["viewer"]:
        if mod.startswith("phoenix"):
            continue  # Phoenix's client reads spans back (tests); the export does not need it
        try:
            found = importlib.util.find_spec(mod) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            gone.append(mod)
    if gone:
        raise MissingExtra(f"OTLP export needs 'pip install cooplab[viewer]' (missing: {', '.join(gone)})")


class OtlpExportError(RuntimeError):
    """The OTLP endpoint could not be reached, refused the spans or answered an error (one line)."""


class _Skip(Exception):
    """A record that cannot become a span; the message is the reason (counted, not raised)."""


@dataclass
class OtlpExportResult:
    """What an export did. ``skipped`` maps a reason to the number of lines skipped for it;
    ``first_skip`` is the first of them with its line number."""

    spans: int = 0
    traces: int = 0
    endpoint: str = ""
    project: str = DEFAULT_PROJECT
    file: str = ""
    lines: int = 0  #: non-blank lines read (spans + skipped)
    skipped: dict[str, int] = field(default_factory=dict)
    first_skip: str | None = None
    orphans: int = 0  #: spans whose parent run is not in the file (kept, pointing at the missing parent)
    requests: int = 0
    seconds: float = 0.0
    prices: list[dict[str, str]] | None = None  #: Phoenix price entries set (``phoenix_prices``), else None
    price_seconds: float = 0.0  #: time spent setting Phoenix's prices and waiting for it to use them

    @property
    def n_skipped(self) -> int:
        return sum(self.skipped.values())

    def as_dict(self) -> dict[str, Any]:
        return {
            "spans": self.spans,
            "traces": self.traces,
            "endpoint": self.endpoint,
            "project": self.project,
            "file": self.file,
            "lines": self.lines,
            "skipped": self.n_skipped,
            "skipped_by_reason": dict(self.skipped),
            "first_skip": self.first_skip,
            "orphans": self.orphans,
            "requests": self.requests,
            "seconds": round(self.seconds, 4),
            "spans_per_second": round(self.spans / self.seconds, 1) if self.seconds > 0 else None,
            "prices": self.prices,
            "price_seconds": round(self.price_seconds, 4),
        }


# ---------------------------------------------------------------------------------------------
# URL and file
def otlp_traces_url(url: Any) -> str:
    """``url`` as the OTLP/HTTP traces endpoint: a base URL (``http://127.0.0.1:6006``, with or
    without a path prefix) gets ``/v1/traces`` appended; a URL already ending in ``/v1/traces`` is
    kept. Raises :class:`OtlpConfigError` for anything that is not an http(s) URL with a host."""
    if not isinstance(url, str) or not url.strip():
        raise OtlpConfigError("--otlp needs a URL such as http://127.0.0.1:6006 (Phoenix) or http://127.0.0.1:4318")
    raw = url.strip()
    if any(c.isspace() for c in raw) or any(ord(c) < 32 for c in raw):
        raise OtlpConfigError(f"--otlp URL {raw[:200]!r} contains spaces or control characters")
    try:
        parts = urlsplit(raw)
        port = parts.port  # raises ValueError for a port out of range or not a number
    except ValueError as exc:
        raise OtlpConfigError(f"--otlp URL {raw[:200]!r} is malformed: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise OtlpConfigError(
            f"--otlp must be an http(s) URL with a host, such as http://127.0.0.1:6006, got {raw[:200]!r}"
        )
    if port == 0:
        raise OtlpConfigError(f"--otlp URL {raw[:200]!r} has port 0")
    if parts.query or parts.fragment:
        raise OtlpConfigError(f"--otlp URL {raw[:200]!r} must not have a query or fragment")
    path = parts.path.rstrip("/")
    if not path.endswith(OTLP_TRACES_PATH):
        path = path + OTLP_TRACES_PATH
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def traces_file(run_dir: str | os.PathLike[str]) -> Path:
    """``run_dir/traces.jsonl``, or ``run_dir`` itself when it is a file."""
    p = Path(run_dir)
    return p if p.is_file() else p / TRACES_FILE


def run_config(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The config.json of a run directory (or of the one holding a traces file) as an object; empty
    when it is missing, damaged or not an object."""
    try:
        cfg = json.loads((run_dir_of(Path(run_dir)) / "config.json").read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError, RecursionError):
        return {}
    return cfg if isinstance(cfg, dict) else {}


def run_metadata(run_dir: str | os.PathLike[str]) -> dict[str, str]:
    """``cooplab.run_dir`` (absolute) and, when the run directory's config.json names one,
    ``cooplab.task``. A missing or damaged config.json only leaves the task out."""
    meta = {"cooplab.run_dir": clean_str(str(run_dir_of(Path(run_dir)).resolve()))}
    task = run_config(run_dir).get("task")
    if isinstance(task, str) and task.strip():
        meta["cooplab.task"] = clean_str(task.strip())[:MAX_NAME_CHARS]
    return meta


def run_session(run_dir: str | os.PathLike[str]) -> str:
    """The session of a run directory's spans when its runs name none: the run's id
    (config.json's ``record.thread_id``), else (a run made before it was recorded) the directory."""
    record = run_config(run_dir).get("record")
    tid = record.get("thread_id") if isinstance(record, dict) else None
    if isinstance(tid, str) and tid.strip():
        return cut_text(clean_str(tid.strip()), MAX_NAME_CHARS)
    return cut_text(clean_str(str(run_dir_of(Path(run_dir)).resolve())), MAX_NAME_CHARS)


def run_charges(path: Path) -> dict[str, Charge]:
    """What the run's ledger charged for each model call of the traces file ``path``, by run id
    (a first pass over the file; runs that cannot be read are left out here and counted later)."""
    charges = ledger_charges(path)
    if not charges:
        return {}
    calls = []
    for _, rec in iter_records(path, Counter(), []):
        if rec.get("run_type") == "llm":
            calls.append({k: rec.get(k) for k in ("id", "run_type", "start_time", "error", "extra")})
    return match_charges(calls, charges)


def charges_by_model(path: Path, charges: dict[str, Charge]) -> dict[str, list[Charge]]:
    """The charges of ``charges`` (by run id) grouped by the ``llm.model_name`` their spans get."""
    out: dict[str, list[Charge]] = {}
    for _, rec in iter_records(path, Counter(), []):
        ch = charges.get(str(rec.get("id"))) if rec.get("run_type") == "llm" else None
        if ch is not None:
            out.setdefault(model_name(rec), []).append(ch)
    return out


def iter_records(path: Path, counts: Counter, first: list[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """The run objects of a traces file with their line numbers; every other non-blank line is
    counted in ``counts`` by reason (and the first reason kept in ``first``)."""

    def skip(i: int, reason: str) -> None:
        counts[reason] += 1
        if not first:
            first.append(f"line {i}: {reason}")

    with open(path, encoding="utf-8", errors="replace") as fh:
        for i, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except (ValueError, RecursionError):
                skip(i, "not JSON")
                continue
            if not isinstance(rec, dict):
                skip(i, "not a run object")
                continue
            yield i, rec


# ---------------------------------------------------------------------------------------------
# values
def _to_json(value: Any, n: int = MAX_VALUE_CHARS) -> str:
    try:
        s = json.dumps(value, ensure_ascii=False, default=str)
    except (ValueError, TypeError, RecursionError):
        s = repr(value)[: n + 1]
    return cut_text(s, n)


def _count(v: Any) -> int | None:
    """A token count: a non-negative integer below :data:`MAX_TOKENS` (an integral float is
    accepted); NaN, negatives, huge values, bools and strings are not counts."""
    if isinstance(v, bool):
        return None
    if isinstance(v, float):
        if not math.isfinite(v) or v != int(v):
            return None
        v = int(v)
    if isinstance(v, int) and 0 <= v < MAX_TOKENS:
        return v
    return None


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _name(v: Any, default: str) -> str:
    if isinstance(v, str) and v.strip():
        return cut_text(v.strip(), MAX_NAME_CHARS)
    return default


def _canon_id(v: Any) -> str | None:
    """A run id as text (a UUID in its canonical form); None when there is none."""
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, bool) or not isinstance(v, (str, int)):
        return None
    s = str(v).strip()
    if not s or len(s) > 256:
        return None
    try:
        return str(uuid.UUID(s))
    except ValueError:
        return clean_str(s)


def span_id_of(run_id: str) -> int:
    """The 64-bit span id of a LangSmith run id (deterministic, never 0)."""
    h = hashlib.blake2b(run_id.encode("utf-8", "replace"), digest_size=8, person=b"cooplab-span").digest()
    return int.from_bytes(h, "big") or 1


def trace_id_of(trace_id: str) -> int:
    """The 128-bit trace id of a LangSmith trace id: the UUID's own value (so Phoenix and LangSmith
    show the same trace id), else a hash of the text; never 0."""
    try:
        v = uuid.UUID(trace_id).int
        if v:
            return v
    except ValueError:
        pass
    h = hashlib.blake2b(trace_id.encode("utf-8", "replace"), digest_size=16, person=b"cooplab-trace").digest()
    return int.from_bytes(h, "big") or 1


def _time_ns(v: Any) -> int | None:
    """An ISO 8601 time (naive = UTC) as nanoseconds since the epoch; None when unusable."""
    if not isinstance(v, str) or not v.strip() or len(v) > 64:
        return None
    try:
        dt = datetime.fromisoformat(v.strip())
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    try:
        ns = (dt - _EPOCH) // timedelta(microseconds=1) * 1000
    except OverflowError:
        return None
    return ns if 0 <= ns < 2**63 else None


# ---------------------------------------------------------------------------------------------
# LangSmith run -> OpenInference attributes
_KINDS = {
    "llm": "LLM",
    "tool": "TOOL",
    "retriever": "RETRIEVER",
    "embedding": "EMBEDDING",
    "chain": "CHAIN",
    "prompt": "CHAIN",
    "parser": "CHAIN",
}
_ROLES = {
    "human": "user",
    "user": "user",
    "ai": "assistant",
    "assistant": "assistant",
    "system": "system",
    "tool": "tool",
    "function": "function",
    "chat": "user",
    "developer": "system",
}
_CLASS_ROLES = {
    "HumanMessage": "user",
    "AIMessage": "assistant",
    "AIMessageChunk": "assistant",
    "SystemMessage": "system",
    "ToolMessage": "tool",
    "FunctionMessage": "function",
    "HumanMessageChunk": "user",
    "ChatMessage": "user",
}


def span_kind(rec: dict[str, Any]) -> str:
    """The OpenInference span kind of a LangSmith run."""
    rt = rec.get("run_type")
    kind = _KINDS.get(rt, "UNKNOWN") if isinstance(rt, str) else "UNKNOWN"
    if kind == "CHAIN" and rt == "chain":
        agent = _dict(_dict(rec.get("extra")).get("metadata")).get("agent_id")
        if isinstance(agent, str) and agent and agent == rec.get("name"):
            return "AGENT"
    return kind


def _generation_messages(rec: dict[str, Any]) -> list[Any]:
    gens = _dict(rec.get("outputs")).get("generations")
    if isinstance(gens, list) and gens and isinstance(gens[0], list):
        gens = gens[0]
    out = []
    for g in gens if isinstance(gens, list) else []:
        if isinstance(g, dict):
            out.append(
                g.get("message") if isinstance(g.get("message"), dict) else {"type": "ai", "content": g.get("text")}
            )
    return out


def _msg_fields(m: Any) -> dict[str, Any]:
    """A message's fields whether LangChain-serialized (``{"lc": 1, "kwargs": {...}}``) or plain."""
    if not isinstance(m, dict):
        return {"content": m} if isinstance(m, str) else {}
    kw = m.get("kwargs")
    if isinstance(kw, dict):
        f = dict(kw)
        ident = m.get("id")
        if "type" not in f and isinstance(ident, list) and ident and isinstance(ident[-1], str):
            f["_class"] = ident[-1]
        return f
    return m


def token_counts(rec: dict[str, Any]) -> dict[str, int]:
    """``prompt``/``completion``/``total`` token counts of a run: the run's own fields first, then
    ``extra.usage_metadata``, then the answer message's usage (``usage_metadata`` or an OpenAI-style
    ``response_metadata.token_usage``). Values that are not counts are left out; a missing total is
    the sum of the other two."""
    sources: list[dict[str, Any]] = [
        {
            "prompt": rec.get("prompt_tokens"),
            "completion": rec.get("completion_tokens"),
            "total": rec.get("total_tokens"),
        },
    ]
    um = _dict(_dict(rec.get("extra")).get("usage_metadata"))
    sources.append(
        {"prompt": um.get("input_tokens"), "completion": um.get("output_tokens"), "total": um.get("total_tokens")}
    )
    for m in _generation_messages(rec)[:1]:
        f = _msg_fields(m)
        um = _dict(f.get("usage_metadata"))
        sources.append(
            {"prompt": um.get("input_tokens"), "completion": um.get("output_tokens"), "total": um.get("total_tokens")}
        )
        tu = _dict(_dict(f.get("response_metadata")).get("token_usage"))
        sources.append(
            {
                "prompt": tu.get("prompt_tokens"),
                "completion": tu.get("completion_tokens"),
                "total": tu.get("total_tokens"),
            }
        )
    out: dict[str, int] = {}
    for key in ("prompt", "completion", "total"):
        for src in sources:
            c = _count(src.get(key))
            if c is not None:
                out[key] = c
                break
    if (
        "total" not in out
        and "prompt" in out
        and "completion" in out
        and out["prompt"] + out["completion"] < MAX_TOKENS
    ):
        out["total"] = out["prompt"] + out["completion"]
    return out


def model_name(rec: dict[str, Any]) -> str:
    """The model of an ``llm`` run: ``extra.metadata.ls_model_name``, else the invocation
    parameters' ``model``/``model_name``/``model_id``, else the answer's ``response_metadata``
    ``model_name``/``model``, else the run's name (the chat model's class, e.g. ``ScriptedChatModel``,
    for models that name no model). Before the invocation parameters: cooplab's own ``metadata.model``
    (the model's spec id, set on every model call cooplab makes)."""
    extra = _dict(rec.get("extra"))
    md = _dict(extra.get("metadata"))
    cands = [md.get("ls_model_name"), md.get("model")]
    ip = _dict(extra.get("invocation_params"))
    cands += [ip.get("model"), ip.get("model_name"), ip.get("model_id")]
    for m in _generation_messages(rec)[:1]:
        rm = _dict(_msg_fields(m).get("response_metadata"))
        cands += [rm.get("model_name"), rm.get("model")]
    for c in cands:
        if isinstance(c, str) and c.strip():
            return cut_text(c.strip(), MAX_NAME_CHARS)
    return _name(rec.get("name"), "unknown")


def _content_text(c: Any) -> str | None:
    if c is None:
        return None
    if isinstance(c, str):
        return c
    if isinstance(c, list):  # content parts: keep the text ones
        texts = []
        for part in c:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])
        return "\n".join(texts) if texts else _to_json(c, MAX_MESSAGE_CHARS)
    return _to_json(c, MAX_MESSAGE_CHARS)


def _put_messages(attrs: dict[str, Any], prefix: str, messages: list[Any]) -> None:
    from openinference.semconv.trace import MessageAttributes as MA
    from openinference.semconv.trace import ToolCallAttributes as TCA

    if len(messages) > MAX_MESSAGES:
        messages = messages[-MAX_MESSAGES:]
    for i, m in enumerate(messages):
        f = _msg_fields(m)
        if not f:
            continue
        p = f"{prefix}.{i}.message."
        role = f.get("role") if isinstance(f.get("role"), str) else None
        typ = f.get("type") if isinstance(f.get("type"), str) else None
        role = (
            _ROLES.get(role or "", None) or _ROLES.get(typ or "", None) or _CLASS_ROLES.get(f.get("_class", ""), None)
        )
        if role:
            attrs[p + MA.MESSAGE_ROLE.removeprefix("message.")] = role
        text = _content_text(f.get("content"))
        if text is not None:
            attrs[p + MA.MESSAGE_CONTENT.removeprefix("message.")] = cut_text(text, MAX_MESSAGE_CHARS)
        if isinstance(f.get("name"), str) and f["name"]:
            attrs[p + MA.MESSAGE_NAME.removeprefix("message.")] = cut_text(f["name"], MAX_NAME_CHARS)
        if isinstance(f.get("tool_call_id"), str) and f["tool_call_id"]:
            attrs[p + MA.MESSAGE_TOOL_CALL_ID.removeprefix("message.")] = cut_text(f["tool_call_id"], MAX_NAME_CHARS)
        calls = f.get("tool_calls")
        for j, tc in enumerate(calls[:MAX_MESSAGES] if isinstance(calls, list) else []):
            if not isinstance(tc, dict):
                continue
            q = f"{p}{MA.MESSAGE_TOOL_CALLS.removeprefix('message.')}.{j}."
            fn = _dict(tc.get("function"))  # OpenAI shape
            name = tc.get("name") if isinstance(tc.get("name"), str) else fn.get("name")
            args = tc.get("args") if "args" in tc else fn.get("arguments")
            if isinstance(tc.get("id"), str):
                attrs[q + TCA.TOOL_CALL_ID] = cut_text(tc["id"], MAX_NAME_CHARS)
            if isinstance(name, str):
                attrs[q + TCA.TOOL_CALL_FUNCTION_NAME] = cut_text(name, MAX_NAME_CHARS)
            if args is not None:
                attrs[q + TCA.TOOL_CALL_FUNCTION_ARGUMENTS_JSON] = (
                    args
                    if isinstance(args, str) and len(args) <= MAX_MESSAGE_CHARS
                    else (
                        cut_text(args, MAX_MESSAGE_CHARS)
                        if isinstance(args, str)
                        else _to_json(args, MAX_MESSAGE_CHARS)
                    )
                )


def _put_value(attrs: dict[str, Any], keys: tuple[str, str], value: Any) -> None:
    from openinference.semconv.trace import OpenInferenceMimeTypeValues as Mime

    if value is None or value == {}:
        return
    if isinstance(value, dict) and set(value) == {"output"} and isinstance(value["output"], str):
        value = value["output"]  # a tool's plain text result
    if isinstance(value, str):
        attrs[keys[0]] = cut_text(value, MAX_VALUE_CHARS)
        attrs[keys[1]] = Mime.TEXT.value
    else:
        attrs[keys[0]] = _to_json(value)
        attrs[keys[1]] = Mime.JSON.value


def span_attributes(
    rec: dict[str, Any],
    kind: str,
    run_id: str,
    meta: dict[str, str],
    *,
    session: str | None = None,
    charge: Charge | None = None,
) -> dict[str, Any]:
    """The OpenInference attributes of one LangSmith run (every value a str, bool, int or float, or
    a list of str): ``session.id`` (the run's ``session_id`` metadata, else ``session``) and, for a
    model call the ledger charged (``charge``), its cost, with ``llm.token_count.*`` the charged
    counts (so a viewer that prices tokens, as Phoenix does, finds the ledger's cost) and the counts
    the model reported in ``cooplab.reported_tokens.*``; an uncharged call keeps the reported ones."""
    from openinference.semconv.trace import SpanAttributes as SA

    extra = _dict(rec.get("extra"))
    md = _dict(extra.get("metadata"))
    attrs: dict[str, Any] = {SA.OPENINFERENCE_SPAN_KIND: kind}
    sid = md.get("session_id")
    sid = cut_text(sid.strip(), MAX_NAME_CHARS) if isinstance(sid, str) and sid.strip() else session
    if sid:
        attrs[SA.SESSION_ID] = sid
    cached = kind == "LLM" and is_cached(md)
    if cached:
        charge = None  # a replay is never matched to a charge: it cost nothing
        _put_replay(attrs, rec, md)
    elif kind == "LLM" and charge is not None:
        _put_charge(attrs, charge)
    _put_value(attrs, (SA.INPUT_VALUE, SA.INPUT_MIME_TYPE), rec.get("inputs"))
    _put_value(attrs, (SA.OUTPUT_VALUE, SA.OUTPUT_MIME_TYPE), rec.get("outputs"))
    name = _name(rec.get("name"), "run")
    if kind == "LLM":
        attrs[SA.LLM_MODEL_NAME] = model_name(rec)
        prov = md.get("ls_provider")
        if isinstance(prov, str) and prov:
            attrs[SA.LLM_PROVIDER] = cut_text(prov, MAX_NAME_CHARS)
        reported = token_counts(rec)
        counts = (
            reported
            if charge is None
            else {
                "prompt": charge.input_tokens,
                "completion": charge.output_tokens,
                "total": charge.input_tokens + charge.output_tokens,
            }
        )
        if cached:  # no token was processed: a viewer that prices tokens prices nothing
            counts = {"prompt": 0, "completion": 0, "total": 0}
        for key, attr in (
            ("prompt", SA.LLM_TOKEN_COUNT_PROMPT),
            ("completion", SA.LLM_TOKEN_COUNT_COMPLETION),
            ("total", SA.LLM_TOKEN_COUNT_TOTAL),
        ):
            if key in counts:
                attrs[attr] = counts[key]
            if charge is not None and key in reported:
                attrs[f"cooplab.reported_tokens.{key}"] = reported[key]
        ip = extra.get("invocation_params")
        if isinstance(ip, dict) and ip:
            attrs[SA.LLM_INVOCATION_PARAMETERS] = _to_json(ip)
        msgs = _dict(rec.get("inputs")).get("messages")
        if isinstance(msgs, list) and msgs and isinstance(msgs[0], list):
            msgs = msgs[0]  # LangChain's batch of prompts: the first (and only) one
        if isinstance(msgs, list):
            _put_messages(attrs, SA.LLM_INPUT_MESSAGES, msgs)
        _put_messages(attrs, SA.LLM_OUTPUT_MESSAGES, _generation_messages(rec))
    elif kind == "TOOL":
        attrs[SA.TOOL_NAME] = name
        tcid = extra.get("tool_call_id")
        if isinstance(tcid, str) and tcid:
            attrs[SA.TOOL_ID] = cut_text(tcid, MAX_NAME_CHARS)
    elif kind == "AGENT":
        attrs[SA.AGENT_NAME] = name
    node = md.get("langgraph_node")
    if isinstance(node, str) and node:
        attrs[SA.GRAPH_NODE_ID] = cut_text(node, MAX_NAME_CHARS)
    tags = rec.get("tags")
    if isinstance(tags, list):
        clean = [cut_text(t, MAX_NAME_CHARS) for t in tags[:MAX_MESSAGES] if isinstance(t, str)]
        if clean:
            attrs[SA.TAG_TAGS] = clean
    run_type = rec.get("run_type") if isinstance(rec.get("run_type"), str) else None
    attrs[SA.METADATA] = _to_json({**md, **meta, "langsmith.run_id": run_id, "langsmith.run_type": run_type})
    attrs["langsmith.run_id"] = run_id
    if run_type:
        attrs["langsmith.run_type"] = cut_text(run_type, MAX_NAME_CHARS)
    for k, v in meta.items():
        attrs[k] = v
    return attrs


def _put_charge(attrs: dict[str, Any], charge: Charge) -> None:
    """OpenInference's cost attributes (USD) of a charged model call, and the token counts the
    ledger charged (``cooplab.charged_tokens.*``, the same as ``llm.token_count.*`` then: at most
    the call's output cap, unlike the model-reported ``cooplab.reported_tokens.*``)."""
    from openinference.semconv.trace import SpanAttributes as SA

    attrs[SA.LLM_COST_TOTAL] = float(charge.cost)
    if charge.prompt_cost is not None and charge.completion_cost is not None:
        attrs[SA.LLM_COST_PROMPT] = float(charge.prompt_cost)
        attrs[SA.LLM_COST_COMPLETION] = float(charge.completion_cost)
    attrs["cooplab.charged_tokens.prompt"] = charge.input_tokens
    attrs["cooplab.charged_tokens.completion"] = charge.output_tokens


def _put_replay(attrs: dict[str, Any], rec: dict[str, Any], md: dict[str, Any]) -> None:
    """The attributes of a model call answered from the response cache: ``cooplab.cached`` true,
    cost zero (``llm.cost.*`` 0.0; ``llm.token_count.*`` are set to 0 by the caller), and what the
    original call took: ``cooplab.original_tokens.*`` (the metadata's ``original_usage``, else the
    run's own counts) and ``cooplab.original_latency_s``."""
    from openinference.semconv.trace import SpanAttributes as SA

    attrs["cooplab.cached"] = True
    attrs[SA.LLM_COST_TOTAL] = attrs[SA.LLM_COST_PROMPT] = attrs[SA.LLM_COST_COMPLETION] = 0.0
    usage = _dict(md.get(ORIGINAL_USAGE))
    original = {
        "prompt": _count(usage.get("input_tokens")),
        "completion": _count(usage.get("output_tokens")),
        "total": _count(usage.get("total_tokens")),
    }
    if original["prompt"] is None or original["completion"] is None:
        original = dict(token_counts(rec))
    for key in ("prompt", "completion", "total"):
        if original.get(key) is not None:
            attrs[f"cooplab.original_tokens.{key}"] = original[key]
    latency = md.get(ORIGINAL_LATENCY)
    if isinstance(latency, (int, float)) and not isinstance(latency, bool) and 0 <= latency < math.inf:
        attrs["cooplab.original_latency_s"] = float(latency)


def _error_text(rec: dict[str, Any]) -> str | None:
    err = rec.get("error")
    if err is None or err == "":
        return "error" if rec.get("status") == "error" else None
    return clean_str(err if isinstance(err, str) else _to_json(err, MAX_ERROR_CHARS))


def _error_summary(err: str) -> tuple[str, str | None]:
    """(one-line message, exception type) of a LangSmith error text such as
    ``RuntimeError('boom')Traceback (most recent call last): ...``."""
    head = err.split("Traceback (most recent call last)", 1)[0].strip() or err.strip()
    head = head.splitlines()[0] if head else "error"
    m = re.match(r"^([A-Za-z_][\w.]*)\((.*)\)$", head, re.S)
    if m:
        return cut_text(m.group(0), 500), m.group(1)
    m = re.match(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exhausted|Interrupt|Exit)):\s*(.*)$", head)
    return cut_text(head, 500), (m.group(1) if m else None)


class SpanBuilder:
    """Turns LangSmith run records into SDK ``ReadableSpan`` objects (one resource for the export)."""

    def __init__(
        self,
        project: str,
        meta: dict[str, str],
        *,
        session: str | None = None,
        charges: dict[str, Charge] | None = None,
    ):
        require_viewer()
        self.session, self.charges = session, charges or {}
        from openinference.semconv.resource import ResourceAttributes
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope

        self.meta = meta
        self.resource = Resource.create(
            {
                "service.name": "cooplab",
                ResourceAttributes.PROJECT_NAME: project,
                **meta,
            }
        )
        self.scope = InstrumentationScope("cooplab.evals.otlp_export", "1")

    def build(self, rec: dict[str, Any]):
        """One span, or :class:`_Skip` with the reason."""
        from opentelemetry import trace as trace_api
        from opentelemetry.sdk.trace import Event, ReadableSpan
        from opentelemetry.trace import Status, StatusCode

        run_id = _canon_id(rec.get("id"))
        if run_id is None:
            raise _Skip("no usable id")
        parent_id = rec.get("parent_run_id")
        parent = _canon_id(parent_id) if parent_id not in (None, "") else None
        if parent_id not in (None, "") and parent is None:
            raise _Skip("unusable parent_run_id")
        if parent == run_id:
            raise _Skip("a run that is its own parent")
        trace = _canon_id(rec.get("trace_id"))
        if trace is None:
            dotted = rec.get("dotted_order")
            m = re.match(r"^\d{8}T\d{6}\d*Z([0-9a-fA-F-]{36})", dotted) if isinstance(dotted, str) else None
            trace = str(uuid.UUID(m.group(1))) if m else (run_id if parent is None else None)
        if trace is None:
            raise _Skip("no trace_id")
        start = _time_ns(rec.get("start_time"))
        if start is None:
            raise _Skip("no usable start_time")
        end = _time_ns(rec.get("end_time"))
        if end is None or end < start:
            end = start
        kind = span_kind(rec)
        attrs = span_attributes(
            rec, kind, run_id, self.meta, session=self.session, charge=self.charges.get(str(rec.get("id")))
        )
        err = _error_text(rec)
        events = []
        if err is not None:
            msg, etype = _error_summary(err)
            status = Status(StatusCode.ERROR, msg)
            ev = {"exception.message": msg, "exception.stacktrace": cut_text(err, MAX_ERROR_CHARS)}
            if etype:
                ev["exception.type"] = etype
            events.append(Event("exception", ev, timestamp=end))
        elif rec.get("status") == "success" or rec.get("end_time"):
            status = Status(StatusCode.OK)
        else:
            status = Status(StatusCode.UNSET)
        tid = trace_id_of(trace)
        ctx = trace_api.SpanContext(
            tid, span_id_of(run_id), is_remote=False, trace_flags=trace_api.TraceFlags(trace_api.TraceFlags.SAMPLED)
        )
        pctx = (
            trace_api.SpanContext(
                tid, span_id_of(parent), is_remote=False, trace_flags=trace_api.TraceFlags(trace_api.TraceFlags.SAMPLED)
            )
            if parent
            else None
        )
        span = ReadableSpan(
            name=_name(rec.get("name"), "run"),
            context=ctx,
            parent=pctx,
            resource=self.resource,
            attributes=attrs,
            events=events,
            kind=trace_api.SpanKind.INTERNAL,
            status=status,
            start_time=start,
            end_time=end,
            instrumentation_scope=self.scope,
        )
        return span, run_id, parent, trace


def convert_runs(
    run_dir: str | os.PathLike[str],
    *,
    project: str = DEFAULT_PROJECT,
    result: OtlpExportResult | None = None,
    charges: dict[str, Charge] | None = None,
) -> Iterator[Any]:
    """The spans of a traces file, in file order (a generator; ``result`` collects the counts).
    ``charges``: the ledger's charges by run id, if already read (:func:`run_charges`)."""
    path = traces_file(run_dir)
    if not path.is_file():
        raise OtlpConfigError(f"no {TRACES_FILE} in {run_dir}")
    res = result if result is not None else OtlpExportResult()
    res.file = str(path)
    res.project = project
    builder = SpanBuilder(
        project,
        run_metadata(run_dir),
        session=run_session(run_dir),
        charges=run_charges(path) if charges is None else charges,
    )
    from cooplab.graphs.tracing import scrub, secret_values

    secrets = secret_values()  # scrubbed again before export, as the LangSmith export does
    counts: Counter = Counter()
    first: list[str] = []
    seen: set[str] = set()
    parents: set[str] = set()
    traces: set[str] = set()
    try:
        for i, rec in iter_records(path, counts, first):
            try:
                span, run_id, parent, trace = builder.build(scrub(rec, secrets))
                if run_id in seen:
                    raise _Skip("a repeated run id")
            except _Skip as s:
                reason = str(s)
            except Exception as exc:  # a value this converter did not foresee: skip the run, keep going
                reason = f"could not convert ({type(exc).__name__})"
            else:
                seen.add(run_id)
                traces.add(trace)
                if parent:
                    parents.add(parent)
                res.spans += 1
                yield span
                continue
            counts[reason] += 1
            if not first:
                first.append(f"line {i}: {reason}")
    except OSError as exc:
        raise OtlpConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    finally:
        res.lines = res.spans + sum(counts.values())  # the non-blank lines read
        res.skipped = dict(counts)
        res.first_skip = first[0] if first else None
        res.traces = len(traces)
        res.orphans = len(parents - seen)


# ---------------------------------------------------------------------------------------------
# sending
class _Capture(logging.Handler):
    """Keeps the exporter's log records (its only report of why a request failed)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.messages.append(record.getMessage())
        except Exception:
            self.messages.append(str(record.msg))


def _probe(url: str) -> str | None:
    """None when a TCP connection to ``url``'s host and port opens, else why it does not."""
    import socket

    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname, port), timeout=2):
            return None
    except OSError as exc:
        return f"[Errno {exc.errno}] {exc.strerror}" if exc.errno else str(exc) or type(exc).__name__


def _failure_line(messages: list[str], url: str, answer: tuple[int, str] | None = None) -> str:
    """One line saying why the exporter failed, from the last HTTP answer or its log messages."""
    text = " ".join(re.sub(r"\s+", " ", m) for m in messages if m)
    errno = re.search(r"\[Errno -?\d+\] [^\"')(]+", text)
    if answer is not None and not 200 <= answer[0] < 300:
        why = f"the server answered HTTP {answer[0]} {cut_text(answer[1], 100)}".rstrip()
    elif errno and "refused" in errno.group(0).lower():
        why = f"nothing answers there, is the server running? ({errno.group(0).strip()})"
    elif errno:
        why = f"cannot connect ({errno.group(0).strip()})"
    elif "timed out" in text.lower() or "timeout" in text.lower():
        # the exporter gave up within its deadline without saying why: ask the port ourselves
        probe = _probe(url)
        why = (
            "no answer in time (raise --timeout or check the server)"
            if probe is None
            else f"nothing answers there, is the server running? ({probe})"
        )
    else:
        why = text[:300] or "the request failed (no reason given)"
    return f"OTLP export to {url} failed: {why}"


def export_otlp(
    run_dir: str | os.PathLike[str],
    url: str,
    *,
    project: str | None = None,
    timeout: float = 10.0,
    batch_size: int = MAX_BATCH,
    exporter: Any = None,
    phoenix_prices: bool = False,
) -> OtlpExportResult:
    """Send the runs of ``run_dir/traces.jsonl`` (or a traces file) as OpenInference spans to the
    OTLP/HTTP endpoint ``url`` (a base URL or a full ``.../v1/traces`` URL), ``batch_size`` spans per
    request, each request given ``timeout`` seconds (connection failures are retried within it).
    ``exporter``: any ``SpanExporter`` to use instead (tests pass the SDK's in-memory one). Returns
    what was sent; raises :class:`OtlpConfigError` (bad URL, project or file) or
    :class:`OtlpExportError` (the endpoint failed; spans of earlier batches may have arrived).
    ``phoenix_prices``: ``url`` is an Arize Phoenix; first set its price of each of the run's models
    to the ledger's rates (:mod:`cooplab.evals.phoenix_prices`; its failures raise
    ``PhoenixPriceError``, an :class:`OtlpConfigError`, before any span is sent)."""
    require_viewer()
    endpoint = otlp_traces_url(url) if exporter is None else str(url)
    if project is None:
        project = DEFAULT_PROJECT
    if not isinstance(project, str) or not project.strip() or len(project) > 200 or any(ord(c) < 32 for c in project):
        raise OtlpConfigError(f"--project must be a name of 1 to 200 printable characters, got {str(project)[:60]!r}")
    project = project.strip()
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, (int, float))
        or not math.isfinite(timeout)
        or not 0 < timeout <= 600
    ):
        raise OtlpConfigError(f"--timeout must be a number of seconds in (0, 600], got {timeout!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= 10_000:
        raise OtlpConfigError(f"batch size must be an integer from 1 to 10000, got {batch_size!r}")
    from opentelemetry.sdk.trace.export import SpanExportResult

    own = exporter is None
    answers: list[tuple[int, str]] = []  # (status, reason) of every HTTP answer, for the error line
    if exporter is None:  # own
        import requests
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
            OTLPSpanExporter,
        )

        session = requests.Session()
        session.hooks["response"].append(lambda r, *a, **k: answers.append((r.status_code, str(r.reason or ""))))
        exporter = OTLPSpanExporter(endpoint=endpoint, timeout=timeout, session=session)
    res = OtlpExportResult(endpoint=endpoint, project=project)
    otel_log = logging.getLogger("opentelemetry")
    cap = _Capture()
    old = (otel_log.propagate, otel_log.level)
    otel_log.addHandler(cap)
    otel_log.propagate = False  # the exporter logs its failures (with tracebacks): we report them once
    otel_log.setLevel(logging.WARNING)
    t0 = time.perf_counter()
    sent = 0
    try:
        path = traces_file(run_dir)
        if not path.is_file():
            raise OtlpConfigError(f"no {TRACES_FILE} in {run_dir}")
        charges = run_charges(path)
        if phoenix_prices:
            from .phoenix_prices import register_prices

            res.prices = [
                e.as_dict()
                for e in register_prices(
                    run_dir,
                    endpoint,
                    charges_by_model(path, charges),
                    lambda span: exporter.export((span,)) is SpanExportResult.SUCCESS,
                    timeout=timeout,
                )
            ]
            res.price_seconds = time.perf_counter() - t0
            t0 = time.perf_counter()  # ``seconds`` is the time of sending the spans
        batch: list[Any] = []

        def flush() -> None:
            nonlocal sent
            if not batch:
                return
            cap.messages.clear()
            answers.clear()
            outcome = exporter.export(tuple(batch))
            res.requests += 1
            if outcome is not SpanExportResult.SUCCESS:
                raise OtlpExportError(
                    _failure_line(cap.messages, endpoint, answers[-1] if answers else None)
                    + (f"; {sent} spans were sent before" if sent else "")
                )
            sent += len(batch)
            batch.clear()

        for span in convert_runs(run_dir, project=project, result=res, charges=charges):
            batch.append(span)
            if len(batch) >= batch_size:
                flush()
        flush()
    finally:
        res.seconds = time.perf_counter() - t0
        otel_log.removeHandler(cap)
        otel_log.propagate, _ = old
        otel_log.setLevel(old[1])
        if own:
            try:
                exporter.shutdown()
            except Exception:
                pass
    return res
