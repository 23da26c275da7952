"""The task commands of the CLI, the same for every registered task::

    cooplab run TASK [task options] [--agents rule|llm] [LLM options] --out DIR [--json]
    cooplab resume DIR
    cooplab params TASK [--json]
    cooplab graph TASK [--agents rule|llm]

A task's own options come from a small function (``options(agents, **opts) -> config fields``):
:func:`run_command` adds the options every run has (``--out``, ``--seed``, ``--agents``, the LLM
options, ``--csv``, ``--force``, ``--json``, ``-q``) to its signature, so Typer shows one
``--help`` with both. A task without such a function (e.g. a third-party task) gets
``--set name=value`` for each field of its ``Params`` model.

Every task's commands are made when the task is named (``cooplab run cpr``) or when the commands
are listed (``cooplab run --help``), never at start-up: see :class:`TaskGroup`. A built-in task's
own commands live in its CLI module (:data:`BUILTIN`, e.g. :mod:`cooplab.cli.cpr`), which describes
the task by its :class:`TaskFacts` so that ``cooplab run cpr --help`` does not load the task (its
graph, NumPy, pandas, LangGraph). A plug-in task (an entry point of the ``cooplab.tasks`` group)
is imported only then, so a plug-in that fails to import, even by calling ``sys.exit``, costs only
its own commands.

This module imports only Typer and the light option declarations at the top: the engine (the run
configuration, the runner, the registry's tasks) is imported when a command runs.
"""

from __future__ import annotations

import importlib
import inspect
import json
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, cast

import typer
from typer.core import TyperGroup

from cooplab.cli import options as co
from cooplab.cli.lazy import LightHelp
from cooplab.cli.options import (
    AgentModelOpt,
    BaseUrlOpt,
    BudgetOpt,
    CacheOpt,
    CallDeadlineOpt,
    CallTimeoutOpt,
    CsvOpt,
    ForceOpt,
    JsonOpt,
    MaxConcurrencyOpt,
    MaxTokensOpt,
    ModelMixOpt,
    ModelOpt,
    ModelProcessesOpt,
    OutOpt,
    PriceInOpt,
    PriceOutOpt,
    PromptVariantOpt,
    QuietOpt,
    RpsOpt,
    SandboxRateOpt,
    SandboxTimeoutOpt,
    SeedOpt,
    TemperatureOpt,
    fail,
)
from cooplab.limits import DEFAULT_CALL_DEADLINE, ConfigError

if TYPE_CHECKING:
    from cooplab.graphs.runfiles import RunSummary
    from cooplab.graphs.task import Task

#: the built-in tasks' CLI modules: each has ``FACTS`` (its :class:`TaskFacts`) and ``command(kind)``,
#: the task's own run, params or graph command (None: the default one)
BUILTIN = {
    "cpr": "cooplab.cli.cpr",
    "diners": "cooplab.cli.diners",
    "game": "cooplab.cli.games",
    "science": "cooplab.cli.science",
}


@dataclass(frozen=True)
class TaskFacts:
    """What a task's commands need to know of the task before it is loaded: the same values as the
    :class:`~cooplab.graphs.task.Task` class attributes of that name (a test compares them for every
    built-in task). :func:`run_command` and :func:`graph_command` take one in place of the task, so
    that ``--help`` does not import the task; the task itself is loaded when the command runs."""

    name: str
    agent_kinds: tuple[str, ...] = ("rule", "llm")
    uses_sandbox: bool = False
    default_max_tokens: int | None = None
    title: str = ""

    def load(self) -> "Task":
        from cooplab.runs import registry

        return registry.get(self.name)


def loaded(task: "Task | TaskFacts") -> "Task":
    """The task itself (a :class:`TaskFacts` is loaded from the registry; one line, exit 2, if it fails to load)."""
    if not isinstance(task, TaskFacts):
        return task
    from cooplab.runs import registry

    try:
        return task.load()
    except registry.UnknownTask as exc:
        fail(str(exc))
        raise  # not reached: fail() raises


def echo_json(obj: Any) -> None:
    from cooplab.graphs.rundir import jsonable

    typer.echo(json.dumps(jsonable(obj), indent=2))


# --- running and reporting -----------------------------------------------------------------
def report(task: "Task", out: Path, summary: "RunSummary", as_json: bool) -> None:
    """Print a run's summary: summary.json with ``--json``, else the task's lines, the LLM bill and
    where the run directory is."""
    if as_json:
        echo_json(summary.as_json())
        return
    for line in task.report(summary):
        typer.echo(line)
    lg = summary.ledger
    if lg is not None:
        typer.echo(
            f"LLM calls: {lg.calls} ({lg.cached_calls} from cache), tokens in/out "
            f"{lg.input_tokens}/{lg.output_tokens}, "
            f"cost ${lg.cost_usd_float:.6f}; status {summary.status}"
        )
    typer.echo(f"run directory: {out}")


@contextmanager
def run_errors(out: Path):
    """How a run that ends early is reported: a clean stop or a failure is one line and exit 1,
    Ctrl-C exit 130 (the run resumes with ``cooplab resume``), a bad run directory exit 2."""
    from cooplab.runs import store as runstore
    from cooplab.runs.runner import RunFailed, RunStopped

    try:
        yield
    except runstore.RunDirError as exc:
        fail(str(exc))
    except (RunStopped, RunFailed) as exc:
        typer.echo(f"cooplab: {exc}", err=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        typer.echo(f"cooplab: interrupted; checkpoints are in {out}; continue with 'cooplab resume {out}'", err=True)
        raise typer.Exit(130) from None


def exit_if_stopped(run: Any) -> None:
    """A run that stopped early but cleanly: its line, exit 1 (it resumes)."""
    if run.stopped:
        typer.echo(f"cooplab: {run.stopped}", err=True)
        raise typer.Exit(1)


def run_and_report(task: "Task", out: Path, config: Any, *, force: bool, quiet: bool, as_json: bool) -> None:
    """Run ``config`` with :func:`cooplab.run` (the run directory prepared there) and report; its
    one-line errors in the command line's words."""
    from cooplab.runs import api

    with run_errors(out):
        run = api.run.in_cli_words(config, out=out, force=force, quiet=quiet)  # its messages name flags
    exit_if_stopped(run)
    report(task, run.out, run.summary, as_json)


def resume_and_report(run_dir: Path, *, quiet: bool, as_json: bool, budget: float | None = None) -> None:
    """Resume any task's run with :func:`cooplab.resume` (``budget``: a raised cap) and report it."""
    from cooplab.runs import api, registry

    with run_errors(run_dir):
        run = api.resume.in_cli_words(
            run_dir,
            quiet=quiet,
            warn=lambda m: typer.echo(f"cooplab: warning: {m}", err=True),
            budget=budget,
            notice=lambda m: typer.echo(f"cooplab: {m}", err=True),
            budget_name="--budget",
        )
    exit_if_stopped(run)
    report(registry.get(run.summary.task), run_dir, run.summary, as_json)


# --- one run command per task --------------------------------------------------------------
def _common(
    out: OutOpt,
    agents: str = typer.Option("rule", "--agents", help="Who decides: rule (the rules executed exactly) or llm."),
    seed: SeedOpt = 0,
    csv: CsvOpt = False,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
    model: ModelOpt = "local",
    agent_model: AgentModelOpt = None,
    model_mix: ModelMixOpt = None,
    base_url: BaseUrlOpt = None,
    temperature: TemperatureOpt = 0.7,
    max_tokens: MaxTokensOpt = 64,
    max_concurrency: MaxConcurrencyOpt = 8,
    model_processes: ModelProcessesOpt = 0,
    call_timeout: CallTimeoutOpt = 300.0,
    call_deadline: CallDeadlineOpt = DEFAULT_CALL_DEADLINE,
    rps: RpsOpt = None,
    budget: BudgetOpt = None,
    price_in: PriceInOpt = None,
    price_out: PriceOutOpt = None,
    cache: CacheOpt = None,
    prompt_variant: PromptVariantOpt = "original",
) -> None:
    """The options every ``cooplab run TASK`` has (a template: never called)."""


def _sandbox(
    sandbox_backend: str = typer.Option(
        "docker",
        "--sandbox-backend",
        help="Where run_code runs: docker (isolated; never falls back) or local (no isolation, by name only).",
    ),
    sandbox_timeout: SandboxTimeoutOpt = 30.0,
    sandbox_rate: SandboxRateOpt = 0.0,
) -> None:
    """The options of a task that uses the sandbox (a template: never called)."""


def agent_kinds(task: "Task | TaskFacts") -> type[Enum]:
    """The choices of a task's ``--agents`` option (shown in ``--help``, checked by Typer)."""
    # a class, by construction (typeshed's EnumMeta.__call__ with names says so; pyright reads a call
    # whose names are not literal as a member)
    return cast("type[Enum]", Enum(f"{task.name.title()}Agents", {k: k for k in task.agent_kinds}, type=str))


def run_command(task: "Task | TaskFacts", options: Callable[..., dict[str, Any]]) -> Callable[..., None]:
    """The ``cooplab run TASK`` command: ``options``' parameters (the task's own options, Typer
    style) plus the common ones. ``options(agents=..., **task_opts)`` returns the task's config
    fields (raising ConfigError / calling ``fail`` on a bad value)."""
    common = list(inspect.signature(_common, eval_str=True).parameters.values())
    if task.default_max_tokens is not None:  # the task's own output cap, shown in --help
        common = [p.replace(default=task.default_max_tokens) if p.name == "max_tokens" else p for p in common]
    if task.uses_sandbox:
        common += list(inspect.signature(_sandbox, eval_str=True).parameters.values())
    own = [p for p in inspect.signature(options, eval_str=True).parameters.values() if p.name != "agents"]
    names = {p.name for p in common}
    clash = names & {p.name for p in own}
    if clash:
        raise TypeError(f"task {task.name!r}: options {sorted(clash)} clash with the common run options")
    if not set(task.agent_kinds) <= {"rule", "llm"}:
        raise TypeError(f"task {task.name!r}: agent kinds must be rule and/or llm, got {task.agent_kinds}")
    kinds = agent_kinds(task)
    agents_param = common[1].replace(
        annotation=kinds,
        default=typer.Option(
            kinds(task.agent_kinds[0]), "--agents", help=f"Who decides: {' or '.join(task.agent_kinds)}."
        ),
    )
    params = [common[0], agents_param, *own, *common[2:]]
    own_names = {p.name for p in own}

    def command(**kw: Any) -> None:
        c = {k: kw.pop(k) for k in list(kw) if k in names}
        agents = getattr(c["agents"], "value", c["agents"])
        if agents not in task.agent_kinds:
            fail(f"--agents must be {' or '.join(task.agent_kinds)}, got {agents!r}")
        fields = options(agents=agents, **kw)
        if fields.get("agents", agents) != "llm":
            refuse_llm_options("--players llm" if "players" in own_names else "--agents llm")
        from cooplab.runs.config import SandboxSettings, build_config

        real = loaded(task)
        llm = co.llm_settings(c)
        sandbox = (
            SandboxSettings(backend=c["sandbox_backend"], timeout=c["sandbox_timeout"], rate=c["sandbox_rate"])
            if task.uses_sandbox
            else SandboxSettings()
        )
        config = build_config(real, fields, agents=agents, seed=c["seed"], csv=c["csv"], llm=llm, sandbox=sandbox)
        run_and_report(real, c["out"], config, force=c["force"], quiet=c["quiet"], as_json=c["as_json"])

    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params}
    command.__doc__ = options.__doc__ or task.title
    command.__name__ = f"run_{task.name}"
    return command


#: the options of LLM agents (parameter names): refused on the command line of a rule-based run
LLM_OPTIONS = (
    "model",
    "agent_model",
    "model_mix",
    "base_url",
    "temperature",
    "max_tokens",
    "max_concurrency",
    "model_processes",
    "call_timeout",
    "rps",
    "budget",
    "price_in",
    "price_out",
    "cache",
    "prompt_variant",
)


def refuse_llm_options(how: str) -> None:
    """One line, exit 2, when the user typed an LLM option for a run without LLM agents (it would
    be ignored without a word); ``how`` says how to ask for LLM agents."""
    typed = co.given(*LLM_OPTIONS)
    if typed:
        one = len(typed) == 1
        fail(
            f"{', '.join(typed)} {'applies' if one else 'apply'} to LLM agents only, and this run has none: add {how}, "
            f"or leave {'it' if one else 'them'} out"
        )


#: parameters of ``cooplab run TASK`` that are not settings of the run
_NOT_SETTINGS = {"out", "force", "as_json", "quiet"}


def run_keywords(task: str, args: list[str]) -> dict[str, Any]:
    """The :func:`cooplab.run` keywords of ``cooplab run TASK ARGS``: the options given, converted by
    the command's own types, nothing run (a sweep file of the earlier "args" format is read with
    it). A bad option raises :class:`ConfigError` (one line)."""
    from cooplab.cli import app

    group = typer.main.get_command(app)
    with group.context_class(group) as ctx:  # Typer's own Click (it may bring a copy): its classes, not click's
        run_group = group.get_command(ctx, "run") if isinstance(group, TyperGroup) else None
        cmd = run_group.get_command(ctx, task) if isinstance(run_group, TyperGroup) else None
    if cmd is None:
        raise ConfigError(f"no task named {task!r}")
    try:
        sub = cmd.make_context(f"cooplab run {task}", [*args, "--out", "-"], resilient_parsing=False)
    except ConfigError:
        raise
    except Exception as exc:  # Click's usage errors (format_message) and Exit (--help)
        format_message = getattr(exc, "format_message", None)
        if format_message is not None:
            raise ConfigError(format_message()) from None
        if type(exc).__name__ == "Exit":
            raise ConfigError(
                f"'cooplab run {task}' with these options runs nothing (an option such as --help?)"
            ) from None
        raise
    out: dict[str, Any] = {}
    for name, value in sub.params.items():
        source = sub.get_parameter_source(name)  # by name: Typer may bring its own copy of Click's enum
        if name in _NOT_SETTINGS or getattr(source, "name", None) != "COMMANDLINE":
            continue
        value = getattr(value, "value", value)  # an Enum choice
        out[name.rstrip("_")] = list(value) if isinstance(value, tuple) else value
    return out


def params_options(task: "Task") -> Callable[..., dict[str, Any]]:
    """The task options of a task that only has a ``Params`` model: ``--set name=value``."""

    def options(
        agents: str,
        set_: Optional[list[str]] = typer.Option(
            None, "--set", help=f"Set a parameter: --set name=value (see 'cooplab params {task.name}')."
        ),
    ) -> dict[str, Any]:
        return task.options(agents, set=set_)

    options.__doc__ = task.title
    return options


# --- params, graph -------------------------------------------------------------------------
def params_command(task: "Task | TaskFacts") -> Callable[..., None]:
    def command(as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
        from cooplab.evals.text import plain

        rows = loaded(task).params_table()
        if as_json:
            echo_json(rows)
            return
        w = max((len(r["name"]) for r in rows), default=4)
        for r in rows:
            typer.echo(f"{r['name']:<{w}}  {plain(r['default']):<12}  {r['meaning']}  [{r['source']}]")

    command.__doc__ = f"Every {task.name} parameter with its default, meaning and source."
    return command


def graph_command(task: "Task | TaskFacts") -> Callable[..., None]:
    kinds = agent_kinds(task)

    def command(
        agents: Enum = typer.Option(  # a member of kinds: Typer reads the class from __annotations__ (below)
            kinds(task.agent_kinds[0]), "--agents", help=f"Whose graph: {' or '.join(task.agent_kinds)}."
        ),
    ) -> None:
        kind, real = agents.value, loaded(task)
        typer.echo(real.build(real.default_config(kind)).get_graph().draw_mermaid())

    command.__annotations__ = {"agents": kinds, "return": None}  # a local Enum: not resolvable from its name
    command.__doc__ = f"Print the {task.name} graph as Mermaid text."
    return command


def _unloadable(message: str) -> Callable[..., None]:
    def command() -> None:
        fail(message)

    return command


#: how each task group makes a task's command when the task has none of its own
_DEFAULT_COMMANDS: dict[str, Callable[[Any], Callable[..., None]]] = {
    "run": lambda t: run_command(t, params_options(t)),
    "params": params_command,
    "graph": graph_command,
}
_UNLOADABLE = {
    "help": "(failed to load; run it to see why)",
    "add_help_option": False,
    "context_settings": {"ignore_unknown_options": True, "allow_extra_args": True},
}


def _mount(app: typer.Typer, kind: str, name: str) -> bool:
    """Add ``name``'s ``kind`` command (run, params or graph) to ``app``: the built-in task's own
    (from its CLI module, :data:`BUILTIN`; the task itself is not loaded), else the default one,
    else (the task fails to load) a command that only says why (one line, exit 2). Whether the
    task loaded."""
    if (
        name in BUILTIN
    ):  # the task's own command, else the default one made from its facts: the task is loaded when it runs
        module = importlib.import_module(BUILTIN[name])
        fn = module.command(kind)
        if fn is None and kind in ("params", "graph"):
            fn = _DEFAULT_COMMANDS[kind](module.FACTS)
        if fn is not None:
            app.command(name, help=(fn.__doc__ or module.FACTS.title))(fn)
            return True
    from cooplab.runs import registry

    try:
        task = registry.get(name)
    except registry.UnknownTask as exc:
        app.command(name, **_UNLOADABLE)(_unloadable(str(exc)))
        return False
    fn = _DEFAULT_COMMANDS[kind](task)
    app.command(name, help=(fn.__doc__ or task.title))(fn)
    return True


class TaskGroup(LightHelp, TyperGroup):
    """The group of ``cooplab run|params|graph`` (``kind``): a command for every registered task,
    made when the task is named or the commands are listed, and only then imported (a built-in
    task's from its CLI module, without loading the task). Listing warns once, one line, for each
    task that fails to load (the listing goes on)."""

    kind = ""
    _warned: set[str] = set()  # shared by the three groups: a broken plug-in is reported once

    def list_commands(self, ctx: Any) -> list[str]:
        from cooplab.runs import registry

        names = registry.names()
        return [*names, *(n for n in super().list_commands(ctx) if n not in names)]

    def get_command(self, ctx: Any, name: str) -> Any:
        cmd = super().get_command(ctx, name)
        if cmd is not None:
            return cmd
        if name not in BUILTIN:
            from cooplab.runs import registry

            if name not in registry.names():
                return None
        app = typer.Typer(rich_markup_mode=None, add_completion=False)
        _mount(app, self.kind, name)
        cmd = typer.main.get_command(app)  # one command: the command itself
        self.add_command(cmd, name)
        return cmd

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        from cooplab.runs import registry

        for name in self.list_commands(ctx):
            self.get_command(ctx, name)
        for name, why in registry.failures().items():
            if name not in TaskGroup._warned:
                TaskGroup._warned.add(name)
                typer.echo(f"cooplab: warning: {why}; its commands only say so", err=True)
        super().format_commands(ctx, formatter)


def task_group(kind: str) -> type[TaskGroup]:
    """The :class:`TaskGroup` class of ``cooplab KIND`` (run, params or graph), for ``typer.Typer(cls=...)``."""
    return type(f"{kind.title()}TaskGroup", (TaskGroup,), {"kind": kind})


__all__ = [
    "BUILTIN",
    "ConfigError",
    "TaskFacts",
    "run_keywords",
    "echo_json",
    "fail",
    "graph_command",
    "params_command",
    "params_options",
    "report",
    "resume_and_report",
    "run_and_report",
    "run_command",
]


def run_calibration(cal: Any, out: Any, *, as_json: bool, quiet: bool, **kw: Any) -> None:
    """Run ``cal.calibrate(out, ...)`` (a calibration module: ``cooplab calibrate cpr|diners``) and
    report it: the summary (or JSON), a failed-samples line, exit 1 when samples failed or remain,
    130 with a resume hint on Ctrl-C, one-line errors (exit 2)."""
    from pathlib import Path

    from cooplab.cli.options import fail
    from cooplab.evals import calibration
    from cooplab.runs import sweeps
    from cooplab.runs.engine import ENGINE

    quiet = quiet or as_json
    log = co.stderr_log(quiet)
    try:
        s = cal.calibrate(out, jobs_on=ENGINE, log=log, quiet=quiet, **kw)
    except (calibration.CalibrateError, sweeps.SweepError) as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        typer.echo(
            f"cooplab: interrupted; finished samples are in {out}/samples.jsonl; rerun the same command to continue",
            err=True,
        )
        raise typer.Exit(130) from None
    if as_json:
        echo_json(s)
    else:
        for line in calibration.summary_lines(s, cal.spec()):
            typer.echo(line)
        typer.echo(f"report in {Path(out) / 'report.md'}")
    failed = calibration.failure_line(s)
    if failed:
        typer.echo(failed, err=True)
    if failed or not s["complete"]:
        raise typer.Exit(1)
