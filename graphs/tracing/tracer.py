"""The tracer: a LangChain callback handler writing LangSmith-format runs to ``traces.jsonl``.

:class:`JsonlTracer` turns each run of a graph invocation (the root graph run, each node's
chain run, each ``llm`` run, each ``tool`` run) into one JSON record when it ends, and appends
a finished root run's whole tree to the file. A journal next to the file
(``.traces.jsonl.<trace id>.part``) keeps the root's start and each finished node's subtree,
so that :func:`recover_interrupted` can move a killed process's finished work into the file
before the next run appends its own.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import re
import threading
import traceback
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.callbacks.base import BaseCallbackHandler
from langchain_core.load import dumpd

from cooplab.limits import clean_text

from . import convert
from .convert import fit_line, safe_value, to_jsonable
from .labels import is_cached
from .scrubbing import scrub, secret_values, shared_json

logger = logging.getLogger("cooplab.graphs.tracing")  # one logger for the package


# ----------------------------------------------------------------------------------------
#: the parts of a run record made by safe_value (converted and scrubbed as they were copied)
_SCRUBBED_PARTS = frozenset(("inputs", "outputs", "extra"))


class _Record(dict):
    """A run record and its JSON line (``line``), so the line is serialized once."""

    line: str | None = None


def _plain_dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _dumps(rec: Mapping[str, Any]) -> str:
    """A record's JSON line, valid UTF-8 whatever its strings hold (a lone surrogate becomes U+FFFD).

    The values a record shares with others (the converted, scrubbed messages of a conversation,
    :func:`~.scrubbing.shared_json`) are serialized once and their text spliced in: a tool loop's
    records repeat the whole conversation, and serializing it again for every record made a traced
    step cost more the longer the conversation. The line is the same as a plain ``json.dumps``."""
    raws: list[str] = []
    marked = _marked(rec, raws)
    if not raws:
        return clean_text(_plain_dumps(rec))
    text = json.dumps(marked, ensure_ascii=False, allow_nan=False, separators=(",", ":"), default=_raw_marker)
    # the shared texts were cleaned when they were made (_clean_dumps): only the record's own text is looked at
    return _RAW.sub(lambda m: raws[int(m.group(1))], clean_text(text))


def _clean_dumps(value: Any) -> str:
    """The JSON text of a shared value as a line holds it: lone surrogates replaced (clean_text maps
    character for character, so cleaning the parts of a line before they are joined is cleaning the line)."""
    return clean_text(_plain_dumps(value))


class _Raw:
    """A shared value's place in a record being serialized: its JSON text is ``raws[i]``."""

    __slots__ = ("i",)

    def __init__(self, i: int) -> None:
        self.i = i


_NONCE = uuid.uuid4().hex
#: a _Raw as json.dumps writes it (the NUL characters are escaped: no string of the record can spell it without the
#: nonce)
_RAW = re.compile('"\\\\u0000' + _NONCE + ':(\\d+)\\\\u0000"')


def _raw_marker(obj: Any) -> str:
    if isinstance(obj, _Raw):
        return f"\x00{_NONCE}:{obj.i}\x00"
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


def _marked(value: Any, raws: list[str], depth: int = 0) -> Any:
    """``value`` with each shared value (one with remembered JSON text) replaced by a :class:`_Raw`;
    containers on the way copied, the rest left as is (``value`` itself is not changed)."""
    t = type(value)
    if t is _Record:
        t = dict
    if t is dict:
        text = shared_json(value, _clean_dumps)
        if text is not None:
            raws.append(text)
            return _Raw(len(raws) - 1)
        items = value.items()
    elif t is list:
        items = enumerate(value)
    else:
        return value
    if depth > convert.MAX_DEPTH + 2:
        return value
    out = None
    for k, v in items:
        if type(v) is dict or type(v) is list:
            m = _marked(v, raws, depth + 1)
            if m is not v:
                if out is None:
                    out = dict(value) if t is dict else list(value)
                out[k] = m
    return value if out is None else out


def _line(rec: Mapping[str, Any]) -> str:
    line = getattr(rec, "line", None)
    return line if line is not None else _dumps(rec)


# ----------------------------------------------------------------------------------------
# Token usage
def _token_count(value: Any) -> int | None:
    """A reported token count as a whole number of at least 0, or None (missing: 0)."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf")) or value != int(value)):
        return None
    n = int(value)
    return n if 0 <= n <= 10**15 else None


class _BadUsage(Exception):
    pass


def _usage_from_outputs(outputs: Any) -> dict[str, int] | None:
    """Sum the token usage of an llm run's outputs (an LLMResult dump). Counts that are not whole
    numbers of at least 0 (infinite, negative, text) make the usage unknown (None): the run is
    recorded without it, as an endpoint's impossible usage is (the ledger says what was charged)."""
    try:
        return _summed_usage(outputs)
    except _BadUsage:
        return None


def _add(tot: dict[str, int], usage: Mapping[str, Any], names: dict[str, tuple[str, ...]]) -> None:
    for k, keys in names.items():
        n = _token_count(next((usage[key] for key in keys if usage.get(key) is not None), None))
        if n is None:
            raise _BadUsage
        tot[k] += n


def _summed_usage(outputs: Any) -> dict[str, int] | None:
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
                _add(tot, um, {k: (k,) for k in tot})
    if not found:
        tu = (outputs.get("llm_output") or {}).get("token_usage") or (outputs.get("llm_output") or {}).get("usage")
        if isinstance(tu, Mapping):
            found = True
            _add(
                tot,
                tu,
                {
                    "input_tokens": ("prompt_tokens", "input_tokens"),
                    "output_tokens": ("completion_tokens", "output_tokens"),
                    "total_tokens": ("total_tokens",),
                },
            )
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
# The runs in progress: light objects built from the callback events
class _Run:
    """A run in progress, with the fields a record is made of (what LangChain's ``Run`` held for
    this tracer, without its validation, ``serialized`` dict and event list)."""

    __slots__ = (
        "id",
        "trace_id",
        "parent_run_id",
        "dotted_order",
        "name",
        "run_type",
        "start_time",
        "end_time",
        "inputs",
        "outputs",
        "error",
        "extra",
        "tags",
    )

    def __init__(
        self,
        run_id: uuid.UUID,
        parent_run_id: uuid.UUID | None,
        name: str | None,
        serialized: Any,
        run_type: str,
        inputs: Any,
        extra: dict[str, Any],
        tags: Any,
    ) -> None:
        self.id = run_id
        self.parent_run_id = parent_run_id
        self.trace_id: uuid.UUID = run_id
        self.dotted_order = ""
        self.name = name or _serialized_name(serialized)
        self.run_type = run_type
        self.start_time = _dt.datetime.now(_dt.timezone.utc)
        self.end_time: _dt.datetime | None = None
        self.inputs = inputs
        self.outputs: dict[str, Any] | None = None
        self.error: str | None = None
        self.extra = extra
        self.tags = list(tags) if tags else []


def _serialized_name(serialized: Any) -> str:
    """A nameless run's name, as LangChain's ``Run`` gives it: the serialized name, else the last
    part of the serialized id, else ``Unnamed``."""
    if isinstance(serialized, Mapping):
        name = serialized.get("name")
        if name:
            return str(name)
        ident = serialized.get("id")
        if isinstance(ident, list) and ident:
            return str(ident[-1])
    return "Unnamed"


def _stacktrace(error: BaseException) -> str:
    """An error as LangChain's tracer records it: its repr and its traceback."""
    msg = repr(error)
    try:
        return (msg + "\n\n".join(traceback.format_exception(error))).strip()
    except Exception:  # pragma: no cover - as LangChain does
        return msg


def _extra(metadata: dict[str, Any] | None, kwargs: dict[str, Any]) -> dict[str, Any]:
    if metadata:
        kwargs["metadata"] = metadata
    return kwargs


def _llm_outputs(run: _Run, response: Any) -> None:
    """An llm run's outputs from its ``LLMResult`` (messages dumped as LangChain's tracer dumps
    them), its tool call count and gateway metadata."""
    if run.outputs is None:
        run.outputs = {}
    if not run.extra.get("__omit_auto_outputs", False):
        run.outputs.update(response.model_dump())
    gens = run.outputs.get("generations") or []
    for i, generations in enumerate(response.generations):
        for j, generation in enumerate(generations):
            try:
                out = gens[i][j]
            except (IndexError, TypeError, KeyError):
                continue
            if isinstance(out, dict) and "message" in out:
                out["message"] = dumpd(generation.message)
    if _attach_gateway is not None:
        _attach_gateway(run, response)  # type: ignore[arg-type]


try:  # LangChain's promotion of gateway metadata (reads and writes run.extra only)
    from langchain_core.tracers.core import _TracerCore

    _attach_gateway: Any = lambda run, response: _TracerCore._attach_gateway_metadata(None, run, response)  # type: ignore[arg-type]  # noqa: E731
except (ImportError, AttributeError):  # pragma: no cover - another langchain-core
    _attach_gateway = None


# ----------------------------------------------------------------------------------------
# Round groups
def _round_of(inputs: Any) -> int | None:
    """The round of a node run's input state (a whole number), or None."""
    if not isinstance(inputs, Mapping):
        return None
    r: Any = inputs.get("round")  # a state's value: whatever int() takes, else None
    if isinstance(r, bool):
        return None
    try:
        n = int(r)
    except (TypeError, ValueError, OverflowError):
        return None
    return n if n == r and 0 <= n < 10**9 else None


def _segment(start: _dt.datetime, run_id: Any) -> str:
    """A run's own part of a dotted order: its start time and id."""
    return start.strftime("%Y%m%dT%H%M%S%fZ") + str(run_id)


@dataclass
class _RoundRun:
    """The chain run grouping one round's node runs (``round 2``): it starts with the round's first
    node and ends with its last; its metadata and tags are the graph run's, plus the round."""

    id: uuid.UUID
    trace_id: Any
    parent_run_id: Any
    round: int
    start_time: _dt.datetime
    end_time: _dt.datetime
    dotted_order: str
    metadata: dict[str, Any]
    tags: list[str]
    open: int = 0  # node runs started and not yet ended
    error: str | None = None
    journaled: bool = False
    written: bool = False  # in the file (by flush)

    def record(self) -> dict[str, Any]:
        rec = {
            "id": str(self.id),
            "trace_id": str(self.trace_id),
            "parent_run_id": str(self.parent_run_id),
            "dotted_order": self.dotted_order,
            "name": f"round {self.round}",
            "run_type": "chain",
            "start_time": _iso(self.start_time),
            "end_time": _iso(self.end_time),
            "inputs": {"round": self.round},
            "outputs": None,
            "error": self.error,
            "extra": {"metadata": {**to_jsonable(self.metadata), "round": self.round}},
            "tags": [*self.tags, f"round:{self.round}"],
            "status": "error" if self.error else "success",
        }
        return scrub(rec)


# ----------------------------------------------------------------------------------------
class JsonlTracer(BaseCallbackHandler):
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

    def __init__(self, path: str | os.PathLike[str], *, group_rounds: bool = True) -> None:
        self.path = Path(path)
        self._lock = threading.RLock()
        self.run_map: dict[str, _Run] = {}  # runs in progress by id
        self._inputs: dict[str, Any] = {}
        self._pending: dict[str, list[dict[str, Any]]] = {}
        self._journaled: dict[str, set[str]] = {}
        self._rounds: dict[tuple[str, int], _RoundRun] = {}  # (trace id, round) -> its group run
        self._round_ids: dict[str, _RoundRun] = {}  # group run id -> group run
        self.group_rounds = group_rounds
        self._trace_secrets: dict[str, list[str]] = {}  # trace id -> its secret values (see _secrets)
        self.runs_written = 0
        self.runs_recovered = recover_interrupted(self.path)

    # callback managers copy their handlers: every copy is this tracer
    def __copy__(self) -> "JsonlTracer":
        return self

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> "JsonlTracer":
        return self

    # -- the callback events ---------------------------------------------------------------------
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
    ) -> None:
        """A chat model call: an ``llm`` run whose inputs are ``{"messages": [[...]]}``, as
        LangSmith records it (not the flattened prompt strings of the generic fallback).

        The messages are converted here, once, through :func:`to_jsonable`'s memo of converted
        messages; the record is the same."""
        inputs = to_jsonable({"messages": messages}, max_list=convert.MAX_MESSAGES)
        run = _Run(run_id, parent_run_id, name, serialized, "llm", inputs, _extra(metadata, kwargs), tags)
        with self._lock:
            self._inputs[str(run.id)] = inputs  # already JSON-safe: _on_run_create scrubs it
        self._start_trace(run)

    def on_llm_start(
        self,
        serialized: dict[str, Any],
        prompts: list[str],
        *,
        run_id: uuid.UUID,
        tags: list[str] | None = None,
        parent_run_id: uuid.UUID | None = None,
        metadata: dict[str, Any] | None = None,
        name: str | None = None,
        **kwargs: Any,
    ) -> None:
        run = _Run(run_id, parent_run_id, name, serialized, "llm", {"prompts": prompts}, _extra(metadata, kwargs), tags)
        self._start_trace(run)

    def on_llm_end(self, response: Any, *, run_id: uuid.UUID, **kwargs: Any) -> None:  # noqa: ARG002
        run = self.run_map.get(str(run_id))
        if run is None:
            return
        _llm_outputs(run, response)
        run.end_time = _dt.datetime.now(_dt.timezone.utc)
        count = sum(
            len(getattr(g.message, "tool_calls", None) or [])
            for gens in response.generations
            for g in gens
            if hasattr(g, "message")
        )
        if count > 0:
            run.extra["tool_call_count"] = count
        self._end_trace(run)

    def on_llm_error(self, error: BaseException, *, run_id: uuid.UUID, **kwargs: Any) -> None:
        self._errored(error, run_id, response=kwargs.get("response"))

    def on_chain_start(
        self,
        serialized: dict[str, Any],
        inputs: Any,
        *,
        run_id: uuid.UUID,
        tags: list[str] | None = None,
        parent_run_id: uuid.UUID | None = None,
        metadata: dict[str, Any] | None = None,
        run_type: str | None = None,
        name: str | None = None,
        **kwargs: Any,
    ) -> None:
        inputs = inputs if isinstance(inputs, dict) else {"input": inputs}
        run = _Run(run_id, parent_run_id, name, serialized, run_type or "chain", inputs, _extra(metadata, kwargs), tags)
        self._start_trace(run)

    def on_chain_end(
        self,
        outputs: Any,
        *,
        run_id: uuid.UUID,
        inputs: Any = None,
        **kwargs: Any,  # noqa: ARG002
    ) -> None:
        run = self.run_map.get(str(run_id))
        if run is None:
            return
        if run.outputs is None:
            run.outputs = {}
        if not run.extra.get("__omit_auto_outputs", False):
            run.outputs.update(outputs if isinstance(outputs, dict) else {"output": outputs})
        run.end_time = _dt.datetime.now(_dt.timezone.utc)
        if inputs is not None:
            run.inputs = inputs if isinstance(inputs, dict) else {"input": inputs}
        self._end_trace(run)

    def on_chain_error(
        self,
        error: BaseException,
        *,
        run_id: uuid.UUID,
        inputs: Any = None,
        **kwargs: Any,  # noqa: ARG002
    ) -> None:
        self._errored(error, run_id, inputs=inputs)

    def on_tool_start(
        self,
        serialized: dict[str, Any],
        input_str: str,
        *,
        run_id: uuid.UUID,
        tags: list[str] | None = None,
        parent_run_id: uuid.UUID | None = None,
        metadata: dict[str, Any] | None = None,
        name: str | None = None,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        inputs = inputs if isinstance(inputs, dict) else {"input": input_str}
        run = _Run(run_id, parent_run_id, name, serialized, "tool", inputs, _extra(metadata, kwargs), tags)
        self._start_trace(run)

    def on_tool_end(self, output: Any, *, run_id: uuid.UUID, **kwargs: Any) -> None:  # noqa: ARG002
        run = self.run_map.get(str(run_id))
        if run is None:
            return
        if run.outputs is None:
            run.outputs = {}
        if not run.extra.get("__omit_auto_outputs", False):
            run.outputs["output"] = output
        run.end_time = _dt.datetime.now(_dt.timezone.utc)
        self._end_trace(run)

    def on_tool_error(self, error: BaseException, *, run_id: uuid.UUID, **kwargs: Any) -> None:  # noqa: ARG002
        self._errored(error, run_id)

    def on_retriever_start(
        self,
        serialized: dict[str, Any],
        query: str,
        *,
        run_id: uuid.UUID,
        parent_run_id: uuid.UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        name: str | None = None,
        **kwargs: Any,
    ) -> None:
        run = _Run(
            run_id,
            parent_run_id,
            name or "Retriever",
            serialized,
            "retriever",
            {"query": query},
            _extra(metadata, kwargs),
            tags,
        )
        self._start_trace(run)

    def on_retriever_end(self, documents: Any, *, run_id: uuid.UUID, **kwargs: Any) -> None:  # noqa: ARG002
        run = self.run_map.get(str(run_id))
        if run is None:
            return
        run.outputs = {"documents": documents}
        run.end_time = _dt.datetime.now(_dt.timezone.utc)
        self._end_trace(run)

    def on_retriever_error(self, error: BaseException, *, run_id: uuid.UUID, **kwargs: Any) -> None:  # noqa: ARG002
        self._errored(error, run_id)

    def _errored(self, error: BaseException, run_id: uuid.UUID, *, inputs: Any = None, response: Any = None) -> None:
        """A run that ended in ``error`` (an llm run's partial ``response``, a chain run's final ``inputs``)."""
        run = self.run_map.get(str(run_id))
        if run is None:
            return
        run.error = _stacktrace(error)
        if response:
            _llm_outputs(run, response)
        run.end_time = _dt.datetime.now(_dt.timezone.utc)
        if inputs is not None:
            run.inputs = inputs if isinstance(inputs, dict) else {"input": inputs}
        self._end_trace(run)

    # -- rounds: a graph's node runs grouped under one chain run per round ("round 2") ----------
    def _start_trace(self, run: _Run) -> None:
        """A run's trace id and dotted order (its parent's, extended; a run whose parent this tracer
        did not see is a root, as LangChain's tracers treat it); a node run of a graph whose state has
        a ``round`` moves under that round's group run (its descendants follow: their dotted orders
        extend its own)."""
        with self._lock:
            segment = _segment(run.start_time, run.id)
            parent = self.run_map.get(str(run.parent_run_id)) if run.parent_run_id else None
            if parent is not None:
                run.trace_id = parent.trace_id
                run.dotted_order = f"{parent.dotted_order}.{segment}"
            else:
                run.parent_run_id = None
                run.trace_id = run.id
                run.dotted_order = segment
            self.run_map[str(run.id)] = run
            if self.group_rounds and run.run_type == "chain" and parent is not None:
                rnd = _round_of(run.inputs)
                if rnd is not None and self._is_local_root(parent):
                    group = self._round_run(parent, rnd, run)
                    run.parent_run_id = group.id
                    run.dotted_order = f"{group.dotted_order}.{segment}"
                    group.open += 1
        self._on_run_create(run)

    def _round_run(self, root: _Run, rnd: int, first: _Run) -> "_RoundRun":
        """The group run of round ``rnd`` of ``root``'s trace (made at its first node; the group of
        the round before is then complete, and journaled)."""
        key = (str(root.trace_id), rnd)
        group = self._rounds.get(key)
        if group is None:
            for other in [
                g for (tid, _), g in self._rounds.items() if tid == key[0] and not g.journaled and g.open == 0
            ]:
                self._journal_round(other)
            gid = uuid.uuid4()
            start = first.start_time
            group = _RoundRun(
                id=gid,
                trace_id=root.trace_id,
                parent_run_id=root.id,
                round=rnd,
                start_time=start,
                end_time=start,
                dotted_order=f"{root.dotted_order}.{_segment(start, gid)}",
                metadata=dict((root.extra or {}).get("metadata") or {}),
                tags=[str(t) for t in (root.tags or [])],
            )
            self._rounds[key] = self._round_ids[str(gid)] = group
            self._journal(key[0], [{"__start__": True, **group.record()}])  # named "round N" if the process dies in it
        return group

    def _journal_round(self, group: "_RoundRun") -> None:
        group.journaled = True
        self._journal(str(group.trace_id), [group.record()])
        self._journaled.setdefault(str(group.trace_id), set()).add(str(group.id))

    def _round_ended(self, run: _Run) -> None:
        """A node run of a round group ended: the group ends no earlier."""
        group = self._round_ids.get(str(run.parent_run_id))
        if group is not None:
            group.open -= 1
            if run.end_time is not None and run.end_time > group.end_time:
                group.end_time = run.end_time
            if run.error:
                group.error = group.error or f"the node {run.name} failed"

    def _round_records(self, trace_id: str, *, forget: bool = True) -> list[dict[str, Any]]:
        """The records of a trace's group runs not yet written to the file (those journaled
        included: journals are only read after a crash), then marked written; ``forget``: the
        trace ended, drop its groups."""
        out = []
        for key in [k for k in self._rounds if k[0] == trace_id]:
            group = self._rounds[key]
            if not group.written:
                group.written = True
                out.append(group.record())
            if forget:
                del self._rounds[key]
                self._round_ids.pop(str(group.id), None)
        return out

    # no child_runs tree in memory: each run becomes a record when it ends
    @staticmethod
    def _add_child_run(parent_run: _Run, child_run: _Run) -> None:  # noqa: ARG004
        return None

    def _persist_run(self, run: _Run) -> None:  # records are written in _end_trace
        return None

    def _on_run_create(self, run: _Run) -> None:
        with self._lock:
            snap = self._inputs.get(str(run.id))
        secrets = self._secrets(str(run.trace_id))
        if snap is None:
            snap = safe_value(run.inputs, secrets, max_list=convert.MAX_MESSAGES if run.run_type == "llm" else None)
        else:  # a chat model's messages, converted by on_chat_model_start (each message scrubbed once: shared)
            snap = scrub(snap, secrets)
        with self._lock:
            self._inputs[str(run.id)] = snap
            if self._is_local_root(run):
                try:
                    start = {
                        "__start__": True,
                        "id": str(run.id),
                        "trace_id": str(run.trace_id),
                        "parent_run_id": str(run.parent_run_id) if run.parent_run_id else None,
                        "dotted_order": run.dotted_order,
                        "name": run.name,
                        "run_type": run.run_type,
                        "start_time": _iso(run.start_time),
                        "inputs": snap if isinstance(snap, dict) else {"input": snap},
                        "extra": to_jsonable(dict(run.extra or {})),
                        "tags": [str(t) for t in (run.tags or [])],
                    }
                    self._journal(str(run.trace_id), [fit_line(scrub(start))])
                except Exception as exc:  # never break the traced program
                    logger.warning("JsonlTracer: could not journal run %s: %r", run.id, exc)

    def _is_local_root(self, run: _Run) -> bool:
        if not run.parent_run_id:
            return True
        pid = str(run.parent_run_id)
        if pid in self._round_ids:
            return False
        return pid not in self.run_map

    def _end_trace(self, run: _Run) -> None:
        with self._lock:
            root = self._is_local_root(run)
            grouped = str(run.parent_run_id) in self._round_ids
            parent = self.run_map.get(str(run.parent_run_id)) if run.parent_run_id else None
            node = grouped or (parent is not None and self._is_local_root(parent))
            if grouped:
                self._round_ended(run)
            self.run_map.pop(str(run.id), None)
            self._on_run_update(run)
            if root:
                self._pending.setdefault(str(run.trace_id), []).extend(
                    _Record(r) for r in self._round_records(str(run.trace_id))
                )
                self._flush_trace(str(run.trace_id))
            elif node:  # a node of the root finished: journal its subtree
                tid, prefix = str(run.trace_id), run.dotted_order or ""
                done = self._journaled.setdefault(tid, set())
                recs = [
                    r
                    for r in self._pending.get(tid, [])
                    if r["id"] not in done and (r.get("dotted_order") or "").startswith(prefix)
                ]
                if recs:
                    done.update(r["id"] for r in recs)
                    self._journal(tid, recs)

    def journal_path(self, trace_id: str) -> Path:
        return journal_path(self.path, trace_id)

    def _journal(self, trace_id: str, records: list[dict[str, Any]]) -> None:
        path = self.journal_path(trace_id)
        try:
            lines = [_line(r) for r in records]
            path.parent.mkdir(parents=True, exist_ok=True)
            with _live_lock:
                _LIVE_JOURNALS.add(str(path))
            with open(path, "a", encoding="utf-8") as fh:
                fh.write("\n".join(lines) + "\n")
        except (OSError, TypeError, ValueError) as exc:
            logger.warning("JsonlTracer: could not write the journal %s: %r", path, exc)

    def _on_run_update(self, run: _Run) -> None:
        try:
            record = self.record(run)
        except Exception as exc:  # never break the traced program
            logger.warning("JsonlTracer: could not record run %s: %r", run.id, exc)
            return
        with self._lock:
            self._pending.setdefault(str(run.trace_id), []).append(record)

    def record(self, run: _Run) -> dict[str, Any]:
        """The JSON-safe, scrubbed LangSmith-format record of a finished run. Its inputs were
        converted and scrubbed when it started, its outputs and extra are here, each in one walk
        (:func:`~.convert.safe_value`); the record's own fields are scrubbed at the end."""
        secrets = self._secrets(str(run.trace_id))
        inputs = self._inputs.pop(str(run.id), None)
        if inputs in (None, {}, {"input": ""}, {"input": None}):  # streamed input: known at the end
            inputs = safe_value(run.inputs, secrets, max_list=convert.MAX_MESSAGES if run.run_type == "llm" else None)
        outputs = safe_value(run.outputs, secrets) if run.outputs is not None else None
        extra = safe_value(dict(run.extra or {}), secrets)
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
            if is_cached(rec["extra"].get("metadata")):  # answered from the cache: it cost nothing
                rec["prompt_cost"] = rec["completion_cost"] = rec["total_cost"] = 0
                if usage:
                    rec["extra"]["usage_metadata"] = {**usage, "input_cost": 0, "output_cost": 0, "total_cost": 0}
        for k, v in rec.items():  # the run's own fields (name, error, tags, ...): inputs, outputs and extra are done
            if k not in _SCRUBBED_PARTS:
                rec[k] = scrub(v, secrets)
        rec = _Record(rec)
        rec.line = _dumps(rec)  # serialized once: its length decides whether it must shrink, then it is written as is
        if len(rec.line) > convert.MAX_LINE_CHARS:
            rec = _Record(fit_line(rec))
            rec.line = _dumps(rec)
        return rec

    def _secrets(self, trace_id: str) -> list[str]:
        """The secret values records of a trace are scrubbed of: the environment's, read when the
        trace's first run starts (reading the environment for every record of a tool loop was a
        large share of a traced step) and again for the next trace, once this one's root has ended."""
        with self._lock:
            found = self._trace_secrets.get(trace_id)
            if found is None:
                if len(self._trace_secrets) >= 1000:  # roots that never ended: forget the oldest
                    self._trace_secrets.pop(next(iter(self._trace_secrets)))
                found = self._trace_secrets[trace_id] = secret_values()
            return found

    def _flush_trace(self, trace_id: str) -> None:
        self._trace_secrets.pop(trace_id, None)
        records = self._pending.pop(trace_id, [])
        if not records:
            return
        records.sort(key=lambda r: r.get("dotted_order") or "")  # parents before children
        lines = []
        for r in records:
            try:
                lines.append(_line(r))
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
        running are not written; their finished children are, with their round runs as they
        stand (a round's later nodes still point to it; it is not written again)."""
        with self._lock:
            for tid in list(self._pending):
                self._pending[tid].extend(_Record(r) for r in self._round_records(tid, forget=False))
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
            except (ValueError, KeyError, TypeError, RecursionError):
                continue
    written = 0
    for j in journals:
        records: dict[str, dict[str, Any]] = {}
        starts: dict[str, dict[str, Any]] = {}
        for line in j.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                rec = json.loads(line)
            except (ValueError, RecursionError):  # a line cut short by the kill (or edited beyond reading)
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
                    "id": rid,
                    "trace_id": segs[0][1],
                    "parent_run_id": segs[depth - 1][1] if depth else st.get("parent_run_id"),
                    "dotted_order": ".".join(seg for seg in (rec["dotted_order"].split(".")[: depth + 1])),
                    "name": st.get("name") or "interrupted run",
                    "run_type": st.get("run_type") or "chain",
                    "start_time": st.get("start_time") or t,
                    "end_time": max(last_end, st.get("start_time") or t),
                    "inputs": st.get("inputs") or {},
                    "outputs": None,
                    "error": INTERRUPTED,
                    "extra": st.get("extra") or {},
                    "tags": st.get("tags") or [],
                    "status": "error",
                }
        out = sorted(list(records.values()) + list(missing.values()), key=lambda r: r.get("dotted_order") or "")
        lines = []
        for r in out:
            try:
                lines.append(_dumps(r))
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
