"""Benchmark mode (``cooplab bench science``): the example suite under examples/bench-suite run
by the scripted ``answers:`` team through the real graph, local sandbox and ledger. Correct
answers score 100%, perturbed and malformed answers lose exactly their items, a resumed bench
skips finished items without charging them again, hostile suite/label lines are one line (exit
2) naming the line, and the precision rule holds on hand-computed cases."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pandas as pd
import pytest

from cooplab.cli import main
from tests.helpers.cli import fail_line
from cooplab.tasks.science import bench

EX = Path(__file__).resolve().parents[2] / "examples" / "bench-suite"
SUITE, TABLES, LABELS = EX / "suite.jsonl", EX / "tables", EX / "labels.jsonl"


def run_bench(capsys, out, answers, *extra):
    code = main(["bench", "science", str(SUITE), "--tables", str(TABLES), "--labels", str(LABELS), "--team", f"answers:{answers}",
                 "--sandbox-backend", "local", "--cache", "off", "--parallel", "2", "--out", str(out), "--json", *extra])
    o, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(o)


@pytest.fixture(scope="module")
def correct_bench(tmp_path_factory):
    """The whole example suite with the correct answers (run once for the module)."""
    out = tmp_path_factory.mktemp("bench") / "correct"
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(["bench", "science", str(SUITE), "--tables", str(TABLES), "--labels", str(LABELS), "--team",
                     f"answers:{EX / 'answers-correct.jsonl'}", "--sandbox-backend", "local", "--cache", "off", "--parallel", "2",
                     "--out", str(out), "--json"])
    assert code == 0
    return out, json.loads(buf.getvalue())


def test_correct_answers_score_100_percent_with_every_output(correct_bench):
    out, s = correct_bench
    n = sum(1 for line in SUITE.read_text().splitlines() if line.strip())
    assert 15 <= n <= 25
    assert s["items"] == s["scored"] == s["correct"] == n and s["accuracy"] == 1.0
    assert s["sub_correct"] == s["sub_answers"] > n  # some items have several sub-answers
    lo, hi = s["ci95"]
    assert hi == 1.0 and lo == pytest.approx(bench.wilson(n, n)[0])
    assert s["cost_usd"] > 0 and s["cost_per_correct_usd"] == pytest.approx(s["cost_usd"] / n, rel=1e-3)
    assert s["tokens_in"] > 0 and s["statuses"] == {"completed": n}
    assert set(s["by_level"]) == {"easy", "medium", "hard"}
    assert {"summary", "correlation", "distribution", "outliers", "features", "model"} <= set(s["by_concept"])
    df = pd.read_parquet(out / "results.parquet")
    assert len(df) == n and df["correct"].all() and (df["answer_source"] == "final_paper").all()
    assert (df["cost_usd"] > 0).all() and df["wall_seconds"].notna().all()
    assert json.loads((out / "summary.json").read_text())["correct"] == n
    report = (out / "report.md").read_text()
    assert "## By level" in report and "## By concept" in report and "cost per correct answer" in report
    assert (out / "figures" / "accuracy-cost.png").stat().st_size > 1000
    paper = sorted((out / "items" / "q01" / "artifacts").glob("final_paper.v*.md"))[-1].read_text()
    assert "@mean_unit_price[" in paper  # the answer went through the graph into the final artifact


def test_perturbed_and_malformed_answers_lose_exactly_those_items(tmp_path, capsys):
    rows = [json.loads(x) for x in (EX / "answers-correct.jsonl").read_text().splitlines()][:8]
    labels = {json.loads(x)["id"]: json.loads(x)["common_answers"] for x in LABELS.read_text().splitlines()}
    wrong = {"q02", "q05", "q07"}
    for r in rows:
        if r["id"] in wrong:  # the first sub-answer moved by 3 units of the label's last digit
            name, value = labels[r["id"]][0]
            step = 10 ** -(len(value.split(".")[1]) if "." in value else 0)
            r["answer"] = f"@{name}[{float(value) + 3 * step}]"
    rows[0]["answer"] = "@mean_unit_price[about nineteen"  # q01: malformed (no closing bracket)
    rows[2]["answer"] = "@top_region[north] @top_region_orders[n/a]"  # q03: text where a number belongs
    rows[3]["answer"] = ""  # q04: nothing at all
    f = tmp_path / "answers.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    s = run_bench(capsys, tmp_path / "b", f, "--limit", "8")
    df = pd.read_parquet(tmp_path / "b" / "results.parquet")
    assert set(df.loc[~df["correct"].astype(bool), "id"]) == wrong | {"q01", "q03", "q04"}
    assert s["correct"] == 2 and s["scored"] == 8 and s["statuses"] == {"completed": 8}
    q03 = df.set_index("id").loc["q03"]
    assert json.loads(q03["sub_correct"]) == {"top_region": True, "top_region_orders": False}


def test_resume_skips_finished_items_and_charges_nothing_again(correct_bench, tmp_path, capsys):
    src, s0 = correct_bench
    out = tmp_path / "resumed"
    shutil.copytree(src, out)
    (out / "items" / "q05" / "summary.json").unlink()  # interrupted after its last checkpoint
    shutil.rmtree(out / "items" / "q06")  # never started
    s = run_bench(capsys, out, EX / "answers-correct.jsonl")
    assert s["resumed"] == ["q05"] and s["ran"] == ["q06"] and len(s["skipped"]) == s0["items"] - 2
    assert s["cost_usd"] == pytest.approx(s0["cost_usd"]) and s["tokens_in"] == s0["tokens_in"]
    assert s["correct"] == s0["items"]
    s2 = run_bench(capsys, out, EX / "answers-correct.jsonl")
    assert s2["ran"] == [] and s2["resumed"] == [] and s2["cost_usd"] == pytest.approx(s0["cost_usd"])


def test_figure_of_several_benches(correct_bench, tmp_path, capsys):
    src, _ = correct_bench
    png = tmp_path / "f.png"
    assert main(["bench", "figure", str(src), str(src), "--out", str(png), "--json"]) == 0
    o = json.loads(capsys.readouterr().out)
    assert len(o["points"]) == 2 and o["points"][0]["accuracy"] == 1.0 and png.stat().st_size > 1000
    assert "is not a bench summary" in fail_line(capsys, ["bench", "figure", str(src / "items" / "q01"), "--out", str(png)])


GOOD = {"id": "a1", "question": "Mean?", "constraints": "2 decimals", "format": "@m[value]", "file_name": "orders.csv"}


@pytest.mark.parametrize("line,why", [
    ('{"id": "a1", "question": "Mean?"', "not valid JSON"),
    (json.dumps({k: v for k, v in GOOD.items() if k != "format"}), "format must be non-empty text"),
    (json.dumps({**GOOD, "file_name": "nope.csv"}), "is not a file under --tables"),
    (json.dumps({**GOOD, "file_name": "../suite.jsonl"}), "is not a file under --tables"),
    (json.dumps({**GOOD, "format": "the mean"}), "no @name[...] answer part"),
    (json.dumps({**GOOD, "id": "../x"}), "id '../x' must be"),
    (json.dumps({**GOOD, "id": "a0"}), "duplicate id 'a0' (first on line 1)"),
    ("[1, 2]", "expected a JSON object"),
])
def test_hostile_suite_lines_are_one_line_naming_the_line(tmp_path, capsys, line, why):
    p = tmp_path / "suite.jsonl"
    p.write_text(json.dumps({**GOOD, "id": "a0"}) + "\n" + line + "\n")
    msg = fail_line(capsys, ["bench", "science", str(p), "--tables", str(TABLES), "--team", "answers:x", "--out", str(tmp_path / "o")])
    assert f"suite {p} line 2: " in msg and why in msg, msg
    assert not (tmp_path / "o" / "items").exists()


@pytest.mark.parametrize("line,why", [
    ('{"id": "a1", "common_answers": [["m", NaN]]}', "not valid JSON (NaN is not allowed)"),
    ('{"id": "a1", "common_answers": [["m", "nan"]]}', "must be finite"),
    ('{"id": "a1", "common_answers": [["m"]]}', "[name, value] pairs"),
    ('{"id": "a1", "common_answers": []}', "non-empty list"),
    ('{"id": "a0", "common_answers": [["m", 1]]}', "duplicate id 'a0'"),
])
def test_hostile_label_lines(tmp_path, capsys, line, why):
    s = tmp_path / "suite.jsonl"
    s.write_text(json.dumps(GOOD) + "\n")
    lab = tmp_path / "labels.jsonl"
    lab.write_text('{"id": "a0", "common_answers": [["m", 1]]}\n' + line + "\n")
    msg = fail_line(capsys, ["bench", "science", str(s), "--tables", str(TABLES), "--labels", str(lab), "--team", "answers:x",
                             "--out", str(tmp_path / "o")])
    assert f"labels {lab} line 2: " in msg and why in msg, msg


def test_bad_options_are_one_line(tmp_path, capsys):
    base = ["bench", "science", str(SUITE), "--tables", str(TABLES), "--out", str(tmp_path / "o")]
    assert "--team must be llm or answers:FILE" in fail_line(capsys, base + ["--team", "oracle"])
    assert "answers" in fail_line(capsys, base + ["--team", f"answers:{tmp_path / 'missing.jsonl'}"])
    assert "not both" in fail_line(capsys, base + ["--budget", "1", "--budget-per-item", "0.1", "--team", "llm"])
    assert "--team-size" in fail_line(capsys, base + ["--team-size", "4"])
    assert "--tables" in fail_line(capsys, ["bench", "science", str(SUITE), "--tables", str(tmp_path / "none"), "--out", str(tmp_path)])
    assert "scripted model file" in fail_line(capsys, base + ["--team", "llm", "--model", f"scripted:{tmp_path / 'nope.json'}"])
    assert not (tmp_path / "o").exists()  # nothing written: a corrected rerun is not refused as "other settings"


@pytest.mark.parametrize("label,answer,ok", [
    ("0.35", "0.3512", True), ("0.35", "0.36", False), ("0.35", "0.354999", True), ("0.35", "0.3551", False),
    ("0.35", "0.345", True), ("0.35", "0.3449", False), ("12", "12.4", True), ("12", "12.6", False), ("12", "12", True),
    ("-0.86", "-0.8612", True), ("-0.86", "0.86", False), ("1e-05", "0.0000104", True), ("1e-05", "0.000016", False),
    ("3.626", "3,626", False), ("1234.5", "1,234.46", True), ("0.35", "abc", False), ("0.35", "", False), ("0.35", None, False),
    ("North", "  north ", True), ("north", "'North'", True), ("north", "northeast", False), ("yes", "Yes", True),
    ("0.35", "nan", False), ("0.35", "inf", False),
])
def test_precision_rule_by_hand(label, answer, ok):
    assert bench.match(label, answer) is ok


def test_extraction_last_answer_wins_and_ignores_broken_parts():
    text = "Template @m[value]. We computed @m[0.1], then corrected: @m[ 0.25 ]. Broken: @n[1.0 and @k[] end."
    assert bench.extract(text) == {"m": "0.25", "k": ""}
    assert bench.score_item([("m", "0.25"), ("n", "1")], bench.extract(text)) == \
        {"correct": False, "n_sub": 2, "n_sub_correct": 1, "sub": {"m": True, "n": False}}


def test_wilson_interval_by_hand():
    assert bench.wilson(0, 0) == (None, None)
    lo, hi = bench.wilson(20, 20)
    assert lo == pytest.approx(0.8389, abs=1e-4) and hi == 1.0
    lo, hi = bench.wilson(5, 10)  # p = 0.5: symmetric, half-width z*sqrt(.25/10 + z^2/400)/(1 + z^2/10)
    z = 1.959963984540054
    half = z * math.sqrt(0.25 / 10 + z * z / 400) / (1 + z * z / 10)
    assert (lo, hi) == (pytest.approx(0.5 - half), pytest.approx(0.5 + half))


def test_help_of_bench_commands(capsys):
    for cmd in (["bench", "science", "--help"], ["bench", "figure", "--help"]):
        assert main(cmd) == 0
    text = capsys.readouterr().out
    assert "--budget-per-item" in text and "--executor" in text and "--seed" in text and "Wilson" in text


def test_team_size_one_is_four_leads_without_deliberation(tmp_path, capsys):
    s = run_bench(capsys, tmp_path / "solo", EX / "answers-correct.jsonl", "--limit", "2", "--team-size", "1")
    assert s["team_size"] == 1 and s["correct"] == 2
    d = tmp_path / "solo" / "items" / "q01"
    cfg = json.loads((d / "config.json").read_text())
    assert cfg["params"]["team_size"] == 1
    loops = pd.read_parquet(d / "tool_loops.parquet")
    assert set(loops["agent"]) == {"data.0", "model.0", "eval.0", "writing.0"}  # only the four leads work
    assert not loops["phase"].str.contains("deliberate").any()
    base = pd.read_parquet(tmp_path / "solo" / "results.parquet")
    assert base["tokens_in"].gt(0).all()


def test_ray_executor_runs_the_items_and_resumes(tmp_path, capsys):
    import ray  # noqa: F401  (test.sh installs every extra; a missing Ray fails here, not skips)

    s = run_bench(capsys, tmp_path / "ray", EX / "answers-correct.jsonl", "--limit", "3", "--executor", "ray")
    assert s["executor"] == "ray" and sorted(s["ran"]) == ["q01", "q02", "q03"] and s["correct"] == 3
    again = run_bench(capsys, tmp_path / "ray", EX / "answers-correct.jsonl", "--limit", "3")  # finished items: skipped locally
    assert again["skipped"] == ["q01", "q02", "q03"] and again["cost_usd"] == pytest.approx(s["cost_usd"])


def test_rerun_with_other_settings_is_refused(correct_bench, tmp_path, capsys):
    src, _ = correct_bench
    out = tmp_path / "b"
    shutil.copytree(src, out)
    other = tmp_path / "answers.jsonl"
    other.write_text((EX / "answers-correct.jsonl").read_text().replace("north", "south"))
    base = ["bench", "science", str(SUITE), "--tables", str(TABLES), "--labels", str(LABELS), "--sandbox-backend", "local",
            "--out", str(out)]
    msg = fail_line(capsys, base + ["--team", f"answers:{other}"])
    assert "answers_sha256 differ" in msg
    assert "team_size differ" in fail_line(capsys, base + ["--team", f"answers:{EX / 'answers-correct.jsonl'}", "--team-size", "3"])


def test_make_suite_reproduces_the_shipped_files(tmp_path):
    import subprocess
    import sys

    subprocess.run([sys.executable, str(EX / "make_suite.py"), "--seed", "17", "--out", str(tmp_path)], check=True, capture_output=True)
    for rel in ("suite.jsonl", "labels.jsonl", "answers-correct.jsonl", "tables/orders.csv", "tables/sensors.csv", "tables/plants.csv"):
        assert (tmp_path / rel).read_bytes() == (EX / rel).read_bytes(), rel
