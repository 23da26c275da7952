"""One writer per run directory (issue 29, item 9): a process that runs, resumes or sweeps a run
directory holds its lock for its whole life; a second one stops at once with one line (exit 2)
before it changes anything; a holder killed with SIGKILL leaves no stale lock.

Real processes throughout: ``cooplab`` commands against a real OpenAI-compatible server on
loopback that holds a call open on request, so the first process is seen to hold the lock (the
server has its call) before the second starts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from cooplab.runs import store as runstore
from cooplab.runs import sweeps
from tests.agents.misbehaving_server import BODY_MODES, MisbehavingServer, Reply
from tests.helpers.progress import checkpoints

TIMEOUT = 180  # a safety net for a process that never ends; no test waits for it to pass


def cooplab(*args: object) -> list[str]:
    return [sys.executable, "-m", "cooplab.cli", *map(str, args)]


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    e = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    e.pop("OPENAI_API_KEY", None)
    return e


def wait_for(cond, proc: subprocess.Popen | None = None, timeout: float = TIMEOUT) -> None:
    """Until ``cond()`` holds (observable progress), failing if ``proc`` ends first."""
    deadline = time.monotonic() + timeout
    while not cond():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(
                f"the first process ended first: {proc.returncode}, {proc.stderr.read() if proc.stderr else ''}"
            )
        assert time.monotonic() < deadline, "no progress"
        time.sleep(0.05)


class HoldAfter:
    """Answers ``n`` calls, then holds every later call open until released."""

    def __init__(self, n: int):
        self.n, self.seen, self.holding = n, 0, threading.Event()
        self.__name__ = "hold-after"

    def __call__(self, req: dict) -> Reply:
        self.seen += 1
        if self.seen > self.n:
            self.holding.set()
            return Reply(hang=True)
        return BODY_MODES["ok"](req)


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("cooplab: error:"), (
        proc.returncode,
        proc.stderr,
    )
    return lines[0]


def test_a_second_process_stops_at_once_and_a_killed_holder_leaves_no_stale_lock(tmp_path, env):
    hold = HoldAfter(2)
    with MisbehavingServer(hold) as server:
        out = tmp_path / "run"
        run = cooplab(
            "run",
            "cpr",
            "--agents",
            "llm",
            "--model",
            "openai:m",
            "--base-url",
            server.url,
            "--n-agents",
            2,
            "--rounds",
            3,
            "--cache",
            "off",
            "--out",
            out,
            "-q",
        )
        first = subprocess.Popen(run, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            # the first process holds the lock: it is inside a model call, with a checkpoint written
            wait_for(lambda: hold.holding.is_set() and checkpoints(out) >= 1, first)

            second = subprocess.run(
                cooplab("resume", out, "-q"), env=env, capture_output=True, text=True, timeout=TIMEOUT
            )
            line = one_error_line(second)
            assert f"{out} is in use by another cooplab process (pid {first.pid})" in line, line

            forced = subprocess.run(run + ["--force"], env=env, capture_output=True, text=True, timeout=TIMEOUT)
            assert f"in use by another cooplab process (pid {first.pid})" in one_error_line(forced)
            assert (out / "checkpoints.sqlite").exists() and (out / "config.json").exists()  # --force cleared nothing
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait()
        server.mode = "ok"
        server.release.set()

        resumed = subprocess.run(
            cooplab("resume", out, "-q", "--json"), env=env, capture_output=True, text=True, timeout=TIMEOUT
        )
        assert resumed.returncode == 0, resumed.stderr
        assert json.loads(resumed.stdout)["status"] == "completed"


HOLDER = """
import sys
from pathlib import Path
from cooplab.runs.store import locked
with locked(Path(sys.argv[1])):
    print("held", flush=True)
    sys.stdin.read()
"""


def test_a_sweep_cell_another_process_writes_fails_alone_then_runs_once_it_is_free(tmp_path, env):
    script = tmp_path / "s.json"
    script.write_text(
        json.dumps({"answers": ['{"effort": 0.2, "punish": null, "vote": 1, "belief": "b", "proposal": "p"}']})
    )
    cfg = tmp_path / "sweep.json"
    cfg.write_text(
        json.dumps(
            {
                "task": "cpr",
                "out": "out",
                "seeds": [0, 1],
                "analysis": False,
                "fixed": {"agents": "llm", "model": f"scripted:{script}", "n_agents": 2, "rounds": 1, "cache": "off"},
            }
        )
    )
    cell = tmp_path / "out" / "cells" / "s1"
    cell.mkdir(parents=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(cell)], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None  # stdout=PIPE
    try:
        assert holder.stdout.readline().strip() == "held"
        busy = subprocess.run(cooplab("sweep", cfg, "--json"), env=env, capture_output=True, text=True, timeout=TIMEOUT)
        res = json.loads(busy.stdout)
        assert busy.returncode == 1 and res["ran"] == ["s0"]
        assert [f["cell"] for f in res["failed"]] == ["s1"]
        assert f"in use by another cooplab process (pid {holder.pid})" in res["failed"][0]["error"]
        assert not (cell / "config.json").exists()  # the busy cell was not touched
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    again = subprocess.run(cooplab("sweep", cfg, "--json"), env=env, capture_output=True, text=True, timeout=TIMEOUT)
    res = json.loads(again.stdout)
    assert again.returncode == 0 and res["ran"] == ["s1"] and res["skipped"] == ["s0"], again.stderr


def test_the_lock_is_reentrant_in_its_thread_and_refuses_other_threads(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    errors: list[BaseException] = []
    with runstore.locked(d):
        with runstore.locked(d):  # a run that judges itself takes it again
            pass
        t = threading.Thread(target=lambda: _try_lock(d, errors))
        t.start()
        t.join()
    assert len(errors) == 1 and isinstance(errors[0], runstore.RunDirBusy)
    assert "another run in this process" in str(errors[0])
    with runstore.locked(d):  # released when the outer block ended
        pass


def _try_lock(d: Path, errors: list[BaseException]) -> None:
    try:
        with runstore.locked(d):
            pass
    except runstore.RunDirBusy as exc:
        errors.append(exc)


def test_execute_job_refuses_a_cell_held_elsewhere(tmp_path):
    d = tmp_path / "cell"
    d.mkdir()
    j = sweeps.job(d, "cpr", {})
    result: list[BaseException | None] = []
    with runstore.locked(d):
        t = threading.Thread(target=lambda: result.append(_raises(lambda: sweeps.execute_job(j))))
        t.start()
        t.join()
    assert isinstance(result[0], runstore.RunDirBusy)


def _raises(fn) -> BaseException | None:
    try:
        fn()
    except BaseException as exc:  # noqa: BLE001
        return exc
    return None


def test_a_profile_whose_game_another_process_writes_is_one_line(tmp_path, env):
    out = tmp_path / "profile"
    args = cooplab("profile", "--out", out, "--players", "nash", "--games", "weakest-link", "--simulations", 2, "-q")
    assert subprocess.run(args, env=env, capture_output=True, text=True, timeout=TIMEOUT).returncode == 0
    game = out / "cells" / "game-weakest-link__s0"  # the profile's one cell
    (game / "summary.json").unlink()  # as if it had been interrupted: the next profile resumes it
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(game)], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None  # stdout=PIPE
    try:
        assert holder.stdout.readline().strip() == "held"
        busy = subprocess.run(args, env=env, capture_output=True, text=True, timeout=TIMEOUT)
        line = one_error_line(busy)
        assert (
            f"{game} is in use by another cooplab process (pid {holder.pid})" in line
            and "internal error" not in busy.stderr
        )
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert subprocess.run(args, env=env, capture_output=True, text=True, timeout=TIMEOUT).returncode == 0
    assert json.loads((game / "summary.json").read_text())["status"] == "completed"
