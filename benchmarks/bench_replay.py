"""Benchmark: a rerun answered entirely from the response cache against the first run (issue 41, point 3).

    .venv/bin/python benchmarks/bench_replay.py                 # ~2-4 min; writes "## Cached replay" in
    benchmarks/RESULTS.md
    .venv/bin/python benchmarks/bench_replay.py --quick         # tiny sizes, prints only (the smoke test)
    .venv/bin/python benchmarks/bench_replay.py --before /work/main/.venv/bin/python
                                                                # adds a "before" column: the same measurement with
                                                                # another checkout's interpreter, interleaved with ours
    .venv/bin/python benchmarks/bench_replay.py --warm 3        # science: also 3 more reruns in each worker process
                                                                # (what a rerun costs in a process that ran one)

Each measurement runs in a fresh process (one per code version), through the Python API exactly as
the command line does (``cooplab.run``: the runner, checkpoints, ledger, traces.jsonl, tables, the
run directory), twice with one response cache on a new SQLite file: the first run calls the
scripted model, the second run (into a new folder) is answered entirely by the cache. Asserted for
every pair: the replay made no model call (every ledger call is ``cached``), and its results equal
the first run's (the CPR rounds table; the science scores and ledger).

(a) **CPR LLM society** (``cooplab run cpr --agents llm``): N = 20 agents, 5 rounds, the scripted
    model of ``examples/scripted/cautious.json`` with a fixed latency per call. Two latencies: 1 s,
    what a hosted model takes for a short JSON answer (0.5-2 s), and 20 ms, which leaves almost only
    the framework's own cost in the first run, so the ratio shows what a replay itself costs.
(b) **Science team** (``cooplab run science --team llm`` with the oracle team's scripted model and a
    fixed latency; ecology, small data, team size 2, local sandbox backend). A replay answers every
    model call and every ``run_code`` call from the cache (sandbox/replay.py: a call is keyed by the
    sandbox, the seed, the agent and the agent's code so far, and charged the seconds the first run
    was charged), so it starts no sandbox; asserted: the replay ran no code and charged the same
    sandbox seconds. A "before" interpreter that predates that runs every tool call again; its
    sandbox seconds are shown beside the walls.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SECTION = "Cached replay"
ROOT = Path(__file__).resolve().parents[1]
CAUTIOUS = ROOT / "examples" / "scripted" / "cautious.json"


# ------------------------------------------------------------------------------------------
# the worker: one first run and one replay, in this process, with whatever cooplab it imports
# ------------------------------------------------------------------------------------------
def _timed(fn):
    t0 = time.perf_counter()
    c0 = time.process_time()
    out = fn()
    return out, time.perf_counter() - t0, time.process_time() - c0


def _ledger(run) -> dict:
    lg = run.summary.ledger
    return {"calls": int(lg.calls), "cached_calls": int(lg.cached_calls)}


def worker_cpr(n: int, rounds: int, latency: float, tmp: Path) -> dict:
    import cooplab

    script = json.loads(CAUTIOUS.read_text())
    script["latency"] = latency
    model = tmp / "model.json"
    model.write_text(json.dumps(script))
    kw = dict(
        task="cpr",
        agents="llm",
        model=f"scripted:{model}",
        n_agents=n,
        rounds=rounds,
        seed=7,
        quiet=True,
        cache=str(tmp / "cache.sqlite"),
        max_concurrency=1000,
    )
    first, wf, cf = _timed(lambda: cooplab.run(out=tmp / "first", **kw))
    replay, wr, cr = _timed(lambda: cooplab.run(out=tmp / "replay", **kw))
    for r in (first, replay):
        assert r.status == "completed", (r.status, r.stopped)
    lf, lr = _ledger(first), _ledger(replay)
    assert lf["cached_calls"] == 0 and lf["calls"] > 0, lf
    assert lr["cached_calls"] == lr["calls"] == lf["calls"], (lf, lr)
    a, b = first.rounds, replay.rounds
    assert a.drop(columns=[c for c in a.columns if "second" in c or "wall" in c], errors="ignore").equals(
        b.drop(columns=[c for c in b.columns if "second" in c or "wall" in c], errors="ignore")
    ), "the replay's rounds differ"
    return {"first": wf, "replay": wr, "first_cpu": cf, "replay_cpu": cr, "calls": lf["calls"]}


def worker_science(latency: float, backend: str, tmp: Path, quick: bool = False, warm: int = 0) -> dict:
    import cooplab
    from cooplab.agents.models.scripted import register_builtin
    from cooplab.tasks.science.scripted import oracle_model

    def slow_oracle(task: str):
        m = oracle_model(task)
        m.latency = latency
        return m

    register_builtin("bench-replay-oracle", slow_oracle)
    small = ["plan_steps=1", "max_steps=2", "synthesis_steps=1", "deliberation_rounds=0"] if quick else []
    kw = dict(
        task="science",
        model="builtin:bench-replay-oracle:ecology",
        set=["data_size=small", *small],
        team_size=2,
        sandbox_backend=backend,
        quiet=True,
        cache=str(tmp / "cache.sqlite"),
    )
    first, wf, cf = _timed(lambda: cooplab.run(out=tmp / "first", **kw))
    replay, wr, cr = _timed(lambda: cooplab.run(out=tmp / "replay", **kw))
    lf, lr = _ledger(first), _ledger(replay)
    assert first.status == replay.status, (first.status, replay.status)
    assert lf["cached_calls"] == 0 and lf["calls"] > 0, lf
    assert lr["cached_calls"] == lr["calls"] == lf["calls"], (lf, lr)
    sf, sr = first.summary.results, replay.summary.results
    assert sf.scores == sr.scores, (sf.scores, sr.scores)

    def sandbox(run) -> float:
        return float(sum((run.summary.results.sandbox_seconds_by_team or {}).values()))

    # code kept in the cache (sandbox/replay.py; absent from a "before" interpreter that predates it)
    executed = getattr(replay.summary.llm, "sandbox_executed", None)
    if executed is not None:
        assert executed == 0, replay.summary.llm
        assert sandbox(first) == sandbox(replay), (sandbox(first), sandbox(replay))

    # further reruns in this process (--warm): what a rerun costs once the process has made one
    warm_runs = [_timed(lambda i=i: cooplab.run(out=tmp / f"warm{i}", **kw)) for i in range(warm)]
    for run, _, _ in warm_runs:
        assert _ledger(run)["cached_calls"] == lf["calls"] and run.summary.results.scores == sf.scores

    return {
        "first": wf,
        "replay": wr,
        "first_cpu": cf,
        "replay_cpu": cr,
        "warm": [w for _, w, _ in warm_runs],
        "warm_cpu": [c for _, _, c in warm_runs],
        "calls": lf["calls"],
        "sandbox_first": sandbox(first),
        "sandbox_replay": sandbox(replay),
        "code_runs_replay": executed,
    }


def worker(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        if args.worker == "cpr":
            out = worker_cpr(args.n, args.rounds, args.latency, tmp)
        else:
            out = worker_science(args.latency, args.backend, tmp, quick=args.quick, warm=args.warm)
    print("RESULT " + json.dumps(out))
    return 0


# ------------------------------------------------------------------------------------------
# the driver
# ------------------------------------------------------------------------------------------
def measure(
    python: str,
    kind: str,
    latency: float,
    *,
    n: int,
    rounds: int,
    backend: str,
    quick: bool,
    warm: int = 0,
    gc: str = "cooplab",
) -> dict:
    cmd = [
        python,
        str(Path(__file__).resolve()),
        "--worker",
        kind,
        "--latency",
        repr(latency),
        "--n",
        str(n),
        "--rounds",
        str(rounds),
        "--backend",
        backend,
        *(["--quick"] if quick else []),
        *(["--warm", str(warm)] if warm and kind == "science" else []),
        "--gc",
        gc,
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if p.returncode != 0 or line is None:
        raise SystemExit(f"bench_replay: the {kind} worker ({python}) failed:\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}")
    return json.loads(line[len("RESULT ") :])


def fmt(s: float) -> str:
    return f"{s * 1000:.0f} ms" if s < 10 else f"{s:.1f} s"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="tiny sizes, one repeat, print only")
    ap.add_argument(
        "--before", default=None, help="the interpreter of another checkout (e.g. main's .venv/bin/python): its column"
    )
    ap.add_argument(
        "--repeats", type=int, default=None, help="pairs per configuration and code version (median shown; default 3)"
    )
    ap.add_argument(
        "--backend", default="local", choices=("local", "docker"), help="the science team's sandbox backend"
    )
    ap.add_argument(
        "--warm",
        type=int,
        default=0,
        help="science: this many more reruns after the replay, in the same process (the rerun of a notebook "
        "or a sweep's worker); their mean wall and CPU are added as columns",
    )
    ap.add_argument("--out", type=Path, default=None)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _results import apply_gc, gc_option

    gc_option(ap)
    ap.add_argument("--worker", choices=("cpr", "science"), help=argparse.SUPPRESS)
    ap.add_argument("--latency", type=float, default=0.0, help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, default=20, help=argparse.SUPPRESS)
    ap.add_argument("--rounds", type=int, default=5, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if not 0 <= a.warm <= 100:
        raise SystemExit(f"bench_replay: --warm must be a whole number from 0 to 100, got {a.warm}")
    if a.worker:
        apply_gc(a.gc)
        return worker(a)
    from _results import emit, machine_info

    head = machine_info(versions=True, docker=a.backend == "docker")
    t_start = time.perf_counter()
    n, rounds = (4, 2) if a.quick else (20, 5)
    repeats = a.repeats or (1 if a.quick else 3)
    configs = (
        [("cpr", 1.0), ("cpr", 0.02), ("science", 1.0), ("science", 0.02)]
        if not a.quick
        else [("cpr", 0.02), ("science", 0.0)]
    )
    versions = [("after", sys.executable)] + ([("before", a.before)] if a.before else [])
    res: dict[tuple, list[dict]] = {}
    for kind, lat in configs:
        for _ in range(repeats):
            for name, py in reversed(versions):  # before and after interleaved, in the same minutes
                r = measure(py, kind, lat, n=n, rounds=rounds, backend=a.backend, quick=a.quick, warm=a.warm, gc=a.gc)
                res.setdefault((kind, lat, name), []).append(r)
                print(
                    f"{kind} latency {lat:g} s {name}: first {r['first']:.3f} s, replay {r['replay']:.3f} s, "
                    f"{r['first'] / r['replay']:.1f}x",
                    flush=True,
                )

    def med(kind, lat, name, key):
        vals = res[(kind, lat, name)]
        if key == "speedup":
            return statistics.median(v["first"] / v["replay"] for v in vals)
        return statistics.median(v[key] for v in vals)

    L = [
        f"## {SECTION}",
        "",
        f"`.venv/bin/python benchmarks/bench_replay.py{' --quick' if a.quick else ''}"
        f"{' --before ' + a.before if a.before else ''}` (took {time.perf_counter() - t_start:.0f} s; {repeats} "
        "pair(s) per row, "
        "medians; each pair in a fresh process).",
        "",
        *head,
        "",
        "A pair = the first run (scripted model of the stated latency per call, cache on a new SQLite file) and a "
        "rerun of the same "
        "config into a new folder answered entirely from that cache, both through `cooplab.run` (runner, checkpoints, "
        "ledger, "
        "traces.jsonl, tables). Asserted: the rerun made no model call and its results equal the first run's.",
        "",
    ]
    cols = [name for name, _ in versions]
    L.append(
        "| what | latency per call | model calls | "
        + " | ".join(f"first ({c}) | replay ({c}) | replay CPU ({c}) | speedup ({c})" for c in cols)
        + " |"
    )
    L.append("|---|---:|---:|" + "---:|" * (4 * len(cols)))
    for kind, lat in configs:
        what = (
            f"CPR society N = {n}, {rounds} rounds"
            if kind == "cpr"
            else f"science team (ecology, small, size 2, {a.backend} sandbox)"
        )
        cells = []
        for c in cols:
            cells += [
                fmt(med(kind, lat, c, "first")),
                fmt(med(kind, lat, c, "replay")),
                fmt(med(kind, lat, c, "replay_cpu")),
                f"**{med(kind, lat, c, 'speedup'):.1f}x**",
            ]
        calls = res[(kind, lat, "after")][0]["calls"]
        L.append(f"| {what} | {lat * 1000:g} ms | {calls} | " + " | ".join(cells) + " |")
    sci = [(lat, res[("science", lat, "after")]) for kind, lat in configs if kind == "science"]
    if sci:
        L += [
            "",
            "Science: sandbox seconds charged (the ledger's `sandbox_seconds`; a replay that keeps code in the "
            "cache charges the first run's and runs no code): "
            + "; ".join(
                f"{lat * 1000:g} ms model: first {v[0]['sandbox_first']:.2f} s, replay {v[0]['sandbox_replay']:.2f} s"
                for lat, v in sci
            )
            + ".",
        ]
    if a.warm and sci:
        L += [
            "",
            f"Science, {a.warm} more rerun(s) in each worker process after the replay (a process that has run the "
            "item before: a notebook, a sweep's worker), mean per rerun, median over the pairs:",
            "",
            "| latency per call | " + " | ".join(f"warm rerun ({c}) | its CPU ({c})" for c in cols) + " |",
            "|---:|" + "---:|" * (2 * len(cols)),
        ]
        for lat, _ in sci:
            cells = []
            for c in cols:
                vals = res[("science", lat, c)]  # (the worker is this file, whichever interpreter runs it)
                cells += [
                    fmt(statistics.median(statistics.mean(v["warm"]) for v in vals)),
                    fmt(statistics.median(statistics.mean(v["warm_cpu"]) for v in vals)),
                ]
            L.append(f"| {lat * 1000:g} ms | " + " | ".join(cells) + " |")
    L.append("")
    emit(SECTION, "\n".join(L), write=not a.quick or a.out is not None, out=a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
