"""What every benchmark writes with its numbers: the machine, and its own section of RESULTS.md."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).with_name("RESULTS.md")


def uname() -> str:
    try:
        return subprocess.run(["uname", "-a"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return " ".join(platform.uname()).strip()


def machine_info(*, versions: bool = False, docker: bool = False) -> list[str]:
    """Markdown lines: date, ``uname -a``, cores, Python (and LangGraph/LangChain versions), the Docker
    engine, the load average at the start (the machine is shared)."""
    python = f"- python {platform.python_version()}"
    if versions:
        import langchain_core
        import langgraph.version

        python += f", langgraph {langgraph.version.__version__}, langchain-core {langchain_core.__version__}"
    lines = [
        f"- date (UTC): {dt.datetime.now(dt.timezone.utc).strftime('%Y-%m-%d %H:%M')}",
        f"- uname -a: `{uname()}`",
        f"- nproc: {os.cpu_count()}",
        python,
    ]
    if docker:
        try:
            from cooplab.sandbox import docker_backend

            v = docker_backend.get_client().version()
            lines.append(f"- docker: {v.get('Version')} (API {v.get('ApiVersion')})")
        except Exception:  # noqa: BLE001 - information only
            lines.append("- docker: unavailable")
    import gc

    lines.append(f"- the garbage collector's thresholds: {', '.join(map(str, gc.get_threshold()))}")
    try:
        load = os.getloadavg()
        lines.append(f"- load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    except OSError:
        pass
    return lines


def gc_option(ap: Any) -> None:
    """``--gc cooplab|python`` on an argparse parser: the garbage collector's thresholds to measure under."""
    ap.add_argument(
        "--gc",
        choices=("cooplab", "python"),
        default="cooplab",
        help="the garbage collector's thresholds: the cooplab console script's (default; cooplab._entry) or "
        "Python's own (the library in a notebook)",
    )


def apply_gc(choice: str) -> None:
    """Set this process's collector as ``cooplab`` runs (the console script's thresholds) or leave Python's."""
    if choice == "cooplab":
        import gc

        try:
            from cooplab._entry import GC_THRESHOLDS
        except ImportError:  # a checkout from before the console script set its collector (--before)
            GC_THRESHOLDS = (50_000, 20, 20)  # noqa: N806 - the constant of today's cooplab._entry
        gc.set_threshold(*GC_THRESHOLDS)


def write_section(title: str, text: str, path: Path = RESULTS) -> None:
    """Replace the ``## {title}`` section of ``path`` with ``text`` (append it if absent); other
    sections are kept."""
    old = path.read_text() if path.exists() else "# Benchmark results\n"
    pattern = re.compile(rf"^## {re.escape(title)}[ \t]*$.*?(?=^## |\Z)", re.S | re.M)  # the whole heading line
    new = pattern.sub(lambda m: text, old, count=1) if pattern.search(old) else old.rstrip("\n") + "\n\n" + text
    path.write_text(new if new.endswith("\n") else new + "\n")


def emit(title: str, text: str, *, write: bool, out: Path | None = None) -> None:
    """Write the section to RESULTS.md (or ``out``) when ``write``, else print it (smoke runs)."""
    if write:
        write_section(title, text, out or RESULTS)
        print(f"wrote '## {title}' to {out or RESULTS}")
    else:
        print(text)


#: ``cooplab ARGS`` through the command line's own entry point, in the Python that runs it
CLI = "import sys; from cooplab.cli import main; sys.exit(main(sys.argv[1:]))"


def cooplab_json(python: str, args: list[str], env: dict[str, str], *, who: str, timeout: float) -> Any:
    """``cooplab ARGS -q --json`` run by ``python`` (cwd outside the checkout: nothing shadows its
    install); its JSON answer, or SystemExit naming the benchmark ``who`` and the command's last words."""
    res = subprocess.run(
        [python, "-c", CLI, *args, "-q", "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tempfile.gettempdir(),
        timeout=timeout,
    )
    if res.returncode != 0:
        raise SystemExit(f"{who}: cooplab {' '.join(args[:3])} failed ({res.returncode}): {res.stderr.strip()[-600:]}")
    return json.loads(res.stdout)
