"""Headless Chromium for the tests that look at a page as a person sees it (the trace viewer, the
HTML report). Chromium comes from the Debian package (scripts/ensure-chromium.sh); under CI a
missing Chromium fails the test, elsewhere it is skipped with the reason."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest


def chromium() -> str:
    """The Chromium executable, or fail (CI) / skip (elsewhere) naming the fix."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe:
        return exe
    msg = "chromium not found: run 'bash scripts/ensure-chromium.sh' (Debian package 'chromium')"
    if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
        pytest.fail(msg)
    pytest.skip(msg)


def browse(tmp_path: Path, url: str, *args: str, size: str = "1200,900") -> subprocess.CompletedProcess:
    """Load ``url`` in a fresh headless profile (10 s of virtual time for its scripts) with extra
    Chromium ``args`` such as ``--dump-dom`` or ``--screenshot=FILE``."""
    cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
           "--hide-scrollbars", f"--user-data-dir={tmp_path / 'chromium-profile'}", f"--window-size={size}",
           "--virtual-time-budget=10000", *args, url]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": str(tmp_path)})
