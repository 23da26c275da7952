"""The ``cooplab`` command line (Typer). ``--help`` works on every command; user mistakes
print one line ``cooplab: error: ...`` and exit with code 2, never a traceback."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cooplab.cli import options as co
from cooplab.cli.options import SeedOpt, fail, num_opt
from cooplab.cli.tasks import task_group
from cooplab.limits import ConfigError, one_line
from cooplab.evals.text import plain
from cooplab.tasks.science.defaults import MAX_TOKENS as SCIENCE_MAX_TOKENS

try:  # Typer >= 0.20 vendors Click; older releases depend on it
    from typer._click import exceptions as _cx
except ImportError:  # pragma: no cover
    from click import exceptions as _cx

app = typer.Typer(
    help="cooplab: societies of LLM agents and teams of LLM scientists as LangGraph state graphs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
run_app = typer.Typer(help="Run a society and write a run directory.", no_args_is_help=True, rich_markup_mode=None,
                      cls=task_group("run"))
params_app = typer.Typer(help="List a task's parameters, defaults and meanings.", no_args_is_help=True, rich_markup_mode=None,
                         cls=task_group("params"))
graph_app = typer.Typer(help="Print a society's graph as Mermaid text.", no_args_is_help=True, rich_markup_mode=None,
                        cls=task_group("graph"))
figures_app = typer.Typer(help="Reproduce a paper's figures.", no_args_is_help=True, rich_markup_mode=None)


def _version(value: bool) -> None:
    if value:
        from cooplab._version import __version__

        typer.echo(f"cooplab {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(version: bool = typer.Option(False, "--version", is_eager=True, callback=_version,
                                       help="Print cooplab's version and exit.")) -> None:
    """cooplab: societies of LLM agents and teams of LLM scientists as LangGraph state graphs."""


app.add_typer(run_app, name="run")
app.add_typer(params_app, name="params")
app.add_typer(graph_app, name="graph")
app.add_typer(figures_app, name="figures")
bench_app = typer.Typer(help="Benchmarks: science teams on suites of closed-form data-analysis questions (docs/science.md).",
                        no_args_is_help=True, rich_markup_mode=None)
app.add_typer(bench_app, name="bench")


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


def _echo_json(obj: Any) -> None:
    from cooplab.cli.tasks import echo_json

    echo_json(obj)


PRESET_HELP = ("A named set of parameter values (tasks/cpr/params.py PRESETS; 'cooplab params cpr --preset NAME' shows it); "
               "explicit options and --set win over it.")


def cpr_options(
    agents: str,
    env: Env = typer.Option(Env.harsh, "--env", help="Environment: harsh (r = 0.2) or rich (r = 0.6)."),
    population: Population = typer.Option(Population.mixed, "--population", help="Initial population."),
    ablation: Ablation = typer.Option(Ablation.full, "--ablation", help="full, osl (only social learning), ogd (only group decision), neither."),
    n_agents: Annotated[Optional[int], num_opt("--n-agents", f"Number of agents N, 2..{co.MAX_AGENTS} (default 10).")] = None,
    rounds: Annotated[Optional[int], num_opt("--rounds", f"Round cap T, 1..{co.MAX_ROUNDS} (default 50).")] = None,
    replicates: Annotated[Optional[int], num_opt("--replicates", f"Replicate societies, run side by side in one graph invocation, 1..{co.MAX_REPLICATES} (default: 100 rule, 1 llm).")] = None,
    set_: Optional[list[str]] = typer.Option(None, "--set", help="Override any parameter: --set beta=14 (see 'cooplab params cpr')."),
    preset: Optional[str] = typer.Option(None, "--preset", help=PRESET_HELP),
) -> dict[str, Any]:
    """Run the common-pool fishery society (Gupta et al. 2025) and write a run directory."""
    from cooplab.tasks.cpr.task import TASK

    return TASK.options(agents, env=env.value, population=population.value, ablation=ablation.value, n_agents=n_agents, rounds=rounds,
                        replicates=replicates, set=set_, preset=preset)


@app.command("resume")
def resume_cmd(
    run_dir: Path = typer.Argument(..., help="A run directory written by 'cooplab run'."),
    as_json: bool = typer.Option(False, "--json", help="Print summary.json to stdout."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
) -> None:
    """Continue an interrupted run of any task from its last checkpoint (no round lost or repeated)."""
    from cooplab.cli.tasks import resume_and_report

    resume_and_report(run_dir, quiet=quiet, as_json=as_json)


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
    preset: Optional[str] = typer.Option(None, "--preset", help="Show the values of this preset (tasks/cpr/params.py PRESETS) where it sets them."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Every cpr parameter with its default (or a preset's value), meaning and source."""
    from cooplab.tasks.cpr.params import ParamError, make_params, params_table
    from cooplab.tasks.cpr.task import preset_values

    try:
        values = preset_values(preset)
        params = make_params(**values)
    except ParamError as exc:
        fail(str(exc))
    rows = params_table()
    for r in rows:
        if r["name"] in values:
            r["value"], r["preset"] = getattr(params, r["name"]), preset
    if as_json:
        _echo_json(rows)
        return
    w = max((len(r["name"]) for r in rows), default=4)
    for r in rows:
        shown = r.get("value", r["default"])
        where = f"preset {r['preset']}; default {plain(r['default'])}; {r['source']}" if "preset" in r else r["source"]
        typer.echo(f"{r['name']:<{w}}  {plain(shown):<12}  {r['meaning']}  [{where}]")


@figures_app.command("cpr-abm")
def figures_cpr_abm(
    out: Path = typer.Option(..., "--out", help="Directory for the PNG figures, CSVs and claims.md."),
    replicates: Annotated[int, num_opt("--replicates", f"Runs per condition, 2..{co.MAX_REPLICATES} (paper: 100).", "figure-replicates")] = 100,
    seed: SeedOpt = 0,
    set_: Optional[list[str]] = typer.Option(None, "--set", help="Override a parameter in every condition: --set c=3.5"),
    preset: Optional[str] = typer.Option(None, "--preset", help=PRESET_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the results (claims, timings) as JSON."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No per-figure progress lines."),
) -> None:
    """Reproduce the paper's ABM validation: Fig. 2 (punishment off at t = 15), Fig. 3 (beta x r grid), Fig. 4 (populations x environments)."""
    from cooplab.runs import store as runstore
    from cooplab.tasks.cpr.validation import make_figures
    from cooplab.tasks.cpr.params import ParamError, make_params, parse_set
    from cooplab.tasks.cpr.task import preset_values

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
        _echo_json(res)
        return
    for c in res["claims"]:
        typer.echo(f"({c['id']}) {'holds' if c['holds'] else 'does not hold'}: {c['claim']}\n    {c['evidence']}")
    typer.echo(f"figures and CSVs in {out} (claims.md summarizes the claims)")


calibrate_app = typer.Typer(help="Map where in the space of the free (chosen) parameters a paper's claims hold.", no_args_is_help=True,
                            rich_markup_mode=None)
app.add_typer(calibrate_app, name="calibrate")


@calibrate_app.command("cpr")
def calibrate_cpr(
    out: Path = typer.Option(..., "--out", help="Calibration directory: design.json, samples.jsonl (the checkpoint), samples.csv, claims_map.csv, sensitivity.csv, figures/, summary.json, report.md. Rerun the same command to continue; a larger --samples extends the design."),
    samples: Annotated[int, num_opt("--samples", "Points of the Latin hypercube design, 1..100000.")] = 64,
    replicates: Annotated[int, num_opt("--replicates", f"Runs per condition of every experiment, 2..{co.MAX_REPLICATES} (paper: 100).", "figure-replicates")] = 100,
    seed: SeedOpt = 0,
    batch: Annotated[int, num_opt("--batch", "Samples per job of the executor, 1..10000 (each sample is checkpointed as it finishes).")] = 4,
    parallel: Annotated[int, num_opt("--parallel", "Jobs at once, 1..64 (local threads; Ray's local instance gets this many CPUs).")] = 1,
    executor: str = typer.Option("local", "--executor", help="Where batches run: local (threads of this process) or ray (tasks on a Ray cluster; needs cooplab[ray])."),
    address: Optional[str] = typer.Option(None, "--address", help="With --executor ray: the cluster to join, auto or HOST:PORT (default: a private local Ray instance)."),
    preset: Optional[str] = typer.Option(None, "--preset", help="Values of the parameters outside the space for every sample (tasks/cpr/params.py PRESETS); the preset's values of sampled parameters are not used."),
    set_: Optional[list[str]] = typer.Option(None, "--set", help="Set a parameter outside the space for every sample: --set individual_learning=true."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar or per-batch lines."),
    as_json: bool = typer.Option(False, "--json", help="Print summary.json."),
) -> None:
    """Evaluate the paper's five ABM claims (the experiments of 'cooplab figures cpr-abm') at every sample of a Latin hypercube over
    the chosen parameters (docs/calibrate.md); report where each claim holds, alone and jointly, and which parameters matter."""
    from cooplab.extras import require
    from cooplab.runs import sweeps

    require("analysis", "the calibration (cooplab calibrate cpr)", ("scipy", "SALib"))
    from cooplab.cli.tasks import run_calibration
    from cooplab.runs import calibrate_cpr as cal
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
                raise ParamError(f"--set {name}: {name} is sampled by the calibration (dimension {sampled[name]}); leave it out")
            if name in ("r", "beta", "punish_off_round"):
                raise ParamError(f"--set {name}: the experiments set {name} themselves (the paper's values); leave it out")
        base = {k: v for k, v in preset_values(preset).items() if k not in sampled and k not in ("r", "beta", "punish_off_round")}
        base.update(own)
        params = make_params(**base)
        co.check_size(110 * replicates, params.N, params.T, names=("110 conditions x --replicates", "N", "T"))
    except ParamError as exc:
        fail(str(exc))
    run_calibration(cal, out, as_json=as_json, quiet=quiet, samples=samples, seed=seed, replicates=replicates, batch=batch,
                    parallel=parallel, executor=executor, address=address, base=base, preset=preset)


analyze_app = typer.Typer(help="Analyze a set of runs: statistics and the paper's figures.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(analyze_app, name="analyze")


@analyze_app.command("cpr")
def analyze_cpr(
    run_dirs: list[Path] = typer.Argument(..., help="Run directories of 'cooplab run cpr' (or a sweep's cells/*)."),
    out: Path = typer.Option(..., "--out", help="Directory for figures and tables."),
    as_json: bool = typer.Option(False, "--json", help="Print the analysis summary as JSON."),
) -> None:
    """ANOVA (model x population, type II, eta^2), Tukey HSD with letters, Welch t-tests for the ablations,
    and the analogs of the paper's Figs. 5, 6, 7, 14 and 15."""
    from cooplab.tasks.cpr.analysis import analyze
    from cooplab.runs import store as runstore

    try:
        runstore.prepare_out(out, force=True)
        res = analyze(run_dirs, out)
    except runstore.RunDirError as exc:
        fail(str(exc))
    if as_json:
        _echo_json(res)
        return
    typer.echo(f"{res['societies']} societies from {res['runs']} runs; figures: {', '.join(res['figures'])}")
    for n in res["notes"]:
        typer.echo(f"note: {n}")
    typer.echo(f"tables and figures in {out} (statistics.md summarizes the tests)")


@analyze_app.command("efficiency")
def analyze_efficiency(
    profiles: list[Path] = typer.Option([], "--profiles", help="Profile directories of 'cooplab profile' (repeat the option)."),
    science: list[Path] = typer.Option([], "--science", help="Science runs or science sweep directories (repeat the option)."),
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
        _echo_json({"table": json.loads(table.to_json(orient="records")), "notes": res["notes"],
                    "files": {k: str(v) for k, v in paths.items()}})
        return
    typer.echo(efficiency.markdown(res).split("\n\n", 1)[1].rstrip())
    typer.echo(f"efficiency.csv, efficiency.md and efficiency.png in {out}")


from cooplab.cli import bayes as _bayes_cli  # noqa: E402 - NumPyro/JAX load only when a command runs

analyze_app.command("profiles")(_bayes_cli.profiles_command)
analyze_app.command("science")(_bayes_cli.science_command)


@app.command("sweep")
def sweep_cmd(
    config: Path = typer.Argument(..., help="Sweep file (JSON): {\"task\", \"out\", \"fixed\": {keyword: value}, \"grid\": {keyword: [values]}, \"seeds\": [...], \"parallel\": N, \"sweep_budget\": USD}, the keywords of 'cooplab run TASK' (docs/scale.md); paths relative to the file's folder. Files of the earlier CPR, science and command-line-options formats are converted (a one-line notice)."),
    executor: str = typer.Option("local", "--executor", help="Where cells run: local (threads of this process, 'parallel' at a time) or ray (tasks on a Ray cluster; needs cooplab[ray])."),
    address: Optional[str] = typer.Option(None, "--address", help="With --executor ray: the cluster to join, auto or HOST:PORT (default: start a private local Ray instance with 'parallel' CPUs)."),
    analyze_out: Optional[Path] = typer.Option(None, "--analyze", help="Where the task's analysis goes (CPR: default OUT/analysis; science: OUT)."),
    no_analysis: bool = typer.Option(False, "--no-analysis", help="Skip the task's analysis at the end (CPR: 'cooplab analyze cpr'; science: scores.csv, conditions.csv)."),
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
        _echo_json(res)
    else:
        labels = list(todo[0]["labels"]) if todo else []
        wanted = registry.get(sw.task).sweep_columns
        numbers = [c for c in wanted if rows and c in rows[0]] or sorted(
            (k for k, v in (rows[0] if rows else {}).items() if isinstance(v, float) and k not in labels), key=lambda k: not k.endswith(".mean"))[:4]
        for line in sweeps.format_table(rows, ["cell", "status", *numbers]):
            typer.echo(line)
        extra = "".join(f"; {what} in {res[key]}" for key, what in (("analysis_dir", "analysis"), ("scores_csv", "scores")) if res.get(key))
        if res.get("analysis_error"):
            extra += f"; analysis failed: {res['analysis_error']}"
        unfunded = ""
        if res.get("sweep_budget"):
            b = res["sweep_budget"]
            unfunded = (f", {len(res['not_started'])} not started (sweep_budget ${b['usd']:g}: ${b['spent_usd']:.6f} spent, "
                        f"${b['left_usd']:.6f} left; raise it and run the sweep again to start them)") if res["not_started"] else \
                f" (sweep_budget ${b['usd']:g}: ${b['spent_usd']:.6f} spent)"
        typer.echo(f"{len(rows)} cells: {len(res['ran'])} ran, {len(res['resumed'])} resumed, {len(res['skipped'])} already done, "
                   f"{len(res['failed'])} failed{unfunded} ({res['executor']}, {res['seconds']:.1f} s); table in {res['table_csv']}{extra}")
    if res["failed"]:
        raise typer.Exit(1)


@bench_app.command("science")
def bench_science(
    suite: Path = typer.Argument(..., help="The suite (JSONL): one question per line with id, question, constraints, format (@name[value] parts), file_name, optional level and concepts."),
    tables: Path = typer.Option(..., "--tables", help="The directory holding every item's file_name."),
    labels: Optional[Path] = typer.Option(None, "--labels", help="Labels (JSONL): id and common_answers, a list of [name, value] pairs; without it nothing is scored."),
    team: str = typer.Option("llm", "--team", help="llm (the --model team) or answers:FILE (scripted: states the answers of FILE, JSONL id + answer; checks extraction and scoring)."),
    team_size: int = typer.Option(2, "--team-size", help="Agents per team: 2 or 3 (the four teams of the paper), or 1: a single analyst agent with the code tool, the baseline (the solo pipeline)."),
    budget_per_item: Optional[float] = typer.Option(None, "--budget-per-item", help="USD cap of one item's run."),
    budget: Optional[float] = typer.Option(None, "--budget", help="USD for the whole suite, split evenly over the items."),
    visibility: str = typer.Option("full", "--visibility", help="Budget visibility in the prompt: full, team or hidden."),
    model: str = typer.Option("local", "--model", help=f"The team's model: {co.model_kinds()}."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="Another server speaking the provider's API (an OpenAI-compatible one for openai:NAME)."),
    max_tokens: int = typer.Option(SCIENCE_MAX_TOKENS, "--max-tokens", help="Output cap of one model call (the science default)."),
    temperature: co.TemperatureOpt = 0.7,
    max_concurrency: co.MaxConcurrencyOpt = 8,
    rps: co.RpsOpt = None,
    price_in: co.PriceInOpt = None,
    price_out: co.PriceOutOpt = None,
    cache: Optional[str] = typer.Option(None, "--cache", help="The LLM response cache file, or off."),
    sandbox_backend: str = typer.Option("docker", "--sandbox-backend", help="docker (isolated) or local (NOT a security boundary)."),
    limit: Optional[int] = typer.Option(None, "--limit", help="Only the first K items."),
    seed: SeedOpt = 0,
    parallel: int = typer.Option(1, "--parallel", help="Items run at once (local executor; Ray's local instance gets this many CPUs)."),
    executor: str = typer.Option("local", "--executor", help="local (threads) or ray (tasks on a Ray cluster; needs cooplab[ray])."),
    out: Path = typer.Option(..., "--out", help="The bench directory: items/ID run dirs, results.parquet, summary.json, report.md, figures/."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar or per-item lines."),
    as_json: bool = typer.Option(False, "--json", help="Print summary.json."),
) -> None:
    """Run every question of a suite as one science run on its table (resumable: finished items are skipped and not
    charged again), extract the @name[value] answers of the final paper and score them against the labels."""
    from cooplab.runs import sweeps
    from cooplab.runs.bench import BenchError, run_bench
    from cooplab.tasks.science.owndata import OwnDataError

    if team_size not in (1, 2, 3):
        fail(f"--team-size must be 1, 2 or 3, got {team_size}")
    if visibility not in ("full", "team", "hidden"):
        fail(f"--visibility must be full, team or hidden, got {visibility!r}")
    if sandbox_backend not in ("docker", "local"):
        fail(f"--sandbox-backend must be docker or local, got {sandbox_backend!r}")
    if executor not in sweeps.EXECUTORS:
        fail(f"--executor must be one of {', '.join(sweeps.EXECUTORS)}, got {executor!r}")
    co.check("--budget-per-item", budget_per_item, "budget")
    co.check("--budget", budget, "budget")
    co.check("--parallel", parallel, "parallel")
    co.check("--max-tokens", max_tokens, "max-tokens")
    for flag, v in (("--temperature", temperature), ("--max-concurrency", max_concurrency), ("--rps", rps), ("--price-in", price_in),
                    ("--price-out", price_out)):
        co.check(flag, v, flag[2:])
    if limit is not None and limit < 1:
        fail(f"--limit must be at least 1, got {limit}")
    quiet = quiet or as_json
    log = co.stderr_log(quiet)
    try:
        s = run_bench(suite, tables, out, labels=labels, team=team, team_size=team_size, budget_per_item=budget_per_item, budget=budget,
                      visibility=visibility, model=model, limit=limit, seed=seed, parallel=parallel, executor=executor,
                      backend=sandbox_backend, llm={"base_url": base_url, "max_tokens": max_tokens, "temperature": temperature, "max_concurrency": max_concurrency,
                           "rps": rps, "price_in": price_in, "price_out": price_out, "cache": cache}, log=log, quiet=quiet)
    except (BenchError, OwnDataError, sweeps.SweepError) as exc:
        fail(str(exc))
    if as_json:
        _echo_json(s)
    else:
        acc = "n/a" if s["accuracy"] is None else f"{100 * s['accuracy']:.1f}%"
        cpc = "n/a" if s["cost_per_correct_usd"] is None else f"${s['cost_per_correct_usd']:.6f}"
        typer.echo(f"{s['items']} items: {len(s['ran'])} ran, {len(s['resumed'])} resumed, {len(s['skipped'])} already done, "
                   f"{len(s['failed'])} failed, {len(s['not_scored'])} not scored; accuracy {s['correct']}/{s['scored']} = {acc}; cost ${s['cost_usd']:.6f}, "
                   f"per correct answer {cpc}; report in {out / 'report.md'}")
    if s["failed"]:
        raise typer.Exit(1)


@bench_app.command("figure")
def bench_figure(
    dirs: list[Path] = typer.Argument(..., help="Bench directories (each with summary.json)."),
    out: Path = typer.Option(..., "--out", help="The PNG to write."),
    as_json: bool = typer.Option(False, "--json", help="Print the plotted points as JSON."),
) -> None:
    """Accuracy (95% Wilson interval) against cost per item, one point per bench directory."""
    from cooplab.runs import store as runstore
    from cooplab.runs.bench import figure

    points = []
    for d in dirs:
        p = d / "summary.json"
        try:
            s = runstore.read_json(p)
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            fail(f"{p} cannot be read as a bench summary ({type(exc).__name__})")
        if not isinstance(s, dict) or "accuracy" not in s or "ci95" not in s:
            fail(f"{p} is not a bench summary (no accuracy)")
        points.append((f"{d.name}: {s.get('team')} n={s.get('team_size')}", s))
    figure(points, out)
    rows = [{"bench": lab, "accuracy": s["accuracy"], "ci95": s["ci95"], "cost_per_item_usd": s.get("cost_per_item_usd")} for lab, s in points]
    if as_json:
        _echo_json({"figure": str(out), "points": rows})
    else:
        typer.echo(f"wrote {out} ({len(rows)} points)")


@app.command("report")
def report_cmd(
    directory: Path = typer.Argument(..., metavar="DIR", help="A run directory, a sweep or profile directory (run directories under cells/, runs/ or games/), or a folder of results (claims.md, statistics.md, efficiency.csv, ...)."),
    out: Optional[Path] = typer.Option(None, "--out", help="The HTML file to write (default DIR/report.html; DIR/cooplab-report.html if DIR/report.html is another program's page)."),
    as_json: bool = typer.Option(False, "--json", help="Print the path, kind, sections, figures and bytes as JSON."),
) -> None:
    """Write the explorer's pages of a run, sweep, profile or folder of results to one self-contained HTML file (offline, no server)."""
    from cooplab.cli.view import task_for
    from cooplab.evals.report import ReportError, ReportWriteError, write_report

    try:
        res = write_report(directory, out, task_for=task_for)
    except ReportWriteError as exc:  # a full disk: the work failed, not the input
        fail(str(exc), code=1)
    except ReportError as exc:
        fail(str(exc))
    if as_json:
        _echo_json(res)
    else:
        from cooplab.limits import clean_text

        typer.echo(clean_text(res["path"]))  # a path that is not UTF-8 is printed with U+FFFD, never an error after the work


def _mount_optional() -> None:
    from cooplab.cli import games as games_cli
    from cooplab.cli import science as science_cli
    from cooplab.cli.diners import register as register_diners
    from cooplab.cli.diners import run_command as diners_run
    from cooplab.cli.tasks import register, run_command
    from cooplab.cli.traces import traces_app
    from cooplab.tasks.cpr.task import TASK as CPR

    register(run_app, params_app, graph_app, own={"run": {"cpr": run_command(CPR, cpr_options), "diners": diners_run(),
                                                          "game": games_cli.run_command(),
                                                          "science": science_cli.run_command()},
                                                  "params": {"game": games_cli.params_command, "cpr": params_cpr},
                                                  "graph": {"cpr": graph_cpr, "game": games_cli.graph_command}})
    register_diners(figures_app, calibrate_app)
    app.command("profile")(games_cli.profile_command)
    app.add_typer(science_cli.science_app, name="science", help="Score science runs with LLM judges and compare judges.")
    figures_app.command("profile")(games_cli.profile_figure_command)
    from cooplab.cli.sandbox import app as sandbox_app

    app.add_typer(traces_app, name="traces", help="Export or view a run's traces (LangSmith run format).")
    app.add_typer(sandbox_app, name="sandbox", help="The sandboxed Python executor.")
    from cooplab.cli.models import app as models_app

    app.add_typer(models_app, name="models")
    from cooplab.cli.doctor import doctor_cmd

    app.command("doctor")(doctor_cmd)
    from cooplab.cli.view import view_cmd

    app.command("view")(view_cmd)


_mount_optional()


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the app, turning user mistakes into one line and exit code 2."""
    bad = _not_utf8(sys.argv[1:] if argv is None else argv)
    if bad is not None:  # a path or name in another encoding: one line now, never a failure after the work
        typer.echo(f"cooplab: error: '{bad}' is not UTF-8 text (a file or folder name in another encoding?); "
                   "cooplab's command line takes UTF-8 paths and names: rename it (Python's cooplab.run accepts any path)", err=True)
        return 2
    try:
        rv = app(args=argv, prog_name="cooplab", standalone_mode=False)
        if isinstance(rv, int):  # a typer.Exit(code) comes back as the return value
            return rv
    except ConfigError as exc:
        typer.echo(f"cooplab: error: {one_line(str(exc))}", err=True)
        return 2
    except _cx.NoArgsIsHelpError as exc:
        exc.show()
        return 0
    except _cx.UsageError as exc:
        hint = f" (see '{exc.ctx.command_path} --help')" if getattr(exc, "ctx", None) is not None else ""
        typer.echo(f"cooplab: error: {one_line(exc.format_message().replace('Value error, ', ''))}{hint}", err=True)
        return 2
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("cooplab: aborted", err=True)
        return 130
    except typer.Exit as exc:
        return exc.exit_code
    except _cx.ClickException as exc:
        typer.echo(f"cooplab: error: {exc.format_message()}", err=True)
        return exc.exit_code
    except Exception as exc:  # noqa: BLE001 - the safety net: never a raw traceback on the terminal
        log = _save_traceback(exc)
        where = f"the traceback is in {log}" if log else "the traceback could not be saved"
        typer.echo(f"cooplab: internal error: {one_line(f'{type(exc).__name__}: {exc}')} ({where}; please report it)", err=True)
        return 1
    return 0


def _not_utf8(args: list[str]) -> Optional[str]:
    """The first argument UTF-8 cannot hold (bytes of another encoding, kept by Python as lone
    surrogates), shown with those bytes as ``\\xNN``; None when every one is UTF-8."""
    for a in args:
        try:
            str(a).encode("utf-8")
        except UnicodeEncodeError:
            try:
                return str(a).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            except UnicodeEncodeError:
                return str(a).encode("utf-8", "backslashreplace").decode("utf-8")
    return None


def _save_traceback(exc: BaseException) -> Optional[Path]:
    """Write ``exc``'s traceback to a file under the cooplab cache directory (or the temp directory)."""
    import datetime as dt
    import os
    import tempfile
    import traceback

    text = "".join(traceback.format_exception(exc))
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "cooplab" / "errors"
    for d in (base, Path(tempfile.gettempdir())):
        try:
            d.mkdir(parents=True, exist_ok=True)
            path = d / f"cooplab-error-{stamp}-{os.getpid()}.log"
            # a path or value that is not UTF-8 (a folder named in another encoding) is written escaped, never a second error
            path.write_text(f"cooplab {' '.join(sys.argv[1:])}\n\n{text}", encoding="utf-8", errors="backslashreplace")
            return path
        except OSError:
            continue
    return None


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
