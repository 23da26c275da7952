"""Outcome metrics of the CPR society (paper §3.2) and summary statistics."""

from __future__ import annotations

from typing import Any

import numpy as np


def survival_time(state: dict[str, Any]) -> np.ndarray:
    """T_s per society: the first round with R^+ <= R_min or a starved agent; the round cap
    if neither happened (recorded by the environment node)."""
    return np.asarray(state["T_s"], dtype=int)


def efficiency(state: dict[str, Any]) -> np.ndarray:
    """eta = (1/T_s) sum_{t=1..T_s} eta(t), eta(t) = sum_i h_i(t) / H_opt, H_opt = rK/4: the
    mean over the rounds a society lived (the collapse round included)."""
    T = np.maximum(survival_time(state), 1)
    return np.asarray(state["eta_sum"]) / T


def mean_sem(x: np.ndarray) -> dict[str, float]:
    """Mean, standard error of the mean (ddof = 1) and the normal 95% CI half-width."""
    x = np.asarray(x, dtype=float)
    n = x.size
    mean = float(x.mean()) if n else float("nan")
    sem = float(x.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
    return {"mean": mean, "sem": sem, "ci95": 1.96 * sem if n > 1 else float("nan"), "n": int(n)}


COLLAPSE_KINDS = {0: "none (round cap)", 1: "stock depleted", 2: "starvation"}


def summarize(state: dict[str, Any], index: np.ndarray | None = None) -> dict[str, Any]:
    """Summary of a set of societies (all, or those in ``index``)."""
    Ts = survival_time(state)
    eta = efficiency(state)
    kinds = np.asarray(state["collapse"])
    if index is not None:
        Ts, eta, kinds = Ts[index], eta[index], kinds[index]
    return {
        "survival_time": {**mean_sem(Ts), "values": Ts.tolist()},
        "efficiency": {**mean_sem(eta), "values": [round(float(v), 6) for v in eta]},
        "collapse": {COLLAPSE_KINDS[k]: int((kinds == k).sum()) for k in COLLAPSE_KINDS},
    }
