"""Scripted models: fixed answers from a file (``scripted:FILE``) or from Python, and the built-in
ones tasks register (``builtin:NAME[:ARG]``), for tests, demos and the oracle teams. They answer
like a server would, token counts, tool calls and transport failures included, so every layer of
the call path above them is exercised."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import threading
import time
from pathlib import Path
from typing import Any, Callable, ClassVar

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict, Field, PrivateAttr

from cooplab.agents.models.errors import EndpointResponseError, ModelSpecError, PermanentModelError, TransientModelError
from cooplab.agents.usage import count_tokens, messages_tokens
from cooplab.limits import ConfigError, Num, clean_strings, parse_json, sha256_file, show

#: built-in scripted models, ``builtin:NAME[:ARG]`` -> ``factory(ARG)`` (a ScriptedChatModel); tasks
#: register theirs on import (e.g. the science task's oracle and garbage teams)
BUILTIN_MODELS: dict[str, Callable[[str], "ScriptedChatModel"]] = {}


def register_builtin(name: str, factory: Callable[[str], "ScriptedChatModel"]) -> None:
    """Make ``builtin:NAME:ARG`` a model spec: ``factory(ARG)`` builds the model."""
    if not re.fullmatch(r"[a-z][a-z0-9\-]*", name):
        raise ValueError(f"a built-in model name is lowercase letters, digits and '-', got {name!r}")
    BUILTIN_MODELS[name] = factory


_SCRIPT_SHA256: dict[tuple[str, int, int, int], str] = {}
_SCRIPT_LOCK = threading.Lock()


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
    with _SCRIPT_LOCK:
        digest = _SCRIPT_SHA256.get(key)
    if digest is None:
        try:
            digest = sha256_file(path)
        except OSError:
            return {"model": f"scripted:{path}"}
        with _SCRIPT_LOCK:
            _SCRIPT_SHA256[key] = digest
    return {"model": "scripted", "sha256": digest}


def with_usage(msg: AIMessage, messages: list[BaseMessage], tokenizer: str | None = None) -> AIMessage:
    """Make sure an answer carries token counts, counting them ourselves if needed: with the
    encoding ``tokenizer`` names (:mod:`cooplab.agents.tokenizers`), else cooplab's own count."""
    um = getattr(msg, "usage_metadata", None)
    if not um or not um.get("input_tokens") and not um.get("output_tokens"):
        i, o, source = counted(messages, str(msg.content), None, tokenizer)
        msg.usage_metadata = {"input_tokens": i, "output_tokens": o, "total_tokens": i + o}
        msg.response_metadata = {**(msg.response_metadata or {}), "token_count_source": source}
    return msg


def counted(
    messages: list[BaseMessage], text: str, tool_calls: list[Any] | None, tokenizer: str | None
) -> tuple[int, int, str]:
    """(input tokens, output tokens, who counted) of a scripted answer (``tool_calls``: the calls of
    a tool-calling answer, their JSON counted too): the encoding ``tokenizer`` (``o200k_base``: what
    an OpenAI model would report), else cooplab's own count."""
    if tokenizer is not None:
        from cooplab.agents import tokenizers

        enc = tokenizers.load(tokenizer)
        return tokenizers.chat_tokens(enc, messages), tokenizers.answer_tokens(enc, text, tool_calls), tokenizer
    o = count_tokens(text)
    if tool_calls is not None:
        o += count_tokens(json.dumps([[c["name"], c["args"]] for c in tool_calls]))
    return messages_tokens(messages), o, "cooplab"


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
    return (
        f"{source} has no answers for phase {phase or '(none)'!r}: add a by_phase entry {phase or 'PHASE'!r} or a "
        "default "
        f"'answers' list (by_phase answers {has})"
    )


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
    #: the encoding its token counts follow (``o200k_base``, ``cl100k_base``: what an OpenAI model
    #: would report for the same text, :mod:`cooplab.agents.tokenizers`); None: cooplab's own count
    tokenizer: str | None = None
    #: fields a model object's digest leaves out while they are None (agents/instances.py)
    ADDED_SETTINGS: ClassVar[frozenset[str]] = frozenset({"tokenizer"})
    _counters: dict[str, int] = PrivateAttr(default_factory=dict)
    _lock: Any = PrivateAttr(default_factory=threading.Lock)
    _call_ids: int = PrivateAttr(default=0)

    def bind_tools(self, tools: Any, *, tool_choice: Any = None, **kwargs: Any) -> Any:
        """Native tool calling, scripted: the tools' schemas are bound like a real model's (and
        so visible in traces); which tool is called is up to the script."""
        from cooplab.agents.toolforms import openai_tool  # convert_to_openai_tool, once per kind of tool

        return self.bind(tools=[openai_tool(t) for t in tools], **kwargs)

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
        parsed = clean_strings(parse_json(text, f"scripted model file {path}", error=ModelSpecError))
        # a JSON object (a list is its answers); the model's own validation checks its fields
        data: Any = {"answers": parsed} if isinstance(parsed, list) else parsed
        if not isinstance(data, dict) or not (data.get("answers") or data.get("by_phase")):
            raise ModelSpecError(f"scripted model file {path} needs a non-empty 'answers' list or 'by_phase' mapping")
        select = data.get("select", "order")
        if select not in ("order", "prompt_hash"):
            raise ModelSpecError(f"scripted model file {path}: 'select' must be 'order' or 'prompt_hash'")
        return cls(
            answers=data.get("answers", []),
            by_phase=data.get("by_phase", {}),
            latency=float(data.get("latency", 0.0)),
            cycle=bool(data.get("cycle", True)),
            select=select,
            **{"source": f"scripted model file {path}", **kw},
        )

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
                    reply.tool_calls = [
                        {
                            "name": c["name"],
                            "args": c.get("args", {}),
                            "id": c.get("id") or self._tool_call_id(),
                            "type": "tool_call",
                        }
                        for c in a["tool_calls"]
                    ]
                if "invalid_tool_calls" in a:
                    reply.invalid_tool_calls = [
                        {
                            "name": c.get("name"),
                            "args": c.get("args"),
                            "id": c.get("id") or self._tool_call_id(),
                            "error": c.get("error"),
                            "type": "invalid_tool_call",
                        }
                        for c in a["invalid_tool_calls"]
                    ]
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
                i, o, source = counted(messages, str(text), list(msg.tool_calls), self.tokenizer)
                msg.usage_metadata = {"input_tokens": i, "output_tokens": o, "total_tokens": i + o}
                msg.response_metadata = {"token_count_source": source}
            else:
                msg = AIMessage(content=str(text), response_metadata={"usage_raw": text.usage}, **calls)
        else:
            msg = with_usage(AIMessage(content=text), messages, self.tokenizer)
        return ChatResult(generations=[ChatGeneration(message=msg)])

    def _generate(
        self, messages, stop=None, run_manager: CallbackManagerForLLMRun | None = None, **kwargs
    ) -> ChatResult:
        text, delay = self._answer(messages, kwargs)
        if delay:
            time.sleep(delay)
        return self._result(text, messages)

    async def _agenerate(
        self, messages, stop=None, run_manager: AsyncCallbackManagerForLLMRun | None = None, **kwargs
    ) -> ChatResult:
        text, delay = self._answer(messages, kwargs)
        if delay:
            await asyncio.sleep(delay)
        return self._result(text, messages)


# --- the check of a scripted model file (user input: one-line ConfigError) ---------------------------
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
        raise ConfigError(
            f"{where} must hold a JSON object with 'answers' or 'by_phase' (or a list of answers), got {show(data)}"
        )
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
                raise ConfigError(
                    f"{at}.error must be a string (timeout, connection, 429, 500), got {show(a['error'])}"
                )
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
