"""Oracle analysis, biomarker: bimodality screen, k-means with silhouette, logistic IRLS.

A sandbox program (numpy, pandas and the standard library only; ``df`` is preloaded) and an
importable module: ``analyze(df)`` returns the result dict, and the tail prints it as the
``ORACLE_RESULT`` line only when the text runs where ``df`` is defined.
"""

import json
import math

import numpy as np
import pandas as pd


def split_ratio(v):
    """Share of variance explained by the best two-group split of a sorted 1-D sample."""
    v = np.sort(v)
    c = np.cumsum(v)
    k = np.arange(1, len(v))
    m1, m2 = c[:-1] / k, (c[-1] - c[:-1]) / (len(v) - k)
    between = k * (len(v) - k) / len(v) ** 2 * (m1 - m2) ** 2
    return float(between.max() / v.var())


def kmeans(A, k, rng, restarts=10, iters=100):
    """Labels of the best of ``restarts`` k-means runs (k-means++ seeding drawn from ``rng``)."""
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
    """The mean silhouette width of a labelling (Euclidean distances)."""
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
    """Two-sided p-value of a standard normal z."""
    return float(math.erfc(abs(z) / math.sqrt(2)))


def analyze(df: pd.DataFrame) -> dict:
    """The recovered subtypes, predictive biomarkers and per-subtype treatment effects."""
    bms = [c for c in df.columns if c.upper().startswith("BM")]
    Zall = df[bms].to_numpy(float)
    Zall = (Zall - Zall.mean(axis=0)) / Zall.std(axis=0)
    n, p = Zall.shape
    treat = df["treatment"].to_numpy(float)
    resp = df["response"].to_numpy(float)
    age = df["age"].to_numpy(float)
    age = (age - age.mean()) / age.std()
    rng = np.random.default_rng(12345)

    # 1. subtypes: biomarkers with a clearly bimodal distribution, then k-means (k = 2..5) on them
    ratios = {b: split_ratio(Zall[:, j]) for j, b in enumerate(bms)}
    cand = [b for b in bms if ratios[b] > 0.72]
    A = Zall[:, [bms.index(b) for b in cand]]
    sil = {k: silhouette(A, kmeans(A, k, rng)) for k in range(2, 6)}
    K = max(sil, key=sil.get)
    lab = kmeans(A, K, rng)
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
    main_z = coef[-2 * m : -m] / se[-2 * m : -m]
    int_z = coef[-m:] / se[-m:]
    interaction = {
        b: {
            "coef": round(float(coef[-m + i]), 3),
            "z": round(float(int_z[i]), 2),
            "p": pval(int_z[i]),
            "main_z": round(float(main_z[i]), 2),
        }
        for i, b in enumerate(rest)
    }
    predictive = sorted(b for b, v in interaction.items() if abs(v["z"]) > 3.5)
    prognostic = sorted(b for b, v in interaction.items() if abs(v["main_z"]) > 3.5 and b not in predictive)

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
            "n": int(sel.sum()),
            "log_odds_ratio": round(lor, 3),
            "z": round(lor / lse, 2),
            "p": pval(lor / lse),
            "rate_treated": round(float(t1.mean()), 3),
            "rate_control": round(float(t0.mean()), 3),
            "risk_difference": round(float(rd), 3),
            "risk_difference_z": round(float(rz), 2),
        }
    best = max(by_subtype, key=lambda mk: by_subtype[mk]["log_odds_ratio"])
    worst = min(by_subtype, key=lambda mk: by_subtype[mk]["log_odds_ratio"])
    reverses = by_subtype[best]["z"] > 2 and by_subtype[worst]["z"] < -2

    return {
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
        "max_null_interaction_z": round(
            max([abs(v["z"]) for b, v in interaction.items() if b not in predictive] or [0.0]), 2
        ),
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
