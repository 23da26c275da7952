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

from cooplab.limits import DEFAULT_CALL_DEADLINE, ConfigError, Num, clean_strings, clean_text, parse_json, show  # noqa: F401 - DEFAULT_CALL_DEADLINE: re-exported


class ModelSpecError(ValueError):
    """A bad ``--model`` value (user-facing, one line)."""


class TransientModelError(RuntimeError):
    """A transport failure worth retrying: timeout, refused connection, 429, 5xx."""

    def __init__(self, kind: str, message: str = ""):
        super().__init__(f"{kind}: {message}" if message else kind)
        self.kind = kind


class PermanentModelError(RuntimeError):
    """The model refused the request or cannot serve at all, and would refuse again (a request its
    grammar compiler rejects, a model file that does not load): no retry, the run stops cleanly."""




class CallTimedOut(TransientModelError):
    """No complete answer within the call timeout (``--call-timeout``): retried like a transport
    failure, then the run stops cleanly."""

    def __init__(self, seconds: float):
        super().__init__("timeout", f"no complete answer within {seconds:g} s")
        self.seconds = seconds


class EndpointResponseError(TransientModelError):
    """The endpoint answered, but not with a chat completion (a body that is not JSON, no
    ``choices``, a null message, content that is not text, ...): retried like a transport
    failure, then the run stops cleanly."""

    def __init__(self, message: str):
        super().__init__("malformed response", message)


_TOKEN_RE = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def count_tokens(text: str) -> int:
    """Our own token count where a backend reports none: words and punctuation marks
    (a documented approximation; real BPE counts are typically 1.0-1.4x this)."""
    return len(_TOKEN_RE.findall(text or ""))


def messages_tokens(messages: list[BaseMessage]) -> int:
    return sum(count_tokens(str(m.content)) + 4 for m in messages)


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


#: OpenAI's own API, the endpoint of ``openai:NAME`` without a base URL
OPENAI_API = "https://api.openai.com/v1"


def normalise_url(url: str) -> str:
    """One spelling of a server's URL: scheme and host in lower case, no user name or password, no
    default port (80, 443), no trailing ``/``, no fragment. ``http://LocalHost:80/v1/`` and
    ``http://localhost/v1`` are one server; ``localhost`` and ``127.0.0.1`` are two spellings
    cooplab does not resolve, so two servers."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url.strip())
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    try:
        port = parts.port
    except ValueError:  # not a port number: the connection will fail; the text stays as given
        return url.strip()
    host = f"[{host}]" if ":" in host else host
    netloc = host if port is None or port == {"http": 80, "https": 443}.get(scheme) else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path.rstrip("/"), parts.query, ""))


#: built-in scripted models, ``builtin:NAME[:ARG]`` -> ``factory(ARG)`` (a ScriptedChatModel); tasks
#: register theirs on import (e.g. the science task's oracle and garbage teams)
BUILTIN_MODELS: dict[str, Callable[[str], "ScriptedChatModel"]] = {}


def register_builtin(name: str, factory: Callable[[str], "ScriptedChatModel"]) -> None:
    """Make ``builtin:NAME:ARG`` a model spec: ``factory(ARG)`` builds the model."""
    if not re.fullmatch(r"[a-z][a-z0-9\-]*", name):
        raise ValueError(f"a built-in model name is lowercase letters, digits and '-', got {name!r}")
    BUILTIN_MODELS[name] = factory


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
        from .instances import registered

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


def gguf_file(text: str) -> Path:
    """The model file of ``local:PATH``: an existing regular file that starts with GGUF's magic
    bytes, as an absolute path (``~`` expanded). Anything else is one line saying what it is."""
    if not text.strip():
        raise ModelSpecError("local:PATH needs the path of a GGUF model file, e.g. local:~/models/qwen2.5-0.5b-instruct-q4_k_m.gguf")
    path = Path(text).expanduser()
    try:
        path = path.resolve(strict=True)
        if not path.is_file():
            raise ModelSpecError(f"local model {text}: not a file (give the path of a .gguf file)")
        with open(path, "rb") as fh:
            magic = fh.read(4)
    except FileNotFoundError:
        raise ModelSpecError(f"local model file {text} not found") from None
    except OSError as exc:
        raise ModelSpecError(f"cannot read local model file {text}: {exc.strerror or exc}") from None
    if magic != b"GGUF":
        raise ModelSpecError(f"local model file {text} is not a GGUF file (llama.cpp reads GGUF; convert the model with "
                             "llama.cpp's convert_hf_to_gguf.py)")
    return path


_GGUF_SHA256: dict[tuple[str, int, int], str] = {}
_GGUF_LOCK = threading.Lock()
#: a model file at least this big is announced on stderr before it is hashed (reading a few GB takes
#: seconds; a 200 GB file, minutes)
HASH_NOTE_BYTES = 1 << 30


def gguf_sha256(path: str) -> str:
    """A model file's SHA-256, hashed once per process for each (file, size, modification time). A
    file of :data:`HASH_NOTE_BYTES` or more gets one line on stderr first, saying what is read and why."""
    st = os.stat(path)
    key = (path, st.st_size, st.st_mtime_ns)
    with _GGUF_LOCK:
        if key not in _GGUF_SHA256:
            from cooplab.limits import sha256_file

            if st.st_size >= HASH_NOTE_BYTES:
                import sys

                size = f"{st.st_size / 1e9:.1f} GB" if st.st_size >= 10**8 else f"{st.st_size / 1e6:.1f} MB"
                print(f"cooplab: reading all {size} of {path} once to hash it (a local: model's answers are "
                      "cached under its content's SHA-256); this can take minutes", file=sys.stderr, flush=True)
            _GGUF_SHA256[key] = sha256_file(path)
        return _GGUF_SHA256[key]


def gguf_identity(path: str) -> dict[str, str]:
    """What identifies a GGUF file's answers in a cache key: its content, not its name or place.
    The shipped SmolLM2 under another name or folder is the shipped model (the ``local`` key, so
    its cached answers replay); any other file is named by its SHA-256."""
    from cooplab.agents.model_files import MODELS

    digest = gguf_sha256(path)
    shipped = next((f for f in MODELS["smollm2"].files if f.sha256 == digest), None)
    return {"model": f"local:{shipped.name}"} if shipped is not None else {"model": f"local:{Path(path).name}", "sha256": digest}


_SCRIPT_SHA256: dict[tuple[str, int, int, int], str] = {}


def scripted_identity(path: str) -> dict[str, str]:
    """What identifies a scripted model file's answers in a cache key and call id: its content (the
    SHA-256 of its bytes), not its name or folder, so the same file in two checkouts, or copied
    elsewhere, gives the same keys (``config.json`` still records the path it was given). Hashed
    once per process for each (file, size, modification time); a file that cannot be read is named
    by its path (the run then stops where the model is made, with one line)."""
    try:
        st = os.stat(path)
    except OSError:
        return {"model": f"scripted:{path}"}
    key = (os.path.abspath(path), st.st_ino, st.st_size, st.st_mtime_ns)
    with _GGUF_LOCK:
        digest = _SCRIPT_SHA256.get(key)
    if digest is None:
        from cooplab.limits import sha256_file

        try:
            digest = sha256_file(path)
        except OSError:
            return {"model": f"scripted:{path}"}
        with _GGUF_LOCK:
            _SCRIPT_SHA256[key] = digest
    return {"model": "scripted", "sha256": digest}


def local_model_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF: the pinned file of :mod:`cooplab.agents.model_files` (``smollm2``),
    checked against its SHA-256. Needs the local extra (llama-cpp-python, which loads it in the
    model's own process, see ``cooplab.agents.local_model``) and the fetched file: either missing is
    one line saying what to install or run."""
    from cooplab.extras import require
    from cooplab.agents.model_files import verified_path

    require("local", "the local model")
    return verified_path("smollm2", "the local model")


class MissingAPIKey(ConfigError):
    """A hosted provider's model without its API key in the environment (one line; checked before
    any work, so nothing is created)."""


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
        from .instances import checked, registered

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


def _is_loopback(url: str | None) -> bool:
    """Loopback servers are reached directly, never through an HTTP proxy from the environment."""
    if not url:
        return False
    from urllib.parse import urlparse

    host = (urlparse(url).hostname or "").lower()
    return host in ("localhost", "::1") or host.startswith("127.")


_CHECKED_CHAT_OPENAI: Any = None


def _checked_chat_openai() -> type:
    """``ChatOpenAI`` that reads the endpoint's response body itself: a body that is not a chat
    completion raises :class:`EndpointResponseError` (never an AttributeError or a pydantic error
    from deep inside), and the reported ``usage``, exactly as received (the SDK would coerce a
    ``true`` or ``"100"`` into an int), goes to ``response_metadata["usage_raw"]`` for the model
    service to validate against the call's bounds (``agents/usage.py``); it becomes
    ``usage_metadata`` (for traces) only when its counts are non-negative integers. Only the
    plain chat-completions call is made (no ``parse``, no Responses API, no streaming)."""
    global _CHECKED_CHAT_OPENAI
    if _CHECKED_CHAT_OPENAI is not None:
        return _CHECKED_CHAT_OPENAI
    from langchain_openai import ChatOpenAI

    class CheckedChatOpenAI(ChatOpenAI):
        def _generate(self, messages, stop=None, run_manager=None, **kwargs: Any) -> ChatResult:
            payload = self._get_request_payload(messages, stop=stop, **kwargs)
            payload.pop("stream", None)
            raw = self.client.with_raw_response.create(**payload)  # HTTP errors raise openai.APIStatusError
            return self._checked_result(raw.http_response.content, _output_cap(payload))

        async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs: Any) -> ChatResult:
            payload = self._get_request_payload(messages, stop=stop, **kwargs)
            payload.pop("stream", None)
            raw = await self.async_client.with_raw_response.create(**payload)
            return await asyncio.to_thread(self._checked_result, raw.http_response.content, _output_cap(payload))

        def _checked_result(self, body: bytes, max_tokens: int | None = None) -> ChatResult:
            checked, usage = checked_completion(parse_body(body), max_tokens=max_tokens)
            result = super()._create_chat_result(checked, {})
            attach_usage(result.generations[0].message, usage, "prompt_tokens", "completion_tokens")
            return result

    _CHECKED_CHAT_OPENAI = CheckedChatOpenAI
    return CheckedChatOpenAI


def attach_usage(msg: BaseMessage, usage: Any, input_key: str, output_key: str) -> BaseMessage:
    """Keep an endpoint's reported usage exactly as received in ``response_metadata["usage_raw"]``
    (the model service checks it against the call's bounds, ``agents/usage.py``), and make it
    ``usage_metadata`` (for traces) only when both counts are non-negative integers."""
    msg.response_metadata = {**(msg.response_metadata or {}), "usage_raw": usage}
    msg.usage_metadata = None
    if isinstance(usage, dict):
        i, o = usage.get(input_key), usage.get(output_key)
        if all(type(v) is int and v >= 0 for v in (i, o)):
            msg.usage_metadata = {"input_tokens": i, "output_tokens": o, "total_tokens": i + o}
    return msg


def one_line(value: Any, limit: int = 240) -> str:
    """``value`` as text on one line (whitespace collapsed, lone surrogates replaced), cut to ``limit`` characters."""
    text = value.decode("utf-8", "replace") if isinstance(value, (bytes, bytearray)) else clean_text(str(value))
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _snippet(value: Any, limit: int = 80) -> str:
    return repr(one_line(value, limit))


_JSON_TYPES = {str: "string", list: "array", dict: "object", type(None): "null", int: "number", float: "number", bool: "boolean"}


def _raw(value: Any) -> Any:
    """The JSON values behind the OpenAI SDK's models, as received: the SDK builds them without
    validation, and ``model_dump`` would coerce a reported ``true`` or ``"100"`` into an int."""
    from pydantic import BaseModel

    if isinstance(value, BaseModel):
        value = {**value.__dict__, **(value.__pydantic_extra__ or {})}
    if isinstance(value, dict):
        return {k: _raw(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_raw(v) for v in value]
    return value


def parse_body(body: bytes) -> Any:
    """The JSON of a response body, or :class:`EndpointResponseError` (empty, not JSON, not UTF-8)."""
    if not body.strip():
        raise EndpointResponseError("the body is empty")
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise EndpointResponseError(f"the body is not JSON ({type(exc).__name__}: {exc}): {_snippet(body)}") from None


def _output_cap(payload: dict[str, Any]) -> int | None:
    """The output cap in tokens a chat-completions request names, if any."""
    n = payload.get("max_completion_tokens") or payload.get("max_tokens")
    return n if type(n) is int and n > 0 else None


def checked_completion(response: Any, *, max_tokens: int | None = None) -> tuple[dict[str, Any], Any]:
    """(a minimal, well-formed chat completion dict, the raw ``usage`` or None) from an
    endpoint's 200 response (its body, its parsed JSON, or an SDK object), or
    :class:`EndpointResponseError` when it is not a chat completion.

    This is the edge where a server's strings enter cooplab: every one of them (the answer, ids,
    the model's name, tool names and arguments, usage, an error's text) leaves here with its lone
    surrogates replaced (:func:`~cooplab.limits.clean_text`), so no writer downstream meets one.
    With ``max_tokens``, an answer (text and tool calls) longer than that many tokens can hold
    (:func:`~cooplab.agents.usage.answer_bytes_bound`) is malformed too: it is never stored."""
    if isinstance(response, (bytes, bytearray)):
        response = parse_body(bytes(response))
    try:
        response = clean_strings(_raw(response))
    except RecursionError:
        raise EndpointResponseError("the body is nested too deeply") from None
    if not isinstance(response, dict):
        raise EndpointResponseError(f"the body is a JSON {_JSON_TYPES.get(type(response), type(response).__name__)}, not an object")
    if response.get("error"):
        raise EndpointResponseError(f"the body holds an error: {_snippet(response.get('error'))}")
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices:
        raise EndpointResponseError("no choices" if not choices else f"choices is not a list: {_snippet(choices)}")
    first = choices[0]
    message = first.get("message") if isinstance(first, dict) else None
    if not isinstance(message, dict):
        raise EndpointResponseError(f"choices[0].message is {_snippet(message) if message is not None else 'missing'}")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise EndpointResponseError(f"choices[0].message.content is a JSON {_JSON_TYPES.get(type(content), 'value')}, not text")
    checked: dict[str, Any] = {k: v for k, v in response.items() if k in ("id", "model", "system_fingerprint") and isinstance(v, str)}
    finish = first.get("finish_reason")
    out_message: dict[str, Any] = {"role": "assistant", "content": content or ""}
    tool_calls = _checked_tool_calls(message.get("tool_calls"))
    if tool_calls:
        out_message["tool_calls"] = tool_calls
    checked["choices"] = [{"index": 0, "message": out_message, "finish_reason": finish if isinstance(finish, str) else None}]
    if max_tokens is not None:
        _check_answer_size(out_message, max_tokens)
    return checked, response.get("usage")


def _check_answer_size(message: dict[str, Any], max_tokens: int) -> None:
    from .usage import answer_bytes_bound

    limit = answer_bytes_bound(max_tokens)
    parts = [message["content"]] + [v for c in message.get("tool_calls", []) for v in (c["id"], c["function"]["name"], c["function"]["arguments"])]
    size = sum(len(p.encode("utf-8", "replace")) for p in parts)
    if size > limit:
        raise EndpointResponseError(f"the answer has {size} bytes, more than {max_tokens} tokens can hold ({limit})")


def _checked_tool_calls(calls: Any) -> list[dict[str, Any]]:
    """The tool calls of a chat completion's message, reduced to the fields LangChain reads
    (``id``, ``type``, ``function.name``, ``function.arguments``), or
    :class:`EndpointResponseError` when they are not tool calls. Arguments stay text: arguments
    that are not JSON become LangChain ``invalid_tool_calls``, answered to the model as errors."""
    if calls is None or calls == []:
        return []
    if not isinstance(calls, list):
        raise EndpointResponseError(f"choices[0].message.tool_calls is not a list: {_snippet(calls)}")
    out = []
    for i, c in enumerate(calls):
        fn = c.get("function") if isinstance(c, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not isinstance(c.get("id"), str):
            raise EndpointResponseError(f"choices[0].message.tool_calls[{i}] is not a function call: {_snippet(c)}")
        args = fn.get("arguments")
        if args is None:
            args = "{}"
        if not isinstance(args, str):
            raise EndpointResponseError(f"choices[0].message.tool_calls[{i}].function.arguments is not text: {_snippet(args)}")
        out.append({"id": c["id"], "type": "function", "function": {"name": fn["name"], "arguments": _clean_arguments(args, i)}})
    return out


def _clean_arguments(args: str, i: int) -> str:
    """Tool-call arguments whose JSON spells a lone surrogate (``"\\ud800"``) re-encoded with
    U+FFFD in its place; other arguments, and text that is not JSON, unchanged."""
    try:
        value = json.loads(args)
    except ValueError:
        return args
    except RecursionError:
        raise EndpointResponseError(f"choices[0].message.tool_calls[{i}].function.arguments is nested too deeply") from None
    cleaned = clean_strings(value)
    return args if cleaned == value else json.dumps(cleaned, ensure_ascii=False)


def with_usage(msg: AIMessage, messages: list[BaseMessage]) -> AIMessage:
    """Make sure an answer carries token counts, counting them ourselves if needed."""
    um = getattr(msg, "usage_metadata", None)
    if not um or not um.get("input_tokens") and not um.get("output_tokens"):
        i, o = messages_tokens(messages), count_tokens(str(msg.content))
        msg.usage_metadata = {"input_tokens": i, "output_tokens": o, "total_tokens": i + o}
        msg.response_metadata = {**(msg.response_metadata or {}), "token_count_source": "cooplab"}
    return msg


# --------------------------------------------------------------------------------------------
_NO_USAGE = object()  # a scripted tool-call answer without "usage": cooplab counts its tokens


class _Reply(str):
    """A scripted answer's text carrying the usage it "reports" (``{"text": ..., "usage": ...}``)
    and the tool calls it makes (``{"tool_calls": [...]}``)."""

    usage: Any = None
    tool_calls: list[dict[str, Any]] | None = None
    invalid_tool_calls: list[dict[str, Any]] | None = None


class ScriptMissingPhase(PermanentModelError):
    """A scripted model asked for a phase its script has no answers for (one line naming both);
    the run stops cleanly and resumes once the file answers the phase."""


def script_gap(source: str, phase: str | None, by_phase: dict[str, Any]) -> str:
    """One line: ``source`` has no answers for ``phase``, what it does answer, and the fix."""
    has = ", ".join(repr(k) for k, v in by_phase.items() if v) or "none"
    return (f"{source} has no answers for phase {phase or '(none)'!r}: add a by_phase entry {phase or 'PHASE'!r} or a default "
            f"'answers' list (by_phase answers {has})")


class ScriptedChatModel(BaseChatModel):
    """Replays fixed answers. An answer is a string, or ``{"text": ..., "delay": s}``, or
    ``{"error": "timeout" | "connection" | "429" | "500"}`` to simulate a transport failure, or
    ``{"error": "malformed"}`` a response that is not a chat completion. ``{"text": ..., "usage":
    {"prompt_tokens": ..., "completion_tokens": ...}}`` simulates a backend reporting usage (any
    JSON, validated like an endpoint's); without ``usage`` cooplab counts the tokens.

    Tool calls (for tool-using agents): ``{"tool_calls": [{"name": "run_code", "args": {...},
    "id": "c1"}], "text": ..., "usage": ...}`` answers with an ``AIMessage`` carrying those
    ``tool_calls`` (``id`` optional: ``call_<n>``, numbered per model); ``"invalid_tool_calls":
    [{"name": ..., "args": "<not JSON>", "error": ...}]`` simulates a native model's unparseable
    arguments. :meth:`bind_tools` accepts any LangChain tools (the script decides what is called).
    In Python, an answer may also be a callable ``f(messages) -> answer``, e.g. a final answer
    quoting the last tool result.

    File format (JSON): ``{"answers": [...]}`` (used in order, cycling) and/or
    ``{"by_phase": {"effort": [...], ...}}`` (per phase, matched against the call's ``phase``
    metadata), plus optional ``"latency"`` (seconds added to every call). A call whose phase has
    no answers (no ``by_phase`` entry and no ``answers``) raises :class:`ScriptMissingPhase`,
    naming the phase and the file (``source``)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    answers: list[Any] = Field(default_factory=list)
    by_phase: dict[str, list[Any]] = Field(default_factory=dict)
    latency: float = 0.0
    cycle: bool = True
    select: str = "order"  # "order": answers in call order; "prompt_hash": chosen by a hash of the prompt
    source: str = "a scripted model defined in Python"  # where the answers come from, for messages
    _counters: dict[str, int] = PrivateAttr(default_factory=dict)
    _lock: Any = PrivateAttr(default_factory=threading.Lock)
    _call_ids: int = PrivateAttr(default=0)

    def bind_tools(self, tools: Any, *, tool_choice: Any = None, **kwargs: Any) -> Any:
        """Native tool calling, scripted: the tools' schemas are bound like a real model's (and
        so visible in traces); which tool is called is up to the script."""
        from langchain_core.utils.function_calling import convert_to_openai_tool

        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _tool_call_id(self) -> str:
        with self._lock:
            self._call_ids += 1
            return f"call_{self._call_ids}"

    @classmethod
    def from_file(cls, path: str | Path, **kw: Any) -> "ScriptedChatModel":
        try:
            text = Path(path).read_bytes()
        except OSError as exc:
            raise ModelSpecError(f"cannot read scripted model file {path}: {exc.strerror or exc}") from None
        # a file's JSON may spell lone surrogates too
        data = clean_strings(parse_json(text, f"scripted model file {path}", error=ModelSpecError))
        if isinstance(data, list):
            data = {"answers": data}
        if not isinstance(data, dict) or not (data.get("answers") or data.get("by_phase")):
            raise ModelSpecError(f"scripted model file {path} needs a non-empty 'answers' list or 'by_phase' mapping")
        select = data.get("select", "order")
        if select not in ("order", "prompt_hash"):
            raise ModelSpecError(f"scripted model file {path}: 'select' must be 'order' or 'prompt_hash'")
        return cls(answers=data.get("answers", []), by_phase=data.get("by_phase", {}), latency=float(data.get("latency", 0.0)),
                   cycle=bool(data.get("cycle", True)), select=select, **{"source": f"scripted model file {path}", **kw})

    @property
    def _llm_type(self) -> str:
        return "cooplab-scripted"

    def _sequence(self, phase: str | None) -> tuple[str, list[Any]]:
        """(counter name, answers) of a call in ``phase``: its ``by_phase`` entry, else ``answers``;
        :class:`ScriptMissingPhase` when both are empty."""
        if phase and self.by_phase.get(phase):
            return phase, self.by_phase[phase]
        if self.answers:
            return "*", self.answers
        raise ScriptMissingPhase(script_gap(self.source, phase, self.by_phase))

    def _next(self, phase: str | None, messages: list[BaseMessage] | None = None) -> Any:
        seq_name, seq = self._sequence(phase)
        if self.select == "prompt_hash" and messages:
            import hashlib

            h = hashlib.sha256("\n".join(str(m.content) for m in messages).encode()).digest()
            return seq[int.from_bytes(h[:4], "big") % len(seq)]
        with self._lock:
            i = self._counters.get(seq_name, 0)
            self._counters[seq_name] = i + 1
        if i >= len(seq) and not self.cycle:
            return ""
        return seq[i % len(seq)]

    def _answer(self, messages: list[BaseMessage], kwargs: dict) -> tuple[str, float]:
        phase = (kwargs.get("metadata") or {}).get("phase") or kwargs.get("phase")
        a = self._next(phase, messages)
        if callable(a):  # Python scripts only: an answer computed from the messages (e.g. from a tool's result)
            a = a(messages)
        delay = self.latency
        if isinstance(a, dict):
            delay += float(a.get("delay", 0.0))
            if "error" in a:
                return "\0" + str(a["error"]), delay
            if "usage" in a or "tool_calls" in a or "invalid_tool_calls" in a:
                reply = _Reply(a.get("text", ""))
                reply.usage = a.get("usage")
                if "tool_calls" in a:
                    reply.tool_calls = [{"name": c["name"], "args": c.get("args", {}), "id": c.get("id") or self._tool_call_id(),
                                         "type": "tool_call"} for c in a["tool_calls"]]
                if "invalid_tool_calls" in a:
                    reply.invalid_tool_calls = [{"name": c.get("name"), "args": c.get("args"), "id": c.get("id") or self._tool_call_id(),
                                                 "error": c.get("error"), "type": "invalid_tool_call"} for c in a["invalid_tool_calls"]]
                if "usage" not in a:
                    reply.usage = _NO_USAGE
                return reply, delay
            a = a.get("text", "")
        return str(a), delay

    def _result(self, text: str, messages: list[BaseMessage]) -> ChatResult:
        if text.startswith("\0"):
            kind = text[1:]
            if kind == "malformed":
                raise EndpointResponseError("scripted malformed response")
            raise TransientModelError(kind, "scripted transport failure")
        if isinstance(text, _Reply):
            calls = {"tool_calls": text.tool_calls or [], "invalid_tool_calls": text.invalid_tool_calls or []}
            if text.usage is _NO_USAGE:  # counted by cooplab: the text and the calls' JSON
                msg = AIMessage(content=str(text), **calls)
                i = messages_tokens(messages)
                o = count_tokens(str(text)) + count_tokens(json.dumps([[c["name"], c["args"]] for c in msg.tool_calls]))
                msg.usage_metadata = {"input_tokens": i, "output_tokens": o, "total_tokens": i + o}
                msg.response_metadata = {"token_count_source": "cooplab"}
            else:
                msg = AIMessage(content=str(text), response_metadata={"usage_raw": text.usage}, **calls)
        else:
            msg = with_usage(AIMessage(content=text), messages)
        return ChatResult(generations=[ChatGeneration(message=msg)])

    def _generate(self, messages, stop=None, run_manager: CallbackManagerForLLMRun | None = None, **kwargs) -> ChatResult:
        text, delay = self._answer(messages, kwargs)
        if delay:
            time.sleep(delay)
        return self._result(text, messages)

    async def _agenerate(self, messages, stop=None, run_manager: AsyncCallbackManagerForLLMRun | None = None, **kwargs) -> ChatResult:
        text, delay = self._answer(messages, kwargs)
        if delay:
            await asyncio.sleep(delay)
        return self._result(text, messages)


# --------------------------------------------------------------------------------------------
class LlamaCppChat(BaseChatModel):
    """SmolLM2 (or any GGUF chat model) through llama-cpp-python, in a child process.

    Our own small class instead of langchain-community's ``ChatLlamaCpp`` because we need,
    per call: JSON-schema-constrained decoding (``response_format`` -> llama.cpp grammar), a
    seed derived from the call's cache key (reproducible sampling), exact token counts from
    llama.cpp's ``usage``, one shared model for many agents, and native code kept out of the
    caller's process: the model runs in ``cooplab.agents.llama_worker`` (see
    ``cooplab.agents.local_model``), so a crash of llama.cpp is a transient model error that
    stops a run cleanly instead of killing it."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    model_path: str
    temperature: float = 0.7
    max_tokens: int = 64
    n_ctx: int = 8192
    n_threads: int | None = None

    @property
    def _llm_type(self) -> str:
        return "cooplab-llamacpp"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        from .local_model import get_local_model

        proc = get_local_model(self.model_path, self.n_ctx, self.n_threads)
        role = {"human": "user", "ai": "assistant", "system": "system"}
        msgs = [{"role": role.get(m.type, "user"), "content": str(m.content)} for m in messages]
        call: dict[str, Any] = {"messages": msgs, "temperature": self.temperature, "max_tokens": kwargs.get("max_tokens", self.max_tokens)}
        if kwargs.get("response_format"):
            call["response_format"] = kwargs["response_format"]
        if kwargs.get("seed") is not None:
            call["seed"] = int(kwargs["seed"]) % (2**31)
        if stop:
            call["stop"] = stop
        # the model process's answer is checked like any endpoint's: a garbled reply is a
        # malformed response (retried, then a clean stop), its usage is validated by the service
        checked, usage = checked_completion(proc.chat(call), max_tokens=_output_cap(call))
        msg = AIMessage(content=checked["choices"][0]["message"]["content"], response_metadata={"usage_raw": usage})
        return ChatResult(generations=[ChatGeneration(message=msg)])

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        return await asyncio.to_thread(self._generate, messages, stop, None, **kwargs)


# --- checks of model specs and scripted files (user input: one-line ConfigError)  -----------------------------------------------------------
MAX_SCRIPT_DELAY = 3600.0


def check_scripted_file(path: str | Path, phases: Any = ()) -> None:
    """A ``scripted:FILE`` model file: valid JSON, non-empty answers, every field of the right type,
    and answers for each of ``phases`` (the phases the caller will ask: a ``by_phase`` entry each,
    unless the file has a default ``answers`` list)."""
    p = Path(path)
    where = f"scripted model file {p}"
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {where}: {getattr(exc, 'strerror', None) or exc}") from None
    data = parse_json(text, where)
    if isinstance(data, list):
        data = {"answers": data}
    if not isinstance(data, dict):
        raise ConfigError(f"{where} must hold a JSON object with 'answers' or 'by_phase' (or a list of answers), got {show(data)}")
    answers, by_phase = data.get("answers", []), data.get("by_phase", {})
    if not isinstance(answers, list):
        raise ConfigError(f"{where}: 'answers' must be a list of answers, got {show(answers)}")
    if not isinstance(by_phase, dict) or not all(isinstance(v, list) for v in by_phase.values()):
        raise ConfigError(f"{where}: 'by_phase' must map phase names to lists of answers, got {show(by_phase)}")
    if not answers and not any(by_phase.values()):
        raise ConfigError(f"{where} needs a non-empty 'answers' list or 'by_phase' mapping")
    for seq_name, seq in [("answers", answers)] + [(f"by_phase.{k}", v) for k, v in by_phase.items()]:
        for i, a in enumerate(seq):
            at = f"{where}: {seq_name}[{i}]"
            if isinstance(a, str):
                continue
            if not isinstance(a, dict):
                raise ConfigError(f"{at} must be a string or an object with 'text', 'delay' or 'error', got {show(a)}")
            if "text" in a and not isinstance(a["text"], str):
                raise ConfigError(f"{at}.text must be a string, got {show(a['text'])}")
            if "error" in a and not isinstance(a["error"], str):
                raise ConfigError(f"{at}.error must be a string (timeout, connection, 429, 500), got {show(a['error'])}")
            if "delay" in a:
                Num(float, 0, MAX_SCRIPT_DELAY, hint="seconds").check(f"{at}.delay", a["delay"])
    if "latency" in data:
        Num(float, 0, MAX_SCRIPT_DELAY, hint="seconds added to every call").check(f"{where}: latency", data["latency"])
    if "cycle" in data and not isinstance(data["cycle"], bool):
        raise ConfigError(f"{where}: 'cycle' must be true or false, got {show(data['cycle'])}")
    if data.get("select", "order") not in ("order", "prompt_hash"):
        raise ConfigError(f"{where}: 'select' must be 'order' or 'prompt_hash', got {show(data.get('select'))}")
    missing = [] if answers else [ph for ph in phases if not by_phase.get(ph)]
    if missing:
        raise ConfigError(script_gap(where, missing[0], by_phase))


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
