"""A sweep over mixes: the games' and the diners' ``analyze_sweep`` put every cell's per-model rows,
cross-play and invasion side by side, labelled by cell; a sweep with no mixed cell gets nothing."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from cooplab.runs import registry


def _cell(root, name, summary, labels):
    d = root / name
    d.mkdir(parents=True)
    (d / "summary.json").write_text(json.dumps(summary))
    return {"dir": str(d), "labels": labels}


@pytest.mark.parametrize("task", ["game", "diners"])
def test_mixed_cells_are_tabled_side_by_side(tmp_path, task):
    cells = [
        _cell(
            tmp_path,
            "c0",
            {
                "by_model": [{"model": "a", "payoff": 1.5}, {"model": "b", "payoff": 0.5}],
                "crossplay": [{"row": "a", "col": "b", "value": 2}],
                "invasion": {"kind": "defector", "drop": 0.4, "residents_metric_by_round": [1, 2]},
            },
            {"model_mix": {"a": 2, "b": 2}},
        ),
        _cell(tmp_path, "c1", {"by_model": [{"model": "a", "payoff": 1.0}]}, {"model_mix": {"a": 4}}),
        _cell(tmp_path, "c2", {"status": "completed"}, {}),  # not mixed: no row
        {"dir": str(tmp_path / "gone"), "labels": {}},  # a cell whose summary is missing is passed over
    ]
    out = registry.get(task).analyze_sweep(cells, tmp_path)
    assert out is not None and out["analysis_dir"] == str(tmp_path / "analysis")
    by_model = pd.read_csv(out["mix_tables"]["by_model"])
    assert list(by_model.cell) == ["c0", "c0", "c1"] and list(by_model.payoff) == [1.5, 0.5, 1.0]
    assert json.loads(by_model.model_mix[0]) == {"a": 2, "b": 2}
    assert len(pd.read_csv(out["mix_tables"]["crossplay"])) == 1
    inv = pd.read_csv(out["mix_tables"]["invasion"])
    assert list(inv.cell) == ["c0"] and "residents_metric_by_round" not in inv.columns


@pytest.mark.parametrize("task", ["game", "diners"])
def test_a_sweep_without_a_mix_gets_no_tables(tmp_path, task):
    cells = [_cell(tmp_path, "c0", {"status": "completed"}, {"seed": 1})]
    assert registry.get(task).analyze_sweep(cells, tmp_path, analysis_out=tmp_path / "a") is None
    assert not (tmp_path / "a").exists()
