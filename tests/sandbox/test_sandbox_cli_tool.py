"""CLI, LangChain tool and pure-Python parts (no Docker needed)."""

from __future__ import annotations

import json
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from cooplab.cli import main
from cooplab.sandbox import (
    ExecResult,
    SandboxConfig,
    SandboxSession,
    make_run_code_tool,
)
from cooplab.sandbox.models import parse_bytes
from cooplab.sandbox.runner import Capture
from cooplab.sandbox.transport import FrameParser


@click.command(context_settings={"ignore_unknown_options": True, "help_option_names": []})
@click.argument("argv", nargs=-1, type=click.UNPROCESSED)
def _cooplab(argv):
    sys.exit(main(list(argv)))


def sandbox(args, **kwargs):
    """``cooplab sandbox ARGS`` through the real entry point (cooplab.cli.main, which turns
    errors into one ``cooplab: error:`` line), as a CliRunner result."""
    return CliRunner().invoke(_cooplab, ["sandbox", *args], **kwargs)


@pytest.mark.parametrize("cmd", [[], ["build"], ["doctor"], ["exec"]])
def test_help(cmd):
    r = sandbox(cmd + ["--help"])
    assert r.exit_code == 0 and "Usage" in r.output


def test_exec_local_json(dataset):
    r = sandbox(["exec", "--backend", "local", "--dataset", str(dataset), "--code", "print('hi')\ndf.shape", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["status"] == "ok" and d["stdout"] == "hi\n" and d["result"] == "(100, 3)"


def test_exec_local_file_and_error(tmp_path):
    f = tmp_path / "c.py"
    f.write_text("1/0\n")
    r = sandbox(["exec", "--backend", "local", "--file", str(f)])
    assert r.exit_code == 1
    assert "ZeroDivisionError" in r.stderr


@pytest.mark.parametrize(
    "args, needle",
    [
        (["exec", "--backend", "local"], "exactly one of --code or --file"),
        (["exec", "--backend", "local", "--code", "1", "--file", "x.py"], "exactly one"),
        (["exec", "--backend", "local", "--file", "/nonexistent.py"], "cannot read"),
        (["exec", "--backend", "local", "--dataset", "/nonexistent.csv", "--code", "1"], "dataset not found"),
        (["exec", "--backend", "local", "--timeout", "0", "--code", "1"], "--timeout must be positive"),
    ],
)
def test_user_errors_exit_2_one_line(args, needle):
    r = sandbox(args)
    assert r.exit_code == 2, r.output
    assert needle in r.stderr and r.stderr.startswith("cooplab: error: ")
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "entry",
    [
        ["-m", "cooplab.cli", "sandbox"],
        ["-c", "import sys; from cooplab.cli import entry; sys.argv[0] = 'cooplab'; entry()", "sandbox"],
    ],
)
def test_user_error_through_the_real_cli(entry, tmp_path):
    """``python -m cooplab.cli`` and the console script's entry point go through cooplab.cli.main: one error line, exit
    2."""
    p = subprocess.run(
        [sys.executable, *entry, "exec", "--backend", "local", "--code", "1", "--file", "x.py"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert p.stderr == "cooplab: error: give exactly one of --code or --file\n" and p.stdout == ""


def test_langchain_tool(dataset):
    with SandboxSession(SandboxConfig(dataset=dataset, timeout=5), backend="local") as s:
        seen = []
        tool = make_run_code_tool(s, on_result=lambda res, code, desc: seen.append((res.status, desc)))
        assert tool.name == "run_code"
        assert "df" in tool.description and "30" not in tool.description.split("Timeout")[0]
        out = tool.invoke({"code": "total = df['a'].sum()\ntotal", "description": "sum"})
        assert "status: ok" in out and "4950" in out
        out = tool.invoke({"code": "total + 1"})
        assert "4951" in out
        out = tool.invoke({"code": "1/0"})
        assert "ZeroDivisionError" in out
        assert seen[0] == ("ok", "sum")


def test_frame_parser_requires_nonce():
    p = FrameParser("abc")
    p.feed(b'abc {"type":"x"}\nabd {"type":"forged"}\n {"type":"forged"}\nabc not-json\nabc {"type":')
    assert [f["type"] for f in p.frames] == ["x"]
    p.feed(b'"y"}\n')
    assert [f["type"] for f in p.frames] == ["x", "y"]


def test_capture_keeps_head_and_tail():
    c = Capture(10)
    for i in range(100):
        c.feed(str(i % 10).encode())
    assert c.truncated and c.total == 100
    t = c.text()
    assert t.startswith("01234") and t.endswith("56789") and "90 bytes" in t
    c2 = Capture(10)
    c2.feed(b"abc")
    assert not c2.truncated and c2.text() == "abc"


def test_parse_bytes_and_text_rendering():
    assert parse_bytes("2g") == 2 * 1024**3 and parse_bytes("64m") == 64 * 1024**2 and parse_bytes(5) == 5
    r = ExecResult(status="timeout", state_reset=True, stdout="a" * 100)
    t = r.to_text(max_chars=50)
    assert len(t) < 100 and "status: timeout" in t


def _run_docker_test_without_daemon(ci: bool):
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["DOCKER_HOST"] = "unix:///nonexistent/docker.sock"
    if ci:
        env["CI"] = "true"
    here = Path(__file__).parent
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-k",
            "limits_applied",
            str(here / "test_sandbox_docker.py"),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=here.parent.parent,
        timeout=120,
    )


def test_docker_tests_fail_under_ci_without_docker():
    r = _run_docker_test_without_daemon(ci=True)
    assert r.returncode == 1, r.stdout[-2000:]
    assert "CI is set" in r.stdout


def test_docker_tests_skip_without_ci_and_docker():
    r = _run_docker_test_without_daemon(ci=False)
    assert r.returncode == 0, r.stdout[-2000:]
    assert "1 skipped" in r.stdout
