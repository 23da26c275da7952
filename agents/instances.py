"""LangChain chat model objects handed in from Python, wherever a model spec string goes.

A notebook user who has already configured a chat model (``ChatAnthropic(model=..., ...)``, a
``ChatOpenAI`` pointed at a proxy, a model class of their own) passes the object itself::

    cooplab.run(task="cpr", agents="llm", model=ChatOpenAI(model="gpt-4o-mini", base_url=...), out="runs/a")

The object is registered in this process under a spec string, ``instance:LABEL#DIGEST``, which is
what config.json records (a run directory holds text, not objects):

* ``LABEL`` is the model's name as the object states it (its ``model_name`` or ``model``
  attribute, else the class name): the name the ledger prices it by and traces show;
* ``DIGEST`` is the first 12 hex digits of the SHA-256 of the class's import path and LangChain's
  own description of the object's settings (``_get_llm_string``, the text LangChain's caches key
  on; API keys appear in it masked). Two objects with the same class and settings share a digest,
  so their answers share cache entries; changing any setting (temperature, endpoint, model)
  changes it.

A run made with an object is resumed in another process by handing the object in again:
``cooplab.resume(out, models=[obj])``. Without it the spec names a model this process does not
have, which is one line (exit 2 on the command line) before any work.
"""

from __future__ import annotations

import hashlib
import re
import threading
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel

from cooplab.limits import ConfigError

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


def settings_digest(model: BaseChatModel) -> str:
    """12 hex digits naming the object's class and settings (see the module's docstring)."""
    cls = type(model)
    try:
        described = model._get_llm_string()
    except Exception:  # noqa: BLE001 - a third-party class whose settings do not serialize
        described = repr(sorted((k, repr(v)) for k, v in vars(model).items() if not k.startswith("_")))
    text = f"{cls.__module__}.{cls.__qualname__}\n{described}"
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:12]


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
_URL_ATTR = {"openai": "openai_api_base", "anthropic": "anthropic_api_url"}


def price_identity(spec: str) -> tuple[str | None, str, str | None]:
    """(provider, model name, server of your own or None) of a registered object, as the price
    table reads them: the provider from the class's integration package (None for another
    class), the name from :func:`model_label`, the server when it is not the provider's own API."""
    from cooplab.agents.providers import PROVIDERS, provider_of_model

    model = registered(spec)
    kind = provider_of_model(model)
    attr = _URL_ATTR.get(kind or "")
    url = getattr(model, attr, None) if attr else None
    own = url.rstrip("/") if isinstance(url, str) and url.strip() and url.rstrip("/") != PROVIDERS[kind].default_url else None
    return kind, model_label(model), own


def registered(spec: str) -> BaseChatModel:
    """The object registered under ``spec``; a spec this process does not hold is one line."""
    with _LOCK:
        model = _REGISTRY.get(spec)
    if model is None:
        name = spec[len(PREFIX):].rpartition("#")[0] or spec
        raise ModelObjectMissing(f"{spec} was a chat model object ({name}) handed in from Python in another process; "
                             "pass the object again, e.g. cooplab.resume(out, models=[obj])")
    return model
