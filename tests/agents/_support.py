"""Shared helpers of the tool-agent tests: a scripted model service and small tools."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool

from cooplab.agents.cache import ResponseCache
from cooplab.agents.decisions import LLMService
from cooplab.agents.models import ModelSpec, ScriptedChatModel
from cooplab.agents.tools import ToolLoopResult
from cooplab.graphs.ledger import Ledger


def service(
    answers: list[Any] | None = None,
    *,
    budget: Any = None,
    ledger: Ledger | None = None,
    max_tokens: int = 64,
    per_agent: dict[str, list[Any]] | None = None,
    cache: ResponseCache | None = None,
    unit_rates: dict | None = None,
    name: str = "t",
) -> LLMService:
    """A model service of scripted models (answers in call order, no cycling): ``answers`` for every
    agent, ``per_agent`` for agents with their own script."""
    spec = ModelSpec("scripted", name, max_tokens=max_tokens)
    models: dict[str, tuple[ModelSpec, BaseChatModel]] = {
        "default": (spec, ScriptedChatModel(answers=list(answers or []), cycle=False))
    }
    for agent, script in (per_agent or {}).items():
        models[agent] = (spec, ScriptedChatModel(answers=list(script), cycle=False))
    if ledger is None:
        ledger = Ledger(budget=budget, unit_rates=unit_rates or {})
    return LLMService(models=models, ledger=ledger, cache=cache or ResponseCache(None))


def loop_of(exc: BaseException) -> ToolLoopResult:
    """The partial loop a run-ending error carries (agents/tools.py attaches it as ``exc.tool_loop``)."""
    res = getattr(exc, "tool_loop", None)
    assert isinstance(res, ToolLoopResult), f"{type(exc).__name__} carries no tool loop"
    return res


def call(name: str, usage: dict | None = None, call_id: str | None = None, **args: Any) -> dict:
    """A scripted answer calling one tool."""
    a: dict[str, Any] = {"tool_calls": [{"name": name, "args": args, **({"id": call_id} if call_id else {})}]}
    if usage is not None:
        a["usage"] = usage
    return a


def last_tool_result(messages) -> str:
    tm = [m for m in messages if isinstance(m, ToolMessage)]
    assert tm, "the model never saw a tool result"
    return str(tm[-1].content)


def quoting_final(prefix: str):
    """A scripted answer computed from what the model was sent: the final answer quotes the number
    in the last tool result (so it only contains the value if the loop handed the result back)."""

    def answer(messages):
        nums = re.findall(r"-?\d+(?:\.\d+)?", last_tool_result(messages))
        return {"text": f"{prefix} {nums[-1] if nums else '?'}"}

    return answer


class Counter:
    """Tools that count their calls."""

    def __init__(self):
        self.calls: list[tuple] = []

        @tool
        def add(a: int, b: int) -> int:
            """Add two integers."""
            self.calls.append(("add", a, b))
            return a + b

        @tool
        def explode(what: str) -> str:
            """A tool that always fails."""
            self.calls.append(("explode", what))
            raise RuntimeError(f"boom: {what}")

        self.add, self.explode = add, explode

    @property
    def tools(self):
        return [self.add, self.explode]


USAGE = {"prompt_tokens": 50, "completion_tokens": 10}
COST_PER_CALL = (Decimal(50) * Decimal("0.0005") + Decimal(10) * Decimal("0.003")) / 1000


class WatchedLedger(Ledger):
    """A ledger that records the peak of spent + in flight after every reservation and charge."""

    def __post_init__(self):
        super().__post_init__()
        self.peak = Decimal(0)

    def _watch(self):
        self.peak = max(self.peak, self.spent + self.in_flight)

    def reserve(self, amount, call_id=None):
        r = super().reserve(amount, call_id)
        self._watch()
        return r

    def commit(self, res, entry):
        e = super().commit(res, entry)
        self._watch()
        return e


class RecordingLedger(WatchedLedger):
    """A watched ledger that also records every reservation asked for."""

    def __post_init__(self):
        super().__post_init__()
        self.reservations: list[Decimal] = []

    def reserve(self, amount, call_id=None):
        self.reservations.append(Decimal(amount))
        return super().reserve(amount, call_id)
