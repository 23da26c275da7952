"""Structured decisions: a pydantic schema per decision, validated, retried, with a fallback.

:class:`LLMService` is the graph-wide model service (it travels in LangGraph's runtime
context): per-agent models and the call path every model call goes through (``agents/calls.py``:
response cache, credit ledger, retries, concurrency bound and requests-per-second limit,
provider adapters). :func:`decide` asks one agent for one decision:

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

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Generic, TypeVar

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from pydantic import BaseModel, ValidationError

from cooplab.agents.cache import CachedResponse, ResponseCache, cache_key
from cooplab.agents.calls import (  # noqa: F401 - is_transient, endpoint_failure, usage_of: imported from here too
    CallPath,
    ModelUnavailable,
    ProviderAdapter,
    Reply,
    Request,
    adapter_type,
    decoding_schema,
    endpoint_failure,
    is_transient,
    usage_of,
)
from cooplab.agents.models.spec import ModelSpec
from cooplab.agents.usage import input_bound
from cooplab.graphs.ledger import BudgetExhausted, Entry, Ledger, call_id_of, close_journal
from cooplab.graphs.tables import agent_id
from cooplab.graphs.tracing.labels import call_config
from cooplab.limits import DEFAULT_CALL_DEADLINE, clean_strings

T = TypeVar("T", bound=BaseModel)


@dataclass
class DecisionSpec(Generic[T]):
    """How to decide one thing: the schema, semantic checks, and the fallback."""

    phase: str
    schema: type[T]
    check: Callable[[T, dict[str, Any]], None] = lambda value, ctx: None  # raise ValueError if wrong
    fallback: Callable[[dict[str, Any]], T | None] | None = None
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


@dataclass
class LLMService:
    """Graph-wide model service (runtime context): the models, and the call path every model
    call goes through (``agents/calls.py``: cache -> budget -> retry -> rate limit -> adapter),
    built on the first call from the fields below. ``ledger`` is the run's ledger that path
    charges; graph code reaches it as ``CoopContext.ledger``."""

    models: dict[str, tuple[ModelSpec, BaseChatModel]]  # "default" and/or per-agent keys "3"
    ledger: Ledger = field(default_factory=Ledger)
    cache: ResponseCache = field(default_factory=lambda: ResponseCache(None))
    seed: int = 0
    max_concurrency: int = 8
    rps: float | None = None
    max_transport_retries: int = 4
    backoff_base: float = 0.5
    backoff_max: float = 8.0
    call_timeout: float | None = 300.0  # seconds one attempt may take in all (LLMSettings.call_timeout)
    call_deadline: float | None = (
        DEFAULT_CALL_DEADLINE  # seconds one call may take in all, retries included (LLMSettings.call_deadline)
    )
    #: a fork's K (:mod:`cooplab.runs.fork`): calls of round K or earlier only replay from the cache
    replay_only_through: int | None = None
    #: worker processes that answer the calls of :meth:`ask` (``llm.model_processes``; 0: this process;
    #: :mod:`cooplab.agents.model_processes`)
    model_processes: int = 0
    _path: CallPath | None = field(default=None, init=False, repr=False)
    _adapters: dict[int, ProviderAdapter] = field(default_factory=dict, init=False, repr=False)
    _asked: dict[str, int] = field(default_factory=dict, init=False, repr=False)  # key -> times asked in this process
    _settled: set[str] | None = field(default=None, init=False, repr=False)  # call ids the restored ledger holds
    _pool: Any = field(default=None, init=False, repr=False)  # the model processes, once started
    _remote: dict[int, tuple[Any, Any]] = field(default_factory=dict, init=False, repr=False)  # id -> (model, runnable)

    def distinct_key(self, key: str) -> str:
        """The cache key of this asking of the call whose key is ``key``: ``key`` itself the first time
        in the run (so caches written before stay valid), then a key of its own for each repeat (the
        same prompt asked twice in one run is two calls, two cache entries, two sampling seeds).
        Repeats are counted in the run, not in the process: asks of ``key`` that a resumed run's
        ledger already holds from its checkpoints count (a resume then asks the repeat it had reached;
        a call of an interrupted step, not checkpointed, is asked again under its own key)."""
        if self._settled is None:
            self._settled = {e.call_id for e in self.ledger.entries}
        n = self._asked.get(key, 0)
        while True:
            k = key if n == 0 else cache_key(repeat_of=key, repeat=n)
            n += 1
            if call_id_of(k) not in self._settled:
                break
        self._asked[key] = n
        return k

    def model_for(self, agent: int | str, round: int | None = None) -> tuple[ModelSpec, BaseChatModel]:
        """The model of ``agent``; in ``round``, a switch ``"AGENT@ROUND"`` (``llm.model_from``) counts from its round
        on."""
        if round is not None and len(self.models) > 1:
            after = [
                (int(r), key)
                for key in self.models
                for a, sep, r in [key.partition("@")]
                if sep and a == str(agent) and r.isdigit() and int(r) <= round
            ]
            if after:
                return self.models[max(after)[1]]
        return self.models.get(str(agent)) or self.models["default"]

    def close(self) -> None:
        """Close the run's files this service holds open: the response cache and the ledger's
        journal (:func:`~cooplab.graphs.ledger.close_journal`), and stop its model processes. Each
        opens or starts again when used."""
        self.cache.close()
        close_journal(self.ledger)
        if self._pool is not None:
            self._pool.close()

    def runnable_for(self, spec: ModelSpec, model: BaseChatModel) -> Any:
        """What a decision's call of ``model`` invokes: the model, or with model processes its stand-in
        whose answers come from a worker (when the model can move: :func:`~cooplab.agents.model_processes.sendable`)."""
        if self.model_processes <= 0:
            return model
        kept = self._remote.get(id(model))
        if kept is not None and kept[0] is model:
            return kept[1]
        from cooplab.agents import model_processes as mp

        runnable: Any = model
        if mp.sendable(spec, model):
            if self._pool is None:
                self._pool = mp.ModelProcesses(int(self.model_processes))
            runnable = mp.remote_model(model, spec, self._pool)
        self._remote[id(model)] = (model, runnable)
        return runnable

    def adapter(self, spec: ModelSpec, model: Any) -> ProviderAdapter:
        """The provider adapter of the chat model ``model`` under ``spec`` (made once)."""
        a = self._adapters.get(id(model))
        if a is None or a.model is not model or a.spec is not spec:
            a = self._adapters[id(model)] = adapter_type(model)(spec, model)
        return a

    @property
    def path(self) -> CallPath:
        if self._path is None:
            self._path = CallPath(
                ledger=self.ledger,
                cache=self.cache,
                max_concurrency=self.max_concurrency,
                rps=self.rps,
                retries=self.max_transport_retries,
                backoff_base=self.backoff_base,
                backoff_max=self.backoff_max,
                call_timeout=self.call_timeout,
                call_deadline=self.call_deadline,
                replay_only_through=self.replay_only_through,
            )
        return self._path

    @property
    def live_calls(self) -> int:
        """Requests that reached a model (every attempt, cache replays excluded)."""
        return 0 if self._path is None else self._path.adapter.calls

    @property
    def prompt_reuse(self) -> dict[str, Any]:
        """What the model read and reused of the prompts of this service's live calls (cache
        replays excluded): prompt tokens, tokens reused from earlier calls (the local model's kept
        KV states, a provider's prompt cache), tokens read, and the reused share (None before any)."""
        n = sum(a.prompt_tokens for a in self._adapters.values())
        k = sum(a.reused_tokens for a in self._adapters.values())
        return {
            "prompt_tokens": n,
            "tokens_reused": k,
            "tokens_read": n - k,
            "reused_share": round(k / n, 4) if n else None,
        }

    @property
    def retries(self) -> int:
        """Endpoint failures retried (transport errors, 5xx, malformed responses)."""
        return 0 if self._path is None else self._path.retry.count

    async def ask(
        self,
        *,
        agent: int,
        society: int,
        round: int,
        phase: str,
        messages: list[BaseMessage],
        schema: dict[str, Any] | None,
        attempt: int,
        config: RunnableConfig | None = None,
        decode_schema: dict[str, Any] | None = None,
        max_tokens: int | None = None,
    ) -> Reply:
        """One structured-output call of a society agent, through the call path: the key is the
        model's identity, the messages, the agent, round, phase, seed, attempt, schema and output
        cap; the input bound covers what is sent, the output bound is ``max_tokens``."""
        spec, model = self.model_for(agent, round)
        adapter = self.adapter(spec, model)
        key = cache_key(
            model=spec.identity(),
            messages=[(m.type, str(m.content)) for m in messages],
            agent=agent_id(society, agent),
            round=round,
            phase=phase,
            seed=self.seed,
            attempt=attempt,
            schema=_schema_id(schema),
            **({"max_tokens": max_tokens} if max_tokens else {}),
        )
        key = self.distinct_key(key)
        structured = adapter.structured(schema, decode_schema) if schema is not None else {}
        kwargs: dict[str, Any] = {**structured, **adapter.call_options(key=key, phase=phase, max_tokens=max_tokens)}
        bound = input_bound(messages, *structured.values()) + adapter.extra_input(tools="tools" in structured)
        config = call_config(
            config, agent=agent, society=society, round=round, phase=phase, model=spec.id, call_id=call_id_of(key)
        )
        return await self.path(
            Request(
                spec,
                adapter,
                self.runnable_for(spec, model),
                key,
                messages,
                kwargs,
                bound,
                int(max_tokens or spec.max_tokens),
                agent_id(society, agent),
                round,
                phase,
                config=config,
            )
        )

    async def call(
        self,
        *,
        agent: int,
        society: int,
        round: int,
        phase: str,
        messages: list[BaseMessage],
        schema: dict[str, Any] | None,
        attempt: int,
        config: RunnableConfig | None = None,
        decode_schema: dict[str, Any] | None = None,
        max_tokens: int | None = None,
    ) -> tuple[CachedResponse, bool]:
        """:meth:`ask`, as (response, cached)."""
        reply = await self.ask(
            agent=agent,
            society=society,
            round=round,
            phase=phase,
            messages=messages,
            schema=schema,
            attempt=attempt,
            config=config,
            decode_schema=decode_schema,
            max_tokens=max_tokens,
        )
        return reply.response, reply.cached

    async def charged_call(
        self,
        *,
        spec: ModelSpec,
        runnable: Any,
        key: str,
        messages: list[BaseMessage],
        kwargs: dict[str, Any],
        input_bound: int,
        output_bound: int,
        agent_id: str,
        round: int | None,
        phase: str,
        config: Mapping[str, Any] | None = None,
        team: str | None = None,
        to_text: Callable[[BaseMessage], str] | None = None,
        from_text: Callable[[str], BaseMessage] | None = None,
    ) -> tuple[CachedResponse, bool, Entry]:
        """Any model call through the call path: ``runnable.ainvoke(messages, config=config,
        **kwargs)`` with ``input_bound``/``output_bound`` tokens reserved. ``to_text`` turns the
        answer into the text that is cached and returned (a tool-calling caller encodes the tool
        calls there), ``from_text`` that text back into the message (a replay's trace shows it).
        Returns (response, cached, ledger entry)."""
        adapter = self.adapter(spec, getattr(runnable, "bound", runnable))  # a model with tools bound: the model's
        key = self.distinct_key(key)
        config = call_config(
            config,
            agent=agent_id,
            society=None,
            round=round,
            phase=phase,
            model=spec.id,
            call_id=call_id_of(key),
            team=team,
        )
        reply = await self.path(
            Request(
                spec,
                adapter,
                runnable,
                key,
                messages,
                kwargs,
                input_bound,
                output_bound,
                agent_id,
                round,
                phase,
                team=team,
                config=config,
                to_text=to_text,
                from_text=from_text,
            )
        )
        assert reply.entry is not None, "the call path charges every reply (a call, or a replay from the cache)"
        return reply.response, reply.cached, reply.entry


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
    """The first JSON object in ``text`` (models often wrap JSON in prose or code fences), its
    strings cleaned of the lone surrogates JSON can spell (``"\\ud800"``)."""
    try:
        return clean_strings(_first_json(text))
    except RecursionError:
        raise ValueError("the answer's JSON is nested too deeply") from None


def _first_json(text: str) -> Any:
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


async def decide(
    service: LLMService,
    spec: DecisionSpec[T],
    messages: list[BaseMessage],
    *,
    society: int,
    agent: int,
    round: int,
    ctx: dict[str, Any] | None = None,
    config: RunnableConfig | None = None,
) -> tuple[T | None, DecisionRecord]:
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
        reply = await service.ask(
            agent=agent,
            society=society,
            round=round,
            phase=spec.phase,
            messages=convo,
            schema=schema,
            attempt=attempt,
            config=config,
            decode_schema=decode_schema,
            max_tokens=spec.max_tokens,
        )
        resp = reply.response
        assert reply.entry is not None, "the call path charges every reply (a call, or a replay from the cache)"
        raw = resp.text
        in_tok += resp.input_tokens
        out_tok += resp.output_tokens
        latency += resp.latency
        cached_calls += int(reply.cached)
        usage_errors += int(resp.usage_error is not None)
        cost += Decimal(reply.entry.cost)
        try:
            value = validate(spec, raw, ctx)
            err = None
            break
        except ValueError as exc:
            err = str(exc)
            convo = convo + [
                AIMessage(content=raw or "(empty)"),
                HumanMessage(content=f"That answer was invalid: {err}. {spec.instructions}"),
            ]
    fallback_used = value is None
    if fallback_used and spec.fallback is not None:
        value = spec.fallback(ctx)
    rec = DecisionRecord(
        society=society,
        agent=agent,
        round=round,
        phase=spec.phase,
        model=service.model_for(agent, round)[0].id,
        raw=raw,
        parsed=value.model_dump() if value is not None else None,
        attempts=attempts,
        fallback_used=fallback_used,
        error=err,
        input_tokens=in_tok,
        output_tokens=out_tok,
        latency=round_(latency),
        cost=str(cost),
        cached_calls=cached_calls,
        usage_errors=usage_errors,
    )
    return value, rec


def round_(x: float) -> float:
    return float(f"{x:.6f}")


__all__ = [
    "BudgetExhausted",
    "DecisionRecord",
    "DecisionSpec",
    "LLMService",
    "ModelUnavailable",
    "decide",
    "decoding_schema",
    "parse_json",
    "validate",
]
