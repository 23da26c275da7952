"""Commands on the runs of any task, mounted lazily by ``cooplab.cli``::

cooplab resume DIR [--budget USD] [--json] [-q]
cooplab sweep FILE [--executor local|ray] [--address A] [--analyze DIR] [--no-analysis] [--json] [-q]
cooplab report DIR [--out FILE] [--json]
cooplab analyze efficiency [--profiles DIR ...] [--science DIR ...] --out DIR [--json]
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from cooplab.cli import options as co
from cooplab.cli.options import BudgetRaiseOpt, fail
from cooplab.cli.tasks import echo_json
from cooplab.limits import ConfigError


def resume_cmd(
    run_dir: Path = typer.Argument(..., help="A run directory written by 'cooplab run'."),
    as_json: bool = typer.Option(False, "--json", help="Print summary.json to stdout."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
    budget: BudgetRaiseOpt = None,
) -> None:
    """Continue an interrupted run of any task from its last checkpoint (no round lost or repeated)."""
    from cooplab.cli.tasks import resume_and_report

    resume_and_report(run_dir, quiet=quiet, as_json=as_json, budget=budget)


def sweep_cmd(
    config: Path = typer.Argument(
        ...,
        help='Sweep file (JSON): {"task", "out", "fixed": {keyword: value}, "grid": {keyword: [values]}, "seeds": '
        '[...], "parallel": N, "sweep_budget": USD}, the keywords of \'cooplab run TASK\' (docs/scale.md); paths '
        "relative to the file's folder. Files of the earlier CPR, science and command-line-options formats are "
        "converted (a one-line notice).",
    ),
    executor: str = typer.Option(
        "local",
        "--executor",
        help="Where cells run: local (threads of this process, 'parallel' at a time) or ray (tasks on a Ray cluster; "
        "needs cooplab[ray]).",
    ),
    address: Optional[str] = typer.Option(
        None,
        "--address",
        help="With --executor ray: the cluster to join, auto or HOST:PORT (default: start a private local Ray instance "
        "with 'parallel' CPUs).",
    ),
    analyze_out: Optional[Path] = typer.Option(
        None, "--analyze", help="Where the task's analysis goes (CPR: default OUT/analysis; science: OUT)."
    ),
    no_analysis: bool = typer.Option(
        False,
        "--no-analysis",
        help="Skip the task's analysis at the end (CPR: 'cooplab analyze cpr'; science: scores.csv, conditions.csv).",
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar or per-cell lines."),
    as_json: bool = typer.Option(False, "--json", help="Print the sweep result (cells, table) as JSON."),
) -> None:
    """Run every cell of a sweep on an executor (skipping finished cells, resuming interrupted ones, a failed cell
    recorded while the others go on), then write OUT/table.csv (one row per cell) and the task's analysis."""
    from cooplab.cli.tasks import run_keywords
    from cooplab.runs import grid, registry, sweeps

    if executor not in sweeps.EXECUTORS:
        fail(f"--executor must be one of {', '.join(sweeps.EXECUTORS)}, got {executor!r}")
    if address is not None and executor != "ray":
        fail("--address is for --executor ray")
    quiet = quiet or as_json
    log = co.stderr_log(quiet)
    try:
        sw, notice = grid.load_file(config, convert_args=run_keywords)
        if no_analysis:
            sw = sw.model_copy(update={"analysis": False})
        todo = grid.jobs(sw, f"sweep config {config}")
    except (ConfigError, sweeps.SweepError) as exc:
        fail(str(exc))
    if notice:
        typer.echo(f"cooplab: note: {notice}", err=True)
    try:
        res = grid.run(sw, todo, executor=executor, address=address, log=log, quiet=quiet, analysis_out=analyze_out)
    except (ConfigError, sweeps.SweepError) as exc:
        fail(str(exc))
    rows = res.get("table") or []
    if as_json:
        echo_json(res)
    else:
        labels = list(todo[0]["labels"]) if todo else []
        wanted = registry.get(sw.task).sweep_columns
        numbers = [c for c in wanted if rows and c in rows[0]] or sorted(
            (k for k, v in (rows[0] if rows else {}).items() if isinstance(v, float) and k not in labels),
            key=lambda k: not k.endswith(".mean"),
        )[:4]
        for line in sweeps.format_table(rows, ["cell", "status", *numbers]):
            typer.echo(line)
        extra = "".join(
            f"; {what} in {res[key]}"
            for key, what in (("analysis_dir", "analysis"), ("scores_csv", "scores"))
            if res.get(key)
        )
        if res.get("analysis_error"):
            extra += f"; analysis failed: {res['analysis_error']}"
        unfunded = ""
        if res.get("sweep_budget"):
            b = res["sweep_budget"]
            unfunded = (
                (
                    f", {len(res['not_started'])} not started (sweep_budget ${b['usd']:g}: ${b['spent_usd']:.6f} "
                    "spent, "
                    f"${b['left_usd']:.6f} left; raise it and run the sweep again to start them)"
                )
                if res["not_started"]
                else f" (sweep_budget ${b['usd']:g}: ${b['spent_usd']:.6f} spent)"
            )
        typer.echo(
            f"{len(rows)} cells: {len(res['ran'])} ran, {len(res['resumed'])} resumed, {len(res['skipped'])} already "
            "done, "
            f"{len(res['failed'])} failed{unfunded} ({res['executor']}, {res['seconds']:.1f} s); table in "
            f"{res['table_csv']}{extra}"
        )
    if res["failed"]:
        raise typer.Exit(1)


def report_cmd(
    directory: Path = typer.Argument(
        ...,
        metavar="DIR",
        help="A run directory, a sweep or profile directory (run directories under cells/, runs/ or games/), or a "
        "folder of results (claims.md, statistics.md, efficiency.csv, ...).",
    ),
    out: Optional[Path] = typer.Option(
        None,
        "--out",
        help="The HTML file to write (default DIR/report.html; DIR/cooplab-report.html if DIR/report.html is another "
        "program's page).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the path, kind, sections, figures and bytes as JSON."),
) -> None:
    """Write the explorer's pages of a run, sweep, profile or folder of results to one self-contained HTML file
    (offline, no server)."""
    from cooplab.cli.view import task_for
    from cooplab.evals.report import ReportError, ReportWriteError, write_report

    try:
        res = write_report(directory, out, task_for=task_for)
    except ReportWriteError as exc:  # a full disk: the work failed, not the input
        fail(str(exc), code=1)
    except ReportError as exc:
        fail(str(exc))
    if as_json:
        echo_json(res)
    else:
        from cooplab.limits import clean_text

        typer.echo(
            clean_text(res["path"])
        )  # a path that is not UTF-8 is printed with U+FFFD, never an error after the work


def analyze_efficiency(
    profiles: list[Path] = typer.Option(
        [], "--profiles", help="Profile directories of 'cooplab profile' (repeat the option)."
    ),
    science: list[Path] = typer.Option(
        [], "--science", help="Science runs or science sweep directories (repeat the option)."
    ),
    out: Path = typer.Option(..., "--out", help="Directory for efficiency.csv, efficiency.md and efficiency.png."),
    as_json: bool = typer.Option(False, "--json", help="Print the table as JSON."),
) -> None:
    """What a model's game profile costs against one of its science runs (tokens, USD, time; from
    the ledgers), beside the paper's Table 10 where the model is one of its 35."""
    import json

    from cooplab.evals import efficiency
    from cooplab.runs import store as runstore

    try:
        res = efficiency.compare(list(profiles), list(science))  # bad input fails before --out is touched
        runstore.prepare_out(out, force=True)
        paths = efficiency.write(res, out)
    except (efficiency.EfficiencyError, runstore.RunDirError) as exc:
        fail(str(exc))
    table = res["table"]
    if as_json:
        echo_json(
            {
                "table": json.loads(table.to_json(orient="records")),
                "notes": res["notes"],
                "files": {k: str(v) for k, v in paths.items()},
            }
        )
        return
    typer.echo(efficiency.markdown(res).split("\n\n", 1)[1].rstrip())
    typer.echo(f"efficiency.csv, efficiency.md and efficiency.png in {out}")
