"""The runtime context: graph-wide services that travel beside the state, not in it.

LangGraph passes it to every node (``runtime.context``); it is not checkpointed. What a
checkpoint must restore (e.g. the ledger's audit trail) lives in the state instead: a node's
charges reach it through ``cooplab.graphs.nodes.charged``.

The services are typed by the small protocols below, so this layer never imports the layers
above it: the model service is ``cooplab.agents.decisions.LLMService``, the sandbox pool
``cooplab.sandbox.pool.AgentSandboxPool``; anything with the same shape works (tests use stubs).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Protocol, runtime_checkable

from pydantic import SkipValidation, WithJsonSchema

from .ledger import Ledger


@runtime_checkable
class ModelService(Protocol):
    """What nodes need of the model service: the models and the charged, cached, retried call
    (see ``cooplab.agents.decisions.LLMService``), and the ledger it charges, which becomes
    :attr:`CoopContext.ledger`."""

    ledger: Ledger

    def model_for(self, agent: Any) -> tuple[Any, Any]: ...


@runtime_checkable
class SandboxProvider(Protocol):
    """A pool handing out one sandbox session per agent id (``cooplab.sandbox.pool.AgentSandboxPool``)."""

    def session(self, agent_id: str) -> Any: ...

    async def arun(self, agent_id: str, code: str, timeout: float | None = None) -> Any: ...

    def max_call_seconds(self, timeout: float | None = None) -> float: ...

    def close(self) -> None: ...


@dataclass
class CoopContext:
    """Typed runtime context of every cooplab graph (``context_schema=CoopContext``).

    * ``llm``: the model service (None for graphs without model calls);
    * ``sandbox``: a per-agent sandbox pool (None when no agent runs code);
    * ``run_dir``: the run directory (traces, tables), or None;
    * ``ledger``: the run's ledger, the one handle graph code uses for it (budget status,
      non-token charges such as sandbox seconds); by default the model service's own, so model
      calls and other charges are accounted for in one place. Giving a ledger that is not the
      model service's is refused: spending would be split across two caps.
    """

    # services are live objects, not data: pydantic (LangGraph's context JSON schema) leaves them
    # unvalidated and describes them in words
    __pydantic_config__: ClassVar[dict] = {"arbitrary_types_allowed": True}

    llm: Annotated[
        ModelService | None, SkipValidation, WithJsonSchema({"description": "the model service (LLMService)"})
    ] = None
    sandbox: Annotated[
        SandboxProvider | None, SkipValidation, WithJsonSchema({"description": "the per-agent sandbox pool"})
    ] = None
    run_dir: str | None = None
    ledger: Annotated[Ledger | None, SkipValidation, WithJsonSchema({"description": "the run's credit ledger"})] = None

    def __post_init__(self) -> None:
        if self.run_dir is not None:
            if not isinstance(self.run_dir, (str, os.PathLike)):
                raise TypeError(f"run_dir must be a path or None, got {type(self.run_dir).__name__}")
            self.run_dir = os.fspath(self.run_dir)
        own = getattr(self.llm, "ledger", None) if self.llm is not None else None
        if self.ledger is None:
            self.ledger = own
        elif own is not None and own is not self.ledger:
            raise ValueError("CoopContext.ledger must be the model service's ledger (one run, one budget cap)")
        if self.ledger is not None and not isinstance(self.ledger, Ledger):
            raise TypeError(f"ledger must be a Ledger, got {type(self.ledger).__name__}")


__all__ = ["CoopContext", "ModelService", "SandboxProvider"]
