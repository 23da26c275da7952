"""A run's model calls from its traces.jsonl: who was asked what, and what they answered, and
what each call cost.

Each LLM run of the trace becomes one call: its agent, round, phase (and society, team, pass), the
messages of its prompt and the answer, when it started and how long it took, the tokens the model
reported and, from the run's ledger, what the call was charged (its tokens and cost; matched by the
call id in its metadata, :mod:`cooplab.graphs.tracing.charges`). Who and when come from the run's
metadata (``agent_id``, ``agent``, ``round``, ``phase``, ... set by cooplab's tracing); traces written before
those labels existed are read from the prompt itself (``Your name is Fisher 3`` -> agent 2,
``Round 4.``) and the graph node (the phase). A call answered from the response cache (a rerun, a
resume, a fork) is one too, marked ``cached``, and is charged nothing.

Every line of the file is read as data: a line that is not a JSON object (or is nested more than
:data:`cooplab.limits.MAX_JSON_DEPTH` levels deep) is counted and its number named, never an error;
the records are counted by run type.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, overload

from cooplab.evals.typed import sub
from cooplab.evals.values import cut, num
from cooplab.graphs.rundir import TRACES_FILE
from cooplab.graphs.tracing import charges as ledger
from cooplab.graphs.tracing.labels import CALL_ID, is_cached
from cooplab.limits import parse_json

#: the query parameters the traces page filters by
FILTERS = ("society", "agent", "round", "phase", "team", "pass")
#: bytes of traces.jsonl read at most
MAX_BYTES = 256 << 20
#: calls listed at most on one page
MAX_CALLS = 400
#: characters of one message shown
MAX_MESSAGE_CHARS = 20_000
#: numbers of damaged lines named at most (all are counted)
MAX_BAD_LINES_NAMED = 10
#: run types counted separately at most (the rest under "other")
MAX_RUN_TYPES = 20

#: "Your name is Fisher 3" (CPR), "You are Player 2 in Group 1" (games), "You are member 4 of a group" (diners)
_NAME = re.compile(r"\b(?:your name is|you are) ([A-Za-z][\w-]{0,30}) (\d{1,6})\b", re.I)
#: "Round 4.", "=== Round 2 of 3 ===", "Iteration 3, at the pub."
_ROUND = re.compile(r"^\W*(?:round|iteration)\s+(\d{1,9})\b", re.I | re.M)


def _messages(inputs: Any) -> list[dict[str, str]]:
    """The prompt's messages as (role, text) from a LangChain-serialized llm run input."""
    msgs = inputs.get("messages") if isinstance(inputs, Mapping) else None
    if isinstance(msgs, list) and msgs and isinstance(msgs[0], list):
        msgs = msgs[0]
    out = []
    for m in msgs if isinstance(msgs, list) else []:
        kw = m.get("kwargs") if isinstance(m, Mapping) else None
        if isinstance(kw, Mapping):
            role = kw.get("type") or (m.get("id") or ["?"])[-1]
            content = kw.get("content")
        elif isinstance(m, Mapping):
            role, content = m.get("type") or m.get("role"), m.get("content")
        else:
            continue
        if not isinstance(content, str):
            content = json.dumps(content, default=str, ensure_ascii=False)
        out.append({"role": cut(str(role), 30), "text": cut(content, MAX_MESSAGE_CHARS)})
    return out


def _answer(outputs: Any) -> str:
    gens: Any = outputs.get("generations") if isinstance(outputs, Mapping) else None
    try:  # None or a malformed record raises below: no answer
        g = gens[0][0]
        text = g.get("text") or ((g.get("message") or {}).get("kwargs") or {}).get("content")
        return cut(text if isinstance(text, str) else json.dumps(text, default=str), MAX_MESSAGE_CHARS)
    except (TypeError, IndexError, KeyError, AttributeError):
        return ""


def _int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.strip().lstrip("-").isdigit() and len(v) < 12:
        return int(v)
    return None


def facts(rec: Mapping[str, Any]) -> dict[str, Any]:
    """Who and when of one llm run: from its metadata, else read from its prompt and node."""
    extra = sub(rec, "extra")
    md = sub(extra, "metadata")
    msgs = _messages(rec.get("inputs"))
    text = "\n".join(m["text"] for m in msgs)
    # a numbered agent's position: "agent" (agent_id is then the tables' "S:A" text); in traces
    # written before that, agent_id was the position itself; a science role has only its text id
    agent = md.get("agent") if md.get("agent") is not None else md.get("agent_id")
    name = md.get("agent_name")
    if agent is None:
        m = _NAME.search(text)
        if m:
            agent = int(m.group(2)) - 1
            name = None if m.group(1).lower() == "member" else f"{m.group(1)} {m.group(2)}"
    rnd = _int(md.get("round"))
    if rnd is None:
        human = [m["text"] for m in msgs if m["role"] in ("human", "HumanMessage", "user")]
        m = _ROUND.search(human[0] if human else text)
        rnd = int(m.group(1)) if m else None
    phase = md.get("phase") or md.get("langgraph_node")
    call_id = md.get(CALL_ID)
    return {
        "society": md.get("society"),
        "agent": agent,
        "agent_name": name,
        "round": rnd,
        "phase": phase if isinstance(phase, str) else None,
        "team": md.get("team"),
        "pass": md.get("pass"),
        "model": md.get("model") or md.get("ls_model_name") or rec.get("name"),
        "messages": msgs,
        "answer": _answer(rec.get("outputs")),
        "error": rec.get("error"),
        "name": rec.get("name"),
        "start": rec.get("start_time"),
        "cached": is_cached(md),
        "run_id": rec.get("id"),
        "call_id": call_id if isinstance(call_id, str) else None,
        "node": md.get("langgraph_node") if isinstance(md.get("langgraph_node"), str) else None,
        "seconds": _seconds(rec.get("start_time"), rec.get("end_time")),
        "reported": _reported(rec, extra),
    }


def _seconds(start: Any, end: Any) -> float | None:
    """How long a run took (its ISO start and end times), or None."""
    try:
        d = (dt.datetime.fromisoformat(str(end)) - dt.datetime.fromisoformat(str(start))).total_seconds()
    except (TypeError, ValueError, OverflowError):
        return None
    return d if d >= 0 else None


def _reported(rec: Mapping[str, Any], extra: Mapping[str, Any]) -> tuple[int, int] | None:
    """The (input, output) tokens the model reported for a call: the record's prompt and completion
    counts, else its usage metadata; None when neither holds whole numbers."""
    usage = sub(extra, "usage_metadata")
    for pair in (
        (rec.get("prompt_tokens"), rec.get("completion_tokens")),
        (usage.get("input_tokens"), usage.get("output_tokens")),
    ):
        got = [ledger.count(v) for v in pair]
        if None not in got:
            return got[0], got[1]  # type: ignore[return-value]
    return None


#: root runs of a trace file kept at most (one per process that ran a part of the run)
MAX_STARTS = 1_000


def start_of(rec: Mapping[str, Any]) -> dict[str, Any]:
    """How the part of a run a root record traces started: its metadata's ``started_as`` ("new",
    "resumed", "fork"), else its tags (traces written before the metadata: "resumed" or new), and
    a fork's ``fork_of`` (the parent's run id, text) and ``fork_at_round``."""
    extra = sub(rec, "extra")
    md = sub(extra, "metadata")
    tags = rec.get("tags")
    tags = tags if isinstance(tags, list) else []
    kind = md.get("started_as")
    if kind not in ("new", "resumed", "fork"):
        kind = "fork" if "fork" in tags else "resumed" if "resumed" in tags else "new"
    parent = md.get("fork_of")
    return {
        "started_as": kind,
        "fork_of": cut(parent, 200) if isinstance(parent, str) else None,
        "fork_at_round": _int(md.get("fork_at_round")),
        "start": rec.get("start_time"),
    }


def fill_rounds(calls: list[dict[str, Any]]) -> None:
    """A call whose round is not known (a prompt that does not name it, in a trace without round
    labels) belongs to the round of the same agent's call before it."""
    last: dict[tuple[Any, Any], Any] = {}
    for f in calls:
        who = (f.get("society"), f.get("agent"))
        if f.get("round") is None and f.get("agent") is not None:
            f["round"] = last.get(who)
        last[who] = f.get("round")


def matches(f: Mapping[str, Any], filters: Mapping[str, str]) -> bool:
    """Whether a call matches every filter (a call without a society label matches any society:
    traces written before calls were labelled do not say which society of a batch asked)."""
    for k, want in filters.items():
        have = f.get(k)
        if have is None and k == "society":
            continue
        if have is None or str(have) != str(want).strip():
            return False
    return True


@dataclass
class TraceFile:
    """What a run's traces.jsonl holds: its model calls (in time order, each with its ledger charge),
    its records by run type, the lines that could not be read, and what the ledger charged in all."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    exists: bool = False
    bytes: int = 0
    records: int = 0
    run_types: dict[str, int] = field(default_factory=dict)
    bad: int = 0
    bad_lines: list[int] = field(default_factory=list)
    #: what the ledger charged for model calls (calls, input and output tokens, cost): None without a ledger table
    charged: dict[str, Any] | None = None
    #: the root runs of the file (one per process that ran a part of the run), in file order: how each
    #: started ("new", "resumed" or "fork") and, for a fork, its parent's run id and round (:func:`start_of`)
    starts: list[dict[str, Any]] = field(default_factory=list)

    def reported(self) -> tuple[int, int]:
        """The input and output tokens the model reported, summed over the calls."""
        pairs = [c["reported"] for c in self.calls if c.get("reported")]
        return sum(p[0] for p in pairs), sum(p[1] for p in pairs)


def trace_file(run: Any) -> TraceFile:
    """The run's traces.jsonl, read once (kept on ``run``); a link leaving the run folder is never read."""
    if run.traced is None:
        path = run.file(TRACES_FILE)
        tf = (
            read_trace_file(path)
            if path is not None
            else TraceFile(notes=[f"{TRACES_FILE} leads outside the run folder and is not read"])
        )
        charge(tf, run)
        run.traced = tf
    return run.traced


def charge(tf: TraceFile, run: Any) -> None:
    """Give each call of ``tf`` what the run's ledger charged for it (``charged``: a
    :class:`~cooplab.graphs.tracing.charges.Charge`, or None: a replay, a failed call, or no ledger
    row), and ``tf.charged`` the ledger's totals. The ledger is read through the run's own reader."""
    if not run.has_table("ledger"):
        return
    df = run.table("ledger")
    if df is None:
        return
    found = ledger.ledger_charges(run.out, df.to_dict("records"), prices=ledger.config_prices(run.config))
    light = [
        {
            "run_type": "llm",
            "id": i,
            "error": c.get("error"),
            "start_time": c.get("start"),
            "extra": {"metadata": {CALL_ID: c.get("call_id"), "cached": c.get("cached")}},
        }
        for i, c in enumerate(tf.calls)
    ]
    matched = ledger.match_charges(light, found)
    for i, c in enumerate(tf.calls):
        c["charged"] = matched.get(str(i))
    tf.charged = ledger.charge_totals(found)


def calls(run: Any, filters: Mapping[str, str]) -> tuple[list[dict[str, Any]], str | None]:
    """(the run's model calls matching ``filters``, a note on what could not be read or was cut).
    The file is read once per page (kept on ``run``)."""
    tf = trace_file(run)
    notes = list(tf.notes)
    out = [f for f in tf.calls if matches(f, filters)]
    if len(out) > MAX_CALLS:
        notes = [*notes, f"{len(out) - MAX_CALLS} more calls match; narrow the filter (round, agent, phase)"]
        out = out[:MAX_CALLS]
    return out, "; ".join(notes) or None


def read_trace_file(path: Any) -> TraceFile:
    """Every record of a traces.jsonl counted by run type, every LLM run as a call (who, when,
    prompt, answer, tokens), in time order, and notes on what could not be read."""
    tf = TraceFile()
    if not path.is_file():
        tf.notes.append("this run has no traces.jsonl (traces are written when a graph run ends)")
        return tf
    tf.exists = True
    read = 0
    try:
        tf.bytes = path.stat().st_size
        with open(path, "rb") as fh:
            for n, raw in enumerate(fh, 1):
                read += len(raw)
                if read > MAX_BYTES:
                    tf.notes.append(f"only the first {MAX_BYTES >> 20} MB of traces.jsonl were read")
                    break
                if not raw.strip():
                    continue
                # nested deeper than MAX_JSON_DEPTH: damaged too (every later reader stays clear of the recursion limit)
                try:
                    rec = parse_json(raw, f"traces.jsonl line {n}", error=ValueError)
                except ValueError:
                    rec = None
                if not isinstance(rec, Mapping):
                    tf.bad += 1
                    if len(tf.bad_lines) < MAX_BAD_LINES_NAMED:
                        tf.bad_lines.append(n)
                    continue
                tf.records += 1
                kind = rec.get("run_type")
                kind = kind if isinstance(kind, str) else "?"
                kind = cut(kind, 40) if kind in tf.run_types or len(tf.run_types) < MAX_RUN_TYPES else "other"
                tf.run_types[kind] = tf.run_types.get(kind, 0) + 1
                if rec.get("run_type") == "llm":
                    tf.calls.append(facts(rec))
                elif (
                    rec.get("parent_run_id") is None and rec.get("run_type") == "chain" and len(tf.starts) < MAX_STARTS
                ):
                    tf.starts.append(start_of(rec))
    except OSError as exc:
        tf.notes.append(f"cannot read traces.jsonl: {exc.strerror or exc}")
    tf.calls.sort(key=lambda f: str(f.get("start") or ""))
    fill_rounds(tf.calls)
    if tf.bad:
        more = ", \u2026" if tf.bad > len(tf.bad_lines) else ""
        tf.notes.append(
            f"{tf.bad} damaged line{'s' if tf.bad != 1 else ''} of traces.jsonl (not a readable JSON object) "
            f"{'were' if tf.bad != 1 else 'was'} skipped: line{'s' if len(tf.bad_lines) > 1 else ''} "
            f"{', '.join(map(str, tf.bad_lines))}{more}"
        )
    return tf


@overload
def tokens_text(pair: tuple[int, int]) -> str: ...
@overload
def tokens_text(pair: None) -> None: ...
@overload
def tokens_text(pair: tuple[int, int] | None) -> str | None: ...
def tokens_text(pair: tuple[int, int] | None) -> str | None:
    """ "13 (11 in / 2 out)" of an (input, output) pair."""
    return None if pair is None else f"{pair[0] + pair[1]:,} ({pair[0]:,} in / {pair[1]:,} out)"


def usd(v: Decimal | float | None) -> str:
    """A cost in USD to 6 significant digits ("$0.000123")."""
    n = num(v)
    return "\u2014" if n is None else f"${n:.6g}"
