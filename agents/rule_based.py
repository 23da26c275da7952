"""Rule-based building blocks shared by every society, vectorized over ``(S, N)`` arrays of
``S`` societies of ``N`` agents: peer sampling and the logit (Fermi) imitation rule, plus a few
exact, faster stand-ins for numpy row operations on short rows (few agents per society).

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


# --- exact, faster row operations ----------------------------------------------------------
# numpy reduces a C-contiguous (S, N) array along its last axis with one inner-loop call per
# row, which dominates for short rows (N = 10 agents: 3-4x the time of the additions). These
# give the same numbers bit for bit with a few whole-column operations (pinned against numpy by
# tests/cpr/test_fast_paths.py).


def flat_peers(j: Array, N: int) -> Array:
    """Flat indices into an (S, N) array of the agents ``j`` (S, N) of each row: ``s * N + j[s, i]``."""
    return j + (np.arange(len(j)) * N)[:, None]


def take_peers(x: Array, j: Array) -> Array:
    """``np.take_along_axis(x, j, axis=1)`` for 2-D ``x`` and indices ``0 <= j < N``, through
    flat indices (the same values, several times faster)."""
    return np.take(x.reshape(-1), flat_peers(j, x.shape[1]))


def count_rows(x: Array) -> Array:
    """``x.sum(axis=1)`` (int64) of a 2-D bool or signed-integer array (integer sums are exact
    in any order)."""
    if x.ndim != 2:
        return x.sum(axis=1)
    if x.dtype == np.bool_ and x.shape[1] <= 255:  # a uint8 sum cannot overflow
        return np.einsum("ij->i", x.view(np.uint8)).astype(np.int64)
    if x.dtype.kind == "i" and x.dtype.itemsize <= 8:
        return np.einsum("ij->i", x, dtype=np.int64)
    return x.sum(axis=1)


#: numpy's pairwise summation unrolls by 8 up to this many elements (PW_BLOCKSIZE)
_PAIRWISE_BLOCK = 128


def row_sum(x: Array) -> Array:
    """``x.sum(axis=1)`` of a 2-D float64 array, bit for bit: for C-contiguous rows of at most
    128 elements, numpy's pairwise summation of each row (plain running sum below 8 elements;
    else 8 running partial sums combined as ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)),
    then the remainder; the result added to the identity 0.0) done column by column. Anything
    else goes to ``x.sum(axis=1)``."""
    if x.ndim != 2 or x.dtype != np.float64 or not x.flags.c_contiguous or not 0 < x.shape[1] <= _PAIRWISE_BLOCK:
        return x.sum(axis=1)
    N = x.shape[1]
    c = x.T  # c[k] is column k (a strided view)
    if N < 8:
        res = c[0] + 0.0
        for k in range(1, N):
            res += c[k]
        return res
    r = [c[k] for k in range(8)]  # the 8 partial sums (views of the first 8 columns until added to)
    end = N - N % 8
    for i in range(8, end, 8):
        r = [r[k] + c[i + k] for k in range(8)]
    res = r[0] + r[1]
    res += r[2] + r[3]
    t = r[4] + r[5]
    t += r[6] + r[7]
    res += t
    for k in range(end, N):
        res += c[k]
    res += 0.0  # the reduction starts from 0.0: a sum of -0.0s is +0.0
    return res


def sample_peer(alive: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """For each agent, a peer j != i drawn uniformly among the living agents; -1 if none.

    Draws an offset in 1..N-1 (uniform over the others) and redraws where it lands on a dead
    agent: rejection sampling, so the result is exactly uniform over living peers."""
    S, N = alive.shape
    if N < 2:
        return np.full((S, N), -1)
    idx = np.arange(N)[None, :]
    j = idx + rng.integers(1, N, size=(S, N))
    j -= N * (j >= N)  # (i + offset) mod N, with i + offset < 2N
    if alive.all():  # everybody alive: the first draw is a living peer for every agent
        return j
    n_alive_others = count_rows(alive)[:, None] - alive
    has_peer = n_alive_others > 0
    bad = ~take_peers(alive, j) & has_peer
    for _ in range(200):
        if not bad.any():
            break
        redraw = (np.broadcast_to(idx, (S, N)) + rng.integers(1, N, size=(S, N))) % N
        j = np.where(bad, redraw, j)
        bad = ~take_peers(alive, j) & has_peer
    if bad.any():  # astronomically unlikely: finish exactly with random keys
        keys = rng.random((S, N, N))
        valid = alive[:, None, :] & ~np.eye(N, dtype=bool)[None]
        j = np.where(bad, np.argmax(np.where(valid, keys, -1.0), axis=2), j)
    return np.where(has_peer, j, -1)
