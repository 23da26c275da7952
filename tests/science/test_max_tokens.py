"""One output cap for every science entry point (issue 30, item 7): ``cooplab run science``, the
Python API, both sweep formats, a run on your own data and ``cooplab bench science`` all default
to :data:`cooplab.tasks.science.defaults.MAX_TOKENS`, record it in config.json (bench.json for a
bench), and keep a cap the user gives. Other tasks keep their own default."""

from __future__ import annotations

import json
from pathlib import Path

import cooplab
from cooplab.agents.settings import LLMSettings
from cooplab.cli import main
from cooplab.runs import grid
from cooplab.runs.config import RunConfig
from cooplab.tasks.science.defaults import MAX_TOKENS
from cooplab.tasks.science.owndata import custom_config

ROOT = Path(__file__).resolve().parents[2]
EX = ROOT / "examples" / "bench-suite"


def test_the_science_cap_lets_a_model_write_code_and_a_report():
    assert MAX_TOKENS >= 1024


def test_run_science_records_the_science_cap_unless_one_is_given(tmp_path, capsys):
    for name, extra, want in (("default", [], MAX_TOKENS), ("given", ["--max-tokens", "300"], 300)):
        out = tmp_path / name
        code = main(
            [
                "run",
                "science",
                "--task",
                "anomaly",
                "--team",
                "oracle",
                "--sandbox-backend",
                "local",
                "--cache",
                "off",
                *extra,
                "--out",
                str(out),
                "-q",
                "--json",
            ]
        )
        err = capsys.readouterr().err
        assert code == 0, err
        assert json.loads((out / "config.json").read_text())["llm"]["max_tokens"] == want


def test_the_python_api_and_a_stored_config_get_the_science_cap(tmp_path):
    run = cooplab.run(
        task="science", team="oracle", sandbox_backend="local", cache="off", out=tmp_path / "api", quiet=True
    )
    assert run.status == "completed" and run.config["llm"]["max_tokens"] == MAX_TOKENS
    assert (
        RunConfig.from_keywords("science", model="openai:x", base_url="http://127.0.0.1:9").to_config()["llm"][
            "max_tokens"
        ]
        == MAX_TOKENS
    )
    assert RunConfig.from_keywords("science", team="oracle", max_tokens=77).to_config()["llm"]["max_tokens"] == 77
    params = {**run.config["params"], "team": "llm"}  # stored settings, with LLM settings that do not name a cap
    stored = RunConfig(task="science", params=params, llm=LLMSettings(model="openai:x", base_url="http://127.0.0.1:9"))
    assert stored.to_config()["llm"]["max_tokens"] == MAX_TOKENS
    # other tasks keep the LLM settings' own default
    assert RunConfig.from_keywords("cpr", agents="llm").to_config()["llm"]["max_tokens"] == 64


def test_both_sweep_formats_give_every_science_cell_the_science_cap(tmp_path):
    files = {
        "grid": {
            "task": "science",
            "out": "g",
            "fixed": {"team": "oracle", "sandbox_backend": "local", "cache": "off"},
            "grid": {"task": ["ecology", "anomaly"]},
            "seeds": [0],
        },
        "earlier": {
            "task": "science",
            "out": str(tmp_path / "e"),
            "team": "oracle",
            "science_tasks": ["ecology", "anomaly"],
            "sandbox_backend": "local",
            "llm": {"cache": "off"},
        },
        "given": {"task": "science", "out": "x", "fixed": {"team": "oracle", "max_tokens": 500}, "seeds": [0]},
    }
    for name, raw in files.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(raw))
        sw, _ = grid.load_file(tmp_path / f"{name}.json")
        caps = {j["config"]["llm"]["max_tokens"] for j in grid.jobs(sw)}
        assert caps == ({500} if name == "given" else {MAX_TOKENS}), name


def test_own_data_and_the_bench_use_the_science_cap(tmp_path, capsys):
    assert (
        custom_config([EX / "tables" / "orders.csv"], "Describe it.", None, backend="local")["llm"]["max_tokens"]
        == MAX_TOKENS
    )
    out = tmp_path / "bench"
    code = main(
        [
            "bench",
            "science",
            str(EX / "suite.jsonl"),
            "--tables",
            str(EX / "tables"),
            "--labels",
            str(EX / "labels.jsonl"),
            "--team",
            f"answers:{EX / 'answers-correct.jsonl'}",
            "--sandbox-backend",
            "local",
            "--cache",
            "off",
            "--limit",
            "1",
            "--out",
            str(out),
            "--json",
        ]
    )
    err = capsys.readouterr().err
    assert code == 0, err
    assert json.loads((out / "bench.json").read_text())["llm"]["max_tokens"] == MAX_TOKENS
    item = next((out / "cells").iterdir())
    assert json.loads((item / "config.json").read_text())["llm"]["max_tokens"] == MAX_TOKENS
