"""Anthropic's Messages API on 127.0.0.1, misbehaving on request (``AnthropicServer(mode)``).

``POST /v1/messages`` answers as the real API does: a ``message`` object with a list of content
blocks (``text``; ``tool_use`` with an ``input`` object when the request forces a tool, which is
how structured output travels, or when the answer is a tool call), a ``stop_reason``, and ``usage``
``{input_tokens, output_tokens, ...}``; the ``request-id`` header; with ``"stream": true`` the
same message as server-sent events (``message_start`` ... ``message_stop``). Errors use the API's
error body, ``{"type": "error", "error": {"type": ..., "message": ...}, "request_id": ...}``, with
its status codes (400, 401, 403, 404, 413, 429 with ``retry-after``, 500, 529 ``overloaded_error``).

What the server answers comes from ``answer``: a string (the text, by default
:data:`tests.fakes.base.ANSWER`, valid for every CPR decision), or ``answer(request)`` returning a
string or an :class:`Answer` (text and/or tool calls). See :mod:`tests.fakes.base` for modes and
scripts; :data:`MODES` lists this server's.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

from .base import (
    ANSWER,
    COMMON_MODES,
    USAGE_VALUES,
    Answer,
    FakeServer,
    Reply,
    Request,
    Talk,
    json_reply,
    oversize,
    texts,
    truncations,
)

_ids = itertools.count(1)


def forced_tool(body: Any) -> str | None:
    """The tool a request forces (``tool_choice`` ``{"type": "tool", "name": ...}``, or ``any`` with one tool),
    or None."""
    if not isinstance(body, dict):
        return None
    choice, tools = body.get("tool_choice") or {}, body.get("tools") or []
    if isinstance(choice, dict) and choice.get("type") == "tool":
        return choice.get("name")
    if isinstance(choice, dict) and choice.get("type") == "any" and len(tools) == 1 and isinstance(tools[0], dict):
        return tools[0].get("name")
    return None


def blocks_of(req: Request, answer: str | Answer) -> tuple[list[dict], str]:
    """The content blocks and stop reason of ``answer`` to ``req``: a forced tool gets the answer's
    JSON as its ``input`` (structured output through tool calling)."""
    if isinstance(answer, str):
        tool = forced_tool(req.body)
        if tool is None:
            return [{"type": "text", "text": answer}], "end_turn"
        try:
            data = json.loads(answer)
        except ValueError:
            data = {"text": answer}
        answer = Answer(tool_calls=[(tool, data)])
    blocks = [{"type": "text", "text": answer.text}] if answer.text else []
    blocks += [
        {"type": "tool_use", "id": f"toolu_{next(_ids):024d}", "name": n, "input": i} for n, i in answer.tool_calls
    ]
    return blocks, "tool_use" if answer.tool_calls else "end_turn"


def usage(input_tokens: Any = 120, output_tokens: Any = 12) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "service_tier": "standard",
    }


def message(
    req: Request,
    *,
    content: Any = "default",
    usage_: Any = "default",
    stop_reason: Any = "default",
    drop: tuple[str, ...] = (),
) -> dict[str, Any]:
    """A ``message`` object answering ``req`` with its :attr:`Request.answer` (fields replaceable or dropped)."""
    blocks, stop = blocks_of(req, req.answer)
    model = req.body.get("model", "claude-x") if isinstance(req.body, dict) else "claude-x"
    body = {
        "id": f"msg_{next(_ids):024d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks if content == "default" else content,
        "stop_reason": stop if stop_reason == "default" else stop_reason,
        "stop_sequence": None,
        "usage": usage() if usage_ == "default" else usage_,
    }
    for k in drop:
        body.pop(k, None)
    return body


def request_id() -> str:
    return f"req_{next(_ids):024d}"


def ok_reply(req: Request, body: dict | None = None) -> Reply:
    """``body`` (by default the answer's message) as the API sends it: JSON, or events when the request streams."""
    body = message(req) if body is None else body
    if isinstance(req.body, dict) and req.body.get("stream") is True:
        return Reply(200, events(body), "text/event-stream", headers={"request-id": request_id()})
    return json_reply(body, headers={"request-id": request_id()})


def events(msg: dict) -> bytes:
    """``msg`` as the Messages API's server-sent events."""

    def event(name: str, data: dict) -> bytes:
        return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()

    got = msg.get("usage")
    u: dict = got if isinstance(got, dict) else {}
    out = [
        event(
            "message_start",
            {
                "type": "message_start",
                "message": {**msg, "content": [], "stop_reason": None, "usage": {**u, "output_tokens": 1}},
            },
        )
    ]
    for i, block in enumerate(msg.get("content") or []):
        start = {**block, "text": ""} if block["type"] == "text" else {**block, "input": {}}
        out.append(event("content_block_start", {"type": "content_block_start", "index": i, "content_block": start}))
        delta = (
            {"type": "text_delta", "text": block["text"]}
            if block["type"] == "text"
            else {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        )
        out.append(event("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}))
        out.append(event("content_block_stop", {"type": "content_block_stop", "index": i}))
    out.append(
        event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": msg.get("stop_reason"), "stop_sequence": None},
                "usage": {"output_tokens": u.get("output_tokens")},
            },
        )
    )
    out.append(event("message_stop", {"type": "message_stop"}))
    return b"".join(out)


def error(status: int, kind: str, text: str, headers: dict[str, str] | None = None) -> Reply:
    """An error in the API's own format."""
    rid = request_id()
    return json_reply(
        {"type": "error", "error": {"type": kind, "message": text}, "request_id": rid},
        status,
        {"request-id": rid, **(headers or {})},
    )


def _usage_mode(values: Callable[[Request], tuple[Any, Any]]) -> Callable[[Request], Reply]:
    def reply(req: Request) -> Reply:
        i, o = values(req)
        if i == "<drop>":
            return ok_reply(req, message(req, drop=("usage",)))
        return ok_reply(req, message(req, usage_="lots of tokens" if i == "<not_object>" else usage(i, o)))

    return reply


ERROR_MODES: dict[str, Callable[[Request], Reply]] = {
    "400": lambda r: error(400, "invalid_request_error", "max_tokens: Field required"),
    "401": lambda r: error(401, "authentication_error", "invalid x-api-key"),
    "403": lambda r: error(
        403, "permission_error", "Your API key does not have permission to use the specified resource."
    ),
    "404": lambda r: error(404, "not_found_error", f"model: {(r.body or {}).get('model')}"),
    "413": lambda r: error(413, "request_too_large", "Request exceeds the maximum allowed number of bytes."),
    "429": lambda r: error(
        429,
        "rate_limit_error",
        "Number of request tokens has exceeded your per-minute rate limit",
        {"retry-after": "0"},
    ),
    "500": lambda r: error(500, "api_error", "Internal server error"),
    "529": lambda r: error(529, "overloaded_error", "Overloaded"),
}

MODES: dict[str, Callable[[Request], Reply]] = {
    "ok": ok_reply,
    **COMMON_MODES,
    **ERROR_MODES,
    # a body that is a message in name only
    "no_content": lambda r: ok_reply(r, message(r, drop=("content",))),
    "null_content": lambda r: ok_reply(r, message(r, content=None)),
    "content_string": lambda r: ok_reply(r, message(r, content="the answer")),
    "empty_content": lambda r: ok_reply(r, message(r, content=[])),
    "block_not_object": lambda r: ok_reply(r, message(r, content=["text"])),
    "block_without_type": lambda r: ok_reply(r, message(r, content=[{"text": ANSWER}])),
    "unknown_block": lambda r: ok_reply(r, message(r, content=[{"type": "hologram", "data": "x"}])),
    "text_number": lambda r: ok_reply(r, message(r, content=[{"type": "text", "text": 42}])),
    "text_null": lambda r: ok_reply(r, message(r, content=[{"type": "text", "text": None}])),
    "tool_input_string": lambda r: ok_reply(
        r,
        message(
            r,
            content=[{"type": "tool_use", "id": "toolu_1", "name": forced_tool(r.body) or "x", "input": "{not json"}],
            stop_reason="tool_use",
        ),
    ),
    "error_in_200": lambda r: json_reply(
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    ),
    "refusal": lambda r: ok_reply(r, message(r, content=[], stop_reason="refusal")),
    "max_tokens_cut": lambda r: ok_reply(
        r, message(r, content=[{"type": "text", "text": '{"effort": 0.'}], stop_reason="max_tokens")
    ),
    "oversize": lambda r: oversize(
        b'{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"',
        b'"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}',
    ),
    **truncations(ok_reply),
}
MODES.update({name: _usage_mode(values) for name, values in USAGE_VALUES.items()})

#: modes whose answer is usable but whose usage report is not
USAGE_ERROR_MODES = sorted(USAGE_VALUES)
#: modes that are no message at all (the client cannot use the answer)
MALFORMED_MODES = [
    "not_json",
    "html",
    "text",
    "empty",
    "binary",
    "json_list",
    "json_string",
    "json_null",
    "no_content",
    "null_content",
    "content_string",
    "block_not_object",
    "block_without_type",
    "text_number",
    "error_in_200",
    "truncated",
    "truncated_json",
]
#: errors the API says are worth retrying, and those that are final
RETRIED_ERRORS = ["429", "500", "529", "500_html", "502_empty"]
FINAL_ERRORS = ["400", "401", "403", "404", "413"]


class AnthropicServer(FakeServer):
    """Anthropic's Messages API (see the module's docstring)."""

    MODES = MODES
    CALL_PATHS = ("/v1/messages",)

    @staticmethod
    def talk(body: Any) -> Talk:
        body = body if isinstance(body, dict) else {}
        blocks = [b for m in body.get("messages") or [] if isinstance(m.get("content"), list) for b in m["content"]]
        return Talk(
            texts(body.get("system", "")),
            [t.get("name") for t in body.get("tools") or []],
            sum(isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks),
        )

    def fixed(self, req: Request) -> Reply:
        return error(404, "not_found_error", f"Not found: {req.method} {req.path}")

    @property
    def url(self) -> str:
        """The base URL a client takes (the SDK adds ``/v1/messages``)."""
        return self.root
