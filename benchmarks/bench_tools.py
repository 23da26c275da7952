"""Tool-loop benchmark: the framework time of one tool-loop step beyond the sandbox call itself.

    .venv/bin/python benchmarks/bench_tools.py                 # 200 steps per variant, ~1 min; writes RESULTS.md
    .venv/bin/python benchmarks/bench_tools.py --steps 50 --no-write
    .venv/bin/python benchmarks/bench_tools.py --steps 1 --per-loop 1 --out /tmp/results.md   # smoke run, written
    elsewhere

A step = one model call (zero-latency scripted model answering a ``run_code`` tool call) + the tool
call through LangGraph's ToolNode + the ``run_code`` tool on a warm Docker sandbox (the agent's
session is started and has run code before timing starts) + the ledger's sandbox-seconds charge,
measured from the start of one model call to the start of the next. The sandbox call itself is
the wall time of ``SandboxSession.run_code`` as the pool measures it (the seconds it reports and
the ledger charges): framework time per step = step time - that step's own sandbox call. The
sandbox call alone (``pool.run`` in a loop, same code, same session) is timed in the same run for
reference. Variants: bare (no cache, no tracer), and as a run does it (SQLite response cache +
the JSONL tracer of ``tracing_callbacks``).

Writes (replaces) the ``## Tool loop`` section of benchmarks/RESULTS.md. Target: framework time
per step < 5 ms (median).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import TypedDict

from _results import (  # benchmarks/ is on sys.path when run as a script
    RESULTS,
    apply_gc,
    gc_option,
    machine_info,
    write_section,
)
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph

from cooplab.agents.cache import ResponseCache
from cooplab.agents.decisions import LLMService
from cooplab.agents.models import ModelSpec, ScriptedChatModel
from cooplab.agents.tools import (
    SANDBOX_SECONDS,
    ToolAgent,
    ToolLoopLimits,
    run_code_tool,
    tool_agent_node,
)
from cooplab.graphs.context import CoopContext
from cooplab.graphs.ledger import Ledger
from cooplab.graphs.state import AppendLog
from cooplab.graphs.tracing import tracing_callbacks
from cooplab.sandbox import SandboxConfig
from cooplab.sandbox.pool import AgentSandboxPool

AGENT = "bench.agent"
CODE = "x = {k}\nx + 1"


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def ms(s: float) -> str:
    return f"{s * 1000:.2f} ms"


class TimedScripted(ScriptedChatModel):
    """A zero-latency scripted model that notes when each call starts."""

    starts: list = []
    cpu: list = []  # the process's CPU time at each call's start (robust to other processes' load)

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
        self.starts.append(time.perf_counter())
        self.cpu.append(time.process_time())
        return await super()._agenerate(messages, stop, run_manager, **kwargs)


def script(steps: int):
    def answer(messages):
        k = sum(isinstance(m, ToolMessage) for m in messages)
        if k < steps:
            return {"tool_calls": [{"name": "run_code", "args": {"code": CODE.format(k=k)}}]}
        return "done"

    return answer


class LoopState(TypedDict, total=False):
    round: int
    messages: AppendLog
    tool_loops: AppendLog
    ledger: AppendLog


async def run_variant(
    pool: AgentSandboxPool,
    steps_total: int,
    per_loop: int,
    *,
    cache_path: Path | None,
    run_dir: Path | None,
    trace: bool = False,
):
    """``run_dir`` None: the bare loop (``ToolAgent.arun``); else each loop is one run of a compiled
    graph (its node: ``tool_agent_node``) with a SQLite checkpointer in ``run_dir``, traced there
    with ``trace``."""
    model = TimedScripted(answers=[script(per_loop)], cycle=True)
    model.starts = []
    model.cpu = []
    spec = ModelSpec("scripted", "bench", max_tokens=64)
    svc = LLMService(models={"default": (spec, model)}, ledger=Ledger(), cache=ResponseCache(cache_path), seed=1)
    ctx = CoopContext(llm=svc, sandbox=pool, run_dir=None if run_dir is None else str(run_dir))
    limits = ToolLoopLimits(max_steps=per_loop + 1)
    agent = ToolAgent(AGENT, [run_code_tool()], limits=limits)
    framework, sandbox, step_times, cpu = [], [], [], []
    loops = max(1, steps_total // per_loop)
    saver_cm = graph = None
    if run_dir is not None:
        g = StateGraph(LoopState, context_schema=CoopContext)
        # LangGraph's stubs name no (state, config, runtime) node
        g.add_node(
            "agent",
            tool_agent_node(  # pyright: ignore[reportArgumentType]
                AGENT,
                [run_code_tool()],
                lambda s: [HumanMessage(content=f"loop {s['round']}")],
                limits=limits,
                ledger_key="ledger",
            ),
        )
        g.add_edge(START, "agent")
        g.add_edge("agent", END)
        saver_cm = AsyncSqliteSaver.from_conn_string(str(run_dir / "checkpoints.sqlite"))
        graph = g.compile(checkpointer=await saver_cm.__aenter__())
    for i in range(loops):
        model.starts.clear()
        model.cpu.clear()
        n0 = len(svc.ledger.entries)
        if graph is None:
            res = await agent.arun([HumanMessage(content=f"loop {i}")], context=ctx, round=i)
            rec = res.record()
        else:
            assert run_dir is not None  # a graph is built only with a run folder
            cfg: RunnableConfig = {"configurable": {"thread_id": f"loop-{i}"}}
            if trace:
                cfg["callbacks"] = tracing_callbacks(run_dir)
            out = await graph.ainvoke({"round": i}, cfg, context=ctx, durability="sync")
            rec = out["tool_loops"][-1]
        assert rec["stop_reason"] == "final" and rec["n_tool_calls"] == per_loop, rec
        secs: list[float] = []
        for e in svc.ledger.entries[n0:]:
            if e.kind == SANDBOX_SECONDS:
                assert e.units is not None  # a non-token charge names the units it charged
                secs.append(float(e.units))
        for j in range(per_loop):  # step j: model call j + its tool call, up to the start of model call j + 1
            step = model.starts[j + 1] - model.starts[j]
            step_times.append(step)
            sandbox.append(secs[j])
            framework.append(step - secs[j])
            cpu.append(model.cpu[j + 1] - model.cpu[j])
    if saver_cm is not None:
        await saver_cm.__aexit__(None, None, None)
    return framework, sandbox, step_times, cpu


def sandbox_alone(pool: AgentSandboxPool, n: int) -> list[float]:
    out = []
    for k in range(n):
        out.append(pool.run(AGENT, CODE.format(k=k)).seconds)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=200, help="timed tool-loop steps per variant (default 200)")
    ap.add_argument("--per-loop", type=int, default=5, help="tool steps per loop before the final answer (default 5)")
    ap.add_argument("--backend", default="docker", choices=["docker", "local"], help="sandbox backend (default docker)")
    ap.add_argument(
        "--rounds", type=int, default=5, help="the variants take turns this many times, --steps / rounds steps each"
    )
    ap.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    ap.add_argument(
        "--out", type=Path, default=None, help="write the section to this file instead of benchmarks/RESULTS.md"
    )
    gc_option(ap)
    args = ap.parse_args()
    if args.steps < 1 or args.per_loop < 1 or args.rounds < 1:
        ap.error("--steps, --per-loop and --rounds must be at least 1")
    apply_gc(args.gc)

    info = machine_info(versions=True, docker=True)
    tmp = Path(tempfile.mkdtemp(prefix="cooplab-bench-tools-"))
    t_start = time.perf_counter()
    try:
        with AgentSandboxPool(SandboxConfig(), backend=args.backend) as pool:
            for k in range(20):  # warm: the agent's session is started, imports done, code has run
                pool.run(AGENT, CODE.format(k=k))
            asyncio.run(
                run_variant(pool, args.per_loop * 4, args.per_loop, cache_path=None, run_dir=None)
            )  # warm the code paths
            alone = sandbox_alone(pool, args.steps)
            variants = [
                ("bare loop: `ToolAgent.arun`, no cache, no tracer", None, None, False),
                (
                    "in a graph: `tool_agent_node`, SQLite checkpoints + SQLite cache",
                    tmp / "c1.sqlite",
                    tmp / "g1",
                    False,
                ),
                ("in a graph, as a traced run: the same + the JSONL tracer", tmp / "c2.sqlite", tmp / "g2", True),
            ]
            # the variants take turns, a share of the steps each per round: a slow spell of a shared machine
            # falls on all of them, not on one variant's whole run
            rounds = max(1, min(args.rounds, args.steps // args.per_loop))  # at least one loop per round
            chunk = max(args.per_loop, args.steps // rounds // args.per_loop * args.per_loop)
            got: dict[str, list[list[float]]] = {name: [[], [], [], []] for name, *_ in variants}
            per_round: list[float] = []
            for r in range(rounds):
                cpu_of: dict[str, float] = {}
                for name, cache, run_dir, trace in variants:
                    rd = None if run_dir is None else run_dir.with_name(f"{run_dir.name}-{r}")
                    if rd is not None:
                        rd.mkdir()
                    c = None if cache is None else cache.with_name(f"{cache.stem}-{r}{cache.suffix}")
                    print(f"[round {r + 1}/{rounds}: {name}] {chunk} steps ...", file=sys.stderr, flush=True)
                    res = asyncio.run(run_variant(pool, chunk, args.per_loop, cache_path=c, run_dir=rd, trace=trace))
                    for acc, xs in zip(got[name], res, strict=True):
                        acc.extend(xs)
                    cpu_of[name] = pct(res[3], 50)
                traced, untraced = cpu_of[variants[2][0]], cpu_of[variants[1][0]]
                per_round.append(traced / max(untraced, 1e-9))
            rows = [(name, *got[name]) for name, *_ in variants]
            alone2 = sandbox_alone(pool, args.steps)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    wall = time.perf_counter() - t_start
    alone_all = alone + alone2

    table = [
        "| variant | steps | framework / step p50 | p90 | step p50 | step p90 | its sandbox call p50 | step p50 - "
        "sandbox alone p50 "
        "| process CPU / step p50 |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, fw, sb, st, cpu in rows:
        table.append(
            f"| {name} | {len(fw)} | **{ms(pct(fw, 50))}** | {ms(pct(fw, 90))} | {ms(pct(st, 50))} | {ms(pct(st, 90))} "
            "| "
            f"{ms(pct(sb, 50))} | {ms(pct(st, 50) - pct(alone_all, 50))} | {ms(pct(cpu, 50))} |"
        )
    table.append(
        f"| sandbox call alone (`pool.run`, same code, same session; before and after) | {len(alone_all)} | | | "
        f"{ms(pct(alone_all, 50))} | {ms(pct(alone_all, 90))} | | | |"
    )
    verdict = "- target: framework time per step < 5 ms (median): " + "; ".join(
        f"{name.split(':')[0]} {ms(pct(fw, 50))} -> {'MET' if pct(fw, 50) < 0.005 else 'MISSED'}"
        for name, fw, *_ in rows
    )
    tracer = pct(rows[2][1], 50) - pct(rows[1][1], 50)
    verdict += f"\n- the JSONL tracer's share (traced - untraced graph, medians): {ms(tracer)} per step"
    ratio = pct(rows[2][1], 50) / max(pct(rows[1][1], 50), 1e-9)
    verdict += (
        f"\n- traced over untraced graph step (framework / step, medians): {ratio:.2f}x (issue 41 target <= 1.2x: "
        f"{'MET' if ratio <= 1.2 else 'MISSED'}); in process CPU per step (robust to the machine's load): "
        f"{pct(rows[2][4], 50) / max(pct(rows[1][4], 50), 1e-9):.2f}x; in each round (CPU): "
        f"{', '.join(f'{x:.2f}x' for x in per_round)}"
    )
    text = "\n".join(
        [
            "## Tool loop",
            "",
            f"`.venv/bin/python benchmarks/bench_tools.py --steps {args.steps}` ({args.backend} sandbox, default "
            f"limits; {len(rows[0][1])} steps per variant in {plural(len(per_round), 'round')}, "
            "the variants taking turns; "
            f"loops of {args.per_loop} tool steps + a final answer; whole run {wall:.0f} s).",
            "",
            *info,
            "",
            *table,
            "",
            verdict,
            "",
            "A step = a zero-latency scripted model's call (through `LLMService.charged_call`: cache key, ledger "
            "reservation and "
            "charge, usage validation) answering a `run_code` tool call, the call through LangGraph's `ToolNode` and "
            "the "
            "`run_code` tool (caller lookup, sandbox-seconds reservation, `AgentSandboxPool.arun` in a worker thread, "
            "charge, "
            "result text), timed from the start of one model call to the start of the next. Framework / step = step - "
            "the "
            "wall time of that step's own `SandboxSession.run_code` (what the pool reports and the ledger charges). "
            "The column after subtracts the median of the sandbox call timed alone instead. Process CPU / step: the "
            "benchmark process's CPU time (`time.process_time`, all its threads; the sandbox's own process not "
            "included) "
            "over the same span, which other processes' load changes far less than wall time. The cache key hashes the "
            "whole "
            "conversation, so a step's cost grows slowly with the loop's length. Graph variants: one graph run per "
            "loop "
            '(`durability="sync"`); the checkpoint written after the node falls outside the timed steps. With the '
            "tracer, "
            "each model call's run (and each node run of the loop) records the whole conversation; "
            "`cooplab.graphs.tracing` converts, scrubs and serializes each message once and splices its JSON text into "
            "every record that holds it. The rest of the traced variant's extra time is LangChain's run bookkeeping "
            "(a `RunTree` per run, dotted orders) and the conversion of each node's state and metadata.",
            "",
        ]
    )
    print(text)
    if not args.no_write:
        write_section("Tool loop", text, args.out or RESULTS)
        print(f"updated {args.out or RESULTS}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
