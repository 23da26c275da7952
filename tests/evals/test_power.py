"""The seeds-per-cell formula of cooplab.evals.power against a seeded Monte-Carlo simulation of the
t-test it plans for (numpy draws; a few thousand simulated studies per case, well under a second)."""

import math

import numpy as np
import pytest
from scipy.stats import t as student

from cooplab.evals import power as pw

SIMS = 4000


def simulated_power(n, d, sd, *, paired, alpha=0.05, seed=0):
    """The share of simulated studies (n seeds per cell, a true difference d) whose two-sided t-test rejects."""
    rng = np.random.default_rng(seed)
    if paired:
        diffs = rng.normal(d, sd, size=(SIMS, n))
        tstat = diffs.mean(1) / (diffs.std(1, ddof=1) / math.sqrt(n))
        df = n - 1
    else:
        a, b = rng.normal(d, sd, size=(SIMS, n)), rng.normal(0.0, sd, size=(SIMS, n))
        pooled = np.sqrt((a.var(1, ddof=1) + b.var(1, ddof=1)) / 2)
        tstat = (a.mean(1) - b.mean(1)) / (pooled * math.sqrt(2 / n))
        df = 2 * n - 2
    return float(np.mean(np.abs(tstat) > student.ppf(1 - alpha / 2, df)))


@pytest.mark.parametrize("d,sd,paired", [(1.0, 1.0, False), (0.5, 1.0, True), (2.0, 3.0, False), (1.5, 1.2, True)])
def test_the_seeds_reach_the_power_and_one_fewer_does_not_by_much(d, sd, paired):
    need = pw.seeds_needed(d, sd, power=0.8, paired=paired)
    n = need["seeds"]
    got = simulated_power(n, d, sd, paired=paired, seed=n)
    assert got >= 0.8 - 0.03, (n, got)  # 0.03: about 4 standard errors of 4000 simulated studies
    assert abs(got - pw.power_of(n, d, sd, paired=paired)) < 0.03
    assert simulated_power(n - 1, d, sd, paired=paired, seed=n + 1) < got  # fewer seeds, less power
    assert n >= need["normal_seeds"]  # the t correction only adds seeds


def test_pairing_needs_fewer_seeds_for_the_same_spread():
    assert pw.seeds_needed(1.0, 1.0, paired=True)["seeds"] < pw.seeds_needed(1.0, 1.0)["seeds"]
    assert pw.seeds_needed(1.0, 1.0)["seeds"] == 17  # the textbook answer for d = sd, alpha 0.05, power 0.8


@pytest.mark.parametrize(
    "d,sd,alpha,power",
    [
        (0, 1, 0.05, 0.8),
        (-1, 1, 0.05, 0.8),
        (float("nan"), 1, 0.05, 0.8),
        (1, -1, 0.05, 0.8),
        (1, 1, 0.05, 1.0),
        (1, 1, 0.0, 0.8),
        (1, 1, 0.05, float("inf")),
        ("1", 1, 0.05, 0.8),
        (True, 1, 0.05, 0.8),
    ],
)
def test_bad_values_are_one_line(d, sd, alpha, power):
    with pytest.raises(pw.PowerError) as e:
        pw.seeds_needed(d, sd, alpha=alpha, power=power)
    assert "\n" not in str(e.value)


def test_the_spread_of_per_seed_values_paired_and_not():
    rows = [
        {"g": g, "seed": s, "y": base + s + (0.5 if g == "b" else 0.0) + (0.1 * s if g == "b" else 0)}
        for g, base in (("a", 0.0), ("b", 1.0))
        for s in range(4)
    ]
    unpaired = pw.outcome_sd(rows, "y", by=["g"])
    paired = pw.outcome_sd(rows, "y", by=["g"], paired=True)
    assert unpaired["df"] == 6 and paired["df"] == 3
    assert paired["sd"] == pytest.approx(np.std([-(1.5 + 0.1 * s) for s in range(4)], ddof=1))
    assert paired["sd"] < unpaired["sd"]  # the seed's share of the spread cancels in the differences
    with pytest.raises(pw.PowerError):
        pw.outcome_sd([{"g": "a", "seed": 0, "y": 1.0}], "y", by=["g"])
