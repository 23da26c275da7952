"""The ``cooplab`` console script. ``cooplab --version`` is answered here, before the command line
(Typer, LangChain, LangGraph, pandas) is imported, so it takes milliseconds; everything else goes
to :func:`cooplab.cli.entry`."""

from __future__ import annotations

import sys


def entry() -> None:
    if sys.argv[1:] == ["--version"]:
        from cooplab._version import __version__

        print(f"cooplab {__version__}")
        sys.exit(0)
    from cooplab.cli import entry as cli_entry

    cli_entry()
