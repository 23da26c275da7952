"""Rule-based invaders in LLM runs (issue 40.3 follow-up): a greedy, defector or free-rider seat
among LLM agents of the CPR society and the games. From round K on the seat is never asked (no
decision rows, no calls) and plays its rule; before K the run is the unperturbed one."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import cooplab
from cooplab.evals.typed import as_frame

ROOT = Path(__file__).resolve().parents[2]
CAUTIOUS = f"scripted:{ROOT / 'examples/scripted/cautious.json'}"


def early(df: pd.DataFrame, k: int, cols: list[str]) -> pd.DataFrame:
    return as_frame(df[df["round"] < k][cols]).reset_index(drop=True)


CPR = dict(task="cpr", agents="llm", model=CAUTIOUS, n_agents=3, rounds=3, seed=5, cache="off", quiet=True)


@pytest.fixture(scope="module")
def cpr_base(tmp_path_factory):
    return cooplab.run(**CPR, out=tmp_path_factory.mktemp("llm-base") / "b")


@pytest.mark.parametrize("kind", ["greedy", "defector", "free-rider"])
def test_a_rule_invader_among_llm_fishers_plays_its_rule_from_k(tmp_path, kind, cpr_base):
    base = cpr_base
    inv = cooplab.run(**CPR, invader=f"{kind}@3:0", out=tmp_path / "i")
    assert inv.config["params"]["invader"] == {"kind": kind, "round": 3, "agent": "0", "model": None}
    d = inv.decisions
    assert d[(d["agent"] == 0) & (d["round"] >= 3)].empty  # never asked from K
    assert not d[(d["agent"] == 0) & (d["round"] < 3)].empty
    cols = ["society", "agent", "round", "phase", "parsed"]
    pd.testing.assert_frame_equal(early(base.decisions, 3, cols), early(d, 3, cols))
    pd.testing.assert_frame_equal(
        base.rounds[base.rounds["round"] < 3].reset_index(drop=True),
        inv.rounds[inv.rounds["round"] < 3].reset_index(drop=True),
    )
    # round 3's mean effort: the residents' decided efforts and the seat's rule, by hand
    h = d[(d["round"] == 3) & (d["phase"] == "harvest")]
    residents = [json.loads(p)["effort"] for p in h["parsed"]]
    e_max = inv.config["params"]["e_max"]
    prev = base.decisions
    prev = prev[(prev["round"] == 2) & (prev["phase"] == "harvest") & (prev["agent"] != 0)]
    seat = {
        "greedy": 1.0,
        "defector": e_max,
        "free-rider": sum(json.loads(p)["effort"] for p in prev["parsed"]) / len(prev),
    }[kind]
    r3 = inv.rounds[inv.rounds["round"] == 3].iloc[0]
    assert r3["mean_effort"] == pytest.approx((sum(residents) + seat) / 3)
    ev = inv.summary["invasion"]
    assert ev["invader"]["kind"] == kind and ev["societies"][0]["K"] == 3


def test_a_rule_invader_among_llm_players_plays_its_rule_from_k(tmp_path):
    script = tmp_path / "low.json"
    script.write_text(json.dumps({"by_phase": {"extract": [json.dumps({"extract": 2})]}}))
    kw = dict(
        task="game",
        game="cpr",
        agents="llm",
        model=f"scripted:{script}",
        group_size=3,
        simulations=2,
        rounds=3,
        seed=0,
        cache="off",
        quiet=True,
    )
    base = cooplab.run(**kw, out=tmp_path / "b")
    inv = cooplab.run(**kw, invader="greedy@2:4", out=tmp_path / "i")
    d = inv.decisions
    assert d[(d["agent"] == 4) & (d["round"] >= 2)].empty and len(d[d["round"] == 1]) == 2 * 6
    a, b = base.table("players"), inv.table("players")
    pd.testing.assert_frame_equal(a[a["round"] < 2].reset_index(drop=True), b[b["round"] < 2].reset_index(drop=True))
    seat = b[(b["round"] >= 2) & (b["player"] == 4)]
    assert set(seat["extraction"]) == {10} and set(b[(b["player"] != 4)]["extraction"]) == {2}
    ev = inv.summary["invasion"]
    assert ev["invader_payoff_per_round"] > ev["resident_payoff_per_round"]
