"""``cooplab sandbox ...`` commands (mounted by the main CLI as a sub-app).

Errors go through :func:`cooplab.cli.options.fail`, so every mistake prints one line
``cooplab: error: ...`` when the commands run through ``cooplab.cli.main`` (the ``cooplab``
console script or ``python -m cooplab.cli``).
"""

from __future__ import annotations

import codecs
import json
import sys
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from cooplab.cli.options import fail
from cooplab.sandbox.models import DEFAULT_IMAGE

app = typer.Typer(
    help="Sandboxed Python executor (the agents' run_code tool).", no_args_is_help=True, add_completion=False
)


class BackendChoice(str, Enum):
    docker = "docker"
    local = "local"
    auto = "auto"


def _echo(text: str, err: bool = False) -> None:
    """Print ``text`` whatever it holds (lone surrogates, characters the
    terminal's encoding lacks): escaped, never a UnicodeEncodeError."""
    stream = sys.stderr if err else sys.stdout
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        codecs.lookup(encoding)
    except LookupError:
        encoding = "utf-8"
    try:
        text.encode(encoding)
    except UnicodeEncodeError:
        text = text.encode(encoding, "backslashreplace").decode(encoding, "replace")
    typer.echo(text, err=err, nl=False)


def _read_code(file: Path) -> str:
    try:
        data = file.read_bytes()
    except OSError as e:
        fail(f"cannot read {file}: {e.strerror or e}")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        fail(f"cannot read {file}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start})")
    raise AssertionError("unreachable")


@app.command()
def build(
    image: str = typer.Option(DEFAULT_IMAGE, help="Image name:tag to create."),
    mirror: Optional[str] = typer.Option(
        None, help="Debian mirror (default: deb.debian.org or $COOPLAB_DEBIAN_MIRROR)."
    ),
    suite: str = typer.Option("bookworm", help="Debian suite to debootstrap."),
    no_pyarrow: bool = typer.Option(False, "--no-pyarrow", help="Do not add pyarrow (no parquet support)."),
    force: bool = typer.Option(False, "--force", help="Rebuild even if the image exists."),
) -> None:
    """Build the sandbox image offline: debootstrap a Debian rootfs and docker-import it (~2-3 min, root)."""
    from cooplab.sandbox import docker_backend
    from cooplab.sandbox.image import build_image
    from cooplab.sandbox.models import SandboxError

    try:
        if not force and docker_backend.image_available(image):
            typer.echo(f"{image} already present (use --force to rebuild)")
            return
        build_image(image, mirror=mirror, suite=suite, with_pyarrow=not no_pyarrow)
    except SandboxError as e:
        fail(str(e).splitlines()[0] if str(e) else type(e).__name__, 1 if "command failed" in str(e) else 2)


@app.command()
def doctor(image: str = typer.Option(DEFAULT_IMAGE, help="Image name:tag to check.")) -> None:
    """Report Docker daemon / image status and what to run to fix it (exit 1 when not ready)."""
    from cooplab.sandbox.image import doctor as run_doctor

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

    from cooplab.sandbox.models import SandboxConfig, SandboxError, check_seconds
    from cooplab.sandbox.session import SandboxSession

    if (code is None) == (file is None):
        fail("give exactly one of --code or --file")
    if file is not None:
        code = _read_code(file)
    try:
        check_seconds(timeout, "--timeout")
    except (TypeError, ValueError) as e:
        fail(str(e))
    try:
        config = SandboxConfig(dataset=dataset, timeout=timeout, image=image)
    except ValidationError as e:
        fail(e.errors()[0].get("msg", "invalid option").removeprefix("Value error, "))
    try:
        with SandboxSession(config, backend=backend.value) as session:
            result = session.run_code(code or "")
    except SandboxError as e:
        fail(str(e).splitlines()[0])
    if as_json:
        _echo(json.dumps(result.to_json_dict(), indent=2) + "\n")
    else:
        if result.stdout:
            _echo(result.stdout if result.stdout.endswith("\n") else result.stdout + "\n")
        if result.stderr:
            _echo(result.stderr if result.stderr.endswith("\n") else result.stderr + "\n", err=True)
        if result.result is not None:
            _echo(result.result + "\n")
        if result.figures:
            _echo(f"[{len(result.figures)} figure(s) captured]\n", err=True)
        if result.error is not None:
            tb = result.error.traceback.rstrip()
            if tb:
                _echo(tb + "\n", err=True)
            last = tb.splitlines()[-1] if tb else ""
            if not last.startswith(result.error.type):
                _echo(f"{result.error.type}: {result.error.message}\n", err=True)
        if result.status != "ok":
            _echo(f"[status: {result.status}]\n", err=True)
    raise typer.Exit(0 if result.status == "ok" else 1)
