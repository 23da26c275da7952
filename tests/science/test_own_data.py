"""Science teams on your own data (``cooplab run science --dataset ... --task-file ... [--truth ...]``):
unfamiliar files are read and pre-loaded as ``df`` (checked in the sandbox by the describing
scripted team, whose code prints the frames' shapes), truth is optional and validated, accuracy is
null without it, bad input is one line with exit 2, and a finished run resumes to the same result."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from cooplab.cli import main
from cooplab.evals.typed import column, scalar
from cooplab.limits import sha256_file
from cooplab.runs.api import Run
from cooplab.tasks.science import owndata
from tests.helpers.cli import fail_line

RESULT_RE = re.compile(r"ORACLE_RESULT (\{.*\})")


def hostile_csv(d):
    """Spaces in the name, latin-1 (cp1252) text, semicolons, missing values."""
    rng = np.random.default_rng(1)
    df = pd.DataFrame(
        {
            "größe": rng.normal(10, 2, 240).round(3),
            "x": rng.integers(0, 5, 240),
            "ville": rng.choice(["Zürich", "Genève", "Besançon"], 240),
        }
    )
    df.loc[[3, 7, 11], "größe"] = np.nan
    df.loc[5, "ville"] = np.nan
    p = d / "my city data.csv"
    df.to_csv(p, sep=";", encoding="latin-1", index=False)
    return p, df


def run(tmp_path, capsys, *args, out="run"):
    code = main(
        [
            "run",
            "science",
            *args,
            "--sandbox-backend",
            "local",
            "--cache",
            "off",
            "--out",
            str(tmp_path / out),
            "-q",
            "--json",
        ]
    )
    o, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(o), tmp_path / out


def recovered(out):
    text = (out / "artifacts" / "dataset_description.v1.md").read_text(encoding="utf-8")
    return json.loads(RESULT_RE.findall(text)[-1])


def test_hostile_csv_with_truth_is_read_preloaded_scored_and_resumes(tmp_path, capsys):
    p, df = hostile_csv(tmp_path)
    (tmp_path / "task.md").write_text("Describe the city table: its size and the mean of x.\n", encoding="utf-8")
    mean_x = round(float(df.x.mean()), 4)
    truth = {
        "facts": [
            {"name": "rows", "kind": "number", "value": 240, "tolerance": 0, "context": ["number of rows"]},
            {"name": "mean_x", "kind": "number", "value": mean_x, "tolerance": 0.01, "context": ["mean of x"]},
            {"name": "missing", "kind": "number", "value": 4, "context": ["number of missing values"]},
        ]
    }
    (tmp_path / "truth.json").write_text(json.dumps(truth), encoding="utf-8")
    s, out = run(
        tmp_path,
        capsys,
        "--dataset",
        str(p),
        "--task-file",
        str(tmp_path / "task.md"),
        "--truth",
        str(tmp_path / "truth.json"),
        "--team",
        "oracle",
    )
    assert s["status"] == "completed" and s["science_task"] == "custom"
    assert s["scores"]["accuracy"] == 1.0 and s["scores"]["completeness"] == 1.0, s
    assert s["facts"] == {"rows": "found", "mean_x": "found", "missing": "found"}
    # what the sandbox had as df: the sandbox code's own output
    assert recovered(out) == {
        "data": {
            "rows": 240,
            "columns": 3,
            "missing": 4,
            "means": {"größe": round(scalar(column(df, "größe").mean()), 4), "x": mean_x},
        }
    }
    cfg = json.loads((out / "config.json").read_text())
    info = cfg["params"]["custom"]["datasets"][0]
    assert info["separator"] == ";" and info["encoding"] in ("cp1252", "latin-1") and info["sha256"] == sha256_file(p)
    assert cfg["record"]["dataset"]["sha256"] == sha256_file(out / "dataset" / "data.csv")
    # the team prompts carry the task text in place of a built-in task's
    msgs = (out / "traces.jsonl").read_text(encoding="utf-8")
    assert "Describe the city table" in msgs
    # resume of the finished run: same result; a changed input file is a warning, the run's copy is used
    p.write_text("a;b\n1;2\n", encoding="latin-1")
    code = main(["resume", str(out), "-q", "--json"])
    o, err = capsys.readouterr()
    assert code == 0, err
    r = json.loads(o)
    assert r["scores"] == s["scores"] and r["facts"] == s["facts"] and r["passes"] == s["passes"]
    assert "changed (SHA-256 differs)" in err


def test_without_truth_accuracy_is_not_scored(tmp_path, capsys):
    p, _ = hostile_csv(tmp_path)
    (tmp_path / "task.md").write_text("What is in this table?", encoding="utf-8")
    s, out = run(tmp_path, capsys, "--dataset", str(p), "--task-file", str(tmp_path / "task.md"), "--team", "oracle")
    assert s["status"] == "completed" and s["scores"]["accuracy"] is None
    assert s["scores"]["completeness"] == 1.0 and s["scores"]["quality"] > 0
    scores = json.loads((out / "scores.json").read_text())
    assert scores["heuristic"]["accuracy"] is None and scores["heuristic"]["completeness"] == 1.0
    assert "accuracy not scored" in " ".join(
        owndata_report_lines(Run.open(out).summary)
    )  # the typed summary, as the runner hands it
    assert "accuracy not scored (no truth)" in (out / "report.html").read_text(encoding="utf-8")


def owndata_report_lines(summary):
    from cooplab.tasks.science.task import TASK

    return TASK.report(summary)


def test_several_files_wide_parquet_tsv_are_a_dict_of_frames(tmp_path, capsys):
    rng = np.random.default_rng(2)
    wide = pd.DataFrame(rng.normal(size=(2500, 300)).round(6), columns=[f"c{j}" for j in range(300)])
    wide.iloc[::97, 5] = np.nan
    wide.to_csv(tmp_path / "wide table.csv", index=False)
    assert (tmp_path / "wide table.csv").stat().st_size > 2_000_000
    pq = pd.DataFrame(
        {"k": np.arange(50), "name": [f"n{i}" for i in range(50)], "flag": [i % 2 == 0 for i in range(50)]}
    )
    pq.to_parquet(tmp_path / "lookup.parquet")
    (tmp_path / "small.tsv").write_text("a\tb\n1\t2.5\n3\t\n", encoding="utf-8")
    (tmp_path / "task.md").write_text("Relate the tables.", encoding="utf-8")
    s, out = run(
        tmp_path,
        capsys,
        "--dataset",
        str(tmp_path / "wide table.csv"),
        "--dataset",
        str(tmp_path / "lookup.parquet"),
        "--dataset",
        str(tmp_path / "small.tsv"),
        "--task-file",
        str(tmp_path / "task.md"),
        "--team",
        "oracle",
    )
    assert s["status"] == "completed"
    rec = recovered(out)
    assert {k: (v["rows"], v["columns"], v["missing"]) for k, v in rec.items()} == {
        "wide table": (2500, 300, int(wide.isna().sum().sum())),
        "lookup": (50, 3, 0),
        "small": (2, 2, 1),
    }
    assert rec["lookup"]["means"]["k"] == 24.5 and rec["small"]["means"] == {"a": 2.0, "b": 2.5}
    cfg = json.loads((out / "config.json").read_text())
    assert [d["format"] for d in cfg["params"]["custom"]["datasets"]] == ["csv", "parquet", "csv"]
    assert cfg["params"]["custom"]["datasets"][2]["separator"] == "\t"


@pytest.mark.parametrize(
    "fact, why",
    [
        ({"name": "a", "kind": "number", "value": 1, "tolerance": float("nan")}, "tolerance"),
        ({"name": "a", "kind": "number", "value": 1, "tolerance": -1}, "tolerance"),
        ({"name": "", "kind": "number", "value": 1}, "name"),
        ({"name": "a", "kind": "number", "value": "12"}, "value"),
        ({"name": "a", "kind": "category", "value": 3}, "value"),
        ({"name": "a", "kind": "keywords", "value": []}, "value"),
        ({"name": "a", "kind": "guess", "value": 1}, "kind"),
    ],
)
def test_bad_truth_is_one_line(tmp_path, fact, why):
    with pytest.raises(owndata.OwnDataError) as e:
        owndata.parse_truth({"facts": [fact]})
    assert why in str(e.value) and "\n" not in str(e.value)


def test_duplicate_names_and_bad_truth_file_from_the_cli(tmp_path, capsys):
    p, _ = hostile_csv(tmp_path)
    (tmp_path / "task.md").write_text("Describe.", encoding="utf-8")
    with pytest.raises(owndata.OwnDataError, match="given twice"):
        owndata.parse_truth(
            {"facts": [{"name": "a", "kind": "number", "value": 1}, {"name": "a", "kind": "category", "value": "x"}]}
        )
    (tmp_path / "t.json").write_text('{"facts": [{"name": "a", "kind": "number", "value": 1, "tolerance": NaN}]}')
    base = [
        "run",
        "science",
        "--dataset",
        str(p),
        "--task-file",
        str(tmp_path / "task.md"),
        "--team",
        "oracle",
        "--out",
        str(tmp_path / "o"),
    ]
    assert "tolerance" in fail_line(capsys, base + ["--truth", str(tmp_path / "t.json")])
    (tmp_path / "t.json").write_text("{not json")
    assert "not valid JSON" in fail_line(capsys, base + ["--truth", str(tmp_path / "t.json")])
    assert "not both" in fail_line(capsys, base + ["--task", "ecology"])
    assert not (tmp_path / "o").exists()


def test_bad_files_are_one_line_before_anything_runs(tmp_path, capsys):
    (tmp_path / "task.md").write_text("Describe.", encoding="utf-8")
    (tmp_path / "empty.csv").write_bytes(b"")
    (tmp_path / "junk.csv").write_bytes(bytes(range(256)) * 40)
    (tmp_path / "dir.csv").mkdir()
    (tmp_path / "fake.parquet").write_bytes(b"PAR1 not really")
    for name, why in (
        ("missing.csv", "does not exist"),
        ("dir.csv", "not a file"),
        ("empty.csv", "is empty"),
        ("junk.csv", "looks binary"),
        ("fake.parquet", "not a readable Parquet"),
    ):
        line = fail_line(
            capsys,
            [
                "run",
                "science",
                "--dataset",
                str(tmp_path / name),
                "--task-file",
                str(tmp_path / "task.md"),
                "--team",
                "oracle",
                "--out",
                str(tmp_path / "o"),
            ],
        )
        assert why in line, line
    assert "needs --task-file" in fail_line(
        capsys, ["run", "science", "--dataset", str(tmp_path / "junk.csv"), "--out", str(tmp_path / "o")]
    )
    assert not (tmp_path / "o").exists()


def test_python_api_config_runs(tmp_path):
    from cooplab.runs import runner
    from cooplab.tasks.science.task import TASK

    p, _ = hostile_csv(tmp_path)
    cfg = owndata.custom_config(
        [p],
        "Describe the table.",
        {"facts": [{"name": "rows", "kind": "number", "value": 240, "context": ["number of rows"]}]},
        team="oracle",
        backend="local",
        llm={"cache": "off"},
    )
    out = tmp_path / "api"
    out.mkdir()
    s = runner.start(TASK, out, cfg, quiet=True)
    assert s["status"] == "completed" and s["scores"]["accuracy"] == 1.0


@pytest.mark.integration
@pytest.mark.docker
def test_custom_csv_in_the_docker_sandbox(tmp_path, capsys, docker_ready):
    p, df = hostile_csv(tmp_path)
    (tmp_path / "task.md").write_text("Describe the city table.", encoding="utf-8")
    code = main(
        [
            "run",
            "science",
            "--dataset",
            str(p),
            "--task-file",
            str(tmp_path / "task.md"),
            "--team",
            "oracle",
            "--sandbox-backend",
            "docker",
            "--cache",
            "off",
            "--out",
            str(tmp_path / "run"),
            "-q",
            "--json",
        ]
    )
    o, err = capsys.readouterr()
    assert code == 0, err
    s = json.loads(o)
    assert s["status"] == "completed" and s["scores"]["accuracy"] is None
    assert recovered(tmp_path / "run")["data"]["rows"] == 240 and recovered(tmp_path / "run")["data"]["missing"] == 4
    lg = pd.read_parquet(tmp_path / "run" / "ledger.parquet")
    assert set(lg[lg.kind == "sandbox_seconds"].model) == {"sandbox:docker"}
