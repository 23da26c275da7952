"""Figures kept in the response cache: a figure is a pure function of its data and of the code
that draws it, so a rerun answered from the cache (the same tables, bit for bit) can copy the PNG
drawn the first time instead of drawing it again (:meth:`cooplab.agents.cache.ResponseCache.get_figure`).

A figure's key is the SHA-256 of everything it is drawn from: the values and types of the columns
it reads, the settings it shows, the source files of the code that draws it, and the versions of
matplotlib and pandas. Anything that changes a pixel changes the key, and then the figure is drawn.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
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


def figure_key(
    name: str, code: Sequence[str], settings: Mapping[str, Any], frames: Sequence[pd.DataFrame | None]
) -> str | None:
    """The SHA-256 of a figure's inputs: its ``name``, the bytes of its drawing ``code`` (source
    files), the matplotlib and pandas versions, the ``settings`` it shows and every value of the
    ``frames`` it reads; None when a frame cannot be hashed (then the figure is drawn, never reused)."""
    import matplotlib

    h = hashlib.sha256(f"cooplab {name}\0".encode())
    h.update(f"{files_digest(*code)} {matplotlib.__version__} {pd.__version__}\0".encode())
    h.update(json.dumps(dict(settings), sort_keys=True, default=str).encode())
    try:
        for df in frames:
            h.update(b"\0" + frame_digest(df))
    except (TypeError, ValueError):  # a column of unhashable values
        return None
    return h.hexdigest()


@contextlib.contextmanager
def figure_cache(path: Any) -> Iterator[Any]:
    """The run's :class:`~cooplab.agents.cache.ResponseCache` at ``path`` to keep figures in, closed
    at the end; None when there is no cache or its file cannot be opened (figures are then drawn)."""
    cache = None
    if path is not None:
        import sqlite3

        from cooplab.agents.cache import ResponseCache

        try:
            cache = ResponseCache(path)
        except (OSError, sqlite3.Error):
            cache = None
    try:
        yield cache
    finally:
        if cache is not None:
            cache.close()


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


__all__ = ["draw_or_copy", "figure_cache", "figure_key", "files_digest", "frame_digest"]
