"""The llama.cpp worker dies with its parent (issue 37, item 9): a parent killed by SIGTERM or
SIGKILL in the middle of a long generation leaves no worker running at 100% CPU. And a worker
started from a thread that then ends keeps serving (Linux's parent-death signal follows the
starting *thread*, so workers are started from a process-long thread).

The real worker and model: the parent is a separate Python process that makes one short call
from a thread that ends, then starts a generation that cannot stop early (the end-of-text tokens
are banned) and prints the worker's pid once that worker is busy."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

PARENT = r"""
import json, sys, threading, time
from cooplab.agents import local_model as lm
from cooplab.agents.model_files import verified_path

p = lm.LocalModelProcess(str(verified_path("smollm2", "the local model")))
short = threading.Thread(target=p.chat, args=({"messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 2,
                                                "temperature": 0.0},))
short.start(); short.join()          # the thread that started the worker has ended
first = p.proc.pid

def long_call():
    try:
        p.chat({"messages": [{"role": "user", "content": "Count from 1 to 9000, one number per line."}], "max_tokens": 7000,
                "temperature": 0.0, "logit_bias": {"0": -100, "1": -100, "2": -100}})
    except Exception as exc:
        print("ERR", exc, flush=True)

threading.Thread(target=long_call, daemon=True).start()
print(json.dumps({"first": first, "restarts": p.restarts}), flush=True)
time.sleep(3600)
"""  # noqa: E501 (text kept verbatim)


def cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return True
    return state in ("Z", "X")  # dead; only not reaped yet


def wait_for(pred, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


@pytest.fixture(scope="module")
def model_file():
    import importlib.util

    from cooplab.agents.model_files import ModelFilesError, verified_path

    try:
        # find_spec, never import: native code stays out of the test runner (later tests check that)
        if importlib.util.find_spec("llama_cpp") is None:
            raise ImportError("llama_cpp is not installed")
        return verified_path("smollm2", "the local model")
    except (ImportError, ModelFilesError) as exc:
        pytest.fail(f"the local model is not installed here ({exc}); run scripts/setup.sh")


@pytest.mark.integration
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_the_worker_dies_with_its_parent_in_the_middle_of_a_generation(model_file, sig):
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    worker = None
    try:
        assert parent.stdout is not None and parent.stderr is not None  # both piped
        line = parent.stdout.readline()
        assert line, parent.stderr.read()[-2000:]
        info = json.loads(line)
        worker = info["first"]
        assert info["restarts"] == 0  # the short call's thread ended; its worker lives on
        assert not gone(worker)
        start = cpu_ticks(worker)
        assert wait_for(lambda: cpu_ticks(worker) - start >= 30, 120), "the worker never got busy"  # generating
        parent.send_signal(sig)
        parent.wait(timeout=60)
        assert wait_for(lambda: gone(worker), 20), f"worker {worker} still running 20 s after its parent got {sig.name}"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        if worker is not None and not gone(worker):
            os.kill(worker, signal.SIGKILL)
