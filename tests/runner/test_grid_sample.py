"""A weighted sample of a grid's points (``"sample"`` in a sweep), the paper's kind of condition
design (§4.1.1 of the cooperative-profiles paper), and the task's simulations per condition as
the default seeds."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from cooplab.limits import ConfigError
from cooplab.runs import grid

ROOT = Path(__file__).resolve().parents[2]

#: the paper's science conditions per model: budget x visibility x team size x task x prompt = 240
PAPER_GRID = {
    "budget": [0.5, 1.0, 2.5, 5.0, 10.0],
    "visibility": ["full", "team", "hidden"],
    "team_size": [2, 3],
    "task": ["ecology", "anomaly", "biomarker", "geospatial"],
    "prompt": ["standard", "tom"],
}


def _sweep(tmp_path, **more):
    raw = {"task": "science", "out": str(tmp_path / "s"), "fixed": {"team": "oracle"}, "grid": PAPER_GRID, **more}
    return grid.load(raw, "sweep config s.json")


def test_science_sweeps_run_five_simulations_per_condition_unless_told(tmp_path):
    assert _sweep(tmp_path).seeds == [0, 1, 2, 3, 4]
    assert _sweep(tmp_path, seeds=[7]).seeds == [7]
    cpr = grid.load({"task": "cpr", "out": str(tmp_path / "c"), "grid": {"rounds": [2]}}, "s")
    assert cpr.seeds == [0]


def test_a_sample_draws_weighted_points_reproducibly(tmp_path):
    models = {"model": [f"scripted:m{i}.json" for i in range(35)]}
    sample = {"points": 1462, "seed": 11, "weights": {"team_size": {"2": 3.0}, "prompt": {"standard": 3.0}}}
    sw = _sweep(tmp_path, grid={**models, **PAPER_GRID}, sample=sample)
    picked = grid.sampled_points(sw.grid, grid.Sample.model_validate(sample))
    assert len(picked) == len(set(picked)) == 1462  # without replacement, of 35 x 240 = 8400 points
    assert grid.sampled_points(sw.grid, grid.Sample.model_validate(sample)) == picked  # the seed alone decides
    other = grid.sampled_points(sw.grid, grid.Sample.model_validate({**sample, "seed": 12}))
    assert other != picked
    cells = grid.cells(sw)
    assert len(cells) == 1462 * 5
    labels = [c["labels"] for c in cells if c["labels"]["seed"] == 0]
    size, prompt = Counter(x["team_size"] for x in labels), Counter(x["prompt"] for x in labels)
    # weighted 3:1, the draws lean to team size 2 and the standard prompt (without replacement the
    # share is below 3/4: the heavy points run out first); unweighted they would be near 1/2
    assert 0.6 < size[2] / 1462 < 0.75 and 0.6 < prompt["standard"] / 1462 < 0.75
    plain = grid.sampled_points(sw.grid, grid.Sample.model_validate({"points": 1462, "seed": 11}))
    plain_cells = [
        c
        for c in grid.cells(sw.model_copy(update={"sample": {"points": 1462, "seed": 11}}))
        if c["labels"]["seed"] == 0
    ]
    assert len(plain) == 1462 and 0.45 < Counter(c["labels"]["team_size"] for c in plain_cells)[2] / 1462 < 0.55
    # every variable is still drawn across its whole range
    assert {x["budget"] for x in labels} == set(PAPER_GRID["budget"]) and len({x["model"] for x in labels}) == 35


@pytest.mark.parametrize(
    "sample, says",
    [
        ({"points": 0}, "from 1 to the grid's 240 points"),
        ({"points": 241}, "from 1 to the grid's 240 points"),
        ({"points": True}, "whole number"),
        ({"points": 5, "seed": -1}, "sample.seed"),
        ({"points": 5, "weights": {"colour": {"red": 2}}}, "not a grid keyword"),
        ({"points": 5, "weights": {"team_size": {"4": 2}}}, "not one of the grid's values"),
        ({"points": 5, "weights": {"team_size": {"2": float("nan")}}}, "weight from 0 to 1e6"),
        ({"points": 5, "weights": {"team_size": {"2": -1}}}, "weight from 0 to 1e6"),
        ({"points": 200, "weights": {"team_size": {"3": 0}}}, "only 120 grid points"),
        ({"points": 5, "extra": 1}, "sample"),
        ({"n": 5}, "sample"),
    ],
)
def test_a_bad_sample_is_one_line(tmp_path, sample, says):
    with pytest.raises(ConfigError, match=says) as err:
        _sweep(tmp_path, sample=sample)
    assert "\n" not in str(err.value) and str(err.value).startswith("sweep config s.json: ")


def test_the_paper_design_example_loads_and_says_what_it_draws():
    raw = json.loads((ROOT / "examples" / "science-paper-design.json").read_text())
    sw = grid.load(raw, "example", base=ROOT / "examples")
    assert sw.sample is not None
    assert sw.sample["points"] == 1462 and sw.seeds == [0, 1, 2, 3, 4]
    n_points = 1
    for values in sw.grid.values():
        n_points *= len(values)
    assert n_points == 35 * 240  # the paper's 35 models x 240 conditions (42,000 runs with five seeds)
    from cooplab.runs import registry
    from cooplab.runs.config import RunConfig
    from cooplab.tasks.science.datasets import TASKS

    assert sorted(sw.grid["task"]) == sorted(TASKS)
    first = grid.cells(sw)[0]
    config = RunConfig.from_keywords("science", **first["keywords"]).to_config(registry.get("science"))
    assert config["llm"]["base_url"] == "http://127.0.0.1:8000/v1"
