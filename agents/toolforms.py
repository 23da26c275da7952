"""A tool's OpenAI form (``convert_to_openai_tool``), made once per kind of tool.

A science run makes its tools afresh for each of its agents, and LangChain derives a new tool's
schema through a new pydantic model every time (about 0.45 ms a tool). This module imports nothing
of cooplab, so the model classes and the tool loop can both use it.
"""

from __future__ import annotations

import copy
from typing import Any

from langchain_core.tools import StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool

#: (name, description, args schema class) -> the tool's OpenAI form; see :func:`kept_form`
_SPECS: dict[tuple[str, str, type], dict[str, Any]] = {}
_MAX_SPECS = 1024


def kept_form(tool: Any) -> dict[str, Any]:
    """The tool's OpenAI form (``convert_to_openai_tool``), shared: callers must not change it.

    For a plain ``StructuredTool`` whose arguments are a pydantic class, the form depends only on
    the name, the description and that class, so it is kept under those. Any other tool is
    converted every time: a subclass may compute its schema as it likes.
    """
    schema = getattr(tool, "args_schema", None)
    if type(tool) is not StructuredTool or not isinstance(schema, type):
        return convert_to_openai_tool(tool)
    key = (tool.name, tool.description, schema)
    spec = _SPECS.get(key)
    if spec is None:
        spec = convert_to_openai_tool(tool)
        if len(_SPECS) >= _MAX_SPECS:  # tools made with new classes again and again: start over
            _SPECS.clear()
        _SPECS[key] = spec
    return spec


def openai_tool(tool: Any) -> dict[str, Any]:
    """``convert_to_openai_tool(tool)``, computed once per kind of tool (a copy the caller owns)."""
    return copy.deepcopy(kept_form(tool))


__all__ = ["kept_form", "openai_tool"]
