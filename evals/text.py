"""Numbers and values as plain text for people: CLI lines, report lines, figure titles. Never a
Python repr (``None``, ``{'a': 1}``, ``['x']``) and never ``± nan``."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def mean_sem_text(stat: Mapping[str, Any] | None, digits: int) -> str:
    """``mean ± s.e.m.`` of a summary statistic (``{"mean", "sem"}``); the s.e.m. is left out where
    there is none (one society: NaN, or null once read back from JSON); ``n/a`` without a mean."""
    stat = stat or {}
    mean, sem = stat.get("mean"), stat.get("sem")
    if not _finite(mean):
        return "n/a"
    return f"{mean:.{digits}f}" + (f" ± {sem:.{digits}f}" if _finite(sem) else "")


def counts_text(counts: Mapping[str, Any] | None) -> str:
    """``a 3, b 0`` for a mapping of labels to counts; ``none`` when empty."""
    return ", ".join(f"{k} {plain(v)}" for k, v in (counts or {}).items()) or "none"


def plain(value: Any) -> str:
    """A value as a person reads it: ``none`` for None, ``true``/``false``, ``5,5`` for a list,
    ``a 1, b 2`` for a mapping, ``0.1`` for a float (``%g``), text as it is."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, Mapping):
        return counts_text(value)
    if isinstance(value, (list, tuple, set, frozenset)):
        return ",".join(plain(v) for v in value) or "none"
    return str(value)


def model_display_name(spec: Any) -> str:
    """A model spec as a figure or table names it: ``openai:gpt-4o-mini`` -> ``gpt-4o-mini``,
    ``local`` -> the local model's name (``SmolLM2-135M-Instruct``), ``scripted:DIR/cautious.json``
    -> ``cautious (scripted)``, ``builtin:oracle:x`` -> ``oracle:x (built-in)``; never a path."""
    text = str(spec or "").strip()
    kind, _, name = text.partition(":")
    if text == "local":
        from cooplab.agents.model_files import MODELS

        return MODELS["smollm2"].title.split(",")[0]
    if kind == "scripted" and name:
        stem = name.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
        return f"{stem.rsplit('.', 1)[0] if '.' in stem else stem} (scripted)"
    if kind == "builtin" and name:
        return f"{name} (built-in)"
    if kind == "openai" and name:
        return name
    return text or "unknown model"


def number_text(value: Any, digits: int = 3, missing: str = "n/a") -> str:
    """A finite number with ``digits`` decimals; ``missing`` for None, NaN, infinities or a non-number."""
    return f"{value:.{digits}f}" if _finite(value) else missing
