"""A fact needs the claim, not the words (issue 30, item 8).

A team that ran no analysis could earn accuracy by naming the data's columns (a keywords fact
such as "drivers of yield" counted the column names wherever they stood) or by naming a claim's
topic ("we examined the spatial autocorrelation"). Two kinds of report must now score near zero
(accuracy <= 0.1) on every built-in task (seeds 0-19) and on your own data: one naming every
variable and every fact's topic while claiming nothing, and one shotgunning many candidate
numbers (a table of candidates per quantity and a sentence per candidate); the oracle's report
still scores 1 on the same tasks and data."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from cooplab.cli import main
from cooplab.evals.science_scoring import heuristic_score
from cooplab.tasks.science import datasets as D
from cooplab.tasks.science.oracle import oracle_report
from cooplab.tasks.science.owndata import custom_section

from .conftest import SWEEP_SEEDS
from .gaming import FILLER, SECTIONS, number_candidates

SEEDS = SWEEP_SEEDS
BOUND = 0.1  # "near zero"


def _report(results: str, everywhere: str = "") -> str:
    return "\n\n".join(
        f"## {s}\n\n{FILLER.get(s, '')} {everywhere}".rstrip() + (f"\n\n{results}" if s == "Results" else "")
        for s in SECTIONS
    )


def names_only(truth: dict, columns: list[str]) -> str:
    """Every column and every fact's topic named in every section; nothing claimed of them."""
    topics = ", ".join(f"the {f['context'][0]}" for f in truth["facts"])
    return _report(
        "",
        f"The table has the columns {', '.join(columns)}. We looked at {topics}. "
        f"Each variable ({', '.join(columns)}) was examined in turn.",
    )


def shotgun(truth: dict) -> str:
    """Nine candidate numbers per number fact (the truth among them): in a table and one sentence each."""
    numbers = [f for f in truth["facts"] if f["kind"] == "number"]
    rows = [f"| {f['context'][0]} | " + " | ".join(number_candidates(f, 9)) + " |" for f in numbers]
    table = (
        "| quantity | " + " | ".join(f"run {i}" for i in range(1, 10)) + " |\n|" + "---|" * 10 + "\n" + "\n".join(rows)
    )
    sentences = " ".join(f"The {f['context'][0]} is {v}." for f in numbers for v in number_candidates(f, 9))
    return _report(f"We report every value we computed.\n\n{table}\n\n{sentences}")


@pytest.fixture(scope="module")
def made(seeded):
    """Every (task, seed): its ground truth, the oracle's recovered facts and the data's columns."""
    return {(task, seed): (s.truth, s.recovered, s.columns) for (task, seed), s in seeded.items() if seed in SEEDS}


@pytest.mark.parametrize("task", D.TASKS)
def test_naming_every_variable_or_shotgunning_numbers_earns_no_accuracy(task, made):
    for seed in SEEDS:
        truth, got, columns = made[task, seed]
        assert heuristic_score(oracle_report(task, got, truth), truth).accuracy == 1.0, seed
        for name, report in (("names only", names_only(truth, columns)), ("shotgun", shotgun(truth))):
            s = heuristic_score(report, truth)
            assert s.accuracy <= BOUND, (name, seed, [f for f in s.facts if f.score > 0])


# --- your own data --------------------------------------------------------------------------------------------
TRUTH = {
    "facts": [
        {"name": "rows", "kind": "number", "value": 240, "tolerance": 0, "context": ["number of rows"]},
        {"name": "drivers", "kind": "keywords", "value": ["rainfall", "soil"], "context": ["drivers of yield"]},
    ]
}


@pytest.fixture(scope="module")
def farm(tmp_path_factory):
    """A 240-row table whose yield rises with rainfall and soil (temperature and wind are noise)."""
    d = tmp_path_factory.mktemp("farm")
    rng = np.random.default_rng(3)
    df = pd.DataFrame({c: rng.normal(size=240) for c in ("rainfall", "soil", "temperature", "wind")})
    df.insert(0, "yield", 2 * df["rainfall"] + df["soil"] + rng.normal(0, 0.3, 240))
    df.to_csv(d / "farm.csv", index=False)
    (d / "task.md").write_text("Which variables drive the yield?\n")
    (d / "truth.json").write_text(json.dumps(TRUTH))
    return d


def _own_truth(farm) -> dict:
    return {
        "task": "custom",
        "facts": custom_section([farm / "farm.csv"], "Which variables drive the yield?", TRUTH)["facts"],
    }


def test_a_keywords_fact_needs_the_claim_not_the_column_names(farm):
    truth = _own_truth(farm)
    columns = ["yield", "rainfall", "soil", "temperature", "wind"]
    drivers = next(f for f in truth["facts"] if f["id"] == "drivers")
    assert drivers["universe"] == ["temperature", "wind"]  # the other columns; yield is in the context
    right = _report(
        "The number of rows is 240. The drivers of yield are rainfall and soil: yield rises by about 2 per unit of "
        "rainfall and 1 per unit of soil."
    )
    assert heuristic_score(right, truth).accuracy == 1.0
    outside = _report(
        "The number of rows is 240. Rainfall and soil both raise the yield."
    )  # a claim, outside the context
    assert {f.id: f.score for f in heuristic_score(outside, truth).facts} == {"rows": 1.0, "drivers": 0.5}
    for name, report in (
        ("names only", names_only(truth, columns)),
        ("shotgun", shotgun(truth)),
        ("every column a driver", _report("The drivers of yield are rainfall, soil, temperature and wind.")),
        (
            "a relation for every column",
            _report(
                "Rainfall predicts the yield. Soil predicts the yield. Temperature predicts "
                "the yield. Wind predicts the yield."
            ),
        ),
    ):
        s = heuristic_score(report, truth)
        assert s.accuracy <= BOUND, (name, [f for f in s.facts if f.score > 0])


def test_a_team_that_ran_no_analysis_gets_no_credit_for_the_columns(farm, tmp_path, capsys):
    """The issue's case: the describing team (it computes the shape and the column means, names
    every column, and claims nothing about drivers) on data with a drivers fact: before, the
    drivers fact alone gave it 0.5 for naming the columns."""
    out = tmp_path / "run"
    code = main(
        [
            "run",
            "science",
            "--dataset",
            str(farm / "farm.csv"),
            "--task-file",
            str(farm / "task.md"),
            "--truth",
            str(farm / "truth.json"),
            "--team",
            "oracle",
            "--sandbox-backend",
            "local",
            "--cache",
            "off",
            "--out",
            str(out),
            "-q",
            "--json",
        ]
    )
    stdout, err = capsys.readouterr()
    assert code == 0, err
    s = json.loads(stdout)
    assert s["status"] == "completed" and s["facts"] == {"rows": "found", "drivers": "missing"}
    assert s["scores"]["accuracy"] == 0.5


# --- the bench: exact answers ---------------------------------------------------------------------------------
def test_the_bench_gives_nothing_for_names_or_a_list_of_candidates():
    """Every item of the example suite: the correct answers score; a paper naming every answer
    name without a value, one answer holding many candidates, and candidates given as separate
    answers whose last is wrong do not."""
    from pathlib import Path

    from cooplab.tasks.science import bench

    ex = Path(__file__).resolve().parents[2] / "examples" / "bench-suite"
    labels, _ = bench.load_labels(ex / "labels.jsonl")
    correct = {r["id"]: r["answer"] for r in map(json.loads, (ex / "answers-correct.jsonl").read_text().splitlines())}
    for item, lab in labels.items():
        if lab.problem:
            continue
        names = [n for n, _ in lab.pairs]
        assert bench.score_item(lab, bench.extract(correct[item]))["correct"], item
        guesses = ["0", "1", "2.5", "10", "north", "negative", "yes"]
        papers = {
            "names only": "We computed " + ", ".join(names) + " from the table.",
            "candidates in one answer": " ".join(
                f"@{n}[{', '.join(guesses + [bench.shown(v)])}]" for n, v in lab.pairs
            ),
            "separate candidates": " ".join(
                f"@{n}[{g}]"
                for n, v in lab.pairs
                for g in [bench.shown(v), *(g for g in guesses if not bench.same(v, g))]
            ),
        }
        for name, text in papers.items():
            assert bench.score_item(lab, bench.extract(text))["n_sub_correct"] == 0, (item, name)
