"""The HTTP clients of hosted models (OpenAI-compatible, Anthropic, Google, Ollama), with a cap on what a server can
make cooplab read.

A chat completion's body is bounded by the call's ``max_tokens`` (:func:`~cooplab.agents.usage.body_bytes_bound`).
:class:`BodyCap` holds a server to it through the hooks of an httpx client: cooplab asks for an
uncompressed body (``Accept-Encoding: identity``, so a small compressed body cannot unpack into a
huge one); a compressed body, or a declared length past the cap, is refused before any of it is
read; a body streamed without a length is read until the first byte past the cap, then its
connection is closed. Each is a malformed response (:class:`~cooplab.agents.models.errors.EndpointResponseError`):
retried, then the run stops with one line. Error bodies (4xx, 5xx) are capped the same way.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import httpx

from cooplab.agents.models.errors import EndpointResponseError, one_line
from cooplab.agents.usage import body_bytes_bound


def capped_clients(
    default_tokens: int,
    *,
    timeout: float,
    trust_env: bool,
    http: Any = httpx,
    rewrite: Callable[[bytes], bytes] | None = None,
) -> tuple[Any, Any]:
    """A (sync, async) pair of clients whose every response is held to :class:`BodyCap`. ``http``:
    the client library the SDK takes, ``httpx`` or its drop-in fork ``httpx2`` (Anthropic's SDK);
    ``rewrite``: see :class:`BodyCap`."""
    cap = BodyCap(default_tokens, http, rewrite)
    return (
        http.Client(
            timeout=timeout, trust_env=trust_env, event_hooks={"request": [cap.request], "response": [cap.response]}
        ),
        http.AsyncClient(
            timeout=timeout, trust_env=trust_env, event_hooks={"request": [cap.arequest], "response": [cap.aresponse]}
        ),
    )


def request_cap(sent: dict[str, Any]) -> Any:
    """The output cap a provider's JSON request names: ``max_completion_tokens`` or ``max_tokens``
    (OpenAI, Anthropic), ``options.num_predict`` (Ollama), ``generationConfig.maxOutputTokens``
    (Google)."""
    return (
        sent.get("max_completion_tokens")
        or sent.get("max_tokens")
        or (sent.get("options") or {}).get("num_predict")
        or (sent.get("generationConfig") or {}).get("maxOutputTokens")
    )


class BodyCap:
    """httpx event hooks holding a response to the bytes its request's ``max_tokens`` (or
    ``max_completion_tokens``; ``default_tokens`` when it names neither) allows. With ``rewrite``,
    a 200 body is read whole (capped, and kept as received inside :func:`recorded_bodies`) and the
    SDK reads ``rewrite(body)`` instead: how a provider's hostile usage counts are taken out of what
    an SDK that validates them would refuse, while cooplab checks them as received."""

    def __init__(self, default_tokens: int, http: Any = httpx, rewrite: Callable[[bytes], bytes] | None = None):
        self.default_tokens = default_tokens
        self.streams = _stream_classes(http)
        self.http, self.rewrite = http, rewrite

    def request(self, request: httpx.Request) -> None:
        request.headers["Accept-Encoding"] = "identity"

    async def arequest(self, request: httpx.Request) -> None:
        self.request(request)

    def limit(self, request: httpx.Request) -> tuple[int, int]:
        """(the request's output cap in tokens, the body bytes that allows)."""
        try:
            tokens = request_cap(json.loads(request.content))
        except Exception:  # noqa: BLE001 - not a JSON request of ours: the model's own cap
            tokens = None
        if type(tokens) is not int or tokens < 1:
            tokens = self.default_tokens
        return tokens, body_bytes_bound(tokens)

    def _checked_head(self, response: httpx.Response) -> tuple[int, Callable[[], Exception]]:
        """Refuse a compressed body or a declared length past the cap; (the cap, the error for a
        body that passes it while it is read)."""
        tokens, limit = self.limit(response.request)
        encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise EndpointResponseError(
                f"the body is compressed ({one_line(encoding, 40)}) although cooplab asked for none"
            )
        declared = response.headers.get("Content-Length", "").strip()
        if declared.isdigit() and int(declared) > limit:
            raise EndpointResponseError(
                f"the body is {int(declared)} bytes, more than the {limit} an answer of at most "
                f"{tokens} tokens can need"
            )
        return limit, lambda: EndpointResponseError(
            f"the body passed {limit} bytes, more than an answer of at most {tokens} tokens "
            "can need; cooplab stopped reading it"
        )

    def response(self, response: httpx.Response) -> None:
        response.stream = self.streams[0](response.stream, *self._checked_head(response))
        if self.rewrite is not None and response.status_code == 200:
            response.stream = self.http.ByteStream(self.rewrite(b"".join(response.stream)))

    async def aresponse(self, response: httpx.Response) -> None:
        response.stream = self.streams[1](response.stream, *self._checked_head(response))
        if self.rewrite is not None and response.status_code == 200:
            response.stream = self.http.ByteStream(self.rewrite(b"".join([c async for c in response.stream])))


#: where the bodies read in the current context are kept (see :func:`recorded_bodies`)
_RECORDING: ContextVar[list[bytearray] | None] = ContextVar("cooplab_recorded_bodies", default=None)


@contextmanager
def recorded_bodies() -> Iterator[list[bytearray]]:
    """The response bodies capped clients read in this context (this task or thread), in order, as
    received: how a provider's usage report is read before its SDK's validation coerces it (a
    ``"100"`` or ``true`` into a number). Each body is capped, so what is kept is too."""
    bodies: list[bytearray] = []
    token = _RECORDING.set(bodies)
    try:
        yield bodies
    finally:
        _RECORDING.reset(token)


class _Counter:
    """Counts the bytes of a body as they come; ``error()`` is raised past ``limit``. Inside
    :func:`recorded_bodies`, the bytes are kept too."""

    def __init__(self, stream: Any, limit: int, error: Callable[[], Exception]):
        self.stream, self.limit, self.error, self.read = stream, limit, error, 0
        record = _RECORDING.get()
        self.kept: bytearray | None = None
        if record is not None:
            self.kept = bytearray()
            record.append(self.kept)

    def _count(self, chunk: bytes) -> bytes:
        self.read += len(chunk)
        if self.read > self.limit:
            raise self.error()
        if self.kept is not None:
            self.kept += chunk
        return chunk


_STREAMS: dict[str, tuple[type, type]] = {}


def _stream_classes(http: Any) -> tuple[type, type]:
    """The (sync, async) capped byte streams of the client library ``http`` (made once each)."""
    made = _STREAMS.get(http.__name__)
    if made is not None:
        return made

    class _Capped(_Counter, http.SyncByteStream):
        def __iter__(self) -> Iterator[bytes]:
            for chunk in self.stream:
                yield self._count(chunk)

        def close(self) -> None:
            self.stream.close()

    class _AsyncCapped(_Counter, http.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            async for chunk in self.stream:
                yield self._count(chunk)

        async def aclose(self) -> None:
            await self.stream.aclose()

    made = _STREAMS[http.__name__] = (_Capped, _AsyncCapped)
    return made
