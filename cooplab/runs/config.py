"""One run configuration for every entry point: the command line, a sweep, Python and resume.

:class:`RunConfig` names what a run is: the task, who decides (``agents``), the seed, whether
tables are CSV, the task's own settings (``params``), the LLM settings and the sandbox settings.
A run's ``config.json`` is a RunConfig written out (:meth:`RunConfig.to_config`), plus ``record``:
what was noted when the run started (code version, time, environment, a dataset's hash).

Two ways in:

- **options**: the task's run options as keywords (``n_agents=3, rounds=5``, the keywords of its
  :meth:`~cooplab.graphs.task.Task.options`, the same as ``cooplab run TASK``'s flags), resolved
  into ``params`` by the task;
- **params**: the stored settings themselves, as in a config.json (``RunConfig.load(path)``), to
  run a configuration again or to resume one.

Every value is checked by one set of rules (:mod:`cooplab.limits`, the task's own checks, the model
and cache checks of :class:`~cooplab.agents.settings.LLMSettings`); the first bad value is a
one-line :class:`~cooplab.limits.ConfigError`, with the same message whatever the entry point, and
nothing has been written yet. Files written by older code are upgraded on reading
(:func:`cooplab.graphs.rundir.upgrade_config`).
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cooplab.agents.models.errors import MissingAPIKey
from cooplab.extras import MissingExtra
from cooplab.agents.settings import LLMSettings, parse_agent_models
from cooplab.graphs import prompts, rundir
from cooplab.graphs.task import Task, TaskConfigError, first_error
from cooplab.limits import ConfigError, check, one_line, parse_json, show


class SandboxSettings(BaseModel):
    """Where the science teams' ``run_code`` runs (tasks that use the sandbox)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    backend: str = Field("docker", description="docker (isolated; never falls back) or local (no isolation, by name only).")
    timeout: float = Field(30.0, description="Seconds one run_code call may take.")
    rate: float = Field(0.0, description="USD per second of sandbox time charged to the ledger (0: recorded, free).")

    def checked(self, name: Any = None) -> "SandboxSettings":
        """These settings with every value checked (``name(field)``: how to call it; default the CLI flag)."""
        label = name or (lambda key: f"--sandbox-{key}")
        if self.backend not in ("docker", "local"):
            raise ConfigError(f"{label('backend')} must be docker or local, got {show(self.backend)}")
        check(label("timeout"), self.timeout, "sandbox-timeout")
        check(label("rate"), self.rate, "sandbox-rate")
        return self

    @classmethod
    def from_file(cls, raw: Any, where: str) -> "SandboxSettings":
        if not isinstance(raw, dict):
            raise ConfigError(f"{where} must be an object with backend, timeout and rate, got {show(raw)}")
        unknown = sorted(set(raw) - set(cls.model_fields))
        if unknown:
            raise ConfigError(f"{where}: unknown field {unknown[0]!r}; use {', '.join(cls.model_fields)}")
        if not isinstance(raw.get("backend", "docker"), str):
            raise ConfigError(f"{where}.backend must be docker or local, got {show(raw.get('backend'))}")
        for key, rule in (("timeout", "sandbox-timeout"), ("rate", "sandbox-rate")):
            if key in raw:
                check(f"{where}.{key}", raw[key], rule)
        return cls.model_validate(raw, strict=False).checked(lambda key: f"{where}.{key}")


#: keyword arguments of :func:`cooplab.run` that are LLM settings (CLI flag spellings kept where they differ)
LLM_KEYWORDS = set(LLMSettings.model_fields) | {"agent_model"}
#: keyword arguments that are sandbox settings
SANDBOX_KEYWORDS = {"sandbox_backend": "backend", "sandbox_timeout": "timeout", "sandbox_rate": "rate"}
#: fields of the LLM block every run's config.json names (older runs may lack the others)
_LLM_REQUIRED = {"model", "temperature", "max_tokens", "max_concurrency", "price_in", "price_out", "cache"}


class RunConfig(BaseModel):
    """A run: the task, who decides (``agents``: rule or llm; default the task's first kind), the
    seed, whether tables are CSV, the task's settings (either ``options``, the keywords of its
    :meth:`~cooplab.graphs.task.Task.options`, or ``params``, the settings as config.json stores
    them), the LLM and sandbox settings, and ``record`` (noted when a run starts; not a setting)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    version: int = rundir.CONFIG_VERSION
    task: str
    agents: str | None = None
    seed: int = 0
    csv: bool = False
    options: dict[str, Any] = Field(default_factory=dict)
    params: dict[str, Any] | None = None
    llm: LLMSettings | None = None
    sandbox: SandboxSettings | None = None
    record: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def from_keywords(cls, task: str, /, **kw: Any) -> "RunConfig":
        """A RunConfig from flat keywords, as :func:`cooplab.run` takes them: LLM settings
        (``model=``, ``budget=`` ...), sandbox settings (``sandbox_timeout=`` ...), the common fields,
        ``params=`` (stored settings) and everything else the task's own options (a task option may
        be called ``task``, as science's is: ``task`` here is positional)."""
        llm = {k: kw.pop(k) for k in list(kw) if k in LLM_KEYWORDS}
        if "agent_model" in llm:  # the CLI's repeatable --agent-model AGENT=MODEL
            llm["agent_models"] = parse_agent_models(llm.pop("agent_model") or [])
        sandbox = {SANDBOX_KEYWORDS[k]: kw.pop(k) for k in list(kw) if k in SANDBOX_KEYWORDS}
        common = {k: kw.pop(k) for k in list(kw) if k in ("agents", "seed", "csv", "params")}
        try:
            return cls(task=task, options=kw, llm=LLMSettings(**llm) if llm else None,
                       sandbox=SandboxSettings(**sandbox) if sandbox else None, **common)
        except ValidationError as exc:
            raise ConfigError(first_error(exc)) from None

    @classmethod
    def load(cls, source: str | Path | dict[str, Any], *, where: str | None = None) -> "RunConfig":
        """A stored configuration (a run directory, its config.json, or the parsed object), upgraded
        from older versions and checked like a resumed run's (one-line ConfigError). Run it again
        with ``cooplab.run(RunConfig.load(path), out=...)``."""
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
        config = check_stored(raw, where)
        return cls(**{k: v for k, v in config.items() if k not in ("llm", "sandbox")},
                   llm=None if config["llm"] is None else LLMSettings.model_validate(config["llm"], strict=False),
                   sandbox=None if config["sandbox"] is None else SandboxSettings.model_validate(config["sandbox"], strict=False))

    def to_config(self, task: Task | None = None) -> dict[str, Any]:
        """The run's config.json: every value checked by its rule, nothing written."""
        from cooplab.runs import registry

        task = task or registry.get(self.task)
        agents = self.agents or task.agent_kinds[0]
        if agents not in task.agent_kinds:
            raise ConfigError(f"--agents must be {' or '.join(task.agent_kinds)}, got {agents!r}")
        check("--seed", self.seed, "seed")
        if self.params is not None:
            if self.options:
                raise ConfigError(f"give the task's options or its stored params, not both (options: {', '.join(sorted(self.options))})")
            fields: dict[str, Any] = {"params": self.params}
            try:
                task.check_config({"task": task.name, "agents": agents, "seed": self.seed, "params": self.params,
                                   "llm": {"model": (self.llm or LLMSettings()).model}})
            except TaskConfigError as exc:
                raise ConfigError(f"params: {exc}" if not str(exc).startswith("params") else str(exc)) from None
            except ValidationError as exc:
                raise ConfigError(f"params.{first_error(exc)}") from None
        else:
            _check_keywords(task, self.options)
            fields = task.options(agents, **self.options)
        llm = self.llm if self.llm is not None else LLMSettings()
        sandbox = self.sandbox if self.sandbox is not None else SandboxSettings()
        config = build_config(task, fields, agents=agents, seed=self.seed, csv=self.csv, llm=llm, sandbox=sandbox)
        config["record"] = {**config["record"], **self.record}
        return config


def _check_keywords(task: Task, options: dict[str, Any]) -> None:
    """Unknown task options are one line naming the ones there are (not a TypeError)."""
    params = inspect.signature(task.options).parameters
    known = [p for p in params if p != "agents" and params[p].kind is inspect.Parameter.KEYWORD_ONLY]
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ConfigError(f"task {task.name!r} has no option {unknown[0]!r}; its options are {', '.join(known) or 'none'} "
                          f"(and the common ones: agents, seed, csv, params, the LLM settings {', '.join(sorted(LLMSettings.model_fields))}, "
                          f"sandbox_backend, sandbox_timeout, sandbox_rate)")


def with_task_defaults(task: Task, llm: LLMSettings) -> LLMSettings:
    """``llm`` with the task's own output cap (:attr:`~cooplab.graphs.task.Task.default_max_tokens`)
    when the run did not set ``max_tokens`` itself."""
    if task.default_max_tokens is None or "max_tokens" in llm.model_fields_set:
        return llm
    return llm.model_copy(update={"max_tokens": task.default_max_tokens})


def build_config(task: Task, fields: dict[str, Any], *, agents: str, seed: int, csv: bool, llm: LLMSettings,
                 sandbox: SandboxSettings) -> dict[str, Any]:
    """config.json from what a task's :meth:`~cooplab.graphs.task.Task.options` returned (``params``;
    optionally ``agents`` when an option picks the kind, ``model_override`` when one fixes the
    model, ``record``) and the common settings: the LLM block only for LLM agents, the sandbox block
    for tasks that use the sandbox."""
    unknown = sorted(set(fields) - {"params", "agents", "model_override", "record"})
    if unknown or not isinstance(fields.get("params"), dict):
        raise TypeError(f"task {task.name!r}: options() must return {{'params': {{...}}}} (and optionally agents, model_override, "
                        f"record), got keys {sorted(fields)}")
    agents = fields.get("agents", agents)
    if agents not in task.agent_kinds:  # a task's options may choose the kind (e.g. game --players llm)
        raise ConfigError(f"--agents must be {' or '.join(task.agent_kinds)}, got {agents!r}")
    config: dict[str, Any] = {"version": rundir.CONFIG_VERSION, "task": task.name, "agents": agents, "seed": seed, "csv": csv,
                              "params": fields["params"], "llm": None, "sandbox": None, "record": dict(fields.get("record") or {})}
    if agents == "llm":
        llm = with_task_defaults(task, llm)
        override = fields.get("model_override")  # a task option that fixes the model (e.g. science --team oracle)
        if override is not None:
            llm = llm.model_copy(update={"model": override, "agent_models": {}})
        llm = _mixed(llm, task.n_agents(config), seed, fields["params"].get("invader"))
        config["llm"] = llm.checked(task.n_agents(config)).model_dump(mode="json")
        prompts.check(task, llm.prompt_variant)
        check_run_models(task, config, _cli_label)
    if task.uses_sandbox:
        config["sandbox"] = sandbox.checked().model_dump(mode="json")
    return config


def _mixed(llm: LLMSettings, n_agents: int, seed: int, invader: Any) -> LLMSettings:
    """A mix drawn into per-agent models, and an invader of another model as a model switch
    (:mod:`cooplab.agents.mix`); unchanged without either."""
    from cooplab.agents import mix

    llm = mix.resolve(llm, n_agents, seed, "--model-mix")
    if isinstance(invader, dict) and invader.get("kind") == "model":
        llm = llm.model_copy(update={"model_from": {**llm.model_from, f"{invader['agent']}@{invader['round']}": invader["model"]}})
    return llm


def check_run_models(task: Task, config: dict[str, Any], label: Any) -> None:
    """The models an LLM run calls besides its agents' own checks: every ``scripted:FILE`` agent
    model answers each phase the task asks (:meth:`~cooplab.graphs.task.Task.llm_phases`), and the
    task's other models (:meth:`~cooplab.graphs.task.Task.other_models`, e.g. science's judge) are
    checked like ``--model`` (spec, file, API key) on the run's endpoint. ``label(who, field)``:
    how a model is called in the one-line ConfigError (who: "default", an agent number or the
    other model's option; field: its place in config.json)."""
    from cooplab.agents.models.factory import check_model

    llm = LLMSettings.model_validate(config["llm"], strict=False)
    phases = task.llm_phases(config)
    if phases:
        for who, text in llm.models().items():
            if text.startswith("scripted:"):
                check_model(text, llm.base_url, label(who, "llm.model" if who == "default" else f"llm.agent_models[{who!r}]"),
                            phases=phases)
    for option, field, text, asked in task.other_models(config):
        check_model(text, llm.base_url, label(option, field), phases=asked)


def _cli_label(who: str, field: str) -> str:
    """A model as the command line names it (--model, --agent-model N, or the task's own option)."""
    return "--model" if who == "default" else f"--agent-model {who}" if who.isdigit() else who


def check_stored(raw: Any, where: str, task: Task | None = None) -> dict[str, Any]:
    """A stored config.json (any version) upgraded and checked, every value by the rules that wrote
    it: the common fields here, the task's by ``task.check_config``, the LLM and sandbox blocks by
    their models. Returns the config in the current shape (a one-line ConfigError otherwise)."""
    from cooplab.runs import registry

    config = rundir.upgrade_config(raw)
    if not isinstance(config, dict):
        raise ConfigError(f"{where} must be a JSON object, got {show(config)}")
    if config.get("version") != rundir.CONFIG_VERSION:
        raise ConfigError(f"{where}: version {show(config.get('version'))} is not one this cooplab reads "
                          f"(it writes version {rundir.CONFIG_VERSION}); upgrade cooplab")
    unknown = sorted(set(config) - set(rundir.CONFIG_FIELDS))
    if unknown:
        raise ConfigError(f"{where}: unknown field {unknown[0]!r}; a config.json has {', '.join(rundir.CONFIG_FIELDS)}")
    if task is None:
        try:
            task = registry.get(config.get("task"))
        except registry.UnknownTask as exc:
            raise ConfigError(f"{where}: {exc}") from None
    if config.get("agents") not in task.agent_kinds:
        raise ConfigError(f"{where}: agents must be one of {', '.join(task.agent_kinds)}, got {show(config.get('agents'))}")
    check(f"{where}: seed", config.get("seed"), "seed")
    if not isinstance(config.get("csv", False), bool):
        raise ConfigError(f"{where}: csv must be true or false, got {show(config.get('csv'))}")
    if not isinstance(config.get("record", {}), dict):
        raise ConfigError(f"{where}: record must be an object, got {show(config.get('record'))}")
    config = {**config, "csv": config.get("csv", False), "record": config.get("record", {}), "llm": config.get("llm"),
              "sandbox": config.get("sandbox")}
    try:
        task.check_config(config)
    except (MissingAPIKey, MissingExtra) as exc:  # not the file's fault: kept apart (see config_for_resume)
        raise type(exc)(f"{where}: {exc}") from None
    except (TaskConfigError, ConfigError) as exc:
        raise ConfigError(f"{where}: {exc}") from None
    except ValidationError as exc:
        raise ConfigError(f"{where}: params.{first_error(exc)}") from None
    if config["agents"] == "llm":
        llm = LLMSettings.from_file(config["llm"], f"{where}: llm", required=_LLM_REQUIRED)
        config["llm"] = llm.checked(task.n_agents(config), name=lambda key: f"{where}: llm.{key}").model_dump(mode="json")
        prompts.check(task, llm.prompt_variant, f"{where}: llm.prompt_variant")
        check_run_models(task, config, lambda who, field: f"{where}: {field}")
    elif config["llm"] is not None:
        raise ConfigError(f"{where}: llm must be null for agents {config['agents']!r}, got {show(config['llm'])}")
    if task.uses_sandbox:
        config["sandbox"] = SandboxSettings.from_file(config["sandbox"] if config["sandbox"] is not None else {},
                                                      f"{where}: sandbox").model_dump(mode="json")
    return config
