"""The runtime the LangGraph server hands a graph factory of ``cooplab.runs.server_graphs`` when it
starts a run (``threads.create_run``): its ``context`` is the settings the client sent."""

from __future__ import annotations

from typing import Any

from langgraph.store.memory import InMemoryStore
from langgraph_sdk.runtime import ServerRuntime, _ExecutionRuntime


def run_runtime(context: Any) -> ServerRuntime[Any]:
    """The server's runtime for a run whose context is ``context`` (what the factories read of it)."""
    return _ExecutionRuntime(access_context="threads.create_run", store=InMemoryStore(), context=context)
