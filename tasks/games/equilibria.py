"""Nash and Pareto references of the six games, derived from the payoffs of
:mod:`cooplab.tasks.games.model` (paper §3.1.1 and Appendix Table 3), and the reference action
profiles the Nash and Pareto players play.

"Pareto" is the socially efficient outcome (§3.1): a profile that maximizes the sum of payoffs
(every such profile is Pareto-optimal); "Nash" is the equilibrium the paper names as the
reference (the risk-dominant or free-riding one where there are several). Derivations, with N
players in groups G_1..G_k (the constraints are checked by the parameter models, so they hold
for every accepted configuration; ``tests/games/test_equilibria.py`` confirms each by brute force
over every profile of small games):

Weakest-Link, u_i = a min_j e_j - b e_i, a > b > 0, e in {0..E}.
    Nash: every symmetric profile (e, ..., e) is an equilibrium (lowering one's effort to e' < e
    gives a e' - b e' < (a - b) e; raising it only adds cost) and no other profile is (the
    players above the minimum gain by lowering to it). Reference: e* = 0 (risk-dominant).
    Pareto: welfare sum_i (a min e - b e_i) <= N (a - b) min e is maximal at e = E for everyone.
    Metric (mean effort): Nash 0, Pareto E.

CPR, u_i = x_i + m max(0, C - sum x) / N, 1 < m < N, m C >= N X.
    Nash: du_i/dx_i = 1 - m/N > 0 while the pool lasts and 1 after, so x_i = X is dominant.
    Pareto: welfare W = sum x + m max(0, C - sum x) = m C - (m - 1) sum x while sum x <= C (falling
    in sum x since m > 1) and sum x <= N X <= m C beyond: maximal at x = 0 for everyone.
    Metric (mean extraction): Nash X, Pareto 0.

CPR with sanctioning: after the extraction stage, any sanction costs its sender and brings no
    material gain, so s_ij = 0 in every subgame (by backward induction also in the last of a
    finite number of rounds, and so in every round); extraction is then the CPR's: x = X.
    Pareto: sanctions only destroy payoff, so s = 0 and x = 0 (Table 3: Nash "10, 0", Pareto "0, -").
    Metric (mean extraction): Nash X, Pareto 0.

Collective Risk, E[u_i] = (R e - sum_r c_i^r)(1 - p 1[sum c < T]), p R e <= T <= p N R e.
    Payoffs depend on each player's total C_i only. Nash (the paper's one-shot reference: free
    riding): against all others at 0 a deviator reaching T alone gets R e - T <= (1 - p) R e, the
    expected payoff of not contributing, and anything short of T only costs, so c = 0 is an
    equilibrium. (Profiles meeting T exactly are equilibria too: the threshold game has both.)
    Pareto: welfare is N R e - sum C if T is met and (1 - p) N R e if not; since T <= p N R e it is
    maximal when the total is exactly T. Reference: the fair share T / (N R) per player and round
    (the Pareto players contribute integers adding up to exactly T, as evenly as possible).
    Metric (mean contribution per round): Nash 0, Pareto T / (N R). (The paper writes 1.25 for
    T / (N R) with T = 100 and R = 10, which is N = 8, one of its prompts' member counts; with its
    default N = 10 the fair share is 1.0. Here N is always the configured one; the game's
    ``pareto_reference`` replaces the value, e.g. 1.25 to follow the paper's number.)

O-Ring, u_i = B/N 1[success] - c w_i, success iff every group's P_g >= theta.
    Nash: with everyone else at 0 every group product is 0 whatever one player does, so w = 0 is
    a best response: all-zero is an equilibrium (Table 3's "Low"). (The cheapest successful
    profiles are equilibria too: anyone withdrawing less breaks the success.)
    Pareto: welfare is B 1[success] - c sum w, so the optimum is the cheapest successful profile
    (B > c t* is checked). For a fixed group total s_g the product prod q_i is largest for the
    most even split (integers differing by at most 1), so t* = min total such that even splits
    s_g with sum s_g = t* reach theta in every group at the pool factor (pool - t*)/pool; found by
    :func:`oring_min_total`. At the defaults (2 groups of 5): all w = 6, P_g = 54.4, u = 14.
    Metric (mean withdrawal): Nash 0, Pareto t*/N (the game's ``pareto_reference`` replaces it).

Proximity (:meth:`Reference.proximity`) is min(1, |m - Pareto| / |Nash - Pareto|); the uncapped
value is :meth:`Reference.distance`.

Public Goods, u_i = k_i + f_g sum_{G_i} g_j / |G_i| + f_n sum n_j / N, k + g + n = E,
    1 < f_g < min |G|, f_n < f_g, f_n < N.
    Nash: a token kept returns 1 to its owner, one in the group pool f_g/|G_i| < 1, one in the
    global pool f_n/N < 1: keeping everything is dominant.
    Pareto: a token returns 1 (keep), f_g (group) or f_n (global) to the whole population, so the
    welfare optimum puts everything in the group pool.
    Metric (mean group-pool contribution): Nash 0, Pareto E.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cooplab.tasks.games import model as pf


@dataclass(frozen=True)
class Reference:
    """The primary metric's value under Nash play and under Pareto play, and where the Pareto value
    comes from (``basis``: the derivation, or "set" when the game's ``pareto_reference`` gives it)."""

    nash: float
    pareto: float
    basis: str = field(default="derived", compare=False)  # a label: references compare by their values

    def distance(self, value: Any) -> Any:
        """The raw normalized distance |value - pareto| / |nash - pareto| (0 = Pareto, 1 = as far as
        Nash; above 1 where the metric overshoots Pareto on the side away from Nash, e.g. contributing
        far more than the fair share in Collective Risk)."""
        return np.abs(np.asarray(value, dtype=float) - self.pareto) / abs(self.nash - self.pareto)

    def proximity(self, value: Any) -> Any:
        """Pareto proximity on the paper's scale, 0 = Pareto, 1 = Nash: :meth:`distance` capped at 1,
        so any play at least as far from Pareto as Nash's counts as 1."""
        return np.minimum(self.distance(value), 1.0)


def groups_of(P: Any) -> np.ndarray:
    """(N,) group index of each player (players are numbered group by group)."""
    return np.repeat(np.arange(len(P.group_sizes)), P.group_sizes)


# --- O-Ring: the cheapest successful profile ---------------------------------------------------------
def even_split(total: int, n: int) -> np.ndarray:
    """``total`` split into ``n`` integers differing by at most one (the larger ones first)."""
    base, rem = divmod(int(total), n)
    return np.array([base + 1] * rem + [base] * (n - rem), dtype=np.int64)


def _best_products(n: int, W: int) -> np.ndarray:
    """(n W + 1,) the largest product of qualities prod q_i (q = w / W) of a group of n whose
    withdrawals add up to s, for s = 0..n W (the even split; computed as the payoff does)."""
    s = np.arange(n * W + 1)
    base, rem = np.divmod(s, n)
    parts = np.where(np.arange(n)[None, :] < rem[:, None], base[:, None] + 1, base[:, None]) / W
    return parts.prod(axis=1)


def oring_split(P: Any) -> np.ndarray | None:
    """(N,) the cheapest withdrawals that make every group reach ``success_threshold`` (even splits
    within each group), or None if no withdrawals do."""
    sizes, W = list(P.group_sizes), int(P.max_withdraw)
    best = {n: _best_products(n, W) for n in set(sizes)}
    group = np.repeat(np.arange(len(sizes)), sizes)
    N = len(group)
    for t in range(N * W + 1):
        left = max(0.0, P.pool - t) / P.pool
        need = []
        for n in sizes:
            ok = np.nonzero(P.scale * left * best[n] >= P.success_threshold)[0]
            if not len(ok):
                break
            need.append(int(ok[0]))
        if len(need) < len(sizes) or sum(need) > t:
            continue
        w = np.concatenate([even_split(s, n) for s, n in zip(need, sizes, strict=False)])
        res = pf.o_ring(
            w[None, :],
            group,
            pool=P.pool,
            max_withdraw=W,
            scale=P.scale,
            success_threshold=P.success_threshold,
            reward=P.reward,
            withdraw_cost=P.withdraw_cost,
        )
        if bool(res["success"][0]):  # confirmed by the payoff function itself
            return w
    return None


def oring_min_total(P: Any) -> int | None:
    """t*: the smallest total withdrawal of a successful O-Ring round, or None if none succeeds."""
    w = oring_split(P)
    return None if w is None else int(w.sum())


# --- Collective Risk: the fair-share schedule ------------------------------------------------------
def fair_share_schedule(P: Any) -> np.ndarray:
    """(R, N) integer contributions adding up to exactly T: player totals T // N (+1 for the first
    T mod N players), each spread over the R rounds as evenly as possible."""
    N, R, T = P.n_players, P.rounds, P.threshold
    totals = even_split(T, N)
    r = np.arange(R + 1)[:, None]
    cum = (r * totals[None, :]) // R  # floor(r t_i / R)
    return np.diff(cum, axis=0)


# --- references and profiles -----------------------------------------------------------------------
def reference(P: Any) -> Reference:
    """The primary metric under Nash and under Pareto play (see the module docstring)."""
    game = P.GAME
    if game == "weakest-link":
        return Reference(0.0, float(P.max_effort))
    if game in ("cpr", "cpr-sanction"):
        return Reference(float(P.max_extract), 0.0)
    if game == "collective-risk":
        if P.pareto_reference is not None:
            return Reference(0.0, float(P.pareto_reference), "set by pareto_reference")
        return Reference(0.0, P.threshold / (P.n_players * P.rounds), "fair share T/(N R)")
    if game == "o-ring":
        if P.pareto_reference is not None:
            return Reference(0.0, float(P.pareto_reference), "set by pareto_reference")
        return Reference(0.0, oring_min_total(P) / P.n_players, "cheapest success t*/N")
    if game == "public-goods":
        return Reference(0.0, float(P.endowment))
    raise ValueError(f"unknown game {game!r}")


def profile(kind: str, P: Any) -> np.ndarray:
    """The reference players' actions, (R, N) (Public Goods: (R, N, 3) as keep, group, global), for
    ``kind`` "nash" or "pareto"; sanctions (CPR with sanctioning) are none for both."""
    game, N, R = P.GAME, P.n_players, P.rounds
    if kind not in ("nash", "pareto"):
        raise ValueError(f"kind must be nash or pareto, got {kind!r}")
    nash = kind == "nash"
    if game == "weakest-link":
        row = np.full(N, 0 if nash else P.max_effort)
    elif game in ("cpr", "cpr-sanction"):
        row = np.full(N, P.max_extract if nash else 0)
    elif game == "collective-risk":
        return np.zeros((R, N), dtype=np.int64) if nash else fair_share_schedule(P)
    elif game == "o-ring":
        split = None if nash else oring_split(P)
        if not nash and split is None:
            raise ValueError(f"no withdrawals reach success_threshold ({P.success_threshold:g}) in every group")
        row = np.zeros(N, dtype=np.int64) if split is None else split
    elif game == "public-goods":
        row = np.tile([P.endowment, 0, 0] if nash else [0, P.endowment, 0], (N, 1))
    else:
        raise ValueError(f"unknown game {game!r}")
    return np.broadcast_to(np.asarray(row, dtype=np.int64), (R, *np.shape(row))).copy()
