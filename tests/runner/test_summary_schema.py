"""summary.json through its schema (cooplab.graphs.runfiles): summaries written before the schema
(tests/runner/data/summaries: one per built-in task and kind of agents, made by the code of
2026-11-27, version 1) open typed and write back the same JSON, and damaging any one field of them
is one line naming the file and the field, never a traceback or a value read as a default."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from cooplab.graphs import runfiles
from cooplab.graphs.rundir import RunDirError
from cooplab.runs import registry

DATA = Path(__file__).parent / "data" / "summaries"
FIXTURES = sorted(p.stem for p in DATA.glob("*.json"))


def raw(name: str) -> dict:
    return json.loads((DATA / f"{name}.json").read_text())


def leaves(value, path=()):
    """(path, value) of every value inside ``value``, containers included (outermost first)."""
    yield path, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from leaves(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from leaves(v, (*path, i))


def damaged(value):
    """Values of the wrong type (or not finite) for a field holding ``value``."""
    if isinstance(value, bool):
        return ["yes"]
    if isinstance(value, (int, float)):
        return ["x", float("nan")]
    if isinstance(value, str):
        return [12345]
    if value is None:
        return [[1]]
    return ["x"]  # a list or an object


def put(doc, path, new):
    doc = json.loads(json.dumps(doc))
    at = doc
    for k in path[:-1]:
        at = at[k]
    at[path[-1]] = new
    return doc


def read(tmp_path: Path, doc) -> runfiles.RunSummary:
    text = json.dumps(doc, allow_nan=True) if not isinstance(doc, str) else doc
    (tmp_path / "summary.json").write_text(text)
    return runfiles.read_summary(tmp_path, lookup=registry.get)


@pytest.mark.parametrize("name", FIXTURES)
def test_old_summaries_open_typed_and_write_back_the_same(name, tmp_path):
    doc = raw(name)
    s = read(tmp_path, doc)
    task = registry.get(doc["task"])
    assert s.status == doc["status"] and s.task == doc["task"]
    if doc["status"] != "failed":
        assert isinstance(s.results, task.Results) and task.Results is not runfiles.FreeResults
        assert not s.results.model_extra, (
            f"fields the {doc['task']} results model does not name: {sorted(s.results.model_extra)}"
        )
    assert s.as_json() == {**doc, "version": runfiles.SUMMARY_VERSION}
    runfiles.write_summary(tmp_path, s)  # what is written reads back the same
    assert read(tmp_path, json.loads((tmp_path / "summary.json").read_text())).as_json() == s.as_json()


@pytest.mark.parametrize("name", FIXTURES)
def test_every_damaged_field_is_one_line_naming_it(name, tmp_path):
    doc = raw(name)
    where = str(tmp_path / "summary.json")
    silent, bad = [], []
    for path, value in list(leaves(doc))[1:]:
        field = ".".join(str(p) for p in path)
        for new in damaged(value):
            try:
                read(tmp_path, put(doc, path, new))
            except RunDirError as exc:
                line = str(exc)
                if "\n" in line or not line.startswith(where + ": ") or field not in line:
                    bad.append((field, new, line))
            else:
                silent.append((field, new))
    assert not silent, f"{name}: damage read without a word: {silent[:10]}"
    assert not bad, f"{name}: not one line naming the field: {bad[:5]}"


def test_each_missing_field_is_one_line(tmp_path):
    """Every field a run writes is required, but those written only when they apply (a stopped
    run's message, a failed run's log, the decisions of a run that made some). A version-1 file
    lacks the fields added since (``Results.since_v1``: "not recorded"); a version-2 file must have them."""
    optional = {
        "message",
        "error_log",
        "decisions",
        "convergence",
    }  # convergence: a game run without simulations has none
    for name in FIXTURES:
        doc = raw(name)
        since_v1 = set(registry.get(doc["task"]).Results.since_v1)
        for version in (None, runfiles.SUMMARY_VERSION):
            for key in doc:
                if key in optional or (version is None and key in since_v1):
                    continue
                damaged_doc = {k: v for k, v in doc.items() if k != key} | (
                    {} if version is None else {"version": version}
                )
                with pytest.raises(RunDirError) as got:
                    read(tmp_path, damaged_doc)
                line = str(got.value)
                assert "\n" not in line and line.startswith(str(tmp_path / "summary.json")) and key in line, (
                    name,
                    key,
                    line,
                )


@pytest.mark.parametrize(
    "doc, says",
    [
        ("[1, 2]", "must be a JSON object"),
        ("{", "not valid JSON"),
        ("", "not valid JSON"),
        ("{}", "task"),
        ('{"version": 99, "task": "cpr"}', "version 99"),
        ('{"version": "2", "task": "cpr"}', 'version "2"'),
    ],
)
def test_whole_file_damage_is_one_line(tmp_path, doc, says):
    with pytest.raises(RunDirError) as got:
        read(tmp_path, doc)
    assert "\n" not in str(got.value) and says in str(got.value)


@pytest.mark.parametrize(
    "path, new, says",
    [
        (("ledger", "calls"), 10**30, "ledger.calls"),  # huge
        (("ledger", "calls"), -1, "ledger.calls"),  # negative
        (("ledger", "cached_calls"), 10**6, "cached_calls"),  # more than the calls
        (("ledger", "cost_usd"), "Infinity", "ledger.cost_usd"),  # an exact amount that is not finite
        (("ledger", "cost_usd"), "1e999999999", "ledger.cost_usd"),
        (("survival_time", "mean"), float("inf"), "survival_time.mean"),
        (("message",), "x" * (runfiles.MAX_TEXT + 1), "message"),  # longer than any line cooplab writes
        (("status",), "done", "status"),
        (("seed",), 2**64, "seed"),
        (("collapse", "x" * 1000), 1, "collapse"),  # a name longer than any
    ],
)
def test_hostile_values_are_one_line(tmp_path, path, new, says):
    doc = raw("cpr-llm")
    with pytest.raises(RunDirError) as got:
        read(tmp_path, put(doc, path, new))
    line = str(got.value)
    assert "\n" not in line and says in line and len(line) < 600


def test_unknown_fields_are_kept_and_typed(tmp_path):
    """A field this cooplab does not name (a newer cooplab's, a task's added later) is kept and
    written back; it must still be JSON with finite numbers."""
    doc = {**raw("cpr-rule"), "newer_metric": {"mean": 1.5, "values": [1, 2]}}
    s = read(tmp_path, doc)
    assert s.results is not None
    assert s.results.model_extra == {"newer_metric": {"mean": 1.5, "values": [1, 2]}}
    assert s.as_json()["newer_metric"] == {"mean": 1.5, "values": [1, 2]}
    doc["ledger_extra"] = {"x": [1, float("nan")]}
    with pytest.raises(RunDirError, match=r"ledger_extra\.x\.1"):
        read(tmp_path, doc)


def test_run_open_says_one_line_for_a_damaged_summary(tmp_path):
    import cooplab

    (tmp_path / "config.json").write_text(json.dumps({"task": "cpr", "agents": "rule", "seed": 0}))
    (tmp_path / "summary.json").write_text(json.dumps(put(raw("cpr-rule"), ("efficiency", "values", 1), "high")))
    with pytest.raises(RunDirError) as got:
        cooplab.Run.open(tmp_path)
    assert (
        str(got.value)
        == f'{tmp_path / "summary.json"}: efficiency.values.1: Input should be a valid number (got "high")'
    )
    assert not math.isnan(0.0)
