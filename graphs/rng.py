"""Seeded, resumable randomness for graph nodes.

Each phase of each round draws from its own generator derived from ``(seed, round, phase)``
(numpy ``SeedSequence`` entropy), so a run is a pure function of its recorded seed: no
generator state has to be checkpointed, and a run resumed from any checkpoint draws exactly
what the uninterrupted run would have drawn.
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np


def phase_id(phase: str) -> int:
    """A stable 32-bit id of a phase name (crc32; Python's ``hash`` is salted per process)."""
    return zlib.crc32(phase.encode("utf-8"))


def phase_rng(seed: int, round_: int, phase: str) -> np.random.Generator:
    """The generator for ``phase`` in round ``round_`` of a run seeded with ``seed``."""
    return np.random.default_rng([int(seed), int(round_), phase_id(phase)])


class RowSubsetGenerator:
    """A generator facade for computing on a subset ``rows`` of ``n_total`` societies.

    Per-society draws (``random`` and ``integers``, whose first axis is the society) are drawn
    from ``rng`` for all ``n_total`` societies, in the same shapes and order as a computation
    on the whole batch, and the subset's rows returned: the subset sees exactly the numbers the
    whole-batch computation gives those societies, and the stream stays aligned for the next
    draw. ``standard_normal`` is passed through unchanged: it serves per-event draws (e.g. one
    mutation per adopter, events that only running societies produce), whose count and order
    are already the same either way. Other methods are not provided, on purpose."""

    def __init__(self, rng: np.random.Generator, rows: np.ndarray, n_total: int) -> None:
        self._rng, self._rows, self._n = rng, rows, int(n_total)

    def _full(self, size: Any) -> tuple[int, ...]:
        shape = tuple(int(x) for x in np.atleast_1d(size))
        if not shape or shape[0] != len(self._rows):
            raise ValueError(
                f"a per-society draw must have the subset's {len(self._rows)} societies on its first axis, got {shape}"
            )
        return (self._n, *shape[1:])

    def random(self, size: Any) -> np.ndarray:
        return np.take(self._rng.random(self._full(size)), self._rows, axis=0)

    def integers(self, low: Any, high: Any = None, size: Any = None, **kw: Any) -> np.ndarray:
        return np.take(self._rng.integers(low, high, size=self._full(size), **kw), self._rows, axis=0)

    def standard_normal(self, size: Any = None, **kw: Any) -> np.ndarray:
        return self._rng.standard_normal(size, **kw)
