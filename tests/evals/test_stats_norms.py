"""The paper's statistics and norm-similarity measures on small data with known answers."""

import math

import numpy as np
import pandas as pd
import pytest

from cooplab.evals import stats
from cooplab.evals.typed import tuples
from cooplab.tasks.cpr.norms import s_align, s_ind


def test_welch_matches_the_hand_formula():
    a = np.array([3.0, 5.0, 7.0, 9.0])  # mean 6, var 20/3
    b = np.array([1.0, 2.0, 3.0])  # mean 2, var 1
    va, vb = (20 / 3) / 4, 1 / 3
    t = (6 - 2) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / 3 + vb**2 / 2)
    r = stats.welch(a, b)
    assert r["t"] == pytest.approx(t) and r["df"] == pytest.approx(df)
    assert 0 < r["p"] < 0.1 and r["mean_a"] == 6 and r["n_b"] == 3


def test_two_way_anova_balanced_design_by_hand():
    # 2 x 2 design, 2 observations per cell
    y = {("m1", "alt"): [10, 12], ("m1", "sel"): [6, 8], ("m2", "alt"): [9, 11], ("m2", "sel"): [1, 3]}
    rows = [{"model": m, "population": p, "T": v} for (m, p), vs in y.items() for v in vs]
    df = pd.DataFrame(rows)
    grand = df["T"].mean()  # 7.5
    ss_a = sum(4 * (df[df.model == m]["T"].mean() - grand) ** 2 for m in ("m1", "m2"))  # means 9, 6 -> 18
    ss_b = sum(4 * (df[df.population == p]["T"].mean() - grand) ** 2 for p in ("alt", "sel"))  # means 10.5, 4.5 -> 72
    cell = {k: np.mean(v) for k, v in y.items()}
    ss_cells = sum(2 * (m - grand) ** 2 for m in cell.values())
    ss_ab = ss_cells - ss_a - ss_b  # 8
    ss_e = sum((v - cell[k]) ** 2 for k, vs in y.items() for v in vs)  # 8
    ss_t = ((df["T"] - grand) ** 2).sum()
    assert (ss_a, ss_b, ss_ab, ss_e) == (18, 72, 8, 8)
    table = stats.two_way_anova(df, "T", "model", "population")
    assert table.loc["model", "sum_sq"] == pytest.approx(ss_a)
    assert table.loc["population", "sum_sq"] == pytest.approx(ss_b)
    assert table.loc["model x population", "sum_sq"] == pytest.approx(ss_ab)
    assert table.loc["Residual", "sum_sq"] == pytest.approx(ss_e)
    assert table.loc["model", "F"] == pytest.approx((ss_a / 1) / (ss_e / 4))  # F = 9
    assert table.loc["population", "eta_sq"] == pytest.approx(ss_b / ss_t)
    assert table.loc["model", "df"] == 1 and table.loc["Residual", "df"] == 4
    md = stats.anova_markdown(table, "t")
    assert "| model | 1 | 9.00 |" in md


def test_compact_letter_display_known_cases():
    # only A-C differ: A and B share a letter, B and C share another
    assert stats.compact_letters(["A", "B", "C"], {frozenset(("A", "C"))}) == {"A": "a", "B": "ab", "C": "b"}
    # nothing differs: one letter for all
    assert stats.compact_letters(["A", "B", "C"], set()) == {"A": "a", "B": "a", "C": "a"}
    # everything differs: three letters
    allp = {frozenset(p) for p in (("A", "B"), ("A", "C"), ("B", "C"))}
    assert stats.compact_letters(["A", "B", "C"], allp) == {"A": "a", "B": "b", "C": "c"}


def test_tukey_and_letters_on_separated_groups():
    rng = np.random.default_rng(0)
    df = pd.DataFrame(
        {
            "model": ["big"] * 30 + ["mid"] * 30 + ["mid2"] * 30,
            "T": np.r_[rng.normal(40, 1, 30), rng.normal(20, 1, 30), rng.normal(20.1, 1, 30)],
        }
    )
    t = stats.tukey_hsd(df, "T", "model")
    sig = {frozenset((r.group1, r.group2)): bool(r.reject) for r in tuples(t)}
    assert sig[frozenset(("big", "mid"))] and not sig[frozenset(("mid", "mid2"))]
    letters = stats.cld_from_tukey(df, "T", "model")
    assert letters["big"] == "a" and letters["mid"] == letters["mid2"] == "b"


def test_norm_similarity_on_hand_vectors():
    n = np.array([[1.0, 0.0], [0.0, 1.0]])
    assert s_ind(n) == pytest.approx(0.0)
    assert s_align(n) == pytest.approx(1 / math.sqrt(2))
    same = np.array([[0.6, 0.8]] * 3)
    assert s_ind(same) == pytest.approx(1.0) and s_align(same) == pytest.approx(1.0)
    three = np.array([[1.0, 0, 0], [0, 1.0, 0], [1.0, 0, 0]])
    assert s_ind(three) == pytest.approx((0 + 1 + 0) / 3)
    assert math.isnan(s_ind(three[:1]))


@pytest.mark.integration
def test_real_embedding_model_ranks_paraphrases_above_unrelated_text():
    from cooplab.tasks.cpr.norms import embed

    v = embed(
        [
            "Preserve the lake for future generations.",
            "Keep the lake healthy for our grandchildren.",
            "Maximize your catch while the fish are abundant.",
        ]
    )
    assert v.shape == (3, 384)
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0)
    assert v[0] @ v[1] > v[0] @ v[2]


# --- what the data cannot support: one line saying why, never numbers from rounding noise --------
def _design(values):
    """A 2 x 2 design with two societies per cell holding ``values`` in order."""
    cells = [(m, p) for m in ("m1", "m2") for p in ("altruistic", "selfish") for _ in range(2)]
    return pd.DataFrame({"model": [m for m, _ in cells], "population": [p for _, p in cells], "survival_time": values})


@pytest.mark.parametrize(
    "values, why",
    [
        ([3.0] * 8, "every survival_time value is 3"),
        ([3.0 + k * 1e-15 for k in range(8)], "every survival_time value is 3"),  # rounding noise only
        ([1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 4.0, 4.0], "does not vary within any"),  # cells differ, nothing within them
    ],
)
def test_anova_and_tukey_refuse_data_without_error_variance(values, why):
    df = _design(values)
    with pytest.raises(stats.NotEstimable, match=why):
        stats.two_way_anova(df, "survival_time", "model", "population")
    if "within" not in why:
        with pytest.raises(stats.NotEstimable, match=why):
            stats.tukey_hsd(df, "survival_time", "model")


def test_anova_refuses_unreplicated_or_one_level_designs():
    one_each = _design([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]).drop_duplicates(["model", "population"])
    with pytest.raises(stats.NotEstimable, match="no model x population cell has a replicate"):
        stats.two_way_anova(one_each, "survival_time", "model", "population")
    one_model = _design([1.0, 2.0, 3.0, 5.0, 1.0, 2.0, 3.0, 5.0]).assign(model="m1")
    with pytest.raises(stats.NotEstimable, match="at least two levels of model"):
        stats.two_way_anova(one_model, "survival_time", "model", "population")
    with pytest.raises(stats.NotEstimable, match="survival_time: missing or infinite"):
        stats.two_way_anova(
            _design([1.0, 2.0, np.nan, 5.0, 1.0, 2.0, 3.0, 5.0]), "survival_time", "model", "population"
        )


def test_anova_still_estimates_real_variance():
    table = stats.two_way_anova(
        _design([1.0, 2.0, 2.0, 4.0, 3.0, 3.5, 6.0, 9.0]), "survival_time", "model", "population"
    )
    assert np.isfinite(table.loc["model", "F"]) and 0 <= table.loc["model", "p"] <= 1


def test_welch_refuses_single_values_and_two_constant_groups():
    with pytest.raises(stats.NotEstimable, match=r"n = 1 and 3"):
        stats.welch([1.0], [1.0, 2.0, 3.0])
    with pytest.raises(stats.NotEstimable, match="both groups are constant"):
        stats.welch([3.0, 3.0], [3.0, 3.0, 3.0])
    one_constant = stats.welch([3.0, 3.0, 3.0], [1.0, 2.0, 4.0])  # one constant group is still a test
    assert np.isfinite(one_constant["t"]) and np.isfinite(one_constant["df"])


def test_collect_warnings_turns_each_distinct_warning_into_one_line():
    import warnings

    notes: list[str] = []
    with stats.collect_warnings(notes, "harsh ANOVA"):
        for _ in range(3):
            warnings.warn("precision loss\n  in moments", RuntimeWarning, stacklevel=1)
        warnings.warn("another", UserWarning, stacklevel=1)
    assert notes == [
        "harsh ANOVA: RuntimeWarning from test_stats_norms.py: precision loss in moments",
        "harsh ANOVA: UserWarning from test_stats_norms.py: another",
    ]
