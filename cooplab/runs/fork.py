"""Counterfactual forks: a new run that starts from another run's state at the end of one of its
rounds, with some settings changed (``cooplab fork``, :func:`cooplab.fork`).

The fork is made from LangGraph's own checkpoint history, not from copied files: the parent's
checkpoints are opened read-only, :meth:`~langgraph.pregel.Pregel.get_state_history` gives the
snapshot at the end of round K (the checkpoint written after the round's last node, whose next
step is the next round's first node, or none when the run ended there), the task adjusts that
state to the changed settings (:meth:`~cooplab.graphs.task.Task.fork_state`), and
:meth:`~langgraph.pregel.Pregel.update_state` writes it, as if the node that produced it had
just run, as the first checkpoint of the fork's own thread in the fork's own checkpoints.sqlite.
From there the fork is an ordinary run: the runner continues it, ``cooplab resume`` continues it
after a kill, and it can itself be forked.

- Rounds 1..K are the parent's, bit for bit (its tables hold the parent's rows for them), and cost
  no model call: they are read from the checkpoint, never run again. As a guard, a model call of
  round K or earlier that the response cache cannot answer is refused with an error naming the
  call (:class:`~cooplab.agents.calls.PrefixCacheMiss`): a fork never pays for its prefix.
- The fork's ledger holds what the fork spent (the prefix's calls are in the parent's ledger).
  Unchanged, a fork's later rounds ask the very calls the parent asked, so the shared response
  cache answers all of them: the whole parent again, at zero new calls.
- config.json records the parent (its folder as given, its run id), K and the changes under
  ``record.fork``; the parent is never written to, and two forks of one parent share nothing
  they write (each has its own folder, checkpoints and thread id).
"""

from __future__ import annotations

import copy
import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

from cooplab.graphs import checkpoint_serde
from cooplab.graphs.forks import (  # noqa: F401 - the fork record's readers and what fork_state hooks share, below the tasks
    ancestry,
    check_rounds,
    common_round,
    fork_record,
    lineage,
    prefix_rounds,
    refuse_fixed,
    trace_labels,
)
from cooplab.graphs.runfiles import RunSummary
from cooplab.graphs.task import Task
from cooplab.limits import ConfigError, one_line, show
from cooplab.runs import store as runstore

#: the settings a fork may change, as :func:`fork`'s keywords
CHANGEABLE = ("set", "model", "prompt_variant", "invader")


# --- the parent's history ------------------------------------------------------------------------
@contextmanager
def _read_only_saver(run: Path, task: Task) -> Iterator[Any]:
    """A checkpointer on ``run``'s checkpoints.sqlite that cannot change it (read-only SQLite, the
    allow-list serializer of :mod:`cooplab.graphs.checkpoint_serde`)."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    from cooplab.graphs.rundir import inside, readonly_uri

    conn = sqlite3.connect(readonly_uri(inside(run, "checkpoints.sqlite")), uri=True, check_same_thread=False)
    try:
        saver = SqliteSaver(conn, serde=checkpoint_serde.serializer(task))
        saver.is_setup = True  # its tables exist (checked); setting up would write
        yield saver
    finally:
        conn.close()


def rounds_completed(snap: Any) -> int | None:
    """The round a snapshot ends, when it is the end of a round (the checkpoint after a round's last
    node: round R+1 is next, or the run ended), else None."""
    values = snap.values or {}
    r: Any = values.get("round")  # a checkpoint's value: whatever int() takes, else None
    if not isinstance(r, (int,)) or isinstance(r, bool):
        try:
            r = int(r)
        except (TypeError, ValueError):
            return None
    return r - 1


def end_of_round(history: Sequence[Any], at_round: int, where: Path) -> tuple[Any, str]:
    """(the snapshot at the end of round ``at_round``, the node that wrote it) from a run's history
    (newest first); a one-line ConfigError naming the rounds there are when there is none."""
    by_id = {s.config["configurable"].get("checkpoint_id"): s for s in history}
    started = [s for s in history if s.values and "round" in s.values]
    oldest = min(started, key=lambda s: (s.metadata or {}).get("step", 0)) if started else None
    first = tuple(oldest.next) if oldest is not None else ()
    ends: dict[int, tuple[Any, str]] = {}
    for snap in history:  # newest first: the newest end of a round wins (a branch a budget raise left behind loses)
        if not snap.values or "round" not in snap.values or snap.tasks and any(t.error for t in snap.tasks):
            continue
        if snap.next and tuple(snap.next) != first:
            continue  # inside a round
        k = rounds_completed(snap)
        if k is None or k < 0 or k in ends:
            continue
        parent = by_id.get((snap.parent_config or {}).get("configurable", {}).get("checkpoint_id"))
        if parent is None:
            node = "__input__"
        elif parent.next:
            node = parent.next[0]
        else:
            continue
        if node == "__start__":
            node = "__input__"
        ends[k] = (snap, node)
    if at_round not in ends:
        have = sorted(ends)
        span = (
            f"rounds 0..{have[-1]}"
            if have and have == list(range(have[-1] + 1))
            else (", ".join(map(str, have)) or "none")
        )
        raise ConfigError(
            f"--at-round {at_round} is out of range: {where} has checkpoints at the end of {span}; "
            f"give a round it completed (0 forks from its start)"
        )
    return ends[at_round]


# --- the fork's settings ------------------------------------------------------------------------
def _changed_config(
    task: Task,
    config: dict[str, Any],
    *,
    set: Any,
    model: str | None,  # noqa: A002
    prompt_variant: str | None,
    invader: Any = None,
    at_round: int = 0,
    fields: Any = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the fork's config, the changes as recorded); one-line ConfigErrors for unknown settings and
    bad values. ``fields``: the settings ``--set`` may name (the parent's typed settings' model's;
    default: the task's Params')."""
    from cooplab.limits import parse_set

    new = copy.deepcopy(config)
    changes: dict[str, Any] = {}
    if set is not None and set != [] and set != {}:
        if fields is None:
            fields = task.Params.model_fields if task.Params is not None else {}
        parsed = parse_set(list(set) if isinstance(set, tuple) else set, fields, task.name)
        if not isinstance(new.get("params"), dict):
            raise ConfigError(f"{task.name} runs have no parameters to --set")
        new["params"] = {**new["params"], **parsed}
        changes["set"] = parsed
    if model is not None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigError(f"--model must be a model spec (cooplab run --help lists the kinds), got {show(model)}")
        if new.get("agents") != "llm" or not isinstance(new.get("llm"), dict):
            raise ConfigError(f"--model changes who decides in an LLM run; this run's agents are {new.get('agents')!r}")
        new["llm"] = {**new["llm"], "model": model}
        changes["model"] = model
    if prompt_variant is not None:
        if not isinstance(prompt_variant, str) or not prompt_variant.strip():
            raise ConfigError(f"--prompt-variant must be a variant's name, got {show(prompt_variant)}")
        from cooplab.agents.settings import LLMSettings

        if isinstance(new.get("llm"), dict) and "prompt_variant" in LLMSettings.model_fields:
            new["llm"] = {**new["llm"], "prompt_variant": prompt_variant}
        elif (
            task.Params is not None
            and "prompt_variant" in task.Params.model_fields
            and isinstance(new.get("params"), dict)
        ):
            new["params"] = {**new["params"], "prompt_variant": prompt_variant}
        else:
            raise ConfigError(
                f"unknown setting --prompt-variant: {task.name} runs of this cooplab have no prompt variants"
            )
        changes["prompt_variant"] = prompt_variant
    if invader is not None:
        new, changes["invader"] = _with_invader(task, new, invader, at_round)
    return new, changes


def _with_invader(
    task: Task, new: dict[str, Any], invader: Any, at_round: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``new`` with an invader arriving after the fork's round (``--invader KIND@K[:AGENT]``, K after
    ``at_round``: the rounds the fork shares with its parent stay the parent's). The task's own
    check of the stored config then says whether it takes invaders and of which kind."""
    from cooplab.graphs import invaders

    if not isinstance(new.get("params"), dict):
        raise ConfigError(f"--invader: {task.name} runs have no parameters to hold an invader")
    if new["params"].get("invader") is not None:
        raise ConfigError(
            f"--invader: the parent already has an invader ({invaders.text(new['params']['invader'])}); "
            f"fork it without --invader, or fork its own parent"
        )
    from cooplab.runs.config import check_stored

    typed = check_stored(new, "the parent's settings", task)
    inv = invaders.parse(
        invader, n_agents=task.n_agents(typed), rounds=task.total_rounds(typed), agents=str(new.get("agents"))
    )
    if inv is None or inv["round"] <= at_round:
        raise ConfigError(
            f"--invader: the invader's round must come after the fork's round {at_round} (rounds 1..{at_round} "
            f"are the parent's), got {invaders.text(inv)}"
        )
    new["params"] = {**new["params"], "invader": inv}
    if inv["kind"] == "model" and isinstance(new.get("llm"), dict):
        new["llm"] = {
            **new["llm"],
            "model_from": {**(new["llm"].get("model_from") or {}), f"{inv['agent']}@{inv['round']}": inv["model"]},
        }
    return new, inv


def plan(
    parent: str | Path,
    *,
    at_round: Any,
    set: Any = None,
    model: str | None = None,  # noqa: A002
    prompt_variant: str | None = None,
    invader: Any = None,
) -> dict[str, Any]:
    """Everything a fork needs, checked, without writing anything: the task, the parent's and the
    fork's configs, the state the fork starts from and the node that wrote it. One-line
    :class:`~cooplab.runs.store.RunDirError` (the parent) or :class:`ConfigError` (the settings)."""
    from cooplab.runs import runner
    from cooplab.runs.config import check_stored

    parent = Path(parent)
    if isinstance(at_round, bool) or not isinstance(at_round, int):
        raise ConfigError(f"--at-round must be a whole number of rounds (0 or more), got {show(at_round)}")
    if at_round < 0:
        raise ConfigError(f"--at-round must be 0 or more (the rounds of the parent kept), got {at_round}")
    task, config = runner.stored_run(parent)
    try:
        tid = runner.thread_id(task, config)
    except ConfigError as exc:
        raise runstore.RunDirError(f"{parent}/config.json: {exc}") from None
    # the changes are made on the parent's config.json object, then the fork's read back into a typed RunConfig
    new, changes = _changed_config(
        task,
        config.to_json(),
        set=set,
        model=model,
        prompt_variant=prompt_variant,
        invader=invader,
        at_round=at_round,
        fields=type(config.params).model_fields if task.Params is not None else {},
    )
    new["record"] = {
        "fork": {
            "parent": str(parent),
            "parent_thread_id": tid,
            "at_round": at_round,
            "changes": changes,
            "lineage": lineage(config, tid, at_round),
        }
    }
    try:
        new = check_stored(new, "the fork's settings", task)
    except ConfigError as exc:
        raise ConfigError(str(exc).replace("the fork's settings: ", "")) from None
    try:
        with _read_only_saver(parent, task) as saver:
            graph = task.build(config, checkpointer=saver)
            history = list(graph.get_state_history({"configurable": {"thread_id": tid}}))
    except (runstore.RunDirError, ConfigError):
        raise
    except Exception as exc:  # noqa: BLE001 - a checkpoint that does not deserialize
        if isinstance(exc, checkpoint_serde.CheckpointRefused):
            raise runstore.refused_checkpoint(parent, exc) from None
        raise runstore.RunDirError(
            f"{parent}/checkpoints.sqlite cannot be read ({one_line(f'{type(exc).__name__}: {exc}', 200)}); "
            f"it cannot be forked"
        ) from None
    snap, node = end_of_round(history, at_round, parent)
    values = dict(snap.values)
    values.update(task.fork_state(values, config, new))
    if "ledger" in values:  # the fork's ledger is what the fork spends: the prefix was paid by the parent
        values["ledger"] = []
    fork_graph = task.build(new)
    if (
        node != "__input__" and node not in fork_graph.nodes
    ):  # the changes drop the step that ends a round: the fork's own last step ends it
        closing = [n for n in getattr(fork_graph.builder, "branches", {}) if n in fork_graph.nodes]
        if len(closing) != 1:
            raise ConfigError(
                f"the changes remove the {node} step that ends a round of {parent}, and the fork's graph has no one "
                "step "
                f"that ends a round; a fork cannot change which steps a round has here"
            )
        node = closing[0]
    return {
        "task": task,
        "parent": parent,
        "config": config,
        "new": new,
        "values": values,
        "as_node": node,
        "changes": changes,
        "at_round": at_round,
    }


def fork(
    parent: str | Path,
    *,
    at_round: Any,
    out: str | Path,
    set: Any = None,
    model: str | None = None,  # noqa: A002
    prompt_variant: str | None = None,
    invader: Any = None,
    force: bool = False,
    quiet: bool = False,
) -> RunSummary:
    """Fork ``parent`` at the end of round ``at_round`` into ``out`` with the changes applied and run
    the fork to its end (see the module docstring). Everything is checked before ``out`` is made or
    changed. Returns the fork's summary; a fork that stops early raises what a run raises
    (:class:`~cooplab.runs.runner.RunStopped`, :class:`~cooplab.runs.runner.RunFailed`)."""
    from cooplab.runs import runner

    out = Path(out)
    p = plan(parent, at_round=at_round, set=set, model=model, prompt_variant=prompt_variant, invader=invader)
    try:
        same = out.exists() and out.resolve() == Path(parent).resolve()
    except OSError:
        same = False
    if same:
        raise ConfigError(f"--out {out} is the parent run itself; a fork goes to a folder of its own")
    task = p["task"]
    with runstore.locked(runstore.ensure_writable(out)) as path:
        path = runstore.prepare_out(path, force=force)
        new = runner.stamped(task, p["new"])
        runstore.write_json(path / "config.json", new.to_json())
        with runner.sqlite_saver(path / "checkpoints.sqlite", task) as saver:
            graph = task.build(new, checkpointer=saver)
            graph.update_state(
                {"configurable": {"thread_id": runner.thread_id(task, new)}}, p["values"], as_node=p["as_node"]
            )
        return runner.execute(task, path, new, None, quiet=quiet, start="fork")


__all__ = [
    "CHANGEABLE",
    "ancestry",
    "trace_labels",
    "common_round",
    "end_of_round",
    "fork",
    "fork_record",
    "lineage",
    "plan",
    "prefix_rounds",
]
