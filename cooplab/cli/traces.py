"""``cooplab traces export|view``: send a run's traces to LangSmith or an OTLP collector, or read
its model calls on the run explorer's traces page (:mod:`cooplab.evals.explorer`)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Optional

import typer

from cooplab.cli.options import fail
from cooplab.graphs.rundir import TRACES_FILE
from cooplab.graphs.tracing.export import traces_path as _traces_path

traces_app = typer.Typer(
    help="Traces of graph runs (LangSmith run format, RUN_DIR/traces.jsonl): export or view them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _check_dir(run_dir: Path) -> Path:
    if not run_dir.exists():
        fail(f"{run_dir} does not exist")
    path = _traces_path(run_dir)
    if not path.is_file():
        fail(f"no {TRACES_FILE} in {run_dir} (traces are written when a graph run ends)")
    return path


@traces_app.command("export")
def export_cmd(
    run_dir: Path = typer.Argument(
        ..., metavar="DIR", help="A run directory holding traces.jsonl (or the file itself)."
    ),
    endpoint: Optional[str] = typer.Option(
        None, "--endpoint", help="LangSmith-compatible API URL (default: $LANGSMITH_ENDPOINT, else LangSmith's)."
    ),
    otlp: Optional[str] = typer.Option(
        None,
        "--otlp",
        metavar="URL",
        help="Send OpenTelemetry spans (OpenInference conventions, OTLP/HTTP protobuf) to URL instead of LangSmith: a "
        "base URL such as http://127.0.0.1:6006 (Phoenix) or a full .../v1/traces URL. Needs the 'viewer' extra.",
    ),
    project: Optional[str] = typer.Option(
        None,
        "--project",
        help="Project to file the runs under (default: $LANGSMITH_PROJECT, else 'cooplab'; with --otlp: 'cooplab').",
    ),
    timeout: float = typer.Option(
        10.0, "--timeout", help="With --otlp: seconds per request, retries of a refused connection included."
    ),
    phoenix_prices: bool = typer.Option(
        False,
        "--phoenix-prices",
        help="With --otlp to Arize Phoenix: first set Phoenix's price of each of the run's models (Settings > Models, "
        "an exact-name entry) to the ledger's rates, so Phoenix's own cost columns show what the ledger charged. "
        "Any failure: one line, exit 2, nothing sent.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Send a finished run's traces to LangSmith (or a compatible server); the API key is read
    from $LANGSMITH_API_KEY, never from the command line. With --otlp URL: send them as OpenTelemetry
    spans to Phoenix, Langfuse, Jaeger or any OTLP/HTTP collector (no key needed)."""
    from cooplab.graphs.tracing import (
        ExportConfigError,
        ExportError,
        TraceFileError,
        export_traces,
    )

    _check_dir(run_dir)
    if otlp is not None:
        if endpoint is not None:
            fail("give --endpoint (LangSmith) or --otlp (OpenTelemetry), not both")
        _export_otlp(run_dir, otlp, project, timeout, as_json, phoenix_prices)
        return
    if phoenix_prices:
        fail("--phoenix-prices needs --otlp URL (the Phoenix server)")
    if endpoint is not None and not endpoint.startswith(("http://", "https://")):
        fail(f"--endpoint must be an http(s) URL, got {endpoint!r}")
    try:
        n = export_traces(run_dir, endpoint=endpoint, project=project)
    except (TraceFileError, ExportConfigError) as exc:
        fail(str(exc))
    except ExportError as exc:
        fail(str(exc), code=1)
    dest = endpoint or os.environ.get("LANGSMITH_ENDPOINT") or "LangSmith"
    proj = project or os.environ.get("LANGSMITH_PROJECT") or "cooplab"
    if as_json:
        typer.echo(json.dumps({"runs": n, "endpoint": dest, "project": proj, "file": str(_traces_path(run_dir))}))
    else:
        typer.echo(f"exported {n} runs from {_traces_path(run_dir)} to {dest} (project {proj})")


def _export_otlp(
    run_dir: Path, url: str, project: Optional[str], timeout: float, as_json: bool, phoenix_prices: bool = False
) -> None:
    from cooplab.evals.otlp_export import (
        OtlpConfigError,
        OtlpExportError,
        export_otlp,
        require_viewer,
    )

    require_viewer()  # a missing extra: one line naming it (MissingExtra is an ConfigError)
    try:
        res = export_otlp(run_dir, url, project=project, timeout=timeout, phoenix_prices=phoenix_prices)
    except OtlpConfigError as exc:
        fail(str(exc))
    except OtlpExportError as exc:
        fail(str(exc), code=1)
    if as_json:
        typer.echo(json.dumps(res.as_dict()))
        return
    rate = f", {res.spans / res.seconds:.0f} spans/s" if res.seconds > 0 and res.spans else ""
    typer.echo(
        f"exported {res.spans} spans ({res.traces} trace{'' if res.traces == 1 else 's'}) from {res.file} to "
        f"{res.endpoint} "
        f"(project {res.project}) in {res.seconds:.2f} s{rate}"
    )
    for e in res.prices or []:
        typer.echo(
            f"Phoenix price of model {e['model']}: {e['action']} (entry {e['id']}, "
            f"Phoenix used it after {res.price_seconds:.1f} s)"
        )
    if res.n_skipped:
        typer.echo(
            f"skipped {res.n_skipped} lines that are not usable runs "
            f"({', '.join(f'{n} {why}' for why, n in sorted(res.skipped.items()))}; first: {res.first_skip})",
            err=True,
        )
    if res.orphans:
        typer.echo(
            f"{res.orphans} parent runs are not in the file: their children are exported pointing at them", err=True
        )


@traces_app.command("view")
def view_cmd(
    run_dir: Path = typer.Argument(
        ..., metavar="DIR", help="A run directory holding traces.jsonl (or the file itself)."
    ),
    port: int = typer.Option(0, "--port", help="Port on 127.0.0.1 (0: any free port)."),
    open_browser: bool = typer.Option(False, "--open", help="Open the page in the default browser."),
    no_block: bool = typer.Option(
        False,
        "--no-block",
        help="Serve from a background process, print its URL and pid, and return; it serves until stopped with 'kill "
        "PID'.",
    ),
) -> None:
    """Read a run's model calls (prompts, answers, tokens, what each was charged, round by round) on
    the run explorer's traces page, served on 127.0.0.1 (the explorer of that run: 'cooplab view')."""
    from cooplab.cli.view import STARTED, open_in_browser, serve_until_stopped, task_for
    from cooplab.extras import require

    _check_dir(run_dir)
    if not 0 <= port <= 65535:
        fail(f"--port must be between 0 and 65535, got {port}")
    require("view", "the traces page of the run explorer (cooplab traces view)")
    run = run_dir if run_dir.is_dir() else run_dir.parent
    if no_block:
        from cooplab.cli import detached

        try:
            child, ready = detached.start({"kind": "traces", "run_dir": str(run.absolute()), "port": port})
        except detached.DetachError as exc:
            fail(str(exc), code=2 if str(exc).startswith("cannot listen") else 1)
        STARTED.append(child)
        typer.echo(f"model calls of {run}: {ready['url']} (server pid {child.pid}; stop it with 'kill {child.pid}')")
        open_in_browser(ready["url"], open_browser)
        return
    from cooplab.evals.explorer import app as explorer

    try:
        server, url = explorer.serve([run], port=port, task_for=task_for)
    except OSError as exc:
        fail(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}")
    page = url + explorer.TRACES_PAGE
    typer.echo(f"model calls of {run}: {page}  (Ctrl-C to stop)")
    open_in_browser(page, open_browser)
    serve_until_stopped(server, "cooplab traces view")
