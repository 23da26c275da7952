"""Benchmark: the six behavioral games with reference players (issue 11), simulation-rounds per second.

    .venv/bin/python benchmarks/bench_games.py            # ~1-2 min; writes "## Behavioral games" in
    benchmarks/RESULTS.md
    .venv/bin/python benchmarks/bench_games.py --quick    # smoke run (10,000 simulations, 1 repeat); writes nothing
    unless --out is given

Workload: each game at its defaults (2 groups of 5, 3 rounds; Collective Risk 10 rounds) with
``--simulations`` simulations (default 100,000) side by side in one graph invocation. A
simulation-round is one round of one simulation (10 players' decisions and payoffs). The target
of issue 11 is 100,000 simulation-rounds per second per game.

Three measurements per game:

1. **graph**: the game's LangGraph graph (``build_game_graph``, no checkpointer) invoked on the
   initial state, for Nash, Pareto and random players: the decision node(s), the checks, the
   payoffs and the round's record, every round. Best of ``--repeats``.
2. **runner**: ``cooplab.runs.runner.start`` with random players into a temporary run directory: the
   same graph with the runner's SQLite checkpoints (one per node), i.e. the ``wall_seconds`` of
   summary.json.
3. **end to end**: the same call's total time, adding the tables (players, rounds, simulations,
   sanctions, convergence: one row per simulation, round and player), the bootstrap convergence and
   the figure.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from _results import (  # benchmarks/ is on sys.path when run as a script
    emit,
    machine_info,
)
from langchain_core.runnables import RunnableConfig

from cooplab.tasks.games import players as pl
from cooplab.tasks.games.params import GAMES, model_of
from cooplab.tasks.games.society import build_game_graph, init_state

SECTION = "Behavioral games"
TARGET = 100_000


def time_graph(game: str, kind: str, S: int, repeats: int) -> float:
    """Best wall time of one graph invocation of ``S`` simulations."""
    P = model_of(game)(simulations=S)
    graph = build_game_graph(P, pl.policies(kind, P))
    cfg: RunnableConfig = {
        "configurable": {"thread_id": game},
        "recursion_limit": P.rounds * (len(graph.nodes) + 1) + 10,
    }
    best = float("inf")
    for _ in range(repeats):
        state = init_state(P, seed=1)
        t0 = time.perf_counter()
        final = graph.invoke(state, cfg)
        best = min(best, time.perf_counter() - t0)
        assert len(final["history"]) == P.rounds
    return best


def time_runner(game: str, S: int) -> tuple[float, float]:
    """(wall_seconds of the runner, total seconds with outputs) of a random-player run."""
    from cooplab.runs.runner import start
    from cooplab.tasks.games.task import TASK

    P = model_of(game)(simulations=S)
    config = {
        "version": 2,
        "task": "game",
        "agents": "rule",
        "seed": 1,
        "csv": False,
        "llm": None,
        "sandbox": None,
        "record": {},
        "params": {"game": game, "players": "random", "script": None, "script_file": None, **P.model_dump(mode="json")},
    }
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "run"
        out.mkdir()
        t0 = time.perf_counter()
        summary = start(TASK, out, config, quiet=True)
        total = time.perf_counter() - t0
    assert summary["status"] == "completed", summary
    return float(summary["wall_seconds"]), total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--simulations", type=int, default=100_000, help="simulations per game (default 100,000)")
    ap.add_argument(
        "--repeats", type=int, default=3, help="graph timings per game and player kind; the best is reported"
    )
    ap.add_argument(
        "--quick", action="store_true", help="10,000 simulations, 1 repeat; writes nothing unless --out is given"
    )
    ap.add_argument("--out", type=Path, default=None, help="write the section here instead of benchmarks/RESULTS.md")
    a = ap.parse_args()
    S, repeats = (10_000, 1) if a.quick else (a.simulations, a.repeats)
    head = machine_info(versions=True)
    for game in GAMES:  # warm-up: imports and first calls outside the timings
        time_graph(game, "random", 100, 1)
    rows = []
    for game in GAMES:
        R = model_of(game)().rounds
        rates = {kind: S * R / time_graph(game, kind, S, repeats) for kind in ("nash", "pareto", "random")}
        wall, total = time_runner(game, S)
        row = {
            "game": game,
            "rounds": R,
            **rates,
            "runner": S * R / wall,
            "end_to_end": S * R / total,
            "total_s": total,
        }
        rows.append(row)
        print(
            f"{game:16s} R={R:2d}  graph nash {rates['nash']:>12,.0f}  pareto {rates['pareto']:>12,.0f}  random "
            f"{rates['random']:>12,.0f}"
            f"  runner {row['runner']:>12,.0f}  end-to-end {row['end_to_end']:>12,.0f} sim-rounds/s ({total:.1f} s)",
            flush=True,
        )
    ok = all(min(r["nash"], r["pareto"], r["random"]) >= TARGET for r in rows)
    L = [
        f"## {SECTION}",
        "",
        f"`.venv/bin/python benchmarks/bench_games.py{' --quick' if a.quick else ''}`: the six games of issue 11 with "
        "reference players, "
        f"{S:,} simulations of 2 groups of 5 per game in one graph invocation (3 rounds; Collective Risk 10). "
        "Simulation-rounds per "
        f"second (one round of one simulation: 10 decisions and payoffs); target {TARGET:,} per game.",
        "",
        *head,
        "",
        "| game | rounds | graph, Nash | graph, Pareto | graph, random | runner (SQLite checkpoints), random | end to "
        "end (+ tables, bootstrap, figure), random |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        L.append(
            f"| {r['game']} | {r['rounds']} | {r['nash']:,.0f} | {r['pareto']:,.0f} | {r['random']:,.0f} | "
            f"{r['runner']:,.0f} | "
            f"{r['end_to_end']:,.0f} ({r['total_s']:.1f} s) |"
        )
    L += [
        "",
        f"Target of {TARGET:,} simulation-rounds per second per game through the graph: "
        f"{'met by every game and player kind' if ok else 'NOT met by every game and player kind'} (best of "
        f"{repeats}). "
        '"graph": the LangGraph graph without a checkpointer (decision nodes with their checks, payoffs, the round\'s '
        "record); "
        '"runner": `cooplab.runs.runner.start`\'s `wall_seconds` (the same graph with one SQLite checkpoint per node); '
        '"end to end": '
        "the same call including the run directory's tables (one row per simulation, round and player), the "
        "200-resample bootstrap "
        "convergence and the figure.",
    ]
    slow = [r["game"] for r in rows if r["runner"] < TARGET]
    if slow:
        L.append(
            f"Through the runner below the target: {', '.join(slow)}"
            + (
                " (CPR with sanctioning checkpoints its simulations x players^2 sanction matrix twice per round: in "
                "the "
                "sanction node's update and in the round's record)"
                if "cpr-sanction" in slow
                else ""
            )
            + "."
        )
    L.append("")
    text = "\n".join(L)
    emit(SECTION, text, write=not a.quick or a.out is not None, out=a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
