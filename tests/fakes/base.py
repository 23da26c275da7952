"""The machinery the fake provider servers share: a real ``ThreadingHTTPServer`` on 127.0.0.1 that
answers each request with a :class:`Reply` chosen by a mode, records what it was asked, and can hang,
stream, trickle or send more than a client may read (the shape of ``tests/agents/misbehaving_server.py``,
with routes for several paths and methods, and response headers).

A subclass names its modes in ``MODES`` (name -> ``f(Request) -> Reply``) and may answer some paths
itself (:meth:`FakeServer.fixed`, e.g. a model listing). ``FakeServer(mode, script=[...])`` answers the
next requests from ``script`` while it lasts, then with ``mode``; ``mode`` may also be a callable
``f(Request) -> Reply``. Every request is kept in ``requests``. What a well-behaved reply says comes
from ``answer``: a value, or ``answer(request)`` (each server documents the values it takes); by
default :data:`ANSWER`, valid for every CPR decision.
"""

from __future__ import annotations

import json
import math
import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Self

from tests.agents.misbehaving_server import ANSWER, Delivery, DeliveryLog, send_body
from tests.agents.misbehaving_server import Reply as _BaseReply

__all__ = [
    "ANSWER",
    "Answer",
    "Talk",
    "texts",
    "Delivery",
    "FakeServer",
    "Reply",
    "Request",
    "USAGE_VALUES",
    "json_reply",
    "oversize",
    "truncations",
    "COMMON_MODES",
]


@dataclass
class Reply(_BaseReply):
    """A reply of :class:`tests.agents.misbehaving_server.Reply`'s kinds, with response headers."""

    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Answer:
    """What the model says, whatever the provider: ``text``, and tool calls as ``(name, arguments)`` pairs."""

    text: str = ""
    tool_calls: list[tuple[str, dict]] = field(default_factory=list)


@dataclass
class Talk:
    """What a chat request holds, read the same way for every provider: the system prompt's text,
    the names of the tools offered, and how many tool results the conversation already has."""

    system: str = ""
    tools: list[str] = field(default_factory=list)
    tool_results: int = 0


def texts(value: Any) -> str:
    """The text in a prompt field that is a string or a list of blocks/parts with ``text``."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return texts(value.get("parts", value.get("text", "")))
    if isinstance(value, list):
        return "\n".join(texts(v) for v in value)
    return ""


@dataclass
class Request:
    """One request as received: method, path (with its query), headers (lower-case names), JSON body."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    mode: str = ""
    answer: Any = None  # what the model says to it (the server's ``answer``, resolved)

    def max_tokens(self, default: int = 64) -> int:
        """The output cap the request asked for, wherever the provider puts it (int, else ``default``)."""
        b = self.body if isinstance(self.body, dict) else {}
        for value in (
            b.get("max_tokens"),
            (b.get("options") or {}).get("num_predict"),
            (b.get("generationConfig") or {}).get("maxOutputTokens"),
        ):
            if type(value) is int and value > 0:
                return value
        return default


def json_reply(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> Reply:
    """``obj`` as a JSON body (NaN and Infinity written as the literals some servers send)."""
    return Reply(status, json.dumps(obj).encode(), headers=dict(headers or {}))


#: hostile usage reports, as (input count, output count) in each provider's own fields; "<drop>" leaves
#: the report out, "<not_object>" puts a string where the report's object belongs
USAGE_VALUES: dict[str, Callable[[Request], tuple[Any, Any]]] = {
    "huge": lambda r: (10**9, 10**9),
    "negative": lambda r: (-5, -1),
    "nan_string": lambda r: ("NaN", "NaN"),
    "abc": lambda r: ("abc", "abc"),
    "numeric_string": lambda r: ("100", "10"),
    "nan": lambda r: (math.nan, math.nan),
    "infinity": lambda r: (math.inf, 3),
    "fraction": lambda r: (12.5, 3),
    "bool": lambda r: (True, True),
    "null": lambda r: (None, None),
    "missing": lambda r: ("<drop>", "<drop>"),
    "not_object": lambda r: ("<not_object>", "<not_object>"),
    "over_max_tokens": lambda r: (100, r.max_tokens() + 1),
}

HUGE_BODY = 300 * 2**20  # bytes of an oversize answer (made lazily, chunk by chunk)


def oversize(head: bytes, tail: bytes, size: int = HUGE_BODY) -> Reply:
    """A 200 reply whose body is ``head``, ``size`` bytes of 'x', ``tail``, streamed chunked."""
    block = b"x" * 2**16

    def chunks() -> Iterator[bytes]:
        yield head
        for _ in range(size // len(block)):
            yield block
        yield tail

    return Reply(200, chunks=chunks())


#: the transport-level misbehaviour every provider's server has, whatever its wire format
COMMON_MODES: dict[str, Callable[[Request], Reply]] = {
    "not_json": lambda r: Reply(200, b"this is not json {"),
    "html": lambda r: Reply(
        200, b"<!DOCTYPE html>\n<html><body><h1>Welcome to nginx!</h1></body></html>\n", "text/html"
    ),
    "text": lambda r: Reply(200, b"OK", "text/plain"),
    "empty": lambda r: Reply(200, b""),
    "binary": lambda r: Reply(200, b"\xff\xfe\x00\x81garbage\x00"),
    "json_list": lambda r: json_reply([1, 2, 3]),
    "json_string": lambda r: json_reply("hello"),
    "json_null": lambda r: json_reply(None),
    "502_empty": lambda r: Reply(502, b"", "text/plain"),
    "500_html": lambda r: Reply(
        500, b"Internal Server Error\n<pre>Traceback (most recent call last):\n  oops\n</pre>", "text/html"
    ),
    "hang": lambda r: Reply(hang=True),
}


def truncations(ok: Callable[[Request], Reply]) -> dict[str, Callable[[Request], Reply]]:
    """Modes that cut the valid reply ``ok`` short: a Content-Length the body never reaches, a body
    that simply stops mid-JSON, and ``trickle``: the whole body, one byte every 50 ms (each read
    is quick, the answer takes minutes: only a wall-clock bound on the call ends it)."""

    def declared(r: Request) -> Reply:
        whole = ok(r).body
        return Reply(200, whole[:40], declared_length=len(whole))

    def cut(r: Request) -> Reply:
        whole = ok(r).body
        return Reply(200, whole[: len(whole) // 2])

    def trickle(r: Request) -> Reply:
        reply = ok(r)
        return Reply(200, b" " * 2000 + reply.body, reply.content_type, trickle=0.05)  # JSON may start with blanks

    return {"truncated": declared, "truncated_json": cut, "trickle": trickle}


class FakeServer(DeliveryLog):
    """A provider's API on 127.0.0.1, answering by mode (see the module's docstring)."""

    MODES: ClassVar[dict[str, Callable[[Request], Reply]]] = {}
    #: the paths (prefixes) of the API's calls that modes answer; other paths go to :meth:`fixed`
    CALL_PATHS: ClassVar[tuple[str, ...]] = ()

    def __init__(
        self,
        mode: str | Callable[[Request], Reply] = "ok",
        script: Sequence[str | Callable[[Request], Reply]] | None = None,
        answer: Any = ANSWER,
    ):
        if isinstance(mode, str) and mode not in self.MODES:
            raise KeyError(f"unknown mode {mode!r}")
        self.mode = mode
        self.answer = answer
        self.script: list[str | Callable[[Request], Reply]] = list(script or [])
        self.requests: list[Request] = []
        self.deliveries: list[Delivery] = []
        self.release = threading.Event()
        self._lock = threading.Condition()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                server._handle(self, "GET")

            def do_POST(self) -> None:  # noqa: N802
                server._handle(self, "POST")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        # poll often: shutdown() waits for the serve loop's next poll (0.5 s by default), at every test's end
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    # --- what to answer ---------------------------------------------------------------------
    def fixed(self, req: Request) -> Reply:
        """The answer to a request outside :attr:`CALL_PATHS` (a subclass adds its listings)."""
        return json_reply({"error": f"no route {req.method} {req.path}"}, 404)

    def is_call(self, req: Request) -> bool:
        return req.method == "POST" and req.path.split("?")[0].startswith(self.CALL_PATHS)

    def _reply(self, req: Request) -> Reply:
        req.answer = self.answer(req) if callable(self.answer) else self.answer
        if not self.is_call(req):
            req.mode = "fixed"
            return self.fixed(req)
        with self._lock:
            mode = self.script.pop(0) if self.script else self.mode
        if callable(mode):
            req.mode = getattr(mode, "__name__", "callable")
            return mode(req)
        req.mode = mode
        return self.MODES[mode](req)

    # --- the HTTP side ------------------------------------------------------------------------
    def _handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        n = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(n) if n else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        req = Request(method, handler.path, {k.lower(): v for k, v in handler.headers.items()}, body)
        reply = self._reply(req)
        with self._lock:
            self.requests.append(req)
            self._lock.notify_all()
        handler.close_connection = True
        if reply.hang:
            self.release.wait(120)
            return
        if reply.chunks is not None or reply.trickle is not None:
            self._stream(handler, reply)
            return
        self._head(
            handler, reply, length=reply.declared_length if reply.declared_length is not None else len(reply.body)
        )
        try:
            handler.wfile.write(reply.body)
            handler.wfile.flush()
        except OSError:
            pass

    @staticmethod
    def _head(handler: BaseHTTPRequestHandler, reply: Reply, length: int | None) -> None:
        handler.send_response(reply.status)
        handler.send_header("Content-Type", reply.content_type)
        for k, v in reply.headers.items():
            handler.send_header(k, v)
        if length is None:
            handler.send_header("Transfer-Encoding", "chunked")
        else:
            handler.send_header("Content-Length", str(length))
        handler.send_header("Connection", "close")
        handler.end_headers()

    def _stream(self, handler: BaseHTTPRequestHandler, reply: Reply) -> None:
        """Send a streamed reply until it ends, the client goes away or the server stops."""
        handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 16)
        chunked = reply.declared_length is None and reply.trickle is None
        self._head(
            handler,
            reply,
            None if chunked else (reply.declared_length if reply.declared_length is not None else len(reply.body)),
        )
        self._delivered(send_body(handler, reply, chunked, self.release))

    @staticmethod
    def talk(body: Any) -> Talk:
        """The request's :class:`Talk` (each provider's server reads its own format)."""
        raise NotImplementedError

    # --- what was asked -----------------------------------------------------------------------
    def calls(self) -> list[Request]:
        """The requests of the API's calls (not listings), in order."""
        with self._lock:
            return [r for r in self.requests if r.mode != "fixed"]

    def wait_calls(self, n: int, timeout: float = 60.0) -> list[Request]:
        """The calls once ``n`` have been read. A client that gives up at its own timeout may do so
        before a busy server's thread has read its request (it arrives later), or, its event loop late
        on a busy machine, before the request went out at all (it never arrives)."""
        with self._lock:
            read = self._lock.wait_for(lambda: len(self.calls()) >= n, timeout)
            assert read, f"{len(self.calls())} of {n} calls read"
            return self.calls()

    def modes_seen(self) -> list[str]:
        return [r.mode for r in self.calls()]

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    @property
    def url(self) -> str:
        """The base URL a provider's client is given (each server says)."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
