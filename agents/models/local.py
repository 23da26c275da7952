"""The local model on cooplab's side: ``local`` (the shipped SmolLM2-135M-Instruct) and
``local:PATH.gguf`` (any GGUF chat model file): where its file is (:func:`local_model_path`,
:func:`gguf_file`), what names its answers in a cache key (:func:`gguf_identity`: the file's content,
not its name), and :class:`LlamaCppChat`, the chat model that asks the model's own process.

The process itself is ``agents/local_model.py`` (started, watched, restarted) running
``agents/llama_worker.py`` (llama.cpp in the child); its answers come back in the OpenAI
chat-completion format and are checked like a server's (``agents/models/openai_compat.py``).
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from pathlib import Path
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict

from cooplab.agents.models.errors import ModelSpecError
from cooplab.agents.models.openai_compat import checked_completion, output_cap
from cooplab.limits import sha256_file


def local_model_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF: the pinned file of :mod:`cooplab.agents.model_files` (``smollm2``),
    checked against its SHA-256. Needs the local extra (llama-cpp-python, which loads it in the
    model's own process, see ``cooplab.agents.local_model``) and the fetched file: either missing is
    one line saying what to install or run."""
    from cooplab.agents.model_files import verified_path
    from cooplab.extras import require

    require("local", "the local model")
    return verified_path("smollm2", "the local model")


def gguf_file(text: str) -> Path:
    """The model file of ``local:PATH``: an existing regular file that starts with GGUF's magic
    bytes, as an absolute path (``~`` expanded). Anything else is one line saying what it is."""
    if not text.strip():
        raise ModelSpecError(
            "local:PATH needs the path of a GGUF model file, e.g. local:~/models/qwen2.5-0.5b-instruct-q4_k_m.gguf"
        )
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
        raise ModelSpecError(
            f"local model file {text} is not a GGUF file (llama.cpp reads GGUF; convert the model with "
            "llama.cpp's convert_hf_to_gguf.py)"
        )
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
            if st.st_size >= HASH_NOTE_BYTES:
                size = f"{st.st_size / 1e9:.1f} GB" if st.st_size >= 10**8 else f"{st.st_size / 1e6:.1f} MB"
                print(
                    f"cooplab: reading all {size} of {path} once to hash it (a local: model's answers are "
                    "cached under its content's SHA-256); this can take minutes",
                    file=sys.stderr,
                    flush=True,
                )
            _GGUF_SHA256[key] = sha256_file(path)
        return _GGUF_SHA256[key]


def gguf_identity(path: str) -> dict[str, str]:
    """What identifies a GGUF file's answers in a cache key: its content, not its name or place.
    The shipped SmolLM2 under another name or folder is the shipped model (the ``local`` key, so
    its cached answers replay); any other file is named by its SHA-256."""
    from cooplab.agents.model_files import MODELS

    digest = gguf_sha256(path)
    shipped = next((f for f in MODELS["smollm2"].files if f.sha256 == digest), None)
    return (
        {"model": f"local:{shipped.name}"}
        if shipped is not None
        else {"model": f"local:{Path(path).name}", "sha256": digest}
    )


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
        from cooplab.agents.local_model import get_local_model

        proc = get_local_model(self.model_path, self.n_ctx, self.n_threads)
        role = {"human": "user", "ai": "assistant", "system": "system"}
        msgs = [{"role": role.get(m.type, "user"), "content": str(m.content)} for m in messages]
        call: dict[str, Any] = {
            "messages": msgs,
            "temperature": self.temperature,
            "max_tokens": kwargs.get("max_tokens", self.max_tokens),
        }
        if kwargs.get("response_format"):
            call["response_format"] = kwargs["response_format"]
        if kwargs.get("seed") is not None:
            call["seed"] = int(kwargs["seed"]) % (2**31)
        if stop:
            call["stop"] = stop
        # the model process's answer is checked like any endpoint's: a garbled reply is a
        # malformed response (retried, then a clean stop), its usage is validated by the service
        checked, usage = checked_completion(proc.chat(call), max_tokens=output_cap(call))
        msg = AIMessage(content=checked["choices"][0]["message"]["content"], response_metadata={"usage_raw": usage})
        return ChatResult(generations=[ChatGeneration(message=msg)])

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        return await asyncio.to_thread(self._generate, messages, stop, None, **kwargs)
