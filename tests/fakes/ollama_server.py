"""Ollama's REST API on 127.0.0.1, misbehaving on request (``OllamaServer(mode)``).

``POST /api/chat`` answers as Ollama does: with ``"stream": false`` one JSON object, otherwise
(Ollama's default, and what langchain-ollama sends) newline-delimited JSON, ``application/x-ndjson``:
pieces of the message's ``content``, then a last object with ``"done": true``, ``done_reason``, the
durations and the usage counts ``prompt_eval_count`` (input) and ``eval_count`` (output). Tool calls
travel in ``message.tool_calls`` as ``{"function": {"name": ..., "arguments": {...}}}`` (arguments
an object, not a string); a request's ``format`` (``"json"`` or a JSON schema) is recorded, and the
answer is expected to match it. Errors are ``{"error": "..."}`` with the status (404 for an unknown
model, 400, 500), or such a line inside a stream. ``GET /api/tags``, ``POST /api/show`` and
``GET /api/version`` answer for the models in ``models``.

What the server answers comes from ``answer`` (see :mod:`tests.fakes.base`): a string (the
content), or ``answer(request)`` returning a string or an :class:`Answer`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .base import (
    COMMON_MODES,
    USAGE_VALUES,
    Answer,
    FakeServer,
    Reply,
    Request,
    Talk,
    json_reply,
    oversize,
    truncations,
)

CREATED = "2026-11-25T12:00:00.000000Z"


def _answer(req: Request) -> Answer:
    return req.answer if isinstance(req.answer, Answer) else Answer(str(req.answer))


def _model(req: Request) -> str:
    return req.body.get("model", "llama3") if isinstance(req.body, dict) else "llama3"


def counts(prompt_eval_count: Any = 120, eval_count: Any = 12) -> dict[str, Any]:
    """The last object's usage and timing fields."""
    return {
        "total_duration": 2_500_000,
        "load_duration": 100_000,
        "prompt_eval_count": prompt_eval_count,
        "prompt_eval_duration": 1_000_000,
        "eval_count": eval_count,
        "eval_duration": 1_400_000,
    }


def final(
    req: Request, usage: dict[str, Any] | None = None, *, message: Any = "default", done_reason: str = "stop"
) -> dict[str, Any]:
    """The object that ends an answer: the whole message when not streaming, an empty one when streaming."""
    a = _answer(req)
    msg: dict[str, Any] = {"role": "assistant", "content": "" if streams(req) else a.text}
    if a.tool_calls:
        msg["tool_calls"] = [{"function": {"name": n, "arguments": args}} for n, args in a.tool_calls]
    return {
        "model": _model(req),
        "created_at": CREATED,
        "message": msg if message == "default" else message,
        "done": True,
        "done_reason": done_reason,
        **(counts() if usage is None else usage),
    }


def streams(req: Request) -> bool:
    """Whether the request streams (Ollama's default when ``stream`` is not given)."""
    return not (isinstance(req.body, dict) and req.body.get("stream") is False)


def pieces(text: str, n: int = 3) -> list[str]:
    size = max(1, -(-len(text) // n))
    return [text[i : i + size] for i in range(0, len(text), size)]


def ndjson(objects: list[Any]) -> bytes:
    return b"".join(json.dumps(o).encode() + b"\n" for o in objects)


def chat_reply(req: Request, last: dict[str, Any] | None = None, *, before: list[Any] | None = None) -> Reply:
    """An answer to ``req``: the message's pieces, then ``last`` (by default :func:`final`), streamed
    as NDJSON or sent as one object; ``before`` replaces the pieces (a stream's hostile lines)."""
    last = final(req) if last is None else last
    if not streams(req):
        return json_reply(last)
    a = _answer(req)
    head = (
        before
        if before is not None
        else [
            {"model": _model(req), "created_at": CREATED, "message": {"role": "assistant", "content": p}, "done": False}
            for p in pieces(a.text)
        ]
    )
    return Reply(200, ndjson([*head, last]), "application/x-ndjson")


def error(status: int, text: str) -> Reply:
    return json_reply({"error": text}, status)


def _usage_mode(values: Callable[[Request], tuple[Any, Any]]) -> Callable[[Request], Reply]:
    def reply(req: Request) -> Reply:
        i, o = values(req)
        usage = counts(i, o)
        if i == "<drop>":
            usage = {k: v for k, v in usage.items() if k not in ("prompt_eval_count", "eval_count")}
        elif i == "<not_object>":  # Ollama's counts are top-level fields: the closest is a string for every field
            usage = {k: "lots" for k in usage}
        return chat_reply(req, final(req, usage))

    return reply


def _raw_stream(lines: list[bytes]) -> Callable[[Request], Reply]:
    return lambda r: Reply(200, b"".join(line + b"\n" for line in lines), "application/x-ndjson")


MODES: dict[str, Callable[[Request], Reply]] = {
    "ok": chat_reply,
    **COMMON_MODES,
    "400": lambda r: error(400, 'invalid format: expected "json" or a JSON schema'),
    "404": lambda r: error(404, f'model "{_model(r)}" not found, try pulling it first'),
    "500": lambda r: error(500, "llama runner process has terminated: signal: killed"),
    "503": lambda r: error(503, "server busy, please try again.  maximum pending requests exceeded"),
    # the message is not one
    "no_message": lambda r: chat_reply(r, {k: v for k, v in final(r).items() if k != "message"}),
    "null_message": lambda r: chat_reply(r, final(r, message=None)),
    "message_string": lambda r: chat_reply(r, final(r, message="hi")),
    "content_number": lambda r: chat_reply(r, final(r, message={"role": "assistant", "content": 42}), before=[]),
    "content_object": lambda r: chat_reply(
        r, final(r, message={"role": "assistant", "content": {"effort": 0.3}}), before=[]
    ),
    "tool_arguments_string": lambda r: chat_reply(
        r,
        final(
            r,
            message={
                "role": "assistant",
                "content": "",
                "tool_calls": [{"function": {"name": "x", "arguments": "{not json"}}],
            },
        ),
        before=[],
    ),
    "empty_answer": lambda r: chat_reply(r, final(r, message={"role": "assistant", "content": ""}), before=[]),
    "length": lambda r: chat_reply(r, final(r, done_reason="length")),
    # a stream that goes wrong on the way
    "stream_error": lambda r: chat_reply(
        r,
        {"error": "an error was encountered while running the model: unexpected EOF"},
        before=[
            {
                "model": _model(r),
                "created_at": CREATED,
                "message": {"role": "assistant", "content": '{"eff'},
                "done": False,
            }
        ],
    ),
    "never_done": lambda r: chat_reply(
        r,
        {
            "model": _model(r),
            "created_at": CREATED,
            "message": {"role": "assistant", "content": str(_answer(r).text)},
            "done": False,
        },
        before=[],
    ),
    "garbage_line": _raw_stream(
        [
            b'{"model":"m","created_at":"x","message":{"role":"assistant","content":"{"},"done":false}',
            b"<html>502 Bad Gateway</html>",
        ]
    ),
    "oversize": lambda r: oversize(
        b'{"model":"m","created_at":"x","message":{"role":"assistant","content":"',
        b'"},"done":true,"prompt_eval_count":1,"eval_count":1}\n',
    ),
    **truncations(lambda r: chat_reply(r)),
}
MODES.update({name: _usage_mode(values) for name, values in USAGE_VALUES.items()})

USAGE_ERROR_MODES = sorted(USAGE_VALUES)
MALFORMED_MODES = [
    "not_json",
    "html",
    "text",
    "empty",
    "binary",
    "json_list",
    "json_string",
    "json_null",
    "no_message",
    "null_message",
    "message_string",
    "content_number",
    "content_object",
    "garbage_line",
    "never_done",
    "truncated",
    "truncated_json",
]
RETRIED_ERRORS = ["500", "503", "500_html", "502_empty", "stream_error"]
FINAL_ERRORS = ["400", "404"]


class OllamaServer(FakeServer):
    """Ollama's REST API (see the module's docstring)."""

    MODES = MODES
    CALL_PATHS = ("/api/chat",)

    def __init__(
        self,
        mode: Any = "ok",
        script: list[Any] | None = None,
        answer: Any = None,
        models: tuple[str, ...] = ("llama3",),
    ):
        super().__init__(mode, script, **({} if answer is None else {"answer": answer}))
        self.models = models

    @staticmethod
    def talk(body: Any) -> Talk:
        msgs = (body or {}).get("messages") or [] if isinstance(body, dict) else []
        return Talk(
            "\n".join(str(m.get("content")) for m in msgs if m.get("role") == "system"),
            [t["function"]["name"] for t in (body or {}).get("tools") or []],
            sum(m.get("role") == "tool" for m in msgs),
        )

    def fixed(self, req: Request) -> Reply:
        path = req.path.split("?")[0]
        if req.method == "GET" and path == "/api/tags":
            return json_reply(
                {
                    "models": [
                        {
                            "name": m,
                            "model": m,
                            "modified_at": CREATED,
                            "size": 4_661_224_676,
                            "digest": "sha256:" + "0" * 64,
                            "details": {"format": "gguf", "family": "llama"},
                        }
                        for m in self.models
                    ]
                }
            )
        if req.method == "GET" and path == "/api/version":
            return json_reply({"version": "0.12.0"})
        if req.method == "POST" and path == "/api/show":
            name = (req.body or {}).get("model") if isinstance(req.body, dict) else None
            if name not in self.models:
                return error(404, f"model '{name}' not found")
            return json_reply(
                {
                    "modelfile": "",
                    "parameters": "",
                    "template": "{{ .Prompt }}",
                    "details": {"format": "gguf", "family": "llama"},
                    "model_info": {"general.architecture": "llama"},
                    "capabilities": ["completion", "tools"],
                    "modified_at": CREATED,
                }
            )
        return Reply(404, b"404 page not found", "text/plain")

    @property
    def url(self) -> str:
        """The host a client takes (the client adds ``/api/chat``)."""
        return self.root
