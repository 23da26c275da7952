"""A science rerun answered from the response cache copies its budget figure from that cache
(tasks/science/report.py, evals/figcache.py): the same charges give the same picture, so it is not
drawn again; anything the figure shows changes its key."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from cooplab.evals import canvas
from cooplab.tasks.science import report
from tests.helpers.figures import check_a_rerun_copies_its_figure


def _run(out: Path, cache: str, monkeypatch) -> list:
    """A small scripted science run (the oracle team); the figures drawn on a canvas meanwhile."""
    import cooplab
    from cooplab.agents.models.scripted import register_builtin
    from cooplab.tasks.science.scripted import oracle_model

    register_builtin("test-budget-oracle", oracle_model)
    drawn: list = []
    real = canvas.subplots
    monkeypatch.setattr(canvas, "subplots", lambda *a, **k: drawn.append(1) or real(*a, **k))
    run = cooplab.run(
        task="science",
        model="builtin:test-budget-oracle:ecology",
        set=["data_size=small", "plan_steps=1", "max_steps=2", "synthesis_steps=1", "deliberation_rounds=0"],
        team_size=1,
        sandbox_backend="local",
        quiet=True,
        cache=cache,
        out=out,
    )
    assert run.status == "completed"
    return drawn


def test_a_rerun_from_the_cache_copies_the_budget_figure_and_without_a_cache_draws_it(tmp_path, monkeypatch):
    check_a_rerun_copies_its_figure(tmp_path, lambda out, cache: _run(out, cache, monkeypatch), "budget.png")
    # the page embeds the copied figure like a drawn one
    assert "figures/budget.png" in (tmp_path / "rerun" / "report.html").read_text()


def _ledger() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "team": ["data", "model", "data", "eval"],
            "cost_usd": [0.001, 0.002, 0.0005, 0.003],
            "created": ["t1", "t2", "t3", "t4"],
            "kind": ["llm"] * 4,
        }
    )


def test_the_budget_key_covers_the_charges_and_the_budget_and_nothing_else():
    lg = _ledger()
    key = report._budget_key(lg, 1.0)
    assert key is not None
    other_times = lg.assign(created=["u1", "u2", "u3", "u4"], kind="cached")  # not drawn
    assert report._budget_key(other_times, 1.0) == key
    cost = lg.copy()
    cost.loc[2, "cost_usd"] = 0.00050000001
    assert report._budget_key(cost, 1.0) != key
    team = lg.copy()
    team.loc[0, "team"] = "eval"
    assert report._budget_key(team, 1.0) != key
    assert report._budget_key(lg, 2.0) != key and report._budget_key(lg, None) != key
    assert report._budget_key(lg.iloc[[1, 0, 2, 3]].reset_index(drop=True), 1.0) != key  # the order is drawn


def test_a_ledger_without_the_columns_drawn_gives_no_figure(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "config.json").write_text("{}")
    pd.DataFrame({"kind": ["llm"], "amount": [1.0]}).to_parquet(out / "ledger.parquet")
    assert report.budget_figure(out, out / "figures" / "budget.png") is None
    _ledger().to_parquet(out / "ledger.parquet")  # the same folder with the columns: drawn
    assert report.budget_figure(out, out / "figures" / "budget.png") == out / "figures" / "budget.png"
