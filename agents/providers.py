"""Hosted chat-model providers behind ``PROVIDER:MODEL`` specs, in one table (:data:`PROVIDERS`).

Each entry says which cooplab extra installs the provider's LangChain integration, which variable
holds its API key, where its server is by default and how ``--base-url`` (or the provider's own
variable) points it elsewhere, and how its chat model is built: ``max_retries`` 0 (cooplab's call
path retries, with backoff and accounting), the call timeout, no HTTP proxy for a loopback server,
and, where the SDK takes an httpx client, cooplab's capped clients
(:mod:`cooplab.agents.http_clients`), so a server cannot make cooplab read more than an answer of
``max_tokens`` can need.

Each model is a checked subclass of the integration's chat model: the provider's answer is
checked where it enters cooplab (:func:`checked_message`: text and tool calls of the right types,
no longer than ``max_tokens`` can hold) and its usage, exactly as reported, goes to
``response_metadata["usage_raw"]`` for the model service to validate against the call's bounds
(``agents/usage.py``), as for OpenAI-compatible servers. A body the SDK cannot read becomes an
:class:`~cooplab.agents.models.errors.EndpointResponseError` (a malformed response: retried, then the run
stops with one line), never a traceback.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Callable

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage

from cooplab.agents.models.errors import EndpointResponseError, snippet
from cooplab.agents.models.openai_compat import attach_usage, checked_chat_openai, parse_body, raw_json
from cooplab.agents.models.urls import is_loopback, normalise_url
from cooplab.limits import clean_strings

if TYPE_CHECKING:  # for annotations only: the model spec's module reads this table
    from cooplab.agents.models.spec import ModelSpec


@dataclass(frozen=True)
class Provider:
    """One hosted provider of ``PROVIDER:MODEL`` specs."""

    kind: str  #: the spec's prefix (LangChain's ``init_chat_model`` provider name)
    extra: str | None  #: the cooplab extra that installs it (None: the core)
    package: str  #: its LangChain integration package on PyPI
    modules: tuple[str, ...]  #: what ``cooplab.extras.require`` looks for
    keys: tuple[str, ...]  #: environment variables of its API key (any one; empty: none needed)
    default_url: str | None  #: its own server (normalised)
    url_env: tuple[str, ...]  #: variables naming another server, read when no --base-url is given
    structured: str  #: how structured output is asked for (docs, README)
    build: Callable[..., BaseChatModel]  #: ``build(spec, **kw)`` -> the LangChain chat model

    def url(self, base_url: str | None) -> str | None:
        """The server a model calls: ``base_url``, else the first variable of :attr:`url_env` that is
        set, else None (the provider's own server)."""
        url = base_url or _first_set(self.url_env)
        if url and "://" not in url:  # OLLAMA_HOST may be host:port
            url = "http://" + url.strip()
        return url

    def key(self) -> str | None:
        """The API key: the first variable of :attr:`keys` that is set (not blank), or None."""
        return _first_set(self.keys)


def _first_set(names: tuple[str, ...]) -> str | None:
    """The value of the first environment variable of ``names`` that is set and not blank, or None."""
    return next((os.environ[v] for v in names if os.environ.get(v, "").strip()), None)


def _timeout(kw: dict[str, Any]) -> float:
    return float(kw.get("timeout", 120))


def _api_key(p: "Provider") -> str:
    """The provider's key from the environment; a placeholder for a server of one's own (--base-url)."""
    return p.key() or "not-needed"


def _clients(
    spec: ModelSpec, url: str | None, timeout: float, http: Any = None, rewrite: Callable[[bytes], bytes] | None = None
) -> tuple[Any, Any]:
    """Capped (sync, async) clients of ``http`` (default httpx) for a model at ``url``."""
    import httpx

    from cooplab.agents.http_clients import capped_clients

    return capped_clients(
        spec.max_tokens, timeout=timeout, trust_env=not is_loopback(url), http=http or httpx, rewrite=rewrite
    )


# --- what enters cooplab from a provider's answer --------------------------------------------------
def answer_size(msg: AIMessage) -> int:
    """The UTF-8 bytes of an answer: its text and its tool calls' names, ids and arguments."""
    parts = [msg.text] + [
        str(v)
        for c in msg.tool_calls
        for v in (c.get("id") or "", c["name"], json.dumps(c["args"], ensure_ascii=False))
    ]
    return sum(len(p.encode("utf-8", "replace")) for p in parts)


def checked_message(msg: Any, max_tokens: int | None, usage: Any) -> AIMessage:
    """A provider's answer as it may enter cooplab: an AIMessage whose tool calls are named with
    object arguments, no longer than ``max_tokens`` can hold (else :class:`EndpointResponseError`),
    its strings cleaned of lone surrogates, carrying ``usage`` (the provider's report, as received)
    in ``response_metadata["usage_raw"]``;
    its ``usage_metadata`` (for traces) only when both counts are non-negative integers."""
    from cooplab.agents.usage import answer_bytes_bound

    if not isinstance(msg, AIMessage):
        raise EndpointResponseError(f"the answer is not a chat message: {snippet(msg)}")
    for c in msg.tool_calls:
        if not isinstance(c.get("name"), str) or not isinstance(c.get("args"), dict):
            raise EndpointResponseError(f"a tool call is not a named call with object arguments: {snippet(c)}")
    if max_tokens:
        size, limit = answer_size(msg), answer_bytes_bound(max_tokens)
        if size > limit:
            raise EndpointResponseError(
                f"the answer has {size} bytes, more than {max_tokens} tokens can hold ({limit})"
            )
    # JSON may spell lone surrogates, which no UTF-8 file takes: cleaned here, where the answer
    # enters cooplab, like the OpenAI path's (checked_completion)
    msg.content = clean_strings(msg.content)
    msg.tool_calls = clean_strings(msg.tool_calls)
    msg.invalid_tool_calls = clean_strings(msg.invalid_tool_calls)
    msg.id = clean_strings(msg.id)
    usage = clean_strings(usage) if isinstance(usage, dict) else usage
    msg.response_metadata = clean_strings(msg.response_metadata or {})
    return attach_usage(msg, usage, "input_tokens", "output_tokens")


def _cap(kwargs: dict[str, Any], default: int | None, *names: str) -> int | None:
    for name in names:
        n = kwargs.get(name)
        if type(n) is int and n > 0:
            return n
    return default


#: what a provider's SDK raises when a body is not what it expects (not JSON, wrong shapes): a
#: malformed response, not a programming error of cooplab's
_UNREADABLE = (ValueError, TypeError, KeyError, AttributeError, IndexError)


def _unreadable(exc: BaseException) -> EndpointResponseError:
    return EndpointResponseError(f"the provider's SDK could not read the body ({type(exc).__name__}: {snippet(exc)})")


# --- Anthropic ------------------------------------------------------------------------------------
def _anthropic_content(raw: Any) -> dict[str, Any]:
    """An Anthropic Messages answer (the SDK's unvalidated object, as JSON values) checked: an object
    whose ``content`` is a list of typed blocks, its text blocks with text and tool_use blocks with
    id, name and object input (other blocks, e.g. thinking, are left out: they are not the answer),
    its usage zeroed (kept apart by the caller); else :class:`EndpointResponseError`."""
    if not isinstance(raw, dict):
        raise EndpointResponseError(f"the body is not a message object: {snippet(raw)}")
    if raw.get("type") == "error" or raw.get("error"):
        raise EndpointResponseError(f"the body holds an error: {snippet(raw.get('error'))}")
    content = raw.get("content")
    if not isinstance(content, list):
        raise EndpointResponseError(f"content is not a list of blocks: {snippet(content)}")
    read = []
    for i, b in enumerate(content):
        kind = b.get("type") if isinstance(b, dict) else None
        if not isinstance(kind, str):
            raise EndpointResponseError(f"content[{i}] is not a typed block: {snippet(b)}")
        if kind not in ("text", "tool_use"):  # thinking, server tools, ...: not part of the answer
            continue
        ok = (kind == "text" and isinstance(b.get("text"), str)) or (
            isinstance(b.get("id"), str) and isinstance(b.get("name"), str) and isinstance(b.get("input"), dict)
        )
        if not ok:
            raise EndpointResponseError(f"content[{i}] is not a well-formed {kind} block: {snippet(b)}")
        read.append(b)
    return {
        "id": raw.get("id") if isinstance(raw.get("id"), str) else "msg",
        "type": "message",
        "role": "assistant",
        "model": raw.get("model") if isinstance(raw.get("model"), str) else "",
        "content": read,
        "stop_reason": raw.get("stop_reason") if isinstance(raw.get("stop_reason"), str) else None,
        "stop_sequence": None,
        "usage": {"input_tokens": 0, "output_tokens": 0},
    }


_ANTHROPIC: Any = None


def _anthropic_class() -> type:
    """``ChatAnthropic`` with cooplab's capped HTTP clients and checked answers (see the module)."""
    global _ANTHROPIC
    if _ANTHROPIC is not None:
        return _ANTHROPIC
    import anthropic
    from langchain_anthropic import ChatAnthropic
    from pydantic import PrivateAttr, ValidationError

    class CheckedChatAnthropic(ChatAnthropic):
        _http: Any = PrivateAttr(default=None)

        @cached_property
        def _client(self) -> Any:
            return anthropic.Client(**self._client_params, http_client=self._http[0])

        @cached_property
        def _async_client(self) -> Any:
            return anthropic.AsyncClient(**self._client_params, http_client=self._http[1])

        def _format_output(self, data: Any, **kwargs: Any) -> Any:
            try:
                raw = clean_strings(raw_json(data))
            except RecursionError:
                raise EndpointResponseError("the body is nested too deeply") from None
            clean = _anthropic_content(raw)
            try:
                message = anthropic.types.Message.model_validate(clean)
                result = super()._format_output(message, **kwargs)
            except (ValidationError, *_UNREADABLE) as exc:
                raise _unreadable(exc) from exc
            msg = result.generations[0].message
            usage = raw.get("usage")
            checked_message(msg, _cap(kwargs, self.max_tokens, "max_tokens"), usage)
            return result

        async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs: Any) -> Any:
            try:
                return await super()._agenerate(messages, stop, run_manager, **kwargs)
            except json.JSONDecodeError as exc:  # the SDK's own parse of a body that is not JSON
                raise _unreadable(exc) from exc

        def _generate(self, messages, stop=None, run_manager=None, **kwargs: Any) -> Any:
            try:
                return super()._generate(messages, stop, run_manager, **kwargs)
            except json.JSONDecodeError as exc:
                raise _unreadable(exc) from exc

    _ANTHROPIC = CheckedChatAnthropic
    return CheckedChatAnthropic


def _build_anthropic(spec: ModelSpec, **kw: Any) -> BaseChatModel:
    p = PROVIDERS["anthropic"]
    url, timeout = p.url(spec.base_url), _timeout(kw)
    model = _anthropic_class()(
        model=spec.name,
        base_url=url,
        api_key=_api_key(p),
        temperature=spec.temperature,
        max_tokens=spec.max_tokens,
        max_retries=0,
        timeout=timeout,
    )
    import httpx2  # the Anthropic SDK's HTTP library, a drop-in fork of httpx

    model._http = _clients(spec, url, timeout, httpx2)
    return model


# --- Ollama and Google: the SDK parses, cooplab reads the body as received ----------------------------
def _checked_class(
    base: type,
    usage_of: Callable[[dict[str, Any]], Any],
    cap_of: Callable[[Any, dict[str, Any]], int | None],
    name: str,
    shape: Callable[[dict[str, Any]], None],
    extra: dict[str, Any] | None = None,
) -> type:
    """``base`` (a LangChain chat model) whose answers are checked (:func:`checked_message`) with the
    usage ``usage_of(body)`` reads from the response body as received (``recorded_bodies``), and
    whose bodies the SDK cannot read, that are not JSON objects, or that ``shape(body)`` finds no
    answer (it raises :class:`EndpointResponseError`) are malformed responses. ``extra``: more methods."""
    from cooplab.agents.http_clients import recorded_bodies

    def finish(self: Any, result: Any, bodies: list[bytearray], kwargs: dict[str, Any]) -> Any:
        body = _last_json(bodies)
        shape(body)
        checked_message(result.generations[0].message, cap_of(self, kwargs), usage_of(body))
        return result

    async def _agenerate(self: Any, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        with recorded_bodies() as bodies:
            try:
                result = await base._agenerate(self, messages, stop, run_manager, **kwargs)
            except _UNREADABLE as exc:
                raise _unreadable(exc) from exc
        return finish(self, result, bodies, kwargs)

    def _generate(self: Any, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        with recorded_bodies() as bodies:
            try:
                result = base._generate(self, messages, stop, run_manager, **kwargs)
            except _UNREADABLE as exc:
                raise _unreadable(exc) from exc
        return finish(self, result, bodies, kwargs)

    return type(
        name,
        (base,),
        {
            "_agenerate": _agenerate,
            "_generate": _generate,
            "__module__": __name__,
            **(extra or {}),
            "__doc__": f"{base.__name__} with cooplab's checks of its answers (agents/providers.py).",
        },
    )


def _last_json(bodies: list[bytearray]) -> dict[str, Any]:
    """The last JSON object of the last body read (a one-object body, or the last line of a
    stream of lines), or :class:`EndpointResponseError`."""
    if not bodies:
        raise EndpointResponseError("no response body was read")
    lines = [ln for ln in bytes(bodies[-1]).splitlines() if ln.strip()]
    try:
        value = parse_body(bytes(bodies[-1]))
    except EndpointResponseError:
        if len(lines) < 2:
            raise
        value = parse_body(lines[-1])
    if not isinstance(value, dict):
        raise EndpointResponseError(f"the body is not a JSON object: {snippet(value)}")
    return clean_strings(value)


def _ollama_shape(body: dict[str, Any]) -> None:
    """An Ollama answer ends with ``"done": true``: without it the answer was cut short."""
    if body.get("done") is not True:
        raise EndpointResponseError(f"the answer never ended (its last object has done = {snippet(body.get('done'))})")


def _google_shape(body: dict[str, Any]) -> None:
    """A Gemini answer has a non-empty list of ``candidates``, unless the prompt was blocked
    (``promptFeedback.blockReason``: an empty answer, as the API means it)."""
    candidates, feedback = body.get("candidates"), body.get("promptFeedback")
    if isinstance(candidates, list) and candidates and all(isinstance(c, dict) for c in candidates):
        first = candidates[0]
        parts = (first.get("content") or {}).get("parts") if isinstance(first.get("content"), dict) else None
        if isinstance(parts, list) and parts or first.get("finishReason") not in (None, "STOP", "MAX_TOKENS"):
            return  # an answer, or none for a reason the API gives (SAFETY, RECITATION, ...)
        raise EndpointResponseError(f"candidates[0] has no content parts: {snippet(first)}")
    if candidates is None and isinstance(feedback, dict) and feedback.get("blockReason"):
        return
    raise EndpointResponseError(f"candidates is not a non-empty list of objects: {snippet(candidates)}")


def _clean_part(part: Any) -> Any:
    """One object of an Ollama answer (the client's model, or a mapping) with lone surrogates cleaned
    from its strings before LangChain builds a message of it (which would refuse them)."""
    if hasattr(part, "model_dump") and hasattr(type(part), "model_validate"):
        return type(part).model_validate(clean_strings(part.model_dump(by_alias=True)))
    return clean_strings(part)


def _ollama_clean_streams(base: type) -> dict[str, Any]:
    """``base``'s chat streams, each part cleaned (:func:`_clean_part`)."""

    def _create_chat_stream(self: Any, messages: Any, stop: Any = None, **kwargs: Any) -> Any:
        for part in base._create_chat_stream(self, messages, stop, **kwargs):
            yield _clean_part(part)

    async def _acreate_chat_stream(self: Any, messages: Any, stop: Any = None, **kwargs: Any) -> Any:
        async for part in base._acreate_chat_stream(self, messages, stop, **kwargs):
            yield _clean_part(part)

    return {"_create_chat_stream": _create_chat_stream, "_acreate_chat_stream": _acreate_chat_stream}


def _rewritten(body: bytes, fix: Callable[[dict[str, Any]], bool]) -> bytes:
    """``body`` re-encoded when ``fix(json)`` changed its JSON object in place (it returns True);
    else, and for a body that is not a JSON object, unchanged."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return body
    return json.dumps(data).encode() if isinstance(data, dict) and fix(data) else body


def _drop_bad_counts(target: Any, names: tuple[str, ...]) -> bool:
    """Drop the counts ``names`` of the object ``target`` that are not non-negative integers (the SDK
    would refuse the whole body; cooplab checks them as received and charges such a call at its
    bounds); whether any was dropped."""
    if not isinstance(target, dict):
        return False
    bad = [k for k in names if k in target and not (type(target[k]) is int and target[k] >= 0)]
    for k in bad:
        del target[k]
    return bool(bad)


#: the counts of an Ollama answer its client validates as integers
_OLLAMA_COUNTS = (
    "total_duration",
    "load_duration",
    "prompt_eval_count",
    "prompt_eval_duration",
    "eval_count",
    "eval_duration",
)
#: the counts of Gemini's usageMetadata its SDK validates as integers
_GOOGLE_COUNTS = (
    "promptTokenCount",
    "candidatesTokenCount",
    "totalTokenCount",
    "thoughtsTokenCount",
    "cachedContentTokenCount",
    "toolUsePromptTokenCount",
)


def _ollama_rewrite(body: bytes) -> bytes:
    return _rewritten(body, lambda data: _drop_bad_counts(data, _OLLAMA_COUNTS))


def _google_fix(data: dict[str, Any]) -> bool:
    """Gemini's ``usageMetadata`` made readable by its SDK (see :func:`_drop_bad_counts`); whether it changed."""
    if "usageMetadata" in data and not isinstance(data["usageMetadata"], dict):
        del data["usageMetadata"]  # not an object: cooplab flags it as received; the SDK would refuse the body
        return True
    usage = data.get("usageMetadata")
    if not isinstance(usage, dict):
        return False
    # per-modality details whose counts the SDK would refuse: not read by cooplab, dropped
    details = [
        k
        for k, v in usage.items()
        if k.endswith("Details")
        and not (
            isinstance(v, list)
            and all(
                isinstance(d, dict) and type(d.get("tokenCount", 0)) is int and d.get("tokenCount", 0) >= 0 for d in v
            )
        )
    ]
    for k in details:
        del usage[k]
    return _drop_bad_counts(usage, _GOOGLE_COUNTS) or bool(details)


def _google_rewrite(body: bytes) -> bytes:
    return _rewritten(body, _google_fix)


def _ollama_usage(body: dict[str, Any]) -> Any:
    return {"input_tokens": body.get("prompt_eval_count"), "output_tokens": body.get("eval_count")}


def _google_usage(body: dict[str, Any]) -> Any:
    """Gemini's ``usageMetadata`` as input and output counts: the prompt's, and the candidates' plus
    the model's thoughts (billed as output) when both are integers; and the prompt tokens served
    from Gemini's cache (``cachedContentTokenCount``, part of the prompt's), for the reuse rate."""
    u = body.get("usageMetadata")
    if not isinstance(u, dict):
        return u
    out, thoughts = u.get("candidatesTokenCount"), u.get("thoughtsTokenCount")
    if type(out) is int and type(thoughts) is int:
        out += thoughts
    return {
        "input_tokens": u.get("promptTokenCount"),
        "output_tokens": out,
        "cached_tokens": u.get("cachedContentTokenCount", 0),
    }


_CLASSES: dict[str, type] = {}


def _ollama_class() -> type:
    if "ollama" not in _CLASSES:
        from langchain_ollama import ChatOllama

        _CLASSES["ollama"] = _checked_class(
            ChatOllama,
            _ollama_usage,
            lambda m, kw: _cap(kw.get("options") or {}, m.num_predict or 0, "num_predict") or None,
            "CheckedChatOllama",
            _ollama_shape,
            _ollama_clean_streams(ChatOllama),
        )
    return _CLASSES["ollama"]


def _google_class() -> type:
    if "google" not in _CLASSES:
        from langchain_google_genai import ChatGoogleGenerativeAI

        _CLASSES["google"] = _checked_class(
            ChatGoogleGenerativeAI,
            _google_usage,
            lambda m, kw: _cap(kw, m.max_output_tokens or 0, "max_output_tokens") or None,
            "CheckedChatGoogle",
            _google_shape,
        )
    return _CLASSES["google"]


def _build_ollama(spec: ModelSpec, **kw: Any) -> BaseChatModel:
    from cooplab.agents.http_clients import BodyCap

    url, timeout = PROVIDERS["ollama"].url(spec.base_url) or OLLAMA_LOCAL, _timeout(kw)
    cap = BodyCap(spec.max_tokens, rewrite=_ollama_rewrite)
    return _ollama_class()(
        model=spec.name,
        base_url=url,
        temperature=spec.temperature,
        num_predict=spec.max_tokens,
        client_kwargs={"timeout": timeout, "trust_env": not is_loopback(url)},
        sync_client_kwargs={"event_hooks": {"request": [cap.request], "response": [cap.response]}},
        async_client_kwargs={"event_hooks": {"request": [cap.arequest], "response": [cap.aresponse]}},
    )


# --- Google GenAI ---------------------------------------------------------------------------------
def _build_google(spec: ModelSpec, **kw: Any) -> BaseChatModel:
    from google import genai
    from google.genai.types import HttpOptions

    p = PROVIDERS["google_genai"]
    url, timeout = p.url(spec.base_url), _timeout(kw)
    key = _api_key(p)
    model = _google_class()(
        model=spec.name,
        google_api_key=key,
        base_url=url,
        temperature=spec.temperature,
        max_output_tokens=spec.max_tokens,
        max_retries=1,
        timeout=timeout,
    )  # 1 attempt: no retry of the SDK's
    sync_client, async_client = _clients(spec, url, timeout, rewrite=_google_rewrite)
    options = {"httpx_client": sync_client, "httpx_async_client": async_client, **({"base_url": url} if url else {})}
    model.client = genai.Client(api_key=key, http_options=HttpOptions(**options))
    return model


def _build_openai(spec: ModelSpec, **kw: Any) -> BaseChatModel:
    """``openai:NAME``: OpenAI, or any OpenAI-compatible server at ``base_url``."""
    timeout = _timeout(kw)
    # our own clients: langchain-openai's shared default async client outlives the event loop it
    # was first used in, which breaks a second run in the same process
    sync_client, async_client = _clients(spec, spec.base_url, timeout)
    return checked_chat_openai()(
        http_client=sync_client,
        http_async_client=async_client,
        model=spec.name,
        base_url=spec.base_url,
        api_key=_api_key(PROVIDERS["openai"]),
        temperature=spec.temperature,
        max_tokens=spec.max_tokens,
        max_retries=0,  # cooplab retries transport errors itself, with backoff and accounting
        timeout=timeout,
        use_responses_api=False,
    )  # chat completions, whatever the model's name: the checked path


#: OpenAI's own API, the endpoint of ``openai:NAME`` without a base URL
OPENAI_API = "https://api.openai.com/v1"
#: Ollama's server on this machine, the default of ``ollama:NAME``
OLLAMA_LOCAL = "http://localhost:11434"

#: every hosted provider by its spec prefix
PROVIDERS: dict[str, Provider] = {
    "openai": Provider(
        "openai",
        None,
        "langchain-openai",
        ("langchain_openai",),
        ("OPENAI_API_KEY",),
        OPENAI_API,
        ("OPENAI_API_BASE", "OPENAI_BASE_URL"),
        "response_format json_object (with the JSON schema for a --base-url server)",
        _build_openai,
    ),
    "anthropic": Provider(
        "anthropic",
        "anthropic",
        "langchain-anthropic",
        ("langchain_anthropic", "anthropic"),
        ("ANTHROPIC_API_KEY",),
        "https://api.anthropic.com",
        ("ANTHROPIC_BASE_URL",),
        "a forced tool call whose input schema is the JSON schema",
        _build_anthropic,
    ),
    "google_genai": Provider(
        "google_genai",
        "google",
        "langchain-google-genai",
        ("langchain_google_genai",),
        ("GOOGLE_API_KEY", "GEMINI_API_KEY"),
        None,
        (),
        "response_mime_type application/json with response_json_schema",
        _build_google,
    ),
    "ollama": Provider(
        "ollama",
        "ollama",
        "langchain-ollama",
        ("langchain_ollama", "ollama"),
        (),
        normalise_url(OLLAMA_LOCAL),
        ("OLLAMA_HOST",),
        "format = the JSON schema",
        _build_ollama,
    ),
}


def provider(kind: str) -> Provider | None:
    """The hosted provider of a spec's kind, or None (local, scripted and built-in models)."""
    return PROVIDERS.get(kind)


def provider_of_model(model: Any) -> str | None:
    """The hosted provider whose LangChain integration package (the first of its
    :attr:`Provider.modules`) defines a chat model object's class or one of its bases, or None."""
    return next(
        (
            kind
            for c in type(model).__mro__
            for kind, p in PROVIDERS.items()
            if c.__module__.split(".")[0] == p.modules[0]
        ),
        None,
    )


def known_prefixes() -> str:
    """The hosted providers' prefixes, for messages: ``openai:NAME, anthropic:NAME, ...``."""
    return ", ".join(f"{k}:NAME" for k in PROVIDERS)


__all__ = [
    "OLLAMA_LOCAL",
    "OPENAI_API",
    "PROVIDERS",
    "Provider",
    "answer_size",
    "checked_message",
    "known_prefixes",
    "provider",
    "provider_of_model",
]
