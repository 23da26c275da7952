"""A run's LLM settings: one typed model, checked in one place, and turned into the LLM service.

:class:`LLMSettings` is config.json's ``"llm"`` block (models by agent, endpoint, sampling,
concurrency, rate limit, budget, prices, cache). Every entry point builds it (the CLI's flags, a
sweep's fields, keyword arguments in Python) and :meth:`LLMSettings.checked` checks it, numbers by
the rule named on each field (:mod:`cooplab.limits`); a resumed run's block is read back by
:meth:`LLMSettings.from_file`. :func:`build_service` turns a run's config into its
:class:`~cooplab.agents.decisions.LLMService`. A bad value is a one-line
:class:`~cooplab.limits.ConfigError`.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any, Callable

from cooplab.agents.cache import ResponseCache, check_cache, default_cache_path
from cooplab.agents.models.factory import check_model
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from cooplab.limits import DEFAULT_CALL_DEADLINE, ConfigError, check, check_agent_models, show


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


def check_prices(prices: Any, where: str) -> dict[str, list[float]]:
    """``{model id: [USD per 1K input tokens, per 1K output]}``, each price a number in [0, 1000]
    (not a boolean, finite), or a one-line ConfigError naming ``where``."""
    if not isinstance(prices, dict):
        raise ConfigError(f"{where} must map model ids to [price in, price out], got {show(prices)}")
    for key, value in prices.items():
        if not (isinstance(value, (list, tuple)) and len(value) == 2 and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1000 for v in value)):
            raise ConfigError(f"{where}[{key!r}] must be [USD per 1K input tokens, per 1K output], each in [0, 1000], got {show(value)}")
    return {str(k): [float(v[0]), float(v[1])] for k, v in prices.items()}


def _rule(name: str) -> dict[str, str]:
    return {"rule": name}


class LLMSettings(BaseModel):
    """How LLM agents are called: their models, the endpoint, sampling, concurrency, rate, budget,
    prices and the response cache (``cooplab run --model ... --budget ...``). The ``rule`` of a
    numeric field names its check in :data:`cooplab.limits.RULES` (and its CLI flag, ``--RULE``)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    model: str = Field("local", description="Model spec of every agent: local, local:PATH.gguf, PROVIDER:NAME (openai, anthropic, "
                       "google_genai, ollama), scripted:FILE, builtin:NAME, or (from Python) a LangChain chat model object.")
    agent_models: dict[int, str] = Field(default_factory=dict, description="Per-agent model specs by agent number (0..N-1).")
    model_mix: dict[str, int] | None = Field(None, description="A mixed society: how many agents use each model ({spec: count}, the "
                                             "counts adding up to the population); the agents get their models by a seeded draw, "
                                             "written to agent_models (agents/mix.py).")
    model_from: dict[str, str] = Field(default_factory=dict, description="Model switches: {'AGENT@ROUND': spec}, the agent uses "
                                       "that model from that round on (an invader of another model, agents/mix.py).")
    base_url: str | None = Field(None, description="Another server speaking the provider's API (agents/providers.py).")
    temperature: float = Field(0.7, json_schema_extra=_rule("temperature"))
    max_tokens: int = Field(64, description="Output token cap per call.", json_schema_extra=_rule("max-tokens"))
    max_concurrency: int = Field(8, json_schema_extra=_rule("max-concurrency"))
    call_timeout: float = Field(300.0, description="Seconds one attempt of a call to a model server may take in all (connecting, waiting, "
                                "reading the whole answer); past it the call is retried, then the run stops.", json_schema_extra=_rule("call-timeout"))
    call_deadline: float = Field(DEFAULT_CALL_DEADLINE, description="Seconds one call to a model server may take in all, its retries "
                                 "and the waits between them included; past it the run stops (resumable) naming the server. Raise it "
                                 "(with call_timeout) for slow reasoning models.", json_schema_extra=_rule("call-deadline"))
    rps: float | None = Field(None, description="Requests per second at most (None: no limit).", json_schema_extra=_rule("rps"))
    budget: float | None = Field(None, description="Budget cap in USD (None: no cap).", json_schema_extra=_rule("budget"))
    price_in: float | None = Field(None, description="USD per 1K input tokens of every model (None: each model's price, "
                                   "agents/prices.py).", json_schema_extra=_rule("price-in"))
    price_out: float | None = Field(None, description="USD per 1K output tokens of every model (None: each model's price).",
                                    json_schema_extra=_rule("price-out"))
    prices: dict[str, list[float]] | None = Field(None, description="The prices used, USD per 1K input and output tokens by model "
                                                  "id (filled in by checked(); recorded in config.json).")
    cache: str | None = Field(None, description="Response cache file (None: the default cache; 'off': no cache).")
    prompt_variant: str = Field("original", description="Which wording of the task's prompts the agents get: original, or a "
                                "folder of prompts/variants/ beside the task's prompts (docs/robustness.md).")

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

    @field_validator("model_mix", mode="before")
    @classmethod
    def _mix_items(cls, value: Any) -> Any:
        """``--model-mix SPEC=COUNT`` items (the CLI) become a {spec: count} mapping (checked by :meth:`checked`)."""
        from cooplab.agents.mix import parse_mix

        return parse_mix(value) if isinstance(value, (list, tuple)) else value

    @staticmethod
    def rules() -> dict[str, str]:
        """Numeric field -> the name of its rule in :data:`cooplab.limits.RULES`."""
        return {k: f.json_schema_extra["rule"] for k, f in LLMSettings.model_fields.items() if isinstance(f.json_schema_extra, dict)}

    def models(self) -> dict[str, str]:
        """Every model spec by who uses it: ``{"default": spec, "1": spec, ...}``."""
        return {"default": self.model, **{str(a): m for a, m in sorted(self.agent_models.items())},
                **{str(k): m for k, m in sorted(self.model_from.items())}}

    def checked(self, n_agents: int | None = None, *, name: Callable[[str], str] | None = None) -> "LLMSettings":
        """These settings with every value checked (numbers by their rules, model specs, scripted
        files, the cache file) and the cache resolved to a path or ``"off"``. ``name(field)`` is how a
        setting is called in messages (default: its CLI flag, e.g. ``--budget``)."""
        label = name or (lambda key: {"model": "--model", "base_url": "--base-url", "cache": "--cache"}.get(key, "--" + self.rules().get(key, key)))
        if n_agents is not None:
            from cooplab.agents.mix import check_mix, check_model_from

            models = {"default": self.model, **{str(a): m for a, m in self.agent_models.items()}}
            check_agent_models(models, n_agents, name=lambda k: f"--agent-model {k}={models[k]}" if name is None
                               else f"{name('agent_models')}[{k!r}]")
            check_mix(self.model_mix, self.agent_models, n_agents, "--model-mix" if name is None else name("model_mix"))
            check_model_from(self.model_from, n_agents, "model_from" if name is None else name("model_from"))
        for key, rule in self.rules().items():
            check(label(key), getattr(self, key), rule)
        if self.base_url is not None and not isinstance(self.base_url, str):
            raise ConfigError(f"{label('base_url')} must be a URL string, got {self.base_url!r}")
        for agent, text in self.models().items():
            if name is None:  # the command line: every spec came from --model or --agent-model
                where = "--model"
            else:
                where = label("model") if agent == "default" else f"{label('agent_models')}[{agent!r}]"
            check_model(text, self.base_url, where)
        for text in self.model_mix or {}:  # a model of the mix that no agent drew (count 0) is checked too
            check_model(text, self.base_url, "--model-mix" if name is None else name("model_mix"))
        prices = self.resolved_prices(label("budget"))
        cache = "off" if self.cache == "off" else str(Path(self.cache).expanduser() if self.cache else default_cache_path())
        if cache != "off":
            check_cache(cache, label("cache"))
        return self.model_copy(update={"cache": cache, "prices": prices})

    def specs(self) -> dict[str, Any]:
        """Every model's parsed spec by who uses it (as :meth:`models`)."""
        from cooplab.agents.models.spec import parse_model_spec

        return {who: parse_model_spec(text, base_url=self.base_url, temperature=self.temperature, max_tokens=self.max_tokens)
                for who, text in self.models().items()}

    def resolved_prices(self, budget_name: str = "--budget") -> dict[str, list[float]]:
        """The prices of every model (:func:`cooplab.agents.prices.run_prices`): those recorded in
        :attr:`prices` (a resumed run's) first, the others from the overrides or the price table;
        one line when a model has none under a budget."""
        from cooplab.agents.prices import run_prices

        recorded = check_prices(self.prices or {}, "llm.prices")
        todo = {who: spec for who, spec in self.specs().items() if spec.id not in recorded}
        return {**run_prices(todo, self.price_in, self.price_out, self.budget, budget_name), **recorded}

    @classmethod
    def from_file(cls, raw: Any, where: str, *, allowed: set[str] | None = None, required: set[str] = frozenset(),
                  **more: Any) -> "LLMSettings":
        """Settings from a JSON object of a file (a sweep's ``llm``, a run's config.json): an
        object, with keys among ``allowed`` (default: every field), numbers by their rules (JSON's
        256.0 is an integer's 256), strings where strings belong; ``more`` on top. ``where`` starts
        each message ("sweep config x.json: llm"); ``required``: keys that must be there (a run's
        config.json names every setting it ran with)."""
        allowed = set(cls.model_fields) if allowed is None else allowed
        if not isinstance(raw, dict):
            raise ConfigError(f"{where} must be a JSON object, got {show(raw)}")
        missing = sorted(set(required) - set(raw))
        if missing:
            raise ConfigError(f"{where} lacks {', '.join(missing)}")
        rules = cls.rules()
        for key, value in raw.items():
            if key not in allowed:
                raise ConfigError(f"{where}: unknown field {key!r}; use {', '.join(sorted(allowed))}")
            if key in rules:
                check(f"{where}.{key}", value, rules[key])
            elif key == "prices" and value is not None:
                check_prices(value, f"{where}.prices")
            elif key == "prompt_variant" and not isinstance(value, str):
                raise ConfigError(f"{where}.prompt_variant must be a prompt variant's name, got {show(value)}")
            elif key in ("model", "base_url", "cache") and value is not None and not isinstance(value, str):
                raise ConfigError(f"{where}.{key} must be a string{'' if key == 'model' else ' or null'}, got {show(value)}")
            elif key == "agent_models" and (not isinstance(value, dict) or not all(
                    str(k).isdigit() and isinstance(v, str) for k, v in value.items())):
                raise ConfigError(f"{where}.agent_models must map agent numbers to model specs, got {show(value)}")
            elif key in ("model_mix", "model_from") and value is not None and not isinstance(value, dict):
                raise ConfigError(f"{where}.{key} must be an object, got {show(value)}")
        try:
            return cls.model_validate({**raw, **more}, strict=False)
        except ValidationError as exc:
            e = exc.errors()[0]
            raise ConfigError(f"{where}.{'.'.join(str(x) for x in e['loc'])}: {e['msg']}") from None


def build_service(config: dict[str, Any], entries: list[dict[str, Any]] | None = None, journal: Path | None = None):
    """The LLM service of a run from its config (models, cache, ledger restored from the audit
    trail ``entries``). With ``journal`` (the run's :class:`~cooplab.graphs.ledger.LedgerJournal`
    file) every charge and every budget decision on a model call is journaled, and what an
    interrupted process left there is restored too: the charges the audit trail lacks, the
    reservations it still held and the calls its budget refused."""
    from cooplab.agents.decisions import LLMService
    from cooplab.agents.models.factory import make_chat_model  # looked up per call: tests wrap it (and parse_model_spec, in specs())
    from cooplab.agents.prices import NOMINAL
    from cooplab.graphs.ledger import Ledger, LedgerJournal, Rates

    llm = config["llm"] if isinstance(config["llm"], LLMSettings) else LLMSettings.model_validate(config["llm"], strict=False)
    models = {agent: (spec, make_chat_model(spec)) for agent, spec in llm.specs().items()}
    per_model = {model: Rates(*p) for model, p in llm.resolved_prices().items()}  # Rates takes floats by their shortest text
    rates = Rates(*NOMINAL)
    unit_rates = {"sandbox_seconds": Decimal(str((config.get("sandbox") or {}).get("rate") or 0))}
    ledger = Ledger(budget=None if llm.budget is None else Decimal(str(llm.budget)), rates=per_model, default_rates=rates,
                    unit_rates=unit_rates)
    if journal is not None:
        book = LedgerJournal(journal)
        granted, refused = book.decisions(ledger.budget)
        ledger.restore(entries or [], book.unrecorded(entries or []), granted=granted, refused=refused)
        ledger.on_commit, ledger.on_decision = book.append, book.record
    elif entries:
        ledger.restore(entries)
    cache = ResponseCache(None if llm.cache in (None, "off") else llm.cache)
    return LLMService(models=models, ledger=ledger, cache=cache, seed=int(config["seed"]), max_concurrency=llm.max_concurrency, rps=llm.rps,
                      call_timeout=llm.call_timeout, call_deadline=llm.call_deadline)
