"""What a science team member hands on (``output_text``): a long code output keeps its end (the
traceback's last line, a table's last rows), and the member's final words are never cut away by
long tool results."""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from cooplab.agents.tools import ToolLoopResult
from cooplab.tasks.science.team import clipped, output_text


def result(outputs: list[str], final: str | None) -> ToolLoopResult:
    msgs: list[BaseMessage] = [AIMessage(content="")]
    for i, text in enumerate(outputs):
        msgs.append(ToolMessage(content=text, name="run_code", tool_call_id=f"c{i}"))
    return ToolLoopResult(
        agent_id="analyst",
        team="t1",
        round=None,
        phase="analysis",
        model="scripted",
        protocol="json",
        messages=msgs,
        final=final,
        stop_reason="final",
        steps=len(outputs) + 1,
    )


def test_a_long_output_keeps_its_start_and_its_end():
    out = "HEAD " + "x" * 5000 + " ValueError: the last line"
    text = output_text(result([out], None))
    assert text.startswith("[run_code] HEAD") and text.endswith("ValueError: the last line")
    assert "characters, the middle left out" in text and len(text) <= len("[run_code] ") + 2000


def test_the_final_words_survive_long_tool_results():
    text = output_text(result(["a" * 1900 + "END"] * 10, "r = 0.42, the effect holds"), limit=3000)
    assert text.endswith("[summary] r = 0.42, the effect holds") and len(text) <= 3000
    assert text.startswith("[run_code] a")


def test_short_outputs_are_unchanged():
    assert output_text(result(["12"], "done")) == "[run_code] 12\n[summary] done"
    assert output_text(result([], "done")) == "[summary] done"
    assert output_text(None) == ""


def test_clipped_never_exceeds_its_limit():
    for n in (0, 5, 40, 41, 100, 10_000):
        for limit in (0, 1, 10, 60, 2000):
            assert len(clipped("z" * n, limit)) == min(n, limit)
