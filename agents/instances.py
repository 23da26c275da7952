"""LangChain chat model objects handed in from Python, wherever a model spec string goes.

A notebook user who has already configured a chat model (``ChatAnthropic(model=..., ...)``, a
``ChatOpenAI`` pointed at a proxy, a model class of their own) passes the object itself::

    cooplab.run(task="cpr", agents="llm", model=ChatOpenAI(model="gpt-4o-mini", base_url=...), out="runs/a")

The object is registered in this process under a spec string, ``instance:LABEL#DIGEST``, which is
what config.json records (a run directory holds text, not objects):

* ``LABEL`` is the model's name as the object states it (its ``model_name`` or ``model``
  attribute, else the class name): the name the ledger prices it by and traces show;
* ``DIGEST`` is the first 12 hex digits of the SHA-256 of :func:`settings_text`: the class's
  import path, the server it calls (normalised, as for ``openai:NAME --base-url``) and every one of
  its settings, read from the pydantic model's own fields (not LangChain's ``_get_llm_string``,
  which leaves out the server, the context size and often the temperature, and knows nothing of a
  user class's own fields). Secrets are masked (``SecretStr`` values, and any field, mapping key or
  URL query parameter named like a key, token, password or authorization header); clients and
  other objects are described by their class and the server they talk to, never by their
  ``repr``. Two objects with the same class and settings share a digest, so their answers share
  cache entries; changing any setting (temperature, endpoint, context size, a field of your own)
  changes it. Settings that cannot change an answer are left out: callbacks, tags, metadata,
  LangChain's cache and rate limiter, retries and timeouts.

The answers of an object are checked where they enter cooplab, like a server's
(:class:`CheckedObject`): its text and tool calls no longer than the call's ``max_tokens`` can
hold, lone surrogates replaced, its usage kept as reported for the model service to validate.

A run made with an object is resumed in another process by handing the object in again:
``cooplab.resume(out, models=[obj])``. Without it the spec names a model this process does not
have, which is one line (exit 2 on the command line) before any work.
"""

from __future__ import annotations

import enum
import hashlib
import json
import math
import re
import threading
from collections.abc import Mapping
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import BaseModel, ConfigDict, SecretBytes, SecretStr

from cooplab.limits import ConfigError, clean_strings

PREFIX = "instance:"


class ModelObjectMissing(ConfigError):
    """A run's ``instance:`` spec names a chat model object this process was not given (one line;
    the run directory is fine, the object must be handed in again)."""


_REGISTRY: dict[str, BaseChatModel] = {}
_LOCK = threading.Lock()


def model_label(model: Any) -> str:
    """A chat model object's name: its ``model_name`` or ``model`` attribute when that is a
    non-empty string, else its class name; characters outside letters, digits and ``._-/:`` become ``-``."""
    for attr in ("model_name", "model"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value.strip():
            break
    else:
        value = type(model).__name__
    label = re.sub(r"[^\w.\-/:]+", "-", value.strip())[:120].strip("-")
    return label or type(model).__name__


#: fields of every chat model that cannot change an answer: how it is called, observed and traced
_NOT_SETTINGS = frozenset(
    {
        "name",
        "cache",
        "verbose",
        "callbacks",
        "callback_manager",
        "tags",
        "metadata",
        "custom_get_token_ids",
        "rate_limiter",
        "max_retries",
    }
)
#: what stands for a secret in :func:`settings_text`
MASK = "<secret>"
_SECRET_NAME = re.compile(
    r"(?:^|_)(?:api_?key|key|secret|password|passwd|passphrase|credentials?|auth|authorization|bearer|"
    r"cookie|signature|private_key|access_key|session|token)s?$"
)
_NOT_SECRET = re.compile(r"(?:^|_)(?:max|num|n|min|total|stop|eos|bos|pad)_tokens?$|^tokens?$")
_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.\-]*://")
_DEPTH = 12


def _secret_name(name: str) -> bool:
    """Whether a field, mapping key or query parameter named ``name`` holds a secret (``api_key``,
    ``Authorization``, ``x-api-key``, ``hf_token``, ...; not ``max_tokens``)."""
    n = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
    return bool(_SECRET_NAME.search(n)) and not _NOT_SECRET.search(n)


def _url(text: str) -> str:
    """A URL as :func:`~cooplab.agents.models.urls.normalise_url` spells it, with the values of query
    parameters named like secrets masked (a user name and password are dropped there)."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    from cooplab.agents.models.urls import normalise_url

    url = normalise_url(text)
    parts = urlsplit(url)
    if not parts.query:
        return url
    query = [(k, MASK if _secret_name(k) else v) for k, v in parse_qsl(parts.query, keep_blank_values=True)]
    return urlunsplit(parts._replace(query=urlencode(query, safe="<>")))


def _path(obj: Any) -> str:
    cls = obj if isinstance(obj, type) else type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, (str, bytes, Mapping, list, tuple)) and not value)


def describe_value(value: Any, name: str = "", depth: int = 0) -> Any:
    """``value`` as JSON data that names it the same way in every process: secrets masked, URLs
    normalised, mappings sorted, non-finite numbers as text, and any other object (a client, a
    function) as its class (or qualified name) and the server it talks to (its ``base_url``)."""
    if _secret_name(name) and not _empty(value):
        return MASK
    if isinstance(value, (SecretStr, SecretBytes)):
        return MASK if value.get_secret_value() else ""
    if depth > _DEPTH:
        return "<nested too deeply>"
    if isinstance(value, enum.Enum):
        return describe_value(value.value, name, depth + 1)
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, str):
        return _url(value) if _URL.match(value.strip()) else value
    if isinstance(value, bytes):
        return {"bytes": len(value), "sha256": hashlib.sha256(value).hexdigest()}
    if isinstance(value, Mapping):
        items = sorted(((str(k), v) for k, v in value.items()), key=lambda kv: kv[0])
        return {k: describe_value(v, k, depth + 1) for k, v in items}
    if isinstance(value, (list, tuple)):
        return [describe_value(v, name, depth + 1) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(
            (describe_value(v, name, depth + 1) for v in value),
            key=lambda v: json.dumps(v, sort_keys=True, default=str),
        )
    if isinstance(value, BaseModel) and not isinstance(value, BaseChatModel):
        return {"class": _path(value), **_fields(value, depth + 1)}
    if isinstance(value, BaseChatModel):
        return {"class": _path(value), **_fields(value, depth + 1, skip=_NOT_SETTINGS)}
    if callable(value) and hasattr(value, "__qualname__"):
        return {"callable": f"{getattr(value, '__module__', '?')}.{value.__qualname__}"}
    desc: dict[str, Any] = {"class": _path(value)}
    try:
        url = getattr(value, "base_url", None)
    except Exception:  # noqa: BLE001 - a property of a third-party object
        url = None
    if url is not None:
        desc["base_url"] = _url(str(url))
    return desc


def _fields(model: BaseModel, depth: int = 0, skip: frozenset[str] = frozenset()) -> dict[str, Any]:
    """A pydantic model's fields (and extra fields), each described (:func:`describe_value`)."""
    names = [n for n in type(model).model_fields if n not in skip]
    out = {n: describe_value(getattr(model, n, None), n, depth) for n in names}
    extra = getattr(model, "__pydantic_extra__", None) or {}
    out.update({f"extra.{k}": describe_value(v, str(k), depth) for k, v in extra.items() if str(k) not in skip})
    return dict(sorted(out.items()))


#: the field naming the server of each hosted provider's chat model class
_URL_FIELD = {
    "openai": "openai_api_base",
    "anthropic": "anthropic_api_url",
    "ollama": "base_url",
    "google_genai": "base_url",
}


def endpoint_of(model: Any) -> str | None:
    """The normalised URL of the server a hosted provider's chat model object calls: its own field
    (``openai_api_base``, ``anthropic_api_url``, ``base_url``), else the provider's variable
    (``$OPENAI_API_BASE``, ``$OLLAMA_HOST``, ...), else the provider's own server; None for a class
    of no known provider (its URL fields are part of its settings)."""
    from cooplab.agents.providers import PROVIDERS, provider_of_model

    kind = provider_of_model(model)
    if kind is None:
        return None
    value = getattr(model, _URL_FIELD.get(kind, "base_url"), None)
    url = (
        PROVIDERS[kind].url(value if isinstance(value, str) and value.strip() else None) or PROVIDERS[kind].default_url
    )
    return _url(url) if url else None


def settings_text(model: BaseChatModel) -> str:
    """The canonical text a chat model object's digest is the SHA-256 of: its class, the server it
    calls and all its settings (see the module's docstring). It never holds a secret."""
    ident = {
        "class": _path(model),
        "endpoint": endpoint_of(model),
        "settings": _fields(model, skip=_NOT_SETTINGS | _timeouts(model) | _unset_later_fields(model)),
    }
    return json.dumps(ident, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=_path)


def _timeouts(model: BaseModel) -> frozenset[str]:
    """The fields that bound how long a call may take (``timeout``, ``request_timeout``, ...): not settings of its
    answers."""
    return frozenset(n for n in type(model).model_fields if n == "timeout" or n.endswith("_timeout"))


def _unset_later_fields(model: BaseModel) -> frozenset[str]:
    """Fields a class added after its digests were in use (``ADDED_SETTINGS``), left out while
    unset, so objects that do not use them keep the digest, and the cache entries, they had."""
    added = getattr(type(model), "ADDED_SETTINGS", frozenset())
    return frozenset(n for n in added if getattr(model, n, None) is None)


def settings_digest(model: BaseChatModel) -> str:
    """12 hex digits naming the object's class, server and settings (see the module's docstring)."""
    return hashlib.sha256(settings_text(model).encode("utf-8", "replace")).hexdigest()[:12]


def register(model: Any) -> str:
    """Register a chat model object and return its spec string (``instance:LABEL#DIGEST``). The
    same settings give the same spec; registering again replaces the object kept for it."""
    if not isinstance(model, BaseChatModel):
        raise TypeError(f"a model must be a spec string or a LangChain BaseChatModel, got {type(model).__name__}")
    spec = f"{PREFIX}{model_label(model)}#{settings_digest(model)}"
    with _LOCK:
        _REGISTRY[spec] = model
    return spec


def as_spec(value: Any) -> Any:
    """``value`` as a model spec: a chat model object registered (its spec string), anything
    else unchanged (checked later, as any spec)."""
    return register(value) if isinstance(value, BaseChatModel) else value


def describe(spec: str) -> dict[str, str]:
    """What config.json's environment record says about an object spec: its class and name
    (``{"missing": ...}`` when this process does not hold it)."""
    with _LOCK:
        model = _REGISTRY.get(spec)
    if model is None:
        return {"missing": "not registered in this process"}
    cls = type(model)
    return {"class": f"{cls.__module__}.{cls.__qualname__}", "name": model_label(model)}


#: the attribute naming the server of a provider's chat model objects: an object pointed at
#: another server than the provider's own API is a server of your own (the nominal price)
_URL_ATTR = {k: _URL_FIELD[k] for k in ("openai", "anthropic")}


def price_identity(spec: str) -> tuple[str | None, str, str | None]:
    """(provider, model name, server of your own or None) of a registered object, as the price
    table reads them: the provider from the class's integration package (None for another
    class), the name from :func:`model_label`, the server when it is not the provider's own API."""
    from cooplab.agents.providers import PROVIDERS, provider_of_model

    model = registered(spec)
    kind = provider_of_model(model)
    attr = _URL_ATTR.get(kind or "")
    url = getattr(model, attr, None) if attr else None
    own = (
        url.rstrip("/")
        if kind is not None and isinstance(url, str) and url.strip() and url.rstrip("/") != PROVIDERS[kind].default_url
        else None
    )
    return kind, model_label(model), own


def registered(spec: str) -> BaseChatModel:
    """The object registered under ``spec``; a spec this process does not hold is one line."""
    with _LOCK:
        model = _REGISTRY.get(spec)
    if model is None:
        name = spec[len(PREFIX) :].rpartition("#")[0] or spec
        raise ModelObjectMissing(
            f"{spec} was a chat model object ({name}) handed in from Python in another process; "
            "pass the object again, e.g. cooplab.resume(out, models=[obj])"
        )
    return model


# --- the answers of an object, checked where they enter cooplab ------------------------------------
class CheckedObject(BaseChatModel):
    """A chat model object handed in from Python (``inner``), whose every answer is checked as a
    server's is (``checked_completion``, ``checked_message``) before anything sees it (callbacks,
    traces, the cache, a checkpoint): the answer (text and tool calls) no longer than the call's
    ``max_tokens`` can hold (:func:`~cooplab.agents.usage.answer_bytes_bound`) and the whole
    message no longer than a response body of that many tokens
    (:func:`~cooplab.agents.usage.body_bytes_bound`), else a malformed response (retried, then the
    run stops with one line); every string with its lone surrogates replaced; the usage it reports
    kept as reported in ``response_metadata["usage_raw"]`` for the model service to validate, and
    as ``usage_metadata`` only when both counts are non-negative integers. ``max_tokens`` is the
    run's output cap, used when a call names none."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    inner: BaseChatModel
    max_tokens: int = 64
    cache: Any = False  # cooplab's own response cache serves every call

    def __repr__(self) -> str:  # never the object's fields: a class of one's own may hold a secret in plain text
        return f"CheckedObject({_path(self.inner)})"

    __str__ = __repr__

    @property
    def _llm_type(self) -> str:
        try:
            return str(self.inner._llm_type)
        except Exception:  # noqa: BLE001 - a class of its own
            return type(self.inner).__name__

    @property
    def _identifying_params(self) -> dict[str, Any]:
        try:
            return dict(self.inner._identifying_params)
        except Exception:  # noqa: BLE001
            return {}

    def _get_ls_params(self, stop: Any = None, **kwargs: Any) -> Any:
        return self.inner._get_ls_params(stop=stop, **kwargs)

    def get_name(self, suffix: str | None = None, *, name: str | None = None) -> str:
        return self.inner.get_name(suffix, name=name)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        """The object's own tool binding, made a binding of this checked model: what the object
        binds (its tools in its provider's format, a tool choice) is sent, and its answers checked."""
        from langchain_core.runnables import RunnableBinding

        bound = self.inner.bind_tools(tools, **kwargs)
        if not isinstance(bound, RunnableBinding) or bound.bound is not self.inner:
            raise TypeError(
                f"{_path(self.inner)}.bind_tools returned {type(bound).__name__}, not a binding of the model: "
                "cooplab calls tools only on models that bind them as LangChain's chat models do"
            )
        return RunnableBinding(bound=self, kwargs=dict(bound.kwargs), config=bound.config)

    def _cap(self, kwargs: dict[str, Any]) -> int:
        """The call's output cap in tokens: the one its options name (``max_tokens``,
        ``max_output_tokens``, Ollama's ``options.num_predict``), else :attr:`max_tokens`."""
        options = kwargs.get("options")
        options = options if isinstance(options, dict) else {}
        for n in (
            kwargs.get("max_tokens"),
            kwargs.get("max_output_tokens"),
            kwargs.get("max_completion_tokens"),
            options.get("num_predict"),
        ):
            if type(n) is int and n > 0:
                return n
        return max(int(self.max_tokens), 1)

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        if self.inner.rate_limiter:
            self.inner.rate_limiter.acquire(blocking=True)
        return checked_result(
            self.inner._generate(messages, stop=stop, run_manager=run_manager, **kwargs), self._cap(kwargs)
        )

    async def _agenerate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        if self.inner.rate_limiter:
            await self.inner.rate_limiter.aacquire(blocking=True)
        return checked_result(
            await self.inner._agenerate(messages, stop=stop, run_manager=run_manager, **kwargs), self._cap(kwargs)
        )


def _valid_counts(usage: Any) -> bool:
    return isinstance(usage, Mapping) and all(
        type(v) is int and v >= 0 for k, v in usage.items() if "tokens" in str(k) or "count" in str(k)
    )


def checked_result(result: Any, max_tokens: int) -> ChatResult:
    """A chat model object's result as it may enter cooplab (see :class:`CheckedObject`), or
    :class:`~cooplab.agents.models.errors.EndpointResponseError`."""
    from langchain_core.messages import AIMessage

    from cooplab.agents.models.errors import EndpointResponseError, snippet
    from cooplab.agents.models.openai_compat import attach_usage
    from cooplab.agents.providers import answer_size
    from cooplab.agents.usage import answer_bytes_bound, body_bytes_bound

    if not isinstance(result, ChatResult) or not result.generations:
        raise EndpointResponseError(f"the chat model object returned no answer: {snippet(result)}")
    generations = []
    for gen in result.generations:
        msg = getattr(gen, "message", None)
        if not isinstance(msg, AIMessage):
            raise EndpointResponseError(f"the answer is not a chat message: {snippet(msg)}")
        for c in msg.tool_calls:
            if not isinstance(c.get("name"), str) or not isinstance(c.get("args"), dict):
                raise EndpointResponseError(f"a tool call is not a named call with object arguments: {snippet(c)}")
        try:
            size, limit = answer_size(msg), answer_bytes_bound(max_tokens)
        except (TypeError, ValueError, RecursionError) as exc:
            raise EndpointResponseError(
                f"the answer's tool calls cannot be read as JSON ({type(exc).__name__})"
            ) from None
        if size > limit:
            raise EndpointResponseError(
                f"the answer has {size} bytes, more than {max_tokens} tokens can hold ({limit})"
            )
        whole, body = _size(msg, gen.generation_info, result.llm_output), body_bytes_bound(max_tokens)
        if whole > body:
            raise EndpointResponseError(
                f"the message has {whole} bytes, more than an answer of {max_tokens} tokens can need ({body})"
            )
        try:
            meta = clean_strings(dict(msg.response_metadata or {}))
            reported = (
                None if "usage_raw" in meta or meta.get("token_count_source") == "cooplab" else msg.usage_metadata
            )
            msg = msg.model_copy(
                update={
                    "content": clean_strings(msg.content),
                    "tool_calls": clean_strings(msg.tool_calls),
                    "invalid_tool_calls": clean_strings(msg.invalid_tool_calls),
                    "id": clean_strings(msg.id),
                    "name": clean_strings(msg.name),
                    "additional_kwargs": clean_strings(dict(msg.additional_kwargs or {})),
                    "response_metadata": meta,
                }
            )
            info = clean_strings(gen.generation_info) if gen.generation_info else gen.generation_info
        except RecursionError:
            raise EndpointResponseError("the answer is nested too deeply") from None
        if reported is not None:  # as reported, for the model service to validate (agents/usage.py)
            raw = (
                {k: reported.get(k) for k in ("input_tokens", "output_tokens")}
                if isinstance(reported, Mapping)
                else reported
            )
            attach_usage(msg, raw, "input_tokens", "output_tokens")
        generations.append(ChatGeneration(message=msg, generation_info=info))
    llm_output = result.llm_output
    if isinstance(llm_output, dict):
        llm_output = {
            k: v for k, v in clean_strings(llm_output).items() if k not in ("token_usage", "usage") or _valid_counts(v)
        }
    return ChatResult(generations=generations, llm_output=llm_output)


def _size(*parts: Any) -> int:
    """The UTF-8 bytes of an answer message (and what comes with it) as JSON."""
    from langchain_core.messages import AIMessage

    def plain(p: Any) -> Any:
        if isinstance(p, AIMessage):
            return [
                p.content,
                p.tool_calls,
                p.invalid_tool_calls,
                p.additional_kwargs,
                p.response_metadata,
                p.id,
                p.name,
            ]
        return p

    try:
        text = json.dumps([plain(p) for p in parts], ensure_ascii=False, default=lambda o: f"<{_path(o)}>")
    except (ValueError, RecursionError):  # a circular or absurdly deep value: not an answer
        from cooplab.agents.models.errors import EndpointResponseError

        raise EndpointResponseError("the answer cannot be read as JSON (circular or nested too deeply)") from None
    return len(text.encode("utf-8", "replace"))


def checked(model: BaseChatModel, max_tokens: int) -> BaseChatModel:
    """A registered object as cooplab calls it: wrapped in :class:`CheckedObject`, unless it is one
    of cooplab's own models, which check their answers themselves (a scripted model, the local model)."""
    from cooplab.agents.models.local import LlamaCppChat
    from cooplab.agents.models.scripted import ScriptedChatModel

    if isinstance(model, (ScriptedChatModel, LlamaCppChat, CheckedObject)):
        return model
    return CheckedObject(inner=model, max_tokens=max_tokens)


def unwrapped(model: Any) -> Any:
    """The object a :class:`CheckedObject` checks (what decides its provider and tool protocol), or ``model``."""
    return model.inner if isinstance(model, CheckedObject) else model
