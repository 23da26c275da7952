"""What is checked before any work (issue 29, items 7 and 8): a hosted provider's API key and every
model spec (a run, a resume, a science judge, a profile), and a scripted model's answers for every
phase it will be asked: one line, exit 2, nothing created. A phase a task does not announce stops
the run at its first call with one line naming the phase and the file (never a ZeroDivisionError).
A LangSmith endpoint that cannot be reached is one short line, quickly."""

from __future__ import annotations

import json
import shutil
import socket
import threading
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage

from cooplab.agents import models
from cooplab.agents.models import ScriptedChatModel
from cooplab.cli import main
from cooplab.graphs.tracing import ExportError, export_traces
from tests.helpers.cli import fail_line

ROOT = Path(__file__).resolve().parents[2]
CAUTIOUS = ROOT / "examples" / "scripted" / "cautious.json"  # CPR's phases only
ANSWER = '{"effort": 0.2, "punish": null, "vote": 1, "belief": "b", "proposal": "p"}'


@pytest.fixture(autouse=True)
def no_keys(monkeypatch, tmp_path):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))


@pytest.fixture(scope="module")
def scripted_run(tmp_path_factory) -> Path:
    """A finished CPR run of a scripted model (its traces, config.json to edit)."""
    d = tmp_path_factory.mktemp("runs") / "cpr"
    script = d.parent / "s.json"
    script.write_text(json.dumps({"answers": [ANSWER]}))
    assert (
        main(
            [
                "run",
                "cpr",
                "--agents",
                "llm",
                "--model",
                f"scripted:{script}",
                "--n-agents",
                "2",
                "--rounds",
                "1",
                "--cache",
                "off",
                "--out",
                str(d),
                "-q",
            ]
        )
        == 0
    )
    return d


# --- item 7: API keys ------------------------------------------------------------------------
@pytest.mark.parametrize("key", [None, "", "   "])
def test_a_run_without_its_api_key_is_one_line_and_creates_nothing(tmp_path, capsys, monkeypatch, key):
    if key is not None:
        monkeypatch.setenv("OPENAI_API_KEY", key)
    out = tmp_path / "run"
    line = fail_line(
        capsys, ["run", "cpr", "--agents", "llm", "--model", "openai:gpt-4o-mini", "--n-agents", "2", "--out", str(out)]
    )
    assert "openai:gpt-4o-mini needs OPENAI_API_KEY" in line and "--base-url" in line
    assert not out.exists()


def test_an_agent_model_without_its_key_is_named(tmp_path, capsys):
    line = fail_line(
        capsys,
        [
            "run",
            "cpr",
            "--agents",
            "llm",
            "--model",
            f"scripted:{CAUTIOUS}",
            "--agent-model",
            "1=openai:gpt-4o",
            "--n-agents",
            "2",
            "--out",
            str(tmp_path / "run"),
        ],
    )
    assert "openai:gpt-4o needs OPENAI_API_KEY" in line and not (tmp_path / "run").exists()


def test_a_server_of_your_own_needs_no_key():
    from cooplab.agents.models import check_model

    check_model("openai:m", "http://127.0.0.1:9/v1")  # no error: the key is the server's business


def test_resuming_without_the_key_is_one_line_and_says_how_to_continue(tmp_path, capsys, scripted_run):
    d = tmp_path / "copy"
    shutil.copytree(scripted_run, d)
    cfg = json.loads((d / "config.json").read_text())
    cfg["llm"]["model"] = "openai:gpt-4o-mini"
    (d / "config.json").write_text(json.dumps(cfg))
    before = sorted(p.name for p in d.iterdir())
    line = fail_line(capsys, ["resume", str(d)])
    assert "needs OPENAI_API_KEY" in line and "set it and resume again" in line and "fix the file" not in line
    assert sorted(p.name for p in d.iterdir()) == before


def test_a_science_judge_without_its_key_is_one_line(tmp_path, capsys):
    out = tmp_path / "run"
    line = fail_line(
        capsys,
        [
            "run",
            "science",
            "--team",
            "oracle",
            "--sandbox-backend",
            "local",
            "--judge",
            "openai:gpt-4o",
            "--out",
            str(out),
        ],
    )
    assert line.startswith("cooplab: error: --judge: openai:gpt-4o needs OPENAI_API_KEY") and not out.exists()


def test_scoring_with_a_judge_without_its_key_is_one_line(tmp_path, capsys):
    d = tmp_path / "run"
    (d / "dataset").mkdir(parents=True)
    (d / "scores.json").write_text("{}")
    (d / "config.json").write_text(
        json.dumps({"version": 2, "task": "science", "llm": {"model": "builtin:science-oracle:ecology"}})
    )
    line = fail_line(capsys, ["science", "score", str(d), "--judge", "openai:gpt-4o"])
    assert "--judge: openai:gpt-4o needs OPENAI_API_KEY" in line and "internal error" not in line


# --- item 8: scripted models and their phases ----------------------------------------------
def test_a_profile_with_a_script_for_other_phases_is_one_line_before_any_game(tmp_path, capsys):
    out = tmp_path / "profile"
    line = fail_line(capsys, ["profile", "--out", str(out), "--model", f"scripted:{CAUTIOUS}", "--simulations", "1"])
    assert f"scripted model file {CAUTIOUS} has no answers for phase" in line and "add a by_phase entry" in line
    assert not out.exists()


def test_deliberation_asks_its_own_phase(tmp_path, capsys):
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"by_phase": {"allocate": ['{"keep": 10, "group": 5, "global": 5}']}}))
    base = ["profile", "--model", f"scripted:{script}", "--simulations", "1", "--games", "public-goods"]
    line = fail_line(capsys, [*base, "--deliberation", "--out", str(tmp_path / "p1")])
    assert "has no answers for phase 'deliberate'" in line and not (tmp_path / "p1").exists()


def test_a_scripted_judge_needs_answers_for_the_judge_phase(tmp_path, capsys):
    line = fail_line(
        capsys,
        [
            "run",
            "science",
            "--team",
            "oracle",
            "--sandbox-backend",
            "local",
            "--judge",
            f"scripted:{CAUTIOUS}",
            "--out",
            str(tmp_path / "run"),
        ],
    )
    assert f"{CAUTIOUS} has no answers for phase 'judge'" in line and not (tmp_path / "run").exists()


def test_a_phase_the_task_does_not_announce_stops_the_run_with_one_line(tmp_path, capsys):
    script = tmp_path / "typo.json"
    script.write_text(json.dumps({"by_phase": {"harvset": ['{"effort": 0.2}']}}))  # a typo in the phase name
    out = tmp_path / "run"
    code = main(
        [
            "run",
            "cpr",
            "--agents",
            "llm",
            "--model",
            f"scripted:{script}",
            "--n-agents",
            "2",
            "--rounds",
            "1",
            "--cache",
            "off",
            "--out",
            str(out),
            "-q",
        ]
    )
    _, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 1 and len(lines) == 1, err
    assert f"scripted model file {script} has no answers for phase 'harvest'" in lines[0] and "ZeroDivision" not in err
    assert json.loads((out / "summary.json").read_text())["status"] == "stopped"  # resumable once the file is fixed


def test_the_scripted_model_names_the_phase_and_its_file():
    model = ScriptedChatModel(by_phase={"vote": ["1"]}, source="scripted model file x.json")
    with pytest.raises(
        models.ScriptMissingPhase, match=r"^scripted model file x\.json has no answers for phase 'harvest'"
    ):
        model.invoke([HumanMessage(content="hi")], phase="harvest")
    assert model.invoke([HumanMessage(content="hi")], phase="vote").content == "1"
    hashed = ScriptedChatModel(by_phase={"vote": ["1"]}, select="prompt_hash")
    with pytest.raises(models.ScriptMissingPhase, match="phase 'punish'"):
        hashed.invoke([HumanMessage(content="hi")], phase="punish")


# --- item 7: a LangSmith endpoint that cannot be reached ----------------------------------
def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_exporting_to_a_refused_endpoint_is_one_short_line(capsys, scripted_run, monkeypatch):
    monkeypatch.setenv("LANGSMITH_API_KEY", "k")
    url = f"http://127.0.0.1:{_free_port()}"
    code = main(["traces", "export", str(scripted_run), "--endpoint", url])
    _, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 1 and len(lines) == 1, err
    assert lines[0].startswith(f"cooplab: error: cannot reach {url}: connection refused") and len(lines[0]) < 200
    assert "MaxRetryError" not in err and "HTTPConnectionPool" not in err


def test_an_endpoint_that_drops_every_connection_gets_few_attempts_and_one_short_line(scripted_run):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    accepted = []

    def drop() -> None:
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            accepted.append(1)
            c.close()

    threading.Thread(target=drop, daemon=True).start()
    try:
        with pytest.raises(ExportError) as err:
            export_traces(scripted_run, endpoint=f"http://127.0.0.1:{srv.getsockname()[1]}", api_key="k")
    finally:
        srv.close()
    msg = str(err.value)
    assert "connection failed" in msg and len(msg) < 200 and "\n" not in msg and "MaxRetryError" not in msg
    assert len(accepted) <= 7  # the check, then 3 requests of at most 2 tries (before: 12, over 12 s)
