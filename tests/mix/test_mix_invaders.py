"""Mixed societies (model_mix) and invaders at round K (issue 40.2, 40.3): the seeded assignment
recorded in config.json, per-model outcomes and cross-play, an invader that changes a run only from
K on (round by round against the unperturbed run), the recovery figures on constructed series, and
the one-line refusals of bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import cooplab
from cooplab.agents import mix
from cooplab.cli import main
from cooplab.evals.recovery import recovery
from cooplab.evals.typed import column, scalar
from tests.helpers.served import run_runtime

ROOT = Path(__file__).resolve().parents[2]
CAUTIOUS = f"scripted:{ROOT / 'examples/scripted/cautious.json'}"
GREEDY = f"scripted:{ROOT / 'examples/scripted/greedy.json'}"


def game_script(tmp_path: Path, name: str, extract: int) -> str:
    f = tmp_path / name
    f.write_text(json.dumps({"by_phase": {"extract": [json.dumps({"extract": extract})]}}))
    return f"scripted:{f}"


# --- the mix -------------------------------------------------------------------------------------------
def test_assignment_is_seeded_and_keeps_the_counts():
    a = mix.assign({"x": 3, "y": 2}, 5, seed=4)
    assert a == mix.assign({"x": 3, "y": 2}, 5, seed=4)
    assert sorted(a) == list(range(5)) and mix.counts_of(a) == {"x": 3, "y": 2}
    assert {tuple(mix.assign({"x": 3, "y": 2}, 5, seed=s).values()) for s in range(8)} != {tuple(a.values())}


def test_cpr_mixed_society_reports_per_model_outcomes_and_crossplay(tmp_path):
    run = cooplab.run(
        task="cpr",
        agents="llm",
        model_mix={CAUTIOUS: 2, GREEDY: 2},
        n_agents=4,
        rounds=3,
        seed=1,
        cache="off",
        out=tmp_path / "r",
        quiet=True,
    )
    config = json.loads((tmp_path / "r" / "config.json").read_text())
    assert config["llm"]["model_mix"] == {CAUTIOUS: 2, GREEDY: 2}
    assigned = config["llm"]["agent_models"]
    assert sorted(assigned) == ["0", "1", "2", "3"] and mix.counts_of(assigned) == {CAUTIOUS: 2, GREEDY: 2}
    dec = run.decisions
    assert all(dec["model"] == [assigned[str(a)] for a in dec["agent"]])  # each agent called its drawn model
    by = {r["model"]: r for r in run.summary["by_model"]}
    assert set(by) == {CAUTIOUS, GREEDY} and by[GREEDY]["catch_per_agent"] > by[CAUTIOUS]["catch_per_agent"]
    # the catches split the rounds' total catch; fines given and received balance
    assert sum(r["catch_per_agent"] * r["agents"] for r in by.values()) == pytest.approx(run.rounds["H"].sum())
    assert sum(r["fines_given_per_agent"] * 2 for r in by.values()) == sum(
        r["fines_received_per_agent"] * 2 for r in by.values()
    )
    fines = sum(1 for p in dec[dec["phase"] == "punish"]["parsed"] if json.loads(p)["punish"] is not None)
    cross = pd.DataFrame(run.summary["crossplay"])
    assert len(cross) == 4 and scalar(column(cross, "fines").sum()) == fines
    assert set(run.tables) >= {"by_model", "crossplay"}


def test_game_mixed_players_crossplay_table(tmp_path):
    low, high = game_script(tmp_path, "low.json", 2), game_script(tmp_path, "high.json", 10)
    run = cooplab.run(
        task="game",
        game="cpr",
        agents="llm",
        model_mix={low: 3, high: 3},
        group_size=3,
        simulations=2,
        rounds=2,
        seed=0,
        cache="off",
        out=tmp_path / "g",
        quiet=True,
    )
    by = {r["model"]: r for r in run.summary["by_model"]}
    assert by[low]["metric"] == 2 and by[high]["metric"] == 10 and by[low]["proximity"] < by[high]["proximity"]
    cross = {(r["model"], r["with"]): r for r in run.summary["crossplay"]}
    assert set(cross) == {(low, low), (low, high), (high, low), (high, high)}
    assigned = {int(k): v for k, v in run.config["llm"]["agent_models"].items()}
    groups = [0, 0, 0, 1, 1, 1]
    for (a, b), row in cross.items():
        pairs = sum(
            1
            for i in range(6)
            for j in range(6)
            if i != j and groups[i] == groups[j] and assigned[i] == a and assigned[j] == b
        )
        assert row["pairs"] == pairs
        assert row["metric"] == (None if not pairs else (2 if a == low else 10))


# --- invaders --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cpr_base(tmp_path_factory):
    """The unperturbed rule-based run the invaded ones are compared with (made once)."""
    return cooplab.run(
        task="cpr", n_agents=5, rounds=8, replicates=4, seed=3, out=tmp_path_factory.mktemp("base") / "r", quiet=True
    )


@pytest.mark.parametrize("kind", ["greedy", "defector", "free-rider"])
def test_cpr_invader_changes_the_run_only_from_round_k(tmp_path, kind, cpr_base):
    base = cpr_base
    inv = cooplab.run(
        task="cpr", n_agents=5, rounds=8, replicates=4, seed=3, invader=f"{kind}@4:1", out=tmp_path / kind, quiet=True
    )
    assert json.loads((tmp_path / kind / "config.json").read_text())["params"]["invader"] == {
        "kind": kind,
        "round": 4,
        "agent": "1",
        "model": None,
    }
    a, b = base.rounds.sort_values(["replicate", "round"]), inv.rounds.sort_values(["replicate", "round"])
    for t in range(1, 9):
        x, y = a[a["round"] == t].reset_index(drop=True), b[b["round"] == t].reset_index(drop=True)
        if t < 4:
            pd.testing.assert_frame_equal(x, y)
        elif t == 4:
            assert not x.equals(y), "the invader must act in round K"
    assert inv.summary["invasion"]["invader"]["round"] == 4 and len(inv.summary["invasion"]["societies"]) == 4


def test_game_invader_changes_only_its_seat_from_round_k(tmp_path):
    base = cooplab.run(
        task="game",
        game="public-goods",
        players="random",
        group_size=3,
        simulations=3,
        rounds=5,
        seed=2,
        out=tmp_path / "b",
        quiet=True,
    )
    inv = cooplab.run(
        task="game",
        game="public-goods",
        players="random",
        group_size=3,
        simulations=3,
        rounds=5,
        seed=2,
        invader="greedy@3:4",
        out=tmp_path / "i",
        quiet=True,
    )
    a, b = base.table("players"), inv.table("players")
    before = a["round"] < 3
    pd.testing.assert_frame_equal(a[before].reset_index(drop=True), b[before].reset_index(drop=True))
    seat = (b["round"] >= 3) & (b["player"] == 4)
    assert (b.loc[seat, "keep"] == 10).all()  # the whole endowment kept
    others = (b["round"] >= 3) & (b["player"] != 4)  # the other players drew what they drew unperturbed
    assert (a.loc[others, "keep"].to_numpy() == b.loc[others, "keep"].to_numpy()).all()
    ev = inv.summary["invasion"]
    assert ev["invader_payoff_per_round"] > ev["resident_payoff_per_round"]


def test_llm_invader_of_another_model_switches_the_seat_at_k(tmp_path):
    kw = dict(task="cpr", agents="llm", model=CAUTIOUS, n_agents=3, rounds=4, seed=5, cache="off", quiet=True)
    base = cooplab.run(**kw, out=tmp_path / "b")
    inv = cooplab.run(**kw, invader=f"model:{GREEDY}@3:0", out=tmp_path / "i")
    assert inv.config["llm"]["model_from"] == {"0@3": GREEDY}
    d = inv.decisions
    assert set(d[(d["agent"] == 0) & (d["round"] >= 3)]["model"]) == {GREEDY}
    assert set(d[(d["agent"] != 0) | (d["round"] < 3)]["model"]) == {CAUTIOUS}
    cols = ["society", "agent", "round", "phase", "parsed"]
    early = lambda x: x[x["round"] < 3][cols].reset_index(drop=True)  # noqa: E731
    pd.testing.assert_frame_equal(early(base.decisions), early(d))
    pd.testing.assert_frame_equal(
        base.rounds[base.rounds["round"] < 3].reset_index(drop=True),
        inv.rounds[inv.rounds["round"] < 3].reset_index(drop=True),
    )


# --- recovery on constructed series ----------------------------------------------------------------------
def test_recovery_figures_on_constructed_series():
    r = recovery([10, 10, 10, 5, 7, 9.5, 10], 4)
    assert r["pre_level"] == 10 and r["drop"] == 5 and r["drop_share"] == 0.5
    assert r["left_band"] == 4 and r["recovered"] and r["rounds_to_recover"] == 2  # round 6 (9.5) is within 10% of 10
    r = recovery([8, 12, 10, 4, 5, 6, 7], 4, window=2)  # level: mean of rounds 2-3 = 11
    assert r["pre_level"] == 11 and r["drop"] == 7 and r["recovered"] is False and r["rounds_to_recover"] is None
    assert recovery([10, 10, 10, 9.5, 12], 4)["rounds_to_recover"] == 0  # never left the band (rising is not a drop)
    r = recovery([2, 2, 2, 6, 4, 2.1], 4, direction="down")  # a distance: higher is worse
    assert r["drop"] == 4 and r["rounds_to_recover"] == 2
    with pytest.raises(ValueError):
        recovery([1, 2, 3], 1)


# --- bad input: one line, exit 2 -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args, words",
    [
        (["cpr", "--agents", "llm", "--model-mix", "nope:x=4"], "unknown model provider 'nope'"),
        (
            ["cpr", "--agents", "llm", "--model-mix", f"{CAUTIOUS}=4", "--model-mix", "scripted:/nonexistent.json=0"],
            "not found",
        ),
        (
            ["cpr", "--agents", "llm", "--model-mix", f"{CAUTIOUS}=2", "--model-mix", f"{GREEDY}=3"],
            "add up to 5 (2 + 3) but the society has 4",
        ),
        (["cpr", "--agents", "llm", "--model-mix", f"{CAUTIOUS}=-1"], "whole number"),
        (["cpr", "--agents", "llm", "--model-mix", f"{CAUTIOUS}=1.5"], "whole number"),
        (["cpr", "--agents", "llm", "--model-mix", CAUTIOUS], "SPEC=COUNT"),
        (["cpr", "--agents", "llm", "--model-mix", f"{CAUTIOUS}=4", "--agent-model", f"1={GREEDY}"], "not both"),
        (["cpr", "--invader", "greedy@1"], "2..5"),
        (["cpr", "--invader", "greedy@6"], "2..5"),
        (["cpr", "--invader", "greedy@3:4"], "0..3"),
        (["cpr", "--invader", "sneaky@3"], "greedy, defector, free-rider"),
        (
            ["cpr", "--agents", "llm", "--model", CAUTIOUS, "--invader", "sneaky@3"],
            "greedy, defector, free-rider, model",
        ),
        (["cpr", "--model-mix", f"{CAUTIOUS}=4"], "LLM agents only"),
        (["game", "--game", "cpr", "--invader", "greedy@9"], "2..3"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, args, words):
    task, rest = args[0], args[1:]
    base = ["--n-agents", "4", "--rounds", "5"] if task == "cpr" else []
    code = main(["run", task, *rest, *base, "--out", str(tmp_path / "x"), "-q"])
    err = capsys.readouterr().err
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "x").exists()


def test_python_errors_use_keyword_names(tmp_path):
    with pytest.raises(cooplab.ConfigError, match="model_mix"):
        cooplab.run(task="cpr", agents="llm", model_mix={CAUTIOUS: True, GREEDY: 3}, n_agents=4, out=tmp_path / "x")
    with pytest.raises(cooplab.ConfigError, match="invader"):
        cooplab.run(task="cpr", n_agents=4, rounds=5, invader={"kind": "greedy", "round": 2.5}, out=tmp_path / "x")


# --- a served graph: the specs of a mix and of an invader are checked like any model's --------------------
@pytest.mark.parametrize(
    "context, names",
    [
        (
            {"agents": "llm", "llm": {"model_mix": {CAUTIOUS: 2}}, "options": {"n_agents": 2, "rounds": 2}},
            "llm.model_mix",
        ),
        (
            {"agents": "llm", "llm": {"model_from": {"1@2": GREEDY}}, "options": {"n_agents": 2, "rounds": 2}},
            "llm.model_from",
        ),
        ({"agents": "llm", "options": {"n_agents": 2, "rounds": 3, "invader": f"model:{GREEDY}@2"}}, "options.invader"),
        (
            {
                "agents": "llm",
                "options": {"n_agents": 2, "rounds": 3, "invader": {"kind": "model", "round": 2, "model": GREEDY}},
            },
            "options.invader.model",
        ),
    ],
)
def test_served_runs_refuse_files_named_by_a_mix_or_an_invader(tmp_path, context, names):

    from cooplab.runs import server_graphs as sg

    with pytest.raises(sg.SettingsError) as e:
        sg.cpr(config={"configurable": {}}, runtime=run_runtime(context))
    assert sg.ALLOW_PATHS in str(e.value) and names in str(e.value), e.value


def test_a_stored_mix_is_read_back_never_redrawn_and_a_tampered_one_is_refused(tmp_path):
    run = cooplab.run(
        task="cpr",
        agents="llm",
        model_mix={CAUTIOUS: 1, GREEDY: 2},
        n_agents=3,
        rounds=2,
        seed=7,
        cache="off",
        out=tmp_path / "a",
        quiet=True,
    )
    again = cooplab.run(cooplab.RunConfig.load(tmp_path / "a"), out=tmp_path / "b", quiet=True)
    assert again.config["llm"]["agent_models"] == run.config["llm"]["agent_models"]
    assert again.summary["by_model"] == run.summary["by_model"]
    config = json.loads((tmp_path / "a" / "config.json").read_text())
    config["llm"]["agent_models"] = {"0": CAUTIOUS, "1": CAUTIOUS, "2": GREEDY}  # no longer the mix's counts
    (tmp_path / "a" / "config.json").write_text(json.dumps(config))
    with pytest.raises(cooplab.ConfigError, match="do not match the mix"):
        cooplab.RunConfig.load(tmp_path / "a")
