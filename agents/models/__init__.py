"""Chat models behind cooplab's agents: ``local`` (SmolLM2-135M-Instruct via llama.cpp),
``local:PATH.gguf`` (any GGUF chat model file, the same llama.cpp build and child process),
``PROVIDER:NAME`` of a hosted provider (``openai:`` for OpenAI or any OpenAI-compatible server,
``anthropic:``, ``google_genai:``, ``ollama:``: the table in ``agents/providers.py``),
``scripted:FILE`` (fixed answers, for tests and demos), and a LangChain chat model object handed in
from Python (``instance:...``, see :mod:`cooplab.agents.instances`). All are LangChain chat models.

Every model's answer carries its token counts: the endpoint's raw ``usage`` in
``response_metadata["usage_raw"]`` (OpenAI-compatible; scripted answers with ``usage``), or
``usage_metadata`` from the backend, or counted here (:func:`count_tokens`). The model service
validates them against the call's bounds (``agents/usage.py``).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from langchain_core.callbacks import (
    AsyncCallbackManagerForLLMRun,
    CallbackManagerForLLMRun,
)
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict, Field, PrivateAttr

from cooplab.agents.models.errors import (  # noqa: F401 - re-exported until the package is split
    DEFAULT_CALL_DEADLINE,
    CallTimedOut,
    EndpointResponseError,
    MissingAPIKey,
    ModelSpecError,
    PermanentModelError,
    TransientModelError,
    one_line,
)
from cooplab.agents.models.openai_compat import attach_usage, checked_completion, output_cap, parse_body  # noqa: F401
from cooplab.agents.models.local import (  # noqa: F401
    HASH_NOTE_BYTES,
    LlamaCppChat,
    gguf_file,
    gguf_identity,
    gguf_sha256,
    local_model_path,
)
from cooplab.agents.models.scripted import (  # noqa: F401
    BUILTIN_MODELS,
    ScriptedChatModel,
    ScriptMissingPhase,
    check_scripted_file,
    register_builtin,
    scripted_identity,
)
from cooplab.agents.models.urls import normalise_url
from cooplab.agents.usage import count_tokens, messages_tokens  # noqa: F401
from cooplab.limits import ConfigError, Num, clean_strings, parse_json, show

# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelSpec:
    kind: str  # local | openai | scripted
    name: str
    base_url: str | None = None
    temperature: float = 0.7
    max_tokens: int = 64
    params: tuple = field(default_factory=tuple)
    #: the GGUF file of a ``local:PATH`` model (None: the shipped SmolLM2)
    path: str | None = None

    @property
    def id(self) -> str:
        return f"{self.kind}:{self.name}"

    def identity(self) -> dict[str, Any]:
        """What identifies this model's answers in a cache key: the provider and the model's name
        (:attr:`id`), the server that answers (:meth:`endpoint`, named when it is not the
        provider's default, so keys made before it was part of the identity stay valid for the
        local model, scripted models and OpenAI itself), the sampling settings."""
        ident = {"model": self.id, "temperature": self.temperature, "max_tokens": self.max_tokens, **dict(self.params)}
        if self.path is not None:
            ident.update(gguf_identity(self.path))
        if self.kind == "scripted":  # named by its content, never by where the file lies (a key is the same in every checkout)
            ident.update(scripted_identity(self.name))
        endpoint = self.endpoint()
        if endpoint is not None:
            ident["endpoint"] = endpoint
        return ident

    def endpoint(self) -> str | None:
        """The normalised URL (:func:`normalise_url`) of the server a hosted provider's model calls
        (:data:`~cooplab.agents.providers.PROVIDERS`): ``base_url``, else the provider's own variable
        (``$OPENAI_API_BASE`` or ``$OPENAI_BASE_URL``, ``$ANTHROPIC_BASE_URL``, ``$OLLAMA_HOST``);
        None for the provider's default server and for models that run in cooplab (local, scripted)."""
        from cooplab.agents.providers import provider

        p = provider(self.kind)
        url = p.url(self.base_url) if p is not None else None
        if not url:
            return None
        url = normalise_url(url)
        return None if url == p.default_url else url


def parse_model_spec(text: str, *, base_url: str | None = None, temperature: float = 0.7, max_tokens: int = 64) -> ModelSpec:
    text = (text or "").strip()
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a file name in another encoding: one line now, not a failed run later
        shown = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace") if isinstance(text, str) else text
        raise ModelSpecError(f"the model spec '{shown}' is not UTF-8 text (a file name in another encoding?); "
                             "rename the file so that its name is UTF-8") from None
    if text.startswith("builtin:"):
        name, _, arg = text[8:].partition(":")
        if name not in BUILTIN_MODELS:
            known = ", ".join(sorted(BUILTIN_MODELS)) or "none registered"
            raise ModelSpecError(f"unknown built-in model {name!r} ({known})")
        return ModelSpec("builtin", text[8:], None, temperature, max_tokens)
    if text == "local":
        return ModelSpec("local", local_model_path().name, None, temperature, max_tokens)
    if text.startswith("local:"):
        path = gguf_file(text[6:])
        return ModelSpec("local", path.name, None, temperature, max_tokens, path=str(path))
    if text.startswith("instance:"):
        from cooplab.agents.instances import registered

        registered(text)  # a chat model object registered in this process, else one line
        return ModelSpec("instance", text[9:], None, temperature, max_tokens)
    if text.startswith("scripted:") and len(text) > 9:
        path = Path(text[9:])
        if not path.is_file():
            raise ModelSpecError(f"scripted model file {path} not found")
        return ModelSpec("scripted", str(path), None, temperature, max_tokens)
    return _provider_spec(text, base_url, temperature, max_tokens)


def _provider_spec(text: str, base_url: str | None, temperature: float, max_tokens: int) -> ModelSpec:
    """``PROVIDER:MODEL`` of a hosted provider (:data:`~cooplab.agents.providers.PROVIDERS`), or one
    line listing the specs there are."""
    from cooplab.agents.providers import PROVIDERS, known_prefixes

    kind, sep, name = text.partition(":")
    if sep and kind in PROVIDERS:
        if not name.strip():
            raise ModelSpecError(f"{text!r} names no model; use {kind}:NAME")
        return ModelSpec(kind, name.strip(), base_url, temperature, max_tokens)
    what = f"unknown model provider {kind!r} in {text!r}" if sep and re.fullmatch(r"[a-z][a-z0-9_\-]*", kind) else f"unknown model {text!r}"
    raise ModelSpecError(f"{what}; use local, {known_prefixes()} (--base-url for another server), scripted:FILE or builtin:NAME")


def missing_key(spec: ModelSpec) -> str | None:
    """Why ``spec`` cannot be called for want of an API key (one line), or None. A hosted provider's
    model (:data:`~cooplab.agents.providers.PROVIDERS`) that has a key variable needs one of them
    set (not blank), unless it is served from a ``base_url`` of your own (a local or self-hosted
    server needs no key)."""
    from cooplab.agents.providers import provider

    p = provider(spec.kind)
    if p is None or not p.keys or spec.base_url is not None or p.key() is not None:
        return None
    return f"{spec.id} needs {' or '.join(p.keys)} in the environment (or --base-url for a server of your own that needs none)"


def require_provider(spec: ModelSpec) -> None:
    """A hosted provider's integration package installed (else one line naming the extra) and its
    API key in the environment (else :class:`MissingAPIKey`)."""
    from cooplab.agents.providers import provider
    from cooplab.extras import require

    p = provider(spec.kind)
    if p is not None and p.extra is not None:
        require(p.extra, spec.id, p.modules)
    reason = missing_key(spec)
    if reason is not None:
        raise MissingAPIKey(reason)


def make_chat_model(spec: ModelSpec, **kw: Any) -> BaseChatModel:
    if spec.kind == "instance":
        from cooplab.agents.instances import checked, registered

        return checked(registered(spec.id), spec.max_tokens)  # its answers checked like a server's
    if spec.kind == "builtin":
        name, _, arg = spec.name.partition(":")
        return BUILTIN_MODELS[name](arg)
    if spec.kind == "scripted":
        return ScriptedChatModel.from_file(spec.name, **kw)
    if spec.kind == "local":
        from cooplab.extras import require

        require("local", "the local model")
        path = spec.path or str(local_model_path())
        return LlamaCppChat(model_path=path, temperature=spec.temperature, max_tokens=spec.max_tokens, **kw)
    from cooplab.agents.providers import provider

    p = provider(spec.kind)
    if p is None:
        raise ModelSpecError(f"unknown model kind {spec.kind!r}")
    try:
        require_provider(spec)
    except ConfigError as exc:
        raise ModelSpecError(str(exc)) from None
    return p.build(spec, **kw)


def check_model(text: Any, base_url: Any = None, name: str = "--model", *, phases: Any = ()) -> None:
    """A model spec that parses, for ``scripted:FILE`` a file that loads and answers ``phases``, and
    for a hosted provider's model its API key in the environment (:func:`missing_key`)."""
    if not isinstance(text, str):
        raise ConfigError(f"{name} must be a model spec string (local, local:PATH.gguf, PROVIDER:NAME, scripted:FILE), got {show(text)}")
    if base_url is not None and not isinstance(base_url, str):
        raise ConfigError(f"base_url must be a URL string or null, got {show(base_url)}")
    try:
        spec = parse_model_spec(text, base_url=base_url)
    except ModelSpecError as exc:
        raise ConfigError(str(exc)) from None
    if spec.kind == "scripted":
        check_scripted_file(spec.name, phases)
    elif spec.kind == "local":
        from cooplab.extras import require

        require("local", "the local model")
    try:
        require_provider(spec)
    except ConfigError as exc:  # MissingAPIKey, MissingExtra: the environment's, kept apart from the spec's
        raise type(exc)(f"{name}: {exc}") from None
