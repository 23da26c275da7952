"""The scripted "oracle" science team: an analysis that recovers every ground-truth fact.

``ORACLE_CODE[task]`` is a self-contained Python program meant for the sandbox: a pandas
DataFrame ``df`` (the task's ``data.csv``) is already loaded, only numpy, pandas and the standard
library are used (no scipy, no scikit-learn: least squares, logistic regression by IRLS,
k-means, change-point scans, robust z-scores, Moran's I and cross-validation folds are written
out in numpy), and the last line printed is ``ORACLE_RESULT <json>`` with the recovered facts
under the ground truth's fact ids plus supporting statistics. Each program runs in well under
5 s on one CPU.

:func:`run_oracle_locally` runs a program in-process (the tests use it; the product runs the
same string in the Docker sandbox). :func:`oracle_report` turns the recovered facts into the
seven-section Markdown report a good team writes; :func:`garbage_report` and
:func:`wrong_report` are what a useless team and a confidently wrong team write. The three
calibrate the report scorers: the oracle's report should score high, the garbage low, and the
wrong one should lose accuracy while keeping its structure.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cooplab.tasks.science.datasets import check_args

RESULT_PREFIX = "ORACLE_RESULT "

# ----------------------------------------------------------------------------------------------
# The oracle programs (run with a DataFrame ``df`` preloaded)
# ----------------------------------------------------------------------------------------------

_ECOLOGY = r'''
"""Oracle analysis, ecology: Ricker regression, change-point scan, persistence baseline."""
import json, math
import numpy as np
import pandas as pd

species = [c for c in df.columns if c != "t" and pd.api.types.is_numeric_dtype(df[c])]
N = df[species].to_numpy(float)
T, S = N.shape
y = np.diff(np.log(N), axis=0)          # per-capita log growth, t -> t+1


def ricker_fit(rows, tau):
    """Least squares of log growth on [1, N_1..N_S, 1(t >= tau)] over the given transitions."""
    X = np.column_stack([np.ones(T - 1), N[:-1], (np.arange(T - 1) >= tau).astype(float)])[rows]
    Y = y[rows]
    coef, *_ = np.linalg.lstsq(X, Y, rcond=None)
    resid = Y - X @ coef
    rss = (resid ** 2).sum(axis=0)
    dof = X.shape[0] - X.shape[1]
    se = np.sqrt(np.outer(np.diag(np.linalg.inv(X.T @ X)), rss / dof))
    return coef, coef / se, rss


every = np.arange(T - 1)
# 1. regime shift: the step time that maximises the Gaussian likelihood (sum of log RSS)
margin = 10
scores = {tau: float(np.log(ricker_fit(every, tau)[2]).sum()) for tau in range(margin, T - margin)}
tau_hat = min(scores, key=scores.get)
X0 = np.column_stack([np.ones(T - 1), N[:-1]])
c0, *_ = np.linalg.lstsq(X0, y, rcond=None)
rss0 = ((y - X0 @ c0) ** 2).sum(axis=0)
lr_stat = float((T - 1) * (np.log(rss0).sum() - scores[tau_hat]))
# how sharply the likelihood peaks: log-likelihood lost when the change point moves 10 steps
near = [scores[u] for u in (tau_hat - 10, tau_hat + 10) if u in scores]
loglik_drop_10 = float((T - 1) / 2 * (min(near) - scores[tau_hat])) if near else None

# 2. interactions: t statistics of a_ij (effect of species j on species i) at the shift found
coef, tstat, _ = ricker_fit(every, tau_hat)
neg, pos, links = [], [], []
for i in range(S):
    for j in range(S):
        if i == j:
            continue
        t_ij = float(tstat[1 + j, i])
        if abs(t_ij) >= 4.0:
            name = f"{species[j]}->{species[i]}"
            (neg if t_ij < 0 else pos).append(name)
            links.append({"link": name, "a": float(coef[1 + j, i]), "t": round(t_ij, 2),
                          "elasticity": round(float(coef[1 + j, i] * N[:, j].mean()), 3),
                          "p": float(math.erfc(abs(t_ij) / math.sqrt(2)))})
step_t = tstat[-1]
k = int(np.argmax(np.abs(step_t)))
shift_species = species[k]
shift_p = float(math.erfc(abs(float(step_t[k])) / math.sqrt(2)))

# 3. forecasts on the last 20% of steps: persistence vs a Ricker model fitted on the first 80%
n_test = int(round(0.2 * T))
logN = np.log(N)
persistence = float(np.sqrt(np.mean((logN[T - n_test:] - logN[T - n_test - 1:T - 1]) ** 2)))
train = np.arange(T - 1 - n_test)
ctr, _, _ = ricker_fit(train, min(tau_hat, T - 2 - n_test))
Xall = np.column_stack([np.ones(T - 1), N[:-1], (np.arange(T - 1) >= tau_hat).astype(float)])
pred = logN[:-1] + Xall @ ctr
ricker_rmse = float(np.sqrt(np.mean((logN[1:][T - 1 - n_test:] - pred[T - 1 - n_test:]) ** 2)))

result = {
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
    "residual_sd": round(float(np.sqrt(ricker_fit(every, tau_hat)[2].mean() / (T - S - 3))), 4),
}
print("ORACLE_RESULT " + json.dumps(result))
'''

_ANOMALY = r'''
"""Oracle analysis, anomaly: daily profiles, robust z-scores, rolling medians."""
import json, math
import numpy as np
import pandas as pd

sensors = [c for c in df.columns if pd.api.types.is_numeric_dtype(df[c])]
X = df[sensors].to_numpy(float)
T, S = X.shape
stamp = pd.to_datetime(df["timestamp"])
step_min = int(round(stamp.diff().dt.total_seconds().median() / 60))
period = int(round(24 * 60 / step_min))
slot = ((stamp.dt.hour * 60 + stamp.dt.minute) // step_min).to_numpy()


def mad_sd(a, axis=0):
    med = np.median(a, axis=axis, keepdims=True)
    return 1.4826 * np.median(np.abs(a - med), axis=axis)


# 1. seasonal (time-of-day) profile: the median over days of every slot; residuals from it
profile = np.vstack([np.median(X[slot == s], axis=0) for s in range(period)])
R = X - profile[slot]
sd_raw = mad_sd(R)
Z = R / sd_raw
# 2. the noise common to all sensors: the cross-sensor median, regressed out of every sensor
common = np.median(Z, axis=1)
load = (Z * common[:, None]).sum(axis=0) / (common ** 2).sum()
E = Z - common[:, None] * load
E = E / mad_sd(E)

# 3. collective anomalies: long runs where the rolling median of the residual leaves zero
win, thr, min_run = 21, 2.8, 10
roll = pd.DataFrame(E).rolling(win, center=True, min_periods=win // 2).median().to_numpy()
collective = []
for s in range(S):
    flag = np.abs(roll[:, s]) > thr
    t = 0
    while t < T:
        if flag[t]:
            u = t
            while u + 1 < T and (flag[u + 1] or (u + 6 < T and flag[u + 2:u + 7].any())):
                u += 1
            if u - t + 1 >= min_run:
                collective.append({"sensor": sensors[s], "start": int(t), "end": int(u),
                                   "mean_z": round(float(E[t:u + 1, s].mean()), 2)})
            t = u + 1
        else:
            t += 1
masked = np.zeros((T, S), bool)
for ev in collective:
    s = sensors.index(ev["sensor"])
    masked[max(0, ev["start"] - win):ev["end"] + win + 1, s] = True

# 4. single-step anomalies: |z| > 8 outside the collective runs; point if outside the
#    sensor's normal range (daily profile extremes +- 4 sd), contextual otherwise
lo = profile.min(axis=0) - 4 * sd_raw
hi = profile.max(axis=0) + 4 * sd_raw
point, contextual = [], []
for t, s in zip(*np.nonzero((np.abs(E) > 8.0) & ~masked)):
    rec = {"sensor": sensors[s], "index": int(t), "z": round(float(E[t, s]), 1),
           "timestamp": str(df["timestamp"].iloc[t])}
    bucket = point if (X[t, s] < lo[s] or X[t, s] > hi[s]) else contextual
    if bucket and bucket[-1]["sensor"] == rec["sensor"] and t - bucket[-1]["index"] <= 2:
        continue  # one anomaly spanning adjacent steps
    bucket.append(rec)
point.sort(key=lambda r: r["index"])
contextual.sort(key=lambda r: r["index"])
collective.sort(key=lambda r: r["start"])

# how extreme the flagged values are under a Gaussian null (two-sided), and how far the
# collective runs sit from zero (a z test of the run mean of the AR residual, crude)
min_abs_z = min([abs(r["z"]) for r in point + contextual], default=None)
z_values = [abs(r["z"]) for r in point + contextual]
global_z = [round(float((X[r["index"], sensors.index(r["sensor"])]
                         - np.median(X[:, sensors.index(r["sensor"])]))
                        / X[:, sensors.index(r["sensor"])].std()), 2) for r in contextual]
involved = sorted({r["sensor"] for r in point + contextual + collective})
result = {
    "n_point_anomalies": len(point),
    "n_contextual_anomalies": len(contextual),
    "n_collective_anomalies": len(collective),
    "anomalous_sensors": involved,
    "collective_sensors": sorted({r["sensor"] for r in collective}),
    "n_sensors": S,
    "n_steps": T,
    "period_steps": period,
    "point": point,
    "contextual": contextual,
    "collective": collective,
    "threshold_z": 8.0,
    "min_flagged_z": min_abs_z,
    "max_p_flagged": float(math.erfc(min_abs_z / math.sqrt(2))) if z_values else None,
    "contextual_global_z": global_z,
    "common_factor_share": round(float(np.var(common) / np.var(Z)), 3),
}
print("ORACLE_RESULT " + json.dumps(result))
'''

_BIOMARKER = r'''
"""Oracle analysis, biomarker: bimodality screen, k-means with silhouette, logistic IRLS."""
import json, math
import numpy as np
import pandas as pd

bms = [c for c in df.columns if c.upper().startswith("BM")]
Zall = df[bms].to_numpy(float)
Zall = (Zall - Zall.mean(axis=0)) / Zall.std(axis=0)
n, p = Zall.shape
treat = df["treatment"].to_numpy(float)
resp = df["response"].to_numpy(float)
age = df["age"].to_numpy(float)
age = (age - age.mean()) / age.std()
rng = np.random.default_rng(12345)


def split_ratio(v):
    """Share of variance explained by the best two-group split of a sorted 1-D sample."""
    v = np.sort(v)
    c = np.cumsum(v)
    k = np.arange(1, len(v))
    m1, m2 = c[:-1] / k, (c[-1] - c[:-1]) / (len(v) - k)
    between = k * (len(v) - k) / len(v) ** 2 * (m1 - m2) ** 2
    return float(between.max() / v.var())


def kmeans(A, k, restarts=10, iters=100):
    best = None
    for _ in range(restarts):
        cen = A[rng.choice(len(A), 1)]
        while len(cen) < k:  # k-means++ seeding
            d = ((A[:, None, :] - cen[None]) ** 2).sum(2).min(1)
            cen = np.vstack([cen, A[rng.choice(len(A), 1, p=d / d.sum())]])
        for _ in range(iters):
            lab = ((A[:, None, :] - cen[None]) ** 2).sum(2).argmin(1)
            new = np.vstack([A[lab == j].mean(0) if (lab == j).any() else cen[j] for j in range(k)])
            if np.allclose(new, cen):
                break
            cen = new
        inertia = ((A - cen[lab]) ** 2).sum()
        if best is None or inertia < best[0]:
            best = (inertia, lab)
    return best[1]


def silhouette(A, lab):
    D = np.sqrt(((A[:, None, :] - A[None]) ** 2).sum(2))
    ks = np.unique(lab)
    mean_d = np.column_stack([D[:, lab == k].sum(1) / max((lab == k).sum(), 1) for k in ks])
    own = np.searchsorted(ks, lab)
    size = np.array([(lab == k).sum() for k in ks])[own]
    a = mean_d[np.arange(len(A)), own] * size / np.maximum(size - 1, 1)
    mean_d[np.arange(len(A)), own] = np.inf
    b = mean_d.min(1)
    return float(np.mean((b - a) / np.maximum(a, b)))


def logit_fit(X, y, iters=50):
    """Logistic regression by iteratively reweighted least squares; (coef, standard errors)."""
    beta = np.zeros(X.shape[1])
    for _ in range(iters):
        mu = 1 / (1 + np.exp(-np.clip(X @ beta, -30, 30)))
        w = np.maximum(mu * (1 - mu), 1e-9)
        H = X.T @ (X * w[:, None]) + 1e-8 * np.eye(X.shape[1])
        step = np.linalg.solve(H, X.T @ (y - mu))
        beta = beta + step
        if np.abs(step).max() < 1e-8:
            break
    mu = 1 / (1 + np.exp(-np.clip(X @ beta, -30, 30)))
    H = X.T @ (X * (mu * (1 - mu))[:, None])
    return beta, np.sqrt(np.diag(np.linalg.inv(H)))


def pval(z):
    return float(math.erfc(abs(z) / math.sqrt(2)))


# 1. subtypes: biomarkers with a clearly bimodal distribution, then k-means (k = 2..5) on them
ratios = {b: split_ratio(Zall[:, j]) for j, b in enumerate(bms)}
cand = [b for b in bms if ratios[b] > 0.72]
A = Zall[:, [bms.index(b) for b in cand]]
sil = {k: silhouette(A, kmeans(A, k)) for k in range(2, 6)}
K = max(sil, key=sil.get)
lab = kmeans(A, K)
means = np.vstack([A[lab == k].mean(0) for k in range(K)])
cluster_marker = [cand[int(np.argmax(means[k]))] for k in range(K)]
markers = sorted(set(cluster_marker))

# 2. predictive biomarkers: treatment x biomarker interactions in one logistic model adjusted
#    for subtype, treatment x subtype and age, all non-marker biomarkers at once (Wald z > 3.5)
D = np.column_stack([(lab == k).astype(float) for k in range(1, K)])
rest = [b for b in bms if b not in cand]
Zr = Zall[:, [bms.index(b) for b in rest]]
X = np.column_stack([np.ones(n), treat, D, treat[:, None] * D, age, Zr, treat[:, None] * Zr])
coef, se = logit_fit(X, resp)
m = len(rest)
main_z = coef[-2 * m:-m] / se[-2 * m:-m]
int_z = coef[-m:] / se[-m:]
interaction = {b: {"coef": round(float(coef[-m + i]), 3), "z": round(float(int_z[i]), 2),
                   "p": pval(int_z[i]), "main_z": round(float(main_z[i]), 2)}
               for i, b in enumerate(rest)}
predictive = sorted(b for b, v in interaction.items() if abs(v["z"]) > 3.5)
prognostic = sorted(b for b, v in interaction.items()
                    if abs(v["main_z"]) > 3.5 and b not in predictive)

# 3. treatment effect per subtype: the adjusted log odds ratio (coef_T + coef_TxD_k) with its
#    Wald z, and the raw response rates with a two-proportion z test
mu = 1 / (1 + np.exp(-np.clip(X @ coef, -30, 30)))
cov = np.linalg.inv(X.T @ (X * (mu * (1 - mu))[:, None]))
by_subtype = {}
for k in range(K):
    v = np.zeros(len(coef))
    v[1] = 1.0
    if k:
        v[1 + (K - 1) + k] = 1.0
    lor, lse = float(v @ coef), math.sqrt(float(v @ cov @ v))
    sel = lab == k
    t1, t0 = resp[sel & (treat == 1)], resp[sel & (treat == 0)]
    rd = t1.mean() - t0.mean()
    pool = resp[sel].mean()
    rz = rd / math.sqrt(pool * (1 - pool) * (1 / len(t1) + 1 / len(t0)))
    by_subtype[cluster_marker[k]] = {
        "n": int(sel.sum()), "log_odds_ratio": round(lor, 3), "z": round(lor / lse, 2),
        "p": pval(lor / lse), "rate_treated": round(float(t1.mean()), 3),
        "rate_control": round(float(t0.mean()), 3), "risk_difference": round(float(rd), 3),
        "risk_difference_z": round(float(rz), 2)}
best = max(by_subtype, key=lambda mk: by_subtype[mk]["log_odds_ratio"])
worst = min(by_subtype, key=lambda mk: by_subtype[mk]["log_odds_ratio"])
reverses = by_subtype[best]["z"] > 2 and by_subtype[worst]["z"] < -2

result = {
    "n_subtypes": int(K),
    "subtype_markers": markers,
    "predictive_biomarkers": predictive,
    "responder_subtype_marker": best,
    "treatment_effect_reverses": bool(reverses),
    "n_patients": int(n),
    "n_biomarkers": int(p),
    "silhouette": {str(k): round(v, 3) for k, v in sil.items()},
    "bimodality_ratio": {b: round(ratios[b], 3) for b in cand},
    "by_subtype": by_subtype,
    "interaction": {b: interaction[b] for b in predictive},
    "prognostic_biomarkers": prognostic,
    "max_null_interaction_z": round(max([abs(v["z"]) for b, v in interaction.items()
                                         if b not in predictive] or [0.0]), 2),
}
print("ORACLE_RESULT " + json.dumps(result))
'''

_GEOSPATIAL = r'''
"""Oracle analysis, geospatial: least squares, Moran's I permutation test, random vs spatial CV."""
import json, math
import numpy as np
import pandas as pd

covs = [c for c in df.columns if c not in ("site_id", "x_km", "y_km", "concentration")
        and pd.api.types.is_numeric_dtype(df[c])]
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
s2 = (resid ** 2).sum() / (n - D.shape[1])
tvals = coef / np.sqrt(np.diag(np.linalg.inv(D.T @ D)) * s2)

# 2. Moran's I of the residuals (8 nearest neighbours, row-standardized), permutation test
d2 = ((xy[:, None, :] - xy[None]) ** 2).sum(2)
np.fill_diagonal(d2, np.inf)
nb = np.argsort(d2, axis=1)[:, :8]


def moran(v):
    v = v - v.mean()
    return float((v * v[nb].mean(1)).sum() / (v ** 2).sum())


moran_i = moran(resid)
perms = [moran(rng.permutation(resid)) for _ in range(199)]
moran_p = (1 + sum(m >= moran_i for m in perms)) / 200.0

# 3. cross-validation: random folds (row index mod 5) vs spatial blocks (25 km, (bx + 4 by) mod 5)
random_fold = np.arange(n) % 5
bx = np.clip((xy[:, 0] // 25).astype(int), 0, 3)
by = np.clip((xy[:, 1] // 25).astype(int), 0, 3)
spatial_fold = (bx + 4 * by) % 5


def cv(cols, fold, k=0):
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


allc = list(range(len(covs)))
folds = {
    "linear_random": cv(allc, random_fold),
    "linear_spatial": cv(allc, spatial_fold),
    "knn_residual_random": cv(allc, random_fold, 10),
    "knn_residual_spatial": cv(allc, spatial_fold, 10),
}
rmse = {k: round(float(np.mean(v)), 4) for k, v in folds.items()}
gap = np.array(folds["knn_residual_spatial"]) - np.array(folds["knn_residual_random"])
paired_t = float(gap.mean() / (gap.std(ddof=1) / math.sqrt(len(gap))))

# 4. which covariates matter: |t| > 4 in the regression; as a check, the rise of the spatial-CV
#    error when the covariate is left out
drop = {}
for j, c in enumerate(covs):
    rest = [i for i in allc if i != j]
    drop[c] = round(float(np.mean(cv(rest, spatial_fold)) / rmse["linear_spatial"] - 1), 4)
important = sorted(c for j, c in enumerate(covs) if abs(tvals[1 + j]) > 4.0)
unimportant = sorted(c for c in covs if c not in important)
top = covs[int(np.argmax(np.abs(coef[1:])))]

result = {
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
print("ORACLE_RESULT " + json.dumps(result))
'''

ORACLE_CODE: dict[str, str] = {
    "ecology": _ECOLOGY.lstrip(),
    "anomaly": _ANOMALY.lstrip(),
    "biomarker": _BIOMARKER.lstrip(),
    "geospatial": _GEOSPATIAL.lstrip(),
}


def parse_oracle_output(stdout: str) -> dict[str, Any]:
    """The JSON of the last ``ORACLE_RESULT`` line of a program's output."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_PREFIX):
            return json.loads(line[len(RESULT_PREFIX):])
    raise ValueError("no ORACLE_RESULT line in the oracle's output: the program did not finish")


def run_oracle_locally(task: str, data_path: Path | str) -> dict[str, Any]:
    """Run ``ORACLE_CODE[task]`` in a fresh namespace with ``df`` read from ``data_path``."""
    check_args(task, 0)
    namespace: dict[str, Any] = {"__name__": "__oracle__", "np": np, "pd": pd,
                                 "df": pd.read_csv(data_path)}
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(compile(ORACLE_CODE[task], f"<oracle:{task}>", "exec"), namespace)
    return parse_oracle_output(buf.getvalue())


# ----------------------------------------------------------------------------------------------
# Reports: the oracle's, a useless team's and a confidently wrong team's
# ----------------------------------------------------------------------------------------------

SECTIONS = ("Abstract", "Introduction", "Dataset Description", "Methods", "Results",
            "Evaluation", "Conclusion")


def _facts(truth: dict[str, Any]) -> dict[str, Any]:
    return {f["id"]: f["value"] for f in truth.get("facts", [])}


def _pick(recovered: dict[str, Any], truth: dict[str, Any], fid: str) -> Any:
    """The recovered value of a fact, or the truth's when the analysis did not produce it."""
    return recovered[fid] if fid in recovered else _facts(truth).get(fid)


def _p(p: Any) -> str:
    """A p-value as a report writes it."""
    if p is None or not isinstance(p, (int, float)) or math.isnan(p):
        return "p not computed"
    if p < 0.001:
        return "p < 0.001"
    return f"p = {p:.3f}"


def _num(x: Any, spec: str) -> str:
    """A number formatted for the report, or 'n/a' when the analysis did not produce it."""
    if x is None or not isinstance(x, (int, float)) or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return format(x, spec)


def _and(items: list[str]) -> str:
    items = list(items)
    if not items:
        return "none"
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + " and " + items[-1]


def _render(title: str, sections: dict[str, str]) -> str:
    parts = [f"# {title}", ""]
    for name in SECTIONS:
        parts += [f"## {name}", "", sections[name].strip(), ""]
    return "\n".join(parts)


def _ecology_report(r: dict[str, Any], truth: dict[str, Any]) -> str:
    S = _pick(r, truth, "n_species")
    shift = _pick(r, truth, "shift_time")
    neg = _pick(r, truth, "negative_interactions") or []
    pos = _pick(r, truth, "positive_interactions") or []
    rmse = _pick(r, truth, "forecast_baseline_rmse")
    details = truth.get("details", {})
    names = r.get("species") or details.get("species") or [f"sp{i + 1}" for i in range(int(S))]
    T = r.get("n_steps", details.get("n_steps", "several hundred"))
    n_test = r.get("n_test", details.get("forecast_test_steps", "the held-out"))
    ricker = r.get("ricker_forecast_rmse")
    sp = r.get("shift_species", details.get("shifted_species", names[0]))
    links = sorted(r.get("links", []), key=lambda x: -abs(x.get("t", 0)))
    strongest = (f"The strongest link is {links[0]['link']} (t = {links[0]['t']:.1f}, "
                 f"{_p(links[0]['p'])}, elasticity {links[0]['elasticity']:+.2f}). ") if links else ""
    ricker_txt = (f"a Ricker model trained on the first 80% of the series reaches RMSE {ricker:.3f}"
                  if ricker is not None else "the fitted Ricker model is the natural next step")
    sec = {
        "Abstract": (
            f"We analysed {T} time steps of abundances of {S} species to identify their "
            f"interactions, detect a regime shift and forecast population sizes. A Ricker model fitted "
            f"by least squares finds {len(neg)} negative and {len(pos)} positive interactions, and a "
            f"change-point scan places a regime shift at t = {shift}, when the growth rate of {sp} "
            f"drops ({_p(r.get('shift_p'))}). The persistence (naive last-value) baseline forecast has "
            f"RMSE {rmse:.3f} on log abundance over the last {n_test} steps, and {ricker_txt}."),
        "Introduction": (
            "Populations in a community grow, compete and facilitate one another, and their dynamics can "
            "change abruptly when the environment does. The task is to recover the inter-species "
            "relationships, detect regime shifts and build predictive models for future population "
            "sizes. We build on the data team's dataset_description and on the model team's "
            "model_architecture, which proposed a multi-species Ricker model with a change point."),
        "Dataset Description": (
            f"As the data team's dataset_description reports, the file has {T} rows, one per time step "
            f"t = 0..{T - 1 if isinstance(T, int) else 'T-1'}, and one abundance column per species. "
            f"The dataset contains {S} species ({', '.join(names)}). All abundances are positive, so we "
            "work with natural-log abundances and per-capita log growth rates log N_t+1 - log N_t. There "
            "are no missing values."),
        "Methods": (
            "For every species we fitted the Ricker model log N_i,t+1 - log N_i,t = r_i + sum_j a_ij "
            "N_j,t + d_i 1(t >= tau) + e by ordinary least squares, so a_ij measures the effect of "
            "species j on the growth of species i. The change point tau was chosen by a likelihood scan "
            "over all candidate times (minimising the summed log residual sums of squares), and the "
            "shift (a change-point detection) was tested with a likelihood-ratio statistic and Wald z tests of d_i. Off-diagonal "
            "coefficients with |t| of at least four (two-sided p below 0.0001) were called interactions. Forecasts were "
            "scored by RMSE of log abundance on the last 20% of the series against the persistence "
            "baseline."),
        "Results": (
            f"A regime shift occurs at t = {shift} (likelihood-ratio statistic "
            f"{_num(r.get('shift_lr_stat'), '.1f')}); the largest change is in {sp}, whose "
            f"growth rate changes by {_num(r.get('shift_step_coefficient'), '+.3f')} "
            f"(z = {_num(r.get('shift_z'), '.1f')}, {_p(r.get('shift_p'))}). "
            f"Negative interactions (the first species suppresses the growth of the second): "
            f"{_and(neg)}. Positive interactions (the first species facilitates the second): "
            f"{_and(pos)}. {strongest}All other off-diagonal interaction coefficients have |t| below four."),
        "Evaluation": (
            f"On the last {n_test} time steps the persistence (naive) baseline forecast has RMSE "
            f"{rmse:.3f} on log abundance, and {ricker_txt}. As the evaluation team's "
            "evaluation_report notes, the residual standard deviation of the Ricker fit is "
            f"{_num(r.get('residual_sd'), '.3f')}, close to the one-step forecast error, so the "
            "model captures the deterministic part of the dynamics. Moving the change point 10 steps "
            f"away from t = {shift} costs {_num(r.get('shift_loglik_drop_10'), '.1f')} units of "
            "log-likelihood, so the shift time is sharply identified."),
        "Conclusion": (
            f"The community has {S} species. They are linked by {len(neg) + len(pos)} "
            f"interactions, and their dynamics changed at t = {shift} when the growth of {sp} fell. A Ricker model with this "
            "change point forecasts better than the persistence baseline. Longer series and replicated "
            "communities would sharpen the weaker interaction estimates."),
    }
    return _render(f"Interactions and a regime shift in a {S}-species community", sec)


def _anomaly_report(r: dict[str, Any], truth: dict[str, Any]) -> str:
    n_pt = _pick(r, truth, "n_point_anomalies")
    n_ctx = _pick(r, truth, "n_contextual_anomalies")
    n_col = _pick(r, truth, "n_collective_anomalies")
    sensors = _pick(r, truth, "anomalous_sensors") or []
    coll = _pick(r, truth, "collective_sensors") or []
    details = truth.get("details", {})
    S = r.get("n_sensors", len(details.get("sensors", [])) or "several")
    T = r.get("n_steps", details.get("n_steps", "several thousand"))
    period = r.get("period_steps", details.get("period_steps", 48))
    runs = r.get("collective", [])
    run_txt = "; ".join(f"{c['sensor']} rows {c['start']}-{c['end']} (mean z {c['mean_z']:+.1f})"
                        for c in runs) or "see the evaluation_report"
    ctx_gz = r.get("contextual_global_z") or []
    gz = f"; their global z-scores lie within +-{max(abs(v) for v in ctx_gz):.1f}" if ctx_gz else ""
    run_z = [abs(c["mean_z"]) for c in runs]
    run_eval = (f"The collective runs have mean residual z between {min(run_z):.1f} and "
                f"{max(run_z):.1f} in absolute value, against the rolling-median threshold of 2.8."
                if run_z else "No run exceeded the rolling-median threshold of 2.8.")
    sec = {
        "Abstract": (
            f"We built an anomaly detection system for {S} industrial sensors sampled {T} times. "
            f"Using daily profiles, robust z-scores and rolling medians we found {n_pt} point anomalies, "
            f"{n_ctx} contextual anomalies and {n_col} collective anomalies. The anomalies occur on "
            f"sensors {_and(sensors)}; every flagged value has |z| >= {_num(r.get('min_flagged_z'), '.1f')} "
            f"({_p(r.get('max_p_flagged'))} under a Gaussian null)."),
        "Introduction": (
            "Industrial sensors fail in different ways: a single spike, a value that is normal in "
            "general but wrong for the time of day, or a sustained run of abnormal readings. The task "
            "asks for a system that detects point, contextual and collective anomalies across eight "
            "to twelve sensors. We follow the data team's dataset_description and the model team's "
            "model_architecture, which chose a seasonal-profile residual model."),
        "Dataset Description": (
            f"As the data team's dataset_description reports, the data have {T} rows with a timestamp "
            f"every {details.get('sampling_minutes', 30)} minutes and {S} sensor columns. Every sensor "
            f"follows a daily cycle of {period} steps on top of noise that is partly shared across "
            f"sensors (about {100 * r.get('common_factor_share', 0.4):.0f}% of the residual variance). "
            "There are no missing values and no labels, so detection is unsupervised."),
        "Methods": (
            f"For each sensor we estimated the daily profile as the median over days of each of the "
            f"{period} time-of-day slots and took residuals from it. Residuals were scaled to robust "
            "z-scores (median absolute deviation), and the common noise factor (the cross-sensor "
            "median) was removed from every sensor by least-squares regression. Collective anomalies are runs of at least ten steps where a "
            "rolling median (window of twenty-one steps) of the z-score exceeds 2.8; single steps with "
            "|z| above eight outside those runs are point anomalies when the value lies outside the "
            "sensor's normal range (daily profile extremes plus or minus four standard deviations) "
            "and contextual anomalies otherwise."),
        "Results": (
            f"We found {n_pt} point anomalies (spikes outside each sensor's normal range) and "
            f"{n_ctx} contextual anomalies (values normal for the sensor but not at that time of "
            f"day{gz}). There are {n_col} collective anomalies: {run_txt}. The anomalies occur on "
            f"sensors {_and(sensors)}, and the collective anomalies occur on {_and(coll)}; the other "
            "sensors show none."),
        "Evaluation": (
            f"As the evaluation team's evaluation_report shows, the weakest flagged single step has "
            f"|z| = {_num(r.get('min_flagged_z'), '.1f')}, against a threshold of eight, so under a "
            f"Gaussian null every flag is significant ({_p(r.get('max_p_flagged'))}, two-sided, "
            "Bonferroni-safe for all cells). A global z-score detector would miss every contextual "
            f"anomaly, which is why the time-of-day profile matters. {run_eval}"),
        "Conclusion": (
            f"The system separates {n_pt} point, {n_ctx} contextual and {n_col} collective anomalies "
            "on the sensors listed in the Results. Seasonal profiles plus robust z-scores are enough "
            "for this plant; a deployed version should update the profiles online and alert on runs "
            "as they start."),
    }
    return _render("Point, contextual and collective anomalies in multi-sensor data", sec)


def _biomarker_report(r: dict[str, Any], truth: dict[str, Any]) -> str:
    K = _pick(r, truth, "n_subtypes")
    markers = _pick(r, truth, "subtype_markers") or []
    pred = _pick(r, truth, "predictive_biomarkers") or []
    best = _pick(r, truth, "responder_subtype_marker")
    reverses = bool(_pick(r, truth, "treatment_effect_reverses"))
    details = truth.get("details", {})
    n = r.get("n_patients", details.get("n_patients", "several hundred"))
    p = r.get("n_biomarkers", len(details.get("biomarkers", [])) or "many")
    by = r.get("by_subtype", {})
    inter = r.get("interaction", {})
    sil = r.get("silhouette", {})
    sil_txt = f" (silhouette {_num(sil.get(str(K)), '.2f')})" if sil else ""
    sil_best = _num(sil.get(str(K)), ".2f")
    sil_other = _num(max([v for k, v in sil.items() if k != str(K)], default=None), ".2f")
    pred_txt = "; ".join(f"{b}: coefficient {inter[b]['coef']:+.2f}, z = {inter[b]['z']:.1f}, "
                         f"{_p(inter[b]['p'])}" for b in pred if b in inter)
    eff = "; ".join(f"{m}-high subtype (n = {v['n']}): log odds ratio {v['log_odds_ratio']:+.2f}, "
                    f"z = {v['z']:.1f}, {_p(v['p'])}" for m, v in by.items())
    others = [m for m in markers if m != best]
    if reverses:
        direction = ("while harming the other subtype(s): the treatment effect reverses across "
                     "subtypes")
        detail = (f"in the {_and(others)}-high subtype(s) the effect is negative, so the treatment "
                  "effect reverses across subtypes")
        advice = f"patients in the {best}-high subtype benefit, the others are harmed"
    else:
        direction = ("and, to a lesser degree, the other subtypes: the treatment effect has the same "
                     "direction in every subtype")
        detail = (f"in the {_and(others)}-high subtype(s) the effect is smaller but positive, so the "
                  "treatment effect has the same direction in every subtype")
        advice = f"patients in the {best}-high subtype benefit most and the others somewhat less"
    sec = {
        "Abstract": (
            f"We analysed {n} patients with {p} biomarkers, a randomised treatment and a binary "
            f"response. k-means clustering of the bimodal biomarkers shows that the patients fall into "
            f"{K} latent subtypes, distinguished by {_and(markers)}. A logistic regression with "
            f"treatment interactions identifies {_and(pred)} as predictive biomarkers. The "
            f"treatment benefits the subtype marked by high {best} {direction}."),
        "Introduction": (
            "Patients who look alike clinically can respond to a treatment in opposite ways, and "
            "finding who benefits is the aim of biomarker discovery. The task asks us to predict "
            "treatment response, discover patient subtypes and identify the biomarkers behind "
            "differential effects. We start from the data team's dataset_description and the model "
            "team's model_architecture, which proposed clustering followed by an interaction model."),
        "Dataset Description": (
            f"As the data team's dataset_description reports, the table has {n} rows (patients) with "
            f"age, sex, treatment (0/1), response (0/1) and {p} biomarker columns prefixed BM. "
            "Treatment is balanced by randomisation, biomarkers are continuous on different scales and "
            "were standardised, and there are no missing values."),
        "Methods": (
            "We screened each standardised biomarker for bimodality by the share of variance explained "
            "by its best two-group split, and ran k-means (k-means++ seeding, ten restarts) on the "
            "bimodal ones for every k from two to five, choosing k by the silhouette score. Treatment response was "
            "modelled by logistic regression fitted by iteratively reweighted least squares, with "
            "subtype, treatment x subtype, age and every other biomarker with its treatment "
            "interaction; interactions with Wald |z| > 3.5 (Bonferroni-level) were called predictive. "
            "Subtype-specific treatment effects are the adjusted log odds ratios with Wald tests."),
        "Results": (
            f"The patients fall into {K} latent subtypes{sil_txt}, distinguished by {_and(markers)}, "
            f"each high in one subtype. The predictive biomarkers that modify the treatment effect are "
            f"{_and(pred)} ({pred_txt}). Treatment effect by subtype: {eff}. The treatment benefits "
            f"the subtype marked by high {best}; {detail}."),
        "Evaluation": (
            f"As the evaluation team's evaluation_report shows, the silhouette score is {sil_best} for "
            f"k = {K} and at most {sil_other} for the other k. The largest treatment "
            f"interaction among the remaining biomarkers has |z| = "
            f"{_num(r.get('max_null_interaction_z'), '.1f')}, below the 3.5 threshold. "
            f"Prognostic biomarkers (main effects without interaction) are "
            f"{_and(r.get('prognostic_biomarkers', []))}; they predict response regardless of "
            "treatment and must not be confused with the predictive ones."),
        "Conclusion": (
            f"Treatment decisions should use the subtype: {advice}. The predictive biomarkers "
            f"{_and(pred)} modify the benefit further. A prospective trial stratified by these "
            "biomarkers would confirm the differential effect."),
    }
    return _render(f"Subtypes and predictive biomarkers of treatment response ({n} patients)", sec)


def _geospatial_report(r: dict[str, Any], truth: dict[str, Any]) -> str:
    imp = _pick(r, truth, "important_covariates") or []
    unimp = _pick(r, truth, "unimportant_covariates") or []
    top = _pick(r, truth, "top_covariate")
    higher = bool(_pick(r, truth, "spatial_cv_higher"))
    autocorr = bool(_pick(r, truth, "residual_spatial_autocorrelation"))
    details = truth.get("details", {})
    n = r.get("n_sites", details.get("n_sites", "about a thousand"))
    cv = r.get("cv_rmse") or details.get("cv_rmse", {})
    t = r.get("t_values", {})
    coef = r.get("coef_per_sd", {})
    imp_txt = "; ".join(f"{c}: {coef[c]:+.2f} per sd, t = {t[c]:.1f}" for c in imp if c in t)
    drop = r.get("drop_one_increase", {})
    drop_txt = (f" Leaving {top} out raises the spatial-CV error of the regression by "
                f"{100 * drop[top]:.0f}%." if top in drop else "")
    rs, rr = _num(cv.get("knn_residual_spatial"), ".2f"), _num(cv.get("knn_residual_random"), ".2f")
    ls, lr = _num(cv.get("linear_spatial"), ".2f"), _num(cv.get("linear_random"), ".2f")
    moran = (f"Moran's I = {_num(r.get('moran_i'), '.2f')}, permutation test "
             f"{_p(r.get('moran_p'))}")
    if autocorr:
        resid_txt = f"its residuals are spatially autocorrelated ({moran})"
    else:
        resid_txt = f"its residuals show no spatial autocorrelation ({moran})"
    if higher:
        cv_claim = ("spatial (blocked) cross-validation gives a higher error than random "
                    "cross-validation")
        cv_moral = ("random folds leak information from neighbouring sites, so the spatial (blocked) "
                    "cross-validation error is the honest estimate for mapping unsampled areas")
    else:
        cv_claim = ("random cross-validation gives a higher error than spatial (blocked) "
                    "cross-validation")
        cv_moral = "spatial blocking makes no difference to the error, so random folds are adequate"
    if unimp:
        none_txt = (f"The covariates {_and(unimp)} have no effect (not significant, |t| <= "
                    f"{max([abs(t[c]) for c in unimp if c in t] or [0.0]):.1f}). ")
    else:
        none_txt = ""
    sec = {
        "Abstract": (
            f"We mapped a resource concentration from {n} sampled sites with six environmental "
            f"covariates. Linear regression shows that the covariates that drive the concentration are "
            f"{_and(imp)}, with {top} the strongest, and {resid_txt}. "
            f"{cv_claim[0].upper() + cv_claim[1:]} (RMSE {rs} spatial vs {rr} random)."),
        "Introduction": (
            "Resource maps are built from scattered samples, and nearby samples resemble each other "
            "more than distant ones. The task asks for spatial prediction models compared with "
            "non-spatial ones, evaluated by spatial cross-validation. We use the data team's "
            "dataset_description and the model team's model_architecture, which proposed regression "
            "with residual interpolation from neighbouring sites."),
        "Dataset Description": (
            f"As the data team's dataset_description reports, there are {n} sites with coordinates "
            f"x_km and y_km in a 100 x 100 km area, the covariates elevation, distance_to_river, "
            "soil_ph, rainfall, slope and ndvi, and the target concentration. There are "
            "no missing values; the covariates are on different scales and were standardised for the "
            "regression."),
        "Methods": (
            "We fitted ordinary least squares of concentration on the standardised covariates and "
            "tested coefficients with t statistics (|t| > 4 called important), checking each by the "
            "rise of the spatial-CV error when it is left out. Residual spatial autocorrelation was "
            "measured by Moran's I with 8-nearest-neighbour weights and a 199-permutation test. Two "
            "models were compared: the non-spatial regression and the regression plus the mean residual "
            "of the 10 nearest training sites (a kriging-like spatial model), each by 5-fold random "
            "cross-validation and 5-fold spatial cross-validation on 25 km blocks."),
        "Results": (
            f"The covariates that drive the concentration are {_and(imp)} ({imp_txt}); the covariate "
            f"with the largest effect is {top}. {none_txt}The regression explains R^2 = "
            f"{_num(r.get('r2'), '.2f')} of the variance, and {resid_txt}.{drop_txt}"),
        "Evaluation": (
            f"For the spatial model, {cv_claim}: RMSE {rs} with blocked folds against {rr} "
            f"with random folds (paired t over folds = {_num(r.get('cv_paired_t'), '.1f')}). For "
            f"the non-spatial regression the two are {ls} and {lr}. As the evaluation team's "
            f"evaluation_report argues, {cv_moral}."),
        "Conclusion": (
            f"Concentration is driven by {_and(imp)}, most strongly by {top}. "
            + ("A spatially autocorrelated component remains; exploiting neighbours helps in-fill "
               "mapping, but only spatial cross-validation reveals how much of that gain survives in "
               "new areas, so maps should report the spatial-CV error." if higher and autocorr else
               "No spatial structure remains in the residuals, so a plain regression map built "
               "from the covariates is sufficient, and random cross-validation gives a fair estimate "
               "of its error on new sites.")),
    }
    return _render(f"Mapping resource concentration with spatial cross-validation ({n} sites)", sec)


_REPORTS = {"ecology": _ecology_report, "anomaly": _anomaly_report,
            "biomarker": _biomarker_report, "geospatial": _geospatial_report}


def oracle_report(task: str, recovered: dict[str, Any], truth: dict[str, Any]) -> str:
    """The seven-section Markdown report a competent team writes from the oracle's results.

    Every fact is stated with one of its context phrases next to its value; values come from
    ``recovered`` (the truth's are used only for facts the analysis did not return).
    """
    check_args(task, 0)
    return _REPORTS[task](recovered, truth)


def garbage_report(task: str) -> str:
    """What a useless team writes: no sections, no numbers, no methods, no findings."""
    check_args(task, 0)
    topic = {"ecology": "the population data", "anomaly": "the sensor data",
             "biomarker": "the patient data", "geospatial": "the map data"}[task]
    return (
        "# Report\n\n"
        f"We were asked to analyse {topic}. We looked at the data and it seems interesting. Some patterns "
        "might be present and the results could be useful. More work is needed to understand the "
        "data better.\n"
    )


def wrong_report(task: str, truth: dict[str, Any]) -> str:
    """A well-structured seven-section report whose findings contradict the truth.

    It never names a true set item or label, so a text matcher cannot credit it by accident.
    """
    check_args(task, 0)
    f = _facts(truth)
    d = truth.get("details", {})
    if task == "ecology":
        S = int(f["n_species"])
        T = int(d.get("n_steps", 300))
        shift = int(f["shift_time"])
        wrong_shift = shift + T // 3 if shift < T / 2 else shift - T // 3
        names = [f"sp{i + 1}" for i in range(S)]
        true_links = set(f["negative_interactions"]) | set(f["positive_interactions"])
        free = [f"{a}->{b}" for a in names for b in names if a != b and f"{a}->{b}" not in true_links]
        neg, pos = free[:2], free[2:4]
        rmse = float(f["forecast_baseline_rmse"]) * 3 + 0.2
        r = {"n_species": S + 2, "shift_time": wrong_shift, "negative_interactions": neg,
             "positive_interactions": pos, "forecast_baseline_rmse": round(rmse, 3),
             "species": [f"sp{i + 1}" for i in range(S + 2)], "n_steps": T,
             "shift_species": names[-1], "shift_step_coefficient": 0.05, "shift_z": 2.1,
             "shift_p": 0.036, "shift_lr_stat": 4.4, "shift_loglik_drop_10": 0.4,
             "ricker_forecast_rmse": round(rmse * 1.2, 3),
             "n_test": int(round(0.2 * T)), "residual_sd": 0.3,
             "links": [{"link": neg[0], "t": -4.2, "p": 2.7e-5, "elasticity": -0.1}]}
        return _ecology_report(r, truth)
    if task == "anomaly":
        sensors = d.get("sensors", [])
        clean = [s for s in sensors if s not in set(f["anomalous_sensors"])]
        r = {"n_point_anomalies": int(f["n_point_anomalies"]) + 9,
             "n_contextual_anomalies": 0,
             "n_collective_anomalies": 1,
             "anomalous_sensors": clean, "collective_sensors": clean[:1],
             "n_sensors": len(sensors), "n_steps": d.get("n_steps"),
             "period_steps": d.get("period_steps", 48), "min_flagged_z": 3.1,
             "max_p_flagged": 0.0019, "common_factor_share": 0.33,
             "collective": [{"sensor": clean[0], "start": 10, "end": 14, "mean_z": 1.2}]}
        return _anomaly_report(r, truth)
    if task == "biomarker":
        names = d.get("biomarkers", [])
        used = set(f["subtype_markers"]) | set(f["predictive_biomarkers"])
        free = [b for b in names if b not in used]
        K = int(f["n_subtypes"]) + 2
        markers, pred = free[:K], free[K:K + 2]
        r = {"n_subtypes": K, "subtype_markers": markers, "predictive_biomarkers": pred,
             "responder_subtype_marker": markers[0], "treatment_effect_reverses": False,
             "n_patients": d.get("n_patients"), "n_biomarkers": len(names),
             "silhouette": {str(K): 0.21, str(K + 1): 0.19},
             "by_subtype": {m: {"n": 100, "log_odds_ratio": 0.4 - 0.1 * i, "z": 1.1, "p": 0.27}
                            for i, m in enumerate(markers)},
             "interaction": {b: {"coef": 0.3, "z": 1.3, "p": 0.19} for b in pred},
             "prognostic_biomarkers": [], "max_null_interaction_z": 1.9}
        return _biomarker_report(r, truth)
    if task == "geospatial":
        unimp = sorted(f["unimportant_covariates"])
        r = {"important_covariates": unimp, "unimportant_covariates": sorted(f["important_covariates"]),
             "top_covariate": unimp[0], "spatial_cv_higher": False,
             "residual_spatial_autocorrelation": False, "n_sites": d.get("n_sites"),
             "t_values": {c: 2.5 for c in unimp}, "coef_per_sd": {c: 0.8 for c in unimp},
             "r2": 0.12, "moran_i": 0.01, "moran_p": 0.41, "cv_paired_t": -2.3,
             "cv_rmse": {"knn_residual_spatial": 2.1, "knn_residual_random": 4.9,
                         "linear_spatial": 5.0, "linear_random": 6.3}}
        return _geospatial_report(r, truth)
    raise AssertionError(task)
