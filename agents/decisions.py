"""Structured decisions: a pydantic schema per decision, validated, retried, with a fallback.

:class:`LLMService` is the graph-wide model service (it travels in LangGraph's runtime
context): per-agent models, the response cache, the credit ledger, a concurrency bound and an
optional requests-per-second limit. :func:`decide` asks one agent for one decision:

1. the call's deterministic key (model identity, messages, agent, round, phase, seed, attempt)
   is looked up in the cache; a hit replays the answer without calling the model, charged its
   known cost only if that fits the budget (else ``BudgetExhausted``);
2. otherwise the ledger reserves the call's upper-bound cost (``agents/usage.py``; refused:
   ``BudgetExhausted``), the model is called (transport failures and malformed responses retry
   with bounded exponential backoff, then :class:`ModelUnavailable`), the reported usage is
   validated (impossible usage: charged at the bound and flagged), committed, and the answer cached;
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
    EndpointResponseError,
    LlamaCppChat,
    ModelSpec,
    PermanentModelError,
    ScriptedChatModel,
    TransientModelError,
    count_tokens,
    messages_tokens,
    one_line,
)
from cooplab.agents.usage import Usage, check_usage, counted_usage, input_bound
from cooplab.graphs.ledger import BudgetExhausted, Entry, Ledger

T = TypeVar("T", bound=BaseModel)


class ModelUnavailable(RuntimeError):
    """The model endpoint failed past the retry budget (unreachable, 5xx, malformed responses) or
    rejected the request (4xx); the run stops at its last checkpoint and can be resumed."""


def is_transient(exc: BaseException) -> bool:
    """Timeout, refused connection, 408/409/429, 5xx and malformed responses (a body that is not
    a chat completion: see :class:`~cooplab.agents.models.EndpointResponseError`) are worth
    retrying; everything else is not."""
    if isinstance(exc, (TransientModelError, TimeoutError, asyncio.TimeoutError, ConnectionError)):
        return True
    try:
        import openai

        if isinstance(exc, (openai.APIConnectionError, openai.APITimeoutError, openai.RateLimitError, openai.InternalServerError,
                            openai.APIResponseValidationError)):
            return True
        if isinstance(exc, openai.APIStatusError) and (getattr(exc, "status_code", 0) >= 500 or exc.status_code in (408, 409)):
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


def endpoint_failure(exc: BaseException) -> str | None:
    """How a failed model call is handled: ``"transient"`` (retried with backoff, then
    :class:`ModelUnavailable`), ``"permanent"`` (an HTTP error status the endpoint will repeat,
    e.g. 401 or 404: :class:`ModelUnavailable` at once), or None: not the endpoint's failure (a
    programming error), which propagates unchanged."""
    if is_transient(exc):
        return "transient"
    if isinstance(exc, PermanentModelError):
        return "permanent"
    try:
        import openai

        if isinstance(exc, openai.APIStatusError):
            return "permanent"
    except ImportError:  # pragma: no cover
        pass
    return None


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
    usage_errors: int = 0  # calls whose reported usage was rejected (charged at their bound)

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
    retries: int = 0  # endpoint failures retried (transport errors, 5xx, malformed responses)

    def model_for(self, agent: int | str) -> tuple[ModelSpec, BaseChatModel]:
        return self.models.get(str(agent)) or self.models["default"]

    def _sync_primitives(self) -> None:
        # created lazily inside the running loop
        if self._sem is None:
            self._sem = asyncio.Semaphore(max(1, int(self.max_concurrency)))
            self._limiter = RateLimiter(self.rps)

    async def call(self, *, agent: int, society: int, round: int, phase: str, messages: list[BaseMessage],
                   schema: dict[str, Any] | None, attempt: int, config: dict | None = None,
                   decode_schema: dict[str, Any] | None = None, max_tokens: int | None = None) -> tuple[CachedResponse, bool]:
        """One model call (cached, charged, rate-limited, retried). Returns (response, cached).

        Every charged call goes through the ledger's cap: a cached replay is charged its known
        cost only if it fits; a live call first reserves its true upper bound (``input_bound`` of
        what is sent, ``max_tokens`` of output) and is charged its validated usage, never more."""
        spec, model = self.model_for(agent)
        key = cache_key(model=spec.identity(), messages=[(m.type, str(m.content)) for m in messages], agent=f"{society}:{agent}",
                        round=round, phase=phase, seed=self.seed, attempt=attempt, schema=_schema_id(schema),
                        **({"max_tokens": max_tokens} if max_tokens else {}))
        agent_id = f"{society}:{agent}"
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
        in_bound = input_bound(messages, kwargs.get("response_format"))
        out_bound = int(max_tokens or spec.max_tokens)
        resp, cached, _ = await self.charged_call(spec=spec, runnable=model, key=key, messages=messages, kwargs=kwargs,
                                                  input_bound=in_bound, output_bound=out_bound, agent_id=agent_id, round=round,
                                                  phase=phase, config=config)
        return resp, cached

    async def charged_call(self, *, spec: ModelSpec, runnable: Any, key: str, messages: list[BaseMessage], kwargs: dict[str, Any],
                           input_bound: int, output_bound: int, agent_id: str, round: int | None, phase: str,
                           config: dict | None = None, team: str | None = None,
                           to_text: Callable[[BaseMessage], str] | None = None) -> tuple[CachedResponse, bool, Entry]:
        """The core of every model call: cache lookup (a replay is charged its stored usage if it
        fits the cap), else reserve the upper bound (``input_bound`` tokens in, ``output_bound``
        out) BEFORE calling ``runnable.ainvoke(messages, config=config, **kwargs)`` with bounded
        retries, validate the usage, commit the charge and cache the answer. ``to_text`` turns the
        answer into the text that is cached and returned (default: its content); a tool-calling
        caller encodes the tool calls there. Returns (response, cached, ledger entry)."""
        hit = self.cache.get(key)
        if hit is not None:
            # the stored counts are re-validated: a damaged cache never charges past the bound
            usage = check_usage({"input_tokens": hit.input_tokens, "output_tokens": hit.output_tokens},
                                input_bound=input_bound, output_bound=output_bound, source="the cache")
            error = hit.usage_error or usage.error
            # the cost of a replay is known exactly: charged only if it fits the cap (else BudgetExhausted)
            entry = self.ledger.charge(call_id=key[:16], model=spec.id, agent=agent_id, round=round, phase=phase,
                                       input_tokens=usage.input_tokens, output_tokens=usage.output_tokens, cached=True,
                                       usage_error=error, team=team)
            return CachedResponse(hit.text, usage.input_tokens, usage.output_tokens, hit.latency, error), True, entry
        reservation = self.ledger.reserve(self.ledger.cost(spec.id, input_bound, output_bound))
        try:
            self._sync_primitives()
            delay = self.backoff_base
            for retry in range(self.max_transport_retries + 1):
                try:
                    async with self._sem:
                        await self._limiter.wait()
                        t0 = time.perf_counter()
                        self.live_calls += 1
                        msg = await runnable.ainvoke(messages, config=config, **kwargs)
                        latency = time.perf_counter() - t0
                    break
                except Exception as exc:  # noqa: BLE001
                    kind = endpoint_failure(exc)
                    if kind is None:
                        raise
                    if kind == "permanent":
                        raise ModelUnavailable(_failure_message(spec, exc, None)) from exc
                    if retry == self.max_transport_retries:
                        raise ModelUnavailable(_failure_message(spec, exc, retry + 1)) from exc
                    self.retries += 1
                    await asyncio.sleep(min(delay, self.backoff_max))
                    delay *= 2
            if to_text is not None:
                text = to_text(msg)
            else:
                text = msg.content if isinstance(msg.content, str) else str(msg.content or "")
            usage = usage_of(msg, messages, text, input_bound=input_bound, output_bound=output_bound)
            resp = CachedResponse(text, usage.input_tokens, usage.output_tokens, latency, usage.error)
        except BaseException:
            self.ledger.release(reservation)
            raise
        entry = self.ledger.charge(call_id=key[:16], model=spec.id, agent=agent_id, round=round, phase=phase,
                                   input_tokens=usage.input_tokens, output_tokens=usage.output_tokens, reservation=reservation,
                                   usage_error=usage.error, team=team)
        self.cache.put(key, resp, spec.id)
        return resp, False, entry


def usage_of(msg: BaseMessage, messages: list[BaseMessage], text: str, *, input_bound: int, output_bound: int) -> Usage:
    """The validated usage of an answer, whatever the backend: the raw usage an endpoint reported
    (``response_metadata["usage_raw"]``, set by the OpenAI-compatible and scripted models), else
    the backend's ``usage_metadata``, else (or when cooplab counted) our own clamped count."""
    meta = getattr(msg, "response_metadata", None) or {}
    if "usage_raw" in meta:
        return check_usage(meta["usage_raw"], input_bound=input_bound, output_bound=output_bound)
    um = getattr(msg, "usage_metadata", None)
    if not um:
        return counted_usage(messages_tokens(messages), count_tokens(text), input_bound=input_bound, output_bound=output_bound)
    if meta.get("token_count_source") == "cooplab":  # counted by ``with_usage``: an approximation, clamped
        return counted_usage(um["input_tokens"], um["output_tokens"], input_bound=input_bound, output_bound=output_bound)
    return check_usage(dict(um), input_bound=input_bound, output_bound=output_bound)


def _failure_message(spec: ModelSpec, exc: BaseException, attempts: int | None) -> str:
    """One line naming the model, its endpoint and what went wrong."""
    where = f"model {spec.id}" + (f" at {spec.base_url}" if spec.base_url else "")
    status = getattr(exc, "status_code", None)
    if attempts is None:
        return f"{where} rejected the request" + (f" (HTTP {status})" if status is not None else "") + f": {one_line(exc)}"
    if isinstance(exc, EndpointResponseError):
        return f"{where} returned malformed responses {attempts} times: {one_line(exc)}"
    if isinstance(status, int):
        return f"{where} failed {attempts} times with HTTP {status}: {one_line(exc)}"
    chain, c = [], exc
    while (c := c.__cause__ or c.__context__) is not None and len(chain) < 8:
        chain.append(c)
    # the transport's own error (e.g. httpx's ReadTimeout, RemoteProtocolError), else the first that says more
    cause = next((c for c in chain if type(c).__module__.split(".")[0] in ("httpx", "httpcore")), None) \
        or next((c for c in chain if str(c) and str(c) != str(exc)), None)
    why = f"{type(exc).__name__}: {exc}"
    if cause is not None:
        why += f" ({type(cause).__name__}" + (f": {cause})" if str(cause) else ")")
    return f"{where} unreachable after {attempts} attempts: {one_line(why)}"


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
    in_tok = out_tok = cached_calls = usage_errors = 0
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
        usage_errors += int(resp.usage_error is not None)
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
        usage_errors=usage_errors,
    )
    return value, rec


def round_(x: float) -> float:
    return float(f"{x:.6f}")


__all__ = ["BudgetExhausted", "DecisionRecord", "DecisionSpec", "LLMService", "ModelUnavailable", "decide", "parse_json", "validate"]
