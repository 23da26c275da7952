"""The wheel of this checkout, built once per test process and shared by the tests that need it.

``pip wheel <checkout>`` builds in place: setuptools writes ``build/`` and ``cooplab.egg-info/``
next to the sources. Two builds at the same moment (two pytest-xdist workers) would write the same
files, so a build holds an exclusive lock on ``build/.wheel-build.lock`` while it runs."""

from __future__ import annotations

import fcntl
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class BuiltWheel:
    path: Path  #: the .whl file
    output: str  #: what pip and setuptools printed (stdout then stderr), for the warnings check


def build_wheel(dest: Path) -> BuiltWheel:
    """``pip wheel --no-deps --no-build-isolation`` of this checkout into ``dest`` (asserts success)."""
    dest.mkdir(parents=True, exist_ok=True)
    lock_path = ROOT / "build" / ".wheel-build.lock"
    lock_path.parent.mkdir(exist_ok=True)
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        p = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "-q",
                "--no-deps",
                "--no-build-isolation",
                "-w",
                str(dest),
                str(ROOT),
            ],
            capture_output=True,
            text=True,
            timeout=900,
        )
    assert p.returncode == 0, p.stderr[-2000:]
    wheels = sorted(dest.glob("cooplab-*.whl"))
    assert len(wheels) == 1, wheels
    return BuiltWheel(wheels[0], p.stdout + p.stderr)
