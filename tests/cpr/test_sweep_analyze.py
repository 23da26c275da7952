"""`cooplab sweep` and `cooplab analyze cpr` end to end with scripted models."""

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from cooplab.cli import main

ROOT = Path(__file__).resolve().parents[2]


def run(args, capsys):
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def grid(tmp_path):
    cfg = json.loads((ROOT / "examples" / "grid-scripted.json").read_text())
    cfg.update(out=str(tmp_path / "sweep"))
    cfg["fixed"].update(replicates=3, rounds=5, n_agents=3)
    cfg["grid"].update(
        env=["harsh"],
        ablation=["full", "osl"],
        population=["altruistic", "selfish"],
        model=[
            f"scripted:{ROOT / 'examples/scripted/cautious.json'}",
            f"scripted:{ROOT / 'examples/scripted/greedy.json'}",
        ],
    )
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(cfg))
    return path, cfg


def test_sweep_runs_all_cells_then_skips_them_and_feeds_analyze(grid, capsys, tmp_path):
    path, cfg = grid
    code, out, err = run(["sweep", str(path), "--json"], capsys)
    assert code == 0, err
    res = json.loads(out)
    assert res["cells"] == 2 * 1 * 2 * 2 and len(res["ran"]) == 8 and not res["failed"]
    a = res["analysis"]
    assert a["societies"] == 8 * 3
    adir = Path(res["analysis_dir"])
    for f in (
        "fig5_6_survival_harsh.png",
        "fig7_ablations.png",
        "fig14_norm_similarity.png",
        "fig15_efficiency.png",
        "welch_ablations.csv",
        "statistics.md",
        "cells.csv",
        "norm_similarity.csv",
    ):
        assert (adir / f).exists(), f
    # in 5 rounds every society survives: nothing varies, so the ANOVA is not estimable (said, not computed)
    assert "not estimable (every survival_time value is 5" in (adir / "statistics.md").read_text()
    # the same runs with survival times that vary (edited summaries): the ANOVA and Tukey tables
    varied = tmp_path / "varied"
    for k, d in enumerate(res["run_dirs"]):
        shutil.copytree(d, varied / Path(d).name)
        summ = json.loads((varied / Path(d).name / "summary.json").read_text())
        summ["survival_time"]["values"] = [5 - (k % 3), 4 - (k % 2), 2 + (k % 4)]
        (varied / Path(d).name / "summary.json").write_text(json.dumps(summ))
    code, _, err = run(["analyze", "cpr", *sorted(map(str, varied.iterdir())), "--out", str(tmp_path / "an2")], capsys)
    assert code == 0, err
    anova = pd.read_csv(tmp_path / "an2" / "anova_harsh.csv", index_col=0)
    assert {"model", "population", "model x population", "Residual"} <= set(anova.index)
    assert anova.loc["Residual", "df"] == 4 * 3 - 4  # 12 full-condition societies, 4 cells
    assert (tmp_path / "an2" / "tukey_harsh.csv").exists()
    sim = pd.read_csv(adir / "norm_similarity.csv")
    assert sim["S_ind"].between(-1 - 1e-6, 1 + 1e-6).all() and sim["S_align"].between(0, 1 + 1e-6).all()
    # a second sweep skips every finished cell
    code, out, _ = run(["sweep", str(path), "--json"], capsys)
    res2 = json.loads(out)
    assert len(res2["skipped"]) == 8 and not res2["ran"]
    # a deleted summary (an interrupted cell) is resumed, not restarted
    cell = Path(res["run_dirs"][0])
    (cell / "summary.json").unlink()
    code, out, _ = run(["sweep", str(path), "--json"], capsys)
    assert json.loads(out)["resumed"] == [cell.name]


def test_analyze_needs_finished_runs(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    code, _, err = run(["analyze", "cpr", str(tmp_path / "empty"), "--out", str(tmp_path / "a")], capsys)
    assert code == 2 and "not a finished cooplab run" in err and err.count("\n") == 1


@pytest.mark.parametrize(
    "content,needle",
    [
        ("{not json", "not valid JSON"),
        ('{"out": "x", "ablations": ["full", "most"]}', "ablations"),
        ('{"out": "x", "trials": 0}', "trials"),
        ('{"out": "x", "colour": "red"}', "colour"),
    ],
)
def test_bad_sweep_config_is_one_line(tmp_path, capsys, content, needle):
    p = tmp_path / "s.json"
    p.write_text(content)
    code, _, err = run(["sweep", str(p)], capsys)
    assert code == 2 and needle in err and err.count("\n") == 1


def test_analyze_on_constant_data_says_not_estimable_without_nan_or_warnings(tmp_path, capfd):
    """Two copies of one cautious script: every society survives to the round cap, so no test has
    any variance. The analysis must say so in words and exit 0: no F ratios of rounding noise, no
    NaN rows, no library warnings on the terminal (issue 31, item 3)."""
    for name in ("a", "b"):
        shutil.copy(ROOT / "examples/scripted/cautious.json", tmp_path / f"{name}.json")
    cfg = {
        "task": "cpr",
        "out": str(tmp_path / "sweep"),
        "seeds": [1, 2],
        "fixed": {"agents": "llm", "rounds": 3, "n_agents": 3, "cache": "off", "env": "harsh"},
        "grid": {
            "model": [f"scripted:{tmp_path / 'a.json'}", f"scripted:{tmp_path / 'b.json'}"],
            "population": ["altruistic", "selfish"],
            "ablation": ["full", "osl"],
        },
    }
    (tmp_path / "sweep.json").write_text(json.dumps(cfg))
    assert main(["sweep", str(tmp_path / "sweep.json"), "-q"]) == 0
    capfd.readouterr()
    runs = sorted(str(p.parent) for p in (tmp_path / "sweep").rglob("summary.json"))
    assert len(runs) == 16
    code = main(["analyze", "cpr", *runs, "--out", str(tmp_path / "an")])
    out, err = capfd.readouterr()
    text = out + err + (tmp_path / "an" / "statistics.md").read_text()
    assert code == 0, err
    assert "ANOVA not estimable (every survival_time value is 3: no variance to test)" in out + err
    assert "not estimable: both groups are constant" in text
    assert "Warning" not in out + err and " nan" not in text.lower() and "± nan" not in text
    assert not (tmp_path / "an" / "anova_harsh.csv").exists()
    welch = pd.read_csv(tmp_path / "an" / "welch_ablations.csv")
    assert welch["not_estimable"].str.len().gt(0).all()
