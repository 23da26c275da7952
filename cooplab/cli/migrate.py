"""``cooplab migrate PATH [--dry-run] [--json]``: a run folder (or a folder of many runs, or a folder
holding runs) brought up to the current on-disk format in place; a thin call of
:func:`cooplab.migrate` (:mod:`cooplab.runs.migrate`, docs/run-config.md)."""

from __future__ import annotations

from pathlib import Path

import typer

from cooplab.cli.options import fail
from cooplab.cli.tasks import echo_json


def migrate_cmd(
    path: Path = typer.Argument(
        ...,
        metavar="PATH",
        help="A run folder, a folder of many runs (a sweep, profile, bench, calibration), or a folder holding them.",
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Say which files would be converted; write nothing."),
    as_json: bool = typer.Option(False, "--json", help="Print what was converted (or would be) as JSON."),
) -> None:
    """Bring a run folder (or a folder of many runs) written in an earlier on-disk format up to the current one, in
    place, keeping the original files beside the new ones. Every file under PATH is converted and written atomically,
    its original bytes kept as NAME.vN.bak; a damaged or unknown file is one line (exit 2) and nothing is written; a
    folder already current is left as it is."""
    from cooplab.graphs.rundir import RunDirError
    from cooplab.runs import migrate

    try:
        done = migrate.migrate(path, dry_run=dry_run)
    except RunDirError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"{path}: cannot be migrated ({exc.strerror or exc}); nothing more was written")
    if as_json:
        echo_json(done.as_json())
        return
    for c in done.changes:
        kept = f" (original: {c.backup.name})" if c.backup is not None else ""
        typer.echo(f"{c.path}: {c.converter.reads} -> {c.converter.writes}{kept}")
    typer.echo(done.message())
