"""A tool's OpenAI form is computed once per kind of tool (agents/toolforms.py, ``openai_tool``): the
same form LangChain gives, a copy the caller may change, and never another tool's."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.prebuilt import ToolRuntime
from pydantic import BaseModel, Field

from cooplab.agents import toolforms as F
from cooplab.agents import tools as T
from cooplab.agents.models.scripted import ScriptedChatModel
from cooplab.tasks.science.workspace import workspace_tools


class _Args(BaseModel):
    text: str = Field(description="what to echo")


class _Other(BaseModel):
    text: str = Field(description="something else")
    times: int = Field(ge=1, le=9)


def _tool(name: str = "echo", description: str = "Echo the text.", schema: type = _Args) -> StructuredTool:
    async def echo(text: str, runtime: ToolRuntime, times: int = 1) -> str:
        return text * times

    echo.__annotations__ = {"text": str, "runtime": ToolRuntime, "times": int, "return": str}
    return StructuredTool.from_function(coroutine=echo, name=name, args_schema=schema, description=description)


def test_the_form_is_langchains_for_every_science_tool_made_afresh():
    for _ in range(3):  # new tool objects each time, as a science run makes them per agent
        tools = workspace_tools(None, code_tool=T.run_code_tool())
        assert [F.openai_tool(t) for t in tools] == [convert_to_openai_tool(t) for t in tools]
        assert [T.tool_args_schema(t) for t in tools] == [
            convert_to_openai_tool(t)["function"]["parameters"] for t in tools
        ]


def test_a_changed_copy_never_reaches_the_next_caller():
    a = F.openai_tool(_tool())
    a["function"]["parameters"]["properties"]["text"]["description"] = "tampered"
    a["function"]["name"] = "tampered"
    T.tool_args_schema(_tool())["properties"].clear()
    b = F.openai_tool(_tool())
    assert b == convert_to_openai_tool(_tool())
    assert b["function"]["name"] == "echo" and "text" in b["function"]["parameters"]["properties"]


@pytest.mark.parametrize(
    "other",
    [
        {"name": "shout"},
        {"description": "Echo the text twice."},
        {"schema": _Other},
    ],
)
def test_tools_that_differ_in_name_description_or_arguments_get_their_own_form(other: dict[str, Any]):
    base, changed = F.openai_tool(_tool()), F.openai_tool(_tool(**other))
    assert changed == convert_to_openai_tool(_tool(**other)) and changed != base


def test_a_tool_of_another_kind_is_converted_every_time():
    class Switching(BaseTool):
        name: str = "count"
        description: str = "Count."
        args_schema: type = _Args
        wide: bool = False

        @property
        def tool_call_schema(self) -> Any:  # a subclass may compute its schema as it likes
            return _Other if self.wide else _Args

        def _run(self, text: str) -> str:
            return text

    t = Switching()
    first = F.openai_tool(t)
    t.wide = True
    second = F.openai_tool(t)
    assert "times" not in first["function"]["parameters"]["properties"]
    assert "times" in second["function"]["parameters"]["properties"]  # not served from the memo


def test_the_memo_stays_bounded_when_tools_bring_new_classes_each_time(monkeypatch):
    monkeypatch.setattr(F, "_SPECS", {})
    monkeypatch.setattr(F, "_MAX_SPECS", 4)
    for i in range(10):
        schema = type(f"Args{i}", (BaseModel,), {"__annotations__": {"text": str}})
        assert F.openai_tool(_tool(schema=schema)) == convert_to_openai_tool(_tool(schema=schema))
        assert len(F._SPECS) <= 4


def test_the_scripted_model_binds_the_same_forms():
    tools = [_tool(), _tool(name="shout", schema=_Other)]
    bound = ScriptedChatModel(answers=[]).bind_tools(tools)
    assert bound.kwargs["tools"] == [convert_to_openai_tool(t) for t in tools]
    bound.kwargs["tools"][0]["function"]["name"] = "tampered"  # the binding's own copy
    assert F.openai_tool(tools[0])["function"]["name"] == "echo"
