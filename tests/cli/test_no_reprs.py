"""The CLI's text output reads as text: no Python reprs of dicts, lists, tuples or None
(issue 31, item 4), on the main commands with small inputs."""

import re
from pathlib import Path

import pytest

from cooplab.cli import main

ROOT = Path(__file__).resolve().parents[2]
SCRIPTED = ROOT / "examples" / "scripted"
#: what a Python repr leaves in text: {'..., ['..., None, (), {}, [], and a nan ("± nan")
REPR = re.compile(r"""[{\[]['"]|\bNone\b|\(\)|\{\}|\[\]|\bnan\b""")


def _out(capsys, argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def _assert_plain(text: str) -> None:
    bad = [line for line in text.splitlines() if REPR.search(line)]
    assert not bad, bad


@pytest.mark.parametrize("task", ["cpr", "diners", "game", "science"])
def test_params_lists_plain_values(task, capsys):
    _assert_plain(_out(capsys, ["params", task]))


def test_runs_analysis_and_sweep_print_plain_text(tmp_path, capsys):
    texts = [
        _out(capsys, ["run", "cpr", "--out", tmp_path / "rule", "--rounds", 4, "--replicates", 3, "-q"]),
        _out(
            capsys,
            [
                "run",
                "cpr",
                "--agents",
                "llm",
                "--model",
                f"scripted:{SCRIPTED / 'cautious.json'}",
                "--n-agents",
                3,
                "--rounds",
                3,
                "--out",
                tmp_path / "llm",
                "-q",
            ],
        ),
        _out(capsys, ["run", "diners", "--out", tmp_path / "diners", "--replicates", 3, "-q"]),
        _out(
            capsys, ["run", "game", "--game", "collective-risk", "--simulations", 3, "--out", tmp_path / "game", "-q"]
        ),
        _out(capsys, ["analyze", "cpr", tmp_path / "rule", tmp_path / "llm", "--out", tmp_path / "analysis"]),
    ]
    for text in texts:
        assert text.strip()
        _assert_plain(text)


def test_the_science_summary_lines_are_plain():
    from cooplab.graphs import runfiles
    from cooplab.tasks.science.task import ScienceTask
    from tests.helpers.summaries import summary as complete

    def typed(s):  # the report reads the typed summary, as the runner hands it
        return runfiles.parse_summary(complete("science", **s), "summary.json", ScienceTask.Results)

    summary = {
        "science_task": "ecology",
        "team": "llm",
        "pipeline": "teams",
        "team_size": 2,
        "visibility": "full",
        "status": "completed",
        "scores": {"completeness": 0.5, "quality": 0.5, "accuracy": None},
        "scored": "final_paper",
        "passes": ["A#1"],
        "requests": 0,
        "requests_refused": 0,
        "tool_loops": 3,
        "loop_stops": {"done": 2, "budget": 1},
        "cost_by_team_usd": {"A": 0.01},
        "judge": None,
    }
    _assert_plain("\n".join(ScienceTask().report(typed(summary))))
    summary["judge"] = {
        "judge": "openai:gpt-4o-mini",
        "completeness": 0.5,
        "quality": None,
        "accuracy": None,
        "cost_usd": 0.01,
        "budget_usd": None,
        "ledger": {"calls": 1},
    }
    lines = ScienceTask().report(typed(summary))
    _assert_plain("\n".join(lines))
    assert any("accuracy not scored (no truth)" in line for line in lines if line.startswith("judge "))


def test_the_science_score_line_is_plain():
    from cooplab.cli.science import score_line

    line = score_line(
        {
            "run": "runs/a",
            "judge": "openai:gpt-4o-mini",
            "k": 3,
            "completeness": 0.5,
            "quality": 0.25,
            "accuracy": None,
            "std": {"completeness": 0.1, "quality": None},
            "n_fallback": 0,
            "cost_usd": 0.002,
            "budget_usd": None,
        }
    )
    _assert_plain(line)
    assert "accuracy not scored (no truth)" in line and "spread completeness 0.100, quality n/a" in line
