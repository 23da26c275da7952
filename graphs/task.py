"""The task interface: what a society, game or science team supplies so that the one runner
(``cooplab.runs.runner``) can run, checkpoint, resume, trace and report it.

A task is a small object (usually a module-level instance of a :class:`Task` subclass) that
knows its own configuration, graph, initial state and outputs. Everything else (the run
directory, ``config.json``, SQLite checkpoints, resume, the LLM service with its models, cache
and ledger, traces, clean stops on an exhausted budget or an unavailable model, the progress
bar, ``summary.json`` and ``--json``) is the runner's. A task registers under a name: the
built-in ones in :mod:`cooplab.runs.registry`, third-party ones through the ``cooplab.tasks``
entry-point group (see docs/write-your-own-task.md).

The runner calls, in order: ``init_state`` (a new run) or the last checkpoint (resume), ``build``
(the compiled graph, with the runner's checkpointer), then ``outputs`` with the final state
(tables and figures written into the run directory, the task's results returned as an instance
of its ``Results`` model, written into summary.json: :mod:`cooplab.graphs.runfiles`) and
``report`` (the lines printed for a person, from the run's typed
:class:`~cooplab.graphs.runfiles.RunSummary`). Every hook receives the run's typed configuration
(:class:`TaskConfig`; the engine's resolved :class:`cooplab.runs.config.RunConfig`): the common
settings (``config.task``, ``config.agents``, ``config.seed``, ``config.csv``, ``config.llm``,
``config.sandbox``, ``config.record``) and ``config.params``, an instance of the task's
:attr:`Task.Params` that holds every setting of the task. A run's ``config.json`` is that
configuration written out, and read back into it on resume, checked by the same model.

This module is deliberately free of any import from ``cooplab.agents`` or ``cooplab.tasks``:
the graph layer defines the shape, the layers above fill it in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict

from cooplab.graphs import runfiles
from cooplab.graphs.formats import Converter
from cooplab.graphs.runfiles import RunSummary

Node = Callable[..., Any]


def first_error(exc: Any) -> str:
    """A pydantic ``ValidationError`` as one line (kept for tasks written against it): the one
    formatter's message, :func:`cooplab.limits.explain`, the setting named by its field path."""
    from cooplab.limits import explain

    return explain(exc)


class TaskConfigError(ValueError):
    """A value of a task's configuration is wrong (one line naming the field and the fix)."""


P = TypeVar("P", bound=BaseModel, covariant=True)


class TaskConfig(Protocol, Generic[P]):
    """What every hook of a task receives: a run's typed configuration (the engine's resolved
    :class:`cooplab.runs.config.RunConfig`, or :class:`PlainConfig`). Annotate a hook's argument
    ``config: TaskConfig[MyParams]`` and read ``config.params.rounds``: no string keys."""

    @property
    def task(self) -> str: ...
    @property
    def agents(self) -> str | None: ...  # rule | llm (set in every resolved configuration, the only kind a hook gets)
    @property
    def seed(self) -> int: ...
    @property
    def csv(self) -> bool: ...
    @property
    def params(self) -> P: ...  # an instance of the task's Params: every setting of the task
    @property
    def llm(self) -> Any: ...  # the run's LLMSettings (cooplab.agents.settings), None without LLM agents
    @property
    def sandbox(self) -> Any: ...  # the run's SandboxSettings, None for a task without the sandbox
    @property
    def record(self) -> dict[str, Any]: ...  # what the run noted when it started (not a setting)


@dataclass
class PlainConfig:
    """A :class:`TaskConfig` made without the engine (:meth:`Task.default_config`: draw a task's graph)."""

    task: str
    agents: str
    params: Any
    seed: int = 0
    csv: bool = False
    llm: Any = None
    sandbox: Any = None
    record: dict[str, Any] = field(default_factory=dict)


class NoParams(BaseModel):
    """The settings of a task that declares no :attr:`Task.Params` (whatever its options return)."""

    model_config = ConfigDict(extra="allow")


@dataclass
class RunInfo:
    """What the runner tells a task's ``outputs`` about the run that ended."""

    out: Path  # the run directory
    status: str  # completed | stopped | budget_exhausted | failed
    message: str | None  # why it stopped early, if it did
    seconds: float  # wall time of this invocation
    csv: bool  # write tables as CSV instead of Parquet
    llm: bool  # LLM agents (decisions and ledger are in the state)
    #: the run's response cache file (None: --cache off, or no LLM), where a task may keep what a
    #: rerun can copy instead of redoing (the CPR run figure: :func:`cooplab.tasks.cpr.figures.run_figure`)
    cache: Path | None = None


class Task:
    """Base class of a task. Subclasses set the class attributes and override the methods marked
    *required*; the others have defaults that fit a round-based society built with
    :func:`cooplab.graphs.society.build_society`."""

    #: registry name: ``cooplab run NAME``
    name: ClassVar[str] = ""
    #: one line for ``--help`` and ``cooplab params``
    title: ClassVar[str] = ""
    #: the pydantic model of the task's results in summary.json (a :class:`~cooplab.graphs.runfiles.Results`
    #: subclass, one field per entry :meth:`outputs` returns; its fields sit at the top level of
    #: the file, beside the runner's). Default: any JSON values (:class:`~cooplab.graphs.runfiles.FreeResults`)
    Results: ClassVar[type[runfiles.Results]] = runfiles.FreeResults
    #: the pydantic model of every setting of the task (a run's ``config.params`` is an instance of
    #: it; config.json's ``params`` is it written out). Its fields carry their bounds (numbers: a rule
    #: of :data:`cooplab.limits.RULES`) and its validators every rule between them; they see the kind
    #: of agents and whether the settings were read from a stored file in ``info.context``
    #: (``{"agents", "stored"}``). ``cooplab params`` lists its fields, ``--set key=value`` sets them.
    #: A Params that picks its model by one setting (the game's, by ``game``) names the models in a
    #: ``variants`` class attribute ({value: model}) and returns an instance of one from ``model_validate``.
    Params: ClassVar[type[BaseModel] | None] = None
    #: the LangGraph state schema (a TypedDict; append-only fields typed ``AppendLog``)
    state_schema: ClassVar[type | None] = None
    #: the node whose update ends a round (the progress bar advances on it)
    round_node: ClassVar[str | None] = None
    #: what a round is called in progress bars and messages
    round_unit: ClassVar[str] = "round"
    #: what the task calls one agent in traces (agent 2 is "Fisher 3" in run names; see docs/traces.md)
    agent_noun: ClassVar[str] = "Agent"
    #: which kinds of agents the task has (the first is the default)
    agent_kinds: ClassVar[tuple[str, ...]] = ("rule", "llm")
    #: LLM runs get a sandbox pool in the runtime context (one session per agent id; the run's
    #: config["sandbox"] picks the backend and the timeout; ``--sandbox-*`` options on the CLI)
    uses_sandbox: ClassVar[bool] = False
    #: True when :meth:`explore` returns the run's whole explorer page (it places the generic summary and
    #: tail itself, e.g. with :func:`cooplab.evals.explorer.views.societies.page`); False: the explorer adds them after
    #: it
    explore_whole_page: ClassVar[bool] = False
    #: columns of a sweep's table that ``cooplab sweep`` prints (default: the first numbers)
    sweep_columns: ClassVar[tuple[str, ...]] = ()
    #: the seeds a sweep runs every grid point with when it names none (its simulations per condition)
    sweep_seeds: ClassVar[tuple[int, ...]] = (0,)
    #: the output-token cap of one model call when a run does not set ``max_tokens`` (None: the
    #: LLM settings' own default); the command line, Python, sweeps and configs all apply it
    #: (:func:`cooplab.runs.config.build_config`)
    default_max_tokens: ClassVar[int | None] = None
    #: classes of the task's own that its state holds besides plain values, numpy arrays and chat
    #: messages (pydantic models, dataclasses, named tuples, enums): the only other types its
    #: checkpoints are read back with (:mod:`cooplab.graphs.checkpoint_serde`; anything else is refused)
    checkpoint_types: ClassVar[tuple[type, ...]] = ()

    # --- configuration ---------------------------------------------------------------------
    def params(self, config: TaskConfig) -> Any:
        """The run's settings (``config.params``, an instance of :attr:`Params`)."""
        return config.params

    def options(self, agents: str, *, set: Any = None) -> dict[str, Any]:  # noqa: A002 - the name of --set
        """The task's settings from its run options: ``{"params": Params(...)}`` (optionally ``agents``
        when an option picks the kind, ``record`` for what the run notes). The keywords are those of
        ``cooplab run NAME``'s own options (``--n-agents`` is ``n_agents``), as Python values; the
        values are checked by :attr:`Params` and the first bad one is a one-line
        :class:`~cooplab.limits.ConfigError` naming the option (:func:`cooplab.limits.flags`).
        Default: ``set`` (a dict of :attr:`Params` values, or ``name=value`` strings) -> ``params``."""
        from cooplab.limits import flags, parse_set, validate

        if self.Params is None:
            parse_set(set, {}, self.name)
            return {"params": NoParams()}
        values = parse_set(set, self.Params.model_fields, self.name)
        return {"params": validate(self.Params, values, flags(rest=lambda f: f"--set {f}"), context={"agents": agents})}

    def n_agents(self, config: TaskConfig) -> int:
        """Agents per society (per-agent ``--agent-model`` keys are checked against it): the
        ``n_agents`` of the run's params (a field or a property of :attr:`Params`), else 1."""
        return int(getattr(config.params, "n_agents", 1))

    def fixed_model(self, config: TaskConfig) -> str | None:
        """The model spec the run's settings fix for its LLM agents (e.g. science's built-in
        scripted teams), or None. A new run takes it; a stored config.json must name it."""
        return None

    def llm_phases(self, config: TaskConfig) -> Sequence[str] | None:
        """The phases the run's LLM agents are asked in (a scripted model's file must answer each,
        checked before the run starts), or None when the task does not say (then a phase without
        answers stops the run at its first call, naming the phase and the file)."""
        return None

    def other_models(self, config: TaskConfig) -> list[tuple[str, str, str, Sequence[str]]]:
        """Models an LLM run calls besides its agents' (e.g. a judge), each as (its option, its place
        in config.json, the model spec, the phases it is asked in): checked with the run's model
        settings before the run starts or resumes. Default: none."""
        return []

    def cost_cap(self, config: TaskConfig) -> float | None:
        """The most a run of ``config`` may spend in USD, all its capped spending together (default:
        the LLM budget; 0 without LLM agents; None: no cap). A sweep with a sweep-wide budget
        starts a cell only when this much is left."""
        if config.agents != "llm" or config.llm is None:
            return 0.0
        return config.llm.budget

    def cost_spent(self, summary: RunSummary[Any]) -> float | None:
        """What a run spent in USD, from its summary (default: the LLM ledger's total; None when an
        LLM run's summary has no ledger, so what it spent is unknown)."""
        if summary.ledger is not None:
            return summary.ledger.cost_usd_float
        return None if summary.agents == "llm" else 0.0

    def default_params(self) -> BaseModel:
        """The task's settings with their default values (:attr:`Params` built from nothing)."""
        return self.Params.model_validate({}) if self.Params is not None else NoParams()

    def default_config(self, agents: str | None = None, **params: Any) -> PlainConfig:
        """A configuration with default values (``cooplab graph NAME`` draws its graph): ``agents``
        (default the task's first kind) and ``params`` set over the defaults of :attr:`Params`."""
        agents = agents or self.agent_kinds[0]
        # the given settings over the model's own defaults (a default that follows another setting, as
        # a solo pipeline's one analyst, follows it)
        values = (
            self.Params.model_validate(params, context={"agents": agents})
            if self.Params is not None
            else NoParams(**params)
        )
        return PlainConfig(task=self.name, agents=agents, params=values)

    # --- the graph -------------------------------------------------------------------------
    def phases(self, config: TaskConfig) -> Mapping[str, Node]:
        """*Required* unless :meth:`build` is overridden: the ordered nodes of one round."""
        raise NotImplementedError(f"task {self.name!r} defines neither phases() nor build()")

    def build(self, config: TaskConfig, *, checkpointer: Any = None):
        """The compiled graph of a run (default: :meth:`phases` looped by ``build_society``)."""
        from cooplab.graphs.context import CoopContext
        from cooplab.graphs.society import build_society

        if self.state_schema is None:
            raise NotImplementedError(f"task {self.name!r} declares no state_schema, which the default build() needs")
        return build_society(
            self.phases(config),
            self.state_schema,
            checkpointer=checkpointer,
            name=self.name,
            context_schema=CoopContext,
        )

    def prepare_run(self, config: TaskConfig, out: Path) -> None:
        """Files the run needs in ``out`` before its graph runs (e.g. a generated dataset). Called
        when a run starts and on every resume, so it must be idempotent (rewrite identical files,
        or check the ones there). Default: nothing."""

    def sandbox_dataset(self, config: TaskConfig, out: Path) -> Path | None:
        """The file every sandbox session of the run loads read-only as ``df`` (tasks that use the
        sandbox), or None."""
        return None

    def sandbox_agents(self, config: TaskConfig) -> int | None:
        """How many agents of the run use the sandbox (tasks that use it), or None when unknown. The run
        starts sandboxes ahead for them and none beyond them (:func:`cooplab.runs.runner.sandbox_pool`).
        Default: None (one sandbox kept started ahead)."""
        return None

    def init_state(self, config: TaskConfig) -> dict[str, Any]:
        """*Required*: the initial state of a new run (every random draw from ``config.seed``)."""
        raise NotImplementedError

    def total_rounds(self, config: TaskConfig) -> int:
        """Rounds the progress bar counts to (default: the ``rounds`` of the run's params, else 0)."""
        return int(getattr(config.params, "rounds", 0) or 0)

    def recursion_limit(self, state: Mapping[str, Any], n_nodes: int) -> int:
        """LangGraph's step limit for a run from ``state`` (default: every round's nodes plus slack)."""
        return int(state.get("max_round", 1)) * (n_nodes + 1) + 10

    def fork_state(self, state: Mapping[str, Any], old: TaskConfig, new: TaskConfig) -> dict[str, Any]:
        """The updates a fork (:mod:`cooplab.runs.fork`) makes to ``state``, its parent's state at the
        end of a round, so that the rounds after it run under the fork's config ``new`` instead of
        the parent's ``old`` (both typed, as every hook's) (e.g. parameters the state carries). Default: none, and a
        change of
        ``params`` is refused (one-line :class:`~cooplab.limits.ConfigError`): a task whose state
        holds its parameters must say how they change."""
        if old.params != new.params:
            from cooplab.limits import ConfigError

            raise ConfigError(
                f"{self.name} runs cannot change their parameters at a fork yet (only the model or the prompt variant)"
            )
        return {}

    def budget_resume_point(self, history: Any) -> Any:
        """The checkpoint a run that ended ``budget_exhausted`` continues from once its budget is
        raised: one of ``history`` (the graph's state snapshots, newest first), or None for the last
        one (default: a society's failed node runs again). A task that records a budget stop in its
        state instead of failing the node returns the snapshot from before that node (the run then
        forks there: a copy of it becomes the last checkpoint)."""
        return None

    def progress(self, update: Mapping[str, Any]) -> dict[str, Any]:
        """Extra progress-bar fields from the update of :attr:`round_node` (e.g. societies running)."""
        active = update.get("active")
        return {} if active is None else {"running": int(active.sum())}

    # --- results ---------------------------------------------------------------------------
    def outputs(
        self, final: Mapping[str, Any], config: TaskConfig, run: RunInfo
    ) -> runfiles.Results | Mapping[str, Any]:
        """*Required*: write the task's tables and figures into ``run.out`` from the final state and
        return the task's results: an instance of :attr:`Results` (a plain mapping is validated
        through it; a mapping may also set ``seed``). The runner writes them into summary.json
        beside its own fields, after validating the whole file (a field outside its model is a
        one-line error naming it). Called also for a run that stopped early or failed
        (``run.status``), with the state of its last checkpoint."""
        raise NotImplementedError

    def figure(self, summary: RunSummary[Any], run: RunInfo) -> None:
        """Draw ``figures/run.png`` (optional; an error here never loses the run). ``summary.results``
        is the task's :attr:`Results`."""

    def report(self, summary: RunSummary[Any]) -> list[str]:
        """The lines printed for a person after a run (``--json`` prints summary.json instead);
        ``summary.results`` is the task's :attr:`Results`."""
        return [f"{self.name}: status {summary.status}"]

    # --- the run explorer (cooplab view) -----------------------------------------------------
    def explore(self, run: Any, query: Mapping[str, str]) -> list[Any] | None:
        """The sections of this run's page in the explorer (``cooplab view``, and the file of
        ``cooplab report``): a list of :class:`cooplab.graphs.explore.Section` (plain data blocks,
        rendered and escaped by the explorer; the generic sections follow them: summary and costs,
        config, tables, figures, notes, traces, files; unless :attr:`explore_whole_page`, when the list
        is the whole page), or None to use the explorer's generic page alone. The built-in worlds'
        pages live in their folders (``tasks/<world>/explore.py``).

        ``run`` is a :class:`cooplab.evals.explorer.runs.RunDir` (``.out``, ``.config``, ``.summary``,
        ``.table(name)`` returning None when a table is absent or damaged, ``.notes`` to add a
        line about something damaged); ``query`` the page's query parameters (hostile text:
        validate before use; e.g. ``agent``, ``round``), which :class:`~cooplab.graphs.explore.Link`
        blocks set. Must never raise on a partial or damaged run: show what is there and a
        :class:`~cooplab.graphs.explore.Note` (an exception is caught and shown as a note)."""
        return None

    def key_numbers(self, summary: RunSummary[Any]) -> dict[str, Any] | None:
        """The few numbers that tell this run apart in the explorer's list and comparison (e.g.
        survival time, accuracy, cost), from its summary (validated: ``summary.results`` is the
        task's :attr:`Results`; ``summary.as_json()`` is summary.json's JSON), or None for the explorer's
        default (the summary's top-level numbers)."""
        return None

    def analyze_sweep(
        self, cells: list[dict[str, Any]], out: Path, *, analysis_out: Path | None = None
    ) -> dict[str, Any] | None:
        """After a sweep of this task (:mod:`cooplab.runs.grid`): analyze its finished cells (each
        ``{"dir", "labels"}``) into files under ``out`` (``analysis_out``: where the caller asked for
        them) and return fields for the sweep's result (where they are). Default: nothing."""
        return None

    def earlier_sweep(
        self, raw: Mapping[str, Any]
    ) -> Converter | tuple[str, Callable[[dict[str, Any], str], dict[str, Any]]] | None:
        """When a sweep file's JSON object ``raw`` is in an earlier sweep format of this task (one from
        before the grid format of :mod:`cooplab.runs.grid`): its :class:`~cooplab.graphs.formats.Converter`
        (``reads``: the format's name for the notice, e.g. "CPR sweep"; ``convert(raw, where)``: the grid
        format's JSON object, checked, a one-line :class:`~cooplab.limits.ConfigError` otherwise). A pair
        (name, convert) is read the same way. None (default): not one of this task's. The engine's
        :mod:`cooplab.runs.migrate` asks every task and drives the converter; the format's code stays in
        the world's folder (``tasks/cpr/sweep_format.py``)."""
        return None

    def params_table(self) -> list[dict[str, Any]]:
        """Rows (name, default, meaning, source) for ``cooplab params NAME``: every field of
        :attr:`Params` (of each of its ``variants``, with the variant's key, e.g. ``game``)."""
        if self.Params is None:
            return []
        variants = getattr(self.Params, "variants", None)
        if isinstance(variants, Mapping):
            key = getattr(self.Params, "variant_key", "variant")
            return [
                {key: name, **row}
                for name, model in variants.items()
                for row in fields_table(model)
                if row["name"] != key
            ]
        return fields_table(self.Params)


def fields_table(model: type[BaseModel]) -> list[dict[str, Any]]:
    """Rows (name, default, meaning, source) of a pydantic model's fields (a field's ``source``: its
    ``json_schema_extra["source"]``; a nested model's fields as ``field.sub``)."""
    rows = []
    for name, f in model.model_fields.items():
        default = f.get_default(call_default_factory=True)
        extra = f.json_schema_extra if isinstance(f.json_schema_extra, dict) else {}
        source = str(extra.get("source", "task"))
        if isinstance(default, BaseModel):
            rows += [
                {**row, "name": f"{name}.{row['name']}", "source": source if row["source"] == "task" else row["source"]}
                for row in fields_table(type(default))
            ]
            continue
        rows.append({"name": name, "default": default, "meaning": f.description or "", "source": source})
    return rows
