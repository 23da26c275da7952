"""CLI of the science teams, mounted by ``cooplab.cli``::

cooplab run science --task ecology|anomaly|biomarker|geospatial --team llm|oracle|garbage --team-size 2|3
                    --budget USD --visibility full|team|hidden [--prompt standard|tom] [--model ...]
                    [--judge heuristic|MODEL] [--judge-samples K] [--judge-budget USD] [--seed S] --out DIR [--json]
cooplab science score DIR [DIR ...] --judge MODEL [--samples K] [--judge-budget USD] [--json]
cooplab science agreement DIR [DIR ...] --judge A --judge B [--json]
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cooplab.cli import options as co
from cooplab.cli.options import fail, num_opt
from cooplab.cli.tasks import TaskFacts
from cooplab.tasks.science.defaults import MAX_TOKENS

#: what ``cooplab run science`` needs of the task before it is loaded (a test checks it against the task)
FACTS = TaskFacts("science", agent_kinds=("llm",), uses_sandbox=True, default_max_tokens=MAX_TOKENS)

science_app = typer.Typer(
    help="Score science runs with LLM judges and compare judges.", no_args_is_help=True, rich_markup_mode=None
)
bench_app = typer.Typer(
    help="Benchmarks: science teams on suites of closed-form data-analysis questions (docs/science.md).",
    no_args_is_help=True,
    rich_markup_mode=None,
)


def science_options(
    agents: str,
    task: Optional[str] = typer.Option(
        None, "--task", help="The science task: ecology (default), anomaly, biomarker or geospatial (paper §4.1)."
    ),
    dataset: Optional[list[Path]] = typer.Option(
        None,
        "--dataset",
        help="Your own data instead of --task: a CSV/TSV (any separator and common encoding) or Parquet file; repeat "
        "for several (then df is a dict of frames keyed by file stem).",
    ),
    task_file: Optional[Path] = typer.Option(
        None,
        "--task-file",
        help="With --dataset: a text/Markdown file saying what the teams should find out (replaces the built-in task "
        "text).",
    ),
    truth: Optional[Path] = typer.Option(
        None,
        "--truth",
        help="With --dataset: a JSON file of facts a correct report states (see docs/science.md); without it accuracy "
        "is not scored.",
    ),
    team: str = typer.Option(
        "llm",
        "--team",
        help="Who works: llm (the --model options apply), oracle (scripted: correct code and report) or garbage "
        "(scripted: a useless report).",
    ),
    team_size: Optional[int] = typer.Option(
        None,
        "--team-size",
        help="Agents per team: 2 (default) or 3 (the paper), or 1 (every team is its lead alone, no deliberation).",
    ),
    pipeline: Optional[str] = typer.Option(
        None,
        "--pipeline",
        help="teams (default): the paper's four sequential teams; solo: one analyst with the code tool does the whole "
        "project and writes the final paper (the single-agent baseline).",
    ),
    visibility: str = typer.Option(
        "full", "--visibility", help="Budget visibility in the prompt: full, team or hidden."
    ),
    prompt: str = typer.Option("standard", "--prompt", help="Prompting: standard or tom (theory of mind)."),
    judge: str = typer.Option(
        "heuristic",
        "--judge",
        help="Scorer: heuristic (always computed), or a model spec that also judges the paper with the Appendix L "
        f"rubric: {co.model_kinds()}.",
    ),
    judge_samples: int = typer.Option(
        3, "--judge-samples", help="Judge samples per report (their spread is reported), 1..20."
    ),
    judge_budget: Annotated[
        Optional[float],
        num_opt(
            "--judge-budget",
            "USD the LLM judge may spend, apart from the team's budget (default: the same amount as --budget; no cap "
            "without one).",
            "budget",
        ),
    ] = None,
    set_: Optional[list[str]] = typer.Option(
        None, "--set", help="Set another parameter: --set max_reentries=2 (see 'cooplab params science')."
    ),
) -> dict[str, Any]:
    """Four sequential science teams analyze a generated dataset in the sandbox under one shared budget; the report is
    scored."""
    from cooplab.tasks.science.task import TASK

    return TASK.options(
        agents,
        task=task,
        dataset=dataset,
        task_file=task_file,
        truth=truth,
        team=team,
        team_size=team_size,
        pipeline=pipeline,
        visibility=visibility,
        prompt=prompt,
        judge=judge,
        judge_samples=judge_samples,
        judge_budget=judge_budget,
        set=set_,
    )


def run_command():
    """``cooplab run science``: :func:`science_options` plus the options every run has (and the sandbox's)."""
    from cooplab.cli.tasks import run_command as make

    return make(FACTS, science_options)


def command(kind: str) -> Any:
    """The task's own ``cooplab KIND science`` command: run (params and graph are the default ones)."""
    return run_command() if kind == "run" else None


@science_app.command("score")
def score_command(
    dirs: list[Path] = typer.Argument(..., help="Science run directories."),
    judge: str = typer.Option(..., "--judge", help=f"The judge model: {co.model_kinds()}."),
    samples: int = typer.Option(3, "--samples", help="Judge samples per report, 1..20 (their spread is reported)."),
    base_url: Optional[str] = typer.Option(
        None,
        "--base-url",
        help="Another server speaking the judge provider's API (an OpenAI-compatible one for openai:NAME).",
    ),
    cache: Optional[str] = typer.Option(None, "--cache", help="Response cache (default: the run's)."),
    judge_budget: Annotated[
        Optional[float],
        num_opt(
            "--judge-budget",
            "USD the judge may spend on each run (default: the run's judge budget, else its --budget; no cap without "
            "one).",
            "budget",
        ),
    ] = None,
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Judge the final paper of one or more science runs (Appendix L rubric, k samples); results go into each run's
    scores.json."""
    from cooplab.agents.models.factory import check_model
    from cooplab.cli.tasks import echo_json
    from cooplab.evals.scoring.judge import JUDGE_PHASE
    from cooplab.graphs import rundir
    from cooplab.tasks.science.judging import JudgeFailed, judge_run
    from cooplab.tasks.science.judging import judge_budget as budget_of

    if isinstance(samples, bool) or not 1 <= samples <= 20:
        fail(f"--samples must be an integer in 1..20, got {samples}")
    configs = []
    for d in dirs:  # every directory and the judge's model (spec, file, API key) checked before any call
        if not (d / "scores.json").exists() or not (d / "dataset").is_dir() or not (d / "config.json").is_file():
            fail(
                f"{d} is not a finished science run directory (no scores.json or dataset/); run 'cooplab run science' "
                "first"
            )
        try:
            config = rundir.read_config(d)
        except rundir.RunDirError as exc:
            fail(str(exc))
        check_model(
            judge,
            base_url if base_url is not None else (config.get("llm") or {}).get("base_url"),
            "--judge",
            phases=(JUDGE_PHASE,),
        )
        configs.append(config)
    rows = []
    for d, config in zip(dirs, configs, strict=False):
        try:
            e = judge_run(d, judge, k=samples, base_url=base_url, cache=cache, budget=budget_of(config, judge_budget))
        except JudgeFailed as exc:
            fail(str(exc), code=1)  # names the judge and the run
        except rundir.RunDirError as exc:
            fail(str(exc))
        rows.append(
            {
                "run": str(d),
                **{k: e[k] for k in ("judge", "k", "completeness", "quality", "accuracy", "std", "n_fallback")},
                "cost_usd": e["ledger"]["cost_usd_float"],
                "budget_usd": e["budget_usd"],
            }
        )
    if as_json:
        echo_json(rows)
        return
    for r in rows:
        typer.echo(score_line(r))


def score_line(r: dict[str, Any]) -> str:
    """One judged run as a line of text: its scores (accuracy ``not scored (no truth)`` when the run
    has no truth), their spread over the judge's readings, fallbacks and the judge's cost."""
    from cooplab.evals.text import counts_text, number_text

    cap = "" if r.get("budget_usd") is None else f" of ${r['budget_usd']:g}"
    std = r.get("std")
    std = std if isinstance(std, dict) else {}
    spread = counts_text({k: number_text(v) for k, v in std.items()})
    return (
        f"{r['run']}: {r['judge']} x{r['k']}: completeness {number_text(r.get('completeness'))}, quality "
        f"{number_text(r.get('quality'))}, accuracy {number_text(r.get('accuracy'), missing='not scored (no truth)')} "
        f"(spread {spread}; fallbacks {r.get('n_fallback')}); judge cost ${r['cost_usd']:.6f}{cap}"
    )


@science_app.command("agreement")
def agreement_command(
    dirs: list[Path] = typer.Argument(..., help="Science run directories scored by both judges."),
    judge: list[str] = typer.Option(
        ..., "--judge", help="Two judges (as named in scores.json; 'heuristic' is the heuristic scorer)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """How two scorers agree over many runs: Pearson r and mean absolute difference per dimension."""
    from cooplab.cli.tasks import echo_json
    from cooplab.evals.science_scoring import judge_agreement
    from cooplab.runs import store as runstore

    if len(judge) != 2:
        fail(f"--judge must be given exactly twice, got {len(judge)}")

    def score(d: Path, name: str, dim: str) -> Any:
        try:
            s = runstore.read_json(d / "scores.json")
        except (OSError, ValueError):
            fail(f"{d}/scores.json cannot be read; is it a science run?")
        if name == "heuristic":
            return (s.get("heuristic") or {}).get(dim)
        return next((j.get(dim) for j in s.get("judges") or [] if j.get("judge") == name), None)

    out = {
        dim: judge_agreement([score(d, judge[0], dim) for d in dirs], [score(d, judge[1], dim) for d in dirs])
        for dim in ("completeness", "quality", "accuracy")
    }
    if as_json:
        echo_json(out)
        return
    from cooplab.evals.text import number_text

    for dim, a in out.items():
        r = "n/a" if a["pearson_r"] is None else f"{a['pearson_r']:.3f}"
        typer.echo(
            f"{dim}: n {a['n']}, Pearson r {r}{' (' + a['reason'] + ')' if a.get('reason') else ''}, "
            f"mean |diff| {number_text(a['mean_abs_diff'])}"
        )


# --- cooplab bench science|figure ---------------------------------------------------------------
@bench_app.command("science")
def bench_science(
    suite: Path = typer.Argument(
        ...,
        help="The suite (JSONL): one question per line with id, question, constraints, format (@name[value] parts), "
        "file_name, optional level and concepts.",
    ),
    tables: Path = typer.Option(..., "--tables", help="The directory holding every item's file_name."),
    labels: Optional[Path] = typer.Option(
        None,
        "--labels",
        help="Labels (JSONL): id and common_answers, a list of [name, value] pairs; without it nothing is scored.",
    ),
    team: str = typer.Option(
        "llm",
        "--team",
        help="llm (the --model team) or answers:FILE (scripted: states the answers of FILE, JSONL id + answer; checks "
        "extraction and scoring).",
    ),
    team_size: int = typer.Option(
        2,
        "--team-size",
        help="Agents per team: 2 or 3 (the four teams of the paper), or 1: a single analyst agent with the code tool, "
        "the baseline (the solo pipeline).",
    ),
    budget_per_item: Annotated[
        Optional[float], num_opt("--budget-per-item", "USD cap of one item's run.", "budget")
    ] = None,
    budget: Annotated[
        Optional[float], num_opt("--budget", "USD for the whole suite, split evenly over the items.", "budget")
    ] = None,
    visibility: str = typer.Option(
        "full", "--visibility", help="Budget visibility in the prompt: full, team or hidden."
    ),
    model: co.ModelOpt = "local",
    base_url: co.BaseUrlOpt = None,
    max_tokens: co.MaxTokensOpt = MAX_TOKENS,
    temperature: co.TemperatureOpt = 0.7,
    max_concurrency: co.MaxConcurrencyOpt = 8,
    rps: co.RpsOpt = None,
    price_in: co.PriceInOpt = None,
    price_out: co.PriceOutOpt = None,
    cache: co.CacheOpt = None,
    sandbox_backend: str = typer.Option(
        "docker", "--sandbox-backend", help="docker (isolated) or local (NOT a security boundary)."
    ),
    limit: Optional[int] = typer.Option(None, "--limit", help="Only the first K items."),
    seed: co.SeedOpt = 0,
    parallel: Annotated[
        int, num_opt("--parallel", "Items run at once (local executor; Ray's local instance gets this many CPUs).")
    ] = 1,
    executor: str = typer.Option(
        "local", "--executor", help="local (threads) or ray (tasks on a Ray cluster; needs cooplab[ray])."
    ),
    out: Path = typer.Option(
        ...,
        "--out",
        help="The bench directory: cells/item-ID__sSEED run dirs, manifest.json, results.parquet, summary.json, "
        "report.md, figures/.",
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar or per-item lines."),
    as_json: bool = typer.Option(False, "--json", help="Print summary.json."),
) -> None:
    """Run every question of a suite as one science run on its table (resumable: finished items are skipped and not
    charged again), extract the @name[value] answers of the final paper and score them against the labels."""
    from cooplab.cli.tasks import echo_json
    from cooplab.runs import sweeps
    from cooplab.runs.engine import ENGINE
    from cooplab.tasks.science.bench import BenchError, run_bench
    from cooplab.tasks.science.owndata import OwnDataError

    if team_size not in (1, 2, 3):
        fail(f"--team-size must be 1, 2 or 3, got {team_size}")
    if visibility not in ("full", "team", "hidden"):
        fail(f"--visibility must be full, team or hidden, got {visibility!r}")
    if sandbox_backend not in ("docker", "local"):
        fail(f"--sandbox-backend must be docker or local, got {sandbox_backend!r}")
    if executor not in sweeps.EXECUTORS:
        fail(f"--executor must be one of {', '.join(sweeps.EXECUTORS)}, got {executor!r}")
    if limit is not None and limit < 1:
        fail(f"--limit must be at least 1, got {limit}")
    quiet = quiet or as_json
    log = co.stderr_log(quiet)
    try:
        llm = co.llm_settings(
            dict(
                model=model,
                base_url=base_url,
                max_tokens=max_tokens,
                temperature=temperature,
                max_concurrency=max_concurrency,
                rps=rps,
                price_in=price_in,
                price_out=price_out,
                cache=cache,
            )
        )
        s = run_bench(
            suite,
            tables,
            out,
            jobs_on=ENGINE,
            labels=labels,
            team=team,
            team_size=team_size,
            budget_per_item=budget_per_item,
            budget=budget,
            visibility=visibility,
            model=llm.model,
            limit=limit,
            seed=seed,
            parallel=parallel,
            executor=executor,
            backend=sandbox_backend,
            llm=llm.model_dump(
                include={
                    "base_url",
                    "max_tokens",
                    "temperature",
                    "max_concurrency",
                    "rps",
                    "price_in",
                    "price_out",
                    "cache",
                }
            ),
            log=log,
            quiet=quiet,
        )
    except (BenchError, OwnDataError, sweeps.SweepError) as exc:
        fail(str(exc))
    if as_json:
        echo_json(s)
    else:
        acc = "n/a" if s["accuracy"] is None else f"{100 * s['accuracy']:.1f}%"
        cpc = "n/a" if s["cost_per_correct_usd"] is None else f"${s['cost_per_correct_usd']:.6f}"
        typer.echo(
            f"{s['items']} items: {len(s['ran'])} ran, {len(s['resumed'])} resumed, {len(s['skipped'])} already done, "
            f"{len(s['failed'])} failed, {len(s['not_scored'])} not scored; accuracy {s['correct']}/{s['scored']} = "
            f"{acc}; cost ${s['cost_usd']:.6f}, "
            f"per correct answer {cpc}; report in {out / 'report.md'}"
        )
    if s["failed"]:
        raise typer.Exit(1)


@bench_app.command("figure")
def bench_figure(
    dirs: list[Path] = typer.Argument(..., help="Bench directories (each with summary.json)."),
    out: Path = typer.Option(..., "--out", help="The PNG to write."),
    as_json: bool = typer.Option(False, "--json", help="Print the plotted points as JSON."),
) -> None:
    """Accuracy (95% Wilson interval) against cost per item, one point per bench directory."""
    from cooplab.cli.tasks import echo_json
    from cooplab.runs import store as runstore
    from cooplab.tasks.science.bench import figure

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
    rows = [
        {"bench": lab, "accuracy": s["accuracy"], "ci95": s["ci95"], "cost_per_item_usd": s.get("cost_per_item_usd")}
        for lab, s in points
    ]
    if as_json:
        echo_json({"figure": str(out), "points": rows})
    else:
        typer.echo(f"wrote {out} ({len(rows)} points)")
