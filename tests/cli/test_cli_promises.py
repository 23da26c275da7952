"""The command line does what its help says (issue 38, item 5): ``cooplab --version`` without
loading the command line; ``--model`` lists every model kind of the provider table; an LLM option
given to a run without LLM agents is refused, not ignored; ``--group-size``'s help names the
smallest groups the validation accepts; ``--no-block`` servers outlive the command that started
them and stop by their pid; set-up's "try next" commands parse; building the package prints no
setuptools warning."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

from cooplab.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXE = Path(sys.executable).with_name("cooplab")


def run(args, capsys):
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def one_line(code, err, *needles):
    lines = err.splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("cooplab: error: "), err
    for n in needles:
        assert n in lines[0], (n, err)
    return lines[0]


def flat(text: str) -> str:
    return " ".join(text.split())


# --- --version --------------------------------------------------------------------------------
def test_version_is_printed_without_loading_the_command_line():
    from cooplab._version import __version__

    code = (
        "import sys; sys.argv = ['cooplab', '--version']\n"
        "from cooplab._entry import entry\n"
        "try:\n    entry()\nexcept SystemExit as e:\n    assert e.code == 0, e.code\n"
        "heavy = [m for m in ('typer', 'click', 'langchain_core', 'langgraph', 'numpy', 'pandas', 'pydantic', "
        "'cooplab.cli') "
        "if m in sys.modules]\n"
        "print('HEAVY', heavy)"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0] == f"cooplab {__version__}"
    assert p.stdout.splitlines()[-1] == "HEAVY []"


def test_version_in_process_and_in_help(capsys):
    from cooplab._version import __version__

    assert run(["--version"], capsys)[:2] == (0, f"cooplab {__version__}\n")
    code, out, _ = run(["--help"], capsys)
    assert code == 0 and "--version" in out


# --- --model lists every kind -----------------------------------------------------------------
@pytest.mark.parametrize(
    "cmd", [["run", "cpr"], ["run", "diners"], ["run", "game"], ["profile"], ["bench", "science"], ["science", "score"]]
)
def test_model_help_lists_every_model_kind(capsys, cmd):
    from cooplab.agents.providers import PROVIDERS

    code, out, _ = run([*cmd, "--help"], capsys)
    assert code == 0
    text = flat(out)
    for kind in ["local", "local:PATH.gguf", *[f"{k}:NAME" for k in PROVIDERS], "scripted:FILE"]:
        assert kind in text, (cmd, kind)


# --- LLM options without LLM agents ----------------------------------------------------------------
@pytest.mark.parametrize(
    "args,flags,how",
    [
        (["run", "cpr", "--model", "openai:gpt-4o"], "--model applies", "--agents llm"),
        (
            ["run", "cpr", "--agents", "rule", "--budget", "1", "--temperature", "0.2"],
            "--temperature, --budget apply",
            "--agents llm",
        ),
        (["run", "diners", "--model", "local"], "--model applies", "--agents llm"),
        (["run", "game", "--game", "cpr", "--players", "nash", "--model", "local"], "--model applies", "--players llm"),
        (
            ["profile", "--players", "random", "--base-url", "http://127.0.0.1:1/v1"],
            "--base-url applies",
            "--players llm",
        ),
    ],
)
def test_llm_options_without_llm_agents_are_refused(tmp_path, capsys, args, flags, how):
    out = tmp_path / "o"
    code, _, err = run([*args, "--out", str(out)], capsys)
    one_line(code, err, flags, how)
    assert not out.exists()


# --- --group-size: help and validation agree -----------------------------------------------------
def test_group_size_help_names_what_the_validation_refuses(capsys):
    from cooplab.cli.games import smallest_group
    from cooplab.tasks.games import profiles as pf
    from cooplab.tasks.games.params import GAMES

    code, out, _ = run(["profile", "--help"], capsys)
    text = flat(out)
    for g in GAMES:
        k = smallest_group(g)
        assert k is not None, g
        pf.request(games=[g], players="nash", simulations=1, group_size=k)  # accepted
        if k > 2:
            assert f"{g} needs at least {k}" in text
            with pytest.raises(pf.ProfileError, match=f"--group-size {k - 1}"):
                pf.request(games=[g], players="nash", simulations=1, group_size=k - 1)
    assert "public-goods needs at least 3" in text  # the paper's constants: its group multiplier 2 < group size


# --- --no-block servers outlive the command -----------------------------------------------------------
def gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return True
    return state in ("Z", "X")  # a zombie is dead; only its parent (init) has not reaped it yet


def wait_gone(pid: int, seconds: float = 60) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if gone(pid):
            return True
        time.sleep(0.05)
    return gone(pid)


def answers(url: str) -> int:
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.status


def run_dir(tmp_path: Path) -> Path:
    d = tmp_path / "runs" / "a"
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps({"version": 2, "task": "cpr", "agents": "rule", "seed": 0}))
    (d / "traces.jsonl").write_text("")
    return d


@pytest.mark.skipif(not EXE.is_file(), reason="no cooplab console script next to this Python (not installed)")
@pytest.mark.parametrize("kind", ["view", "traces"])
def test_no_block_server_answers_after_the_command_returned_and_stops_by_its_pid(tmp_path, kind):
    d = run_dir(tmp_path)
    args = ["view", str(d.parent), "--no-block"] if kind == "view" else ["traces", "view", str(d), "--no-block"]
    p = subprocess.run([str(EXE), *args], capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    m = re.search(r"(http://127\.0\.0\.1:\d+/(?:traces\?id=0)?) \(server pid (\d+); stop it with 'kill \2'\)", p.stdout)
    assert m, p.stdout
    url, pid = m.group(1), int(m.group(2))
    try:
        assert answers(url) == 200  # the command has returned (and its process is gone): the server still serves
        assert not gone(pid)
    finally:
        import os
        import signal

        if not gone(pid):
            os.kill(pid, signal.SIGTERM)
    assert wait_gone(pid), f"server pid {pid} still running 60 s after SIGTERM"
    with pytest.raises(OSError):
        answers(url)


def test_no_block_on_a_port_in_use_is_one_line(tmp_path, capsys):
    d = run_dir(tmp_path)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        code, _, err = run(["view", str(d.parent), "--port", str(port), "--no-block"], capsys)
    one_line(code, err, f"cannot listen on 127.0.0.1:{port}")


# --- set-up and packaging ------------------------------------------------------------------------
def test_setup_ends_with_next_steps_that_parse():
    from cooplab.cli.tasks import run_keywords

    text = (ROOT / "scripts" / "setup.sh").read_text()
    tail = text[text.index("what to try next") :]
    lines = re.findall(r'echo "  \.venv/bin/cooplab ([^"#]*?)\s*(?:#[^"]*)?"', tail)
    assert 2 <= len(lines) <= 5, lines
    for line in lines:
        args = line.replace("$try_model", "local").split()
        if args[0] == "run":
            run_keywords(args[1], args[2:])  # raises ConfigError on an option the command does not take
        else:
            assert main([*args[:1], "--help"] if args[0] != "--help" else ["--help"]) == 0


def test_the_package_builds_without_setuptools_warnings(cooplab_wheel):
    out = cooplab_wheel.output
    assert "Warning" not in out and "deprecated" not in out, out[:3000]
    wheel = cooplab_wheel.path
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    meta = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "License-Expression: MIT" in meta
    assert any(n.startswith("cooplab/tasks/games/prompts/") for n in names)
