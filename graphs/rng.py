"""Seeded, resumable randomness for graph nodes.

Each phase of each round draws from its own generator derived from ``(seed, round, phase)``
(numpy ``SeedSequence`` entropy), so a run is a pure function of its recorded seed: no
generator state has to be checkpointed, and a run resumed from any checkpoint draws exactly
what the uninterrupted run would have drawn.
"""

from __future__ import annotations

import zlib

import numpy as np


def phase_id(phase: str) -> int:
    """A stable 32-bit id of a phase name (crc32; Python's ``hash`` is salted per process)."""
    return zlib.crc32(phase.encode("utf-8"))


def phase_rng(seed: int, round_: int, phase: str) -> np.random.Generator:
    """The generator for ``phase`` in round ``round_`` of a run seeded with ``seed``."""
    return np.random.default_rng([int(seed), int(round_), phase_id(phase)])
