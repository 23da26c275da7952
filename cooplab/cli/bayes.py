"""``cooplab analyze profiles`` and ``cooplab analyze science``: the paper's Bayesian analyses
(:mod:`cooplab.evals.bayes`, docs/statistics.md) from the command line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from cooplab.cli.options import fail

_CHAINS = typer.Option(2, "--chains", help="NUTS chains (1-16; in parallel up to the number of CPU cores).")
_WARMUP = typer.Option(1000, "--warmup", help="Warm-up (adaptation) steps per chain.")
_SAMPLES = typer.Option(1000, "--samples", help="Posterior draws kept per chain.")
_SEED = typer.Option(0, "--seed", help="Seed of the sampler (recorded in fit.json).")
_INFO = typer.Option(None, "--model-info", help="models.csv: model,family,size_b,thinking[,ifeval,mmlu_pro] (docs/statistics.md).")
_JSON = typer.Option(False, "--json", help="Print the result as JSON (no progress bar).")


def _prepare(out: Path) -> None:
    from cooplab.runs import store as runstore

    if out.exists() and not out.is_dir():
        fail(f"--out {out} is a file; give a directory")
    try:
        runstore.prepare_out(out, force=True)
    except runstore.RunDirError as exc:
        fail(str(exc))


def _report(res: dict, as_json: bool, what: str) -> None:
    if as_json:
        typer.echo(json.dumps(res, indent=2, default=str))
        return
    rhat = "n/a" if res["max_r_hat"] is None else f"{res['max_r_hat']:.3f}"
    ess = "n/a" if res["min_ess_bulk"] is None else f"{res['min_ess_bulk']:.0f}"
    typer.echo(f"{what}: {res['observations']} observations, {len(res['models'])} models; {res['divergences']} divergences, "
               f"max R-hat {rhat}, min bulk ESS {ess}")
    for n in res["notes"]:
        typer.echo(f"note: {n}")
    typer.echo(f"tables, forest.png and fit.json in {res['out']} (statistics.md summarizes)")


def profiles_command(
    profile_dirs: list[Path] = typer.Argument(..., help="Directories written by 'cooplab profile' (two or more models)."),
    out: Path = typer.Option(..., "--out", help="Directory for the tables, the forest plot and fit.json."),
    model_info: Optional[Path] = _INFO,
    chains: int = _CHAINS,
    warmup: int = _WARMUP,
    samples: int = _SAMPLES,
    seed: int = _SEED,
    as_json: bool = _JSON,
) -> None:
    """Bayesian regression of Pareto proximity on model size, thinking, CoT, ToM, group size, games and family (paper Table 1)."""
    from cooplab.evals import bayes
    from cooplab.extras import require

    require("bayes", "the Bayesian analyses")
    settings = bayes.check_settings(chains, warmup, samples, seed)
    bayes.profile_design(bayes.load_profiles(profile_dirs), bayes.read_model_info(model_info))  # bad input fails before --out is touched
    _prepare(out)
    res = bayes.analyze_profiles(profile_dirs, out, settings, model_info, progress=not as_json)
    _report(res, as_json, "Pareto-proximity regression")


def science_command(
    sweep_dir: Path = typer.Argument(..., help="Out directory of a science sweep ('cooplab sweep' with \"task\": \"science\"; its scores.csv)."),
    profiles: list[Path] = typer.Option(..., "--profiles", help="A profile directory of every model of the sweep (repeat the option)."),
    out: Path = typer.Option(..., "--out", help="Directory for the tables, the forest plot and fit.json."),
    model_info: Optional[Path] = _INFO,
    chains: int = _CHAINS,
    warmup: int = _WARMUP,
    samples: int = _SAMPLES,
    seed: int = _SEED,
    as_json: bool = _JSON,
) -> None:
    """Measurement-error model: latent game dispositions predicting completeness, quality and accuracy (paper Table 2)."""
    from cooplab.evals import bayes
    from cooplab.extras import require

    require("bayes", "the Bayesian analyses")
    settings = bayes.check_settings(chains, warmup, samples, seed)
    info = bayes.read_model_info(model_info)
    scores, notes = bayes.load_scores(sweep_dir)
    bayes.science_design(scores, bayes.load_profiles(profiles), info, list(notes))
    _prepare(out)
    res = bayes.analyze_science(sweep_dir, profiles, out, settings, model_info, progress=not as_json)
    _report(res, as_json, "Measurement-error model")
