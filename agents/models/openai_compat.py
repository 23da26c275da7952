"""The OpenAI-compatible chat completion where it enters cooplab: :func:`checked_completion` turns
a server's 200 response into a minimal, well-formed completion (or an
:class:`~cooplab.agents.models.errors.EndpointResponseError`), and :func:`checked_chat_openai` is
LangChain's ``ChatOpenAI`` reading each response body through it.

Used by ``openai:NAME`` (OpenAI or any OpenAI-compatible server), by the local model (its process
answers in the same format, ``agents/models/local.py``), and, for :func:`attach_usage` and
:func:`raw_json`, by the other providers (``agents/providers.py``) and model objects
(``agents/instances.py``). The usage a server reports is kept exactly as received in
``response_metadata["usage_raw"]`` for the model service to validate against the call's bounds
(``agents/usage.py``).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatResult

from cooplab.agents.models.errors import EndpointResponseError, snippet
from cooplab.agents.usage import answer_bytes_bound
from cooplab.limits import clean_strings

_JSON_TYPES = {
    str: "string",
    list: "array",
    dict: "object",
    type(None): "null",
    int: "number",
    float: "number",
    bool: "boolean",
}


def attach_usage(msg: AIMessage, usage: Any, input_key: str, output_key: str) -> AIMessage:
    """Keep an endpoint's reported usage exactly as received in ``response_metadata["usage_raw"]``
    (the model service checks it against the call's bounds, ``agents/usage.py``), and make it
    ``usage_metadata`` (for traces) only when both counts are non-negative integers."""
    msg.response_metadata = {**(msg.response_metadata or {}), "usage_raw": usage}
    msg.usage_metadata = None
    if isinstance(usage, dict):
        i, o = usage.get(input_key), usage.get(output_key)
        if type(i) is int and type(o) is int and i >= 0 and o >= 0:
            msg.usage_metadata = {"input_tokens": i, "output_tokens": o, "total_tokens": i + o}
    return msg


def raw_json(value: Any) -> Any:
    """The JSON values behind an SDK's pydantic models, as received: the SDKs build them without
    validation, and ``model_dump`` would coerce a reported ``true`` or ``"100"`` into an int."""
    from pydantic import BaseModel

    if isinstance(value, BaseModel):
        value = {**value.__dict__, **(value.__pydantic_extra__ or {})}
    if isinstance(value, dict):
        return {k: raw_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [raw_json(v) for v in value]
    return value


def parse_body(body: bytes) -> Any:
    """The JSON of a response body, or :class:`EndpointResponseError` (empty, not JSON, not UTF-8)."""
    if not body.strip():
        raise EndpointResponseError("the body is empty")
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise EndpointResponseError(f"the body is not JSON ({type(exc).__name__}: {exc}): {snippet(body)}") from None


def output_cap(payload: dict[str, Any]) -> int | None:
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
        response = clean_strings(raw_json(response))
    except RecursionError:
        raise EndpointResponseError("the body is nested too deeply") from None
    if not isinstance(response, dict):
        raise EndpointResponseError(
            f"the body is a JSON {_JSON_TYPES.get(type(response), type(response).__name__)}, not an object"
        )
    if response.get("error"):
        raise EndpointResponseError(f"the body holds an error: {snippet(response.get('error'))}")
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices:
        raise EndpointResponseError("no choices" if not choices else f"choices is not a list: {snippet(choices)}")
    first = choices[0]
    message = first.get("message") if isinstance(first, dict) else None
    if not isinstance(message, dict):
        raise EndpointResponseError(f"choices[0].message is {snippet(message) if message is not None else 'missing'}")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise EndpointResponseError(
            f"choices[0].message.content is a JSON {_JSON_TYPES.get(type(content), 'value')}, not text"
        )
    checked: dict[str, Any] = {
        k: v for k, v in response.items() if k in ("id", "model", "system_fingerprint") and isinstance(v, str)
    }
    finish = first.get("finish_reason")
    out_message: dict[str, Any] = {"role": "assistant", "content": content or ""}
    tool_calls = _checked_tool_calls(message.get("tool_calls"))
    if tool_calls:
        out_message["tool_calls"] = tool_calls
    checked["choices"] = [
        {"index": 0, "message": out_message, "finish_reason": finish if isinstance(finish, str) else None}
    ]
    if max_tokens is not None:
        _check_answer_size(out_message, max_tokens)
    return checked, response.get("usage")


def _check_answer_size(message: dict[str, Any], max_tokens: int) -> None:
    limit = answer_bytes_bound(max_tokens)
    parts = [message["content"]] + [
        v for c in message.get("tool_calls", []) for v in (c["id"], c["function"]["name"], c["function"]["arguments"])
    ]
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
        raise EndpointResponseError(f"choices[0].message.tool_calls is not a list: {snippet(calls)}")
    out = []
    for i, c in enumerate(calls):
        fn = c.get("function") if isinstance(c, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not isinstance(c.get("id"), str):
            raise EndpointResponseError(f"choices[0].message.tool_calls[{i}] is not a function call: {snippet(c)}")
        args = fn.get("arguments")
        if args is None:
            args = "{}"
        if not isinstance(args, str):
            raise EndpointResponseError(
                f"choices[0].message.tool_calls[{i}].function.arguments is not text: {snippet(args)}"
            )
        out.append(
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": fn["name"], "arguments": _clean_arguments(args, i)},
            }
        )
    return out


def _clean_arguments(args: str, i: int) -> str:
    """Tool-call arguments whose JSON spells a lone surrogate (``"\\ud800"``) re-encoded with
    U+FFFD in its place; other arguments, and text that is not JSON, unchanged."""
    try:
        value = json.loads(args)
    except ValueError:
        return args
    except RecursionError:
        raise EndpointResponseError(
            f"choices[0].message.tool_calls[{i}].function.arguments is nested too deeply"
        ) from None
    cleaned = clean_strings(value)
    return args if cleaned == value else json.dumps(cleaned, ensure_ascii=False)


_CHECKED_CHAT_OPENAI: Any = None


def made_checked_class() -> type | None:
    """The checked ``ChatOpenAI`` class if it was made already (``checked_chat_openai``), else None:
    asking never loads ``langchain_openai``."""
    return _CHECKED_CHAT_OPENAI


def checked_chat_openai() -> type:
    """``ChatOpenAI`` that reads the endpoint's response body itself: a body that is not a chat
    completion raises :class:`EndpointResponseError` (never an AttributeError or a pydantic error
    from deep inside), and the reported ``usage``, exactly as received (the SDK would coerce a
    ``true`` or ``"100"`` into an int), goes to ``response_metadata["usage_raw"]`` for the model
    service to validate against the call's bounds (``agents/usage.py``); it becomes
    ``usage_metadata`` (for traces) only when its counts are non-negative integers. Only the
    plain chat-completions call is made (no ``parse``, no Responses API, no streaming). The class
    is made on first use (``langchain_openai`` loads then)."""
    global _CHECKED_CHAT_OPENAI
    if _CHECKED_CHAT_OPENAI is not None:
        return _CHECKED_CHAT_OPENAI
    from langchain_openai import ChatOpenAI

    class CheckedChatOpenAI(ChatOpenAI):
        def _generate(self, messages, stop=None, run_manager=None, **kwargs: Any) -> ChatResult:
            payload = self._get_request_payload(messages, stop=stop, **kwargs)
            payload.pop("stream", None)
            raw = self.client.with_raw_response.create(**payload)  # HTTP errors raise openai.APIStatusError
            return self._checked_result(raw.http_response.content, output_cap(payload))

        async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs: Any) -> ChatResult:
            payload = self._get_request_payload(messages, stop=stop, **kwargs)
            payload.pop("stream", None)
            raw = await self.async_client.with_raw_response.create(**payload)
            return await asyncio.to_thread(self._checked_result, raw.http_response.content, output_cap(payload))

        def _checked_result(self, body: bytes, max_tokens: int | None = None) -> ChatResult:
            checked, usage = checked_completion(parse_body(body), max_tokens=max_tokens)
            result = super()._create_chat_result(checked, {})
            msg = result.generations[0].message
            assert isinstance(msg, AIMessage), "checked_completion answers with the assistant's role"
            attach_usage(msg, usage, "prompt_tokens", "completion_tokens")
            return result

    _CHECKED_CHAT_OPENAI = CheckedChatOpenAI
    return CheckedChatOpenAI
