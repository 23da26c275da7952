"""Fallback decisions of LLM players (a decision with no valid answer after its attempts, played by
the documented fallback): flagged in every table, counted per game in summary.json and the profile,
and a game whose share is above ``--max-fallback`` left out of the profile, its text output and the
Pareto-proximity regression (scripted models, so the answers are deterministic; the regressions'
side is in test_bayes.py)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from cooplab.cli import main
from cooplab.evals.typed import as_series, column
from cooplab.tasks.games.params import GAMES
from tests.games.test_llm_players import GOOD, script


def cli(args, capsys):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


#: Public Goods answers that never add up to the endowment: every allocation falls back; the other
#: games answer validly (sanctions: none, always valid)
NO_PUBLIC_GOODS = {**GOOD, "allocate": ['{"keep": 5, "group": 5, "global": 5}'], "sanction": ['{"sanctions": {}}']}


def test_fallback_decisions_are_flagged_in_every_table(tmp_path, capsys):
    # half the answers are out of range: a decision falls back when all three attempts miss
    model = script(tmp_path, {"extract": ['{"extract": 11}', '{"extract": 3}']})
    code, stdout, err = cli(
        [
            "run",
            "game",
            "--game",
            "cpr",
            "--players",
            "llm",
            "--model",
            f"scripted:{model}",
            "--cache",
            "off",
            "--simulations",
            4,
            "--seed",
            4,
            "--out",
            tmp_path / "run",
            "-q",
            "--json",
        ],
        capsys,
    )
    assert code == 0, err
    s = json.loads(stdout)
    out = tmp_path / "run"
    d = pd.read_parquet(out / "decisions.parquet")
    assert 0 < column(d, "fallback_used").sum() < len(d)  # some fell back, most did not
    players = pd.read_parquet(out / "players.parquet")
    flagged = players.set_index(["simulation", "round", "player"])["fallback"].sort_index()
    want = column(
        d.rename(columns={"society": "simulation", "agent": "player"}).set_index(["simulation", "round", "player"]),
        "fallback_used",
    )
    assert flagged.dtype == bool and flagged.equals(want.sort_index().astype(bool).rename("fallback"))
    # a fallback plays the documented action: the Nash extraction in round 1
    assert (players.loc[players["fallback"] & (players["round"] == 1), "extraction"] == 10).all()
    rounds = pd.read_parquet(out / "rounds.parquet").set_index(["simulation", "round"]).sort_index()
    per_round = players.groupby(["simulation", "round"])["fallback"]
    assert column(rounds, "fallback_share").to_numpy() == pytest.approx(as_series(per_round.mean()).to_numpy())
    assert (column(rounds, "fallback").to_numpy() == as_series(per_round.any()).to_numpy()).all()
    sims = pd.read_parquet(out / "simulations.parquet")
    assert sims["fallback_share"].to_numpy() == pytest.approx(
        as_series(players.groupby("simulation")["fallback"].mean()).to_numpy()
    )
    assert s["fallback"]["fallbacks"] == int(column(d, "fallback_used").sum()) and s["fallback"]["decisions"] == len(d)
    assert s["fallback"]["share"] == pytest.approx(d["fallback_used"].mean(), abs=1e-6)


def test_reference_players_have_no_fallbacks(tmp_path, capsys):
    code, stdout, err = cli(
        [
            "run",
            "game",
            "--game",
            "cpr-sanction",
            "--players",
            "random",
            "--simulations",
            3,
            "--out",
            tmp_path / "r",
            "-q",
            "--json",
        ],
        capsys,
    )
    assert code == 0, err
    s = json.loads(stdout)
    assert s["fallback"]["share"] == 0.0 and s["fallback"]["decisions"] == 2 * 3 * 3 * 10
    players = pd.read_parquet(tmp_path / "r" / "players.parquet")
    assert not column(players, "fallback").any() and not column(players, "sanction_fallback").any()


@pytest.fixture(scope="module")
def failing_profile(tmp_path_factory):
    """A scripted model whose Public Goods answers never add up: that game falls back throughout."""
    root = tmp_path_factory.mktemp("fallback")
    model = script(root, NO_PUBLIC_GOODS)
    args = [
        "profile",
        "--model",
        f"scripted:{model}",
        "--simulations",
        2,
        "--seed",
        3,
        "--cache",
        root / "cache.sqlite",
        "--out",
        root / "p",
        "-q",
    ]
    return root, args


def test_a_game_above_max_fallback_is_left_out_of_the_profile(failing_profile, capsys):
    root, args = failing_profile
    code, stdout, err = cli(args + ["--json"], capsys)
    assert code == 0, err
    p = json.loads(stdout)
    pg = p["games"]["public-goods"]
    assert (
        pg["fallback"]["share"] == 1.0
        and pg["included"] is False
        and "above --max-fallback 0.2" in pg["excluded_because"]
    )
    assert p["excluded_games"] == ["public-goods"] and p["max_fallback"] == 0.2
    assert all(
        p["games"][g]["included"] and p["games"][g]["fallback"]["share"] == 0.0 for g in GAMES if g != "public-goods"
    )
    # the text output says so, game by game and at the end
    code, stdout, err = cli(args, capsys)
    assert code == 0, err
    line = next(x for x in stdout.splitlines() if x.strip().startswith("public-goods"))
    assert "fallbacks 100%" in line and "LEFT OUT" in line
    assert "left out of the profile (more than 20% of decisions fell back): public-goods" in stdout
    # a rerun with another threshold keeps the games played and only re-judges them
    code, stdout, err = cli(args + ["--max-fallback", 1, "--json"], capsys)
    assert code == 0, err
    p = json.loads(stdout)
    assert p["excluded_games"] == [] and p["games"]["public-goods"]["included"] is True


def test_bad_max_fallback_is_refused(tmp_path, capsys):
    for bad in ("-0.1", "1.5", "nan", "x", "inf"):
        code, _, err = cli(["profile", "--players", "nash", "--max-fallback", bad, "--out", tmp_path / "p"], capsys)
        assert code == 2 and "--max-fallback" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "p").exists()
