"""The heuristic scorer cannot be gamed without looking at the data (issue 29, item 15).

For every task and seeds 0-19, data-blind reports of several shapes (tests/science/gaming.py:
candidate lists, ranges, "either X or Y", every label listed, both ways, the truth first in a
list, the truth with alternatives in brackets) are complete seven-section reports whose
candidates always include the true value; they must score (almost) no accuracy, while the
oracle's report keeps accuracy 1 and the garbage team's 0. Then the commitment rules one by one:
a fact is found only when the report commits to one value, label, set or direction."""

from __future__ import annotations

import pytest

from cooplab.evals.science_scoring import heuristic_score
from cooplab.tasks.science import datasets as D
from cooplab.tasks.science.oracle import garbage_report, oracle_report

from .conftest import SWEEP_SEEDS
from .gaming import SHAPES, gaming_report
from .test_scoring import ANOMALY, BIOMARKER, ECOLOGY, GEOSPATIAL, fact_result

SEEDS = SWEEP_SEEDS


@pytest.fixture(scope="module")
def made(seeded):
    """Every (task, seed 0-19): its ground truth and the oracle's recovered facts."""
    return {key: (s.truth, s.recovered) for key, s in seeded.items()}


@pytest.mark.parametrize("task", D.TASKS)
def test_the_oracle_still_scores_1_and_garbage_0_on_seeds_0_to_19(task, made):
    for seed in SEEDS:
        truth, got = made[task, seed]
        good = heuristic_score(oracle_report(task, got, truth), truth)
        assert good.accuracy == 1.0, (seed, [f for f in good.facts if f.score < 1])
        assert heuristic_score(garbage_report(task), truth).accuracy == 0.0


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("task", D.TASKS)
def test_a_data_blind_report_scores_no_accuracy(task, shape, made):
    for seed in SEEDS:
        truth, _ = made[task, seed]
        s = heuristic_score(gaming_report(truth, shape), truth)
        assert s.completeness == 1.0, s.sections  # complete reports: only accuracy guards against them
        assert s.accuracy <= 0.1, (seed, [f for f in s.facts if f.score > 0])
        assert not [f for f in s.facts if f.status == "found"], seed


SHIFT, N_SPECIES, RMSE_LIKE = ECOLOGY["facts"][1], ECOLOGY["facts"][0], ANOMALY["facts"][2]


@pytest.mark.parametrize(
    "fact,text,status",
    [
        # committed, also with a confidence interval or a range inside the tolerance
        (SHIFT, "A regime shift occurs at t = 120.", "found"),
        (SHIFT, "The regime shift occurs at t = 121 (95% CI 100-140).", "found"),
        (SHIFT, "The regime shift occurs between t = 118 and t = 124.", "found"),
        # several candidates offered together
        (SHIFT, "The regime shift occurs at t = 100, 120 or 140.", "contradicted"),
        (SHIFT, "The regime shift occurs between t = 100 and 140.", "contradicted"),
        (SHIFT, "The regime shift occurs at t = 100-140.", "contradicted"),
        (SHIFT, "The regime shift occurs at either t = 120 or t = 160.", "contradicted"),
        (SHIFT, "The regime shift occurs at t = 120 (or perhaps 160).", "contradicted"),
        (N_SPECIES, "The dataset contains 4 species or 5 species.", "contradicted"),
        (N_SPECIES, "The dataset could contain 5 species.", "contradicted"),  # a guess
        # one value per sentence: the statements must agree
        (N_SPECIES, "The species count is 4. The species count is 5. The species count is 6.", "contradicted"),
        (
            N_SPECIES,
            "The dataset has 5 species. The community of 5 species is stable. The species count is 4.",
            "found",
        ),
        # a number that counts something else is no statement of the value
        (N_SPECIES, "The dataset contains 5 species. The species fall into 3 groups.", "found"),
        (RMSE_LIKE, "About 4% of the time steps are anomalous.", "found"),
    ],
)
def test_numbers_must_be_committed(fact, text, status):
    assert fact_result(fact, text).status == status


BEST, TOP = GEOSPATIAL["facts"][4], ECOLOGY["facts"][5]


@pytest.mark.parametrize(
    "fact,text,status",
    [
        (BEST, "Regression kriging is the best model.", "found"),
        (BEST, "Regression kriging outperforms the random forest and linear regression.", "found"),
        (BEST, "The best model is kriging or the random forest.", "contradicted"),
        (BEST, "The best model is kriging, random forest or linear regression.", "contradicted"),
        (BEST, "The best model is one of kriging, random forest and linear regression.", "contradicted"),
        (BEST, "The best model could be kriging.", "contradicted"),
        (BEST, "The best model is kriging. The best model is the random forest.", "contradicted"),
        (
            BEST,
            "The best model is kriging. Kriging had the lowest error. The best model is the random forest.",
            "found",
        ),
        (TOP, "sp2 is the main predator; the predator is either sp2 or sp5.", "contradicted"),
    ],
)
def test_labels_must_be_committed(fact, text, status):
    assert fact_result(fact, text).status == status


PREDICTIVE, IMPORTANT = BIOMARKER["facts"][2], GEOSPATIAL["facts"][2]


@pytest.mark.parametrize(
    "fact,text,status,score",
    [
        (PREDICTIVE, "The predictive biomarkers are BM03 and BM11.", "found", 1.0),
        (
            PREDICTIVE,
            "The predictive biomarkers are BM03 and BM11. BM03 is the strongest predictive biomarker.",
            "found",
            1.0,
        ),
        (PREDICTIVE, "The predictive biomarkers are BM03, BM11 or BM07.", "contradicted", 0.0),
        (PREDICTIVE, "The predictive biomarkers are either BM03 and BM11 or BM07 and BM19.", "contradicted", 0.0),
        (PREDICTIVE, "The predictive biomarkers are BM03 and BM11; or rather BM07 and BM19.", "contradicted", 0.0),
        (PREDICTIVE, "The predictive biomarkers may include BM03 and BM11.", "contradicted", 0.0),
        (
            PREDICTIVE,
            "The predictive biomarkers are BM03 and BM11. The predictive biomarkers are BM07 and BM19.",
            "contradicted",
            0.0,
        ),
        (
            PREDICTIVE,
            "The predictive biomarkers are BM03, BM11, BM07 and BM19.",
            "contradicted",
            0.0,
        ),  # 2 right - 2 wrong
        (IMPORTANT, "The important covariates are elevation, soil_ph, slope and rainfall.", "contradicted", 0.0),
        (
            IMPORTANT,
            "The important covariates are elevation, soil_ph, slope, rainfall and ndvi.",
            "missing",
            0.0,
        ),  # a list of candidates
    ],
)
def test_sets_must_be_committed(fact, text, status, score):
    r = fact_result(fact, text)
    assert r.status == status and r.score == pytest.approx(score), r


SPATIAL_CV, AUTOCORR = GEOSPATIAL["facts"][3], GEOSPATIAL["facts"][5]


@pytest.mark.parametrize(
    "fact,text,status",
    [
        (SPATIAL_CV, "Spatial CV gives a higher error than random CV: 0.82 with blocked folds against 0.61.", "found"),
        (SPATIAL_CV, "Spatial CV may give a higher error than random CV.", "contradicted"),
        (SPATIAL_CV, "Spatial CV gives either a higher or a lower error than random CV.", "contradicted"),
        (
            SPATIAL_CV,
            "Spatial CV gives a higher error than random CV (or perhaps the reverse: spatial CV gives a lower "
            "error than random CV).",
            "contradicted",
        ),
        (
            SPATIAL_CV,
            "Spatial CV gives a higher error than random CV. Spatial CV gives a lower error than random CV. "
            "Spatial CV gives a higher error than random CV.",
            "contradicted",
        ),
        (AUTOCORR, "The residuals show spatial autocorrelation.", "found"),
        (
            AUTOCORR,
            "The residuals show spatial autocorrelation (Moran's I = 0.31), which biases naive standard errors.",
            "found",
        ),
        (AUTOCORR, "The residuals possibly show spatial autocorrelation.", "contradicted"),
        (
            AUTOCORR,
            "The residuals show spatial autocorrelation. The residuals show no spatial autocorrelation.",
            "contradicted",
        ),
    ],
)
def test_claims_must_be_committed(fact, text, status):
    r = fact_result(fact, text)
    assert r.status == status and r.score == (1.0 if status == "found" else 0.0), r
