"""JSON nested absurdly deep (issue 29, item 19): every JSON file a user hands to cooplab is read by
one helper, :func:`cooplab.limits.parse_json`, which turns a file nested deeper than
``MAX_JSON_DEPTH`` levels (40,000 stopped Python's parser with RecursionError, reported as an
internal error) into the usual one-line error naming the file: exit 2, before any work."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cooplab.cli import main
from cooplab.limits import MAX_JSON_DEPTH, ConfigError, json_depth, parse_json, parse_set

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "examples" / "bench-suite"
DEEP = 40_000


def nested(levels: int, inner: str = "1") -> str:
    return "[" * levels + inner + "]" * levels


# --- the helper --------------------------------------------------------------------------------
@pytest.mark.parametrize("levels", [MAX_JSON_DEPTH + 1, 900, DEEP])
def test_too_deep_is_one_line_naming_the_file(levels):
    with pytest.raises(ConfigError) as info:
        parse_json(nested(levels), "x.json")
    msg = str(info.value)
    assert msg.startswith("x.json: ") and f"more than {MAX_JSON_DEPTH} levels" in msg and "\n" not in msg


def test_objects_count_like_arrays_and_the_cap_itself_is_fine():
    assert json_depth(parse_json(nested(MAX_JSON_DEPTH), "x")) == MAX_JSON_DEPTH
    deep_obj = '{"a": ' * (MAX_JSON_DEPTH + 1) + "1" + "}" * (MAX_JSON_DEPTH + 1)
    with pytest.raises(ConfigError, match="levels deep"):
        parse_json(deep_obj, "x")
    assert json_depth(1) == 0 and json_depth({"a": [1, {"b": []}]}) == 4


def test_the_error_class_and_constants_are_the_callers():
    class Mine(ValueError):
        pass

    with pytest.raises(Mine, match=r"^f line 3: not valid JSON \(NaN is not allowed\)$"):
        parse_json(
            "[NaN]",
            "f line 3",
            error=Mine,
            parse_constant=lambda c: (_ for _ in ()).throw(ValueError(f"{c} is not allowed")),
        )
    with pytest.raises(Mine, match="not valid JSON"):
        parse_json(b"\xff", "f", error=Mine)


def test_a_deep_set_value_is_kept_as_text_not_a_crash():
    assert parse_set([f"x={nested(DEEP)}"], ["x"], "cpr")["x"].startswith("[[[")


# --- the six inputs, through the command line ----------------------------------------------------
@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("run") / "rule"
    assert main(["run", "cpr", "--n-agents", "3", "--rounds", "2", "--out", str(out), "-q"]) == 0
    return out


def _suite(tmp: Path) -> tuple[list[str | Path], Path]:
    (tmp / "suite.jsonl").write_text(json.dumps({"id": "q1"})[:-1] + f', "question": {nested(DEEP)}}}\n')
    out = tmp / "out"
    return [
        "bench",
        "science",
        tmp / "suite.jsonl",
        "--tables",
        BENCH / "tables",
        "--team",
        f"answers:{BENCH / 'answers-correct.jsonl'}",
        "--out",
        out,
        "-q",
    ], out


def _labels(tmp: Path) -> tuple[list[str | Path], Path]:
    (tmp / "labels.jsonl").write_text(
        (BENCH / "labels.jsonl").read_text() + f'{{"id": "q99", "common_answers": {nested(DEEP)}}}\n'
    )
    out = tmp / "out"
    return [
        "bench",
        "science",
        BENCH / "suite.jsonl",
        "--tables",
        BENCH / "tables",
        "--labels",
        tmp / "labels.jsonl",
        "--team",
        f"answers:{BENCH / 'answers-correct.jsonl'}",
        "--out",
        out,
        "-q",
    ], out


def _truth(tmp: Path) -> tuple[list[str | Path], Path]:
    (tmp / "data.csv").write_text("a,b\n1,2\n3,4\n")
    (tmp / "task.md").write_text("How are a and b related?\n")
    (tmp / "truth.json").write_text(nested(DEEP))
    out = tmp / "out"
    return [
        "run",
        "science",
        "--dataset",
        tmp / "data.csv",
        "--task-file",
        tmp / "task.md",
        "--truth",
        tmp / "truth.json",
        "--out",
        out,
        "-q",
    ], out


def _sweep(tmp: Path) -> tuple[list[str | Path], Path]:
    (tmp / "sweep.json").write_text('{"task": "cpr", "out": "%s", "grid": %s}' % (tmp / "out", nested(DEEP)))
    return ["sweep", tmp / "sweep.json"], tmp / "out"


def _scripted(tmp: Path) -> tuple[list[str | Path], Path]:
    (tmp / "script.json").write_text('{"answers": %s}' % nested(DEEP, '"{}"'))
    out = tmp / "out"
    return [
        "run",
        "cpr",
        "--agents",
        "llm",
        "--model",
        f"scripted:{tmp / 'script.json'}",
        "--n-agents",
        "3",
        "--rounds",
        "1",
        "--cache",
        "off",
        "--out",
        out,
        "-q",
    ], out


INPUTS = {
    "bench suite line": _suite,
    "labels line": _labels,
    "--truth": _truth,
    "sweep config": _sweep,
    "scripted: file": _scripted,
}
NAMES = {
    "bench suite line": "suite.jsonl line 1",
    "labels line": "labels.jsonl line 21",
    "--truth": "truth.json",
    "sweep config": "sweep.json",
    "scripted: file": "script.json",
    "resumed config.json": "config.json",
}


@pytest.mark.parametrize("case", [*INPUTS, "resumed config.json"])
def test_a_deeply_nested_input_is_one_line_exit_2(case, tmp_path, capsys, finished_run):
    if case == "resumed config.json":
        out = tmp_path / "run"
        shutil.copytree(finished_run, out)
        (out / "config.json").write_text('{"task": "cpr", "params": %s}' % nested(DEEP))
        before = sorted(p.name for p in out.iterdir())
        args = ["resume", out, "-q"]
    else:
        args, out = INPUTS[case](tmp_path)
    code = main([str(a) for a in args])
    err = capsys.readouterr().err
    assert code == 2, err
    assert (
        err.count("\n") == 1
        and err.startswith("cooplab: error: ")
        and "Traceback" not in err
        and "internal error" not in err
    )
    assert NAMES[case] in err and f"more than {MAX_JSON_DEPTH} levels deep" in err
    if case == "resumed config.json":
        assert sorted(p.name for p in out.iterdir()) == before  # nothing written into the run directory
    else:
        assert not out.exists()  # refused before any work
