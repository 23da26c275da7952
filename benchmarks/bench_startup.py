"""Benchmark: how fast the command line answers (issue 41.6), against the code before, in one run.

    .venv/bin/python benchmarks/bench_startup.py                  # ~3-10 min (the before code is slow to start); writes
    "## Command-line start-up" in RESULTS.md
    .venv/bin/python benchmarks/bench_startup.py --quick          # smoke run: 1 repeat; writes nothing unless --out is
    given
    .venv/bin/python benchmarks/bench_startup.py --before REV     # the baseline commit (default: the last commit before
    the lazy CLI)

Every figure is a whole process, timed from outside (its start-up included): the wall time around
``subprocess.run`` and the CPU time of the finished child (``resource.getrusage(RUSAGE_CHILDREN)``),
for three things measured in turn in every repeat, the order reversed every other repeat, so that
the machine's load hits all of them alike:

- **bare**: ``python -c pass``, the interpreter's own start-up (the yardstick of every ratio);
- **before**: the command line of ``--before`` (a clean install of that commit's tree from ``git
  archive`` + ``pip install --no-deps --target``, run with ``PYTHONPATH`` so that it shadows the
  editable install);
- **after**: the command line of this checkout (the editable install of the virtual environment).

The commands: ``cooplab --help``, ``--version``, ``run cpr --help`` and ``params cpr``, each as the
console script runs it (``cooplab._entry.entry``; the command line's ``main`` for a commit without
it). The ratio of a command is taken repeat by repeat (command / bare of the same repeat) and the
median of those ratios is reported. Then a 2-round scripted LLM run of CPR (3 agents, cache off):
the whole process against its own work, the ``wall_seconds`` of its summary.json (graph build, run
and checkpoints). Last, ``python -X importtime`` of ``cooplab --help`` before and after: how many
modules, how long their imports took (the sum of the self times), by top-level package, and which
heavy packages were imported at all.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _results import RESULTS, machine_info, write_section  # benchmarks/ is on sys.path when run as a script

ROOT = Path(__file__).resolve().parents[1]
BEFORE = "db1a06d"  # main before the lazy command line (issue 41.6)
SECTION = "Command-line start-up"
COMMANDS = (["--help"], ["--version"], ["run", "cpr", "--help"], ["params", "cpr"])
#: packages a command that only answers (help, version, a parameter table) has no use for
HEAVY = (
    "pandas",
    "numpy",
    "matplotlib",
    "scipy",
    "langchain_core",
    "langchain_openai",
    "langchain_anthropic",
    "langchain_google_genai",
    "langchain_ollama",
    "langgraph",
    "langsmith",
    "ray",
    "jax",
    "numpyro",
    "llama_cpp",
    "httpx",
    "docker",
    "tqdm",
    "pydantic",
)

#: drop the editable install's import hook so that PYTHONPATH's copy of cooplab is the one imported
UNEDIT = "import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in getattr(f, '__module__', '')]; "
#: the console script: cooplab._entry.entry where the commit has it, else the command line's own entry
ENTRY = (
    "import sys; sys.argv[0] = 'cooplab'\n"
    "try:\n    from cooplab._entry import entry\nexcept ImportError:\n    from cooplab.cli import entry\nentry()"
)


def build_before(rev: str, work: Path) -> Path:
    """A non-editable install of ``rev`` in ``work/site`` (the export leaves the repository alone)."""
    tree, site = work / "tree", work / "site"
    tree.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", rev], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True, capture_output=True)
    try:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "-q",
                "--no-deps",
                "--no-build-isolation",
                "--target",
                str(site),
                str(tree),
            ],
            check=True,
            capture_output=True,
        )
    finally:
        shutil.rmtree(tree, ignore_errors=True)
    return site


def argv_of(variant: str, args: list[str]) -> list[str]:
    if variant == "bare":
        return [sys.executable, "-c", "pass"]
    return [sys.executable, "-c", (UNEDIT if variant == "before" else "") + ENTRY, *args]


def env_of(variant: str, site: Path | None) -> dict[str, str]:
    env = dict(os.environ, COLUMNS="80")
    if variant == "before" and site is not None:
        env["PYTHONPATH"] = str(site)
    return env


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float, subprocess.CompletedProcess]:
    """(wall s, CPU s of the child, the finished process); cwd outside the checkout, so that the
    current folder does not shadow PYTHONPATH's copy."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=tempfile.gettempdir())
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime), p


def startup(site: Path | None, repeats: int) -> dict:
    """{command: {variant: [(wall, cpu), ...]}}: every command of COMMANDS, bare/before/after in turn."""
    variants = ["bare", "before", "after"] if site is not None else ["bare", "after"]
    out: dict = {" ".join(c): {v: [] for v in variants} for c in COMMANDS}
    for r in range(repeats):
        for c in COMMANDS:
            for v in variants if r % 2 == 0 else list(reversed(variants)):
                wall, cpu, p = timed(argv_of(v, c), env_of(v, site))
                if p.returncode != 0:
                    raise RuntimeError(f"{v}: cooplab {' '.join(c)} exited {p.returncode}: {p.stderr[-500:]}")
                out[" ".join(c)][v].append((wall, cpu))
    return out


def run_args(out: Path) -> list[str]:
    """``cooplab run cpr``: 2 rounds of 3 scripted LLM agents, no cache."""
    model = f"scripted:{ROOT / 'examples' / 'scripted' / 'cautious.json'}"
    return [
        "run",
        "cpr",
        "--agents",
        "llm",
        "--model",
        model,
        "--n-agents",
        "3",
        "--rounds",
        "2",
        "--cache",
        "off",
        "--out",
        str(out),
        "-q",
        "--json",
    ]


def scripted_run(site: Path | None, work: Path, repeats: int) -> dict:
    """{variant: [(whole process wall s, its CPU s, the run's own wall_seconds), ...]} of a 2-round scripted LLM run."""
    variants = ["before", "after"] if site is not None else ["after"]
    out: dict = {v: [] for v in variants}
    for r in range(repeats):
        for v in variants if r % 2 == 0 else list(reversed(variants)):
            d = work / f"run-{v}-{r}"
            wall, cpu, p = timed(argv_of(v, run_args(d)), env_of(v, site))
            if p.returncode != 0:
                raise RuntimeError(f"{v}: the scripted run exited {p.returncode}: {p.stderr[-500:]}")
            out[v].append((wall, cpu, float(json.loads(p.stdout)["wall_seconds"])))
            shutil.rmtree(d, ignore_errors=True)
    return out


def importtime(variant: str, site: Path | None, args: list[str]) -> dict:
    """``python -X importtime`` of one command: modules, the sum of their self times, by top-level
    package, and the heavy packages among them."""
    argv = argv_of(variant, args)
    p = subprocess.run(
        [argv[0], "-X", "importtime", *argv[1:]],
        env=env_of(variant, site),
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
    )
    by_pkg: dict[str, int] = {}
    n = 0
    for line in p.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _, name = line[len("import time:") :].split("|", 2)
        top = name.strip().split(".")[0]
        by_pkg[top] = by_pkg.get(top, 0) + int(self_us)
        n += 1
    return {
        "modules": n,
        "self_ms": sum(by_pkg.values()) / 1e3,
        "by_pkg": by_pkg,
        "heavy": [h for h in HEAVY if h in by_pkg],
    }


def ratios(rows: list[tuple[float, float]], bare: list[tuple[float, float]], k: int) -> float:
    return statistics.median(a[k] / b[k] for a, b in zip(rows, bare, strict=False))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--before", default=BEFORE, help=f"baseline commit (default {BEFORE}); 'none': measure this checkout only"
    )
    ap.add_argument("--repeats", type=int, default=10, help="repeats of every command (default 10)")
    ap.add_argument("--run-repeats", type=int, default=3, help="repeats of the scripted run (default 3)")
    ap.add_argument("--quick", action="store_true", help="1 repeat of everything (a smoke run)")
    ap.add_argument("--out", type=Path, default=None, help="write the section here instead of benchmarks/RESULTS.md")
    a = ap.parse_args()
    if a.repeats < 1 or a.run_repeats < 1:
        ap.error("--repeats and --run-repeats must be at least 1")
    if a.quick:
        a.repeats = a.run_repeats = 1
    head = machine_info()
    try:
        cpu = next(
            (
                ln.split(":", 1)[1].strip()
                for ln in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
                if ln.startswith("Model name")
            ),
            "?",
        )
    except OSError:
        cpu = "?"
    head.insert(2, f"- CPU (lscpu): {cpu}")
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        work = Path(tmp)
        site = None if a.before == "none" else build_before(a.before, work)
        st = startup(site, a.repeats)
        run = scripted_run(site, work, a.run_repeats)
        both = ["before", "after"] if site is not None else ["after"]
        imp = {v: importtime(v, site, ["--help"]) for v in both}
        imp_run = {v: importtime(v, site, run_args(work / f"importtime-{v}")) for v in both}
    try:
        end_load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        end_load = "?"
    variants = [v for v in ("before", "after") if v in next(iter(st.values()))]
    cmd = f"`.venv/bin/python benchmarks/bench_startup.py{' --quick' if a.quick else ''}`"
    L = [
        f"## {SECTION}",
        "",
        f'{cmd}: the command line of this checkout ("after") against commit `{a.before}` ("before", a clean '
        "install of its tree) and the bare interpreter (`python -c pass`), measured in turn in the same run. Whole "
        "processes, "
        f"start-up included; medians of {a.repeats} repeats; a ratio is taken repeat by repeat against the bare start "
        "of the same "
        "repeat (target: <= 5x).",
        "",
        *head,
        "",
        "| command | bare ms (wall / CPU) | "
        + " | ".join(f"{v} ms (wall / CPU) | {v} / bare (wall / CPU)" for v in variants)
        + " |",
        "| --- | ---: | " + " | ".join("---: | ---:" for _ in variants) + " |",
    ]
    for c, res in st.items():
        bare = res["bare"]
        cells = [
            f"{statistics.median(w for w, _ in bare) * 1e3:.0f} / {statistics.median(c_ for _, c_ in bare) * 1e3:.0f}"
        ]
        for v in variants:
            cells.append(
                f"{statistics.median(w for w, _ in res[v]) * 1e3:.0f} / "
                f"{statistics.median(c_ for _, c_ in res[v]) * 1e3:.0f}"
            )
            cells.append(f"**{ratios(res[v], bare, 0):.1f}x / {ratios(res[v], bare, 1):.1f}x**")
        L.append(f"| `cooplab {c}` | " + " | ".join(cells) + " |")
    L += [
        "",
        "2-round scripted LLM run of CPR (`run cpr --agents llm --model scripted:examples/scripted/cautious.json "
        "--n-agents 3 "
        f"--rounds 2 --cache off -q --json`), medians of {a.run_repeats} runs each (target: the whole process <= its "
        "own work + 0.5 s; "
        "its own work: the summary's `wall_seconds`, graph build, run and checkpoints):",
        "",
        "| code | whole process wall s | whole process CPU s | its own work s | the rest s (wall) |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for v, rows in run.items():
        whole, cpu_s, own = (statistics.median(r[k] for r in rows) for k in range(3))
        rest = statistics.median(w - o for w, _, o in rows)
        L.append(f"| {v} | {whole:.2f} | {cpu_s:.2f} | {own:.2f} | **{rest:.2f}** |")
    L += [
        "",
        "`python -X importtime` (one run each; the sum of the modules' self times, which the instrumentation and the "
        "load inflate "
        "alike for both):",
        "",
        "| code | command | modules | import time ms | heaviest packages (ms) | heavy packages imported |",
        "| --- | --- | ---: | ---: | --- | --- |",
    ]
    for what, table in (("--help", imp), ("the scripted run", imp_run)):
        for v, r in table.items():
            top = sorted(r["by_pkg"].items(), key=lambda kv: -kv[1])[:10]
            L.append(
                f"| {v} | {what} | {r['modules']} | {r['self_ms']:.0f} | "
                f"{', '.join(f'{k} {us / 1e3:.0f}' for k, us in top)} | "
                f"{', '.join(r['heavy']) or 'none'} |"
            )
    L += ["", f"- load average at the end: {end_load}", ""]
    text = "\n".join(L)
    print(text)
    if a.out is not None or not a.quick:
        write_section(SECTION, text, a.out or RESULTS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
