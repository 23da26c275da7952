"""The ``cooplab`` console script. ``cooplab --version`` is answered here, before the command line
(Typer, LangChain, LangGraph, pandas) is imported, so it takes milliseconds; so are ``cooplab params
cpr`` and ``cooplab params cpr --json``, printed from the copy kept in tasks/cpr/params_table.json
(checked against the command by tests/cli/test_startup.py). Everything else, and those two when the
copy cannot be read, goes to :func:`cooplab.cli.entry`."""

from __future__ import annotations

import sys

#: commands answered from a stored copy of their output: the key of the copy in its file
STORED = {("params", "cpr"): "text", ("params", "cpr", "--json"): "json"}


def stored_output(args: list[str]) -> str | None:
    """The stored output of ``cooplab ARGS`` when it is one of :data:`STORED` and its copy reads
    as text, else None (the command line answers)."""
    kind = STORED.get(tuple(args))
    if kind is None:
        return None
    try:
        import json
        import os

        import cooplab.tasks.cpr as cpr

        with open(os.path.join(os.path.dirname(cpr.__file__), cpr.TABLE_FILE), encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError, ImportError, AttributeError):
        return None
    out = data.get(kind) if isinstance(data, dict) else None
    return out if isinstance(out, str) and out else None


def entry() -> None:
    if sys.argv[1:] == ["--version"]:
        from cooplab._version import __version__

        print(f"cooplab {__version__}")
        sys.exit(0)
    out = stored_output(sys.argv[1:])
    if out is not None:
        sys.stdout.write(out)
        sys.stdout.flush()
        sys.exit(0)
    from cooplab.cli import entry as cli_entry

    cli_entry()
