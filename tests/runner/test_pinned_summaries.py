"""Behaviour pinned before the run directory got its schema and the settings their types (issue
"Worlds own their folder, typed end to end"): small seeded runs of every built-in task must give the
same summary.json numbers as the code of 2026-11-27 did (tests/runner/data/pinned/*.json).

Only what differs between two runs of one configuration on one machine is left out (the wall time
and the sandbox's measured seconds). A refactor that changes a number fails here; a change that is
meant to change one rewrites the files with ``COOPLAB_REPIN=1 pytest tests/runner/test_pinned_summaries.py``
and says why in its commit."""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import pytest

import cooplab

ROOT = Path(__file__).resolve().parents[2]
PINNED = Path(__file__).parent / "data" / "pinned"
GAME_SCRIPT = {
    "select": "prompt_hash",
    "by_phase": {
        "extract": ['{"extract": 2}', '{"extract": 5}', '{"extract": 10}'],
        "deliberate": ['{"message": "Let us all take little."}'],
    },
}
#: name -> (keywords of cooplab.RunConfig.from_keywords, task name)
CASES = {
    "cpr-rule": ("cpr", dict(agents="rule", n_agents=5, rounds=6, replicates=3, seed=2)),
    "cpr-llm": ("cpr", dict(agents="llm", model="scripted:cautious.json", n_agents=3, rounds=3, seed=1, cache="off")),
    "cpr-llm-greedy-osl": (
        "cpr",
        dict(
            agents="llm",
            model="scripted:greedy.json",
            n_agents=4,
            rounds=3,
            seed=7,
            cache="off",
            ablation="osl",
            env="rich",
        ),
    ),
    "diners-rule": ("diners", dict(iterations=5, replicates=4, seed=3)),
    "game-nash": ("game", dict(game="public-goods", simulations=4, rounds=3, seed=0)),
    "game-llm": (
        "game",
        dict(
            agents="llm",
            game="cpr",
            model="scripted:game.json",
            simulations=2,
            rounds=2,
            group_size=3,
            seed=4,
            cache="off",
        ),
    ),
    "science-oracle": (
        "science",
        dict(agents="llm", team="oracle", task="anomaly", seed=5, sandbox_backend="local", cache="off"),
    ),
}
#: fields that differ between two runs of one configuration (measured time)
VOLATILE = ("wall_seconds", "sandbox_seconds_by_team", "ledger.by_kind.sandbox_seconds.units")


def flat(value, prefix=""):
    """Every leaf of a JSON value by its dotted path."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            out.update(flat(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(value, list):
        out = {}
        for i, v in enumerate(value):
            out.update(flat(v, f"{prefix}[{i}]"))
        return out
    return {prefix: value}


def pinned_view(summary: dict) -> dict:
    return {k: v for k, v in flat(summary).items() if not any(k == p or k.startswith(p + ".") for p in VOLATILE)}


def same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-15)
    return a == b


@pytest.mark.parametrize("name", sorted(CASES))
def test_summaries_match_the_pinned_ones(name, tmp_path, monkeypatch):
    task, kw = CASES[name]
    for f in ("cautious.json", "greedy.json"):
        shutil.copy(ROOT / "examples" / "scripted" / f, tmp_path / f)
    (tmp_path / "game.json").write_text(json.dumps(GAME_SCRIPT))
    monkeypatch.chdir(tmp_path)
    cooplab.run(cooplab.RunConfig.from_keywords(task, **kw), out="run", quiet=True)
    got = pinned_view(json.loads((tmp_path / "run" / "summary.json").read_text()))
    path = PINNED / f"{name}.json"
    if os.environ.get("COOPLAB_REPIN") == "1":
        PINNED.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    want = json.loads(path.read_text())
    missing = sorted(set(want) - set(got))
    changed = sorted(k for k in set(want) & set(got) if not same(want[k], got[k]))
    assert not missing and not changed, (
        f"{name}: missing {missing[:8]}; changed {[(k, want[k], got[k]) for k in changed[:8]]}"
    )
