"""Live tracing: the callbacks of a traced graph run, and a scrubbing LangSmith client.

:func:`tracing_callbacks` is what a runner puts in ``config["callbacks"]``: always a
:class:`~cooplab.graphs.tracing.tracer.JsonlTracer` on ``RUN_DIR/traces.jsonl``, and with
LANGSMITH_TRACING=true also a ``LangChainTracer`` that sends every run while it happens
through :func:`scrubbing_client` (values converted and scrubbed before they leave).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cooplab.graphs.rundir import TRACES_FILE

from . import convert
from .convert import to_jsonable
from .scrubbing import scrub
from .tracer import JsonlTracer


def live_tracing_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """True when LangSmith live tracing is switched on (LANGSMITH_TRACING=true, or the older
    LANGCHAIN_TRACING_V2=true)."""
    env = os.environ if environ is None else environ
    return any(env.get(k, "").strip().lower() == "true" for k in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2"))


_client_lock = threading.Lock()
_clients: dict[tuple[str | None, str | None], Any] = {}


def _hide(d: dict) -> dict:
    # live runs: lists kept whole up to MAX_MESSAGES (a model call's messages must survive)
    out = scrub(to_jsonable(d, max_list=convert.MAX_MESSAGES))
    return out if isinstance(out, dict) else {"value": out}


def scrubbing_client(endpoint: str | None = None, api_key: str | None = None):
    """A ``langsmith.Client`` that converts and scrubs inputs, outputs and metadata before
    sending (shared per endpoint/key; honours LANGSMITH_ENDPOINT/LANGSMITH_API_KEY)."""
    from langsmith import Client

    key = (endpoint, api_key)
    with _client_lock:
        if key not in _clients:
            _clients[key] = Client(
                api_url=endpoint, api_key=api_key, hide_inputs=_hide, hide_outputs=_hide, hide_metadata=_hide
            )
        return _clients[key]


def tracing_callbacks(run_dir: str | os.PathLike[str]) -> list:
    """The callback handlers for ``config["callbacks"]`` of a graph run writing to ``run_dir``.

    Always a :class:`JsonlTracer` on ``run_dir/traces.jsonl``; with LANGSMITH_TRACING=true
    also one ``LangChainTracer`` (sending live to LANGSMITH_ENDPOINT with LANGSMITH_API_KEY,
    project LANGSMITH_PROJECT) whose client scrubs secrets. LangChain adds its own
    LangChainTracer when tracing is on *only if* the callbacks hold none, so passing ours
    means runs are sent once, not twice.
    """
    handlers: list = [JsonlTracer(Path(run_dir) / TRACES_FILE)]
    if live_tracing_enabled():
        from langchain_core.tracers.langchain import LangChainTracer

        handlers.append(LangChainTracer(client=scrubbing_client()))
    return handlers
