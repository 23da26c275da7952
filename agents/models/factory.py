"""The factory on top of the model modules: :func:`make_chat_model` builds the LangChain chat model
of a :class:`~cooplab.agents.models.spec.ModelSpec`, and :func:`check_model` checks a ``--model``
value the way building it would fail, before any work (one line, exit 2 on the command line)."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel

from cooplab.agents.instances import checked, registered
from cooplab.agents.models.errors import ModelSpecError
from cooplab.agents.models.local import LlamaCppChat, local_model_path
from cooplab.agents.models.scripted import BUILTIN_MODELS, ScriptedChatModel, check_scripted_file
from cooplab.agents.models.spec import ModelSpec, parse_model_spec, require_provider
from cooplab.agents.providers import provider
from cooplab.extras import require
from cooplab.limits import ConfigError, show


def make_chat_model(spec: ModelSpec, **kw: Any) -> BaseChatModel:
    """The LangChain chat model of ``spec``; ``kw`` goes to its constructor (e.g. ``timeout``). A
    hosted provider's model without its integration or API key is a one-line
    :class:`~cooplab.agents.models.errors.ModelSpecError`."""
    if spec.kind == "instance":
        return checked(registered(spec.id), spec.max_tokens)  # its answers checked like a server's
    if spec.kind == "builtin":
        name, _, arg = spec.name.partition(":")
        return BUILTIN_MODELS[name](arg)
    if spec.kind == "scripted":
        return ScriptedChatModel.from_file(spec.name, **kw)
    if spec.kind == "local":
        require("local", "the local model")
        path = spec.path or str(local_model_path())
        return LlamaCppChat(model_path=path, temperature=spec.temperature, max_tokens=spec.max_tokens, **kw)
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
    for a hosted provider's model its API key in the environment (:func:`~cooplab.agents.models.spec.missing_key`)."""
    if not isinstance(text, str):
        raise ConfigError(
            f"{name} must be a model spec string (local, local:PATH.gguf, PROVIDER:NAME, scripted:FILE), got "
            f"{show(text)}"
        )
    if base_url is not None and not isinstance(base_url, str):
        raise ConfigError(f"base_url must be a URL string or null, got {show(base_url)}")
    try:
        spec = parse_model_spec(text, base_url=base_url)
    except ModelSpecError as exc:
        raise ConfigError(str(exc)) from None
    if spec.kind == "scripted":
        check_scripted_file(spec.name, phases)
    elif spec.kind == "local":
        require("local", "the local model")
    try:
        require_provider(spec)
    except ConfigError as exc:  # MissingAPIKey, MissingExtra: the environment's, kept apart from the spec's
        raise type(exc)(f"{name}: {exc}") from None
