"""What the explorer's society pages share (CPR, diners, the games; each world's page is its task's
``explore`` hook, in ``tasks/<world>/explore.py``): the page's frame (summary, the round or agent
asked for, the society's sections, the generic ones), the round and agent focus sections, and small
helpers for their tables and key numbers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from cooplab.evals.values import fmt, num
from cooplab.graphs import explore as ex

from . import generic
from .common import Spec, agents_by_round, conversation, fines, query_int

#: the agent key and the society index every per-agent table carries (graphs/tables.py): who a row is, not a value of it
KEYS = ("society", "agent_id")


def page(
    run: Any, numbers: dict[str, Any] | None, focus: list[ex.Section | None], body: list[ex.Section | None]
) -> list[ex.Section]:
    """Summary (with the run's key ``numbers``), then the round or agent asked for, then the society's
    sections, then the generic ones: a whole page (a task's ``explore`` with ``explore_whole_page``)."""
    secs = [generic.summary_section(run, numbers), *focus, *body, *generic.tail(run)]
    return [s for s in secs if s is not None]


def rows_of(df: Any, col: str, value: Any) -> Any:
    return df[df[col].astype(str) == str(value)] if df is not None and col in df.columns else None


def mean_sem(summary: Mapping[str, Any], key: str) -> str | None:
    """ "0.8333 ± 0.01" of a summary's ``{"mean": .., "sem": ..}`` entry (None without a mean)."""
    v = summary.get(key)
    if not isinstance(v, Mapping) or "mean" not in v:
        return None
    sem = num(v.get("sem"))
    return fmt(v.get("mean")) + (f" \u00b1 {fmt(sem)}" if sem is not None else "")


def known(items: dict[str, Any], summary: Mapping[str, Any]) -> dict[str, Any]:
    """The items that have a value, and the run's cost."""
    return {**{k: v for k, v in items.items() if v is not None}, **generic.cost_number(summary)}


# --- shared focus sections (diners, games) --------------------------------------------------------
def round_focus(
    run: Any,
    query: Mapping[str, str],
    spec: Spec,
    df: Any,
    pairs: list[dict[str, Any]],
    keep: dict[str, Any],
    verb: str,
) -> ex.Section | None:
    r = query_int(query, "round")
    if r is None:
        return None
    blocks: list[ex.Block] = []
    rows = rows_of(df, spec.round, r)
    if rows is not None and len(rows):
        values = [c for c in rows.columns if c not in (*spec.society, spec.round, spec.agent, *KEYS, "_society")]
        blocks += agents_by_round(
            rows, spec, values, title=f"{spec.round_unit} {r}", key_prefix="round", plots=[], keep=keep
        )
    blocks += fines([p for p in pairs if str(p["round"]) == str(r)], spec, verb=verb, keep=keep)[:1]
    blocks += conversation(run, {"round": r}, spec)
    return ex.Section(f"{spec.round_unit.capitalize()} {r}", blocks, id="round")


def agent_focus(
    run: Any,
    query: Mapping[str, str],
    spec: Spec,
    df: Any,
    pairs: list[dict[str, Any]],
    keep: dict[str, Any],
    verb: str,
) -> ex.Section | None:
    a = query_int(query, "agent")
    if a is None:
        return None
    name = spec.name(a)
    blocks: list[ex.Block] = []
    rows = rows_of(df, spec.agent, a)
    if rows is not None and len(rows):
        values = [c for c in rows.columns if c not in (*spec.society, spec.round, spec.agent, *KEYS, "_society")]
        blocks += agents_by_round(
            rows,
            spec,
            values,
            title=f"{name}, {spec.round_unit} by {spec.round_unit}",
            key_prefix="agent",
            plots=[],
            keep=keep,
        )
    else:
        blocks.append(ex.Note(f"no rows of {name} in this society"))
    mine = [p for p in pairs if str(a) in (str(p["punisher"]), str(p["target"]))]
    if mine:
        blocks += fines(mine, spec, verb=verb, keep=keep)[:1]
    blocks.append(ex.Details(f"everything {name} was asked and answered", conversation(run, {"agent": a}, spec)))
    return ex.Section(f"{name} across {spec.round_unit}s", blocks, id="agent")


def value_at(df: Any, col: str, x: Any, value: str) -> Any:
    hit = df[df[col] == x]
    return hit[value].iloc[0] if len(hit) and value in hit.columns else None


def natural_key(key: str) -> tuple:
    """A society key's sort key: whole numbers by value, text after them."""
    # 18 digits at most: a key is an id, never a 5,000-digit number
    return tuple((0, int(p), "") if re.fullmatch(r"[0-9]{1,18}", p) else (1, 0, p) for p in str(key).split("/"))
