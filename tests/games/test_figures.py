"""The games' figures give every line, band and shaded range a legend entry and count rounds and
simulations in whole numbers (issue 31, item 4)."""

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from cooplab.evals.typed import as_frame, as_series
from cooplab.tasks.games.figures import profile_figure_of, run_figure_of
from cooplab.tasks.games.metrics import bootstrap_convergence


def _texts(ax) -> list[str]:
    return [t.get_text() for t in ax.get_legend().get_texts()]


def _integer_x(ax) -> bool:
    lo, hi = ax.get_xlim()
    return all(float(x).is_integer() for x in ax.get_xticks() if lo <= x <= hi)


def _summary(simulations: int) -> dict:
    return {
        "game": "public-goods",
        "players": "nash",
        "group_sizes": [5, 5],
        "simulations": simulations,
        "metric": {"nash": 0.0, "pareto": 10.0, "pareto_basis": "derived"},
    }


def test_run_figure_names_the_band_and_the_convergence_lines():
    rng = np.random.default_rng(0)
    rounds = pd.DataFrame(
        [{"round": t, "simulation": s, "metric": float(rng.uniform(0, 10))} for t in (1, 2, 3) for s in range(6)]
    )
    cv = bootstrap_convergence(as_series(rounds.groupby("simulation")["metric"].mean()).to_numpy(), rng=rng)
    fig = run_figure_of(rounds, cv, _summary(6))
    try:
        left, right = fig.axes
        assert {"95% CI over simulations", "Nash (0)", "Pareto (10)"} <= set(_texts(left))
        assert {"±1 s.d. over resamples", "95th percentile over resamples"} <= set(_texts(right))
        assert _integer_x(left) and _integer_x(right)
    finally:
        plt.close(fig)
    one = run_figure_of(as_frame(rounds[rounds["simulation"] == 0]), cv.iloc[:0], _summary(1))
    try:  # one simulation: no band, so no band entry
        assert "95% CI over simulations" not in _texts(one.axes[0])
    finally:
        plt.close(one)


def test_profile_figure_names_the_shaded_range_and_missing_games():
    entry = {"metric": {"mean": 4.0, "ci95": [3.0, 5.0], "nash": 0.0, "pareto": 10.0, "label": "contribution"}}
    profiles = [
        {"label": "a", "games": {"public-goods": entry, "o-ring": entry}},
        {"label": "b", "games": {"public-goods": entry}},
    ]
    fig = profile_figure_of(profiles)
    try:
        panel = next(ax for ax in fig.axes if ax.get_title() == "Public Goods")
        assert "between Nash and Pareto" in _texts(panel)
        assert any(t.get_text().startswith("grey x at 0") for t in fig.legends[0].get_texts())
        assert "95% CI" in fig.get_suptitle()
    finally:
        plt.close(fig)
