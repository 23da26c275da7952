"""The model call path: small layers behind one narrow interface.

A model call is a :class:`Request` (the model and its adapter, the messages and options sent,
the cache key, the token bounds, whom to charge). A layer is any ``async (Request) -> Reply``;
each wraps the next. :class:`CallPath` composes them in a fixed order, outermost first:

1. :class:`CacheLayer`: a stored answer for the key is replayed without going further, charged
   its stored usage (re-validated against the bounds) only if that fits the cap, and traced like a
   live call, marked cached (:mod:`cooplab.agents.replay`); a live answer is stored after it has
   been charged;
2. :class:`BudgetLayer`: reserves the call's cost at its bounds before anything is sent
   (``BudgetExhausted`` if spent + in flight + that would pass the cap), charges the validated
   usage against the reservation, releases it on any failure;
3. :class:`RetryLayer`: a failure the adapter calls transient is retried, the same request each
   time, with bounded exponential backoff; past the bound, or at once for a permanent failure,
   :class:`ModelUnavailable` with one line naming the model and what went wrong. Under a call
   deadline (``--call-deadline``) the attempts and the waits between them take that long at most
   in all, so a server that stalls holds a run for the deadline, not the call timeout times every
   retry;
4. :class:`RateLimitLayer`: at most ``max_concurrency`` requests at the provider, their starts
   spaced by ``1 / rps``. It sits inside the retry layer so that every attempt is limited and a
   backoff wait holds no slot;
5. :class:`AdapterLayer`: sends the request through its :class:`ProviderAdapter`, the one place
   that knows how scripted, local llama.cpp and OpenAI-compatible models differ: the options a
   call takes, how structured output is asked for, whether tools are called natively, how usage
   is read and which errors are worth retrying. Each attempt is bounded in total time (the call
   timeout, or what is left of the call deadline if less): past it, it fails as
   :class:`~cooplab.agents.models.CallTimedOut`, a transient failure.

Every layer takes its collaborators (ledger, cache, clock, sleep) as arguments, so each can be
tested alone; :class:`~cooplab.agents.decisions.LLMService` builds one path per service.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig

from cooplab.agents.cache import CachedResponse, ResponseCache
from cooplab.agents.models.errors import (
    CallTimedOut,
    EndpointResponseError,
    FailureFacts,
    PermanentModelError,
    RemoteFailure,
    TransientModelError,
    one_line,
)
from cooplab.agents.models.local import LlamaCppChat
from cooplab.agents.models.scripted import ScriptedChatModel
from cooplab.agents.models.spec import ModelSpec
from cooplab.agents.replay import trace_replay
from cooplab.agents.usage import TextEstimate, Usage, check_usage, count_tokens, counted_usage, messages_tokens
from cooplab.graphs.ledger import Entry, Ledger, Reservation, call_id_of

Sleep = Callable[[float], Awaitable[Any]]


class ModelUnavailable(RuntimeError):
    """The model endpoint failed past the retry budget (unreachable, 5xx, malformed responses) or
    rejected the request (4xx); the run stops at its last checkpoint and can be resumed."""


# --- the interface ----------------------------------------------------------------------------
@dataclass(slots=True)
class Request:
    """One model call. ``runnable`` is what is invoked (the model, or the model with tools bound);
    ``kwargs`` the call options (from the adapter); ``to_text`` turns the answer into the text
    that is cached and returned (default: its content)."""

    spec: ModelSpec
    adapter: ProviderAdapter
    runnable: Any
    key: str
    messages: list[BaseMessage]
    kwargs: dict[str, Any]
    input_bound: int
    output_bound: int
    agent: str
    round: int | None
    phase: str
    team: str | None = None
    config: RunnableConfig | None = None
    to_text: Callable[[BaseMessage], str] | None = None
    #: how a stored answer's text is read back as the model's message (the inverse of ``to_text``),
    #: for the trace of a replay; default: a message of that text
    from_text: Callable[[str], BaseMessage] | None = None
    #: what is left of the call's time in all (set by the retry layer under a call deadline)
    deadline: Deadline | None = None


@dataclass(slots=True)
class Deadline:
    """The time one call may take in all (``--call-deadline``): its attempts at the model and the
    waits between them count (``used``), not a wait for a free slot (other calls' time)."""

    seconds: float
    used: float = 0.0
    attempts: int = 0

    def left(self) -> float:
        return self.seconds - self.used


@dataclass(slots=True)
class Reply:
    """The answer of one call: its text and validated usage, whether it was a cache replay, and
    the ledger entry it was charged (set by the layer that charged it)."""

    response: CachedResponse
    cached: bool = False
    entry: Entry | None = None


class Layer(Protocol):
    async def __call__(self, request: Request) -> Reply: ...


# --- provider adapters --------------------------------------------------------------------------
#: HTTP statuses worth retrying besides 5xx: request timeout, conflict, too many requests
RETRY_STATUSES = (408, 409, 429)


def _status(exc: BaseException) -> int | None:
    """The HTTP status a provider SDK's error carries (it, or what it was raised from), if it is
    one: ``openai``'s and ``anthropic``'s ``APIStatusError.status_code``,
    ``ollama.ResponseError.status_code``, ``google.genai``'s ``errors.APIError.code``; -1 for such
    an error without a status; None for anything else."""
    for e in _chain(exc):
        for module, name, attr in (
            ("openai", "APIStatusError", "status_code"),
            ("anthropic", "APIStatusError", "status_code"),
            ("ollama", "ResponseError", "status_code"),
            ("google.genai.errors", "APIError", "code"),
        ):
            mod = sys.modules.get(module)  # only an SDK that is loaded can have raised its error
            cls = getattr(mod, name, None) if mod is not None else None
            if cls is not None and isinstance(e, cls):
                status = getattr(e, attr, None)
                return status if type(status) is int else -1
    return None


def _chain(exc: BaseException | None, depth: int = 4) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from (an integration re-raises its SDK's errors)."""
    out: list[BaseException] = []
    while exc is not None and len(out) < depth:
        out.append(exc)
        exc = exc.__cause__
    return out


def _model_error(exc: BaseException) -> bool | None:
    """LangChain's own classification of a provider error (``langchain_core.exceptions.ModelError``,
    which integrations raise for HTTP errors): whether it is retryable, or None when it is not one."""
    from langchain_core import exceptions

    cls = getattr(exceptions, "ModelError", None)
    return bool(getattr(exc, "is_retryable", False)) if cls is not None and isinstance(exc, cls) else None


def _transport_error(exc: BaseException) -> bool:
    """A provider SDK's connection or timeout error (no HTTP status), or httpx's own."""
    for module, names in (
        ("openai", ("APIConnectionError", "APIResponseValidationError")),
        ("anthropic", ("APIConnectionError", "APIResponseValidationError")),
        ("httpx", ("TransportError",)),
        ("httpx2", ("TransportError",)),
    ):
        mod = sys.modules.get(module)
        if mod is not None and isinstance(exc, tuple(getattr(mod, n) for n in names if hasattr(mod, n))):
            return True
    return False


def is_transient(exc: BaseException) -> bool:
    """Timeout, refused connection, 408/409/429, 5xx and malformed responses (a body that is not
    a chat completion: :class:`~cooplab.agents.models.EndpointResponseError`) are worth retrying;
    everything else is not. Each provider's SDK errors are read by :func:`_status`: an error of
    the HTTP layer without a status (``ollama``'s stream errors: -1) is transient too. A failure in a
    model process (:class:`RemoteFailure`) was classified there."""
    if isinstance(exc, RemoteFailure):
        return exc.transient
    if isinstance(exc, (TransientModelError, TimeoutError, asyncio.TimeoutError, ConnectionError)) or _transport_error(
        exc
    ):
        return True
    if _model_error(exc):
        return True
    status = _status(exc)
    return status is not None and (status < 0 or status >= 500 or status in RETRY_STATUSES)


def _malformed_cause(exc: BaseException | None) -> EndpointResponseError | None:
    """The malformed response behind ``exc`` (its cause chain), if any."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, EndpointResponseError):
            return exc
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


def endpoint_failure(exc: BaseException) -> str | None:
    """How a failed model call is handled: ``"transient"`` (retried with backoff, then
    :class:`ModelUnavailable`), ``"permanent"`` (an error the endpoint will repeat, e.g. HTTP 401
    or 404: :class:`ModelUnavailable` at once), or None: not the endpoint's failure (a
    programming error), which propagates unchanged."""
    if isinstance(exc, RemoteFailure):
        return "transient" if exc.transient else "permanent"
    if is_transient(exc):
        return "transient"
    if (
        isinstance(exc, PermanentModelError) or _status(exc) is not None or _model_error(exc) is False
    ):  # a 4xx, repeated
        return "permanent"
    return None


def failure_facts(exc: BaseException) -> FailureFacts:
    """What a failed call's one-line message says of ``exc`` (a model process sends these along)."""
    if isinstance(exc, RemoteFailure):
        return exc.facts
    status = _status(exc)
    chain, c = [], exc
    while (c := c.__cause__ or c.__context__) is not None and len(chain) < 8:
        chain.append(c)
    # the transport's own error (e.g. httpx's ReadTimeout, RemoteProtocolError), else the first that says more
    cause = next(
        (c for c in chain if type(c).__module__.split(".")[0] in ("httpx", "httpcore", "httpx2", "httpcore2")), None
    ) or next((c for c in chain if str(c) and str(c) != str(exc)), None)
    why = f"{type(exc).__name__}: {exc}"
    if cause is not None:
        why += f" ({type(cause).__name__}" + (f": {cause})" if str(cause) else ")")
    return FailureFacts(
        status=None if status is None or status < 0 else status,
        text=_error_text(exc),
        timeout=exc.seconds if isinstance(exc, CallTimedOut) else None,
        malformed=one_line(exc) if isinstance(exc, EndpointResponseError) else None,
        why=why,
    )


def failure_message(spec: ModelSpec, exc: BaseException, attempts: int | None) -> str:
    """One line naming the model, its endpoint and what went wrong (``attempts`` None: refused)."""
    where = f"model {spec.id}" + (f" at {spec.base_url}" if spec.base_url else "")
    facts = failure_facts(exc)
    status = facts.status
    if attempts is None:
        return f"{where} rejected the request" + (f" (HTTP {status})" if status is not None else "") + f": {facts.text}"
    if facts.timeout is not None:
        return (
            f"{where} sent no complete answer within the call timeout of {facts.timeout:g} s, {attempts} times "
            "(raise --call-timeout, or llm.call_timeout in a config file, if the server is just slow)"
        )
    if facts.malformed is not None:
        return f"{where} returned malformed responses {attempts} times: {facts.malformed}"
    if status is not None:
        return f"{where} failed {attempts} times with HTTP {status}: {facts.text}"
    return f"{where} unreachable after {attempts} attempts: {one_line(facts.why)}"


def server_of(spec: ModelSpec) -> str:
    """Where a model's calls go, as ``host:port``: its ``base_url``, else its provider's own
    server (or the server the provider's variable names); for a model that runs in cooplab (local,
    scripted), what it is."""
    from urllib.parse import urlsplit

    from cooplab.agents.providers import provider

    p = provider(spec.kind)
    url = (p.url(spec.base_url) or p.default_url) if p is not None else spec.base_url
    if not url:
        return "the local model's process" if spec.kind == "local" else f"the {spec.kind} model in this process"
    try:
        parts = urlsplit(url.strip())
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme.lower())
        host = parts.hostname or ""
    except ValueError:
        return one_line(url, 120)
    if not host:
        return one_line(url, 120)
    host = f"[{host}]" if ":" in host else host
    return f"{host}:{port}" if port else host


def deadline_message(spec: ModelSpec, exc: BaseException, deadline: Deadline) -> str:
    """One line for a call that ran out of its call deadline: the model, the server that stalled
    (``host:port``), how long and how many attempts, what the last attempt did, what to raise."""
    where = f"model {spec.id} at {server_of(spec)}"
    n = deadline.attempts
    tries = f"{n} attempt{'s' if n != 1 else ''} in {deadline.used:.1f} s"
    if isinstance(exc, CallTimedOut):
        what = f"stalled: no complete answer within the call deadline of {deadline.seconds:g} s ({tries})"
    else:
        what = (
            f"gave no answer within the call deadline of {deadline.seconds:g} s ({tries}; the last: {_error_text(exc)})"
        )
    return f"{where} {what}; raise --call-deadline, or llm.call_deadline in a config file, if the server is just slow"


_HTML = re.compile(r"<\s*(!doctype|html|head|body|pre|title|h1)\b", re.IGNORECASE)


def _error_text(exc: BaseException) -> str:
    """What an HTTP error says, on one line; a server's HTML error page (which may hold its own
    traceback) is named, not quoted."""
    text = one_line(exc)
    return "the server sent an HTML error page" if _HTML.search(text) else text


class EndpointFailure(Exception):
    """A provider error as the adapter classified it: ``transient`` (worth retrying) or not.
    ``cause`` is the provider's own exception; :meth:`message` the one line shown to the user."""

    def __init__(self, spec: ModelSpec, cause: BaseException, *, transient: bool):
        super().__init__(str(cause))
        self.spec, self.cause, self.transient = spec, cause, transient

    def message(self, attempts: int | None) -> str:
        return failure_message(self.spec, self.cause, attempts)


def usage_of(msg: BaseMessage, messages: list[BaseMessage], text: str, *, input_bound: int, output_bound: int) -> Usage:
    """The validated usage of an answer, whatever the backend: the raw usage an endpoint reported
    (``response_metadata["usage_raw"]``, set by the OpenAI-compatible, llama.cpp and scripted
    models, and for chat model objects), else the backend's ``usage_metadata``, else (or when
    cooplab counted) our own count, clamped to the bounds. Impossible reported usage: the bounds,
    flagged; implausibly low usage (below what the text can be, :func:`text_estimate`): cooplab's
    estimate, flagged."""
    meta = getattr(msg, "response_metadata", None) or {}
    if "usage_raw" in meta:
        return check_usage(
            meta["usage_raw"], input_bound=input_bound, output_bound=output_bound, text=text_estimate(messages, text)
        )
    um = getattr(msg, "usage_metadata", None)
    if not um:
        return counted_usage(
            messages_tokens(messages), count_tokens(text), input_bound=input_bound, output_bound=output_bound
        )
    if meta.get("token_count_source") == "cooplab":  # counted by ``with_usage``: an approximation, clamped
        return counted_usage(
            um["input_tokens"], um["output_tokens"], input_bound=input_bound, output_bound=output_bound
        )
    return check_usage(dict(um), input_bound=input_bound, output_bound=output_bound, text=text_estimate(messages, text))


#: the keys of a native tool answer's cached text (``agents/tools.py: _envelope``)
_ENVELOPE = {"content", "tool_calls", "invalid_tool_calls"}


def _answer_text(text: str) -> str:
    """What a model wrote in an answer's cached text: the text itself, or for a native tool answer
    (a JSON envelope of content and tool calls) its content and each call's name and arguments."""
    if not text.startswith('{"content"'):
        return text
    try:
        d = json.loads(text)
    except (ValueError, RecursionError):
        return text
    if not isinstance(d, dict) or set(d) != _ENVELOPE:
        return text
    parts = [str(d.get("content") or "")]
    for c in (d.get("tool_calls") or []) + (d.get("invalid_tool_calls") or []):
        if isinstance(c, dict):
            args = c.get("args")
            parts += [
                str(c.get("name") or ""),
                args if isinstance(args, str) else json.dumps(args, ensure_ascii=False, default=str),
            ]
    return "".join(parts)


def text_estimate(messages: list[BaseMessage], text: str) -> TextEstimate:
    """What a call's text says of its tokens (:class:`~cooplab.agents.usage.TextEstimate`): the bytes
    and cooplab's count of the messages' contents and of the answer (what the model wrote)."""
    prompt = [
        m.content if isinstance(m.content, str) else str(m.text) for m in messages
    ]  # text blocks only (an image is not its bytes)
    answer = _answer_text(text or "")
    return TextEstimate(
        sum(len(p.encode("utf-8", "replace")) for p in prompt),
        len(answer.encode("utf-8", "replace")),
        messages_tokens(messages),
        count_tokens(answer),
    )


def reused_of(msg: BaseMessage, input_tokens: int) -> int:
    """The prompt tokens of an answer that its backend says it reused from an earlier call (its
    prompt cache), for a run's reuse rate only: they change no charge. Read from the usage the
    endpoint reported (OpenAI's ``prompt_tokens_details.cached_tokens``, which vLLM's and
    llama.cpp's servers and cooplab's local model report too; Gemini's cached content as
    ``cached_tokens``), else LangChain's ``input_token_details.cache_read``; 0 when it says nothing
    or something impossible (not an integer from 0 to ``input_tokens``). Anthropic's
    ``cache_read_input_tokens`` is not read: Anthropic counts them apart from its input tokens,
    and cooplab does not ask it to cache."""
    meta = getattr(msg, "response_metadata", None) or {}
    reported = meta.get("usage_raw") if "usage_raw" in meta else getattr(msg, "usage_metadata", None)
    if not isinstance(reported, dict):
        return 0
    for outer, inner in (("prompt_tokens_details", "cached_tokens"), ("input_token_details", "cache_read")):
        details = reported.get(outer)
        if isinstance(details, dict) and inner in details:
            value = details[inner]
            break
    else:
        value = reported.get("cached_tokens", 0)
    return value if type(value) is int and 0 <= value <= input_tokens else 0


#: call options LangChain's ``agenerate`` reads itself (never passed to ``_agenerate``): such a call goes through
#: ``ainvoke``
LANGCHAIN_OPTIONS = frozenset({"ls_structured_output_format", "structured_output_format", "stream"})


def _stand_in(runnable: Any) -> bool:
    """Whether ``runnable`` stands in for a model whose calls a model process makes
    (:class:`~cooplab.agents.model_processes.RemoteChatModel`; its module is loaded once a service uses one)."""
    remote = sys.modules.get("cooplab.agents.model_processes")
    return remote is not None and type(runnable) is remote.RemoteChatModel


def _direct_model(runnable: Any) -> bool:
    """Whether ``runnable`` is one of cooplab's own chat models (scripted, the checked
    OpenAI-compatible one, the stand-in of a model answered by a model process), whose ``_agenerate``
    is all an unobserved ``ainvoke`` of them does."""
    if isinstance(runnable, ScriptedChatModel) or _stand_in(runnable):
        return True
    from cooplab.agents.models import openai_compat

    cls = openai_compat.made_checked_class()
    return cls is not None and type(runnable) is cls


#: whether calls of a model under a callback manager are observed, decided once per manager (a
#: graph node's run: every decision of a phase shares it) and model: manager -> {id(model): (model, observed)}
_VERDICTS: "weakref.WeakKeyDictionary[Any, dict[int, tuple[Any, bool]]]" = weakref.WeakKeyDictionary()


def _observed(callbacks: Any, model: Any, manager_type: type) -> bool:
    """Whether LangChain would give a call of ``model`` under ``callbacks`` any handler (its own
    ``AsyncCallbackManager.configure``: the callbacks, the model's, LangSmith's environment and
    tracing context, ``set_debug``). Under a callback manager (a graph node's) the answer is kept
    for that manager's lifetime, i.e. one node run: a tracer switched on in the middle of a node
    sees that node's calls from the next node on."""
    cache = None
    if isinstance(callbacks, manager_type):
        cache = _VERDICTS.get(callbacks)
        kept = cache.get(id(model)) if cache is not None else None
        if kept is not None and kept[0] is model:
            return kept[1]
    manager = manager_type.configure(callbacks, model.callbacks, model.verbose, None, model.tags, None, model.metadata)
    observed = bool(manager.handlers or manager.inheritable_handlers)
    if isinstance(callbacks, manager_type):
        if cache is None:
            cache = _VERDICTS[callbacks] = {}
        cache[id(model)] = (model, observed)
    return observed


async def direct_call(
    runnable: Any, messages: list[BaseMessage], config: RunnableConfig | None, kwargs: dict[str, Any]
) -> BaseMessage | None:
    """The answer of ``runnable`` to ``messages``, asked without LangChain's run machinery, when
    nothing would observe the call; None when something would (then the caller uses ``ainvoke``).

    ``BaseChatModel.ainvoke`` spends most of its time on what only callbacks see: merging the
    config, configuring a callback manager, starting and ending a run (two tasks per call), the
    model's tracing parameters, a per-call signature inspection. When LangChain's own
    ``AsyncCallbackManager.configure`` (the config's callbacks, the model's, LangSmith's
    environment and tracing context, ``set_debug``) yields no handler, no LLM cache and no rate
    limiter are set and the model would not stream, ``ainvoke`` amounts to ``_agenerate`` plus
    the response metadata it merges: that is what is done here, for cooplab's own models only.
    The answer's text, usage and metadata are the same; only its LangChain run id (``id``) is unset."""
    if not _direct_model(runnable) or not LANGCHAIN_OPTIONS.isdisjoint(kwargs):
        return None
    model = runnable
    try:
        from langchain_core.callbacks.manager import AsyncCallbackManager
        from langchain_core.globals import get_llm_cache
        from langchain_core.language_models import chat_models as lc
        from langchain_core.runnables.config import var_child_runnable_config

        if (
            model.rate_limiter is not None
            or model.cache is True
            or (model.cache is None and get_llm_cache() is not None)
            or model.cache not in (None, False, True)
            or getattr(model, "output_version", None) == "v1"
        ):
            return None
        if model._should_stream(async_api=True, **kwargs):
            return None
        protocol = getattr(model, "_should_use_protocol_streaming", None)
        if protocol is not None and protocol(async_api=True, **kwargs):
            return None
        callbacks = (config or {}).get("callbacks")
        if callbacks is None:  # as ensure_config: the enclosing runnable's (a graph node's) config
            callbacks = (var_child_runnable_config.get() or {}).get("callbacks")
        if _observed(callbacks, model, AsyncCallbackManager):
            return None
        normalize = lc._normalize_messages  # pyright: ignore[reportPrivateImportUsage]  # what ainvoke calls
        gen_metadata = lc._gen_info_and_msg_metadata
    except (AttributeError, ImportError, TypeError):  # a LangChain without these internals: its own path
        return None
    # suspend once, as a call through ``ainvoke`` does before its model answers: the decisions of a
    # phase then all reserve their budget before the first is charged, so a run whose calls are
    # observed (traced) and one whose are not stop at the same call when a budget binds
    await asyncio.sleep(0)
    result = await model._agenerate(normalize(messages), stop=None, **kwargs)
    for generation in result.generations:
        generation.message.response_metadata = gen_metadata(generation)
    if len(result.generations) == 1 and result.llm_output is not None:
        result.generations[0].message.response_metadata = {
            **result.llm_output,
            **result.generations[0].message.response_metadata,
        }
    return result.generations[0].message


class ProviderAdapter:
    """How cooplab talks to one kind of chat model. This base serves any LangChain chat model as
    an OpenAI-compatible one: a JSON object asked for with the schema when the endpoint is a
    server of ours (``base_url``), plain JSON mode otherwise; a seed derived from the cache key."""

    #: whether an attempt can be stopped at the call timeout: a local model's call runs in a thread
    #: that cannot be, so the model process has its own bound (``COOPLAB_LOCAL_TIMEOUT``)
    stoppable = True
    #: prompt tokens of this adapter's answered calls, and how many of them the model reused (:func:`reused_of`)
    prompt_tokens = 0
    reused_tokens = 0

    def __init__(self, spec: ModelSpec, model: Any):
        self.spec, self.model = spec, model

    @classmethod
    def tool_protocol(cls, model: Any) -> str:
        """``"native"`` if the model binds tools itself, else ``"json"`` (a JSON tool-call grammar)."""
        from cooplab.agents.instances import unwrapped

        return "native" if type(unwrapped(model)).bind_tools is not BaseChatModel.bind_tools else "json"

    def response_format(self, schema: dict[str, Any], grammar: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """How to ask for one JSON object of ``schema`` (``grammar``: a narrower schema for a
        grammar-constrained decoder)."""
        if self.spec.base_url:
            return {"type": "json_object", "schema": schema}
        return {"type": "json_object"}

    def structured(self, schema: dict[str, Any], grammar: dict[str, Any] | None = None) -> dict[str, Any]:
        """The call options that ask for one JSON object of ``schema`` through the provider's own
        path (default: :meth:`response_format` as ``response_format``); {} when it has none."""
        rf = self.response_format(schema, grammar)
        return {} if rf is None else {"response_format": rf}

    def call_options(self, *, key: str, phase: str, max_tokens: int | None) -> dict[str, Any]:
        """The per-call options: a seed from the cache key (reproducible sampling), the output cap."""
        options: dict[str, Any] = {"seed": seed_of(key)}
        if max_tokens:
            options["max_tokens"] = max_tokens
        return options

    def extra_input(self, *, tools: bool) -> int:
        """Input tokens the provider adds to a request beyond its messages and what is sent with
        them (counted in the call's input bound): none here."""
        return 0

    def text_of(self, msg: BaseMessage) -> str:
        """The text of an answer that is cached and returned (its content)."""
        return msg.content if isinstance(msg.content, str) else str(msg.content or "")

    def usage(self, msg: BaseMessage, request: Request, text: str) -> Usage:
        return usage_of(msg, request.messages, text, input_bound=request.input_bound, output_bound=request.output_bound)

    def failure(self, exc: Exception) -> EndpointFailure | None:
        """``exc`` as an endpoint failure, or None when it is not the endpoint's (it propagates). A
        malformed response the HTTP client found (a body past its cap) is named as such, not as
        the SDK's connection error that wraps it."""
        kind = endpoint_failure(exc)
        if kind == "transient":
            exc = _malformed_cause(exc) or exc
        return None if kind is None else EndpointFailure(self.spec, exc, transient=kind == "transient")

    async def invoke(self, request: Request, timeout: float | None = None) -> Reply:
        """One attempt, stopped after ``timeout`` seconds in all (None: no bound)."""
        prepare = request.runnable.prepare if _stand_in(request.runnable) else None  # its workers started
        t0 = time.perf_counter()
        bound = asyncio.timeout(timeout if self.stoppable else None)
        try:
            if prepare is not None:
                await prepare()
                t0 = time.perf_counter()
            async with bound:
                msg = await direct_call(request.runnable, request.messages, request.config, request.kwargs)
                if msg is None:
                    msg = await request.runnable.ainvoke(request.messages, config=request.config, **request.kwargs)
        except Exception as exc:  # noqa: BLE001 - classified below
            if bound.expired():
                raise EndpointFailure(self.spec, CallTimedOut(float(timeout or 0)), transient=True) from exc
            failure = self.failure(exc)
            if failure is None:
                raise
            raise failure from exc
        latency = time.perf_counter() - t0
        text = request.to_text(msg) if request.to_text is not None else self.text_of(msg)
        usage = self.usage(msg, request, text)
        self.prompt_tokens += usage.input_tokens
        self.reused_tokens += reused_of(msg, usage.input_tokens)
        return Reply(CachedResponse(text, usage.input_tokens, usage.output_tokens, latency, usage.error))


class ScriptedAdapter(ProviderAdapter):
    """Scripted models: the answer is chosen by the call's phase; no seed, cap or JSON mode."""

    def response_format(self, schema: dict[str, Any], grammar: dict[str, Any] | None = None) -> dict[str, Any] | None:
        return None

    def call_options(self, *, key: str, phase: str, max_tokens: int | None) -> dict[str, Any]:
        return {"phase": phase}


class LlamaAdapter(ProviderAdapter):
    """The local llama.cpp model: JSON-schema-constrained decoding (the schema becomes a grammar,
    bounded numbers enums: see :func:`decoding_schema`), tools through the JSON grammar."""

    stoppable = False

    @classmethod
    def tool_protocol(cls, model: Any) -> str:
        return "json"

    def response_format(self, schema: dict[str, Any], grammar: dict[str, Any] | None = None) -> dict[str, Any] | None:
        return {"type": "json_object", "schema": decoding_schema(grammar or schema)}


def seed_of(key: str) -> int:
    """The sampling seed of a call: the first 32 bits of its cache key (reproducible)."""
    return int(key[:8], 16)


#: the name of the tool whose forced call carries a structured answer (Anthropic)
ANSWER_TOOL = "answer"
#: input tokens of the system prompt Anthropic adds to a request with tools, with room to spare
TOOL_PROMPT_TOKENS = 1024


class AnthropicAdapter(ProviderAdapter):
    """Anthropic's Messages API: a structured answer is a forced call of one tool (``answer``) whose
    input schema is the JSON schema, read back as that call's arguments; tools are called natively.
    The API takes no seed: sampling is not reproducible there (cache replays are)."""

    def structured(self, schema: dict[str, Any], grammar: dict[str, Any] | None = None) -> dict[str, Any]:
        tool = {"name": ANSWER_TOOL, "description": "Give your answer as this tool's input.", "input_schema": schema}
        return {"tools": [tool], "tool_choice": {"type": "tool", "name": ANSWER_TOOL}}

    def call_options(self, *, key: str, phase: str, max_tokens: int | None) -> dict[str, Any]:
        return {"max_tokens": max_tokens} if max_tokens else {}

    def extra_input(self, *, tools: bool) -> int:
        """The system prompt Anthropic adds to a request with tools (a few hundred tokens by its
        documentation, depending on the model and the tool choice): :data:`TOOL_PROMPT_TOKENS`."""
        return TOOL_PROMPT_TOKENS if tools else 0

    def text_of(self, msg: BaseMessage) -> str:
        """The forced tool call's arguments as JSON text, else the answer's text."""
        call = next((c for c in getattr(msg, "tool_calls", None) or [] if c["name"] == ANSWER_TOOL), None)
        return json.dumps(call["args"], ensure_ascii=False) if call is not None else msg.text


class GoogleAdapter(ProviderAdapter):
    """Google's Gemini API: ``response_mime_type`` application/json with ``response_json_schema``,
    a seed from the cache key, the output cap as ``max_output_tokens``; tools natively."""

    def structured(self, schema: dict[str, Any], grammar: dict[str, Any] | None = None) -> dict[str, Any]:
        return {"response_mime_type": "application/json", "response_json_schema": schema}

    def call_options(self, *, key: str, phase: str, max_tokens: int | None) -> dict[str, Any]:
        return {"seed": seed_of(key), **({"max_output_tokens": max_tokens} if max_tokens else {})}

    def text_of(self, msg: BaseMessage) -> str:
        return msg.text


class OllamaAdapter(ProviderAdapter):
    """Ollama's chat API: ``format`` = the JSON schema (constrained decoding on the server), a seed
    from the cache key in ``options`` with the temperature and output cap, one unstreamed answer;
    tools natively."""

    def structured(self, schema: dict[str, Any], grammar: dict[str, Any] | None = None) -> dict[str, Any]:
        return {"format": schema}

    def call_options(self, *, key: str, phase: str, max_tokens: int | None) -> dict[str, Any]:
        options = {
            "seed": seed_of(key),
            "temperature": self.spec.temperature,
            "num_predict": int(max_tokens or self.spec.max_tokens),
        }
        return {"options": options, "stream": False}

    def text_of(self, msg: BaseMessage) -> str:
        return msg.text


#: the adapter of each hosted provider's models, by spec kind (others: by the model's class)
PROVIDER_ADAPTERS: dict[str, type[ProviderAdapter]] = {
    "anthropic": AnthropicAdapter,
    "google_genai": GoogleAdapter,
    "ollama": OllamaAdapter,
}


def adapter_type(model: Any) -> type[ProviderAdapter]:
    """The adapter class of a chat model: the only place that tells providers apart (a chat model
    object handed in from Python by the object it checks)."""
    from cooplab.agents.instances import unwrapped

    model = unwrapped(model)
    if isinstance(model, ScriptedChatModel):
        return ScriptedAdapter
    if isinstance(model, LlamaCppChat):
        return LlamaAdapter
    from cooplab.agents.providers import provider_of_model

    return PROVIDER_ADAPTERS.get(provider_of_model(model) or "", ProviderAdapter)


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


# --- the layers -----------------------------------------------------------------------------------
class AdapterLayer:
    """The innermost layer: the request's adapter calls the model, each attempt bounded by
    ``timeout`` seconds in all (None: unbounded) and by what is left of the call's deadline
    (``request.deadline``, which the attempt's time, by ``clock``, is counted against). ``calls``
    counts the requests that reached a model (every attempt)."""

    def __init__(self, timeout: float | None = None, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.calls = 0
        self.timeout = timeout
        self._clock = clock

    async def __call__(self, request: Request) -> Reply:
        self.calls += 1
        deadline = request.deadline
        if deadline is None:
            return await request.adapter.invoke(request, self.timeout)
        left = max(deadline.left(), 0.0)
        timeout = left if self.timeout is None else min(self.timeout, left)
        deadline.attempts += 1
        t0 = self._clock()
        try:
            return await request.adapter.invoke(request, timeout)
        finally:
            deadline.used += self._clock() - t0


class RateLimiter:
    """At most ``rps`` call starts per second (a token bucket of size 1), by ``clock``."""

    def __init__(self, rps: float | None, *, clock: Callable[[], float] = time.monotonic, sleep: Sleep = asyncio.sleep):
        self.interval = 1.0 / rps if rps else 0.0
        self._next = 0.0
        self._lock = asyncio.Lock()
        self._clock, self._sleep = clock, sleep

    async def wait(self) -> None:
        if not self.interval:
            return
        async with self._lock:
            now = self._clock()
            delay = self._next - now
            self._next = max(now, self._next) + self.interval
        if delay > 0:
            await self._sleep(delay)


class RateLimitLayer:
    """At most ``max_concurrency`` requests inside at once; each start waits for the rate limiter."""

    def __init__(
        self,
        inner: Layer,
        *,
        max_concurrency: int,
        rps: float | None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Sleep = asyncio.sleep,
    ):
        self.inner = inner
        self._slots = asyncio.Semaphore(max(1, int(max_concurrency)))
        self.limiter = RateLimiter(rps, clock=clock, sleep=sleep)

    async def __call__(self, request: Request) -> Reply:
        async with self._slots:
            await self.limiter.wait()
            return await self.inner(request)


class RetryLayer:
    """Transient endpoint failures retried up to ``retries`` times, waiting ``base``, 2 ``base``,
    ... (at most ``cap`` seconds) between attempts; ``count`` is the retries made. With a
    ``deadline`` (seconds), a call's attempts and waits take that long at most in all: an attempt
    is cut when it runs out (the adapter layer), and no retry starts that could not begin before
    it; then :class:`ModelUnavailable` says which server stalled and for how long."""

    def __init__(
        self,
        inner: Layer,
        *,
        retries: int,
        base: float,
        cap: float,
        sleep: Sleep = asyncio.sleep,
        deadline: float | None = None,
    ):
        self.inner = inner
        self.retries, self.base, self.cap = max(0, int(retries)), base, cap
        self.deadline = deadline
        self._sleep = sleep
        self.count = 0

    async def __call__(self, request: Request) -> Reply:
        delay = self.base
        attempt = 0
        if self.deadline is not None and request.deadline is None:
            request.deadline = Deadline(float(self.deadline))
        dl = request.deadline
        while True:
            try:
                return await self.inner(request)
            except EndpointFailure as failure:
                if not failure.transient:
                    raise ModelUnavailable(failure.message(None)) from failure.cause
                attempt += 1
                wait = min(delay, self.cap)
                if dl is not None and (dl.left() <= 0 or (attempt <= self.retries and dl.left() <= wait)):
                    raise ModelUnavailable(deadline_message(request.spec, failure.cause, dl)) from failure.cause
                if attempt > self.retries:
                    raise ModelUnavailable(failure.message(attempt)) from failure.cause
            self.count += 1
            await self._sleep(wait)
            if dl is not None:
                dl.used += wait
            delay *= 2


class BudgetLayer:
    """Every live call is charged through the ledger's cap: its cost at the request's bounds is
    reserved before the inner layers run, its validated usage charged against that reservation
    after, and the reservation released if they fail. :meth:`charge_known` charges a call whose
    cost is known (a replay) only if it fits."""

    def __init__(self, inner: Layer, ledger: Ledger):
        self.inner, self.ledger = inner, ledger

    def _charge(
        self, request: Request, response: CachedResponse, *, cached: bool, reservation: Reservation | None
    ) -> Entry:
        return self.ledger.charge(
            call_id=call_id_of(request.key),
            model=request.spec.id,
            agent=request.agent,
            round=request.round,
            phase=request.phase,
            input_tokens=response.input_tokens,
            output_tokens=response.output_tokens,
            cached=cached,
            reservation=reservation,
            usage_error=response.usage_error,
            team=request.team,
        )

    def charge_known(self, request: Request, response: CachedResponse) -> Entry:
        return self._charge(request, response, cached=True, reservation=None)

    async def __call__(self, request: Request) -> Reply:
        ledger = self.ledger
        reservation = ledger.reserve(
            ledger.cost(request.spec.id, request.input_bound, request.output_bound), call_id_of(request.key)
        )
        try:
            reply = await self.inner(request)
        except BaseException:
            ledger.release(reservation)
            raise
        reply.entry = self._charge(request, reply.response, cached=False, reservation=reservation)
        return reply


class PrefixCacheMiss(RuntimeError):
    """A fork (:mod:`cooplab.runs.fork`) asked a call of its prefix (round K or earlier, the parent's
    rounds) that the response cache cannot answer: the prefix never pays for a call, so the call is
    refused, never made. The message names the call."""

    def __init__(self, request: "Request", through: int):
        super().__init__(
            f"the call of {request.agent} in round {request.round}, phase {request.phase!r} (call id "
            f"{call_id_of(request.key)}, model {request.spec.id}) is in this fork's prefix (rounds 1..{through}, the "
            "parent's), which must replay from the response cache, but the cache has no answer for it; it was not "
            "made "
            f"(give the fork the parent's --cache, or fork at a round the cache covers)"
        )
        self.call_id, self.round, self.phase, self.agent = (
            call_id_of(request.key),
            request.round,
            request.phase,
            request.agent,
        )


class CacheLayer:
    """Replays a stored answer (no inner layer runs), charged by ``charge_known``, then reported by
    ``on_replay`` (the call path's: traced like a live call, :mod:`cooplab.agents.replay`); stores a
    live answer once the inner layers have charged it. The stored counts are re-validated against
    the request's bounds: a damaged or foreign cache never charges past them."""

    def __init__(
        self,
        inner: Layer,
        cache: ResponseCache,
        charge_known: Callable[[Request, CachedResponse], Entry],
        on_replay: Callable[[Request, CachedResponse], Awaitable[Any]] | None = None,
        replay_only_through: int | None = None,
    ):
        self.inner, self.cache, self.charge_known, self.on_replay = inner, cache, charge_known, on_replay
        #: a fork's K: a call of round K or earlier must be answered by the cache (:class:`PrefixCacheMiss`)
        self.replay_only_through = replay_only_through

    async def __call__(self, request: Request) -> Reply:
        hit = self.cache.get(request.key)
        if (
            hit is None
            and self.replay_only_through is not None
            and request.round is not None
            and request.round <= self.replay_only_through
        ):
            raise PrefixCacheMiss(request, self.replay_only_through)
        if hit is not None:
            usage = check_usage(
                {"input_tokens": hit.input_tokens, "output_tokens": hit.output_tokens},
                input_bound=request.input_bound,
                output_bound=request.output_bound,
                source="the cache",
                text=text_estimate(request.messages, hit.text),
            )
            response = CachedResponse(
                hit.text,
                usage.input_tokens,
                usage.output_tokens,
                hit.latency,
                hit.usage_error or usage.error,
                hit.created,
            )
            reply = Reply(response, True, self.charge_known(request, response))
            if self.on_replay is not None:
                await self.on_replay(request, response)
            return reply
        reply = await self.inner(request)
        self.cache.put(request.key, reply.response, request.spec.id)
        return reply


async def traced_replay(request: Request, response: CachedResponse) -> None:
    """A call answered from the cache, reported through its callbacks like a live one (its trace)."""
    await trace_replay(
        runnable=request.runnable,
        messages=request.messages,
        kwargs=request.kwargs,
        config=request.config,
        response=response,
        from_text=request.from_text,
    )


class CallPath:
    """The layers in their fixed order: cache -> budget -> retry -> rate limit -> adapter."""

    def __init__(
        self,
        *,
        ledger: Ledger,
        cache: ResponseCache,
        max_concurrency: int = 8,
        rps: float | None = None,
        retries: int = 4,
        backoff_base: float = 0.5,
        backoff_max: float = 8.0,
        call_timeout: float | None = None,
        call_deadline: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Sleep = asyncio.sleep,
        replay_only_through: int | None = None,
    ):
        self.adapter = AdapterLayer(call_timeout, clock=clock)
        self.rate = RateLimitLayer(self.adapter, max_concurrency=max_concurrency, rps=rps, clock=clock, sleep=sleep)
        self.retry = RetryLayer(
            self.rate, retries=retries, base=backoff_base, cap=backoff_max, sleep=sleep, deadline=call_deadline
        )
        self.budget = BudgetLayer(self.retry, ledger)
        self.cache = CacheLayer(self.budget, cache, self.budget.charge_known, traced_replay, replay_only_through)

    async def __call__(self, request: Request) -> Reply:
        return await self.cache(request)


__all__ = [
    "AdapterLayer",
    "BudgetLayer",
    "CacheLayer",
    "CallPath",
    "Deadline",
    "EndpointFailure",
    "Layer",
    "LlamaAdapter",
    "ModelUnavailable",
    "PrefixCacheMiss",
    "AnthropicAdapter",
    "GoogleAdapter",
    "OllamaAdapter",
    "ProviderAdapter",
    "RateLimitLayer",
    "RateLimiter",
    "Reply",
    "Request",
    "RetryLayer",
    "ScriptedAdapter",
    "adapter_type",
    "deadline_message",
    "decoding_schema",
    "direct_call",
    "endpoint_failure",
    "failure_message",
    "is_transient",
    "server_of",
    "usage_of",
]
