"""Scoring science reports (cooplab.evals.science_scoring): the heuristic scorer's rules, its
calibration on hand-written good, empty, boilerplate and contradicting reports for one truth
per task (written here, independent of the dataset generators), hostile input, and the LLM
judge through the decision layer with scripted models."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from cooplab.agents.cache import ResponseCache
from cooplab.agents.decisions import LLMService
from cooplab.agents.models import ModelSpec, ScriptedChatModel
from cooplab.evals.science_scoring import (
    JUDGE_SYSTEM,
    JUDGE_USER_TEMPLATE,
    METHOD_TERMS,
    SECTIONS,
    HeuristicScore,
    JudgeVerdict,
    clean_text,
    compare_judges,
    extract_numbers,
    find_terms,
    ground_truth_text,
    heuristic_score,
    is_substantive,
    judge_agreement,
    judge_messages,
    judge_prompt,
    judge_report,
    judge_spec,
    quality_parts,
    split_sections,
    to_unit,
    truth_problems,
)

# =============================================================================================
# ground truths, one per task (the generators' format, plus the optional keys)
# =============================================================================================
ECOLOGY = {
    "task": "ecology",
    "seed": 0,
    "description": "Analyze a multi-species population dynamics dataset.",
    "equations": "log N_i(t+1) - log N_i(t) = r_i + sum_j a_ij N_j(t)",
    "facts": [
        {
            "id": "n_species",
            "kind": "number",
            "value": 5,
            "tolerance": 0,
            "context": ["species"],
            "statement": "The dataset contains 5 species (sp1, sp2, sp3, sp4, sp5).",
        },
        {
            "id": "shift_time",
            "kind": "number",
            "value": 120,
            "tolerance": 8,
            "context": ["regime shift", "shift", "change point", "changepoint", "breakpoint", "regime"],
            "statement": "A regime shift occurs at t = 120.",
        },
        {
            "id": "negative_interactions",
            "kind": "set",
            "value": ["sp2->sp4", "sp5->sp3"],
            "context": ["negative", "competition", "suppress", "inhibit", "interaction"],
            "statement": "Negative interactions (the first species lowers the growth of the second): sp2->sp4, "
            "sp5->sp3.",
        },
        {
            "id": "positive_interactions",
            "kind": "set",
            "value": ["sp3->sp4"],
            "context": ["positive", "facilitat", "mutualis", "benefit", "interaction"],
            "statement": "Positive interactions (the first species raises the growth of the second): sp3->sp4.",
        },
        {
            "id": "interactions_present",
            "kind": "claim",
            "value": True,
            "context": ["interaction", "predation", "competition"],
            "negative_context": ["independent"],
            "statement": "The species interact through competition and facilitation.",
        },
        {
            "id": "top_predator",
            "kind": "label",
            "value": "sp2",
            "context": ["predator", "preys on"],
            "statement": "sp2 is the main predator of sp4.",
        },
    ],
    "details": {"species": ["sp1", "sp2", "sp3", "sp4", "sp5"], "r": [0.8, 1.1, 0.6, 0.9, 1.2], "t_shift": 120},
}
ANOMALY = {
    "task": "anomaly",
    "seed": 0,
    "description": "Detect point, contextual and collective anomalies across sensors.",
    "facts": [
        {
            "id": "n_sensors",
            "kind": "number",
            "value": 10,
            "tolerance": 0,
            "context": ["sensors"],
            "statement": "The plant has 10 sensors.",
        },
        {
            "id": "n_point_anomalies",
            "kind": "number",
            "value": 7,
            "tolerance": 1,
            "context": ["point anomal", "point", "spike"],
            "statement": "There are 7 point anomalies.",
        },
        {
            "id": "anomaly_rate",
            "kind": "number",
            "value": 0.04,
            "tolerance": 0.01,
            "context": ["anomaly rate", "contamination", "anomalous"],
            "statement": "About 4% of the time steps are anomalous.",
        },
        {
            "id": "collective_sensors",
            "kind": "set",
            "value": ["sensor_03", "sensor_07"],
            "context": ["collective"],
            "statement": "The collective anomalies occur on sensor_03 and sensor_07.",
        },
        {
            "id": "point_easier",
            "kind": "claim",
            "value": True,
            "context": ["point anomal"],
            "statement": "Point anomalies are detected with higher recall than collective anomalies.",
        },
        {
            "id": "hardest_type",
            "kind": "label",
            "value": "collective",
            "alternatives": ["point", "contextual"],
            "context": ["hardest", "most difficult", "lowest recall"],
            "statement": "The hardest anomaly type to detect is collective.",
        },
    ],
    "details": {"sensors": [f"sensor_{i:02d}" for i in range(1, 11)], "period": 48},
}
BIOMARKER = {
    "task": "biomarker",
    "seed": 0,
    "description": "Predict treatment response and find predictive biomarkers and subtypes.",
    "facts": [
        {
            "id": "n_patients",
            "kind": "number",
            "value": 600,
            "tolerance": 0,
            "context": ["patients", "subjects", "participants"],
            "statement": "The trial enrolled 600 patients.",
        },
        {
            "id": "n_subtypes",
            "kind": "number",
            "value": 3,
            "tolerance": 0,
            "context": ["subtype", "cluster", "subgroup"],
            "statement": "The patients fall into 3 subtypes.",
        },
        {
            "id": "predictive_biomarkers",
            "kind": "set",
            "value": ["BM03", "BM11"],
            "context": ["predictive", "interaction", "modif"],
            "statement": "The predictive biomarkers (treatment x biomarker interaction) are BM03 and BM11.",
        },
        {
            "id": "subtype_markers",
            "kind": "set",
            "value": ["BM05", "BM14", "BM20"],
            "context": ["subtype", "cluster", "marker"],
            "statement": "The subtypes are distinguished by BM05, BM14 and BM20.",
        },
        {
            "id": "heterogeneous_effect",
            "kind": "claim",
            "value": True,
            "context": ["heterogeneous treatment effect", "differential treatment response", "treatment effect varies"],
            "negative_context": ["homogeneous treatment effect", "uniform treatment effect"],
            "statement": "The trial shows a heterogeneous treatment effect across subtypes.",
        },
        {
            "id": "responder_marker",
            "kind": "label",
            "value": "BM05",
            "context": ["benefit", "responder", "respond best"],
            "statement": "The subtype marked by high BM05 benefits most from the treatment.",
        },
    ],
    "details": {"n_biomarkers": 24, "subtypes": {"a": {"n": 210}, "b": {"n": 190}, "c": {"n": 200}}},
}
COVARIATES = ["elevation", "soil_ph", "slope", "rainfall", "ndvi", "distance_to_river"]
GEOSPATIAL = {
    "task": "geospatial",
    "seed": 0,
    "description": "Map resource concentration; compare spatial and non-spatial models.",
    "facts": [
        {
            "id": "n_sites",
            "kind": "number",
            "value": 400,
            "tolerance": 0,
            "context": ["sites", "locations"],
            "statement": "Resource concentration was measured at 400 sites.",
        },
        {
            "id": "range_km",
            "kind": "number",
            "value": 15,
            "tolerance": 3,
            "context": ["range", "correlation length"],
            "statement": "The spatial autocorrelation range is about 15 km.",
        },
        {
            "id": "important_covariates",
            "kind": "set",
            "value": ["elevation", "soil_ph"],
            "universe": COVARIATES,
            "context": ["covariate", "important", "predictor", "driver"],
            "statement": "The important covariates are elevation and soil_ph.",
        },
        {
            "id": "spatial_cv_higher",
            "kind": "claim",
            "value": True,
            "context": ["spatial cross-validation", "spatial cv", "blocked"],
            "statement": "Spatial (blocked) cross-validation gives a higher error than random cross-validation.",
        },
        {
            "id": "best_model",
            "kind": "label",
            "value": "kriging",
            "aliases": ["regression kriging", "gaussian process"],
            "alternatives": ["random forest", "linear regression"],
            "context": ["best model", "best-performing", "lowest error", "outperform"],
            "statement": "Regression kriging is the best model.",
        },
        {
            "id": "autocorrelation",
            "kind": "claim",
            "value": True,
            "context": ["spatial autocorrelation", "autocorrelat", "moran"],
            "statement": "The residuals show spatial autocorrelation (positive Moran's I).",
        },
    ],
    "details": {"covariates": COVARIATES, "n_sites": 400},
}
TRUTHS = {"ecology": ECOLOGY, "anomaly": ANOMALY, "biomarker": BIOMARKER, "geospatial": GEOSPATIAL}


def md(title: str, sections: dict[str, str]) -> str:
    """A Markdown report: a title and one ``##`` heading per section."""
    return f"# {title}\n\n" + "\n\n".join(f"## {h}\n\n{body.strip()}" for h, body in sections.items()) + "\n"


# =============================================================================================
# hand-written reports
# =============================================================================================
GOOD = {
    "ecology": md(
        "Population dynamics of a five-species community",
        {
            "Abstract": """We analysed 200 yearly abundance counts of a community of 5 species (sp1 to sp5) described in the data
team's dataset_description artifact. A Ricker model fitted by ordinary least squares explained 87% of the variance in
per-capita log growth (R² = 0.87). A regime shift occurs at t = 120, located by PELT change-point detection (95% CI 116-124).
Negative interactions (the first species lowers the growth of the second): sp2->sp4, sp5->sp3.
Positive interactions (the first species raises the growth of the second): sp3->sp4.""",  # noqa: E501 (text kept verbatim)
            "Introduction": """Multi-species time series let us estimate how species limit or facilitate one another and whether a
community switched between regimes. We set out to identify inter-species relationships, to detect regime shifts and to forecast
population sizes one step ahead. This report synthesizes the work of the data, model and evaluation teams.""",  # noqa: E501 (text kept verbatim)
            "Dataset Description": """The dataset contains 5 species observed at 200 time steps without missing values. Mean abundance
ranged from 12.4 (sp1) to 85.0 (sp5) individuals, and the coefficient of variation from 0.21 to 0.64. The data team flagged 3
outlying counts, which we kept after checking them against the raw records.""",  # noqa: E501 (text kept verbatim)
            "Methods": """Following the model team's model_architecture artifact, we regressed the log growth rate of each species on
the abundances of all species (a multi-species Ricker model, linear regression with 6 coefficients per species). We searched
for a change point in the residuals with PELT and a BIC penalty. Forecasts were compared with a persistence baseline under
5-fold blocked cross-validation, and a random forest served as a non-linear benchmark.""",  # noqa: E501 (text kept verbatim)
            "Results": """The fitted interaction matrix shows competition and facilitation (Table 1). sp2 is the main predator of sp4:
its coefficient is -0.042 (t-test, p < 0.001). The regime shift at t = 120 lowered the carrying capacity of sp1 by 34%.

| Link | Coefficient | p-value |
|---|---|---|
| sp2->sp4 | -0.042 | <0.001 |
| sp5->sp3 | -0.031 | 0.004 |
| sp3->sp4 | 0.018 | 0.02 |""",  # noqa: E501 (text kept verbatim)
            "Evaluation": """The evaluation team's evaluation_report gives a one-step forecast RMSE of 0.071 for the Ricker model
against 0.093 for persistence, a 24% improvement (Diebold-Mariano test, p = 0.01). A bootstrap with 1000 resamples gave a 95%
confidence interval of 0.064-0.079 for the model RMSE. The random forest reached 0.085.""",  # noqa: E501 (text kept verbatim)
            "Conclusion": """The community of 5 species is structured by competition and facilitation, with sp2 suppressing sp4 most
strongly. The regime shift at t = 120 changed the dynamics, so forecasts must be refitted after it. Future work should test
whether the shift was driven by an external covariate.""",  # noqa: E501 (text kept verbatim)
        },
    ),
    "anomaly": md(
        "Anomaly detection for a ten-sensor plant",
        {
            "Abstract": """We built an anomaly detection system for 10 sensors sampled every 30 minutes over 8,640 time steps, starting
from the data team's dataset_description artifact. About 4% of the time steps are anomalous. An isolation forest combined with
rolling z-scores detected point anomalies with a recall of 0.95 and collective anomalies with a recall of 0.71.""",  # noqa: E501 (text kept verbatim)
            "Introduction": """Industrial sensors fail in several ways: isolated spikes, values that are normal in general but wrong for
the time of day, and sustained offsets. A useful detector must separate the three kinds. We describe the pipeline designed by
the model team and validated by the evaluation team.""",  # noqa: E501 (text kept verbatim)
            "Data": """The plant has 10 sensors with a daily cycle of 48 steps. Signals are correlated (median pairwise Pearson
correlation 0.42) and have no missing values. Labels mark 7 point, 5 contextual and 2 collective anomaly events.""",  # noqa: E501 (text kept verbatim)
            "Methodology": """Following the model_architecture artifact, each sensor was detrended by subtracting its median daily
profile, and robust z-scores above 4 flagged point anomalies. An isolation forest on 6-step windows with a contamination of 0.04
flagged contextual anomalies, and a CUSUM on the residual mean flagged collective runs. Thresholds were tuned by 5-fold
cross-validation on the first 60 days.""",  # noqa: E501 (text kept verbatim)
            "Results": """There are 7 point anomalies, 5 contextual anomalies and 2 collective anomalies in the labelled data. The
collective anomalies occur on sensor_03 and sensor_07. Point anomalies are detected with higher recall than collective anomalies
(0.95 vs 0.71; McNemar test, p = 0.003). Collective anomalies were the hardest type to detect.""",  # noqa: E501 (text kept verbatim)
            "Evaluation": """On the held-out 30 days the detector reached a precision of 0.88 and an F1 of 0.84, as reported in the
evaluation_report. A permutation test with 1000 shuffles of the labels gave p < 0.001 for the F1. The 95% confidence interval of
the F1 from a bootstrap was 0.79-0.89.""",  # noqa: E501 (text kept verbatim)
            "Conclusion": """Point anomalies are easy to catch with robust z-scores, while collective anomalies on sensor_03 and
sensor_07 need window statistics. The detector is ready for a pilot on the 10 sensors. Future work should adapt the thresholds
when the daily cycle drifts.""",  # noqa: E501 (text kept verbatim)
        },
    ),
    "biomarker": md(
        "Biomarkers of treatment response",
        {
            "Abstract": """We analysed a randomized trial of 600 patients with 24 biomarkers using the data team's
dataset_description artifact. The trial shows a heterogeneous treatment effect across subtypes. The predictive biomarkers
(treatment x biomarker interaction) are BM03 and BM11 (likelihood-ratio test, p < 0.001).""",  # noqa: E501 (text kept verbatim)
            "Introduction": """Treatments rarely help every patient equally, and biomarkers can identify who benefits. We aimed to
predict treatment response, to discover patient subtypes and to find the biomarkers that modify the treatment effect. The
analysis builds on the model team's work and on the evaluation team's checks.""",  # noqa: E501 (text kept verbatim)
            "Dataset": """The trial enrolled 600 patients, 302 treated and 298 controls, with a response rate of 41%. Each patient has
24 continuous biomarkers (BM01 to BM24) measured at baseline. Missing values affected 1.2% of the measurements and were imputed
with the median.""",  # noqa: E501 (text kept verbatim)
            "Methods": """Patients were clustered with k-means on standardized biomarkers, choosing k by the silhouette score. Treatment
response was modelled by logistic regression with treatment x biomarker interaction terms, one biomarker at a time, following the
model_architecture artifact. P-values were corrected with the Bonferroni method.""",  # noqa: E501 (text kept verbatim)
            "Results": """The patients fall into 3 subtypes (silhouette 0.41). The subtypes are distinguished by BM05, BM14 and BM20, each
high in one subtype. The predictive biomarkers (treatment x biomarker interaction) are BM03 and BM11, with odds ratios of 2.4 and
0.5. The subtype marked by high BM05 benefits most from the treatment (response 62% vs 31%, chi-square p < 0.001).""",  # noqa: E501 (text kept verbatim)
            "Evaluation": """A logistic model with the two predictive biomarkers reached an AUC of 0.78 under 10-fold cross-validation,
against 0.61 without interactions. The evaluation_report confirms the subtypes are stable: 94% of patients keep their cluster in
bootstrap resamples.""",  # noqa: E501 (text kept verbatim)
            "Conclusion": """The treatment effect differs by subtype, and BM03 and BM11 modify it. Patients in the BM05-high subtype
should be prioritized for treatment. A confirmatory trial should stratify on the 3 subtypes.""",  # noqa: E501 (text kept verbatim)
        },
    ),
    "geospatial": md(
        "Mapping resource concentration",
        {
            "Abstract": """We mapped resource concentration from samples at 400 sites, using the data team's dataset_description
artifact. Regression kriging is the best model, with an RMSE of 0.82 under spatial cross-validation. The residuals show spatial
autocorrelation (positive Moran's I = 0.31, p < 0.001).""",  # noqa: E501 (text kept verbatim)
            "Introduction": """Resource maps guide where to sample and where to extract. Because nearby sites are similar, random
cross-validation can overstate how well a model predicts new areas. We compare spatial and non-spatial models with spatial
cross-validation, building on the model team's candidate models.""",  # noqa: E501 (text kept verbatim)
            "Dataset Description": """Resource concentration was measured at 400 sites on a 50 x 50 km area, with six covariates:
elevation, soil_ph, slope, rainfall, ndvi and distance_to_river. Concentration is right-skewed (median 3.1, maximum 19.7) and was
log-transformed. No values were missing.""",  # noqa: E501 (text kept verbatim)
            "Methods": """We fitted linear regression, a random forest and regression kriging (linear trend plus ordinary kriging of the
residuals with an exponential variogram), as described in the model_architecture artifact. Models were compared by 5-fold
random and 5-fold spatially blocked cross-validation with 10 km blocks.""",  # noqa: E501 (text kept verbatim)
            "Results": """The important covariates are elevation and soil_ph (permutation importance 0.41 and 0.22); slope, rainfall,
ndvi and distance_to_river had no effect. The spatial autocorrelation range is about 15 km. Regression kriging is the best model:
its spatial CV RMSE was 0.82 against 1.05 for the random forest and 1.21 for linear regression.""",  # noqa: E501 (text kept verbatim)
            "Evaluation": """Spatial (blocked) cross-validation gives a higher error than random cross-validation: 0.82 against 0.61 for
kriging (paired t-test over folds, p = 0.004). The evaluation team's evaluation_report shows the same ranking of models in every
fold.""",  # noqa: E501 (text kept verbatim)
            "Conclusion": """Elevation and soil_ph drive the concentration, and the remaining spatial structure is best captured by
kriging. Random cross-validation is optimistic for spatial data and should not be used to select models. Future surveys should
add sites where the kriging variance is largest.""",  # noqa: E501 (text kept verbatim)
        },
    ),
}

CONTRADICTING = {
    "ecology": md(
        "Population dynamics",
        {
            "Abstract": """We analysed 200 yearly counts of a community of 8 species described in the data team's dataset_description
artifact. A Ricker model fitted by ordinary least squares explained 87% of the variance (R² = 0.87). A regime shift occurs at
t = 40, located by PELT change-point detection (95% CI 36-44).""",  # noqa: E501 (text kept verbatim)
            "Introduction": """Multi-species time series let us estimate how species limit or facilitate one another and whether a
community switched between regimes. We set out to identify inter-species relationships, to detect regime shifts and to forecast
population sizes one step ahead.""",  # noqa: E501 (text kept verbatim)
            "Dataset Description": """The dataset contains 8 species observed at 200 time steps without missing values. Mean abundance
ranged from 12.4 to 85.0 individuals, and the coefficient of variation from 0.21 to 0.64. The data team flagged 3 outlying
counts.""",  # noqa: E501 (text kept verbatim)
            "Methods": """Following the model_architecture artifact, we regressed the log growth rate of each species on the abundances of
all species (a Ricker model, linear regression). We searched for a change point with PELT and a BIC penalty and compared forecasts
with a persistence baseline under 5-fold cross-validation.""",  # noqa: E501 (text kept verbatim)
            "Results": """Negative links: sp1->sp2, sp4->sp5. Positive links: sp5->sp1. The species are independent of each other: the
fitted model shows no interactions between them (t-test, p = 0.62). sp5 is the main predator of sp1.""",  # noqa: E501 (text kept verbatim)
            "Evaluation": """The evaluation team's evaluation_report gives a one-step forecast RMSE of 0.071 against 0.093 for
persistence (Diebold-Mariano test, p = 0.01). A bootstrap with 1000 resamples gave a 95% confidence interval of 0.064-0.079.""",  # noqa: E501 (text kept verbatim)
            "Conclusion": """The 8 species fluctuate independently, and the regime shift at t = 40 changed their mean levels. Forecasts
should be refitted after the shift. Future work should test external drivers of the shift.""",  # noqa: E501 (text kept verbatim)
        },
    ),
    "anomaly": md(
        "Anomaly detection",
        {
            "Abstract": """We built an anomaly detection system for 14 sensors, starting from the data team's dataset_description
artifact. About 15% of the time steps are anomalous. An isolation forest combined with rolling z-scores found all anomaly kinds.""",  # noqa: E501 (text kept verbatim)
            "Introduction": """Industrial sensors fail in several ways: isolated spikes, values that are wrong for the time of day, and
sustained offsets. A useful detector must separate the three kinds, as planned by the model team.""",  # noqa: E501 (text kept verbatim)
            "Data": """The plant has 14 sensors with a daily cycle of 48 steps. Signals are correlated (median pairwise Pearson correlation
0.42) and have no missing values.""",  # noqa: E501 (text kept verbatim)
            "Methodology": """Robust z-scores above 4 flagged isolated values, an isolation forest on 6-step windows flagged contextual
anomalies, and a CUSUM on the residual mean flagged collective runs, following the model_architecture artifact. Thresholds were
tuned by 5-fold cross-validation.""",  # noqa: E501 (text kept verbatim)
            "Results": """There are 25 point anomalies in the labelled data. The collective anomalies occur on sensor_01 and sensor_09.
Point anomalies are detected with lower recall than collective anomalies (McNemar test, p = 0.003). Point anomalies were the
hardest type to detect.""",  # noqa: E501 (text kept verbatim)
            "Evaluation": """On the held-out 30 days the detector reached a precision of 0.88 and an F1 of 0.84, as reported in the
evaluation_report. A permutation test with 1000 shuffles gave p < 0.001, and the bootstrap 95% confidence interval was 0.79-0.89.""",  # noqa: E501 (text kept verbatim)
            "Conclusion": """The 14 sensors need window statistics for every kind of anomaly. The detector is ready for a pilot. Future
work should adapt the thresholds when the daily cycle drifts.""",  # noqa: E501 (text kept verbatim)
        },
    ),
    "biomarker": md(
        "Biomarkers",
        {
            "Abstract": """We analysed a randomized trial of 450 patients with 24 biomarkers using the data team's dataset_description
artifact. We found a uniform treatment effect across all patients. The predictive biomarkers (treatment x biomarker
interaction) are BM07 and BM19 (likelihood-ratio test, p < 0.001).""",  # noqa: E501 (text kept verbatim)
            "Introduction": """Treatments rarely help every patient equally, and biomarkers can identify who benefits. We aimed to
predict treatment response and to find the biomarkers that modify the treatment effect, building on the model team's work.""",  # noqa: E501 (text kept verbatim)
            "Dataset": """The trial enrolled 450 patients with a response rate of 41%. Each patient has 24 continuous biomarkers measured
at baseline, and missing values affected 1.2% of the measurements.""",  # noqa: E501 (text kept verbatim)
            "Methods": """Patients were clustered with k-means on standardized biomarkers. Treatment response was modelled by logistic
regression with treatment x biomarker interaction terms, following the model_architecture artifact, with Bonferroni correction.""",  # noqa: E501 (text kept verbatim)
            "Results": """The patients fall into 5 subtypes (silhouette 0.41). The subtypes are distinguished by BM01 and BM02. The
predictive biomarkers are BM07 and BM19. The subtype marked by high BM02 benefits most from the treatment (chi-square p = 0.01).""",  # noqa: E501 (text kept verbatim)
            "Evaluation": """A logistic model with the two biomarkers reached an AUC of 0.78 under 10-fold cross-validation. The
evaluation_report confirms that 94% of patients keep their cluster in bootstrap resamples.""",  # noqa: E501 (text kept verbatim)
            "Conclusion": """The treatment works the same for everyone, a uniform treatment effect. BM07 and BM19 should be measured in
future trials, which should stratify on the 5 subtypes.""",  # noqa: E501 (text kept verbatim)
        },
    ),
    "geospatial": md(
        "Mapping resource concentration",
        {
            "Abstract": """We mapped resource concentration from samples at 250 sites, using the data team's dataset_description
artifact. The random forest is the best model, with an RMSE of 0.82. The residuals show no spatial autocorrelation (Moran's I
near zero, p = 0.71).""",  # noqa: E501 (text kept verbatim)
            "Introduction": """Resource maps guide where to sample and where to extract. We compare spatial and non-spatial models with
cross-validation, building on the model team's candidate models.""",  # noqa: E501 (text kept verbatim)
            "Dataset Description": """Resource concentration was measured at 250 sites with six covariates. Concentration is
right-skewed (median 3.1, maximum 19.7) and was log-transformed, and no values were missing.""",  # noqa: E501 (text kept verbatim)
            "Methods": """We fitted linear regression, a random forest and regression kriging, as described in the model_architecture
artifact. Models were compared by 5-fold random and 5-fold spatially blocked cross-validation.""",  # noqa: E501 (text kept verbatim)
            "Results": """The important covariates are slope and rainfall (permutation importance 0.41 and 0.22). The correlation length
is about 60 km. The random forest is the best model, with an RMSE of 0.82 against 1.05 for kriging.""",  # noqa: E501 (text kept verbatim)
            "Evaluation": """Spatial cross-validation gives a lower error than random cross-validation: 0.55 against 0.61 (paired t-test,
p = 0.04). The evaluation team's evaluation_report shows the same ranking in every fold.""",  # noqa: E501 (text kept verbatim)
            "Conclusion": """Slope and rainfall drive the concentration, and the random forest is the best model to deploy. No spatial
autocorrelation remains in the residuals. Future surveys should add sites in the north.""",  # noqa: E501 (text kept verbatim)
        },
    ),
}

BOILERPLATE = """# Report

## Abstract
This report presents our analysis.

## Introduction
TBD

## Dataset Description
The data was analyzed.

## Methods
We used standard methods. To be completed.

## Results
Results are good. Lorem ipsum dolor sit amet.

## Evaluation
[Section content goes here]

## Conclusion
In conclusion, the analysis was successful.
"""


# =============================================================================================
# calibration
# =============================================================================================
@pytest.mark.parametrize("task", list(TRUTHS))
def test_test_truths_are_consistent_with_the_scorer(task):
    assert truth_problems(TRUTHS[task]) == []


@pytest.mark.parametrize("task", list(TRUTHS))
def test_good_report_scores_high_on_all_three(task):
    s = heuristic_score(GOOD[task], TRUTHS[task])
    assert s.completeness == 1.0, s.sections
    assert s.quality >= 0.75, (s.quality_parts, s.quality_terms)
    assert s.accuracy >= 0.9, [f for f in s.facts if f.status != "found"]
    assert all(f.status == "found" for f in s.facts), [f for f in s.facts if f.status != "found"]


@pytest.mark.parametrize("task", list(TRUTHS))
@pytest.mark.parametrize("report", ["", BOILERPLATE], ids=["empty", "boilerplate"])
def test_empty_and_boilerplate_reports_score_low(task, report):
    s = heuristic_score(report, TRUTHS[task])
    assert s.completeness <= 0.2 and s.quality <= 0.2 and s.accuracy <= 0.2, s.as_dict()


@pytest.mark.parametrize("task", list(TRUTHS))
def test_contradicting_report_loses_accuracy_but_keeps_structure(task):
    s = heuristic_score(CONTRADICTING[task], TRUTHS[task])
    assert s.accuracy <= 0.2, [f for f in s.facts if f.score > 0]
    assert s.completeness >= 6 / 7, s.sections
    assert s.quality >= 0.5
    contradicted = [f.id for f in s.facts if f.status == "contradicted"]
    assert len(contradicted) >= len(s.facts) - 1, s.facts


@pytest.mark.parametrize("task", list(TRUTHS))
def test_the_truths_own_statements_make_an_accurate_report(task):
    truth = TRUTHS[task]
    text = " ".join(f["statement"] for f in truth["facts"])
    assert heuristic_score(text, truth).accuracy == 1.0


def test_score_object_and_determinism():
    a = heuristic_score(GOOD["ecology"], ECOLOGY)
    b = heuristic_score(GOOD["ecology"], ECOLOGY)
    assert isinstance(a, HeuristicScore) and a == b
    d = a.as_dict()
    json.dumps(d)
    assert set(d["sections"]) == set(SECTIONS) and set(d["quality_parts"]) == {
        "numbers",
        "methods",
        "tests",
        "cross_refs",
    }
    assert [f["id"] for f in d["facts"]] == [f["id"] for f in ECOLOGY["facts"]]
    with pytest.raises(AttributeError):
        a.completeness = 0.0  # pyright: ignore[reportAttributeAccessIssue] - frozen: the assignment this checks is refused


# =============================================================================================
# sections
# =============================================================================================
BODY = (
    "The analysis used 200 observations from five monitoring stations across the region. "
    "Each station reported hourly values that we aggregated into daily means before modelling. "
    "Missing hours were rare."
)


@pytest.mark.parametrize(
    "heading,section",
    [
        ("## Abstract", "abstract"),
        ("# 1. Introduction", "introduction"),
        ("### Background", "introduction"),
        ("## Dataset Description", "dataset"),
        ("## Data", "dataset"),
        ("## 2. Data and Preprocessing", "dataset"),
        ("## Exploratory Data Analysis", "dataset"),
        ("## Materials and Methods", "methods"),
        ("## Methodology", "methods"),
        ("## 3.1 Methods", "methods"),
        ("## Model Architecture", "methods"),
        ("## Experiments", "results"),
        ("## Experimental Results", "results"),
        ("## Results and Discussion", "results"),
        ("## Key Findings", "results"),
        ("## Evaluation", "evaluation"),
        ("## Validation", "evaluation"),
        ("## Model Evaluation on Held-out Data", "evaluation"),
        ("## Discussion and Conclusion", "conclusion"),
        ("## Conclusions", "conclusion"),
        ("## Discussion", "conclusion"),
        ("**Methods**", "methods"),
        ("__Results:__", "results"),
        ("Methods:", "methods"),
        ("RESULTS", "results"),
        ("2. Methods", "methods"),
        ("IV. Evaluation", "evaluation"),
        ("<h2>Conclusion</h2>", "conclusion"),
        ("\\section{Methods}", "methods"),
        ("Executive Summary", "abstract"),
        ("Summary", "abstract"),
    ],
)
def test_heading_variants(heading, section):
    text = f"{heading}\n{BODY}\n"
    assert list(split_sections(text)) == [section], split_sections(text)
    assert heuristic_score(text, ECOLOGY).sections[section]


@pytest.mark.parametrize(
    "line", [f"**Abstract:** {BODY}", f"Abstract: {BODY}", f"Abstract — {BODY}", f"__Abstract__: {BODY}"]
)
def test_inline_headings(line):
    secs = split_sections(line)
    assert list(secs) == ["abstract"] and secs["abstract"].strip() == BODY


def test_setext_inline_and_combined_headings():
    text = f"Results\n=======\n{BODY}\n\nMethods: {BODY}\n\n## Data and Methods\n{BODY}\n"
    secs = split_sections(text)
    assert set(secs) == {"results", "methods", "dataset"}
    assert secs["dataset"] == BODY and BODY in secs["methods"]


def test_subsections_continue_a_section_and_unknown_headings_end_it():
    text = (
        f"## Methods\n{BODY}\n### Random forest\nMore detail.\n## Appendix\nCode listing.\n# Other title\nStray text.\n"
    )
    secs = split_sections(text)
    assert (
        "More detail." in secs["methods"] and "Code listing." not in secs["methods"] and "Stray" not in secs["methods"]
    )


def test_sentences_and_code_comments_are_not_headings():
    text = (
        f"## Methods\n{BODY}\n```python\n# Results\nprint(1)\n```\n"
        "We used random forest and evaluated with cross-validation.\n---\n"
        "1. Data were loaded with pandas and cleaned.\n"
        "**Table 1: Results of the models**\n"
    )
    assert list(split_sections(text)) == ["methods"]


def test_substantive_content_rules():
    assert is_substantive(BODY)
    assert not is_substantive("Results are good.")  # one short sentence
    assert not is_substantive("TBD. To be completed. " * 20)  # placeholders only
    assert not is_substantive(BODY + " Lorem ipsum dolor sit amet.")  # lorem ipsum
    assert not is_substantive("data " * 60)  # one word repeated, one sentence
    assert not is_substantive("")
    # a heading without a body, and the same body pasted under every heading
    s = heuristic_score("## Abstract\n\n## Methods\n" + BODY, ECOLOGY)
    assert not s.sections["abstract"] and s.sections["methods"]
    pasted = "".join(f"## {h}\n{BODY}\n" for h in ("Abstract", "Introduction", "Methods", "Results"))
    s = heuristic_score(pasted, ECOLOGY)
    assert sum(s.sections.values()) == 1 and s.sections["abstract"]


def test_completeness_counts_sections():
    good = GOOD["ecology"]
    cut = good.split("## Evaluation")[0]  # abstract..results
    s = heuristic_score(cut, ECOLOGY)
    assert s.completeness == pytest.approx(5 / 7)
    assert not s.sections["evaluation"] and not s.sections["conclusion"]


# =============================================================================================
# quality
# =============================================================================================
def test_quality_parts_count_distinct_terms_and_saturate():
    parts, terms = quality_parts(GOOD["ecology"])
    assert parts == {"numbers": 1.0, "methods": 1.0, "tests": 1.0, "cross_refs": 1.0}
    assert {"t-test", "p-value", "bootstrap", "confidence interval", "diebold-mariano"} <= set(terms["tests"])
    assert {"data team", "model team", "evaluation team", "dataset_description", "model_architecture"} <= set(
        terms["cross_refs"]
    )
    parts, _ = quality_parts("We used a random forest. The accuracy was 0.91 and the error 0.09.")
    assert parts["methods"] == pytest.approx(1 / 3) and parts["numbers"] == pytest.approx(2 / 10)
    assert parts["tests"] == 0 and parts["cross_refs"] == 0


def test_specific_methods_are_not_double_counted():
    assert find_terms("We fitted a logistic regression.", METHOD_TERMS) == ["logistic regression"]
    assert find_terms("A regression and a logistic regression.", METHOD_TERMS) == ["logistic regression", "regression"]


def test_heading_numbers_enumerators_and_references_are_not_results():
    text = "## 2. Methods\n1. We fit the model as in Table 3 and Figure 4.\n2) Section 5 explains the rest.\n"
    assert quality_parts(text)[1]["numbers"] == []
    assert quality_parts("The RMSE was 0.82 and the R2 0.61 over 1,234 sites.")[1]["numbers"] == [
        "0.82",
        "0.61",
        "1234",
    ]


# =============================================================================================
# numbers
# =============================================================================================
@pytest.mark.parametrize(
    "text,values",
    [
        ("t=120", [120]),
        ("t = 120", [120]),
        ("time step 120", [120]),
        ("1,234.5 units", [1234.5]),
        ("12%", [12]),
        ("-3.2 and +4", [-3.2, 4]),
        ("1e-3", [0.001]),
        ("2.5E+04", [25000]),
        ("3 x 10^-4", [3e-4]),
        ("p < .05", [0.05]),
        ("between 110-130", [110, 130]),
        ("BM03 and sensor_03 and R2", []),
        ("five species", [5]),
        ("one of them", []),
        ("t = −5 (U+2212)", [-5, 2212]),
        ("v1.2.3", []),
        ("1e999", []),
    ],
)
def test_extract_numbers(text, values):
    got = [n.value for n in extract_numbers(clean_text(text)[0])]
    assert got == pytest.approx(values)


# =============================================================================================
# fact kinds
# =============================================================================================
def fact_result(truth_fact: dict, text: str):
    truth = {"task": "t", "facts": [truth_fact]}
    (r,) = heuristic_score(text, truth).facts
    return r


SHIFT = ECOLOGY["facts"][1]


@pytest.mark.parametrize(
    "text,status",
    [
        ("A regime shift occurs at t = 120.", "found"),
        ("The change point was located at t=125 (95% CI 117-131).", "found"),  # within the tolerance of 8
        ("We detected the regime shift at time step 113.", "found"),
        ("| Regime shift | t = 121 |", "found"),
        ("A regime shift occurs at t = 300.", "contradicted"),
        ("A regime shift occurs at t = 130.", "contradicted"),  # just outside the tolerance
        ("There was a regime shift in the data.", "missing"),
        (
            "The value 120 appears in a long sentence that talks about many other things far away from anything else, "
            "and only much later, well beyond the window of words, does it finally mention a regime shift.",
            "missing",
        ),
        ("", "missing"),
    ],
)
def test_number_fact(text, status):
    r = fact_result(SHIFT, text)
    assert r.status == status and r.score == (1.0 if status == "found" else 0.0)


def test_number_fact_counts_and_sections():
    n_species = ECOLOGY["facts"][0]
    assert fact_result(n_species, "The community has 6 species linked by 5 interactions.").status == "contradicted"
    assert fact_result(n_species, "The community has 5 species linked by 6 interactions.").status == "found"
    assert fact_result(n_species, "| n_species | 5 |").status == "found"
    # the introduction and the methods state aims and parameters, not findings
    intro = "## Introduction\nThe task mentions five species and a regime shift at t = 120 in similar systems.\n"
    assert fact_result(n_species, intro).status == "missing" and fact_result(SHIFT, intro).status == "missing"
    assert fact_result(SHIFT, "## Results\nA regime shift occurs at t = 120.\n").status == "found"
    assert fact_result(SHIFT, "## Methods and Results\nA regime shift occurs at t = 120.\n").status == "found"


def test_number_fact_percentages_and_headings():
    rate = ANOMALY["facts"][2]
    assert fact_result(rate, "About 4% of the time steps are anomalous.").status == "found"
    assert fact_result(rate, "The anomaly rate was 0.045.").status == "found"
    assert fact_result(rate, "The anomaly rate was 12%.").status == "contradicted"
    # a heading's numbering is not a value
    assert fact_result(SHIFT, "## 3. Regime shift\nWe looked for it.").status == "missing"


MEAN_YIELD = {
    "id": "mean_yield",
    "kind": "number",
    "value": 6.6,
    "tolerance": 0.05,
    "context": ["mean yield"],
    "statement": "The mean yield is 6.6.",
}


@pytest.mark.parametrize(
    "text,status",
    [
        # issue 38: plainly stated, on word stems and column-name tokens
        ("The mean of yield_t is 6.5993.", "found"),
        ("The mean yield_t is 6.5993.", "found"),
        ("Means of the yields were 6.61.", "found"),
        ("The mean value of yield is 6.6 t/ha.", "found"),
        ("| mean of yield2 | 6.6 |", "found"),
        ("The mean of yield_t is 7.4.", "contradicted"),
        # ... but only articles, prepositions and "value" between the words: not another quantity
        ("The mean of rainfall and yield is 6.6.", "missing"),
        ("The mean of log_yield is 6.6.", "missing"),
        ("The mean rainfall is 6.6, and the yield varies.", "missing"),
    ],
)
def test_context_phrases_match_word_stems_and_column_names(text, status):
    assert fact_result(MEAN_YIELD, text).status == status


def test_context_gaps_never_join_another_phrase():
    top = {
        "id": "top",
        "kind": "label",
        "value": "elevation",
        "context": ["most important"],
        "alternatives": ["rainfall"],
        "statement": "The most important covariate is elevation.",
    }
    assert fact_result(top, "The most important covariate is elevation.").status == "found"
    assert fact_result(top, "Most of the important covariates are rainfall and soil.").status == "missing"
    spatial_cv = GEOSPATIAL["facts"][3]  # context "spatial cross-validation", "spatial cv", ...
    assert (
        fact_result(spatial_cv, "Spatial and random CV give a higher error than the training error.").status
        == "missing"
    )
    assert fact_result(spatial_cv, "Non-spatial CV gives a higher error than random CV.").status == "missing"
    n_patients = BIOMARKER["facts"][0]  # "patients": a plural stays plural
    assert fact_result(n_patients, "The trial enrolled 600 patients. Each patient has 24 biomarkers.").status == "found"


def test_the_describing_team_is_credited_for_the_means_it_states():
    """The own-data describing team writes "The mean of yield_t is 6.5993." (its code's column
    means): a truth "mean yield 6.6 +- 0.05" finds it."""
    from cooplab.tasks.science.scripted import describe_report

    paper = describe_report(
        {"data": {"rows": 240, "columns": 3, "missing": 0, "means": {"yield_t": 6.5993, "rain_mm": 812.4}}}
    )
    assert "The mean of yield_t is 6.5993." in paper
    s = heuristic_score(paper, {"task": "custom", "facts": [MEAN_YIELD]})
    assert s.facts[0].status == "found" and s.accuracy == 1.0


PREDICTIVE = BIOMARKER["facts"][2]
IMPORTANT = GEOSPATIAL["facts"][2]


@pytest.mark.parametrize(
    "text,status,score",
    [
        ("The predictive biomarkers are BM03 and BM11.", "found", 1.0),
        ("The predictive biomarkers are BM3 and bm_11.", "found", 1.0),  # zero padding, case, separators
        ("Predictive biomarkers:\n\n- BM03\n- BM11\n", "found", 1.0),  # a list below the context
        ("| Predictive biomarker | OR |\n|---|---|\n| BM03 | 2.4 |\n| BM11 | 0.5 |\n", "found", 1.0),  # a table below
        ("The predictive biomarkers are BM03, BM11 and BM07.", "found", 0.5),  # a false positive cancels a right item
        ("The predictive biomarker is BM03.", "found", 0.5),  # half of the set
        ("BM03 and BM11 are predictive, whereas BM05 is only prognostic.", "found", 1.0),  # BM05 in another clause
        ("BM03, BM11, and BM05 are predictive.", "found", 0.5),  # one list, one clause
        (
            "The predictive biomarkers are BM03 and BM11, and the\nsubtype marker BM05 is high in one group.",
            "found",
            1.0,
        ),
        ("The predictive biomarkers are BM07 and BM19.", "contradicted", 0.0),
        ("We found BM03 and BM11 in the data.", "missing", 0.0),  # named outside the context, nothing claimed of them
        (
            "BM03 and BM11 are strongly associated with the response.",
            "found",
            0.5,
        ),  # a claim outside the context: half weight
        ("Nothing was predictive.", "missing", 0.0),
        (
            "The predictive biomarkers were screened among BM01, BM02, BM03, BM04, BM05, BM06 and BM11.",
            "missing",
            0.0,
        ),  # an enumeration
    ],
)
def test_set_fact(text, status, score):
    r = fact_result(PREDICTIVE, text)
    assert r.status == status and r.score == pytest.approx(score), r


def test_set_fact_negative_context():
    pred = dict(PREDICTIVE, context=["predictive", "biomarker"], negative_context=["prognostic"])
    text = "The predictive biomarkers are BM03 and BM11. Prognostic biomarkers are BM01 and BM14."
    assert fact_result(pred, text).score == 1.0
    assert fact_result(dict(pred, negative_context=[]), text).score < 1.0


def test_set_fact_universe_and_siblings():
    # items without a number family: false positives come from the universe
    assert fact_result(IMPORTANT, "The important covariates are elevation and soil_ph.").score == 1.0
    r = fact_result(IMPORTANT, "The important covariates are slope and rainfall.")
    assert r.status == "contradicted" and r.score == 0
    # listing every covariate in the data description is no claim about importance
    r = fact_result(
        IMPORTANT,
        "Six covariates: elevation, soil_ph, slope, rainfall, ndvi and distance_to_river. "
        "The important covariates are elevation and soil_ph.",
    )
    assert r.score == 1.0
    # two set facts sharing a context word: each clause goes to the more specific context
    neg, pos = ECOLOGY["facts"][2], ECOLOGY["facts"][3]
    truth = {"facts": [neg, pos]}
    text = "Negative interactions: sp2->sp4, sp5->sp3. Positive interactions: sp3->sp4."
    assert [f.score for f in heuristic_score(text, truth).facts] == [1.0, 1.0]
    swapped = "Negative interactions: sp3->sp4. Positive interactions: sp2->sp4, sp5->sp3."
    assert [f.status for f in heuristic_score(swapped, truth).facts] == ["contradicted", "contradicted"]
    # pairs written with arrows or words
    assert fact_result(pos, "Positive interaction: the effect of sp3 on sp4 (sp3 → sp4).").score == 1.0


SPATIAL_CV = GEOSPATIAL["facts"][3]


@pytest.mark.parametrize(
    "text,status",
    [
        ("Spatial (blocked) cross-validation gives a higher error than random cross-validation.", "found"),
        ("The spatial CV error (0.82) was higher than the random CV error (0.61).", "found"),
        ("Random CV gave a lower error than spatial CV.", "found"),  # "than" flips the comparison
        ("Blocked cross-validation errors exceeded the random ones.", "found"),
        ("Spatial CV gives a lower error than random CV.", "contradicted"),
        ("Random CV error was higher than spatial CV error.", "contradicted"),
        ("The spatial CV error was not higher than the random CV error.", "contradicted"),
        ("We used spatial cross-validation with 10 km blocks.", "missing"),  # no comparative: neutral
        ("The non-spatial CV error was higher than the random one.", "missing"),  # "non-spatial" is not "spatial"
    ],
)
def test_comparative_claim(text, status):
    assert fact_result(SPATIAL_CV, text).status == status


def test_comparative_claim_with_false_value_requires_the_reverse():
    false_claim = dict(SPATIAL_CV, value=False)
    assert fact_result(false_claim, "Spatial CV gives a lower error than random CV.").status == "found"
    assert fact_result(false_claim, "Spatial CV gives a higher error than random CV.").status == "contradicted"
    assert truth_problems({"facts": [false_claim]})  # its statement asserts the opposite of its value


INTERACT = ECOLOGY["facts"][4]


@pytest.mark.parametrize(
    "text,status,score",
    [
        ("Strong competition shapes the community.", "found", 1.0),
        ("There is no evidence of interaction between species.", "contradicted", 0.0),
        ("The species did not show any competition.", "contradicted", 0.0),
        ("The species fluctuate independently.", "contradicted", 0.0),  # negative_context
        ("The species are not independent.", "found", 1.0),  # negated negative_context
        ("Competition is strong. No interaction involves sp1.", "contradicted", 0.0),  # stated both ways
        ("Not only competition but predation shapes them.", "found", 1.0),  # "not only" is no negation
        (
            "## Methods\nWe tested for interactions between all pairs of species with a Ricker model and report them "
            "below.",
            "missing",
            0.0,
        ),
    ],
)
def test_plain_claim(text, status, score):
    r = fact_result(INTERACT, text)
    assert r.status == status and r.score == pytest.approx(score), r


def test_plain_claim_with_false_value():
    no_shift = {
        "id": "no_shift",
        "kind": "claim",
        "value": False,
        "context": ["regime shift"],
        "statement": "There is no regime shift in sp3.",
    }
    assert fact_result(no_shift, "We found no regime shift in sp3.").status == "found"
    assert fact_result(no_shift, "A regime shift occurs in sp3.").status == "contradicted"


BEST = GEOSPATIAL["facts"][4]
TOP = ECOLOGY["facts"][5]


@pytest.mark.parametrize(
    "fact,text,status",
    [
        (BEST, "Regression kriging is the best model.", "found"),
        (BEST, "The Gaussian process had the lowest error.", "found"),  # an alias
        (BEST, "The best model was the random forest.", "contradicted"),  # an alternative
        (BEST, "Kriging was not the best model.", "contradicted"),  # negated
        (BEST, "We compared kriging and random forests.", "missing"),  # no context
        (TOP, "sp2 is the main predator of sp4.", "found"),
        (TOP, "sp5 is the main predator of sp1.", "contradicted"),  # another member of the family
        (TOP, "The predator could not be identified.", "missing"),
    ],
)
def test_label_fact(fact, text, status):
    assert fact_result(fact, text).status == status


def test_malformed_truth_is_rejected():
    for bad in [
        None,
        {},
        {"facts": "x"},
        {"facts": [{"id": "a", "kind": "weird", "value": 1, "context": [], "statement": ""}]},
        {"facts": [{"id": "a", "kind": "number", "value": "5", "context": [], "statement": ""}]},
        {"facts": [{"id": "a", "kind": "number", "value": True, "context": [], "statement": ""}]},
        {"facts": [{"id": "a", "kind": "set", "value": [], "context": [], "statement": ""}]},
        {"facts": [{"id": "a", "kind": "claim", "value": 1, "context": [], "statement": ""}]},
        {"facts": [{"id": "a", "kind": "label", "value": "x", "context": "word", "statement": ""}]},
    ]:
        with pytest.raises(ValueError):
            heuristic_score("text", bad)
    assert heuristic_score("text", {"facts": []}).accuracy == 0.0


# =============================================================================================
# hostile input
# =============================================================================================
def _in_unit(s: HeuristicScore) -> bool:
    return all(0.0 <= v <= 1.0 for v in (s.completeness, s.quality, s.accuracy, *s.quality_parts.values())) and all(
        0.0 <= f.score <= 1.0 for f in s.facts
    )


@pytest.mark.parametrize(
    "report",
    [
        None,
        "",
        " \n\t ",
        b"\xff\xfe\x00garbage\x80 regime shift at t = 120",
        "\udcff lone surrogate",
        "\x00\x01\x02" * 1000,
        "|" * 5000,
        "# " * 3000,
        "1e999 1e-999 -0 0x1F 1,2,3,4 1.2.3.4 ∞ NaN 12%% --5 +-3 1e 3e+ 99999999999999999999",
        "| a | b |\n|---|---|\n" + "| 1 | 2 |\n" * 2000,
        "((((((((((" * 1000 + "regime shift" + "))))" * 500,
        "sp1->" * 3000,
        "BM" + "0" * 10000 + "3",
        12345,
        ["not", "a", "string"],
    ],
)
def test_hostile_input_never_raises_and_stays_in_range(report):
    for truth in TRUTHS.values():
        s = heuristic_score(report, truth)
        assert _in_unit(s)


def test_huge_report_is_capped_and_fast():
    huge = (GOOD["geospatial"] + "\n") * (10_000_000 // len(GOOD["geospatial"]) + 1)
    assert len(huge) >= 10_000_000
    s = heuristic_score(huge, GEOSPATIAL)
    assert s.truncated and _in_unit(s) and s.accuracy >= 0.9 and s.completeness == 1.0
    # capped: the scorer reads the same prefix of a text ten times as long and says the same
    assert heuristic_score(huge * 10, GEOSPATIAL) == s
    s = heuristic_score(("no structure, just words " * 500_000).encode(), ECOLOGY)
    assert s.truncated and s.completeness == 0 and s.accuracy == 0
    assert not heuristic_score(GOOD["ecology"].encode(), ECOLOGY).truncated


@pytest.mark.parametrize(
    "text,truth",
    [
        ("regime shift at t = 300 " * 15000, ECOLOGY),  # one 360k-character sentence, thousands of contexts
        ("negative interaction sp1->sp2 positive interaction sp3->sp4 " * 5000, ECOLOGY),
        ("- BM03 predictive\n" * 17000, BIOMARKER),
        ("(" * 300_000, GEOSPATIAL),
    ],
)
def test_walls_of_text_are_bounded(text, truth):
    """The scorer's work grows no faster than the text (no pattern that backtracks without bound):
    eight times the text costs well under 64 times the CPU (a quadratic scorer's ratio). CPU time of
    this process, a ratio within one test: neither the machine's speed nor its load decides it."""

    def cpu(t: str, times: int) -> float:
        best = float("inf")
        for _ in range(times):
            t0 = time.process_time()
            s = heuristic_score(t, truth)
            best = min(best, time.process_time() - t0)
        assert _in_unit(s)
        return best

    small, full = cpu(text[: len(text) // 8], 3), cpu(text, 1)
    assert full <= 24 * max(small, 0.005), (small, full)


def test_binary_noise_scores_low():
    rng = np.random.default_rng(0)
    noise = bytes(rng.integers(0, 256, 100_000, dtype=np.uint8))
    for truth in TRUTHS.values():
        s = heuristic_score(noise, truth)
        assert _in_unit(s) and s.completeness == 0 and s.accuracy <= 0.2


# =============================================================================================
# the LLM judge
# =============================================================================================
def accuracies(verdicts: list[Any]) -> list[int]:
    """The sorted accuracies of judge verdicts that must all be there."""
    assert None not in verdicts, verdicts
    return sorted(v.accuracy for v in verdicts)


def verdict(c: Any = 5, q: Any = 4, a: Any = 3, sections: bool | dict[str, bool] = True, **extra: Any) -> dict:
    """A judge's JSON answer; any value, wrong ones included (what a model may send)."""
    secs = {s: sections for s in SECTIONS} if isinstance(sections, bool) else sections
    return {
        "completeness": c,
        "completeness_rationale": "All sections are there.",
        "sections": secs,
        "quality": q,
        "quality_rationale": "Numbers and tests are reported.",
        "accuracy": a,
        "accuracy_rationale": "Most facts match the ground truth.",
        **extra,
    }


def test_judge_verdict_accepts_the_appendix_l_format():
    v = JudgeVerdict.model_validate(verdict())
    assert v.unit_scores() == {"completeness": 1.0, "quality": 0.75, "accuracy": 0.5}
    assert v.sections.methods is True


@pytest.mark.parametrize(
    "change",
    [
        {"completeness": 6},
        {"quality": 0},
        {"accuracy": "5"},
        {"accuracy": 4.0},
        {"quality": True},
        {"quality": None},
        {"sections": {s: True for s in SECTIONS if s != "evaluation"}},  # a missing section
        {"sections": {**{s: True for s in SECTIONS}, "appendix": True}},  # an extra section
        {"sections": {**{s: True for s in SECTIONS}, "methods": "yes"}},
        {"overall": 4},  # extra junk
        {"accuracy_rationale": ""},
        {"quality_rationale": 3},
    ],
)
def test_judge_verdict_rejects_bad_answers(change):
    with pytest.raises(ValidationError):
        JudgeVerdict.model_validate({**verdict(), **change})


def test_judge_verdict_rejects_missing_keys():
    for key in verdict():
        data = verdict()
        del data[key]
        with pytest.raises(ValidationError):
            JudgeVerdict.model_validate(data)


def test_to_unit():
    assert [to_unit(s) for s in range(1, 6)] == [0.0, 0.25, 0.5, 0.75, 1.0]
    bad_scores: list[Any] = [0, 6, 2.5, "3", True, None]  # what a judge may answer
    for bad in bad_scores:
        with pytest.raises(ValueError):
            to_unit(bad)


def test_judge_prompt_carries_the_rubric_truth_and_report():
    msgs = judge_messages("## Abstract\nA report quoting {task} and {ground_truth_text} literally.", BIOMARKER)
    assert msgs[0].content == JUDGE_SYSTEM
    user = msgs[1].content
    assert isinstance(user, str)
    assert user.startswith(
        "## What the team was asked\n\nScience task: biomarker\nTask description: Predict treatment response"
    )
    assert "quoting {task} and {ground_truth_text} literally" in user  # filled in one pass
    for f in BIOMARKER["facts"]:
        assert f["statement"] in user
    assert '"completeness": <integer from 1 to 5>' in user and "### 3. Accuracy" in user
    assert JUDGE_USER_TEMPLATE.count("{report_text}") == 1
    gt = ground_truth_text(GEOSPATIAL)
    assert (
        "- range_km = 15 (+/- 3)" in gt
        and "- important_covariates = elevation, soil_ph" in gt
        and "n_sites = 400" in gt
    )
    assert "(the report is empty)" in judge_prompt("", GEOSPATIAL)
    long = judge_prompt("x" * 200_000, GEOSPATIAL, max_report_chars=1000)
    assert "continues for 199000 more characters" in long and len(long) < 12_000


def judge_service(answers, cache=None, cls=ScriptedChatModel):
    spec = ModelSpec("scripted", "judge", temperature=0.0, max_tokens=512)
    kw = {"cache": cache} if cache is not None else {}
    return LLMService(models={"default": (spec, cls(answers=answers))}, backoff_base=0.0, **kw)


def run(coro):
    return asyncio.run(coro)


def test_judge_report_mean_and_spread_over_k_samples():
    answers = [
        json.dumps(verdict(5, 4, 3)),
        json.dumps(verdict(3, 4, 1)),
        json.dumps(verdict(4, 4, 2, sections={**{s: True for s in SECTIONS}, "evaluation": False})),
    ]
    svc = judge_service(answers)
    res = run(judge_report(svc, GOOD["ecology"], ECOLOGY, k=3))
    assert res.k == 3 and res.n_fallback == 0 and res.judge == "scripted:judge"
    assert (
        res.completeness == pytest.approx(0.75)
        and res.quality == pytest.approx(0.75)
        and res.accuracy == pytest.approx(0.25)
    )
    assert res.std["completeness"] == pytest.approx(np.std([1.0, 0.5, 0.75])) and res.std["quality"] == 0.0
    assert res.sections["evaluation"] == pytest.approx(2 / 3) and res.sections["methods"] == 1.0
    assert len(res.verdicts) == 3 and all(isinstance(v, JudgeVerdict) for v in res.verdicts)
    assert sorted(r.round for r in res.records) == [0, 1, 2] and {r.phase for r in res.records} == {"judge"}
    assert svc.ledger.totals()["calls"] == 3
    json.dumps(res.as_dict())


def test_judge_malformed_answer_is_retried_with_the_error_fed_back():
    seen = []

    class Spy(ScriptedChatModel):
        def _answer(self, messages, kwargs):
            seen.append([str(m.content) for m in messages])
            return super()._answer(messages, kwargs)

    svc = judge_service([json.dumps(verdict(c=7)), json.dumps(verdict())], cls=Spy)
    res = run(judge_report(svc, GOOD["anomaly"], ANOMALY, k=1))
    (rec,) = res.records
    assert rec.attempts == 2 and not rec.fallback_used and res.n_fallback == 0 and res.completeness == 1.0
    assert len(seen) == 2 and len(seen[1]) == 4 and "invalid" in seen[1][3] and "completeness" in seen[1][3]


def test_always_malformed_judge_falls_back_and_is_counted():
    svc = judge_service(
        ["I think this report is quite good, 4/5.", '{"completeness": 5}', json.dumps(verdict(q="high"))]
    )
    res = run(judge_report(svc, GOOD["anomaly"], ANOMALY, k=2))
    assert res.n_fallback == 2 and res.verdicts == [None, None]
    assert res.completeness is None and res.std["accuracy"] is None and res.sections["abstract"] is None
    assert all(r.fallback_used and r.attempts == 3 and r.error for r in res.records)
    # one good sample of two: the mean is that sample's
    svc = judge_service(["not json"] * 3 + [json.dumps(verdict(2, 2, 2))])

    async def sequential():  # one sample fails all three attempts, the next succeeds
        a = await judge_report(svc, "r", ANOMALY, k=1)
        b = await judge_report(svc, "r2", ANOMALY, k=1)
        return a, b

    a, b = run(sequential())
    assert a.n_fallback == 1 and b.n_fallback == 0 and b.accuracy == 0.25


def test_k_samples_are_k_distinct_calls_and_replay_from_the_cache(tmp_path):
    answers = [json.dumps(verdict(a=a)) for a in (1, 2, 3, 4)]
    db = tmp_path / "judge.sqlite"
    svc = judge_service(answers, cache=ResponseCache(db))
    first = run(judge_report(svc, GOOD["biomarker"], BIOMARKER, k=4))
    assert svc.live_calls == 4 and accuracies(first.verdicts) == [1, 2, 3, 4]
    svc.cache.close()
    again = judge_service(["{}"], cache=ResponseCache(db))  # a model that would only answer badly
    second = run(judge_report(again, GOOD["biomarker"], BIOMARKER, k=4))
    assert again.live_calls == 0 and [r.cached_calls for r in second.records] == [1, 1, 1, 1]
    assert accuracies(second.verdicts) == [1, 2, 3, 4] and second.accuracy == first.accuracy
    again.cache.close()
    # another report is another call
    third = judge_service(answers, cache=ResponseCache(db))
    run(judge_report(third, GOOD["geospatial"], GEOSPATIAL, k=1))
    assert third.live_calls == 1
    third.cache.close()


def test_judge_spec_and_bad_k():
    spec = judge_spec()
    assert spec.max_tokens == 512 and spec.fallback is None and spec.max_attempts == 3 and spec.phase == "judge"
    assert spec.constrain is not None
    decode = spec.constrain(spec.json_schema, {})
    assert "$defs" not in json.dumps(decode) and "$ref" not in json.dumps(decode)
    assert set(decode["properties"]["sections"]["properties"]) == set(SECTIONS)
    # no string length bounds in the grammar: llama.cpp crashed on maxLength 2000 (validation keeps them)
    assert "maxLength" not in json.dumps(decode) and "minLength" not in json.dumps(decode)
    with pytest.raises(ValidationError):
        JudgeVerdict.model_validate(verdict(accuracy_rationale="x" * 2001))
    bad_ks: list[Any] = [0, -1, 1.5, True]  # what a caller may pass
    for k in bad_ks:
        with pytest.raises(ValueError):
            run(judge_report(judge_service(["{}"]), "r", ANOMALY, k=k))


# =============================================================================================
# agreement between judges
# =============================================================================================
def test_judge_agreement_on_known_vectors():
    a = [0.0, 0.25, 0.5, 0.75, 1.0]
    assert judge_agreement(a, a)["pearson_r"] == 1.0 and judge_agreement(a, a)["mean_abs_diff"] == 0.0
    assert judge_agreement(a, a[::-1])["pearson_r"] == -1.0
    b = [0.1, 0.2, 0.7, 0.6, 0.9]
    out = judge_agreement(a, b)
    assert out["pearson_r"] == pytest.approx(np.corrcoef(a, b)[0, 1], abs=1e-6)
    assert out["mean_abs_diff"] == pytest.approx(np.mean(np.abs(np.subtract(a, b))))
    assert out["n"] == 5 and out["mean_a"] == 0.5 and out["mean_b"] == pytest.approx(0.5)
    shifted = judge_agreement(a, [x / 2 + 0.5 for x in a])  # correlated but calibrated differently
    assert shifted["pearson_r"] == 1.0 and shifted["mean_abs_diff"] == pytest.approx(0.25)


def test_judge_agreement_undefined_cases():
    c = judge_agreement([0.5, 0.5, 0.5], [0.1, 0.4, 0.9])
    assert c["pearson_r"] is None and "constant" in c["reason"] and c["mean_abs_diff"] is not None
    d = judge_agreement([0.2, None, float("nan"), 0.8], [0.1, 0.5, 0.3, 0.6])
    assert d["n"] == 2 and d["n_dropped"] == 2 and d["pearson_r"] == 1.0
    e = judge_agreement([0.3], [0.4])
    assert e["pearson_r"] is None and "fewer than two" in e["reason"]
    assert judge_agreement([], [])["reason"] == "no pair of valid scores"
    with pytest.raises(ValueError):
        judge_agreement([0.1, 0.2], [0.1])


def test_compare_judges_per_dimension():
    heur = [heuristic_score(GOOD[t], TRUTHS[t]) for t in TRUTHS] + [
        heuristic_score(CONTRADICTING[t], TRUTHS[t]) for t in TRUTHS
    ]
    judge = [{"completeness": 1.0, "quality": 0.75, "accuracy": 1.0}] * 4 + [
        {"completeness": 1.0, "quality": 0.5, "accuracy": 0.0}
    ] * 4
    out = compare_judges(heur, judge)
    assert set(out) == {"completeness", "quality", "accuracy"}
    assert out["accuracy"]["pearson_r"] > 0.9
    assert out["completeness"]["pearson_r"] is None  # the second scorer is constant
