"""The scripted "oracle" science team: an analysis that recovers every ground-truth fact.

``ORACLE_CODE[task]`` is a self-contained Python program meant for the sandbox: a pandas
DataFrame ``df`` (the task's ``data.csv``) is already loaded, only numpy, pandas and the standard
library are used (no scipy, no scikit-learn: least squares, logistic regression by IRLS,
k-means, change-point scans, robust z-scores, Moran's I and cross-validation folds are written
out in numpy), and it prints ``ORACLE_RESULT <json>`` with the recovered facts under the ground
truth's fact ids plus the statistics the report quotes, then ``ORACLE_DETAIL <json>`` with bulky
detail no report needs: the finding comes first and stays short, so an output cut to its first
characters (a team's synthesis prompt) still holds it whole. Each program runs in well under
5 s on one CPU. The programs are real modules, :mod:`cooplab.tasks.science.oracle_programs`
``.<task>`` (imported and tested like any code: ``analyze(df)`` returns the dict), and
``ORACLE_CODE[task]`` is the text of that module's file, read by :func:`program_source`.

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
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cooplab.tasks.science.datasets import TASKS, check_args

RESULT_PREFIX = "ORACLE_RESULT "
#: the line after the result: detail no report needs (see each program's ``DETAIL``)
DETAIL_PREFIX = "ORACLE_DETAIL "

# ----------------------------------------------------------------------------------------------
# The oracle programs: one module per task in oracle_programs/, sent to the sandbox as source text
# ----------------------------------------------------------------------------------------------

#: the package holding the programs, ``oracle_programs/<task>.py``
PROGRAMS_PACKAGE = "cooplab.tasks.science.oracle_programs"


def program_source(task: str) -> str:
    """The source text of ``oracle_programs/<task>.py``, exactly as the file holds it.

    Read as a package resource (not imported), so the text is the module itself: its
    ``analyze(df)`` plus the tail that prints the ``ORACLE_RESULT`` line when ``df`` is defined.
    """
    check_args(task, 0)
    return resources.files(PROGRAMS_PACKAGE).joinpath(f"{task}.py").read_text(encoding="utf-8")


ORACLE_CODE: dict[str, str] = {task: program_source(task) for task in TASKS}


def parse_oracle_output(stdout: str) -> dict[str, Any]:
    """The JSON of the last ``ORACLE_RESULT`` line of a program's output, with the keys of the
    ``ORACLE_DETAIL`` line printed right after it (if any) added: the whole ``analyze(df)``."""
    lines = stdout.splitlines()
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith(RESULT_PREFIX):
            result = json.loads(lines[i][len(RESULT_PREFIX) :])
            if i + 1 < len(lines) and lines[i + 1].startswith(DETAIL_PREFIX):
                detail = json.loads(lines[i + 1][len(DETAIL_PREFIX) :])
                result.update({k: v for k, v in detail.items() if k not in result})
            return result
    raise ValueError("no ORACLE_RESULT line in the oracle's output: the program did not finish")


def oracle_stdout(task: str, data_path: Path | str) -> str:
    """What ``ORACLE_CODE[task]`` prints, run in a fresh namespace with ``df`` read from ``data_path``."""
    check_args(task, 0)
    namespace: dict[str, Any] = {"__name__": "__oracle__", "np": np, "pd": pd, "df": pd.read_csv(data_path)}
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(compile(ORACLE_CODE[task], f"<oracle:{task}>", "exec"), namespace)
    return buf.getvalue()


def run_oracle_locally(task: str, data_path: Path | str) -> dict[str, Any]:
    """Run ``ORACLE_CODE[task]`` in a fresh namespace with ``df`` read from ``data_path``: its result."""
    return parse_oracle_output(oracle_stdout(task, data_path))


# ----------------------------------------------------------------------------------------------
# Reports: the oracle's, a useless team's and a confidently wrong team's
# ----------------------------------------------------------------------------------------------

SECTIONS = ("Abstract", "Introduction", "Dataset Description", "Methods", "Results", "Evaluation", "Conclusion")


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
    strongest = (
        (
            f"The strongest link is {links[0]['link']} (t = {links[0]['t']:.1f}, "
            f"{_p(links[0]['p'])}, elasticity {links[0]['elasticity']:+.2f}). "
        )
        if links
        else ""
    )
    ricker_txt = (
        f"a Ricker model trained on the first 80% of the series reaches RMSE {ricker:.3f}"
        if ricker is not None
        else "the fitted Ricker model is the natural next step"
    )
    sec = {
        "Abstract": (
            f"We analysed {T} time steps of abundances of {S} species to identify their "
            f"interactions, detect a regime shift and forecast population sizes. A Ricker model fitted "
            f"by least squares finds {len(neg)} negative and {len(pos)} positive interactions, and a "
            f"change-point scan places a regime shift at t = {shift}, when the growth rate of {sp} "
            f"drops ({_p(r.get('shift_p'))}). The persistence (naive last-value) baseline forecast has "
            f"RMSE {rmse:.3f} on log abundance over the last {n_test} steps, and {ricker_txt}."
        ),
        "Introduction": (
            "Populations in a community grow, compete and facilitate one another, and their dynamics can "
            "change abruptly when the environment does. The task is to recover the inter-species "
            "relationships, detect regime shifts and build predictive models for future population "
            "sizes. We build on the data team's dataset_description and on the model team's "
            "model_architecture, which proposed a multi-species Ricker model with a change point."
        ),
        "Dataset Description": (
            f"As the data team's dataset_description reports, the file has {T} rows, one per time step "
            f"t = 0..{T - 1 if isinstance(T, int) else 'T-1'}, and one abundance column per species. "
            f"The dataset contains {S} species ({', '.join(names)}). All abundances are positive, so we "
            "work with natural-log abundances and per-capita log growth rates log N_t+1 - log N_t. There "
            "are no missing values."
        ),
        "Methods": (
            "For every species we fitted the Ricker model log N_i,t+1 - log N_i,t = r_i + sum_j a_ij "
            "N_j,t + d_i 1(t >= tau) + e by ordinary least squares, so a_ij measures the effect of "
            "species j on the growth of species i. The change point tau was chosen by a likelihood scan "
            "over all candidate times (minimising the summed log residual sums of squares), and the "
            "shift (a change-point detection) was tested with a likelihood-ratio statistic and Wald z tests of d_i. "
            "Off-diagonal "
            "coefficients with |t| of at least four (two-sided p below 0.0001) were called interactions. Forecasts "
            "were "
            "scored by RMSE of log abundance on the last 20% of the series against the persistence "
            "baseline."
        ),
        "Results": (
            f"A regime shift occurs at t = {shift} (likelihood-ratio statistic "
            f"{_num(r.get('shift_lr_stat'), '.1f')}); the largest change is in {sp}, whose "
            f"growth rate changes by {_num(r.get('shift_step_coefficient'), '+.3f')} "
            f"(z = {_num(r.get('shift_z'), '.1f')}, {_p(r.get('shift_p'))}). "
            f"Negative interactions (the first species suppresses the growth of the second): "
            f"{_and(neg)}. Positive interactions (the first species facilitates the second): "
            f"{_and(pos)}. {strongest}All other off-diagonal interaction coefficients have |t| below four."
        ),
        "Evaluation": (
            f"On the last {n_test} time steps the persistence (naive) baseline forecast has RMSE "
            f"{rmse:.3f} on log abundance, and {ricker_txt}. As the evaluation team's "
            "evaluation_report notes, the residual standard deviation of the Ricker fit is "
            f"{_num(r.get('residual_sd'), '.3f')}, close to the one-step forecast error, so the "
            "model captures the deterministic part of the dynamics. Moving the change point 10 steps "
            f"away from t = {shift} costs {_num(r.get('shift_loglik_drop_10'), '.1f')} units of "
            "log-likelihood, so the shift time is sharply identified."
        ),
        "Conclusion": (
            f"The community has {S} species. They are linked by {len(neg) + len(pos)} "
            f"interactions, and their dynamics changed at t = {shift} when the growth of {sp} fell. A Ricker model "
            "with this "
            "change point forecasts better than the persistence baseline. Longer series and replicated "
            "communities would sharpen the weaker interaction estimates."
        ),
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
    run_txt = (
        "; ".join(f"{c['sensor']} rows {c['start']}-{c['end']} (mean z {c['mean_z']:+.1f})" for c in runs)
        or "see the evaluation_report"
    )
    ctx_gz = r.get("contextual_global_z") or []
    gz = f"; their global z-scores lie within +-{max(abs(v) for v in ctx_gz):.1f}" if ctx_gz else ""
    run_z = [abs(c["mean_z"]) for c in runs]
    run_eval = (
        f"The collective runs have mean residual z between {min(run_z):.1f} and "
        f"{max(run_z):.1f} in absolute value, against the rolling-median threshold of 2.8."
        if run_z
        else "No run exceeded the rolling-median threshold of 2.8."
    )
    sec = {
        "Abstract": (
            f"We built an anomaly detection system for {S} industrial sensors sampled {T} times. "
            f"Using daily profiles, robust z-scores and rolling medians we found {n_pt} point anomalies, "
            f"{n_ctx} contextual anomalies and {n_col} collective anomalies. The anomalies occur on "
            f"sensors {_and(sensors)}; every flagged value has |z| >= {_num(r.get('min_flagged_z'), '.1f')} "
            f"({_p(r.get('max_p_flagged'))} under a Gaussian null)."
        ),
        "Introduction": (
            "Industrial sensors fail in different ways: a single spike, a value that is normal in "
            "general but wrong for the time of day, or a sustained run of abnormal readings. The task "
            "asks for a system that detects point, contextual and collective anomalies across eight "
            "to twelve sensors. We follow the data team's dataset_description and the model team's "
            "model_architecture, which chose a seasonal-profile residual model."
        ),
        "Dataset Description": (
            f"As the data team's dataset_description reports, the data have {T} rows with a timestamp "
            f"every {details.get('sampling_minutes', 30)} minutes and {S} sensor columns. Every sensor "
            f"follows a daily cycle of {period} steps on top of noise that is partly shared across "
            f"sensors (about {100 * r.get('common_factor_share', 0.4):.0f}% of the residual variance). "
            "There are no missing values and no labels, so detection is unsupervised."
        ),
        "Methods": (
            f"For each sensor we estimated the daily profile as the median over days of each of the "
            f"{period} time-of-day slots and took residuals from it. Residuals were scaled to robust "
            "z-scores (median absolute deviation), and the common noise factor (the cross-sensor "
            "median) was removed from every sensor by least-squares regression. Collective anomalies are runs of at "
            "least ten steps where a "
            "rolling median (window of twenty-one steps) of the z-score exceeds 2.8; single steps with "
            "|z| above eight outside those runs are point anomalies when the value lies outside the "
            "sensor's normal range (daily profile extremes plus or minus four standard deviations) "
            "and contextual anomalies otherwise."
        ),
        "Results": (
            f"We found {n_pt} point anomalies (spikes outside each sensor's normal range) and "
            f"{n_ctx} contextual anomalies (values normal for the sensor but not at that time of "
            f"day{gz}). There are {n_col} collective anomalies: {run_txt}. The anomalies occur on "
            f"sensors {_and(sensors)}, and the collective anomalies occur on {_and(coll)}; the other "
            "sensors show none."
        ),
        "Evaluation": (
            f"As the evaluation team's evaluation_report shows, the weakest flagged single step has "
            f"|z| = {_num(r.get('min_flagged_z'), '.1f')}, against a threshold of eight, so under a "
            f"Gaussian null every flag is significant ({_p(r.get('max_p_flagged'))}, two-sided, "
            "Bonferroni-safe for all cells). A global z-score detector would miss every contextual "
            f"anomaly, which is why the time-of-day profile matters. {run_eval}"
        ),
        "Conclusion": (
            f"The system separates {n_pt} point, {n_ctx} contextual and {n_col} collective anomalies "
            "on the sensors listed in the Results. Seasonal profiles plus robust z-scores are enough "
            "for this plant; a deployed version should update the profiles online and alert on runs "
            "as they start."
        ),
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
    pred_txt = "; ".join(
        f"{b}: coefficient {inter[b]['coef']:+.2f}, z = {inter[b]['z']:.1f}, {_p(inter[b]['p'])}"
        for b in pred
        if b in inter
    )
    eff = "; ".join(
        f"{m}-high subtype (n = {v['n']}): log odds ratio {v['log_odds_ratio']:+.2f}, z = {v['z']:.1f}, {_p(v['p'])}"
        for m, v in by.items()
    )
    others = [m for m in markers if m != best]
    if reverses:
        direction = "while harming the other subtype(s): the treatment effect reverses across subtypes"
        detail = (
            f"in the {_and(others)}-high subtype(s) the effect is negative, so the treatment "
            "effect reverses across subtypes"
        )
        advice = f"patients in the {best}-high subtype benefit, the others are harmed"
    else:
        direction = (
            "and, to a lesser degree, the other subtypes: the treatment effect has the same direction in every subtype"
        )
        detail = (
            f"in the {_and(others)}-high subtype(s) the effect is smaller but positive, so the "
            "treatment effect has the same direction in every subtype"
        )
        advice = f"patients in the {best}-high subtype benefit most and the others somewhat less"
    sec = {
        "Abstract": (
            f"We analysed {n} patients with {p} biomarkers, a randomised treatment and a binary "
            f"response. k-means clustering of the bimodal biomarkers shows that the patients fall into "
            f"{K} latent subtypes, distinguished by {_and(markers)}. A logistic regression with "
            f"treatment interactions identifies {_and(pred)} as predictive biomarkers. The "
            f"treatment benefits the subtype marked by high {best} {direction}."
        ),
        "Introduction": (
            "Patients who look alike clinically can respond to a treatment in opposite ways, and "
            "finding who benefits is the aim of biomarker discovery. The task asks us to predict "
            "treatment response, discover patient subtypes and identify the biomarkers behind "
            "differential effects. We start from the data team's dataset_description and the model "
            "team's model_architecture, which proposed clustering followed by an interaction model."
        ),
        "Dataset Description": (
            f"As the data team's dataset_description reports, the table has {n} rows (patients) with "
            f"age, sex, treatment (0/1), response (0/1) and {p} biomarker columns prefixed BM. "
            "Treatment is balanced by randomisation, biomarkers are continuous on different scales and "
            "were standardised, and there are no missing values."
        ),
        "Methods": (
            "We screened each standardised biomarker for bimodality by the share of variance explained "
            "by its best two-group split, and ran k-means (k-means++ seeding, ten restarts) on the "
            "bimodal ones for every k from two to five, choosing k by the silhouette score. Treatment response was "
            "modelled by logistic regression fitted by iteratively reweighted least squares, with "
            "subtype, treatment x subtype, age and every other biomarker with its treatment "
            "interaction; interactions with Wald |z| > 3.5 (Bonferroni-level) were called predictive. "
            "Subtype-specific treatment effects are the adjusted log odds ratios with Wald tests."
        ),
        "Results": (
            f"The patients fall into {K} latent subtypes{sil_txt}, distinguished by {_and(markers)}, "
            f"each high in one subtype. The predictive biomarkers that modify the treatment effect are "
            f"{_and(pred)} ({pred_txt}). Treatment effect by subtype: {eff}. The treatment benefits "
            f"the subtype marked by high {best}; {detail}."
        ),
        "Evaluation": (
            f"As the evaluation team's evaluation_report shows, the silhouette score is {sil_best} for "
            f"k = {K} and at most {sil_other} for the other k. The largest treatment "
            f"interaction among the remaining biomarkers has |z| = "
            f"{_num(r.get('max_null_interaction_z'), '.1f')}, below the 3.5 threshold. "
            f"Prognostic biomarkers (main effects without interaction) are "
            f"{_and(r.get('prognostic_biomarkers', []))}; they predict response regardless of "
            "treatment and must not be confused with the predictive ones."
        ),
        "Conclusion": (
            f"Treatment decisions should use the subtype: {advice}. The predictive biomarkers "
            f"{_and(pred)} modify the benefit further. A prospective trial stratified by these "
            "biomarkers would confirm the differential effect."
        ),
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
    drop_txt = (
        f" Leaving {top} out raises the spatial-CV error of the regression by {100 * drop[top]:.0f}%."
        if top in drop
        else ""
    )
    rs, rr = _num(cv.get("knn_residual_spatial"), ".2f"), _num(cv.get("knn_residual_random"), ".2f")
    ls, lr = _num(cv.get("linear_spatial"), ".2f"), _num(cv.get("linear_random"), ".2f")
    moran = f"Moran's I = {_num(r.get('moran_i'), '.2f')}, permutation test {_p(r.get('moran_p'))}"
    if autocorr:
        resid_txt = f"its residuals are spatially autocorrelated ({moran})"
    else:
        resid_txt = f"its residuals show no spatial autocorrelation ({moran})"
    if higher:
        cv_claim = "spatial (blocked) cross-validation gives a higher error than random cross-validation"
        cv_moral = (
            "random folds leak information from neighbouring sites, so the spatial (blocked) "
            "cross-validation error is the honest estimate for mapping unsampled areas"
        )
    else:
        cv_claim = "random cross-validation gives a higher error than spatial (blocked) cross-validation"
        cv_moral = "spatial blocking makes no difference to the error, so random folds are adequate"
    if unimp:
        none_txt = (
            f"The covariates {_and(unimp)} have no effect (not significant, |t| <= "
            f"{max([abs(t[c]) for c in unimp if c in t] or [0.0]):.1f}). "
        )
    else:
        none_txt = ""
    sec = {
        "Abstract": (
            f"We mapped a resource concentration from {n} sampled sites with six environmental "
            f"covariates. Linear regression shows that the covariates that drive the concentration are "
            f"{_and(imp)}, with {top} the strongest, and {resid_txt}. "
            f"{cv_claim[0].upper() + cv_claim[1:]} (RMSE {rs} spatial vs {rr} random)."
        ),
        "Introduction": (
            "Resource maps are built from scattered samples, and nearby samples resemble each other "
            "more than distant ones. The task asks for spatial prediction models compared with "
            "non-spatial ones, evaluated by spatial cross-validation. We use the data team's "
            "dataset_description and the model team's model_architecture, which proposed regression "
            "with residual interpolation from neighbouring sites."
        ),
        "Dataset Description": (
            f"As the data team's dataset_description reports, there are {n} sites with coordinates "
            f"x_km and y_km in a 100 x 100 km area, the covariates elevation, distance_to_river, "
            "soil_ph, rainfall, slope and ndvi, and the target concentration. There are "
            "no missing values; the covariates are on different scales and were standardised for the "
            "regression."
        ),
        "Methods": (
            "We fitted ordinary least squares of concentration on the standardised covariates and "
            "tested coefficients with t statistics (|t| > 4 called important), checking each by the "
            "rise of the spatial-CV error when it is left out. Residual spatial autocorrelation was "
            "measured by Moran's I with 8-nearest-neighbour weights and a 199-permutation test. Two "
            "models were compared: the non-spatial regression and the regression plus the mean residual "
            "of the 10 nearest training sites (a kriging-like spatial model), each by 5-fold random "
            "cross-validation and 5-fold spatial cross-validation on 25 km blocks."
        ),
        "Results": (
            f"The covariates that drive the concentration are {_and(imp)} ({imp_txt}); the covariate "
            f"with the largest effect is {top}. {none_txt}The regression explains R^2 = "
            f"{_num(r.get('r2'), '.2f')} of the variance, and {resid_txt}.{drop_txt}"
        ),
        "Evaluation": (
            f"For the spatial model, {cv_claim}: RMSE {rs} with blocked folds against {rr} "
            f"with random folds (paired t over folds = {_num(r.get('cv_paired_t'), '.1f')}). For "
            f"the non-spatial regression the two are {ls} and {lr}. As the evaluation team's "
            f"evaluation_report argues, {cv_moral}."
        ),
        "Conclusion": (
            f"Concentration is driven by {_and(imp)}, most strongly by {top}. "
            + (
                "A spatially autocorrelated component remains; exploiting neighbours helps in-fill "
                "mapping, but only spatial cross-validation reveals how much of that gain survives in "
                "new areas, so maps should report the spatial-CV error."
                if higher and autocorr
                else "No spatial structure remains in the residuals, so a plain regression map built "
                "from the covariates is sufficient, and random cross-validation gives a fair estimate "
                "of its error on new sites."
            )
        ),
    }
    return _render(f"Mapping resource concentration with spatial cross-validation ({n} sites)", sec)


_REPORTS = {
    "ecology": _ecology_report,
    "anomaly": _anomaly_report,
    "biomarker": _biomarker_report,
    "geospatial": _geospatial_report,
}


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
    topic = {
        "ecology": "the population data",
        "anomaly": "the sensor data",
        "biomarker": "the patient data",
        "geospatial": "the map data",
    }[task]
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
        r = {
            "n_species": S + 2,
            "shift_time": wrong_shift,
            "negative_interactions": neg,
            "positive_interactions": pos,
            "forecast_baseline_rmse": round(rmse, 3),
            "species": [f"sp{i + 1}" for i in range(S + 2)],
            "n_steps": T,
            "shift_species": names[-1],
            "shift_step_coefficient": 0.05,
            "shift_z": 2.1,
            "shift_p": 0.036,
            "shift_lr_stat": 4.4,
            "shift_loglik_drop_10": 0.4,
            "ricker_forecast_rmse": round(rmse * 1.2, 3),
            "n_test": int(round(0.2 * T)),
            "residual_sd": 0.3,
            "links": [{"link": neg[0], "t": -4.2, "p": 2.7e-5, "elasticity": -0.1}],
        }
        return _ecology_report(r, truth)
    if task == "anomaly":
        sensors = d.get("sensors", [])
        clean = [s for s in sensors if s not in set(f["anomalous_sensors"])]
        r = {
            "n_point_anomalies": int(f["n_point_anomalies"]) + 9,
            "n_contextual_anomalies": 0,
            "n_collective_anomalies": 1,
            "anomalous_sensors": clean,
            "collective_sensors": clean[:1],
            "n_sensors": len(sensors),
            "n_steps": d.get("n_steps"),
            "period_steps": d.get("period_steps", 48),
            "min_flagged_z": 3.1,
            "max_p_flagged": 0.0019,
            "common_factor_share": 0.33,
            "collective": [{"sensor": clean[0], "start": 10, "end": 14, "mean_z": 1.2}],
        }
        return _anomaly_report(r, truth)
    if task == "biomarker":
        names = d.get("biomarkers", [])
        used = set(f["subtype_markers"]) | set(f["predictive_biomarkers"])
        free = [b for b in names if b not in used]
        K = int(f["n_subtypes"]) + 2
        markers, pred = free[:K], free[K : K + 2]
        r = {
            "n_subtypes": K,
            "subtype_markers": markers,
            "predictive_biomarkers": pred,
            "responder_subtype_marker": markers[0],
            "treatment_effect_reverses": False,
            "n_patients": d.get("n_patients"),
            "n_biomarkers": len(names),
            "silhouette": {str(K): 0.21, str(K + 1): 0.19},
            "by_subtype": {
                m: {"n": 100, "log_odds_ratio": 0.4 - 0.1 * i, "z": 1.1, "p": 0.27} for i, m in enumerate(markers)
            },
            "interaction": {b: {"coef": 0.3, "z": 1.3, "p": 0.19} for b in pred},
            "prognostic_biomarkers": [],
            "max_null_interaction_z": 1.9,
        }
        return _biomarker_report(r, truth)
    if task == "geospatial":
        unimp = sorted(f["unimportant_covariates"])
        r = {
            "important_covariates": unimp,
            "unimportant_covariates": sorted(f["important_covariates"]),
            "top_covariate": unimp[0],
            "spatial_cv_higher": False,
            "residual_spatial_autocorrelation": False,
            "n_sites": d.get("n_sites"),
            "t_values": {c: 2.5 for c in unimp},
            "coef_per_sd": {c: 0.8 for c in unimp},
            "r2": 0.12,
            "moran_i": 0.01,
            "moran_p": 0.41,
            "cv_paired_t": -2.3,
            "cv_rmse": {
                "knn_residual_spatial": 2.1,
                "knn_residual_random": 4.9,
                "linear_spatial": 5.0,
                "linear_random": 6.3,
            },
        }
        return _geospatial_report(r, truth)
    raise AssertionError(task)
