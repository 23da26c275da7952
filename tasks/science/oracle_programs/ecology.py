"""Oracle analysis, ecology: Ricker regression, change-point scan, persistence baseline.

A sandbox program (numpy, pandas and the standard library only; ``df`` is preloaded) and an
importable module: ``analyze(df)`` returns the result dict, and the tail prints it as the
``ORACLE_RESULT`` line only when the text runs where ``df`` is defined.
"""

import json
import math

import numpy as np
import pandas as pd


def ricker_design(N, tau):
    """The regressors [1, N_1..N_S, 1(t >= tau)] of every transition t -> t+1."""
    T = N.shape[0]
    return np.column_stack([np.ones(T - 1), N[:-1], (np.arange(T - 1) >= tau).astype(float)])


def ricker_fit(N, y, rows, tau):
    """Least squares of log growth on [1, N_1..N_S, 1(t >= tau)] over the given transitions."""
    X = ricker_design(N, tau)[rows]
    Y = y[rows]
    coef, *_ = np.linalg.lstsq(X, Y, rcond=None)
    resid = Y - X @ coef
    rss = (resid**2).sum(axis=0)
    dof = X.shape[0] - X.shape[1]
    se = np.sqrt(np.outer(np.diag(np.linalg.inv(X.T @ X)), rss / dof))
    return coef, coef / se, rss


def analyze(df: pd.DataFrame) -> dict:
    """The recovered facts (species, shift time, interactions, baseline RMSE) and their statistics."""
    species = [c for c in df.columns if c != "t" and pd.api.types.is_numeric_dtype(df[c])]
    N = df[species].to_numpy(float)
    T, S = N.shape
    y = np.diff(np.log(N), axis=0)  # per-capita log growth, t -> t+1

    every = np.arange(T - 1)
    # 1. regime shift: the step time that maximises the Gaussian likelihood (sum of log RSS)
    margin = 10
    scores = {tau: float(np.log(ricker_fit(N, y, every, tau)[2]).sum()) for tau in range(margin, T - margin)}
    tau_hat = min(scores, key=scores.get)
    X0 = np.column_stack([np.ones(T - 1), N[:-1]])
    c0, *_ = np.linalg.lstsq(X0, y, rcond=None)
    rss0 = ((y - X0 @ c0) ** 2).sum(axis=0)
    lr_stat = float((T - 1) * (np.log(rss0).sum() - scores[tau_hat]))
    # how sharply the likelihood peaks: log-likelihood lost when the change point moves 10 steps
    near = [scores[u] for u in (tau_hat - 10, tau_hat + 10) if u in scores]
    loglik_drop_10 = float((T - 1) / 2 * (min(near) - scores[tau_hat])) if near else None

    # 2. interactions: t statistics of a_ij (effect of species j on species i) at the shift found
    coef, tstat, _ = ricker_fit(N, y, every, tau_hat)
    neg, pos, links = [], [], []
    for i in range(S):
        for j in range(S):
            if i == j:
                continue
            t_ij = float(tstat[1 + j, i])
            if abs(t_ij) >= 4.0:
                name = f"{species[j]}->{species[i]}"
                (neg if t_ij < 0 else pos).append(name)
                links.append(
                    {
                        "link": name,
                        "a": float(coef[1 + j, i]),
                        "t": round(t_ij, 2),
                        "elasticity": round(float(coef[1 + j, i] * N[:, j].mean()), 3),
                        "p": float(math.erfc(abs(t_ij) / math.sqrt(2))),
                    }
                )
    step_t = tstat[-1]
    k = int(np.argmax(np.abs(step_t)))
    shift_species = species[k]
    shift_p = float(math.erfc(abs(float(step_t[k])) / math.sqrt(2)))

    # 3. forecasts on the last 20% of steps: persistence vs a Ricker model fitted on the first 80%
    n_test = int(round(0.2 * T))
    logN = np.log(N)
    persistence = float(np.sqrt(np.mean((logN[T - n_test :] - logN[T - n_test - 1 : T - 1]) ** 2)))
    train = np.arange(T - 1 - n_test)
    ctr, _, _ = ricker_fit(N, y, train, min(tau_hat, T - 2 - n_test))
    pred = logN[:-1] + ricker_design(N, tau_hat) @ ctr
    ricker_rmse = float(np.sqrt(np.mean((logN[1:][T - 1 - n_test :] - pred[T - 1 - n_test :]) ** 2)))

    return {
        "n_species": S,
        "shift_time": int(tau_hat),
        "negative_interactions": sorted(neg),
        "positive_interactions": sorted(pos),
        "forecast_baseline_rmse": round(persistence, 4),
        "species": species,
        "n_steps": T,
        "links": links,
        "shift_species": shift_species,
        "shift_step_coefficient": round(float(coef[-1, k]), 4),
        "shift_z": round(float(step_t[k]), 2),
        "shift_p": shift_p,
        "shift_lr_stat": round(lr_stat, 2),
        "shift_loglik_drop_10": None if loglik_drop_10 is None else round(loglik_drop_10, 2),
        "ricker_forecast_rmse": round(ricker_rmse, 4),
        "n_test": n_test,
        "residual_sd": round(float(np.sqrt(ricker_fit(N, y, every, tau_hat)[2].mean() / (T - S - 3))), 4),
    }


#: keys printed on a second line, after the result: detail no report needs (none here)
DETAIL = ()

# Run as the sandbox program (``df`` preloaded in the namespace), never on a plain import. The
# finding is printed first and kept short: a tool output or a member's output cut to its first
# characters still holds the whole ``ORACLE_RESULT`` line.
if "df" in globals():
    result = analyze(globals()["df"])
    detail = {k: result.pop(k) for k in DETAIL if k in result}
    print("ORACLE_RESULT " + json.dumps(result))
    print("ORACLE_DETAIL " + json.dumps(detail))
