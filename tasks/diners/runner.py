"""Run one Diner's Dilemma condition into a run directory (the CPR runner's conventions).

Rule-based runs invoke the graph synchronously with a ``SqliteSaver``; LLM runs stream it with
an ``AsyncSqliteSaver`` and the :class:`~cooplab.agents.decisions.LLMService` (models, cache,
ledger; built by the CPR runner's ``build_service``) in the runtime context.

Run directory: ``config.json``, ``checkpoints.sqlite``, ``summary.json`` and the per-iteration
tables ``strategy_counts``, ``orders``, ``punishments``, ``utilities``, ``imitation`` (Parquet,
or CSV with ``csv=True``); LLM runs add ``decisions`` and ``ledger``; ``figures/run.png``.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cooplab import runstore
from cooplab.graphs.context import CoopContext
from cooplab.tasks.cpr.runner import RunStopped, aload_snapshot, build_service, guarded, load_snapshot, sqlite_saver, stop_status
from cooplab.tasks.diners import model as dm
from cooplab.tasks.diners.society import Condition, build_diners_graph, init_state, recursion_limit

THREAD = "diners"


# --- tables --------------------------------------------------------------------------------
def _meta(final: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    return np.asarray(final["condition"]), np.asarray(final["replicate"])


def strategy_counts(final: dict[str, Any], initial: np.ndarray) -> pd.DataFrame:
    """One row per (society, iteration t): strategy counts after iteration t's update (t = 0:
    the initial composition)."""
    cond, rep = _meta(final)
    S, N = initial.shape
    frames = []
    for t, strat in [(0, initial)] + [(int(h["round"]), h["strategy"]) for h in final.get("history") or []]:
        d = {"condition": cond, "replicate": rep, "iteration": np.full(S, t)}
        for c, name in enumerate(dm.STRATEGIES):
            d[name] = (strat == c).sum(axis=1)
        frames.append(pd.DataFrame(d))
    df = pd.concat(frames, ignore_index=True)
    return df.sort_values(["condition", "replicate", "iteration"], kind="stable").reset_index(drop=True)


def per_agent_tables(final: dict[str, Any]) -> dict[str, pd.DataFrame]:
    cond, rep = _meta(final)
    S, N = np.asarray(final["strategy"]).shape
    orders, utils, imit, pun = [], [], [], []
    names = np.array(dm.STRATEGIES)
    for h in final.get("history") or []:
        t = int(h["round"])
        base = {"condition": np.repeat(cond, N), "replicate": np.repeat(rep, N), "iteration": t, "agent": np.tile(np.arange(N), S),
                "group": np.asarray(final["group"]).ravel(), "strategy": names[h["strategy_played"]].ravel()}
        orders.append(pd.DataFrame({**base, "venue": np.array(dm.VENUES)[h["venue"] % len(dm.VENUES)].ravel(),
                                    "order": np.where(h["defect"], "premium", "budget").ravel()}))
        given = h["punish1"].sum(axis=2) + h["punish2"].sum(axis=2)
        received = h["punish1"].sum(axis=1) + h["punish2"].sum(axis=1)
        utils.append(pd.DataFrame({**base, "meal_utility": h["meal"].ravel(), "punishments_given": given.ravel(),
                                   "punishments_received": received.ravel(), "utility": h["utility"].ravel(), "score": h["score"].ravel()}))
        if "imitation_role" in h:
            role = h["imitation_role"]
            rr = np.where(role >= 0, role, 0)
            imit.append(pd.DataFrame({**base, "role_model": role.ravel(),
                                      "role_strategy": names[np.take_along_axis(h["strategy_played"], rr, axis=1)].ravel(),
                                      "probability": h["imitation_prob"].ravel(), "adopted": h["imitation_adopt"].ravel(),
                                      "new_strategy": names[h["strategy"]].ravel(), "changed": h["imitation_changed"].ravel()}))
        for stage, key in ((1, "punish1"), (2, "punish2")):
            s_, i_, j_ = np.nonzero(h[key])
            played = h["strategy_played"]
            pun.append(pd.DataFrame({"condition": cond[s_], "replicate": rep[s_], "iteration": t, "stage": stage,
                                     "punisher": i_, "target": j_, "punisher_strategy": names[played[s_, i_]],
                                     "target_strategy": names[played[s_, j_]]}))

    def cat(xs: list[pd.DataFrame]) -> pd.DataFrame:
        return pd.concat(xs, ignore_index=True) if xs else pd.DataFrame()

    return {"orders": cat(orders), "utilities": cat(utils), "imitation": cat(imit), "punishments": cat(pun)}


def share_summary(counts: pd.DataFrame) -> dict[str, Any]:
    """Strategy shares per iteration and at the end, mean over replicates (and their s.d.)."""
    n = counts[list(dm.STRATEGIES)].sum(axis=1)
    shares = counts[list(dm.STRATEGIES)].div(n, axis=0).assign(condition=counts["condition"], iteration=counts["iteration"])
    last = shares[shares["iteration"] == shares["iteration"].max()]
    mean = shares.groupby("iteration")[list(dm.STRATEGIES)].mean()
    return {
        "final_shares": {k: float(v) for k, v in last[list(dm.STRATEGIES)].mean().items()},
        "final_shares_sd": {k: float(v) for k, v in last[list(dm.STRATEGIES)].std(ddof=1).fillna(0.0).items()},
        "shares_by_iteration": {int(t): {k: round(float(v), 6) for k, v in row.items()} for t, row in mean.iterrows()},
    }


# --- running -------------------------------------------------------------------------------
def init_llm_state(cond: Condition, replicates: int, seed: int, iterations: int) -> dict[str, Any]:
    state = init_state([cond], replicates, seed, iterations)
    S, N = state["strategy"].shape
    state.update(personas=[list(range(N)) for _ in range(S)], decisions=[], ledger=[])
    return state


def run_to_dir(out: Path, cond: Condition, *, replicates: int, seed: int, iterations: int, labels: dict[str, Any],
               csv: bool = False, quiet: bool = True, llm: dict[str, Any] | None = None) -> dict[str, Any]:
    config = {
        "task": "diners", "agents": "llm" if llm else "rule", **labels,
        "groups": [list(g) for g in cond.groups], "p": cond.p, "k": cond.k, "costs_stated": cond.stated, "beta": cond.beta,
        "accumulate": cond.accumulate, "meal": cond.meal, "iterations": iterations, "replicates": replicates, "seed": seed,
        "llm": llm, "csv": csv, "code_version": runstore.code_version(), "created": runstore.now(),
    }
    runstore.write_json(out / "config.json", config)
    state = init_llm_state(cond, replicates, seed, iterations) if llm else init_state([cond], replicates, seed, iterations)
    return _execute(out, config, state, state["strategy"].copy(), quiet)


def _execute(out: Path, config: dict[str, Any], state: dict[str, Any] | None, initial: np.ndarray, quiet: bool) -> dict[str, Any]:
    """Run (``state``) or resume (``state=None``) with the safety net of the CPR runner."""
    def failed(values: dict[str, Any], message: str) -> None:
        finish(out, config, values, initial, 0.0, status="failed", message=message)

    return guarded(out, config, lambda: _execute_unguarded(out, config, state, initial, quiet), failed)


def _execute_unguarded(out: Path, config: dict[str, Any], state: dict[str, Any] | None, initial: np.ndarray, quiet: bool) -> dict[str, Any]:
    if config.get("agents") == "llm":
        return asyncio.run(_execute_llm(out, config, state, initial, quiet))
    t0 = time.perf_counter()
    with sqlite_saver(out / "checkpoints.sqlite") as saver:
        graph = build_diners_graph(checkpointer=saver)
        cfg: dict[str, Any] = {"configurable": {"thread_id": THREAD}}
        if state is None:
            snap = load_snapshot(lambda: graph.get_state(cfg), out)
            _check_snapshot(snap, out)
            cfg["recursion_limit"] = recursion_limit(snap.values)
            final = graph.invoke(None, cfg, durability="async") if snap.next else snap.values
        else:
            cfg["recursion_limit"] = recursion_limit(state)
            final = graph.invoke(state, cfg, durability="async")
    return finish(out, config, final, initial, time.perf_counter() - t0)


def _check_snapshot(snap: Any, out: Path) -> None:
    if not snap.values or "max_round" not in snap.values:
        raise runstore.RunDirError(f"{out} has no checkpoint to resume; {runstore.RESTART.format(out=out)}")


async def _execute_llm(out: Path, config: dict[str, Any], state: dict[str, Any] | None, initial: np.ndarray, quiet: bool) -> dict[str, Any]:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    from cooplab.tasks.diners.llm_agents import llm_phases

    t0 = time.perf_counter()
    status, message = "completed", None
    async with AsyncSqliteSaver.from_conn_string(str(out / "checkpoints.sqlite")) as saver:
        graph = build_diners_graph(llm_phases(), checkpointer=saver)
        cfg: dict[str, Any] = {"configurable": {"thread_id": THREAD}}
        snap = None
        if state is None:  # resume: continue from the last checkpoint (None input), ledger restored
            snap = await aload_snapshot(lambda: graph.aget_state(cfg), out)
            _check_snapshot(snap, out)
        cfg["recursion_limit"] = recursion_limit(state if state is not None else snap.values)
        try:
            from cooplab.graphs.tracing import tracing_callbacks

            cfg["callbacks"] = tracing_callbacks(out)
            if state is None:  # a resumed run: its trace follows the interrupted one's in traces.jsonl
                cfg["tags"] = ["resumed"]
        except ImportError:  # pragma: no cover
            pass
        service = build_service(config, snap.values.get("ledger") if snap is not None else None)
        bar = None
        if not quiet:
            from tqdm import tqdm

            start = state if state is not None else snap.values
            bar = tqdm(total=int(start["max_round"]), initial=int(start["round"]) - 1, desc="iterations", unit="it", leave=False, disable=None)
        final = None
        try:
            if state is None and not snap.next:  # the run had finished
                final = snap.values
            else:
                async for mode, data in graph.astream(state, cfg, context=CoopContext(llm=service, run_dir=str(out)),
                                                      stream_mode=["updates", "values"], durability="sync"):
                    if mode == "values":
                        final = data
                    elif bar is not None and "swap" in data:
                        bar.update(1)
        except BaseException as exc:  # noqa: BLE001
            stop = stop_status(exc)
            if stop is None:
                raise
            status, message = stop
            final = (await graph.aget_state({"configurable": {"thread_id": THREAD}})).values
        finally:
            if bar is not None:
                bar.close()
            service.cache.close()
    summary = finish(out, config, final, initial, time.perf_counter() - t0, status=status, message=message, service=service)
    if status == "stopped":
        raise RunStopped(f"{message}; the run stopped at its last checkpoint: continue with 'cooplab resume {out}'")
    return summary


def condition_of(config: dict[str, Any]) -> Condition:
    """The condition a run's config.json records."""
    return Condition(tuple(tuple(g) for g in config["groups"]), float(config["p"]), float(config["k"]), bool(config["costs_stated"]),
                     float(config["beta"]), accumulate=bool(config.get("accumulate", True)),
                     meal={k: float(v) for k, v in (config.get("meal") or dm.MEAL).items()})


def resume_dir(out: Path, quiet: bool = True) -> dict[str, Any]:
    """Continue a diners run from its last checkpoint (no iteration lost or repeated), after checking
    its config.json and checkpoints.sqlite (damaged files are one-line RunDirErrors)."""
    out = Path(out)
    config = runstore.config_for_resume(out, "diners", check_run_config)
    initial = init_state([condition_of(config)], int(config["replicates"]), int(config["seed"]), int(config["iterations"]))["strategy"]
    return _execute(out, config, None, initial.copy(), quiet)


def check_run_config(out: Path, config: dict[str, Any]) -> None:
    """Every value of a diners run's config.json by the rules of the options that wrote it (a one-line
    OptionError naming the field, see ``runstore.config_for_resume``; the file is never changed)."""
    from cooplab import cli_options as co
    from cooplab.tasks.cpr.runner import check_llm_config

    where = f"{out}/config.json"
    for key, rule in (("seed", "seed"), ("replicates", "replicates"), ("iterations", "iterations"), ("beta", "beta")):
        co.check(f"{where}: {key}", config.get(key), rule)
    for key in ("p", "k"):
        co.check(f"{where}: {key}", config.get(key), co.Num(float, 0, co.MAX_PARAM, hint="punishment cost"))
    for key in ("costs_stated", "accumulate", "csv"):
        if not isinstance(config.get(key, False), bool):
            raise co.OptionError(f"{where}: {key} must be true or false, got {config.get(key)!r}")
    groups = config.get("groups")
    if not isinstance(groups, list) or not all(isinstance(g, list) and all(isinstance(x, str) for x in g) for g in groups):
        raise co.OptionError(f"{where}: groups must be a list of lists of strategy codes ({', '.join(dm.STRATEGIES)}), got {groups!r}")
    meal = config.get("meal", dm.MEAL)
    if not isinstance(meal, dict) or set(meal) != set(dm.MEAL):
        raise co.OptionError(f"{where}: meal must be an object with {', '.join(dm.MEAL)}, got {meal!r}")
    for key, v in meal.items():
        co.check(f"{where}: meal.{key}", v, co.Num(float, 0, co.MAX_PARAM))
    try:
        dm.parse_groups(";".join(",".join(g) for g in groups))
        cond = condition_of(config)
        cond.validate()
    except dm.DinersError as exc:
        raise co.OptionError(f"{where}: {exc}") from None
    co.check_size(config["replicates"], cond.n_agents, config["iterations"], names=("replicates", "diners", "iterations"), diners=True)
    if config["agents"] == "llm":
        check_llm_config(out, config, cond.n_agents)


def finish(out: Path, config: dict[str, Any], final: dict[str, Any], initial: np.ndarray, seconds: float, *,
           status: str = "completed", message: str | None = None, service=None) -> dict[str, Any]:
    csv = bool(config.get("csv"))
    counts = strategy_counts(final, initial)
    runstore.write_table(counts, out, "strategy_counts", csv=csv)
    for stem, df in per_agent_tables(final).items():
        runstore.write_table(df, out, stem, csv=csv)
    S, N = np.asarray(final["strategy"]).shape
    summary: dict[str, Any] = {
        "task": "diners", "agents": config["agents"], "status": status, "combination": config.get("combination"),
        "groups": config["groups"], "pk": config.get("pk"), "p": config["p"], "k": config["k"], "costs_stated": config["costs_stated"],
        "beta": config["beta"], "replicates": S, "n_agents": N, "seed": config["seed"],
        "iterations_completed": len(final.get("history") or []),
        **share_summary(counts), "wall_seconds": round(seconds, 3),
    }
    if message:
        summary["message"] = message
    if service is not None:
        from cooplab.tasks.diners.llm_agents import accuracy

        decisions = final.get("decisions") or []
        summary.update(accuracy(decisions))
        summary["ledger"] = service.ledger.totals()
        summary["llm"] = {"cache_hits": service.cache.hits, "cache_misses": service.cache.misses}
        entries = [e.as_dict() for e in service.ledger.entries]
        if entries:
            runstore.write_table(pd.DataFrame(entries), out, "ledger", csv=csv)
        if decisions:
            df = pd.DataFrame(decisions)
            df["parsed"] = df["parsed"].map(lambda v: None if v is None else runstore.json.dumps(v))
            runstore.write_table(df, out, "decisions", csv=csv)
            summary["decisions"] = {"count": len(df), "fallback_used": int(df["fallback_used"].sum()),
                                    "mean_attempts": float(df["attempts"].mean())}
    runstore.write_json(out / "summary.json", summary)
    try:
        from cooplab.tasks.diners.figures import run_figure

        run_figure(counts, summary, out / "figures")
    except Exception as exc:  # a figure must never lose the computed run
        summary["figure_error"] = f"{type(exc).__name__}: {exc}"
        runstore.write_json(out / "summary.json", summary)
    return summary
