"""A run's model calls from its traces.jsonl: who was asked what, and what they answered.

Each LLM run of the trace becomes one call: its agent, round, phase (and society, team, pass), the
messages of its prompt and the answer. Who and when come from the run's metadata (``agent_id``,
``round``, ``phase``, ... set by cooplab's tracing); traces written before those labels existed are
read from the prompt itself (``Your name is Fisher 3`` -> agent 2, ``Round 4.``) and the graph node
(the phase). A call answered from the response cache (a rerun, a resume, a fork) is one too, marked
``cached``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from cooplab.evals.report import cut
from cooplab.graphs.rundir import TRACES_FILE
from cooplab.graphs.tracing.labels import is_cached

#: the query parameters the traces page filters by
FILTERS = ("society", "agent", "round", "phase", "team", "pass")
#: bytes of traces.jsonl read at most
MAX_BYTES = 256 << 20
#: calls listed at most on one page
MAX_CALLS = 400
#: characters of one message shown
MAX_MESSAGE_CHARS = 20_000

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
    gens = outputs.get("generations") if isinstance(outputs, Mapping) else None
    try:
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
    extra = rec.get("extra") if isinstance(rec.get("extra"), Mapping) else {}
    md = extra.get("metadata") if isinstance(extra.get("metadata"), Mapping) else {}
    msgs = _messages(rec.get("inputs"))
    text = "\n".join(m["text"] for m in msgs)
    agent = md.get("agent_id")
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
    return {"society": md.get("society"), "agent": agent, "agent_name": name, "round": rnd,
            "phase": phase if isinstance(phase, str) else None, "team": md.get("team"), "pass": md.get("pass"),
            "model": md.get("model") or md.get("ls_model_name") or rec.get("name"), "messages": msgs,
            "answer": _answer(rec.get("outputs")), "error": rec.get("error"), "name": rec.get("name"),
            "start": rec.get("start_time"), "cached": is_cached(md)}


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


def calls(run: Any, filters: Mapping[str, str]) -> tuple[list[dict[str, Any]], str | None]:
    """(the run's model calls matching ``filters``, a note on what could not be read or was cut).
    The file is read once per page (kept on ``run``)."""
    if run._calls is None:
        path = run.file(TRACES_FILE) if hasattr(run, "file") else run.out / TRACES_FILE  # never a link leaving the run folder
        run._calls = read_calls(path) if path is not None else ([], [])
    found, notes = run._calls
    out = [f for f in found if matches(f, filters)]
    if len(out) > MAX_CALLS:
        notes = [*notes, f"{len(out) - MAX_CALLS} more calls match; narrow the filter (round, agent, phase)"]
        out = out[:MAX_CALLS]
    return out, "; ".join(notes) or None


def read_calls(path: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """Every LLM run of a traces.jsonl as a call (who, when, prompt, answer), in time order, and
    notes on what could not be read."""
    if not path.is_file():
        return [], ["this run has no traces.jsonl (traces are written when a graph run ends)"]
    out: list[dict[str, Any]] = []
    notes: list[str] = []
    bad = read = 0
    try:
        with open(path, "rb") as fh:
            for raw in fh:
                read += len(raw)
                if read > MAX_BYTES:
                    notes.append(f"only the first {MAX_BYTES >> 20} MB of traces.jsonl were read")
                    break
                if b'"llm"' not in raw:
                    continue
                try:
                    rec = json.loads(raw)
                except (ValueError, RecursionError):
                    bad += 1
                    continue
                if isinstance(rec, Mapping) and rec.get("run_type") == "llm":
                    out.append(facts(rec))
    except OSError as exc:
        notes.append(f"cannot read traces.jsonl: {exc.strerror or exc}")
    out.sort(key=lambda f: str(f.get("start") or ""))
    fill_rounds(out)
    if bad:
        notes.append(f"{bad} damaged lines of traces.jsonl were skipped")
    return out, notes
