"""CLI commands of the Diner's Dilemma society, mounted by :func:`register`::

    cooplab run diners --agents rule|llm [--combination 1|2 | --groups "M,P,E,R1;M,M,P,R1"]
                       [--pk unstated|3:1|6:1|P:K] [--iterations 10] [--replicates R] [--seed S]
                       [--beta 1] [--model ... (the LLM options of 'run cpr')] --out DIR [--json]
    cooplab figures diners --out DIR [--replicates 200] [--seed 0] [--llm-run DIR] [--json]

``cooplab.cli`` helpers (``_err``, ``_echo_json``, ``_llm_options``) are imported inside the
functions so that importing this module never imports ``cooplab.cli`` (no import cycle).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cooplab import cli_options as co
from cooplab.cli_options import (AgentModelOpt, BaseUrlOpt, BudgetOpt, CacheOpt, CsvOpt, ForceOpt, JsonOpt, MaxConcurrencyOpt,
                                  MaxTokensOpt, ModelOpt, OutOpt, PriceInOpt, PriceOutOpt, QuietOpt, RpsOpt, SeedOpt, TemperatureOpt,
                                  num_opt)

IterationsOpt = Annotated[int, num_opt("--iterations", f"Iterations of the Diner's Dilemma, 1..{co.MAX_ROUNDS} (paper: 10).")]
BetaOpt = Annotated[float, num_opt("--beta", "Selection strength beta of the Fermi imitation rule, in [0, 1000] (paper: 1).")]


def run_diners(
    out: OutOpt,
    agents: str = typer.Option("rule", "--agents", help="Who decides: rule (strategies executed exactly) or llm."),
    combination: Annotated[Optional[int], num_opt("--combination", "The paper's initial combination 1 or 2 (default 1).")] = None,
    groups: Optional[str] = typer.Option(None, "--groups", help='Any initial composition, groups separated by ";": "M,P,E,R1;M,M,P,R1".'),
    pk: str = typer.Option("3:1", "--pk", help="Punishment costs p:k: unstated (not told to LLM agents; p = k = 1), 3:1, 6:1, or any P:K."),
    iterations: IterationsOpt = 10,
    replicates: Annotated[Optional[int], num_opt("--replicates", f"Replicate societies run side by side, 1..{co.MAX_REPLICATES} (default: 200 rule, 1 llm).")] = None,
    seed: SeedOpt = 0,
    beta: BetaOpt = 1.0,
    csv: CsvOpt = False,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
    model: ModelOpt = "local",
    agent_model: AgentModelOpt = None,
    base_url: BaseUrlOpt = None,
    temperature: TemperatureOpt = 0.7,
    max_tokens: MaxTokensOpt = 64,
    max_concurrency: MaxConcurrencyOpt = 8,
    rps: RpsOpt = None,
    budget: BudgetOpt = None,
    price_in: PriceInOpt = 0.0005,
    price_out: PriceOutOpt = 0.003,
    cache: CacheOpt = None,
) -> None:
    """Run the Diner's Dilemma society with punishment and metanorms (issue 6) and write a run directory."""
    from cooplab import runstore
    from cooplab.cli import _err, _llm_options
    from cooplab.tasks.cpr.runner import RunFailed, RunStopped
    from cooplab.tasks.diners import model as dm
    from cooplab.tasks.diners.runner import run_to_dir
    from cooplab.tasks.diners.society import Condition

    if agents not in ("rule", "llm"):
        _err(f"--agents must be rule or llm, got {agents!r}")
    if combination is not None and groups is not None:
        _err("give either --combination or --groups, not both")
    if combination is not None and combination not in dm.COMBINATIONS:
        _err(f"--combination must be 1 or 2, got {combination}")
    if iterations < 1:
        _err(f"--iterations must be at least 1, got {iterations}")
    if replicates is None:
        replicates = 1 if agents == "llm" else 200
    if replicates < 1:
        _err(f"--replicates must be at least 1, got {replicates}")
    try:
        grp = dm.parse_groups(groups) if groups is not None else dm.COMBINATIONS[combination or 1]
        p, k, stated = dm.parse_pk(pk)
        cond = Condition(grp, p, k, stated, beta)
        cond.validate()
    except dm.DinersError as exc:
        _err(str(exc))
    co.check_size(replicates, cond.n_agents, iterations, names=("--replicates", "diners", "--iterations"), diners=True)
    llm = None
    if agents == "llm":
        llm = _llm_options(model, agent_model, base_url, temperature, max_tokens, max_concurrency, rps, budget, price_in, price_out, cache,
                           n_agents=cond.n_agents)
    try:
        out = runstore.prepare_out(out, force=force)
    except runstore.RunDirError as exc:
        _err(str(exc))
    labels = {"combination": None if groups is not None else (combination or 1), "pk": pk.strip().lower()}
    try:
        summary = run_to_dir(out, cond, replicates=replicates, seed=seed, iterations=iterations, labels=labels, csv=csv,
                             quiet=quiet, llm=llm)
    except (RunStopped, RunFailed) as exc:
        typer.echo(f"cooplab: {exc}", err=True)
        raise typer.Exit(1)
    except KeyboardInterrupt:
        typer.echo(f"cooplab: interrupted; checkpoints are in {out}; continue with 'cooplab resume {out}'", err=True)
        raise typer.Exit(130)
    report(out, summary, as_json)


def report(out: Path, summary: dict[str, Any], as_json: bool) -> None:
    """Print a diners run's summary (also used by 'cooplab resume')."""
    from cooplab.cli import _echo_json

    if as_json:
        _echo_json(summary)
        return
    shares = ", ".join(f"{n} {v:.3f}" for n, v in summary["final_shares"].items() if v or n != "D")
    typer.echo(f"final strategy shares after {summary['iterations_completed']} iterations (mean of {summary['replicates']} replicates): {shares}")
    if "decision_accuracy" in summary:
        fmt = lambda v: "n/a" if v is None else f"{v:.3f}"  # noqa: E731
        typer.echo(f"decision accuracy {fmt(summary['decision_accuracy'])} ({summary['decision_accuracy_n']} orders), "
                   f"punishment accuracy {fmt(summary['punishment_accuracy'])} ({summary['punishment_accuracy_n']} decisions)")
        lg = summary["ledger"]
        typer.echo(f"LLM calls: {lg['calls']} ({lg['cached_calls']} from cache), cost ${lg['cost_usd_float']:.6f}; status {summary['status']}")
    typer.echo(f"run directory: {out}  (summary.json, strategy_counts.*, orders.*, punishments.*, utilities.*, imitation.*, figures/run.png)")


def figures_diners(
    out: Path = typer.Option(..., "--out", help="Directory for the PNG figures, CSVs and claims.md."),
    replicates: Annotated[int, num_opt("--replicates", f"Rule-based replicates per condition, 2..{co.MAX_REPLICATES}.", "figure-replicates")] = 200,
    seed: SeedOpt = 0,
    iterations: IterationsOpt = 10,
    beta: BetaOpt = 1.0,
    llm_run: Optional[Path] = typer.Option(None, "--llm-run", help="Also draw this LLM run directory's strategy shares."),
    as_json: bool = typer.Option(False, "--json", help="Print the results (final shares, claims) as JSON."),
) -> None:
    """Figs. 9 and 10 analogs: strategy shares per iteration for the paper's six conditions (rule-based), and an LLM run."""
    from cooplab import runstore
    from cooplab.cli import _echo_json, _err
    from cooplab.tasks.diners.figures import make_figures

    conditions = 6  # the paper's 2 combinations x 3 punishment settings, one graph invocation
    co.check_size(conditions * replicates, max(len(sum(g, ())) for g in _combinations()), iterations,
                  names=("6 conditions x --replicates", "diners", "--iterations"), diners=True)
    if llm_run is not None and not (Path(llm_run) / "config.json").exists():
        _err(f"--llm-run {llm_run} is not a cooplab run directory (no config.json)")
    try:
        out.mkdir(parents=True, exist_ok=True)
        res = make_figures(out, replicates, seed, iterations, beta, llm_run, log=lambda s: None if as_json else typer.echo(s, err=True))
    except (OSError, runstore.RunDirError) as exc:
        _err(str(exc))
    if as_json:
        _echo_json(res)
        return
    for c in res["claims"]:
        typer.echo(f"({c['id']}) {'holds' if c['holds'] else 'does not hold'}: {c['claim']}\n    {c['evidence']}")
    typer.echo(f"figures and CSVs in {out} (claims.md summarizes the claims)")


def _combinations():
    from cooplab.tasks.diners import model as dm

    return list(dm.COMBINATIONS.values())


def register(run_app: typer.Typer, figures_app: typer.Typer) -> None:
    """Add ``run diners`` and ``figures diners`` to cooplab's Typer apps (idempotent)."""
    for app, fn in ((run_app, run_diners), (figures_app, figures_diners)):
        if not any(c.name == "diners" for c in app.registered_commands):
            app.command("diners")(fn)
