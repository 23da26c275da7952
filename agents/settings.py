"""A run's LLM settings: one typed model, checked in one place, and turned into the LLM service.

:class:`LLMSettings` is config.json's ``"llm"`` block (models by agent, endpoint, sampling,
concurrency, rate limit, budget, prices, cache). Every entry point builds it (the CLI's flags,
:meth:`LLMSettings.from_options`; a sweep's fields and a run's config.json, through
:func:`cooplab.limits.validate`; keyword arguments in Python) and every number is checked as it is
built, by the rule of :data:`cooplab.limits.RULES` its field carries; a bad value is a one-line
:class:`~cooplab.limits.ConfigError` naming the option, the keyword or the file's field
(:func:`cooplab.limits.explain`). :meth:`LLMSettings.resolve` then checks what depends on the
machine (model files, API keys, the cache file) and fixes the cache path and the prices.
:func:`build_service` turns a run's settings into its :class:`~cooplab.agents.decisions.LLMService`.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Callable

from pydantic import BaseModel, ConfigDict, Field, StrictStr, field_validator

from cooplab.agents.cache import ResponseCache, check_cache, default_cache_path
from cooplab.agents.models.factory import check_model
from cooplab.limits import DEFAULT_CALL_DEADLINE, RULES, ConfigError, check_agent_models, flags, show, validate


def parse_agent_models(items: Any) -> dict[int, str]:
    """``--agent-model AGENT=MODEL`` items (strings) -> {agent: model}; a one-line ConfigError on a malformed item."""
    if not isinstance(items, (list, tuple)):
        raise ConfigError(f"--agent-model expects a list of AGENT=MODEL items, got {show(items)}")
    out: dict[int, str] = {}
    for item in items:
        if not isinstance(item, str) or "=" not in item or not item.split("=", 1)[0].strip().isdigit():
            raise ConfigError(f"--agent-model expects AGENT=MODEL with AGENT a number 0..N-1, got {item!r}")
        a, m = item.split("=", 1)
        out[int(a)] = m.strip()
    return out


#: how the command line names the LLM settings whose option is not the field's name
CLI_NAMES = {"agent_models": "--agent-model"}
#: a price: USD per 1K tokens
Price = Annotated[float, RULES["price"]]


class LLMSettings(BaseModel):
    """How LLM agents are called: their models, the endpoint, sampling, concurrency, rate, budget,
    prices and the response cache (``cooplab run --model ... --budget ...``). Each number carries
    its rule of :data:`cooplab.limits.RULES` (the CLI option of the same name parses with it)."""

    model_config = ConfigDict(extra="forbid")

    model: StrictStr = Field(
        default="local",
        description="Model spec of every agent: local, local:PATH.gguf, PROVIDER:NAME (openai, anthropic, "
        "google_genai, ollama), scripted:FILE, builtin:NAME, or (from Python) a LangChain chat model object.",
    )
    agent_models: dict[int, StrictStr] = Field(
        default_factory=dict, description="Per-agent model specs by agent number (0..N-1)."
    )
    model_mix: dict[StrictStr, Annotated[int, RULES["mix-count"]]] | None = Field(
        default=None,
        description="A mixed society: how many agents use each model ({spec: count}, the counts adding up to the "
        "population); "
        "the agents get their models by a seeded draw, written to agent_models (agents/mix.py).",
    )
    model_from: dict[StrictStr, StrictStr] = Field(
        default_factory=dict,
        description="Model switches: {'AGENT@ROUND': spec}, the agent "
        "uses that model from that round on (an invader of another model, agents/mix.py).",
    )
    base_url: StrictStr | None = Field(
        default=None, description="Another server speaking the provider's API (agents/providers.py)."
    )
    temperature: Annotated[float, RULES["temperature"]] = 0.7
    max_tokens: Annotated[int, RULES["max-tokens"]] = Field(default=64, description="Output token cap per call.")
    max_concurrency: Annotated[int, RULES["max-concurrency"]] = 8
    model_processes: Annotated[int, RULES["model-processes"]] = Field(
        default=0,
        description="Worker processes that make the decisions' model calls (a hosted model's client costs 1-3 ms of "
        "CPU per call); 0: the run's own process. Results, ledger, cache and traces are the same (docs/scale.md).",
    )
    call_timeout: Annotated[float, RULES["call-timeout"]] = Field(
        default=300.0,
        description="Seconds one attempt of a call to a model server may take in all (connecting, waiting, reading the "
        "whole "
        "answer); past it the call is retried, then the run stops.",
    )
    call_deadline: Annotated[float, RULES["call-deadline"]] = Field(
        default=DEFAULT_CALL_DEADLINE,
        description="Seconds one call to a model server may take in all, its retries and the waits between "
        "them included; past it the run stops (resumable) naming the server. Raise it (with call_timeout) for slow "
        "reasoning models.",
    )
    rps: Annotated[float | None, RULES["rps"]] = Field(
        default=None, description="Requests per second at most (None: no limit)."
    )
    budget: Annotated[float | None, RULES["budget"]] = Field(
        default=None, description="Budget cap in USD (None: no cap)."
    )
    price_in: Annotated[float | None, RULES["price-in"]] = Field(
        default=None, description="USD per 1K input tokens of every model (None: each model's price, agents/prices.py)."
    )
    price_out: Annotated[float | None, RULES["price-out"]] = Field(
        default=None, description="USD per 1K output tokens of every model (None: each model's price)."
    )
    prices: dict[StrictStr, Annotated[list[Price], Field(min_length=2, max_length=2)]] | None = Field(
        default=None,
        description="The prices used, USD per 1K input and output tokens by model id (filled in by resolve(); recorded "
        "in config.json).",
    )
    cache: StrictStr | None = Field(
        default=None, description="Response cache file (None: the default cache; 'off': no cache)."
    )
    prompt_variant: StrictStr = Field(
        default="original",
        description="Which wording of the task's prompts the agents get: original, or a "
        "folder of prompts/variants/ beside the task's prompts (docs/robustness.md).",
    )

    @field_validator("model", mode="before")
    @classmethod
    def _model_object(cls, value: Any) -> Any:
        """A chat model object becomes its registered spec string (:mod:`cooplab.agents.instances`)."""
        from cooplab.agents.instances import as_spec

        return as_spec(value)

    @field_validator("agent_models", mode="before")
    @classmethod
    def _agent_model_objects(cls, value: Any) -> Any:
        from cooplab.agents.instances import as_spec

        return {k: as_spec(v) for k, v in value.items()} if isinstance(value, dict) else value

    @classmethod
    def from_options(cls, values: Mapping[str, Any]) -> "LLMSettings":
        """A command's LLM settings from its values of the shared LLM options, by parameter name
        (``model``, ``agent_model``: the repeatable ``--agent-model AGENT=MODEL`` items, ``base_url``,
        ``temperature``, ``max_tokens``, ...; None: the option was not given, the setting keeps its
        default). A bad value is a one-line ConfigError naming the option (``--budget must be
        ...``). Not resolved: the run does that (:meth:`resolve`, with its number of agents)."""
        kw = {k: v for k, v in values.items() if k in cls.model_fields and k != "agent_models" and v is not None}
        if values.get("agent_model"):
            kw["agent_models"] = parse_agent_models(values["agent_model"])
        return validate(cls, kw, flags(CLI_NAMES))

    @field_validator("model_mix", mode="before")
    @classmethod
    def _mix_items(cls, value: Any) -> Any:
        """``--model-mix SPEC=COUNT`` items (the CLI) become a {spec: count} mapping (its sum is checked by
        :meth:`resolve`)."""
        from cooplab.agents.mix import parse_mix

        return parse_mix(value) if isinstance(value, (list, tuple)) else value

    def models(self) -> dict[str, str]:
        """Every model spec by who uses it: ``{"default": spec, "1": spec, ...}``."""
        return {
            "default": self.model,
            **{str(a): m for a, m in sorted(self.agent_models.items())},
            **{str(k): m for k, m in sorted(self.model_from.items())},
        }

    def resolve(self, n_agents: int | None = None, *, name: Callable[[tuple], str] | None = None) -> "LLMSettings":
        """These settings ready for a run: what no field's rule can say checked against the machine
        and the society (every model spec parses, its file or API key is there; per-agent models are
        agents of the society of ``n_agents``; the cache is a usable response cache), the cache
        resolved to a path or ``"off"`` and the prices of every model filled in. ``name(loc)``: how
        a setting is called in messages (:func:`cooplab.limits.in_file` for a file; default: its
        CLI option, e.g. ``--budget``)."""
        cli = name is None
        label = name or flags(CLI_NAMES)
        if n_agents is not None:
            from cooplab.agents.mix import check_mix, check_model_from

            models = {"default": self.model, **{str(a): m for a, m in self.agent_models.items()}}
            check_agent_models(
                models, n_agents, name=lambda k: f"--agent-model {k}={models[k]}" if cli else label(("agent_models", k))
            )
            check_mix(self.model_mix, self.agent_models, n_agents, "--model-mix" if cli else label(("model_mix",)))
            check_model_from(self.model_from, n_agents, "model_from" if cli else label(("model_from",)))
        for agent, text in self.models().items():
            where = "--model" if cli else label(("model",)) if agent == "default" else label(("agent_models", agent))
            check_model(text, self.base_url, where)
        for text in self.model_mix or {}:  # a model of the mix that no agent drew (count 0) is checked too
            check_model(text, self.base_url, "--model-mix" if cli else label(("model_mix",)))
        prices = self.resolved_prices(label(("budget",)))
        cache = (
            "off" if self.cache == "off" else str(Path(self.cache).expanduser() if self.cache else default_cache_path())
        )
        if cache != "off":
            check_cache(cache, label(("cache",)))
        return self.model_copy(update={"cache": cache, "prices": prices})

    def specs(self) -> dict[str, Any]:
        """Every model's parsed spec by who uses it (as :meth:`models`)."""
        from cooplab.agents.models.spec import parse_model_spec

        return {
            who: parse_model_spec(
                text, base_url=self.base_url, temperature=self.temperature, max_tokens=self.max_tokens
            )
            for who, text in self.models().items()
        }

    def resolved_prices(self, budget_name: str = "--budget") -> dict[str, list[float]]:
        """The prices of every model (:func:`cooplab.agents.prices.run_prices`): those recorded in
        :attr:`prices` (a resumed run's) first, the others from the overrides or the price table;
        one line when a model has none under a budget."""
        from cooplab.agents.prices import run_prices

        recorded = {k: [float(v[0]), float(v[1])] for k, v in (self.prices or {}).items()}
        todo = {who: spec for who, spec in self.specs().items() if spec.id not in recorded}
        return {**run_prices(todo, self.price_in, self.price_out, self.budget, budget_name), **recorded}


#: what an earlier sweep file's ``llm`` object may set: every LLM setting but the models (the sweep's own
#: field) and the budget (per condition); the CPR and science sweep formats read it (tasks/*/sweep_format.py)
SWEEP_LLM_KEYS = set(LLMSettings.model_fields) - {"model", "agent_models", "budget"}


def sweep_llm_block(raw: Any, where: str) -> LLMSettings:
    """An earlier sweep file's ``llm`` object: the LLM settings but the models (the sweep's own field),
    each checked by its field's rule (one line naming ``{where}: llm.FIELD``)."""
    from cooplab.limits import ConfigError, in_file, validate

    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: llm must be a JSON object, got {raw!r}")
    other = sorted(set(raw) - SWEEP_LLM_KEYS)
    if other:
        raise ConfigError(f"{where}: llm: unknown field {other[0]!r}; use {', '.join(sorted(SWEEP_LLM_KEYS))}")
    return validate(LLMSettings, raw, in_file(where, "llm"), strict=False)


def build_service(
    llm: LLMSettings,
    *,
    seed: int,
    sandbox_rate: float = 0.0,
    entries: list[dict[str, Any]] | None = None,
    journal: Path | None = None,
):
    """The LLM service of a run from its LLM settings and seed (models, cache, ledger restored from
    the audit trail ``entries``; ``sandbox_rate``: USD per second of sandbox time). With ``journal`` (the run's
    :class:`~cooplab.graphs.ledger.LedgerJournal`
    file) every charge and every budget decision on a model call is journaled, and what an
    interrupted process left there is restored too: the charges the audit trail lacks, the
    reservations it still held and the calls its budget refused."""
    from cooplab.agents.decisions import LLMService
    from cooplab.agents.models.factory import (
        make_chat_model,
    )  # looked up per call: tests wrap it (and parse_model_spec, in specs())
    from cooplab.agents.prices import NOMINAL
    from cooplab.graphs.ledger import Ledger, LedgerJournal, Rates

    models = {agent: (spec, make_chat_model(spec)) for agent, spec in llm.specs().items()}
    per_model = {
        model: Rates(*p) for model, p in llm.resolved_prices().items()
    }  # Rates takes floats by their shortest text
    rates = Rates(*NOMINAL)
    unit_rates = {"sandbox_seconds": Decimal(str(sandbox_rate or 0))}
    ledger = Ledger(
        budget=None if llm.budget is None else Decimal(str(llm.budget)),
        rates=per_model,
        default_rates=rates,
        unit_rates=unit_rates,
    )
    if journal is not None:
        book = LedgerJournal(journal)
        granted, refused = book.decisions(ledger.budget)
        ledger.restore(entries or [], book.unrecorded(entries or []), granted=granted, refused=refused)
        ledger.on_commit, ledger.on_decision = book.append, book.record
    elif entries:
        ledger.restore(entries)
    cache = ResponseCache(None if llm.cache in (None, "off") else llm.cache)
    return LLMService(
        models=models,
        ledger=ledger,
        cache=cache,
        seed=int(seed),
        max_concurrency=llm.max_concurrency,
        model_processes=llm.model_processes,
        rps=llm.rps,
        call_timeout=llm.call_timeout,
        call_deadline=llm.call_deadline,
    )
