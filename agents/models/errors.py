"""What can go wrong with a model, as exceptions the call path sorts into retry, stop or one line
(``agents/calls.py``), and :func:`one_line` / :func:`snippet` to quote what a server sent in them.

Nothing here imports another module of cooplab's agents: every model module, the providers'
table, the HTTP clients and the local model's process manager raise these.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cooplab.limits import ConfigError
from cooplab.limits import one_line as _one_line


class ModelSpecError(ValueError):
    """A bad ``--model`` value (user-facing, one line)."""


class MissingAPIKey(ConfigError):
    """A hosted provider's model without its API key in the environment (one line; checked before
    any work, so nothing is created)."""


class TransientModelError(RuntimeError):
    """A transport failure worth retrying: timeout, refused connection, 429, 5xx."""

    def __init__(self, kind: str, message: str = ""):
        super().__init__(f"{kind}: {message}" if message else kind)
        self.kind = kind


class PermanentModelError(RuntimeError):
    """The model refused the request or cannot serve at all, and would refuse again (a request its
    grammar compiler rejects, a model file that does not load): no retry, the run stops cleanly."""


class CallTimedOut(TransientModelError):
    """No complete answer within the call timeout (``--call-timeout``): retried like a transport
    failure, then the run stops cleanly."""

    def __init__(self, seconds: float):
        super().__init__("timeout", f"no complete answer within {seconds:g} s")
        self.seconds = seconds


class EndpointResponseError(TransientModelError):
    """The endpoint answered, but not with a chat completion (a body that is not JSON, no
    ``choices``, a null message, content that is not text, ...): retried like a transport
    failure, then the run stops cleanly."""

    def __init__(self, message: str):
        super().__init__("malformed response", message)


@dataclass(frozen=True)
class FailureFacts:
    """What the one-line message of a failed model call says about its cause (``calls.failure_message``)."""

    status: int | None  # the HTTP status (None: none, or an HTTP-layer error without one)
    text: str  # the error's own text, on one line
    timeout: float | None  # a call timeout's seconds (CallTimedOut)
    malformed: str | None  # a malformed response's text (EndpointResponseError)
    why: str  # what an unreachable server's line says: the error and its transport cause


class RemoteFailure(Exception):
    """A model call that failed in a model process (``agents/model_processes.py``): ``transient``
    (retried) or not, as the worker classified the original error, with the facts its one-line message
    needs. The call path reads it as it would read the original."""

    def __init__(self, text: str, transient: bool, facts: FailureFacts):
        super().__init__(text)
        self.transient, self.facts = transient, facts

    def __reduce__(self) -> tuple:
        return (RemoteFailure, (str(self), self.transient, self.facts))


class ModelProcessError(PermanentModelError):
    """A model process (``agents/model_processes.py``) that could not start or build its model: the run
    stops with one line (what the worker's interpreter printed is above it)."""


class RemoteError(RuntimeError):
    """An error in a model process that is not the model endpoint's (a programming error) and whose own
    exception could not be sent back: its type and text."""


def one_line(value: Any, limit: int = 240) -> str:
    """``value`` as text on one line (whitespace collapsed, lone surrogates replaced, bytes decoded
    as UTF-8 with U+FFFD for what is not), cut to ``limit`` characters."""
    return _one_line(value.decode("utf-8", "replace") if isinstance(value, (bytes, bytearray)) else value, limit)


def snippet(value: Any, limit: int = 80) -> str:
    """``value`` quoted for an error message: :func:`one_line`, cut to ``limit``, in quotes."""
    return repr(one_line(value, limit))
