"""Nothing the code starts outlives its call (issue 29, item 1).

Each case hides a process from the supervisor in a different way and turns it
into a forger: it steals requests from the worker's request pipe, answers them
with a made-up result on the result channel and stops the worker, which once
made `while True: pass`, `1/0` and `os._exit(3)` all report ``ok``.  After the
call that starts it, no process other than the supervisor and the worker may
be alive (as the host sees the container), and later calls report their true
status."""

from __future__ import annotations

import pytest

from cooplab.sandbox import docker_backend

# Runs in the worker.  ``forge_step`` steals whatever request reaches fd 3,
# answers it with a made-up result on fd 4 and stops the worker.  ``ready`` is
# written once the stray is in place; the call waits for it.
FORGER = r"""
import ctypes, json, os, select, signal, sys, threading, time
WORKER = os.getpid()
libc = ctypes.CDLL(None, use_errno=True)
ready_r, ready_w = os.pipe()

def fake(i):
    return ("\n" + json.dumps({"type": "result", "id": i, "result": "'FORGED'", "error": None,
                               "figures": [], "figures_dropped": 0, "result_truncated": False}) + "\n").encode()

stolen = []

def forge_step(wait=0.01):
    r, _, _ = select.select([3], [], [], wait)
    if not r:
        return
    for line in os.read(3, 1 << 20).split(b"\n"):
        try:
            stolen.append(json.loads(line)["id"])
        except Exception:
            continue
        os.write(1, b"STRAY\n")
        os.write(4, fake(stolen[-1]))
        os.kill(WORKER, signal.SIGSTOP)

def forge_forever():
    while True:
        forge_step()

def ready():
    os.write(ready_w, b"R")

def wait_ready():
    r, _, _ = select.select([ready_r], [], [], 60)
    if not r:
        raise RuntimeError("the stray did not start")
    return 'ready'
"""

HIDING = {
    # the main thread exits, another thread runs on: /proc/PID/stat says Z
    "dead_main_thread": r"""
if os.fork() == 0:
    def body():
        while open('/proc/self/stat').read().rsplit(')', 1)[1].split()[0] != 'Z':
            time.sleep(0.001)
        ready()
        forge_forever()
    threading.Thread(target=body).start()
    libc.syscall(60, 0)  # SYS_exit: this thread only, the thread group lives on
""",
    "double_fork_setsid": r"""
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        ready()
        forge_forever()
    os._exit(0)
""",
    "renamed": r"""
if os.fork() == 0:
    libc.prctl(15, b"kworker/0:1", 0, 0, 0)  # PR_SET_NAME
    ready()
    forge_forever()
""",
    "ignores_signals": r"""
if os.fork() == 0:
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGTSTP):
        signal.signal(s, signal.SIG_IGN)
    ready()
    forge_forever()
""",
    # a new pid at every step: the parent exits as soon as its child exists
    "forks_in_a_loop": r"""
if os.fork() == 0:
    ready()
    while True:
        if os.fork() != 0:
            os._exit(0)
        forge_step(0.001)
""",
    # the same as fast as it can, without a pause between two forks
    "hops_without_pause": r"""
if os.fork() == 0:
    ready()
    while True:
        try:
            if os.fork() != 0:
                os._exit(0)
        except OSError:
            pass
""",
    # a thread that keeps writing to the inherited fds, every id it ever saw
    "writer_thread": r"""
if os.fork() == 0:
    def writer():
        while True:
            for i in list(stolen) or ["x"]:
                for fd in (1, 2, 4):
                    os.write(fd, fake(i))
            time.sleep(0.001)
    threading.Thread(target=writer, daemon=True).start()
    ready()
    forge_forever()
""",
}


def live_processes(container_id: str) -> dict[str, list[str]]:
    """{host pid: states of its live threads} of the container, as the host sees it
    (``ps`` run by the Docker daemon): a thread group counts while any of its threads is alive,
    whatever its leader's state."""
    top = docker_backend.get_client().api.top(container_id, ps_args="-eLo pid,lwp,stat")
    alive: dict[str, list[str]] = {}
    for pid, _lwp, stat in top["Processes"]:
        if not stat.startswith(("Z", "X")):
            alive.setdefault(pid, []).append(stat)
    return alive


@pytest.mark.docker
@pytest.mark.parametrize("hiding", sorted(HIDING))
def test_hidden_process_does_not_outlive_its_call(dsession, hiding):
    r = dsession.run_code(FORGER + HIDING[hiding] + "\nwait_ready()", timeout=60)
    assert r.status == "ok" and r.result == "'ready'", r
    # only the supervisor and the (stopped) worker are left
    alive = live_processes(dsession.container_id)
    assert len(alive) == 2, alive
    r = dsession.run_code("while True:\n    pass", timeout=1.5)
    assert r.status == "timeout" and r.result is None, r
    r = dsession.run_code("1/0")
    assert r.status == "error" and r.error.type == "ZeroDivisionError", r
    r = dsession.run_code("'true ' + 'answer'")
    assert r.status == "ok" and r.result == "'true answer'" and "STRAY" not in r.stdout, r
    assert len(live_processes(dsession.container_id)) == 2
    r = dsession.run_code("import os\nos._exit(3)")
    assert r.status == "crashed" and "code 3" in r.error.message and r.state_reset, r
    r = dsession.run_code("len(df)")
    assert r.status == "ok" and r.result == "100", r


@pytest.mark.docker
def test_memory_bomb_after_a_hidden_process_is_an_oom(dsession):
    r = dsession.run_code(FORGER + HIDING["dead_main_thread"] + "\nwait_ready()", timeout=60)
    assert r.status == "ok" and r.result == "'ready'", r
    r = dsession.run_code("x = b'x' * (3 << 30)\nlen(x)", timeout=60)
    assert r.status == "oom" and r.result is None and r.state_reset, r


def test_a_frame_written_by_another_process_is_never_the_answer(session):
    # (both backends) A child of the code writes the running call's own id on the result channel and stops the
    # worker: only the worker process may answer, so the call goes on and reports its true end.
    code = r"""
import json, os, signal, sys
def ids(frame):
    found = set()
    while frame is not None:
        req = frame.f_locals.get('req')
        if isinstance(req, dict) and 'id' in req:
            found.add(req['id'])
        frame = frame.f_back
    return found
me = os.getpid()
pid = os.fork()
if pid == 0:
    for i in ids(sys._getframe()):
        os.write(4, ("\n" + json.dumps({"type": "result", "id": i, "result": "'FORGED'", "error": None,
                                        "figures": []}) + "\n").encode())
    os.kill(me, signal.SIGSTOP)
    os._exit(0)
os.waitpid(pid, 0)
1/0
"""
    r = session.run_code(code)
    assert r.status == "error" and r.error.type == "ZeroDivisionError" and r.result is None, r
    r = session.run_code("'next'")
    assert r.status == "ok" and r.result == "'next'", r
