"""Chat models behind cooplab's agents: ``local`` (SmolLM2-135M-Instruct via llama.cpp),
``local:PATH.gguf`` (any GGUF chat model file, the same llama.cpp build and child process),
``PROVIDER:NAME`` of a hosted provider (``openai:`` for OpenAI or any OpenAI-compatible server,
``anthropic:``, ``google_genai:``, ``ollama:``: the table in ``agents/providers.py``),
``scripted:FILE`` (fixed answers, for tests and demos), and a LangChain chat model object handed in
from Python (``instance:...``, see :mod:`cooplab.agents.instances`). All are LangChain chat models.

One module per concern, each importing only the ones above it in this list::

    errors.py          what can go wrong (retry, stop, one line), and how a server's text is quoted
    urls.py            one spelling of a server's URL; loopback or not
    openai_compat.py   an OpenAI-compatible chat completion checked where it enters; the checked ChatOpenAI
    scripted.py        scripted models (scripted:FILE, builtin:NAME) and the check of their files
    local.py           the local model's file, its identity, and LlamaCppChat (the model's process:
                       agents/local_model.py, agents/llama_worker.py)
    spec.py            ModelSpec: parsing --model, the model's identity in cache keys, API keys
    factory.py         make_chat_model and check_model, on top

Every model's answer carries its token counts: the endpoint's raw ``usage`` in
``response_metadata["usage_raw"]`` (OpenAI-compatible; scripted answers with ``usage``), or
``usage_metadata`` from the backend, or counted by cooplab
(:func:`~cooplab.agents.usage.count_tokens`). The model service validates them against the call's
bounds (``agents/usage.py``).

The names below are loaded from their modules on first use, so importing one module of this package
(``cooplab.agents.models.errors``) loads none of the others. Code inside cooplab imports each name from
the module that defines it (the layering test holds it to that).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the same names as _EXPORTS, for type checkers; at run time they load on first use
    # (`X as X`: a re-export)
    from .errors import CallTimedOut as CallTimedOut
    from .errors import EndpointResponseError as EndpointResponseError
    from .errors import MissingAPIKey as MissingAPIKey
    from .errors import ModelSpecError as ModelSpecError
    from .errors import PermanentModelError as PermanentModelError
    from .errors import TransientModelError as TransientModelError
    from .factory import check_model as check_model
    from .factory import make_chat_model as make_chat_model
    from .local import LlamaCppChat as LlamaCppChat
    from .scripted import ScriptedChatModel as ScriptedChatModel
    from .scripted import ScriptMissingPhase as ScriptMissingPhase
    from .scripted import register_builtin as register_builtin
    from .spec import ModelSpec as ModelSpec
    from .spec import parse_model_spec as parse_model_spec

#: public name -> the module of this package that defines it
_EXPORTS = {
    **dict.fromkeys(
        (
            "ModelSpecError",
            "MissingAPIKey",
            "TransientModelError",
            "PermanentModelError",
            "CallTimedOut",
            "EndpointResponseError",
        ),
        "errors",
    ),
    **dict.fromkeys(("ScriptedChatModel", "ScriptMissingPhase", "register_builtin"), "scripted"),
    **dict.fromkeys(("LlamaCppChat",), "local"),
    **dict.fromkeys(("ModelSpec", "parse_model_spec"), "spec"),
    **dict.fromkeys(("make_chat_model", "check_model"), "factory"),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
