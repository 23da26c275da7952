"""Counterfactual forks and comparisons on the command line, mounted lazily by ``cooplab.cli``::

    cooplab fork RUN --at-round K [--set NAME=VALUE ...] [--model SPEC] [--prompt-variant NAME] [--invader KIND@ROUND]
    --out DIR [--force] [--json] [-q]
    cooplab compare A B [--column NAME ...] [--out DIR] [--json]

Each is a thin call of :func:`cooplab.fork` / :func:`cooplab.compare` (docs/forks.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from cooplab.cli.options import ForceOpt, QuietOpt, fail
from cooplab.cli.tasks import echo_json


def fork_cmd(
    run_dir: Path = typer.Argument(
        ..., metavar="RUN", help="The run directory to fork (written by 'cooplab run', or itself a fork)."
    ),
    at_round: int = typer.Option(
        ...,
        "--at-round",
        metavar="K",
        help="Fork at the end of this round (0: from the start); rounds 1..K are the parent's, at no model call.",
    ),
    out: Path = typer.Option(..., "--out", help="The fork's run directory (created if missing)."),
    set_: Optional[list[str]] = typer.Option(
        None,
        "--set",
        help="A changed parameter of the task, NAME=VALUE (repeatable; 'cooplab params TASK' lists them).",
    ),
    model: Optional[str] = typer.Option(None, "--model", help="Another model for the rounds after K (LLM runs)."),
    prompt_variant: Optional[str] = typer.Option(
        None, "--prompt-variant", help="Another prompt variant for the rounds after K (where the task has variants)."
    ),
    invader: Optional[str] = typer.Option(
        None,
        "--invader",
        help="An invader arriving after K: KIND@ROUND[:AGENT] with ROUND > K (CPR, the games and the diners; "
        "docs/mixed-societies.md).",
    ),
    force: ForceOpt = False,
    as_json: bool = typer.Option(False, "--json", help="Print the fork's summary.json to stdout."),
    quiet: QuietOpt = False,
) -> None:
    """Start a new run from a run's state at the end of round K with some settings changed (a counterfactual fork)."""
    from cooplab.cli.tasks import exit_if_stopped, report, run_errors
    from cooplab.runs import api, registry

    with run_errors(out):
        run = api.fork.in_cli_words(
            run_dir,
            at_round=at_round,
            out=out,
            set=set_ or None,
            model=model,
            prompt_variant=prompt_variant,
            invader=invader,
            force=force,
            quiet=quiet or as_json,
        )
    exit_if_stopped(run)
    if not as_json:
        rec = (run.config.get("record") or {}).get("fork") or {}
        typer.echo(
            f"fork of {rec.get('parent')} at round {rec.get('at_round')} with {rec.get('changes') or 'no changes'}"
        )
    report(registry.get(run.summary["task"]), run.out, run.summary, as_json)


def compare_cmd(
    a: Path = typer.Argument(..., metavar="A", help="A run directory."),
    b: Path = typer.Argument(..., metavar="B", help="Another run directory of the same task (a fork of A, say)."),
    column: Optional[list[str]] = typer.Option(
        None, "--column", help="A per-round column to draw (repeatable; default: the task's, else the first four)."
    ),
    out: Optional[Path] = typer.Option(
        None, "--out", help="Write compare.json and compare.png (the curves) to this directory."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as JSON."),
) -> None:
    """Show two runs from their common round on: outcome curves, the first round where they differ, and the difference
    in every outcome."""
    from cooplab.runs import api
    from cooplab.runs import store as runstore

    try:
        res = api.compare.in_cli_words(a, b, out=out, columns=column or None)
    except runstore.RunDirError as exc:
        fail(str(exc))
    if as_json:
        echo_json(res.to_dict())
        return
    typer.echo(f"A: {res.a}\nB: {res.b}")
    typer.echo(
        f"shared rounds: {'1..' + str(res.common_round) if res.common_round > 0 else 'none (by their fork records)'}; "
        f"first round that differs: {res.first_difference if res.first_difference is not None else 'none'}"
    )
    for o in res.outcomes:
        ci = f"  [{o['low']:.4g}, {o['high']:.4g}] ({o['interval']})" if o.get("low") is not None else ""
        typer.echo(f"  {o['outcome']}: A {o['a']:.4g}, B {o['b']:.4g}, B - A {o['difference']:+.4g}{ci}")
    if out is not None:
        typer.echo(f"compare.json and compare.png in {out}")
