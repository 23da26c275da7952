"""``cooplab robustness SWEEP``: how a sweep's results change with the wording of the prompts
(:mod:`cooplab.evals.robustness`, docs/robustness.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from cooplab.cli.options import fail
from cooplab.limits import ConfigError


def robustness_cmd(
    sweep: Path = typer.Argument(
        ...,
        metavar="SWEEP",
        help="The output folder of a sweep whose grid has prompt_variant (cells/ and table.csv), or the sweep file "
        '(its "out" is read).',
    ),
    out: Optional[Path] = typer.Option(
        None, "--out", help="Where robustness.json and robustness.png go (default SWEEP/robustness)."
    ),
    alpha: float = typer.Option(
        0.05, "--alpha", help="Significance level of the Welch tests of each effect, in (0, 1)."
    ),
    no_figure: bool = typer.Option(False, "--no-figure", help="Write robustness.json only."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Report how every outcome of a sweep over prompt variants spreads across the variants (per model: mean, range,
    s.d.), each variant's share of answers that failed to parse or fell back, and which condition effects are fragile
    (change sign or lose significance across variants)."""
    from cooplab.cli.tasks import echo_json
    from cooplab.evals import robustness as rb

    try:
        folder = _folder(sweep)
        report = rb.robustness(folder, out=out, alpha=alpha, figure=not no_figure)
    except ConfigError as exc:
        fail(str(exc))
    if as_json:
        echo_json(report)
    else:
        for line in rb.text(report):
            typer.echo(line)


def _folder(sweep: Path) -> Path:
    """The sweep's output folder: ``sweep`` itself, or the ``out`` of a sweep file."""
    if sweep.is_file():
        from cooplab.runs import grid

        sw, _notice = grid.load_file(sweep)
        return Path(sw.out)
    if not sweep.exists():
        raise ConfigError(
            f"{sweep} does not exist; give the output folder of a sweep over prompt variants (or its sweep file)"
        )
    return sweep
