"""Science teams (paper §4, Appendix C, L) as a task of the one runner:
``cooplab run science --task ecology|anomaly|biomarker|geospatial --team llm|oracle|garbage ...``.

A run's settings are a :class:`.params.ScienceSettings` (``config.params``; config.json's ``params``:
the science task, the team kind, team size, visibility, prompt and the loop caps; ``judge``, the LLM
judge or null; ``custom`` for a run on your own data), ``record.dataset`` (the data file's name and SHA-256, checked on
resume), ``sandbox`` (backend, timeout, rate) and ``llm`` (the models: for ``--team oracle|garbage``
the built-in scripted models; the budget, the prices, the cache).

Run directory: ``dataset/`` (data.csv, ground_truth.json), ``artifacts/NAME.vN.md`` (every
version), ``messages.jsonl``, ``requests.jsonl`` (with the routing decisions), ``tool_loops.*``,
``timeline.*``, ``decisions``-free (the teams' calls are tool loops), ``ledger.*`` (tokens and
sandbox seconds per agent and team), ``traces.jsonl``, ``scores.json`` (the heuristic scorer; an
LLM judge adds its scores there, see ``cooplab science score``), ``summary.json``,
``figures/budget.png`` and ``report.html``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cooplab.evals.text import counts_text, number_text
from cooplab.graphs import rundir, runfiles
from cooplab.graphs.formats import Converter
from cooplab.graphs.rundir import TRACES_FILE
from cooplab.graphs.runfiles import RunSummary
from cooplab.graphs.tables import money_table
from cooplab.graphs.task import RunInfo, Task, TaskConfig
from cooplab.limits import clean_text, sha256_file
from cooplab.tasks.science import datasets as dsets
from cooplab.tasks.science import scripted  # noqa: F401 - registers the built-in scripted teams (and the bench's answers team)
from cooplab.tasks.science.defaults import MAX_TOKENS
from cooplab.tasks.science.params import Custom, Judge, ScienceParams, ScienceSettings
from cooplab.tasks.science.results import ScienceResults
from cooplab.tasks.science.roles import ARTIFACT, TEAMS
from cooplab.tasks.science.team import ScienceState, TeamGraph, artifacts_of, init_state

DATASET_DIR = "dataset"


def team_model(team: str, task: str) -> str | None:
    """The model spec of a built-in scripted team (None for LLM teams)."""
    return {"oracle": f"builtin:science-oracle:{task}", "garbage": f"builtin:science-garbage:{task}"}.get(team)


Config = TaskConfig[ScienceSettings]


def _dataset(config: Config) -> Any:
    """What the run recorded of its data file (``record.dataset``), checked: None, or an object with
    the file's SHA-256 (None until the run starts)."""
    ds = config.record.get("dataset")
    if ds is not None and (not isinstance(ds, Mapping) or not isinstance(ds.get("sha256"), (str, type(None)))):
        raise rundir.RunDirError(f"record.dataset must be an object with the data file's sha256, got {ds!r}")
    return ds


def _record_dataset(config: Config, out: Path, dataset: dict[str, Any]) -> None:
    """Note the data file's name and hash in config.json's ``record`` (and in ``config``)."""
    cfg = rundir.upgrade_config(rundir.read_json(out / "config.json"))
    cfg["record"] = {**(cfg.get("record") or {}), "dataset": dataset}
    rundir.write_json(out / "config.json", cfg)
    config.record["dataset"] = dataset


def _option_names(names: Mapping[str, str]) -> Any:
    """How ``cooplab run science`` names a setting in a message: its option (``--team-size``, the
    judge's ``--judge-samples`` and ``--judge-budget``), else ``--set NAME``."""
    from cooplab.limits import flags

    other = flags(names, rest=lambda f: f"--set {f}")
    judge = {"model": "--judge", "samples": "--judge-samples", "budget": "--judge-budget"}

    def name(loc: tuple) -> str:
        if loc[:1] == ("judge",):
            return judge.get(str(loc[1]), "--judge") if len(loc) > 1 else "--judge"
        if loc[:1] == ("custom",):
            return (
                "--dataset"
                if len(loc) < 2 or loc[1] == "datasets"
                else "--truth"
                if loc[1] == "facts"
                else "--task-file"
            )
        return other(loc)

    name.bare, name.where = name, ""  # type: ignore[attr-defined]
    return name


def judge_budget(config: Config) -> float | None:
    """The judge's budget in USD: its own (``params.judge.budget``), else the team's (None: no cap)."""
    judge = config.params.judge
    if judge is not None and judge.budget is not None:
        return judge.budget
    return None if config.llm is None else config.llm.budget


def _judge_the_run(out: Path, config: Config, judge: Judge) -> dict[str, Any]:
    """The summary's ``judge`` entry: the judge's scores, or its one-line error; with what it cost
    (``cost_usd``, its ``ledger``) and the budget it had (``budget_usd``), next to the team's."""
    from cooplab.tasks.science.judging import JudgeFailed, judge_run

    budget = judge_budget(config)
    try:
        e = judge_run(out, judge.model, k=judge.samples, budget=budget)
        entry = {k: e.get(k) for k in ("judge", "k", "completeness", "quality", "accuracy", "std", "n_fallback")}
        ledger = e.get("ledger") or {}
    except JudgeFailed as exc:
        entry, ledger = {"judge": judge.model, "error": str(exc)}, exc.ledger
    except Exception as exc:  # noqa: BLE001 - the run's own results are kept; re-score with 'cooplab science score'
        entry, ledger = {"judge": judge.model, "error": f"{type(exc).__name__}: {exc}"[:300]}, {}
    return {**entry, "budget_usd": budget, "cost_usd": ledger.get("cost_usd_float", 0.0), "ledger": ledger}


class ScienceTask(Task):
    name = "science"
    title = (
        "Science teams: four sequential teams of tool-using agents analyze a dataset in the sandbox under one "
        "shared budget."
    )
    Params = ScienceSettings
    Results = ScienceResults
    state_schema = ScienceState
    round_node = "route"
    round_unit = "team pass"
    agent_kinds = ("llm",)
    uses_sandbox = True
    sweep_columns = ("scores.completeness", "scores.quality", "scores.accuracy", "ledger.cost_usd_float")
    sweep_seeds = (0, 1, 2, 3, 4)  # five simulations per condition, as in the paper's sweep (§4.1.1)
    default_max_tokens = MAX_TOKENS

    def options(
        self,
        agents: str,
        *,
        task: str | None = None,
        dataset: Any = None,
        task_file: Any = None,
        truth: Any = None,
        team: str = "llm",
        team_size: int | None = None,
        pipeline: str | None = None,
        visibility: str = "full",
        prompt: str = "standard",
        judge: str = "heuristic",
        judge_samples: int = 3,
        judge_budget: float | None = None,
        set: Any = None,
    ) -> dict[str, Any]:  # noqa: A002
        """``cooplab run science``'s own options: a built-in ``task`` (ecology, anomaly, biomarker,
        geospatial) or your own ``dataset`` (paths) with ``task_file`` and optional ``truth``; the
        ``team`` (llm, oracle, garbage), ``team_size``, ``pipeline`` (teams | solo), budget
        ``visibility``, ``prompt``, the ``judge`` (heuristic or a model spec; checked with the run's
        model settings), its ``judge_samples`` and ``judge_budget`` (USD; default the team's budget),
        and ``set`` (any other parameter)."""

        import cooplab.limits as co

        custom = None
        if dataset:
            from cooplab.tasks.science.owndata import OwnDataError, custom_section, read_task_file

            if task is not None:
                raise co.ConfigError("give --task (a built-in task) or --dataset (your own data), not both")
            if task_file is None:
                raise co.ConfigError("--dataset needs --task-file TASK.md saying what the teams should find out")
            paths = [Path(d) for d in ([dataset] if isinstance(dataset, (str, Path)) else dataset)]
            try:
                custom = custom_section(paths, read_task_file(Path(task_file)), None if truth is None else Path(truth))
            except OwnDataError as exc:
                raise co.ConfigError(str(exc)) from None
        elif task_file is not None or truth is not None:
            raise co.ConfigError("--task-file and --truth go with --dataset (your own data)")
        task = task or "ecology"
        values = co.parse_set(set, ScienceParams.model_fields, "science")
        names = {
            "task": "--task",
            "team": "--team",
            "team_size": "--team-size",
            "pipeline": "--pipeline",
            "visibility": "--visibility",
            "prompt": "--prompt",
        }
        for key, v in (
            ("task", task),
            ("team", team),
            ("team_size", team_size),
            ("pipeline", pipeline),
            ("visibility", visibility),
            ("prompt", prompt),
        ):
            if v is None:
                continue
            if key in values:
                raise co.ConfigError(f"give {key} either with its option or with --set, not both")
            values[key] = v
        judge_cfg = None
        if judge != "heuristic":
            if not isinstance(judge, str):
                raise co.ConfigError(f"--judge must be heuristic or a model spec, got {co.show(judge)}")
            judge_cfg = {"model": judge, "samples": judge_samples, "budget": judge_budget}
        else:
            co.validate(
                ScienceSettings,
                {"judge": {"model": "heuristic", "samples": judge_samples, "budget": judge_budget}},
                _option_names(names),
            )  # the judge's options are checked even when unused
            if judge_budget is not None:
                raise co.ConfigError("--judge-budget goes with --judge MODEL (the heuristic scorer costs nothing)")
        label = _option_names(names)
        P = co.validate(
            ScienceSettings, {**values, "judge": judge_cfg, "custom": custom}, label, context={"agents": agents}
        )
        return {"params": P, "record": {"dataset": {"sha256": None}}}

    def fixed_model(self, config: Config) -> str | None:
        """The built-in scripted model of an oracle or garbage team (None for an LLM team)."""
        P = config.params
        from cooplab.tasks.science.owndata import custom_team_model

        return custom_team_model(P.team) if P.custom is not None else team_model(P.team, P.task)

    def other_models(self, config: Config) -> list[tuple[str, str, str, tuple[str, ...]]]:
        """The LLM judge, when the run has one (asked in the judge's phase)."""
        from cooplab.evals.scoring.judge import JUDGE_PHASE

        j = config.params.judge
        return [] if j is None else [("--judge", "params.judge.model", j.model, (JUDGE_PHASE,))]

    def cost_cap(self, config: Config) -> float | None:
        """The team's budget plus the judge's (None when either has no cap)."""
        team = super().cost_cap(config)
        if config.params.judge is None or team is None:
            return team
        judge = judge_budget(config)
        return None if judge is None else team + judge

    def cost_spent(self, summary: RunSummary[ScienceResults]) -> float | None:
        """The team's ledger plus what the judge spent."""
        team = super().cost_spent(summary)
        judged = summary.results.judge if summary.results is not None else None
        return None if team is None else team + (judged.cost_usd if judged is not None else 0.0)

    # --- files --------------------------------------------------------------------------------------
    def prepare_run(self, config: Config, out: Path) -> None:
        """Generate the dataset into ``out/dataset`` (deterministic for the seed); on resume, check
        that the files are the ones the run started with (regenerated if missing)."""
        _dataset(config)  # what the run recorded of its data, checked before anything is written
        if config.params.custom is not None:
            return self._prepare_custom(config, config.params.custom, Path(out))
        P = config.params
        d = Path(out) / DATASET_DIR
        data = d / dsets.DATA_FILE
        if not data.exists() or not (d / dsets.TRUTH_FILE).exists():
            dsets.generate(P.task, config.seed, d, size=P.data_size)
        want = (_dataset(config) or {}).get("sha256")
        got = sha256_file(data)
        if want is None:
            _record_dataset(
                config,
                Path(out),
                {"file": f"{DATASET_DIR}/{dsets.DATA_FILE}", "sha256": got, "generator": dsets.GENERATOR},
            )
        elif got != want:
            raise rundir.RunDirError(
                f"{data} is not the dataset this run started with (SHA-256 differs); restore it or start a new run"
            )

    def _prepare_custom(self, config: Config, c: Custom, out: Path) -> None:
        """Your own data: the canonical file the sandbox loads and ground_truth.json (the facts, or
        none) are written once; on resume the copy must be unchanged (an error) and a changed input
        file is a warning (the run goes on with its copy)."""
        import sys

        from cooplab.tasks.science import owndata

        d = out / DATASET_DIR
        have = [p for p in (d / "data.csv", d / "data.parquet") if p.exists()]
        if not have or not (d / dsets.TRUTH_FILE).exists():
            try:
                data = owndata.write_canonical([dict(i) for i in c.datasets], d)
            except owndata.OwnDataError as exc:
                raise rundir.RunDirError(str(exc)) from None
            truth = {
                "task": "custom",
                "description": c.task,
                "facts": list(c.facts or []),
                "accuracy_scored": c.facts is not None,
            }
            rundir.write_json(d / dsets.TRUTH_FILE, truth)
        else:
            data = have[0]
            for i in c.datasets:
                p = Path(i["path"])
                now = sha256_file(p) if p.is_file() else None
                if now != i["sha256"]:
                    print(
                        f"cooplab: warning: {p} {'is gone' if now is None else 'changed (SHA-256 differs)'} since the "
                        "run started; "
                        f"the run goes on with its copy in {d}",
                        file=sys.stderr,
                    )
        want = (_dataset(config) or {}).get("sha256")
        got = sha256_file(data)
        if want is None:
            _record_dataset(
                config, out, {"file": f"{DATASET_DIR}/{data.name}", "sha256": got, "generator": "cooplab own data"}
            )
        elif got != want:
            raise rundir.RunDirError(
                f"{data} is not the dataset this run started with (SHA-256 differs); restore it or start a new run"
            )

    def sandbox_dataset(self, config: Config, out: Path) -> Path | None:
        if config.params.custom is not None:
            d = Path(out) / DATASET_DIR
            return d / "data.parquet" if (d / "data.parquet").exists() else d / "data.csv"
        return Path(out) / DATASET_DIR / dsets.DATA_FILE

    def sandbox_agents(self, config: Config) -> int | None:
        from cooplab.tasks.science.roles import CODE_TEAMS, pipeline_roles

        P = config.params
        return sum(1 for r in pipeline_roles(P.pipeline, P.team_size) if r.team in CODE_TEAMS)

    # --- the graph -----------------------------------------------------------------------------------
    def build(self, config: Config, *, checkpointer: Any = None):
        P = config.params
        c = P.custom
        if c is not None:
            from cooplab.tasks.science import owndata

            text = c.task + "\n\n" + owndata.data_note(list(c.datasets))
            prefix = owndata.MULTI_PREAMBLE if len(c.datasets) > 1 else ""
            return TeamGraph(P, text, code_prefix=prefix).build(checkpointer)
        return TeamGraph(P, dsets.TASK_DESCRIPTIONS[P.task]).build(checkpointer)

    def init_state(self, config: Config) -> dict[str, Any]:
        return init_state(config.params.max_reentries)

    def budget_resume_point(self, history: Any) -> Any:
        """A budget stop is kept in the state (``stop``, naming the node it cut short): with a raised
        budget the run continues from the checkpoint before that node, which runs again (its calls
        paid before the stop replay from the cache)."""
        stop: dict[str, Any] = {}  # the newest checkpoint's stop (the first of ``history``)
        for i, snap in enumerate(history):
            values = snap.values or {}
            if i == 0:
                got = values.get("stop")
                if not isinstance(got, dict):
                    return None
                stop = got
            elif not values.get("stop") and stop.get("node") in snap.next:
                return snap
        return None

    def total_rounds(self, config: Config) -> int:
        return 1 if config.params.pipeline == "solo" else len(TEAMS)

    def recursion_limit(self, state: Mapping[str, Any], n_nodes: int) -> int:
        return int(state.get("max_round", 8)) * (n_nodes + 1) + 10

    def progress(self, update: Mapping[str, Any]) -> dict[str, Any]:
        c = update.get("cursor")
        return {"next": TEAMS[c] if isinstance(c, int) and 0 <= c < len(TEAMS) else "end"}

    # --- results -------------------------------------------------------------------------------------
    def outputs(self, final: Mapping[str, Any], config: Config, run: RunInfo) -> ScienceResults:
        from cooplab.evals.science_scoring import heuristic_score
        from cooplab.tasks.science.explore import artifact_index

        P = config.params
        out = run.out
        arts = artifacts_of(final)
        adir = out / "artifacts"
        adir.mkdir(exist_ok=True)
        for name, versions in arts.items():
            for a in versions:
                (adir / f"{name}.v{a['version']}.md").write_text(clean_text(str(a["content"])), encoding="utf-8")
        rundir.write_json(adir / "index.json", artifact_index(arts))
        for stem in ("messages", "requests", "routing", "completions"):
            rundir.write_jsonl(out / f"{stem}.jsonl", final.get(stem) or [])
        for stem in ("tool_loops", "timeline"):
            rows = [
                {
                    k: (json.dumps(v, ensure_ascii=False, default=str) if isinstance(v, (list, dict)) else v)
                    for k, v in r.items()
                }
                for r in final.get(stem) or []
            ]
            if rows:
                df = rundir.frame(rows)
                rundir.write_table(money_table(stem, df) if stem == "tool_loops" else df, out, stem, csv=run.csv)
        truth = rundir.read_json(out / DATASET_DIR / dsets.TRUTH_FILE)
        paper = (arts.get(ARTIFACT["writing"]) or [None])[-1]
        if paper is not None:
            report, scored = paper["content"], "final_paper"
        else:  # no paper: what exists is scored as it is
            report = "\n\n".join(v[-1]["content"] for v in arts.values())
            scored = "the other artifacts (no final_paper)" if arts else "nothing (no artifact)"
        h = heuristic_score(report, truth)
        custom = P.custom is not None
        no_truth = custom and not truth.get("accuracy_scored")
        hd = h.as_dict()
        if no_truth:
            hd["accuracy"] = None  # no truth given: not scored (never 0)
        scores = {"task": "custom" if custom else P.task, "status": run.status, "scored": scored, "heuristic": hd}
        old = rundir.read_json(out / "scores.json") if (out / "scores.json").exists() else {}
        if isinstance(old, dict) and old.get("judges"):
            scores["judges"] = old["judges"]  # a resumed run keeps the judges' scores of its paper (re-score to update)
        rundir.write_json(out / "scores.json", scores)
        spent: dict[str, float] = {}
        seconds: dict[str, float] = {}
        for e in final.get("ledger") or []:
            t = e.get("team") or "?"
            spent[t] = spent.get(t, 0.0) + float(e.get("cost") or 0)
            if e.get("kind") == "sandbox_seconds":
                seconds[t] = seconds.get(t, 0.0) + float(e.get("units") or 0)
        loops = list(final.get("tool_loops") or [])
        stops: dict[str, int] = {}
        for r in loops:
            stops[str(r.get("stop_reason"))] = stops.get(str(r.get("stop_reason")), 0) + 1
        passes = [
            (t["team"], t["visit"]) for t in final.get("timeline") or [] if t.get("node") in ("synthesize", "analyze")
        ]
        judged = None
        if P.judge is not None and run.status in ("completed", "budget_exhausted"):
            judged = _judge_the_run(out, config, P.judge)
        sc: dict[str, float | None] = {k: h.scores()[k] for k in ("completeness", "quality", "accuracy")}
        if no_truth:
            sc["accuracy"] = None
        return ScienceResults.of(
            {
                "science_task": "custom" if custom else P.task,
                "judge": judged,
                "team": P.team,
                "pipeline": P.pipeline,
                "team_size": P.team_size,
                "visibility": P.visibility,
                "prompt": P.prompt,
                "scores": sc,
                "scored": scored,
                "facts": {f.id: f.status for f in h.facts},
                "passes": [f"{t}#{v}" for t, v in passes],
                "artifacts": {n: len(v) for n, v in arts.items()},
                "requests": len(final.get("requests") or []),
                "requests_refused": sum(1 for r in final.get("routing") or [] if r.get("decision") == "refused"),
                "messages": len(final.get("messages") or []),
                "tool_loops": len(loops),
                "loop_stops": stops,
                "cost_by_team_usd": {t: round(v, 6) for t, v in spent.items()},
                "sandbox_seconds_by_team": {t: round(v, 3) for t, v in seconds.items()},
                "stop": final.get("stop"),
            }
        )

    def figure(self, summary: RunSummary[ScienceResults], run: RunInfo) -> None:
        from cooplab.evals.figcache import figure_cache
        from cooplab.tasks.science.report import write_report

        with figure_cache(run.cache) as cache:  # the budget figure of a rerun is copied from the response cache
            write_report(run.out, self, cache=cache)

    def explore(self, run: Any, query: Mapping[str, str]) -> list[Any]:
        """The science run's page in the explorer (:func:`cooplab.tasks.science.explore.sections`)."""
        from cooplab.tasks.science.explore import sections

        return sections(Path(run.out), query)

    def key_numbers(self, summary: RunSummary[ScienceResults]) -> dict[str, Any]:
        from cooplab.tasks.science.explore import key_numbers

        return key_numbers(summary.as_json())

    def report(self, summary: RunSummary[ScienceResults]) -> list[str]:
        r = summary.results
        if r is None:
            return super().report(summary)
        s = r.scores
        who = "solo analyst" if r.pipeline == "solo" else f"team of {r.team_size} per team"
        head = f"science {r.science_task}: {r.team} {who}, visibility {r.visibility}, status {summary.status}"
        acc = "not scored (no truth)" if s.accuracy is None else f"{s.accuracy:.2f}"
        lines = [
            head,
            f"scores (heuristic, 0-1): completeness {number_text(s.completeness, 2)}, quality "
            f"{number_text(s.quality, 2)}, "
            f"accuracy {acc} (scored: {r.scored})",
            f"team passes: {', '.join(r.passes) or 'none'}; requests {r.requests} "
            f"({r.requests_refused} refused); tool loops {r.tool_loops} (stops: {counts_text(r.loop_stops)})",
        ]
        if r.cost_by_team_usd:
            lines.append("cost by team: " + ", ".join(f"{t} ${v:.4f}" for t, v in r.cost_by_team_usd.items()))
        judged = r.judge
        if judged is not None:
            cap = judged.budget_usd
            outcome = (
                f"error: {judged.error}"
                if judged.error
                else f"completeness {number_text(judged.completeness)}, quality {number_text(judged.quality)}, "
                f"accuracy {number_text(judged.accuracy, missing='not scored (no truth)')}"
            )
            lines.append(
                f"judge {judged.judge}: {outcome}; cost ${judged.cost_usd:.4f}"
                f"{'' if cap is None else f' of its ${cap:.4f} budget'}"
            )
        lines.append(
            "files: dataset/, artifacts/, scores.json, report.html, messages.jsonl, requests.jsonl, tool_loops.*, "
            "ledger.*, " + TRACES_FILE
        )
        return lines

    def earlier_sweep(self, raw: Mapping[str, Any]) -> Converter | None:
        """The earlier science sweep format (``models``, ``science_tasks``, ``budgets`` ...):
        ``tasks/science/sweep_format.py``."""
        from cooplab.tasks.science import sweep_format

        return sweep_format.converter() if sweep_format.claims(dict(raw)) else None

    def analyze_sweep(
        self, cells: list[dict[str, Any]], out: Path, *, analysis_out: Path | None = None
    ) -> dict[str, Any]:
        """``OUT/scores.csv`` (one row per finished run: its condition, seed, status, both scorers'
        scores and the cost) and ``OUT/conditions.csv`` (their means per condition), which
        ``cooplab analyze science`` reads. ``completeness``, ``quality`` and ``accuracy`` are the
        heuristic scorer's (as before); ``judge`` names the LLM judge whose scores are in
        ``judge_completeness``, ``judge_quality`` and ``judge_accuracy`` (:func:`_judge_row`; empty
        for a run no judge scored). A run's condition is its cell name without the seed; the
        model, task, budget, visibility, team size and prompt come from the run's own config.json.

        A bench's folder (its manifest's kind is "bench": ``cooplab bench science``): its
        results.parquet, summary.json, report.md and figure instead
        (:func:`cooplab.tasks.science.bench.analyze`)."""
        import pandas as pd

        if (Path(out) / "manifest.json").is_file() and runfiles.read_manifest(Path(out)).kind == "bench":
            from cooplab.tasks.science.bench import analyze

            return analyze(Path(out), cells)

        from cooplab.evals.science_scoring import JUDGE_COLUMNS

        dest = Path(analysis_out) if analysis_out is not None else Path(out)
        rows = []
        for c in cells:
            d = Path(c["dir"])
            config, summary = rundir.read_config(d), runfiles.read_summary(d, ScienceResults)
            P, llm = config.get("params") or {}, config.get("llm") or {}
            scores = summary.results.scores.model_dump() if summary.results is not None else {}
            rows.append(
                {
                    "condition": d.name.rsplit("__s", 1)[0],
                    "model": llm.get("model"),
                    "task": P.get("task"),
                    "budget": llm.get("budget"),
                    "visibility": P.get("visibility"),
                    "team_size": P.get("team_size"),
                    "prompt": P.get("prompt"),
                    "seed": config.get("seed"),
                    "status": summary.status,
                    **scores,
                    **_judge_row(d, config, summary),
                    "cost_usd": summary.cost_usd,
                    "run_dir": str(d),
                }
            )
        df = pd.DataFrame(rows)
        dest.mkdir(parents=True, exist_ok=True)
        df.to_csv(dest / "scores.csv", index=False)
        means = ["completeness", "quality", "accuracy", *JUDGE_COLUMNS.values(), "cost_usd"]
        for col in means:  # a score not scored is null: left out of the mean
            df[col] = pd.to_numeric(df[col], errors="coerce") if col in df else float("nan")
        keys = ["condition", "model", "task", "budget", "visibility", "team_size", "prompt"]
        agg = (
            df.groupby(keys, dropna=False)
            .agg(runs=("seed", "size"), **{col: (col, "mean") for col in means})
            .reset_index()
        )
        agg.to_csv(dest / "conditions.csv", index=False)
        return {"scores_csv": str(dest / "scores.csv"), "conditions_csv": str(dest / "conditions.csv")}


def _judge_row(d: Path, config: Mapping[str, Any], summary: RunSummary[ScienceResults]) -> dict[str, Any]:
    """A run's judge columns in scores.csv: the scores in its scores.json of the judge its config
    names (else of the last judge that scored it, e.g. with ``cooplab science score``), or empty
    ones (with the judge's one-line error from summary.json when it failed)."""
    from cooplab.evals.science_scoring import JUDGE_COLUMNS, judge_entry

    configured = (config.get("params") or {}).get("judge") if isinstance(config.get("params"), Mapping) else None
    name = configured.get("model") if isinstance(configured, Mapping) else None
    scores = rundir.read_json(d / "scores.json") if (d / "scores.json").is_file() else {}
    entry = judge_entry(scores, name)
    failed = summary.results.judge if summary.results is not None else None
    row: dict[str, Any] = {"judge": (entry or {}).get("judge", name)}
    row.update({col: (entry or {}).get(dim) for dim, col in JUDGE_COLUMNS.items()})
    row["judge_error"] = None if entry is not None or failed is None else failed.error
    return row


TASK = ScienceTask()
