"""Structured decisions: a pydantic schema per decision, validated, retried, with a fallback.

:class:`LLMService` is the graph-wide model service (it travels in LangGraph's runtime
context): per-agent models, the response cache, the credit ledger, a concurrency bound and an
optional requests-per-second limit. :func:`decide` asks one agent for one decision:

1. the call's deterministic key (model identity, messages, agent, round, phase, seed, attempt)
   is looked up in the cache; a hit replays the answer without calling the model;
2. otherwise the ledger reserves the call's worst-case cost (refused: ``BudgetExhausted``),
   the model is called (transport failures retry with bounded exponential backoff, then
   :class:`ModelUnavailable`), the actual cost is committed and the answer cached;
3. the answer is parsed as JSON and validated (types, ranges, ids that exist); on failure the
   validation error is fed back and the agent asked again, up to ``max_attempts`` times;
4. then the decision's documented fallback is used.

Every decision returns a :class:`DecisionRecord` row: agent, round, phase, raw text, parsed
value, attempts, fallback used, tokens, latency, cost.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from typing import Any, Generic, TypeVar

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from pydantic import BaseModel, ValidationError

from cooplab.agents.cache import CachedResponse, ResponseCache, cache_key
from cooplab.agents.models import (
    LlamaCppChat,
    ModelSpec,
    ScriptedChatModel,
    TransientModelError,
    count_tokens,
    messages_tokens,
)
from cooplab.graphs.ledger import BudgetExhausted, Ledger

T = TypeVar("T", bound=BaseModel)


class ModelUnavailable(RuntimeError):
    """Transport failures persisted past the retry budget; the run stops at its last checkpoint."""


def is_transient(exc: BaseException) -> bool:
    """Timeout, refused connection, 429 and 5xx are worth retrying; everything else is not."""
    if isinstance(exc, (TransientModelError, TimeoutError, asyncio.TimeoutError, ConnectionError)):
        return True
    try:
        import openai

        if isinstance(exc, (openai.APIConnectionError, openai.APITimeoutError, openai.RateLimitError, openai.InternalServerError)):
            return True
        if isinstance(exc, openai.APIStatusError) and getattr(exc, "status_code", 0) >= 500:
            return True
    except ImportError:  # pragma: no cover
        pass
    try:
        import httpx

        if isinstance(exc, (httpx.TransportError,)):
            return True
    except ImportError:  # pragma: no cover
        pass
    return False


@dataclass
class DecisionSpec(Generic[T]):
    """How to decide one thing: the schema, semantic checks, and the fallback."""

    phase: str
    schema: type[T]
    check: Callable[[T, dict[str, Any]], None] = lambda value, ctx: None  # raise ValueError if wrong
    fallback: Callable[[dict[str, Any]], T] | None = None
    max_attempts: int = 3
    instructions: str = "Reply with one JSON object only, no other text."
    # optional: a per-call schema for grammar-constrained decoders (e.g. the ids actually shown);
    # it only narrows decoding, validation always uses ``schema`` and ``check``
    constrain: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]] | None = None
    max_tokens: int | None = None  # output cap for this decision (default: the model's --max-tokens)
    _schema: dict[str, Any] | None = field(default=None, init=False, repr=False)

    @property
    def json_schema(self) -> dict[str, Any]:
        """The schema's JSON Schema, computed once (pydantic's generation costs ~0.1 ms a call)."""
        if self._schema is None:
            self._schema = self.schema.model_json_schema()
        return self._schema


@dataclass
class DecisionRecord:
    society: int
    agent: int
    round: int
    phase: str
    model: str
    raw: str
    parsed: dict[str, Any] | None
    attempts: int
    fallback_used: bool
    error: str | None
    input_tokens: int
    output_tokens: int
    latency: float
    cost: str
    cached_calls: int

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)  # shallow: the fields are plain values (asdict deep-copies)


def decoding_schema(schema: dict[str, Any], levels: int = 21) -> dict[str, Any]:
    """The schema handed to a grammar-constrained decoder. llama.cpp's JSON-schema grammar
    ignores ``minimum``/``maximum``, so a bounded number becomes an enum of ``levels`` evenly
    spaced values (0, 0.05, ..., 1 for an effort) and a bounded integer the enum of its range:
    the model can then only say something valid. Validation still runs on the answer."""
    props = schema.get("properties")
    if not isinstance(props, dict):
        return schema
    out = dict(schema)
    new_props = {}
    for name, p in props.items():
        lo, hi = p.get("minimum"), p.get("maximum")
        if p.get("type") == "number" and lo is not None and hi is not None:
            new_props[name] = {"enum": [round(lo + (hi - lo) * k / (levels - 1), 6) for k in range(levels)]}
        elif p.get("type") == "integer" and lo is not None and hi is not None and hi - lo <= 100:
            new_props[name] = {"enum": list(range(int(lo), int(hi) + 1))}
        else:
            new_props[name] = p
    out["properties"] = new_props
    return out


class RateLimiter:
    """At most ``rps`` call starts per second (token bucket of size 1)."""

    def __init__(self, rps: float | None):
        self.interval = 1.0 / rps if rps else 0.0
        self._next = 0.0
        self._lock = asyncio.Lock()

    async def wait(self) -> None:
        if not self.interval:
            return
        async with self._lock:
            now = time.monotonic()
            delay = self._next - now
            self._next = max(now, self._next) + self.interval
        if delay > 0:
            await asyncio.sleep(delay)


@dataclass
class LLMService:
    """Graph-wide model service (runtime context)."""

    models: dict[str, tuple[ModelSpec, BaseChatModel]]  # "default" and/or per-agent keys "3"
    ledger: Ledger = field(default_factory=Ledger)
    cache: ResponseCache = field(default_factory=lambda: ResponseCache(None))
    seed: int = 0
    max_concurrency: int = 8
    rps: float | None = None
    max_transport_retries: int = 4
    backoff_base: float = 0.5
    backoff_max: float = 8.0
    _sem: asyncio.Semaphore | None = None
    _limiter: RateLimiter | None = None
    live_calls: int = 0

    def model_for(self, agent: int) -> tuple[ModelSpec, BaseChatModel]:
        return self.models.get(str(agent)) or self.models["default"]

    def _sync_primitives(self) -> None:
        # created lazily inside the running loop
        if self._sem is None:
            self._sem = asyncio.Semaphore(max(1, int(self.max_concurrency)))
            self._limiter = RateLimiter(self.rps)

    async def call(self, *, agent: int, society: int, round: int, phase: str, messages: list[BaseMessage],
                   schema: dict[str, Any] | None, attempt: int, config: dict | None = None,
                   decode_schema: dict[str, Any] | None = None, max_tokens: int | None = None) -> tuple[CachedResponse, bool]:
        """One model call (cached, charged, rate-limited, retried). Returns (response, cached)."""
        spec, model = self.model_for(agent)
        key = cache_key(model=spec.identity(), messages=[(m.type, str(m.content)) for m in messages], agent=f"{society}:{agent}",
                        round=round, phase=phase, seed=self.seed, attempt=attempt, schema=_schema_id(schema),
                        **({"max_tokens": max_tokens} if max_tokens else {}))
        hit = self.cache.get(key)
        agent_id = f"{society}:{agent}"
        if hit is not None:
            self.ledger.charge(call_id=key[:16], model=spec.id, agent=agent_id, round=round, phase=phase,
                               input_tokens=hit.input_tokens, output_tokens=hit.output_tokens, cached=True)
            return hit, True
        est_in = sum(len(str(m.content)) for m in messages) // 2 + 8 * len(messages) + 16  # generous: ~4 chars a token
        out_cap = max_tokens or spec.max_tokens
        reservation = self.ledger.reserve(self.ledger.cost(spec.id, est_in, out_cap))
        try:
            self._sync_primitives()
            kwargs: dict[str, Any] = {}
            if isinstance(model, ScriptedChatModel):
                kwargs["phase"] = phase
            elif schema is not None:
                if isinstance(model, LlamaCppChat):
                    kwargs["response_format"] = {"type": "json_object", "schema": decoding_schema(decode_schema or schema)}
                elif spec.base_url:
                    kwargs["response_format"] = {"type": "json_object", "schema": schema}
                else:
                    kwargs["response_format"] = {"type": "json_object"}
            if not isinstance(model, ScriptedChatModel):
                kwargs["seed"] = int(key[:8], 16)
                if max_tokens:
                    kwargs["max_tokens"] = max_tokens
            delay = self.backoff_base
            for retry in range(self.max_transport_retries + 1):
                try:
                    async with self._sem:
                        await self._limiter.wait()
                        t0 = time.perf_counter()
                        self.live_calls += 1
                        msg = await model.ainvoke(messages, config=config, **kwargs)
                        latency = time.perf_counter() - t0
                    break
                except Exception as exc:  # noqa: BLE001
                    if not is_transient(exc):
                        raise
                    if retry == self.max_transport_retries:
                        raise ModelUnavailable(f"model {spec.id} unreachable after {retry + 1} attempts: {type(exc).__name__}: {exc}") from exc
                    await asyncio.sleep(min(delay, self.backoff_max))
                    delay *= 2
            um = getattr(msg, "usage_metadata", None) or {}
            text = str(msg.content or "")
            i_tok = int(um.get("input_tokens") or messages_tokens(messages))
            o_tok = int(um.get("output_tokens") or count_tokens(text))
            resp = CachedResponse(text, i_tok, o_tok, latency)
        except BaseException:
            self.ledger.release(reservation)
            raise
        self.ledger.charge(call_id=key[:16], model=spec.id, agent=agent_id, round=round, phase=phase,
                           input_tokens=i_tok, output_tokens=o_tok, reservation=reservation)
        self.cache.put(key, resp, spec.id)
        return resp, False


_SCHEMA_IDS: dict[int, str] = {}


def _schema_id(schema: dict[str, Any] | None) -> str | None:
    """A stable digest of a response schema, memoized per schema object."""
    if schema is None:
        return None
    sid = _SCHEMA_IDS.get(id(schema))
    if sid is None:
        import hashlib

        sid = hashlib.sha256(json.dumps(schema, sort_keys=True).encode()).hexdigest()[:16]
        _SCHEMA_IDS[id(schema)] = sid
    return sid


_JSON_RE = re.compile(r"\{.*\}", re.DOTALL)


def parse_json(text: str) -> Any:
    """The first JSON object in ``text`` (models often wrap JSON in prose or code fences)."""
    text = (text or "").strip()
    if not text:
        raise ValueError("the answer was empty")
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    m = _JSON_RE.search(text)
    if not m:
        if "{" in text:
            raise ValueError("the answer's JSON is malformed (unclosed object)")
        raise ValueError("the answer contained no JSON object")
    try:
        return json.loads(m.group(0))
    except json.JSONDecodeError as exc:
        raise ValueError(f"the answer's JSON is malformed: {exc.msg}") from None


def validate(spec: DecisionSpec[T], text: str, ctx: dict[str, Any]) -> T:
    data = parse_json(text)
    if not isinstance(data, dict):
        raise ValueError("the answer must be a JSON object")
    try:
        value = spec.schema.model_validate(data)
    except ValidationError as exc:
        e = exc.errors()[0]
        loc = ".".join(str(x) for x in e["loc"]) or "answer"
        raise ValueError(f"field '{loc}': {e['msg']}") from None
    spec.check(value, ctx)
    return value


async def decide(service: LLMService, spec: DecisionSpec[T], messages: list[BaseMessage], *, society: int, agent: int,
                 round: int, ctx: dict[str, Any] | None = None, config: dict | None = None) -> tuple[T | None, DecisionRecord]:
    """Ask one agent for one structured decision (see the module docstring)."""
    ctx = ctx or {}
    schema = spec.json_schema
    decode_schema = spec.constrain(schema, ctx) if spec.constrain is not None else None
    convo = list(messages)
    raw, err = "", None
    in_tok = out_tok = cached_calls = 0
    latency = 0.0
    cost = Decimal(0)
    value: T | None = None
    attempts = 0
    for attempt in range(spec.max_attempts):
        attempts = attempt + 1
        resp, cached = await service.call(agent=agent, society=society, round=round, phase=spec.phase, messages=convo,
                                          schema=schema, attempt=attempt, config=config, decode_schema=decode_schema,
                                          max_tokens=spec.max_tokens)
        spec_id = service.model_for(agent)[0].id
        raw = resp.text
        in_tok += resp.input_tokens
        out_tok += resp.output_tokens
        latency += resp.latency
        cached_calls += int(cached)
        cost += service.ledger.cost(spec_id, resp.input_tokens, resp.output_tokens)
        try:
            value = validate(spec, raw, ctx)
            err = None
            break
        except ValueError as exc:
            err = str(exc)
            convo = convo + [AIMessage(content=raw or "(empty)"),
                             HumanMessage(content=f"That answer was invalid: {err}. {spec.instructions}")]
    fallback_used = value is None
    if fallback_used and spec.fallback is not None:
        value = spec.fallback(ctx)
    rec = DecisionRecord(
        society=society, agent=agent, round=round, phase=spec.phase, model=service.model_for(agent)[0].id, raw=raw,
        parsed=value.model_dump() if value is not None else None, attempts=attempts, fallback_used=fallback_used,
        error=err, input_tokens=in_tok, output_tokens=out_tok, latency=round_(latency), cost=str(cost), cached_calls=cached_calls,
    )
    return value, rec


def round_(x: float) -> float:
    return float(f"{x:.6f}")


__all__ = ["BudgetExhausted", "DecisionRecord", "DecisionSpec", "LLMService", "ModelUnavailable", "decide", "parse_json", "validate"]
