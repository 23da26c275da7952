"""``cooplab analyze profiles`` and ``cooplab analyze science``: the paper's Bayesian analyses
(:mod:`cooplab.evals.bayes`, docs/statistics.md) from the command line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from cooplab.cli.options import fail, num_opt

_CHAINS = typer.Option(
    None,
    "--chains",
    help="NUTS chains (1-16; in parallel up to the number of CPU cores). Default: the paper's (profiles 4, science 2).",
)
_WARMUP = typer.Option(None, "--warmup", help="Warm-up (adaptation) steps per chain. Default: the paper's 2000.")
_SAMPLES = typer.Option(None, "--samples", help="Posterior draws kept per chain. Default: the paper's 2000.")
_QUICK = typer.Option(
    False,
    "--quick",
    help="Quick settings for tests and a first look: 2 chains x 200 draws after 200 warm-up (not for reporting).",
)
_SEED = typer.Option(0, "--seed", help="Seed of the sampler (recorded in fit.json).")
_INFO = typer.Option(
    None,
    "--model-info",
    help="models.csv: model,family,size_b,thinking[,ifeval,mmlu_pro] (docs/statistics.md); 'paper': the paper's 35 "
    "models.",
)
_FALLBACK = Annotated[
    float,
    num_opt(
        "--max-fallback",
        "Leave out a profile's game when more than this share of its decisions fell back, 0-1 (default 0.2).",
    ),
]
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
    typer.echo(
        f"{what}: {res['observations']} observations, {len(res['models'])} models; {res['divergences']} divergences, "
        f"max R-hat {rhat}, min bulk ESS {ess}; sampler {res['chains']} chains x {res['samples']} draws after "
        f"{res['warmup']} warm-up ({res.get('preset')})"
    )
    inv = res.get("invariance")
    if inv:
        t = inv["standard_vs_alternate"]
        typer.echo(
            f"prompt invariance (Table 5): standard vs. alternate {t['mean']:+.3f} [{t['ci_low']:+.3f}, "
            f"{t['ci_high']:+.3f}] "
            f"on {inv['observations']} observations ({inv['standard']} standard / {inv['alternate']} alternate)"
        )
    for n in res["notes"]:
        typer.echo(f"note: {n}")
    extra = ", profiles.png" if res.get("figure") else ""
    typer.echo(f"tables, forest.png{extra} and fit.json in {res['out']} (statistics.md summarizes)")


def _settings(analysis: str, quick: bool, chains, warmup, samples, seed) -> dict:
    from cooplab.evals import bayes

    return bayes.sampler_settings(analysis, quick=quick, chains=chains, warmup=warmup, samples=samples, seed=seed)


def profiles_command(
    profile_dirs: list[Path] = typer.Argument(
        ..., help="Directories written by 'cooplab profile' (two or more models)."
    ),
    out: Path = typer.Option(..., "--out", help="Directory for the tables, the forest plot and fit.json."),
    model_info: Optional[Path] = _INFO,
    max_fallback: _FALLBACK = 0.2,
    quick: bool = _QUICK,
    chains: Optional[int] = _CHAINS,
    warmup: Optional[int] = _WARMUP,
    samples: Optional[int] = _SAMPLES,
    seed: int = _SEED,
    as_json: bool = _JSON,
) -> None:
    """Bayesian regression of Pareto proximity on model size, thinking, CoT, ToM, group size, games and family (paper
    Table 1);
    with alternate-prompt profiles also the prompt-invariance regression (Appendix E, Table 5); and the profiles side by
    side
    (profiles.png, the paper's Figure 2: with --model-info colour by family, shape by model, size by parameters)."""
    from cooplab.evals import bayes
    from cooplab.extras import require
    from cooplab.tasks.games import profiles as pf
    from cooplab.tasks.games.figures import ModelInfoError, encoding

    require("bayes", "the Bayesian analyses")
    settings = _settings("profiles", quick, chains, warmup, samples, seed)
    prep = bayes.prepare_profiles(profile_dirs, model_info, max_fallback)  # bad input fails before --out is touched
    try:
        drawn = [pf.load_profile(d) for d in profile_dirs]
        info = None if prep["info"] is None else prep["info"].to_dict(orient="index")
        encoding(drawn, [str(p.get("label")) for p in drawn], info)  # every drawn model has its row
    except (pf.ProfileError, ModelInfoError) as exc:
        fail(str(exc))
    _prepare(out)
    res = bayes.analyze_profiles(
        profile_dirs, out, settings, model_info, progress=not as_json, max_fallback=max_fallback
    )
    res["figure"] = str(pf.profile_figure(drawn, out / "profiles.png", info=info))
    _report(res, as_json, "Pareto-proximity regression")


def science_command(
    sweep_dir: Path = typer.Argument(
        ..., help='Out directory of a science sweep (\'cooplab sweep\' with "task": "science"; its scores.csv).'
    ),
    profiles: list[Path] = typer.Option(
        ..., "--profiles", help="A profile directory of every model of the sweep (repeat the option)."
    ),
    out: Path = typer.Option(..., "--out", help="Directory for the tables, the forest plot and fit.json."),
    model_info: Optional[Path] = _INFO,
    max_fallback: _FALLBACK = 0.2,
    quick: bool = _QUICK,
    chains: Optional[int] = _CHAINS,
    warmup: Optional[int] = _WARMUP,
    samples: Optional[int] = _SAMPLES,
    seed: int = _SEED,
    score_source: str = typer.Option(
        "judge",
        "--score-source",
        help="The outcomes: judge (the LLM judge's scores, as the paper's Table 2; default) or heuristic (the "
        "heuristic scorer's).",
    ),
    as_json: bool = _JSON,
) -> None:
    """Measurement-error model: latent game dispositions predicting completeness, quality and accuracy
    (paper Table 2)."""
    from cooplab.evals import bayes
    from cooplab.extras import require

    require("bayes", "the Bayesian analyses")
    settings = _settings("science", quick, chains, warmup, samples, seed)
    info = bayes.read_model_info(model_info)
    scores, notes = bayes.load_scores(sweep_dir, score_source)  # a missing judge score fails before --out is touched
    bayes.science_design(scores, bayes.load_profiles(profiles), info, list(notes), max_fallback)
    _prepare(out)
    res = bayes.analyze_science(
        sweep_dir,
        profiles,
        out,
        settings,
        model_info,
        progress=not as_json,
        max_fallback=max_fallback,
        score_source=score_source,
    )
    _report(res, as_json, "Measurement-error model")
