"""config.json files written by the code before the typed run configuration (version 1, 2026-11-25,
one per task and kind of agents): the migration reads them into what the Python API and the CLI
build today (version 2), they pass the checks a resume makes, and their run directories resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cooplab.graphs import rundir
from cooplab.limits import ConfigError
from cooplab.runs import registry, runner
from cooplab.runs.config import RunConfig, check_stored
from cooplab.tasks.science.params import ScienceParams

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data" / "configs"
EXAMPLES = ROOT / "examples"

#: fixture -> the keywords of cooplab.run (and the flags of `cooplab run`) that wrote it
CASES = {
    "cpr_rule": dict(task="cpr", agents="rule", replicates=20, rounds=30, seed=3),
    "cpr_llm": dict(
        task="cpr",
        agents="llm",
        model=f"scripted:{EXAMPLES}/scripted/cautious.json",
        n_agents=3,
        rounds=3,
        seed=4,
        cache="off",
    ),
    "diners_rule": dict(task="diners", replicates=20, iterations=5, seed=1, pk="6:1"),
    "game_nash": dict(task="game", game="cpr", simulations=10, seed=2),
    "game_random": dict(task="game", game="o-ring", players="random", simulations=10, seed=2),
    # made when warn_when_hidden defaulted to false and a science run's output cap to 64 tokens: today's equivalent run
    # says so
    # and before status_at (2026-11-27), with the budget status in Appendix C.1's place
    "science_oracle": dict(
        task="science",
        team="oracle",
        sandbox_backend="local",
        seed=0,
        cache="off",
        set=["warn_when_hidden=false", "status_at=paper"],
        max_tokens=64,
    ),
}


#: parameters added after the fixtures were made, with the default that reproduces what those runs did
ADDED_SINCE = {
    "game": {"pareto_reference": None},  # None: the reference derived from the game (issue 30, item 3)
    "science": {"status_at": "paper"},
}  # the budget status in C.1's place (issue 41, point 5)


def fixture(name: str) -> dict:
    return json.loads((DATA / f"{name}.json").read_text().replace("{EXAMPLES}", str(EXAMPLES)))


def test_every_task_has_a_fixture():
    assert {c["task"] for c in CASES.values()} == {"cpr", "diners", "game", "science"}
    assert sorted(p.stem for p in DATA.glob("*.json")) == sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_api_builds_what_the_old_config_upgrades_to(name):
    kw = dict(CASES[name])
    built = json.loads(json.dumps(RunConfig.from_keywords(kw.pop("task"), **kw).to_config()))  # as config.json holds it
    old = fixture(name)
    upgraded = check_stored(old, "old").to_json()
    for key, default in ADDED_SINCE.get(CASES[name]["task"], {}).items():
        if key in built["params"]:  # (some games only)
            upgraded["params"].setdefault(key, default)  # a parameter added later, whose default is what old runs did
    assert built["version"] == upgraded["version"] == rundir.CONFIG_VERSION
    if name.startswith("science"):  # the generated dataset's file and hash are noted when the run starts
        assert built["record"].pop("dataset") == {"sha256": None}
        assert set(upgraded["record"].pop("dataset")) == {"file", "sha256", "generator"}
    if built.get("llm"):  # old runs named the nominal prices; new ones record each model's: the same rates either way
        assert same_prices(built["llm"], upgraded["llm"])
    assert built == upgraded


def same_prices(built: dict, old: dict) -> bool:
    """Whether two llm blocks charge every model alike (then their price fields are made equal)."""
    from cooplab.agents.settings import LLMSettings

    def rates(llm: dict) -> dict:
        return LLMSettings.model_validate({**llm, "cache": "off"}, strict=False).resolved_prices()

    same = rates(built) == rates(old)
    for key in ("price_in", "price_out", "prices"):
        old[key] = built.get(key)
    return same


def test_the_upgrade_moves_every_task_setting_under_params_and_respells_the_llm_block():
    cpr = rundir.upgrade_config(fixture("cpr_llm"))
    assert set(cpr) == set(rundir.CONFIG_FIELDS)
    assert {k: cpr["params"][k] for k in ("env", "ablation", "population", "replicates", "N", "T")} == {
        "env": "harsh",
        "ablation": "full",
        "population": "mixed",
        "replicates": 1,
        "N": 3,
        "T": 3,
    }
    assert cpr["llm"]["model"].endswith("cautious.json") and cpr["llm"]["agent_models"] == {}
    assert cpr["llm"]["price_in"] == 0.0005 and "price_in_per_1k" not in cpr["llm"] and "models" not in cpr["llm"]
    diners = rundir.upgrade_config(fixture("diners_rule"))
    assert diners["params"]["pk"] == "6:1" and diners["params"]["groups"][0] == ["M", "P", "E", "R1"]
    science = rundir.upgrade_config(fixture("science_oracle"))
    assert science["sandbox"] == {"backend": "local", "timeout": 30.0, "rate": 0.0}
    assert science["params"]["judge"] is None and "dataset" in science["record"]
    assert rundir.upgrade_config(science) == science  # the current version comes back as it is


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_old_config_passes_the_resume_checks(name):
    cfg = check_stored(fixture(name), "old").to_json()
    assert RunConfig.load(cfg).to_config() == {**cfg, "record": {}} or name.startswith("science")


@pytest.mark.parametrize(
    "edit, needle",
    [
        (lambda c: c.update(params="x"), "params must be a JSON object"),
        (lambda c: c.update(population="nobody"), "population must be altruistic"),
        (lambda c: c["llm"].update(price_in_per_1k=-1), "llm.price_in"),
        (lambda c: c["llm"].update(models={"default": "local", "7": "local"}), "llm.agent_models"),
        (lambda c: c.update(version=3), "version 3"),
        (lambda c: c.update(task=["cpr"]), "task must be a task name"),
    ],
)
def test_a_damaged_old_config_is_one_line_naming_the_field(edit, needle):
    cfg = fixture("cpr_llm")
    edit(cfg)
    with pytest.raises(ConfigError, match=needle):
        check_stored(cfg, "old")


@pytest.mark.parametrize("name", ["cpr_rule", "diners_rule", "game_random", "cpr_llm"])
def test_an_old_run_directory_resumes_to_the_same_result(name, tmp_path, monkeypatch):
    """A run directory whose config.json the old code wrote: its checkpoints (under the task's name,
    as the old code checkpointed) resume under the upgraded config and the result is the
    uninterrupted run's."""
    old = fixture(name)
    task = registry.get(old["task"])
    monkeypatch.setattr(runner, "new_thread_id", lambda: task.name)
    first = runner.start(task, tmp_path, check_stored(old, "old"), quiet=True)
    assert first["status"] == "completed"
    (tmp_path / "config.json").write_text(
        json.dumps({**old, "created": "2026-11-01T00:00:00+00:00"})
    )  # as the old code left it
    (tmp_path / "summary.json").unlink()
    again = runner.resume(tmp_path, quiet=True)
    assert again["status"] == "completed"
    # the same summary, but for timings and this invocation's cache counts (json: nan equals nan)
    drop = lambda s: json.dumps({k: v for k, v in s.items() if "seconds" not in k and k != "llm"}, sort_keys=True)  # noqa: E731
    assert drop(again) == drop(first)


def test_a_stored_config_runs_again_from_python(tmp_path):
    import cooplab

    first = cooplab.run(task="diners", replicates=3, iterations=2, seed=5, out=tmp_path / "a", quiet=True)
    again = cooplab.run(RunConfig.load(tmp_path / "a"), out=tmp_path / "b", quiet=True)
    strip = lambda c: {k: v for k, v in c.items() if k != "record"}  # noqa: E731
    assert strip(again.config) == strip(first.config)
    assert again.table("strategy_counts").equals(first.table("strategy_counts"))


def test_the_runner_takes_a_config_built_in_the_old_shape(tmp_path):
    """Code that builds a version-1 config by hand (a user's script, an older benchmark) still runs,
    and the run directory holds the upgraded version-2 file."""
    old = fixture("diners_rule")
    s = runner.start(registry.get("diners"), tmp_path, old, quiet=True)
    assert s["status"] == "completed"
    written = json.loads((tmp_path / "config.json").read_text())
    assert written["version"] == rundir.CONFIG_VERSION and written["params"]["pk"] == "6:1" and "pk" not in written


def test_a_science_run_made_before_status_at_keeps_the_status_in_the_papers_place():
    """Its params hold every setting of the time and no status_at: resumed, it goes on with the
    layout it started with (the status in Appendix C.1's place), not today's default."""
    task = registry.get("science")
    raw = fixture("science_oracle")
    assert "status_at" not in raw["params"]
    params = check_stored(raw, "old").params
    assert isinstance(params, ScienceParams)
    assert params.status_at == "paper"  # read into the typed settings with the layout it ran with
    default = task.default_params()
    assert isinstance(default, ScienceParams) and default.status_at == "end"  # a new run: the default
