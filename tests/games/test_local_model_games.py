"""Integration: the real local model (SmolLM2-135M via llama.cpp, in its own process) plays a short
game with in-group sanctions, and a one-game profile, end to end. A 135M model is not expected to
play well: the tests check that every decision ends valid (decoded or by a recorded fallback) and
that the run and the profile are complete."""

from __future__ import annotations

import json
import sys

import numpy as np
import pandas as pd
import pytest

from cooplab.cli import main
from cooplab.evals.typed import column, tuples

pytestmark = pytest.mark.integration


def test_local_model_plays_cpr_with_sanctions(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(
        [
            "run",
            "game",
            "--game",
            "cpr-sanction",
            "--players",
            "llm",
            "--model",
            "local",
            "--group-size",
            "2",
            "--simulations",
            "1",
            "--rounds",
            "1",
            "--cache",
            str(tmp_path / "c.sqlite"),
            "--out",
            str(out),
            "-q",
            "--json",
        ]
    )
    stdout, err = capsys.readouterr()
    assert code == 0, err
    s = json.loads(stdout)
    assert s["status"] == "completed" and s["rounds_completed"] == 1 and s["ledger"]["calls"] >= 8
    d = pd.read_parquet(out / "decisions.parquet")
    assert sorted(d.groupby("phase").size().to_dict().items()) == [("extract", 4), ("sanction", 4)]
    assert (column(d, "input_tokens") > 100).all() and (column(d, "output_tokens") > 0).all()
    players = pd.read_parquet(out / "players.parquet")
    assert players["extraction"].between(0, 10).all() and len(players) == 4
    # sanctions landed only inside each player's own group (players 0-1 and 2-3)
    sanctions = pd.read_parquet(out / "sanctions.parquet") if (out / "sanctions.parquet").exists() else pd.DataFrame()
    for r in tuples(sanctions):
        assert r.sanctioner // 2 == r.target // 2 and r.sanctioner != r.target
    assert np.isfinite(s["metric"]["mean"]) and "llama_cpp" not in sys.modules


def test_local_model_one_game_profile(tmp_path, capsys):
    out = tmp_path / "prof"
    code = main(
        [
            "profile",
            "--model",
            "local",
            "--games",
            "o-ring",
            "--simulations",
            "1",
            "--group-size",
            "2",
            "--cache",
            str(tmp_path / "c.sqlite"),
            "--out",
            str(out),
            "-q",
            "--json",
        ]
    )
    stdout, err = capsys.readouterr()
    assert code == 0, err
    p = json.loads(stdout)
    assert p["status"] == "completed" and p["model"] == "local" and list(p["games"]) == ["o-ring"]
    e = p["games"]["o-ring"]
    assert 0 <= e["metric"]["mean"] <= 10 and e["pareto_proximity"]["mean"] is not None
    assert p["totals"]["decisions"] == 4 * 3 and p["totals"]["output_tokens"] > 0 and e["group_sizes"] == [2, 2]
    assert (out / "figures" / "profile.png").exists() and (out / "decisions.parquet").exists()
