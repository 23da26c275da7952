"""The Python API: run, resume and sweep any registered task, and read a run back as tables.

    import cooplab
    run = cooplab.run(task="cpr", agents="llm", model="scripted:examples/scripted/cautious.json",
                      n_agents=3, rounds=3, seed=4, out="runs/cpr-llm")
    run.rounds          # pandas DataFrame, one row per (society, round)
    run.decisions       # every LLM decision
    run.ledger          # every charge of the credit ledger
    cooplab.resume("runs/cpr-llm")

Every command of the command line is a thin call of these functions; they check the whole
configuration before anything is written (one-line :class:`~cooplab.limits.ConfigError`), go
through the one runner (checkpoints, ledger, traces, tables, figure) and hand back a :class:`Run`.
"""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, cast

import pandas as pd

from cooplab.graphs import rundir
from cooplab.graphs.runfiles import RunSummary
from cooplab.graphs.task import Task
from cooplab.limits import ConfigError, for_python, show
from cooplab.runs import registry
from cooplab.runs.config import RunConfig


@dataclass
class Run:
    """A run directory read back: its config, its summary (a typed
    :class:`~cooplab.graphs.runfiles.RunSummary`: ``run.summary.status``, ``run.summary.ledger.calls``,
    the task's own results as ``run.summary.results``) and every table as a DataFrame.

    Tables are read when first asked for (``run.table("rounds")``, or the attributes
    :attr:`decisions`, :attr:`ledger`, :attr:`rounds`); :attr:`tables` lists what the run wrote."""

    out: Path
    config: dict[str, Any]
    summary: RunSummary
    #: why this call of :func:`run` / :func:`resume` stopped early (a model unreachable), with the
    #: way to continue; None when it did not
    stopped: str | None = None
    _tables: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False)

    @classmethod
    def open(cls, out: str | Path) -> "Run":
        """Read a finished (or stopped) run directory: its summary.json validated with its task's
        results model (one-line :class:`~cooplab.graphs.rundir.RunDirError` when it is missing or damaged)."""
        from cooplab.runs import store

        out = Path(out)
        if not (out / "summary.json").is_file():
            raise rundir.RunDirError(f"{out} has no summary.json; is it a finished cooplab run directory?")
        return cls(out=out, config=rundir.read_config(out), summary=store.read_summary(out))

    @property
    def run_config(self) -> RunConfig:
        """The run's settings as a typed :class:`~cooplab.runs.config.RunConfig` (run them again with
        ``cooplab.run(run.run_config, out=...)``)."""
        return RunConfig.load(self.config, where=f"{self.out}/config.json")

    @property
    def task(self) -> str:
        return str(self.config.get("task"))

    @property
    def status(self) -> str:
        """completed | stopped | budget_exhausted | failed"""
        return self.summary.status

    @property
    def tables(self) -> list[str]:
        """The names of the tables in the run directory (Parquet or CSV)."""
        names = {p.stem for p in self.out.iterdir() if p.suffix in (".parquet", ".csv") and p.is_file()}
        return sorted(names)

    def table(self, name: str) -> pd.DataFrame:
        """One table of the run directory (``out/NAME.parquet`` or ``.csv``) as a DataFrame."""
        if name not in self._tables:
            self._tables[name] = rundir.read_table(self.out, name)
        return self._tables[name]

    def _maybe(self, name: str) -> pd.DataFrame | None:
        return self.table(name) if name in self.tables else None

    @property
    def decisions(self) -> pd.DataFrame | None:
        """Every LLM decision (agent, round, phase, the prompt's answer, fallbacks); None for rule-based runs."""
        return self._maybe("decisions")

    @property
    def ledger(self) -> pd.DataFrame | None:
        """Every entry of the credit ledger (reservations, charges, releases); None for rule-based runs."""
        return self._maybe("ledger")

    @property
    def rounds(self) -> pd.DataFrame | None:
        """The per-round table of a society (CPR: one row per society and round), if the task writes one."""
        return self._maybe("rounds")

    @property
    def traces(self) -> list[dict[str, Any]]:
        """The run's traces (LangSmith run format), one dict per run of the trace tree."""
        from cooplab.graphs.tracing import load_runs

        return load_runs(self.out) if (self.out / rundir.TRACES_FILE).is_file() else []

    @property
    def figure(self) -> Path | None:
        """The run's figure (``figures/run.png``), if one was drawn."""
        p = self.out / "figures" / "run.png"
        return p if p.is_file() else None

    def __repr__(self) -> str:
        return f"Run({self.task!r}, status={self.status!r}, out={str(self.out)!r}, tables={self.tables})"


def _python_words(fn: Callable) -> Callable:
    """``fn`` whose one-line errors (and a stopped run's :attr:`Run.stopped`) name keywords and
    calls (``seed``, ``force=True``, ``cooplab.resume('DIR')``) where the command line names flags
    and commands (``--seed``, ``--force``, ``cooplab resume DIR``): :func:`cooplab.limits.for_python`.
    ``fn`` itself stays reachable as ``.in_cli_words``: the command line calls it, so its messages
    keep naming flags."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kw: Any) -> Any:
        try:
            result = fn(*args, **kw)
        except Exception as exc:
            if type(exc).__module__.startswith("cooplab.") and len(exc.args) == 1 and isinstance(exc.args[0], str):
                exc.args = (for_python(exc.args[0]),)
            raise
        if isinstance(result, Run) and result.stopped:
            result.stopped = for_python(result.stopped)
        return result

    wrapper.in_cli_words = fn  # type: ignore[attr-defined]
    return wrapper


def _config(
    config: RunConfig | Mapping[str, Any] | None, task: str | Task | None, kw: dict[str, Any]
) -> tuple[Task, RunConfig]:
    """The resolved configuration of a run from a RunConfig, a mapping of its fields, or keywords."""
    if isinstance(task, Task):
        task = (
            registry.register_task(task, replace=True).name if registry.registered(task.name) is not task else task.name
        )
    if config is None:
        if not isinstance(task, str):
            raise ConfigError(
                "cooplab.run needs task=NAME (or a RunConfig); installed tasks: " + ", ".join(registry.names())
            )
        config = RunConfig.from_keywords(task, **kw)
    elif kw or task is not None:
        raise ConfigError(
            f"give cooplab.run either a RunConfig or keywords, not both (got {sorted(kw) + (['task'] if task else [])})"
        )
    elif isinstance(config, Mapping):
        fields = dict(config)
        if "version" in fields:  # a stored config.json, as read from a run directory
            config = RunConfig.load(fields)
        elif not isinstance(fields.get("task"), (str, Task)):
            raise ConfigError(f"a config mapping needs task=NAME; installed tasks: {', '.join(registry.names())}")
        else:
            config = RunConfig.from_keywords(fields.pop("task"), **fields)
    elif not isinstance(config, RunConfig):
        raise ConfigError(f"config must be a cooplab.RunConfig or a dict of its fields, got {show(config)}")
    try:
        t = registry.get(config.task)
    except registry.UnknownTask as exc:
        raise ConfigError(str(exc)) from None
    return t, config.resolve(t)


@_python_words
def run(
    config: RunConfig | Mapping[str, Any] | None = None,
    /,
    *,
    task: str | Task | None = None,
    out: str | Path,
    force: bool = False,
    quiet: bool = False,
    **kw: Any,
) -> Run:
    """Run a task and return the :class:`Run` it wrote in ``out``.

    Either a :class:`~cooplab.runs.config.RunConfig`, or keywords: ``task`` (a registered name, or a
    :class:`~cooplab.graphs.task.Task` instance, registered on the way), ``agents`` (rule or llm),
    ``seed``, ``csv``, the LLM settings (``model``, ``agent_models``, ``base_url``, ``temperature``,
    ``max_tokens``, ``max_concurrency``, ``model_processes``, ``rps``, ``budget``, ``price_in``, ``price_out``,
    ``cache``),
    the sandbox settings (``sandbox_backend``, ``sandbox_timeout``, ``sandbox_rate``) and the task's
    own options (``cooplab params TASK`` / ``help(task.options)``: CPR takes ``n_agents``, ``rounds``,
    ``env``, ``population``, ``replicates``, ``set`` ...). Everything is checked before ``out`` is
    made. ``force`` overwrites a run in ``out``; ``quiet`` hides the progress bar.

    A run that stops early (budget spent, model unreachable) still returns its Run (see
    :attr:`Run.status`); an unexpected error raises :class:`~cooplab.runs.runner.RunFailed` after
    saving ``error.log``. Continue either with :func:`resume`."""
    from cooplab.runs import runner, store

    t, cfg = _config(config, task, kw)
    with store.locked(store.ensure_writable(Path(out))) as path:  # no other process may clear or write it meanwhile
        path = store.prepare_out(path, force=force)
        stopped = _stopped_by(lambda: runner.start(t, path, cfg, quiet=quiet))
    return _opened(path, stopped)


def _stopped_by(work: Callable[[], Any]) -> str | None:
    """Why ``work()`` (a run, resume or fork) stopped at a checkpoint (a spent budget, a model that
    went away), or None when it ran to its end: a stop is part of the returned run, not raised."""
    from cooplab.runs import runner

    try:
        work()
    except runner.RunStopped as exc:
        return str(exc)
    return None


def _opened(out: str | Path, stopped: str | None) -> Run:
    run_ = Run.open(out)
    run_.stopped = stopped
    return run_


@_python_words
def resume(
    out: str | Path,
    *,
    quiet: bool = False,
    warn: Callable[[str], None] | None = None,
    models: Sequence[Any] = (),
    budget: float | None = None,
    notice: Callable[[str], None] | None = None,
    budget_name: str = "budget",
) -> Run:
    """Continue a run from its last checkpoint (any task, a registered one included) and return it.
    ``models``: the chat model objects a run made from Python was given (a new process holds none;
    each is matched to the run's ``instance:`` specs by its class and settings). ``budget``: a new,
    higher cap in USD for an LLM run (the only way to continue one that ended ``budget_exhausted``;
    ``notice``, default a warning on the ``cooplab`` logger, gets the one line saying it was raised;
    ``budget_name``: how messages call it, e.g. ``--budget`` from the command line)."""
    from cooplab.agents.instances import register
    from cooplab.runs import runner

    for model in models:
        register(model)
    stopped = _stopped_by(
        lambda: runner.resume(Path(out), quiet=quiet, warn=warn, budget=budget, budget_name=budget_name, notice=notice)
    )
    return _opened(out, stopped)


@_python_words
def fork(
    parent: str | Path,
    *,
    at_round: int,
    out: str | Path,
    set: Any = None,
    model: str | None = None,  # noqa: A002
    prompt_variant: str | None = None,
    invader: Any = None,
    force: bool = False,
    quiet: bool = False,
) -> Run:
    """A counterfactual fork: a new run in ``out`` that starts from ``parent``'s state at the end of
    round ``at_round`` with the changes applied (``set``: the task's parameters, a dict or
    ``"name=value"`` strings; ``model``; ``prompt_variant``; ``invader``, ``"KIND@K[:AGENT]"`` with K
    after ``at_round``), run to its end and returned. Rounds
    1..at_round are the parent's, bit for bit, at no model call; without changes the fork replays
    the whole parent from the response cache. The fork resumes like any run (:func:`resume`) and
    can itself be forked. See :mod:`cooplab.runs.fork` and docs/forks.md."""
    from cooplab.runs import fork as forks

    stopped = _stopped_by(
        lambda: forks.fork(
            parent,
            at_round=at_round,
            out=out,
            set=set,
            model=model,
            prompt_variant=prompt_variant,
            invader=invader,
            force=force,
            quiet=quiet,
        )
    )
    return _opened(out, stopped)


@_python_words
def compare(a: str | Path, b: str | Path, *, out: str | Path | None = None, columns: Sequence[str] | None = None):
    """Compare two runs of one task from the round they share on (:mod:`cooplab.evals.compare`):
    returns a :class:`~cooplab.evals.compare.Comparison` (``.outcomes``, ``.first_difference``,
    ``.common_round``, ``.curves``, ``.figure()``, ``.to_dict()``). With ``out``, writes
    ``compare.json`` and ``compare.png`` there."""
    from cooplab.runs import compare as comparing

    return comparing.compare_dirs(Path(a), Path(b), out=None if out is None else Path(out), columns=columns)


async def arun(config: RunConfig | Mapping[str, Any] | None = None, /, **kw: Any) -> Run:
    """:func:`run` for async code (``await cooplab.arun(...)``): the run goes to a worker thread, the
    caller's event loop goes on meanwhile. (:func:`run` itself also works inside a running event
    loop, such as a notebook's: it waits there for the run.)"""
    return await asyncio.to_thread(lambda: run(config, **kw))


async def aresume(out: str | Path, **kw: Any) -> Run:
    """:func:`resume` for async code."""
    return await asyncio.to_thread(lambda: resume(out, **kw))


async def asweep(task: str | Task, **kw: Any) -> pd.DataFrame:
    """:func:`sweep` for async code."""
    return await asyncio.to_thread(lambda: sweep(task, **kw))


@_python_words
def sweep(
    task: str | Task,
    *,
    out: str | Path,
    grid: Mapping[str, Sequence[Any]] | None = None,
    seeds: Sequence[int] | None = None,
    parallel: int = 1,
    executor: str = "local",
    address: str | None = None,
    quiet: bool = True,
    analysis: bool = True,
    sweep_budget: float | None = None,
    sample: Mapping[str, Any] | None = None,
    **fixed: Any,
) -> pd.DataFrame:
    """Run a grid of one task's runs and return their table (one row per cell; also written as
    ``out/table.csv``). ``grid`` maps any keyword of :func:`run` to its values (``"set.NAME"`` sweeps
    one parameter of the task's ``set``), ``seeds`` repeats every cell (default: the task's
    ``sweep_seeds``; five for science), ``sample`` draws some grid points instead of all
    (``{"points": N, "seed": S, "weights": {...}}``, see :class:`cooplab.runs.grid.Sample`), ``fixed`` holds the
    keywords
    every cell shares. The same as a sweep file (:mod:`cooplab.runs.grid`, ``cooplab sweep FILE``).
    Every cell's config is checked before any runs (a bad value names its cell); finished cells are
    skipped and interrupted ones resumed when the same sweep runs again; a failed cell is recorded
    while the others go on; then the task's analysis runs (CPR: ``out/analysis``) unless
    ``analysis=False``. ``budget`` (a keyword of :func:`run`) caps each cell; ``sweep_budget`` caps
    what all cells spend together (a cell starts only when its budget fits in what is left; the
    others have status "not started (sweep_budget)" and start when the sweep runs again with more).

        cooplab.sweep("diners", out="runs/pk", grid={"pk": ["3:1", "6:1"]}, seeds=[0, 1], replicates=20)
    """
    from cooplab.runs import grid as grids
    from cooplab.runs.sweeps import EXECUTORS, SweepError

    if isinstance(task, Task):
        registry.register_task(task, replace=True)
        task = task.name
    if executor not in EXECUTORS:
        raise ConfigError(f"executor must be one of {', '.join(EXECUTORS)}, got {executor!r}")
    if grid is not None and not isinstance(grid, Mapping):
        raise ConfigError(f"grid must map keywords to non-empty lists of values, got {show(grid)}")
    raw = {
        "task": task,
        "out": str(out),
        "fixed": dict(fixed),
        "grid": {k: list(v) if isinstance(v, tuple) else v for k, v in (grid or {}).items()},
        "seeds": list(seeds) if isinstance(seeds, (list, tuple)) else seeds,
        "parallel": parallel,
        "analysis": analysis,
        "sweep_budget": sweep_budget,
        "sample": dict(sample) if isinstance(sample, Mapping) else sample,
    }
    sw = grids.load(raw, "sweep")
    try:
        res = grids.run(sw, grids.jobs(sw), executor=executor, address=address, quiet=quiet)
    except SweepError as exc:
        raise ConfigError(str(exc)) from None
    rows = res["table"]
    return rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(rows)


#: how many run directories :func:`load_runs` reads at most (a pattern that matches a whole disk is refused)
MAX_RUNS = 100_000
#: the columns every row of :func:`load_runs` has, first
RUN_COLUMNS = ("run", "task", "status", "agents", "seed", "model", "created", "wall_seconds")


def _run_dirs(where: str | Path | Sequence[str | Path]) -> list[Path]:
    """The run directories ``where`` names: each directory (a glob pattern's matches too) and
    every directory below it holding a config.json, symbolic links not followed, in name order."""
    import glob
    import os

    items = [where] if isinstance(where, (str, Path)) else list(where)
    found: dict[str, Path] = {}
    for item in items:
        if not isinstance(item, (str, Path)):
            raise ConfigError(f"load_runs takes a directory, a glob pattern or a list of them, got {show(item)}")
        text = str(item)
        roots = [Path(m) for m in sorted(glob.glob(text))] if glob.has_magic(text) else [Path(text)]
        for root in roots:
            if not root.is_dir():
                continue
            for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
                dirnames.sort()
                if "config.json" in filenames:
                    found.setdefault(os.path.normpath(dirpath), Path(dirpath))
                    if len(found) > MAX_RUNS:
                        raise ConfigError(f"load_runs: {text} holds more than {MAX_RUNS:,} run directories; name fewer")
    return [found[k] for k in sorted(found)]


def _run_row(d: Path) -> dict[str, Any]:
    """One row of :func:`load_runs`: who the run is, its settings (``params.NAME``) and the scalar
    results of its summary.json (nested ones as ``ledger.calls``), like a sweep's table."""
    from cooplab.runs import store
    from cooplab.runs.sweeps import flatten_summary

    row: dict[str, Any] = {"run": str(d)}
    try:
        config = rundir.read_config(d)
    except Exception as exc:  # noqa: BLE001 - a damaged directory is a row that says so, never a crash
        return {**row, "status": "unreadable", "error": f"config.json: {exc}"}
    if not isinstance(config, Mapping):
        return {**row, "status": "unreadable", "error": "config.json is not an object"}
    summary: dict[str, Any] = {}
    if (d / "summary.json").is_file():
        try:
            summary = store.read_summary(d).as_json()
        except rundir.RunDirError as exc:  # one line: the file, the field, what is wrong
            row["error"] = str(exc)
    llm, record = config.get("llm"), config.get("record")
    llm = llm if isinstance(llm, Mapping) else {}
    record = record if isinstance(record, Mapping) else {}
    row.update(
        task=config.get("task"),
        status=summary.get("status") or ("unreadable" if "error" in row else "not finished"),
        agents=config.get("agents"),
        seed=config.get("seed"),
        model=llm.get("model"),
        created=record.get("created"),
        wall_seconds=summary.get("wall_seconds"),
    )
    params = config.get("params")
    params = params if isinstance(params, Mapping) else {}
    row.update({f"params.{k}": v for k, v in flatten_summary(dict(params)).items()})
    row.update({k: v for k, v in flatten_summary(dict(summary)).items() if k not in row and f"params.{k}" not in row})
    return {
        k: (str(v) if k in ("run", "task", "status", "agents", "model", "created") and v is not None else v)
        for k, v in row.items()
    }


def load_runs(where: str | Path | Sequence[str | Path] = "runs") -> pd.DataFrame:
    """A table of many runs, one row per run directory: ``run`` (its path: reopen it with
    :meth:`Run.open`), ``task``, ``status`` (``not finished`` for a run without summary.json yet),
    ``agents``, ``seed``, ``model``, ``created``, ``wall_seconds``, the task's settings as
    ``params.NAME`` and the scalar results of its summary (``survival_time.mean``,
    ``ledger.cost_usd_float``, ``scores.accuracy`` ...). Runs of different tasks share the table
    (a column a task does not have is empty). Like Inspect's ``evals_df``.

    ``where``: a directory (every run below it, at any depth: a sweep's cells too), a glob pattern
    (``"runs/cpr-*"``; ``"runs/**"``), or a list of them. A directory that cannot be read is a row
    with status ``unreadable`` and its ``error``; nothing is written."""
    rows = [_run_row(d) for d in _run_dirs(where)]
    df = pd.DataFrame(rows)
    if df.empty:
        return pd.DataFrame(columns=list(RUN_COLUMNS))
    first = [c for c in RUN_COLUMNS if c in df.columns]
    return cast(
        pd.DataFrame, df[first + [c for c in df.columns if c not in first]]
    )  # pandas' stubs: a list of columns selects a frame


def register_task(task: Task | type[Task], *, replace: bool = False) -> Task:
    """Make a task defined in Python runnable by name in this process
    (see :func:`cooplab.runs.registry.register_task`)."""
    return registry.register_task(task, replace=replace)
