"""Google's Gemini API (generativelanguage, ``v1beta``) on 127.0.0.1, misbehaving on request
(``GoogleServer(mode)``), as the google-genai SDK calls it (langchain-google-genai 4.x drives that
SDK, and passes its ``base_url`` on as ``HttpOptions(base_url=...)``, so a loopback server is
reachable without any patching).

``POST /v1beta/models/NAME:generateContent`` (or ``/v1/...``: google-genai 3.x calls ``v1``) answers a
``GenerateContentResponse``:
``candidates[].content.parts[]`` (``{"text": ...}``, or ``{"functionCall": {"name", "args"}}`` when
the request forces one function through ``toolConfig.functionCallingConfig`` mode ``ANY``, or the
answer is a call), ``finishReason``, and ``usageMetadata`` ``{promptTokenCount,
candidatesTokenCount, totalTokenCount}``; ``:streamGenerateContent?alt=sse`` sends the same as
server-sent events. Errors use Google's body ``{"error": {"code", "message", "status"}}`` (400
``INVALID_ARGUMENT``, 403 ``PERMISSION_DENIED``, 404 ``NOT_FOUND``, 429 ``RESOURCE_EXHAUSTED``,
500 ``INTERNAL``, 503 ``UNAVAILABLE``). ``GET /v1beta/models/NAME`` (or ``v1``) describes the model.

What the server answers comes from ``answer`` (see :mod:`tests.fakes.base`): a string (the text),
or ``answer(request)`` returning a string or an :class:`Answer`.
"""

from __future__ import annotations

import json
import re
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
    texts,
    truncations,
)

_CALL = re.compile(r"^/(v1beta|v1|v1alpha)/models/([^/:]+):(generateContent|streamGenerateContent)$")


def forced_function(body: Any) -> str | None:
    """The one function a request forces (mode ``ANY`` naming one function, or ``ANY`` with one declared), or None."""
    if not isinstance(body, dict):
        return None
    cfg = (body.get("toolConfig") or {}).get("functionCallingConfig") or {}
    if cfg.get("mode") != "ANY":
        return None
    names = cfg.get("allowedFunctionNames") or [
        d.get("name") for t in body.get("tools") or [] for d in t.get("functionDeclarations") or []
    ]
    return names[0] if len(names) == 1 else None


def parts_of(req: Request) -> list[dict[str, Any]]:
    """The parts answering ``req``: a forced function gets the answer's JSON as its ``args``."""
    answer = req.answer
    if not isinstance(answer, Answer):
        name = forced_function(req.body)
        if name is None:
            return [{"text": str(answer)}]
        try:
            args = json.loads(answer)
        except ValueError:
            args = {"text": answer}
        answer = Answer(tool_calls=[(name, args)])
    parts: list[dict[str, Any]] = [{"text": answer.text}] if answer.text else []
    return parts + [{"functionCall": {"name": n, "args": a}} for n, a in answer.tool_calls]


def usage(prompt: Any = 120, candidates: Any = 12) -> dict[str, Any]:
    total = prompt + candidates if all(type(v) in (int, float) for v in (prompt, candidates)) else prompt
    return {
        "promptTokenCount": prompt,
        "candidatesTokenCount": candidates,
        "totalTokenCount": total,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}],
    }


def response(
    req: Request,
    *,
    candidates: Any = "default",
    content: Any = "default",
    usage_: Any = "default",
    finish: str = "STOP",
    drop: tuple[str, ...] = (),
) -> dict[str, Any]:
    """A ``GenerateContentResponse`` answering ``req`` (fields replaceable or dropped)."""
    m = _CALL.match(req.path.split("?")[0])
    cand = {
        "content": {"parts": parts_of(req), "role": "model"} if content == "default" else content,
        "finishReason": finish,
        "index": 0,
    }
    body = {
        "candidates": [cand] if candidates == "default" else candidates,
        "usageMetadata": usage() if usage_ == "default" else usage_,
        "modelVersion": m.group(2) if m else "gemini-x",
        "responseId": "resp-fake-1",
    }
    for k in drop:
        body.pop(k, None)
    return body


def ok_reply(req: Request, body: dict | None = None) -> Reply:
    """``body`` (by default the answer's response) as JSON, or as events for ``streamGenerateContent``."""
    body = response(req) if body is None else body
    if ":streamGenerateContent" in req.path:
        return Reply(200, b"data: " + json.dumps(body).encode() + b"\r\n\r\n", "text/event-stream")
    return json_reply(body)


STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


def error(code: int, text: str) -> Reply:
    """An error in Google's format."""
    return json_reply({"error": {"code": code, "message": text, "status": STATUS[code]}}, code)


def _usage_mode(values: Callable[[Request], tuple[Any, Any]]) -> Callable[[Request], Reply]:
    def reply(req: Request) -> Reply:
        p, c = values(req)
        if p == "<drop>":
            return ok_reply(req, response(req, drop=("usageMetadata",)))
        return ok_reply(req, response(req, usage_="lots of tokens" if p == "<not_object>" else usage(p, c)))

    return reply


MODES: dict[str, Callable[[Request], Reply]] = {
    "ok": ok_reply,
    **COMMON_MODES,
    "400": lambda r: error(400, "API key not valid. Please pass a valid API key."),
    "403": lambda r: error(403, "Method doesn't allow unregistered callers (callers without established identity)."),
    "404": lambda r: error(
        404, "models/x is not found for API version v1beta, or is not supported for generateContent."
    ),
    "429": lambda r: error(429, "Resource has been exhausted (e.g. check quota)."),
    "500": lambda r: error(
        500,
        "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting",
    ),
    "503": lambda r: error(503, "The model is overloaded. Please try again later."),
    # the response is not one
    "no_candidates": lambda r: ok_reply(r, response(r, drop=("candidates",))),
    "empty_candidates": lambda r: ok_reply(r, response(r, candidates=[])),
    "null_candidates": lambda r: ok_reply(r, response(r, candidates=None)),
    "candidates_string": lambda r: ok_reply(r, response(r, candidates="none")),
    "no_content": lambda r: ok_reply(r, response(r, content=None)),
    "empty_parts": lambda r: ok_reply(r, response(r, content={"parts": [], "role": "model"})),
    "part_not_object": lambda r: ok_reply(r, response(r, content={"parts": ["text"], "role": "model"})),
    "text_number": lambda r: ok_reply(r, response(r, content={"parts": [{"text": 42}], "role": "model"})),
    "args_string": lambda r: ok_reply(
        r,
        response(
            r,
            content={
                "parts": [{"functionCall": {"name": forced_function(r.body) or "x", "args": "{not json"}}],
                "role": "model",
            },
        ),
    ),
    "safety": lambda r: ok_reply(r, response(r, content=None, finish="SAFETY")),
    "blocked_prompt": lambda r: ok_reply(
        r, {"promptFeedback": {"blockReason": "OTHER"}, "usageMetadata": usage(120, 0)}
    ),
    "max_tokens_cut": lambda r: ok_reply(
        r, response(r, content={"parts": [{"text": '{"effort": 0.'}], "role": "model"}, finish="MAX_TOKENS")
    ),
    "oversize": lambda r: oversize(
        b'{"candidates":[{"content":{"parts":[{"text":"', b'"}],"role":"model"},"finishReason":"STOP"}]}'
    ),
    **truncations(ok_reply),
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
    "no_candidates",
    "empty_candidates",
    "null_candidates",
    "candidates_string",
    "no_content",
    "empty_parts",
    "part_not_object",
    "text_number",
    "truncated",
    "truncated_json",
]
#: a candidate without content parts is malformed when it stopped normally; with a reason (SAFETY, ...)
#: or a blocked prompt it is an empty answer (``safety``, ``blocked_prompt``)
RETRIED_ERRORS = ["429", "500", "503", "500_html", "502_empty"]
FINAL_ERRORS = ["400", "403", "404"]


class GoogleServer(FakeServer):
    """Google's Gemini API (see the module's docstring)."""

    MODES = MODES

    def is_call(self, req: Request) -> bool:
        return req.method == "POST" and _CALL.match(req.path.split("?")[0]) is not None

    @staticmethod
    def talk(body: Any) -> Talk:
        body = body if isinstance(body, dict) else {}
        parts = [p for c in body.get("contents") or [] for p in c.get("parts") or []]
        return Talk(
            texts(body.get("systemInstruction", "")),
            [d["name"] for t in body.get("tools") or [] for d in t.get("functionDeclarations") or []],
            sum("functionResponse" in p for p in parts),
        )

    def fixed(self, req: Request) -> Reply:
        m = re.match(r"^/(?:v1beta|v1|v1alpha)/models/([^/:?]+)$", req.path.split("?")[0])
        if req.method == "GET" and m:
            return json_reply(
                {
                    "name": f"models/{m.group(1)}",
                    "displayName": m.group(1),
                    "inputTokenLimit": 1_048_576,
                    "outputTokenLimit": 8192,
                    "supportedGenerationMethods": ["generateContent", "countTokens"],
                }
            )
        return error(404, f"Not found: {req.method} {req.path}")

    @property
    def url(self) -> str:
        """The base URL a client takes (the SDK adds ``/v1beta/models/...``)."""
        return self.root
