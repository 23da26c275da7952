"""The Python API (cooplab.run / resume / sweep / register_task) and the example that composes a
society in Python (examples/python/tax_society.py), run as a user would run them."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import cooplab
from cooplab.graphs.society import insert_phase
from cooplab.tasks.cpr.task import CPRTask

ROOT = Path(__file__).resolve().parents[2]
SCRIPTED = ROOT / "examples" / "scripted" / "cautious.json"
LLM = dict(agents="llm", model=f"scripted:{SCRIPTED}", n_agents=3, rounds=2, seed=4, quiet=True)


def test_the_example_script_inserts_a_node_and_reads_the_tables(tmp_path):
    res = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "python" / "tax_society.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads(res.stdout)
    taxed, plain = out["taxed"], out["plain"]
    assert taxed["status"] == plain["status"] == "completed"
    assert "tax" in taxed["nodes"] and "tax" not in plain["nodes"]
    assert taxed["nodes"] == sorted(plain["nodes"] + ["tax"])
    assert 0 < taxed["final_wealth"] < plain["final_wealth"]  # the tax took wealth out every round
    assert taxed["model_calls"] > 0 and taxed["decisions"] > 0
    for d in ("taxed", "plain"):  # every run has what the runner gives: checkpoints, ledger, traces, figure
        for f in (
            "config.json",
            "summary.json",
            "checkpoints.sqlite",
            "ledger.parquet",
            "decisions.parquet",
            "traces.jsonl",
            "figures/run.png",
        ):
            assert (tmp_path / d / f).is_file(), f"{d}/{f}"
    assert json.loads((tmp_path / "taxed" / "config.json").read_text())["task"] == "cpr-tax"


def test_run_hands_back_dataframes_and_resume_reads_the_same_run(tmp_path):
    run = cooplab.run(task="cpr", out=tmp_path / "r", **LLM)
    assert run.status == "completed" and run.task == "cpr"
    for df in (run.rounds, run.decisions, run.ledger, run.table("agents")):
        assert isinstance(df, pd.DataFrame) and len(df) > 0
    assert len(run.table("agents")) == 3 and run.rounds["round"].max() == 2
    assert (
        run.summary["ledger"]["calls"] == len(run.decisions[run.decisions["phase"] != ""])
        or run.summary["ledger"]["calls"] > 0
    )
    assert run.traces and run.figure is not None
    again = cooplab.resume(tmp_path / "r", quiet=True)
    assert again.status == "completed"
    pd.testing.assert_frame_equal(again.rounds, run.rounds)


def test_a_run_config_object_gives_the_same_config_as_keywords(tmp_path):
    a = cooplab.run(task="cpr", out=tmp_path / "kw", **LLM)
    cfg = cooplab.RunConfig(
        task="cpr",
        agents="llm",
        seed=4,
        options={"n_agents": 3, "rounds": 2},
        llm=cooplab.LLMSettings(model=f"scripted:{SCRIPTED}"),
    )
    b = cooplab.run(cfg, out=tmp_path / "obj", quiet=True)
    drop = ("record",)  # when and where each started
    assert {k: v for k, v in a.config.items() if k not in drop} == {k: v for k, v in b.config.items() if k not in drop}
    pd.testing.assert_frame_equal(a.rounds, b.rounds)


@pytest.mark.parametrize(
    "kw, needle",
    [
        ({"n_agents": 1}, "n_agents must be an integer in 2..100000"),
        ({"rounds": float("nan")}, "rounds must be an integer"),
        ({"bogus": 3}, "task 'cpr' has no option 'bogus'"),
        ({"temperature": "hot"}, "temperature"),
        ({"budget": -1.0}, "budget must be a finite number in [0, 1000000]"),
        ({"env": "stormy"}, "env must be harsh or rich, got 'stormy'"),
        ({"agents": "robots"}, "agents must be rule or llm"),
        ({"model": "nope:x"}, "model"),
        (
            {"agent_model": ["x=scripted:a.json"]},
            "agent_model expects AGENT=MODEL with AGENT a number 0..N-1, got 'x=scripted:a.json'",
        ),
        ({"agent_model": ["7=local"]}, "agent_models[7] ('local'): agent must be in 0..2"),
    ],
)
def test_bad_input_is_one_line_before_anything_is_written(tmp_path, kw, needle):
    with pytest.raises(cooplab.ConfigError) as err:
        cooplab.run(task="cpr", out=tmp_path / "r", **{**LLM, **kw})
    assert needle in str(err.value) and "\n" not in str(err.value) and "--" not in str(err.value)  # keywords, not flags
    assert not (tmp_path / "r").exists()


def test_an_unknown_task_is_one_line():
    with pytest.raises(cooplab.ConfigError, match="no task named 'nope'"):
        cooplab.run(task="nope", out="never-made")
    assert not Path("never-made").exists()


class Taxed(CPRTask):
    name = "cpr-taxed-test"

    def phases(self, config):
        return insert_phase(super().phases(config), "tax", lambda s: {"P": s["P"] * 0.9}, after="harvest")


def test_a_registered_task_runs_resumes_and_sweeps_in_the_same_process(tmp_path):
    cooplab.register_task(Taxed, replace=True)
    with pytest.raises(cooplab.ConfigError, match="already registered"):
        cooplab.register_task(Taxed)
    with pytest.raises(cooplab.ConfigError, match="already registered"):
        cooplab.register_task(type("Shadow", (CPRTask,), {"name": "cpr"}))
    run = cooplab.run(task="cpr-taxed-test", out=tmp_path / "t", **LLM)
    assert run.status == "completed"
    assert any(r["name"] == "tax" for r in run.traces)
    (tmp_path / "t" / "summary.json").unlink()  # as if it had been interrupted before its end
    assert cooplab.resume(tmp_path / "t", quiet=True).status == "completed"


def test_sweep_returns_one_row_per_cell_and_skips_finished_cells(tmp_path):
    rows = cooplab.sweep(
        "diners", out=tmp_path / "sw", grid={"pk": ["3:1", "6:1"]}, seeds=[0, 1], replicates=4, iterations=3
    )
    assert isinstance(rows, pd.DataFrame) and len(rows) == 4
    assert set(rows["pk"]) == {"3:1", "6:1"} and set(rows["seed"]) == {0, 1}
    assert bool((rows["status"] == "completed").all())
    assert (tmp_path / "sw" / "table.csv").is_file()
    cells = sorted(p.name for p in (tmp_path / "sw" / "cells").iterdir())
    assert cells == ["pk-3-1__s0", "pk-3-1__s1", "pk-6-1__s0", "pk-6-1__s1"]
    mtimes = {c: (tmp_path / "sw" / "cells" / c / "summary.json").stat().st_mtime_ns for c in cells}
    again = cooplab.sweep(
        "diners", out=tmp_path / "sw", grid={"pk": ["3:1", "6:1"]}, seeds=[0, 1], replicates=4, iterations=3
    )
    assert len(again) == 4
    assert mtimes == {
        c: (tmp_path / "sw" / "cells" / c / "summary.json").stat().st_mtime_ns for c in cells
    }  # nothing rerun
    with pytest.raises(cooplab.ConfigError, match="sweep: cell pk-bad__s0: "):
        cooplab.sweep("diners", out=tmp_path / "bad", grid={"pk": ["bad"]}, replicates=4)
    assert not (tmp_path / "bad").exists()


def test_arun_works_inside_an_event_loop(tmp_path):
    async def main():
        return await cooplab.arun(task="diners", out=tmp_path / "a", replicates=3, iterations=2, quiet=True)

    run = asyncio.run(main())
    assert run.status == "completed" and len(run.table("strategy_counts")) > 0
