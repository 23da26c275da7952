"""LLM players of the six games with scripted models (``select: prompt_hash``: an answer chosen by a
hash of the prompt, so runs are deterministic): every game end to end through the CLI, bad answers
retried with the validation error then falling back (recorded), out-of-group sanctions refused,
prompts with the configured group sizes, the prompt conditions, deliberation, resume after Ctrl-C."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cooplab.cli import main
from cooplab.evals.typed import as_frame, column
from cooplab.tasks.games import llm as la
from cooplab.tasks.games import players as pl
from cooplab.tasks.games import society as so
from cooplab.tasks.games.params import GAMES, CPRParams, model_of

GOOD = {
    "effort": ['{"effort": 10}', '{"effort": 7}', '{"effort": 3}'],
    "extract": ['{"extract": 2}', '{"extract": 5}', '{"extract": 10}'],
    "contribute": ['{"contribute": 1}', '{"contribute": 2}', '{"contribute": 0}'],
    "withdraw": ['{"withdraw": 6}', '{"withdraw": 8}', '{"withdraw": 4}'],
    "allocate": [
        '{"keep": 2, "group": 6, "global": 2}',
        '{"keep": 10, "group": 0, "global": 0}',
        '{"keep": 0, "group": 10, "global": 0}',
    ],
    "sanction": ['{"sanctions": {}}', '{"sanctions": {"1": 2}}', '{"sanctions": {"7": 1}}'],
    "deliberate": ['{"message": "Let us all cooperate."}', '{"message": "I will play high if you do."}'],
}


def script(tmp_path: Path, by_phase: dict, name: str = "model.json") -> Path:
    f = tmp_path / name
    f.write_text(json.dumps({"select": "prompt_hash", "by_phase": by_phase}))
    return f


def run_cli(args, capsys):
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def run_llm(tmp_path, capsys, game, model, out="run", extra=()):
    code, stdout, err = run_cli(
        [
            "run",
            "game",
            "--game",
            game,
            "--players",
            "llm",
            "--model",
            f"scripted:{model}",
            "--cache",
            "off",
            "--simulations",
            "2",
            "--seed",
            "4",
            *extra,
            "--out",
            str(tmp_path / out),
            "-q",
            "--json",
        ],
        capsys,
    )
    assert code == 0, err
    return json.loads(stdout), tmp_path / out


# --- every game, end to end ------------------------------------------------------------------------------
@pytest.mark.parametrize("game", GAMES)
def test_every_game_end_to_end_with_llm_players(tmp_path, capsys, game):
    s, out = run_llm(tmp_path, capsys, game, script(tmp_path, GOOD))
    R = 10 if game == "collective-risk" else 3
    assert s["status"] == "completed" and s["players"] == "llm" and s["agents"] == "llm" and s["prompt"] == "standard"
    assert s["rounds_completed"] == R and s["metric"]["mean"] is not None and "pareto_proximity" in s
    cfg = json.loads((out / "config.json").read_text())
    assert (
        cfg["agents"] == "llm"
        and cfg["params"]["players"] == "llm"
        and cfg["params"]["prompt"] == "standard"
        and cfg["params"]["deliberation"] is False
    )
    assert cfg["llm"]["model"].startswith("scripted:")
    d = pd.read_parquet(out / "decisions.parquet")
    per_round = 2 * 10 * (2 if game == "cpr-sanction" else 1)
    assert len(d) == per_round * R and s["decisions"]["count"] == len(d)
    assert set(d["phase"]) == ({so.DECISION[game], "sanction"} if game == "cpr-sanction" else {so.DECISION[game]})
    assert (out / "ledger.parquet").exists() and s["ledger"]["calls"] >= len(d)
    players = pd.read_parquet(out / "players.parquet")
    assert len(players) == 2 * 10 * R
    if game != "cpr-sanction":  # every answer of GOOD is valid outside the sanction phase
        assert not column(d, "fallback_used").any() and (column(d, "attempts") == 1).all()
    # the actions played are the answers given
    dec = d[d["phase"] == so.DECISION[game]].set_index(["society", "round", "agent"]).sort_index()
    first = json.loads(dec.iloc[0]["parsed"])
    row = players[(players.simulation == 0) & (players["round"] == 1) & (players.player == 0)].iloc[0]
    if game == "public-goods":
        assert [row["keep"], row["group_pool"], row["global_pool"]] == [first["keep"], first["group"], first["global_"]]
    else:
        assert (
            int(
                row[
                    next(
                        c
                        for c in players.columns
                        if c in ("effort", "extraction", "contribution", "withdrawal", "action")
                    )
                ]
            )
            == list(first.values())[-1]
        )


def test_rerun_is_identical(tmp_path, capsys):
    model = script(tmp_path, GOOD)
    a, da = run_llm(tmp_path, capsys, "public-goods", model, out="a")
    b, db = run_llm(tmp_path, capsys, "public-goods", model, out="b")
    assert a["metric"] == b["metric"]
    pd.testing.assert_frame_equal(pd.read_parquet(da / "players.parquet"), pd.read_parquet(db / "players.parquet"))


# --- bad answers -----------------------------------------------------------------------------------------
def test_out_of_range_answer_is_retried_then_falls_back(tmp_path, capsys):
    s, out = run_llm(
        tmp_path, capsys, "cpr", script(tmp_path, {"extract": ['{"extract": 11}', '{"extract": -1}', "no idea"]})
    )
    d = pd.read_parquet(out / "decisions.parquet")
    assert column(d, "fallback_used").all() and (column(d, "attempts") == la.MAX_ATTEMPTS).all()
    assert s["decisions"]["fallback_used"] == len(d) == 60
    assert d["error"].str.contains("field 'extract'|no JSON").all()
    # the documented fallback: the Nash action in round 1 (extract all 10), then one's own previous action
    assert (column(pd.read_parquet(out / "players.parquet"), "extraction") == 10).all()


def test_out_of_range_answer_is_retried_and_a_valid_retry_counts(tmp_path, capsys):
    _, out = run_llm(
        tmp_path, capsys, "weakest-link", script(tmp_path, {"effort": ['{"effort": 11}', '{"effort": 4}']})
    )
    d = pd.read_parquet(out / "decisions.parquet")
    retried = d[(d["attempts"] > 1) & ~d["fallback_used"]]
    assert len(retried) > 0  # asked again with the error and answered validly
    assert (
        column(as_frame(d[~column(d, "fallback_used")]), "parsed").map(lambda p: json.loads(p)["effort"]) == 4
    ).all()
    # the retry carried the validation error back to the model (traces hold every call's messages)
    traces = (out / "traces.jsonl").read_text()
    assert "That answer was invalid" in traces and "less than or equal to 10" in traces


def test_public_goods_allocation_not_summing_to_the_endowment_is_retried(tmp_path, capsys):
    bad = '{"keep": 5, "group": 5, "global": 5}'
    _, out = run_llm(
        tmp_path, capsys, "public-goods", script(tmp_path, {"allocate": [bad, '{"keep": 3, "group": 4, "global": 3}']})
    )
    d = pd.read_parquet(out / "decisions.parquet")
    assert ((column(d, "attempts") > 1) & ~column(d, "fallback_used")).any()
    p = pd.read_parquet(out / "players.parquet")
    assert ((column(p, "keep") + column(p, "group_pool") + column(p, "global_pool")) == 10).all()
    _, out2 = run_llm(tmp_path, capsys, "public-goods", script(tmp_path, {"allocate": [bad]}, "bad.json"), out="bad")
    d2 = pd.read_parquet(out2 / "decisions.parquet")
    assert column(d2, "fallback_used").all() and column(d2, "error").str.contains("must equal exactly 10 tokens").all()
    p2 = pd.read_parquet(out2 / "players.parquet")
    assert (column(p2, "keep") == 10).all() and (
        column(p2, "group_pool") == 0
    ).all()  # fallback: keep all (round 1), then the previous allocation


def test_out_of_group_and_self_sanctions_are_refused(tmp_path, capsys):
    model = script(tmp_path, {"extract": ['{"extract": 5}'], "sanction": ['{"sanctions": {"7": 3}}']})
    s, out = run_llm(tmp_path, capsys, "cpr-sanction", model)
    d = pd.read_parquet(out / "decisions.parquet")
    sd = as_frame(d[d["phase"] == "sanction"])
    out_group = as_frame(sd[sd["agent"] < 5])
    assert (
        column(out_group, "fallback_used").all()
        and column(out_group, "error").str.contains("Player 7 is not a member of your group").all()
    )
    me = as_frame(sd[sd["agent"] == 6])
    assert column(me, "fallback_used").all() and column(me, "error").str.contains("cannot sanction yourself").all()
    ok = as_frame(sd[(sd["agent"] >= 5) & (sd["agent"] != 6)])
    assert not column(ok, "fallback_used").any()
    sanc = pd.read_parquet(out / "sanctions.parquet")
    assert (
        set(column(sanc, "target")) == {6}
        and set(column(sanc, "sanctioner")) == {5, 7, 8, 9}
        and (column(sanc, "tokens") == 3).all()
    )
    assert s["outcomes"]["sanctions"]["dropped_out_of_group"] == 0


def test_sanctions_above_the_budget_are_refused():
    spec = la.sanction_spec("standard")
    ctx = {"allowed": [2, 3], "me": 1, "max_sanction": 10}
    with pytest.raises(ValueError, match="at most 10"):
        la.validate_answer(spec, '{"sanctions": {"2": 6, "3": 5}}', ctx)
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        la.validate_answer(spec, '{"sanctions": {"2": -1}}', ctx)
    assert la.validate_answer(spec, '{"sanctions": {"2": 6, "3": 4}}', ctx).sanctions == {2: 6, 3: 4}


def test_sanction_decoding_constraint_names_only_the_own_group():
    spec = la.sanction_spec("standard")
    assert spec.constrain is not None  # the sanction decision narrows its decoding schema
    got = spec.constrain(spec.json_schema, {"allowed": [6, 8], "me": 7, "max_sanction": 3})
    prop = got["properties"]["sanctions"]
    assert set(prop["properties"]) == {"6", "8"} and prop["additionalProperties"] is False
    assert prop["properties"]["6"] == {"enum": [0, 1, 2, 3]}


# --- prompts ---------------------------------------------------------------------------------------------
def played_state(game: str, sizes: list[int], rounds_done: int = 2):
    """The state of a game with ``rounds_done`` rounds played by random players (for rendering prompts)."""
    P = model_of(game)(group_sizes=sizes, simulations=1, rounds=3 if game != "collective-risk" else 10)
    st = dict(so.run_game(P, pl.policies("random", P), seed=1))
    st["history"] = st["history"][:rounds_done]
    st["round"] = rounds_done + 1
    st["action"] = st["history"][-1]["action"]
    if game == "cpr-sanction":
        from cooplab.tasks.games import model as pf

        assert isinstance(P, CPRParams)
        st["stage_payoff"] = pf.cpr(st["action"], capacity=P.capacity, multiplier=P.multiplier)
    return P, st


@pytest.mark.parametrize("game", GAMES)
@pytest.mark.parametrize("condition", la.PROMPTS)
def test_prompts_render_the_configured_groups(game, condition):
    P, st = played_state(game, [4, 4, 4])
    msgs = la.decision_messages(P, st, 0, 5, condition)
    system, human = msgs[0].content, msgs[1].content
    assert "Player 6" in system and "Group 2" in system
    unit = "workers" if game == "o-ring" else "players"
    group = "teams" if game == "o-ring" else "groups"
    assert f"3 {group} of 4 {unit} each (12 {unit} total)" in system
    for wrong in ("2 groups", "10 players", "8 players", "(8 members)", "7 other", "5 members"):
        assert wrong not in system + human, wrong
    if condition == "alternate":
        assert "11 other participants" in system
    if game == "public-goods":
        assert "the 4 members of your group" in system or "all 4 members of your group" in system
    assert "{" not in system and "}" not in system.replace("{}", "")  # no unfilled template field
    # the history of the earlier rounds: the player's group only (players 5..8), both rounds
    assert "Round 1" in human and "Round 2" in human and "Player 6 (you)" in human
    assert "Player 1 " not in human and "Player 9 " not in human
    if condition in ("cot", "tom"):
        assert '"reasoning"' in human and "reasoning" in system
    else:
        assert "reasoning" not in human


def test_sanction_prompt_shows_only_the_own_group():
    P, st = played_state("cpr-sanction", [4, 4, 4])
    human = la.sanction_messages(P, st, 0, 5, "standard")[1].content
    assert "Player 5, Player 7, Player 8" in human and "Player 1:" not in human and "Player 9:" not in human
    assert "all 12 players" in human


def test_collective_risk_status_and_payoffs_at_the_end():
    P, st = played_state("collective-risk", [5, 5], rounds_done=9)
    human = la.decision_messages(P, st, 0, 0, "standard")[1].content
    assert "COLLECTIVE RISK STATUS (Round 10 of 10)" in human and "THIS IS THE FINAL ROUND" in human
    assert "Your payoff" not in human  # paid at the end of round R


def test_cot_schema_asks_for_reasoning_before_the_action():
    spec = la.action_spec("cpr", 10, 0, "cot")
    assert list(spec.json_schema["properties"])[:2] == ["reasoning", "extract"]
    with pytest.raises(ValueError, match="reasoning"):
        la.validate_answer(spec, '{"extract": 3}', {})
    assert la.validate_answer(spec, '{"reasoning": "the pool is shared", "extract": 3}', {}).extract == 3


def test_cot_and_tom_runs_record_the_condition(tmp_path, capsys):
    model = script(tmp_path, {"effort": ['{"reasoning": "everyone gains at 10", "effort": 10}', '{"effort": 9}']})
    for cond in ("cot", "tom", "alternate"):
        s, out = run_llm(tmp_path, capsys, "weakest-link", model, out=cond, extra=("--prompt", cond))
        assert s["prompt"] == cond and json.loads((out / "config.json").read_text())["params"]["prompt"] == cond
        d = pd.read_parquet(out / "decisions.parquet")
        assert (column(d, "prompt") == cond).all()
        if cond != "alternate":  # the answer without reasoning is refused and retried
            ok = as_frame(d[~column(d, "fallback_used")])
            assert (
                len(ok)
                and column(ok, "parsed").map(lambda p: json.loads(p)["reasoning"] == "everyone gains at 10").all()
            )
            assert column(as_frame(d[column(d, "fallback_used")]), "error").str.contains("reasoning").all()


def test_deliberation_messages_are_shown_to_the_group(tmp_path, capsys):
    s, out = run_llm(tmp_path, capsys, "public-goods", script(tmp_path, GOOD), extra=("--deliberation",))
    assert s["deliberation"] is True and s["messages"] == 2 * 10 * 3
    m = pd.read_parquet(out / "messages.parquet")
    assert len(m) == 60 and set(m.columns) >= {"simulation", "round", "player", "group", "message"}
    d = pd.read_parquet(out / "decisions.parquet")
    assert set(d["phase"]) == {"deliberate", "allocate"}
    # the decision prompt holds the group's messages of this round and no other group's
    P, st = played_state("public-goods", [5, 5])
    st["messages"] = [
        {"simulation": 0, "round": 3, "player": j, "group": j // 5, "message": f"note from {j}"} for j in range(10)
    ]
    human = la.decision_messages(P, st, 0, 1, "standard")[1].content
    assert (
        "GROUP DELIBERATION" in human
        and "[Player 1]: note from 0" in human
        and "[Player 2 (you)]: note from 1" in human
    )
    assert "note from 5" not in human


# --- resume ----------------------------------------------------------------------------------------------
def test_llm_game_resumes_after_ctrl_c_to_the_uninterrupted_run(tmp_path, capsys, monkeypatch):
    from cooplab.tasks.games import task as gt

    model = script(tmp_path, GOOD)
    ref, dref = run_llm(tmp_path, capsys, "cpr-sanction", model, out="ref")
    real = gt.phases_for

    def crashing(P, policies):
        nodes = real(P, policies)
        settle = nodes["settle"]

        def settle_then_crash(state):
            if state["round"] == 2:
                raise KeyboardInterrupt
            return settle(state)

        nodes["settle"] = settle_then_crash
        return nodes

    monkeypatch.setattr(gt, "phases_for", crashing)
    code, _, err = run_cli(
        [
            "run",
            "game",
            "--game",
            "cpr-sanction",
            "--players",
            "llm",
            "--model",
            f"scripted:{model}",
            "--cache",
            "off",
            "--simulations",
            "2",
            "--seed",
            "4",
            "--out",
            str(tmp_path / "run"),
            "-q",
            "--json",
        ],
        capsys,
    )
    assert code == 130 and "cooplab resume" in err
    monkeypatch.setattr(gt, "phases_for", real)
    code, stdout, err = run_cli(["resume", str(tmp_path / "run"), "-q", "--json"], capsys)
    assert code == 0, err
    got = json.loads(stdout)
    for key in ("metric", "pareto_proximity", "payoff", "outcomes", "rounds_completed"):
        assert got[key] == ref[key], key
    for stem in ("players", "rounds", "simulations", "sanctions"):
        pd.testing.assert_frame_equal(
            pd.read_parquet(dref / f"{stem}.parquet"), pd.read_parquet(tmp_path / "run" / f"{stem}.parquet")
        )
    cols = ["society", "agent", "round", "phase", "raw", "parsed", "attempts", "fallback_used", "error"]
    a = (
        as_frame(pd.read_parquet(dref / "decisions.parquet")[cols])
        .sort_values(["round", "phase", "society", "agent"])
        .reset_index(drop=True)
    )
    b = (
        as_frame(pd.read_parquet(tmp_path / "run" / "decisions.parquet")[cols])
        .sort_values(["round", "phase", "society", "agent"])
        .reset_index(drop=True)
    )
    pd.testing.assert_frame_equal(a, b)


def test_resume_refuses_a_bad_prompt_condition(tmp_path, capsys):
    _, out = run_llm(tmp_path, capsys, "cpr", script(tmp_path, GOOD))
    cfg = json.loads((out / "config.json").read_text())
    for key, value, needle in (
        ("prompt", "poetry", "params.prompt must be standard, alternate, cot or tom"),
        ("deliberation", "yes", "deliberation"),
        ("players", "nash", "players is llm exactly when agents is llm"),
    ):
        bad = {**cfg, "params": {**cfg["params"], key: value}}
        (out / "config.json").write_text(json.dumps(bad))
        code, _, err = run_cli(["resume", str(out), "-q"], capsys)
        assert code == 2 and needle in err and len(err.splitlines()) == 1, err
    (out / "config.json").write_text(json.dumps(cfg))


def test_agents_llm_alone_means_llm_players(tmp_path, capsys):
    model = script(tmp_path, GOOD)
    code, stdout, err = run_cli(
        [
            "run",
            "game",
            "--game",
            "o-ring",
            "--agents",
            "llm",
            "--model",
            f"scripted:{model}",
            "--cache",
            "off",
            "--simulations",
            "1",
            "--out",
            str(tmp_path / "o"),
            "-q",
            "--json",
        ],
        capsys,
    )
    assert code == 0, err
    assert json.loads(stdout)["players"] == "llm"
    assert np.isfinite(json.loads(stdout)["metric"]["mean"])
