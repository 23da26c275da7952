"""Building blocks of the society views: one society of a batch, agents by round, who punished
whom, an agent across rounds, a round in detail, and the conversation of an agent in a round.

A society's per-agent tables differ by task only in their column names; :class:`Spec` names them
(which columns identify one society, the round and the agent, and what an agent is called).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cooplab.evals.explorer import traces
from cooplab.evals.typed import numeric
from cooplab.evals.values import cut, num
from cooplab.graphs import explore as ex

#: agents drawn as separate lines of a plot at most (larger societies: the mean only)
MAX_AGENT_LINES = 12
#: calls shown inline in a round's or an agent's conversation at most
MAX_INLINE_CALLS = 60


@dataclass
class Spec:
    """How a task's per-agent tables name things."""

    noun: str  # what one agent is called ("Fisher": agent 2 is "Fisher 3")
    society: tuple[str, ...]  # the columns that identify one society of the batch
    round: str  # the round column ("round", "iteration")
    agent: str  # the agent column (0-based ids)
    round_unit: str = "round"

    def name(self, agent: Any) -> str:
        i = whole(agent)
        return f"{self.noun} {i + 1}" if i is not None else str(agent)


def whole(v: Any) -> int | None:
    """An agent, round or society number: an int, a float that is whole, or text of at most 12
    digits ("3", "-1"); else None. Text is never read as a number in any other notation: "1e5" or
    "0x1f" is no agent 100000 or 31."""
    if isinstance(v, str):
        t = v.strip()
        return int(t) if re.fullmatch(r"-?[0-9]{1,12}", t) else None
    n = num(v)
    return int(n) if n is not None and abs(n) < 1e12 and n == int(n) else None


def query_int(query: Mapping[str, str], key: str) -> int | None:
    """A whole number from the query (None when absent or not a whole number)."""
    v = query.get(key)
    if v is None or not v.strip().lstrip("-").isdigit() or len(v) > 12:
        return None
    return int(v)


def society_keys(df: Any, cols: Sequence[str]) -> Any:
    """Each row's society as text: the values of ``cols`` joined by "/" (whole numbers without ".0")."""
    import pandas as pd

    key = None
    for c in cols:
        values = numeric(df[c])
        whole_ = values.notna() & (values.abs() < 1e15) & (values % 1 == 0)
        text = df[c].astype(str)
        text[whole_] = values[whole_].astype("int64").astype(str)
        key = text if key is None else key + "/" + text
    return key if key is not None else pd.Series("0", index=df.index)


def with_society(df: Any, spec: Spec) -> Any:
    """``df`` with a ``_society`` text column (its society's key), or None without the columns."""
    if df is None or not all(c in df.columns for c in spec.society):
        return None
    df = df.copy()
    df["_society"] = society_keys(df, spec.society)
    return df


def pick_society(keys: Sequence[str], query: Mapping[str, str]) -> str | None:
    """The society the page shows: ``?society=KEY`` when it is one of them, else the first."""
    want = query.get("society")
    if want in keys:
        return want
    return keys[0] if keys else None


def plural(n: int, noun: str) -> str:
    """ "1 society", "100 societies", "2 simulations"."""
    if n == 1:
        return f"1 {noun}"
    if noun.endswith("y") and noun[-2:-1] not in "aeiou":
        return f"{n} {noun[:-1]}ies"
    return f"{n} {noun}{'es' if noun.endswith(('s', 'x', 'ch', 'sh')) else 's'}"


def society_picker(keys: Sequence[str], chosen: str | None, label: str) -> list[ex.Block]:
    """A drop-down of every society of the batch (all of them, however many: each is one click
    away), with the previous and next one as links."""
    if len(keys) <= 1:
        return []
    return [
        ex.Choice(
            "society",
            [(k, f"{label} {k}") for k in keys],
            chosen=chosen,
            label=f"{plural(len(keys), label)} in this run (side by side); showing {label} {chosen}; pick another:",
        )
    ]


def agents_by_round(
    df: Any,
    spec: Spec,
    values: Sequence[str],
    *,
    title: str,
    key_prefix: str,
    plots: Sequence[str],
    labels: Mapping[str, str] | None = None,
    keep: Mapping[str, Any] | None = None,
) -> list[ex.Block]:
    """A table of every agent in every round (names link to the agent's page) and a plot per value
    of ``plots`` with one line per agent."""
    labels = dict(labels or {})
    cols = [c for c in values if c in df.columns]
    rows = []
    for _, r in df.sort_values([spec.round, spec.agent]).iterrows():
        row = {spec.round_unit: r[spec.round], spec.noun.lower(): spec.name(r[spec.agent]), "_id": whole(r[spec.agent])}
        row.update({labels.get(c, c): r[c] for c in cols})
        rows.append(row)
    blocks: list[ex.Block] = [
        ex.Table(
            rows,
            title=title,
            links={spec.noun.lower(): ("agent", "_id"), spec.round_unit: "round"},
            max_rows=5_000,
            keep=dict(keep or {}),
        )
    ]
    for c in plots:
        if c in df.columns:
            blocks.append(per_agent_plot(df, spec, c, labels.get(c, c), key=f"{key_prefix}-{c}"))
    return blocks


def per_agent_plot(df: Any, spec: Spec, col: str, label: str, *, key: str) -> ex.Plot:
    rounds = sorted({r for r in df[spec.round].tolist() if num(r) is not None})
    agents = sorted({a for a in df[spec.agent].tolist() if whole(a) is not None})
    series: dict[str, list[Any]] = {}
    if len(agents) <= MAX_AGENT_LINES:
        for a in agents:
            sub = df[df[spec.agent] == a].set_index(spec.round)[col]
            sub = sub[~sub.index.duplicated()]
            series[spec.name(a)] = [sub.get(r) for r in rounds]
    means = df.groupby(spec.round)[col].apply(lambda s: _mean(s.tolist()))
    series["mean"] = [means.get(r) for r in rounds]
    return ex.Plot(
        rounds,
        series,
        title=f"{label} by {spec.round_unit}",
        xlabel=spec.round_unit,
        ylabel=label,
        key=key,
        caption=f"one line per {spec.noun.lower()} (up to {MAX_AGENT_LINES}); the thick black line is the mean over "
        "the "
        f"{spec.noun.lower()}s with a value in that {spec.round_unit}",
    )


def _mean(values: list[Any]) -> float | None:
    xs = [num(v) for v in values]
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def fines(
    pairs: list[dict[str, Any]],
    spec: Spec,
    *,
    verb: str = "fined",
    amount: str | None = None,
    keep: Mapping[str, Any] | None = None,
) -> list[ex.Block]:
    """Who punished whom: a list (round, punisher, target[, amount]) and a matrix of counts (or
    amounts) over the rounds listed. ``pairs``: dicts with round, punisher, target (agent ids)."""
    if not pairs:
        return [ex.Note(f"nobody {verb} anybody", level="info")]
    rows = [
        {
            spec.round_unit: p["round"],
            "who": spec.name(p["punisher"]),
            verb: spec.name(p["target"]),
            **({amount: p.get(amount)} if amount else {}),
            "_id": whole(p["punisher"]),
        }
        for p in pairs
    ]
    agents = sorted({w for p in pairs for w in (whole(p["punisher"]), whole(p["target"])) if w is not None})
    totals: dict[tuple[int | None, int | None], Any] = {}  # (who, whom) -> count or amount, in one pass over the pairs
    for p in pairs:
        key = (whole(p["punisher"]), whole(p["target"]))
        totals[key] = totals.get(key, 0) + ((num(p.get(amount)) or 0) if amount else 1)
    matrix = []
    for a in agents:
        row: dict[str, Any] = {f"who \u2193 / {verb} \u2192": spec.name(a)}
        for b in agents:
            row[spec.name(b)] = totals.get((a, b), 0) or ""
        matrix.append(row)
    return [
        ex.Table(
            rows,
            title=f"who {verb} whom, {spec.round_unit} by {spec.round_unit}",
            links={spec.round_unit: "round", "who": ("agent", "_id")},
            max_rows=5_000,
            keep=dict(keep or {}),
        ),
        ex.Table(
            matrix,
            title=f"times {verb}" + (f" ({amount})" if amount else "") + " (rows: who; columns: whom)",
            filterable=False,
        ),
    ]


def conversation(run: Any, filters: Mapping[str, Any], spec: Spec, *, open_: bool = False) -> list[ex.Block]:
    """The model calls matching ``filters`` (prompt messages and answer), each in a collapsible
    block, and a link to the same calls on the traces page."""
    want = {k: str(v) for k, v in filters.items() if v is not None}
    if run.config.get("agents") != "llm":
        return [ex.Note(f"rule-based {spec.noun.lower()}s: no model calls to show", level="info")]
    found, note = traces.calls(run, want)
    blocks: list[ex.Block] = []
    if note:
        blocks.append(ex.Note(note))
    for c in found[:MAX_INLINE_CALLS]:
        who = c.get("agent_name") or (spec.name(c["agent"]) if c.get("agent") is not None else c.get("name") or "?")
        head = (
            f"{who} \u00b7 {c.get('phase') or '?'}"
            + (f" \u00b7 {spec.round_unit} {c['round']}" if c.get("round") is not None else "")
            + (" \u00b7 cached" if c.get("cached") else "")
        )
        inner: list[ex.Block] = [ex.Code(m["text"], title=m["role"]) for m in c.get("messages") or []]
        inner.append(ex.Code(c.get("answer") or "", title="answer"))
        if c.get("error"):
            inner.append(ex.Note(f"error: {cut(str(c['error']), 500)}"))
        blocks.append(ex.Details(f"{head}: {cut(c.get('answer') or '', 160)}", inner, open=open_))
    if len(found) > MAX_INLINE_CALLS:
        blocks.append(ex.Note(f"{len(found) - MAX_INLINE_CALLS} more calls on the traces page", level="info"))
    if not found and not note:
        blocks.append(ex.Note("no model calls recorded for this (rule-based agents, or no traces)", level="info"))
    if found:
        blocks.append(ex.Link("these calls on the traces page", {k: v for k, v in want.items()}, trace=True))
    return blocks


def parsed(v: Any) -> dict[str, Any]:
    """A decision's parsed answer (a JSON object in text) as a dict ({} when it is not one)."""
    if isinstance(v, Mapping):
        return dict(v)
    if not isinstance(v, str):
        return {}
    try:
        obj = json.loads(v)
    except (ValueError, RecursionError):
        return {}
    return obj if isinstance(obj, dict) else {}
