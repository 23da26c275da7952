"""The ``cooplab`` console script. ``cooplab --version`` is answered here, before the command line
(Typer, LangChain, LangGraph, pandas) is imported, so it takes milliseconds; so are ``cooplab params
cpr`` and ``cooplab params cpr --json``, printed from the copy kept in tasks/cpr/params_table.json
(checked against the command by tests/cli/test_startup.py). Everything else, and those two when the
copy cannot be read, goes to :func:`cooplab.cli.entry`.

The process is cooplab's own, so its cyclic garbage collector is set for what a run does here
(:func:`tune_collector`; ``COOPLAB_GC``). Python's library (``cooplab.run`` in a notebook) never
touches the collector: it belongs to the user there."""

from __future__ import annotations

import gc
import os
import sys

#: the collector's thresholds in a cooplab process (Python's own: 700, 10, 10). A run keeps a large,
#: growing heap that holds no cycles to find (the imported libraries, the state, every agent's prompt),
#: and Python's thresholds scan all of it again and again: a 10,000-agent society spent about a third
#: of its CPU there, and a two-round run about 0.3 s of its start. Collections 70 times rarer still
#: find every cycle; at most about 50,000 young objects wait for one (a few MB).
GC_THRESHOLDS = (50_000, 20, 20)
GC_ENV = "COOPLAB_GC"


def tune_collector(value: str | None) -> str | None:
    """Set this process's collector thresholds from ``COOPLAB_GC``'s ``value``: unset or empty gives
    :data:`GC_THRESHOLDS`, ``python`` keeps Python's, three whole numbers ``A,B,C`` are passed to
    :func:`gc.set_threshold`. Returns a one-line error for any other value (nothing is changed)."""
    text = (value or "").strip()
    if text.lower() == "python":
        return None
    if not text:
        gc.set_threshold(*GC_THRESHOLDS)
        return None
    from cooplab.limits import gc_thresholds  # only here: --version stays free of it

    thresholds = gc_thresholds(text.split(","))
    if thresholds is not None:
        gc.set_threshold(*thresholds)
        return None
    shown = text if len(text) <= 40 else text[:40] + "..."
    return (
        f"{GC_ENV}={shown!r} is not a setting of the garbage collector: use 'python' (Python's thresholds), "
        "three whole numbers such as '50000,20,20', or leave it unset"
    )


def tune_or_exit() -> None:
    """:func:`tune_collector` from the environment; a bad value is one line on stderr and exit 2."""
    err = tune_collector(os.environ.get(GC_ENV))
    if err is not None:
        sys.stderr.write(f"cooplab: error: {err}\n")
        sys.exit(2)


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
    tune_or_exit()
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
