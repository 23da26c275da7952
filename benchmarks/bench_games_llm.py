"""Benchmark: the six behavioral games with LLM players (issue 11).

    .venv/bin/python benchmarks/bench_games_llm.py          # ~3-6 min; writes "## Behavioral games, LLM players" in
    RESULTS.md
    .venv/bin/python benchmarks/bench_games_llm.py --quick  # smoke run (5 simulations, no local model); writes nothing
    unless --out

Three measurements:

(a) **Concurrency**: every game through the runner (LLM path: async graph, SQLite checkpoints,
    ledger, cache off, traces) with a scripted model that answers after ``--latency`` (100 ms),
    10 players x ``--simulations`` (50), max concurrency 1024. All players of all simulations
    decide a phase together, so a round ideally takes (decision phases) x latency. Reported: the
    round's wall time over that ideal (target <= 1.3), next to the same run with a zero-latency
    model (the framework's own time per round, the baseline in the same run).
(b) **The local model** (SmolLM2-135M, llama.cpp in its own process, cache off): one round of
    weakest-link, 10 players x 1 simulation; decisions per second and tokens per decision.
(c) **Tokens and cost of a 20-simulation profile** at the default rates ($0.0005 / $0.003 per 1K
    input / output tokens): the decisions of ``cooplab profile --simulations 20`` counted by
    playing it with the instant scripted model (its input tokens are the prompts' estimated
    tokens), and the same decisions priced with the local model's measured tokens per decision;
    next to the paper's "under 1K tokens" (§4.2).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from _results import (  # benchmarks/ is on sys.path when run as a script
    apply_gc,
    emit,
    gc_option,
    machine_info,
)

from cooplab.agents.settings import LLMSettings
from cooplab.runs.engine import ENGINE
from cooplab.tasks.games import profiles as pf
from cooplab.tasks.games.params import GAMES


def llm_config(model: str, max_concurrency: int) -> dict:
    """A profile's LLM settings: the model, no cache, the CLI's defaults otherwise."""
    return LLMSettings(model=model, max_concurrency=max_concurrency, cache="off").resolve().model_dump(mode="json")


SECTION = "Behavioral games, LLM players"
ANSWERS = {
    "effort": ['{"effort": 7}', '{"effort": 10}'],
    "extract": ['{"extract": 4}', '{"extract": 6}'],
    "contribute": ['{"contribute": 1}', '{"contribute": 2}'],
    "withdraw": ['{"withdraw": 6}', '{"withdraw": 5}'],
    "allocate": ['{"keep": 2, "group": 6, "global": 2}', '{"keep": 4, "group": 4, "global": 2}'],
    "sanction": ['{"sanctions": {}}', '{"sanctions": {"1": 1}}'],
}


def scripted(d: Path, latency: float) -> str:
    f = d / f"model-{latency}.json"
    f.write_text(json.dumps({"select": "prompt_hash", "by_phase": ANSWERS, "latency": latency}))
    return f"scripted:{f}"


def run_game(
    d: Path,
    game: str,
    model: str,
    S: int,
    *,
    rounds: int | None = None,
    group_size: int | None = None,
    max_concurrency: int = 1024,
) -> Any:
    """One game through the runner; its summary."""
    from cooplab.runs import runner
    from cooplab.runs import store as runstore
    from cooplab.tasks.games.task import TASK

    llm = llm_config(model, max_concurrency)
    req = pf.request(games=[game], players="llm", simulations=S, group_size=group_size, llm=llm, engine=ENGINE)
    cfg = pf.game_config(req, game, None)
    if rounds is not None:
        cfg["params"]["rounds"] = rounds
    out = runstore.prepare_out(d / f"{game}-{model.rsplit('-', 1)[-1]}-{time.monotonic_ns()}")
    s = runner.start(TASK, out, cfg, quiet=True)
    assert s["status"] == "completed", s
    return s


def phases(game: str) -> int:
    return 2 if game == "cpr-sanction" else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--simulations", type=int, default=50)
    ap.add_argument("--latency", type=float, default=0.1, help="scripted model latency in seconds (default 0.1)")
    ap.add_argument("--rounds", type=int, default=2, help="rounds per game in (a) (default 2; collective risk too)")
    ap.add_argument("--no-local", action="store_true", help="skip (b) and the local-model pricing of (c)")
    ap.add_argument("--quick", action="store_true", help="5 simulations, no local model; writes nothing unless --out")
    ap.add_argument("--out", type=Path, default=None)
    gc_option(ap)
    a = ap.parse_args()
    apply_gc(a.gc)
    S = 5 if a.quick else a.simulations
    local = not (a.quick or a.no_local)
    head = machine_info(versions=True)
    t_start = time.perf_counter()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        slow, instant = scripted(d, a.latency), scripted(d, 0.0)
        run_game(d, "cpr", instant, 2, rounds=1)  # warm-up: imports, first graph
        for sims in sorted({1, S}):
            for game in GAMES:
                base = run_game(d, game, instant, sims, rounds=a.rounds)
                s = run_game(d, game, slow, sims, rounds=a.rounds)
                k = phases(game)
                round_wall = s["wall_seconds"] / a.rounds
                n = s["decisions"]["count"] // a.rounds
                row = {
                    "game": game,
                    "simulations": sims,
                    "phases": k,
                    "decisions_per_round": n,
                    "round_wall": round_wall,
                    "ratio": round_wall / (k * a.latency),
                    "base_round": base["wall_seconds"] / a.rounds,
                    "per_decision_ms": 1000 * base["wall_seconds"] / a.rounds / n,
                }
                rows.append(row)
                print(
                    f"(a) {game:16s} S={sims:3d} round {round_wall:.3f} s = {row['ratio']:.2f} x ({k} x {a.latency:g} "
                    "s); "
                    f"zero-latency round {row['base_round']:.3f} s ({row['per_decision_ms']:.2f} ms/decision); {n} "
                    "decisions/round",
                    flush=True,
                )
        loc = None
        if local:
            t0 = time.perf_counter()
            s = run_game(d, "weakest-link", "local", 1, rounds=1, max_concurrency=8)
            wall = time.perf_counter() - t0
            n = s["decisions"]["count"]
            lg = s["ledger"]
            loc = {
                "decisions": n,
                "wall": s["wall_seconds"],
                "total": wall,
                "per_s": n / s["wall_seconds"],
                "in": lg["input_tokens"] / n,
                "out": lg["output_tokens"] / n,
                "calls": lg["calls"],
                "fallback": s["decisions"]["fallback_used"],
            }
            print(
                f"(b) local model: {n} decisions in {s['wall_seconds']:.1f} s = {loc['per_s']:.2f}/s; tokens per "
                "decision in "
                f"{loc['in']:.0f} / out {loc['out']:.1f}",
                flush=True,
            )
        prof_req = pf.request(players="llm", simulations=20, llm=llm_config(instant, 1024), engine=ENGINE)
        out = pf.prepare(d / "profile", prof_req)
        t0 = time.perf_counter()
        prof = pf.run_profile(out, prof_req, engine=ENGINE, quiet=True)
        prof_wall = time.perf_counter() - t0
        tot = prof["totals"]
        print(
            f"(c) 20-simulation profile: {tot['decisions']} decisions, tokens in/out "
            f"{tot['input_tokens']}/{tot['output_tokens']} "
            f"(scripted estimate), ${tot['cost_usd']:.4f}; played in {prof_wall:.1f} s with the instant model",
            flush=True,
        )
    target_rows = [r for r in rows if r["simulations"] == S]
    ok = all(r["ratio"] <= 1.3 for r in target_rows)
    L = [
        f"## {SECTION}",
        "",
        f"`.venv/bin/python benchmarks/bench_games_llm.py{' --quick' if a.quick else ''}` (took "
        f"{time.perf_counter() - t_start:.0f} s).",
        "",
        *head,
        "",
        "### (a) Concurrency: round wall time over (decision phases x model latency)",
        "",
        "Every game through the runner's LLM path (async graph, SQLite checkpoints, ledger, traces; cache off) with 2 "
        "groups of 5 "
        f"players x {S} simulations (the issue's workload) and x 1 simulation, {a.rounds} rounds, max concurrency "
        "1024, and a "
        f"scripted model answering after {a.latency * 1000:.0f} ms. All players of all simulations decide a phase "
        "concurrently, so "
        "the ideal round is (phases x latency). Baseline in the same run: the zero-latency model (the framework's own "
        "time per "
        f"round, and per decision).",
        "",
        "| game | simulations | decision phases | decisions per round | round wall | ratio (target <= 1.3) | "
        "zero-latency round | per decision |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        L.append(
            f"| {r['game']} | {r['simulations']} | {r['phases']} | {r['decisions_per_round']} | {r['round_wall']:.3f} "
            "s | "
            f"**{r['ratio']:.2f}** | {r['base_round']:.3f} s | {r['per_decision_ms']:.2f} ms |"
        )
    missed = [r["game"] for r in target_rows if r["ratio"] > 1.3]
    L += [
        "",
        f"Target <= 1.3 at {S} simulations: {'met by every game' if ok else 'NOT met: ' + ', '.join(missed)}. "
        "The framework's own work per decision (zero-latency column over the decisions: building the player's prompt "
        "from the "
        "history, LangChain's chat-model call path, validation, the ledger, checkpoints and the trace record) is CPU "
        "time on one "
        "event loop. It overlaps the model's latency only until it adds up to it: with 10 players x 50 simulations "
        "deciding "
        "together, it sums to several hundred ms per phase, so the round is bounded by the CPU, not by the 100 ms "
        "model; with "
        "1 simulation (10 decisions) the round is close to the ideal. See the note below the table in docs/games.md.",
        "",
    ]
    if loc is not None:
        L += [
            "### (b) The local model",
            "",
            "SmolLM2-135M-Instruct (Q4_1 GGUF, llama.cpp in its own process, JSON-schema-constrained decoding, max "
            "concurrency 8, "
            "cache off): one round of weakest-link, 10 players x 1 simulation.",
            "",
            "| decisions | model calls | wall | decisions/s | input tokens / decision | output tokens / decision | "
            "fallbacks |",
            "|---:|---:|---:|---:|---:|---:|---:|",
            f"| {loc['decisions']} | {loc['calls']} | {loc['wall']:.1f} s | **{loc['per_s']:.2f}** | {loc['in']:.0f} | "
            f"{loc['out']:.1f} | "
            f"{loc['fallback']} |",
            "",
            "The prompt (about 300-400 tokens: the paper's system prompt with the player's identity on its first line, "
            "the game's "
            "rules, the history) dominates: llama.cpp evaluates it anew for every player, because the prompts of two "
            "players "
            "differ from their first line on (no shared prefix to reuse).",
            "",
        ]
    rates = (0.0005, 0.003)
    L += [
        "### (c) Tokens and cost of a 20-simulation profile",
        "",
        f"`cooplab profile --simulations 20` plays {tot['decisions']:,} decisions (six games, 2 groups of 5; "
        "weakest-link, CPR, "
        "O-Ring and public goods 3 rounds, CPR with sanctioning 3 rounds of two decisions, collective risk 10 rounds). "
        f"Default rates ${rates[0]} / ${rates[1]} per 1K input / output tokens.",
        "",
        "| tokens counted by | input tokens | output tokens | cost |",
        "|---|---:|---:|---:|",
        f"| the prompts' estimate (instant scripted model, answers of 6-20 tokens) | {tot['input_tokens']:,} | "
        f"{tot['output_tokens']:,} | "
        f"${tot['cost_usd']:.3f} |",
    ]
    if loc is not None:
        tin, tout = loc["in"] * tot["decisions"], loc["out"] * tot["decisions"]
        L.append(
            f"| the local model's measured tokens per decision (b) x {tot['decisions']:,} | {tin:,.0f} | {tout:,.0f} | "
            f"${tin / 1000 * rates[0] + tout / 1000 * rates[1]:.3f} |"
        )
    L += [
        "",
        'The paper (§4.2) says games "produce tens of tokens of output" and that accurate estimates "can be obtained '
        "for under "
        f'1K tokens". Per decision that holds here (about {tot["output_tokens"] / max(1, tot["decisions"]):.0f} output '
        "tokens); a "
        f"whole 20-simulation profile of 10-player games, though, is {tot['decisions']:,} decisions, "
        f'{tot["output_tokens"]:,} output tokens and {tot["input_tokens"] / 1e6:.1f}M input tokens here: the "under 1K '
        'tokens" '
        "can only refer to one player's output over a game, not to the profile's bill.",
        "",
    ]
    text = "\n".join(L)
    emit(SECTION, text, write=not a.quick or a.out is not None, out=a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
