"""The CPR run figure says what every line and band is, keeps shares in [0, 1] and counts rounds
in whole numbers (issue 31, item 4)."""

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from cooplab.tasks.cpr.figures import run_figure_of


def _rounds(n_soc: int) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for s in range(n_soc):
        for t in range(1, 6):  # compliance near 1 with a wide spread: an unclipped band would pass 1
            rows.append({"replicate": s, "round": t, "R": 1000 - 150 * t + rng.normal(0, 30), "mean_effort": 0.2 + 0.05 * t,
                         "G": 12.0 + rng.normal(0, 2), "compliance": float(rng.choice([0.6, 1.0]))})
    return pd.DataFrame(rows)


def _summary(n_soc: int) -> dict:
    vals = [5.0 - (k % 2) for k in range(n_soc)]
    return {"env": "harsh", "population": "mixed", "ablation": "full",
            "survival_time": {"values": vals, "mean": float(np.mean(vals)), "sem": float("nan") if n_soc == 1 else 0.1, "n": n_soc},
            "efficiency": {"mean": 0.8, "sem": float("nan") if n_soc == 1 else 0.01}}


@pytest.mark.parametrize("n_soc", [1, 6])
def test_every_panel_names_its_lines_and_bands(n_soc):
    fig = run_figure_of(_rounds(n_soc), _summary(n_soc))
    try:
        panels = [ax for ax in fig.axes if ax.get_title()]
        assert len(panels) == 4
        for ax in panels:
            legend = ax.get_legend()
            assert legend is not None, ax.get_title()
            texts = [t.get_text() for t in legend.get_texts()]
            assert any(("95% CI" in t) if n_soc > 1 else ("no interval" in t) for t in texts), texts
            assert ax.get_ylabel(), ax.get_title()  # the twin-axis panel keeps its left label
            ticks = [x for x in ax.get_xticks() if ax.get_xlim()[0] <= x <= ax.get_xlim()[1]]
            assert all(float(x).is_integer() for x in ticks), ticks
        effort = next(ax for ax in panels if ax.get_title().startswith("Mean effort"))
        assert any("group norm" in t.get_text() for t in effort.get_legend().get_texts())
        share_panels = [ax for ax in panels if ax.get_ylabel() in ("share of societies", "share of agents")]
        assert len(share_panels) == 2
        for ax in share_panels:
            for band in ax.collections:
                ys = np.concatenate([p.vertices[:, 1] for p in band.get_paths()])
                assert ys.min() >= 0 and ys.max() <= 1, (ax.get_title(), ys.min(), ys.max())
        assert "nan" not in fig.get_suptitle()
        assert "95% confidence" in fig._supxlabel.get_text()
    finally:
        plt.close(fig)
