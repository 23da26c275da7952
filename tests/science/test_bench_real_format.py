"""A suite in the real InfiAgent-DABench format, with the messy shapes of its dev set (issue 29,
item 18), and the answer comparison under hostile answers and labels.

The fixture (tests/science/data/dabench: questions.jsonl, labels.jsonl, tables/, answers.jsonl;
our own questions and tables, in the benchmark's file format: integer ids, concepts lists,
levels) holds labels that are an empty string, a bare NaN, the text "nan", a name given twice
with the same value and with different values, a dict-shaped answer inside a format, a list
inside the brackets of an answer, labels in single and double quotes, a JSON list and a list
written as text; items whose table is missing, whose id repeats an earlier one, whose format has
no answer part; and an answer @x[1e999999999]. Every item is loaded, the runnable ones run (the
scripted answers team, one analyst, local sandbox), correct answers score correct, and the
others are listed with the reason, on the first run and on every rerun."""

from __future__ import annotations

import json
import random
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest

from cooplab.cli import main
from cooplab.tasks.science import bench
from cooplab.tasks.science.bench_answers import MAX_EXPONENT, answer_parts, label_value, number, parse_value, same

D = Path(__file__).resolve().parent / "data" / "dabench"
QUESTIONS, LABELS, TABLES, ANSWERS = D / "questions.jsonl", D / "labels.jsonl", D / "tables", D / "answers.jsonl"


def bench_run(capsys, out):
    code = main(
        [
            "bench",
            "science",
            str(QUESTIONS),
            "--tables",
            str(TABLES),
            "--labels",
            str(LABELS),
            "--team",
            f"answers:{ANSWERS}",
            "--team-size",
            "1",
            "--sandbox-backend",
            "local",
            "--cache",
            "off",
            "--parallel",
            "2",
            "--out",
            str(out),
            "--json",
        ]
    )
    o, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(o)


def test_every_item_of_a_real_format_suite_loads_runs_or_says_why(tmp_path, capsys):
    s = bench_run(capsys, tmp_path / "b")
    df = pd.read_parquet(tmp_path / "b" / "results.parquet")
    assert len(df) == 15 and s["items"] == 15  # every line of the suite is a row
    why = {int(line): w for line, w in zip(df["line"], df["why_not_scored"], strict=True) if isinstance(w, str)}
    assert set(why) == {6, 13, 14, 15}, why
    assert "'top_city' is given twice with different values" in why[6]
    assert why[13].startswith("not run: file_name 'missing_table.csv' is not a file under --tables")
    assert why[14] == "not run: duplicate id '0' (first on line 1)"
    assert "has no @name[...] answer part" in why[15]
    assert sorted(s["ran"]) == sorted(str(i) for i in range(12)) and not s["failed"]
    # correct answers are scored correct: quoted, listed, dict-shaped, empty, nan, a name given twice
    scored = df[df["correct"].notna()].set_index("id")
    assert sorted(scored.index, key=int) == ["0", "1", "2", "3", "4", "6", "7", "8", "9", "10", "11"]
    assert scored["correct"].astype(bool).to_dict() == {**{i: True for i in scored.index}, "11": False}
    assert json.loads(scored.loc["11", "answers"]) == {"mean_age": "1e999999999"}  # read, and simply wrong
    assert json.loads(scored.loc["7", "expected"]) == {"age_range": '["22", "54"]'}
    assert s["scored"] == 11 and s["correct"] == 10 and s["accuracy"] == pytest.approx(10 / 11)
    assert [n["id"] for n in s["not_scored"]] == ["5", "12", "0", "13"]
    report = (tmp_path / "b" / "report.md").read_text()
    assert "## Items not scored" in report and "is given twice with different values" in report
    # a rerun reads every answer again (also @mean_age[1e999999999]) and writes the same summary
    again = bench_run(capsys, tmp_path / "b")
    assert (
        sorted(again["skipped"]) == sorted(s["ran"])
        and again["correct"] == 10
        and again["not_scored"] == s["not_scored"]
    )


@pytest.mark.parametrize(
    "label,answer,ok",
    [
        ("100", "1,0,0", False),
        ("100", "10,0", False),
        ("1000", "1,000", True),
        ("1234.5", "1,234.46", True),
        ("1e3", "1000", True),
        ("1e3", "1000.4", True),
        ("1e3", "600", False),
        ("1e3", "1400", False),
        ("1.5e3", "1500.2", True),
        ("12", "1e999999999", False),
        ("1e999999999", "1e999999999", True),
        ("12", "-1e-999999999", False),
        ("0", "0e999999999", False),
        ("nan", "NaN", True),
        ("nan", "0", False),
        ("", "", True),
        ("", "''", True),
        ("", "0", False),
        ("'Male'", "male", True),
        ('"Oslo"', "'oslo'", True),
        ("'12'", "12.4", True),
        ("0.35", "'0.351'", True),
        ("12%", "12", True),
        ("12", "12%", True),
    ],
)
def test_scalar_labels(label, answer, ok):
    assert bench.match(label, answer) is ok


@pytest.mark.parametrize(
    "label,answer,ok",
    [
        (["a", "b"], "b, a", True),
        (["a", "b"], "[a, b, c]", False),
        ([1, 2], "[2.0, 1]", True),
        ([1, 2], "[1, 1]", False),
        ("['x', 'y']", "['y', 'x']", True),
        ("[1, 2]", "(1, 2)", True),
        ([5], "5", True),
        ([], "[]", True),
        ([], "", True),
        ("{'a': 1.5, 'b': [1, 2]}", "{'B': [2, 1], 'a': 1.52}", True),
        ("{'a': 1.5}", "{'a': 1.6}", False),
        ({"a": "x"}, "{'a': 'x', 'b': 'y'}", False),
        ({"a": "x"}, "x", False),
        ("men's, women's", "men's, women's", True),
    ],
)
def test_lists_and_dicts(label, answer, ok):
    assert same(label_value(label), answer) is ok


def test_answer_parts_with_brackets_inside():
    text = "@a[[1, [2, 3]]] then @b[{'k': [4]}] then @c[unclosed and @d[] end\n@e[x\ny] @f[ 7 ]"
    assert answer_parts(text) == [("a", "[1, [2, 3]]"), ("b", "{'k': [4]}"), ("d", ""), ("f", "7")]
    assert bench.extract("@m[1] and later @m[2]") == {"m": "2"}
    assert answer_parts("@x[" + "[" * 50_000 + "]" * 50_000 + "]") == []  # longer than a value may be, linear time


# --- a property test over hostile answers and labels (seeded; hypothesis is not installed) ---------------
ATOMS = [
    "0",
    "-0",
    "1",
    "12",
    "0.35",
    "1e3",
    "1E-5",
    "1e999999999",
    "-1e-999999999",
    "9" * 400,
    "1,0,0",
    "1,000",
    ",",
    ".",
    "e5",
    "nan",
    "NaN",
    "inf",
    "-Infinity",
    "",
    " ",
    "'",
    '"',
    "''",
    "[",
    "]",
    "{",
    "}",
    "(",
    ")",
    ":",
    "@",
    "@x[",
    "%",
    "\n",
    "\u0000",
    "\ud800",
    "é",
    "Male",
    "'Oslo'",
    "[1, 2]",
    "{'a': 1}",
    "[[[[",
    "]]]]",
    "{'a': [",
    "1.",
    ".5",
    "+",
    "-",
]


def hostile(rng: random.Random) -> str:
    return "".join(rng.choice(ATOMS) for _ in range(rng.randint(0, 8)))


def test_hostile_answers_and_labels_never_raise_and_equal_values_match():
    rng = random.Random(29)
    for _ in range(4000):
        label, answer = hostile(rng), hostile(rng)
        got = same(parse_value(label), answer)  # never raises, never overflows
        assert isinstance(got, bool) and isinstance(bench.match(label, answer), bool)
        if label.strip() and answer == label:
            assert same(parse_value(label), answer), label  # a value always matches itself
        n = number(answer)
        assert n is None or (n.is_finite() and abs(n.adjusted()) <= MAX_EXPONENT)
        for name, value in answer_parts(f"@q[{answer}] " + answer):
            assert name and "\n" not in value
    for _ in range(500):  # hostile JSON label values, with a line around them
        v = rng.choice(
            [float("nan"), float("inf"), -0.0, 1e308, 10**400, True, None, [], {}, [[[]]], {"": [1]}, hostile(rng)]
        )
        try:
            lab = label_value(v)
        except ValueError:
            assert v is None
            continue
        assert isinstance(same(lab, hostile(rng)), bool)


def test_numbers_are_compared_at_the_precision_written_out_in_full():
    rng = random.Random(7)
    for _ in range(2000):
        digits = rng.randint(0, 6)
        x = Decimal(rng.randint(-(10**7), 10**7)).scaleb(-digits)
        label = f"{x:f}"
        half = Decimal(5).scaleb(-digits - 1)
        assert bench.match(label, f"{x + half:f}") and bench.match(label, f"{x - half:f}")
        assert not bench.match(label, f"{x + 3 * half:f}") and not bench.match(label, f"{x - 3 * half:f}")
        assert bench.match(f"{x:e}", f"{x:f}")  # the same number in scientific notation
