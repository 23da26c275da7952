"""Oracle analysis, anomaly: daily profiles, robust z-scores, rolling medians.

A sandbox program (numpy, pandas and the standard library only; ``df`` is preloaded) and an
importable module: ``analyze(df)`` returns the result dict, and the tail prints it as the
``ORACLE_RESULT`` line only when the text runs where ``df`` is defined.
"""

import json
import math

import numpy as np
import pandas as pd


def mad_sd(a, axis=0):
    """A robust standard deviation: 1.4826 times the median absolute deviation."""
    med = np.median(a, axis=axis, keepdims=True)
    return 1.4826 * np.median(np.abs(a - med), axis=axis)


def collective_runs(E, roll, sensors, thr=2.8, min_run=10):
    """Runs of at least ``min_run`` steps where the rolling median of a sensor's residual
    leaves zero by more than ``thr`` (gaps of up to five steps are bridged)."""
    T, S = E.shape
    collective = []
    for s in range(S):
        flag = np.abs(roll[:, s]) > thr
        t = 0
        while t < T:
            if flag[t]:
                u = t
                while u + 1 < T and (flag[u + 1] or (u + 6 < T and flag[u + 2 : u + 7].any())):
                    u += 1
                if u - t + 1 >= min_run:
                    collective.append(
                        {
                            "sensor": sensors[s],
                            "start": int(t),
                            "end": int(u),
                            "mean_z": round(float(E[t : u + 1, s].mean()), 2),
                        }
                    )
                t = u + 1
            else:
                t += 1
    return collective


def analyze(df: pd.DataFrame) -> dict:
    """The recovered anomalies (point, contextual, collective) and their statistics."""
    sensors = [c for c in df.columns if pd.api.types.is_numeric_dtype(df[c])]
    X = df[sensors].to_numpy(float)
    T, S = X.shape
    stamp = pd.to_datetime(df["timestamp"])
    step_min = int(round(stamp.diff().dt.total_seconds().median() / 60))
    period = int(round(24 * 60 / step_min))
    slot = ((stamp.dt.hour * 60 + stamp.dt.minute) // step_min).to_numpy()

    # 1. seasonal (time-of-day) profile: the median over days of every slot; residuals from it
    profile = np.vstack([np.median(X[slot == s], axis=0) for s in range(period)])
    R = X - profile[slot]
    sd_raw = mad_sd(R)
    Z = R / sd_raw
    # 2. the noise common to all sensors: the cross-sensor median, regressed out of every sensor
    common = np.median(Z, axis=1)
    load = (Z * common[:, None]).sum(axis=0) / (common**2).sum()
    E = Z - common[:, None] * load
    E = E / mad_sd(E)

    # 3. collective anomalies: long runs where the rolling median of the residual leaves zero
    win = 21
    roll = pd.DataFrame(E).rolling(win, center=True, min_periods=win // 2).median().to_numpy()
    collective = collective_runs(E, roll, sensors)
    masked = np.zeros((T, S), bool)
    for ev in collective:
        s = sensors.index(ev["sensor"])
        masked[max(0, ev["start"] - win) : ev["end"] + win + 1, s] = True

    # 4. single-step anomalies: |z| > 8 outside the collective runs; point if outside the
    #    sensor's normal range (daily profile extremes +- 4 sd), contextual otherwise
    lo = profile.min(axis=0) - 4 * sd_raw
    hi = profile.max(axis=0) + 4 * sd_raw
    point, contextual = [], []
    for t, s in zip(*np.nonzero((np.abs(E) > 8.0) & ~masked), strict=False):
        rec = {
            "sensor": sensors[s],
            "index": int(t),
            "z": round(float(E[t, s]), 1),
            "timestamp": str(df["timestamp"].iloc[t]),
        }
        bucket = point if (X[t, s] < lo[s] or X[t, s] > hi[s]) else contextual
        if bucket and bucket[-1]["sensor"] == rec["sensor"] and t - bucket[-1]["index"] <= 2:
            continue  # one anomaly spanning adjacent steps
        bucket.append(rec)
    point.sort(key=lambda r: r["index"])
    contextual.sort(key=lambda r: r["index"])
    collective.sort(key=lambda r: r["start"])

    # how extreme the flagged values are under a Gaussian null (two-sided), and how far the
    # contextual values sit from the sensor's overall median in raw standard deviations
    min_abs_z = min([abs(r["z"]) for r in point + contextual], default=None)
    z_values = [abs(r["z"]) for r in point + contextual]
    global_z = [
        round(
            float(
                (X[r["index"], sensors.index(r["sensor"])] - np.median(X[:, sensors.index(r["sensor"])]))
                / X[:, sensors.index(r["sensor"])].std()
            ),
            2,
        )
        for r in contextual
    ]
    involved = sorted({r["sensor"] for r in point + contextual + collective})
    return {
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


#: keys printed on a second line, after the result: detail no report needs (every flagged
#: step: over 1,500 characters on some seeds)
DETAIL = ("point", "contextual")

# Run as the sandbox program (``df`` preloaded in the namespace), never on a plain import. The
# finding is printed first and kept short: a tool output or a member's output cut to its first
# characters still holds the whole ``ORACLE_RESULT`` line.
if "df" in globals():
    result = analyze(globals()["df"])
    detail = {k: result.pop(k) for k in DETAIL if k in result}
    print("ORACLE_RESULT " + json.dumps(result))
    print("ORACLE_DETAIL " + json.dumps(detail))
