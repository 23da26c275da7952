"""The CPR fishery's equations (Gupta et al. 2025, §3.1-3.2), each in one place.

Arrays are shaped ``(S, N)`` for per-agent quantities and ``(S,)`` for per-society ones,
where ``S`` is the number of replicate societies run side by side. Per-society parameters
are ``(S,)`` arrays (so one batch can mix conditions, e.g. the Fig. 3 grid of beta x r) or
plain floats.
"""

from __future__ import annotations

import numpy as np

from cooplab.agents.rule_based import col, count_rows, row_sum
from cooplab.agents.rule_based import imitation_probability as logit_rule

Array = np.ndarray


def harvest(alpha: Array | float, effort: Array, R: Array) -> Array:
    """h_i(t) = alpha * e_i(t) * R(t)   (§3.1.2)."""
    return col(alpha) * effort * R[:, None]


def ration(h: Array, R: Array) -> Array:
    """Scale harvests down proportionally when their sum would exceed the stock, so that
    R^+ = max(0, R - sum h) holds with sum h <= R (a no-op whenever alpha * sum e <= 1)."""
    total = row_sum(h)
    over = total > R
    if not over.any():
        return h
    scale = np.where(over, R / np.where(total > 0, total, 1.0), 1.0)
    return h * scale[:, None]


def post_harvest_stock(R: Array, h: Array) -> Array:
    """R^+(t) = max(0, R(t) - sum_i h_i(t))   (§3.1.2)."""
    return np.maximum(0.0, R - row_sum(h))


def logistic_regrowth(R_plus: Array, r: Array | float, K: Array | float) -> Array:
    """R(t+1) = R^+ + r R^+ (1 - R^+ / K)   (§3.1.2, discrete Verhulst law)."""
    return R_plus + r * R_plus * (1.0 - R_plus / K)


def round_payoff(h: Array, c: Array | float, gamma: Array | float, beta: Array | float, B: Array, V: Array) -> Array:
    """pi_i(t) = h_i - c - gamma B_i - beta V_i, so that P_i(t+1) = P_i(t) + pi_i(t)   (§3.1.3)."""
    return h - col(c) - col(gamma) * B - col(beta) * V


def smoothed_payoff(P_bar: Array, payoff: Array, ema: Array | float) -> Array:
    """P_bar_i <- (1 - lambda) P_bar_i + lambda pi_i: the exponential moving average of §3.1.3."""
    lam = col(ema)
    return (1.0 - lam) * P_bar + lam * payoff


def imitation_probability(P_bar_model: Array, P_bar_self: Array, delta: Array | float) -> Array:
    """Pr(i <- k) = 1 / (1 + exp(-delta (P_bar_k - P_bar_i)))   (§3.1.3, logit rule)."""
    return logit_rule(P_bar_model, P_bar_self, delta)


def median_norm(proposals: Array, alive: Array) -> Array:
    """G(t+1) = median of the living agents' proposed caps   (§3.1.3, median-voter rule).

    Per row: the median of the living agents' finite proposals when all of them are finite
    (``np.median``), else of their non-NaN ones (``np.nanmedian``), NaN when none is finite;
    computed from sorted rows, with the same numbers as those numpy functions (much faster for
    many short rows: numpy partitions each row in its own call)."""
    masked = proposals if alive.all() else np.where(alive, proposals, np.nan)
    S, N = masked.shape
    if N == 0:
        return np.full(S, np.nan)
    finite = np.isfinite(masked)
    if finite.all():  # the common case: every row full
        return _sorted_median(np.sort(masked, axis=1), N)
    out = np.full(S, np.nan)
    n_finite = count_rows(finite)
    full = n_finite == N
    if full.any():
        out[full] = _sorted_median(np.sort(masked[full], axis=1), N)
    some = (n_finite > 0) & ~full
    if some.any():  # np.nanmedian: the median of the non-NaN values (infinities included)
        part = np.sort(masked[some], axis=1)  # NaNs sort last
        k = count_rows(~np.isnan(part))
        rows = np.arange(len(k))
        lo, hi = part[rows, (k - 1) // 2], part[rows, k // 2]  # the same value when k is odd
        out[some] = ((0.0 + lo) + hi) / 2.0  # as np.nanmedian: the sum of both, halved
    return out


def _sorted_median(s: Array, N: int) -> Array:
    """np.median of rows already sorted: the middle value, or the mean of the middle two (a sum
    that starts from 0.0, divided by 2)."""
    if N % 2:
        return s[:, N // 2] + 0.0
    return ((0.0 + s[:, N // 2 - 1]) + s[:, N // 2]) / 2.0


def h_opt(r: Array | float, K: Array | float) -> Array | float:
    """H_opt = max_R r R (1 - R/K) = r K / 4: the logistic model's maximum sustainable yield.

    With harvest taken before regrowth, a constant total catch H is sustainable forever at
    the post-harvest stock R^+ iff r R^+ (1 - R^+/K) = H, which is largest at R^+ = K/2."""
    return r * K / 4.0


def efficiency_t(h_total: Array, r: Array | float, K: Array | float) -> Array:
    """eta(t) = sum_i h_i(t) / H_opt   (§3.2); NaN where H_opt = 0 (no growth, r = 0)."""
    H = np.broadcast_to(np.asarray(h_opt(r, K), dtype=float), np.shape(h_total))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(H > 0, h_total / np.where(H > 0, H, 1.0), np.nan)
