"""What every sweep shares: the error type, run-directory names, the cells as plain data, and
running them on an executor (finished cells skipped, interrupted ones resumed, a failure kept
while the others go on), then one table of every cell.

A sweep (CPR, science, or any registered task, docs/scale.md) turns its config into **jobs**:
plain JSON-able dicts ``{"dir", "task", "config", "done", "labels", "cwd", "gc"}``. A job carries
everything a process needs to run its cell: :func:`execute_job` skips a cell whose
``summary.json`` has a finished status, resumes one that has checkpoints, and otherwise starts
it through the one runner (``cooplab.runs.runner``). A job with ``fn`` (``"module:function"``) is
not a run directory: the function is called with the job, does its own skipping and
checkpointing, and says whether it "ran", "resumed" or "skipped" (``cooplab calibrate cpr``'s
batches of samples). Because a job is data, the same job runs in a
thread of this process (the ``local`` executor, the default, no extra packages) or as a task on
a Ray cluster (``--executor ray``, the ``ray`` extra): a worker that dies is retried by Ray, and
the retry resumes the cell from its last checkpoint, so finished work is neither redone nor
paid twice (LLM calls after the checkpoint replay from the response cache).

Every node must see the sweep directory (and any file a config names, such as a scripted
model) at the same path: one host, or a shared filesystem. Relative paths are resolved against
the directory the sweep was started from (``cwd``). A Ray worker also takes the garbage
collector's thresholds of the process that made the jobs (``gc``): the ``cooplab`` console
script's own (``cooplab._entry``), or whatever a notebook that calls :func:`cooplab.sweep` has.
"""

from __future__ import annotations

import gc
import math
import os
import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from cooplab.limits import gc_thresholds

if TYPE_CHECKING:
    from cooplab.graphs import runfiles

EXECUTORS = ("local", "ray")
#: a cell's status in the sweep's table when the sweep-wide budget could not cover it
NOT_STARTED = "not started (sweep_budget)"
#: how many times Ray runs a cell again after its worker process died (the retry resumes it)
RAY_RETRIES = 3


class SweepError(ValueError):
    """A sweep config that cannot be used; the message is one line."""


def job(
    dir: Path | str,
    task: str,
    config: dict[str, Any],
    *,
    labels: dict[str, Any] | None = None,
    done: tuple[str, ...] = ("completed",),
    fn: str | None = None,
) -> dict[str, Any]:
    """One cell of a sweep as plain data (see the module's docstring). ``fn``: a function
    ``module:attribute`` that runs the job instead of the runner."""
    j = {
        "dir": str(Path(dir).absolute()),
        "task": task,
        "config": config,
        "done": list(done),
        "labels": dict(labels or {}),
        "cwd": os.getcwd(),
        "gc": list(gc.get_threshold()),
    }
    if fn is not None:
        j["fn"] = fn
    return j


def _collector_of(value: Any) -> None:
    """Set this process's collector thresholds to ``value`` (a job's ``gc``) when they are thresholds
    as ``COOPLAB_GC`` takes them (:func:`~cooplab.limits.gc_thresholds`); anything else leaves them as they are."""
    ints = isinstance(value, list) and all(type(x) is int for x in value)  # a job holds numbers, never text
    thresholds = gc_thresholds(value) if ints else None
    if thresholds is not None:
        gc.set_threshold(*thresholds)


def cell_status(d: Path) -> runfiles.RunStatus | None:
    """The status in a cell's summary.json, or None when it has none (not run, or interrupted); a
    damaged one is a one-line RunDirError (the cell is reported failed with it, never re-run blind)."""
    from cooplab.runs import store as runstore

    if not (d / "summary.json").exists():
        return None
    return runstore.read_summary(d).status


def resumable(d: Path) -> bool:
    """Whether a cell's folder holds a started run that resumes from its checkpoints (:func:`execute_job`)."""
    return (d / "checkpoints.sqlite").exists() and (d / "config.json").exists()


def next_step(j: dict[str, Any]) -> str:
    """What :func:`execute_job` will do with ``j`` as its folder is now: "skipped" (finished),
    "resumed" (checkpoints) or "ran"; a damaged summary counts as "ran" here (the job fails with
    its one line)."""
    from cooplab.runs import store as runstore

    d = Path(j["dir"])
    try:
        if cell_status(d) in j["done"]:
            return "skipped"
    except runstore.RunDirError:
        return "ran"
    return "resumed" if resumable(d) else "ran"


def execute_job(
    j: dict[str, Any], *, warn: Callable[[str], None] | None = None, worker: bool = True, quiet: bool = True
) -> dict[str, Any]:
    """Run one cell wherever this is called (a thread here or a Ray worker): "skipped" when it is
    finished, "resumed" when it has checkpoints, else "ran". Raises what the run raises. ``warn``
    gets a resumed run's notices; ``worker``: False when the caller's own thread runs it (the
    current directory is then never changed); ``quiet``: False shows the run's own progress bar
    (cells run in turn, one at a time: a game profile's games)."""
    from cooplab.runs import registry, runner
    from cooplab.runs import store as runstore

    if worker and j.get("cwd") and os.getcwd() != j["cwd"] and threading.current_thread() is threading.main_thread():
        os.chdir(j["cwd"])  # a Ray worker: relative paths in the config mean the sweep's directory
    if worker and threading.current_thread() is threading.main_thread():
        _collector_of(j.get("gc"))  # a Ray worker: the collector of the process that made the job
    d = Path(j["dir"])
    where = {"host": socket.gethostname(), "pid": os.getpid(), "node": _ray_node(), "gc": list(gc.get_threshold())}
    if j.get("fn"):
        import importlib

        module, _, attr = j["fn"].partition(":")
        kind = getattr(importlib.import_module(module), attr)(j)
        if kind not in ("ran", "resumed", "skipped"):
            raise ValueError(f"job function {j['fn']} returned {kind!r}, not ran, resumed or skipped")
        return {"kind": kind, **where}
    with runstore.locked(runstore.ensure_writable(d)):  # a cell another process is writing is not touched
        if cell_status(d) in j["done"]:
            return {"kind": "skipped", **where}
        if resumable(d):
            runner.resume(d, quiet=quiet, warn=warn)
            return {"kind": "resumed", **where}
        runstore.prepare_out(d, force=True)
        runner.start(registry.get(j["task"]), d, j["config"], quiet=quiet)
        return {"kind": "ran", **where}


def _ray_node() -> str | None:
    """The Ray node this process belongs to, when it is a Ray worker."""
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return None
    try:
        return ray.get_runtime_context().get_node_id()
    except Exception:  # not inside a task
        return None


def _record(
    res: dict[str, Any],
    j: dict[str, Any],
    outcome: dict[str, Any] | BaseException,
    noun: str,
    log: Callable[[str], None],
    total: int,
) -> None:
    name = Path(j["dir"]).name
    if isinstance(outcome, BaseException):
        msg = _error_line(outcome)
        res["failed"].append({noun: name, "error": msg})
        log(f"{noun} {name}: FAILED ({msg})")
    else:
        res[outcome["kind"]].append(name)
        res.setdefault("placement", {})[name] = {k: outcome.get(k) for k in ("host", "pid", "node", "gc")}
        log(
            f"{noun} {name}: {outcome['kind']} "
            f"({sum(len(res[k]) for k in ('ran', 'resumed', 'skipped', 'failed'))}/{total})"
        )


def _error_line(exc: BaseException) -> str:
    """An exception (a Ray task error unwrapped to its cause) as ``Type: message`` on one line."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException):
        exc = cause
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text[:500]}"


def _progress(total: int, noun: str, quiet: bool):
    from tqdm import tqdm

    return tqdm(
        total=total,
        desc=f"{noun}s",
        unit=noun,
        file=sys.stderr,
        disable=True if quiet or total == 0 else None,
        dynamic_ncols=True,
    )  # None: only on a terminal


def run_jobs(
    jobs: list[dict[str, Any]],
    *,
    parallel: int,
    noun: str,
    executor: str = "local",
    address: str | None = None,
    log: Callable[[str], None] = lambda s: None,
    quiet: bool = True,
    budget: "SweepBudget | None" = None,
    in_turn: bool = False,
    warn: Callable[[str], None] | None = None,
    announce: Callable[[dict[str, Any], str], None] | None = None,
) -> dict[str, Any]:
    """Run every job on ``executor`` (``parallel`` cells at a time locally; on Ray, as many as the
    cluster has CPUs). A progress bar counts cells unless ``quiet``. With a ``budget`` (a cap on
    what the cells spend together) a cell starts only when its whole cap fits in what is left
    (:class:`SweepBudget`); the others are "not_started". Returns the names of the cells that ran,
    resumed, were skipped, were not started, and those that failed with their error.

    ``in_turn`` (a game profile's order; local executor): the jobs run one after another in this
    thread (Ctrl-C stops the running one at once), and the first that does not complete (an
    error, or a summary status other than "completed") ends the sweep: the jobs after it are
    not started, except finished ones, which are still read back (skipped). ``warn`` gets a
    resumed run's notices; ``announce(job, step)`` is told before each job what it does
    (:func:`next_step`: "skipped", "resumed", "ran") and, after the others, of each job not
    started ("not_started")."""
    if executor not in EXECUTORS:
        raise SweepError(f"--executor must be one of {', '.join(EXECUTORS)}, got {executor!r}")
    if in_turn and executor != "local":
        raise SweepError("cells that run in turn run on the local executor")
    res: dict[str, Any] = {
        "ran": [],
        "resumed": [],
        "skipped": [],
        "failed": [],
        "not_started": [],
        "executor": executor,
    }
    bar = _progress(len(jobs), noun, quiet)
    say = (lambda s: bar.write(s, file=sys.stderr)) if not quiet and len(jobs) else log

    def done(j: dict[str, Any], outcome: Any) -> None:
        if budget is not None:
            budget.settle(j)
        _record(res, j, outcome, noun, say, len(jobs))
        if in_turn and not res.get("halted") and not _completed(j, outcome):
            res["halted"] = Path(j["dir"]).name
        bar.update(1)

    t0 = time.perf_counter()
    try:
        if in_turn:
            left = _run_in_turn(jobs, done, budget=budget, warn=warn, announce=announce, bar=bar)
        elif executor == "ray":
            res["ray"], left = _run_ray(jobs, done, address=address, parallel=parallel, budget=budget)
        else:
            left = _run_local(jobs, done, parallel=parallel, budget=budget, warn=warn, announce=announce)
        for j in left:  # a budget, or a cell before them that did not complete, left them unstarted
            res["not_started"].append(Path(j["dir"]).name)
            why = (
                budget.shortfall(j)
                if budget is not None and not res.get("halted")
                else "a cell before it did not complete"
            )
            say(f"{noun} {Path(j['dir']).name}: not started ({why})")
            if announce is not None:
                announce(j, "not_started")
    finally:
        bar.close()
    if budget is not None:
        res["sweep_budget"] = budget.report()
    res["seconds"] = round(time.perf_counter() - t0, 3)
    return res


def _schedule(
    jobs: list[dict[str, Any]],
    submit: Callable[[dict[str, Any]], Any],
    wait_one: Callable[[list[Any]], tuple[Any, Any]],
    done: Callable[[dict[str, Any], Any], None],
    *,
    slots: int,
    budget: "SweepBudget | None",
) -> list[dict[str, Any]]:
    """Start jobs in order while fewer than ``slots`` run and (with a ``budget``) the next one's cap
    fits; when none fits, wait for a running one to end and try again. ``submit(job)`` -> a handle;
    ``wait_one(handles)`` -> (a finished handle, its outcome or exception). Returns the jobs never
    started (nothing running and none fits what the budget has left)."""
    pending, running = list(jobs), {}
    while pending or running:
        while pending and len(running) < slots:
            nxt = next((j for j in pending if budget is None or budget.admit(j)), None)
            if nxt is None:
                break
            pending.remove(nxt)
            running[submit(nxt)] = nxt
        if not running:
            break
        handle, outcome = wait_one(list(running))
        done(running.pop(handle), outcome)
    return pending


def _completed(j: dict[str, Any], outcome: Any) -> bool:
    """Whether a job that ended left a completed run (its summary's status)."""
    from cooplab.runs import store as runstore

    if isinstance(outcome, BaseException):
        return False
    try:
        return cell_status(Path(j["dir"])) == "completed"
    except runstore.RunDirError:
        return False


def _run_in_turn(
    jobs: list[dict[str, Any]],
    done: Callable[[dict[str, Any], Any], None],
    *,
    budget: "SweepBudget | None",
    warn: Callable[[str], None] | None,
    announce: Callable[[dict[str, Any], str], None] | None,
    bar: Any = None,
) -> list[dict[str, Any]]:
    """The jobs one after another in this thread (see :func:`run_jobs`); returns those not started.
    With the sweep's progress ``bar`` shown, it names the running cell and the cell's run shows its
    own progress bar under it (its rounds, calls, tokens, cost), as a single run does."""
    shown = bar is not None and not bar.disable
    left: list[dict[str, Any]] = []
    halted = False
    for j in jobs:
        step = next_step(j)
        if (halted and step != "skipped") or (budget is not None and not budget.admit(j)):
            left.append(j)
            continue
        if announce is not None:
            announce(j, step)
        if shown and bar is not None:
            bar.set_postfix_str(Path(j["dir"]).name)
        try:
            outcome: Any = execute_job(j, warn=warn, worker=False, quiet=not shown)
        except Exception as exc:  # kept, as in any sweep; the jobs after it are not started
            outcome = exc
        done(j, outcome)
        halted = halted or not _completed(j, outcome)  # a run its budget stopped ends the turn too
    return left


def _run_local(
    jobs: list[dict[str, Any]],
    done: Callable[[dict[str, Any], Any], None],
    *,
    parallel: int,
    budget: "SweepBudget | None" = None,
    warn: Callable[[str], None] | None = None,
    announce: Callable[[dict[str, Any], str], None] | None = None,
) -> list[dict[str, Any]]:
    from concurrent.futures import FIRST_COMPLETED, wait

    def wait_one(futures: list[Any]) -> tuple[Any, Any]:
        fut = next(iter(wait(futures, return_when=FIRST_COMPLETED).done))
        try:
            return fut, fut.result()
        except Exception as exc:  # keep the other cells going; report at the end
            return fut, exc

    def submit(j: dict[str, Any]) -> Any:
        if announce is not None:
            announce(j, next_step(j))
        return pool.submit(execute_job, j, warn=warn)

    with ThreadPoolExecutor(max_workers=parallel) as pool:
        return _schedule(jobs, submit, wait_one, done, slots=parallel, budget=budget)


def _ray_address(address: str | None) -> str | None:
    if address is None or address == "auto":
        return address
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise SweepError(
            "--address must be auto or HOST:PORT (the head's GCS address, 'ray start --head' prints it), got "
            f"{address!r}"
        )
    try:  # Ray itself would retry a dead address for minutes
        socket.create_connection((host.strip("[]"), int(port)), timeout=10).close()
    except OSError as exc:
        raise SweepError(
            f"cannot reach a Ray cluster at {address}: {exc.strerror or exc}; start one with 'ray start --head' "
            f"or leave out --address for a local instance"
        ) from None
    return address


def _run_ray(
    jobs: list[dict[str, Any]],
    done: Callable[[dict[str, Any], Any], None],
    *,
    address: str | None,
    parallel: int,
    budget: "SweepBudget | None" = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Submit the jobs as Ray tasks (one CPU each; retried when its worker dies) and collect them as
    they finish: all at once, or with a ``budget`` as many as the cluster has CPUs (a cell's cap is
    held only while it runs). Without ``address`` a private local Ray instance with ``parallel``
    CPUs is started and shut down again. Returns the cluster's description and the jobs never
    started."""
    from cooplab.extras import require

    require("ray", "the Ray executor (--executor ray)")
    import ray

    address = _ray_address(address)
    started = not ray.is_initialized()
    if started:
        kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
        if address is None:
            kw["num_cpus"] = parallel
        try:
            ray.init(
                address=address or "local", **kw
            )  # "local": a new instance, never a cluster that happens to run here
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise SweepError(f"cannot reach a Ray cluster at {address}: {' '.join(str(exc).split())[:300]}") from None
    try:
        info = {
            "address": address or "local",
            "nodes": len([n for n in ray.nodes() if n.get("Alive")]),
            "cpus": int(ray.cluster_resources().get("CPU", 0)),
        }
        remote = ray.remote(num_cpus=1, max_retries=RAY_RETRIES, retry_exceptions=False)(execute_job)

        def wait_one(refs: list[Any]) -> tuple[Any, Any]:
            ready, _ = ray.wait(refs, num_returns=1)
            try:
                return ready[0], ray.get(ready[0])
            except Exception as exc:  # a cell's error, or a worker that died more often than RAY_RETRIES
                return ready[0], exc

        slots = len(jobs) if budget is None else max(1, info["cpus"])
        return info, _schedule(jobs, remote.remote, wait_one, done, slots=max(slots, 1), budget=budget)
    finally:
        if started:
            ray.shutdown()


# --- a budget for the whole sweep ----------------------------------------------------------
class SweepBudget:
    """A cap (USD) on what a sweep's cells spend together, beside each cell's own budget.

    ``in_turn`` (cells that run one after another, as a game profile's games): each new cell's LLM
    budget is what the cells before it left (set in its config when it starts; none left: not
    started), and a started cell resumes with the budget it was given.

    Every job carries ``cap``: the most its run may spend (:meth:`~cooplab.graphs.task.Task.cost_cap`:
    its budget, plus a judge's). A cell counts against the sweep with what it has spent (its
    summary.json, read through :meth:`~cooplab.graphs.task.Task.cost_spent`) while it is not
    running, and with its whole cap while it runs (its own ledger resumes its earlier spending and
    stops it at the cap) or when what it spent is unknown (interrupted without a summary). A cell
    starts (:meth:`admit`) only when its cap fits beside what the others count; a finished cell
    (status among the job's ``done``) is skipped and needs nothing. So the cells never spend more
    than the cap together, whatever the executor, the order or the number of reruns, and each cell
    that runs keeps its whole budget (the same experiment as without the sweep's cap). A cell that
    does not fit is not started; it starts on a later run of the sweep once the cap allows it."""

    def __init__(self, usd: float, jobs: list[dict[str, Any]], *, in_turn: bool = False):
        self.usd = Decimal(str(usd))
        self.in_turn = in_turn
        self._cap = {j["dir"]: Decimal(str(self._cap_of(j))) for j in jobs}
        self._counted = {j["dir"]: self._spent(j) for j in jobs}
        self._lock = threading.Lock()

    def _cap_of(self, j: dict[str, Any]) -> Any:
        """A job's cap: its ``cap``; in turn, a started cell's is the budget it was given (its config.json)."""
        if self.in_turn and resumable(Path(j["dir"])):
            from cooplab.runs import store as runstore

            try:
                llm = runstore.read_json(Path(j["dir"]) / "config.json").get("llm")
                if isinstance(llm, dict) and isinstance(llm.get("budget"), (int, float)):
                    return llm["budget"]
            except (OSError, ValueError, AttributeError):
                pass
        return j["cap"]

    def _spent(self, j: dict[str, Any]) -> Decimal:
        """What a cell has spent by its summary.json (0 for a cell never started; its cap when unknown)."""
        from cooplab.runs import registry
        from cooplab.runs import store as runstore

        d = Path(j["dir"])
        if not (d / "summary.json").exists():
            return self._cap[j["dir"]] if (d / "config.json").exists() else Decimal(0)
        try:
            spent = registry.get(j["task"]).cost_spent(runstore.read_summary(d))
        except (runstore.RunDirError, registry.UnknownTask):
            spent = None  # unknown: counted with its whole cap
        return self._cap[j["dir"]] if spent is None else Decimal(str(spent))

    def _others(self, j: dict[str, Any]) -> Decimal:
        return sum((v for k, v in self._counted.items() if k != j["dir"]), Decimal(0))

    def admit(self, j: dict[str, Any]) -> bool:
        """Whether ``j`` may start now; if so its cap is held until :meth:`settle`."""
        from cooplab.runs import store as runstore

        with self._lock:
            try:
                done = cell_status(Path(j["dir"])) in j["done"]
            except runstore.RunDirError:  # a damaged summary: the cell runs, and fails with its one line
                done = False
            if done:
                return True  # skipped: spends nothing
            if self.in_turn and resumable(Path(j["dir"])):
                self._counted[j["dir"]] = self._cap[j["dir"]]
                return True  # started with what was left then: it resumes within that
            if self.in_turn:  # a new cell gets what the others left as its budget
                left = self.usd - self._others(j)
                if left <= 0:
                    return False
                self._cap[j["dir"]] = left
                if isinstance(j["config"].get("llm"), dict):
                    j["config"]["llm"]["budget"] = float(left)
                self._counted[j["dir"]] = left
                return True
            if self._others(j) + self._cap[j["dir"]] > self.usd:
                return False
            self._counted[j["dir"]] = self._cap[j["dir"]]
            return True

    def settle(self, j: dict[str, Any]) -> None:
        """A cell has ended: it counts with what it spent from now on."""
        with self._lock:
            self._counted[j["dir"]] = self._spent(j)

    def shortfall(self, j: dict[str, Any]) -> str:
        """Why ``j`` was not started, as a phrase."""
        with self._lock:
            left = max(self.usd - self._others(j), Decimal(0))
        return f"sweep_budget: ${left:.6f} left of ${self.usd}, the cell's budget is ${self._cap[j['dir']]}"

    def report(self) -> dict[str, Any]:
        """The cap and what the cells count against it now (their spending, or caps where unknown)."""
        with self._lock:
            counted = sum(self._counted.values(), Decimal(0))
        return {
            "usd": float(self.usd),
            "spent_usd": float(counted),
            "left_usd": float(max(self.usd - counted, Decimal(0))),
        }


# --- the folder's manifest ---------------------------------------------------------------------
def write_manifest(
    folder: Path,
    kind: runfiles.ManifestKind,
    task: str | None,
    jobs: list[dict[str, Any]],
    res: dict[str, Any] | None = None,
    *,
    outputs: dict[str, str] | None = None,
    counts: dict[str, int] | None = None,
) -> Any:
    """Write ``folder/manifest.json`` (:class:`cooplab.graphs.runfiles.Manifest`): one cell per job
    under ``folder`` (its name, run directory, labels, and the status its summary.json holds now;
    a cell whose summary is damaged or that failed has its one line), the folder's own files that
    exist (``outputs``: name -> path inside it) and ``counts``. Returns the manifest written."""
    from cooplab.graphs import runfiles
    from cooplab.limits import one_line
    from cooplab.runs import store as runstore

    folder = Path(folder)
    failed = {}
    for f in (res or {}).get("failed", []):
        name = next((v for k, v in f.items() if k != "error"), None)
        failed[name] = f.get("error")
    cells = []
    for j in jobs:
        d = Path(j["dir"])
        try:
            rel = d.absolute().relative_to(folder.absolute()).as_posix()
        except ValueError:
            continue  # not under this folder
        error = failed.get(d.name)
        try:
            status = cell_status(d)
        except runstore.RunDirError as exc:
            status, error = None, str(exc)
        labels = {str(k): v for k, v in runstore.jsonable(j.get("labels") or {}).items()}
        cells.append(
            runfiles.ManifestCell(
                name=d.name,
                dir=rel,
                labels=labels,
                status=status,
                **({"error": one_line(error, runfiles.MAX_TEXT)} if error else {}),
            )
        )
    there = {k: v for k, v in (outputs or {}).items() if (folder / v).exists()}
    m = runfiles.Manifest(kind=kind, task=task, cells=cells, outputs=there, counts=dict(counts or {}))
    return runfiles.write_manifest(folder, m)


# --- one table of every cell ---------------------------------------------------------------
#: summary fields that say how, not what (left out of the table)
_SKIP = ("values", "rates_per_1k", "by_kind", "wall_seconds", "seconds", "cost_usd", "version")


def flatten_summary(obj: Any, prefix: str = "", depth: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(obj, dict) and depth < 2:
        for k, v in obj.items():
            if k in _SKIP:
                continue
            out.update(
                flatten_summary(v, f"{prefix}{k}.", depth + 1)
                if isinstance(v, dict)
                else flatten_summary(v, f"{prefix}{k}", depth + 1)
            )
    elif isinstance(obj, bool):
        out[prefix.rstrip(".")] = obj
    elif isinstance(obj, int | float | str) or obj is None:
        if isinstance(obj, float) and not math.isfinite(obj):
            obj = None
        out[prefix.rstrip(".")] = obj
    return out


def table(jobs: list[dict[str, Any]], res: dict[str, Any], noun: str) -> list[dict[str, Any]]:
    """One row per cell: its labels (the grid values), status, and the scalar results of its
    summary.json (nested ones as ``ledger.calls``, ``efficiency.mean``); failed cells have
    their error."""
    from cooplab.runs import store as runstore

    errors = {f[noun]: f["error"] for f in res.get("failed", [])}
    unfunded = set(res.get("not_started") or [])
    rows = []
    for j in jobs:
        d = Path(j["dir"])
        row: dict[str, Any] = {noun: d.name, **j["labels"]}
        summary: dict[str, Any] = {}
        unreadable = None
        if (d / "summary.json").exists():
            try:
                summary = runstore.read_summary(d).as_json()
            except runstore.RunDirError as exc:
                unreadable = str(exc)
        flat = {k: v for k, v in flatten_summary(summary).items() if k not in row}
        row["status"] = flat.pop("status", None) or (
            "unreadable" if unreadable else "failed" if d.name in errors else "not run"
        )
        if d.name in unfunded:  # not run this time: its budget did not fit in what the sweep had left
            row["status"] = NOT_STARTED
        row.update(flat)
        if d.name in errors or unreadable:
            row["error"] = errors.get(d.name) or unreadable
        rows.append(row)
    return rows


def write_table(rows: list[dict[str, Any]], out: Path) -> Path:
    """``OUT/table.csv``: every column of every row."""
    import pandas as pd

    out.mkdir(parents=True, exist_ok=True)
    df = pd.DataFrame(rows)
    path = out / "table.csv"
    df.to_csv(path, index=False)
    return path


def format_table(rows: list[dict[str, Any]], columns: list[str], width: int = 14) -> list[str]:
    """A few columns of the table as aligned text lines (what ``cooplab sweep`` prints). Headers
    are printed in full (``survival_time.mean``, never a cut name); a value wider than its column
    (at most ``width`` characters, 48 for the first column, or the header's width) ends in ``…``."""
    cols = [c for c in columns if any(c in r for r in rows)]

    def cell(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.4g}"
        return "" if v is None else str(v)

    def fit(text: str, w: int) -> str:
        return f"{text:<{w}}" if len(text) <= w else text[: w - 1] + "\u2026"

    w = {
        c: max(len(c), min(max((len(cell(r.get(c))) for r in rows), default=0), 48 if i == 0 else width))
        for i, c in enumerate(cols)
    }
    lines = ["  ".join(f"{c:<{w[c]}}" for c in cols)]
    for r in rows:
        lines.append("  ".join(fit(cell(r.get(c)), w[c]) for c in cols))
    return [line.rstrip() for line in lines]
