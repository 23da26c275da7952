"""A real OpenAI-compatible chat-completions server on 127.0.0.1 that misbehaves on request.

``MisbehavingServer(mode)`` answers ``POST /v1/chat/completions`` according to ``mode`` (one of
:data:`MODES`), or to the next entry of ``script`` while it lasts (a list of modes, one per
request), or to ``mode(request_json)`` when ``mode`` is a callable returning a :class:`Reply`.
Every request is recorded in ``requests`` as (mode name, request JSON). ``hang`` holds the
connection open without answering until the server stops (the client's timeout decides).

A reply with ``chunks`` (an iterable of byte strings, made lazily: a body of any size costs no
memory) or ``trickle`` (seconds between the bytes of ``body``) is streamed, under a small socket
send buffer, and each such delivery is recorded in ``deliveries``: the bytes the client took and
whether the body was sent whole (a client that gave up cuts it short).
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# valid for every CPR decision: extra fields are ignored by each decision's schema
ANSWER = json.dumps(
    {
        "effort": 0.3,
        "punish": None,
        "vote": 1,
        "belief": "We should all fish less.",
        "proposal": "Everyone fishes at most half of the usual effort.",
    }
)


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    declared_length: int | None = None  # a Content-Length larger than the body: a truncated response
    hang: bool = False
    chunks: Iterable[bytes] | None = None  # a streamed body (chunked, unless declared_length is set)
    trickle: float | None = None  # seconds between the bytes of ``body``, sent one at a time


@dataclass
class Delivery:
    """What became of one streamed reply: the bytes the client accepted, and whether all were sent."""

    sent: int = 0
    complete: bool = False


def completion(
    content: Any = ANSWER,
    usage: Any = "default",
    *,
    message: Any = "default",
    choices: Any = "default",
    drop: tuple[str, ...] = (),
) -> dict[str, Any]:
    msg = {"role": "assistant", "content": content} if message == "default" else message
    body: dict[str, Any] = {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "x",
        "choices": [{"index": 0, "message": msg, "finish_reason": "stop"}] if choices == "default" else choices,
        "usage": {"prompt_tokens": 120, "completion_tokens": 12, "total_tokens": 132} if usage == "default" else usage,
    }
    for k in drop:
        body.pop(k, None)
    return body


def _json(obj: Any, status: int = 200) -> Reply:
    return Reply(status, json.dumps(obj).encode())  # json.dumps writes NaN/Infinity literals, as some servers do


def _max_tokens(req: dict) -> int:
    return int(req.get("max_completion_tokens") or req.get("max_tokens") or 64)


USAGE_MODES: dict[str, Callable[[dict], Any]] = {
    "huge": lambda r: {"prompt_tokens": 10**9, "completion_tokens": 10**9, "total_tokens": 2 * 10**9},
    "negative": lambda r: {"prompt_tokens": -5, "completion_tokens": -1, "total_tokens": -6},
    "nan_string": lambda r: {"prompt_tokens": "NaN", "completion_tokens": "NaN", "total_tokens": "NaN"},
    "abc": lambda r: {"prompt_tokens": "abc", "completion_tokens": "abc", "total_tokens": "abc"},
    "numeric_string": lambda r: {"prompt_tokens": "100", "completion_tokens": "10", "total_tokens": "110"},
    "nan": lambda r: {"prompt_tokens": float("nan"), "completion_tokens": float("nan"), "total_tokens": float("nan")},
    "infinity": lambda r: {"prompt_tokens": float("inf"), "completion_tokens": 3, "total_tokens": float("inf")},
    "fraction": lambda r: {"prompt_tokens": 12.5, "completion_tokens": 3, "total_tokens": 15.5},
    "bool": lambda r: {"prompt_tokens": True, "completion_tokens": True, "total_tokens": 2},
    "null": lambda r: {"prompt_tokens": None, "completion_tokens": None, "total_tokens": None},
    "missing": lambda r: "<drop>",
    "not_object": lambda r: "lots of tokens",
    "over_max_tokens": lambda r: {
        "prompt_tokens": 100,
        "completion_tokens": _max_tokens(r) + 1,
        "total_tokens": 101 + _max_tokens(r),
    },
}

BODY_MODES: dict[str, Callable[[dict], Reply]] = {
    "ok": lambda r: _json(completion()),
    "float_integral": lambda r: _json(
        completion(usage={"prompt_tokens": 120.0, "completion_tokens": 12.0, "total_tokens": 132.0})
    ),
    "null_content": lambda r: _json(completion(content=None)),
    "not_json": lambda r: Reply(200, b"this is not json {", "application/json"),
    "html": lambda r: Reply(
        200, b"<!DOCTYPE html>\n<html><body><h1>Welcome to nginx!</h1>\n</body></html>\n", "text/html"
    ),
    "text": lambda r: Reply(200, b"OK", "text/plain"),
    "empty": lambda r: Reply(200, b"", "application/json"),
    "binary": lambda r: Reply(200, b"\xff\xfe\x00\x81garbage\x00", "application/json"),
    "json_list": lambda r: _json([1, 2, 3]),
    "json_string": lambda r: _json("hello"),
    "json_null": lambda r: _json(None),
    "no_choices": lambda r: _json(completion(drop=("choices",))),
    "empty_choices": lambda r: _json(completion(choices=[])),
    "null_choices": lambda r: _json(completion(choices=None)),
    "choices_string": lambda r: _json(completion(choices="none")),
    "choice_string": lambda r: _json(completion(choices=["a"])),
    "null_message": lambda r: _json(completion(message=None)),
    "message_string": lambda r: _json(completion(message="hi")),
    "content_list": lambda r: _json(completion(content=[1, 2])),
    "content_number": lambda r: _json(completion(content=42)),
    "content_object": lambda r: _json(completion(content={"effort": 0.3})),
    "error_object": lambda r: _json({"error": {"message": "the model is overloaded", "type": "server_error"}}),
    "truncated": lambda r: Reply(
        200, json.dumps(completion()).encode()[:40], declared_length=len(json.dumps(completion()))
    ),
    "truncated_json": lambda r: Reply(200, json.dumps(completion()).encode()[:60]),
    "500": lambda r: Reply(
        500, b"Internal Server Error\n<pre>Traceback (most recent call last):\n  oops\n</pre>", "text/html"
    ),
    "502_empty": lambda r: Reply(502, b"", "text/plain"),
    "401": lambda r: _json({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}, 401),
    "404": lambda r: _json({"error": {"message": "The model x does not exist"}}, 404),
    "hang": lambda r: Reply(hang=True),
}
for _name, _usage in USAGE_MODES.items():
    BODY_MODES[_name] = (
        lambda u: lambda r: _json(completion(drop=("usage",)) if u(r) == "<drop>" else completion(usage=u(r)))
    )(_usage)

#: usage a gateway may report that is valid but below what the answer can be (charged cooplab's estimate, flagged)
LOW_USAGE_MODES: dict[str, Callable[[dict], Reply]] = {
    "zero_usage": lambda r: _json(completion(usage={"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0})),
    # one token for 8 KB of answer: the decision's JSON, then prose
    "low_usage": lambda r: _json(
        completion(
            content=ANSWER + "\n" + "we should all fish a little less. " * 240,
            usage={"prompt_tokens": 120, "completion_tokens": 1, "total_tokens": 121},
        )
    ),
}
BODY_MODES.update(LOW_USAGE_MODES)

MODES = sorted(BODY_MODES)
USAGE_ERROR_MODES = sorted(USAGE_MODES)  # a usable answer whose usage is an endpoint error
MALFORMED_MODES = [
    "not_json",
    "html",
    "text",
    "empty",
    "binary",
    "json_list",
    "json_string",
    "json_null",
    "no_choices",
    "empty_choices",
    "null_choices",
    "choices_string",
    "choice_string",
    "null_message",
    "message_string",
    "content_list",
    "content_number",
    "content_object",
    "error_object",
    "truncated",
    "truncated_json",
    "500",
    "502_empty",
]
REJECTED_MODES = ["401", "404"]


def send_body(handler: BaseHTTPRequestHandler, reply: Reply, chunked: bool, release: threading.Event) -> Delivery:
    """Write a streamed reply's body (its ``chunks``, or ``body`` a byte at a time every ``trickle``
    seconds) until it ends, the client goes away or ``release`` is set (the server stopping); what
    was delivered. Headers are the caller's."""
    body = (reply.body[i : i + 1] for i in range(len(reply.body))) if reply.trickle is not None else reply.chunks
    assert body is not None, "a streamed reply has chunks or a trickle"
    done = Delivery()
    try:
        for chunk in body:
            if reply.trickle is not None and release.wait(reply.trickle):
                break  # the server is stopping
            if chunked and not chunk:
                continue  # an empty chunk would end the body
            handler.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk)
            handler.wfile.flush()
            done.sent += len(chunk)
        else:
            if chunked:
                handler.wfile.write(b"0\r\n\r\n")
                handler.wfile.flush()
            done.complete = True
    except OSError:  # the client closed the connection
        pass
    return done


class DeliveryLog:
    """What became of a server's streamed replies (``deliveries``), kept under ``_lock`` (a Condition)."""

    deliveries: list[Delivery]
    _lock: threading.Condition

    def _delivered(self, done: Delivery) -> None:
        with self._lock:
            self.deliveries.append(done)
            self._lock.notify_all()

    def wait_deliveries(self, n: int, timeout: float = 60.0) -> list[Delivery]:
        """The streamed deliveries once ``n`` have ended (each ends when its client goes away)."""
        with self._lock:
            assert self._lock.wait_for(lambda: len(self.deliveries) >= n, timeout), (
                f"{len(self.deliveries)} of {n} deliveries ended"
            )
            return list(self.deliveries)


class MisbehavingServer(DeliveryLog):
    def __init__(self, mode: str | Callable[[dict], Reply] = "ok", script: list[str] | None = None):
        self.mode = mode
        self.script = list(script or [])
        self.requests: list[tuple[str, dict]] = []
        self.deliveries: list[Delivery] = []
        self.release = threading.Event()
        self._lock = threading.Condition()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n)
                try:
                    req = json.loads(raw or b"{}")
                except ValueError:
                    req = {}
                name, reply = server._reply(req)
                with server._lock:
                    server.requests.append((name, req))
                if reply.hang:
                    server.release.wait(120)
                    self.close_connection = True
                    return
                if reply.chunks is not None or reply.trickle is not None:
                    server._stream(self, reply)
                    return
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                self.send_header(
                    "Content-Length",
                    str(reply.declared_length if reply.declared_length is not None else len(reply.body)),
                )
                self.end_headers()
                try:
                    self.wfile.write(reply.body)
                    self.wfile.flush()
                except OSError:
                    pass
                self.close_connection = True

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        # poll often: shutdown() waits for the serve loop's next poll (0.5 s by default), at every test's end
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def _stream(self, handler: BaseHTTPRequestHandler, reply: Reply) -> None:
        """Send a streamed reply until it ends, the client goes away or the server stops."""
        handler.close_connection = True
        handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 16)
        chunked = reply.declared_length is None and reply.trickle is None
        handler.send_response(reply.status)
        handler.send_header("Content-Type", reply.content_type)
        if chunked:
            handler.send_header("Transfer-Encoding", "chunked")
        else:
            handler.send_header(
                "Content-Length", str(reply.declared_length if reply.declared_length is not None else len(reply.body))
            )
        handler.end_headers()
        self._delivered(send_body(handler, reply, chunked, self.release))

    def _reply(self, req: dict) -> tuple[str, Reply]:
        with self._lock:
            mode = self.script.pop(0) if self.script else self.mode
        if callable(mode):
            return getattr(mode, "__name__", "callable"), mode(req)
        return mode, BODY_MODES[mode](req)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def modes_seen(self) -> list[str]:
        with self._lock:
            return [m for m, _ in self.requests]

    def __enter__(self) -> "MisbehavingServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
