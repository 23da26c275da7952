"""CLI commands of the Diner's Dilemma society, mounted by :func:`register`::

    cooplab run diners --agents rule|llm [--combination 1|2 | --groups "M,P,E,R1;M,M,P,R1"]
                       [--pk unstated|3:1|6:1|P:K] [--iterations 10] [--replicates R] [--seed S]
                       [--beta 1] [--model ... (the LLM options of 'run cpr')] --out DIR [--json]
    cooplab figures diners --out DIR [--replicates 200] [--seed 0] [--set c_p=16 ...] [--llm-run DIR] [--json]
    cooplab calibrate diners --out DIR [--samples 64] [--replicates 200] [--seed 0] [--batch 4] [--parallel 1]
                       [--executor local|ray] [--json] [-q]

``run diners`` is the task's own options (:func:`diners_options`) plus the options every run
has, mounted by ``cooplab.cli.tasks``; the run itself goes through the one runner.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cooplab.cli import options as co
from cooplab.cli.options import SeedOpt, fail, num_opt
from cooplab.cli.tasks import TaskFacts

#: what ``cooplab run diners`` needs of the task before it is loaded (a test checks it against the task)
FACTS = TaskFacts("diners")

IterationsOpt = Annotated[
    int, num_opt("--iterations", f"Iterations of the Diner's Dilemma, 1..{co.MAX_ROUNDS} (paper: 10).")
]
BetaOpt = Annotated[
    float, num_opt("--beta", "Selection strength beta of the Fermi imitation rule, in [0, 1000] (paper: 1).")
]


def diners_options(
    agents: str,
    combination: Annotated[
        Optional[int], num_opt("--combination", "The paper's initial combination 1 or 2 (default 1).")
    ] = None,
    groups: Optional[str] = typer.Option(
        None, "--groups", help='Any initial composition, groups separated by ";": "M,P,E,R1;M,M,P,R1".'
    ),
    pk: str = typer.Option(
        "3:1", "--pk", help="Punishment costs p:k: unstated (not told to LLM agents; p = k = 1), 3:1, 6:1, or any P:K."
    ),
    iterations: IterationsOpt = 10,
    replicates: Annotated[
        Optional[int],
        num_opt(
            "--replicates", f"Replicate societies run side by side, 1..{co.MAX_REPLICATES} (default: 200 rule, 1 llm)."
        ),
    ] = None,
    beta: BetaOpt = 1.0,
    invader: Optional[str] = typer.Option(
        None,
        "--invader",
        help="Replace one diner at iteration K: KIND@K[:AGENT], KIND greedy or defector (the Defector D), free-rider "
        "(the Easy-going Cooperator E), or model:SPEC (LLM diners: another model); the default seat is the last "
        "diner (docs/mixed-societies.md).",
    ),
) -> dict[str, Any]:
    """Run the Diner's Dilemma society with punishment and metanorms and write a run directory."""
    from cooplab.tasks.diners.task import TASK

    return TASK.options(
        agents,
        combination=combination,
        groups=groups,
        pk=pk,
        iterations=iterations,
        replicates=replicates,
        beta=beta,
        invader=invader,
    )


def run_command():
    """``cooplab run diners``: :func:`diners_options` plus the options every run has."""
    from cooplab.cli.tasks import run_command as make

    return make(FACTS, diners_options)


def command(kind: str) -> Any:
    """The task's own ``cooplab KIND diners`` command: run (params and graph are the default ones)."""
    return run_command() if kind == "run" else None


def figures_diners(
    out: Path = typer.Option(..., "--out", help="Directory for the PNG figures, CSVs and claims.md."),
    replicates: Annotated[
        int,
        num_opt("--replicates", f"Rule-based replicates per condition, 2..{co.MAX_REPLICATES}.", "figure-replicates"),
    ] = 200,
    seed: SeedOpt = 0,
    iterations: IterationsOpt = 10,
    beta: BetaOpt = 1.0,
    set_: Optional[list[str]] = typer.Option(
        None,
        "--set",
        help="Change one of our free choices for the six conditions (docs/diners.md): "
        "--set c_p=16; c_b, v_b, c_p, v_p (the menu), unstated_p, unstated_k (the p, k used for "
        "'unstated'), memory (pi <- memory * pi + u; 1 = accumulated).",
    ),
    llm_run: Optional[Path] = typer.Option(
        None, "--llm-run", help="Also draw this LLM run directory's strategy shares."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the results (final shares, claims) as JSON."),
) -> None:
    """Figs. 9 and 10 analogs: strategy shares per iteration for the paper's six conditions (rule-based), and an LLM
    run."""
    from cooplab.cli.tasks import echo_json as _echo_json
    from cooplab.runs import store as runstore
    from cooplab.tasks.diners import model as dm
    from cooplab.tasks.diners.figures import make_figures

    try:
        choices = dm.parse_choices(set_, tuple(sorted({len(g) for c in _combinations() for g in c})))
    except dm.DinersError as exc:
        fail(str(exc))
    conditions = 6  # the paper's 2 combinations x 3 punishment settings, one graph invocation
    co.check_size(
        conditions * replicates,
        max(len(sum(g, ())) for g in _combinations()),
        iterations,
        names=("6 conditions x --replicates", "diners", "--iterations"),
        diners=True,
    )
    if llm_run is not None and not (Path(llm_run) / "config.json").exists():
        fail(f"--llm-run {llm_run} is not a cooplab run directory (no config.json)")
    try:
        out.mkdir(parents=True, exist_ok=True)
        res = make_figures(
            out, replicates, seed, iterations, beta, llm_run, log=co.stderr_log(as_json), choices=choices
        )
    except (OSError, runstore.RunDirError) as exc:
        fail(str(exc))
    if as_json:
        _echo_json(res)
        return
    for c in res["claims"]:
        typer.echo(f"({c['id']}) {'holds' if c['holds'] else 'does not hold'}: {c['claim']}\n    {c['evidence']}")
    typer.echo(f"figures and CSVs in {out} (claims.md summarizes the claims)")


def calibrate_diners(
    out: Path = typer.Option(
        ...,
        "--out",
        help="Calibration directory: design.json, samples.jsonl (the checkpoint), samples.csv, claims_map.csv, "
        "sensitivity.csv, figures/, summary.json, report.md. Rerun the same command to continue; a larger "
        "--samples extends the design.",
    ),
    samples: Annotated[int, num_opt("--samples", "Points of the Latin hypercube design, 1..100000.")] = 64,
    replicates: Annotated[
        int,
        num_opt(
            "--replicates",
            f"Replicates per condition (6 conditions per sample), 2..{co.MAX_REPLICATES} (figures diners: 200).",
            "figure-replicates",
        ),
    ] = 200,
    seed: SeedOpt = 0,
    batch: Annotated[
        int,
        num_opt("--batch", "Samples per job of the executor, 1..10000 (each sample is checkpointed as it finishes)."),
    ] = 4,
    parallel: Annotated[
        int, num_opt("--parallel", "Jobs at once, 1..64 (local threads; Ray's local instance gets this many CPUs).")
    ] = 1,
    executor: str = typer.Option(
        "local",
        "--executor",
        help="Where batches run: local (threads of this process) or ray (tasks on a Ray cluster; needs cooplab[ray]).",
    ),
    address: Optional[str] = typer.Option(
        None,
        "--address",
        help="With --executor ray: the cluster to join, auto or HOST:PORT (default: a private local Ray instance).",
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar or per-batch lines."),
    as_json: bool = typer.Option(False, "--json", help="Print summary.json."),
) -> None:
    """Evaluate the paper's six strategy leaders (Figs. 9, 10; the claims of 'cooplab figures diners') at every sample
    of a Latin
    hypercube over our free choices: the menu, the p and k of 'unstated', the score's memory (docs/diners.md)."""
    from cooplab.cli.tasks import run_calibration
    from cooplab.extras import require
    from cooplab.runs import sweeps

    require("analysis", "the calibration (cooplab calibrate diners)", ("scipy", "SALib"))
    from cooplab.tasks.diners import calibrate as cal

    if executor not in sweeps.EXECUTORS:
        fail(f"--executor must be one of {', '.join(sweeps.EXECUTORS)}, got {executor!r}")
    if address is not None and executor != "ray":
        fail("--address is for --executor ray")
    co.check_size(
        6 * replicates,
        max(len(sum(g, ())) for g in _combinations()),
        cal.ITERATIONS,
        names=("6 conditions x --replicates", "diners", "iterations"),
        diners=True,
    )
    run_calibration(
        cal,
        out,
        as_json=as_json,
        quiet=quiet,
        samples=samples,
        seed=seed,
        replicates=replicates,
        batch=batch,
        parallel=parallel,
        executor=executor,
        address=address,
    )


def _combinations():
    from cooplab.tasks.diners import model as dm

    return list(dm.COMBINATIONS.values())


def register(figures_app: typer.Typer, calibrate_app: typer.Typer | None = None) -> None:
    """Add ``figures diners`` (and ``calibrate diners``) to cooplab's Typer apps (idempotent)."""
    if not any(c.name == "diners" for c in figures_app.registered_commands):
        figures_app.command("diners")(figures_diners)
    if calibrate_app is not None and not any(c.name == "diners" for c in calibrate_app.registered_commands):
        calibrate_app.command("diners")(calibrate_diners)
