"""The payoff functions of the six games (paper §3.1.1 and Appendix B.4), vectorized over
``(S, N)`` arrays: ``S`` simulations side by side, ``N`` players numbered group by group.

Every function takes integer actions and the game's constants (keyword arguments whose defaults
are the paper's values) and returns the payoffs of one round (Collective Risk: of one game of R
rounds). ``group`` is the ``(N,)`` group index of each player (0, 0, ..., 1, 1, ...). No function
draws randomness: Collective Risk's loss takes the uniform draws ``u`` from its caller (the
settle node draws them from ``phase_rng(seed, R, "risk")``), so a payoff is a pure function of
its inputs.
"""

from __future__ import annotations

import numpy as np

Array = np.ndarray


def _group_sum(x: Array, group: Array, n_groups: int) -> Array:
    """(S, G) sum of ``x`` (S, N) over each group's players."""
    onehot = np.zeros((x.shape[-1], n_groups))
    onehot[np.arange(x.shape[-1]), group] = 1.0
    return x @ onehot


def group_sizes_of(group: Array) -> Array:
    return np.bincount(np.asarray(group))


# --- Weakest-Link (§3.1.1, App. B.4.1) -------------------------------------------------------------
def weakest_link(effort: Array, *, min_weight: float = 2.0, effort_cost: float = 1.0) -> Array:
    """Weakest-Link (minimum-effort coordination; Van Huyck, Battalio and Beil 1990), paper §3.1.1:

        u_i = 2 * min_{j in all N players} e_j - 1 * e_i,    e_i in {0, ..., 10}

    (``min_weight`` = 2, ``effort_cost`` = 1). The minimum runs over both groups: one low-effort
    player in the other group lowers everyone's payoff."""
    e = np.asarray(effort, dtype=float)
    return min_weight * e.min(axis=-1, keepdims=True) - effort_cost * e


# --- Common-Pool Resource (§3.1.1, App. B.4.2) -----------------------------------------------------
def cpr(extract: Array, *, capacity: float = 100, multiplier: float = 3.0) -> Array:
    """Common-Pool Resource (Ostrom 1990), paper §3.1.1:

        u_i = x_i + 3 * max(0, C - sum_j x_j) / N,    x_i in {0, ..., 10}, C = 100

    (``multiplier`` = 3; the sum and N run over all players of both groups)."""
    x = np.asarray(extract, dtype=float)
    N = x.shape[-1]
    left = np.maximum(0.0, capacity - x.sum(axis=-1, keepdims=True))
    return x + multiplier * left / N


def same_group(group: Array) -> Array:
    """(N, N) bool: i and j are different players of the same group (who may sanction whom)."""
    g = np.asarray(group)
    m = g[:, None] == g[None, :]
    np.fill_diagonal(m, False)
    return m


def sanction_totals(sanction: Array) -> tuple[Array, Array]:
    """(given, received), each (S, N): tokens player i spent on sanctions, and tokens aimed at i
    (``sanction[s, i, j]`` = tokens i spent on j)."""
    s = np.asarray(sanction)
    return s.sum(axis=-1), s.sum(axis=-2)


def cpr_sanction(
    extract: Array,
    sanction: Array,
    group: Array,
    *,
    capacity: float = 100,
    multiplier: float = 3.0,
    sanction_cost: float = 1.0,
    sanction_damage: float = 2.0,
) -> dict[str, Array]:
    """CPR with sanctioning (Casari and Plott 2003; Fehr and Gächter 2000), paper §3.1.1:

        u_i = u_i^CPR - 1 * sum_j s_ij - 2 * sum_j s_ji

    where s_ij >= 0 are the tokens i spends to sanction j (``sanction[s, i, j]``), allowed only
    within i's own group: entries between groups (and s_ii) are ignored here as they are refused
    by the sanction node (``sanction_cost`` = 1, ``sanction_damage`` = 2). Returns the payoff, the
    CPR payoff and the tokens given and received."""
    s = np.where(same_group(group), np.asarray(sanction), 0)
    given, received = sanction_totals(s)
    u_cpr = cpr(extract, capacity=capacity, multiplier=multiplier)
    return {
        "payoff": u_cpr - sanction_cost * given - sanction_damage * received,
        "cpr_payoff": u_cpr,
        "given": given,
        "received": received,
    }


# --- Collective Risk (§3.1.1, App. B.4.4) ----------------------------------------------------------
def collective_risk(
    contributions: Array, u: Array, *, endowment: int = 10, threshold: int = 100, loss_probability: float = 0.5
) -> dict[str, Array]:
    """Collective Risk (threshold public goods; Milinski et al. 2008), paper §3.1.1. Over R rounds
    each player contributes c_i^(r) in {0, ..., 10} of a per-round endowment of 10 and saves the
    rest:

        savings_i = sum_r (10 - c_i^(r)),    met = sum_i sum_r c_i^(r) >= T = 100
        u_i = savings_i                      if met
        u_i = savings_i * (1 - L)            otherwise, L ~ Bernoulli(0.5), one draw per simulation
        E[u_i] = savings_i * (1 - 0.5 * 1[not met])

    ``contributions``: (S, R, N); ``u``: (S,) uniform draws in [0, 1) (L = u < loss_probability).
    The sum runs over both groups. Returns payoff (realized), expected_payoff, savings, the
    simulation's total, met and lost."""
    c = np.asarray(contributions)
    R = c.shape[-2]
    savings = (R * endowment - c.sum(axis=-2)).astype(float)
    total = c.sum(axis=(-2, -1))
    met = total >= threshold
    lost = ~met & (np.asarray(u) < loss_probability)
    return {
        "payoff": np.where(lost[:, None], 0.0, savings),
        "expected_payoff": savings * np.where(met, 1.0, 1.0 - loss_probability)[:, None],
        "savings": savings,
        "total": total,
        "met": met,
        "lost": lost,
    }


# --- O-Ring (§3.1.1, App. B.4.5) -------------------------------------------------------------------
def o_ring(
    withdraw: Array,
    group: Array,
    *,
    pool: float = 200,
    max_withdraw: int = 10,
    scale: float = 1000.0,
    success_threshold: float = 50.0,
    reward: float = 200.0,
    withdraw_cost: float = 1.0,
) -> dict[str, Array]:
    """O-Ring team production (Kremer 1993; Holmström 1982), paper §3.1.1:

        q_i = w_i / 10,    P_g = 1000 * (R - sum_{j in all N} w_j) / R * prod_{i in g} q_i,    R = 200
        success = min_g P_g >= 50
        u_i = 200 / N * 1[success] - 1 * w_i,    w_i in {0, ..., 10}

    The pool R is shared by both groups (one group's withdrawals lower the other's production) and
    one failing group fails the whole system. Returns the payoff, each group's production (S, G) and
    success (S,)."""
    w = np.asarray(withdraw, dtype=float)
    g = np.asarray(group)
    N = w.shape[-1]
    q = w / max_withdraw
    left = np.maximum(0.0, pool - w.sum(axis=-1)) / pool
    G = int(g.max()) + 1
    prod = np.stack([q[..., g == k].prod(axis=-1) for k in range(G)], axis=-1)
    production = scale * left[..., None] * prod
    success = production.min(axis=-1) >= success_threshold
    return {"payoff": reward / N * success[..., None] - withdraw_cost * w, "production": production, "success": success}


# --- Public Goods (§3.1.1, App. B.4.6) -------------------------------------------------------------
def public_goods(
    allocation: Array, group: Array, *, group_multiplier: float = 2.0, global_multiplier: float = 1.5
) -> dict[str, Array]:
    """Intergroup Public Goods (Isaac and Walker 1988), paper §3.1.1. Each player splits an
    endowment of 10 into keep k_i, group pool g_i and global pool n_i (k + g + n = 10):

        u_i = k_i + 2.0 * sum_{j in G_i} g_j / |G_i| + 1.5 * sum_{j in all N} n_j / N

    ``allocation``: (S, N, 3) as (keep, group, global). Returns the payoff, each group's pool
    (S, G) and the global pool (S,)."""
    a = np.asarray(allocation, dtype=float)
    g = np.asarray(group)
    N = a.shape[-2]
    sizes = group_sizes_of(g)
    pools = _group_sum(a[..., 1], g, len(sizes))
    glob = a[..., 2].sum(axis=-1)
    payoff = a[..., 0] + group_multiplier * (pools / sizes)[..., g] + global_multiplier * glob[..., None] / N
    return {"payoff": payoff, "group_pools": pools, "global_pool": glob}
