"""``cooplab view [DIR ...]``: the run explorer (:mod:`cooplab.evals.explorer`) on 127.0.0.1."""

from __future__ import annotations

import ipaddress
import json
import sys
import time
import webbrowser
from pathlib import Path
from typing import Any, List, Optional

import typer

from cooplab.cli.options import fail
from cooplab.runs.registry import find as task_for  # noqa: F401 - the explorer's task lookup, for the commands that serve it

#: the server processes started by --no-block from this process (subprocess.Popen; stop_started() ends them)
STARTED: list[Any] = []


def stop_started() -> None:
    """End every server process that --no-block started from this process (by its pid) and reap it."""
    while STARTED:
        child = STARTED.pop()
        if child.poll() is None:
            child.terminate()
            try:
                child.wait(timeout=30)
            except Exception:  # noqa: BLE001 - it ignored SIGTERM
                child.kill()
                child.wait()


def _check_host(host: str) -> str:
    if host == "localhost":
        return "127.0.0.1"
    try:
        return ipaddress.ip_address(host.strip("[]")).compressed
    except ValueError:
        fail(f"--host must be an IP address such as 127.0.0.1 (or localhost), got {host!r}")
        raise  # pragma: no cover - fail never returns


def _check_dirs(dirs: list[Path]) -> int:
    """How many run directories are under ``dirs`` (one line and exit 2 for a bad folder or none)."""
    from cooplab.evals.explorer.runs import discover

    for d in dirs:
        if not d.exists():
            fail(f"{d} does not exist; give folders holding run directories ('cooplab run ... --out DIR')")
        if not d.is_dir():
            fail(f"{d} is not a directory; give folders holding run directories")
    found = len(discover(dirs))
    if not found:
        fail(
            f"no run directories (with config.json or summary.json) under {', '.join(map(str, dirs))}; "
            "run one with 'cooplab run TASK --out DIR' or give another folder"
        )
    return found


def open_in_browser(url: str, open_browser: bool) -> None:
    if open_browser:
        try:
            webbrowser.open(url)
        except Exception:  # noqa: BLE001 - no browser: the URL is printed
            pass


def view_cmd(
    dirs: Optional[List[Path]] = typer.Argument(
        None,
        metavar="DIR",
        help="Folders holding run directories, searched recursively (sweeps' cells too). Default: ./runs if it exists, "
        "else the current folder.",
    ),
    port: int = typer.Option(0, "--port", help="Port to listen on (0: any free port)."),
    host: str = typer.Option(
        "127.0.0.1",
        "--host",
        help="Address to listen on (default: loopback only). Requests must still name localhost, 127.0.0.1 or [::1] in "
        "their Host header.",
    ),
    open_browser: bool = typer.Option(False, "--open/--no-open", help="Open the explorer in the default browser."),
    as_json: bool = typer.Option(
        False, "--json", help="Print {url, runs, dirs} as one JSON line instead of a sentence."
    ),
    no_block: bool = typer.Option(
        False,
        "--no-block",
        help="Serve from a background process, print its URL and pid, and return; it serves until stopped with 'kill "
        "PID'.",
    ),
) -> None:
    """Explore runs in a local web app: the list of runs (sortable, filterable), a society's rounds,
    agents, punishments, norms, beliefs and conversations, and two runs side by side."""
    from cooplab.extras import require

    require("view", "the run explorer (cooplab view)")
    if not 0 <= port <= 65535:
        fail(f"--port must be between 0 and 65535, got {port}")
    bind = _check_host(host)
    roots = list(dirs) if dirs else [Path("runs") if Path("runs").is_dir() else Path(".")]
    n = _check_dirs(roots)
    if no_block:
        from cooplab.cli import detached

        try:
            child, ready = detached.start(
                {"kind": "explorer", "dirs": [str(d.absolute()) for d in roots], "host": bind, "port": port}
            )
        except detached.DetachError as exc:
            fail(str(exc), code=2 if str(exc).startswith("cannot listen") else 1)
        STARTED.append(child)
        url, pid = ready["url"], child.pid
        if as_json:
            typer.echo(json.dumps({"url": url, "runs": n, "dirs": [str(d) for d in roots], "pid": pid}))
        else:
            typer.echo(
                f"cooplab view: {n} runs under {', '.join(map(str, roots))} at {url} (server pid {pid}; stop it with "
                f"'kill {pid}')"
            )
        open_in_browser(url, open_browser)
        return
    from cooplab.evals.explorer import app as explorer

    try:
        server, url = explorer.serve(roots, host=bind, port=port, task_for=task_for)
    except OSError as exc:
        fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
    if as_json:
        typer.echo(json.dumps({"url": url, "runs": n, "dirs": [str(d) for d in roots]}))
    else:
        typer.echo(f"cooplab view: {n} runs under {', '.join(map(str, roots))} at {url}  (Ctrl-C to stop)")
    sys.stdout.flush()
    open_in_browser(url, open_browser)
    serve_until_stopped(server, "cooplab view")


def serve_until_stopped(server: Any, name: str) -> None:
    """Keep the explorer's ``server`` answering until it ends or Ctrl-C, then stop it (``name``: the
    command, for the line that says it stopped)."""
    from cooplab.evals.explorer import app as explorer

    try:
        while server._cooplab_thread.is_alive():  # type: ignore[attr-defined]
            time.sleep(0.5)
    except KeyboardInterrupt:
        typer.echo(f"{name} stopped", err=True)
    finally:
        explorer.stop(server)
