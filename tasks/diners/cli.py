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
from typing import Optional

import typer

from cooplab.cli_options import (AgentModelOpt, BaseUrlOpt, BudgetOpt, CacheOpt, CsvOpt, ForceOpt, JsonOpt, MaxConcurrencyOpt,
                                  MaxTokensOpt, ModelOpt, OutOpt, PriceInOpt, PriceOutOpt, QuietOpt, RpsOpt, SeedOpt, TemperatureOpt)


def run_diners(
    out: OutOpt,
    agents: str = typer.Option("rule", "--agents", help="Who decides: rule (strategies executed exactly) or llm."),
    combination: Optional[int] = typer.Option(None, "--combination", help="The paper's initial combination 1 or 2 (default 1)."),
    groups: Optional[str] = typer.Option(None, "--groups", help='Any initial composition, groups separated by ";": "M,P,E,R1;M,M,P,R1".'),
    pk: str = typer.Option("3:1", "--pk", help="Punishment costs p:k: unstated (not told to LLM agents; p = k = 1), 3:1, 6:1, or any P:K."),
    iterations: int = typer.Option(10, "--iterations", help="Iterations of the Diner's Dilemma (paper: 10)."),
    replicates: Optional[int] = typer.Option(None, "--replicates", help="Replicate societies run side by side (default: 200 rule, 1 llm)."),
    seed: SeedOpt = 0,
    beta: float = typer.Option(1.0, "--beta", help="Selection strength beta of the Fermi imitation rule (paper: 1)."),
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
    from cooplab.cli import _echo_json, _err, _llm_options
    from cooplab.tasks.cpr.runner import RunStopped
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
    llm = None
    if agents == "llm":
        llm = _llm_options(model, agent_model, base_url, temperature, max_tokens, max_concurrency, rps, budget, price_in, price_out, cache)
    try:
        grp = dm.parse_groups(groups) if groups is not None else dm.COMBINATIONS[combination or 1]
        p, k, stated = dm.parse_pk(pk)
        cond = Condition(grp, p, k, stated, beta)
        cond.validate()
        out = runstore.prepare_out(out, force=force)
    except (dm.DinersError, runstore.RunDirError) as exc:
        _err(str(exc))
    labels = {"combination": None if groups is not None else (combination or 1), "pk": pk.strip().lower()}
    try:
        summary = run_to_dir(out, cond, replicates=replicates, seed=seed, iterations=iterations, labels=labels, csv=csv,
                             quiet=quiet, llm=llm)
    except RunStopped as exc:
        typer.echo(f"cooplab: {exc}", err=True)
        raise typer.Exit(1)
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
    replicates: int = typer.Option(200, "--replicates", help="Rule-based replicates per condition."),
    seed: int = typer.Option(0, "--seed", help="Seed of every random draw."),
    iterations: int = typer.Option(10, "--iterations", help="Iterations per run (paper: 10)."),
    beta: float = typer.Option(1.0, "--beta", help="Selection strength of the Fermi rule."),
    llm_run: Optional[Path] = typer.Option(None, "--llm-run", help="Also draw this LLM run directory's strategy shares."),
    as_json: bool = typer.Option(False, "--json", help="Print the results (final shares, claims) as JSON."),
) -> None:
    """Figs. 9 and 10 analogs: strategy shares per iteration for the paper's six conditions (rule-based), and an LLM run."""
    from cooplab import runstore
    from cooplab.cli import _echo_json, _err
    from cooplab.tasks.diners.figures import make_figures

    if replicates < 2:
        _err(f"--replicates must be at least 2 for a spread, got {replicates}")
    if iterations < 1:
        _err(f"--iterations must be at least 1, got {iterations}")
    if beta < 0:
        _err(f"--beta must not be negative, got {beta}")
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


def register(run_app: typer.Typer, figures_app: typer.Typer) -> None:
    """Add ``run diners`` and ``figures diners`` to cooplab's Typer apps (idempotent)."""
    for app, fn in ((run_app, run_diners), (figures_app, figures_diners)):
        if not any(c.name == "diners" for c in app.registered_commands):
            app.command("diners")(fn)
