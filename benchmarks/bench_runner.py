"""Benchmark: the one runner (issue 10) against the code before it, in the same session.

    .venv/bin/python benchmarks/bench_runner.py                 # ~4-6 min; writes "## Task runner" in
    benchmarks/RESULTS.md
    .venv/bin/python benchmarks/bench_runner.py --quick         # smoke run; writes nothing unless --out is given
    .venv/bin/python benchmarks/bench_runner.py --before REV    # the baseline commit (default: the last commit before
    the runner)

Two measurements, each on the current tree ("after") and on a clean build of the baseline commit
("before": the commit's tree from ``git archive`` + ``pip install --no-deps --target``, run with
``PYTHONPATH`` so that it shadows the editable install), alternating before/after per repeat so that
machine load hits both:

1. **Runner overhead per round, CPR rule-based**: ``cooplab run cpr --replicates 100 --rounds 50
   --env rich`` (10 agents, every phase on, SQLite checkpoints), the ``wall_seconds`` of
   summary.json (graph build + run + checkpoints, not process start-up) divided by the rounds run.
   Median of ``--repeats``; the ratio after/before is the runner's cost.
2. **Checkpoint bytes per round, scripted LLM CPR**: ``cooplab run cpr --agents llm --model
   scripted:examples/scripted/cautious.json --n-agents 10 --env rich --cache off`` at 10, 25 and 50
   rounds: bytes of checkpoints.sqlite and of the whole run directory, per round actually run.
   Linear growth means a flat bytes-per-round column.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _results import (  # benchmarks/ is on sys.path when run as a script
    RESULTS,
    machine_info,
    write_section,
)

ROOT = Path(__file__).resolve().parents[1]
BEFORE = "70fa04f"  # the last commit before the task layer (issue 10)
SECTION = "Task runner"


#: drop the editable install's import hook so that PYTHONPATH's copy of cooplab is the one imported
UNEDIT = "import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in getattr(f, '__module__', '')]; "


def build_before(rev: str, work: Path) -> Path:
    """A non-editable install of ``rev`` in ``work/site`` (shadows the editable install via PYTHONPATH).

    The commit's tree is exported with ``git archive`` (read-only: unlike ``git worktree add`` it
    leaves the repository's metadata alone, so the benchmark can run while others use the checkout)."""
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


def cli(args: list[str], site: Path | None) -> dict:
    env = dict(os.environ)
    if site is not None:
        env["PYTHONPATH"] = str(site)
    code = f"{UNEDIT if site is not None else ''}import sys; from cooplab.cli import main; sys.exit(main(sys.argv[1:]))"
    # cwd outside the checkout: python -c puts the cwd first on sys.path, and ROOT/cooplab would shadow PYTHONPATH
    res = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=tempfile.gettempdir()
    )
    if res.returncode != 0:
        raise RuntimeError(f"cooplab {' '.join(args)} failed ({res.returncode}): {res.stderr[-500:]}")
    return json.loads(res.stdout)


def which_code(site: Path | None) -> str:
    env = dict(os.environ, **({"PYTHONPATH": str(site)} if site else {}))
    return subprocess.run(
        [sys.executable, "-c", f"{UNEDIT if site else ''}import cooplab.cli as c; print(c.__file__)"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tempfile.gettempdir(),
    ).stdout.strip()


def dir_bytes(d: Path) -> int:
    return sum(f.stat().st_size for f in d.rglob("*") if f.is_file())


def overhead(
    sites: dict[str, Path | None], repeats: int, replicates: int, rounds: int, work: Path
) -> dict[str, list[float]]:
    per_round: dict[str, list[float]] = {k: [] for k in sites}
    for r in range(repeats):
        for name, site in sites.items() if r % 2 == 0 else reversed(list(sites.items())):
            out = work / f"ov-{name}-{r}"
            s = cli(
                [
                    "run",
                    "cpr",
                    "--replicates",
                    str(replicates),
                    "--rounds",
                    str(rounds),
                    "--env",
                    "rich",
                    "--seed",
                    "3",
                    "--out",
                    str(out),
                    "-q",
                    "--json",
                ],
                site,
            )
            per_round[name].append(s["wall_seconds"] / max(s["rounds_completed"], 1))
            shutil.rmtree(out, ignore_errors=True)
    return per_round


def growth(sites: dict[str, Path | None], rounds_list: list[int], work: Path) -> list[dict]:
    rows = []
    for rounds in rounds_list:
        for name, site in sites.items():
            out = work / f"g-{name}-{rounds}"
            s = cli(
                [
                    "run",
                    "cpr",
                    "--agents",
                    "llm",
                    "--model",
                    f"scripted:{ROOT / 'examples' / 'scripted' / 'cautious.json'}",
                    "--n-agents",
                    "10",
                    "--rounds",
                    str(rounds),
                    "--env",
                    "rich",
                    "--cache",
                    "off",
                    "--out",
                    str(out),
                    "-q",
                    "--json",
                ],
                site,
            )
            n = max(int(s["rounds_completed"]), 1)
            ck = (out / "checkpoints.sqlite").stat().st_size
            total = dir_bytes(out)
            rows.append(
                {
                    "code": name,
                    "rounds": rounds,
                    "rounds_run": n,
                    "checkpoint_bytes": ck,
                    "checkpoint_per_round": ck / n,
                    "dir_bytes": total,
                    "dir_per_round": total / n,
                    "decisions": s.get("decisions", {}).get("count"),
                }
            )
            shutil.rmtree(out, ignore_errors=True)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", default=BEFORE, help=f"baseline commit (default {BEFORE})")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--replicates", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=50)
    ap.add_argument("--growth-rounds", default="10,25,50")
    ap.add_argument("--quick", action="store_true", help="2 repeats, 20 replicates, growth at 5 and 10 rounds")
    ap.add_argument("--out", type=Path, default=None, help="write the section here instead of benchmarks/RESULTS.md")
    a = ap.parse_args()
    if a.quick:
        a.repeats, a.replicates, a.growth_rounds = 2, 20, "5,10"
    head = machine_info()
    with tempfile.TemporaryDirectory(prefix="bench-runner-") as tmp:
        work = Path(tmp)
        sites = {"before": build_before(a.before, work), "after": None}
        code = {k: which_code(v) for k, v in sites.items()}
        assert code["before"].startswith(str(work)) and not code["after"].startswith(str(work)), code
        ov = overhead(sites, a.repeats, a.replicates, a.rounds, work)
        rows = growth(sites, [int(x) for x in a.growth_rounds.split(",")], work)
    med = {k: statistics.median(v) for k, v in ov.items()}
    ratio = med["after"] / med["before"]
    L = [
        f"## {SECTION}",
        "",
        f"`.venv/bin/python benchmarks/bench_runner.py{' --quick' if a.quick else ''}`: the one runner (issue 10, "
        f'"after") against commit `{a.before}` ("before"), built from a clean export of its tree (`git archive`) and '
        "run in the same session, alternating.",
        "",
        *head,
        "",
        f"### Runner overhead per round (CPR, rule agents, {a.replicates} societies x 10 agents, {a.rounds} rounds, "
        "rich, SQLite checkpoints)",
        "",
        "| code | median ms per round | runs (ms per round) |",
        "| --- | ---: | --- |",
    ]
    for k in ("before", "after"):
        L.append(f"| {k} | {med[k] * 1e3:.2f} | {', '.join(f'{x * 1e3:.2f}' for x in ov[k])} |")
    L += [
        "",
        f"**after / before = {ratio:.3f}** (target: within 5%, i.e. <= 1.05).",
        "",
        "### Checkpoint bytes per round (scripted LLM CPR, 10 agents, rich, cache off)",
        "",
        "| code | rounds asked | rounds run | decisions | checkpoints.sqlite | per round | whole run dir | per round |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        L.append(
            f"| {r['code']} | {r['rounds']} | {r['rounds_run']} | {r['decisions']} | {r['checkpoint_bytes'] / 1e6:.2f} "
            "MB | "
            f"{r['checkpoint_per_round'] / 1e3:.1f} KB | {r['dir_bytes'] / 1e6:.2f} MB | "
            f"{r['dir_per_round'] / 1e3:.1f} KB |"
        )
    for k in ("before", "after"):
        rs = [r for r in rows if r["code"] == k]
        if len(rs) >= 2:
            L.append("")
            L.append(
                f"- {k}: checkpoint bytes per round at the longest run / the shortest = "
                f"{rs[-1]['checkpoint_per_round'] / rs[0]['checkpoint_per_round']:.2f} (1.0 = linear growth)"
            )
    L += [
        "",
        'The scripted agents (examples/scripted/cautious.json) can exhaust the stock before the round cap, so "rounds '
        'run" '
        'may be below "rounds asked"; bytes are divided by the rounds run. "After" stores append-only logs (round '
        "history, "
        "decisions, ledger, adopted norms) in LangGraph `DeltaChannel`s (`cooplab.graphs.state.AppendLog`): a "
        "checkpoint holds "
        "only the records its step added.",
        "",
    ]
    text = "\n".join(L)
    print(text)
    if a.out is not None or not a.quick:
        write_section(SECTION, text, a.out or RESULTS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
