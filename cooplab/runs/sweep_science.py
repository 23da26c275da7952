"""``cooplab sweep CONFIG`` for science conditions (paper §4.1.1): models x tasks x budgets x
visibilities x team sizes x prompts, ``simulations`` runs per condition (seeds seed, seed+1, ...).

Config (JSON; ``"task": "science"`` selects this sweep)::

    {"task": "science", "out": "runs/science", "models": ["local"], "team": "llm",
     "science_tasks": ["ecology", "anomaly"], "budgets": [0.5, 1.0], "visibilities": ["full", "hidden"],
     "team_sizes": [2], "prompts": ["standard"], "simulations": 2, "seed": 0, "parallel": 1,
     "sandbox_backend": "docker", "llm": {"max_concurrency": 4, "max_tokens": 256}, "set": {"max_steps": 4}}

Every run is an ordinary run directory (``OUT/runs/CONDITION__sN``): finished runs are skipped,
interrupted ones resumed. ``OUT/scores.csv`` has one row per run (condition, seed, status, the
three heuristic scores, cost); ``OUT/conditions.csv`` the means per condition.
"""

from __future__ import annotations

import json
from itertools import product
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cooplab.runs import store as runstore
from cooplab.agents.models import check_model
from cooplab.agents.settings import LLMSettings
from cooplab.limits import ConfigError
from cooplab.graphs.task import first_error
from cooplab.runs.sweeps import SweepError, job, run_jobs, table, write_table
from cooplab.runs.sweeps import slug as _slug


class ScienceSweep(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task: str = Field("science", pattern="^science$")
    out: str
    models: list[str] = ["local"]
    team: str = Field("llm", pattern="^(llm|oracle|garbage)$")
    science_tasks: list[str] = ["ecology"]
    budgets: list[float | None] = [1.0]
    visibilities: list[str] = ["full"]
    team_sizes: list[int] = [2]
    prompts: list[str] = ["standard"]
    simulations: int = Field(1, ge=1, le=1000)
    seed: int = Field(0, ge=0)
    parallel: int = Field(1, ge=1, le=64)
    sandbox_backend: str = Field("docker", pattern="^(docker|local)$")
    sandbox_timeout: float = Field(30.0, gt=0, le=600, allow_inf_nan=False)
    llm: dict[str, Any] = {}
    set: dict[str, Any] = {}


#: what a sweep config's "llm" may set: every LLM setting but the models (the sweep's own field) and the budget (per condition)
LLM_KEYS = set(LLMSettings.model_fields) - {"model", "agent_models", "budget"}


def load(raw: dict[str, Any], where: str) -> ScienceSweep:
    import cooplab.limits as co
    from cooplab.tasks.science.params import ScienceParams

    for key in ("models", "science_tasks", "visibilities", "prompts"):
        if key in raw and (not isinstance(raw[key], list) or not raw[key] or not all(isinstance(x, str) for x in raw[key])):
            raise SweepError(f"{where}: {key} must be a non-empty list of strings, got {raw[key]!r}")
    for key, rule in (("simulations", "replicates"), ("seed", "seed"), ("parallel", "parallel")):
        if key in raw:
            try:
                co.check(f"{where}: {key}", raw[key], rule)
            except ConfigError as exc:
                raise SweepError(str(exc)) from None
    for b in raw.get("budgets", []) if isinstance(raw.get("budgets", []), list) else [None, "x"]:
        if b is not None:
            try:
                co.check(f"{where}: budgets", b, "budget")
            except ConfigError as exc:
                raise SweepError(str(exc)) from None
    if "llm" in raw:
        try:
            LLMSettings.from_file(raw["llm"], f"{where}: llm", allowed=LLM_KEYS)
        except ConfigError as exc:
            raise SweepError(str(exc)) from None
    try:
        cfg = ScienceSweep(**raw)
    except ValidationError as exc:
        raise SweepError(f"{where}: {first_error(exc)}") from None
    try:  # every condition's parameters, before anything runs
        for t, size, vis, prompt in product(cfg.science_tasks, cfg.team_sizes, cfg.visibilities, cfg.prompts):
            ScienceParams(**{**cfg.set, "task": t, "team": cfg.team, "team_size": size, "visibility": vis, "prompt": prompt})
    except ValidationError as exc:
        raise SweepError(f"{where}: {first_error(exc)}") from None
    if cfg.team == "llm":
        for m in cfg.models:
            try:
                check_model(m, cfg.llm.get("base_url"), f"{where}: models")
            except ConfigError as exc:
                raise SweepError(str(exc)) from None
    return cfg


def conditions(cfg: ScienceSweep) -> list[dict[str, Any]]:
    models = cfg.models if cfg.team == "llm" else [cfg.team]
    out = []
    for m, t, b, v, size, p in product(models, cfg.science_tasks, cfg.budgets, cfg.visibilities, cfg.team_sizes, cfg.prompts):
        name = f"{_slug(m)}__{t}__b{'none' if b is None else f'{b:g}'}__{v}__n{size}__{p}"
        for i in range(cfg.simulations):
            out.append({"model": m, "task": t, "budget": b, "visibility": v, "team_size": size, "prompt": p, "seed": cfg.seed + i,
                        "condition": name, "dir": Path(cfg.out) / "runs" / f"{name}__s{cfg.seed + i}"})
    return out


def jobs(cfg: ScienceSweep) -> list[dict[str, Any]]:
    """Every run of the sweep as a job (cooplab.runs.sweeps): its directory, task and complete run config."""
    from cooplab.runs.config import RunConfig, SandboxSettings
    from cooplab.tasks.science.params import ScienceParams
    from cooplab.tasks.science.task import TASK, team_model

    out = []
    for c in conditions(cfg):
        model = team_model(cfg.team, c["task"]) or c["model"]
        llm = LLMSettings.from_file({"max_tokens": 256, **cfg.llm}, "llm", model=model, budget=c["budget"])
        params = ScienceParams(**{**cfg.set, "task": c["task"], "team": cfg.team, "team_size": c["team_size"],
                                  "visibility": c["visibility"], "prompt": c["prompt"]})
        config = RunConfig(task="science", agents="llm", seed=c["seed"], params={**params.model_dump(mode="json"), "judge": None}, llm=llm,
                           sandbox=SandboxSettings(backend=cfg.sandbox_backend, timeout=cfg.sandbox_timeout),
                           record={"dataset": {"sha256": None}, "sweep_condition": c["condition"]}).to_config(TASK)
        labels = {k: c[k] for k in ("condition", "model", "task", "budget", "visibility", "team_size", "prompt", "seed")}
        out.append(job(c["dir"], "science", config, labels=labels, done=("completed", "budget_exhausted")))
    return out


def run_science_sweep(cfg: ScienceSweep, log: Callable[[str], None] = lambda s: None, *, executor: str = "local",
                      address: str | None = None, quiet: bool = True) -> dict[str, Any]:
    import pandas as pd

    js = jobs(cfg)
    res = run_jobs(js, parallel=cfg.parallel, noun="run", executor=executor, address=address, log=log, quiet=quiet)
    tab = table(js, res, "run")
    table_csv = str(write_table(tab, Path(cfg.out)))
    rows = []
    for j in js:  # the labels are the condition's fields
        p = Path(j["dir"]) / "summary.json"
        if not p.exists():
            continue
        s = runstore.read_json(p)
        rows.append(dict(j["labels"]) | {"status": s.get("status"), **(s.get("scores") or {}),
                                         "cost_usd": (s.get("ledger") or {}).get("cost_usd_float"),
                                         "run_dir": str(Path(cfg.out) / "runs" / Path(j["dir"]).name)})
    out = Path(cfg.out)
    df = pd.DataFrame(rows)
    if not df.empty:
        df.to_csv(out / "scores.csv", index=False)
        for col in ("completeness", "quality", "accuracy", "cost_usd"):  # a score not scored is null: left out of the mean
            df[col] = pd.to_numeric(df[col], errors="coerce") if col in df else float("nan")
        keys = ["condition", "model", "task", "budget", "visibility", "team_size", "prompt"]
        agg = df.groupby(keys, dropna=False).agg(runs=("seed", "size"), completeness=("completeness", "mean"), quality=("quality", "mean"),
                                                 accuracy=("accuracy", "mean"), cost_usd=("cost_usd", "mean")).reset_index()
        agg.to_csv(out / "conditions.csv", index=False)
    return {"runs": len(js), **res, "table": tab, "table_csv": table_csv,
            "scores_csv": str(out / "scores.csv") if rows else None}


def is_science(raw: Any) -> bool:
    return isinstance(raw, dict) and raw.get("task") == "science"


def load_file(path: Path) -> ScienceSweep | None:
    """The science sweep of a config file, or None when the file is another sweep (CPR)."""
    try:
        raw = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None  # the CPR loader reports the problem
    return load(raw, f"sweep config {path}") if is_science(raw) else None
