"""One run configuration for every entry point: the command line, a sweep and Python.

:class:`RunConfig` names what a run is (the task, who decides, the seed, the task's own options,
the LLM settings, the sandbox settings); :meth:`RunConfig.to_config` checks every value by its
rule (:mod:`cooplab.limits`, the task's :meth:`~cooplab.graphs.task.Task.options`, the model and
cache checks of :mod:`cooplab.agents.settings`) and returns the run's ``config.json``. The first bad
value is a one-line :class:`~cooplab.limits.ConfigError`, with the same message as on the command
line, and nothing has been written yet.

``cooplab run TASK ...`` builds its config here from its flags, :func:`cooplab.run` from keyword
arguments, and ``cooplab resume`` checks a ``config.json`` with the same rules
(:func:`cooplab.runs.runner.check_run_config`).
"""

from __future__ import annotations

import inspect
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cooplab.agents.settings import LLMSettings, parse_agent_models
from cooplab.graphs.task import Task, first_error
from cooplab.limits import ConfigError


class SandboxSettings(BaseModel):
    """Where the science teams' ``run_code`` runs (tasks that use the sandbox)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    backend: str = Field("docker", description="docker (isolated; never falls back) or local (no isolation, by name only).")
    timeout: float = Field(30.0, description="Seconds one run_code call may take.")
    rate: float = Field(0.0, description="USD per second of sandbox time charged to the ledger (0: recorded, free).")


#: keyword arguments of :func:`cooplab.run` that are LLM settings (CLI flag spellings kept where they differ)
LLM_KEYWORDS = set(LLMSettings.model_fields) | {"agent_model"}
#: keyword arguments that are sandbox settings
SANDBOX_KEYWORDS = {"sandbox_backend": "backend", "sandbox_timeout": "timeout", "sandbox_rate": "rate"}


class RunConfig(BaseModel):
    """A run, before it is checked: the task, who decides (``agents``: rule or llm; default the
    task's first kind), the seed, whether tables are CSV, the task's own options (the keywords of
    its :meth:`~cooplab.graphs.task.Task.options`), and the LLM and sandbox settings."""

    model_config = ConfigDict(extra="forbid", strict=True)

    task: str
    agents: str | None = None
    seed: int = 0
    csv: bool = False
    options: dict[str, Any] = Field(default_factory=dict)
    llm: LLMSettings | None = None
    sandbox: SandboxSettings | None = None

    @classmethod
    def from_keywords(cls, task: str, **kw: Any) -> "RunConfig":
        """A RunConfig from flat keywords, as :func:`cooplab.run` takes them: LLM settings
        (``model=``, ``budget=`` ...), sandbox settings (``sandbox_timeout=`` ...), the common fields,
        and everything else the task's own options."""
        llm = {k: kw.pop(k) for k in list(kw) if k in LLM_KEYWORDS}
        if "agent_model" in llm:  # the CLI's repeatable --agent-model AGENT=MODEL
            llm["agent_models"] = parse_agent_models(llm.pop("agent_model") or [])
        sandbox = {SANDBOX_KEYWORDS[k]: kw.pop(k) for k in list(kw) if k in SANDBOX_KEYWORDS}
        common = {k: kw.pop(k) for k in list(kw) if k in ("agents", "seed", "csv")}
        try:
            return cls(task=task, options=kw, llm=LLMSettings(**llm) if llm else None,
                       sandbox=SandboxSettings(**sandbox) if sandbox else None, **common)
        except ValidationError as exc:
            raise ConfigError(first_error(exc)) from None

    def to_config(self, task: Task | None = None) -> dict[str, Any]:
        """The run's config.json: every value checked by its rule, nothing written."""
        from cooplab.limits import check
        from cooplab.runs import registry

        task = task or registry.get(self.task)
        agents = self.agents or task.agent_kinds[0]
        if agents not in task.agent_kinds:
            raise ConfigError(f"--agents must be {' or '.join(task.agent_kinds)}, got {agents!r}")
        check("--seed", self.seed, "seed")
        _check_keywords(task, self.options)
        fields = task.options(agents, **self.options)
        llm = self.llm if self.llm is not None else LLMSettings()
        sandbox = self.sandbox if self.sandbox is not None else SandboxSettings()
        return build_config(task, fields, agents=agents, seed=self.seed, csv=self.csv, llm=llm, sandbox=sandbox)


def _check_keywords(task: Task, options: dict[str, Any]) -> None:
    """Unknown task options are one line naming the ones there are (not a TypeError)."""
    params = inspect.signature(task.options).parameters
    known = [p for p in params if p != "agents" and params[p].kind is inspect.Parameter.KEYWORD_ONLY]
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ConfigError(f"task {task.name!r} has no option {unknown[0]!r}; its options are {', '.join(known) or 'none'} "
                          f"(and the common ones: agents, seed, csv, the LLM settings {', '.join(sorted(LLMSettings.model_fields))}, "
                          f"sandbox_backend, sandbox_timeout, sandbox_rate)")


def build_config(task: Task, fields: dict[str, Any], *, agents: str, seed: int, csv: bool, llm: LLMSettings,
                 sandbox: SandboxSettings) -> dict[str, Any]:
    """config.json from a task's own fields (:meth:`Task.options`) and the common settings: the LLM
    block only for LLM agents (a task option may pick the kind or fix the model), the sandbox block
    for tasks that use the sandbox."""
    config: dict[str, Any] = {"task": task.name, "agents": agents, **fields, "seed": seed, "csv": csv}
    if config["agents"] not in task.agent_kinds:  # a task's options may choose the kind (e.g. game --players llm)
        raise ConfigError(f"--agents must be {' or '.join(task.agent_kinds)}, got {config['agents']!r}")
    config["llm"] = None
    override = config.pop("model_override", None)  # a task option that fixes the model (e.g. science --team oracle)
    if config["agents"] == "llm":
        if override is not None:
            llm = llm.model_copy(update={"model": override, "agent_models": {}})
        config["llm"] = llm.to_config(task.n_agents(config))
    if task.uses_sandbox:
        if sandbox.backend not in ("docker", "local"):
            raise ConfigError(f"--sandbox-backend must be docker or local, got {sandbox.backend!r}")
        from cooplab.limits import check

        check("--sandbox-timeout", sandbox.timeout, "sandbox-timeout")
        check("--sandbox-rate", sandbox.rate, "sandbox-rate")
        config["sandbox"] = {"backend": sandbox.backend, "timeout": sandbox.timeout}
        if config["llm"] is not None:
            config["llm"]["sandbox_usd_per_second"] = sandbox.rate
    return config
