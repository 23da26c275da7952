"""The ``run_code`` LangChain tool over a sandbox session (Appendix C.1)."""

from __future__ import annotations

from typing import Any, Optional

from pydantic import BaseModel, Field

from .session import SandboxSession

DESCRIPTION = (
    "Execute Python code. The dataset is pre-loaded as 'df'. Available libraries: pandas, numpy, "
    "scikit-learn, scipy, matplotlib, seaborn. Variables persist between calls. Timeout: {timeout:.0f}s. "
    "Memory limit: {memory}. The value of the last expression is shown, like in a notebook."
)


class RunCodeInput(BaseModel):
    code: str = Field(description="Python code to execute")
    description: str = Field(default="", description="One line saying what the code is for")


def make_run_code_tool(
    session: SandboxSession, *, name: str = "run_code", max_chars: int = 20_000, on_result: Optional[Any] = None
):
    """A ``StructuredTool`` running code in ``session``.

    The tool returns the text rendering of :class:`ExecResult`; the full
    result (figures included) is passed to ``on_result(result, code,
    description)`` when given, e.g. to store figures as artifacts.
    """
    from langchain_core.tools import StructuredTool

    def run_code(code: str, description: str = "") -> str:
        result = session.run_code(code)
        if on_result is not None:
            on_result(result, code, description)
        return result.to_text(max_chars=max_chars)

    cfg = session.config
    return StructuredTool.from_function(
        func=run_code,
        name=name,
        description=DESCRIPTION.format(timeout=cfg.timeout, memory=cfg.memory.upper() + "B"),
        args_schema=RunCodeInput,
    )
