"""In a society with an async (LLM) phase, the plain (rule) phases run on the event loop's thread,
not a worker thread per phase per round; a society of plain phases is left as LangGraph runs it."""

from __future__ import annotations

import asyncio
import threading
from typing import TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver

from cooplab.graphs.society import build_society


class S(TypedDict):
    round: int
    max_round: int
    active: None
    log: list


def test_rule_phases_of_an_llm_society_run_on_the_loop_thread():
    threads: list[tuple[str, int]] = []

    def rule(state: S, config: RunnableConfig) -> dict:
        assert config.get("configurable", {}).get("thread_id") == "t"  # LangGraph still hands it the config
        threads.append(("rule", threading.get_ident()))
        return {"log": [*state["log"], "rule"]}

    async def llm(state: S) -> dict:
        threads.append(("llm", threading.get_ident()))
        await asyncio.sleep(0)
        return {"log": [*state["log"], "llm"], "round": state["round"] + 1}

    graph = build_society({"llm": llm, "rule": rule}, S, checkpointer=InMemorySaver())

    async def go() -> tuple[dict, int]:
        out = await graph.ainvoke(
            {"round": 1, "max_round": 3, "active": None, "log": []}, {"configurable": {"thread_id": "t"}}
        )
        return out, threading.get_ident()

    out, loop_thread = asyncio.run(go())
    assert out["log"] == ["llm", "rule"] * 3
    assert [n for n, _t in threads] == ["llm", "rule"] * 3
    assert {t for _n, t in threads} == {loop_thread}


def test_a_society_of_plain_phases_still_runs_synchronously():
    def step(state: S) -> dict:
        return {"log": [*state["log"], "step"], "round": state["round"] + 1}

    graph = build_society({"step": step}, S)
    out = graph.invoke({"round": 1, "max_round": 2, "active": None, "log": []})
    assert out["log"] == ["step", "step"]
