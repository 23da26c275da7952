"""Headless Chromium for the tests that look at a page as a person sees it (the run explorer, its
traces page, the file of cooplab report). Chromium comes from the Debian package (scripts/ensure-chromium.sh); under CI
a
missing Chromium fails the test, elsewhere it is skipped with the reason."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from websockets.sync.client import ClientConnection


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
    cmd = [
        chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
        f"--window-size={size}",
        "--virtual-time-budget=10000",
        *args,
        url,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": str(tmp_path)})


class DevTools:
    """Headless Chromium driven over the DevTools protocol, for tests that act on a page as a person
    does (move the mouse, drag, pick an option) and read what the page then shows.

        with DevTools(tmp_path) as b:
            b.open(url)                       # waits for the load event
            b.eval("document.title")
            b.mouse("mouseMoved", 200, 300)
    """

    def __init__(self, tmp_path: Path, size: str = "1300,1000"):
        self.tmp_path, self.size = tmp_path, size
        self.proc: subprocess.Popen | None = None
        self.ws: ClientConnection | None = None
        self.events: list[dict] = []
        self._id = 0

    def __enter__(self) -> "DevTools":
        import re

        from websockets.sync.client import connect

        cmd = [
            chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--hide-scrollbars",
            f"--user-data-dir={self.tmp_path / 'chromium-devtools'}",
            f"--window-size={self.size}",
            "--remote-debugging-port=0",
            "--remote-allow-origins=*",
            "about:blank",
        ]
        self.proc = subprocess.Popen(
            cmd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "HOME": str(self.tmp_path)},
        )
        assert self.proc.stderr is not None  # stderr=PIPE
        url = None
        for line in self.proc.stderr:  # Chromium says where it listens as soon as it does
            m = re.search(r"DevTools listening on (ws://\S+)", line)
            if m:
                url = m.group(1)
                break
        assert url, "Chromium did not start its DevTools endpoint"
        import httpx

        port = url.split(":")[2].split("/")[0]
        pages = [
            t for t in httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=30).json() if t.get("type") == "page"
        ]
        self.ws = connect(
            pages[0]["webSocketDebuggerUrl"], max_size=None, open_timeout=30
        ).__enter__()  # closed in __exit__
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable")
        return self

    def __exit__(self, *exc) -> None:
        if self.ws is not None:
            self.ws.close()
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def send(self, method: str, params: dict | None = None, timeout: float = 60) -> dict:
        import json

        assert self.ws is not None, "DevTools.send outside its with block"

        self._id += 1
        me = self._id
        self.ws.send(json.dumps({"id": me, "method": method, "params": params or {}}))
        while True:
            msg = json.loads(self.ws.recv(timeout=timeout))
            if msg.get("id") == me:
                assert "error" not in msg, (method, msg["error"])
                return msg.get("result", {})
            self.events.append(msg)

    def wait_event(self, method: str, timeout: float = 60) -> dict:
        """The next event ``method`` (one already received counts), waiting for it."""
        import json

        assert self.ws is not None, "DevTools.wait_event outside its with block"

        for i, e in enumerate(self.events):
            if e.get("method") == method:
                return self.events.pop(i)
        while True:
            msg = json.loads(self.ws.recv(timeout=timeout))
            if msg.get("method") == method:
                return msg
            self.events.append(msg)

    def open(self, url: str) -> None:
        """Load ``url`` and wait for its load event (its deferred scripts have run by then)."""
        self.events = [e for e in self.events if e.get("method") != "Page.loadEventFired"]
        self.send("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired")

    def eval(self, expr: str):
        """The value of a JavaScript expression in the page (JSON-able)."""
        res = self.send("Runtime.evaluate", {"expression": expr, "returnByValue": True, "awaitPromise": True})
        assert "exceptionDetails" not in res, res["exceptionDetails"]
        return res["result"].get("value")

    def mouse(self, kind: str, x: float, y: float, button: str = "none", clicks: int = 0) -> None:
        """One mouse event at page coordinates (``kind``: mouseMoved, mousePressed, mouseReleased)."""
        self.send(
            "Input.dispatchMouseEvent",
            {
                "type": kind,
                "x": x,
                "y": y,
                "button": button,
                "clickCount": clicks,
                "buttons": 1 if button == "left" and kind != "mouseReleased" else 0,
            },
        )

    def console(self) -> list[str]:
        """The console and log messages the page wrote so far (CSP refusals show up here)."""
        out = []
        for e in self.events:
            if e.get("method") == "Log.entryAdded":
                out.append(str(e["params"]["entry"].get("text")))
            elif e.get("method") == "Runtime.consoleAPICalled":
                out.append(" ".join(str(a.get("value", a.get("description", ""))) for a in e["params"].get("args", [])))
            elif e.get("method") == "Runtime.exceptionThrown":
                out.append(str(e["params"]["exceptionDetails"]))
        return out
