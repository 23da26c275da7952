"""A run's LLM settings: checked and assembled in one place, and turned into the LLM service.

``config.json``'s ``"llm"`` block (models by agent, endpoint, sampling, concurrency, rate limit,
budget, prices, cache, sandbox rate) is built by :func:`llm_config` from the options of any entry
point (the CLI's flags, a sweep's fields, keyword arguments in Python), checked again by
:func:`check_llm_config` when a run resumes, and turned into the run's
:class:`~cooplab.agents.decisions.LLMService` by :func:`build_service`. Every number follows its
rule in :mod:`cooplab.limits`; a bad value is a one-line :class:`~cooplab.limits.ConfigError`.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

from cooplab.agents.cache import ResponseCache, check_cache, default_cache_path
from cooplab.agents.models import check_model
from pydantic import BaseModel, ConfigDict, Field

from cooplab.limits import ConfigError, check, check_agent_models, show

#: field of the settings -> the rule it follows
LLM_FIELDS: dict[str, str] = {
    "temperature": "temperature", "max_tokens": "max-tokens", "max_concurrency": "max-concurrency", "rps": "rps",
    "budget": "budget", "price_in": "price-in", "price_out": "price-out",
    "price_in_per_1k": "price-in", "price_out_per_1k": "price-out", "sandbox_usd_per_second": "sandbox-rate",
}


def check_llm(llm: Any, where: str, allowed: set[str]) -> dict[str, Any]:
    """Check the LLM settings of a file: a JSON object whose keys are in ``allowed``, numbers by
    their rules, strings where strings belong. ``where``: "sweep config x.json: llm"."""
    if not isinstance(llm, dict):
        raise ConfigError(f"{where} must be a JSON object, got {show(llm)}")
    for key, value in llm.items():
        if key not in allowed:
            raise ConfigError(f"{where}: unknown field {key!r}; use {', '.join(sorted(allowed))}")
        if key in LLM_FIELDS:
            check(f"{where}.{key}", value, LLM_FIELDS[key])
        elif key in ("base_url", "cache") and value is not None and not isinstance(value, str):
            raise ConfigError(f"{where}.{key} must be a string or null, got {show(value)}")
        elif key == "models":
            if not isinstance(value, dict) or "default" not in value or not all(isinstance(v, str) for v in value.values()):
                raise ConfigError(f"{where}.models must map 'default' and agent numbers to model specs, got {show(value)}")
    return llm


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


def llm_config(model, agent_model, base_url, temperature, max_tokens, max_concurrency, rps, budget, price_in, price_out, cache, *,
               n_agents: int | None = None, names: dict[str, str] | None = None) -> dict[str, Any]:
    """Check the LLM options (every number by its rule in :mod:`cooplab.limits`, the model specs, the
    scripted files, the cache) and assemble config.json's "llm". ``names``: how to call each setting
    in messages (default: the CLI option, e.g. "--budget"; a sweep passes its config fields)."""
    label = (lambda key, opt: (names or {}).get(key, opt))
    models = {"default": model, **{str(a): m for a, m in parse_agent_models(agent_model or []).items()}}
    if n_agents is not None:
        check_agent_models(models, n_agents, name=lambda k: f"--agent-model {k}={models[k]}")
    for key, rule, v in (("temperature", "temperature", temperature), ("max_tokens", "max-tokens", max_tokens),
                         ("max_concurrency", "max-concurrency", max_concurrency), ("rps", "rps", rps), ("budget", "budget", budget),
                         ("price_in", "price-in", price_in), ("price_out", "price-out", price_out)):
        check(label(key, "--" + rule), v, rule)
    if base_url is not None and not isinstance(base_url, str):
        raise ConfigError(f"{label('base_url', '--base-url')} must be a URL string, got {base_url!r}")
    if cache is not None and not isinstance(cache, str):
        raise ConfigError(f"{label('cache', '--cache')} must be a file path or 'off', got {cache!r}")
    for text in models.values():
        check_model(text, base_url, label("model", "--model"))
    cache_path = "off" if cache == "off" else str(Path(cache).expanduser() if cache else default_cache_path())
    if cache_path != "off":
        check_cache(cache_path, label("cache", "--cache"))
    return {
        "models": models, "base_url": base_url, "temperature": temperature, "max_tokens": max_tokens,
        "max_concurrency": max_concurrency, "rps": rps, "budget": budget, "price_in_per_1k": price_in,
        "price_out_per_1k": price_out, "cache": cache_path,
    }


class LLMSettings(BaseModel):
    """How LLM agents are called: their models, the endpoint, sampling, concurrency, rate, budget,
    prices and the response cache (``cooplab run --model ... --budget ...``)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    model: str = Field("local", description="Model spec of every agent: local, openai:NAME, scripted:FILE, builtin:NAME.")
    agent_models: dict[int, str] = Field(default_factory=dict, description="Per-agent model specs by agent number (0..N-1).")
    base_url: str | None = Field(None, description="OpenAI-compatible server URL for openai:NAME.")
    temperature: float = 0.7
    max_tokens: int = Field(64, description="Output token cap per call.")
    max_concurrency: int = 8
    rps: float | None = Field(None, description="Requests per second at most (None: no limit).")
    budget: float | None = Field(None, description="Budget cap in USD (None: no cap).")
    price_in: float = Field(0.0005, description="USD per 1K input tokens.")
    price_out: float = Field(0.003, description="USD per 1K output tokens.")
    cache: str | None = Field(None, description="Response cache file (None: the default cache; 'off': no cache).")

    def to_config(self, n_agents: int | None) -> dict[str, Any]:
        """config.json's ``"llm"``, every value checked (one-line ConfigError)."""
        per_agent = [f"{a}={m}" for a, m in self.agent_models.items()]
        return llm_config(self.model, per_agent, self.base_url, self.temperature, self.max_tokens, self.max_concurrency, self.rps,
                          self.budget, self.price_in, self.price_out, self.cache, n_agents=n_agents)

    @classmethod
    def from_file(cls, fields: dict[str, Any], **more: Any) -> "LLMSettings":
        """Settings from a file's fields already checked by :func:`check_llm` (JSON numbers such as
        256.0 for an integer pass, as their rules allow), with ``more`` on top."""
        return cls.model_validate({**fields, **more}, strict=False)


#: keys of config.json's "llm" (see :func:`llm_config`)
LLM_CONFIG_KEYS = {"models", "base_url", "temperature", "max_tokens", "max_concurrency", "rps", "budget", "price_in_per_1k",
                   "price_out_per_1k", "cache", "sandbox_usd_per_second"}
#: keys a run's "llm" may leave out (older runs, runs without a cap or a sandbox)
LLM_OPTIONAL = {"base_url", "rps", "budget", "sandbox_usd_per_second"}


def check_llm_config(out: Path, config: dict[str, Any], n_agents: int) -> None:
    """config.json's "llm" of an LLM run, by the CLI's rules (raises ConfigError)."""
    where = f"{out}/config.json: llm"
    llm = config.get("llm")
    check_llm(llm, where, LLM_CONFIG_KEYS)
    missing = sorted(LLM_CONFIG_KEYS - LLM_OPTIONAL - set(llm))
    if missing:
        raise ConfigError(f"{where} lacks {', '.join(missing)}")
    check_agent_models(llm["models"], n_agents, name=lambda k: f"{where}.models[{k!r}]")
    for agent, text in llm["models"].items():
        check_model(text, llm.get("base_url"), f"{where}.models[{agent!r}]")
    if llm["cache"] != "off":
        check_cache(llm["cache"], f"{where}.cache")


def build_service(config: dict[str, Any], entries: list[dict[str, Any]] | None = None):
    """The LLM service of a run from its config (models, cache, ledger restored from the audit trail)."""
    from cooplab.agents.decisions import LLMService
    from cooplab.agents.models import make_chat_model, parse_model_spec  # looked up per call: tests wrap them
    from cooplab.graphs.ledger import Ledger, Rates

    llm = config["llm"]
    models = {}
    for agent, text in llm["models"].items():
        spec = parse_model_spec(text, base_url=llm.get("base_url"), temperature=llm["temperature"], max_tokens=llm["max_tokens"])
        models[agent] = (spec, make_chat_model(spec))
    rates = Rates(Decimal(str(llm["price_in_per_1k"])), Decimal(str(llm["price_out_per_1k"])))
    unit_rates = {"sandbox_seconds": Decimal(str(llm.get("sandbox_usd_per_second") or 0))}
    ledger = Ledger(budget=None if llm.get("budget") is None else Decimal(str(llm["budget"])), default_rates=rates, unit_rates=unit_rates)
    if entries:
        ledger.restore(entries)
    cache = ResponseCache(None if llm.get("cache") in (None, "off") else llm["cache"])
    return LLMService(models=models, ledger=ledger, cache=cache, seed=int(config["seed"]), max_concurrency=int(llm["max_concurrency"]),
                      rps=llm.get("rps"))
