"""Traces that say who did what (issue 31): every model call and tool run of a real run carries the
task, the run's id, the society, the agent's id and display name, round, phase, team and pass, the
model and its ledger call id, in metadata and tags, and model calls are named for them; the run's
own id is its thread id (recorded in config.json), and runs made before it was recorded resume."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from cooplab.cli import main
from cooplab.graphs.tracing import agent_name, call_name, labelled, load_runs
from cooplab.runs import registry, runner

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"^(?P<who>[\w-]+(?: [\w-]+)*) · (?P<phase>[\w:]+) · (?:round|pass) (?P<when>\d+)$")


@pytest.fixture(autouse=True)
def _no_live_tracing(monkeypatch):
    for k in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2"):
        monkeypatch.delenv(k, raising=False)


def run_cli(args: list, capsys) -> None:
    code = main([str(a) for a in args])
    _, err = capsys.readouterr()
    assert code in (0, None), err


def llm_runs(out: Path) -> list:
    return [r for r in load_runs(out) if r["run_type"] == "llm"]


def record(out: Path) -> dict:
    return json.loads((out / "config.json").read_text())["record"]


def check_labels(out: Path, task: str, noun: str | None) -> list:
    """Every llm run of ``out`` is named for who and what and labelled; its call id is a ledger row's."""
    run_id = record(out)["thread_id"]
    ledger = pd.read_parquet(out / "ledger.parquet")
    runs = llm_runs(out)
    assert runs
    for r in runs:
        md, tags = r["extra"]["metadata"], r["tags"]
        m = NAME.match(r["name"])
        assert m, r["name"]
        assert md["task"] == task and md["run_id"] == md["thread_id"] == md["session_id"] == run_id
        assert m["who"] == md["agent_name"] and m["phase"] == md["phase"]
        if noun is not None:
            assert md["agent_name"] == f"{noun} {md['agent'] + 1}" and int(m["when"]) == md["round"]
            assert isinstance(md["society"], int)
            # identifiers are text: the tables' key of the agent, which its ledger row carries too
            assert md["agent_id"] == f"{md['society']}:{md['agent']}"
            assert set(ledger.loc[ledger["call_id"] == md["call_id"], "agent_id"]) == {md["agent_id"]}
        assert set(ledger.loc[ledger["call_id"] == md["call_id"], "model"]) == {md["model"]}  # the call's ledger row
        for tag in (
            f"task:{task}",
            f"run:{run_id}",
            f"agent_name:{md['agent_name']}",
            f"agent_id:{md['agent_id']}",
            f"phase:{md['phase']}",
            f"round:{md['round']}",
            f"model:{md['model']}",
        ):
            assert tag in tags, (tag, tags)
    return runs


def test_cpr_model_calls_say_which_fisher_in_which_round_and_phase(tmp_path, capsys):
    out = tmp_path / "cpr"
    run_cli(
        [
            "run",
            "cpr",
            "--agents",
            "llm",
            "--model",
            f"scripted:{ROOT / 'examples/scripted/cautious.json'}",
            "--n-agents",
            3,
            "--rounds",
            2,
            "--out",
            out,
            "-q",
            "--cache",
            "off",
        ],
        capsys,
    )
    runs = check_labels(out, "cpr", "Fisher")
    names = {r["name"] for r in runs}
    assert {"Fisher 1 · harvest · round 1", "Fisher 3 · harvest · round 2"} <= names, sorted(names)


def test_diners_model_calls_name_the_diner(tmp_path, capsys):
    f = tmp_path / "diner.json"
    f.write_text(
        json.dumps(
            {
                "by_phase": {
                    "order": ['{"meal": "budget"}'],
                    "punish": ['{"punish": []}'],
                    "metanorm": ['{"punish": []}'],
                }
            }
        )
    )
    out = tmp_path / "diners"
    run_cli(
        [
            "run",
            "diners",
            "--agents",
            "llm",
            "--model",
            f"scripted:{f}",
            "--iterations",
            1,
            "--out",
            out,
            "-q",
            "--cache",
            "off",
        ],
        capsys,
    )
    assert "Diner 8 · order · round 1" in {r["name"] for r in check_labels(out, "diners", "Diner")}


def test_science_calls_and_tool_runs_say_role_team_and_pass(tmp_path, capsys):
    out = tmp_path / "science"
    run_cli(
        [
            "run",
            "science",
            "--sandbox-backend",
            "local",
            "--cache",
            "off",
            "--task",
            "biomarker",
            "--team",
            "oracle",
            "--out",
            out,
            "-q",
        ],
        capsys,
    )
    runs = check_labels(out, "science", None)
    assert "Data Lead · data:plan · pass 1" in {r["name"] for r in runs}
    for r in runs:
        md = r["extra"]["metadata"]
        assert md["team"] == md["phase"].split(":")[0] and md["pass"] == 1 and f"team:{md['team']}" in r["tags"]
    tools = [r for r in load_runs(out) if r["run_type"] == "tool"]
    assert {t["name"] for t in tools} >= {"run_code", "write_artifact"}
    for t in tools:
        md = t["extra"]["metadata"]
        assert (
            md["agent_name"]
            and md["agent_id"]
            and md["team"]
            and md["pass"] == 1
            and md["phase"].startswith(md["team"])
        )
        assert md["run_id"] == record(out)["thread_id"] and f"agent_name:{md['agent_name']}" in t["tags"]


def test_display_names_and_labels():
    assert agent_name(2, {"agent_noun": "Fisher"}) == "Fisher 3"
    assert agent_name(0, {}) == "Agent 1"
    assert agent_name("data.0", {"agent_name": "Data Lead", "agent_noun": "Fisher"}) == "Data Lead"
    assert agent_name("x.1", None) == "x.1"
    assert call_name({"agent_name": "Player 2", "phase": "extract", "round": 4}) == "Player 2 · extract · round 4"
    cfg = labelled(
        {"tags": ["a"], "metadata": {"task": "t"}}, {"round": 2, "team": None, "call_id": "abc"}, run_name="n"
    )
    assert cfg == {"tags": ["a", "round:2"], "metadata": {"task": "t", "round": 2, "call_id": "abc"}, "run_name": "n"}


# --- thread id = the run's own id ---------------------------------------------------------------
def test_each_run_is_its_own_thread_and_resumes_on_it(tmp_path, capsys):
    ids = []
    for name in ("a", "b"):
        run_cli(["run", "cpr", "--n-agents", 3, "--rounds", 2, "--out", tmp_path / name, "-q"], capsys)
        ids.append(record(tmp_path / name)["thread_id"])
    assert len(set(ids)) == 2 and "cpr" not in ids
    # the checkpoints are under the recorded id: a resume finds them (the task's name holds none)
    assert main(["resume", str(tmp_path / "a"), "-q"]) in (0, None)
    assert record(tmp_path / "a")["thread_id"] == ids[0]


def test_a_run_made_before_thread_ids_were_recorded_still_resumes(tmp_path, monkeypatch):
    """The old format: checkpoints under the task's name and no ``record.thread_id``."""
    task = registry.get("cpr")
    monkeypatch.setattr(runner, "new_thread_id", lambda: task.name)  # as the old code checkpointed
    cfg = task.default_config("rule", N=3, T=4)
    first = runner.start(task, tmp_path, cfg, quiet=True)
    monkeypatch.undo()
    config = json.loads((tmp_path / "config.json").read_text())
    del config["record"]["thread_id"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "summary.json").unlink()
    again = runner.resume(tmp_path, quiet=True)
    assert (
        again["status"] == first["status"] == "completed"
        and again["survival_time"]["mean"] == first["survival_time"]["mean"]
    )


@pytest.mark.parametrize("bad", [5, "", " x", "a\nb", "x" * 201, None])
def test_a_damaged_thread_id_is_one_line_and_exit_2(tmp_path, capsys, bad):
    run_cli(["run", "cpr", "--n-agents", 3, "--rounds", 2, "--out", tmp_path, "-q"], capsys)
    config = json.loads((tmp_path / "config.json").read_text())
    config["record"]["thread_id"] = bad
    (tmp_path / "config.json").write_text(json.dumps(config))
    code = main(["resume", str(tmp_path), "-q"])
    _, err = capsys.readouterr()
    assert code == 2 and "record.thread_id" in err and len(err.strip().splitlines()) == 1, err
