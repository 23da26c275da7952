"""Tables a researcher can sum and join (issue 38, item 4): money as a float ``cost_usd`` beside the
exact ``cost_usd_exact`` text, and one agent key, ``agent_id`` (text, ``"SOCIETY:AGENT"``), in
every table of every task; tables written before are read back in this shape."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest

import cooplab
from cooplab.graphs.tables import money_table, upgrade

ROOT = Path(__file__).resolve().parents[2]
CAUTIOUS = ROOT / "examples" / "scripted" / "cautious.json"


@pytest.fixture(scope="module")
def cpr(tmp_path_factory):
    out = tmp_path_factory.mktemp("tables")
    kw = dict(
        task="cpr",
        agents="llm",
        model=f"scripted:{CAUTIOUS}",
        n_agents=2,
        rounds=2,
        replicates=2,
        cache="off",
        quiet=True,
    )
    return cooplab.run(out=out / "parquet", **kw), cooplab.run(out=out / "csv", csv=True, **kw)


def test_costs_sum_as_numbers_and_exactly(cpr):
    for run in cpr:
        total = Decimal(run.summary["ledger"]["cost_usd"])
        for df in (run.ledger, run.decisions):
            assert df["cost_usd"].dtype == float and "cost" not in df.columns
            assert df["cost_usd"].sum() == pytest.approx(float(total), rel=1e-12)  # a sum, not a concatenation
            assert all(isinstance(v, str) for v in df["cost_usd_exact"])
            assert sum(Decimal(v) for v in df["cost_usd_exact"]) == total  # to the last digit
            assert (df["cost_usd"] == df["cost_usd_exact"].map(float)).all()


def test_one_agent_key_in_every_table(cpr):
    for run in cpr:
        agents, decisions, ledger, beliefs = run.table("agents"), run.decisions, run.ledger, run.table("beliefs_final")
        expected = {f"{s}:{a}" for s in range(2) for a in range(2)}
        for df in (agents, decisions, ledger, beliefs):
            assert all(isinstance(v, str) for v in df["agent_id"]), df["agent_id"].head()
        assert set(agents["agent_id"]) == set(beliefs["agent_id"]) == expected
        assert set(decisions["agent_id"]) == set(ledger["agent_id"]) == expected
        assert (decisions["agent_id"] == decisions["society"].astype(str) + ":" + decisions["agent"].astype(str)).all()
        assert "agent" not in ledger.columns  # the ledger names its agent only by the key
        # the key joins them: every decision's charges, every agent's traits
        joined = decisions.merge(ledger, on=["agent_id", "round", "phase"], suffixes=("", "_charge"))
        assert len(joined) == len(ledger) and set(joined["agent_id"]) == expected
        by_agent = ledger.groupby("agent_id")["cost_usd"].sum()
        assert by_agent.index.tolist() == sorted(expected) and by_agent.sum() == pytest.approx(ledger["cost_usd"].sum())
        assert len(agents.merge(by_agent.rename("spent").reset_index(), on="agent_id")) == 4


def test_csv_tables_keep_identifiers_and_exact_amounts_as_text(cpr):
    _, run = cpr
    assert (run.out / "ledger.csv").is_file()
    raw = pd.read_csv(run.out / "ledger.csv", dtype=str)
    assert run.ledger["cost_usd_exact"].tolist() == raw["cost_usd_exact"].tolist()  # "0.0001335" stays that text
    assert run.ledger["call_id"].tolist() == raw["call_id"].tolist() and all(
        isinstance(v, str) for v in run.ledger["call_id"]
    )


def test_tables_written_before_read_back_in_todays_shape(cpr, tmp_path):
    import shutil

    run = cpr[0]
    old = tmp_path / "old"
    shutil.copytree(run.out, old)
    for name in (
        "ledger",
        "decisions",
    ):  # the shape of earlier versions: a "cost" text column; the ledger's agent as "agent"
        df = (
            pd.read_parquet(old / f"{name}.parquet")
            .drop(columns=["cost_usd"])
            .rename(columns={"cost_usd_exact": "cost"})
        )
        df = df.rename(columns={"agent_id": "agent"}) if name == "ledger" else df.drop(columns=["agent_id"])
        df.to_parquet(old / f"{name}.parquet")
    again = cooplab.Run.open(old)
    pd.testing.assert_frame_equal(again.ledger, run.ledger)
    pd.testing.assert_frame_equal(again.decisions, run.decisions)


def test_every_tasks_per_agent_tables_carry_the_key(tmp_path):
    diners = tmp_path / "diners.json"
    diners.write_text(
        json.dumps(
            {
                "by_phase": {
                    "order": ['{"meal": "premium"}'],
                    "punish": ['{"punish": [2]}'],
                    "metanorm": ['{"punish": []}'],
                }
            }
        )
    )
    game = tmp_path / "game.json"
    game.write_text(
        json.dumps(
            {
                "select": "prompt_hash",
                "by_phase": {"extract": ['{"extract": 5}'], "sanction": ['{"sanctions": {"2": 1}}']},
            }
        )
    )
    d = cooplab.run(
        task="diners",
        agents="llm",
        model=f"scripted:{diners}",
        combination=1,
        iterations=1,
        cache="off",
        out=tmp_path / "d",
        quiet=True,
    )
    g = cooplab.run(
        task="game",
        game="cpr-sanction",
        players="llm",
        model=f"scripted:{game}",
        simulations=2,
        cache="off",
        out=tmp_path / "g",
        quiet=True,
    )
    keys = {f"0:{a}" for a in range(8)}
    for name in ("orders", "utilities", "imitation"):
        assert set(d.table(name)["agent_id"]) == keys, name
    pun = d.table("punishments")
    assert len(pun) and set(pun["punisher_id"]) | set(pun["target_id"]) <= keys
    assert set(d.decisions["agent_id"]) == set(d.ledger["agent_id"]) == keys
    players = g.table("players")
    assert set(players["agent_id"]) == set(g.decisions["agent_id"]) == set(g.ledger["agent_id"])
    assert (players["agent_id"] == players["simulation"].astype(str) + ":" + players["player"].astype(str)).all()
    sanctions = g.table("sanctions")
    assert len(sanctions) and set(sanctions["sanctioner_id"]) | set(sanctions["target_id"]) <= set(players["agent_id"])


def test_tool_loops_and_unreadable_amounts():
    loops = money_table("tool_loops", pd.DataFrame({"agent": ["data.lead"], "cost": ["0.25"]}))
    assert list(loops.columns) == ["agent_id", "cost_usd", "cost_usd_exact"] and loops["cost_usd"].tolist() == [0.25]
    odd = upgrade("ledger", pd.DataFrame({"agent": ["0:1", "0:2"], "cost": ["nan-ish", None]}))
    assert (
        bool(odd["cost_usd"].isna().all())
        and odd["cost_usd_exact"].iloc[0] == "nan-ish"
        and pd.isna(odd["cost_usd_exact"].iloc[1])
    )
    assert upgrade("rounds", pd.DataFrame({"cost": [1]})).columns.tolist() == ["cost"]  # other tables are theirs
