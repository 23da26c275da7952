"""What a model's tokens cost: list prices of known hosted models, and the nominal price of the rest.

A run's ledger charges each model by its own rates (USD per 1,000 input and output tokens). They
come from, in order:

1. ``--price-in`` / ``--price-out`` (``LLMSettings.price_in`` / ``price_out``): an override for
   every model of the run;
2. :data:`LIST_PRICES`: the providers' published list prices of known models, as of
   :data:`PRICES_DATE` (a model's name matches the longest prefix listed for its provider, so
   ``claude-3-5-haiku-20241022`` and ``claude-3-5-haiku-latest`` are both Claude 3.5 Haiku);
3. :data:`NOMINAL`: models that run on your own machine or server (``local``, ``scripted:``,
   ``builtin:``, ``ollama:``, and any provider's model served from a ``--base-url`` of your own
   that the table does not list) get a nominal price, so that budgets work offline too.

A hosted provider's model on its own API that the table does not list has no price: with a
``--budget`` that is one line and exit 2 (give ``--price-in`` and ``--price-out``); without a
budget it is charged nothing (its cost is reported as 0). The prices a run used are recorded in its
config.json (``llm.prices``), so a resumed or repeated run charges the same.
"""

from __future__ import annotations

from typing import Any

from cooplab.limits import ConfigError

#: the date the list prices below were taken from the providers' price pages
PRICES_DATE = "2025-06-01"

#: the nominal price (USD per 1K input, output tokens) of models with no list price
NOMINAL: tuple[float, float] = (0.0005, 0.003)

#: list prices, USD per 1K input and output tokens, of known models by provider and name prefix
#: (standard tier, no batch or cache discounts), as of PRICES_DATE
LIST_PRICES: dict[str, dict[str, tuple[float, float]]] = {
    "openai": {
        "gpt-4o-mini": (0.00015, 0.0006),
        "gpt-4o": (0.0025, 0.01),
        "gpt-4.1-nano": (0.0001, 0.0004),
        "gpt-4.1-mini": (0.0004, 0.0016),
        "gpt-4.1": (0.002, 0.008),
        "gpt-3.5-turbo": (0.0005, 0.0015),
        "o4-mini": (0.0011, 0.0044),
        "o3-mini": (0.0011, 0.0044),
    },
    "anthropic": {
        "claude-3-haiku": (0.00025, 0.00125),
        "claude-3-5-haiku": (0.0008, 0.004),
        "claude-3-5-sonnet": (0.003, 0.015),
        "claude-3-7-sonnet": (0.003, 0.015),
        "claude-sonnet-4": (0.003, 0.015),
        "claude-opus-4": (0.015, 0.075),
        "claude-3-opus": (0.015, 0.075),
    },
    "google_genai": {
        "gemini-1.5-flash": (0.000075, 0.0003),
        "gemini-2.0-flash-lite": (0.000075, 0.0003),
        "gemini-2.0-flash": (0.0001, 0.0004),
        "gemini-2.5-flash": (0.0003, 0.0025),
        "gemini-2.5-pro": (0.00125, 0.01),
        "gemini-1.5-pro": (0.00125, 0.005),
    },
}

#: spec kinds that always run on your own machine or server: the nominal price
SELF_HOSTED = frozenset({"local", "scripted", "builtin", "ollama"})


def list_price(kind: str, name: str) -> tuple[float, float] | None:
    """The list price of ``kind:name`` (the longest listed prefix of ``name``; ``models/`` dropped,
    as Google spells it), or None."""
    table = LIST_PRICES.get(kind, {})
    name = name.removeprefix("models/")
    best = max(
        (p for p in table if name == p or name.startswith(p + "-") or name.startswith(p + "@")), key=len, default=None
    )
    return None if best is None else table[best]


def price_of(spec: Any, price_in: float | None = None, price_out: float | None = None) -> tuple[float, float] | None:
    """(USD per 1K input, per 1K output tokens) of the model ``spec``, or None when it has none (a
    hosted provider's unknown model on its own API): the override where given, else the list price,
    else the nominal price for a model of your own. A chat model object (``instance:``) is priced
    by its provider and model name (:func:`cooplab.agents.instances.price_identity`)."""
    if spec.kind == "instance":
        from types import SimpleNamespace

        from cooplab.agents.instances import price_identity

        kind, name, own = price_identity(spec.id)
        spec = SimpleNamespace(kind=kind or "instance", name=name, base_url=own)
    table = list_price(spec.kind, spec.name)
    if table is None and (spec.kind in SELF_HOSTED or getattr(spec, "base_url", None)):
        table = NOMINAL
    if price_in is not None and price_out is not None:
        return float(price_in), float(price_out)
    if table is None:
        return None
    return (
        float(price_in) if price_in is not None else table[0],
        float(price_out) if price_out is not None else table[1],
    )


def run_prices(
    specs: dict[str, Any], price_in: float | None, price_out: float | None, budget: float | None, name: str = "--budget"
) -> dict[str, list[float]]:
    """``{model id: [price in, price out]}`` of every model of a run (``specs``: who -> ModelSpec);
    a model without a price is 0 (charged nothing), or, under a ``budget``, one line."""
    out: dict[str, list[float]] = {}
    for spec in specs.values():
        price = price_of(spec, price_in, price_out)
        if price is None:
            if budget is not None:
                raise ConfigError(
                    f"{name} needs the price of {spec.id}, which cooplab's price table (list prices as of "
                    f"{PRICES_DATE}) does not know: give --price-in and --price-out (USD per 1K tokens)"
                )
            price = (0.0, 0.0)
        out[spec.id] = [price[0], price[1]]
    return out


__all__ = ["LIST_PRICES", "NOMINAL", "PRICES_DATE", "SELF_HOSTED", "list_price", "price_of", "run_prices"]
