"""Configuration and result models of the sandboxed Python executor."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator

DEFAULT_IMAGE = "cooplab-sandbox:1"
LABEL = "cooplab.sandbox"

Status = Literal["ok", "error", "timeout", "oom", "crashed"]

MAX_SECONDS = 1_000_000.0  # about 11.6 days: any longer duration is a mistake


def check_seconds(value: Any, name: str = "timeout") -> float:
    """``value`` as a float of seconds in (0, MAX_SECONDS]; raises TypeError for
    a non-number (bools and strings included) and ValueError for NaN, infinities,
    zero, negative or huge values.  Used wherever a duration comes from a user,
    a config file or a model."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, got {type(value).__name__} {value!r}")
    try:
        seconds = float(value)
    except OverflowError:  # an int too large for a float
        seconds = math.inf
    if not math.isfinite(seconds) or seconds <= 0 or seconds > MAX_SECONDS:
        raise ValueError(f"{name} must be positive, finite and at most {MAX_SECONDS:.0f} s, got {value!r}")
    return seconds


class SandboxError(RuntimeError):
    """The sandbox could not be started or used (not an error of user code)."""


class SandboxUnavailable(SandboxError):
    """The requested backend cannot be used on this host (no daemon, no image...)."""


def parse_bytes(value: int | str) -> int:
    """'2g' -> 2147483648; ints are returned unchanged."""
    if isinstance(value, bool):
        raise ValueError(f"not a size: {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"not a size: {value!r}")
        return value
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*", str(value).lower())
    if not m:
        raise ValueError(f"not a size: {value!r}")
    mult = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}[m.group(2)]
    return int(float(m.group(1)) * mult)


class SandboxConfig(BaseModel):
    """Limits and options of a sandbox session (defaults follow Appendix C.1:
    30 s timeout, 2 GB memory)."""

    model_config = ConfigDict(validate_assignment=True)

    # numbers are finite and bounded (they may come from a config file or a model)
    image: str = DEFAULT_IMAGE
    dataset: Optional[Path] = None
    timeout: float = Field(default=30.0, gt=0, le=MAX_SECONDS, allow_inf_nan=False)
    interrupt_grace: float = Field(default=2.0, ge=0, le=3600, allow_inf_nan=False)
    memory: str = "2g"
    cpus: float = Field(default=1.0, gt=0, le=1024, allow_inf_nan=False)
    pids_limit: int = Field(default=256, ge=8, le=1_000_000)
    tmpfs_size: str = "256m"
    shm_size: str = "64m"
    user: str = "10001:10001"
    network: str = "none"
    max_output_bytes: int = Field(default=64 * 1024, ge=0, le=64 * 1024**2)
    max_result_chars: int = Field(default=20_000, ge=1, le=10_000_000)
    max_figures: int = Field(default=5, ge=0, le=100)
    max_figure_bytes: int = Field(default=2_000_000, ge=0, le=64 * 1024**2)
    env_allowlist: list[str] = Field(default_factory=list)
    extra_env: dict[str, str] = Field(default_factory=dict)
    idle_timeout: float = Field(default=900.0, gt=0, le=MAX_SECONDS, allow_inf_nan=False)
    start_timeout: float = Field(default=120.0, gt=0, le=MAX_SECONDS, allow_inf_nan=False)
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

    @field_validator("memory", "tmpfs_size", "shm_size")
    @classmethod
    def _size_parses(cls, v: str) -> str:
        if parse_bytes(v) <= 0:
            raise ValueError(f"size must be positive: {v!r}")
        return v

    def with_overrides(self, **overrides: Any) -> "SandboxConfig":
        """A validated copy with ``overrides`` applied (``model_copy`` would skip validation)."""
        if not overrides:
            return self.model_copy()
        return SandboxConfig.model_validate({**self.model_dump(), **overrides})

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
