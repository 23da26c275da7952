"""The Diner's Dilemma figures say what their bands and dotted lines are and count iterations in
whole numbers (issue 31, item 4)."""

import matplotlib.pyplot as plt
import pytest

from cooplab.tasks.diners.figures import PK_ORDER, combination_figure_of, rule_experiment, run_figure_of, share_stats


@pytest.fixture(scope="module")
def counts():
    return rule_experiment(replicates=3, seed=0, iterations=4)


def _legend_texts(ax) -> list[str]:
    return [t.get_text() for t in ax.get_legend().get_texts()]


def _integer_x(ax) -> bool:
    lo, hi = ax.get_xlim()
    return all(float(x).is_integer() for x in ax.get_xticks() if lo <= x <= hi)


def test_combination_figure_names_bands_and_percentile_lines(counts):
    fig = combination_figure_of(share_stats(counts, ["combination", "pk"]), 1, "combination 1")
    try:
        texts = _legend_texts(fig.axes[-1])
        assert "band: mean ± 1 s.d. over replicates" in texts
        assert "dotted: 5th and 95th percentiles over replicates" in texts
        assert any(t.startswith("P (") for t in texts)
        assert all(_integer_x(ax) for ax in fig.axes)
    finally:
        plt.close(fig)


def test_run_figure_of_one_replicate_has_no_band_entry(counts):
    one = counts[(counts["condition"] == 0)]
    many = run_figure_of(one, {"agents": 8, "pk": PK_ORDER[0], "replicates": 3})
    single = run_figure_of(
        one[one["replicate"] == one["replicate"].min()], {"agents": 8, "pk": PK_ORDER[0], "replicates": 1}
    )
    try:
        assert "band: mean ± 1 s.d. over replicates" in _legend_texts(many.axes[0])
        assert not any(t.startswith("band") for t in _legend_texts(single.axes[0]))
        assert single.axes[0].get_title().endswith("1 replicate") and "nan" not in single.axes[0].get_title()
        assert _integer_x(many.axes[0]) and _integer_x(single.axes[0])
    finally:
        plt.close(many)
        plt.close(single)
