"""The readers of a fork's record (``record.fork`` of its config.json: its parent, the round K it was
forked at, the lineage of runs whose rounds it shares). They lie at the bottom, so that the engine
(:mod:`cooplab.runs.fork`, the runner) and the explorer's fork pages (evals) read a record the same
way; and what a task's ``fork_state`` hook shares (:func:`refuse_fixed`, :func:`check_rounds`), below
the tasks that call it. :mod:`cooplab.runs.fork` makes forks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cooplab.limits import ConfigError, show


def fork_record(config: Any) -> dict[str, Any] | None:
    """What a fork's config.json says of its parent (``record.fork``), or None for a run that is
    not a fork (or a record that is not an object). ``config``: a run's RunConfig or its
    config.json's object."""
    raw = config.get("record") if isinstance(config, Mapping) else getattr(config, "record", None)
    record = raw if isinstance(raw, Mapping) else {}
    rec = record.get("fork")
    return dict(rec) if isinstance(rec, Mapping) else None


def prefix_rounds(config: Any) -> int | None:
    """K of a fork at round K (its rounds 1..K are the parent's), or None (``config``: a RunConfig or its
    config.json's object)."""
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


def ancestry(config: Any, thread_id: str | None) -> list[dict[str, Any]]:
    """The runs whose rounds a run shares, as ``[{"thread_id", "rounds"}]`` (its rounds 1..rounds are
    that run's; ``rounds`` None: all, the run itself): its fork record's lineage, then itself. Entries
    of a damaged record are skipped (a lineage is read, never followed to a folder)."""
    rec = fork_record(config) or {}
    out: list[dict[str, Any]] = []
    for item in rec.get("lineage") or [] if isinstance(rec.get("lineage"), list) else []:
        if (
            isinstance(item, Mapping)
            and isinstance(item.get("thread_id"), str)
            and isinstance(item.get("rounds"), int)
            and not isinstance(item.get("rounds"), bool)
            and item["rounds"] >= 0
        ):
            out.append({"thread_id": item["thread_id"], "rounds": item["rounds"]})
    if thread_id is not None:
        out.append({"thread_id": thread_id, "rounds": None})
    return out


def lineage(parent_config: Any, parent_thread_id: str, at_round: int) -> list[dict[str, Any]]:
    """A fork's lineage: the runs whose rounds 1..n it shares (its parent's ancestry cut at K)."""
    return [
        {"thread_id": a["thread_id"], "rounds": at_round if a["rounds"] is None else min(a["rounds"], at_round)}
        for a in ancestry(parent_config, parent_thread_id)
    ]


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


# --- what a task's fork_state hook shares ------------------------------------------------------
def refuse_fixed(old: Any, new: Any, names: Sequence[str], state: Mapping[str, Any], *, task: str) -> None:
    """One-line :class:`ConfigError` naming the first of ``names`` (settings of a run's start: the
    number of agents, the shapes of its arrays, who plays) that differs between the parent's typed
    settings ``old`` and the fork's ``new``. An invader the parent did not have may arrive at a
    round after the fork's (``--invader``, or ``--set invader=...``); any other change of it is refused."""
    t = int(state["round"])
    for key in names:
        a, b = getattr(old, key, None), getattr(new, key, None)
        if a == b:
            continue
        if key == "invader" and a is None and b is not None and int(b.round) >= t:
            continue
        raise ConfigError(
            f"{key} is fixed at the start of a {task} run, which a fork keeps from its parent "
            f"({show(_plain(a))} there, {show(_plain(b))} asked); start a new run to change it"
        )


def _plain(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if callable(dump) else value


def check_rounds(old_rounds: int, new_rounds: int, state: Mapping[str, Any], name: str) -> None:
    """A changed round cap must leave the fork at least one round to run (its first is state's round)."""
    t = int(state["round"])
    if new_rounds != old_rounds and new_rounds < t:
        raise ConfigError(
            f"{name}={new_rounds} would end the run before the fork's first round ({t}); give {name} of {t} or more"
        )
