"""Counterfactual forks (issue 40 point 4): ``cooplab fork RUN --at-round K`` starts a new run from
RUN's LangGraph checkpoint at the end of round K with changes applied; ``cooplab compare A B``.

One scripted LLM CPR parent (3 agents, 4 rounds, 2 societies) is forked in several ways; each
fork is checked against its parent's tables and ledger, and against a fresh fork of the same
point. The prefix's strict replay and the distinct keys of repeated calls have unit tests in
tests/agents/test_call_keys.py."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import threading
from pathlib import Path

import pandas as pd
import pytest

import cooplab
from cooplab.cli import main
from cooplab.evals.typed import as_frame
from tests.helpers.cli import fail_line
from tests.helpers.progress import checkpoints, kill_when

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "scripted" / "cautious.json"
GREEDY = ROOT / "examples" / "scripted" / "greedy.json"


@pytest.fixture(scope="module")
def parent(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("fork")
    run = cooplab.run(
        task="cpr",
        agents="llm",
        model=f"scripted:{SCRIPT}",
        n_agents=3,
        rounds=4,
        replicates=2,
        seed=9,
        cache=str(base / "cache.sqlite"),
        out=base / "parent",
        quiet=True,
    )
    assert run.status == "completed"
    return run.out


def files(run: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(run.iterdir())
        if p.is_file() and p.name != ".cooplab.lock"
    }


def upto(df: pd.DataFrame, k: int, *, after: bool = False) -> pd.DataFrame:
    return as_frame(df[(df["round"] > k) if after else (df["round"] <= k)]).reset_index(drop=True)


def decisions(run) -> pd.DataFrame:  # what was decided (not whether it came from the cache, nor how long it took)
    return run.decisions.drop(columns=["cached_calls", "latency"])


def test_an_unchanged_fork_reproduces_the_whole_parent_at_zero_new_calls(parent, tmp_path):
    before = files(parent)
    p = cooplab.Run.open(parent)
    f = cooplab.fork(parent, at_round=2, out=tmp_path / "f", quiet=True)
    assert f.status == "completed"
    pd.testing.assert_frame_equal(p.rounds, f.rounds)
    pd.testing.assert_frame_equal(decisions(p), decisions(f))
    pd.testing.assert_frame_equal(p.table("agents"), f.table("agents"))
    lg = f.summary["ledger"]
    assert lg["calls"] > 0 and lg["calls"] == lg["cached_calls"]  # every call of rounds 3..4 replayed; none paid
    assert set(f.ledger["round"]) == {3, 4}  # rounds 1..2 asked nothing: they came from the checkpoint
    for key in ("survival_time", "efficiency", "collapse", "rounds_completed", "agent_steps"):
        assert f.summary[key] == p.summary[key], key
    rec = f.config["record"]["fork"]
    assert rec["at_round"] == 2 and rec["changes"] == {} and rec["parent"] == str(parent)
    assert rec["parent_thread_id"] == p.config["record"]["thread_id"] != f.config["record"]["thread_id"]
    assert files(parent) == before  # the parent is read, never written


def test_a_changed_fork_keeps_rounds_1_to_k_and_diverges_after(parent, tmp_path):
    p = cooplab.Run.open(parent)
    g = cooplab.fork(parent, at_round=2, out=tmp_path / "g", set=["r=0.6"], quiet=True)
    pd.testing.assert_frame_equal(upto(p.rounds, 2), upto(g.rounds, 2))
    assert not upto(p.rounds, 2, after=True).equals(upto(g.rounds, 2, after=True))
    assert g.config["record"]["fork"]["changes"] == {"set": {"r": 0.6}} and g.config["params"]["r"] == 0.6
    assert min(g.ledger["round"]) == 3  # no call of the prefix
    cmp = cooplab.compare(parent, g.out, out=tmp_path / "cmp")
    assert cmp.common_round == 2 and cmp.first_difference == 3
    eff = next(o for o in cmp.outcomes if o["outcome"] == "efficiency")
    assert eff["difference"] == pytest.approx(g.summary["efficiency"]["mean"] - p.summary["efficiency"]["mean"])
    assert (
        eff["interval"].startswith("paired") and eff["low"] <= eff["difference"] <= eff["high"]
    )  # two societies, paired by the shared start
    saved = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    assert saved["first_difference"] == 3 and set(saved["curves"]) == {"R", "n_alive", "mean_effort", "H"}
    assert (tmp_path / "cmp" / "compare.png").stat().st_size > 0

    # a fork of the fork: rounds 1..3 are the fork's, the model after them another one
    gg = cooplab.fork(g.out, at_round=3, out=tmp_path / "gg", model=f"scripted:{GREEDY}", quiet=True)
    pd.testing.assert_frame_equal(upto(g.rounds, 3), upto(gg.rounds, 3))
    assert not upto(g.rounds, 3, after=True).equals(upto(gg.rounds, 3, after=True))
    assert [x["rounds"] for x in gg.config["record"]["fork"]["lineage"]] == [
        2,
        3,
    ]  # the grandparent's rounds 1..2, the parent's 1..3
    assert cooplab.compare(parent, gg.out).common_round == 2 and cooplab.compare(g.out, gg.out).common_round == 3


def test_two_forks_of_one_checkpoint_side_by_side_match_fresh_ones(parent, tmp_path):
    before = files(parent)
    changes = {"a": dict(set={"r": 0.5}), "b": dict(set={"beta": 14.0})}
    errors: list[BaseException] = []

    def go(name):
        try:
            cooplab.fork(parent, at_round=1, out=tmp_path / "together" / name, quiet=True, **changes[name])
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=go, args=(n,)) for n in changes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for name in changes:
        alone = cooplab.fork(parent, at_round=1, out=tmp_path / "alone" / name, quiet=True, **changes[name])
        together = cooplab.Run.open(tmp_path / "together" / name)
        pd.testing.assert_frame_equal(alone.rounds, together.rounds)
        pd.testing.assert_frame_equal(decisions(alone), decisions(together))
    a, b = (cooplab.Run.open(tmp_path / "together" / n) for n in changes)
    assert a.config["record"]["thread_id"] != b.config["record"]["thread_id"]
    assert not a.rounds.equals(b.rounds)
    assert files(parent) == before


def test_a_fork_killed_mid_run_resumes_to_the_uninterrupted_fork(parent, tmp_path):
    exe = str(Path(sys.executable).parent / "cooplab")

    def args(out):
        return [exe, "fork", str(parent), "--at-round", "1", "--set", "r=0.4", "--out", str(out), "-q", "--json"]

    ref = cooplab.fork(parent, at_round=1, set=["r=0.4"], out=tmp_path / "ref", quiet=True)
    proc = subprocess.Popen(args(tmp_path / "run"), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # the fork's first checkpoint is the parent's state; killed a few steps after it, in round 2 or 3
    assert kill_when(proc, lambda: checkpoints(tmp_path / "run") >= 4, timeout=300), (
        "the fork finished before it could be killed"
    )
    assert not (tmp_path / "run" / "summary.json").exists()
    res = subprocess.run(
        [exe, "resume", str(tmp_path / "run"), "-q", "--json"], capture_output=True, text=True, timeout=600
    )
    assert res.returncode == 0, res.stderr
    a, b = ref.summary, json.loads(res.stdout)
    assert (
        b["status"] == "completed" and a["survival_time"] == b["survival_time"] and a["efficiency"] == b["efficiency"]
    )
    pd.testing.assert_frame_equal(cooplab.Run.open(tmp_path / "ref").rounds, cooplab.Run.open(tmp_path / "run").rounds)
    assert json.loads((tmp_path / "run" / "config.json").read_text())["record"]["fork"]["at_round"] == 1
    # its traces: the killed first part traced as the fork (tag "fork"), the second as resumed; both name the parent
    from cooplab.graphs.tracing import load_runs

    roots = [
        r
        for r in load_runs(tmp_path / "run" / "traces.jsonl")
        if r.get("parent_run_id") is None and r.get("run_type") == "chain"
    ]
    pid = json.loads((parent / "config.json").read_text())["record"]["thread_id"]
    assert [r["extra"]["metadata"]["started_as"] for r in roots] == ["fork", "resumed"]
    assert ["fork" in r["tags"] for r in roots] == [True, False] and ["resumed" in r["tags"] for r in roots] == [
        False,
        True,
    ]
    assert all(r["extra"]["metadata"]["fork_of"] == pid and r["extra"]["metadata"]["fork_at_round"] == 1 for r in roots)


def test_bad_input_is_one_line_exit_2_and_writes_nothing(parent, tmp_path, capsys):
    out = tmp_path / "x"
    cases = {
        ("fork", str(tmp_path / "nowhere"), "--at-round", "1"): "does not exist",
        ("fork", str(tmp_path), "--at-round", "1"): "not a cooplab run directory",
        ("fork", str(parent), "--at-round", "5"): "out of range",
        ("fork", str(parent), "--at-round", "-1"): "0 or more",
        ("fork", str(parent), "--at-round", "two"): "--at-round",
        ("fork", str(parent), "--at-round", "1", "--set", "nosuch=1"): "unknown parameter 'nosuch'",
        ("fork", str(parent), "--at-round", "1", "--set", "r=-1"): "r",
        ("fork", str(parent), "--at-round", "1", "--set", "N=5"): "start of a run",
        ("fork", str(parent), "--at-round", "1", "--prompt-variant", "terse"): "unknown prompt variant 'terse'",
        ("fork", str(parent), "--at-round", "1", "--model", "nosuch:x"): "nosuch",
    }
    for argv, words in cases.items():
        line = fail_line(capsys, [*argv, "--out", str(out), "-q"])
        assert words in line, (argv, line)
        assert not out.exists(), argv
    assert "parent run itself" in fail_line(capsys, ["fork", str(parent), "--at-round", "1", "--out", str(parent)])
    assert "does not exist" in fail_line(capsys, ["compare", str(parent), str(tmp_path / "nowhere")])
    assert "unknown column" in fail_line(capsys, ["compare", str(parent), str(parent), "--column", "nosuch"])
    with pytest.raises(cooplab.ConfigError, match="out of range"):
        cooplab.fork(parent, at_round=9, out=out)
    with pytest.raises(cooplab.ConfigError, match="whole number"):
        cooplab.fork(parent, at_round=1.5, out=out)
    assert not out.exists()


def test_compare_of_a_run_with_itself_and_the_json_output(parent, capsys):
    assert main(["compare", str(parent), str(parent), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["first_difference"] is None and res["common_round"] == 4
    assert all(o["difference"] == 0 for o in res["outcomes"])


@pytest.mark.parametrize(
    "task,kw,at",
    [
        ("cpr", dict(n_agents=4, rounds=6, replicates=3, seed=2), 3),
        ("diners", dict(iterations=4, replicates=2, seed=3), 2),
        ("game", dict(game="public-goods", simulations=2, rounds=3, seed=0), 1),
    ],
    ids=["cpr-rule", "diners", "game"],
)
def test_an_unchanged_fork_of_a_rule_run_of_any_task_is_its_parent(task, kw, at, tmp_path):
    p = cooplab.run(task=task, out=tmp_path / "p", quiet=True, **kw)
    f = cooplab.fork(p.out, at_round=at, out=tmp_path / "f", quiet=True)
    assert p.tables == f.tables
    for name in p.tables:
        pd.testing.assert_frame_equal(p.table(name), f.table(name), obj=name)
    if task == "cpr":  # a changed parameter: rounds 1..K kept, the rest not
        g = cooplab.fork(p.out, at_round=at, out=tmp_path / "g", set={"beta": 14.0, "r": 0.5}, quiet=True)
        pd.testing.assert_frame_equal(upto(p.rounds, at), upto(g.rounds, at))
        assert cooplab.compare(p.out, g.out).first_difference == at + 1


@pytest.mark.parametrize(
    "task,kw,fixed",
    [
        ("diners", dict(iterations=4, replicates=2, seed=3), {"replicates": 3}),
        ("diners", dict(iterations=4, replicates=2, seed=3), {"groups": [["M", "P", "E"], ["M", "P", "R1"]]}),
        ("game", dict(game="public-goods", simulations=2, rounds=3, seed=0), {"group_sizes": [4, 5]}),
        ("game", dict(game="public-goods", simulations=2, rounds=3, seed=0), {"simulations": 3}),
        ("game", dict(game="public-goods", simulations=2, rounds=3, seed=0), {"rounds": 2}),
    ],
    ids=["diners-replicates", "diners-groups", "game-groups", "game-simulations", "game-rounds-too-few"],
)
def test_a_fork_refuses_a_setting_of_the_start_in_one_line_naming_it(task, kw, fixed, tmp_path):
    p = cooplab.run(task=task, out=tmp_path / "p", quiet=True, **kw)
    name = next(iter(fixed))
    line = fail_line_py(lambda: cooplab.fork(p.out, at_round=2, out=tmp_path / "g", set=fixed, quiet=True))
    assert (
        "\n" not in line and name in line and ("fixed at the start" in line or "before the fork's first round" in line)
    ), line
    assert not (tmp_path / "g").exists()


def _players(run, k: int, *, after: bool = False) -> pd.DataFrame:
    df = run.table("players")
    df = df[(df["round"] > k) if after else (df["round"] <= k)]
    return df[["simulation", "round", "player", "extraction", "payoff"]].reset_index(drop=True)


def test_a_game_fork_with_a_changed_constant_plays_on_with_it(tmp_path):
    """A game's constant changed at a fork: rounds 1..K are the parent's, rounds K+1.. are those of a
    run that had the new value from its start (random players draw per round, so the two agree), and
    a longer game plays its extra rounds."""
    kw = dict(task="game", game="cpr", players="random", simulations=3, rounds=4, seed=5, quiet=True)
    p = cooplab.run(out=tmp_path / "p", **kw)
    fresh = cooplab.run(out=tmp_path / "fresh", set={"multiplier": 5.0}, **kw)
    f = cooplab.fork(p.out, at_round=2, out=tmp_path / "f", set={"multiplier": 5.0}, quiet=True)
    assert f.config["params"]["multiplier"] == 5.0 and f.config["record"]["fork"]["changes"] == {
        "set": {"multiplier": 5.0}
    }
    pd.testing.assert_frame_equal(_players(p, 2), _players(f, 2))
    pd.testing.assert_frame_equal(_players(fresh, 2, after=True), _players(f, 2, after=True))
    assert not _players(p, 2, after=True)["payoff"].equals(_players(f, 2, after=True)["payoff"])
    longer = cooplab.fork(p.out, at_round=4, out=tmp_path / "l", set={"rounds": 6}, quiet=True)
    whole = cooplab.run(out=tmp_path / "whole", **{**kw, "rounds": 6})
    assert longer.summary["rounds_completed"] == 6
    pd.testing.assert_frame_equal(_players(whole, 99), _players(longer, 99))


def test_a_diners_fork_with_a_changed_cost_computes_the_next_iteration_with_it(tmp_path):
    """p changed at a fork after iteration K: iterations 1..K are the parent's; iteration K+1's orders
    and punishments are the parent's (the same state and draws decide them) and its utilities are
    meal - k x given - p_new x received, by hand; a longer run goes on past the parent's end."""
    kw = dict(task="diners", groups="M,P,E,D;M,M,P,D", iterations=4, replicates=2, seed=4, quiet=True)
    p = cooplab.run(out=tmp_path / "p", **kw)
    f = cooplab.fork(p.out, at_round=1, out=tmp_path / "f", set={"p": 6.0}, quiet=True)
    pu, fu = p.table("utilities"), f.table("utilities")
    pd.testing.assert_frame_equal(
        pu[pu["iteration"] <= 1].reset_index(drop=True), fu[fu["iteration"] <= 1].reset_index(drop=True)
    )
    a, b = pu[pu["iteration"] == 2].reset_index(drop=True), fu[fu["iteration"] == 2].reset_index(drop=True)
    for col in ("strategy", "meal_utility", "punishments_given", "punishments_received"):
        pd.testing.assert_series_equal(a[col], b[col])
    assert (b["punishments_received"] > 0).any()  # defectors punished in iteration 2
    expected = b["meal_utility"] - 1.0 * b["punishments_given"] - 6.0 * b["punishments_received"]
    assert b["utility"].tolist() == pytest.approx(expected.tolist())
    assert a["utility"].tolist() == pytest.approx(
        (a["meal_utility"] - a["punishments_given"] - 3.0 * a["punishments_received"]).tolist()
    )
    longer = cooplab.fork(p.out, at_round=4, out=tmp_path / "l", set={"iterations": 6}, quiet=True)
    assert longer.summary["iterations_completed"] == 6 and set(longer.table("utilities")["iteration"]) == set(
        range(1, 7)
    )


def test_a_parent_with_a_planted_object_is_refused_in_one_line_and_nothing_runs(parent, tmp_path, capsys):
    import shutil

    from tests.helpers.planted import payloads, plant

    marker = tmp_path / "MARKER"
    bad = tmp_path / "bad"
    shutil.copytree(parent, bad, ignore=shutil.ignore_patterns(".cooplab.lock"))
    value, shown = payloads(marker)["os.system"]
    assert plant(bad / "checkpoints.sqlite", value) > 0
    line = fail_line(capsys, ["fork", str(bad), "--at-round", "1", "--out", str(tmp_path / "f"), "-q"])
    assert "cannot be trusted" in line and shown in line
    assert not list(tmp_path.glob("MARKER*")) and not (tmp_path / "f").exists()


def test_a_rule_fork_with_an_invader_is_the_run_invaded_from_the_start(tmp_path):
    """--invader in a fork: a greedy newcomer at round 4 of a fork at round 2 gives, round for round,
    the run that had the invader from its start; an invader inside the shared rounds is refused."""
    kw = dict(task="cpr", n_agents=5, rounds=6, replicates=3, seed=11, quiet=True)
    cooplab.run(out=tmp_path / "p", **kw)
    invaded = cooplab.run(out=tmp_path / "ref", invader="greedy@4", **kw)
    f = cooplab.fork(tmp_path / "p", at_round=2, invader="greedy@4", out=tmp_path / "f")
    pd.testing.assert_frame_equal(f.rounds, invaded.rounds)
    assert (
        json.loads((tmp_path / "f" / "config.json").read_text())["record"]["fork"]["changes"]["invader"]["round"] == 4
    )
    line = fail_line_py(lambda: cooplab.fork(tmp_path / "p", at_round=4, invader="greedy@3", out=tmp_path / "g"))
    assert "must come after the fork's round 4" in line and not (tmp_path / "g").exists()


def fail_line_py(call) -> str:
    from cooplab.limits import ConfigError

    with pytest.raises(ConfigError) as err:
        call()
    return str(err.value)
