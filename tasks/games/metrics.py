"""The games' metrics (paper §3.1.3, Appendix D) and a run's tables.

- **Primary metric**, per simulation, round and player: effort (Weakest-Link), extraction (CPR,
  CPR with sanctioning), contribution per round (Collective Risk), withdrawal (O-Ring), group-pool
  contribution (Public Goods). A simulation's metric is the mean over its rounds and players; the
  run's is the mean over simulations, with a 95% Student-t interval.
- **Pareto proximity** of a simulation: min(1, |m - Pareto| / |Nash - Pareto|) with m its metric
  and the references of :func:`cooplab.tasks.games.equilibria.reference`: 0 = Pareto, 1 = Nash or
  further. The uncapped distance is kept as ``proximity_raw`` (above 1 only where the metric can
  overshoot the Pareto value on the far side from Nash: Collective Risk above twice the fair share,
  O-Ring above twice its Pareto withdrawal). The near-Pareto share is the share of simulations with
  proximity <= ``near_pareto`` (0.2).
- **Fallbacks** (LLM players): a decision that had no valid answer after its attempts was played by
  the documented fallback. Every table flags them (``fallback``), and the summary gives the share of
  the game's play decisions (the action, and CPR with sanctioning's sanctions; not deliberation
  messages) that fell back.
- Payoffs; group outcomes (Collective Risk threshold met and savings lost, O-Ring success);
  sanctions given and received.
- **Bootstrap convergence** (Appendix D): for n = 1, 2, ... simulations, ``resamples`` (200)
  bootstrap samples of n of the run's simulations; the error of each sample's mean metric against
  the mean of all simulations: mean absolute error, its s.d., its 95th percentile, and the MAE in
  units of the full data's s.d.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from cooplab.evals.typed import as_frame, column
from cooplab.graphs.tables import ids
from cooplab.tasks.games import equilibria as eq

METRIC_LABEL = {
    "weakest-link": "effort",
    "cpr": "extraction",
    "cpr-sanction": "extraction",
    "collective-risk": "contribution per round",
    "o-ring": "withdrawal",
    "public-goods": "group-pool contribution",
}
ACTION_COLUMNS = {
    "weakest-link": ["effort"],
    "cpr": ["extraction"],
    "cpr-sanction": ["extraction"],
    "collective-risk": ["contribution"],
    "o-ring": ["withdrawal"],
    "public-goods": ["keep", "group_pool", "global_pool"],
}
BOOTSTRAP_MAX_N = 500  #: bootstrap sample sizes go up to min(simulations, this)
PROXIMITY_FORMULA = "min(1, |metric - pareto| / |nash - pareto|)"  #: how summary.json names the scale


# --- statistics ---------------------------------------------------------------------------------------
def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularized incomplete beta function (modified Lentz)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbt = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(lbt) * _betacf(a, b, x) / a
    return 1.0 - math.exp(lbt) * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """Student's t distribution function."""
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p: float, df: float) -> float:
    """Student's t quantile (bisection on :func:`t_cdf`; |error| < 1e-10)."""
    if not 0.0 < p < 1.0:
        raise ValueError("p must be in (0, 1)")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12:
            break
    return 0.5 * (lo + hi)


def mean_ci(x: Any, level: float = 0.95) -> dict[str, Any]:
    """Mean, s.d. and the Student-t interval of the mean (None for fewer than 2 values)."""
    x = np.asarray(x, dtype=float)
    n = int(x.size)
    if n == 0:
        return {"mean": None, "ci95": None, "sd": None, "n": 0}
    mean = float(x.mean())
    if n < 2:
        return {"mean": mean, "ci95": None, "sd": None, "n": n}
    sd = float(x.std(ddof=1))
    half = t_quantile(0.5 + level / 2.0, n - 1) * sd / math.sqrt(n)
    return {"mean": mean, "ci95": [mean - half, mean + half], "sd": sd, "n": n}


# --- the primary metric ---------------------------------------------------------------------------------
def metric_of(game: str, action: np.ndarray) -> np.ndarray:
    """(S, N) the primary metric's per-player value of one round's actions."""
    a = np.asarray(action)
    return a[..., 1] if game == "public-goods" else a


def per_round(game: str, history: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """(rounds done, S) the round's metric, mean over players."""
    return np.array([metric_of(game, h["action"]).mean(axis=-1) for h in history])


def per_simulation(game: str, history: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """(S,) each simulation's metric: the mean over its rounds and players, as total / count (so a
    profile with a rational mean gives the correctly rounded value: exact references)."""
    total = sum(metric_of(game, h["action"]).sum(axis=-1, dtype=np.int64) for h in history)
    N = np.asarray(history[0]["action"]).shape[1]
    return np.asarray(total, dtype=np.float64) / (len(history) * N)


def bootstrap_convergence(
    values: Any,
    *,
    resamples: int = 200,
    sizes: Sequence[int] | None = None,
    rng: np.random.Generator | None = None,
    errors: bool = False,
) -> pd.DataFrame:
    """Appendix D: for each n in ``sizes`` (default 1..min(S, 500)), ``resamples`` means of n
    simulations drawn with replacement from ``values`` (one metric per simulation); their absolute
    error against the mean of all values. Columns n, mae, sd, p95, mae_sd_units (MAE / s.d. of the
    values; NaN when every simulation has the same value); with ``errors``, the (resamples,) errors
    of each n as a column too."""
    x = np.asarray(values, dtype=float)
    S = x.size
    if S == 0:
        return pd.DataFrame(columns=["n", "mae", "sd", "p95", "mae_sd_units"])
    rng = rng if rng is not None else np.random.default_rng(0)
    full, spread = float(x.mean()), float(x.std(ddof=1)) if S > 1 else 0.0
    sizes = list(range(1, min(S, BOOTSTRAP_MAX_N) + 1)) if sizes is None else [int(n) for n in sizes]
    rows = []
    for n in sizes:
        means = x[rng.integers(0, S, size=(resamples, n))].mean(axis=1)
        err = np.abs(means - full)
        row = {
            "n": n,
            "mae": float(err.mean()),
            "sd": float(err.std(ddof=1)) if resamples > 1 else 0.0,
            "p95": float(np.percentile(err, 95)),
            "mae_sd_units": float(err.mean() / spread) if spread > 0 else float("nan"),
        }
        if errors:
            row["errors"] = err
        rows.append(row)
    return pd.DataFrame(rows)


# --- fallbacks -------------------------------------------------------------------------------------------
def fallback_masks(
    P: Any, history: Sequence[Mapping[str, Any]], decisions: Any, action_phase: str
) -> dict[str, np.ndarray]:
    """(rounds done, S, N) booleans: which play decisions fell back. ``"action"``: the decision of
    the primary metric (``action_phase``); ``"sanction"`` (CPR with sanctioning only): the sanction
    decision. ``decisions`` are the run's decision rows (round, society, agent, phase,
    fallback_used); rows of a round not in ``history`` (a run stopped mid-round) are ignored.
    Reference players make no decisions: every entry is False."""
    R = len(history)
    S, N = np.asarray(history[0]["action"]).shape[:2] if history else (0, 0)
    phases = {"action": action_phase, **({"sanction": "sanction"} if P.GAME == "cpr-sanction" else {})}
    masks = {k: np.zeros((R, S, N), dtype=bool) for k in phases}
    rows = pd.DataFrame(list(decisions or []))
    if rows.empty or "fallback_used" not in rows:
        return masks
    rows = as_frame(rows[rows["fallback_used"].astype(bool)])
    for key, phase in phases.items():
        hit = as_frame(rows[(rows["phase"] == phase) & (rows["round"] >= 1) & (rows["round"] <= R)])
        masks[key][
            hit["round"].to_numpy(dtype=int) - 1, hit["society"].to_numpy(dtype=int), hit["agent"].to_numpy(dtype=int)
        ] = True
    return masks


def _fallback_cells(masks: Mapping[str, np.ndarray]) -> tuple[np.ndarray, int]:
    """(rounds, S, N) number of fallbacks per player and round, and the play decisions per cell."""
    return sum((m.astype(np.int64) for m in masks.values()), np.zeros((), dtype=np.int64)), len(masks)


def fallback_summary(masks: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """The share of the game's play decisions that fell back, in all and per phase."""
    cells, per = _fallback_cells(masks)
    n = int(cells.size * per)
    k = int(cells.sum())
    return {
        "decisions": n,
        "fallbacks": k,
        "share": _r(k / n) if n else 0.0,
        "by_phase": {key: {"decisions": int(m.size), "fallbacks": int(m.sum())} for key, m in masks.items()},
    }


# --- tables ----------------------------------------------------------------------------------------------
def player_table(
    P: Any, history: Sequence[Mapping[str, Any]], group: np.ndarray, fallbacks: Mapping[str, np.ndarray] | None = None
) -> pd.DataFrame:
    """One row per simulation, round and player: the action(s), the payoff, whether the action was a
    fallback (``fallback``; CPR with sanctioning also ``sanction_fallback``), and the game's extras
    (CPR with sanctioning: the CPR payoff, sanction tokens given and received; Collective Risk: the
    expected payoff; both paid at the end of round R)."""
    if not history:
        return pd.DataFrame()
    game = P.GAME
    S, N = np.asarray(history[0]["action"]).shape[:2]
    fb = fallbacks if fallbacks is not None else fallback_masks(P, history, None, "")
    keys = ids(
        np.repeat(np.arange(S), N), np.tile(np.arange(N), S)
    )  # "SIMULATION:PLAYER", as the decisions and ledger (graphs/tables.py)
    frames = []
    for t, h in enumerate(history):
        d: dict[str, Any] = {
            "simulation": np.repeat(np.arange(S), N),
            "round": np.full(S * N, int(h["round"])),
            "player": np.tile(np.arange(N), S),
            "agent_id": keys,
            "group": np.tile(group, S),
        }
        a = np.asarray(h["action"])
        for k, col in enumerate(ACTION_COLUMNS[game]):
            d[col] = (a[..., k] if a.ndim == 3 else a).ravel().astype(np.int64)
        d["payoff"] = np.asarray(h["payoff"], dtype=float).ravel()
        d["fallback"] = fb["action"][t].ravel()
        if game == "cpr-sanction":
            s = np.asarray(h["sanction"])
            d["sanction_fallback"] = fb["sanction"][t].ravel()
            d["cpr_payoff"] = np.asarray(h["cpr_payoff"]).ravel()
            d["sanctions_given"] = s.sum(axis=2).ravel().astype(np.int64)
            d["sanctions_received"] = s.sum(axis=1).ravel().astype(np.int64)
        if game == "collective-risk":
            d["expected_payoff"] = np.asarray(h["expected_payoff"], dtype=float).ravel()
        frames.append(pd.DataFrame(d))
    return pd.concat(frames, ignore_index=True)


def round_table(
    P: Any, history: Sequence[Mapping[str, Any]], fallbacks: Mapping[str, np.ndarray] | None = None
) -> pd.DataFrame:
    """One row per simulation and round: the metric (mean over players), its proximity (and the
    uncapped ``proximity_raw``), the mean payoff, whether any play decision fell back (``fallback``)
    and the share that did (``fallback_share``), and the round's group outcomes."""
    if not history:
        return pd.DataFrame()
    game, ref = P.GAME, eq.reference(P)
    S = np.asarray(history[0]["action"]).shape[0]
    cells, per = _fallback_cells(fallbacks if fallbacks is not None else fallback_masks(P, history, None, ""))
    frames = []
    for t, h in enumerate(history):
        a = np.asarray(h["action"])
        m = metric_of(game, a).mean(axis=-1)
        d: dict[str, Any] = {
            "simulation": np.arange(S),
            "round": np.full(S, int(h["round"])),
            "metric": m,
            "proximity": ref.proximity(m),
            "proximity_raw": ref.distance(m),
            "mean_payoff": np.asarray(h["payoff"], dtype=float).mean(axis=-1),
            "fallback": cells[t].sum(axis=-1) > 0,
            "fallback_share": cells[t].sum(axis=-1) / (per * cells.shape[-1]),
        }
        if game == "weakest-link":
            d["min_effort"] = a.min(axis=-1).astype(np.int64)
        elif game in ("cpr", "cpr-sanction"):
            d["total_extracted"] = a.sum(axis=-1, dtype=np.int64)
            d["pool_remaining"] = np.maximum(0, P.capacity - d["total_extracted"])
            if game == "cpr-sanction":
                d["sanction_tokens"] = np.asarray(h["sanction"]).sum(axis=(1, 2), dtype=np.int64)
                d["sanctions_dropped"] = np.asarray(h["dropped"], dtype=np.int64)
        elif game == "collective-risk":
            d["total_contributed"] = np.asarray(h["total"], dtype=np.int64)
            d["mean_expected_payoff"] = np.asarray(h["expected_payoff"], dtype=float).mean(axis=-1)
            final = "met" in h
            d["threshold_met"] = pd.array(np.asarray(h["met"]) if final else [None] * S, dtype="boolean")
            d["savings_lost"] = pd.array(np.asarray(h["lost"]) if final else [None] * S, dtype="boolean")
        elif game == "o-ring":
            prod = np.asarray(h["production"])
            for k in range(prod.shape[1]):
                d[f"production_g{k}"] = prod[:, k]
            d["pool_remaining"] = np.maximum(0, P.pool - a.sum(axis=-1, dtype=np.int64))
            d["success"] = np.asarray(h["success"], dtype=bool)
        elif game == "public-goods":
            pools = np.asarray(h["group_pools"])
            for k in range(pools.shape[1]):
                d[f"group_pool_g{k}"] = pools[:, k].astype(np.int64)
            d["global_pool"] = np.asarray(h["global_pool"]).astype(np.int64)
        frames.append(pd.DataFrame(d))
    return pd.concat(frames, ignore_index=True)


def sanction_table(history: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """CPR with sanctioning: one row per (simulation, round, sanctioner, target) with tokens > 0."""
    frames = []
    for h in history:
        s = np.asarray(h["sanction"])
        si, i, j = np.nonzero(s)
        frames.append(
            pd.DataFrame(
                {
                    "simulation": si,
                    "round": int(h["round"]),
                    "sanctioner": i,
                    "target": j,
                    "sanctioner_id": ids(si, i),
                    "target_id": ids(si, j),
                    "tokens": s[si, i, j].astype(np.int64),
                }
            )
        )
    return (
        pd.concat(frames, ignore_index=True)
        if frames
        else pd.DataFrame(
            columns=["simulation", "round", "sanctioner", "target", "sanctioner_id", "target_id", "tokens"]
        )
    )


def simulation_table(
    P: Any, history: Sequence[Mapping[str, Any]], fallbacks: Mapping[str, np.ndarray] | None = None
) -> pd.DataFrame:
    """One row per simulation: its metric, proximity (and the uncapped ``proximity_raw``) and
    near-Pareto flag, the mean total payoff per player, whether any play decision fell back
    (``fallback``) and the share that did (``fallback_share``), and its outcomes."""
    if not history:
        return pd.DataFrame()
    game, ref = P.GAME, eq.reference(P)
    m = per_simulation(game, history)
    prox = ref.proximity(m)
    S = m.size
    cells, per = _fallback_cells(fallbacks if fallbacks is not None else fallback_masks(P, history, None, ""))
    d: dict[str, Any] = {
        "simulation": np.arange(S),
        "metric": m,
        "proximity": prox,
        "proximity_raw": ref.distance(m),
        "near_pareto": prox <= P.near_pareto,
        "payoff": sum((np.asarray(h["payoff"], dtype=float) for h in history), np.zeros(())).mean(axis=-1),
        "fallback": cells.sum(axis=(0, 2)) > 0,
        "fallback_share": cells.sum(axis=(0, 2)) / (per * cells.shape[0] * cells.shape[2]),
    }
    if game == "weakest-link":
        d["mean_min_effort"] = np.mean([np.asarray(h["action"]).min(axis=-1) for h in history], axis=0)
    elif game == "cpr-sanction":
        d["sanction_tokens"] = sum(np.asarray(h["sanction"]).sum(axis=(1, 2), dtype=np.int64) for h in history)
    elif game == "collective-risk":
        last = history[-1]
        d["expected_payoff"] = (
            np.asarray(last["expected_payoff"], dtype=float).mean(axis=-1) if "met" in last else np.full(S, np.nan)
        )
        d["total_contributed"] = np.asarray(last["total"], dtype=np.int64)
        d["threshold_met"] = pd.array(np.asarray(last["met"]) if "met" in last else [None] * S, dtype="boolean")
        d["savings_lost"] = pd.array(np.asarray(last["lost"]) if "met" in last else [None] * S, dtype="boolean")
    elif game == "o-ring":
        d["success_rate"] = np.mean([np.asarray(h["success"], dtype=float) for h in history], axis=0)
    elif game == "public-goods":
        d["mean_global_pool"] = np.mean([np.asarray(h["global_pool"], dtype=float) for h in history], axis=0)
    return pd.DataFrame(d)


# --- the summary -----------------------------------------------------------------------------------------
def _r(x: Any, nd: int = 6) -> Any:
    if x is None:
        return None
    if isinstance(x, list):
        return [_r(v, nd) for v in x]
    x = float(x)
    return None if not math.isfinite(x) else round(x, nd)


def summarize(
    P: Any,
    history: Sequence[Mapping[str, Any]],
    sims: pd.DataFrame,
    convergence: pd.DataFrame,
    fallbacks: Mapping[str, np.ndarray] | None = None,
) -> dict[str, Any]:
    """The task's summary fields: the primary metric (mean, 95% CI) with its Nash and Pareto values,
    Pareto proximity and the near-Pareto share, the share of fallback decisions, payoffs, group
    outcomes, sanctions, and the bootstrap convergence."""
    game, ref = P.GAME, eq.reference(P)
    out: dict[str, Any] = {
        "rounds_completed": len(history),
        "fallback": fallback_summary(fallbacks if fallbacks is not None else fallback_masks(P, history, None, "")),
    }
    base = {
        "name": ACTION_COLUMNS[game][1 if game == "public-goods" else 0],
        "label": METRIC_LABEL[game],
        "nash": _r(ref.nash),
        "pareto": _r(ref.pareto),
        "pareto_basis": ref.basis,
    }
    if not history:
        out.update(
            metric={**base, "mean": None, "ci95": None, "sd": None}, pareto_proximity=None, payoff=None, outcomes={}
        )
        return out
    mc, pc = mean_ci(sims["metric"]), mean_ci(sims["proximity"])
    out["metric"] = {**base, "mean": _r(mc["mean"]), "ci95": _r(mc["ci95"]), "sd": _r(mc["sd"])}
    raw = sims["proximity_raw"].to_numpy(dtype=float)
    out["pareto_proximity"] = {
        "mean": _r(pc["mean"]),
        "ci95": _r(pc["ci95"]),
        "near_pareto_share": _r(float(column(sims, "near_pareto").mean())),
        "near_pareto_threshold": P.near_pareto,
        "normalization": PROXIMITY_FORMULA,
        "raw_distance_mean": _r(float(raw.mean())),
        "beyond_nash_share": _r(float((raw > 1.0).mean())),
    }
    pay = mean_ci(sims["payoff"])
    R = len(history)
    out["payoff"] = {
        "mean_total_per_player": _r(pay["mean"]),
        "ci95": _r(pay["ci95"]),
        "mean_per_player_per_round": _r(pay["mean"] / R),
    }
    oc: dict[str, Any] = {}
    if game == "weakest-link":
        oc["mean_min_effort"] = _r(sims["mean_min_effort"].mean())
    elif game == "cpr-sanction":
        N = P.n_players
        given = np.array([np.asarray(h["sanction"]).sum(axis=2) for h in history])  # (R, S, N)
        received = np.array([np.asarray(h["sanction"]).sum(axis=1) for h in history])
        oc["sanctions"] = {
            "tokens_given_per_player_round": _r(given.mean()),
            "tokens_received_per_player_round": _r(received.mean()),
            "share_sanctioning": _r((given > 0).mean()),
            "share_sanctioned": _r((received > 0).mean()),
            "dropped_out_of_group": int(sum(int(np.asarray(h["dropped"]).sum()) for h in history)),
            "players": N,
        }
    elif game == "collective-risk":
        final = "met" in history[-1]
        oc["game_over"] = final
        if final:
            oc["threshold_met_rate"] = _r(sims["threshold_met"].astype(float).mean())
            oc["savings_lost_rate"] = _r(sims["savings_lost"].astype(float).mean())
            oc["expected_payoff_per_player"] = _r(sims["expected_payoff"].mean())
        oc["mean_total_contributed"] = _r(sims["total_contributed"].mean())
        oc["threshold"] = P.threshold
    elif game == "o-ring":
        oc["success_rate"] = _r(sims["success_rate"].mean())
    elif game == "public-goods":
        oc["mean_global_pool_contribution"] = _r(
            float(np.mean([np.asarray(h["action"])[..., 2].mean() for h in history]))
        )
        oc["mean_keep"] = _r(float(np.mean([np.asarray(h["action"])[..., 0].mean() for h in history])))
    out["outcomes"] = oc
    cv = convergence
    out["convergence"] = {
        "resamples": 200,
        "n": cv["n"].astype(int).tolist(),
        "mae": _r(cv["mae"].tolist()),
        "mae_sd_units": _r(cv["mae_sd_units"].tolist()),
    }
    return out
