"""The calibration's sensitivity figure says what its bars, error bars and zero line are (issue 31, item 4)."""

import matplotlib.pyplot as plt
import pandas as pd

from cooplab.evals.plots_calibration import sensitivity_figure_of


def test_the_sensitivity_figure_has_a_caption():
    sens = pd.DataFrame(
        [
            {"output": o, "parameter": p, "S1": s, "S1_conf": 0.05, "note": None}
            for o in ("T_s", "eta")
            for p, s in (("beta", 0.4), ("r", 0.1))
        ]
    )
    fig = sensitivity_figure_of(sens)
    try:
        caption = fig.get_supxlabel().replace("\n", " ")
        assert "error bars: the 95% confidence half-width of S1" in caption and "S1 = 0" in caption
        assert [ax.get_title() for ax in fig.axes if ax.get_title()] == ["T_s", "eta"]
    finally:
        plt.close(fig)
