"""The readers of a fork's record (``record.fork`` of its config.json: its parent, the round K it was
forked at, the lineage of runs whose rounds it shares). They lie at the bottom, so that the engine
(:mod:`cooplab.runs.fork`, the runner) and the explorer's fork pages (evals) read a record the same
way; :mod:`cooplab.runs.fork` makes forks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def fork_record(config: Any) -> dict[str, Any] | None:
    """What a fork's config.json says of its parent (``record.fork``), or None for a run that is
    not a fork (or a record that is not an object). ``config``: a run's RunConfig or its
    config.json's object."""
    raw = config.get("record") if isinstance(config, Mapping) else getattr(config, "record", None)
    record = raw if isinstance(raw, Mapping) else {}
    rec = record.get("fork")
    return dict(rec) if isinstance(rec, Mapping) else None


def prefix_rounds(config: Mapping[str, Any]) -> int | None:
    """K of a fork at round K (its rounds 1..K are the parent's), or None."""
    rec = fork_record(config)
    k = rec.get("at_round") if rec else None
    return k if isinstance(k, int) and not isinstance(k, bool) and k >= 0 else None


def trace_labels(config: Any) -> dict[str, Any]:
    """What every traced run of a fork says of its parent in its metadata: ``fork_of`` (the
    parent's run id) and ``fork_at_round`` (K); {} for a run that is not a fork. Its first part is
    also tagged "fork" (:func:`cooplab.runs.runner.trace_start`)."""
    rec = fork_record(config)
    if rec is None:
        return {}
    out: dict[str, Any] = {}
    if isinstance(rec.get("parent_thread_id"), str):
        out["fork_of"] = rec["parent_thread_id"]
    k = rec.get("at_round")
    if isinstance(k, int) and not isinstance(k, bool) and k >= 0:
        out["fork_at_round"] = k
    return out


def ancestry(config: Mapping[str, Any], thread_id: str | None) -> list[dict[str, Any]]:
    """The runs whose rounds a run shares, as ``[{"thread_id", "rounds"}]`` (its rounds 1..rounds are
    that run's; ``rounds`` None: all, the run itself): its fork record's lineage, then itself. Entries
    of a damaged record are skipped (a lineage is read, never followed to a folder)."""
    rec = fork_record(config) or {}
    out: list[dict[str, Any]] = []
    for item in rec.get("lineage") or [] if isinstance(rec.get("lineage"), list) else []:
        if isinstance(item, Mapping) and isinstance(item.get("thread_id"), str) and isinstance(item.get("rounds"), int) \
                and not isinstance(item.get("rounds"), bool) and item["rounds"] >= 0:
            out.append({"thread_id": item["thread_id"], "rounds": item["rounds"]})
    if thread_id is not None:
        out.append({"thread_id": thread_id, "rounds": None})
    return out


def lineage(parent_config: Mapping[str, Any], parent_thread_id: str, at_round: int) -> list[dict[str, Any]]:
    """A fork's lineage: the runs whose rounds 1..n it shares (its parent's ancestry cut at K)."""
    return [{"thread_id": a["thread_id"], "rounds": at_round if a["rounds"] is None else min(a["rounds"], at_round)}
            for a in ancestry(parent_config, parent_thread_id)]


def common_round(a: Mapping[str, Any], a_thread: str | None, b: Mapping[str, Any], b_thread: str | None) -> int:
    """The last round two runs share by their lineages (0: none; a run with itself: -1, all)."""
    best = 0
    mine = {x["thread_id"]: x["rounds"] for x in ancestry(a, a_thread)}
    for x in ancestry(b, b_thread):
        if x["thread_id"] in mine:
            r, s = mine[x["thread_id"]], x["rounds"]
            if r is None and s is None:
                return -1
            best = max(best, min(v for v in (r, s) if v is not None))
    return best
