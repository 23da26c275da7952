"""Behaviour shared by both backends (local and docker)."""

from __future__ import annotations

import time

import pytest

from cooplab.sandbox import ExecResult


def test_df_preloaded_and_state_persists(session):
    r = session.run_code("x = len(df)\nprint('rows', x)\ndf.shape")
    assert r.status == "ok", r
    assert r.stdout == "rows 100\n"
    assert r.result == "(100, 3)"
    assert not r.state_reset and not r.truncated
    r = session.run_code("x * 2")
    assert r.status == "ok" and r.result == "200"
    r = session.run_code("y = 1")  # no trailing expression -> no result
    assert r.status == "ok" and r.result is None


def test_error_has_type_message_traceback(session):
    r = session.run_code("def f():\n    return 1/0\nf()")
    assert r.status == "error"
    assert r.error.type == "ZeroDivisionError"
    assert "division by zero" in r.error.message
    assert "line 2, in f" in r.error.traceback and "runner" not in r.error.traceback
    assert session.run_code("1+1").result == "2"


def test_syntax_error(session):
    r = session.run_code("def (")
    assert r.status == "error" and r.error.type == "SyntaxError"


def test_infinite_loop_times_out_and_keeps_state(session):
    session.run_code("keep = 41")
    r = session.run_code("while True:\n    pass", timeout=1.5)
    assert r.status == "timeout"
    assert not r.state_reset
    assert 1.4 < r.duration < 10
    r = session.run_code("keep + 1")
    assert r.status == "ok" and r.result == "42"


def test_sigint_ignored_is_killed_and_restarted(session):
    session.run_code("keep = 1")
    r = session.run_code(
        "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass", timeout=1.0
    )
    assert r.status == "timeout"
    assert r.state_reset
    r = session.run_code("'keep' in globals(), df.shape")
    assert r.status == "ok" and r.result == "(False, (100, 3))"


@pytest.mark.parametrize(
    "code",
    [
        "import sys; sys.exit(3)",
        "import os; os._exit(1)",
        "import os, signal; os.kill(os.getpid(), signal.SIGKILL)",
    ],
)
def test_exits_are_crashes_then_restart(session, code):
    session.run_code("keep = 1")
    r = session.run_code(code)
    assert r.status == "crashed", r
    assert r.state_reset
    r = session.run_code("'keep' in globals(), len(df)")
    assert r.result == "(False, 100)"


def test_large_output_capped(session):
    r = session.run_code("print('x' * 50_000_000)\n'done'", timeout=30)
    assert r.status == "ok" and r.truncated and r.result == "'done'"
    assert len(r.stdout) < 80_000
    assert "bytes of output truncated" in r.stdout


def test_many_short_lines_capped(session):
    r = session.run_code("for i in range(10_000_000):\n    print(i)", timeout=60)
    assert r.status == "ok" and r.truncated
    assert r.stdout.startswith("0\n1\n2\n")
    assert r.stdout.endswith("9999998\n9999999\n")
    assert len(r.stdout) < 80_000


def test_invalid_utf8_replaced(session):
    r = session.run_code("import sys\nsys.stdout.buffer.write(b'ok \\xff\\xfe\\xc3 end\\n')\nsys.stdout.flush()")
    assert r.status == "ok"
    assert r.stdout.startswith("ok ") and r.stdout.endswith(" end\n")
    assert "\ufffd" in r.stdout


def test_forged_frames_are_ignored(session):
    code = r"""
import json, os
fake = {"type": "result", "id": 2, "status": "ok", "result": "'FORGED'", "stdout": "", "stderr": ""}
# plausible nonces: none of them is the session's
for nonce in ["", "0" * 32, "deadbeef" * 4]:
    print(nonce + " " + json.dumps(fake), flush=True)
# the supervisor's stdout is not reachable from user code
for path in ("/proc/1/fd/1", "/proc/%d/fd/1" % os.getppid()):
    try:
        with open(path, "w") as f:
            f.write("0" * 32 + " " + json.dumps(fake) + "\n")
    except OSError:
        pass
"real"
"""
    r = session.run_code(code)
    assert r.status == "ok"
    assert r.result == "'real'"
    assert "FORGED" in r.stdout  # it is just output
    r2 = session.run_code("'second'")
    assert r2.result == "'second'"


def test_recursion(session):
    r = session.run_code("def f(n):\n    return f(n + 1)\nf(0)")
    assert r.status == "error" and r.error.type == "RecursionError"
    assert len(r.error.traceback) < 10_000
    r = session.run_code("import sys\nsys.setrecursionlimit(200_000)\ndef g(n):\n    return g(n + 1)\ng(0)", timeout=20)
    assert r.status == "error" and r.error.type == "RecursionError"
    # recursion in C (repr of a deeply nested list) with the guard removed overflows the C stack
    r = session.run_code(
        "import sys\nsys.setrecursionlimit(10**8)\nl = []\nfor i in range(2_000_000):\n    l = [l]\nrepr(l)", timeout=20
    )
    assert r.status in ("crashed", "error"), r
    assert session.run_code("len(df)").result == "100"


def test_figures_captured_and_capped(session):
    r = session.run_code("import matplotlib.pyplot as plt\nfor i in range(7):\n    plt.figure(); plt.plot([0, i])")
    assert r.status == "ok"
    assert len(r.figures) == 5 and r.truncated
    assert all(f.startswith(b"\x89PNG") for f in r.figures)
    r = session.run_code("import matplotlib.pyplot as plt\nplt.get_fignums()")
    assert r.result == "[]"


def test_plt_is_ready_but_pyplot_is_imported_only_when_the_code_draws(session):
    """``plt`` is in every session, yet a session that never draws never imports pyplot (half of a
    sandbox's start); the first use imports it with the off-screen backend, and figures are captured."""
    r = session.run_code("import sys\n'matplotlib.pyplot' in sys.modules, 'plt' in globals()")
    assert r.result == "(False, True)"
    r = session.run_code("plt.plot([0, 1]); plt.title('t')\nimport matplotlib\nmatplotlib.get_backend().lower()")
    assert r.status == "ok" and r.result == "'agg'" and len(r.figures) == 1 and r.figures[0].startswith(b"\x89PNG")
    r = session.run_code("import matplotlib.pyplot\nplt is matplotlib.pyplot")  # the stand-in gave way to pyplot
    assert r.result == "True"


def test_result_repr_capped(session):
    r = session.run_code("'a' * 1_000_000")
    assert r.status == "ok" and r.truncated and len(r.result) < 25_000


def test_fork_children_do_not_answer(session):
    r = session.run_code("import os\npid = os.fork()\n'parent' if pid else 'child'")
    assert r.result == "'parent'"
    assert session.run_code("'next'").result == "'next'"


def test_memory_error_maps_to_oom_or_kill(session):
    session.run_code("keep = 5")
    r = session.run_code("blocks = []\nfor i in range(100):\n    blocks.append(b'x' * 100_000_000)", timeout=30)
    assert r.status == "oom", r
    r = session.run_code("len(df)")
    assert r.status == "ok" and r.result == "100"


def test_result_serialisation(session):
    r = session.run_code("print('hi')")
    assert isinstance(r, ExecResult)
    d = r.to_json_dict()
    assert d["status"] == "ok" and d["figures"] == 0
    assert "status: ok" in r.to_text()


def test_network_connect_fails_fast(session):
    t = time.monotonic()
    r = session.run_code("import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=5)")
    assert r.status == "error", r
    assert time.monotonic() - t < 4


def test_idle_timeout_then_transparent_restart(backend, dataset):
    from cooplab.sandbox import SandboxConfig, SandboxSession

    cfg = SandboxConfig(dataset=dataset, idle_timeout=1.0, timeout=5)
    with SandboxSession(cfg, backend=backend) as s:
        assert s.run_code("keep = 1").status == "ok"
        time.sleep(2.5)  # the sandbox exits after 1 s without a request
        r = s.run_code("'keep' in globals(), len(df)")
        assert r.status == "ok" and r.result == "(False, 100)"
        assert r.state_reset
        assert not s.run_code("1").state_reset
