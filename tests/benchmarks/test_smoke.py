"""Smoke runs of every benchmark in ``benchmarks/`` at the smallest size its command line allows, so
that a benchmark cannot break unseen (bench_llm.py crashed for weeks after a refactor because
nothing ran it).

Each test runs the script as a real subprocess from the repository root, the way the README runs
it (``python benchmarks/bench_X.py ...``), writes its section into pytest's ``tmp_path`` (never
into ``benchmarks/RESULTS.md``: checked before and after every run), and checks that the run
exited 0 and printed/wrote the rows it should. No test checks a timing: numbers are noise at these
sizes; they live in RESULTS.md only.

Markers and guards follow the rest of the suite: ``docker`` tests take the ``docker_ready``
fixture (skipped without Docker, FAILED when CI is set); the local model (llama.cpp + SmolLM2)
is ``integration`` and, like the other integration tests, is not skipped when missing; Mesa is a
``dev`` extra (installed with pytest) and not guarded; Ray is guarded like
tests/runner/test_sweep_executors.py (skipped without it, FAILED when CI is set).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
RESULTS = BENCH / "RESULTS.md"

#: every benchmark script and the test that smoke-runs it (a new bench_*.py must be added here)
COVERED = {
    "bench_cpr.py": "test_bench_cpr",
    "bench_games.py": "test_bench_games",
    "bench_fork_local.py": "test_bench_fork_local",
    "bench_games_llm.py": "test_bench_games_llm",
    "bench_llm.py": "test_bench_llm",
    "bench_llm_scale.py": "test_bench_llm_scale",
    "bench_model_processes.py": "test_bench_model_processes",
    "bench_plan.py": "test_bench_plan",
    "bench_replay.py": "test_bench_replay",
    "bench_local_batch.py": "test_bench_local_batch",
    "bench_local_build.py": "test_bench_local_build",
    "bench_local_load.py": "test_bench_local_load",
    "bench_local_reuse.py": "test_bench_local_reuse",
    "bench_local_threads.py": "test_bench_local_threads",
    "bench_runner.py": "test_bench_runner",
    "bench_sandbox.py": "test_bench_sandbox",
    "bench_science.py": "test_bench_science",
    "bench_startup.py": "test_bench_startup",
    "bench_sweep.py": "test_bench_sweep",
    "bench_tools.py": "test_bench_tools",
}


def _digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


def run_bench(script: str, *args: str, tmp_path: Path, own_tmpdir: bool = True, timeout: float = 900) -> str:
    """Run ``benchmarks/<script> args`` from the repository root; return its stdout (exit 0 asserted).

    ``own_tmpdir``: point TMPDIR into ``tmp_path`` so the script's temporary files (run
    directories, installs) land there too. Off for Ray, whose AF_UNIX socket paths under TMPDIR
    must stay below 107 bytes (pytest's tmp_path is too deep)."""
    env = dict(os.environ)
    if own_tmpdir:
        tmp = tmp_path / "tmp"
        tmp.mkdir(exist_ok=True)
        env["TMPDIR"] = str(tmp)
    before = _digest(RESULTS)
    p = subprocess.run(
        [sys.executable, f"benchmarks/{script}", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert p.returncode == 0, (
        f"{script} exited {p.returncode}\n--- stdout\n{p.stdout[-4000:]}\n--- stderr\n{p.stderr[-4000:]}"
    )
    assert _digest(RESULTS) == before, f"{script} changed benchmarks/RESULTS.md"
    return p.stdout


def rows(markdown: str, first: str | None = None) -> list[list[str]]:
    """The cells of the markdown table rows (separator rows left out), optionally only the rows whose
    first cell is ``first``."""
    out = []
    for line in markdown.splitlines():
        line = line.strip()
        if not line.startswith("|") or set(line) <= set("|-: "):
            continue
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        if first is None or cells[0] == first:
            out.append(cells)
    return out


def section(path: Path, title: str) -> str:
    text = path.read_text()
    assert f"\n{title}\n" in f"\n{text}", f"no '{title}' in {path}:\n{text[:2000]}"
    return text[text.index(title) :]


def test_every_benchmark_has_a_smoke_test():
    scripts = {p.name for p in BENCH.glob("bench_*.py")}
    assert scripts == set(COVERED), f"benchmarks without a smoke test: {sorted(scripts - set(COVERED))}"
    for name in COVERED.values():
        assert callable(globals().get(name)), name


def _need_ray() -> None:
    if importlib.util.find_spec("ray") is None:
        msg = "Ray is not installed: scripts/setup.sh installs the 'ray' extra (pip install -e .[ray])"
        if os.environ.get("CI"):
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)


# --- no external parts beyond the dev extra (Mesa) -------------------------------------------------
@pytest.mark.slow
def test_bench_cpr(tmp_path):
    # 1 replicate per cell of the Fig. 3 grid (110 societies), 1 repeat; the CPU-time split and the
    # cProfile run (--profile always, the default) are kept: they are code paths of their own; this
    # checkout is also its own --baseline (the before/after path: a worker importing another checkout)
    out = tmp_path / "results.md"
    stdout = run_bench(
        "bench_cpr.py",
        "--replicates",
        "1",
        "--repeats",
        "1",
        "--baseline",
        str(ROOT),
        "--out",
        str(out),
        tmp_path=tmp_path,
    )
    text = section(out, "## CPR ABM")
    variants = {r[0]: r for r in rows(text) if r[0] != "variant"}
    coop = [r for k, r in variants.items() if k.startswith("cooplab (run_cpr, InMemorySaver, durability=exit")]
    before = [r for k, r in variants.items() if k.startswith("cooplab BEFORE")]
    assert (
        len(coop) == len(before) == 1
        and coop[0][1] == before[0][1] == "110"
        and "plain numpy floor (same generators)" in variants
    )
    assert [r for k, r in variants.items() if k.startswith("Mesa ") and "(full sweep)" in k][0][1] == "110"
    ratios = {r[0].split(" (")[0]: r for r in rows(text) if r[0].startswith(("before", "after"))}
    assert set(ratios) == {"before", "after"} and all(len(r) == 5 for r in ratios.values())
    assert "Where the CPU time goes" in text and "Load (`uptime`) at the start" in text
    assert "exact, all 110 societies" in stdout and f"wrote section '## CPR ABM' of {out}" in stdout


@pytest.mark.slow
def test_bench_games(tmp_path):
    from cooplab.tasks.games.params import GAMES

    out = tmp_path / "results.md"
    run_bench("bench_games.py", "--simulations", "20", "--repeats", "1", "--out", str(out), tmp_path=tmp_path)
    text = section(out, "## Behavioral games")
    assert "20 simulations of 2 groups of 5 per game" in text
    assert [r[0] for r in rows(text) if r[0] != "game"] == list(GAMES)


@pytest.mark.slow
def test_bench_games_llm(tmp_path):
    # 1 simulation, 2 rounds (collective risk's threshold needs at least 2), 10 ms scripted latency,
    # no local model; (c) always plays the 20-simulation profile with the instant model (~7 s)
    from cooplab.tasks.games.params import GAMES

    out = tmp_path / "results.md"
    stdout = run_bench(
        "bench_games_llm.py",
        "--simulations",
        "1",
        "--rounds",
        "2",
        "--latency",
        "0.01",
        "--no-local",
        "--out",
        str(out),
        tmp_path=tmp_path,
    )
    text = section(out, "## Behavioral games, LLM players")
    a = [r for r in rows(text) if r[0] in GAMES]
    assert [r[0] for r in a] == list(GAMES) and all(r[1] == "1" for r in a)
    assert "### (c) Tokens and cost of a 20-simulation profile" in text and "### (b)" not in text
    assert "(c) 20-simulation profile:" in stdout


@pytest.mark.slow
def test_bench_plan(tmp_path):
    # a scripted model, 5 rounds (a pilot of 4): the plan is exact there
    out = tmp_path / "results.md"
    run_bench("bench_plan.py", "--model", "scripted", "--rounds", "5", "--out", str(out), tmp_path=tmp_path)
    total = rows(section(out, "## Plan: predicted vs used"), "**total**")[0]
    assert total[1] == total[2] and total[3] == total[4]


@pytest.mark.slow
def test_bench_science(tmp_path):
    # --quick: one oracle and one garbage run for (a), the oracle on the first task for (b), local
    # sandbox backend, no local model
    out = tmp_path / "results.md"
    run_bench("bench_science.py", "--quick", "--out", str(out), tmp_path=tmp_path)
    text = section(out, "## Science teams")
    teams = [r for r in rows(text) if r[0] in ("oracle", "garbage")]
    assert [r[:2] for r in teams] == [["oracle", "1"], ["garbage", "1"]]
    for r in teams:  # the graph's CPU per step, measured in the run's own process, and its ratio to the bare step
        cpu_ms, ratio = float(r[4].strip("*").removesuffix(" ms")), float(r[5].removesuffix("x"))
        assert cpu_ms > 0 and ratio > 0
    ecology = rows(text, "ecology")
    assert len(ecology) == 1 and ecology[0][-3:] == ["1.00", "1.00", "1.00"]  # the oracle scores fully
    assert "(local sandbox)" in text


@pytest.mark.slow
def test_bench_replay(tmp_path):
    # --quick: a 4-agent, 2-round CPR society (20 ms model) and a short science team item (local
    # sandbox, no model latency), each run and rerun from its cache through cooplab.run; the worker
    # asserts that the rerun made no model call, ran no code and gave the first run's results
    out = tmp_path / "results.md"
    run_bench("bench_replay.py", "--quick", "--warm", "1", "--out", str(out), tmp_path=tmp_path)
    text = section(out, "## Cached replay")
    (warm,) = rows(text, "0 ms")  # the warm rerun's row: a wall and a CPU time, the worker checked its results
    assert len(warm) == 3 and all(re.fullmatch(r"\d+ ms|\d+\.\d s", v) for v in warm[1:]), warm
    cpr, sci = (
        rows(text, "CPR society N = 4, 2 rounds"),
        rows(text, "science team (ecology, small, size 2, local sandbox)"),
    )
    assert len(cpr) == 1 and len(sci) == 1
    assert int(cpr[0][2]) > 0 and int(sci[0][2]) > 0  # model calls made by the first run, all replayed by the rerun
    charged = re.search(r"0 ms model: first ([0-9.]+) s, replay ([0-9.]+) s", text)
    assert charged and float(charged[1]) > 0 and charged[1] == charged[2]  # the rerun charged the first run's seconds


@pytest.mark.slow
def test_bench_runner(tmp_path):
    # the baseline commit (default --before) is exported with git archive and pip-installed into
    # tmp_path; 1 repeat of 1 society x 1 round, and the checkpoint growth at 1 round
    out = tmp_path / "results.md"
    run_bench(
        "bench_runner.py",
        "--repeats",
        "1",
        "--replicates",
        "1",
        "--rounds",
        "1",
        "--growth-rounds",
        "1",
        "--out",
        str(out),
        tmp_path=tmp_path,
    )
    text = section(out, "## Task runner")
    assert [r[0] for r in rows(text) if r[0] in ("before", "after")] == ["before", "after", "before", "after"]
    assert "**after / before = " in text
    assert not any((tmp_path / "tmp").glob("bench-runner-*"))  # the export and the install are cleaned up


@pytest.mark.slow
def test_bench_startup(tmp_path):
    # the baseline commit (default --before) is exported with git archive and pip-installed into
    # tmp_path; every command and the scripted run once, importtime of --help once
    out = tmp_path / "results.md"
    run_bench("bench_startup.py", "--quick", "--out", str(out), tmp_path=tmp_path)
    text = section(out, "## Command-line start-up")
    assert [r[0] for r in rows(text) if r[0].startswith("`cooplab ")] == [
        "`cooplab --help`",
        "`cooplab --version`",
        "`cooplab run cpr --help`",
        "`cooplab params cpr`",
    ]
    assert [r[0] for r in rows(text) if r[0] in ("before", "after")] == [
        "before",
        "after",
        "before",
        "after",
        "before",
        "after",
    ]
    assert not any((tmp_path / "tmp").glob("bench-startup-*"))  # the export and the install are cleaned up


@pytest.mark.slow
def test_bench_sweep(tmp_path):
    _need_ray()
    # 2 cells (2 beta x 1 r) of 1 society, 1 science run, local sandbox (the default is Docker;
    # the science cells only pass the backend on). TMPDIR is left alone: see run_bench.
    out = tmp_path / "results.md"
    run_bench(
        "bench_sweep.py",
        "--quick",
        "--betas",
        "2",
        "--rs",
        "1",
        "--replicates",
        "1",
        "--science-runs",
        "1",
        "--sandbox",
        "local",
        "--out",
        str(out),
        tmp_path=tmp_path,
        own_tmpdir=False,
    )
    text = section(out, "## Sweeps: local vs Ray")
    assert "as 2 cells (2 beta x 1 r, 1 replicates each" in text
    assert (
        rows(text, "local (threads)") and rows(text, "Ray (2 CPUs, running)") and rows(text, "7,310 oracle-team runs")
    )
    assert "1 runs of the scripted oracle team (ecology task, local sandbox)" in text


# --- the local model (llama.cpp + SmolLM2-135M) -------------------------------------------------
@pytest.mark.slow
@pytest.mark.integration
def test_bench_llm(tmp_path):
    # --quick (the smallest plan: N = 10 and 100, 3 rounds; 100 ms latency for 2 rounds; replay of
    # 2 rounds), one local-model decision, and the cProfile of the graph (default --profile always)
    out = tmp_path / "results.md"
    stdout = run_bench("bench_llm.py", "--quick", "--local-decisions", "1", "--out", str(out), tmp_path=tmp_path)
    text = section(out, "## LLM agent layer")
    a = [r for r in rows(text) if r[0] in ("10", "100") and len(r) == 11]
    assert [(r[0], r[1]) for r in a] == [("10", "3"), ("100", "3")]
    assert a[0][2] == "100 (30/30/20/20)"  # harvest/punish/propose/vote decisions captured from the graph
    replay = rows(text, "replay")
    assert len(replay) == 1 and replay[0][-1] == "0"  # the cached replay made no model call
    assert len([r for r in rows(text, "1") if len(r) == 12]) == 1  # (d): one local-model decision
    assert "### Profile (N = 100)" in text
    assert "(a) N=10: 100 decisions" in stdout


def test_bench_llm_scale(tmp_path):
    # --quick: N = 10 and 100 (1 round each) beside ainvoke and the loopback HTTP stub; the round
    # ratios at tiny sizes; the run-directory bytes at N = 10; then --report of that measurement
    # against itself into tmp_path
    measured, out = tmp_path / "m.json", tmp_path / "results.md"
    stdout = run_bench("bench_llm_scale.py", "--quick", "--gc", "python", "--json", str(measured), tmp_path=tmp_path)
    assert "(a) N=100:" in stdout and "(c) N=10:" in stdout
    assert json.loads(measured.read_text())["gc"] == [700, 10, 10]  # Python's own thresholds, as asked
    run_bench("bench_llm_scale.py", "--report", str(measured), str(measured), "--out", str(out), tmp_path=tmp_path)
    text = section(out, "## LLM societies at scale, issue 41.1")
    assert "thresholds (`gc.get_threshold()`): before 700, 10, 10, after 700, 10, 10" in text
    a = [r for r in rows(text) if len(r) == 8 and r[0] != "N"]
    assert [r[0] for r in a] == ["10", "100"]
    assert all(r[-1].endswith(("ms", "us")) for r in a)  # the raw HTTP floor was measured
    assert [r[0] for r in rows(text) if len(r) == 6 and r[0] != "N"] == ["10"]


@pytest.mark.slow
@pytest.mark.integration
def test_bench_local_build(tmp_path):
    # A full run builds a native llama-cpp-python wheel from source when none is cached
    # (GGML_NATIVE=ON, about 6 minutes): too slow for the suite. The portable wheel of
    # scripts/setup.sh stands in for it via --native-wheel; everything else runs for real: both
    # installs into --target directories (under tmp_path), the four configurations in their own
    # processes (in-process llama.cpp and cooplab's model process) on 1 decision, the report.
    spec = importlib.util.spec_from_file_location("bench_local_build", BENCH / "bench_local_build.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # standard library imports only
    wheels = Path.home() / ".cache" / "cooplab" / "wheels" / f"llama-cpp-python-{mod.LLAMA_VERSION}-{mod.baseline()}"
    wheel = mod.find_wheel(wheels)
    assert wheel is not None, f"no portable llama-cpp-python wheel in {wheels}: run bash scripts/setup.sh"
    out = tmp_path / "results.md"
    run_bench(
        "bench_local_build.py",
        "--native-wheel",
        str(wheel),
        "--portable-wheel",
        str(wheel),
        "--decisions",
        "1",
        "--repeats",
        "1",
        "--out",
        str(out),
        tmp_path=tmp_path,
    )
    text = section(out, "## Local model build")
    configs = [r for r in rows(text) if r[0].startswith(("native,", "portable,"))]
    assert [r[0] for r in configs] == [
        "native, in-process, extra bufts on",
        "portable, in-process, extra bufts on",
        "portable, in-process, extra bufts off",
        "portable, model process, extra bufts off",
    ]
    assert all(r[1] != "failed" and r[5] == "1/1" for r in configs), configs  # same wheel, same seed: the same text


def test_bench_local_reuse_reports_items_when_a_configuration_ran_none(monkeypatch):
    # --off-items 0 (the usual setting: a science item takes 20-40 minutes) leaves that configuration
    # without rows: its report must still give the others' rows and ratios (it raised before writing)
    import argparse

    monkeypatch.syspath_prepend(str(BENCH))  # the benchmark imports its helpers as a script does
    spec = importlib.util.spec_from_file_location("bench_local_reuse", BENCH / "bench_local_reuse.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    row = {"item": "q01", "wall": 2000.0, "calls": 79, "in": 110_000, "out": 12_000, "cost": 0.09, "reused": None}
    b = {
        "before": [{**row, "status": "completed"}],
        mod.OFF: [],
        "after": [{**row, "wall": 1000.0, "status": "completed"}],
    }
    text = mod.report(None, b, None, [], argparse.Namespace(team_size=2, items=1))
    table = [r for r in rows(text) if r[0] in ("before", "after", mod.OFF)]
    assert [r[0] for r in table] == ["before", "after", "before", "after"]  # the items, then the means
    assert table[-1][-1] == "2.00x" and mod.OFF not in text


@pytest.mark.slow
@pytest.mark.integration
def test_bench_local_reuse(tmp_path):
    # --quick: (a) the speeds under the OpenMP wait policy as set and 2 turns of 2 interleaved
    # conversations (answers of 4 tokens), no science item, (c) the CPR society of 2 agents for
    # 1 round with and without kept states (no --before: the baseline needs its own checkout)
    out = tmp_path / "results.md"
    stdout = run_bench("bench_local_reuse.py", "--quick", "--out", str(out), tmp_path=tmp_path)
    text = section(out, "## Local model: prompt reuse")
    assert [r[0] for r in rows(text) if r[0].startswith(("every prompt", "kept states"))] == [
        "every prompt read in full",
        "kept states reused",
    ]
    assert "Same answers with and without reuse: **yes**" in text  # kept states never change an answer
    society = {r[0]: r for r in rows(text) if r[0].startswith("after")}
    assert set(society) == {"after, no kept states", "after"} and society["after"][7] == "0"  # no decision differs
    assert "### (b)" not in text and "(c) after:" in stdout


@pytest.mark.integration
def test_bench_local_load(tmp_path):
    # no burner, one configuration with a wait policy and one with a thread count (nothing timed:
    # the rows and that every rate is a positive number)
    out = tmp_path / "results.md"
    run_bench(
        "bench_local_load.py", "--loads", "0", "--configs", "passive", "1thread", "--out", str(out), tmp_path=tmp_path
    )
    text = section(out, "## Local model under load (2026-11-28)")
    table = rows(text)[1:]
    assert [r[:2] for r in table] == [["0", "passive"], ["0", "1thread"]]
    assert all(float(r[2]) > 0 and float(r[3]) > 0 for r in table)


@pytest.mark.integration
def test_bench_local_batch(tmp_path):
    # --quick: a 64-token context, 3 repeats of each batch size (nothing timed: the rows and their arithmetic)
    out = tmp_path / "results.md"
    run_bench("bench_local_batch.py", "--quick", "--out", str(out), tmp_path=tmp_path)
    text = section(out, "## Local model: the cost of a batch of tokens")
    table = rows(text)[1:]  # the header row left out
    assert [r[0] for r in table] == ["1", "2", "4", "8", "16"]
    assert table[0][3] == "1.00x" and table[0][4] == "1.00x"
    for r in table:  # ms per token = ms per evaluation / k
        k, per_eval, per_token = int(r[0]), float(r[1]), float(r[2])
        assert per_eval > 0 and abs(per_token * k - per_eval) <= 0.05 + 0.005 * k  # to the table's rounding
    assert "tokens/s" in text and "context 64 tokens" in text


def test_bench_model_processes(tmp_path):
    # --quick: 6 agents, 1 round, 0/1/2 model processes against the loopback server (nothing timed: the rows,
    # and the benchmark's own check that every variant's decisions and ledger equal the one-process run's)
    out = tmp_path / "results.md"
    run_bench("bench_model_processes.py", "--quick", "--out", str(out), tmp_path=tmp_path)
    text = section(out, "## Model processes: a society's model calls in worker processes")
    table = rows(text)[1:]
    assert [r[0] for r in table] == ["0", "1", "2"]
    assert all(r[1] == "12" for r in table)  # 6 agents x 2 LLM phases (harvest, punish) in one round
    assert table[0][4] == "1.00"


@pytest.mark.integration
def test_bench_local_threads(tmp_path):
    # --quick: no busy process, one call of each kind per configuration, short prompts, answers of 4 tokens
    # (nothing timed: the rows, the thread counts the calls used, and that the answers agree)
    out = tmp_path / "results.md"
    run_bench("bench_local_threads.py", "--quick", "--out", str(out), tmp_path=tmp_path)
    text = section(out, "## Local model: threads on a busy machine")
    table = {r[1]: r for r in rows(text) if r[0] == "0"}
    assert list(table) == ["follows the free cores (default)", "fixed at the cores", "fixed at 1"]
    cores = os.cpu_count() or 1
    assert table["fixed at the cores"][2] == f"{cores} thread{'s' if cores > 1 else ''} x 3"
    assert table["fixed at 1"][2] == "1 thread x 3" and table["fixed at the cores"][5] == "1.00x"
    assert "Same answers in every configuration: **yes**" in text  # the thread count never changes a word


@pytest.mark.slow
@pytest.mark.integration
def test_bench_fork_local(tmp_path):
    # --quick: a 2-fisher, 2-round CPR society on the local model (punishment and group decisions off),
    # forked at round 1 with another regrowth, with and without kept states, and the fresh run of
    # the fork's settings (nothing timed: the table's rows and its counts)
    out = tmp_path / "results.md"
    stdout = run_bench("bench_fork_local.py", "--quick", "--out", str(out), tmp_path=tmp_path)
    text = section(out, "## Local model: forks")
    table: dict[str, list[str]] = {}
    for r in rows(text):  # the first table's rows (the per-round table below repeats the names)
        if r[0] in ("parent", "fork", "fork, no kept states", "fresh run"):
            table.setdefault(r[0], r)
    assert list(table) == ["parent", "fork", "fork, no kept states", "fresh run"]
    calls = {k: int(r[1]) for k, r in table.items()}
    assert calls["fork"] == calls["fork, no kept states"] > 0  # round 2's calls, all live, the same with or without
    assert calls["fork"] < calls["fresh run"] and calls["fork"] < calls["parent"]  # round 1 is not asked again
    reused = {k: int(table[k][3].replace(",", "")) for k in ("fork", "fork, no kept states")}
    assert reused["fork, no kept states"] <= reused["fork"]  # the kept states hold what the last call read, and more
    assert "the same decisions: **yes**" in text  # kept states never change an answer
    assert "fresh run:" in stdout


# --- Docker --------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.docker
def test_bench_sandbox(tmp_path, docker_ready):
    out = tmp_path / "results.md"
    run_bench("bench_sandbox.py", "--n", "1", "--roundtrip-n", "1", "--out", str(out), tmp_path=tmp_path)
    text = section(out, "## Sandbox")
    names = [r[0] for r in rows(text) if r[0] != "measurement"]
    for backend in ("docker", "local"):
        assert [n for n in names if n.startswith(f"{backend}: ")] == [
            f"{backend}: cold session start (create + imports + df load)",
            f"{backend}: warm-pool session start",
            f"{backend}: trivial run_code round trip (`1 + 1`)",
        ]
    assert any(n.startswith("baseline: `docker run --rm`") for n in names)
    assert all(r[1] == "1" for r in rows(text) if r[0] in names)
    assert "Docker unavailable" not in text


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.docker
def test_bench_tools(tmp_path, docker_ready):
    out = tmp_path / "results.md"
    run_bench("bench_tools.py", "--steps", "1", "--per-loop", "1", "--out", str(out), tmp_path=tmp_path)
    text = section(out, "## Tool loop")
    assert "- the garbage collector's thresholds: 50000, 20, 20" in text  # as the console script runs (the default)
    assert "(docker sandbox, default limits; 1 steps per variant" in text
    variants = [r for r in rows(text) if r[0] != "variant"]
    assert [r[1] for r in variants] == [
        "1",
        "1",
        "1",
        "2",
    ]  # three variants, 1 step each; the sandbox alone before and after
    assert variants[0][0].startswith("bare loop") and variants[2][0].startswith("in a graph, as a traced run")
