"""The judge's own budget, and its cost next to the team's (issue 29, item 11): a run with
``--budget`` gives the judge a cap of the same amount unless ``--judge-budget`` says otherwise;
summary.json, scores.json, the printed report and report.html show what the judge spent; a judge
stopped by its budget leaves the team's results and an earlier score as they were."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import cooplab
from cooplab.cli import main
from cooplab.evals.scoring.sections import SECTIONS
from cooplab.tasks.science.task import TASK

VERDICT = {
    "completeness": 5,
    "completeness_rationale": "All there.",
    "sections": {s: True for s in SECTIONS},
    "quality": 4,
    "quality_rationale": "Tests are reported.",
    "accuracy": 3,
    "accuracy_rationale": "Most facts match.",
}


@pytest.fixture(scope="module")
def judge_file(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("judge") / "judge.json"
    p.write_text(json.dumps({"by_phase": {"judge": [json.dumps(VERDICT)]}}))
    return p


def science(out: Path, capsys, *extra: str) -> dict:
    # the team's output cap the amounts below were chosen for (the science default reserves more per call)
    code = main(
        [
            "run",
            "science",
            "--team",
            "oracle",
            "--sandbox-backend",
            "local",
            "--cache",
            "off",
            "--budget",
            "0.03",
            "--max-tokens",
            "64",
            *extra,
            "--out",
            str(out),
            "-q",
            "--json",
        ]
    )
    stdout, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(stdout)


def test_the_judge_has_the_teams_budget_by_default_and_its_cost_is_reported(tmp_path, capsys, judge_file):
    out = tmp_path / "run"
    s = science(out, capsys, "--judge", f"scripted:{judge_file}")
    j = s["judge"]
    assert s["status"] == "completed" and j["budget_usd"] == 0.03 and "error" not in j
    assert 0 < j["cost_usd"] <= 0.03 and j["ledger"]["calls"] == 3 and j["cost_usd"] == j["ledger"]["cost_usd_float"]
    assert s["ledger"]["cost_usd_float"] <= 0.03  # the team's own, apart from the judge's
    assert TASK.cost_spent(cooplab.Run.open(out).summary) == pytest.approx(
        s["ledger"]["cost_usd_float"] + j["cost_usd"]
    )
    scored = json.loads((out / "scores.json").read_text())["judges"][0]
    assert scored["budget_usd"] == 0.03 and scored["ledger"]["cost_usd_float"] == j["cost_usd"]
    assert "judge cost $" in (out / "report.html").read_text()
    lines = TASK.report(cooplab.Run.open(out).summary)
    assert any(
        ln.startswith(f"judge scripted:{judge_file}") and f"cost ${j['cost_usd']:.4f} of its $0.0300 budget" in ln
        for ln in lines
    )

    # scoring again under a budget too small for one call: one line, exit 1, scores.json as it was
    before = (out / "scores.json").read_text()
    code = main(["science", "score", str(out), "--judge", f"scripted:{judge_file}", "--judge-budget", "0.0001"])
    _, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 1 and len(lines) == 1 and "the judge's budget ($0.0001) ran out" in lines[0], err
    assert (out / "scores.json").read_text() == before

    code = main(["science", "score", str(out), "--judge", f"scripted:{judge_file}", "--json"])
    stdout, err = capsys.readouterr()
    row = json.loads(stdout)[0]
    assert code == 0 and row["budget_usd"] == 0.03 and row["cost_usd"] == pytest.approx(j["cost_usd"])


def test_a_judge_budget_too_small_stops_the_judge_not_the_run(tmp_path, capsys, judge_file):
    s = science(tmp_path / "run", capsys, "--judge", f"scripted:{judge_file}", "--judge-budget", "0.0001")
    j = s["judge"]
    assert s["status"] == "completed" and s["scores"]["accuracy"] is not None  # the team's results are kept
    assert j["budget_usd"] == 0.0001 and j["cost_usd"] <= 0.0001 and "budget ($0.0001) ran out" in j["error"]


def test_the_cost_cap_of_a_science_run_counts_its_judge():
    from cooplab.agents.settings import LLMSettings
    from cooplab.graphs.task import PlainConfig

    def config(judge, budget: float | None = 0.03):  # the typed configuration the hook receives
        params = TASK.default_config("llm", judge=judge).params
        return PlainConfig(task="science", agents="llm", params=params, llm=LLMSettings(budget=budget))

    assert TASK.cost_cap(config({"model": "x", "samples": 3, "budget": 0.002})) == pytest.approx(0.032)
    assert TASK.cost_cap(config({"model": "x", "samples": 3})) == pytest.approx(0.06)  # the team's amount
    assert TASK.cost_cap(config(None)) == 0.03
    assert TASK.cost_cap(config({"model": "x", "samples": 3, "budget": 0.002}, budget=None)) is None


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--judge-budget", "-1"], "--judge-budget must be a finite number in [0, 1000000] (USD"),
        (["--judge-budget", "nan"], "--judge-budget must be a finite number"),
        (["--judge-budget", "0.01"], "--judge-budget goes with --judge MODEL"),
    ],
)
def test_bad_judge_budgets_are_one_line(tmp_path, capsys, args, needle):
    from tests.helpers.cli import fail_line

    line = fail_line(
        capsys,
        ["run", "science", "--team", "oracle", "--sandbox-backend", "local", *args, "--out", str(tmp_path / "r")],
    )
    assert needle in line
    assert not (tmp_path / "r").exists()
