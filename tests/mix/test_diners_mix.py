"""The Diner's Dilemma's mixed societies and invaders (issue 40.2, 40.3 follow-ups): per-model
outcomes and cross-play of LLM diners of two scripted models, rule-based invaders that change a
run only from iteration K on (iteration by iteration against the unperturbed run), the recovery
of the residents' budget share, a rule-based invader in an LLM run (its seat never asked from K),
and the one-line refusals."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import cooplab
from tests.helpers.cli import fail_line


def script(path: Path, meal: str) -> str:
    path.write_text(
        json.dumps(
            {
                "by_phase": {
                    "order": [json.dumps({"meal": meal})],
                    "punish": [json.dumps({"punish": []})],
                    "metanorm": [json.dumps({"punish": []})],
                }
            }
        )
    )
    return f"scripted:{path}"


def test_diners_of_two_models_report_per_model_outcomes_and_crossplay(tmp_path):
    cheap, dear = script(tmp_path / "cheap.json", "budget"), script(tmp_path / "dear.json", "premium")
    run = cooplab.run(
        task="diners",
        agents="llm",
        model_mix={cheap: 4, dear: 4},
        combination=1,
        iterations=2,
        seed=2,
        cache="off",
        out=tmp_path / "r",
        quiet=True,
    )
    assigned = {int(k): v for k, v in run.config["llm"]["agent_models"].items()}
    assert sorted(assigned) == list(range(8)) and sorted(assigned.values()).count(cheap) == 4
    d = run.decisions
    assert all(d["model"] == [assigned[int(a)] for a in d["agent"]])  # each diner called its drawn model
    by = {r["model"]: r for r in run.summary["by_model"]}
    assert by[cheap]["premium_share"] == 0 and by[dear]["premium_share"] == 1 and by[cheap]["diners"] == 4
    assert by[cheap]["punishments_given_per_iteration"] == 0 and by[dear]["punishments_received_per_iteration"] == 0
    u = run.table("utilities")  # utility per iteration of each model's diners, from the table
    for m, row in by.items():
        seats = [a for a, v in assigned.items() if v == m]
        assert row["utility_per_iteration"] == pytest.approx(u[u["agent"].isin(seats)]["utility"].mean())
    groups = [0, 0, 0, 0, 1, 1, 1, 1]
    for row in run.summary["crossplay"]:
        pairs = sum(
            1
            for i in range(8)
            for j in range(8)
            if i != j and groups[i] == groups[j] and assigned[i] == row["model"] and assigned[j] == row["with"]
        )
        assert row["pairs"] == pairs and row["punishments"] == 0
        if pairs:
            assert row["premium_share"] == (0 if row["model"] == cheap else 1)
    assert set(run.tables) >= {"by_model", "crossplay"} and (run.out / "figures" / "by_model.png").stat().st_size > 0


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return cooplab.run(
        task="diners",
        combination=1,
        iterations=6,
        replicates=6,
        seed=3,
        out=tmp_path_factory.mktemp("b") / "r",
        quiet=True,
    )


@pytest.mark.parametrize("kind,code", [("defector", "D"), ("greedy", "D"), ("free-rider", "E")])
def test_a_diners_invader_changes_the_run_only_from_iteration_k(tmp_path, base, kind, code):
    inv = cooplab.run(
        task="diners",
        combination=1,
        iterations=6,
        replicates=6,
        seed=3,
        invader=f"{kind}@3:2",
        out=tmp_path / "i",
        quiet=True,
    )
    assert inv.config["params"]["invader"] == {"kind": kind, "round": 3, "agent": "2", "model": None}
    for name in ("orders", "utilities", "imitation"):
        a, b = base.table(name), inv.table(name)
        pd.testing.assert_frame_equal(
            a[a["iteration"] < 3].reset_index(drop=True), b[b["iteration"] < 3].reset_index(drop=True), obj=name
        )
    o = inv.table("orders")
    seat = o[(o["agent"] == 2) & (o["iteration"] >= 3)]
    assert set(seat["strategy"]) == {code} and set(seat["order"]) == {"premium" if code == "D" else "budget"}
    p = inv.table("utilities")
    assert (p[(p["agent"] == 2) & (p["iteration"] >= 3)]["punishments_given"] == 0).all()
    ev = inv.summary["invasion"]
    series = ev["residents_budget_share_by_iteration"]
    want = [float((o[(o["iteration"] == t) & (o["agent"] != 2)]["order"] == "budget").mean()) for t in range(1, 7)]
    assert series == pytest.approx(want)
    assert ev["recovery"]["K"] == 3 and ev["recovery"]["pre_level"] == pytest.approx(np.mean(want[:2]))
    ut = p[p["iteration"] >= 3]
    assert ev["invader_utility_per_iteration"] == pytest.approx(ut[ut["agent"] == 2]["utility"].mean())
    assert ev["resident_utility_per_iteration"] == pytest.approx(ut[ut["agent"] != 2]["utility"].mean())


def test_a_rule_invader_in_an_llm_diners_run_is_never_asked_from_k(tmp_path):
    cheap = script(tmp_path / "cheap.json", "budget")
    kw = dict(task="diners", agents="llm", model=cheap, combination=1, iterations=3, seed=1, cache="off", quiet=True)
    base = cooplab.run(out=tmp_path / "b", **kw)
    inv = cooplab.run(out=tmp_path / "i", invader="defector@2:3", **kw)
    d = inv.decisions
    assert d[(d["agent"] == 3) & (d["round"] >= 2)].empty and not d[(d["agent"] == 3) & (d["round"] == 1)].empty
    o = inv.table("orders")
    assert set(o[(o["agent"] == 3) & (o["iteration"] >= 2)]["order"]) == {"premium"}
    a, b = base.table("orders"), inv.table("orders")
    pd.testing.assert_frame_equal(
        a[a["iteration"] < 2].reset_index(drop=True), b[b["iteration"] < 2].reset_index(drop=True)
    )
    assert inv.summary["invasion"]["invader"]["kind"] == "defector"


@pytest.mark.parametrize(
    "args,words",
    [
        (["--invader", "greedy@1"], "2..4"),
        (["--invader", "greedy@3:8"], "0..7"),
        (["--invader", "thief@3"], "one of greedy, defector, free-rider"),
        (
            ["--invader", "model:local@3"],
            "one of greedy, defector, free-rider, got 'model'",
        ),  # rule diners: no model invader
    ],
)
def test_bad_diners_invaders_are_one_line_exit_2(tmp_path, capsys, args, words):
    line = fail_line(
        capsys, ["run", "diners", "--iterations", "4", "--replicates", "2", "--out", str(tmp_path / "x"), *args]
    )
    assert words in line and not (tmp_path / "x").exists()


def test_a_diners_fork_with_an_invader_is_the_run_invaded_from_the_start(tmp_path, base):
    """--invader in a fork of a diners run: a defector at iteration 4 of a fork at iteration 2 gives,
    table for table, the run that had it from its start."""
    invaded = cooplab.run(
        task="diners",
        combination=1,
        iterations=6,
        replicates=6,
        seed=3,
        invader="defector@4",
        out=tmp_path / "i",
        quiet=True,
    )
    f = cooplab.fork(base.out, at_round=2, invader="defector@4", out=tmp_path / "f", quiet=True)
    for name in ("orders", "utilities", "strategy_counts"):
        pd.testing.assert_frame_equal(f.table(name), invaded.table(name), obj=name)
    assert f.summary["invasion"] == invaded.summary["invasion"]
