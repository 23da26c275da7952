"""The kill -9 path shared by the calibration tests (``calibrate cpr`` and ``calibrate diners``)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from cooplab.cli import main
from cooplab.evals import calibration as calib


def kill_after_first_sample_then_rerun(exe: str, args: list[str], out: Path, capsys: Any) -> tuple[dict, dict]:
    """Start ``exe ARGS --out OUT`` in its own process group, SIGKILL the group as soon as a sample
    is checkpointed (polling samples.jsonl, never a fixed wait), rerun in-process to the end.
    Returns (rows at the kill, rows at the end)."""
    proc = subprocess.Popen(
        [exe, *args, "--out", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.time() + 300  # a hang guard only
    try:
        while time.time() < deadline and proc.poll() is None and not calib.read_rows(out):
            time.sleep(0.01)
        assert proc.poll() is None, "the run ended before a sample was written"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    done = calib.read_rows(out)
    assert main([*args, "--out", str(out)]) == 0
    capsys.readouterr()
    return done, calib.read_rows(out)
