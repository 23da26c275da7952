"""Run one CPR condition into a run directory, with a SQLite checkpointer so it can resume.

Rule-based runs invoke the graph synchronously; LLM runs invoke it with ``ainvoke`` and an
:class:`~cooplab.agents.decisions.LLMService` (models, cache, ledger) in the runtime context.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections import OrderedDict
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pandas as pd
from langgraph.checkpoint.sqlite import SqliteSaver

from cooplab import runstore
from cooplab.evals.metrics import summarize
from cooplab.graphs import phases as ph
from cooplab.graphs.context import CoopContext
from cooplab.graphs.ledger import BudgetExhausted, Ledger, Rates
from cooplab.graphs.society import build_society
from cooplab.graphs.state import CPRState
from cooplab.tasks.cpr.params import ENVIRONMENTS, CPRParams, make_params
from cooplab.tasks.cpr.society import Condition, apply_ablation, build_cpr_graph, drive, init_state, phases_for, recursion_limit

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


def llm_phases(params: CPRParams) -> "OrderedDict[str, Callable]":
    """The CPR graph with LLM agents: the same phase nodes with LLM policies plugged in
    (Figs. 8-11). Social learning happens in context (peers shown in the prompts), so the
    parameter-copying ``learn`` node is not part of an LLM society."""
    from cooplab.tasks.cpr import llm_agents as la

    nodes: OrderedDict[str, Callable] = OrderedDict()
    nodes["harvest"] = ph.harvest_node(la.LLMEffortPolicy())
    if params.punishment:
        nodes["punish"] = ph.punish_node(la.LLMPunishPolicy())
    nodes["environment"] = ph.environment_node()
    if params.group_decision:
        nodes["propose"] = ph.propose_node(la.LLMProposePolicy())
        nodes["vote"] = ph.vote_node(la.LLMVotePolicy())
    return nodes


def init_llm_state(conditions, replicates: int, seed: int) -> dict[str, Any]:
    """The rule-based initial state plus what LLM agents carry: belief texts drawn from the
    template bank by type, an empty group norm, and a short memory of recent outcomes."""
    from cooplab.graphs.rng import phase_rng
    from cooplab.tasks.cpr.llm_agents import MEMORY, initial_beliefs
    from cooplab.tasks.cpr.params import agent_types

    state = init_state(conditions, replicates, seed)
    S, N = state["alive"].shape
    types = [agent_types(N, conditions[int(c)].population) for c in state["condition"]]
    beliefs = initial_beliefs(types, phase_rng(seed, 0, "beliefs"))
    state.update(
        agent_types=types,
        beliefs=beliefs,
        beliefs_initial=[list(row) for row in beliefs],
        proposal_texts=[[None] * N for _ in range(S)],
        norm_text=[None] * S,
        norm_history=[],
        h_recent=np.zeros((S, N, MEMORY)),
        effort_recent=np.zeros((S, N, MEMORY)),
        V_recent=np.zeros((S, N, MEMORY)),
        G=np.full(S, np.nan),  # LLM societies have no numeric norm: compliance is judged in language
        decisions=[],
        ledger=[],
    )
    return state


@contextmanager
def sqlite_saver(path: Path) -> Iterator[SqliteSaver]:
    conn = sqlite3.connect(str(path), check_same_thread=False)
    try:
        yield SqliteSaver(conn)
    finally:
        conn.close()


def build_service(config: dict[str, Any], entries: list[dict[str, Any]] | None = None):
    """The LLM service of a run from its config (models, cache, ledger restored from the audit trail)."""
    from cooplab.agents.cache import ResponseCache
    from cooplab.agents.decisions import LLMService
    from cooplab.agents.models import make_chat_model, parse_model_spec

    llm = config["llm"]
    models = {}
    for agent, text in llm["models"].items():
        spec = parse_model_spec(text, base_url=llm.get("base_url"), temperature=llm["temperature"], max_tokens=llm["max_tokens"])
        models[agent] = (spec, make_chat_model(spec))
    rates = Rates(Decimal(str(llm["price_in_per_1k"])), Decimal(str(llm["price_out_per_1k"])))
    ledger = Ledger(budget=None if llm.get("budget") is None else Decimal(str(llm["budget"])), default_rates=rates)
    if entries:
        ledger.restore(entries)
    cache = ResponseCache(None if llm.get("cache") in (None, "off") else llm["cache"])
    return LLMService(models=models, ledger=ledger, cache=cache, seed=int(config["seed"]), max_concurrency=int(llm["max_concurrency"]),
                      rps=llm.get("rps"))


def _progress(total: int, quiet: bool, service=None):
    if quiet:
        return None, None
    from tqdm import tqdm

    bar = tqdm(total=total, desc="rounds", unit="round", leave=False, dynamic_ncols=True, disable=None)

    def update(env_update: dict) -> None:
        rec = env_update["history"][0]
        bar.n = int(rec["round"])
        post = {"running": int(env_update["active"].sum())}
        if service is not None:
            t = service.ledger.totals()
            post.update(calls=t["calls"], tokens=t["input_tokens"] + t["output_tokens"], cost=f"${t['cost_usd_float']:.4f}")
        bar.set_postfix(post, refresh=False)
        bar.refresh()

    return bar, update


def run_to_dir(out: Path, params: CPRParams, *, population: str, replicates: int, seed: int, labels: dict[str, Any],
               csv: bool = False, quiet: bool = False, llm: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write config.json, run with checkpoints, then write tables, summary and figures."""
    config = {
        "task": "cpr",
        "agents": "llm" if llm else "rule",
        **labels,
        "population": population,
        "replicates": replicates,
        "seed": seed,
        "params": params.model_dump(),
        "llm": llm,
        "csv": csv,
        "code_version": runstore.code_version(),
        "created": runstore.now(),
    }
    runstore.write_json(out / "config.json", config)
    config["_quiet"] = quiet
    conds = [Condition(params, population)]
    state = init_llm_state(conds, replicates, seed) if llm else init_state(conds, replicates, seed)
    return _execute(out, config, state)


class RunStopped(RuntimeError):
    """A run stopped early but cleanly (model unreachable); resumable."""


class RunFailed(RuntimeError):
    """A run ended by an unexpected error: summary.json (status "failed") and error.log are in its
    directory; the message (one line) says where."""


def guarded(out: Path, config: dict[str, Any], fn: Callable[[], dict[str, Any]], write_summary: Callable[[dict[str, Any], str], None]) -> dict[str, Any]:
    """Run ``fn``; turn an unexpected exception into :class:`RunFailed` after saving its traceback
    to ``out/error.log`` and a summary.json with status "failed" (``write_summary(values, message)``
    from the last checkpoint; a minimal summary if even that fails). Clean stops, Ctrl-C and
    user-facing run-directory errors pass through unchanged."""
    try:
        return fn()
    except (RunStopped, RunFailed, runstore.RunDirError):
        raise
    except Exception as exc:  # noqa: BLE001 - the safety net
        log = runstore.save_error(out, exc)
        message = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        try:
            write_summary(_last_values(out, config), message)
        except Exception:  # noqa: BLE001 - even the state is unusable: keep the essentials
            try:
                runstore.write_json(out / "summary.json", {"task": config.get("task"), "agents": config.get("agents"), "status": "failed",
                                                           "message": message, "error_log": str(log) if log else None,
                                                           "seed": config.get("seed")})
            except Exception:  # noqa: BLE001
                pass
        where = f"the traceback is in {log}" if log else "the traceback could not be saved"
        raise RunFailed(f"the run failed ({message}); {where}; summary.json has status 'failed'; after fixing the cause, "
                        f"'cooplab resume {out}' continues from the last checkpoint") from exc


def _last_values(out: Path, config: dict[str, Any]) -> dict[str, Any]:
    """The channel values of a run's last checkpoint (no graph needed)."""
    with sqlite_saver(out / "checkpoints.sqlite") as saver:
        tup = saver.get_tuple({"configurable": {"thread_id": config.get("task", THREAD)}})
    if tup is None or not tup.checkpoint.get("channel_values"):
        raise RuntimeError("no checkpoint")
    return dict(tup.checkpoint["channel_values"])


def _execute(out: Path, config: dict[str, Any], state: Any | None) -> dict[str, Any]:
    def failed(values: dict[str, Any], message: str) -> None:
        finish(out, config, values, 0.0, status="failed", message=message)

    return guarded(out, config, lambda: _execute_unguarded(out, config, state), failed)


def _damaged(out: Path, exc: BaseException) -> runstore.RunDirError:
    return runstore.RunDirError(f"{out}/checkpoints.sqlite is damaged ({type(exc).__name__}: {' '.join(str(exc).split())[:200]}); "
                                f"the run cannot resume: {runstore.RESTART.format(out=out)}")


def load_snapshot(get: Callable[[], Any], out: Path) -> Any:
    """A graph's last checkpoint; a damaged one (it does not deserialize) is a one-line RunDirError."""
    try:
        return get()
    except Exception as exc:  # noqa: BLE001
        raise _damaged(out, exc) from None


async def aload_snapshot(get: Callable[[], Any], out: Path) -> Any:
    """:func:`load_snapshot` for a coroutine (``graph.aget_state``)."""
    try:
        return await get()
    except Exception as exc:  # noqa: BLE001
        raise _damaged(out, exc) from None


def _execute_unguarded(out: Path, config: dict[str, Any], state: Any | None) -> dict[str, Any]:
    if config.get("agents") == "llm":
        return asyncio.run(_execute_llm(out, config, state))
    params = CPRParams(**config["params"])
    phases = phases_for(params)
    t0 = time.perf_counter()
    with sqlite_saver(out / "checkpoints.sqlite") as saver:
        graph = build_cpr_graph(phases, checkpointer=saver)
        cfg: dict[str, Any] = {"configurable": {"thread_id": THREAD}}
        start, limit_state = _start(load_snapshot(lambda: graph.get_state(cfg), out) if state is None else None, state, out)
        cfg["recursion_limit"] = recursion_limit(limit_state, len(phases))
        bar, update = _progress(params.T, config.get("_quiet", False))
        try:
            final = graph.get_state(cfg).values if start is None else drive(graph, state, cfg, progress=update, durability="async")
        finally:
            if bar is not None:
                bar.close()
    return finish(out, config, final, time.perf_counter() - t0)


def _start(snap: Any, state: Any, out: Path) -> tuple[int | None, Any]:
    """(first round to run or None if the run had finished, a state to size the recursion limit)."""
    if state is not None:
        return 1, state
    if not snap.values:
        raise runstore.RunDirError(f"{out} has no checkpoint to resume; start it again with 'cooplab run'")
    return (int(snap.values["round"]) if snap.next else None), snap.values


async def _execute_llm(out: Path, config: dict[str, Any], state: Any | None) -> dict[str, Any]:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    params = CPRParams(**config["params"])
    phases = llm_phases(params)
    t0 = time.perf_counter()
    status, message = "completed", None
    async with AsyncSqliteSaver.from_conn_string(str(out / "checkpoints.sqlite")) as saver:
        graph = build_society(phases, CPRState, checkpointer=saver, name="cpr", context_schema=CoopContext)
        cfg: dict[str, Any] = {"configurable": {"thread_id": THREAD}}
        snap = await aload_snapshot(lambda: graph.aget_state(cfg), out) if state is None else None
        start, limit_state = _start(snap, state, out)
        cfg["recursion_limit"] = recursion_limit(limit_state, len(phases))
        service = build_service(config, (snap.values or {}).get("ledger") if snap is not None else None)
        bar, update = _progress(params.T, config.get("_quiet", False), service)
        try:
            if start is None:
                final = (await graph.aget_state(cfg)).values
            else:
                final = await _arun(graph, state, cfg, CoopContext(llm=service, run_dir=str(out)), update, out)
        except BaseException as exc:  # noqa: BLE001
            stop = stop_status(exc)
            if stop is None:
                raise
            status, message = stop
            final = (await graph.aget_state(cfg)).values
        finally:
            if bar is not None:
                bar.close()
            service.cache.close()
    summary = finish(out, config, final, time.perf_counter() - t0, status=status, message=message, service=service)
    if status == "stopped":
        raise RunStopped(f"{message}; the run stopped at its last checkpoint: continue with 'cooplab resume {out}'")
    return summary


def stop_status(exc: BaseException) -> tuple[str, str] | None:
    """How an LLM run ends cleanly: ("budget_exhausted" | "stopped", message), or None for an
    exception that is a real error and must propagate."""
    from cooplab.agents.decisions import ModelUnavailable

    inner = _unwrap(exc)
    if isinstance(inner, BudgetExhausted):
        return "budget_exhausted", str(inner)
    if isinstance(inner, ModelUnavailable):
        return "stopped", str(inner)
    return None


def _unwrap(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


async def _arun(graph, state, cfg, context, update, out: Path):
    try:
        from cooplab.graphs.tracing import tracing_callbacks

        cfg = {**cfg, "callbacks": tracing_callbacks(out)}
        if state is None:  # a resumed run: its trace follows the interrupted one's in traces.jsonl
            cfg["tags"] = [*cfg.get("tags", []), "resumed"]
    except ImportError:  # tracing not installed yet
        pass
    final = None
    async for mode, data in graph.astream(state, cfg, context=context, stream_mode=["updates", "values"], durability="sync"):
        if mode == "updates" and "environment" in data and update is not None:
            update(data["environment"])
        elif mode == "values":
            final = data
    return final


def resume_dir(out: Path, quiet: bool = False) -> dict[str, Any]:
    """Continue a run from its last checkpoint after checking its config.json (every value by the
    CLI's rules) and its checkpoints.sqlite (read-only): damaged files are one-line RunDirErrors."""
    out = Path(out)
    config = runstore.config_for_resume(out, "cpr", check_run_config)
    config["_quiet"] = quiet
    return _execute(out, config, None)


#: keys of config.json's "llm" (see cooplab.cli._llm_options)
LLM_CONFIG_KEYS = {"models", "base_url", "temperature", "max_tokens", "max_concurrency", "rps", "budget", "price_in_per_1k",
                   "price_out_per_1k", "cache"}


def check_llm_config(out: Path, config: dict[str, Any], n_agents: int) -> None:
    """config.json's "llm" of an LLM run, by the CLI's rules (raises OptionError)."""
    from cooplab import cli_options as co

    where = f"{out}/config.json: llm"
    llm = config.get("llm")
    co.check_llm(llm, where, LLM_CONFIG_KEYS)
    missing = sorted(LLM_CONFIG_KEYS - {"base_url", "rps", "budget"} - set(llm))
    if missing:
        raise co.OptionError(f"{where} lacks {', '.join(missing)}")
    co.check_agent_models(llm["models"], n_agents, name=lambda k: f"{where}.models[{k!r}]")
    for agent, text in llm["models"].items():
        co.check_model(text, llm.get("base_url"), f"{where}.models[{agent!r}]")
    if llm["cache"] != "off":
        co.check_cache(llm["cache"], f"{where}.cache")


def check_run_config(out: Path, config: dict[str, Any]) -> None:
    """Every value of a CPR run's config.json by the rules of the options that wrote it; a bad value
    is a one-line OptionError naming the field (``runstore.config_for_resume`` turns it into a
    RunDirError; the file is never changed)."""
    from cooplab import cli_options as co
    from cooplab.tasks.cpr.params import ParamError

    where = f"{out}/config.json"
    if config.get("population") not in ("altruistic", "selfish", "mixed"):
        raise co.OptionError(f"{where}: population must be altruistic, selfish or mixed, got {config.get('population')!r}")
    co.check(f"{where}: seed", config.get("seed"), "seed")
    co.check(f"{where}: replicates", config.get("replicates"), "replicates")
    if not isinstance(config.get("params"), dict):
        raise co.OptionError(f"{where}: params must be a JSON object, got {config.get('params')!r}")
    if not isinstance(config.get("csv", False), bool):
        raise co.OptionError(f"{where}: csv must be true or false, got {config.get('csv')!r}")
    try:
        params = make_params(**config["params"])
    except ParamError as exc:
        raise co.OptionError(f"{where}: params: {exc}") from None
    co.check_size(config["replicates"], params.N, params.T, names=("replicates", "params.N", "params.T"))
    if config["agents"] == "llm":
        check_llm_config(out, config, params.N)


def finish(out: Path, config: dict[str, Any], final: dict[str, Any], seconds: float, *, status: str = "completed",
           message: str | None = None, service=None) -> dict[str, Any]:
    config = {k: v for k, v in config.items() if not k.startswith("_")}
    csv = bool(config.get("csv"))
    final = dict(final)
    if status != "completed":  # societies still running were censored at the last completed round
        running = np.asarray(final["active"])
        last = int(final["round"]) - 1
        final["T_s"] = np.where(running & (np.asarray(final["T_s"]) == 0), max(last, 0), final["T_s"])
    rounds = runstore.history_frame(final)
    runstore.write_table(rounds, out, "rounds", csv=csv)
    runstore.write_table(runstore.agents_frame(final), out, "agents", csv=csv)
    S, N = final["alive"].shape
    agent_steps = int(rounds["n_alive"].sum()) if len(rounds) else 0
    summary = {
        "task": "cpr",
        "agents": config.get("agents", "rule"),
        "status": status,
        "env": config.get("env"),
        "population": config.get("population"),
        "ablation": config.get("ablation"),
        "replicates": S,
        "n_agents": N,
        "seed": config["seed"],
        "rounds_completed": int(final["round"]) - 1,
        **summarize(final),
        "wall_seconds": round(seconds, 3),
        "agent_steps": agent_steps,
    }
    if message:
        summary["message"] = message
    if status != "completed":
        summary["censored"] = bool(np.asarray(final["active"]).any())
    if service is not None:
        entries = [e.as_dict() for e in service.ledger.entries]
        summary["ledger"] = service.ledger.totals()
        summary["llm"] = {"cache_hits": service.cache.hits, "cache_misses": service.cache.misses}
        if entries:
            runstore.write_table(pd.DataFrame(entries), out, "ledger", csv=csv)
        if final.get("norm_history"):
            runstore.write_table(pd.DataFrame(final["norm_history"]), out, "norms_adopted", csv=csv)
        if final.get("beliefs") is not None:
            types = final.get("agent_types") or []
            init = final.get("beliefs_initial") or final["beliefs"]
            rows = [{"society": s_, "agent": i_, "type": types[s_][i_] if types else None, "initial_belief": init[s_][i_], "final_belief": b_}
                    for s_, row in enumerate(final["beliefs"]) for i_, b_ in enumerate(row)]
            runstore.write_table(pd.DataFrame(rows), out, "beliefs_final", csv=csv)
        decisions = final.get("decisions") or []
        if decisions:
            df = pd.DataFrame(decisions)
            df["parsed"] = df["parsed"].map(lambda v: None if v is None else runstore.json.dumps(v))
            runstore.write_table(df, out, "decisions", csv=csv)
            summary["decisions"] = {
                "count": len(df),
                "fallback_used": int(df["fallback_used"].sum()),
                "mean_attempts": float(df["attempts"].mean()),
            }
    runstore.write_json(out / "summary.json", summary)
    try:
        from cooplab.evals.plots_cpr import run_figure

        if len(rounds):
            run_figure(rounds, summary, out / "figures")
    except Exception as exc:  # a figure must never lose the computed run
        summary["figure_error"] = f"{type(exc).__name__}: {exc}"
        runstore.write_json(out / "summary.json", summary)
    return summary
