"""``--no-block`` of ``cooplab view`` and ``cooplab traces view``: the server runs in a detached child
process (its own session, no terminal, no pipe left open to the command), so it keeps serving after
the command has returned, until it is stopped by its pid (``kill PID``).

The command starts ``python -m cooplab.cli.detached SPEC`` (SPEC: JSON naming the server and its
settings) and reads one line from it: ``{"url": ...}`` once the server accepts connections, or
``{"error": ...}``. The child then points its standard streams at /dev/null, so it writes to no
pipe again, and serves until it is signalled.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from typing import Any

#: how long the command waits for the child's first line (its imports may be slow on a busy machine)
READY_SECONDS = 120.0


class DetachError(Exception):
    """The server could not be started in the background (one line: why)."""


def start(spec: dict[str, Any], *, ready_seconds: float = READY_SECONDS) -> tuple[subprocess.Popen, dict[str, Any]]:
    """Start the server of ``spec`` in a detached child; return (the child, its ready line)."""
    child = subprocess.Popen(
        [sys.executable, "-m", "cooplab.cli.detached", json.dumps(spec)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )
    assert child.stdout is not None
    line = b""
    deadline = time.monotonic() + ready_seconds
    try:
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0:
                raise DetachError(f"the server did not start within {ready_seconds:g} s")
            ready, _, _ = select.select([child.stdout], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(child.stdout.fileno(), 4096)
                if not chunk:  # the child ended before it said anything
                    raise DetachError(f"the server process ended at start-up (exit code {child.wait()})")
                line += chunk
                if len(line) > 65536:
                    raise DetachError("the server process wrote an unreadable first line")
        try:
            msg = json.loads(line.decode("utf-8", "replace"))
        except ValueError:
            raise DetachError("the server process wrote an unreadable first line") from None
        if not isinstance(msg, dict) or ("url" not in msg and "error" not in msg):
            raise DetachError("the server process wrote an unreadable first line")
        if "error" in msg:
            child.wait(timeout=30)
            raise DetachError(str(msg["error"]))
    except BaseException:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdout.close()
        raise
    child.stdout.close()
    return child, msg


def _serve(spec: dict[str, Any]) -> tuple[Any, str, Any]:
    """Start the server of ``spec`` (in this process); return (server, url, how to tell it is alive)."""
    if spec["kind"] == "explorer":
        from pathlib import Path

        from cooplab.evals.explorer import app as explorer
        from cooplab.runs.registry import find as task_for

        server, url = explorer.serve(
            [Path(d) for d in spec["dirs"]], host=spec["host"], port=int(spec["port"]), task_for=task_for
        )
        return server, url, server._cooplab_thread.is_alive
    if spec["kind"] == "traces":  # the explorer of one run, at its traces page
        from pathlib import Path

        from cooplab.evals.explorer import app as explorer
        from cooplab.runs.registry import find as task_for

        server, url = explorer.serve(
            [Path(spec["run_dir"])], host=spec.get("host", "127.0.0.1"), port=int(spec["port"]), task_for=task_for
        )
        return server, url + explorer.TRACES_PAGE, server._cooplab_thread.is_alive
    raise ValueError(f"unknown server kind {spec['kind']!r}")


def main(argv: list[str]) -> int:
    def say(obj: dict[str, Any]) -> None:
        os.write(1, (json.dumps(obj) + "\n").encode())

    try:
        spec = json.loads(argv[0])
        server, url, alive = _serve(spec)
    except OSError as exc:
        say({"error": f"cannot listen on {spec.get('host', '127.0.0.1')}:{spec.get('port')}: {exc.strerror or exc}"})
        return 2
    except Exception as exc:  # noqa: BLE001 - the command says it in one line
        say({"error": f"{type(exc).__name__}: {exc}"})
        return 1
    say({"url": url, "pid": os.getpid()})
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # no pipe to the command stays open; nothing is written to a closed one
        os.dup2(null, fd)
    while alive():
        time.sleep(0.5)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
