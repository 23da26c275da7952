"""cooplab.sandbox: a sandboxed Python executor for agents' ``run_code`` tool.

See docs/sandbox.md.  Typical use::

    from cooplab.sandbox import SandboxConfig, SandboxSession
    with SandboxSession(SandboxConfig(dataset="data.csv"), backend="auto") as s:
        r = s.run_code("df.describe()")
        print(r.status, r.result)
"""

from .models import (
    DEFAULT_IMAGE,
    ErrorInfo,
    ExecResult,
    SandboxConfig,
    SandboxError,
    SandboxUnavailable,
)
from .session import SandboxPool, SandboxSession, open_session, resolve_backend

__all__ = [
    "DEFAULT_IMAGE",
    "ErrorInfo",
    "ExecResult",
    "SandboxConfig",
    "SandboxError",
    "SandboxPool",
    "SandboxSession",
    "SandboxUnavailable",
    "make_run_code_tool",
    "open_session",
    "resolve_backend",
]


def make_run_code_tool(session, **kwargs):
    """LangChain ``run_code`` tool over ``session`` (see :mod:`.tool`)."""
    from .tool import make_run_code_tool as _make

    return _make(session, **kwargs)
