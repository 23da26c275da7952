"""``cooplab plan``: a study's calls, tokens and cost before it runs, and the seeds it needs (mounted lazily)::

cooplab plan SWEEP.json [--pilot-model SPEC] [--pilot-rounds N] [--pilot-seeds N]
             [--outcome COL --difference D [--power P] [--alpha A] [--paired] [--variance-from DIR]] [--json]
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

import typer

from cooplab.cli.options import fail
from cooplab.cli.tasks import echo_json


def plan_cmd(
    config: Path = typer.Argument(
        ...,
        help='A sweep file (as for \'cooplab sweep\'; "out" may be left out) or one run\'s keywords as JSON ({"task": '
        '"cpr", "agents": "llm", "model": ..., "rounds": 12, ...}).',
    ),
    pilot_model: Optional[str] = typer.Option(
        None,
        "--pilot-model",
        help="The model the pilot runs on instead of the cells' own (needed when they cost money): scripted:FILE or "
        "builtin:NAME that answers validly.",
    ),
    pilot_rounds: int = typer.Option(
        4, "--pilot-rounds", help="Rounds of each pilot (the rest is extrapolated from them)."
    ),
    pilot_seeds: int = typer.Option(
        1, "--pilot-seeds", help="Pilot runs per grid point (2 or more give the outcome's spread for --difference)."
    ),
    outcome: Optional[str] = typer.Option(
        None,
        "--outcome",
        help="With --difference: the outcome, a column of the sweep's table (e.g. survival_time.mean).",
    ),
    difference: Optional[float] = typer.Option(
        None,
        "--difference",
        help="The smallest difference in --outcome worth finding: report the seeds per cell that find it.",
    ),
    power: float = typer.Option(0.8, "--power", help="The power to find --difference with, between 0 and 1."),
    alpha: float = typer.Option(0.05, "--alpha", help="The two-sided test's level, between 0 and 1."),
    paired: bool = typer.Option(
        False, "--paired", help="The cells compared share their seeds (a paired test on per-seed differences)."
    ),
    variance_from: Optional[Path] = typer.Option(
        None,
        "--variance-from",
        help="An earlier sweep's folder (its table.csv) to take the outcome's spread from, instead of the pilot.",
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No per-pilot lines."),
    as_json: bool = typer.Option(False, "--json", help="Print the plan as JSON."),
) -> None:
    """Predict a run's or sweep's model calls, tokens and cost per cell and in total from a short pilot on a free
    model, and the seeds per cell that find a given difference in an outcome (docs/plan.md)."""
    from cooplab.cli.options import stderr_log
    from cooplab.limits import ConfigError
    from cooplab.runs.plan import plan

    if not config.is_file():
        fail(f"no sweep file {config} (give a sweep file or a run's keywords as JSON: docs/plan.md)")
    for name, value in (("--power", power), ("--alpha", alpha)):
        if not math.isfinite(value) or not 0 < value < 1:
            fail(f"{name} must be between 0 and 1, got {value:g}")
    if difference is not None and (not math.isfinite(difference) or difference <= 0):
        fail(f"--difference must be a finite number above 0 (in the outcome's units), got {difference:g}")
    if not 1 <= pilot_rounds <= 1_000_000:
        fail(f"--pilot-rounds must be at least 1, got {pilot_rounds}")
    try:
        res = plan(
            config,
            pilot_model=pilot_model,
            pilot_rounds=pilot_rounds,
            pilot_seeds=pilot_seeds,
            outcome=outcome,
            difference=difference,
            alpha=alpha,
            power=power,
            paired=paired,
            variance_from=variance_from,
            log=stderr_log(quiet or as_json),
        )
    except ConfigError as exc:
        fail(str(exc))
    if as_json:
        echo_json(res)
        return
    for line in lines(res):
        typer.echo(line)


def lines(res: dict) -> list[str]:
    """The plan as text lines: one per grid point, the total, the cost at a few prices, the seeds."""
    out = [
        f"{'grid point':<40} {'seeds':>5} {'calls/cell':>10} {'in tok/cell':>12} {'out tok/cell':>12} {'USD/cell':>10}"
    ]
    for p in res["points"]:
        name = ", ".join(f"{k}={v}" for k, v in p["labels"].items()) or res["task"]
        c = p["per_cell"]
        out.append(
            f"{name[:40]:<40} {p['seeds']:>5} {c['calls']:>10} {c['input_tokens']:>12} {c['output_tokens']:>12} "
            f"{c['cost_usd']:>10.4g}"
        )
    t = res["total"]
    bound = " (upper bound)" if res["upper_bound"] else ""
    out.append(
        f"total{bound}: {res['cells']} cells, {t['calls']} calls, {t['input_tokens']} input and {t['output_tokens']} "
        "output tokens, "
        f"${t['cost_usd']:.4f} at the cells' prices"
    )
    cheap = sorted(res["at_prices"].items(), key=lambda kv: kv[1])
    picks = [cheap[0], cheap[len(cheap) // 2], cheap[-1]] if len(cheap) >= 3 else cheap
    out.append("at other prices: " + "; ".join(f"{m} ${v:.4f}" for m, v in picks) + " (--json lists every model)")
    for n in res["notes"]:
        out.append(f"note: {n}")
    if "power" in res:
        pw = res["power"]
        out.append(
            f"seeds per cell to find a difference of {pw['d']:g} in {pw['outcome']} "
            f"({'paired' if pw['paired'] else 'unpaired'}, "
            f"alpha {pw['alpha']:g}, power {pw['power']:g}, sd {pw['sd']:.4g} from {pw['sd_from']}): {pw['seeds']} "
            f"(normal approximation {pw['normal_seeds']}; the sweep has {pw['configured_seeds']})"
        )
    return out
