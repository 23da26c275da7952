"""``cooplab sandbox ...`` commands (mounted by the main CLI as a sub-app)."""

from __future__ import annotations

import json
import sys
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from .models import DEFAULT_IMAGE

app = typer.Typer(help="Sandboxed Python executor (the agents' run_code tool).", no_args_is_help=True,
                  add_completion=False)


class BackendChoice(str, Enum):
    docker = "docker"
    local = "local"
    auto = "auto"


def _fail(msg: str, code: int = 2) -> None:
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(code)


@app.command()
def build(
    image: str = typer.Option(DEFAULT_IMAGE, help="Image name:tag to create."),
    mirror: Optional[str] = typer.Option(None, help="Debian mirror (default: deb.debian.org or $COOPLAB_DEBIAN_MIRROR)."),
    suite: str = typer.Option("bookworm", help="Debian suite to debootstrap."),
    no_pyarrow: bool = typer.Option(False, "--no-pyarrow", help="Do not add pyarrow (no parquet support)."),
    force: bool = typer.Option(False, "--force", help="Rebuild even if the image exists."),
) -> None:
    """Build the sandbox image offline: debootstrap a Debian rootfs and docker-import it (~2-3 min, root)."""
    from . import docker_backend
    from .image import build_image
    from .models import SandboxError

    try:
        if not force and docker_backend.image_available(image):
            typer.echo(f"{image} already present (use --force to rebuild)")
            return
        build_image(image, mirror=mirror, suite=suite, with_pyarrow=not no_pyarrow)
    except SandboxError as e:
        _fail(str(e).splitlines()[0] if str(e) else type(e).__name__, 1 if "command failed" in str(e) else 2)


@app.command()
def doctor(image: str = typer.Option(DEFAULT_IMAGE, help="Image name:tag to check.")) -> None:
    """Report Docker daemon / image status and what to run to fix it (exit 1 when not ready)."""
    from .image import doctor as run_doctor

    ok, lines = run_doctor(image)
    for line in lines:
        typer.echo(line)
    raise typer.Exit(0 if ok else 1)


@app.command("exec")
def exec_(
    code: Optional[str] = typer.Option(None, "--code", "-c", help="Python code to run."),
    file: Optional[Path] = typer.Option(None, "--file", "-f", help="File with Python code to run."),
    backend: BackendChoice = typer.Option(BackendChoice.auto, help="docker, local (not a security boundary) or auto."),
    dataset: Optional[Path] = typer.Option(None, help="CSV/parquet file pre-loaded as df (mounted read-only)."),
    timeout: float = typer.Option(30.0, help="Seconds before the code is interrupted."),
    image: str = typer.Option(DEFAULT_IMAGE, help="Sandbox image (docker backend)."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Run code once in a fresh sandbox and print the result."""
    from pydantic import ValidationError

    from .models import SandboxConfig, SandboxError
    from .session import SandboxSession

    if (code is None) == (file is None):
        _fail("give exactly one of --code or --file")
    if file is not None:
        try:
            code = file.read_text()
        except OSError as e:
            _fail(f"cannot read {file}: {e.strerror}")
    if timeout <= 0:
        _fail("--timeout must be positive")
    try:
        config = SandboxConfig(dataset=dataset, timeout=timeout, image=image)
    except ValidationError as e:
        _fail(e.errors()[0].get("msg", "invalid option").removeprefix("Value error, "))
    try:
        with SandboxSession(config, backend=backend.value) as session:
            result = session.run_code(code or "")
    except SandboxError as e:
        _fail(str(e).splitlines()[0])
    if as_json:
        typer.echo(json.dumps(result.to_json_dict(), indent=2))
    else:
        if result.stdout:
            sys.stdout.write(result.stdout if result.stdout.endswith("\n") else result.stdout + "\n")
        if result.stderr:
            sys.stderr.write(result.stderr if result.stderr.endswith("\n") else result.stderr + "\n")
        if result.result is not None:
            typer.echo(result.result)
        if result.figures:
            typer.echo(f"[{len(result.figures)} figure(s) captured]", err=True)
        if result.error is not None:
            tb = result.error.traceback.rstrip()
            if tb:
                typer.echo(tb, err=True)
            last = tb.splitlines()[-1] if tb else ""
            if not last.startswith(result.error.type):
                typer.echo(f"{result.error.type}: {result.error.message}", err=True)
        if result.status != "ok":
            typer.echo(f"[status: {result.status}]", err=True)
    raise typer.Exit(0 if result.status == "ok" else 1)


if __name__ == "__main__":  # pragma: no cover
    app()
