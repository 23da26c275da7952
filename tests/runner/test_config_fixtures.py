"""config.json files written by the code before the library-first change (2026-11-25, one per task
and kind of agents) are what the Python API and the CLI still build, and they still pass the checks a
resume makes. When config.json's shape changes, these fixtures are what the migration must read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cooplab.runs import registry, runner
from cooplab.runs.config import RunConfig

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data" / "configs"
EXAMPLES = ROOT / "examples"

#: fixture -> the keywords of cooplab.run (and the flags of `cooplab run`) that wrote it
CASES = {
    "cpr_rule": dict(task="cpr", agents="rule", replicates=20, rounds=30, seed=3),
    "cpr_llm": dict(task="cpr", agents="llm", model=f"scripted:{EXAMPLES}/scripted/cautious.json", n_agents=3, rounds=3, seed=4, cache="off"),
    "diners_rule": dict(task="diners", replicates=20, iterations=5, seed=1, pk="6:1"),
    "game_nash": dict(task="game", game="cpr", simulations=10, seed=2),
    "game_random": dict(task="game", game="o-ring", players="random", simulations=10, seed=2),
    "science_oracle": dict(task="science", team="oracle", sandbox_backend="local", seed=0, cache="off"),
}


def fixture(name: str) -> dict:
    return json.loads((DATA / f"{name}.json").read_text().replace("{EXAMPLES}", str(EXAMPLES)))


def test_every_task_has_a_fixture():
    assert {c["task"] for c in CASES.values()} == {"cpr", "diners", "game", "science"}
    assert sorted(p.stem for p in DATA.glob("*.json")) == sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_api_builds_the_config_the_old_code_wrote(name):
    kw = dict(CASES[name])
    built = json.loads(json.dumps(RunConfig.from_keywords(kw.pop("task"), **kw).to_config()))  # as config.json holds it
    old = fixture(name)
    if name.startswith("science"):  # the generated dataset's file and hash are filled in when the run starts
        assert built.pop("dataset") == {"sha256": None} and set(old.pop("dataset")) == {"file", "sha256", "generator"}
    assert built == old


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_old_config_passes_the_resume_checks(name, tmp_path):
    cfg = fixture(name)
    runner.check_run_config(registry.get(cfg["task"]), tmp_path, cfg)


@pytest.mark.parametrize("name", ["cpr_rule", "diners_rule", "game_random"])
def test_an_old_config_runs_and_resumes(name, tmp_path):
    cfg = fixture(name)
    task = registry.get(cfg["task"])
    first = runner.start(task, tmp_path, cfg, quiet=True)
    assert first["status"] == "completed"
    (tmp_path / "summary.json").unlink()
    again = runner.resume(tmp_path, quiet=True)
    assert again["status"] == "completed"
    assert {k: v for k, v in again.items() if "seconds" not in k} == {k: v for k, v in first.items() if "seconds" not in k}
