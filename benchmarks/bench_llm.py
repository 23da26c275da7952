"""Benchmark: the LLM agent layer (orchestration overhead, concurrency, cache replay, local model).

    .venv/bin/python benchmarks/bench_llm.py            # full run (~2-3 min), writes "## LLM agent layer" in
    benchmarks/RESULTS.md
    .venv/bin/python benchmarks/bench_llm.py --quick    # smoke run; writes nothing unless --out is given

Society: the real LLM CPR society of ``runner.llm_phases`` (harvest, punish, environment,
propose, vote; every phase but environment asks the agents' models), started from
``runner.init_llm_state``, compiled with ``build_society(..., context_schema=CoopContext)``
and driven like ``runner._arun``: ``astream(state, cfg, context=CoopContext(llm=service),
stream_mode=["updates", "values"], durability="sync")`` (without the JSONL tracer). The
scripted model answers every phase validly: effort 0.3, fine nobody, one of 3 distinct
proposals (so votes happen), vote 1. Parameters are scaled with N so a society survives the
benchmark's rounds (K = R0 = 100 N, alpha = 1 / N: the group takes 30% of the stock per round).

(a) Orchestration overhead per decision: zero-latency scripted model, one society of N = 10,
    100, 1000 agents, a few rounds, cache off, max_concurrency 1000. cooplab = the graph above
    with an InMemorySaver. Floor = a plain asyncio loop making the same model calls (the very
    prompts the graph built, captured in a first run) with ``await model.ainvoke(messages)``,
    one ``asyncio.gather`` per (round, phase) as the graph does. Breakdown: ``decide`` alone over
    the same prompts (same gathers), the LLM nodes' time inside the graph (prompt building +
    decisions + applying them), the rest (LangGraph, checkpoints, the environment node).
(b) Scripted model with a fixed 100 ms latency, N = 50, max_concurrency 50: each round's wall time
    divided by (LLM phases that called the model in that round x 100 ms); target <= 1.3.
    For the full society and for a harvest-only one (punishment and group decision off).
(c) Cached replay: the same config run twice against one ResponseCache on a temp SQLite file
    (20 ms scripted latency, N = 20); the replay must make zero model calls.
(d) The real local model (SmolLM2-135M-Instruct via ``LlamaCppChat``, ``parse_model_spec("local")``):
    EFFORT decisions with ``effort_messages`` prompts from a real society state (round 4), one at a
    time (one model process serves calls in turn, so concurrency would not help). Since issue 9 the
    model runs in a child process (``cooplab.agents.local_model``); ``bench_local_build.py``
    compares that path and the build configurations with the old in-process one.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import inspect
import io
import json
import os
import pstats
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime, timezone
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.runtime import Runtime

import cooplab.agents.batch as batch_mod
import cooplab.tasks.cpr.llm as la
from cooplab.agents.cache import ResponseCache
from cooplab.agents.decisions import DecisionSpec, LLMService, decide
from cooplab.agents.models import (
    LlamaCppChat,
    ModelSpec,
    ScriptedChatModel,
    make_chat_model,
    parse_model_spec,
)
from cooplab.graphs.checkpoint_serde import CheckpointSerializer
from cooplab.graphs.context import CoopContext
from cooplab.graphs.ledger import Ledger
from cooplab.graphs.society import build_society
from cooplab.tasks.cpr import task as runner
from cooplab.tasks.cpr.params import make_params
from cooplab.tasks.cpr.society import Condition, init_state, recursion_limit
from cooplab.tasks.cpr.state import CPRState

HERE = Path(__file__).resolve().parent
SECTION = "## LLM agent layer"
SEED = 7
ANSWER = '{"effort": 0.3}'
BY_PHASE = {
    "harvest": [ANSWER],
    "punish": ['{"punish": null}'],
    "propose": [
        json.dumps({"belief": "Everyone should fish moderately so the lake recovers.", "proposal": p})
        for p in (
            "Nobody should fish with effort above 0.3.",
            "Each fisher should catch at most 30 tonnes per round.",
            "Fish less when the lake holds less than half its fish.",
        )
    ],
    "vote": ['{"vote": 1}'],
}
SPECS: dict[str, DecisionSpec] = {v.phase: v for v in vars(la).values() if isinstance(v, DecisionSpec)}


# ------------------------------------------------------------------------------------------
# the society under test
# ------------------------------------------------------------------------------------------
def bench_params(N: int, T: int, harvest_only: bool = False):
    extra = {"punishment": False, "group_decision": False} if harvest_only else {}
    return make_params(N=N, T=T, K=100.0 * N, R0=100.0 * N, alpha=1.0 / N, **extra)


def initial_state(params):
    conds = [Condition(params, "mixed")]
    init = getattr(runner, "init_llm_state", None)
    return init(conds, 1, SEED) if init is not None else init_state(conds, 1, SEED)


def scripted_model(latency: float = 0.0) -> ScriptedChatModel:
    return ScriptedChatModel(answers=[ANSWER], by_phase=BY_PHASE, latency=latency)


def scripted_service(
    latency: float = 0.0, cache: ResponseCache | None = None, max_concurrency: int = 1000
) -> LLMService:
    spec = ModelSpec("scripted", f"bench-latency-{latency}", max_tokens=64)
    return LLMService(
        models={"default": (spec, scripted_model(latency))},
        ledger=Ledger(),
        cache=cache or ResponseCache(None),
        seed=SEED,
        max_concurrency=max_concurrency,
    )


def timed(fn, name: str, sink: list):
    """An async node with the same (state, runtime, config) signature, recording (name, start, end)."""

    async def node(state, runtime: Runtime, config: RunnableConfig):
        t0 = time.perf_counter()
        try:
            return await fn(state, runtime, config)
        finally:
            sink.append((name, t0, time.perf_counter()))

    node.__name__ = name
    return node


async def run_graph(
    N: int, rounds: int, service: LLMService, *, checkpointer: bool = True, harvest_only: bool = False
) -> dict[str, Any]:
    """One LLM society through the real graph; returns timings and the final state."""
    params = bench_params(N, rounds, harvest_only)
    phases = runner.llm_phases(params)
    llm_nodes = [n for n, fn in phases.items() if inspect.iscoroutinefunction(fn)]
    spans: list[tuple[str, float, float]] = []
    for n in llm_nodes:
        phases[n] = timed(phases[n], n, spans)
    last = list(phases)[-1]
    t_c = time.perf_counter()
    saver = InMemorySaver(serde=CheckpointSerializer()) if checkpointer else None  # the runner's serializer
    graph = build_society(phases, CPRState, checkpointer=saver, name="cpr", context_schema=CoopContext)
    compile_s = time.perf_counter() - t_c
    t0 = time.perf_counter()
    state = initial_state(params)
    cfg: RunnableConfig = {
        "configurable": {"thread_id": "bench"},
        "recursion_limit": recursion_limit(state, len(phases)),
    }
    kw: dict[str, Any] = {"durability": "sync"} if checkpointer else {}
    marks = [t0]
    final = None
    async for mode, data in graph.astream(
        state, cfg, context=CoopContext(llm=service), stream_mode=["updates", "values"], **kw
    ):
        if mode == "updates" and last in data:
            marks.append(time.perf_counter())
        elif mode == "values":
            assert isinstance(data, dict)  # a "values" chunk is the whole state
            final = data
    wall = time.perf_counter() - t0
    assert final is not None, "the graph streamed no state"
    n_r = len(marks) - 1
    llm_round = [sum(e - s for _n, s, e in spans if marks[j] < e <= marks[j + 1]) for j in range(n_r)]
    tot = service.ledger.totals()
    decisions = final.get("decisions") or []
    phases_by_round: dict[int, set] = {}
    for e in service.ledger.entries:
        assert e.round is not None  # every call of a society round names its round
        phases_by_round.setdefault(int(e.round), set()).add(e.phase)
    return {
        "wall": wall,
        "compile": compile_s,
        "llm_nodes": sum(llm_round),
        "llm_round": llm_round,
        "marks": marks,
        "calls": tot["calls"],
        "cached_calls": tot["cached_calls"],
        "decisions": len(decisions),
        "rounds": int(final["round"]) - 1,
        "final": final,
        "llm_node_names": llm_nodes,
        "k_round": [len(phases_by_round.get(r, ())) for r in range(1, n_r + 1)],
        "fallbacks": sum(bool(d["fallback_used"]) for d in decisions),
        "by_phase": Counter(d["phase"] for d in decisions),
    }


# ------------------------------------------------------------------------------------------
# (a) orchestration overhead
# ------------------------------------------------------------------------------------------
async def capture_calls(N: int, rounds: int) -> list[tuple[str, list]]:
    """Run the graph once (also a warm-up), recording every decide() call, grouped per
    (round, phase) in call order: the groups the graph gathers concurrently.

    The LLM policies (``la.LLM*Policy``) do not call ``decide`` themselves: they hand their jobs to
    ``Batch.ask`` -> ``cooplab.agents.batch.decide_all``, which gathers one ``decide`` per job. So
    the name to intercept is ``decide`` in the module of ``decide_all``."""
    real = batch_mod.decide
    groups: dict[tuple[int, str], list] = {}

    async def recording_decide(service, spec, messages, *, society, agent, round, ctx=None, config=None):
        groups.setdefault((round, spec.phase), []).append((society, agent, round, messages, ctx))
        return await real(service, spec, messages, society=society, agent=agent, round=round, ctx=ctx, config=config)

    batch_mod.decide = recording_decide
    try:
        await run_graph(N, rounds, scripted_service())
    finally:
        batch_mod.decide = real
    if not groups:
        raise RuntimeError(
            "no decide() call was recorded: the LLM policies no longer reach decide through "
            "cooplab.agents.batch; update capture_calls"
        )
    return [(phase, calls) for (_r, phase), calls in groups.items()]


async def floor_loop(groups, model) -> float:
    t0 = time.perf_counter()
    for phase, calls in groups:
        # phase= selects the scripted answer, as LLMService.call does; it costs nothing
        await asyncio.gather(*(model.ainvoke(msgs, phase=phase) for (_s, _i, _r, msgs, _c) in calls))
    return time.perf_counter() - t0


async def decide_loop(groups, service: LLMService) -> float:
    t0 = time.perf_counter()
    for phase, calls in groups:
        spec = SPECS[phase]
        await asyncio.gather(
            *(decide(service, spec, msgs, society=s, agent=i, round=r, ctx=c) for (s, i, r, msgs, c) in calls)
        )
    return time.perf_counter() - t0


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def fmt_t(s: float) -> str:
    if s != s:
        return "n/a"
    if abs(s) >= 1:
        return f"{s:.2f} s"
    if abs(s) >= 1e-3:
        return f"{s * 1e3:.1f} ms"
    return f"{s * 1e6:.0f} us"


async def bench_overhead(plan: list[tuple[int, int, int]], nock_max_n: int = 100) -> list[dict[str, Any]]:
    out = []
    for N, rounds, reps in plan:
        groups = await capture_calls(N, rounds)
        n_calls = sum(len(c) for _p, c in groups)
        g_wall, g_llm, fl, dl, comp = [], [], [], [], []
        r: dict[str, Any] = {}
        for _ in range(reps):
            gc.collect()
            r = await run_graph(N, rounds, scripted_service())
            assert r["calls"] == n_calls == r["decisions"], (r["calls"], n_calls, r["decisions"])
            assert r["fallbacks"] == 0, r["fallbacks"]
            g_wall.append(r["wall"])
            g_llm.append(r["llm_nodes"])
            comp.append(r["compile"])
            gc.collect()
            fl.append(await floor_loop(groups, scripted_model()))
            gc.collect()
            dl.append(await decide_loop(groups, scripted_service()))
        gc.collect()
        # no-checkpointer run (info; skipped for large N where checkpoints are a negligible share)
        nock = (
            (await run_graph(N, rounds, scripted_service(), checkpointer=False))["wall"]
            if N <= nock_max_n
            else float("nan")
        )
        row = {
            "N": N,
            "rounds": r["rounds"],
            "decisions": n_calls,
            "repeats": reps,
            "by_phase": dict(r["by_phase"]),
            "graph": med(g_wall) / n_calls,
            "floor": med(fl) / n_calls,
            "decide": med(dl) / n_calls,
            "llm": med(g_llm) / n_calls,
            "nock": nock / n_calls,
            "compile": med(comp),
            "graph_runs": g_wall,
            "floor_runs": fl,
            "decide_runs": dl,
        }
        row["ratio"] = row["graph"] / row["floor"]
        out.append(row)
        print(
            f"  (a) N={N}: {n_calls} decisions {row['by_phase']}, cooplab {fmt_t(row['graph'])}/decision, floor "
            f"{fmt_t(row['floor'])}, "
            f"decide {fmt_t(row['decide'])}, LLM nodes {fmt_t(row['llm'])}, ratio {row['ratio']:.2f}x",
            flush=True,
        )
    return out


PROFILE_GROUPS = [  # (label, file part, function names): cumulative time in the profiled graph runs
    ("checkpoints: `InMemorySaver.put` (one per superstep)", "memory/__init__.py", ("put",)),
    ("checkpoints: `InMemorySaver.put_writes`", "memory/__init__.py", ("put_writes",)),
    (
        "checkpoint serialization: `JsonPlusSerializer.dumps_typed` (inside the two rows above)",
        "jsonplus.py",
        ("dumps_typed",),
    ),
    ("- `_msgpack_default` (called once per numpy array / non-native value)", "jsonplus.py", ("_msgpack_default",)),
    (
        "- typing-Protocol `isinstance` checks (`isinstance(obj, SendProtocol)` in `_msgpack_default`)",
        "typing.py",
        ("__instancecheck__",),
    ),
    (
        "`inspect.signature` (mostly LangChain, per model call: `_signature_parameters(self._agenerate)`)",
        "inspect.py",
        ("signature",),
    ),
    ("graph compilation (`build_society`, 1 per run)", "graphs/society.py", ("build_society",)),
    ("LLM policy bodies (`LLM*Policy.__call__`, excl. the gathered `decide` tasks)", "tasks/cpr/llm.py", ("__call__",)),
    (
        "- prompt building (`effort/punish/propose/vote_messages`)",
        "tasks/cpr/llm.py",
        ("effort_messages", "punish_messages", "propose_messages", "vote_messages"),
    ),
    ("- `dataclasses.asdict` (decision + ledger rows)", "dataclasses.py", ("asdict",)),
    ("`decide` (all tasks)", "decisions.py", ("decide",)),
    ("- `LLMService.call`", "decisions.py", ("call",)),
    (
        "- `DecisionSpec.schema.model_json_schema()` (computed once per spec, kept by `DecisionSpec.json_schema`)",
        "pydantic/main.py",
        ("model_json_schema",),
    ),
    ("- `BaseChatModel.ainvoke` (the model call itself, incl. LangChain callbacks)", "chat_models.py", ("ainvoke",)),
    (
        "- `messages_tokens` (regex token count; `decide` estimate + scripted model usage)",
        "agents/usage.py",
        ("messages_tokens",),
    ),
    ("- `cache_key` (JSON + SHA-256)", "agents/cache.py", ("cache_key",)),
]


def profile_graph(N: int, rounds: int, runs: int = 5, top: int = 12) -> dict[str, Any]:
    """cProfile ``runs`` graph runs: cumulative time by component and the top functions by self time."""
    pr = cProfile.Profile()

    async def go():
        await run_graph(N, rounds, scripted_service())  # warm
        t0 = time.perf_counter()
        pr.enable()
        for _ in range(runs):
            r = await run_graph(N, rounds, scripted_service())
        pr.disable()
        return r, time.perf_counter() - t0

    r, wall = asyncio.run(go())
    st = pstats.Stats(pr)
    groups = []
    for label, file_part, names in PROFILE_GROUPS:
        groups.append((label, sum(v[3] for (f, _l, name), v in st.stats.items() if name in names and file_part in f)))  # pyright: ignore[reportAttributeAccessIssue]  # pstats' table (not in typeshed)
    buf = io.StringIO()
    pstats.Stats(pr, stream=buf).sort_stats("tottime").print_stats(top)
    lines = [ln for ln in buf.getvalue().splitlines() if re.match(r"\s*[0-9/]+\s+[0-9.]+", ln)]
    lines = [re.sub(r"\S*/site-packages/|\S*/python3\.11/|/work/main/", "", ln) for ln in lines]
    return {
        "N": N,
        "rounds": rounds,
        "runs": runs,
        "decisions": r["calls"] * runs,
        "wall": wall,
        "groups": groups,
        "top": lines,
    }


# ------------------------------------------------------------------------------------------
# (b) concurrency with 100 ms latency
# ------------------------------------------------------------------------------------------
async def bench_latency(
    N: int, rounds: int, latency: float, max_concurrency: int, runs: int, harvest_only: bool
) -> dict[str, Any]:
    """``runs`` independent runs of ``rounds`` rounds; per-round wall time / (k_round x latency)."""
    per_run = []
    for _ in range(runs):
        gc.collect()
        r = await run_graph(
            N, rounds, scripted_service(latency=latency, max_concurrency=max_concurrency), harvest_only=harvest_only
        )
        assert r["fallbacks"] == 0
        walls = [b - a for a, b in zip(r["marks"], r["marks"][1:], strict=False)]
        per_run.append(
            {
                "walls": walls,
                "llm": r["llm_round"],
                "k": r["k_round"],
                "calls": r["calls"],
                "rounds": r["rounds"],
                "nodes": r["llm_node_names"],
            }
        )
    n_r = min(len(x["walls"]) for x in per_run)
    rows = []
    for j in range(n_r):
        k = per_run[0]["k"][j]
        assert all(x["k"][j] == k for x in per_run)
        w = statistics.mean(x["walls"][j] for x in per_run)
        rows.append(
            {
                "round": j + 1,
                "k": k,
                "wall": w,
                "llm": statistics.mean(x["llm"][j] for x in per_run),
                "ratio": w / (k * latency),
            }
        )
    all_ratios = [x["walls"][j] / (x["k"][j] * latency) for x in per_run for j in range(n_r)]
    run_means = [statistics.mean(x["walls"][j] / (x["k"][j] * latency) for j in range(n_r)) for x in per_run]
    return {
        "N": N,
        "rounds": n_r,
        "runs": runs,
        "latency": latency,
        "max_concurrency": max_concurrency,
        "harvest_only": harvest_only,
        "nodes": per_run[0]["nodes"],
        "rows": rows,
        "mean_ratio": statistics.mean(all_ratios),
        "min_ratio": min(all_ratios),
        "max_ratio": max(all_ratios),
        "run_means": run_means,
        "calls": sum(x["calls"] for x in per_run),
    }


# ------------------------------------------------------------------------------------------
# (c) cached replay
# ------------------------------------------------------------------------------------------
async def bench_replay(N: int, rounds: int, latency: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "cache.sqlite"
        res = []
        for _ in range(2):
            cache = ResponseCache(path)
            svc = scripted_service(latency=latency, cache=cache)
            model = svc.models["default"][1]
            assert isinstance(model, ScriptedChatModel)
            r = await run_graph(N, rounds, svc)
            tot = svc.ledger.totals()
            fin = r["final"]
            res.append(
                {
                    "wall": r["wall"],
                    "calls": tot["calls"],
                    "cached_calls": tot["cached_calls"],
                    "hits": cache.hits,
                    "misses": cache.misses,
                    "model_calls": sum(model._counters.values()),
                    "outcome": (
                        fin["T_s"].tolist(),
                        fin["effort"].tolist(),
                        fin["P"].tolist(),
                        list(fin.get("norm_text") or []),
                    ),
                }
            )
            cache.close()
    first, replay = res
    assert first["cached_calls"] == 0 and first["model_calls"] == first["calls"] > 0, first
    assert replay["cached_calls"] == replay["calls"] == first["calls"], replay
    assert replay["model_calls"] == 0, replay
    assert replay["outcome"] == first["outcome"]
    return {
        "N": N,
        "rounds": rounds,
        "latency": latency,
        "first": first,
        "replay": replay,
        "ratio": replay["wall"] / first["wall"],
    }


# ------------------------------------------------------------------------------------------
# (d) the local model
# ------------------------------------------------------------------------------------------
async def bench_local(n_decisions: int) -> dict[str, Any]:
    spec = parse_model_spec("local")
    model = make_chat_model(spec)
    assert isinstance(model, LlamaCppChat)
    from cooplab.agents.local_model import get_local_model

    # the model runs in its own process (cooplab.agents.local_model); start it and load the model
    # before timing, so the load is reported apart from the decisions
    proc = get_local_model(model.model_path, model.n_ctx, model.n_threads)
    t0 = time.perf_counter()
    proc.chat({"messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 1, "temperature": 0.0, "seed": 0})
    load_s = float(proc.meta.get("load_s", time.perf_counter() - t0))
    # realistic prompts: a 10-agent society's state after 3 rounds (scripted model), peers shown
    state = (await run_graph(10, 4, scripted_service()))["final"]
    state = {**state, "round": 4, "active": np.ones_like(state["active"])}  # as seen by round 4's harvest
    rng = np.random.default_rng(SEED)
    jobs = []
    for k in range(n_decisions):
        i = k % 10
        peers = sorted(rng.choice([j for j in range(10) if j != i], size=3, replace=False).tolist())
        jobs.append((i, la.effort_messages(state, 0, i, peers), {"previous_effort": float(state["effort"][0, i])}))
    svc = LLMService(
        models={"default": (spec, model)}, ledger=Ledger(), cache=ResponseCache(None), seed=SEED, max_concurrency=1
    )
    recs = []
    t0 = time.perf_counter()
    for i, msgs, ctx in jobs:
        t1 = time.perf_counter()
        _value, rec = await decide(svc, la.EFFORT, msgs, society=0, agent=i, round=4, ctx=ctx)
        recs.append((time.perf_counter() - t1, rec))
    wall = time.perf_counter() - t0
    tot = svc.ledger.totals()
    lat = [x for x, _ in recs]
    return {
        "n": n_decisions,
        "wall": wall,
        "load": load_s,
        "dps": n_decisions / wall,
        "mean_latency": statistics.mean(lat),
        "p50": med(lat),
        "min": min(lat),
        "max": max(lat),
        "first": lat[0],
        "calls": tot["calls"],
        "in_tok": tot["input_tokens"],
        "out_tok": tot["output_tokens"],
        "retry": sum(rec.attempts > 1 for _, rec in recs),
        "fallback": sum(rec.fallback_used for _, rec in recs),
        "prompt_tokens_first": svc.ledger.entries[0].input_tokens,
        "raws": [rec.raw for _, rec in recs],
        "n_threads": proc.meta.get("threads"),
        "n_threads_batch": proc.meta.get("threads"),
        "extra_bufts": proc.meta.get("extra_bufts"),
        "system_info": proc.meta.get("system_info"),
        "model": spec.id,
        "temperature": spec.temperature,
        "max_tokens": spec.max_tokens,
    }


# ------------------------------------------------------------------------------------------
# reporting
# ------------------------------------------------------------------------------------------
def local_model_file() -> str:
    """The pinned GGUF the local model runs (name and the start of its SHA-256)."""
    from cooplab.agents.model_files import MODELS

    f = MODELS["smollm2"].main
    return f"{f.name} (sha256 {f.sha256[:12]})"


def machine_info() -> dict[str, str]:
    def v(pkg: str) -> str:
        try:
            return version(pkg)
        except Exception:  # noqa: BLE001
            return "?"

    return {
        "uname_a": subprocess.run(["uname", "-a"], capture_output=True, text=True).stdout.strip(),
        "nproc": str(os.cpu_count()),
        "python": sys.version.split()[0],
        "langgraph": v("langgraph"),
        "langgraph-checkpoint": v("langgraph-checkpoint"),
        "langchain-core": v("langchain-core"),
        "llama-cpp-python": v("llama-cpp-python"),
        "local-model": local_model_file(),
        "pydantic": v("pydantic"),
        "load": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


def replace_section(path: Path, text: str) -> None:
    """Replace this benchmark's section (up to the next ``## `` heading) or append it; the file is
    re-read just before writing so other engineers' sections are kept."""
    old = path.read_text() if path.exists() else "# Benchmark results\n"
    pat = re.compile(r"^" + re.escape(SECTION) + r"[^\n]*\n.*?(?=^## |\Z)", re.S | re.M)
    body = text.rstrip("\n") + "\n\n"
    new = pat.sub(lambda _m: body, old, count=1) if pat.search(old) else old.rstrip("\n") + "\n\n" + body
    path.write_text(new.rstrip("\n") + "\n")


def report(info, start, a, bs, c, d, prof, quick: bool, cmd: str, total_s: float) -> str:
    L = [SECTION, ""]
    L.append(
        f"Run {start} UTC with `{cmd}`{' (QUICK smoke settings)' if quick else ''}; the whole benchmark took "
        f"{total_s:.0f} s."
    )
    L.append("")
    L.append(
        f"- Machine: `{info['uname_a']}`; nproc {info['nproc']}; load average at start {info['load']}, at end "
        f"{info['load_end']} "
        "(2 cores shared with other engineers' jobs: expect noise of tens of percent)"
    )
    L.append(
        f"- Python {info['python']}, langgraph {info['langgraph']} (langgraph-checkpoint "
        f"{info['langgraph-checkpoint']}), "
        f"langchain-core {info['langchain-core']}, llama-cpp-python {info['llama-cpp-python']}, local model file "
        f"{info['local-model']}, pydantic {info['pydantic']}"
    )
    L.append(
        "- Society: `runner.llm_phases` + `runner.init_llm_state` (harvest, punish, environment, propose, vote; all "
        "but environment "
        "ask the model), one society, mixed population, seed 7, parameters scaled with N so it survives (K = R0 = 100 "
        "N, alpha = 1/N). "
        'Driven like `runner._arun`: `astream(..., context=CoopContext(llm=service), stream_mode=["updates", '
        '"values"], durability="sync")`, '
        'InMemorySaver, no tracer. Scripted model: effort `{"effort": 0.3}`, punish `{"punish": null}`, 3 distinct '
        "proposals in turn "
        '(so votes happen), vote `{"vote": 1}`; zero fallbacks (asserted).'
    )
    L.append("")
    L.append(
        "### (a) Orchestration overhead per decision (zero-latency scripted model, cache off, max_concurrency 1000)"
    )
    L.append("")
    L.append(
        "cooplab = the graph run, `init_state` included, compilation excluded (own column). Floor = `await "
        "model.ainvoke(messages)` "
        "on the same scripted model for the same prompts (captured from a graph run), one `asyncio.gather` per (round, "
        "phase) like the graph. "
        "`decide` alone = the same gathers through `decide(service, spec, ...)`. Medians over repeats, divided by the "
        "number of decisions."
    )
    L.append("")
    L.append(
        "| N | rounds | decisions (harvest/punish/propose/vote) | repeats | cooplab / decision | floor / decision | "
        "**ratio** | `decide` alone / decision | LLM nodes in graph / decision | cooplab, no checkpointer / decision | "
        "compile |"
    )
    L.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in a:
        bp = r["by_phase"]
        L.append(
            f"| {r['N']} | {r['rounds']} | {r['decisions']:,} "
            f"({'/'.join(str(bp.get(p, 0)) for p in ('harvest', 'punish', 'propose', 'vote'))}) | {r['repeats']} | "
            f"{fmt_t(r['graph'])} | {fmt_t(r['floor'])} | **{r['ratio']:.2f}x** | {fmt_t(r['decide'])} | "
            f"{fmt_t(r['llm'])} | {fmt_t(r['nock'])} | {fmt_t(r['compile'])} |"
        )
    L.append("")
    L.append("Where cooplab's time per decision goes (differences of the medians above; shares of the cooplab column):")
    L.append("")
    L.append(
        "| N | model `ainvoke` (floor) | decision layer (`decide` - floor: schema, key hashing, ledger, token "
        "estimate, validation, record) | "
        "policies (LLM nodes - `decide`: prompts, peer sampling, rows, applying) | LangGraph + checkpoints + "
        "environment node (cooplab - LLM nodes) | of which checkpoints (cooplab - no checkpointer) |"
    )
    L.append("|---:|---:|---:|---:|---:|---:|")
    for r in a:
        g = r["graph"]
        parts = [r["floor"], r["decide"] - r["floor"], r["llm"] - r["decide"], g - r["llm"], g - r["nock"]]
        L.append(
            f"| {r['N']} | " + " | ".join(f"{fmt_t(p)} ({100 * p / g:.0f}%)" if p == p else "n/a" for p in parts) + " |"
        )
    L.append("")
    gshare = [(r["N"], 100 * (r["graph"] - r["llm"]) / r["graph"]) for r in a]
    dshare = [(r["N"], 100 * (r["decide"] - r["floor"]) / r["graph"]) for r in a]
    ratios = ", ".join(f"{r['ratio']:.2f}x at N = {r['N']}" for r in a)
    L.append(
        f"- cooplab / floor: {ratios}. LangGraph + checkpoints + environment node: "
        + ", ".join(f"{v:.0f}%" for _n, v in gshare)
        + " of cooplab's time per decision (N = "
        + ", ".join(str(n) for n, _v in gshare)
        + "): the graph does not dominate. The decision layer (`decide` minus the model call): "
        + ", ".join(f"{v:.0f}%" for _n, v in dshare)
        + ". Differences of medians of separate runs on a shared machine: a negative or implausible cell means noise."
    )
    L.append("")
    L.append("### (b) Concurrency: scripted latency 100 ms, N = 50, max_concurrency 50")
    L.append("")
    L.append(
        "Round wall time = between consecutive ends of the round's last node (round 1 from the start of `astream`: "
        "includes `init_state` "
        "and the first checkpoint). k = LLM phases that called the model in that round (from the ledger; a society's "
        "last round has no "
        "propose/vote calls). ratio = wall / (k x 100 ms). Each row: mean over the runs."
    )
    L.append("")
    for b in bs:
        name = "harvest-only society (punishment and group decision off)" if b["harvest_only"] else "full LLM society"
        L.append(
            f"**{name}** (LLM nodes: {', '.join(b['nodes'])}; {b['runs']} runs x {b['rounds']} rounds, {b['calls']} "
            "calls in all)"
        )
        L.append("")
        L.append("| round | k | wall | LLM nodes | ratio |")
        L.append("|---:|---:|---:|---:|---:|")
        for row in b["rows"]:
            L.append(
                f"| {row['round']} | {row['k']} | {fmt_t(row['wall'])} | {fmt_t(row['llm'])} | {row['ratio']:.3f} |"
            )
        met = b["mean_ratio"] <= 1.3
        L.append(
            f"| **mean** | | {fmt_t(statistics.mean(r_['wall'] for r_ in b['rows']))} | "
            f"{fmt_t(statistics.mean(r_['llm'] for r_ in b['rows']))} | **{b['mean_ratio']:.3f}** |"
        )
        L.append("")
        L.append(
            f"- **target <= 1.3: mean {b['mean_ratio']:.3f} over {b['runs'] * b['rounds']} rounds (per-run means "
            + ", ".join(f"{x:.3f}" for x in b["run_means"])
            + f"; best round {b['min_ratio']:.3f}, worst {b['max_ratio']:.3f}) -> {'MET' if met else 'NOT MET'}**"
        )
        calls_per_round = b["calls"] / (b["runs"] * b["rounds"])
        over = statistics.mean(r_["wall"] - r_["k"] * b["latency"] for r_ in b["rows"])
        L.append(
            f"- time above the pure latency: {fmt_t(over)} per round for {calls_per_round:.0f} calls per round = "
            f"{fmt_t(over / calls_per_round)} per call, "
            "spent on the single event-loop thread (prompts, `decide` before and after the call, LangChain's "
            "`ainvoke`, rows, nodes, checkpoints); "
            "the 100 ms waits themselves overlap fully."
        )
        L.append("")
    L.append("### (c) Cached replay")
    L.append("")
    f, rp = c["first"], c["replay"]
    L.append(
        f"Full LLM society, N = {c['N']}, {c['rounds']} rounds, scripted latency {c['latency'] * 1e3:.0f} ms, "
        "ResponseCache on a temp SQLite file; "
        "the same config and seed twice, a fresh model, service and ledger each time."
    )
    L.append("")
    L.append(
        "| run | wall | ledger calls | cached_calls | cache hits / misses | model calls (scripted model's counters) |"
    )
    L.append("|---|---:|---:|---:|---:|---:|")
    L.append(
        f"| first | {fmt_t(f['wall'])} | {f['calls']} | {f['cached_calls']} | {f['hits']} / {f['misses']} | "
        f"{f['model_calls']} |"
    )
    L.append(
        f"| replay | {fmt_t(rp['wall'])} | {rp['calls']} | {rp['cached_calls']} | {rp['hits']} / {rp['misses']} | "
        f"{rp['model_calls']} |"
    )
    L.append("")
    L.append(
        f"- replay / first = **{c['ratio']:.3f}** ({1 / c['ratio']:.1f}x faster). Asserted: replay cached_calls == "
        "calls, zero model calls, "
        "and the same outcome (T_s, efforts, wealth, adopted norms)."
    )
    L.append("")
    L.append("### (d) Local model decisions on this machine")
    L.append("")
    L.append(
        f"`{d['model']}` via `LlamaCppChat`, in its own model process (temperature {d['temperature']}, max_tokens "
        f"{d['max_tokens']}, JSON-schema-constrained decoding; "
        f"n_threads {d['n_threads']} / n_threads_batch {d['n_threads_batch']} on {info['nproc']} cores; extra buffer "
        "types "
        f"{'on' if d.get('extra_bufts') else 'off'}; build `{d.get('system_info')}`). "
        f"{d['n']} EFFORT decisions through `decide`, one after another, prompts from `effort_messages` on a real "
        "10-agent state at round 4 "
        f"with 3 peers shown (first call's prompt {d['prompt_tokens_first']} tokens with the chat template; a retry "
        "re-sends the conversation "
        f"plus the error, so later attempts are longer). Model load {fmt_t(d['load'])}, not counted. Retried = needed "
        "a 2nd or 3rd attempt; "
        "fallback = all 3 attempts invalid, the spec's fallback (last round's effort) used."
    )
    L.append("")
    L.append(
        "| decisions | wall | decisions/s | mean latency | p50 | min / max | input tok | output tok | output tok/s | "
        "(in+out) tok/s | retried | fallback |"
    )
    L.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    L.append(
        f"| {d['n']} | {fmt_t(d['wall'])} | {d['dps']:.2f} | {fmt_t(d['mean_latency'])} | {fmt_t(d['p50'])} | "
        f"{fmt_t(d['min'])} / {fmt_t(d['max'])} | "
        f"{d['in_tok']} | {d['out_tok']} | {d['out_tok'] / d['wall']:.1f} | "
        f"{(d['in_tok'] + d['out_tok']) / d['wall']:.0f} | "
        f"{d['retry']}/{d['n']} ({100 * d['retry'] / d['n']:.0f}%) | {d['fallback']}/{d['n']} "
        f"({100 * d['fallback'] / d['n']:.0f}%) |"
    )
    L.append("")
    raws = Counter(x.strip() for x in d["raws"])
    L.append(
        f"- {d['calls']} model calls for {d['n']} decisions; first decision {fmt_t(d['first'])}. Answers: "
        + ", ".join(f"`{k}` x{v}" for k, v in raws.most_common(6))
    )
    L.append("")
    if prof:
        L.append(f"### Profile (N = {prof['N']})")
        L.append("")
        L.append(
            f"cProfile of {prof['runs']} graph runs at N = {prof['N']} ({prof['rounds']} rounds, {prof['decisions']} "
            "decisions in all, "
            f"{prof['wall']:.2f} s under the profiler, compilation included). Cumulative time by component (rows "
            "starting with '-' are parts "
            "of the row above; cProfile attributes async frames per resumption and slows small calls more than large "
            "ones, so shares are "
            "indicative; LangGraph runs the sync environment node in a thread executor, which the profiler does not "
            "see):"
        )
        L.append("")
        L.append("| component | cumulative | share of profiled wall |")
        L.append("|---|---:|---:|")
        for label, cum in prof["groups"]:
            L.append(f"| {label} | {fmt_t(cum)} | {100 * cum / prof['wall']:.0f}% |")
        L.append("")
        L.append("Top functions by self time:")
        L.append("")
        L.append("```")
        L.append("   ncalls  tottime  percall  cumtime  percall filename:lineno(function)")
        L.extend(prof["top"])
        L.append("```")
        L.append("")
    return "\n".join(L)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    ap.add_argument(
        "--quick", action="store_true", help="smoke run: fewer agents/rounds/repeats; no file written unless --out"
    )
    ap.add_argument(
        "--out", type=Path, default=None, help="results file (default benchmarks/RESULTS.md; none for --quick)"
    )
    ap.add_argument(
        "--local-decisions",
        type=int,
        default=None,
        help="EFFORT decisions of the local model in (d) (default 12; 3 with --quick)",
    )
    ap.add_argument(
        "--profile",
        choices=["always", "never"],
        default="always",
        help="cProfile a few graph runs at N = 100 (3 rounds) and summarize where the time goes",
    )
    args = ap.parse_args(argv)
    if args.local_decisions is not None and args.local_decisions < 1:
        ap.error("--local-decisions must be at least 1")
    out = args.out if args.out is not None else (None if args.quick else HERE / "RESULTS.md")
    T0 = time.perf_counter()
    start = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M")
    info = machine_info()
    print(f"bench_llm: {start} UTC, load {info['load']}", flush=True)

    # (N, rounds, repeats); N = 1000 has ~10,000 decisions in 3 rounds of the full society
    plan = [(10, 3, 2), (100, 3, 1)] if args.quick else [(10, 5, 7), (100, 5, 3), (1000, 3, 2)]
    a = asyncio.run(bench_overhead(plan))
    print(f"  (a) done at {time.perf_counter() - T0:.0f} s", flush=True)
    bs = []
    for harvest_only in (False, True):
        b = asyncio.run(bench_latency(50, 2 if args.quick else 5, 0.1, 50, 1 if args.quick else 3, harvest_only))
        bs.append(b)
        print(
            f"  (b) {'harvest-only' if harvest_only else 'full'}: per round "
            f"{[round(x['ratio'], 3) for x in b['rows']]} -> mean ratio {b['mean_ratio']:.3f}",
            flush=True,
        )
    c = asyncio.run(bench_replay(20, 2 if args.quick else 5, 0.02))
    print(
        f"  (c) first {c['first']['wall']:.3f} s, replay {c['replay']['wall']:.3f} s, ratio {c['ratio']:.3f}",
        flush=True,
    )
    print(f"  (b), (c) done at {time.perf_counter() - T0:.0f} s", flush=True)
    d = asyncio.run(bench_local(args.local_decisions or (3 if args.quick else 12)))
    print(
        f"  (d) {d['dps']:.2f} decisions/s, mean latency {d['mean_latency']:.2f} s, retried {d['retry']}, fallback "
        f"{d['fallback']}",
        flush=True,
    )

    prof = profile_graph(100, 3, runs=2) if args.profile == "always" else None
    print(f"  profile done at {time.perf_counter() - T0:.0f} s", flush=True)
    info["load_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    cmd = ".venv/bin/python benchmarks/bench_llm.py" + (" --quick" if args.quick else "")
    text = report(info, start, a, bs, c, d, prof, args.quick, cmd, time.perf_counter() - T0)
    print()
    print(text)
    if out is not None:
        replace_section(out, text)
        print(f"\nwrote section '{SECTION}' of {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
