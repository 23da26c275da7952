"""The one runner every task goes through (see :mod:`cooplab.graphs.task`).

A run directory holds ``config.json`` (written first, so an interrupted run can always be
resumed), ``checkpoints.sqlite`` (a LangGraph SQLite checkpointer, thread id = the run's own id, recorded as
``record.thread_id`` in config.json; runs made before it was recorded use the task's name),
the task's tables and figures, ``summary.json`` and, for LLM runs, ``traces.jsonl`` (LangSmith
run format), ``decisions.*`` and ``ledger.*``.

- Rule-based runs invoke the graph synchronously (``SqliteSaver``, checkpoints written in the
  background: ``durability="async"``).
- LLM runs stream it (``AsyncSqliteSaver``, every step's checkpoint written before the next
  step starts: ``durability="sync"``) with the runtime context :class:`CoopContext` (the
  :class:`~cooplab.agents.decisions.LLMService`: models, response cache and credit ledger,
  the ledger restored from the state's audit trail on resume) and the tracer.
- An exhausted budget ends the run cleanly (status ``budget_exhausted``); an unavailable model
  stops it at its last checkpoint (status ``stopped``, :class:`RunStopped`); any other error
  leaves ``error.log`` and a summary with status ``failed`` (:class:`RunFailed`). In every case
  nothing already computed is lost and ``cooplab resume DIR`` continues from the last checkpoint.
"""

from __future__ import annotations

import decimal
import json
import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.sqlite import SqliteSaver

from cooplab.agents.settings import build_service
from cooplab.graphs import checkpoint_serde, runfiles
from cooplab.graphs.aio import run_sync
from cooplab.graphs.context import CoopContext
from cooplab.graphs.formats import upgrade_config
from cooplab.graphs.ledger import JOURNAL_FILE, BudgetExhausted
from cooplab.graphs.runfiles import RunSummary
from cooplab.graphs.tables import money_table
from cooplab.graphs.task import RunInfo, Task, TaskConfig
from cooplab.limits import ConfigError, check, one_line, show
from cooplab.runs import store as runstore
from cooplab.runs.config import RunConfig, check_stored
from cooplab.runs.fork import prefix_rounds


class RunStopped(RuntimeError):
    """A run stopped early but cleanly (model unreachable); resumable."""


class RunFailed(RuntimeError):
    """A run ended by an unexpected error: summary.json (status "failed") and error.log are in its
    directory; the message (one line) says where."""


# --- starting and resuming -----------------------------------------------------------------
def start(
    task: Task,
    out: Path,
    config: RunConfig | dict[str, Any] | TaskConfig[Any],
    *,
    quiet: bool = False,
    state: dict[str, Any] | None = None,
) -> RunSummary:
    """Write ``out/config.json`` (the runner's fields added), build the initial state and run, holding
    the directory's lock (:func:`~cooplab.runs.store.locked`) throughout. ``out`` must exist and be
    empty (``runstore.prepare_out``). ``config``: a resolved :class:`RunConfig`, a config.json's
    object (any version: read and checked as a stored one), or a task's own configuration made
    without the engine (``Task.default_config``)."""
    out = Path(out)
    config = stamped(task, config)
    with runstore.locked(out):
        runstore.write_json(out / "config.json", config.to_json())
        return execute(task, out, config, task.init_state(config) if state is None else state, quiet=quiet)


def stamped(task: Task, config: RunConfig | dict[str, Any] | TaskConfig[Any]) -> RunConfig:
    """A new run's configuration: ``config`` resolved (a config.json's object, in any version's
    shape, is read as a stored one), with what is noted when a run starts in ``record`` (code
    version, time, environment, the run's own id as ``thread_id``)."""
    if not isinstance(config, (RunConfig, dict)) and hasattr(config, "params"):  # a TaskConfig made without the engine
        config = RunConfig(
            task=task.name,
            agents=config.agents,
            seed=config.seed,
            csv=config.csv,
            params=config.params,
            llm=config.llm,
            sandbox=config.sandbox,
            record=dict(config.record),
        )
    if not isinstance(config, RunConfig):  # a config.json's object (TaskConfigs became RunConfigs above)
        stored = cast("dict[str, Any]", config)
        config = check_stored(
            {"task": task.name, "agents": task.agent_kinds[0], **upgrade_config({"task": task.name, **stored})},
            "config",
            task,
        )
    elif not config.resolved:
        config = config.resolve(task)
    env = runstore.environment(config.to_json())
    return config.with_record(
        code_version=runstore.code_version(env["git"]),
        created=runstore.now(),
        environment=env,
        thread_id=new_thread_id(),
    )


def resume(
    out: Path,
    *,
    quiet: bool = False,
    warn: Callable[[str], None] | None = None,
    budget: float | None = None,
    budget_name: str = "budget",
    notice: Callable[[str], None] | None = None,
) -> RunSummary:
    """Continue any task's run from its last checkpoint, after checking its config.json (every value
    by the rules of the options that wrote it) and its checkpoints.sqlite (read-only): damaged
    files and unknown tasks are one-line ``RunDirError``s and nothing is changed. ``warn`` gets one
    line when the environment differs from the one the run was started in (package versions, the
    git commit, the local model's hash, the sandbox image): the run resumes, but its results may
    differ from an uninterrupted run's. The directory's lock is held from the checks to the end: a
    second process resuming (or running) it stops with a one-line ``RunDirBusy``.

    A run that ended with its budget spent (status ``budget_exhausted``) resumes only with a raised
    ``budget`` (USD, above the run's; ``budget_name`` is how the caller spells it in messages):
    config.json then records the new cap (``llm.budget``, and ``record.budget_raised``) and
    ``notice`` gets one line saying so. Without it, such a run is a one-line ``RunDirError`` and
    nothing is changed (resuming it would only replay its stop)."""
    out = Path(out)
    runstore.read_run_config(out)  # a run directory (never lock a folder that is not one)
    with runstore.locked(out):
        return _resume(out, quiet=quiet, warn=warn, budget=budget, budget_name=budget_name, notice=notice)


def stored_run(out: Path) -> tuple[Task, RunConfig]:
    """(the task, the checked config.json read into its typed RunConfig) of the run in ``out``, as a resume or a fork
    reads them:
    one-line :class:`~cooplab.runs.store.RunDirError` on a folder that is not a run of a known task."""
    from cooplab.runs import registry

    name = runstore.read_run_config(out).get("task")
    if not isinstance(name, str):
        raise runstore.RunDirError(
            f"{out}/config.json: task must be a task name, got {show(name)}; is it a cooplab run directory?"
        )
    try:
        task = registry.get(name)
    except registry.UnknownTask as exc:
        raise runstore.RunDirError(f"{out}/config.json: {exc}") from None
    return task, runstore.config_for_resume(
        out, name, lambda o, c: check_stored(c, f"{o}/config.json", task), checkpoint_serde.serializer(task)
    )


def _resume(
    out: Path,
    *,
    quiet: bool,
    warn: Callable[[str], None] | None,
    budget: float | None = None,
    budget_name: str = "budget",
    notice: Callable[[str], None] | None = None,
) -> RunSummary:
    task, config = stored_run(out)
    try:
        thread_id(task, config)
    except ConfigError as exc:
        raise runstore.RunDirError(
            f"{out}/config.json: {exc}; fix the file, or {runstore.RESTART.format(out=out)}"
        ) from None
    config = _budget_for_resume(out, task, config, budget, budget_name, notice or warn or _log_warning)
    changes = runstore.environment_changes(config.record.get("environment"), runstore.environment(config.to_json()))
    if changes:
        (warn or _log_warning)(
            f"{out} was started in another environment ({'; '.join(changes)}); "
            f"the resumed part may not match an uninterrupted run"
        )
    return execute(task, out, config, None, quiet=quiet)


def _budget_for_resume(
    out: Path, task: Task, config: RunConfig, budget: float | None, name: str, say: Callable[[str], None]
) -> RunConfig:
    """The config a run resumes with under :func:`resume`'s budget rule (one-line RunDirErrors)."""
    old = config.llm.budget if config.llm is not None else None
    how = f"'cooplab resume {out} --budget USD', or cooplab.resume(..., budget=USD) in Python"
    if budget is None:
        if _status(out) == "budget_exhausted":
            raise runstore.RunDirError(
                f"{out} ended with its budget of ${old} spent, so resuming it would change nothing; "
                f"to continue it, raise the budget above ${old} ({how})"
            )
        return config
    if config.agents != "llm":
        raise runstore.RunDirError(
            f"{name} caps what model calls cost; {out} is a run of {config.agents} agents, which makes none"
        )
    try:
        value = check(name, budget, "budget")
    except ConfigError as exc:
        raise runstore.RunDirError(str(exc)) from None
    if old is None:
        raise runstore.RunDirError(f"{out} has no budget cap, so there is none to raise; resume it without {name}")
    if value <= old:
        raise runstore.RunDirError(f"{name} must be above the run's budget of ${old} to continue it, got {value:g}")
    raw = runstore.read_run_config(out)
    raised = [r for r in ((raw.get("record") or {}).get("budget_raised") or []) if isinstance(r, dict)]
    raw = {
        **raw,
        "llm": {**raw["llm"], "budget": value},
        "record": {
            **(raw.get("record") or {}),
            "budget_raised": [*raised, {"from": old, "to": value, "at": runstore.now()}],
        },
    }
    try:
        new = check_stored(raw, f"{out}/config.json", task)
    except ConfigError as exc:
        raise runstore.RunDirError(f"{exc}; the budget was not raised") from None
    where = "its last checkpoint"
    if _status(out) == "budget_exhausted":
        with sqlite_saver(out / "checkpoints.sqlite", task) as saver:
            graph = task.build(new, checkpointer=saver)
            try:
                point = task.budget_resume_point(
                    graph.get_state_history({"configurable": {"thread_id": thread_id(task, new)}})
                )
            except Exception as exc:  # noqa: BLE001 - a checkpoint that does not deserialize
                raise _damaged(out, exc) from None
            if point is not None:  # the stop is in the state: fork from before the node it cut short
                graph.update_state(point.config, None, as_node="__copy__")
                where = f"the checkpoint before its {point.next[0]} step, where the budget stopped it"
    runstore.write_json(out / "config.json", raw)
    say(
        f"the budget of {out} is raised from ${old:g} to ${value:g} (recorded in its config.json); it continues from "
        f"{where}"
    )
    return new


def _status(out: Path) -> str | None:
    """The status in a run's summary.json, or None when it has none yet; a damaged one is a
    one-line RunDirError (a resume must not guess how the run ended)."""
    if not (out / runfiles.SUMMARY_FILE).exists():
        return None
    try:
        return runstore.read_summary(out).status
    except runstore.RunDirError as exc:
        raise runstore.RunDirError(f"{exc}; fix the file, or delete it to resume from the last checkpoint") from None


def _log_warning(message: str) -> None:
    import logging

    logging.getLogger("cooplab").warning(message)


def sandbox_settings(config: RunConfig):
    """(backend, SandboxConfig) of a run that uses the sandbox, from its
    :class:`~cooplab.runs.config.SandboxSettings`. ``local`` must be asked for by name: a docker
    run never falls back to local execution."""
    from cooplab.runs.config import SandboxSettings
    from cooplab.sandbox import SandboxConfig

    sandbox = config.sandbox or SandboxSettings()
    return sandbox.backend, SandboxConfig(timeout=float(sandbox.timeout))


def sandbox_pool(task: Task, config: RunConfig, out: Path, cache: Any = None):
    """The per-agent sandbox pool of an LLM run of a task that uses the sandbox (its dataset loaded
    read-only in every session), or None. The caller closes it. With ``cache`` (the model service's
    response cache, when on) the agents' ``run_code`` calls are kept there and a rerun's are answered
    from it (:class:`~cooplab.sandbox.replay.ReplayingSandboxPool`).

    One sandbox is kept started ahead (``warm=1``): the first one from the run's start, the next as
    soon as an agent takes it, so an agent's first ``run_code`` finds its sandbox ready instead of
    waiting for the worker's imports and the dataset (0.6-0.7 s on the local backend, more in a
    container) while the run's other work goes on. The call is still charged the seconds that start
    took. The run ends with one spare sandbox started, which the pool destroys on close."""
    if not task.uses_sandbox:
        return None
    from cooplab.sandbox.pool import AgentSandboxPool

    backend, sandbox_config = sandbox_settings(config)
    dataset = task.sandbox_dataset(config, out)
    if dataset is not None:
        sandbox_config = type(sandbox_config)(**{**sandbox_config.model_dump(), "dataset": dataset})
    from cooplab.sandbox.replay import ReplayingSandboxPool

    agents = task.sandbox_agents(config)
    if agents is None:
        pool = AgentSandboxPool(sandbox_config, backend=backend, warm=1)
    else:
        pool = AgentSandboxPool(sandbox_config, backend=backend, warm=min(WARM_SANDBOXES, agents), expected=agents)
    return ReplayingSandboxPool.wrap(pool, cache, config.seed)


#: sandboxes a run keeps started ahead when its task says how many agents use the sandbox
WARM_SANDBOXES = 1


def stop_status(exc: BaseException) -> tuple[str, str] | None:
    """How an LLM run ends cleanly: ("budget_exhausted" | "stopped", message), or None for an
    exception that is a real error and must propagate."""
    from cooplab.agents.decisions import ModelUnavailable
    from cooplab.agents.tools import ToolSetupError
    from cooplab.sandbox import SandboxError

    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, BudgetExhausted):
        return "budget_exhausted", str(exc)
    if isinstance(exc, (ModelUnavailable, SandboxError, ToolSetupError)):  # a service is down: resume once it is back
        return "stopped", str(exc)
    return None


# --- execution -----------------------------------------------------------------------------
MAX_THREAD_ID = 200  #: characters of a recorded thread id (a new run's is a 36-character UUID)


def new_thread_id() -> str:
    """A new run's own id: its checkpoints' thread id and its traces' thread and session."""
    import uuid

    return str(uuid.uuid4())


def thread_id(task: Task, config: RunConfig) -> str:
    """The thread id of a run's checkpoints: the one its config.json records (``record.thread_id``),
    else the task's name (runs made before the id was recorded checkpointed under it)."""
    record = config.record
    if "thread_id" not in record:
        return task.name
    tid = record["thread_id"]
    if not isinstance(tid, str) or not 0 < len(tid) <= MAX_THREAD_ID or not tid.isprintable() or tid != tid.strip():
        raise ConfigError(
            f"record.thread_id must be the run's id (1 to {MAX_THREAD_ID} printable characters), got {show(tid)}"
        )
    return tid


def _graph_config(task: Task, config: RunConfig) -> RunnableConfig:
    """The run's LangGraph config: its thread, and the metadata every traced run inherits (the task,
    the run's id as thread and session, how agents are named in run names: see docs/traces.md)."""
    from cooplab.graphs.tracing import run_metadata, run_tags

    tid = thread_id(task, config)
    return {
        "configurable": {"thread_id": tid},
        "metadata": run_metadata(task.name, tid, getattr(task, "agent_noun", None)),
        "tags": run_tags(task.name, tid),
    }


@contextmanager
def sqlite_saver(path: Path, task: Task | None = None) -> Iterator[SqliteSaver]:
    """The run's checkpointer, reading back only what a checkpoint of ``task`` may hold
    (:mod:`cooplab.graphs.checkpoint_serde`)."""
    conn = sqlite3.connect(str(path), check_same_thread=False)
    try:
        yield SqliteSaver(conn, serde=checkpoint_serde.serializer(task))
    finally:
        conn.close()


def _damaged(out: Path, exc: BaseException) -> runstore.RunDirError:
    if isinstance(exc, checkpoint_serde.CheckpointRefused):
        return runstore.refused_checkpoint(out, exc)
    return runstore.RunDirError(
        f"{out}/checkpoints.sqlite is damaged ({one_line(f'{type(exc).__name__}: {exc}', 250)}); "
        f"the run cannot resume: {runstore.RESTART.format(out=out)}"
    )


def _work_left(snap: Any, state: Any, out: Path) -> tuple[bool, Any]:
    """(whether there is work left, a state to size the recursion limit) of a new or resumed run."""
    if state is not None:
        return True, state
    if not snap.values or "round" not in snap.values:
        raise runstore.RunDirError(f"{out} has no checkpoint to resume; {runstore.RESTART.format(out=out)}")
    # work is left while a node is due (``next``) or a node's writes were saved but not yet folded into a
    # checkpoint (a kill between the two: ``next`` is then empty but ``tasks`` holds the finished node)
    return bool(snap.next or snap.tasks), snap.values


class _Progress:
    """The progress bar of a run (rounds; societies still running; LLM calls, tokens, cost)."""

    def __init__(self, task: Task, config: RunConfig, start: Any, quiet: bool, service: Any = None):
        self.task, self.service, self.bar = task, service, None
        if quiet:
            return
        from tqdm import tqdm

        total = max(task.total_rounds(config), int(start.get("max_round", 0) or 0))
        done = max(int(start.get("round", 1) or 1) - 1, 0)
        self.bar = tqdm(
            total=total or None,
            initial=done,
            desc=f"{task.name} {task.round_unit}s",
            unit=task.round_unit,
            leave=False,
            dynamic_ncols=True,
            disable=None,
        )

    def __call__(self, node: str, update: Any) -> None:
        if self.bar is None or node != self.task.round_node or not isinstance(update, dict):
            return
        if "round" in update:
            self.bar.n = int(update["round"]) - 1
        else:
            self.bar.n += 1
        post = self.task.progress(update)
        if self.service is not None:
            t = self.service.ledger.totals()
            post.update(
                calls=t["calls"], tokens=t["input_tokens"] + t["output_tokens"], cost=f"${t['cost_usd_float']:.4f}"
            )
        self.bar.set_postfix(post, refresh=False)
        self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def execute(
    task: Task,
    out: Path,
    config: RunConfig,
    state: dict[str, Any] | None,
    *,
    quiet: bool = False,
    start: str | None = None,
) -> RunSummary:
    """Run (``state``: the initial state) or resume (``state=None``) ``config``'s run in ``out``,
    inside the safety net (an unexpected error becomes :class:`RunFailed`, see the module docstring).
    ``start``: how the traces label this part of the run (:func:`trace_start`; default: "new" for
    a state, "resumed" without one; a fork's first part is "fork")."""

    def body() -> RunSummary:
        task.prepare_run(config, out)
        if config.agents == "llm":
            # on a worker thread's own loop where one already runs (a notebook): see graphs/aio.py
            return run_sync(lambda: _execute_llm(task, out, config, state, quiet, start))
        return _execute_rule(task, out, config, state, quiet)

    with decimal.localcontext(
        decimal_context()
    ):  # the caller's decimal context neither changes the sums nor is changed
        return _safety_net(task, out, config, body)


def _safety_net(task: Task, out: Path, config: RunConfig, body: Callable[[], RunSummary]) -> RunSummary:
    try:
        return body()
    except (RunStopped, RunFailed, runstore.RunDirError):
        raise
    except Exception as exc:  # noqa: BLE001 - the safety net
        log = runstore.save_error(out, exc)
        message = one_line(f"{type(exc).__name__}: {exc}", 350)
        unwritten = record_failure(task, out, config, message, log)
        where = f"the traceback is in {log}" if log else "the traceback could not be saved"
        summary = (
            "summary.json has status 'failed'"
            if unwritten is None
            else f"summary.json could not be written ({unwritten})"
        )
        then = (
            f"'cooplab resume {out}' continues from the last checkpoint"
            if resumable(task, out, config)
            else f"{runstore.RESTART.format(out=out)} (it failed before its first checkpoint: there is nothing to "
            "resume)"
        )
        raise RunFailed(f"the run failed ({message}); {where}; {summary}; after fixing the cause, {then}") from exc


def resumable(task: Task, out: Path, config: RunConfig) -> bool:
    """Whether ``cooplab resume`` can continue the run in ``out``: it has a checkpoint holding a
    round (a run that failed before its first checkpoint must start again instead)."""
    try:
        runstore.check_checkpoints(out)
        return "round" in last_values(task, out, config)
    except Exception:  # noqa: BLE001 - missing, damaged, empty: not resumable
        return False


def decimal_context() -> decimal.Context:
    """The decimal context every run computes its money in (the ledger's exact sums): Python's
    default, stated here so that a caller's own context (a notebook's ``getcontext().prec = 6``, a
    trap on ``Inexact``) changes no amount a run records; it is set for the run only."""
    return decimal.Context(
        prec=28,
        rounding=decimal.ROUND_HALF_EVEN,
        Emin=-999999,
        Emax=999999,
        capitals=1,
        clamp=0,
        flags=[],
        traps=[decimal.InvalidOperation, decimal.DivisionByZero, decimal.Overflow],
    )


def record_failure(
    task: Task, out: Path, config: RunConfig, message: str, log: Path | None, state: dict[str, Any] | None = None
) -> str | None:
    """Write summary.json with status "failed": the full one from ``state`` (default: the last
    checkpoint's), else (the state is unusable too) the essentials. None once written; else why it
    could not be (a full disk)."""
    try:
        finish(
            task,
            out,
            config,
            last_values(task, out, config) if state is None else state,
            0.0,
            status="failed",
            message=message,
        )
        return None
    except Exception:  # noqa: BLE001 - even the state is unusable: keep the essentials
        pass
    try:
        runfiles.write_summary(
            out,
            runfiles.new_summary(
                task.Results,
                out,
                task=task.name,
                agents=config.agents,
                status="failed",
                message=message,
                error_log=str(log) if log else None,
                seed=config.seed,
            ),
        )
        return None
    except Exception as exc:  # noqa: BLE001
        return one_line(getattr(exc, "strerror", None) or f"{type(exc).__name__}: {exc}", 120)


def last_values(task: Task, out: Path, config: RunConfig) -> dict[str, Any]:
    """The state of a run's last checkpoint (append-only logs rebuilt from their deltas)."""
    with sqlite_saver(out / "checkpoints.sqlite", task) as saver:
        snap = task.build(config, checkpointer=saver).get_state(
            {"configurable": {"thread_id": thread_id(task, config)}}
        )
    if not snap.values:
        raise RuntimeError("no checkpoint")
    return dict(snap.values)


def _execute_rule(task: Task, out: Path, config: RunConfig, state: dict[str, Any] | None, quiet: bool) -> RunSummary:
    t0 = time.perf_counter()
    with sqlite_saver(out / "checkpoints.sqlite", task) as saver:
        graph = task.build(config, checkpointer=saver)
        cfg = _graph_config(task, config)
        snap = None
        if state is None:
            try:
                snap = graph.get_state(cfg)
            except Exception as exc:  # noqa: BLE001 - a checkpoint that does not deserialize
                raise _damaged(out, exc) from None
        more, sized = _work_left(snap, state, out)
        cfg["recursion_limit"] = task.recursion_limit(sized, len(graph.nodes) - 1)
        progress = _Progress(task, config, sized, quiet)
        try:
            if not more:
                final = sized  # nothing left: the last checkpoint's values
            elif progress.bar is None:
                final = graph.invoke(state, cfg, durability="async")
            else:
                final = None
                # with a list of modes LangGraph streams (mode, chunk) pairs; its stubs say only dict | Any
                chunks = cast(
                    Iterator[tuple[str, Any]],
                    graph.stream(state, cfg, stream_mode=["updates", "values"], durability="async"),
                )
                for mode, data in chunks:
                    if mode == "values":
                        final = data
                    else:
                        for node, update in data.items():
                            progress(node, update)
                if final is None:  # LangGraph streams the state at least once (its input's checkpoint)
                    raise RuntimeError("the run's graph streamed no state")
        finally:
            progress.close()
    return finish(task, out, config, final, time.perf_counter() - t0)


async def _execute_llm(
    task: Task, out: Path, config: RunConfig, state: dict[str, Any] | None, quiet: bool, start: str | None = None
) -> RunSummary:
    import aiosqlite
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    t0 = time.perf_counter()
    status, message = "completed", None
    async with aiosqlite.connect(str(out / "checkpoints.sqlite")) as conn:
        saver = AsyncSqliteSaver(conn, serde=checkpoint_serde.serializer(task))
        graph = task.build(config, checkpointer=saver)
        cfg = _graph_config(task, config)
        snap = None
        if state is None:
            try:
                snap = await graph.aget_state(cfg)
            except Exception as exc:  # noqa: BLE001
                raise _damaged(out, exc) from None
        more, sized = _work_left(snap, state, out)
        cfg["recursion_limit"] = task.recursion_limit(sized, len(graph.nodes) - 1)
        if state is not None:  # a new run: a journal left by an earlier run in this directory (--force) is not its own
            (out / JOURNAL_FILE).unlink(missing_ok=True)
        assert config.llm is not None, "an LLM run's resolved configuration has its LLM settings"
        service = build_service(
            config.llm,
            seed=config.seed,
            sandbox_rate=config.sandbox.rate if config.sandbox is not None else 0.0,
            entries=(snap.values or {}).get("ledger") if snap is not None else None,
            journal=out / JOURNAL_FILE,
        )
        service.replay_only_through = prefix_rounds(
            config
        )  # a fork's rounds 1..K never pay for a call (cooplab/runs/fork.py)
        progress = _Progress(task, config, sized, quiet, service)
        pool = None
        try:
            if not more:
                final = sized  # nothing left: the last checkpoint's values
            else:
                pool = sandbox_pool(task, config, out, cache=service.cache)
                context = CoopContext(llm=service, sandbox=pool, run_dir=str(out))

                def step(node: str, update: Any) -> None:
                    # the interrupted node is done: a call it did not make again is not coming
                    service.ledger.forget_granted()
                    progress(node, update)

                final = await _stream(
                    graph, state, {**cfg, **trace_start(config, state, start, cfg)}, context, step, out
                )
        except BaseException as exc:  # noqa: BLE001
            stop = stop_status(exc)
            if stop is None:
                raise
            status, message = stop
            final = (await graph.aget_state(cfg)).values
        finally:
            progress.close()
            service.close()
            if pool is not None:
                pool.close()
    summary = finish(
        task,
        out,
        config,
        final,
        time.perf_counter() - t0,
        status=status,
        message=message,
        service=service,
        sandbox=pool,
    )
    if status == "stopped":
        raise RunStopped(f"{message}; the run stopped at its last checkpoint: continue with 'cooplab resume {out}'")
    return summary


#: how the traces label the part of a run one process ran (metadata ``started_as``, and a tag but for "new"):
#: "new" (from its first step), "resumed" (from a checkpoint: its trace follows the interrupted one's in
#: traces.jsonl), "fork" (a fork's first part, from its parent's checkpoint at the end of round K)
TRACE_STARTS = ("new", "resumed", "fork")


def trace_start(
    config: RunConfig, state: dict[str, Any] | None, start: str | None, cfg: Mapping[str, Any]
) -> dict[str, Any]:
    """The tags and metadata of the part of a run this process runs (:data:`TRACE_STARTS`): a
    fork's parts also carry its parent's run id and round (``fork_of``, ``fork_at_round``), so a
    trace viewer that groups by run can find the rounds 1..K the fork did not run."""
    from cooplab.runs.fork import trace_labels

    kind = start or ("new" if state is not None else "resumed")
    if kind not in TRACE_STARTS:
        raise ValueError(f"start must be one of {', '.join(TRACE_STARTS)}, got {kind!r}")
    tags = list(cfg.get("tags") or [])
    return {
        "tags": tags + [kind] if kind != "new" else tags,
        "metadata": {**(cfg.get("metadata") or {}), "started_as": kind, **trace_labels(config)},
    }


async def _stream(graph, state, cfg, context, progress: Callable[[str, Any], None], out: Path) -> dict[str, Any]:
    from cooplab.graphs.tracing import tracing_callbacks

    cfg = {**cfg, "callbacks": tracing_callbacks(out)}
    final = None
    async for mode, data in graph.astream(
        state, cfg, context=context, stream_mode=["updates", "values"], durability="sync"
    ):
        if mode == "values":
            final = data
        else:
            for node, update in data.items():
                progress(node, update)
    if final is None:  # LangGraph streams the state at least once (its input's checkpoint)
        raise RuntimeError("the run's graph streamed no state")
    return final


# --- results -------------------------------------------------------------------------------
def _restored_totals(out: Path, entries: Any) -> dict[str, Any] | None:
    """The ledger totals of a run that failed: its last checkpoint's audit trail plus the charges
    only its journal holds (None when they cannot be read back)."""
    from cooplab.graphs.ledger import Ledger, LedgerJournal

    try:
        entries = list(entries or [])
        ledger = Ledger()
        ledger.restore(entries, LedgerJournal(out / JOURNAL_FILE).unrecorded(entries))
        return ledger.totals()
    except Exception:  # noqa: BLE001 - a damaged trail: the summary says nothing rather than fail
        return None


def finish(
    task: Task,
    out: Path,
    config: RunConfig,
    final: dict[str, Any],
    seconds: float,
    *,
    status: str = "completed",
    message: str | None = None,
    service: Any = None,
    sandbox: Any = None,
) -> RunSummary:
    """Write the task's outputs, the LLM bookkeeping (decisions, ledger) and summary.json (the
    task's results beside the runner's fields, validated by :func:`cooplab.graphs.runfiles.new_summary`);
    then the run's figure (a figure error is recorded in the summary, never lost work)."""
    csv = config.csv
    run = RunInfo(
        out=out,
        status=status,
        message=message,
        seconds=seconds,
        csv=csv,
        llm=config.agents == "llm",
        cache=service.cache.path if service is not None else None,
    )
    final = dict(final)
    if service is not None:
        service.ledger.settle()  # calls paid before a resume that no replay adopted: paid twice, both kept
    common: dict[str, Any] = {
        "task": task.name,
        "agents": config.agents,
        "status": status,
        "seed": config.seed,
        "wall_seconds": round(seconds, 3),
    }
    results = task.outputs(final, config, run)
    if message:
        common["message"] = message
    if service is not None:
        common["ledger"] = service.ledger.totals()
        common["llm"] = {
            "cache_hits": service.cache.hits,
            "cache_misses": service.cache.misses,
            "prompt_reuse": service.prompt_reuse,
        }
        if hasattr(sandbox, "stats"):  # the run_code calls answered from the cache and run in a sandbox
            common["llm"].update(sandbox.stats())
        entries = [e.as_dict() for e in service.ledger.entries]
        if entries:  # the money as float and exact text, the agent as agent_id (graphs/tables.py)
            runstore.write_table(money_table("ledger", runstore.frame(entries)), out, "ledger", csv=csv)
    elif run.llm:  # a failed run: what it spent, so that a sweep's budget counts it
        common["ledger"] = _restored_totals(out, final.get("ledger"))
    decisions = final.get("decisions") or []
    if decisions:
        df = runstore.frame(decisions)  # its text cleaned of lone surrogates (pandas refuses them)
        if "parsed" in df:
            df["parsed"] = df["parsed"].map(lambda v: None if v is None else json.dumps(v))
        runstore.write_table(money_table("decisions", df), out, "decisions", csv=csv)
        common["decisions"] = {
            "count": len(df),
            "fallback_used": int(cast(int, df["fallback_used"].sum())) if "fallback_used" in df else 0,
            "mean_attempts": float(cast(float, df["attempts"].mean())) if "attempts" in df else 1.0,
        }  # pandas' stubs: a Series
    summary = runfiles.new_summary(task.Results, out, results=results, **common)
    runfiles.write_summary(out, summary)
    try:
        task.figure(summary, run)
    except Exception as exc:  # noqa: BLE001 - a figure must never lose the computed run
        summary = summary.model_copy(
            update={"figure_error": one_line(f"{type(exc).__name__}: {exc}", runfiles.MAX_TEXT)}
        )
        runfiles.write_summary(out, summary)
    return summary
