"""One sweep format (cooplab/runs/grid.py): a grid over cooplab.run's keywords, paths relative to
the file, the same sweep from a file and from Python, the task's analysis hook, and the three
earlier formats read as grid sweeps with a one-line notice."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import cooplab
from cooplab.cli import main
from cooplab.limits import ConfigError
from cooplab.runs import grid, registry

ROOT = Path(__file__).resolve().parents[2]
EXE = str(Path(sys.executable).parent / "cooplab")


def sweep(args: list[str], capsys) -> tuple[int, dict | None, str]:
    code = main(["sweep", *args, "--json"])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else None), err


def configs(out: Path) -> dict[str, dict]:
    """Each cell's config.json without what it only recorded."""
    return {
        p.parent.name: {k: v for k, v in json.loads(p.read_text()).items() if k != "record"}
        for p in sorted((out / "cells").glob("*/config.json"))
    }


def test_a_sweep_file_runs_from_any_directory_with_paths_relative_to_its_folder(tmp_path):
    folder = tmp_path / "study"
    (folder / "models").mkdir(parents=True)
    shutil.copy(ROOT / "examples" / "scripted" / "cautious.json", folder / "models" / "cautious.json")
    (folder / "grid.json").write_text(
        json.dumps(
            {
                "task": "cpr",
                "out": "results",
                "fixed": {"agents": "llm", "n_agents": 3, "rounds": 2, "replicates": 1, "cache": "cache.sqlite"},
                "grid": {"model": ["scripted:models/cautious.json"], "population": ["selfish", "mixed"]},
                "seeds": [0],
                "parallel": 1,
            }
        )
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    p = subprocess.run(
        [EXE, "sweep", str(folder / "grid.json"), "-q", "--no-analysis"],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr
    assert "note:" not in p.stderr  # the current format: no notice
    cells = configs(folder / "results")
    assert sorted(cells) == ["model-cautious.json__population-mixed__s0", "model-cautious.json__population-selfish__s0"]
    for cfg in cells.values():
        assert cfg["llm"]["model"] == f"scripted:{folder / 'models' / 'cautious.json'}"
        assert cfg["llm"]["cache"] == str(folder / "cache.sqlite")
    assert (folder / "cache.sqlite").exists() and not any(elsewhere.iterdir())


def test_the_shipped_example_names_files_that_exist_from_its_folder():
    sw, notice = grid.load_file(ROOT / "examples" / "grid-scripted.json")
    assert notice is None and Path(sw.out) == ROOT / "runs" / "grid-scripted"
    assert all(Path(m.split(":", 1)[1]).is_file() for m in sw.grid["model"])
    assert len(grid.jobs(sw)) == 2 * 2 * 3 * 2  # every cell's config builds


def test_python_and_a_file_give_the_same_cells_and_table(tmp_path, capsys):
    f = tmp_path / "s.json"
    f.write_text(
        json.dumps(
            {
                "task": "cpr",
                "out": "file",
                "fixed": {"agents": "rule", "n_agents": 3, "rounds": 2, "replicates": 2},
                "grid": {"population": ["mixed", "selfish"], "set.beta": [0, 12]},
                "seeds": [0, 1],
                "analysis": False,
            }
        )
    )
    code, res, err = sweep([str(f)], capsys)
    assert code == 0 and len(res["ran"]) == 8, err
    rows = cooplab.sweep(
        "cpr",
        out=tmp_path / "py",
        grid={"population": ["mixed", "selfish"], "set.beta": [0, 12]},
        seeds=[0, 1],
        agents="rule",
        n_agents=3,
        rounds=2,
        replicates=2,
        analysis=False,
    )
    assert configs(tmp_path / "file") == configs(tmp_path / "py")
    assert {c["params"]["beta"] for c in configs(tmp_path / "py").values()} == {0, 12}  # set.beta reached the parameter
    file_rows = pd.read_csv(tmp_path / "file" / "table.csv")
    keep = [c for c in file_rows.columns if "second" not in c and "wall" not in c]
    pd.testing.assert_frame_equal(
        file_rows[keep].sort_values("cell").reset_index(drop=True),
        pd.read_csv(tmp_path / "py" / "table.csv")[keep].sort_values("cell").reset_index(drop=True),
    )
    assert len(rows) == 8 and set(rows["status"]) == {"completed"}
    from cooplab.graphs import runfiles  # the folder's manifest names every cell, its labels and status

    for folder in ("file", "py"):
        m = runfiles.read_manifest(tmp_path / folder)
        assert m.kind == "sweep" and m.task == "cpr" and m.outputs == {"table": "table.csv"}
        assert {c.name for c in m.cells} == set(configs(tmp_path / folder)) and {c.status for c in m.cells} == {
            "completed"
        }
        assert all(c.dir == f"cells/{c.name}" and c.labels["population"] in ("mixed", "selfish") for c in m.cells)


def test_a_science_option_called_task_can_be_swept(tmp_path):
    sw = grid.load(
        {
            "task": "science",
            "out": str(tmp_path / "s"),
            "fixed": {"team": "oracle", "sandbox_backend": "local"},
            "grid": {"task": ["ecology", "anomaly"]},
        },
        "t",
    )
    # science runs five simulations per condition by default (its sweep_seeds)
    assert sorted(j["config"]["params"]["task"] for j in grid.jobs(sw)) == ["anomaly"] * 5 + ["ecology"] * 5


def test_the_task_s_analysis_hook_runs_on_the_finished_cells_unless_switched_off(tmp_path, monkeypatch):
    from cooplab.tasks.diners.task import DinersTask

    class Counted(DinersTask):
        name = "diners-counted"
        seen: list = []

        def analyze_sweep(self, cells, out, *, analysis_out=None):
            Counted.seen.append(sorted(c["labels"]["pk"] for c in cells))
            return {"mine": "yes"}

    monkeypatch.setattr(registry, "_REGISTERED", dict(registry._REGISTERED))  # registered for this test only
    cooplab.register_task(Counted, replace=True)
    sw = grid.load(
        {
            "task": "diners-counted",
            "out": str(tmp_path / "a"),
            "fixed": {"iterations": 1, "replicates": 2},
            "grid": {"pk": ["3:1", "6:1"]},
        },
        "t",
    )
    res = grid.run(sw)
    assert Counted.seen == [["3:1", "6:1"]] and res["mine"] == "yes"
    grid.run(sw.model_copy(update={"analysis": False}))
    assert len(Counted.seen) == 1


@pytest.mark.parametrize(
    "raw, needle",
    [
        ({"task": "diners", "out": "x", "grid": {"pk": "3:1"}}, "grid pk must be a non-empty list"),
        ({"task": "diners", "out": "x", "fixed": {"force": True}}, "force is set by the sweep"),
        ({"task": "diners", "out": "x", "seeds": [0, True]}, "seeds must be a non-empty list of integers"),
        ({"task": "diners", "out": "x", "analysis": "yes"}, "analysis"),
        ({"task": "diners", "out": "", "grid": {}}, "out must be a non-empty string"),
    ],
)
def test_bad_grid_sweeps_are_one_line(raw, needle):
    with pytest.raises(ConfigError, match=needle) as e:
        grid.jobs(grid.load(raw, "s"))
    assert "\n" not in str(e.value)


# --- the earlier formats -------------------------------------------------------------------------
def test_an_earlier_cpr_sweep_is_read_as_the_grid_sweep_it_means_with_a_notice(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)  # its paths meant the current directory, and still do
    old = {
        "out": str(tmp_path / "old"),
        "agents": "llm",
        "models": ["scripted:examples/scripted/cautious.json"],
        "envs": ["harsh"],
        "populations": ["mixed", "selfish"],
        "ablations": ["full"],
        "trials": 2,
        "n_agents": 3,
        "rounds": 2,
        "seed": 4,
        "llm": {"cache": "off"},
        "set": {"beta": 12},
    }
    new = {
        "task": "cpr",
        "out": str(tmp_path / "new"),
        "fixed": {"agents": "llm", "n_agents": 3, "rounds": 2, "replicates": 2, "set": {"beta": 12}, "cache": "off"},
        "grid": {
            "model": [f"scripted:{ROOT / 'examples/scripted/cautious.json'}"],
            "env": ["harsh"],
            "population": ["mixed", "selfish"],
            "ablation": ["full"],
        },
        "seeds": [4],
    }
    for name, raw in (("old", old), ("new", new)):
        (tmp_path / f"{name}.json").write_text(json.dumps(raw))
        code, res, err = sweep([str(tmp_path / f"{name}.json"), "--no-analysis"], capsys)
        assert code == 0 and len(res["ran"]) == 2, err
        assert ("earlier CPR sweep format" in err) == (name == "old") and err.count("\n") == (name == "old")
    assert configs(tmp_path / "old") == configs(tmp_path / "new")


def test_an_earlier_science_sweep_is_read_as_a_grid_sweep(tmp_path):
    from cooplab.tasks.science.defaults import MAX_TOKENS

    old = {
        "task": "science",
        "out": str(tmp_path / "s"),
        "team": "oracle",
        "science_tasks": ["ecology"],
        "budgets": [0.5, None],
        "simulations": 2,
        "seed": 3,
        "sandbox_backend": "local",
        "llm": {"cache": "off"},
    }
    (tmp_path / "s.json").write_text(json.dumps(old))
    sw, notice = grid.load_file(tmp_path / "s.json")
    assert "earlier science sweep format" in notice and sw.seeds == [3, 4] and sw.grid["budget"] == [0.5, None]
    budgets = sorted((j["config"]["llm"]["budget"] is None, j["config"]["llm"]["max_tokens"]) for j in grid.jobs(sw))
    assert budgets == [
        (False, MAX_TOKENS),
        (False, MAX_TOKENS),
        (True, MAX_TOKENS),
        (True, MAX_TOKENS),
    ]  # the science default


def test_an_earlier_args_sweep_needs_the_command_line_parser_and_means_the_same_cells(tmp_path, capsys):
    old = {
        "task": "diners",
        "out": str(tmp_path / "old"),
        "args": ["--agents", "rule", "--iterations", "2", "--replicates", "3"],
        "grid": {"--pk": ["3:1", "6:1"], "--beta": [0.5]},
        "seeds": [0],
    }
    (tmp_path / "old.json").write_text(json.dumps(old))
    with pytest.raises(ConfigError, match="run it with 'cooplab sweep'"):
        grid.load_file(tmp_path / "old.json")
    code, res, err = sweep([str(tmp_path / "old.json")], capsys)
    assert code == 0 and "command-line options format" in err, err
    rows = cooplab.sweep(
        "diners",
        out=tmp_path / "new",
        grid={"pk": ["3:1", "6:1"], "beta": [0.5]},
        agents="rule",
        iterations=2,
        replicates=3,
    )
    assert len(rows) == 2 and configs(tmp_path / "old") == configs(tmp_path / "new")


def test_an_earlier_format_keeps_its_one_line_errors(tmp_path, capsys):
    (tmp_path / "bad.json").write_text(json.dumps({"out": "x", "ablations": ["full", "most"]}))
    code, _, err = sweep([str(tmp_path / "bad.json")], capsys)
    assert code == 2 and "ablations" in err and err.count("\n") == 1


@pytest.mark.parametrize(
    "seeds, says",
    [
        ([], "seeds must be a non-empty list of integers, got []"),
        ([0, True], "seeds must be a non-empty list of integers, got [0, True]"),
        ([1, 1], "seeds has duplicates: [1, 1]"),
        ([-1], "seeds"),
    ],
)
def test_the_grid_format_and_the_args_format_refuse_a_bad_seed_list_alike(tmp_path, seeds, says):
    new = {"task": "diners", "out": "x", "fixed": {"agents": "rule"}, "seeds": seeds}
    old = {"task": "diners", "out": "x", "args": ["--agents", "rule"], "seeds": seeds}
    errors = []
    for name, raw in (("new", new), ("old", old)):
        (tmp_path / f"{name}.json").write_text(json.dumps(raw))
        with pytest.raises(ConfigError) as exc:
            grid.load_file(tmp_path / f"{name}.json")
        errors.append(str(exc.value).split(": ", 1)[1])
    assert says in errors[0] and errors[0] == errors[1]
