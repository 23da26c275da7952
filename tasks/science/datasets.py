"""Seeded datasets and ground truth for the four AI-for-Science tasks (paper §4.1, Appendix C.3).

Each task has one generator. ``generate(task, seed, out_dir)`` writes

* ``out_dir/data.csv`` -- the dataset a science team analyses (a few hundred KB at most), and
* ``out_dir/ground_truth.json`` -- the facts a correct analysis must find, with the generating
  equations, in the format the report scorer reads::

      {"task", "seed", "size", "generator", "description", "equations",
       "facts": [{"id", "kind", "value", "context", "statement", ("tolerance")}, ...],
       "details": {...}}

  ``kind`` is ``number`` (``value`` a number, absolute ``tolerance``), ``set`` (a list of string
  tokens a report would literally write: column names such as ``sensor_03``, ``BM07``,
  ``elevation``, or species links such as ``sp2->sp4``), ``claim`` (a boolean finding; ``context``
  names it) or ``label`` (one categorical token). ``context`` lists lowercase phrases that name
  the fact; ``statement`` is one sentence a correct report would contain. A claim that holds on
  every seed (a report could state it without the data) has ``requires``: the facts of the data
  it rests on, without which the scorer does not count it. ``details`` holds the
  full numeric truth (parameters, anomaly positions, reference cross-validation errors).

Everything is drawn from ``numpy.random.default_rng([seed, task_index])``, so a seed gives
byte-identical files on one platform and the four tasks use independent streams. Every fact is
recoverable from ``data.csv`` alone: :mod:`cooplab.tasks.science.oracle` holds a scripted
analysis (numpy and pandas only) that finds them all, and ``tests/science`` checks that it
does for several seeds. Derived numbers (the persistence forecast error, the reference
cross-validation errors) are computed from the CSV as written, i.e. after rounding, so an
analysis of the file can reproduce them exactly.

The generating equations and constants are in each generator's docstring; the constants are
the module-level ``ECO_*``, ``ANO_*``, ``BIO_*`` and ``GEO_*`` values.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cooplab.graphs.rundir import jsonable

GENERATOR = "cooplab.tasks.science.datasets v1"
TASKS = ("ecology", "anomaly", "biomarker", "geospatial")
#: ``small`` is for quick smoke runs (about half the rows); the recovery tests use ``default``
SIZES = ("small", "default")
DATA_FILE = "data.csv"
TRUTH_FILE = "ground_truth.json"

TASK_DESCRIPTIONS: dict[str, str] = {
    "ecology": (
        "Study a dataset of population sizes of several interacting species recorded over time. "
        "Work out how the species affect one another, find any regime shift in the dynamics, and "
        "build models that forecast future population sizes."
    ),
    "anomaly": (
        "Develop an anomaly detection system for industrial data recorded by 8-12 sensors. It "
        "should find point anomalies, contextual anomalies and collective anomalies across the "
        "sensors."
    ),
    "biomarker": (
        "Study a clinical dataset of patient biomarkers in order to predict who responds to "
        "treatment, uncover subtypes of patients, and find the biomarkers behind differences in "
        "the treatment effect."
    ),
    "geospatial": (
        "Develop spatial prediction models that map the concentration of a resource. Compare "
        "spatial with non-spatial approaches, assessing them with spatial cross-validation."
    ),
}


@dataclass(frozen=True)
class Dataset:
    """What :func:`generate` wrote: the two files and the truth they hold."""

    task: str
    seed: int
    data_path: Path
    truth_path: Path
    truth: dict = field(compare=False, hash=False, repr=False)
    n_rows: int = 0
    n_cols: int = 0


# ----------------------------------------------------------------------------------------------
# Ecology: a multi-species Ricker system with a regime shift
# ----------------------------------------------------------------------------------------------

#: number of species S (inclusive range)
ECO_SPECIES = (4, 6)
#: number of time steps T (inclusive range) per size
ECO_STEPS = {"small": (200, 240), "default": (280, 340)}
#: self-limitation elasticity beta_i = -a_ii N*_i
ECO_SELF_LIMITATION = (0.2, 0.5)
#: magnitude of a nonzero off-diagonal elasticity |b_ij| = |a_ij| N*_j
ECO_LINK_STRENGTH = (0.3, 0.5)
#: how many positive (facilitation) and negative (competition/predation) links (inclusive)
ECO_POSITIVE_LINKS = (1, 2)
ECO_NEGATIVE_LINKS = (2, 3)
#: smallest intrinsic growth rate r_i accepted
ECO_MIN_GROWTH = 0.15
#: largest modulus of an eigenvalue of the Jacobian I + A diag(N*) (stable equilibrium)
ECO_MAX_MODULUS = 0.93
#: equilibrium abundances N*_i drawn log-uniformly in this range
ECO_EQUILIBRIUM = (50.0, 500.0)
#: sd of the log-normal process noise eps_i,t
ECO_NOISE_SD = 0.08
#: sd of log N_i,0 around log N*_i
ECO_INIT_LOG_SD = 0.3
#: the shift time t* is drawn uniformly in this fraction of [0, T)
ECO_SHIFT_WINDOW = (0.3, 0.7)
#: the shifted species loses this fraction of its growth rate at t*
ECO_SHIFT_DROP = (0.5, 0.7)
#: the shifted species' new equilibrium stays above this fraction of its old one
ECO_MIN_NEW_EQUILIBRIUM = 0.25
#: the forecast baseline is scored on the last fraction of the series
ECO_TEST_FRACTION = 0.2
#: tolerance of the reported shift time (time steps)
ECO_SHIFT_TOLERANCE = 8
#: identifiability gate: every true link has |t| >= this in the Ricker regression ...
ECO_GATE_LINK_T = 5.0
#: ... every absent link has |t| <= this, and the change-point scan lands within ECO_GATE_SHIFT
ECO_GATE_NULL_T = 3.0
ECO_GATE_SHIFT = 3
ECO_MAX_DRAWS = 300
#: the change-point scan keeps this many steps away from either end
ECO_SCAN_MARGIN = 10


def _eco_species(S: int) -> list[str]:
    return [f"sp{i + 1}" for i in range(S)]


def _ricker_design(N: np.ndarray, tau: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-step log growth y_t = log N_t+1 - log N_t and the regressors [1, N_t, 1(t >= tau)]."""
    T = N.shape[0]
    y = np.diff(np.log(N), axis=0)
    step = (np.arange(T - 1) >= tau).astype(float)
    X = np.column_stack([np.ones(T - 1), N[:-1], step])
    return y, X


def _ricker_fit(N: np.ndarray, tau: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Least-squares fit of every species' log growth; returns (coef, t statistics, RSS per species).

    ``coef[1 + j, i]`` estimates a_ij (the effect of species j on the growth of species i).
    """
    y, X = _ricker_design(N, tau)
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    resid = y - X @ coef
    rss = (resid**2).sum(axis=0)
    dof = X.shape[0] - X.shape[1]
    cov = np.linalg.inv(X.T @ X)
    se = np.sqrt(np.outer(np.diag(cov), rss / dof))
    return coef, coef / se, rss


def _ricker_scan(N: np.ndarray) -> int:
    """Change point maximising the Gaussian likelihood of the Ricker fit with a step in every r_i."""
    T = N.shape[0]
    best, best_tau = np.inf, ECO_SCAN_MARGIN
    for tau in range(ECO_SCAN_MARGIN, T - ECO_SCAN_MARGIN):
        _, _, rss = _ricker_fit(N, tau)
        score = np.log(rss).sum()
        if score < best:
            best, best_tau = score, tau
    return best_tau


def _eco_parameters(rng: np.random.Generator, S: int) -> dict[str, Any] | None:
    """One draw of (A, r, r', N*, N**, links); None when it is not a stable feasible system."""
    beta = rng.uniform(*ECO_SELF_LIMITATION, S)
    B = np.diag(-beta)
    n_pos = int(rng.integers(ECO_POSITIVE_LINKS[0], ECO_POSITIVE_LINKS[1] + 1))
    n_neg = int(rng.integers(ECO_NEGATIVE_LINKS[0], ECO_NEGATIVE_LINKS[1] + 1))
    pairs = [(i, j) for i in range(S) for j in range(S) if i != j]  # (affected i, acting j)
    links = [pairs[k] for k in rng.choice(len(pairs), n_pos + n_neg, replace=False)]
    signs = [1] * n_pos + [-1] * n_neg
    for (i, j), s in zip(links, signs, strict=False):
        B[i, j] = s * rng.uniform(*ECO_LINK_STRENGTH)
    n_star = np.exp(rng.uniform(np.log(ECO_EQUILIBRIUM[0]), np.log(ECO_EQUILIBRIUM[1]), S))
    t_frac = rng.uniform(*ECO_SHIFT_WINDOW)
    drop = rng.uniform(*ECO_SHIFT_DROP)
    if any((j, i) in links for (i, j) in links):  # one direction per interacting pair
        return None
    r = -B.sum(axis=1)
    if r.min() < ECO_MIN_GROWTH:
        return None
    if np.abs(np.linalg.eigvals(np.eye(S) + B)).max() > ECO_MAX_MODULUS:
        return None
    A = B / n_star[None, :]
    candidates = np.flatnonzero(r >= np.median(r))
    shifted = int(candidates[int(rng.integers(len(candidates)))])
    r2 = r.copy()
    r2[shifted] *= 1.0 - drop
    n_new = np.linalg.solve(A, -r2)
    if (n_new < ECO_MIN_NEW_EQUILIBRIUM * n_star).any():
        return None
    if np.abs(np.linalg.eigvals(np.eye(S) + A * n_new[None, :])).max() > ECO_MAX_MODULUS:
        return None
    return {
        "A": A,
        "r": r,
        "r2": r2,
        "n_star": n_star,
        "n_new": n_new,
        "links": links,
        "signs": signs,
        "shifted": shifted,
        "t_frac": t_frac,
    }


def _ecology(rng: np.random.Generator, size: str, data_path: Path) -> dict[str, Any]:
    """Multi-species Ricker dynamics with sparse interactions and one regime shift.

    Model (S species, t = 0..T-1, natural logs)::

        N_i,t+1 = N_i,t * exp( r_i(t) + sum_j a_ij N_j,t + eps_i,t ),   eps_i,t ~ Normal(0, 0.08^2)
        r_i(t)  = r_i for t < t*,  r_i' for t >= t*

    ``a_ij`` is the effect of species j on the per-capita growth of species i. It is built from
    elasticities b_ij = a_ij N*_j: the diagonal b_ii = -beta_i with beta_i ~ U(0.2, 0.5)
    (self-limitation); 1-2 positive and 2-3 negative off-diagonal links of magnitude U(0.3, 0.5)
    (one direction per pair), every other entry 0. The equilibrium N*_i is log-uniform in
    [50, 500] and r = -A N*, so N* is the fixed point before the shift; a draw is kept only if
    every r_i >= 0.15 and the Jacobian I + A diag(N*) has spectral radius <= 0.93.

    Regime shift: at t* ~ U(0.3 T, 0.7 T) one species (of those with r_i at or above the median)
    loses 50-70% of its growth rate, r_k' = (1 - d) r_k; the new equilibrium N** = -A^-1 r' must
    stay above 25% of N* and be stable. ``t*`` is the first transition (t -> t+1) under r', so
    N_t*+1 is the first abundance the shift changes.

    Identifiability: a draw is accepted only when the least-squares Ricker regression of
    log N_i,t+1 - log N_i,t on [1, N_1,t..N_S,t, 1(t >= t*)] separates the links (every true link
    |t| >= 5, every absent one |t| <= 3) and a change-point scan over t* lands within 3 steps.

    Forecast baseline: the persistence (last value) forecast of log abundance, log N_i,t = log
    N_i,t-1, scored by RMSE over all species and the last 20% of the time steps, computed from
    the CSV as written (abundances rounded to 0.01).
    """
    T = int(rng.integers(ECO_STEPS[size][0], ECO_STEPS[size][1] + 1))
    S = int(rng.integers(ECO_SPECIES[0], ECO_SPECIES[1] + 1))
    best: tuple[Any, dict, np.ndarray, int] | None = None  # (margin: a numpy float, parameters, N, shift)
    for _ in range(ECO_MAX_DRAWS):
        p = _eco_parameters(rng, S)
        if p is None:
            continue
        t_shift = int(p["t_frac"] * T)
        logn = np.empty((T, S))
        logn[0] = np.log(p["n_star"]) + rng.normal(0.0, ECO_INIT_LOG_SD, S)
        eps = rng.normal(0.0, ECO_NOISE_SD, (T - 1, S))
        for t in range(T - 1):
            rate = p["r"] if t < t_shift else p["r2"]
            logn[t + 1] = logn[t] + rate + p["A"] @ np.exp(logn[t]) + eps[t]
        N = np.exp(logn)
        _, tstat, _ = _ricker_fit(N, t_shift)
        link_t = [abs(tstat[1 + j, i]) for (i, j) in p["links"]]
        null_t = [abs(tstat[1 + j, i]) for i in range(S) for j in range(S) if i != j and (i, j) not in p["links"]]
        margin = min(min(link_t) - ECO_GATE_LINK_T, ECO_GATE_NULL_T - max(null_t))
        if margin >= 0 and abs(_ricker_scan(N) - t_shift) <= ECO_GATE_SHIFT:
            best = (margin, p, N, t_shift)
            break
        if best is None or margin > best[0]:
            best = (margin, p, N, t_shift)
    assert best is not None, "no feasible Ricker system drawn"  # S <= 6 always finds one
    _, p, N, t_shift = best

    names = _eco_species(S)
    df = pd.DataFrame(N, columns=names)
    df.insert(0, "t", np.arange(T))
    df.to_csv(data_path, index=False, float_format="%.2f", lineterminator="\n")

    back = pd.read_csv(data_path)
    logb = np.log(back[names].to_numpy(float))
    n_test = int(round(ECO_TEST_FRACTION * T))
    err = logb[T - n_test :] - logb[T - n_test - 1 : T - 1]
    rmse = float(np.sqrt(np.mean(err**2)))

    neg = sorted(f"{names[j]}->{names[i]}" for (i, j), s in zip(p["links"], p["signs"], strict=False) if s < 0)
    pos = sorted(f"{names[j]}->{names[i]}" for (i, j), s in zip(p["links"], p["signs"], strict=False) if s > 0)
    facts = [
        _fact(
            "n_species",
            "number",
            S,
            ["species"],
            f"The dataset contains {S} species ({', '.join(names)}).",
            tolerance=0,
        ),
        _fact(
            "shift_time",
            "number",
            t_shift,
            ["regime shift", "shift", "change point", "changepoint", "breakpoint", "regime"],
            f"A regime shift occurs at t = {t_shift}.",
            tolerance=ECO_SHIFT_TOLERANCE,
        ),
        _fact(
            "negative_interactions",
            "set",
            neg,
            ["negative", "competition", "suppress", "inhibit", "interaction"],
            "Negative interactions (the first species lowers the growth of the second): " + ", ".join(neg) + ".",
        ),
        _fact(
            "positive_interactions",
            "set",
            pos,
            ["positive", "facilitat", "mutualis", "benefit", "interaction"],
            "Positive interactions (the first species raises the growth of the second): " + ", ".join(pos) + ".",
        ),
        _fact(
            "forecast_baseline_rmse",
            "number",
            round(rmse, 4),
            ["persistence", "naive", "baseline", "rmse", "forecast"],
            f"A persistence (last-value) forecast of log abundance has RMSE {rmse:.3f} on the "
            f"last {n_test} time steps.",
            tolerance=round(max(0.01, 0.1 * rmse), 4),
        ),
    ]
    details = {
        "species": names,
        "n_steps": T,
        "interaction_matrix_a": np.round(p["A"], 8).tolist(),
        "elasticity_matrix_b": np.round(p["A"] * p["n_star"][None, :], 4).tolist(),
        "growth_rate_before": np.round(p["r"], 5).tolist(),
        "growth_rate_after": np.round(p["r2"], 5).tolist(),
        "equilibrium_before": np.round(p["n_star"], 3).tolist(),
        "equilibrium_after": np.round(p["n_new"], 3).tolist(),
        "shifted_species": names[p["shifted"]],
        "shift_time": t_shift,
        "noise_sd": ECO_NOISE_SD,
        "forecast_test_steps": n_test,
        "link_convention": "'spA->spB' means a_BA != 0: species A changes the growth of species B",
    }
    equations = (
        "Ricker: N_i,t+1 = N_i,t exp(r_i(t) + sum_j a_ij N_j,t + eps_i,t), eps ~ N(0, 0.08^2); "
        "r_i(t) = r_i before t*, r_i' after, with one species' growth rate cut by 50-70% at t*. "
        "Baseline: persistence forecast of log N on the last 20% of steps, RMSE."
    )
    return {"facts": facts, "details": details, "equations": equations, "frame": back}


# ----------------------------------------------------------------------------------------------
# Anomaly: multi-sensor daily cycles with point, contextual and collective anomalies
# ----------------------------------------------------------------------------------------------

#: number of sensors (inclusive range)
ANO_SENSORS = (8, 12)
#: steps per day (30-minute sampling) and days recorded per size
ANO_PERIOD = 48
ANO_DAYS = {"small": 40, "default": 70}
ANO_START = "2024-03-04 00:00"
ANO_FREQ_MINUTES = 30
#: sensor baseline level mu_s and residual noise sd sigma_s
ANO_LEVEL = (20.0, 80.0)
ANO_NOISE_SD = (0.4, 1.2)
#: daily amplitude A_s in units of sigma_s, and the relative size of the second harmonic
ANO_AMPLITUDE = (7.0, 10.0)
ANO_HARMONIC = (0.0, 0.4)
#: share of the residual variance that is a factor common to all sensors, and AR(1) coefficients
ANO_COMMON_SHARE = (0.3, 0.6)
ANO_COMMON_AR = 0.5
ANO_IDIO_AR = (0.2, 0.5)
#: how many sensors carry anomalies, and how many anomalies of each type (inclusive ranges)
ANO_ANOMALOUS_SENSORS = (3, 5)
ANO_N_POINT = (6, 12)
ANO_N_CONTEXTUAL = (4, 8)
ANO_N_COLLECTIVE = (2, 3)
#: a point anomaly lies this many sigma beyond the daily cycle's extreme
ANO_POINT_EXCESS = (8.0, 12.0)
#: a contextual anomaly sits where the cycle is in the top/bottom fraction of its daily range
ANO_CONTEXT_BAND = 0.15
#: a collective anomaly: a run of this many steps offset by this many sigma
ANO_COLLECTIVE_LENGTH = (30, 60)
ANO_COLLECTIVE_SHIFT = (3.5, 4.5)
#: steps kept free between any two anomalies, and from the first/last day
ANO_MIN_GAP = 48


def _ar1(rng: np.random.Generator, n: int, phi: float) -> np.ndarray:
    """A unit-variance stationary AR(1) series."""
    z = rng.normal(0.0, 1.0, n)
    out = np.empty(n)
    out[0] = z[0]
    c = math.sqrt(1.0 - phi * phi)
    for t in range(1, n):
        out[t] = phi * out[t - 1] + c * z[t]
    return out


def _anomaly(rng: np.random.Generator, size: str, data_path: Path) -> dict[str, Any]:
    """Daily-cycle sensor signals with correlated noise and three kinds of injected anomaly.

    Normal behaviour of sensor s at step t (P = 48 steps a day, 30-minute sampling)::

        x_s,t = mu_s + c_s(t) + e_s,t
        c_s(t) = A_s [ sin(2 pi t / P + phi_s) + h_s sin(4 pi t / P + psi_s) ]
        e_s,t  = sigma_s [ sqrt(w_s) f_t + sqrt(1 - w_s) u_s,t ]

    with mu_s ~ U(20, 80), sigma_s ~ U(0.4, 1.2), A_s = k_s sigma_s, k_s ~ U(7, 10),
    h_s ~ U(0, 0.4); f_t is a unit-variance AR(1) factor shared by all sensors (phi = 0.5,
    share w_s ~ U(0.3, 0.6)) and u_s,t an independent unit-variance AR(1) (phi_s ~ U(0.2, 0.5)).

    Anomalies, all on a seeded subset of 3-5 sensors, at seeded positions at least 48 steps
    apart and away from the first and last day:

    * point (6-12): one step set to mu_s + max_t c_s(t) + q sigma_s (or below the minimum by
      as much), q ~ U(8, 12): outside the sensor's normal range;
    * contextual (4-8): one step where c_s(t) is in the top (bottom) 15% of its daily range set to
      mu_s + min c_s (max c_s) + e_s,t: a value the sensor takes daily, at the wrong time of day;
    * collective (2-3): a run of 30-60 steps offset by +-U(3.5, 4.5) sigma_s: each value unremarkable
      alone, the run is not.
    """
    P = ANO_PERIOD
    T = ANO_DAYS[size] * P
    S = int(rng.integers(ANO_SENSORS[0], ANO_SENSORS[1] + 1))
    names = [f"sensor_{i + 1:02d}" for i in range(S)]
    t = np.arange(T)
    mu = rng.uniform(*ANO_LEVEL, S)
    sigma = rng.uniform(*ANO_NOISE_SD, S)
    amp = rng.uniform(*ANO_AMPLITUDE, S) * sigma
    harm = rng.uniform(*ANO_HARMONIC, S)
    phase = rng.uniform(0, 2 * np.pi, (2, S))
    cycle = amp * (np.sin(2 * np.pi * t[:, None] / P + phase[0]) + harm * np.sin(4 * np.pi * t[:, None] / P + phase[1]))
    share = rng.uniform(*ANO_COMMON_SHARE, S)
    common = _ar1(rng, T, ANO_COMMON_AR)
    idio = np.column_stack([_ar1(rng, T, rng.uniform(*ANO_IDIO_AR)) for _ in range(S)])
    noise = sigma * (np.sqrt(share) * common[:, None] + np.sqrt(1 - share) * idio)
    x = mu + cycle + noise
    cmax, cmin = cycle[:P].max(axis=0), cycle[:P].min(axis=0)

    n_sensors = int(rng.integers(ANO_ANOMALOUS_SENSORS[0], ANO_ANOMALOUS_SENSORS[1] + 1))
    bad = sorted(int(s) for s in rng.choice(S, n_sensors, replace=False))
    counts = {
        "collective": int(rng.integers(ANO_N_COLLECTIVE[0], ANO_N_COLLECTIVE[1] + 1)),
        "contextual": int(rng.integers(ANO_N_CONTEXTUAL[0], ANO_N_CONTEXTUAL[1] + 1)),
        "point": int(rng.integers(ANO_N_POINT[0], ANO_N_POINT[1] + 1)),
    }
    kinds = [k for k in ("collective", "contextual", "point") for _ in range(counts[k])]
    # every anomalous sensor gets at least one anomaly: the first ones go round a shuffled list
    order = [bad[i] for i in rng.permutation(n_sensors)]
    owner = [order[i] if i < n_sensors else bad[int(rng.integers(n_sensors))] for i in range(len(kinds))]
    owner = [owner[i] for i in rng.permutation(len(kinds))]

    taken: list[tuple[int, int]] = []  # inclusive [start, end] of placed anomalies

    def free(start: int, end: int) -> bool:
        return all(end + ANO_MIN_GAP < a or start > b + ANO_MIN_GAP for a, b in taken)

    events: dict[str, list[dict[str, Any]]] = {"point": [], "contextual": [], "collective": []}
    for kind, s in zip(kinds, owner, strict=False):
        length = (
            int(rng.integers(ANO_COLLECTIVE_LENGTH[0], ANO_COLLECTIVE_LENGTH[1] + 1)) if kind == "collective" else 1
        )
        lo, hi = P, T - P - length
        if kind == "contextual":
            band = ANO_CONTEXT_BAND * (cmax[s] - cmin[s])
            eligible = np.flatnonzero((cycle[lo:hi, s] >= cmax[s] - band) | (cycle[lo:hi, s] <= cmin[s] + band)) + lo
        else:
            eligible = np.arange(lo, hi)
        for _ in range(10_000):
            start = int(eligible[int(rng.integers(len(eligible)))])
            if free(start, start + length - 1):
                break
        else:  # cannot happen with the ranges above (at most 23 events in 40+ days)
            raise RuntimeError("could not place the anomalies; widen ANO_DAYS")
        end = start + length - 1
        taken.append((start, end))
        sign = 1.0 if rng.random() < 0.5 else -1.0
        if kind == "point":
            excess = rng.uniform(*ANO_POINT_EXCESS) * sigma[s]
            x[start, s] = mu[s] + (cmax[s] + excess if sign > 0 else cmin[s] - excess)
            events["point"].append({"index": start, "sensor": names[s]})
        elif kind == "contextual":
            high = cycle[start, s] >= cmax[s] - ANO_CONTEXT_BAND * (cmax[s] - cmin[s])
            x[start, s] = mu[s] + (cmin[s] if high else cmax[s]) + noise[start, s]
            events["contextual"].append(
                {"index": start, "sensor": names[s], "cycle_phase": "peak" if high else "trough"}
            )
        else:
            shift = sign * rng.uniform(*ANO_COLLECTIVE_SHIFT) * sigma[s]
            x[start : end + 1, s] += shift
            events["collective"].append(
                {"start": start, "end": end, "sensor": names[s], "offset": round(float(shift), 4)}
            )

    stamps = pd.date_range(ANO_START, periods=T, freq=f"{ANO_FREQ_MINUTES}min")
    df = pd.DataFrame(x, columns=names)
    df.insert(0, "timestamp", stamps.strftime("%Y-%m-%d %H:%M"))
    df.to_csv(data_path, index=False, float_format="%.3f", lineterminator="\n")
    back = pd.read_csv(data_path)
    for kind in events:
        key = "start" if kind == "collective" else "index"
        events[kind].sort(key=lambda e: e[key])
        for e in events[kind]:
            e["timestamp"] = str(back["timestamp"].iloc[e[key]])

    involved = sorted({e["sensor"] for k in events for e in events[k]})
    coll_sensors = sorted({e["sensor"] for e in events["collective"]})
    n_pt, n_ctx, n_col = (len(events[k]) for k in ("point", "contextual", "collective"))
    facts = [
        _fact(
            "n_point_anomalies",
            "number",
            n_pt,
            ["point anomal", "point", "spike"],
            f"There are {n_pt} point anomalies (single-step spikes outside the normal range).",
            tolerance=1,
        ),
        _fact(
            "n_contextual_anomalies",
            "number",
            n_ctx,
            ["contextual anomal", "contextual"],
            f"There are {n_ctx} contextual anomalies (normal values at the wrong time of day).",
            tolerance=1,
        ),
        _fact(
            "n_collective_anomalies",
            "number",
            n_col,
            ["collective anomal", "collective"],
            f"There are {n_col} collective anomalies (runs of 30-60 offset steps).",
            tolerance=0,
        ),
        _fact(
            "anomalous_sensors",
            "set",
            involved,
            ["sensor", "anomal"],
            "The anomalies occur on sensors " + ", ".join(involved) + ".",
            universe=list(names),
        ),
        _fact(
            "collective_sensors",
            "set",
            coll_sensors,
            ["collective", "sensor"],
            "The collective anomalies occur on " + ", ".join(coll_sensors) + ".",
            universe=list(names),
        ),
    ]
    details = {
        "sensors": names,
        "n_steps": T,
        "period_steps": P,
        "sampling_minutes": ANO_FREQ_MINUTES,
        "index_base": "0-based row index of data.csv",
        "anomalies": events,
        "sensor_level": np.round(mu, 4).tolist(),
        "sensor_noise_sd": np.round(sigma, 4).tolist(),
        "sensor_amplitude": np.round(amp, 4).tolist(),
    }
    equations = (
        "x_s,t = mu_s + A_s[sin(2 pi t/48 + phi_s) + h_s sin(4 pi t/48 + psi_s)] + sigma_s "
        "(sqrt(w_s) f_t + sqrt(1-w_s) u_s,t), f and u AR(1). Point: one step 8-12 sigma beyond "
        "the daily extreme; contextual: one step at the opposite daily extreme; collective: "
        "30-60 steps offset by 3.5-4.5 sigma."
    )
    return {"facts": facts, "details": details, "equations": equations, "frame": back}


# ----------------------------------------------------------------------------------------------
# Biomarker: latent subtypes and a subtype-dependent treatment effect
# ----------------------------------------------------------------------------------------------

#: patients (inclusive range) per size, biomarkers, subtypes
BIO_PATIENTS = {"small": (500, 600), "default": (900, 1200)}
BIO_BIOMARKERS = (18, 30)
BIO_SUBTYPES = (2, 3)
#: subtype shares pi = BIO_SHARE_FLOOR / K + (1 - BIO_SHARE_FLOOR) Dirichlet(4, ..., 4)
BIO_SHARE_FLOOR = 0.6
BIO_SUBTYPE_CONCENTRATION = 4.0
#: a subtype's marker is shifted by this many sd in that subtype
BIO_MARKER_SHIFT = (4.5, 5.5)
#: predictive biomarkers (treatment x biomarker on the log-odds) and their effect per sd
BIO_N_PREDICTIVE = (2, 3)
BIO_PREDICTIVE_EFFECT = (1.5, 2.0)
#: prognostic biomarkers (main effect only) and their effect per sd
BIO_N_PROGNOSTIC = 2
BIO_PROGNOSTIC_EFFECT = (0.8, 1.2)
#: treatment effect (log-odds) in the responder subtype and in the others
BIO_RESPONDER_EFFECT = (1.5, 2.2)
BIO_OTHER_EFFECT = (-2.0, -1.2)
#: intercept and sd of the subtype baselines on the log-odds scale; age effect per 10 years
BIO_INTERCEPT = -0.3
BIO_SUBTYPE_BASELINE_SD = 0.3
BIO_AGE_EFFECT = 0.1
#: the measured value of biomarker j is center_j + scale_j z_ij
BIO_CENTER = (2.0, 50.0)
BIO_SCALE = (0.5, 8.0)
#: identifiability gate (with the true subtypes): every predictive biomarker has |z| >= 5 for
#: its treatment interaction, every other biomarker |z| <= 3, and the subtype treatment effects
#: have the true signs with |z| >= 2.5
BIO_GATE_PREDICTIVE_Z = 5.0
BIO_GATE_NULL_Z = 3.0
BIO_GATE_SUBTYPE_Z = 2.5
BIO_MAX_DRAWS = 100


def logistic_fit(X: np.ndarray, y: np.ndarray, iters: int = 50) -> tuple[np.ndarray, np.ndarray]:
    """Logistic regression by iteratively reweighted least squares: (coefficients, standard errors)."""
    beta = np.zeros(X.shape[1])
    for _ in range(iters):
        mu = 1.0 / (1.0 + np.exp(-np.clip(X @ beta, -30, 30)))
        w = np.maximum(mu * (1 - mu), 1e-9)
        step = np.linalg.solve(X.T @ (X * w[:, None]) + 1e-8 * np.eye(X.shape[1]), X.T @ (y - mu))
        beta = beta + step
        if np.abs(step).max() < 1e-8:
            break
    mu = 1.0 / (1.0 + np.exp(-np.clip(X @ beta, -30, 30)))
    cov = np.linalg.inv(X.T @ (X * (mu * (1 - mu))[:, None]))
    return beta, np.sqrt(np.diag(cov))


def biomarker_design(
    z: np.ndarray, subtype: np.ndarray, treat: np.ndarray, age: np.ndarray, keep: list[int]
) -> np.ndarray:
    """[1, T, subtype dummies, T x dummies, age, z_keep, T x z_keep] (subtype 0 the reference)."""
    K = int(subtype.max()) + 1
    n = len(treat)
    D = np.column_stack([(subtype == k).astype(float) for k in range(1, K)])
    a = (age - age.mean()) / age.std()
    zs = (z[:, keep] - z[:, keep].mean(axis=0)) / z[:, keep].std(axis=0)
    t = treat.astype(float)
    return np.column_stack([np.ones(n), t, D, t[:, None] * D, a, zs, t[:, None] * zs])


def _bio_gate(
    z: np.ndarray,
    subtype: np.ndarray,
    treat: np.ndarray,
    age: np.ndarray,
    response: np.ndarray,
    markers: list[int],
    predictive: list[int],
    responder: int,
) -> float:
    """How far a draw is inside the identifiability gate (>= 0: inside)."""
    K = int(subtype.max()) + 1
    if len(np.unique(subtype)) < K or any((subtype == k).sum() < 30 for k in range(K)):
        return -np.inf
    keep = [j for j in range(z.shape[1]) if j not in markers]
    X = biomarker_design(z, subtype, treat, age, keep)
    coef, se = logistic_fit(X, response.astype(float))
    m = len(keep)
    iz = np.abs(coef[-m:] / se[-m:])
    pred = [keep.index(j) for j in predictive]
    null = [i for i in range(m) if i not in pred]
    # per-subtype treatment log odds ratio: coef_T (+ coef_T x D_k); its z from the covariance
    tz = []
    cov = np.linalg.inv(X.T @ (X * _w(X, coef)[:, None]))
    for k in range(K):
        v = np.zeros(len(coef))
        v[1] = 1.0
        if k:
            v[1 + (K - 1) + k] = 1.0
        tz.append(float(v @ coef / math.sqrt(v @ cov @ v)))
    sign_ok = min(tz[k] if k == responder else -tz[k] for k in range(K)) - BIO_GATE_SUBTYPE_Z
    return float(
        min(iz[pred].min() - BIO_GATE_PREDICTIVE_Z, BIO_GATE_NULL_Z - (iz[null].max() if null else 0.0), sign_ok)
    )


def _w(X: np.ndarray, coef: np.ndarray) -> np.ndarray:
    mu = 1.0 / (1.0 + np.exp(-np.clip(X @ coef, -30, 30)))
    return mu * (1 - mu)


def _biomarker(rng: np.random.Generator, size: str, data_path: Path) -> dict[str, Any]:
    """Patients in latent subtypes; a few biomarkers modify a subtype-specific treatment effect.

    Patient i (n in 900..1200) has subtype k_i ~ Categorical(pi) over K in {2, 3} subtypes, with
    pi = 0.6 / K + 0.4 Dirichlet(4, ..., 4) (each expected share at least 0.6 / K), and
    standardized biomarkers z_ij ~ Normal(0, 1), j = 1..p (p in 18..30). Each subtype k has one
    marker m_k: z_i,m_k += D_k with D_k ~ U(4.5, 5.5) when k_i = k, so each subtype is "the
    BMxx-high subtype". The measured value is BMjj = center_j + scale_j z_ij (center ~ U(2, 50),
    scale ~ U(0.5, 8)). Treatment T_i ~ Bernoulli(0.5) is randomised, age ~ Normal(60, 10)
    (rounded, clipped to 18..95), sex is F/M at random, and the response is Bernoulli with::

        logit P(y_i = 1) = -0.3 + b_k_i + 0.1 (age_i - 60)/10 + sum_{j in G} g_j z_ij
                           + T_i ( tau_k_i + sum_{j in Q} c_j z_ij )

    b_k ~ Normal(0, 0.3^2) are subtype baselines; G holds 2 prognostic biomarkers, |g_j| ~
    U(0.8, 1.2) with random sign; Q holds 2-3 predictive biomarkers, |c_j| ~ U(1.5, 2.0) with
    random sign; tau_k ~ U(1.5, 2.2) in one responder subtype and U(-2.0, -1.2) in the others,
    so the treatment helps the responder subtype and harms the rest. Markers, prognostic and
    predictive biomarkers are disjoint; the remaining biomarkers are noise.

    Identifiability: a draw is accepted only when a logistic regression with the true subtypes
    (subtype, treatment x subtype, age, every non-marker biomarker and its treatment
    interaction) gives every predictive interaction |z| >= 5, every other interaction |z| <= 3,
    and subtype treatment effects of the true signs with |z| >= 2.5 (else redraw, at most 100).
    """
    n = int(rng.integers(BIO_PATIENTS[size][0], BIO_PATIENTS[size][1] + 1))
    p = int(rng.integers(BIO_BIOMARKERS[0], BIO_BIOMARKERS[1] + 1))
    K = int(rng.integers(BIO_SUBTYPES[0], BIO_SUBTYPES[1] + 1))
    names = [f"BM{j + 1:02d}" for j in range(p)]
    n_pred = int(rng.integers(BIO_N_PREDICTIVE[0], BIO_N_PREDICTIVE[1] + 1))
    roles = rng.permutation(p)
    markers = [int(j) for j in roles[:K]]
    predictive = sorted(int(j) for j in roles[K : K + n_pred])
    prognostic = sorted(int(j) for j in roles[K + n_pred : K + n_pred + BIO_N_PROGNOSTIC])

    center = rng.uniform(*BIO_CENTER, p)
    scale = rng.uniform(*BIO_SCALE, p)

    def signed(lo_hi: tuple[float, float], m: int) -> np.ndarray:
        return rng.uniform(*lo_hi, m) * np.where(rng.random(m) < 0.5, -1.0, 1.0)

    best: tuple[float, dict[str, Any]] | None = None
    for _ in range(BIO_MAX_DRAWS):
        shares = BIO_SHARE_FLOOR / K + (1 - BIO_SHARE_FLOOR) * rng.dirichlet(np.full(K, BIO_SUBTYPE_CONCENTRATION))
        subtype = rng.choice(K, n, p=shares)
        z = rng.normal(0.0, 1.0, (n, p))
        shift = rng.uniform(*BIO_MARKER_SHIFT, K)
        for k, m in enumerate(markers):
            z[subtype == k, m] += shift[k]
        treat = (rng.random(n) < 0.5).astype(int)
        age = np.clip(np.round(rng.normal(60.0, 10.0, n)), 18, 95).astype(int)
        sex = np.where(rng.random(n) < 0.5, "F", "M")
        responder = int(rng.integers(K))
        tau = rng.uniform(*BIO_OTHER_EFFECT, K)
        tau[responder] = rng.uniform(*BIO_RESPONDER_EFFECT)
        base = rng.normal(0.0, BIO_SUBTYPE_BASELINE_SD, K)
        g = signed(BIO_PROGNOSTIC_EFFECT, len(prognostic))
        c = signed(BIO_PREDICTIVE_EFFECT, len(predictive))
        logit = (
            BIO_INTERCEPT
            + base[subtype]
            + BIO_AGE_EFFECT * (age - 60) / 10
            + z[:, prognostic] @ g
            + treat * (tau[subtype] + z[:, predictive] @ c)
        )
        response = (rng.random(n) < 1.0 / (1.0 + np.exp(-logit))).astype(int)
        draw = {
            "shares": shares,
            "subtype": subtype,
            "z": z,
            "shift": shift,
            "treat": treat,
            "age": age,
            "sex": sex,
            "responder": responder,
            "tau": tau,
            "base": base,
            "g": g,
            "c": c,
            "response": response,
        }
        margin = _bio_gate(z, subtype, treat, age, response, markers, predictive, responder)
        if best is None or margin > best[0]:
            best = (margin, draw)
        if margin >= 0:
            break
    assert best is not None
    d = best[1]
    shares, subtype, z, shift, treat = d["shares"], d["subtype"], d["z"], d["shift"], d["treat"]
    age, sex, responder, tau, base = d["age"], d["sex"], d["responder"], d["tau"], d["base"]
    g, c, response = d["g"], d["c"], d["response"]
    values = center + scale * z

    df = pd.DataFrame(values, columns=names)
    df.insert(0, "patient_id", [f"P{i + 1:04d}" for i in range(n)])
    df.insert(1, "age", age)
    df.insert(2, "sex", sex)
    df.insert(3, "treatment", treat)
    df["response"] = response
    df.to_csv(data_path, index=False, float_format="%.3f", lineterminator="\n")
    back = pd.read_csv(data_path)

    marker_names = sorted(names[m] for m in markers)
    pred_names = [names[j] for j in predictive]
    resp_marker = names[markers[responder]]
    rates = {}
    for k in range(K):
        sel = subtype == k
        rates[names[markers[k]]] = {
            "n": int(sel.sum()),
            "response_rate_treated": round(float(response[sel & (treat == 1)].mean()), 4),
            "response_rate_control": round(float(response[sel & (treat == 0)].mean()), 4),
            "treatment_effect_logodds": round(float(tau[k]), 4),
        }
    facts = [
        _fact(
            "n_subtypes",
            "number",
            K,
            ["subtype", "cluster", "subgroup"],
            f"The patients fall into {K} latent subtypes.",
            tolerance=0,
        ),
        _fact(
            "subtype_markers",
            "set",
            marker_names,
            ["subtype", "cluster", "marker"],
            "The subtypes are distinguished by " + ", ".join(marker_names) + " (each high in one subtype).",
            universe=names,
            negative_context=["predictive", "prognostic"],
        ),
        _fact(
            "predictive_biomarkers",
            "set",
            pred_names,
            ["predictive", "predict", "biomarker", "interaction", "treatment"],
            "The biomarkers that modify the treatment effect (treatment x biomarker "
            "interaction) are " + ", ".join(pred_names) + ".",
            universe=names,
            negative_context=["prognostic"],
        ),
        _fact(
            "responder_subtype_marker",
            "label",
            resp_marker,
            ["benefit", "respond", "responder", "helps"],
            f"The treatment benefits the subtype marked by high {resp_marker}.",
            alternatives=[m for m in marker_names if m != resp_marker],
        ),
        _fact(
            "treatment_effect_reverses",
            "claim",
            True,
            ["reverse", "opposite", "harm", "negative in"],
            f"The treatment effect reverses across subtypes: positive in the {resp_marker}-high "
            "subtype and negative in the other subtype(s).",
            negative_context=["same direction", "same sign"],
            requires=["responder_subtype_marker"],
        ),
    ]
    details = {
        "biomarkers": names,
        "n_patients": n,
        "subtype_shares": np.round(shares, 4).tolist(),
        "subtype_marker_by_subtype": [names[m] for m in markers],
        "marker_shift_sd": np.round(shift, 4).tolist(),
        "responder_subtype": responder,
        "treatment_effect_logodds": np.round(tau, 4).tolist(),
        "subtype_baseline_logodds": np.round(base, 4).tolist(),
        "predictive_effects": {names[j]: round(float(v), 4) for j, v in zip(predictive, c, strict=False)},
        "prognostic_biomarkers": [names[j] for j in prognostic],
        "prognostic_effects": {names[j]: round(float(v), 4) for j, v in zip(prognostic, g, strict=False)},
        "by_subtype": rates,
        "biomarker_center": np.round(center, 4).tolist(),
        "biomarker_scale": np.round(scale, 4).tolist(),
    }
    equations = (
        "z_ij ~ N(0,1), z_i,m_k += D_k in subtype k; BMjj = center_j + scale_j z_ij; "
        "logit P(response) = -0.3 + b_k + 0.1 (age-60)/10 + sum_G g_j z_ij "
        "+ treatment (tau_k + sum_Q c_j z_ij); tau > 0 in one subtype, < 0 in the others."
    )
    return {"facts": facts, "details": details, "equations": equations, "frame": back}


# ----------------------------------------------------------------------------------------------
# Geospatial: a resource concentration field with covariates and a spatially correlated residual
# ----------------------------------------------------------------------------------------------

#: sampled sites (inclusive range) per size, in a square of GEO_EXTENT km
GEO_SITES = {"small": (450, 550), "default": (800, 1200)}
GEO_EXTENT = 100.0
GEO_COVARIATES = ("elevation", "distance_to_river", "soil_ph", "rainfall", "slope", "ndvi")
#: how many covariates matter (inclusive), the top effect and the others (per covariate sd)
GEO_N_IMPORTANT = (2, 4)
GEO_TOP_EFFECT = (5.0, 6.5)
GEO_OTHER_EFFECT = (2.5, 4.0)
#: concentration level, the spatial residual field (sd, length scale in km, bumps) and noise sd
GEO_BASE = 60.0
GEO_FIELD_SD = 5.0
GEO_FIELD_SCALE = (10.0, 15.0)
GEO_FIELD_BUMPS = 80
#: Gaussian bumps in each covariate's smooth field
GEO_COVARIATE_BUMPS = 60
GEO_NOISE_SD = 1.5
#: the reference cross-validation protocol (also in ground_truth details)
GEO_FOLDS = 5
GEO_BLOCKS = 4
GEO_NEIGHBOURS = 10
#: the two claims hold on every seed (a report can state them without the data), so they are
#: scored only in a report that also found the covariate model they are about
GEO_MODEL_FACTS = ["important_covariates", "top_covariate"]


def _smooth_field(rng: np.random.Generator, xy: np.ndarray, scale: float, bumps: int) -> np.ndarray:
    """A standardized smooth random field: a sum of Gaussian bumps of width ``scale`` km."""
    centres = rng.uniform(-scale, GEO_EXTENT + scale, (bumps, 2))
    weights = rng.normal(0.0, 1.0, bumps)
    d2 = ((xy[:, None, :] - centres[None, :, :]) ** 2).sum(axis=2)
    f = np.exp(-d2 / (2 * scale * scale)) @ weights
    return (f - f.mean()) / f.std()


def geo_folds(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The reference folds: random = row index mod 5; spatial = 25-km block (bx + 4 by) mod 5."""
    n = len(x)
    random_fold = np.arange(n) % GEO_FOLDS
    width = GEO_EXTENT / GEO_BLOCKS
    bx = np.clip((np.asarray(x) // width).astype(int), 0, GEO_BLOCKS - 1)
    by = np.clip((np.asarray(y) // width).astype(int), 0, GEO_BLOCKS - 1)
    return random_fold, (bx + GEO_BLOCKS * by) % GEO_FOLDS


def geo_cv(X: np.ndarray, xy: np.ndarray, target: np.ndarray, fold: np.ndarray, neighbours: int = 0) -> list[float]:
    """Per-fold RMSE of least squares on X (plus an intercept), optionally plus kNN residual smoothing.

    With ``neighbours`` > 0 the prediction at a held-out site adds the mean training residual
    of its ``neighbours`` nearest training sites (a simple stand-in for kriging the residual).
    """
    out = []
    for f in np.unique(fold):
        te, tr = fold == f, fold != f
        D = np.column_stack([np.ones(tr.sum()), X[tr]])
        coef, *_ = np.linalg.lstsq(D, target[tr], rcond=None)
        pred = np.column_stack([np.ones(te.sum()), X[te]]) @ coef
        if neighbours:
            resid = target[tr] - D @ coef
            d2 = ((xy[te][:, None, :] - xy[tr][None, :, :]) ** 2).sum(axis=2)
            near = np.argsort(d2, axis=1)[:, :neighbours]
            pred = pred + resid[near].mean(axis=1)
        out.append(float(np.sqrt(np.mean((target[te] - pred) ** 2))))
    return out


def _geospatial(rng: np.random.Generator, size: str, data_path: Path) -> dict[str, Any]:
    """Resource concentration at sampled sites: linear in a few covariates plus a smooth field.

    Sites (x, y) are uniform in a 100 x 100 km square (800-1200 of them). Covariates, each built
    from standardized smooth random fields F_l (sums of 60 Gaussian bumps of width l km with
    N(0, 1) weights and centres spread over the square)::

        elevation         = 300 + 2.5 x + 120 F_20                 (m)
        distance_to_river = distance to the curve y = y0 + a sin(2 pi x / lam + phi)   (km)
                            y0 ~ U(35, 65), a ~ U(8, 15), lam ~ U(50, 90)
        soil_ph           = 6.4 + 0.5 F_12 + 0.15 Normal
        rainfall          = 900 + 150 (projection of (x, y) on a random direction, standardized)
                            + 80 F_25                               (mm)
        slope             = max(0, 6 + 2 F_5 + 2 Normal)           (degrees)
        ndvi              = clip(0.5 + 0.1 F_8 + 0.05 Normal, 0, 1)

    The concentration (mg/kg) is::

        C = 60 + sum_{c in M} beta_c (cov_c - mean_c) / sd_c + 5 G + Normal(0, 1.5^2)

    with M a seeded set of 2-4 covariates (|beta| ~ U(5, 6.5) for the strongest, U(2.5, 4) for
    the others, random signs; every other covariate has no effect) and G the spatially
    autocorrelated residual: a field of 80 Gaussian bumps of width U(10, 15) km, made orthogonal
    (over the sites) to the standardized covariates and then standardized, so that the field
    does not bias the covariate effects (no spatial confounding).

    Reference evaluation (in ``details``): 5-fold cross-validation with random folds (row index
    mod 5; rows are in random order) and with spatial folds (4 x 4 blocks of 25 km, block
    (bx + 4 by) mod 5), of (a) least squares on the six covariates and (b) the same plus the mean
    residual of the 10 nearest training sites. Spatial CV gives the honest, higher error.
    """
    n = int(rng.integers(GEO_SITES[size][0], GEO_SITES[size][1] + 1))
    xy = rng.uniform(0.0, GEO_EXTENT, (n, 2))
    x, y = xy[:, 0], xy[:, 1]
    elevation = 300 + 2.5 * x + 120 * _smooth_field(rng, xy, 20.0, GEO_COVARIATE_BUMPS)
    y0, a = rng.uniform(35, 65), rng.uniform(8, 15)
    lam, phi = rng.uniform(50, 90), rng.uniform(0, 2 * np.pi)
    rx = np.linspace(0, GEO_EXTENT, 801)
    river = np.column_stack([rx, y0 + a * np.sin(2 * np.pi * rx / lam + phi)])
    dist = np.sqrt(((xy[:, None, :] - river[None, :, :]) ** 2).sum(axis=2)).min(axis=1)
    soil_ph = 6.4 + 0.5 * _smooth_field(rng, xy, 12.0, GEO_COVARIATE_BUMPS) + 0.15 * rng.normal(0, 1, n)
    angle = rng.uniform(0, 2 * np.pi)
    proj = xy @ np.array([np.cos(angle), np.sin(angle)])
    rainfall = 900 + 150 * (proj - proj.mean()) / proj.std() + 80 * _smooth_field(rng, xy, 25.0, GEO_COVARIATE_BUMPS)
    slope = np.maximum(0.0, 6 + 2 * _smooth_field(rng, xy, 5.0, GEO_COVARIATE_BUMPS) + 2 * rng.normal(0, 1, n))
    ndvi = np.clip(0.5 + 0.1 * _smooth_field(rng, xy, 8.0, GEO_COVARIATE_BUMPS) + 0.05 * rng.normal(0, 1, n), 0, 1)
    covs = {
        "elevation": (elevation, "%.1f"),
        "distance_to_river": (dist, "%.3f"),
        "soil_ph": (soil_ph, "%.3f"),
        "rainfall": (rainfall, "%.1f"),
        "slope": (slope, "%.3f"),
        "ndvi": (ndvi, "%.4f"),
    }

    n_imp = int(rng.integers(GEO_N_IMPORTANT[0], GEO_N_IMPORTANT[1] + 1))
    important = [GEO_COVARIATES[i] for i in rng.choice(len(GEO_COVARIATES), n_imp, replace=False)]
    mags = np.concatenate([[rng.uniform(*GEO_TOP_EFFECT)], rng.uniform(*GEO_OTHER_EFFECT, n_imp - 1)])
    signs = np.where(rng.random(n_imp) < 0.5, -1.0, 1.0)
    beta = {c: float(m * s) for c, m, s in zip(important, mags, signs, strict=False)}
    scale = rng.uniform(*GEO_FIELD_SCALE)
    G = _smooth_field(rng, xy, scale, GEO_FIELD_BUMPS)
    # orthogonalize the field to the covariates (no spatial confounding of the effects)
    Zc = np.column_stack([(v - v.mean()) / v.std() for v, _ in covs.values()])
    G = G - Zc @ np.linalg.lstsq(Zc, G, rcond=None)[0]
    G = (G - G.mean()) / G.std()
    conc = GEO_BASE + GEO_FIELD_SD * G + rng.normal(0.0, GEO_NOISE_SD, n)
    for c, b in beta.items():
        v = covs[c][0]
        conc = conc + b * (v - v.mean()) / v.std()

    df = pd.DataFrame(
        {
            "site_id": [f"S{i + 1:04d}" for i in range(n)],
            "x_km": [f"{v:.3f}" for v in x],
            "y_km": [f"{v:.3f}" for v in y],
        }
    )
    for c in GEO_COVARIATES:
        v, fmt = covs[c]
        df[c] = [fmt % u for u in v]
    df["concentration"] = [f"{v:.3f}" for v in conc]
    df.to_csv(data_path, index=False, lineterminator="\n")
    back = pd.read_csv(data_path)

    Xb = back[list(GEO_COVARIATES)].to_numpy(float)
    xyb = back[["x_km", "y_km"]].to_numpy(float)
    target = back["concentration"].to_numpy(float)
    rf, sf = geo_folds(xyb[:, 0], xyb[:, 1])
    cv = {
        "linear_random": geo_cv(Xb, xyb, target, rf),
        "linear_spatial": geo_cv(Xb, xyb, target, sf),
        "knn_residual_random": geo_cv(Xb, xyb, target, rf, GEO_NEIGHBOURS),
        "knn_residual_spatial": geo_cv(Xb, xyb, target, sf, GEO_NEIGHBOURS),
    }
    rmse = {k: round(float(np.mean(v)), 4) for k, v in cv.items()}
    higher = rmse["knn_residual_spatial"] > rmse["knn_residual_random"]
    imp = sorted(important)
    unimp = sorted(c for c in GEO_COVARIATES if c not in beta)
    top = important[0]
    facts = [
        _fact(
            "important_covariates",
            "set",
            imp,
            ["covariate", "important", "significant", "predictor", "matter"],
            "The covariates that drive the concentration are " + ", ".join(imp) + ".",
            universe=list(GEO_COVARIATES),
            negative_context=["no effect", "not significant", "unimportant", "irrelevant"],
        ),
        _fact(
            "unimportant_covariates",
            "set",
            unimp,
            ["no effect", "not significant", "unimportant", "irrelevant", "noise"],
            "The covariates " + ", ".join(unimp) + " have no effect on the concentration.",
            universe=list(GEO_COVARIATES),
            negative_context=["drive", "strongest", "largest effect"],
        ),
        _fact(
            "top_covariate",
            "label",
            top,
            ["strongest", "most important", "largest effect", "top"],
            f"The covariate with the largest effect is {top}.",
            alternatives=[c for c in GEO_COVARIATES if c != top],
        ),
        _fact(
            "spatial_cv_higher",
            "claim",
            bool(higher),
            ["spatial cross-validation", "spatial cv", "blocked", "block cross-validation"],
            "Spatial (blocked) cross-validation gives a higher error than random "
            "cross-validation, which is optimistic under spatial autocorrelation.",
            requires=GEO_MODEL_FACTS,
        ),
        _fact(
            "residual_spatial_autocorrelation",
            "claim",
            True,
            ["spatial autocorrelation", "autocorrelat", "moran", "spatially correlated"],
            "The residuals of a covariate-only regression are spatially autocorrelated (positive Moran's I).",
            negative_context=["spatially independent", "spatially random"],
            requires=GEO_MODEL_FACTS,
        ),
    ]
    details = {
        "covariates": list(GEO_COVARIATES),
        "n_sites": n,
        "effects_per_sd": {c: round(beta.get(c, 0.0), 4) for c in GEO_COVARIATES},
        "effects_per_unit": {c: round(beta.get(c, 0.0) / float(covs[c][0].std()), 6) for c in GEO_COVARIATES},
        "field_sd": GEO_FIELD_SD,
        "field_length_scale_km": round(float(scale), 3),
        "noise_sd": GEO_NOISE_SD,
        "river": {
            "y0": round(float(y0), 3),
            "amplitude": round(float(a), 3),
            "wavelength": round(float(lam), 3),
            "phase": round(float(phi), 4),
        },
        "cv_protocol": (
            "5 folds; random fold = row index mod 5; spatial fold = (bx + 4 by) mod 5 "
            "with bx = floor(x_km / 25), by = floor(y_km / 25); models: least squares "
            "on the six covariates ('linear'), and the same plus the mean training "
            "residual of the 10 nearest training sites ('knn_residual'); RMSE is the "
            "mean of the per-fold RMSEs"
        ),
        "cv_rmse": rmse,
        "cv_rmse_per_fold": {k: [round(u, 4) for u in v] for k, v in cv.items()},
    }
    equations = (
        "C = 60 + sum_{c in M} beta_c z(cov_c) + 5 G(x, y) + N(0, 1.5^2); G a standardized "
        "smooth field (Gaussian bumps, length scale 10-15 km) orthogonal to the covariates; "
        "|beta| 5-6.5 for the strongest covariate, 2.5-4 for the others, 0 outside M."
    )
    return {"facts": facts, "details": details, "equations": equations, "frame": back}


# ----------------------------------------------------------------------------------------------
# The entry point
# ----------------------------------------------------------------------------------------------

_GENERATORS = {"ecology": _ecology, "anomaly": _anomaly, "biomarker": _biomarker, "geospatial": _geospatial}


def _fact(
    fid: str, kind: str, value: Any, context: list[str], statement: str, tolerance: float | None = None, **optional: Any
) -> dict[str, Any]:
    """One fact. ``optional`` holds the scorer's optional keys: ``universe`` (set: every
    candidate item), ``negative_context`` (set, claim: phrases naming the opposite finding),
    ``alternatives`` (label: the other candidate values)."""
    out: dict[str, Any] = {"id": fid, "kind": kind, "value": value}
    if kind == "number":
        out["tolerance"] = tolerance if tolerance is not None else 0
    out["context"] = [c.lower() for c in context]
    out["statement"] = statement
    for key, val in optional.items():
        out[key] = [v.lower() for v in val] if key == "negative_context" else val
    return out


def check_args(task: Any, seed: Any, size: Any = "default") -> tuple[str, int, str]:
    """Validated (task, seed, size); a ValueError with a one-line message otherwise."""
    if not isinstance(task, str) or task not in TASKS:
        raise ValueError(f"unknown science task {task!r}: use one of {', '.join(TASKS)}")
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"seed must be a non-negative int, got {seed!r} ({type(seed).__name__}): pass e.g. seed=0")
    if seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed}: pass e.g. seed=0")
    if not isinstance(size, str) or size not in SIZES:
        raise ValueError(f"unknown dataset size {size!r}: use one of {', '.join(SIZES)}")
    return task, int(seed), size


def generate(task: str, seed: int, out_dir: Path | str, *, size: str = "default") -> Dataset:
    """Write ``out_dir/data.csv`` and ``out_dir/ground_truth.json`` for one task and seed.

    The same (task, seed, size) writes byte-identical files; ``out_dir`` is created if needed.
    """
    task, seed, size = check_args(task, seed, size)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    data_path, truth_path = out / DATA_FILE, out / TRUTH_FILE
    rng = np.random.default_rng([seed, TASKS.index(task)])
    made = _GENERATORS[task](rng, size, data_path)
    truth = jsonable(
        {
            "task": task,
            "seed": seed,
            "size": size,
            "generator": GENERATOR,
            "description": TASK_DESCRIPTIONS[task],
            "equations": made["equations"],
            "facts": made["facts"],
            "details": made["details"],
        }
    )
    truth_path.write_text(json.dumps(truth, indent=2) + "\n", encoding="utf-8")
    frame = made["frame"]
    return Dataset(
        task=task,
        seed=seed,
        data_path=data_path,
        truth_path=truth_path,
        truth=truth,
        n_rows=int(frame.shape[0]),
        n_cols=int(frame.shape[1]),
    )


def load_truth(path: Path | str) -> dict[str, Any]:
    """Read a ``ground_truth.json`` (a directory holding one is accepted too)."""
    p = Path(path)
    if p.is_dir():
        p = p / TRUTH_FILE
    return json.loads(p.read_text(encoding="utf-8"))
