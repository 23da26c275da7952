"""The CPR run figure says what every line and band is, keeps shares in [0, 1] and counts rounds
in whole numbers; an LLM run's shows each agent's effort and the adopted norm (issue 31, item 4)."""

import json
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from cooplab.tasks.cpr.figures import agent_efforts, run_figure_of
from tests.helpers.figures import check_a_rerun_copies_its_figure

from ._support import legend_texts


def _rounds(n_soc: int) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for s in range(n_soc):
        for t in range(1, 6):  # compliance near 1 with a wide spread: an unclipped band would pass 1
            rows.append(
                {
                    "replicate": s,
                    "round": t,
                    "R": 1000 - 150 * t + rng.normal(0, 30),
                    "mean_effort": 0.2 + 0.05 * t,
                    "G": 12.0 + rng.normal(0, 2),
                    "compliance": float(rng.choice([0.6, 1.0])),
                }
            )
    return pd.DataFrame(rows)


def _summary(n_soc: int) -> dict:
    vals = [5.0 - (k % 2) for k in range(n_soc)]
    return {
        "env": "harsh",
        "population": "mixed",
        "ablation": "full",
        "survival_time": {
            "values": vals,
            "mean": float(np.mean(vals)),
            "sem": float("nan") if n_soc == 1 else 0.1,
            "n": n_soc,
        },
        "efficiency": {"mean": 0.8, "sem": float("nan") if n_soc == 1 else 0.01},
    }


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
        assert any("group norm" in t for t in legend_texts(effort))
        share_panels = [ax for ax in panels if ax.get_ylabel() in ("share of societies", "share of agents")]
        assert len(share_panels) == 2
        for ax in share_panels:
            for band in ax.collections:
                ys = np.concatenate([np.asarray(p.vertices)[:, 1] for p in band.get_paths()])
                assert ys.min() >= 0 and ys.max() <= 1, (ax.get_title(), ys.min(), ys.max())
        assert "nan" not in fig.get_suptitle()
        assert "95% confidence" in fig.get_supxlabel()
    finally:
        plt.close(fig)


def _decisions() -> pd.DataFrame:
    rows = [
        {
            "society": 0,
            "agent": a,
            "round": t,
            "phase": "harvest",
            "parsed": json.dumps({"effort": 0.1 * (a + 1) + 0.01 * t}),
        }
        for a in range(3)
        for t in range(1, 6)
    ]
    rows += [
        {"society": 0, "agent": 0, "round": 6, "phase": "harvest", "parsed": "{not json"},  # malformed: left out
        {"society": 0, "agent": 1, "round": 6, "phase": "harvest", "parsed": json.dumps({"effort": float("inf")})},
        {"society": 0, "agent": 2, "round": 6, "phase": "harvest", "parsed": None},
        {"society": 0, "agent": 0, "round": 1, "phase": "vote", "parsed": json.dumps({"vote": 1})},
    ]
    return pd.DataFrame(rows)


def test_the_llm_run_figure_shows_each_agents_effort_and_the_adopted_norm():
    long_norm = "Nobody catches more than ten tonnes a round, " * 12
    norms = pd.DataFrame(
        [
            {"society": 0, "round": 1, "norm": "Fish lightly."},
            {"society": 0, "round": 2, "norm": "Fish lightly."},
            {"society": 0, "round": 3, "norm": long_norm},
        ]
    )
    efforts = agent_efforts(_decisions())
    assert len(efforts) == 15 and efforts["effort"].between(0, 1).all()
    fig = run_figure_of(_rounds(1), _summary(1), efforts=efforts, norms=norms)
    try:
        effort = next(ax for ax in fig.axes if ax.get_title() == "Effort per agent")
        assert legend_texts(effort) == ["Fisher 1", "Fisher 2", "Fisher 3"]
        assert [len(np.asarray(line.get_xdata())) for line in effort.get_lines()] == [5, 5, 5]
        ticks = [x for x in effort.get_xticks() if effort.get_xlim()[0] <= x <= effort.get_xlim()[1]]
        assert all(float(x).is_integer() for x in ticks)
        panel = next(ax for ax in fig.axes if ax.get_title() == "Adopted group norm")
        text = panel.texts[0].get_text()
        lines = text.splitlines()
        assert lines[0].startswith("from round 1:") and "Fish lightly." in lines[0]
        assert sum("from round" in line for line in lines) == 2  # round 2 kept the same norm: no new entry
        assert text.rstrip().endswith("\u2026\u201d") and max(len(line) for line in lines) <= 70
        assert len(text.replace("\n", " ")) < len(long_norm)  # cut, and the cut is marked
    finally:
        plt.close(fig)


def test_without_an_adopted_norm_the_panel_says_so():
    fig = run_figure_of(_rounds(1), _summary(1), efforts=agent_efforts(pd.DataFrame()), norms=None)
    try:
        panel = next(ax for ax in fig.axes if ax.get_title() == "Adopted group norm")
        assert panel.texts[0].get_text() == "No norm was adopted."
        effort = next(ax for ax in fig.axes if ax.get_title() == "Effort per agent")
        assert effort.texts[0].get_text() == "No harvest decision was recorded."
    finally:
        plt.close(fig)


def test_a_scripted_llm_run_draws_its_figure(tmp_path):
    from cooplab.cli import main

    script = Path(__file__).resolve().parents[2] / "examples" / "scripted" / "cautious.json"
    out = tmp_path / "llm"
    assert (
        main(
            [
                "run",
                "cpr",
                "--agents",
                "llm",
                "--model",
                f"scripted:{script}",
                "--n-agents",
                "3",
                "--rounds",
                "3",
                "--out",
                str(out),
                "-q",
            ]
        )
        == 0
    )
    summary = json.loads((out / "summary.json").read_text())
    assert "figure_error" not in summary and (out / "figures" / "run.png").stat().st_size > 10_000


def test_fig2_names_line_styles_bands_and_the_switch_off_line():
    from cooplab.tasks.cpr.figures import fig2_of

    rows_s, rows_t = [], []
    for beta in (10.0, 14.0):
        for off in (False, True):
            for t in range(0, 21):
                rows_s.append(
                    {"beta": beta, "punishment_off": off, "round": t, "share": 1.0 - 0.03 * t * off, "ci95": 0.2}
                )
                for metric, mean in (("R", 900.0 - 10 * t), ("compliance", 0.95)):
                    rows_t.append(
                        {"metric": metric, "beta": beta, "punishment_off": off, "round": t, "mean": mean, "ci95": 0.2}
                    )
    fig = fig2_of(pd.DataFrame(rows_t), pd.DataFrame(rows_s), 15)
    try:
        texts = legend_texts(fig.axes[0])
        assert "beta = 10, off at t = 15" in texts and "beta = 14, always on" in texts
        assert "95% CI over societies" in texts and "t = 15: punishment switched off" in texts
        for ax in fig.axes:
            ticks = [x for x in ax.get_xticks() if ax.get_xlim()[0] <= x <= ax.get_xlim()[1]]
            assert all(float(x).is_integer() for x in ticks)
        for ax in (fig.axes[0], fig.axes[2]):  # shares: bands stay in [0, 1]
            for band in ax.collections:
                ys = np.concatenate([np.asarray(p.vertices)[:, 1] for p in band.get_paths()])
                assert 0 <= ys.min() and ys.max() <= 1
    finally:
        plt.close(fig)


def _llm_run(out: Path, cache: str, monkeypatch) -> list:
    """A small scripted CPR LLM run into ``out``; the figures it drew (run_figure_of calls)."""
    import cooplab
    from cooplab.tasks.cpr import figures

    drawn = []
    real = figures.run_figure_of
    monkeypatch.setattr(figures, "run_figure_of", lambda *a, **k: drawn.append(1) or real(*a, **k))
    script = Path(__file__).resolve().parents[2] / "examples" / "scripted" / "cautious.json"
    run = cooplab.run(
        task="cpr",
        agents="llm",
        model=f"scripted:{script}",
        n_agents=3,
        rounds=2,
        seed=3,
        quiet=True,
        cache=cache,
        out=out,
    )
    assert run.status == "completed" and run.summary.figure_error is None
    return drawn


def test_a_rerun_answered_from_the_cache_copies_its_figure_instead_of_drawing_it(tmp_path, monkeypatch):
    # issue 41.3: drawing the figure was half of a cached rerun's time; the rerun's tables are the
    # first run's, bit for bit, so its figure is the same picture
    check_a_rerun_copies_its_figure(tmp_path, lambda out, cache: _llm_run(out, cache, monkeypatch), "run.png")


def test_the_figure_key_covers_what_is_drawn_and_nothing_else():
    from cooplab.tasks.cpr.figures import run_figure_key

    rounds, summary = _rounds(2), _summary(2)
    key = run_figure_key(rounds, summary)
    assert run_figure_key(rounds.copy(), {**summary, "wall_seconds": 12.5, "ledger": {"calls": 3}}) == key  # not drawn
    changed = rounds.copy()
    changed.loc[3, "R"] = np.nextafter(changed.loc[3, "R"], np.inf)  # one value, one ulp
    assert run_figure_key(changed, summary) != key
    assert run_figure_key(rounds, {**summary, "env": "mild"}) != key
    assert run_figure_key(rounds, summary, norms=pd.DataFrame({"round": [1], "norm_text": ["x"]})) != key


@pytest.mark.parametrize(
    "stored", [b"not a png", "\x89PNG text, not bytes", b"\x89PNG\r\n\x1a\n" + b"0" * (16 * 1024 * 1024)]
)
def test_a_figure_in_the_cache_that_is_not_a_png_is_no_answer(tmp_path, stored):
    # the cache file is data from anywhere: a row that is not a PNG of a sane size is never copied
    from cooplab.agents.cache import ResponseCache

    cache = ResponseCache(tmp_path / "cache.sqlite")
    try:
        assert cache._db is not None  # a cache with a file
        cache._db.execute("INSERT INTO figures (key, png) VALUES (?, ?)", ("k", stored))
        assert cache.get_figure("k") is None
        cache.put_figure("k2", stored if isinstance(stored, bytes) else stored.encode())
        assert cache.get_figure("k2") is None
    finally:
        cache.close()


def test_a_bad_figure_in_the_cache_is_drawn_again_and_replaced(tmp_path):
    from cooplab.agents.cache import ResponseCache
    from cooplab.tasks.cpr.figures import run_figure, run_figure_key

    rounds, summary = _rounds(1), _summary(1)
    cache = ResponseCache(tmp_path / "cache.sqlite")
    try:
        key = run_figure_key(rounds, summary)
        assert key is not None and cache._db is not None
        cache._db.execute("INSERT INTO figures (key, png) VALUES (?, ?)", (key, b"not a png"))
        png = run_figure(rounds, summary, tmp_path / "figs", cache=cache).read_bytes()
        assert png.startswith(b"\x89PNG") and cache.get_figure(key) == png
    finally:
        cache.close()


def test_a_cache_whose_figures_name_is_taken_still_runs_and_draws(tmp_path):
    import sqlite3

    from cooplab.agents.cache import ResponseCache
    from cooplab.tasks.cpr.figures import run_figure

    path = tmp_path / "cache.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE t (x)")
    db.execute("CREATE INDEX figures ON t (x)")  # a foreign file: the table's name is an index's
    db.commit()
    db.close()
    cache = ResponseCache(path)
    try:
        png = run_figure(_rounds(1), _summary(1), tmp_path / "figs", cache=cache).read_bytes()
        assert png.startswith(b"\x89PNG") and cache.get_figure("any") is None
    finally:
        cache.close()
