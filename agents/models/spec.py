"""Model specs: the text of ``--model`` (``local``, ``local:PATH.gguf``, ``PROVIDER:NAME``,
``scripted:FILE``, ``builtin:NAME[:ARG]``, ``instance:LABEL#DIGEST``) parsed into a
:class:`ModelSpec`, which names the model (:attr:`ModelSpec.id`), the server that answers
(:meth:`ModelSpec.endpoint`) and everything that identifies its answers in a cache key
(:meth:`ModelSpec.identity`); and whether a hosted provider's model can be called here
(:func:`require_provider`: its integration installed, its API key set)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cooplab.agents.models.errors import MissingAPIKey, ModelSpecError
from cooplab.agents.models.local import gguf_file, gguf_identity, local_model_path
from cooplab.agents.models.scripted import BUILTIN_MODELS, scripted_identity
from cooplab.agents.models.urls import normalise_url
from cooplab.agents.providers import PROVIDERS, known_prefixes, provider


@dataclass(frozen=True)
class ModelSpec:
    kind: str  # local | scripted | builtin | instance | a provider's prefix (openai, anthropic, ...)
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
        if (
            self.kind == "scripted"
        ):  # named by its content, never by where the file lies (a key is the same in every checkout)
            ident.update(scripted_identity(self.name))
        endpoint = self.endpoint()
        if endpoint is not None:
            ident["endpoint"] = endpoint
        return ident

    def endpoint(self) -> str | None:
        """The normalised URL (:func:`~cooplab.agents.models.urls.normalise_url`) of the server a
        hosted provider's model calls (:data:`~cooplab.agents.providers.PROVIDERS`): ``base_url``,
        else the provider's own variable (``$OPENAI_API_BASE`` or ``$OPENAI_BASE_URL``,
        ``$ANTHROPIC_BASE_URL``, ``$OLLAMA_HOST``); None for the provider's default server and for
        models that run in cooplab (local, scripted)."""
        p = provider(self.kind)
        url = p.url(self.base_url) if p is not None else None
        if p is None or not url:
            return None
        url = normalise_url(url)
        return None if url == p.default_url else url


def parse_model_spec(
    text: str, *, base_url: str | None = None, temperature: float = 0.7, max_tokens: int = 64
) -> ModelSpec:
    """The :class:`ModelSpec` of a ``--model`` value, or :class:`~cooplab.agents.models.errors.ModelSpecError`
    (one line: what is wrong and which specs there are)."""
    text = (text or "").strip()
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a file name in another encoding: one line now, not a failed run later
        shown = (
            text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            if isinstance(text, str)
            else text
        )
        raise ModelSpecError(
            f"the model spec '{shown}' is not UTF-8 text (a file name in another encoding?); "
            "rename the file so that its name is UTF-8"
        ) from None
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
    kind, sep, name = text.partition(":")
    if sep and kind in PROVIDERS:
        if not name.strip():
            raise ModelSpecError(f"{text!r} names no model; use {kind}:NAME")
        return ModelSpec(kind, name.strip(), base_url, temperature, max_tokens)
    what = (
        f"unknown model provider {kind!r} in {text!r}"
        if sep and re.fullmatch(r"[a-z][a-z0-9_\-]*", kind)
        else f"unknown model {text!r}"
    )
    raise ModelSpecError(
        f"{what}; use local, {known_prefixes()} (--base-url for another server), scripted:FILE or builtin:NAME"
    )


def missing_key(spec: ModelSpec) -> str | None:
    """Why ``spec`` cannot be called for want of an API key (one line), or None. A hosted provider's
    model (:data:`~cooplab.agents.providers.PROVIDERS`) that has a key variable needs one of them
    set (not blank), unless it is served from a ``base_url`` of your own (a local or self-hosted
    server needs no key)."""
    p = provider(spec.kind)
    if p is None or not p.keys or spec.base_url is not None or p.key() is not None:
        return None
    return (
        f"{spec.id} needs {' or '.join(p.keys)} in the environment (or --base-url for a server of your own that "
        "needs none)"
    )


def require_provider(spec: ModelSpec) -> None:
    """A hosted provider's integration package installed (else one line naming the extra) and its
    API key in the environment (else :class:`~cooplab.agents.models.errors.MissingAPIKey`)."""
    from cooplab.extras import require

    p = provider(spec.kind)
    if p is not None and p.extra is not None:
        require(p.extra, spec.id, p.modules)
    reason = missing_key(spec)
    if reason is not None:
        raise MissingAPIKey(reason)
