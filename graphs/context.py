"""The runtime context: graph-wide services that travel beside the state, not in it.

LangGraph passes it to every node (``runtime.context``); it is not checkpointed. What a
checkpoint must restore (e.g. the ledger's audit trail) lives in the state instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class CoopContext:
    llm: Any = None  # cooplab.agents.decisions.LLMService
    sandbox: Any = None  # a sandbox session factory (science teams)
    run_dir: str | None = None
