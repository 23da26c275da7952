"""One run configuration for every entry point: the command line, a sweep, Python and resume.

:class:`RunConfig` names what a run is: the task, who decides (``agents``), the seed, whether
tables are CSV, the task's own settings (``params``), the LLM settings and the sandbox settings.
A run's ``config.json`` is a resolved RunConfig written out (:meth:`RunConfig.to_json`), with
``record``: what was noted when the run started (code version, time, environment, a dataset's hash).

Three ways in:

- **options**: the task's run options as keywords (``n_agents=3, rounds=5``, the keywords of its
  :meth:`~cooplab.graphs.task.Task.options`, the same as ``cooplab run TASK``'s flags), resolved
  into ``params`` by the task;
- **params**: the task's settings themselves, an instance of its
  :attr:`~cooplab.graphs.task.Task.Params` or the object a config.json stores;
- **a stored config**: ``RunConfig.load(path)`` reads a run directory's config.json (any version)
  back into a resolved RunConfig, to run it again or to resume it.

:meth:`RunConfig.resolve` turns any of them into the one typed configuration every task hook
receives: ``params`` an instance of the task's ``Params``, ``agents`` set, ``llm`` the resolved
:class:`~cooplab.agents.settings.LLMSettings` (None without LLM agents), ``sandbox`` the
:class:`SandboxSettings` (None for a task without the sandbox). Every number is checked by the
rule its field carries (:data:`cooplab.limits.RULES`), every other value by its model's own
validators, and the first bad one is a one-line :class:`~cooplab.limits.ConfigError`
(:func:`cooplab.limits.explain`) naming it as the entry point spells it: the option on the command
line (``--budget``), the keyword in Python (``budget``), the field of a file
(``config.json: llm.budget``); nothing has been written yet. Files written by older code are
upgraded on reading (:func:`cooplab.graphs.formats.upgrade_config`; ``cooplab migrate`` rewrites them).
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Annotated, Any, Callable, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, field_serializer, field_validator

from cooplab.agents.models.errors import MissingAPIKey
from cooplab.agents.settings import CLI_NAMES, LLMSettings, parse_agent_models
from cooplab.extras import MissingExtra
from cooplab.graphs import prompts, rundir
from cooplab.graphs.task import Task, TaskConfigError
from cooplab.limits import RULES, ConfigError, flags, in_file, one_line, parse_json, show, validate


class SandboxSettings(BaseModel):
    """Where the science teams' ``run_code`` runs (tasks that use the sandbox)."""

    model_config = ConfigDict(extra="forbid")

    backend: Literal["docker", "local"] = Field(
        default="docker", description="docker (isolated; never falls back) or local (no isolation, by name only)."
    )
    timeout: Annotated[float, RULES["sandbox-timeout"]] = Field(
        default=30.0, description="Seconds one run_code call may take."
    )
    rate: Annotated[float, RULES["sandbox-rate"]] = Field(
        default=0.0, description="USD per second of sandbox time charged to the ledger (0: recorded, free)."
    )


#: keyword arguments of :func:`cooplab.run` that are LLM settings (CLI flag spellings kept where they differ)
LLM_KEYWORDS = set(LLMSettings.model_fields) | {"agent_model"}
#: keyword arguments that are sandbox settings
SANDBOX_KEYWORDS = {"sandbox_backend": "backend", "sandbox_timeout": "timeout", "sandbox_rate": "rate"}
#: fields of the LLM block every run's config.json names (older runs may lack the others)
_LLM_REQUIRED = {"model", "temperature", "max_tokens", "max_concurrency", "price_in", "price_out", "cache"}


def _cli_name(loc: tuple) -> str:
    """A setting of a RunConfig as the command line names it: ``--seed``, the LLM settings' own options
    (``--budget``, ``--agent-model``), ``--sandbox-timeout``."""
    if loc and loc[0] == "llm":
        return flags(CLI_NAMES)(loc[1:])
    if loc and loc[0] == "sandbox":
        return flags(rest=lambda f: f"--sandbox-{f}")(loc[1:])
    return flags()(loc)


class RunConfig(BaseModel):
    """A run: the task, who decides (``agents``: rule or llm; default the task's first kind), the
    seed, whether tables are CSV, the task's settings (either ``options``, the keywords of its
    :meth:`~cooplab.graphs.task.Task.options`, or ``params``, its ``Params`` or the object
    config.json stores), the LLM and sandbox settings, and ``record`` (noted when a run starts; not
    a setting). Resolved (:meth:`resolve`), it is what every hook of the task receives."""

    model_config = ConfigDict(extra="forbid")

    version: Literal[rundir.CONFIG_VERSION] = rundir.CONFIG_VERSION  # type: ignore[valid-type]
    task: StrictStr
    agents: StrictStr | None = None
    seed: Annotated[int, RULES["seed"]] = 0
    csv: StrictBool = False
    options: dict[str, Any] = Field(default_factory=dict)
    params: Any = None
    llm: LLMSettings | None = None
    sandbox: SandboxSettings | None = None
    record: dict[str, Any] = Field(default_factory=dict)

    @field_validator("params")
    @classmethod
    def _params(cls, value: Any) -> Any:
        if value is None or isinstance(value, BaseModel):
            return value
        if isinstance(value, dict):
            return dict(value)
        raise ValueError(f"params must be the task's Params or a JSON object of its settings, got {show(value)}")

    @field_serializer("params")
    def _dump_params(self, value: Any, info: Any) -> Any:
        return value.model_dump(mode=info.mode) if isinstance(value, BaseModel) else value

    @property
    def resolved(self) -> bool:
        """Whether this is a resolved configuration (:meth:`resolve`): typed params, agents set, no options."""
        return isinstance(self.params, BaseModel) and self.agents is not None and not self.options

    @classmethod
    def from_keywords(cls, task: str, /, **kw: Any) -> "RunConfig":
        """A RunConfig from flat keywords, as :func:`cooplab.run` takes them: LLM settings
        (``model=``, ``budget=`` ...), sandbox settings (``sandbox_timeout=`` ...), the common fields,
        ``params=`` (the task's settings) and everything else the task's own options (a task option
        may be called ``task``, as science's is: ``task`` here is positional)."""
        llm = {k: kw.pop(k) for k in list(kw) if k in LLM_KEYWORDS}
        if "agent_model" in llm:  # the CLI's repeatable --agent-model AGENT=MODEL
            llm["agent_models"] = parse_agent_models(llm.pop("agent_model") or [])
        sandbox = {SANDBOX_KEYWORDS[k]: kw.pop(k) for k in list(kw) if k in SANDBOX_KEYWORDS}
        common = {k: kw.pop(k) for k in list(kw) if k in ("agents", "seed", "csv", "params")}
        fields = {"task": task, "options": kw, **common}
        if llm:
            fields["llm"] = validate(LLMSettings, llm, flags(CLI_NAMES))
        if sandbox:
            fields["sandbox"] = validate(SandboxSettings, sandbox, flags(rest=lambda f: f"--sandbox-{f}"))
        return validate(cls, fields, _cli_name)

    @classmethod
    def load(cls, source: str | Path | dict[str, Any], *, where: str | None = None) -> "RunConfig":
        """A stored configuration (a run directory, its config.json, or the parsed object), upgraded
        from older versions and checked like a resumed run's (one-line ConfigError), resolved. Run it
        again with ``cooplab.run(RunConfig.load(path), out=...)``."""
        if isinstance(source, dict):
            raw, where = source, where or "config"
        else:
            path = Path(source)
            path = path / "config.json" if path.is_dir() else path
            where = where or str(path)
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise ConfigError(f"cannot read {path}: {one_line(getattr(exc, 'strerror', None) or exc)}") from None
            raw = parse_json(text, str(path))
        return check_stored(raw, where)

    def resolve(self, task: Task | None = None) -> "RunConfig":
        """This configuration resolved for a run of ``task`` (default: the registered task named
        :attr:`task`): the task's options (or stored settings) turned into its typed ``Params``, the
        kind of agents chosen, the LLM settings resolved (models, prices, cache; None without LLM
        agents), the sandbox settings (None for a task without the sandbox). Every value is
        checked; nothing is written. A resolved configuration comes back checked again, the same."""
        from cooplab.runs import registry

        task = task or registry.get(self.task)
        agents = self.agents or task.agent_kinds[0]
        if agents not in task.agent_kinds:
            raise ConfigError(f"--agents must be {' or '.join(task.agent_kinds)}, got {agents!r}")
        if self.params is not None:
            if self.options:
                raise ConfigError(
                    f"give the task's options or its params, not both (options: {', '.join(sorted(self.options))})"
                )
            raw = self.params.model_dump(mode="json") if isinstance(self.params, BaseModel) else self.params
            fields: dict[str, Any] = {
                "params": task_params(task, raw, agents, flags(rest=lambda f: f"params.{f}"), stored=True)
            }
        else:
            _check_keywords(task, self.options)
            fields = task.options(agents, **self.options)
        llm = self.llm if self.llm is not None else LLMSettings()
        sandbox = self.sandbox if self.sandbox is not None else SandboxSettings()
        config = build_config(task, fields, agents=agents, seed=self.seed, csv=self.csv, llm=llm, sandbox=sandbox)
        if self.record:
            config.record.update(self.record)
        return config

    def to_json(self) -> dict[str, Any]:
        """The run's config.json (a resolved configuration; :meth:`to_config` resolves it first)."""
        if not self.resolved:
            raise ValueError(
                "only a resolved RunConfig is written to config.json: call resolve() first (or to_config())"
            )
        return self.model_dump(mode="json", exclude={"options"})

    def to_config(self, task: Task | None = None) -> dict[str, Any]:
        """The run's config.json: every value checked, nothing written."""
        return (self if self.resolved and task is None else self.resolve(task)).to_json()

    def with_record(self, **fields: Any) -> "RunConfig":
        """A copy with ``fields`` added to :attr:`record`."""
        return self.model_copy(update={"record": {**self.record, **fields}})


def task_params(task: Task, raw: Any, agents: str, name: Callable[[tuple], str], *, stored: bool = False) -> BaseModel:
    """The task's settings ``raw`` (a JSON object) validated into its :attr:`~cooplab.graphs.task.Task.Params`,
    or a one-line ConfigError naming the setting by ``name(loc)``. The validators see the kind of
    agents and whether the settings were stored (``info.context``: ``{"agents", "stored"}``; a
    stored config.json may predate a setting, and the model fills in what that older run did)."""
    if task.Params is None:
        from cooplab.graphs.task import NoParams

        return NoParams()
    return validate(task.Params, raw, name, context={"agents": agents, "stored": stored})


def _check_keywords(task: Task, options: dict[str, Any]) -> None:
    """Unknown task options are one line naming the ones there are (not a TypeError)."""
    params = inspect.signature(task.options).parameters
    known = [p for p in params if p != "agents" and params[p].kind is inspect.Parameter.KEYWORD_ONLY]
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ConfigError(
            f"task {task.name!r} has no option {unknown[0]!r}; its options are {', '.join(known) or 'none'} "
            "(and the common ones: agents, seed, csv, params, the LLM settings "
            f"{', '.join(sorted(LLMSettings.model_fields))}, "
            f"sandbox_backend, sandbox_timeout, sandbox_rate)"
        )


def with_task_defaults(task: Task, llm: LLMSettings) -> LLMSettings:
    """``llm`` with the task's own output cap (:attr:`~cooplab.graphs.task.Task.default_max_tokens`)
    when the run did not set ``max_tokens`` itself."""
    if task.default_max_tokens is None or "max_tokens" in llm.model_fields_set:
        return llm
    return llm.model_copy(update={"max_tokens": task.default_max_tokens})


def build_config(
    task: Task, fields: dict[str, Any], *, agents: str, seed: int, csv: bool, llm: LLMSettings, sandbox: SandboxSettings
) -> RunConfig:
    """The resolved configuration of a new run from what a task's :meth:`~cooplab.graphs.task.Task.options`
    returned (``params``: its ``Params``, or their JSON object; optionally ``agents`` when an option
    picks the kind, ``record``) and the common settings: the LLM settings resolved only for LLM
    agents (with the model the task fixes, :meth:`~cooplab.graphs.task.Task.fixed_model`), the
    sandbox settings for tasks that use the sandbox."""
    unknown = sorted(set(fields) - {"params", "agents", "record"})
    if unknown or not isinstance(fields.get("params"), (dict, BaseModel)):
        raise TypeError(
            f"task {task.name!r}: options() must return {{'params': Params}} (and optionally agents, record), "
            f"got keys {sorted(fields)}"
        )
    agents = fields.get("agents", agents)
    if agents not in task.agent_kinds:  # a task's options may choose the kind (e.g. game --players llm)
        raise ConfigError(f"--agents must be {' or '.join(task.agent_kinds)}, got {agents!r}")
    params = fields["params"]
    if not isinstance(params, BaseModel) or (
        task.Params is not None and not isinstance(params, task_params_types(task))
    ):
        params = task_params(
            task,
            params.model_dump(mode="json") if isinstance(params, BaseModel) else params,
            agents,
            flags(rest=lambda f: f"params.{f}"),
        )
    config = RunConfig(
        task=task.name,
        agents=agents,
        seed=seed,
        csv=csv,
        params=params,
        llm=None,
        sandbox=None,
        record=dict(fields.get("record") or {}),
    )
    if agents == "llm":
        llm = with_task_defaults(task, llm)
        fixed = task.fixed_model(config)  # a setting that fixes the model (e.g. science --team oracle)
        if fixed is not None:
            llm = llm.model_copy(update={"model": fixed, "agent_models": {}})
        config.llm = llm
        n_agents = task.n_agents(config)
        invader = getattr(config.params, "invader", None)  # an invader of another model is a model switch
        config.llm = _mixed(llm, n_agents, seed, invader.as_dict() if invader is not None else None)
        config.llm = config.llm.resolve(n_agents)
        prompts.check(task, config.llm.prompt_variant)
        check_run_models(task, config, _cli_label)
    if task.uses_sandbox:
        config.sandbox = sandbox
    return config


def task_params_types(task: Task) -> tuple[type, ...]:
    """The classes a resolved run's ``params`` may be of: the task's Params, or one of its variants
    (a Params that picks its model by a setting, as the game's does by ``game``)."""
    if task.Params is None:  # a task without Params: no class (callers ask only of a task with one)
        return ()
    variants = getattr(task.Params, "variants", None)
    return (task.Params, *variants.values()) if isinstance(variants, dict) else (task.Params,)


def _mixed(llm: LLMSettings, n_agents: int, seed: int, invader: Any) -> LLMSettings:
    """A mix drawn into per-agent models, and an invader of another model as a model switch
    (:mod:`cooplab.agents.mix`); unchanged without either."""
    from cooplab.agents import mix

    llm = mix.resolve(llm, n_agents, seed, "--model-mix")
    if isinstance(invader, dict) and invader.get("kind") == "model":
        llm = llm.model_copy(
            update={"model_from": {**llm.model_from, f"{invader['agent']}@{invader['round']}": invader["model"]}}
        )
    return llm


def check_run_models(task: Task, config: RunConfig, label: Any) -> None:
    """The models an LLM run calls besides its agents' own checks: every ``scripted:FILE`` agent
    model answers each phase the task asks (:meth:`~cooplab.graphs.task.Task.llm_phases`), and the
    task's other models (:meth:`~cooplab.graphs.task.Task.other_models`, e.g. science's judge) are
    checked like ``--model`` (spec, file, API key) on the run's endpoint. ``label(who, field)``:
    how a model is called in the one-line ConfigError (who: "default", an agent number or the
    other model's option; field: its place in config.json)."""
    from cooplab.agents.models.factory import check_model

    llm = config.llm
    assert llm is not None, "check_run_models is for an LLM run (its configuration has the LLM settings)"
    phases = task.llm_phases(config)
    if phases:
        for who, text in llm.models().items():
            if text.startswith("scripted:"):
                check_model(
                    text,
                    llm.base_url,
                    label(who, "llm.model" if who == "default" else f"llm.agent_models[{who!r}]"),
                    phases=phases,
                )
    for option, field, text, asked in task.other_models(config):
        check_model(text, llm.base_url, label(option, field), phases=asked)


def _cli_label(who: str, field: str) -> str:
    """A model as the command line names it (--model, --agent-model N, or the task's own option)."""
    return "--model" if who == "default" else f"--agent-model {who}" if who.isdigit() else who


def check_stored(raw: Any, where: str, task: Task | None = None) -> RunConfig:
    """A stored config.json (any version) upgraded, checked and read into a resolved RunConfig,
    every value by the rules that wrote it: the common fields by :class:`RunConfig`'s, the task's
    settings by its ``Params``, the LLM and sandbox blocks by their models, each named as the file
    names it (``{where}: llm.budget must be ...``; a one-line ConfigError otherwise)."""
    from cooplab.runs import registry

    config = rundir.upgrade_config(raw)
    if not isinstance(config, dict):
        raise ConfigError(f"{where} must be a JSON object, got {show(config)}")
    if config.get("version") != rundir.CONFIG_VERSION:
        raise ConfigError(
            f"{where}: version {show(config.get('version'))} is not one this cooplab reads "
            f"(it writes version {rundir.CONFIG_VERSION}); upgrade cooplab"
        )
    unknown = sorted(set(config) - set(rundir.CONFIG_FIELDS))
    if unknown:
        raise ConfigError(f"{where}: unknown field {unknown[0]!r}; a config.json has {', '.join(rundir.CONFIG_FIELDS)}")
    if task is None:
        name = config.get("task")
        if not isinstance(name, str):  # a list is not even looked up (it is unhashable)
            raise ConfigError(f"{where}: task must be a task name, got {show(name)}")
        try:
            task = registry.get(name)
        except registry.UnknownTask as exc:
            raise ConfigError(f"{where}: {exc}") from None
    agents = config.get("agents")
    if agents not in task.agent_kinds:
        raise ConfigError(f"{where}: agents must be one of {', '.join(task.agent_kinds)}, got {show(agents)}")
    name = in_file(where)
    common = validate(
        RunConfig,
        {k: config[k] for k in ("version", "task", "seed", "csv", "record") if k in config} | {"agents": agents},
        name,
        strict=False,
    )
    try:
        params = task_params(task, config.get("params"), agents, in_file(where, "params"), stored=True)
    except (MissingAPIKey, MissingExtra) as exc:  # not the file's fault: kept apart (see config_for_resume)
        raise type(exc)(f"{where}: {exc}") from None
    except TaskConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    out = common.model_copy(update={"params": params, "llm": None, "sandbox": None})
    llm = config.get("llm")
    if agents == "llm":
        if not isinstance(llm, dict):
            raise ConfigError(f"{where}: llm must be a JSON object, got {show(llm)}")
        missing = sorted(_LLM_REQUIRED - set(llm))
        if missing:
            raise ConfigError(f"{where}: llm lacks {', '.join(missing)}")
        out.llm = validate(LLMSettings, llm, in_file(where, "llm"), strict=False)
        prompts.check(task, out.llm.prompt_variant, f"{where}: llm.prompt_variant")
        fixed = task.fixed_model(out)
        if fixed is not None and out.llm.model != fixed:
            raise ConfigError(
                f"{where}: llm.model must be {fixed}, the built-in model these params play, got {show(out.llm.model)}"
            )
        out.llm = out.llm.resolve(task.n_agents(out), name=in_file(where, "llm"))
        check_run_models(task, out, lambda who, field: f"{where}: {field}")
    elif llm is not None:
        raise ConfigError(f"{where}: llm must be null for agents {agents!r}, got {show(llm)}")
    if task.uses_sandbox:
        sandbox = config.get("sandbox")
        out.sandbox = validate(
            SandboxSettings, sandbox if sandbox is not None else {}, in_file(where, "sandbox"), strict=False
        )
    return out
