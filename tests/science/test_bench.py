"""Benchmark mode (``cooplab bench science``): the example suite under examples/bench-suite run
by the scripted ``answers:`` team through the real graph, local sandbox and ledger. Correct
answers score 100%, perturbed and malformed answers lose exactly their items, a resumed bench
skips finished items without charging them again, a line that is no JSON object is one line (exit
2) naming it, an item or label that cannot be used is kept with its reason, and the precision
rule holds on hand-computed cases (the real benchmark's shapes: test_bench_real_format.py)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pandas as pd
import pytest

from cooplab.cli import main
from cooplab.runs.engine import ENGINE
from cooplab.tasks.science import bench
from tests.helpers.cli import fail_line

EX = Path(__file__).resolve().parents[2] / "examples" / "bench-suite"
SUITE, TABLES, LABELS = EX / "suite.jsonl", EX / "tables", EX / "labels.jsonl"


def cell(out: Path, item: str, seed: int = 0) -> Path:
    """An item's run directory in a bench folder (a cell of its grid sweep)."""
    return out / "cells" / f"item-{item}__s{seed}"


def run_bench(capsys, out, answers, *extra):
    code = main(
        [
            "bench",
            "science",
            str(SUITE),
            "--tables",
            str(TABLES),
            "--labels",
            str(LABELS),
            "--team",
            f"answers:{answers}",
            "--sandbox-backend",
            "local",
            "--cache",
            "off",
            "--parallel",
            "2",
            "--out",
            str(out),
            "--json",
            *extra,
        ]
    )
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
        code = main(
            [
                "bench",
                "science",
                str(SUITE),
                "--tables",
                str(TABLES),
                "--labels",
                str(LABELS),
                "--team",
                f"answers:{EX / 'answers-correct.jsonl'}",
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
    assert len(df) == n and bool(df["correct"].all()) and bool((df["answer_source"] == "final_paper").all())
    assert bool((df["cost_usd"] > 0).all()) and bool(df["wall_seconds"].notna().all())
    assert json.loads((out / "summary.json").read_text())["correct"] == n
    report = (out / "report.md").read_text()
    assert "## By level" in report and "## By concept" in report and "cost per correct answer" in report
    assert (out / "figures" / "accuracy-cost.png").stat().st_size > 1000
    paper = sorted((cell(out, "q01") / "artifacts").glob("final_paper.v*.md"))[-1].read_text()
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
    (cell(out, "q05") / "summary.json").unlink()  # interrupted after its last checkpoint
    shutil.rmtree(cell(out, "q06"))  # never started
    s = run_bench(capsys, out, EX / "answers-correct.jsonl")
    assert s["resumed"] == ["q05"] and s["ran"] == ["q06"] and len(s["skipped"]) == s0["items"] - 2
    assert s["cost_usd"] == pytest.approx(s0["cost_usd"]) and s["tokens_in"] == s0["tokens_in"]
    assert s["correct"] == s0["items"]
    s2 = run_bench(capsys, out, EX / "answers-correct.jsonl")
    assert s2["ran"] == [] and s2["resumed"] == [] and s2["cost_usd"] == pytest.approx(s0["cost_usd"])


def test_the_analysis_scores_with_the_labels_kept_in_the_folder_and_opens_no_path_from_it(correct_bench, tmp_path):
    src, s0 = correct_bench
    out = tmp_path / "copy"
    shutil.copytree(src, out)
    run = json.loads((out / bench.RUN_FILE).read_text())
    lines = [json.loads(x) for x in run["labels_text"].splitlines() if x.strip()]
    for obj in lines:
        if obj["id"] == "q01":  # the kept labels now disagree with q01's answer
            obj["common_answers"] = [[name, "123456789"] for name, _ in obj["common_answers"]]
    run["labels_text"] = "\n".join(json.dumps(o) for o in lines)
    run["labels_file"] = str(tmp_path / "not-a-labels-file")  # a path written in the folder is never opened
    (tmp_path / "not-a-labels-file").write_text("this is not JSON\n")
    (out / bench.RUN_FILE).write_text(json.dumps(run))
    s = bench.analyze(out, [])["bench"]
    assert s["correct"] == s0["correct"] - 1 and s["scored"] == s0["scored"]
    df = pd.read_parquet(out / "results.parquet").set_index("id")
    assert not bool(df.loc["q01", "correct"]) and bool(df.drop(index="q01")["correct"].all())


def test_figure_of_several_benches(correct_bench, tmp_path, capsys):
    src, _ = correct_bench
    png = tmp_path / "f.png"
    assert main(["bench", "figure", str(src), str(src), "--out", str(png), "--json"]) == 0
    o = json.loads(capsys.readouterr().out)
    assert len(o["points"]) == 2 and o["points"][0]["accuracy"] == 1.0 and png.stat().st_size > 1000
    assert "is not a bench summary" in fail_line(capsys, ["bench", "figure", str(cell(src, "q01")), "--out", str(png)])


GOOD = {"id": "a1", "question": "Mean?", "constraints": "2 decimals", "format": "@m[value]", "file_name": "orders.csv"}


@pytest.mark.parametrize(
    "line,why",
    [
        ('{"id": "a1", "question": "Mean?"', "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
    ],
)
def test_a_suite_line_that_is_no_json_object_is_one_line_naming_the_line(tmp_path, capsys, line, why):
    p = tmp_path / "suite.jsonl"
    p.write_text(json.dumps({**GOOD, "id": "a0"}) + "\n" + line + "\n")
    msg = fail_line(
        capsys,
        ["bench", "science", str(p), "--tables", str(TABLES), "--team", "answers:x", "--out", str(tmp_path / "o")],
    )
    assert f"suite {p} line 2: " in msg and why in msg, msg
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "line,why",
    [
        (json.dumps({k: v for k, v in GOOD.items() if k != "format"}), "format must be non-empty text"),
        (json.dumps({**GOOD, "file_name": "nope.csv"}), "is not a file under --tables"),
        (json.dumps({**GOOD, "file_name": "../suite.jsonl"}), "is not a file under --tables"),
        (json.dumps({**GOOD, "format": "the mean"}), "no @name[...] answer part"),
        (json.dumps({**GOOD, "id": "../x"}), "id '../x' must be"),
        (json.dumps({**GOOD, "id": "a0"}), "duplicate id 'a0' (first on line 1)"),
        (json.dumps({**GOOD, "id": "a0-"}), "id 'a0-' names the same run folder as id 'a0' (line 1)"),
    ],
)
def test_an_item_that_cannot_run_is_kept_with_its_reason(tmp_path, line, why):
    p = tmp_path / "suite.jsonl"
    p.write_text(json.dumps({**GOOD, "id": "a0"}) + "\n" + line + "\n")
    first, second = bench.load_suite(p, TABLES)
    assert first["problem"] is None and second["line"] == 2 and why in second["problem"], second["problem"]
    p.write_text(line + "\n")
    if why.startswith("duplicate") or "same run folder" in why:
        return
    with pytest.raises(bench.BenchError, match=f"no item of suite {p} can be run; the first: line 1: "):
        bench.run_bench(
            p,
            TABLES,
            tmp_path / "o",
            jobs_on=ENGINE,
            labels=None,
            team="llm",
            team_size=1,
            budget_per_item=None,
            budget=None,
            visibility="full",
            model="local",
            limit=None,
            seed=0,
            parallel=1,
            executor="local",
        )
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "line,why",
    [
        ('{"id": "a1", "common_answers": [["m"]]}', "common_answers item 1 is not a [name, value] pair"),
        ('{"id": "a1", "common_answers": []}', "non-empty list"),
        (
            '{"id": "a1", "common_answers": [["m", null]]}',
            "a label value must be text, a number, a list or an object, got null",
        ),
        ('{"id": "a1", "common_answers": [["m", 1], ["m", 2]]}', "'m' is given twice with different values (1 and 2)"),
        (
            '{"id": "a0", "common_answers": [["m", 2]]}',
            "labels line 2 gives id 'a0' again with other answers (first on line 1)",
        ),
    ],
)
def test_a_label_that_cannot_score_its_item_says_why(tmp_path, line, why):
    lab = tmp_path / "labels.jsonl"
    lab.write_text('{"id": "a0", "common_answers": [["m", 1]]}\n' + line + "\n")
    labels, notes = bench.load_labels(lab)
    bad = labels["a0" if "a0" in line else "a1"]
    assert why in (bad.problem or ""), bad
    assert bench.score_item(bad, {"m": "1"})["correct"] is None and notes == []


def test_labels_of_every_real_shape_load(tmp_path):
    lab = tmp_path / "labels.jsonl"
    lab.write_text(
        '{"id": 1, "common_answers": [["m", NaN], ["e", ""], ["q", "\'x\'"], ["l", [1, 2]], ["d", {"A": 1}]]}\n'
        '{"id": 1, "common_answers": [["m", NaN], ["e", ""], ["q", "\'x\'"], ["l", [1, 2]], ["d", {"A": 1}]]}\n'
        '{"id": "../x", "common_answers": [["m", 1]]}\n'
    )
    labels, notes = bench.load_labels(lab)
    assert labels["1"].problem is None and dict(labels["1"].pairs) == {
        "m": "nan",
        "e": "",
        "q": "'x'",
        "l": ["1", "2"],
        "d": {"a": "1"},
    }
    assert notes == ["labels line 3: id '../x' must be 1-100 letters, digits, '.', '_' or '-' (it names a directory)"]
    assert (
        bench.score_item(labels["1"], {"m": "NaN", "e": "", "q": "X", "l": "[2, 1]", "d": "{'a': 1.0}"})["correct"]
        is True
    )


def test_bad_options_are_one_line(tmp_path, capsys):
    base = ["bench", "science", str(SUITE), "--tables", str(TABLES), "--out", str(tmp_path / "o")]
    assert "--team must be llm or answers:FILE" in fail_line(capsys, base + ["--team", "oracle"])
    assert "answers" in fail_line(capsys, base + ["--team", f"answers:{tmp_path / 'missing.jsonl'}"])
    assert "not both" in fail_line(capsys, base + ["--budget", "1", "--budget-per-item", "0.1", "--team", "llm"])
    assert "--team-size" in fail_line(capsys, base + ["--team-size", "4"])
    assert "--tables" in fail_line(
        capsys, ["bench", "science", str(SUITE), "--tables", str(tmp_path / "none"), "--out", str(tmp_path)]
    )
    assert "scripted model file" in fail_line(
        capsys, base + ["--team", "llm", "--model", f"scripted:{tmp_path / 'nope.json'}"]
    )
    for flag, bad in (
        ("--price-in", "nan"),
        ("--price-out", "-1"),
        ("--temperature", "3"),
        ("--rps", "0"),
        ("--max-concurrency", "0"),
        ("--price-in", "1e400"),
    ):
        assert flag in fail_line(capsys, base + [flag, bad])
    assert not (tmp_path / "o").exists()  # nothing written: a corrected rerun is not refused as "other settings"


@pytest.mark.parametrize(
    "label,answer,ok",
    [
        ("0.35", "0.3512", True),
        ("0.35", "0.36", False),
        ("0.35", "0.354999", True),
        ("0.35", "0.3551", False),
        ("0.35", "0.345", True),
        ("0.35", "0.3449", False),
        ("12", "12.4", True),
        ("12", "12.6", False),
        ("12", "12", True),
        ("-0.86", "-0.8612", True),
        ("-0.86", "0.86", False),
        ("1e-05", "0.0000104", True),
        ("1e-05", "0.000016", False),
        ("3.626", "3,626", False),
        ("1234.5", "1,234.46", True),
        ("0.35", "abc", False),
        ("0.35", "", False),
        ("0.35", None, False),
        ("North", "  north ", True),
        ("north", "'North'", True),
        ("north", "northeast", False),
        ("yes", "Yes", True),
        ("0.35", "nan", False),
        ("0.35", "inf", False),
    ],
)
def test_precision_rule_by_hand(label, answer, ok):
    assert bench.match(label, answer) is ok


def test_extraction_last_answer_wins_and_ignores_broken_parts():
    text = "Template @m[value]. We computed @m[0.1], then corrected: @m[ 0.25 ]. Broken: @n[1.0 and @k[] end."
    assert bench.extract(text) == {"m": "0.25", "k": ""}
    assert bench.score_item(bench.Labels((("m", "0.25"), ("n", "1"))), bench.extract(text)) == {
        "correct": False,
        "n_sub": 2,
        "n_sub_correct": 1,
        "sub": {"m": True, "n": False},
        "why": None,
    }


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


def test_team_size_one_is_a_single_analyst(tmp_path, capsys):
    """--team-size 1 is the baseline of the benchmark papers: one agent, one tool loop, no teams."""
    s = run_bench(capsys, tmp_path / "solo", EX / "answers-correct.jsonl", "--limit", "2", "--team-size", "1")
    assert s["team_size"] == 1 and s["correct"] == 2
    d = cell(tmp_path / "solo", "q01")
    cfg = json.loads((d / "config.json").read_text())
    assert cfg["params"]["team_size"] == 1 and cfg["params"]["pipeline"] == "solo"
    loops = pd.read_parquet(d / "tool_loops.parquet")
    assert list(loops["agent_id"]) == ["solo.0"] and list(loops["phase"]) == ["solo:analyze"]
    summary = json.loads((d / "summary.json").read_text())
    assert (
        summary["passes"] == ["solo#1"] and summary["pipeline"] == "solo" and summary["artifacts"] == {"final_paper": 1}
    )
    base = pd.read_parquet(tmp_path / "solo" / "results.parquet")
    assert bool(base["tokens_in"].gt(0).all())


def test_ray_executor_runs_the_items_and_resumes(tmp_path, capsys):
    import ray  # noqa: F401  (test.sh installs every extra; a missing Ray fails here, not skips)

    s = run_bench(capsys, tmp_path / "ray", EX / "answers-correct.jsonl", "--limit", "3", "--executor", "ray")
    assert s["executor"] == "ray" and sorted(s["ran"]) == ["q01", "q02", "q03"] and s["correct"] == 3
    again = run_bench(
        capsys, tmp_path / "ray", EX / "answers-correct.jsonl", "--limit", "3"
    )  # finished items: skipped locally
    assert again["skipped"] == ["q01", "q02", "q03"] and again["cost_usd"] == pytest.approx(s["cost_usd"])


def test_rerun_with_other_settings_is_refused(correct_bench, tmp_path, capsys):
    src, _ = correct_bench
    out = tmp_path / "b"
    shutil.copytree(src, out)
    other = tmp_path / "answers.jsonl"
    other.write_text((EX / "answers-correct.jsonl").read_text().replace("north", "south"))
    base = [
        "bench",
        "science",
        str(SUITE),
        "--tables",
        str(TABLES),
        "--labels",
        str(LABELS),
        "--sandbox-backend",
        "local",
        "--out",
        str(out),
    ]
    msg = fail_line(capsys, base + ["--team", f"answers:{other}"])
    assert "answers_sha256 differ" in msg
    assert "team_size differ" in fail_line(
        capsys, base + ["--team", f"answers:{EX / 'answers-correct.jsonl'}", "--team-size", "3"]
    )


def test_make_suite_reproduces_the_shipped_files(tmp_path):
    import subprocess
    import sys

    subprocess.run(
        [sys.executable, str(EX / "make_suite.py"), "--seed", "17", "--out", str(tmp_path)],
        check=True,
        capture_output=True,
    )
    for rel in (
        "suite.jsonl",
        "labels.jsonl",
        "answers-correct.jsonl",
        "tables/orders.csv",
        "tables/sensors.csv",
        "tables/plants.csv",
    ):
        assert (tmp_path / rel).read_bytes() == (EX / rel).read_bytes(), rel


GATED = r"""
import json, os, sys, time
from pathlib import Path
from langchain_core.messages import SystemMessage, ToolMessage
from cooplab.agents.models import ScriptedChatModel, register_builtin

suite = [json.loads(x) for x in Path(os.environ["SUITE"]).read_text().splitlines() if x.strip()]
answers = {json.loads(x)["id"]: json.loads(x)["answer"] for x in Path(os.environ["ANSWERS"]).read_text().splitlines() if x.strip()}
gate, blocked = Path(os.environ["GATE"]), Path(os.environ["BLOCKED"])


def step(messages):
    system = next(str(m.content) for m in messages if isinstance(m, SystemMessage))
    item = next(it["id"] for it in suite if it["question"] in system)
    if not any(isinstance(m, ToolMessage) for m in messages):
        return {"tool_calls": [{"name": "write_artifact", "args": {"name": "final_paper", "content": "# Answer\n\n" + answers[item]}}]}
    if item == "q04":  # q04's second call waits for the gate: the test kills the bench here
        blocked.touch()
        while not gate.exists():
            time.sleep(0.02)
    return {"tool_calls": [{"name": "mark_complete", "args": {"summary": "done"}}]}


register_builtin("gated-analyst", lambda arg: ScriptedChatModel(by_phase={"solo:analyze": [step]}, answers=["ok"]))
from cooplab.cli import main
sys.exit(main(sys.argv[1:]))
"""  # noqa: E501 (text kept verbatim)


def test_kill_9_mid_item_then_resume_charges_nothing_twice(tmp_path):
    """A solo-analyst bench is SIGKILLed inside item q04 (its first call paid, its node not yet
    checkpointed); the rerun skips q01-q03, replays q04's paid call from the cache (charged once, as
    the live call it was), and ends with the cost, tokens and answers of a bench never interrupted."""
    import os
    import signal
    import subprocess
    import sys
    import time

    script = tmp_path / "gated.py"
    script.write_text(GATED)
    gate = tmp_path / "gate"

    def start(out: Path) -> subprocess.Popen:
        env = {
            **os.environ,
            "SUITE": str(SUITE),
            "ANSWERS": str(EX / "answers-correct.jsonl"),
            "GATE": str(gate),
            "BLOCKED": str(out.parent / f"{out.name}.blocked"),
        }
        cmd = [
            sys.executable,
            str(script),
            "bench",
            "science",
            str(SUITE),
            "--tables",
            str(TABLES),
            "--labels",
            str(LABELS),
            "--team",
            "llm",
            "--model",
            "builtin:gated-analyst",
            "--team-size",
            "1",
            "--limit",
            "6",
            "--parallel",
            "1",
            "--sandbox-backend",
            "local",
            "--cache",
            str(out.parent / f"{out.name}.sqlite"),
            "--out",
            str(out),
            "--json",
        ]
        return subprocess.Popen(
            cmd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            cwd=Path(__file__).resolve().parents[2],
        )

    killed = tmp_path / "killed"
    p = start(killed)
    deadline = time.monotonic() + 600  # a hang guard only: the kill waits for the observable block
    while not (tmp_path / "killed.blocked").exists():
        assert p.poll() is None, p.communicate()[1][-2000:]
        assert time.monotonic() < deadline, "the bench never reached q04"
        time.sleep(0.05)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    done = sorted(iid for iid in ("q01", "q02", "q03", "q04") if (cell(killed, iid) / "summary.json").exists())
    assert done == ["q01", "q02", "q03"]  # the kill landed inside q04
    gate.touch()
    p = start(killed)
    out, err = p.communicate(timeout=600)
    assert p.returncode == 0, err[-2000:]
    s = json.loads(out)
    assert s["skipped"] == ["q01", "q02", "q03"] and sorted(s["resumed"] + s["ran"]) == ["q04", "q05", "q06"]
    q04 = json.loads((cell(killed, "q04") / "summary.json").read_text())
    assert q04["llm"]["cache_hits"] >= 1  # the call paid before the kill was replayed, not bought again ...
    assert q04["ledger"]["cached_calls"] == 0  # ... and charged as the live call it was (the ledger journal)

    ref_out = tmp_path / "ref"
    p = start(ref_out)
    out, err = p.communicate(timeout=600)
    assert p.returncode == 0, err[-2000:]
    ref = json.loads(out)
    assert s["correct"] == ref["correct"] == 6
    assert s["cost_usd"] == pytest.approx(ref["cost_usd"]) and s["tokens_in"] == ref["tokens_in"]
    a = pd.read_parquet(killed / "results.parquet").set_index("id")
    b = pd.read_parquet(ref_out / "results.parquet").set_index("id")
    for col in ("correct", "cost_usd", "tokens_in", "tokens_out"):
        assert a[col].tolist() == pytest.approx(b[col].tolist()), col


def test_an_item_stopped_by_an_error_counts_wrong_and_is_reported_apart(tmp_path, capsys):
    """q02's model refuses every call (a permanent model error): the bench goes on, q02 is wrong in
    the accuracy, and `finished` gives the accuracy over the items whose run finished."""
    from langchain_core.messages import SystemMessage

    from cooplab.agents.models import (
        PermanentModelError,
        ScriptedChatModel,
        register_builtin,
    )

    suite = {json.loads(x)["id"]: json.loads(x) for x in SUITE.read_text().splitlines() if x.strip()}
    answers = {
        json.loads(x)["id"]: json.loads(x)["answer"] for x in (EX / "answers-correct.jsonl").read_text().splitlines()
    }

    def step(messages):
        system = next(str(m.content) for m in messages if isinstance(m, SystemMessage))
        item = next(i for i, it in suite.items() if it["question"] in system)
        if item == "q02":
            raise PermanentModelError("the endpoint refused the request (HTTP 400)")
        if not any(m.type == "ai" for m in messages):  # its first step (the budget line may be a second system message)
            return {
                "tool_calls": [{"name": "write_artifact", "args": {"name": "final_paper", "content": answers[item]}}]
            }
        return {"tool_calls": [{"name": "mark_complete", "args": {"summary": "done"}}]}

    register_builtin(
        "test-refuses-q02", lambda arg: ScriptedChatModel(by_phase={"solo:analyze": [step]}, answers=["ok"])
    )
    code = main(
        [
            "bench",
            "science",
            str(SUITE),
            "--tables",
            str(TABLES),
            "--labels",
            str(LABELS),
            "--team",
            "llm",
            "--model",
            "builtin:test-refuses-q02",
            "--team-size",
            "1",
            "--limit",
            "3",
            "--sandbox-backend",
            "local",
            "--cache",
            "off",
            "--out",
            str(tmp_path / "b"),
            "--json",
        ]
    )
    o, err = capsys.readouterr()
    assert code == 1, err  # a failed item makes the exit status 1; everything else is still written
    s = json.loads(o)
    assert s["failed"] == ["q02"] or "q02" in str(s.get("failed")), s.get("failed")
    df = pd.read_parquet(tmp_path / "b" / "results.parquet").set_index("id")
    assert df.loc["q02", "status"] not in bench.TEAM_OUTCOMES and not df.loc["q02", "correct"]
    assert s["correct"] == 2 and s["scored"] == 3 and s["accuracy"] == pytest.approx(2 / 3)
    assert s["finished"]["items"] == 2 and s["finished"]["accuracy"] == 1.0
    assert "1 item(s) stopped by an error count as wrong above" in (tmp_path / "b" / "report.md").read_text()


def test_prices_of_the_endpoint_set_the_bill(tmp_path, capsys):
    s = run_bench(
        capsys, tmp_path / "p", EX / "answers-correct.jsonl", "--limit", "2", "--price-in", "0.01", "--price-out", "0.2"
    )
    assert s["tokens_in"] > 0 and s["tokens_out"] > 0
    assert s["cost_usd"] == pytest.approx(s["tokens_in"] * 0.01 / 1000 + s["tokens_out"] * 0.2 / 1000, rel=1e-6)
    assert json.loads((tmp_path / "p" / "bench.json").read_text())["llm"]["price_out"] == 0.2


def test_a_bench_started_before_an_option_existed_resumes_with_its_default(tmp_path, capsys):
    from cooplab.tasks.science.defaults import MAX_TOKENS
    from cooplab.tasks.science.owndata import custom_config

    out = tmp_path / "old"
    run_bench(capsys, out, EX / "answers-correct.jsonl", "--limit", "1")
    p = out / "bench.json"
    old = json.loads(p.read_text())
    old["llm"] = {"base_url": None, "max_tokens": MAX_TOKENS}  # the settings file of an earlier cooplab
    p.write_text(json.dumps(old))
    s = run_bench(capsys, out, EX / "answers-correct.jsonl", "--limit", "1")
    assert s["skipped"] == ["q01"]
    old["llm"] = {"base_url": None, "max_tokens": 128}
    p.write_text(json.dumps(old))
    assert "llm differ" in fail_line(
        capsys,
        [
            "bench",
            "science",
            str(SUITE),
            "--tables",
            str(TABLES),
            "--labels",
            str(LABELS),
            "--team",
            f"answers:{EX / 'answers-correct.jsonl'}",
            "--sandbox-backend",
            "local",
            "--cache",
            "off",
            "--parallel",
            "2",
            "--limit",
            "1",
            "--out",
            str(out),
        ],
    )
    # the defaults the bench assumes are those a run on your own data gets
    llm = custom_config([TABLES / "orders.csv"], "x", None, backend="local")["llm"]
    assert {k: llm[k] for k in bench.BENCH_LLM} == bench.bench_llm(None)


def test_a_fresh_process_knows_the_answers_team(tmp_path):
    """`cooplab bench science --team answers:FILE` in a process that imported nothing before it:
    the scripted answers model is registered by the code that builds an item's config (not by
    whatever the test process imported earlier)."""
    import subprocess
    import sys

    cmd = [
        sys.executable,
        "-c",
        "import sys; from cooplab.cli import main; sys.exit(main(sys.argv[1:]))",
        *["bench", "science", str(SUITE), "--tables", str(TABLES), "--labels", str(LABELS)],
        *["--team", f"answers:{EX / 'answers-correct.jsonl'}", "--sandbox-backend", "local", "--cache", "off"],
        *["--limit", "1", "--out", str(tmp_path / "b"), "--json"],
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=Path(__file__).resolve().parents[2])
    assert p.returncode == 0, p.stderr[-2000:]
    assert json.loads(p.stdout)["correct"] == 1
