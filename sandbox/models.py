"""Configuration and result models of the sandboxed Python executor."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal, Optional

from pydantic import BaseModel, Field, field_validator

DEFAULT_IMAGE = "cooplab-sandbox:1"
LABEL = "cooplab.sandbox"

Status = Literal["ok", "error", "timeout", "oom", "crashed"]


class SandboxError(RuntimeError):
    """The sandbox could not be started or used (not an error of user code)."""


class SandboxUnavailable(SandboxError):
    """The requested backend cannot be used on this host (no daemon, no image...)."""


def parse_bytes(value: int | str) -> int:
    """'2g' -> 2147483648; ints are returned unchanged."""
    if isinstance(value, int):
        return value
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*", str(value).lower())
    if not m:
        raise ValueError(f"not a size: {value!r}")
    mult = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}[m.group(2)]
    return int(float(m.group(1)) * mult)


class SandboxConfig(BaseModel):
    """Limits and options of a sandbox session (defaults follow Appendix C.1:
    30 s timeout, 2 GB memory)."""

    image: str = DEFAULT_IMAGE
    dataset: Optional[Path] = None
    timeout: float = 30.0
    interrupt_grace: float = 2.0
    memory: str = "2g"
    cpus: float = 1.0
    pids_limit: int = 256
    tmpfs_size: str = "256m"
    shm_size: str = "64m"
    user: str = "10001:10001"
    network: str = "none"
    max_output_bytes: int = 64 * 1024
    max_result_chars: int = 20_000
    max_figures: int = 5
    max_figure_bytes: int = 2_000_000
    env_allowlist: list[str] = Field(default_factory=list)
    extra_env: dict[str, str] = Field(default_factory=dict)
    idle_timeout: float = 900.0
    start_timeout: float = 120.0
    preload: list[str] = Field(default_factory=list)
    # local backend only
    local_python: Optional[str] = None

    @field_validator("dataset")
    @classmethod
    def _dataset_exists(cls, v: Optional[Path]) -> Optional[Path]:
        if v is None:
            return None
        p = Path(v).expanduser().resolve()
        if not p.is_file():
            raise ValueError(f"dataset not found: {v}")
        return p

    @property
    def memory_bytes(self) -> int:
        return parse_bytes(self.memory)


class ErrorInfo(BaseModel):
    type: str
    message: str
    traceback: str = ""


class ExecResult(BaseModel):
    """Outcome of one ``run_code`` call."""

    status: Status
    stdout: str = ""
    stderr: str = ""
    result: Optional[str] = None
    figures: list[bytes] = Field(default_factory=list, repr=False)
    error: Optional[ErrorInfo] = None
    state_reset: bool = False
    truncated: bool = False
    duration: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_text(self, max_chars: int = 20_000) -> str:
        """A compact rendering for an LLM (what the tool returns)."""
        parts: list[str] = [f"status: {self.status}"]
        if self.state_reset:
            parts.append("NOTE: the sandbox was restarted; all variables were lost and `df` was reloaded.")
        if self.stdout:
            parts.append("stdout:\n" + self.stdout.rstrip("\n"))
        if self.stderr:
            parts.append("stderr:\n" + self.stderr.rstrip("\n"))
        if self.result is not None:
            parts.append("result:\n" + self.result)
        if self.figures:
            parts.append(f"figures: {len(self.figures)} PNG image(s) captured")
        if self.error is not None:
            tb = self.error.traceback.strip()
            parts.append(f"error: {self.error.type}: {self.error.message}" + (f"\n{tb}" if tb else ""))
        if self.truncated:
            parts.append("(some output was truncated)")
        text = "\n".join(parts)
        if len(text) > max_chars:
            half = max_chars // 2
            text = text[:half] + "\n...[truncated]...\n" + text[-half:]
        return text

    def to_json_dict(self) -> dict:
        d = self.model_dump(exclude={"figures"})
        d["figures"] = len(self.figures)
        return d
