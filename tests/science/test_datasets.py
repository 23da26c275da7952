"""The four science tasks' generators, their ground truth, and the scripted oracle that recovers it."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from cooplab.tasks.science import datasets as D
from cooplab.tasks.science.oracle import (
    ORACLE_CODE,
    SECTIONS,
    garbage_report,
    oracle_report,
    parse_oracle_output,
    run_oracle_locally,
    wrong_report,
)

SEEDS = (0, 1, 2)
CASES = [(task, seed) for task in D.TASKS for seed in SEEDS]
KINDS = {"number", "set", "claim", "label"}


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """Every (task, seed) generated once, with the oracle's recovered facts."""
    root = tmp_path_factory.mktemp("science")
    out = {}
    for task, seed in CASES:
        ds = D.generate(task, seed, root / task / str(seed))
        out[task, seed] = (ds, run_oracle_locally(task, ds.data_path))
    return out


def recovered_ok(fact: dict, value) -> bool:
    if fact["kind"] == "number":
        return isinstance(value, (int, float)) and abs(value - fact["value"]) <= fact["tolerance"]
    if fact["kind"] == "set":
        return isinstance(value, list) and sorted(value) == sorted(fact["value"])
    return value == fact["value"]


def stated(fact: dict, text: str) -> bool:
    """A simple text matcher: the fact's value appears in a sentence (or line) that names it.

    A sentence names a fact when it holds one of the fact's context phrases; numbers match
    within the fact's tolerance, set items and labels literally (case-insensitive), and a claim
    is stated when a context phrase appears at all.
    """
    low = text.lower()
    if fact["kind"] == "claim":
        return any(c in low for c in fact["context"])
    sentences = [s for s in re.split(r"(?<=[.!?;])\s+|\n+", low) if any(c in s for c in fact["context"])]
    if fact["kind"] == "number":
        return any(
            abs(float(m.group()) - fact["value"]) <= fact["tolerance"]
            for s in sentences
            for m in re.finditer(r"(?<![\w.-])-?\d+(?:\.\d+)?", s)
        )
    items = fact["value"] if fact["kind"] == "set" else [str(fact["value"])]
    return all(any(item.lower() in s for s in sentences) for item in items)


# --- generators ---------------------------------------------------------------------------------


@pytest.mark.parametrize("task,seed", CASES)
def test_same_seed_same_bytes_other_seed_other_data(task, seed, made, tmp_path):
    ds, _ = made[task, seed]
    again = D.generate(task, seed, tmp_path / "again")
    assert again.data_path.read_bytes() == ds.data_path.read_bytes()
    assert again.truth_path.read_bytes() == ds.truth_path.read_bytes()
    assert (again.task, again.seed, again.n_rows, again.n_cols) == (ds.task, ds.seed, ds.n_rows, ds.n_cols)
    assert again.truth == ds.truth
    other, _ = made[task, (seed + 1) % len(SEEDS)]
    assert other.data_path.read_bytes() != ds.data_path.read_bytes()


@pytest.mark.parametrize("task,seed", CASES)
def test_dataset_is_small_and_matches_its_record(task, seed, made):
    ds, _ = made[task, seed]
    assert ds.data_path.name == "data.csv" and ds.truth_path.name == "ground_truth.json"
    assert ds.data_path.stat().st_size <= 50 * 2**20
    assert ds.data_path.stat().st_size < 1 * 2**20  # a few hundred KB in practice
    frame = pd.read_csv(ds.data_path)
    assert (ds.task, ds.seed) == (task, seed)
    assert (ds.n_rows, ds.n_cols) == frame.shape
    assert not frame.isna().any().any()


@pytest.mark.parametrize("task,seed", CASES)
def test_ground_truth_has_the_documented_shape(task, seed, made):
    ds, _ = made[task, seed]
    truth = json.loads(ds.truth_path.read_text())
    assert truth == ds.truth
    assert {"task", "seed", "generator", "description", "equations", "facts", "details"} <= set(truth)
    assert truth["task"] == task and truth["seed"] == seed
    assert truth["generator"] == "cooplab.tasks.science.datasets v1"
    assert truth["description"] == D.TASK_DESCRIPTIONS[task]
    assert isinstance(truth["equations"], str) and len(truth["equations"]) > 40
    assert isinstance(truth["details"], dict) and truth["details"]
    facts = truth["facts"]
    assert 4 <= len(facts) <= 6
    assert len({f["id"] for f in facts}) == len(facts)
    for f in facts:
        assert {"id", "kind", "value", "context", "statement"} <= set(f), f
        assert f["kind"] in KINDS
        assert f["context"] and all(isinstance(c, str) and c == c.lower() for c in f["context"])
        assert isinstance(f["statement"], str) and f["statement"].endswith(".")
        if f["kind"] == "number":
            assert isinstance(f["value"], (int, float)) and not isinstance(f["value"], bool)
            assert isinstance(f["tolerance"], (int, float)) and f["tolerance"] >= 0
        elif f["kind"] == "set":
            assert f["value"] and all(isinstance(v, str) for v in f["value"])
            assert f["value"] == sorted(set(f["value"]))
        elif f["kind"] == "claim":
            assert isinstance(f["value"], bool)
        else:
            assert isinstance(f["value"], str) and f["value"]
        # the statement states the fact (a correct report would contain it)
        assert stated(f, f["statement"]), f


def test_set_items_are_tokens_of_the_data(made):
    """Set items and labels are names a report writes literally: columns of the CSV (or links)."""
    for (task, seed), (ds, _) in made.items():
        columns = set(pd.read_csv(ds.data_path, nrows=1).columns)
        for f in ds.truth["facts"]:
            items = f["value"] if f["kind"] == "set" else [f["value"]] if f["kind"] == "label" else []
            for item in items:
                parts = item.split("->") if task == "ecology" else [item]
                assert set(parts) <= columns, (task, seed, item)


def test_task_list_and_descriptions():
    assert D.TASKS == ("ecology", "anomaly", "biomarker", "geospatial")
    assert set(D.TASK_DESCRIPTIONS) == set(D.TASKS)
    assert "8-12 sensors" in D.TASK_DESCRIPTIONS["anomaly"]
    assert "spatial cross-validation" in D.TASK_DESCRIPTIONS["geospatial"]


@pytest.mark.parametrize("task", D.TASKS)
def test_small_size_is_smaller_and_still_recoverable(task, made, tmp_path):
    ds = D.generate(task, 0, str(tmp_path / "small"), size="small")  # a str path is fine too
    assert ds.n_rows < made[task, 0][0].n_rows
    got = run_oracle_locally(task, ds.data_path)
    assert all(recovered_ok(f, got.get(f["id"])) for f in ds.truth["facts"])


@pytest.mark.parametrize(
    "task,seed,size,needle",
    [
        ("ecologyy", 0, "default", "unknown science task"),
        (None, 0, "default", "unknown science task"),
        ("ecology", -1, "default", "non-negative int"),
        ("ecology", 1.5, "default", "non-negative int"),
        ("ecology", True, "default", "non-negative int"),
        ("ecology", "3", "default", "non-negative int"),
        ("ecology", 0, "huge", "unknown dataset size"),
    ],
)
def test_bad_arguments_give_one_line_value_errors(task, seed, size, needle, tmp_path):
    with pytest.raises(ValueError) as err:
        D.generate(task, seed, tmp_path, size=size)
    msg = str(err.value)
    assert needle in msg and "\n" not in msg
    assert "use one of" in msg or "pass e.g." in msg
    assert not any(tmp_path.iterdir())


# --- the oracle ---------------------------------------------------------------------------------


@pytest.mark.parametrize("task,seed", CASES)
def test_oracle_recovers_every_fact(task, seed, made):
    ds, got = made[task, seed]
    wrong = [
        (f["id"], f["value"], got.get(f["id"])) for f in ds.truth["facts"] if not recovered_ok(f, got.get(f["id"]))
    ]
    assert not wrong


@pytest.mark.parametrize("seed", SEEDS)
def test_oracle_finds_the_anomalies_where_they_were_put(seed, made):
    ds, got = made["anomaly", seed]
    truth = ds.truth["details"]["anomalies"]
    for kind in ("point", "contextual"):
        assert {(e["sensor"], e["index"]) for e in got[kind]} == {(e["sensor"], e["index"]) for e in truth[kind]}
    assert len(got["collective"]) == len(truth["collective"])
    for g, t in zip(got["collective"], truth["collective"], strict=False):
        assert g["sensor"] == t["sensor"]
        assert abs(g["start"] - t["start"]) <= 5 and abs(g["end"] - t["end"]) <= 5


@pytest.mark.parametrize("seed", SEEDS)
def test_oracle_reproduces_the_reference_numbers(seed, made):
    ds, got = made["geospatial", seed]
    ref = ds.truth["details"]["cv_rmse"]
    for key, value in ref.items():
        assert got["cv_rmse"][key] == pytest.approx(value, abs=1e-3)
    assert got["cv_rmse"]["knn_residual_spatial"] > got["cv_rmse"]["knn_residual_random"]
    ds, got = made["ecology", seed]
    rmse = next(f for f in ds.truth["facts"] if f["id"] == "forecast_baseline_rmse")["value"]
    assert got["forecast_baseline_rmse"] == pytest.approx(rmse, abs=1e-4)


@pytest.mark.parametrize("task", D.TASKS)
def test_oracle_code_is_sandbox_safe(task):
    code = ORACLE_CODE[task]
    compile(code, task, "exec")
    imported = set()
    for line in code.splitlines():
        m = re.match(r"\s*(?:import|from)\s+([\w.]+(?:\s*,\s*[\w.]+)*)", line)
        if m:
            imported |= {name.strip().split(".")[0] for name in m.group(1).split(",")}
    assert imported <= {"json", "math", "numpy", "pandas"}, imported
    assert "scipy" not in code and "sklearn" not in code
    assert 'print("ORACLE_RESULT " + json.dumps(result))' in code.splitlines()[-2]
    assert "read_csv" not in code  # the sandbox preloads df


def test_oracle_output_parsing():
    assert parse_oracle_output('noise\nORACLE_RESULT {"a": 1}\n') == {"a": 1}
    assert parse_oracle_output('ORACLE_RESULT {"a": 1}\nORACLE_RESULT {"a": 2}') == {"a": 2}
    with pytest.raises(ValueError, match="no ORACLE_RESULT"):
        parse_oracle_output("Traceback ...")


# --- reports ------------------------------------------------------------------------------------


def sections(text: str) -> dict[str, str]:
    parts = re.split(r"^#{1,2} +(.+?)\s*$", text, flags=re.M)
    return {parts[i].strip(): parts[i + 1].strip() for i in range(1, len(parts) - 1, 2)}


@pytest.mark.parametrize("task,seed", CASES)
def test_oracle_report_states_every_fact_in_seven_sections(task, seed, made):
    ds, got = made[task, seed]
    text = oracle_report(task, got, ds.truth)
    secs = sections(text)
    for name in SECTIONS:
        body = secs[name]
        sentences = [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z(])", body) if len(s) > 20]
        assert 2 <= len(sentences) <= 5, (name, len(sentences))
    assert re.search(r"\bp (=|<) ", text)  # a statistical test with its p-value
    assert "dataset_description" in text and "evaluation_report" in text
    assert len(re.findall(r"\d+\.\d+", text)) >= 8
    missing = [f["id"] for f in ds.truth["facts"] if not stated(f, text)]
    assert not missing
    assert "nan" not in text.lower().replace("nano", "")


@pytest.mark.parametrize("task,seed", CASES)
def test_garbage_and_wrong_reports_are_what_they_claim(task, seed, made):
    ds, _ = made[task, seed]
    junk = garbage_report(task)
    assert not re.search(r"\d", junk) and "## " not in junk and len(junk) < 600
    assert not any(stated(f, junk) for f in ds.truth["facts"] if f["kind"] != "claim")
    bad = wrong_report(task, ds.truth)
    assert set(SECTIONS) <= set(sections(bad))
    assert "nan" not in bad.lower() and "n/a" not in bad
    for f in ds.truth["facts"]:
        if f["kind"] in ("number", "label"):
            assert not stated(f, bad), f["id"]


# --- with the report scorer (cooplab.evals.science_scoring) -------------------------------------


@pytest.fixture(scope="module")
def scoring():
    return pytest.importorskip("cooplab.evals.science_scoring")


@pytest.mark.parametrize("task,seed", CASES)
def test_the_scorer_can_verify_every_fact(task, seed, made, scoring):
    ds, _ = made[task, seed]
    assert scoring.truth_problems(ds.truth) == []


@pytest.mark.parametrize("task,seed", CASES)
def test_oracle_garbage_and_wrong_reports_calibrate_the_scorer(task, seed, made, scoring):
    ds, got = made[task, seed]
    good = scoring.heuristic_score(oracle_report(task, got, ds.truth), ds.truth)
    junk = scoring.heuristic_score(garbage_report(task), ds.truth)
    bad = scoring.heuristic_score(wrong_report(task, ds.truth), ds.truth)
    assert good.completeness == 1.0 and good.quality >= 0.9 and good.accuracy >= 0.9, good
    assert junk.completeness == 0.0 and junk.quality <= 0.25 and junk.accuracy == 0.0, junk
    assert bad.completeness == 1.0 and bad.quality >= 0.9 and bad.accuracy <= 0.2, bad
