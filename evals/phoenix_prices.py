"""Register a run's token prices in Arize Phoenix before its spans are sent (``--phoenix-prices``).

Phoenix does not read OpenInference's ``llm.cost.*`` attributes for its own cost columns: when it
ingests an LLM span it prices ``llm.token_count.prompt``/``completion`` with the entry of its model
price table (Settings -> Models) whose name pattern matches ``llm.model_name``, and stores that cost.
So, before any span is sent, :func:`register_prices`:

1. finds each exported model name's rates: the ledger's rates (``summary.json``'s
   ``ledger.rates_per_1k``: the model's own, else the default; else ``config.json``'s
   ``llm.price_in``/``price_out``) that reproduce every charge of that model's calls exactly;
2. creates, through Phoenix's GraphQL API (``createModel``), one custom entry per model whose
   pattern matches exactly that name (``^<escaped name>$``, no provider) with those rates per token;
   an entry with the same pattern that exists already (an earlier export) is reused when its prices
   are the same and updated (``updateModel``) when not, so re-exporting adds no entries;
3. waits until Phoenix prices with them: Phoenix reads its price table from its database every few
   seconds (its ``GenerativeModelStore`` daemon), and a span is priced once, at ingestion. So for
   each model a probe span (1M prompt and 1M completion tokens) is sent to a scratch project and
   the project is polled until a probe is priced at the new rates (a probe that arrived before the
   refresh keeps no or the old price, and another is sent), within a deadline; then the scratch
   project is deleted. This also finds an entry of someone else's that Phoenix prefers to ours.

Every failure (not a Phoenix, an error answer, no price known for a model, no refresh within the
deadline) raises :class:`PhoenixPriceError`, one line, before any of the run's spans is sent.
"""

from __future__ import annotations

import math
import os
import re
import time
import uuid
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from cooplab.graphs.tracing.charges import Charge, money_pair, run_dir_of, run_prices, split_cost

from .otlp_common import OTLP_TRACES_PATH, OtlpConfigError, cut_text
from .values import dig

PROBE_TOKENS = 1_000_000  #: prompt and completion tokens of a probe span: its cost is the price per million
DEFAULT_DEADLINE = 120.0  #: seconds to wait for Phoenix to price with the new entries (it refreshes every ~5 s)
POLL_SECONDS = 0.25  #: between two looks at the probe project
MAX_MODELS = 10_000  #: entries of Phoenix's price table read to find ours
ENTRY_PREFIX = "cooplab "  #: names of the entries this module writes: prefix + model name
MAX_RATE = Decimal(1000)  #: USD per 1K tokens above this is not a rate (cooplab's own cap on --price-in/out)


class PhoenixPriceError(OtlpConfigError):
    """Phoenix's prices could not be set (one line; nothing of the run was sent)."""


@dataclass(frozen=True)
class ModelPrice:
    """The rates (USD per 1,000 tokens) a run's ledger charged one exported model name at."""

    model: str
    input_per_1k: Decimal
    output_per_1k: Decimal

    @property
    def pattern(self) -> str:
        return f"^{re.escape(self.model)}$"

    @property
    def entry_name(self) -> str:
        return cut_text(ENTRY_PREFIX + self.model, 200)

    def per_million(self) -> tuple[float, float]:
        """(input, output) in USD per million tokens, as Phoenix takes them."""
        return float(self.input_per_1k * 1000), float(self.output_per_1k * 1000)


# ---------------------------------------------------------------------------------------------
# the run's rates
def _rate_pair(v: Any) -> tuple[Decimal, Decimal] | None:
    """Two rates per 1K tokens from 0 to :data:`MAX_RATE`, or None."""
    pair = money_pair(v)
    return pair if pair is not None and all(x <= MAX_RATE for x in pair) else None


def ledger_rates(run_dir: str | os.PathLike[str]) -> dict[str, tuple[Decimal, Decimal]]:
    """The rates per 1K tokens the run's ledger used, by model key (``"default"`` for the default),
    from ``summary.json``; ``config.json``'s ``llm.price_in``/``price_out`` as ``"config"`` and its
    per-model ``llm.prices`` as ``"config:MODEL"``. Values
    that are not two amounts from 0 to :data:`MAX_RATE` are left out."""
    out: dict[str, tuple[Decimal, Decimal]] = {}
    from cooplab.graphs import runfiles

    summary, _problem = runfiles.try_summary(
        run_dir_of(Path(run_dir))
    )  # a damaged summary gives no rate (the config's may)
    rates = summary.ledger.rates_per_1k if summary is not None and summary.ledger is not None else None
    if isinstance(rates, dict):
        for k, v in rates.items():
            pair = _rate_pair(v)
            if isinstance(k, str) and pair is not None:
                out[k] = pair
    for model, pair in run_prices(Path(run_dir)).items():
        if _rate_pair(pair) is not None:
            out.setdefault("config" if model is None else f"config:{model}", pair)
    return out


def _reproduces(rates: tuple[Decimal, Decimal], charges: Iterable[Charge]) -> bool:
    return all(sum(split_cost(c.input_tokens, c.output_tokens, rates)) == c.cost for c in charges)


def model_prices(run_dir: str | os.PathLike[str], charges_by_model: Mapping[str, list[Charge]]) -> list[ModelPrice]:
    """Each exported model name's rates: the first of the ledger's rates (the model's own, the
    default, config.json's, then any other) that reproduce all its charges. Raises
    :class:`PhoenixPriceError` for a model whose charges no known rate reproduces."""
    known = ledger_rates(run_dir)
    out = []
    for model, charges in sorted(charges_by_model.items()):
        order = [model, "default", "config", *sorted(k for k in known if k not in (model, "default", "config"))]
        found = next((known[k] for k in order if k in known and _reproduces(known[k], charges)), None)
        if found is None:
            raise PhoenixPriceError(
                f"--phoenix-prices: no rate in {run_dir_of(Path(run_dir))}'s summary.json "
                f"or config.json reproduces what the "
                f"ledger charged for model {cut_text(model, 80)!r}; export without --phoenix-prices (the spans still "
                "carry llm.cost.*)"
            )
        out.append(ModelPrice(model, *found))
    return out


# ---------------------------------------------------------------------------------------------
# GraphQL
def phoenix_base(otlp_url: str) -> str:
    """Phoenix's base URL from the OTLP traces URL (``.../v1/traces`` taken off)."""
    return otlp_url[: -len(OTLP_TRACES_PATH)] if otlp_url.endswith(OTLP_TRACES_PATH) else otlp_url.rstrip("/")


class GraphQL:
    """Phoenix's GraphQL endpoint (``{base}/graphql``); ``$PHOENIX_API_KEY`` is sent as a bearer token."""

    def __init__(self, base: str, timeout: float):
        import requests

        self.url, self.timeout = base + "/graphql", timeout
        self.session = requests.Session()
        key = os.environ.get("PHOENIX_API_KEY")
        if key:
            self.session.headers["Authorization"] = f"Bearer {key}"

    def __call__(self, query: str, **variables: Any) -> dict[str, Any]:
        """The ``data`` of the answer; raises :class:`PhoenixPriceError` (one line) otherwise."""
        import requests

        try:
            r = self.session.post(self.url, json={"query": query, "variables": variables}, timeout=self.timeout)
        except requests.RequestException as exc:
            raise PhoenixPriceError(
                f"--phoenix-prices: cannot reach Phoenix's GraphQL API at {self.url} ({type(exc).__name__})"
            ) from None
        try:
            body = r.json()
        except ValueError:
            body = None
        if not isinstance(body, dict) or (r.status_code != 200 and not body.get("errors")):
            raise PhoenixPriceError(
                f"--phoenix-prices: {self.url} answered HTTP {r.status_code} without a GraphQL answer: "
                "is this a Phoenix server? (export without --phoenix-prices to another OTLP back end)"
            )
        errors = body.get("errors")
        if errors:
            first = errors[0].get("message") if isinstance(errors[0], dict) else errors[0]
            raise PhoenixPriceError(
                f"--phoenix-prices: Phoenix refused a request: {cut_text(' '.join(str(first).split()), 300)}"
            )
        data = body.get("data")
        if not isinstance(data, dict):
            raise PhoenixPriceError(f"--phoenix-prices: {self.url} gave no data")
        return data


def _nodes(data: Any, *keys: str) -> list[dict[str, Any]]:
    """The nodes of the connection at ``keys`` (``edges[].node``) that are objects."""
    edges = dig(data, ".".join((*keys, "edges")))
    return (
        [e["node"] for e in edges if isinstance(e, dict) and isinstance(e.get("node"), dict)]
        if isinstance(edges, list)
        else []
    )


def _written_id(data: dict[str, Any], field: str) -> str:
    """The id of the entry a ``createModel``/``updateModel`` answer names."""
    mid = dig(data, f"{field}.model.id")
    if not isinstance(mid, str) or not mid:
        raise PhoenixPriceError(f"--phoenix-prices: Phoenix's {field} answer names no model id")
    return mid


_LIST = """query($first: Int!) { generativeModels(first: $first) { edges { node {
  id name namePattern provider kind tokenPrices { tokenType kind costPerMillionTokens } } } } }"""
_CREATE = """mutation($input: CreateModelMutationInput!) { createModel(input: $input) { model { id } } }"""
_UPDATE = """mutation($input: UpdateModelMutationInput!) { updateModel(input: $input) { model { id } } }"""
_PROBE = """query($name: String!) { getProjectByName(name: $name) { id
  spans(first: 100) { edges { node { costSummary { total { cost } } } } } } }"""
_DELETE = """mutation($id: ID!) { deleteProject(id: $id) { __typename } }"""


def _costs(price: ModelPrice) -> list[dict[str, Any]]:
    pin, pout = price.per_million()
    return [
        {"tokenType": "input", "kind": "PROMPT", "costPerMillionTokens": pin},
        {"tokenType": "output", "kind": "COMPLETION", "costPerMillionTokens": pout},
    ]


def _same_prices(node: Mapping[str, Any], price: ModelPrice) -> bool:
    prices = node.get("tokenPrices")
    prices = prices if isinstance(prices, list) else []
    have = {(p.get("tokenType"), p.get("kind")): p.get("costPerMillionTokens") for p in prices if isinstance(p, dict)}
    want = {(c["tokenType"], c["kind"]): c["costPerMillionTokens"] for c in _costs(price)}
    return set(have) == set(want) and all(
        isinstance(h := have[k], (int, float)) and math.isclose(h, v, rel_tol=1e-12, abs_tol=0) for k, v in want.items()
    )


@dataclass(frozen=True)
class PriceEntry:
    """One entry of Phoenix's price table as this export left it."""

    model: str
    id: str
    action: str  #: "created", "updated" or "reused"

    def as_dict(self) -> dict[str, str]:
        return {"model": self.model, "id": self.id, "action": self.action}


def upsert_prices(gql: GraphQL, prices: list[ModelPrice]) -> list[PriceEntry]:
    """Create, update or reuse one custom entry per model (found by its exact pattern, no provider)."""
    ours: dict[Any, dict[str, Any]] = {}
    for node in _nodes(gql(_LIST, first=MAX_MODELS), "generativeModels"):
        if node.get("kind") == "CUSTOM" and not node.get("provider") and isinstance(node.get("id"), str):
            ours.setdefault(node.get("namePattern"), node)
    out = []
    for price in prices:
        node = ours.get(price.pattern)
        if node is not None and _same_prices(node, price):
            out.append(PriceEntry(price.model, str(node["id"]), "reused"))
            continue
        if node is not None:
            name = node["name"] if isinstance(node.get("name"), str) and node["name"] else price.entry_name
            data = gql(
                _UPDATE,
                input={
                    "id": node["id"],
                    "name": name,
                    "provider": None,
                    "namePattern": price.pattern,
                    "costs": _costs(price),
                },
            )
            out.append(PriceEntry(price.model, _written_id(data, "updateModel"), "updated"))
        else:
            data = gql(_CREATE, input={"name": price.entry_name, "namePattern": price.pattern, "costs": _costs(price)})
            out.append(PriceEntry(price.model, _written_id(data, "createModel"), "created"))
    return out


# ---------------------------------------------------------------------------------------------
# waiting for Phoenix to price with them
def _probe_span(price: ModelPrice, project: str):
    """One LLM span of ``price.model`` with :data:`PROBE_TOKENS` prompt and completion tokens."""
    from openinference.semconv.resource import ResourceAttributes
    from openinference.semconv.trace import SpanAttributes as SA
    from opentelemetry import trace as trace_api
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope

    now = time.time_ns()
    ctx = trace_api.SpanContext(
        uuid.uuid4().int,
        uuid.uuid4().int >> 64 or 1,
        is_remote=False,
        trace_flags=trace_api.TraceFlags(trace_api.TraceFlags.SAMPLED),
    )
    attrs = {
        SA.OPENINFERENCE_SPAN_KIND: "LLM",
        SA.LLM_MODEL_NAME: price.model,
        SA.LLM_TOKEN_COUNT_PROMPT: PROBE_TOKENS,
        SA.LLM_TOKEN_COUNT_COMPLETION: PROBE_TOKENS,
        SA.LLM_TOKEN_COUNT_TOTAL: 2 * PROBE_TOKENS,
    }
    return ReadableSpan(
        name="cooplab price probe",
        context=ctx,
        parent=None,
        attributes=attrs,
        resource=Resource.create({"service.name": "cooplab", ResourceAttributes.PROJECT_NAME: project}),
        start_time=now,
        end_time=now,
        instrumentation_scope=InstrumentationScope("cooplab.evals.phoenix_prices", "1"),
    )


def wait_until_priced(
    gql: GraphQL,
    send: Callable[[Any], bool],
    price: ModelPrice,
    *,
    deadline: float = DEFAULT_DEADLINE,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Send probe spans of ``price.model`` (through ``send``) to a scratch project until Phoenix
    prices one at ``price``'s rates; delete the project. Returns the number of probes sent."""
    project = f"cooplab-price-probe-{uuid.uuid4().hex[:12]}"
    want = sum(price.per_million())
    end, sent, seen = clock() + deadline, 0, 0
    project_id = None
    try:
        while True:
            if seen >= sent:  # every probe sent so far arrived unpriced (or none was sent): send one more
                if not send(_probe_span(price, project)):
                    raise PhoenixPriceError(
                        f"--phoenix-prices: Phoenix did not accept a probe span for {cut_text(price.model, 80)!r}"
                    )
                sent += 1
            proj = gql(_PROBE, name=project).get("getProjectByName")
            if isinstance(proj, dict):
                project_id = proj.get("id") if isinstance(proj.get("id"), str) else project_id
                costs = [dig(n, "costSummary.total.cost") for n in _nodes(proj, "spans")]
                if any(isinstance(c, (int, float)) and math.isclose(c, want, rel_tol=1e-9) for c in costs):
                    return sent
                seen = len(costs)
            if clock() > end:
                raise PhoenixPriceError(
                    f"--phoenix-prices: Phoenix did not price model {cut_text(price.model, 80)!r} at the new rates "
                    "within "
                    f"{deadline:g} s (it reads its price table every few seconds); try again"
                )
            time.sleep(POLL_SECONDS)  # polling interval while Phoenix ingests and refreshes
    finally:
        if project_id is not None:
            try:
                gql(_DELETE, id=project_id)
            except PhoenixPriceError:
                pass  # a scratch project left behind is harmless; the export goes on


def register_prices(
    run_dir: str | os.PathLike[str],
    otlp_url: str,
    charges_by_model: Mapping[str, list[Charge]],
    send: Callable[[Any], bool],
    *,
    timeout: float = 10.0,
    deadline: float = DEFAULT_DEADLINE,
) -> list[PriceEntry]:
    """Steps 1-3 of the module's docstring; returns the entries written or reused."""
    prices = model_prices(run_dir, charges_by_model)
    if not prices:
        return []
    gql = GraphQL(phoenix_base(otlp_url), timeout)
    entries = upsert_prices(gql, prices)
    for price in prices:  # the first waits for Phoenix's refresh; the others are priced at once then
        wait_until_priced(gql, send, price, deadline=deadline)
    return entries
