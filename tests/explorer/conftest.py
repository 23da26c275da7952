"""Runs for the explorer's tests, made once per session with scripted models and rule agents:

runs/cpr-llm        CPR, LLM fishers (examples/scripted/cautious.json), 4 fishers, 6 rounds
runs/cpr-greedy     the same with examples/scripted/greedy.json (for the comparison)
runs/x"'><b>evil    CPR, LLM fishers whose beliefs, proposals and errors carry markup and scripts
runs/diners         the Diner's Dilemma, rule agents, 5 replicates
runs/profile        cooplab profile of the cpr-sanction game, random players (a grid sweep: cells/game-cpr-sanction__s0)
runs/sweep          a CPR sweep of rule-based runs (cells/*)
runs/broken         a run directory whose summary.json and a table are damaged
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import cooplab
from cooplab.cli import main

ROOT = Path(__file__).resolve().parents[2]
SCRIPTED = ROOT / "examples" / "scripted"
#: markup a model might write: it must reach the page as text, never as markup or script
HOSTILE_BELIEF = "</textarea><script>document.body.setAttribute('data-pwned','belief')</script>"
HOSTILE_NORM = "<img src=x onerror=\"document.body.setAttribute('data-pwned','norm')\"> \"quoted' & <b>bold</b>"
HOSTILE_DIR = "x\"'><b>evil"


def hostile_script(path: Path) -> Path:
    """A scripted model whose beliefs and proposals are markup and scripts."""
    script = json.loads((SCRIPTED / "cautious.json").read_text())
    script["by_phase"]["propose"] = [json.dumps({"belief": HOSTILE_BELIEF, "proposal": HOSTILE_NORM})]
    path.write_text(json.dumps(script))
    return path


def _cpr_llm(out: Path, model: Path) -> None:
    cooplab.run(
        task="cpr",
        agents="llm",
        model=f"scripted:{model}",
        n_agents=4,
        rounds=6,
        seed=4,
        out=out,
        quiet=True,
        cache="off",
    )


@pytest.fixture(scope="session")
def runs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("explorer") / "runs"
    root.mkdir()
    _cpr_llm(root / "cpr-llm", SCRIPTED / "cautious.json")
    _cpr_llm(root / "cpr-greedy", SCRIPTED / "greedy.json")
    _cpr_llm(root / HOSTILE_DIR, hostile_script(root.parent / "hostile.json"))
    cooplab.run(task="diners", replicates=5, iterations=12, seed=1, out=root / "diners", quiet=True)
    assert (
        main(
            [
                "profile",
                "--players",
                "random",
                "--games",
                "cpr-sanction",
                "--simulations",
                "2",
                "--out",
                str(root / "profile"),
                "-q",
                "--json",
            ]
        )
        == 0
    )
    cooplab.sweep(
        "cpr", out=root / "sweep", grid={"rounds": [3, 4]}, seeds=[0], analysis=False, n_agents=3, replicates=2
    )
    broken = root / "broken"
    shutil.copytree(
        root / "cpr-llm", broken, ignore=shutil.ignore_patterns("checkpoints.sqlite*", "traces.jsonl", ".cooplab.lock")
    )
    (broken / "summary.json").write_text('{"task": "cpr", "status": ')
    (broken / "rounds.parquet").write_bytes(b"not a parquet file")
    return root
