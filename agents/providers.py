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
:class:`~cooplab.agents.models.EndpointResponseError` (a malformed response: retried, then the run
stops with one line), never a traceback.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage

from cooplab.agents.models import OPENAI_API, EndpointResponseError, ModelSpec, _is_loopback, _raw, _snippet, normalise_url
from cooplab.limits import clean_strings


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
        url = base_url or next((os.environ[v] for v in self.url_env if os.environ.get(v, "").strip()), None)
        if url and "://" not in url:  # OLLAMA_HOST may be host:port
            url = "http://" + url.strip()
        return url


def _timeout(kw: dict[str, Any]) -> float:
    return float(kw.get("timeout", 120))


def _api_key(p: "Provider", spec: ModelSpec) -> str:
    """The provider's key from the environment; a placeholder for a server of one's own (--base-url)."""
    return next((os.environ[v] for v in p.keys if os.environ.get(v, "").strip()), "") or "not-needed"


def _clients(spec: ModelSpec, url: str | None, timeout: float) -> tuple[Any, Any]:
    from cooplab.agents.http_clients import capped_clients

    return capped_clients(spec.max_tokens, timeout=timeout, trust_env=not _is_loopback(url))


# --- what enters cooplab from a provider's answer --------------------------------------------------
def answer_size(msg: AIMessage) -> int:
    """The UTF-8 bytes of an answer: its text and its tool calls' names, ids and arguments."""
    parts = [msg.text] + [str(v) for c in msg.tool_calls for v in (c.get("id") or "", c["name"], json.dumps(c["args"], ensure_ascii=False))]
    return sum(len(p.encode("utf-8", "replace")) for p in parts)


def checked_message(msg: Any, max_tokens: int | None, usage: Any) -> AIMessage:
    """A provider's answer as it may enter cooplab: an AIMessage whose tool calls are named with
    object arguments, no longer than ``max_tokens`` can hold (else :class:`EndpointResponseError`),
    carrying ``usage`` (the provider's report, as received) in ``response_metadata["usage_raw"]``;
    its ``usage_metadata`` (for traces) only when both counts are non-negative integers."""
    from cooplab.agents.usage import answer_bytes_bound

    if not isinstance(msg, AIMessage):
        raise EndpointResponseError(f"the answer is not a chat message: {_snippet(msg)}")
    for c in msg.tool_calls:
        if not isinstance(c.get("name"), str) or not isinstance(c.get("args"), dict):
            raise EndpointResponseError(f"a tool call is not a named call with object arguments: {_snippet(c)}")
    if max_tokens:
        size, limit = answer_size(msg), answer_bytes_bound(max_tokens)
        if size > limit:
            raise EndpointResponseError(f"the answer has {size} bytes, more than {max_tokens} tokens can hold ({limit})")
    usage = clean_strings(usage) if isinstance(usage, dict) else usage
    msg.response_metadata = {**(msg.response_metadata or {}), "usage_raw": usage}
    msg.usage_metadata = None
    if isinstance(usage, dict):
        i, o = usage.get("input_tokens"), usage.get("output_tokens")
        if all(type(v) is int and v >= 0 for v in (i, o)):
            msg.usage_metadata = {"input_tokens": i, "output_tokens": o, "total_tokens": i + o}
    return msg


def _cap(kwargs: dict[str, Any], default: int, *names: str) -> int:
    for name in names:
        n = kwargs.get(name)
        if type(n) is int and n > 0:
            return n
    return default


#: what a provider's SDK raises when a body is not what it expects (not JSON, wrong shapes): a
#: malformed response, not a programming error of cooplab's
_UNREADABLE = (ValueError, TypeError, KeyError, AttributeError, IndexError)


def _unreadable(exc: BaseException) -> EndpointResponseError:
    return EndpointResponseError(f"the provider's SDK could not read the body ({type(exc).__name__}: {_snippet(exc)})")


# --- Anthropic ------------------------------------------------------------------------------------
def _anthropic_content(raw: Any) -> dict[str, Any]:
    """An Anthropic Messages answer (the SDK's unvalidated object, as JSON values) checked: an object
    whose ``content`` is a list of typed blocks (text with text, tool_use with id, name and object
    input), its usage zeroed (kept apart by the caller); else :class:`EndpointResponseError`."""
    if not isinstance(raw, dict):
        raise EndpointResponseError(f"the body is not a message object: {_snippet(raw)}")
    if raw.get("type") == "error" or raw.get("error"):
        raise EndpointResponseError(f"the body holds an error: {_snippet(raw.get('error'))}")
    content = raw.get("content")
    if not isinstance(content, list):
        raise EndpointResponseError(f"content is not a list of blocks: {_snippet(content)}")
    for i, b in enumerate(content):
        ok = isinstance(b, dict) and (
            (b.get("type") == "text" and isinstance(b.get("text"), str))
            or (b.get("type") == "tool_use" and isinstance(b.get("id"), str) and isinstance(b.get("name"), str)
                and isinstance(b.get("input"), dict)))
        if not ok:
            raise EndpointResponseError(f"content[{i}] is not a text or tool_use block: {_snippet(b)}")
    return {"id": raw.get("id") if isinstance(raw.get("id"), str) else "msg", "type": "message", "role": "assistant",
            "model": raw.get("model") if isinstance(raw.get("model"), str) else "", "content": content,
            "stop_reason": raw.get("stop_reason") if isinstance(raw.get("stop_reason"), str) else None,
            "stop_sequence": None, "usage": {"input_tokens": 0, "output_tokens": 0}}


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
                raw = clean_strings(_raw(data))
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
    model = _anthropic_class()(model=spec.name, base_url=url, api_key=_api_key(p, spec), temperature=spec.temperature,
                               max_tokens=spec.max_tokens, max_retries=0, timeout=timeout)
    model._http = _clients(spec, url, timeout)
    return model


# --- Ollama ---------------------------------------------------------------------------------------
_OLLAMA: Any = None


def _ollama_class() -> type:
    """``ChatOllama`` whose answers are checked and whose unreadable bodies are malformed responses."""
    global _OLLAMA
    if _OLLAMA is not None:
        return _OLLAMA
    from langchain_ollama import ChatOllama

    def checked(self: Any, result: Any, kwargs: dict[str, Any]) -> Any:
        gen = result.generations[0]
        info = gen.generation_info or {}
        usage = {"input_tokens": info.get("prompt_eval_count"), "output_tokens": info.get("eval_count")} if info.get("done") else None
        cap = _cap(kwargs.get("options") or {}, self.num_predict or 0, "num_predict") or None
        checked_message(gen.message, cap, usage)
        return result

    class CheckedChatOllama(ChatOllama):
        async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs: Any) -> Any:
            try:
                result = await super()._agenerate(messages, stop, run_manager, **kwargs)
            except _UNREADABLE as exc:
                raise _unreadable(exc) from exc
            return checked(self, result, kwargs)

        def _generate(self, messages, stop=None, run_manager=None, **kwargs: Any) -> Any:
            try:
                result = super()._generate(messages, stop, run_manager, **kwargs)
            except _UNREADABLE as exc:
                raise _unreadable(exc) from exc
            return checked(self, result, kwargs)

    _OLLAMA = CheckedChatOllama
    return CheckedChatOllama


def _build_ollama(spec: ModelSpec, **kw: Any) -> BaseChatModel:
    from cooplab.agents.http_clients import BodyCap

    url, timeout = PROVIDERS["ollama"].url(spec.base_url) or OLLAMA_LOCAL, _timeout(kw)
    cap = BodyCap(spec.max_tokens)
    return _ollama_class()(model=spec.name, base_url=url, temperature=spec.temperature, num_predict=spec.max_tokens,
                           client_kwargs={"timeout": timeout, "trust_env": not _is_loopback(url)},
                           sync_client_kwargs={"event_hooks": {"request": [cap.request], "response": [cap.response]}},
                           async_client_kwargs={"event_hooks": {"request": [cap.arequest], "response": [cap.aresponse]}})


# --- Google GenAI ---------------------------------------------------------------------------------
_GOOGLE: Any = None


def _google_class() -> type:
    """``ChatGoogleGenerativeAI`` whose answers are checked and whose unreadable bodies are malformed
    responses; its usage is the provider's ``usageMetadata`` as LangChain normalised it (None when
    the answer has none)."""
    global _GOOGLE
    if _GOOGLE is not None:
        return _GOOGLE
    from langchain_google_genai import ChatGoogleGenerativeAI

    def checked(self: Any, result: Any, kwargs: dict[str, Any]) -> Any:
        msg = result.generations[0].message
        um = msg.usage_metadata
        usage = {"input_tokens": um.get("input_tokens"), "output_tokens": um.get("output_tokens")} if um else None
        checked_message(msg, _cap(kwargs, self.max_output_tokens or 0, "max_output_tokens") or None, usage)
        return result

    class CheckedChatGoogle(ChatGoogleGenerativeAI):
        async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs: Any) -> Any:
            try:
                result = await super()._agenerate(messages, stop, run_manager, **kwargs)
            except _UNREADABLE as exc:
                raise _unreadable(exc) from exc
            return checked(self, result, kwargs)

        def _generate(self, messages, stop=None, run_manager=None, **kwargs: Any) -> Any:
            try:
                result = super()._generate(messages, stop, run_manager, **kwargs)
            except _UNREADABLE as exc:
                raise _unreadable(exc) from exc
            return checked(self, result, kwargs)

    _GOOGLE = CheckedChatGoogle
    return CheckedChatGoogle


def _build_google(spec: ModelSpec, **kw: Any) -> BaseChatModel:
    from google import genai
    from google.genai.types import HttpOptions

    p = PROVIDERS["google_genai"]
    url, timeout = p.url(spec.base_url), _timeout(kw)
    key = _api_key(p, spec)
    model = _google_class()(model=spec.name, google_api_key=key, base_url=url, temperature=spec.temperature,
                            max_output_tokens=spec.max_tokens, max_retries=1, timeout=timeout)  # 1 attempt: no retry of the SDK's
    sync_client, async_client = _clients(spec, url, timeout)
    options = {"httpx_client": sync_client, "httpx_async_client": async_client, **({"base_url": url} if url else {})}
    model.client = genai.Client(api_key=key, http_options=HttpOptions(**options))
    return model


def _build_openai(spec: ModelSpec, **kw: Any) -> BaseChatModel:
    from cooplab.agents.models import _make_openai

    return _make_openai(spec, **kw)


#: Ollama's server on this machine, the default of ``ollama:NAME``
OLLAMA_LOCAL = "http://localhost:11434"

#: every hosted provider by its spec prefix
PROVIDERS: dict[str, Provider] = {
    "openai": Provider("openai", None, "langchain-openai", ("langchain_openai",), ("OPENAI_API_KEY",), OPENAI_API,
                       ("OPENAI_API_BASE", "OPENAI_BASE_URL"), "response_format json_object (with the JSON schema for a --base-url server)",
                       _build_openai),
    "anthropic": Provider("anthropic", "anthropic", "langchain-anthropic", ("langchain_anthropic", "anthropic"), ("ANTHROPIC_API_KEY",),
                          "https://api.anthropic.com", ("ANTHROPIC_BASE_URL",), "a forced tool call whose input schema is the JSON schema",
                          _build_anthropic),
    "google_genai": Provider("google_genai", "google", "langchain-google-genai", ("langchain_google_genai",),
                             ("GOOGLE_API_KEY", "GEMINI_API_KEY"), None, (),
                             "response_mime_type application/json with response_json_schema", _build_google),
    "ollama": Provider("ollama", "ollama", "langchain-ollama", ("langchain_ollama", "ollama"), (), normalise_url(OLLAMA_LOCAL),
                       ("OLLAMA_HOST",), "format = the JSON schema", _build_ollama),
}


def provider(kind: str) -> Provider | None:
    """The hosted provider of a spec's kind, or None (local, scripted and built-in models)."""
    return PROVIDERS.get(kind)


def known_prefixes() -> str:
    """The hosted providers' prefixes, for messages: ``openai:NAME, anthropic:NAME, ...``."""
    return ", ".join(f"{k}:NAME" for k in PROVIDERS)


__all__ = ["OLLAMA_LOCAL", "PROVIDERS", "Provider", "answer_size", "checked_message", "known_prefixes", "provider"]
