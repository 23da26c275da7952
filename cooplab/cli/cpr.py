"""CLI commands of the common-pool fishery society (Gupta et al. 2025), mounted lazily by ``cooplab.cli``::

    cooplab run cpr [--env harsh|rich] [--population ...] [--ablation ...] [--n-agents N] [--rounds T]
                    [--replicates R] [--set name=value ...] [--preset NAME] [--agents rule|llm] [LLM options] --out DIR
    cooplab params cpr [--preset NAME] [--json]
    cooplab graph cpr [--ablation A] [--no-punishment]
    cooplab figures cpr-abm --out DIR [--replicates 100] [--seed 0] [--set ...] [--preset NAME]
    cooplab calibrate cpr --out DIR [--samples 64] [--replicates 100] ...
    cooplab analyze cpr RUN_DIR ... --out DIR

``run cpr`` is the task's own options (:func:`cpr_options`) plus the options every run has, made by
:func:`cooplab.cli.tasks.run_command` from the task's :data:`FACTS`, so that ``cooplab run cpr
--help`` and ``cooplab params cpr`` load neither the society (LangGraph, NumPy, pandas) nor the
model layer: this module imports only Typer and :mod:`cooplab.limits` at the top.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cooplab.cli import options as co
from cooplab.cli.options import SeedOpt, fail, num_opt
from cooplab.cli.tasks import TaskFacts, echo_json

#: what ``cooplab run cpr`` needs of the task before it is loaded (a test checks it against the task)
FACTS = TaskFacts("cpr")


class Env(str, Enum):
    harsh = "harsh"
    rich = "rich"


class Population(str, Enum):
    altruistic = "altruistic"
    selfish = "selfish"
    mixed = "mixed"


class Ablation(str, Enum):
    full = "full"
    osl = "osl"
    ogd = "ogd"
    neither = "neither"


PRESET_HELP = (
    "A named set of parameter values (tasks/cpr/params.py PRESETS; 'cooplab params cpr --preset NAME' shows it); "
    "explicit options and --set win over it."
)


def cpr_options(
    agents: str,
    env: Env = typer.Option(Env.harsh, "--env", help="Environment: harsh (r = 0.2) or rich (r = 0.6)."),
    population: Population = typer.Option(Population.mixed, "--population", help="Initial population."),
    ablation: Ablation = typer.Option(
        Ablation.full, "--ablation", help="full, osl (only social learning), ogd (only group decision), neither."
    ),
    n_agents: Annotated[
        Optional[int], num_opt("--n-agents", f"Number of agents N, 2..{co.MAX_AGENTS} (default 10).")
    ] = None,
    rounds: Annotated[Optional[int], num_opt("--rounds", f"Round cap T, 1..{co.MAX_ROUNDS} (default 50).")] = None,
    replicates: Annotated[
        Optional[int],
        num_opt(
            "--replicates",
            f"Replicate societies, run side by side in one graph invocation, 1..{co.MAX_REPLICATES} (default: 100 "
            "rule, 1 llm).",
        ),
    ] = None,
    set_: Optional[list[str]] = typer.Option(
        None, "--set", help="Override any parameter: --set beta=14 (see 'cooplab params cpr')."
    ),
    preset: Optional[str] = typer.Option(None, "--preset", help=PRESET_HELP),
    invader: Optional[str] = typer.Option(
        None,
        "--invader",
        help="Replace one agent at round K: KIND@K[:AGENT], KIND greedy, defector or free-rider (rule agents) or "
        "model:SPEC (LLM agents: another model); the default seat is the last agent (docs/mixed-societies.md).",
    ),
) -> dict[str, Any]:
    """Run the common-pool fishery society (Gupta et al. 2025) and write a run directory."""
    from cooplab.tasks.cpr.task import TASK

    return TASK.options(
        agents,
        env=env.value,
        population=population.value,
        ablation=ablation.value,
        n_agents=n_agents,
        rounds=rounds,
        replicates=replicates,
        set=set_,
        preset=preset,
        invader=invader,
    )


def run_command():
    """``cooplab run cpr``: :func:`cpr_options` plus the options every run has."""
    from cooplab.cli.tasks import run_command as make

    return make(FACTS, cpr_options)


def graph_cpr(
    ablation: Ablation = typer.Option(Ablation.full, "--ablation", help="Which preset's graph to draw."),
    no_punishment: bool = typer.Option(False, "--no-punishment", help="Draw the graph without the punish node."),
) -> None:
    """Print the CPR society's LangGraph graph as Mermaid text (rule-based agents)."""
    from cooplab.tasks.cpr.params import ABLATIONS
    from cooplab.tasks.cpr.society import build_cpr_graph, cpr_phases

    g = build_cpr_graph(cpr_phases(punishment=not no_punishment, **ABLATIONS[ablation.value]))
    typer.echo(g.get_graph().draw_mermaid())


def params_cpr(
    preset: Optional[str] = typer.Option(
        None, "--preset", help="Show the values of this preset (tasks/cpr/params.py PRESETS) where it sets them."
    ),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Every cpr parameter with its default (or a preset's value), meaning and source."""
    typer.echo(params_output(preset, as_json), nl=False)


def params_output(preset: str | None, as_json: bool) -> str:
    """What ``cooplab params cpr [--preset P] [--json]`` prints. Without a preset it is also kept in
    tasks/cpr/params_table.json (:data:`cooplab.tasks.cpr.TABLE_FILE`), which the console script
    prints without loading Typer or pydantic (``scripts/params_table.py`` writes it; a test checks
    it against this function)."""
    import json

    from cooplab.evals.text import plain
    from cooplab.tasks.cpr.params import ParamError, make_params, params_table

    try:
        values = {}
        if preset is not None:  # the presets live with the task (LangGraph, NumPy): loaded only when one is asked for
            from cooplab.tasks.cpr.task import preset_values

            values = preset_values(preset)
            params = make_params(**values)
    except ParamError as exc:
        fail(str(exc))
    rows = params_table()
    for r in rows:
        if r["name"] in values:
            r["value"], r["preset"] = getattr(params, r["name"]), preset
    if as_json:
        from cooplab.graphs.rundir import jsonable

        return json.dumps(jsonable(rows), indent=2) + "\n"
    w = max((len(r["name"]) for r in rows), default=4)
    lines = []
    for r in rows:
        shown = r.get("value", r["default"])
        where = f"preset {r['preset']}; default {plain(r['default'])}; {r['source']}" if "preset" in r else r["source"]
        lines.append(f"{r['name']:<{w}}  {plain(shown):<12}  {r['meaning']}  [{where}]\n")
    return "".join(lines)


def figures_cpr_abm(
    out: Path = typer.Option(..., "--out", help="Directory for the PNG figures, CSVs and claims.md."),
    replicates: Annotated[
        int, num_opt("--replicates", f"Runs per condition, 2..{co.MAX_REPLICATES} (paper: 100).", "figure-replicates")
    ] = 100,
    seed: SeedOpt = 0,
    set_: Optional[list[str]] = typer.Option(
        None, "--set", help="Override a parameter in every condition: --set c=3.5"
    ),
    preset: Optional[str] = typer.Option(None, "--preset", help=PRESET_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the results (claims, timings) as JSON."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No per-figure progress lines."),
) -> None:
    """Reproduce the paper's ABM validation: Fig. 2 (punishment off at t = 15), Fig. 3 (beta x r grid), Fig. 4
    (populations x environments)."""
    from cooplab.runs import store as runstore
    from cooplab.tasks.cpr.params import ParamError, make_params, parse_set
    from cooplab.tasks.cpr.task import preset_values
    from cooplab.tasks.cpr.validation import make_figures

    try:
        overrides = {**preset_values(preset), **parse_set(set_)}
        params = make_params(**overrides)
        # Fig. 3's grid is 11 x 10 conditions of `replicates` societies each, in one invocation
        co.check_size(110 * replicates, params.N, params.T, names=("110 conditions x --replicates", "N", "T"))
        runstore.prepare_out(out, force=True)
    except (ParamError, runstore.RunDirError) as exc:
        fail(str(exc))
    res = make_figures(out, replicates, seed, overrides, log=co.stderr_log(as_json or quiet))
    if as_json:
        echo_json(res)
        return
    for c in res["claims"]:
        typer.echo(f"({c['id']}) {'holds' if c['holds'] else 'does not hold'}: {c['claim']}\n    {c['evidence']}")
    typer.echo(f"figures and CSVs in {out} (claims.md summarizes the claims)")


def calibrate_cpr(
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
            f"Runs per condition of every experiment, 2..{co.MAX_REPLICATES} (paper: 100).",
            "figure-replicates",
        ),
    ] = 100,
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
    preset: Optional[str] = typer.Option(
        None,
        "--preset",
        help="Values of the parameters outside the space for every sample (tasks/cpr/params.py PRESETS); the preset's "
        "values of sampled parameters are not used.",
    ),
    set_: Optional[list[str]] = typer.Option(
        None, "--set", help="Set a parameter outside the space for every sample: --set individual_learning=true."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar or per-batch lines."),
    as_json: bool = typer.Option(False, "--json", help="Print summary.json."),
) -> None:
    """Evaluate the paper's five ABM claims (the experiments of 'cooplab figures cpr-abm') at every sample of a Latin
    hypercube over
    the chosen parameters (docs/calibrate.md); report where each claim holds, alone and jointly, and which parameters
    matter."""
    from cooplab.extras import require
    from cooplab.runs import sweeps

    require("analysis", "the calibration (cooplab calibrate cpr)", ("scipy", "SALib"))
    from cooplab.cli.tasks import run_calibration
    from cooplab.tasks.cpr import calibrate as cal
    from cooplab.tasks.cpr.params import ParamError, make_params, parse_set
    from cooplab.tasks.cpr.task import preset_values

    if executor not in sweeps.EXECUTORS:
        fail(f"--executor must be one of {', '.join(sweeps.EXECUTORS)}, got {executor!r}")
    if address is not None and executor != "ray":
        fail("--address is for --executor ray")
    try:
        sampled = {d.target: d.name for d in cal.space()}
        own = parse_set(set_)
        for name in own:
            if name in sampled:
                raise ParamError(
                    f"--set {name}: {name} is sampled by the calibration (dimension {sampled[name]}); leave it out"
                )
            if name in ("r", "beta", "punish_off_round"):
                raise ParamError(
                    f"--set {name}: the experiments set {name} themselves (the paper's values); leave it out"
                )
        base = {
            k: v
            for k, v in preset_values(preset).items()
            if k not in sampled and k not in ("r", "beta", "punish_off_round")
        }
        base.update(own)
        params = make_params(**base)
        co.check_size(110 * replicates, params.N, params.T, names=("110 conditions x --replicates", "N", "T"))
    except ParamError as exc:
        fail(str(exc))
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
        base=base,
        preset=preset,
    )


def analyze_cpr(
    run_dirs: list[Path] = typer.Argument(..., help="Run directories of 'cooplab run cpr' (or a sweep's cells/*)."),
    out: Path = typer.Option(..., "--out", help="Directory for figures and tables."),
    as_json: bool = typer.Option(False, "--json", help="Print the analysis summary as JSON."),
) -> None:
    """ANOVA (model x population, type II, eta^2), Tukey HSD with letters, Welch t-tests for the ablations,
    and the analogs of the paper's Figs. 5, 6, 7, 14 and 15."""
    from cooplab.runs import store as runstore
    from cooplab.tasks.cpr.analysis import analyze

    try:
        runstore.prepare_out(out, force=True)
        res = analyze(run_dirs, out)
    except runstore.RunDirError as exc:
        fail(str(exc))
    if as_json:
        echo_json(res)
        return
    typer.echo(f"{res['societies']} societies from {res['runs']} runs; figures: {', '.join(res['figures'])}")
    for n in res["notes"]:
        typer.echo(f"note: {n}")
    typer.echo(f"tables and figures in {out} (statistics.md summarizes the tests)")


def command(kind: str) -> Any:
    """The task's own ``cooplab KIND cpr`` command (run, params or graph)."""
    return {"run": run_command, "params": lambda: params_cpr, "graph": lambda: graph_cpr}[kind]()
