"""Oracle analysis, geospatial: least squares, Moran's I permutation test, random vs spatial CV.

A sandbox program (numpy, pandas and the standard library only; ``df`` is preloaded) and an
importable module: ``analyze(df)`` returns the result dict, and the tail prints it as the
``ORACLE_RESULT`` line only when the text runs where ``df`` is defined.
"""

import json
import math

import numpy as np
import pandas as pd


def moran(v, nb):
    """Moran's I of ``v`` with row-standardized weights over the neighbour index array ``nb``."""
    v = v - v.mean()
    return float((v * v[nb].mean(1)).sum() / (v**2).sum())


def cv(X, xy, yv, cols, fold, k=0):
    """Per-fold RMSE of least squares on ``cols``; with ``k`` the mean training residual of the
    k nearest training sites is added to each prediction (a kriging-like spatial model)."""
    out = []
    for f in np.unique(fold):
        te, tr = fold == f, fold != f
        A = np.column_stack([np.ones(tr.sum()), X[tr][:, cols]])
        c, *_ = np.linalg.lstsq(A, yv[tr], rcond=None)
        pred = np.column_stack([np.ones(te.sum()), X[te][:, cols]]) @ c
        if k:
            r = yv[tr] - A @ c
            dd = ((xy[te][:, None, :] - xy[tr][None]) ** 2).sum(2)
            pred = pred + r[np.argsort(dd, axis=1)[:, :k]].mean(1)
        out.append(float(np.sqrt(np.mean((yv[te] - pred) ** 2))))
    return out


def analyze(df: pd.DataFrame) -> dict:
    """The recovered important covariates, residual autocorrelation and CV comparison."""
    covs = [
        c
        for c in df.columns
        if c not in ("site_id", "x_km", "y_km", "concentration") and pd.api.types.is_numeric_dtype(df[c])
    ]
    X = df[covs].to_numpy(float)
    xy = df[["x_km", "y_km"]].to_numpy(float)
    yv = df["concentration"].to_numpy(float)
    n = len(yv)
    rng = np.random.default_rng(2024)

    # 1. least squares on standardized covariates
    Xs = (X - X.mean(0)) / X.std(0)
    D = np.column_stack([np.ones(n), Xs])
    coef, *_ = np.linalg.lstsq(D, yv, rcond=None)
    resid = yv - D @ coef
    s2 = (resid**2).sum() / (n - D.shape[1])
    tvals = coef / np.sqrt(np.diag(np.linalg.inv(D.T @ D)) * s2)

    # 2. Moran's I of the residuals (8 nearest neighbours, row-standardized), permutation test
    d2 = ((xy[:, None, :] - xy[None]) ** 2).sum(2)
    np.fill_diagonal(d2, np.inf)
    nb = np.argsort(d2, axis=1)[:, :8]
    moran_i = moran(resid, nb)
    perms = [moran(rng.permutation(resid), nb) for _ in range(199)]
    moran_p = (1 + sum(m >= moran_i for m in perms)) / 200.0

    # 3. cross-validation: random folds (row index mod 5) vs spatial blocks (25 km, (bx + 4 by) mod 5)
    random_fold = np.arange(n) % 5
    bx = np.clip((xy[:, 0] // 25).astype(int), 0, 3)
    by = np.clip((xy[:, 1] // 25).astype(int), 0, 3)
    spatial_fold = (bx + 4 * by) % 5
    allc = list(range(len(covs)))
    folds = {
        "linear_random": cv(X, xy, yv, allc, random_fold),
        "linear_spatial": cv(X, xy, yv, allc, spatial_fold),
        "knn_residual_random": cv(X, xy, yv, allc, random_fold, 10),
        "knn_residual_spatial": cv(X, xy, yv, allc, spatial_fold, 10),
    }
    rmse = {k: round(float(np.mean(v)), 4) for k, v in folds.items()}
    gap = np.array(folds["knn_residual_spatial"]) - np.array(folds["knn_residual_random"])
    paired_t = float(gap.mean() / (gap.std(ddof=1) / math.sqrt(len(gap))))

    # 4. which covariates matter: |t| > 4 in the regression; as a check, the rise of the spatial-CV
    #    error when the covariate is left out
    drop = {}
    for j, c in enumerate(covs):
        rest = [i for i in allc if i != j]
        drop[c] = round(float(np.mean(cv(X, xy, yv, rest, spatial_fold)) / rmse["linear_spatial"] - 1), 4)
    important = sorted(c for j, c in enumerate(covs) if abs(tvals[1 + j]) > 4.0)
    unimportant = sorted(c for c in covs if c not in important)
    top = covs[int(np.argmax(np.abs(coef[1:])))]

    return {
        "important_covariates": important,
        "unimportant_covariates": unimportant,
        "top_covariate": top,
        "spatial_cv_higher": bool(rmse["knn_residual_spatial"] > rmse["knn_residual_random"]),
        "residual_spatial_autocorrelation": bool(moran_i > 0 and moran_p < 0.05),
        "n_sites": int(n),
        "covariates": covs,
        "coef_per_sd": {c: round(float(coef[1 + j]), 3) for j, c in enumerate(covs)},
        "t_values": {c: round(float(tvals[1 + j]), 2) for j, c in enumerate(covs)},
        "r2": round(float(1 - resid.var() / yv.var()), 3),
        "moran_i": round(moran_i, 3),
        "moran_p": moran_p,
        "cv_rmse": rmse,
        "cv_rmse_per_fold": {k: [round(u, 4) for u in v] for k, v in folds.items()},
        "cv_paired_t": round(paired_t, 2),
        "drop_one_increase": drop,
    }


#: keys printed on a second line, after the result: detail no report needs (the per-fold errors)
DETAIL = ("cv_rmse_per_fold",)

# Run as the sandbox program (``df`` preloaded in the namespace), never on a plain import. The
# finding is printed first and kept short: a tool output or a member's output cut to its first
# characters still holds the whole ``ORACLE_RESULT`` line.
if "df" in globals():
    result = analyze(globals()["df"])
    detail = {k: result.pop(k) for k in DETAIL if k in result}
    print("ORACLE_RESULT " + json.dumps(result))
    print("ORACLE_DETAIL " + json.dumps(detail))
