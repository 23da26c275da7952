"""The result channel cannot be forged (issue 9, part 2), limits are enforced by
the supervisor, bad numbers are rejected, and a killed host takes its sandbox
with it.  Tests with the ``backend`` fixture run on both backends; the docker
ones are marked ``docker`` by conftest."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import TypedDict

import click
import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from cooplab.cli import main
from cooplab.sandbox import SandboxConfig, SandboxSession


class Limits(TypedDict):
    """The SandboxConfig limits these tests shorten."""

    timeout: float
    interrupt_grace: float


FAST = Limits(timeout=3.0, interrupt_grace=1.0)
REPO = Path(__file__).resolve().parents[2]


@click.command(context_settings={"ignore_unknown_options": True, "help_option_names": []})
@click.argument("argv", nargs=-1, type=click.UNPROCESSED)
def _cooplab(argv):
    sys.exit(main(list(argv)))


def sandbox(args):
    """``cooplab sandbox ARGS`` through the real entry point (cooplab.cli.main), as a CliRunner result."""
    return CliRunner().invoke(_cooplab, ["sandbox", *args])


# Every id the worker loop could be answering: the frames of the running call
# are searched for its request (user code can read anything in its process).
FIND_IDS = r"""
import json, os, sys, time
def _ids(frame):
    ids = set(range(1, 50))
    while frame is not None:
        req = frame.f_locals.get('req')
        if isinstance(req, dict) and 'id' in req:
            ids.add(req['id'])
        frame = frame.f_back
    return ids
def _fake(i, text="'FAKE'"):
    return ("\n" + json.dumps({"type": "result", "id": i, "status": "ok", "result": text, "error": None,
                               "figures": [], "stdout": "", "stderr": ""}) + "\n").encode()
"""


def _wait_for(predicate, timeout: float, what: str, step: float = 0.1):
    """Poll ``predicate`` until it is true; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")


# -- forged frames -------------------------------------------------------------


def test_fake_frame_on_every_fd_then_sleep_times_out(session):
    code = (
        FIND_IDS
        + r"""
ids = _ids(sys._getframe())
for fd in sorted(int(x) for x in os.listdir('/proc/self/fd')):
    for i in ids:
        try:
            os.write(fd, _fake(i))
        except OSError:
            pass
time.sleep(100)
"""
    )
    t = time.monotonic()
    r = session.run_code(code, timeout=1.5)
    assert r.status == "timeout", r
    assert r.result is None and "FAKE" not in (r.result or "")
    assert not r.state_reset  # the sleep was interrupted (KeyboardInterrupt), state kept
    assert time.monotonic() - t < 60
    r = session.run_code("'real'")
    assert r.status == "ok" and r.result == "'real'"


def test_thread_forging_later_calls_is_stopped(session):
    code = (
        FIND_IDS
        + r"""
import threading
def forge():
    main = threading.main_thread().ident
    while True:
        for i in _ids(sys._current_frames().get(main)):
            try:
                os.write(4, _fake(i, "'FORGED'"))
            except OSError:
                return
        time.sleep(0.005)
threading.Thread(target=forge, daemon=True).start()
'started'
"""
    )
    r = session.run_code(code)
    # the thread outlived its call: the sandbox was restarted, and the call's answer (which the
    # thread could have written) is not trusted
    assert r.status == "error" and r.result is None and r.error.type == "ThreadsLeftRunning", r
    assert r.state_reset
    assert "thread" in r.stderr and "Join every thread" in r.stderr
    r = session.run_code("1 + 1")
    assert r.status == "ok" and r.result == "2" and not r.state_reset, r
    r = session.run_code("while True:\n    pass", timeout=1.5)
    assert r.status == "timeout" and r.result is None, r


def test_joined_threads_and_library_pools_do_not_restart(session):
    r = session.run_code("import threading\nt = threading.Thread(target=lambda: None)\nt.start()\nt.join()\n'joined'")
    assert r.status == "ok" and r.result == "'joined'" and not r.state_reset, r
    # pyarrow's thread pools start on first use unless the worker started them before its baseline
    r = session.run_code("pd.DataFrame({'x': range(1000)}).to_parquet('t.parquet')\npd.read_parquet('t.parquet').shape")
    if r.status == "error" and r.error.type == "ImportError":
        pytest.skip("no pyarrow in this sandbox")
    assert r.status == "ok" and r.result == "(1000, 1)" and not r.state_reset, r
    r = session.run_code("1 + 1")
    assert r.result == "2" and not r.state_reset


def test_worker_resumed_by_another_process(session):
    # A child resumes the worker as fast as it can.  When it resumes the stopped worker the
    # supervisor kills it and stops the worker again; when its SIGCONT cancels the worker's
    # SIGSTOP before it takes effect, the call never ends and times out.  Either way the
    # code only harms its own call: never a forged answer, and the session goes on.
    code = (
        "import os, signal\nparent = os.getpid()\nif os.fork() == 0:\n    while True:\n"
        "        os.kill(parent, signal.SIGCONT)\n'resumed'"
    )
    for _ in range(3):
        r = session.run_code(code, timeout=2)
        assert r.status in ("ok", "timeout"), r
        if r.status == "ok":
            assert r.result == "'resumed'" and not r.state_reset, r
        r = session.run_code("'next'")
        assert r.status == "ok" and r.result == "'next'", r


# -- limits enforced by the supervisor ------------------------------------------


def test_result_channel_flood_is_bounded(session):
    # 300 MB into the result pipe: neither a crash nor supervisor memory growth
    code = (
        "import os\nchunk = b'x' * (1 << 20)\nfor _ in range(150):\n    os.write(4, chunk)\n"
        "for _ in range(150):\n    os.write(4, b'{\"type\": \"result\"}\\n' * 50000)\n'done'"
    )
    r = session.run_code(code, timeout=120)
    assert r.status == "ok" and r.result == "'done'", r
    r = session.run_code("import os\n[l for l in open('/proc/%d/status' % os.getppid()) if l.startswith('VmHWM')][0]")
    assert r.status == "ok", r
    hwm_kb = int(r.result.split()[1])
    assert hwm_kb < 150_000, r.result  # the legitimate frame budget is ~14 MB, kept at most twice


def test_forged_frame_is_capped_by_supervisor(session):
    # the code may end its own call with a result of its choosing (by stopping the
    # worker itself), but the caps are applied by the supervisor on what it reads
    code = (
        FIND_IDS
        + r"""
import base64, signal
req_id = [i for i in _ids(sys._getframe()) if isinstance(i, str)][0]
small = base64.b64encode(b'\x89PNG' + b'0' * 100).decode()
big = base64.b64encode(b'\x89PNG' + b'0' * 3_000_000).decode()
frame = {"type": "result", "id": req_id, "result": "R" * 1_000_000 + "\ud800", "result_truncated": False,
         "figures": [big, "not base64!", 12] + [small] * 50, "figures_dropped": -5,
         "error": None, "status": "ok"}
os.write(4, ("\n" + json.dumps(frame) + "\n").encode())
os.kill(os.getpid(), signal.SIGSTOP)
"""
    )
    r = session.run_code(code)
    assert r.status == "ok", r
    assert r.truncated
    assert len(r.result) <= 20_000 and r.result.startswith("RRR") and r.result.endswith("\\ud800")
    assert len(r.figures) == 5 and all(len(f) <= 2_000_000 for f in r.figures)
    r.result.encode("utf-8")  # valid text
    assert session.run_code("'after'").result == "'after'"


def test_forged_error_is_capped(session):
    r = session.run_code("E = type('E' * 5000, (Exception,), {})\nraise E('m' * 100_000 + '\\ud800')")
    assert r.status == "error"
    assert len(r.error.type) <= 200 and len(r.error.message) <= 2000 and len(r.error.traceback) <= 8000
    (r.error.message + r.error.traceback).encode("utf-8")


def test_stdout_flood_capped_by_supervisor(session):
    # written straight to the pipe, bypassing the worker's sys.stdout
    r = session.run_code("import os\nfor _ in range(64):\n    os.write(1, b'y' * (1 << 20))\n'done'", timeout=60)
    assert r.status == "ok" and r.result == "'done'" and r.truncated
    assert len(r.stdout) < 80_000


# -- numbers from users, config files and models ---------------------------------

BAD_TIMEOUTS = [math.nan, math.inf, -math.inf, -1, 0, 1e12, pytest.param(10**400, id="10**400")]


@pytest.mark.parametrize("bad", BAD_TIMEOUTS + ["5", True, [1]])
def test_run_code_rejects_bad_timeouts(bad, dataset):
    with SandboxSession(SandboxConfig(dataset=dataset, **FAST), backend="local") as s:
        with pytest.raises((ValueError, TypeError)):
            s.run_code("1", timeout=bad)
        r = s.run_code("1 + 1")
        assert r.status == "ok" and r.result == "2" and not r.state_reset


@pytest.mark.parametrize(
    "field, bad",
    [
        ("timeout", math.nan),
        ("timeout", math.inf),
        ("timeout", -1),
        ("timeout", 1e12),
        ("timeout", "nan"),
        ("interrupt_grace", math.nan),
        ("idle_timeout", math.inf),
        ("start_timeout", -1),
        ("cpus", math.nan),
        ("pids_limit", -1),
        ("max_figures", -1),
        ("memory", "lots"),
        ("tmpfs_size", "0"),
    ],
)
def test_config_rejects_bad_numbers(field, bad):
    with pytest.raises(ValidationError):
        SandboxConfig(**{field: bad})
    with pytest.raises(ValidationError):
        SandboxSession(backend="local", **{field: bad})
    cfg = SandboxConfig()
    with pytest.raises(ValidationError):
        setattr(cfg, field, bad)


@pytest.mark.parametrize("raw", ["NaN", "Infinity", "-Infinity", "-1", "0", "1e300", '"5"', "true", "[1]", "{}"])
def test_supervisor_survives_bad_timeout_requests(session, raw):
    # straight to the supervisor, bypassing the host's checks
    t = session._transport
    t._write(('{"op": "exec", "id": "raw", "code": "1", "timeout": %s}\n' % raw).encode())
    frame = t.recv(time.monotonic() + 30)
    assert frame is not None and frame.get("id") == "raw"
    assert frame["status"] == "error" and "timeout" in frame["error"]["message"]
    r = session.run_code("1 + 1")
    assert r.status == "ok" and r.result == "2" and not r.state_reset


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1", "0", "1e12"])
def test_cli_rejects_bad_timeouts(value):
    r = sandbox(["exec", "--backend", "local", "--timeout", value, "--code", "1"])
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cooplab: error: --timeout must be positive"), r.stderr
    assert "Traceback" not in r.output


def test_cli_entry_one_line_errors(tmp_path, capsys):
    from cooplab.cli import main

    for args in (["--timeout", "abc", "--code", "1"], ["--timeout", "nan", "--code", "1"]):
        assert main(["sandbox", "exec", "--backend", "local", *args]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and err.startswith("cooplab: error: "), err


def test_cli_file_not_utf8(tmp_path):
    f = tmp_path / "latin1.py"
    f.write_bytes(b"x = '\xe9t\xe9'\nx\n")
    r = sandbox(["exec", "--backend", "local", "--file", str(f)])
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cooplab: error: ") and "not UTF-8" in lines[0], r.stderr
    d = tmp_path / "dir.py"
    d.mkdir()
    r = sandbox(["exec", "--backend", "local", "--file", str(d)])
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1 and "cannot read" in r.stderr


SURROGATE_CODES = [
    ("'\\ud800'", 0),
    ("class S:\n    def __repr__(self):\n        return 'a\\ud800b'\nS()", 0),
    ("print('p\\ud800q')", 0),
    ("raise ValueError('v\\ud800w')", 1),
]


@pytest.mark.parametrize("code, rc", SURROGATE_CODES)
@pytest.mark.parametrize("as_json", [False, True])
def test_cli_prints_lone_surrogates(code, rc, as_json):
    args = ["exec", "--backend", "local", "--code", code] + (["--json"] if as_json else [])
    r = sandbox(args)
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert r.exit_code == rc, r.output
    assert "\\ud800" in r.output
    if as_json:
        d = json.loads(r.stdout)
        json.dumps(d, ensure_ascii=False).encode("utf-8")  # no lone surrogate left


# -- the exact CLI case of the issue, and a killed host ---------------------------

FORGE_CLI = (
    'import os;os.write(4,b\'{"type":"result","id":1,"result":"fake","error":null}\\n\');import time;time.sleep(100)'
)


def test_cli_forged_frame_times_out(backend):
    t = time.monotonic()
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "cooplab.cli",
            "sandbox",
            "exec",
            "--backend",
            backend,
            "--timeout",
            "2",
            "--code",
            FORGE_CLI,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    elapsed = time.monotonic() - t
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert "fake" not in p.stdout
    assert "[status: timeout]" in p.stderr, p.stderr
    assert elapsed < 120, elapsed  # generous: a cold start plus the 2 s timeout


KILLED_HOST = r"""
import sys
from cooplab.sandbox import SandboxConfig, SandboxSession
s = SandboxSession(SandboxConfig(timeout=600), backend=sys.argv[1]).start()
t = s._transport
print(s.container_id or "", t.ready_info.get("pid"), getattr(t, "workdir", ""), flush=True)
s.run_code("open('/tmp/work/started' if %r == 'docker' else 'started', 'w').close()\nwhile True:\n    pass"
           % sys.argv[1], timeout=600)
"""


def _pid_gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return True
    return data[data.rfind(b")") + 2 :][:1] in (b"Z", b"X")


def test_killed_host_takes_its_sandbox_along(backend):
    proc = subprocess.Popen([sys.executable, "-c", KILLED_HOST, backend], stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert proc.stdout is not None  # piped
        line = proc.stdout.readline().split()
        assert line, "the child did not start a sandbox"
        if backend == "docker":
            from cooplab.sandbox import docker_backend

            cid = line[0]
            api = docker_backend.get_client().api

            def started() -> bool:
                ex = api.exec_create(cid, ["test", "-e", "/tmp/work/started"])
                api.exec_start(ex["Id"])
                return api.exec_inspect(ex["Id"])["ExitCode"] == 0

            def gone() -> bool:
                return cid not in [c["Id"] for c in docker_backend.list_sandbox_containers()]
        else:
            worker, workdir = int(line[0]), line[1]

            def started() -> bool:
                return os.path.exists(os.path.join(workdir, "started"))

            def gone() -> bool:
                return _pid_gone(worker)

        _wait_for(started, 120, "the call to start running")
        assert not gone()
        proc.kill()  # SIGKILL: no atexit clean-up, no close message
        proc.wait(30)
        _wait_for(gone, 60, "the sandbox to go away after its host was killed")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
