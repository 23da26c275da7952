"""Rule-based building blocks shared by every society, vectorized over ``(S, N)`` arrays of
``S`` societies of ``N`` agents: peer sampling and the logit (Fermi) imitation rule.

Task-specific policies live with their task (e.g. ``cooplab.tasks.cpr.rules``); they call
these with a generator from :func:`cooplab.graphs.rng.phase_rng`.
"""

from __future__ import annotations

import numpy as np

Array = np.ndarray


def col(x: Array | float) -> Array | float:
    """Broadcast a per-society ``(S,)`` parameter against ``(S, N)`` agent arrays."""
    return x[:, None] if isinstance(x, np.ndarray) and x.ndim == 1 else x


def imitation_probability(payoff_model: Array, payoff_self: Array, strength: Array | float) -> Array:
    """The logit (Fermi) imitation rule, vectorized: Pr(i <- k) = 1 / (1 + exp(-s (pi_k - pi_i))),
    with ``s`` the selection strength (delta in Gupta et al. 2025; beta in the Fermi rule of
    Traulsen, Nowak and Pacheco 2006, used by the Diner's Dilemma). The exponent is clipped to
    +-500 so that no strength or payoff gap overflows."""
    z = np.clip(col(strength) * (payoff_model - payoff_self), -500.0, 500.0)
    return 1.0 / (1.0 + np.exp(-z))


def sample_peer(alive: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """For each agent, a peer j != i drawn uniformly among the living agents; -1 if none.

    Draws an offset in 1..N-1 (uniform over the others) and redraws where it lands on a dead
    agent: rejection sampling, so the result is exactly uniform over living peers."""
    S, N = alive.shape
    if N < 2:
        return np.full((S, N), -1)
    idx = np.arange(N)[None, :]
    j = (idx + rng.integers(1, N, size=(S, N))) % N
    n_alive_others = alive.sum(axis=1, keepdims=True) - alive.astype(int)
    has_peer = n_alive_others > 0
    bad = ~np.take_along_axis(alive, j, axis=1) & has_peer
    for _ in range(200):
        if not bad.any():
            break
        redraw = (np.broadcast_to(idx, (S, N)) + rng.integers(1, N, size=(S, N))) % N
        j = np.where(bad, redraw, j)
        bad = ~np.take_along_axis(alive, j, axis=1) & has_peer
    if bad.any():  # astronomically unlikely: finish exactly with random keys
        keys = rng.random((S, N, N))
        valid = alive[:, None, :] & ~np.eye(N, dtype=bool)[None]
        j = np.where(bad, np.argmax(np.where(valid, keys, -1.0), axis=2), j)
    return np.where(has_peer, j, -1)
