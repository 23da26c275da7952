"""Judge-scored outcomes (issue 30, item 2): a science sweep may name an LLM judge (model,
samples, its own budget), scores.csv records both scorers per run (the heuristic's
``completeness``/``quality``/``accuracy`` and the judge's ``judge_*`` columns), and ``cooplab
analyze science`` takes ``--score-source judge|heuristic`` (default judge, as the paper's Table 2),
says which it used, and refuses runs without judge scores in one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cooplab.cli import main
from cooplab.evals import bayes
from cooplab.evals.scoring.sections import SECTIONS
from cooplab.runs import grid
from tests.games.test_bayes import write_profile
from tests.helpers.cli import fail_line

#: three different verdicts; the scripted judge picks one by a hash of its prompt (so by the report)
VERDICTS = [
    {
        "completeness": c,
        "completeness_rationale": "Sections.",
        "sections": {s: True for s in SECTIONS},
        "quality": q,
        "quality_rationale": "Tests.",
        "accuracy": a,
        "accuracy_rationale": "Facts.",
    }
    for c, q, a in ((5, 4, 3), (2, 2, 1), (4, 3, 5))
]


@pytest.fixture(scope="module")
def judge_file(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("judge") / "judge.json"
    p.write_text(json.dumps({"select": "prompt_hash", "by_phase": {"judge": [json.dumps(v) for v in VERDICTS]}}))
    return p


def sweep(capsys, path: Path) -> dict:
    code = main(["sweep", str(path), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def write_sweep(folder: Path, *, judge: str | None, tasks=("ecology", "anomaly"), seeds=(0, 1)) -> Path:
    fixed = {"sandbox_backend": "local", "cache": "off", "budget": 0.5, "max_tokens": 64}
    if judge is not None:
        fixed.update(judge=judge, judge_samples=2, judge_budget=0.2)
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / "sweep.json"
    p.write_text(
        json.dumps(
            {
                "task": "science",
                "out": "out",
                "fixed": fixed,
                "grid": {"team": ["oracle", "garbage"], "task": list(tasks)},
                "seeds": list(seeds),
            }
        )
    )
    return p


@pytest.fixture(scope="module")
def judged(tmp_path_factory, judge_file):
    """A judge-scored sweep: oracle and garbage teams on two tasks (four 'models'), two seeds each,
    the judge named by a path relative to the sweep file; and a profile for every model."""
    import contextlib
    import io
    import shutil

    root = tmp_path_factory.mktemp("judged")
    shutil.copy(judge_file, root / "judge.json")
    path = write_sweep(root, judge="scripted:judge.json")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["sweep", str(path), "--json", "-q"]) == 0
    scores = pd.read_csv(root / "out" / "scores.csv")
    rng = np.random.default_rng(2)
    profiles = [
        write_profile(root / "profiles" / str(i), m, 0.2 + 0.2 * i, rng)
        for i, m in enumerate(sorted(set(scores["model"])))
    ]
    return root, scores, profiles


def test_a_sweep_judges_every_run_and_records_both_scorers(judged):
    root, scores, _ = judged
    assert len(scores) == 8 and set(scores["status"]) == {"completed"}
    assert set(scores["judge"]) == {f"scripted:{root / 'judge.json'}"}  # resolved against the sweep file's folder
    for col in ("completeness", "quality", "accuracy", "judge_completeness", "judge_quality", "judge_accuracy"):
        assert scores[col].notna().all() and scores[col].between(0, 1).all(), col
    # the two scorers differ (the oracle's heuristic accuracy is 1, the garbage team's 0; the judge says otherwise)
    assert set(scores.loc[scores["model"].str.contains("oracle"), "accuracy"]) == {1.0}
    assert not (scores["accuracy"] == scores["judge_accuracy"]).all()
    allowed = {(v[d] - 1) / 4 for v in VERDICTS for d in ("completeness", "quality", "accuracy")}
    assert set(scores["judge_accuracy"]) <= allowed
    for run in scores["run_dir"]:  # each run recorded its judge with its own budget
        config = json.loads((Path(run) / "config.json").read_text())
        assert config["params"]["judge"] == {"model": f"scripted:{root / 'judge.json'}", "samples": 2, "budget": 0.2}
    cond = pd.read_csv(root / "out" / "conditions.csv")
    assert {"judge_completeness", "judge_quality", "judge_accuracy"} <= set(cond.columns)
    assert bool(cond["judge_accuracy"].notna().all())


def test_a_judge_scored_sweep_feeds_analyze_science(judged, tmp_path, capsys):
    root, scores, profiles = judged
    out = tmp_path / "an"
    args = [
        "analyze",
        "science",
        str(root / "out"),
        *[x for p in profiles for x in ("--profiles", str(p))],
        "--out",
        str(out),
        "--chains",
        "1",
        "--warmup",
        "100",
        "--samples",
        "100",
        "--seed",
        "1",
    ]  # plumbing, not convergence
    code = main(args)
    stdout, err = capsys.readouterr()
    assert code == 0, err
    judge = f"scripted:{root / 'judge.json'}"
    assert f"note: outcomes: the LLM judge's scores ({judge})" in stdout
    fit = json.loads((out / "fit.json").read_text())
    assert fit["score_source"] == "judge" and judge in fit["outcomes_from"] and fit["runs"] == 8
    # what the fit read: the judge's scores per model-condition pair, not the heuristic's
    got, notes = bayes.load_scores(root / "out")
    want = scores.groupby(["model", "task"])[["judge_completeness", "judge_quality", "judge_accuracy"]].mean()
    got = got.set_index(["model", "task"])
    for dim in ("completeness", "quality", "accuracy"):
        assert np.allclose(got[dim].sort_index(), want[f"judge_{dim}"].sort_index())
    heur, hnotes = bayes.load_scores(root / "out", "heuristic")
    assert np.allclose(
        heur.set_index(["model", "task"])["accuracy"].sort_index(),
        scores.groupby(["model", "task"])["accuracy"].mean().sort_index(),
    )
    assert hnotes[0].startswith("outcomes: the heuristic scorer's")


def test_runs_without_judge_scores_are_one_line_until_scored(tmp_path, capsys, judge_file, judged):
    _, _, profiles = judged
    path = write_sweep(tmp_path / "plain", judge=None, tasks=("ecology",), seeds=(0,))
    res = sweep(capsys, path)
    sw = tmp_path / "plain" / "out"
    scores = pd.read_csv(sw / "scores.csv")
    assert len(res["run_dirs"]) == 2 and bool(scores["judge_accuracy"].isna().all())
    prof = [x for p in profiles for x in ("--profiles", str(p))]
    line = fail_line(capsys, ["analyze", "science", str(sw), *prof, "--out", str(tmp_path / "o")])
    assert "has no judge scores" in line and "--score-source heuristic" in line and "cooplab science score" in line, (
        line
    )
    assert not (tmp_path / "o").exists()
    assert "--score-source must be judge or heuristic" in fail_line(
        capsys, ["analyze", "science", str(sw), *prof, "--score-source", "oracle", "--out", str(tmp_path / "o")]
    )
    # scored after the sweep: read from the runs' scores.json
    for run in scores["run_dir"]:
        assert main(["science", "score", run, "--judge", f"scripted:{judge_file}", "--samples", "1"]) == 0
    capsys.readouterr()
    got, notes = bayes.load_scores(sw)
    assert (
        got["accuracy"].between(0, 1).all()
        and notes[0] == f"outcomes: the LLM judge's scores (scripted:{judge_file}), as in the paper's Table 2"
    )


def test_an_earlier_science_sweep_may_name_a_judge(tmp_path, judge_file):
    raw = {
        "task": "science",
        "out": str(tmp_path / "o"),
        "team": "oracle",
        "science_tasks": ["ecology"],
        "sandbox_backend": "local",
        "llm": {"cache": "off"},
        "judge": {"model": f"scripted:{judge_file}", "samples": 4, "budget": 0.1},
    }
    (tmp_path / "s.json").write_text(json.dumps(raw))
    sw, notice = grid.load_file(tmp_path / "s.json")
    assert notice is not None and "earlier science sweep format" in notice
    (job,) = grid.jobs(sw)
    assert job["config"]["params"]["judge"] == {"model": f"scripted:{judge_file}", "samples": 4, "budget": 0.1}
    for bad, needle in (
        ({"model": 3}, "judge must be"),
        ({"model": "x", "k": 2}, "judge must be"),
        ({"model": f"scripted:{judge_file}", "samples": 0}, "judge-samples"),
    ):
        (tmp_path / "b.json").write_text(json.dumps({**raw, "judge": bad}))
        with pytest.raises(Exception) as exc:
            grid.jobs(grid.load_file(tmp_path / "b.json")[0])
        assert needle in str(exc.value) and "\n" not in str(exc.value)
