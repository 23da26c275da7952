"""Figures kept in the response cache: a figure is a pure function of its data and of the code
that draws it, so a rerun answered from the cache (the same tables, bit for bit) can copy the PNG
drawn the first time instead of drawing it again (:meth:`cooplab.agents.cache.ResponseCache.get_figure`).

A figure's key is the SHA-256 of everything it is drawn from: the values and types of the columns
it reads, the settings it shows, the source files of the code that draws it, and the versions of
matplotlib and pandas. Anything that changes a pixel changes the key, and then the figure is drawn.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd


@functools.cache
def files_digest(*paths: str) -> str:
    """The SHA-256 of these source files' bytes, in order (a drawing's code)."""
    h = hashlib.sha256()
    for p in paths:
        h.update(Path(p).read_bytes())
    return h.hexdigest()


def frame_digest(df: pd.DataFrame | None) -> bytes:
    """The columns' names and types and every value of ``df`` (index included), as bytes to hash.
    Raises TypeError or ValueError for a column whose values cannot be hashed."""
    if df is None:
        return b"none"
    head = json.dumps([[str(c), str(t)] for c, t in df.dtypes.items()]).encode()
    # pd.util is pandas' public home of the function (pandas.core is private); its stubs do not list it
    hashed = pd.util.hash_pandas_object(df, index=True)  # pyright: ignore[reportAttributeAccessIssue]
    return head + hashed.to_numpy().tobytes()


def open_cache(path: Any) -> Any:
    """The run's :class:`~cooplab.agents.cache.ResponseCache` at ``path`` to keep figures in, or
    None (no cache, or a file that cannot be opened: then figures are simply drawn)."""
    if path is None:
        return None
    import sqlite3

    from cooplab.agents.cache import ResponseCache

    try:
        return ResponseCache(path)
    except (OSError, sqlite3.Error):
        return None


def draw_or_copy(path: Path, key: str | None, cache: Any, draw: Callable[[Path], Any]) -> Path:
    """``path`` holds the figure of ``key``: copied from ``cache`` when it was drawn before, else
    drawn by ``draw(path)`` and kept there. Without a cache or a key the figure is drawn."""
    png = cache.get_figure(key) if cache is not None and key is not None else None
    if png is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(png)
        return path
    draw(path)
    if cache is not None and key is not None:
        cache.put_figure(key, path.read_bytes())
    return path


__all__ = ["draw_or_copy", "files_digest", "frame_digest", "open_cache"]
