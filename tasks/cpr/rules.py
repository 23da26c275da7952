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

from cooplab.agents.rule_based import col, sample_peer
from cooplab.tasks.cpr.world import imitation_probability, median_norm

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
    indicators B (punished someone) and V (was punished) and the per-society counts."""
    alive = state["alive"] & state["active"][:, None]  # living agents of societies still running
    S, N = alive.shape
    j = sample_peer(alive, rng)
    u_inspect = rng.random((S, N))
    u_punish = rng.random((S, N))
    has = j >= 0
    jj = np.where(has, j, 0)
    h_j = np.take_along_axis(state["h"], jj, axis=1)
    inspect = alive & has & (u_inspect < state["m"])
    violation = inspect & (h_j > threshold)
    punish = violation & (u_punish < state["p"])
    B = punish.astype(np.int8)
    V = np.zeros((S, N), dtype=np.int8)
    rows = np.broadcast_to(np.arange(S)[:, None], (S, N))
    V[rows[punish], jj[punish]] = 1
    return {"B": B, "V": V, "n_inspections": inspect.sum(axis=1), "n_violations": violation.sum(axis=1)}


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
    Pk = np.take_along_axis(state["P_bar"], kk, axis=1)
    prob = imitation_probability(Pk, state["P_bar"], P["delta"])
    adopt = alive & has & (u_meet < col(P["learn_prob"])) & (u_adopt < prob)
    rows, cols = np.nonzero(adopt)
    z = rng.standard_normal((3, rows.size))  # mutation noise only for the adopters
    out = {}
    widths = (("e", P["e_max"] - P["e_min"], 1.0), ("m", 1.0, 1.0), ("g", P["g_max"] - P["g_min"], np.inf))
    for i, (name, width, hi) in enumerate(widths):
        new = state[name].copy()
        w = np.broadcast_to(np.asarray(width, dtype=float), (S,))[rows] if np.ndim(width) else width
        sg = np.broadcast_to(np.asarray(P["sigma"], dtype=float), (S,))[rows] if np.ndim(P["sigma"]) else P["sigma"]
        new[rows, cols] = np.clip(state[name][rows, kk[rows, cols]] + z[i] * sg * w, 0.0, hi)
        out[name] = new
    out["n_adopted"] = adopt.sum(axis=1)
    return out


# --- group decision ------------------------------------------------------------------------
def propose_own_cap(state: State, rng: np.random.Generator) -> np.ndarray:
    """§3.1.3: each agent proposes its personal normative belief as the cap, g*_i = g_i."""
    return state["g"].copy()


def median_vote(proposals: np.ndarray, alive: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """§3.1.3: G(t+1) = median of the proposals (median-voter rule)."""
    return median_norm(proposals, alive)
