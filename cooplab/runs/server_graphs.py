"""The built-in tasks as graphs for LangGraph's own server: ``langgraph dev``, the Agent Server API
and Studio load them through ``langgraph.json`` at the repository root (README "Open a graph in
LangGraph Studio").

Each of :func:`cpr`, :func:`diners`, :func:`game` and :func:`science` is a graph factory of the
shape the server calls, ``make_graph(config, runtime)``: it reads the run's settings from the typed
context (``runtime.context``, a :class:`ServerSettings`) or, for a client that only sends a config,
from ``config["configurable"]`` (the context wins), checks them by the rules of ``cooplab run``
(one-line :class:`~cooplab.limits.ConfigError` before anything is written) and compiles, without a
checkpointer (the server brings its own):

    START -> setup -> <task> -> END

* ``setup`` makes the run directory (``$COOPLAB_SERVER_RUNS/<task>-<run id>``, default
  ``runs/langgraph``), writes its config.json and the task's files (e.g. science's dataset) and puts
  the task's initial state into the graph's state;
* ``<task>`` (cpr, diners, game, science) runs the task's own compiled graph as a subgraph, so Studio
  shows and steps through its nodes, with the services the runner would give it (model service
  with cache and ledger, the per-agent sandbox pool) built from the settings; then it writes the
  run's tables, figure and summary.json as ``cooplab run`` does, and puts the summary in the state.

Settings come from whoever can reach the server, so before any other check (those read the files
and open the caches they are given) :func:`check_served` refuses, unless the operator opted in by an
environment variable (:data:`OPT_INS`), the local sandbox backend, a model server the client names,
any file path (``local:`` and ``scripted:`` models, your own data, a cache file) and a paid model
without a budget: one line naming the setting and the variable (docs/langgraph-server.md). Which web
pages reach the server at all is the guard's business (:mod:`cooplab.runs.server_app`).

The same settings and seed give the same numbers as ``cooplab run`` (the same config, initial
state, graph and outputs). The state keeps its numpy arrays: the server's checkpoint serializer
(LangGraph's ``JsonPlusSerializer``) stores them natively and its JSON encoder (orjson with
``OPT_SERIALIZE_NUMPY``) writes them as nested lists, so no serializer of ours is registered; NaN and
infinities become ``null`` in the API's JSON only (``summary`` holds the run's results in plain
types, as in summary.json).
"""

from __future__ import annotations

import asyncio
import decimal
import os
import re
import time
import typing
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cooplab.graphs.task import Task
from cooplab.limits import ConfigError, explain, one_line, show
from cooplab.runs import registry, runner
from cooplab.runs import store as runstore
from cooplab.runs.config import LLM_KEYWORDS, SANDBOX_KEYWORDS, RunConfig

if TYPE_CHECKING:  # the server resolves the name itself when it classifies a factory
    from langgraph_sdk.runtime import ServerRuntime

#: the environment variable naming where served runs write their run directories
RUNS_ENV = "COOPLAB_SERVER_RUNS"
DEFAULT_RUNS = "runs/langgraph"

#: the operator's opt-ins (environment variables of the server, each off unless set to 1): a served
#: graph takes its settings from whoever can reach the server, so by default it refuses every setting
#: that would run code on the host, send the server's API keys elsewhere, touch a file the client
#: names, or spend without a cap (docs/langgraph-server.md "What a served graph refuses")
ALLOW_LOCAL_SANDBOX = "COOPLAB_SERVE_ALLOW_LOCAL_SANDBOX"
ALLOW_CLIENT_SERVERS = "COOPLAB_SERVE_ALLOW_CLIENT_SERVERS"
ALLOW_PATHS = "COOPLAB_SERVE_ALLOW_PATHS"
ALLOW_UNBUDGETED = "COOPLAB_SERVE_ALLOW_UNBUDGETED"
OPT_INS = (ALLOW_LOCAL_SANDBOX, ALLOW_CLIENT_SERVERS, ALLOW_PATHS, ALLOW_UNBUDGETED)
_ON, _OFF = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")
#: model spec prefixes that name a file on the server's disk
PATH_SPECS = ("local:", "scripted:")
#: science's options that name files on the server's disk (your own data)
PATH_OPTIONS = ("dataset", "task_file", "truth")


class SettingsError(ConfigError, ValueError):
    """A bad setting of a served run (one line). Also a ValueError: the server passes the message of a
    ValueError on to the client, where it replaces others with "An internal error occurred"."""


class ServerSettings(BaseModel):
    """The settings of one run of a served graph (its context schema; Studio shows it as a form).
    The keywords of :func:`cooplab.run`, grouped: a field not given takes the graph's default."""

    model_config = ConfigDict(extra="forbid", strict=True)

    agents: str | None = Field(default=None, description="rule or llm (default: the task's first kind).")
    seed: int = Field(default=0, description="The run's seed: every random draw derives from it.")
    model: str | None = Field(
        default=None,
        description="Model spec of every LLM agent (local, local:PATH.gguf, PROVIDER:NAME such as openai:NAME or "
        "anthropic:NAME, scripted:FILE, builtin:NAME).",
    )
    budget: float | None = Field(default=None, description="Budget cap in USD of an LLM run (null: no cap).")
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="The task's own options, as cooplab.run takes them "
        "(cooplab params TASK); given, they replace the default options as a whole.",
    )
    llm: dict[str, Any] = Field(
        default_factory=dict,
        description="Other LLM settings: temperature, max_tokens, cache (default off here: "
        "a cache file is SQLite, which needs langgraph dev --allow-blocking), base_url, agent_models, price_in, "
        "price_out, max_concurrency, rps, call_timeout, call_deadline.",
    )
    sandbox: dict[str, Any] = Field(
        default_factory=dict, description="Sandbox settings of science: backend, timeout, rate."
    )

    def keywords(self) -> dict[str, Any]:
        """These settings as the keywords of :func:`cooplab.run` (a one-line ConfigError when two
        fields set the same keyword)."""
        kw: dict[str, Any] = {"seed": self.seed}
        for key in ("agents", "model", "budget"):
            if getattr(self, key) is not None:
                kw[key] = getattr(self, key)
        sandbox = {f"sandbox_{k}": v for k, v in self.sandbox.items()}
        unknown = sorted(k for k in sandbox if k not in SANDBOX_KEYWORDS)
        if unknown:
            raise ConfigError(
                f"sandbox has no setting {unknown[0].removeprefix('sandbox_')!r}; use backend, timeout or rate"
            )
        strange = sorted(k for k in self.llm if k not in LLM_KEYWORDS)
        if strange:
            raise ConfigError(
                f"llm has no setting {strange[0]!r}; use {', '.join(sorted(LLM_KEYWORDS - {'agent_model'}))}"
            )
        llm = {"cache": "off", **self.llm}  # LLM settings are ignored by rule-based runs
        for group, values in (("llm", llm), ("sandbox", sandbox), ("options", self.options)):
            twice = sorted(set(values) & set(kw))
            if twice:
                raise ConfigError(f"{group} sets {twice[0]!r}, which is already set; give it once")
            kw.update(values)
        return kw


class CPRSettings(ServerSettings):
    options: dict[str, Any] = Field(
        default={"n_agents": 5, "rounds": 10, "replicates": 2},
        description=ServerSettings.model_fields["options"].description,
    )


class DinersSettings(ServerSettings):
    options: dict[str, Any] = Field(
        default={"iterations": 3, "replicates": 2}, description=ServerSettings.model_fields["options"].description
    )


class GameSettings(ServerSettings):
    options: dict[str, Any] = Field(
        default={"game": "public-goods", "simulations": 2, "rounds": 3},
        description=ServerSettings.model_fields["options"].description,
    )


class ScienceSettings(ServerSettings):
    agents: str | None = Field(
        default="llm", description="llm (science teams are LLM agents; --team oracle plays a built-in model)."
    )
    options: dict[str, Any] = Field(
        default={"task": "ecology", "team": "oracle"}, description=ServerSettings.model_fields["options"].description
    )


#: graph id (langgraph.json) -> (registered task, its settings schema)
GRAPHS: dict[str, tuple[str, type[ServerSettings]]] = {
    "cpr": ("cpr", CPRSettings),
    "diners": ("diners", DinersSettings),
    "game": ("game", GameSettings),
    "science": ("science", ScienceSettings),
}


def settings_of(schema: type[ServerSettings], config: Mapping[str, Any] | None, context: Any) -> ServerSettings:
    """A run's settings: ``config["configurable"]``'s fields of ``schema`` overridden by the context's
    (a mapping or a settings object); a one-line ConfigError for a bad value."""
    given: dict[str, Any] = {}
    configurable = (config or {}).get("configurable") if isinstance(config, Mapping) else None
    if isinstance(configurable, Mapping):
        given.update({k: v for k, v in configurable.items() if k in schema.model_fields})
    if isinstance(context, BaseModel):
        given.update(context.model_dump(exclude_unset=True))
    elif isinstance(context, Mapping):
        given.update(context)
    elif context is not None:
        raise ConfigError(
            f"the context must be an object of settings ({', '.join(schema.model_fields)}), got {show(context)}"
        )
    try:
        return schema.model_validate(given)
    except ValidationError as exc:
        raise ConfigError(f"settings: {explain(exc)}") from None


def opted_in(variable: str) -> bool:
    """Whether the operator set the opt-in ``variable`` (1, true, yes, on; unset, 0, false, no, off:
    not); any other value is a one-line SettingsError naming it."""
    raw = os.environ.get(variable, "").strip().lower()
    if raw in _OFF:
        return False
    if raw in _ON:
        return True
    raise SettingsError(
        f"the server's ${variable} must be 1 (allow) or 0 (refuse), got {show(os.environ.get(variable))}"
    )


def _refuse(what: str, why: str, variable: str) -> None:
    """A refused setting, unless the operator opted in with ``variable``: one line the client sees."""
    if not opted_in(variable):
        raise SettingsError(
            f"this server refuses {what}: {why}; its operator can allow it by starting the server with "
            f"{variable}=1 (docs/langgraph-server.md)"
        )


def _spec_text(value: Any) -> str | None:
    """A model spec as its parser reads it (stripped), or None when it is not text (refused later by its own check)."""
    return value.strip() if isinstance(value, str) else None


def _models(values: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(where, spec, whose budget) of every model spec a run's settings name: the agents' model,
    per-agent models (``agent_models`` or ``agent_model`` items), science's judge, a game's players."""
    found: list[tuple[str, Any, str]] = [("model", values.get("model"), "budget")]
    agent_models = values.get("agent_models")
    if isinstance(agent_models, Mapping):
        found += [(f"llm.agent_models[{str(k)[:20]!r}]", v, "budget") for k, v in agent_models.items()]
    items = values.get("agent_model")
    if isinstance(items, (list, tuple)):
        found += [("llm.agent_model", i.split("=", 1)[-1], "budget") for i in items if isinstance(i, str)]
    mix, switches = (
        values.get("model_mix"),
        values.get("model_from"),
    )  # a mixed society's specs; model switches (invaders)
    if isinstance(mix, Mapping):
        found += [("llm.model_mix", k, "budget") for k in mix]
    elif isinstance(mix, (list, tuple)):
        found += [("llm.model_mix", i.rpartition("=")[0], "budget") for i in mix if isinstance(i, str)]
    if isinstance(switches, Mapping):
        found += [(f"llm.model_from[{str(k)[:20]!r}]", v, "budget") for k, v in switches.items()]
    for invader in (
        values.get("invader"),
        (values.get("params") or {}).get("invader") if isinstance(values.get("params"), Mapping) else None,
    ):
        if isinstance(invader, str) and invader.strip().startswith("model:"):
            found.append(("options.invader", invader.strip()[6:].rpartition("@")[0], "budget"))
        elif isinstance(invader, Mapping):
            found.append(("options.invader.model", invader.get("model"), "budget"))
    found += [("options.judge", values.get("judge"), "judge"), ("options.players", values.get("players"), "budget")]
    params = values.get("params")
    if isinstance(params, Mapping):
        judge = params.get("judge")
        if isinstance(judge, Mapping):
            found.append(("options.params.judge.model", judge.get("model"), "params.judge"))
    return [(where, text, whose) for where, v, whose in found if (text := _spec_text(v))]


def check_served(values: Mapping[str, Any]) -> None:
    """Refuse (one-line SettingsError) what a served run may not do unless its operator opted in
    (:data:`OPT_INS`). ``values``: the run's settings flat, as the keywords of :func:`cooplab.run`
    (or a config.json's, :func:`_config_values`). Checked before any other check, since those read
    the files and open the caches they are given."""
    from cooplab.agents.providers import provider

    processes = values.get("model_processes")
    if processes is not None and processes != 0:
        raise SettingsError(
            f"this server refuses llm.model_processes {show(processes)}: each request would start worker processes "
            "on this machine; served runs make their model calls in the server's process"
        )
    if values.get("sandbox_backend") == "local":
        _refuse(
            "sandbox.backend 'local'",
            "the local backend runs the agents' code on this machine without isolation",
            ALLOW_LOCAL_SANDBOX,
        )
    if values.get("base_url") is not None:
        _refuse(
            f"llm.base_url {show(values.get('base_url'))}",
            "a model server the client names would receive the server's API keys and the run's prompts",
            ALLOW_CLIENT_SERVERS,
        )
    for key in PATH_OPTIONS:
        if values.get(key) is not None:
            _refuse(f"options.{key}", "it names a file on this machine", ALLOW_PATHS)
    params = values.get("params")
    if isinstance(params, Mapping) and params.get("custom") is not None:
        _refuse("options.params.custom", "your own data names files on this machine", ALLOW_PATHS)
    cache = values.get("cache", "off")
    if cache != "off":
        _refuse(
            f"llm.cache {show(cache)}",
            "a response cache is a file on this machine (the served default is off)",
            ALLOW_PATHS,
        )
    judge = params.get("judge") if isinstance(params, Mapping) else None
    caps = {
        "budget": values.get("budget"),
        "judge": values.get("judge_budget"),
        "params.judge": judge.get("budget") if isinstance(judge, Mapping) else None,
    }
    prices = sorted(k for k in ("price_in", "price_out", "prices") if values.get(k) is not None)
    for where, text, whose in _models(values):
        if text.lower().startswith(PATH_SPECS):
            _refuse(
                f"{where} {text[:80]!r}",
                "a local: or scripted: model names a file on this machine (local alone, the shipped "
                "model, and builtin: models are served)",
                ALLOW_PATHS,
            )
        p = provider(text.partition(":")[0])
        if p is None or not p.keys:
            continue
        if caps["budget"] is None and caps[whose] is None:
            _refuse(
                f"{where} {text[:80]!r} without a budget",
                f"{p.kind} models are paid with the server's {' or '.join(p.keys)}; give "
                f"{'options.judge_budget or ' if whose == 'judge' else ''}budget (USD) to cap what the run may spend",
                ALLOW_UNBUDGETED,
            )
        if prices:
            _refuse(
                f"llm.{prices[0]} with the paid model {text[:80]!r}",
                "prices the client sets decide what the budget counts (0 "
                "would let the run spend without a cap); the price table's are used",
                ALLOW_UNBUDGETED,
            )


def _config_values(config: Mapping[str, Any]) -> dict[str, Any]:
    """A run's config.json as the flat settings :func:`check_served` reads (the checked config, the
    last word: what the run would really use)."""
    llm = config.get("llm")
    llm = llm if isinstance(llm, Mapping) else {}
    sandbox = config.get("sandbox")
    sandbox = sandbox if isinstance(sandbox, Mapping) else {}
    return {
        "model": llm.get("model"),
        "agent_models": llm.get("agent_models"),
        "base_url": llm.get("base_url"),
        "cache": llm.get("cache", "off"),
        "budget": llm.get("budget"),
        "price_in": llm.get("price_in"),
        "price_out": llm.get("price_out"),
        "sandbox_backend": sandbox.get("backend"),
        "params": config.get("params"),
    }


def run_config(graph_id: str, settings: ServerSettings) -> tuple[Task, RunConfig]:
    """(the task, the resolved configuration of a run) of a served graph's settings: the same
    configuration ``cooplab run`` makes from the same options."""
    name = GRAPHS[graph_id][0]
    task = registry.get(name)
    return task, RunConfig.from_keywords(name, **settings.keywords()).resolve(task)


def _served_state(schema: type) -> type:
    """The task's state schema with every key a plain value (an append-only log of the task is a
    list here, replaced by each update: a second run on the same thread starts from its own initial
    state, never from the logs of the run before), plus the run directory and the run's summary."""
    hints = {
        k: (typing.get_args(h)[0] if typing.get_origin(h) is typing.Annotated else h)
        for k, h in typing.get_type_hints(schema, include_extras=True).items()
    }
    return TypedDict(f"Served{schema.__name__}", {**hints, "run_dir": str, "summary": dict[str, Any]}, total=False)  # type: ignore[misc]


def _run_dir(task: Task, config: RunnableConfig) -> Path:
    """A new, empty run directory for this server run: ``$COOPLAB_SERVER_RUNS/<task>-<run id>``."""
    configurable = config.get("configurable") or {}
    run_id = str(configurable.get("run_id") or config.get("run_id") or uuid.uuid4())
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", run_id)[:80]
    root = Path(os.environ.get(RUNS_ENV) or DEFAULT_RUNS)
    return runstore.prepare_out(root / f"{task.name}-{safe}")


def _record_failure(task: Task, out: Path, cfg: RunConfig, final: dict[str, Any], exc: Exception) -> None:
    """An unexpected error of a served run, kept in its directory as ``cooplab run`` keeps it: the
    traceback in error.log, summary.json with status "failed" from the last state the run reached."""
    log = runstore.save_error(out, exc)
    runner.record_failure(task, out, cfg, one_line(f"{type(exc).__name__}: {exc}", 350), log, state=final)


def _close(service: Any, pool: Any) -> None:
    """Close an LLM run's files (response cache, ledger journal) and sandbox pool."""
    if service is not None:
        service.close()
    if pool is not None:
        pool.close()


def served_graph(task: Task, checked: RunConfig, schema: type[ServerSettings] = ServerSettings):
    """The server-facing graph of one run of ``task`` with the ``checked`` (resolved) configuration
    (see the module docstring), compiled without a checkpointer."""
    from cooplab.graphs.context import CoopContext
    from cooplab.graphs.ledger import JOURNAL_FILE

    inner = task.build(checked)
    state_schema = task.state_schema
    if state_schema is None:
        raise TypeError(f"task {task.name!r} declares no state_schema; a served graph is made from it")
    own_keys = set(typing.get_type_hints(state_schema))
    started: dict[str, RunConfig] = {}  # run directory -> its configuration, as setup wrote it

    def setup(state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        """Make the run directory and its files; the task's initial state."""
        out = _run_dir(task, config)
        stamped = runner.stamped(task, checked)
        runstore.write_json(out / "config.json", stamped.to_json())
        task.prepare_run(stamped, out)  # may note a dataset's hash in config.json (and in stamped.record)
        started[str(out)] = stamped
        return {**task.init_state(stamped), "run_dir": str(out)}

    def config_of(out: Path) -> RunConfig:
        """The configuration of a run this graph set up (else read back from its config.json)."""
        return started.pop(str(out), None) or RunConfig.load(out)

    def services(out: Path, cfg: RunConfig) -> tuple[Any, Any, Any]:
        """(model service, sandbox pool, runtime context) of an LLM run, as the runner builds them (no
        traces.jsonl: the server records the run's steps itself); all None for a rule-based run."""
        if cfg.agents != "llm":
            return None, None, None
        assert cfg.llm is not None, "an LLM run's resolved configuration has its LLM settings"
        from cooplab.agents.settings import build_service

        service = build_service(
            cfg.llm,
            seed=cfg.seed,
            sandbox_rate=cfg.sandbox.rate if cfg.sandbox is not None else 0.0,
            journal=out / JOURNAL_FILE,
        )
        pool = runner.sandbox_pool(task, cfg, out, cache=service.cache)
        return service, pool, CoopContext(llm=service, sandbox=pool, run_dir=str(out))

    async def run_task(state: Mapping[str, Any]) -> dict[str, Any]:
        """The task's graph from the initial state, with the run's services; then its outputs. File
        work goes to a worker thread (the server's event loop is shared by every run). Money is summed
        in the run's own decimal context, as ``cooplab.run`` does: set in this task's context, it
        reaches the worker threads (``asyncio.to_thread`` copies it) and leaves the server's other
        runs and the caller's own context alone."""
        with decimal.localcontext(runner.decimal_context()):
            out = Path(state["run_dir"])
            cfg = await asyncio.to_thread(config_of, out)
            initial = {k: v for k, v in state.items() if k in own_keys}
            service, pool, context = await asyncio.to_thread(services, out, cfg)
            run_cfg: RunnableConfig = {"recursion_limit": task.recursion_limit(initial, len(inner.nodes) - 1)}
            status, message, final = "completed", None, initial
            t0 = time.perf_counter()
            try:
                async for values in inner.astream(initial, run_cfg, context=context, stream_mode="values"):
                    final = values
            except BaseException as exc:  # noqa: BLE001 - a spent budget or a service down ends the run cleanly
                stop = runner.stop_status(exc) if service is not None else None
                if stop is None:
                    if isinstance(exc, Exception):  # as the runner does: error.log and a summary with status "failed"
                        await asyncio.to_thread(_record_failure, task, out, cfg, dict(final), exc)
                    raise
                status, message = stop
            finally:
                if service is not None or pool is not None:
                    await asyncio.to_thread(_close, service, pool)
            seconds = time.perf_counter() - t0
            summary = await asyncio.to_thread(
                runner.finish,
                task,
                out,
                cfg,
                dict(final),
                seconds,
                status=status,
                message=message,
                service=service,
                sandbox=pool,
            )
            return {**final, "summary": summary.as_json()}

    g = StateGraph(_served_state(state_schema), context_schema=schema)
    # the state is a TypedDict made at run time (_served_state), which LangGraph's node protocols cannot name
    g.add_node("setup", setup)  # pyright: ignore[reportArgumentType]
    g.add_node(task.name, run_task)  # pyright: ignore[reportArgumentType]
    g.add_edge(START, "setup")
    g.add_edge("setup", task.name)
    g.add_edge(task.name, END)
    return g.compile(name=task.name)


def serve(graph_id: str, config: RunnableConfig | None, runtime: Any = None):
    """The compiled server graph ``graph_id`` for the settings in ``config`` / ``runtime.context``."""
    if graph_id not in GRAPHS:
        raise ConfigError(f"unknown graph {graph_id!r}; the served graphs are {', '.join(GRAPHS)}")
    schema = GRAPHS[graph_id][1]
    try:
        settings = settings_of(schema, config, getattr(runtime, "context", None))
        check_served(settings.keywords())  # before the checks of run_config, which read the files they are given
        task, config_ = run_config(graph_id, settings)
        check_served(_config_values(config_.to_json()))  # and what the checked config would really use
    except ConfigError as exc:
        raise SettingsError(str(exc)) from None
    return served_graph(task, config_, schema)


# --- the factories langgraph.json names (the server passes both arguments by keyword) ------------
def cpr(config: RunnableConfig, runtime: ServerRuntime):
    """The CPR fishery society (defaults: rule agents, 2 societies of 5 for 10 rounds)."""
    return serve("cpr", config, runtime)


def diners(config: RunnableConfig, runtime: ServerRuntime):
    """The Diner's Dilemma (defaults: rule agents, 2 replicates of 3 iterations)."""
    return serve("diners", config, runtime)


def game(config: RunnableConfig, runtime: ServerRuntime):
    """A behavioral game (defaults: the public-goods game, Nash players, 2 simulations of 3 rounds)."""
    return serve("game", config, runtime)


def science(config: RunnableConfig, runtime: ServerRuntime):
    """A science team (defaults: the ecology task, the oracle team in the Docker sandbox)."""
    return serve("science", config, runtime)


__all__ = [
    "ALLOW_CLIENT_SERVERS",
    "ALLOW_LOCAL_SANDBOX",
    "ALLOW_PATHS",
    "ALLOW_UNBUDGETED",
    "GRAPHS",
    "OPT_INS",
    "ServerSettings",
    "SettingsError",
    "check_served",
    "cpr",
    "diners",
    "game",
    "science",
    "serve",
    "served_graph",
    "settings_of",
    "run_config",
]
