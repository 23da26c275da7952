"""Many agents deciding at once: the batch helpers every LLM society's policies share."""

from __future__ import annotations

import asyncio
from typing import Any

from cooplab.agents.decisions import DecisionSpec, LLMService, decide


async def decide_all(service: LLMService, spec: DecisionSpec, jobs: list, round_: int, config: Any) -> list:
    """Ask every ``(society, agent, messages, ctx)`` job for one decision, concurrently (bounded by
    the service's concurrency limit); returns ``(society, agent, value, record)`` per job, in job
    order. Every call runs to completion (a reserved call is never cancelled half-way); then the
    first failure (e.g. ``BudgetExhausted``) is raised."""

    async def one(job):
        s, i, msgs, ctx = job
        value, rec = await decide(service, spec, msgs, society=s, agent=i, round=round_, ctx=ctx, config=config)
        return s, i, value, rec

    results = await asyncio.gather(*(one(j) for j in jobs), return_exceptions=True)
    failures = [r for r in results if isinstance(r, BaseException)]
    if failures:
        raise failures[0]
    return results


class Batch:
    """One phase's decisions by many agents, and the rows the node must record of them::

        batch = Batch(context.llm)
        for s, i, value, rec in await batch.ask(SPEC, jobs, round_, config):
            ...                      # use value
            batch.record(rec.as_dict())
        return PolicyResult(values, batch.updates())   # {"decisions": rows}

    The ledger's charges reach the state through the node (``cooplab.graphs.nodes.llm_node``)."""

    def __init__(self, service: LLMService):
        self.service = service
        self.rows: list[dict[str, Any]] = []

    async def ask(self, spec: DecisionSpec, jobs: list, round_: int, config: Any) -> list:
        return await decide_all(self.service, spec, jobs, round_, config)

    def record(self, row: dict[str, Any]) -> None:
        self.rows.append(row)

    def updates(self) -> dict[str, list[dict[str, Any]]]:
        """The decision rows (a state update)."""
        return {"decisions": self.rows}
