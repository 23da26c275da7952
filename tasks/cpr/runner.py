"""Run one CPR condition into a run directory, with a SQLite checkpointer so it can resume."""

from __future__ import annotations

import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from langgraph.checkpoint.sqlite import SqliteSaver

from cooplab import runstore
from cooplab.evals.metrics import summarize
from cooplab.tasks.cpr.params import ENVIRONMENTS, CPRParams, make_params
from cooplab.tasks.cpr.society import (
    Condition,
    apply_ablation,
    build_cpr_graph,
    drive,
    init_state,
    phases_for,
    recursion_limit,
)

THREAD = "cpr"


def resolve_params(env: str, ablation: str, n_agents: int | None, rounds: int | None, overrides: dict[str, Any]) -> CPRParams:
    """CLI choices -> validated parameters. Precedence: --set > --n-agents/--rounds > presets."""
    values: dict[str, Any] = {"r": ENVIRONMENTS[env]}
    values = apply_ablation(values, ablation)
    if n_agents is not None:
        values["N"] = n_agents
    if rounds is not None:
        values["T"] = rounds
    values.update(overrides)
    return make_params(**values)


@contextmanager
def sqlite_saver(path: Path) -> Iterator[SqliteSaver]:
    conn = sqlite3.connect(str(path), check_same_thread=False)
    try:
        yield SqliteSaver(conn)
    finally:
        conn.close()


def _progress(total: int, quiet: bool):
    if quiet:
        return None, None
    from tqdm import tqdm

    bar = tqdm(total=total, desc="rounds", unit="round", leave=False, dynamic_ncols=True, disable=None)

    def update(env_update: dict) -> None:
        rec = env_update["history"][0]
        bar.n = int(rec["round"])
        bar.set_postfix(running=int(env_update["active"].sum()), refresh=False)
        bar.refresh()

    return bar, update


def run_to_dir(
    out: Path,
    params: CPRParams,
    *,
    population: str,
    replicates: int,
    seed: int,
    labels: dict[str, Any],
    csv: bool = False,
    quiet: bool = False,
) -> dict[str, Any]:
    """Write config.json, run with checkpoints, then write tables, summary and figures."""
    config = {
        "task": "cpr",
        "agents": "rule",
        **labels,
        "population": population,
        "replicates": replicates,
        "seed": seed,
        "params": params.model_dump(),
        "csv": csv,
        "code_version": runstore.code_version(),
        "created": runstore.now(),
    }
    runstore.write_json(out / "config.json", config)
    config["_quiet"] = quiet
    state = init_state([Condition(params, population)], replicates, seed)
    return _execute(out, config, state)


def _execute(out: Path, config: dict[str, Any], state: Any | None) -> dict[str, Any]:
    params = CPRParams(**config["params"])
    phases = phases_for(params)
    t0 = time.perf_counter()
    quiet = config.get("_quiet", False)
    with sqlite_saver(out / "checkpoints.sqlite") as saver:
        graph = build_cpr_graph(phases, checkpointer=saver)
        cfg = {"configurable": {"thread_id": THREAD}, "recursion_limit": params.T * (len(phases) + 1) + 10}
        if state is None:  # resume
            snap = graph.get_state(cfg)
            if not snap.values:
                raise runstore.RunDirError(f"{out} has no checkpoint to resume; start it again with 'cooplab run'")
            if snap.next:
                start = int(snap.values["round"])
                cfg["recursion_limit"] = recursion_limit(snap.values, len(phases))
            else:
                start = None
        else:
            start = 1
            cfg["recursion_limit"] = recursion_limit(state, len(phases))
        bar, update = _progress(params.T, quiet)
        try:
            if start is None:
                final = graph.get_state(cfg).values
            else:
                final = drive(graph, state, cfg, progress=update, durability="async")
        finally:
            if bar is not None:
                bar.close()
    return finish(out, config, final, time.perf_counter() - t0)


def resume_dir(out: Path, quiet: bool = False) -> dict[str, Any]:
    out = Path(out)
    if not (out / "config.json").exists():
        raise runstore.RunDirError(f"{out} is not a cooplab run directory (no config.json)")
    config = runstore.read_json(out / "config.json")
    if config.get("task") != "cpr":
        raise runstore.RunDirError(f"{out} holds a {config.get('task')!r} run; only cpr runs resume here")
    config["_quiet"] = quiet
    return _execute(out, config, None)


def finish(out: Path, config: dict[str, Any], final: dict[str, Any], seconds: float) -> dict[str, Any]:
    config = {k: v for k, v in config.items() if not k.startswith("_")}
    csv = bool(config.get("csv"))
    rounds = runstore.history_frame(final)
    runstore.write_table(rounds, out, "rounds", csv=csv)
    runstore.write_table(runstore.agents_frame(final), out, "agents", csv=csv)
    S, N = final["alive"].shape
    agent_steps = int(rounds["n_alive"].sum()) if len(rounds) else 0
    summary = {
        "task": "cpr",
        "status": "completed",
        "env": config.get("env"),
        "population": config.get("population"),
        "ablation": config.get("ablation"),
        "replicates": S,
        "n_agents": N,
        "seed": config["seed"],
        **summarize(final),
        "wall_seconds": round(seconds, 3),
        "agent_steps": agent_steps,
    }
    runstore.write_json(out / "summary.json", summary)
    try:
        from cooplab.evals.plots_cpr import run_figure

        run_figure(rounds, summary, out / "figures")
    except Exception as exc:  # a figure must never lose the computed run
        summary["figure_error"] = f"{type(exc).__name__}: {exc}"
        runstore.write_json(out / "summary.json", summary)
    return summary
