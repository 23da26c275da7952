"""The figures of ``cooplab analyze cpr`` name models by their names, count rounds in whole
numbers and say what every bar, line, band and marker is (issue 31, item 4)."""

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from cooplab.evals.typed import as_frame
from cooplab.tasks.cpr.analysis import ablation_figure, efficiency_figure, model_label, norms_figure, survival_figure

from ._support import legend_texts


@pytest.mark.parametrize(
    "spec,name",
    [
        ("scripted:/home/me/runs/examples/scripted/cautious.json", "cautious (scripted)"),
        ("openai:gpt-4o-mini", "gpt-4o-mini"),
        ("local", "SmolLM2-135M-Instruct"),
        ("builtin:oracle", "oracle (built-in)"),
    ],
)
def test_models_go_by_their_names_not_their_files(spec, name):
    assert model_label({"llm": {"model": spec}}) == name
    assert model_label({"llm": {"model": spec, "agent_models": {"1": "local"}}}) == name + " (+per-agent)"
    assert model_label({}) == "rule-based"


def _societies() -> pd.DataFrame:
    rng = np.random.default_rng(1)
    rows = []
    for model in ("gpt-4o-mini", "cautious (scripted)"):
        for pop in ("altruistic", "selfish"):
            for abl in ("full", "osl"):
                for s in range(3):
                    rows.append(
                        {
                            "run": 0,
                            "model": model,
                            "population": pop,
                            "env": "harsh",
                            "ablation": abl,
                            "society": s,
                            "survival_time": int(rng.integers(2, 9)),
                        }
                    )
    return pd.DataFrame(rows)


def _caption(fig) -> str:
    """The caption as one line (it is wrapped to the figure's width)."""
    return fig.get_supxlabel().replace("\n", " ")  # "" when the figure has none


def _integer_ticks(axis, lim) -> bool:
    return all(float(x).is_integer() for x in axis.get_ticklocs() if lim[0] <= x <= lim[1])


def test_survival_bars_name_models_and_say_what_the_error_bars_are():
    soc = _societies()
    fig = survival_figure(
        as_frame(soc[soc.ablation == "full"]), "harsh", {"gpt-4o-mini": "a", "cautious (scripted)": "b"}
    )
    try:
        ax = fig.axes[0]
        assert [t.get_text() for t in ax.get_xticklabels()] == ["cautious (scripted)", "gpt-4o-mini"]
        assert legend_texts(ax) == ["altruistic", "selfish"]
        cap = _caption(fig)
        assert "±1 s.e.m. over those societies (n = 3 societies per bar)" in cap and "Tukey HSD" in cap
        assert _integer_ticks(ax.yaxis, ax.get_ylim())
    finally:
        plt.close(fig)
    fig = ablation_figure(soc)
    try:
        assert "±1 s.e.m." in _caption(fig) and "OSL: only social learning" in _caption(fig)
        assert fig.axes[0].get_legend() is not None
    finally:
        plt.close(fig)


def test_efficiency_lines_bands_and_reference_have_legend_entries():
    rows = [
        {
            "model": m,
            "env": "harsh",
            "ablation": "full",
            "replicate": s,
            "round": t,
            "eta_t": max(0.0, 0.05 + 0.3 * s - 0.01 * t),
        }
        for m in ("gpt-4o-mini", "SmolLM2-135M-Instruct")
        for s in range(3)
        for t in range(1, 8)
    ]
    fig = efficiency_figure(pd.DataFrame(rows))
    try:
        ax = fig.axes[0]
        texts = legend_texts(ax)
        assert {"gpt-4o-mini", "SmolLM2-135M-Instruct"} <= set(texts)
        assert "95% CI over running societies" in texts and any(t.startswith("eta = 1") for t in texts)
        assert "95% confidence intervals" in _caption(fig)
        assert _integer_ticks(ax.xaxis, ax.get_xlim())
        for band in ax.collections:  # efficiency is never negative: neither is its band
            ys = np.concatenate([np.asarray(p.vertices)[:, 1] for p in band.get_paths()])
            assert ys.min() >= 0
    finally:
        plt.close(fig)


def test_norm_similarity_points_are_explained():
    norms = pd.DataFrame(
        [
            {
                "run": r,
                "society": 0,
                "round": t,
                "model": "gpt-4o-mini",
                "population": "mixed",
                "S_ind": 0.5 + 0.1 * r,
                "S_align": 0.7,
            }
            for r in range(2)
            for t in (1, 2)
        ]
    )
    fig = norms_figure(norms)
    try:
        assert legend_texts(fig.axes[0]) == ["gpt-4o-mini / mixed"]
        assert "Each point: one society at its last round" in _caption(fig)
    finally:
        plt.close(fig)
