"""cooplab.load_runs: many run directories in one table, one row per run (issue 38, item 3), and
cooplab.Run.open reading one back; damaged or unfinished directories are rows that say so."""

from __future__ import annotations

import json
import os

import pytest

import cooplab


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("many") / "runs"
    cooplab.run(task="diners", out=root / "diners", replicates=2, iterations=2, quiet=True)
    cooplab.run(task="cpr", out=root / "cpr", replicates=2, rounds=3, quiet=True)
    cooplab.sweep(
        "cpr", out=root / "sweep", grid={"n_agents": [2, 3]}, seeds=[0], rounds=2, replicates=2, analysis=False
    )
    return root


def test_one_row_per_run_with_task_status_settings_and_results(runs):
    df = cooplab.load_runs(runs)
    assert len(df) == 4 and list(df.columns[:8]) == [
        "run",
        "task",
        "status",
        "agents",
        "seed",
        "model",
        "created",
        "wall_seconds",
    ]
    assert sorted(df["task"]) == ["cpr", "cpr", "cpr", "diners"] and (df["status"] == "completed").all()
    cpr = df[df["task"] == "cpr"].sort_values("run")
    assert sorted(cpr["params.N"]) == [2, 3, 10] and cpr["survival_time.mean"].notna().all()
    assert df.loc[df["task"] == "diners", "params.N"].isna().all()  # a column a task does not have is empty
    assert all(isinstance(v, str) for v in df["run"])
    for path in df["run"]:  # every row reopens
        assert cooplab.Run.open(path).status == "completed"


def test_patterns_lists_and_a_run_directory_itself(runs):
    assert len(cooplab.load_runs(str(runs / "sweep" / "*"))) == 2
    assert len(cooplab.load_runs(f"{runs}/**")) == 4
    assert len(cooplab.load_runs([runs / "cpr", runs / "diners", runs / "cpr"])) == 2  # each run once
    assert list(cooplab.load_runs(runs / "cpr")["task"]) == ["cpr"]
    empty = cooplab.load_runs(runs / "no-such-folder")
    assert empty.empty and "status" in empty.columns
    with pytest.raises(cooplab.ConfigError, match="load_runs takes a directory"):
        cooplab.load_runs([runs, 3])


def test_damaged_unfinished_and_looping_folders_are_rows_not_crashes(runs, tmp_path):
    import shutil

    root = tmp_path / "mixed"
    shutil.copytree(runs / "diners", root / "ok")
    shutil.copytree(runs / "diners", root / "unfinished")
    (root / "unfinished" / "summary.json").unlink()
    (root / "damaged").mkdir()
    (root / "damaged" / "config.json").write_text("{not json")
    (root / "list").mkdir()
    (root / "list" / "config.json").write_text(json.dumps([1, 2]))
    os.symlink(root, root / "ok" / "loop")  # a link back up: never followed
    df = cooplab.load_runs(root).set_index("run")
    assert df.loc[str(root / "ok"), "status"] == "completed"
    assert df.loc[str(root / "unfinished"), "status"] == "not finished"
    assert (
        df.loc[str(root / "damaged"), "status"] == "unreadable"
        and "config.json" in df.loc[str(root / "damaged"), "error"]
    )
    assert df.loc[str(root / "list"), "status"] == "unreadable"
    assert len(df) == 4
