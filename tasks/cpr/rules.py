"""Rule-based (ABM) policies of the CPR society, vectorized over agents and societies.

Each policy is a plain function of the graph state (and a seeded generator) that returns
arrays; the phase nodes in :mod:`cooplab.tasks.cpr.phases` apply them, mask dead agents and
finished societies, and write the result into the state. Swap a policy by passing another
function with the same signature to the node factory.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from cooplab.agents.rule_based import col, count_rows, flat_peers, sample_peer
from cooplab.tasks.cpr.model import imitation_probability, median_norm

State = Mapping[str, Any]


# --- harvest -------------------------------------------------------------------------------
def capped_effort(state: State, rng: np.random.Generator) -> np.ndarray:
    """e_i(t) = min(e_i, g_i / (alpha R(t))): an agent fishes with its effort trait but never
    plans to catch more than its personal normative belief g_i (its preferred harvest cap)."""
    alpha = col(state["params"]["alpha"])
    R = state["R"][:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        cap_effort = np.where(R > 0, state["g"] / (alpha * R), 0.0)
    return np.minimum(state["e"], cap_effort)


def trait_effort(state: State, rng: np.random.Generator) -> np.ndarray:
    """e_i(t) = e_i: ignore the personal cap (an alternative for composition experiments)."""
    return state["e"].copy()


# --- punishment ----------------------------------------------------------------------------
def sample_inspect_punish(state: State, threshold: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """§3.1.3: each agent samples one peer j uniformly, inspects with probability m_i; a
    violation is h_j > threshold_i; it then punishes with probability p_i. Returns the
    indicators B (punished someone), V (was punished) and I (inspected someone), tau_V (the
    lowest threshold among the inspectors who fined the agent: the norm it violated; +inf where
    it was not fined) and the per-society counts."""
    alive = state["alive"] & state["active"][:, None]  # living agents of societies still running
    S, N = alive.shape
    j = sample_peer(alive, rng)
    u_inspect = rng.random((S, N))
    u_punish = rng.random((S, N))
    has = j >= 0
    jj = np.where(has, j, 0)
    peer = flat_peers(jj, N)  # flat index of (s, j)
    h_j = np.take(state["h"].reshape(-1), peer)
    inspect = alive & has & (u_inspect < state["m"])
    violation = inspect & (h_j > threshold)
    punish = violation & (u_punish < state["p"])
    B = punish.astype(np.int8)
    V = np.zeros((S, N), dtype=np.int8)
    fined = peer[punish]
    V.reshape(-1)[fined] = 1
    tau_V = np.full((S, N), np.inf)
    np.minimum.at(tau_V.reshape(-1), fined, np.broadcast_to(threshold, (S, N))[punish])
    return {
        "B": B,
        "V": V,
        "I": inspect.astype(np.int8),
        "tau_V": tau_V,
        "n_inspections": count_rows(inspect),
        "n_violations": count_rows(violation),
    }


# --- social learning -----------------------------------------------------------------------
def payoff_biased_imitation(state: State, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """§3.1.3: with probability ``learn_prob`` agent i meets a random living peer k and adopts
    s_k = (e_k, m_k, g_k) with the logit probability on P_bar_k - P_bar_i; each adopted
    component gets Gaussian mutation N(0, (sigma * range width)^2), clipped to its domain.
    Updates are synchronous (everyone copies the traits held at the start of the phase)."""
    P = state["params"]
    alive = state["alive"] & state["active"][:, None]  # living agents of societies still running
    S, N = alive.shape
    k = sample_peer(alive, rng)
    u_meet, u_adopt = rng.random((S, N)), rng.random((S, N))
    has = k >= 0
    kk = np.where(has, k, 0)
    peer = flat_peers(kk, N)  # flat index of (s, k)
    # the logit probability only where it is used: the agents who meet a peer (same numbers)
    meet = np.flatnonzero(alive & has & (u_meet < col(P["learn_prob"])))
    P_bar = state["P_bar"].reshape(-1)
    prob = imitation_probability(
        P_bar[peer.reshape(-1)[meet]][:, None], P_bar[meet][:, None], _per_agent(P["delta"], meet, N)
    )
    adopters = meet[u_adopt.reshape(-1)[meet] < prob[:, 0]]  # flat indices, in row-major order (as np.nonzero)
    rows = adopters // N
    src = peer.reshape(-1)[adopters]
    z = rng.standard_normal((3, rows.size))  # mutation noise only for the adopters
    out = {}
    widths = (("e", P["e_max"] - P["e_min"], 1.0), ("m", 1.0, 1.0), ("g", P["g_max"] - P["g_min"], np.inf))
    for i, (name, width, hi) in enumerate(widths):
        new = state[name].copy()
        w = np.broadcast_to(np.asarray(width, dtype=float), (S,))[rows] if np.ndim(width) else width
        sg = np.broadcast_to(np.asarray(P["sigma"], dtype=float), (S,))[rows] if np.ndim(P["sigma"]) else P["sigma"]
        new.reshape(-1)[adopters] = np.clip(state[name].reshape(-1)[src] + z[i] * sg * w, 0.0, hi)
        out[name] = new
    out["n_adopted"] = np.bincount(rows, minlength=S)
    return out


def _per_agent(x: np.ndarray | float, flat: np.ndarray, N: int) -> np.ndarray | float:
    """A per-society parameter ((S,) array, or a scalar) at the agents ``flat`` (flat indices
    into (S, N)), shaped (n, 1) like the (n, 1) columns it multiplies."""
    return x[flat // N][:, None] if isinstance(x, np.ndarray) and x.ndim == 1 else x


# --- individual learning -----------------------------------------------------------------
def reinforce(x: np.ndarray, s: np.ndarray, lam: np.ndarray | float) -> np.ndarray:
    """Bush-Mosteller update of a propensity x in [0, 1] after taking the action with
    stimulus s in [-1, 1]: x + lam s (1 - x) if s >= 0, else x + lam s x (Bush & Mosteller
    1955; Macy & Flache 2002)."""
    return _reinforce_ls(x, lam * s, s >= 0)


def individual_learning(state: State) -> dict[str, np.ndarray]:
    """Individual learning from one's own consequences (Gupta et al. 2025, abstract and §4.2.5),
    as Bush-Mosteller reinforcement with an aspiration level (Bush & Mosteller 1955; Macy &
    Flache 2002) set at subsistence (Simon 1955): a round payoff pi_i = 0, harvest = consumption.
    With lam = ``il_rate`` and the stimulus s_i = clip(pi_i / c, -1, 1):

    (a) fined (V_i = 1): g_i <- g_i - lam max(g_i - tau_i, 0) (the cap moves toward the norm it
        violated, tau_i = the lowest threshold among the inspectors who fined it), e_i <- (1 - lam) e_i;
    (b) not fined and pi_i < 0 (catch below consumption): e_i <- e_i + lam (1 - e_i);
    (c) for each action taken, monitoring (I_i = 1: x = m_i) and punishing (B_i = 1: x = p_i),
        x <- :func:`reinforce` (x, s_i); propensities of actions not taken are unchanged.

    Every update uses the traits held at the start (synchronous); results are clipped to their
    domains (e, m, p in [0, 1], g >= 0). Deterministic: no random draws. Returns new e, m, p, g
    for every agent; the node keeps them only for the living agents of running societies."""
    P = state["params"]
    lam = col(P["il_rate"])
    e, m, p, g = state["e"], state["m"], state["p"], state["g"]
    N = e.shape[1]
    payoff = state["payoff"]
    s = np.clip(payoff / col(P["c"]), -1.0, 1.0)
    ls = lam * s  # lam s, the common factor of both reinforce branches
    # (a) the fined (few): g moves toward the violated norm tau, e falls
    fined = np.flatnonzero(state["V"].reshape(-1) == 1)
    lam_f = _per_agent(P["il_rate"], fined, N)
    lam_f = lam_f[:, 0] if isinstance(lam_f, np.ndarray) else lam_f
    g_new = g.copy()
    g_f = g.reshape(-1)[fined]
    g_new.reshape(-1)[fined] = g_f - lam_f * np.maximum(g_f - state["tau_V"].reshape(-1)[fined], 0.0)
    # (b) a catch below consumption raises e; (a) overrides it for the fined
    up = 1.0 - e
    up *= lam
    up += e  # e + lam (1 - e)
    e_new = np.where(payoff < 0, up, e)
    e_new.reshape(-1)[fined] = (1.0 - lam_f) * e.reshape(-1)[fined]
    # (c) reinforce the propensities of the actions taken
    nonneg = s >= 0
    m_new = np.where(state["I"] == 1, _reinforce_ls(m, ls, nonneg), m)
    p_new = p.copy()
    punished = np.flatnonzero(state["B"].reshape(-1) == 1)  # few
    p_new.reshape(-1)[punished] = _reinforce_ls(
        p.reshape(-1)[punished], ls.reshape(-1)[punished], nonneg.reshape(-1)[punished]
    )
    return {
        "e": np.clip(e_new, 0.0, 1.0, out=e_new),
        "m": np.clip(m_new, 0.0, 1.0, out=m_new),
        "p": np.clip(p_new, 0.0, 1.0, out=p_new),
        "g": np.maximum(g_new, 0.0, out=g_new),
    }


def _reinforce_ls(x: np.ndarray, ls: np.ndarray, nonneg: np.ndarray) -> np.ndarray:
    """:func:`reinforce` given ``ls = lam * s`` and ``nonneg = s >= 0``: the same numbers."""
    pos = 1.0 - x
    pos *= ls
    pos += x  # x + lam s (1 - x)
    neg = ls * x
    neg += x  # x + lam s x
    return np.where(nonneg, pos, neg)


# --- group decision ------------------------------------------------------------------------
def propose_own_cap(state: State, rng: np.random.Generator) -> np.ndarray:
    """§3.1.3: each agent proposes its personal normative belief as the cap, g*_i = g_i."""
    return state["g"].copy()


def median_vote(proposals: np.ndarray, alive: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """§3.1.3: G(t+1) = median of the proposals (median-voter rule)."""
    return median_norm(proposals, alive)
