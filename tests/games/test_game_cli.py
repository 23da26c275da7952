"""``cooplab run game`` end to end for each game (``--json``), scripted players, resume (Ctrl-C and
kill -9 mid-run, a finished run, an edited config.json) and bad input (one line, exit 2)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from cooplab.cli import main
from cooplab.evals.typed import as_series, column
from cooplab.tasks.games.params import GAMES, TABLE4
from tests.helpers.progress import kill_when


def run_cli(args, capsys):
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code, err, needle=None):
    lines = err.splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("cooplab: error: "), err
    if needle is not None:
        assert needle in lines[0], lines[0]


def digest(d: Path) -> dict[str, str]:
    return {
        str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.rglob("*")) if p.is_file()
    }


TABLES = ("players", "rounds", "simulations", "convergence")


# --- every game, end to end --------------------------------------------------------------------------------
@pytest.mark.parametrize("game", GAMES)
def test_run_each_game_with_json(tmp_path, capsys, game):
    results = {}
    for players in ("nash", "pareto", "random"):
        out = tmp_path / players
        code, stdout, err = run_cli(
            [
                "run",
                "game",
                "--game",
                game,
                "--players",
                players,
                "--simulations",
                "20",
                "--seed",
                "3",
                "--out",
                str(out),
                "-q",
                "--json",
            ],
            capsys,
        )
        assert code == 0, err
        s = json.loads(stdout)
        results[players] = s
        assert s["task"] == "game" and s["game"] == game and s["status"] == "completed" and s["players"] == players
        assert s["rounds_completed"] == (10 if game == "collective-risk" else 3) and s["simulations"] == 20
        assert set(s["metric"]) >= {"mean", "ci95", "nash", "pareto"} and len(s["metric"]["ci95"]) == 2
        assert set(s["pareto_proximity"]) >= {"mean", "ci95", "near_pareto_share"}
        for stem in TABLES + (("sanctions",) if game == "cpr-sanction" else ()):
            assert (out / f"{stem}.parquet").exists(), stem
        assert (out / "figures" / "run.png").stat().st_size > 5_000 and "figure_error" not in s
        players_t = pd.read_parquet(out / "players.parquet")
        sims = pd.read_parquet(out / "simulations.parquet")
        assert len(players_t) == 20 * 10 * s["rounds_completed"] and len(sims) == 20
        assert s["metric"]["mean"] == pytest.approx(column(sims, "metric").mean())
        assert s["payoff"]["mean_total_per_player"] == pytest.approx(
            as_series(players_t.groupby("simulation")["payoff"].sum()).mean() / 10
        )
    n, p, r = results["nash"], results["pareto"], results["random"]
    assert (
        n["metric"]["mean"] == n["metric"]["nash"]
        and n["pareto_proximity"]["mean"] == 1.0
        and n["pareto_proximity"]["near_pareto_share"] == 0
    )
    assert (
        p["metric"]["mean"] == p["metric"]["pareto"]
        and p["pareto_proximity"]["mean"] == 0.0
        and p["pareto_proximity"]["near_pareto_share"] == 1
    )
    assert (
        p["payoff"]["mean_total_per_player"] > n["payoff"]["mean_total_per_player"]
    )  # Pareto play pays more than Nash play
    assert r["metric"]["ci95"][0] < r["metric"]["mean"] < r["metric"]["ci95"][1]


def test_group_size_and_rounds_options(tmp_path, capsys):
    out = tmp_path / "r"
    code, stdout, err = run_cli(
        [
            "run",
            "game",
            "--game",
            "public-goods",
            "--players",
            "pareto",
            "--group-size",
            "8",
            "--rounds",
            "4",
            "--simulations",
            "3",
            "--set",
            "group_multiplier=3.0",
            "--out",
            str(out),
            "-q",
            "--json",
        ],
        capsys,
    )
    assert code == 0, err
    s = json.loads(stdout)
    assert s["group_sizes"] == [8, 8] and s["n_players"] == 16 and s["rounds_completed"] == 4
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["params"]["group_multiplier"] == 3.0 and cfg["agents"] == "rule"
    assert s["payoff"]["mean_per_player_per_round"] == pytest.approx(
        3.0 * 80 / 8
    )  # all 10 in the group pool, x3 split among 8


def test_table4_group_sizes_run(tmp_path, capsys):
    for game, sizes in TABLE4.items():
        for k in sizes:
            code, stdout, err = run_cli(
                [
                    "run",
                    "game",
                    "--game",
                    game,
                    "--players",
                    "pareto",
                    "--group-size",
                    str(k),
                    "--simulations",
                    "2",
                    "--out",
                    str(tmp_path / f"{game}-{k}"),
                    "-q",
                    "--json",
                ],
                capsys,
            )
            assert code == 0, (game, k, err)
            assert json.loads(stdout)["pareto_proximity"]["mean"] == 0.0


def test_console_script_runs(tmp_path):
    exe = Path(sys.executable).parent / "cooplab"
    res = subprocess.run(
        [
            str(exe),
            "run",
            "game",
            "--game",
            "o-ring",
            "--players",
            "pareto",
            "--out",
            str(tmp_path / "r"),
            "--json",
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    s = json.loads(res.stdout)
    assert s["outcomes"]["success_rate"] == 1.0 and s["metric"]["mean"] == 6.0


# --- scripted players through the CLI ----------------------------------------------------------------------
def test_scripted_players_through_the_cli(tmp_path, capsys):
    f = tmp_path / "wl.json"
    f.write_text(json.dumps({"game": "weakest-link", "rounds": [{"actions": [10] * 9 + [3]}]}))
    out = tmp_path / "r"
    code, stdout, err = run_cli(
        [
            "run",
            "game",
            "--game",
            "weakest-link",
            "--players",
            f"scripted:{f}",
            "--simulations",
            "2",
            "--out",
            str(out),
            "-q",
            "--json",
        ],
        capsys,
    )
    assert code == 0, err
    s = json.loads(stdout)
    assert s["players"] == "scripted" and s["script_file"] == str(f)
    t = pd.read_parquet(out / "players.parquet")
    assert t.loc[t["player"] < 9, "payoff"].eq(-4.0).all() and t.loc[t["player"] == 9, "payoff"].eq(3.0).all()
    assert s["metric"]["mean"] == pytest.approx(9.3) and s["outcomes"]["mean_min_effort"] == 3.0
    f.unlink()  # the run keeps its script in config.json: it resumes without the file
    assert run_cli(["resume", str(out), "-q"], capsys)[0] == 0


def test_scripted_sanctions_through_the_cli(tmp_path, capsys):
    f = tmp_path / "s.json"
    f.write_text(
        json.dumps({"rounds": [{"actions": [2, 2, 2, 2, 10, 10, 10, 10, 10, 10], "sanctions": [[0, 4, 3], [1, 4, 2]]}]})
    )
    out = tmp_path / "r"
    code, stdout, err = run_cli(
        [
            "run",
            "game",
            "--game",
            "cpr-sanction",
            "--players",
            f"scripted:{f}",
            "--simulations",
            "2",
            "--out",
            str(out),
            "-q",
            "--json",
        ],
        capsys,
    )
    assert code == 0, err
    t = pd.read_parquet(out / "players.parquet")
    r1 = t[(t["round"] == 1) & (t["simulation"] == 0)].set_index("player")
    assert r1.loc[0, "payoff"] == pytest.approx(8.6) and r1.loc[4, "payoff"] == pytest.approx(9.6)
    assert r1.loc[4, "sanctions_received"] == 5 and r1.loc[0, "sanctions_given"] == 3
    sanc = pd.read_parquet(out / "sanctions.parquet")
    assert len(sanc) == 2 * 3 * 2 and set(sanc["target"]) == {4}
    s = json.loads(stdout)["outcomes"]["sanctions"]
    assert s["tokens_given_per_player_round"] == pytest.approx(0.5) and s["dropped_out_of_group"] == 0


# --- resume -----------------------------------------------------------------------------------------------
def assert_same_run(a: Path, b: Path, game: str) -> None:
    for stem in TABLES + (("sanctions",) if game == "cpr-sanction" else ()):
        pd.testing.assert_frame_equal(pd.read_parquet(a / f"{stem}.parquet"), pd.read_parquet(b / f"{stem}.parquet"))
    sa, sb = (json.loads((d / "summary.json").read_text()) for d in (a, b))
    for key in ("metric", "pareto_proximity", "payoff", "outcomes", "convergence"):
        assert sa[key] == sb[key], key


@pytest.mark.parametrize("game", ["cpr-sanction", "collective-risk", "public-goods"])
def test_ctrl_c_mid_run_then_resume_matches_an_uninterrupted_run(tmp_path, capsys, monkeypatch, game):
    from cooplab.tasks.games import task as gt

    base = ["run", "game", "--game", game, "--players", "random", "--simulations", "30", "--seed", "9", "-q", "--json"]
    assert run_cli(base + ["--out", str(tmp_path / "ref")], capsys)[0] == 0
    real = gt.phases_for

    def crashing(P, policies):
        nodes = real(P, policies)
        settle = nodes["settle"]

        def settle_then_crash(state):
            if state["round"] == 2:
                raise KeyboardInterrupt  # as if Ctrl-C came in round 2's last phase
            return settle(state)

        nodes["settle"] = settle_then_crash
        return nodes

    monkeypatch.setattr(gt, "phases_for", crashing)
    code, _, err = run_cli(base + ["--out", str(tmp_path / "run")], capsys)
    assert code == 130 and "cooplab resume" in err
    assert not (tmp_path / "run" / "summary.json").exists()
    monkeypatch.setattr(gt, "phases_for", real)
    code, out, err = run_cli(["resume", str(tmp_path / "run"), "-q", "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["rounds_completed"] == (10 if game == "collective-risk" else 3)
    assert_same_run(tmp_path / "ref", tmp_path / "run", game)


def test_kill_9_mid_run_then_resume_matches_an_uninterrupted_run(tmp_path):
    exe = str(Path(sys.executable).parent / "cooplab")

    def args(out):
        return [
            exe,
            "run",
            "game",
            "--game",
            "cpr-sanction",
            "--players",
            "random",
            "--rounds",
            "400",
            "--simulations",
            "50",
            "--seed",
            "5",
            "--out",
            str(out),
            "-q",
            "--json",
        ]

    ref = subprocess.run(args(tmp_path / "ref"), capture_output=True, text=True, timeout=600)
    assert ref.returncode == 0, ref.stderr
    proc = subprocess.Popen(args(tmp_path / "run"), stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def some_checkpoints() -> bool:
        import sqlite3

        db = tmp_path / "run" / "checkpoints.sqlite"
        if not db.exists():
            return False
        try:
            with sqlite3.connect(str(db), timeout=0.2) as c:
                return c.execute("SELECT count(*) FROM checkpoints").fetchone()[0] >= 12
        except sqlite3.Error:
            return False

    if not kill_when(proc, some_checkpoints, timeout=300):  # pragma: no cover - a machine fast enough to finish first
        raise AssertionError("the run finished before 12 checkpoints were seen; raise --rounds")
    assert not (tmp_path / "run" / "summary.json").exists()
    res = subprocess.run(
        [exe, "resume", str(tmp_path / "run"), "-q", "--json"], capture_output=True, text=True, timeout=600
    )
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["rounds_completed"] == 400
    assert_same_run(tmp_path / "ref", tmp_path / "run", "cpr-sanction")


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    base = tmp_path_factory.mktemp("game-runs")
    f = base / "script.json"
    f.write_text(json.dumps({"rounds": [{"actions": 4, "sanctions": [[0, 1, 2]]}]}))
    assert (
        main(
            [
                "run",
                "game",
                "--game",
                "cpr-sanction",
                "--players",
                "random",
                "--simulations",
                "4",
                "--out",
                str(base / "random"),
                "-q",
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "run",
                "game",
                "--game",
                "cpr-sanction",
                "--players",
                f"scripted:{f}",
                "--simulations",
                "2",
                "--out",
                str(base / "scripted"),
                "-q",
            ]
        )
        == 0
    )
    return base


def test_resume_of_a_finished_run_rewrites_the_same_summary(finished, tmp_path, capsys):
    d = tmp_path / "r"
    shutil.copytree(finished / "random", d)
    before = json.loads((d / "summary.json").read_text())
    code, out, err = run_cli(["resume", str(d), "-q", "--json"], capsys)
    assert code == 0, err
    after = json.loads(out)
    for key in ("metric", "pareto_proximity", "payoff", "outcomes", "rounds_completed"):
        assert after[key] == before[key]


@pytest.mark.parametrize(
    "name,patch,needle",
    [
        ("random", {"params.game": "chess"}, "game must be weakest-link, cpr"),
        ("random", {"params.players": "robot"}, "players must be llm, nash"),
        ("random", {"game": "cpr"}, "unknown field 'game'"),
        ("random", {"params.multiplier": 20.0}, "multiplier"),
        ("random", {"params.multiplier": "3"}, "multiplier"),
        ("random", {"params.simulations": -1}, "simulations"),
        ("random", {"params.group_sizes": [5, 1]}, "group_sizes"),
        ("random", {"params.sanction_cost": float("nan")}, "sanction_cost"),
        ("random", {"params.unknown": 1}, "unknown"),
        ("random", {"params.script": {"rounds": []}}, "script must be null"),
        ("random", {"agents": "llm"}, "agents"),
        (
            "scripted",
            {"params.script": {"rounds": [{"actions": 4, "sanctions": [[0, 7, 2]]}]}},
            "only possible within one's own group",
        ),
        ("scripted", {"params.script": None}, "script must be a JSON object"),
    ],
)
def test_resume_refuses_an_edited_config(finished, tmp_path, capsys, name, patch, needle):
    d = tmp_path / name
    shutil.copytree(finished / name, d)
    cfg = json.loads((d / "config.json").read_text())
    for key, value in patch.items():
        if key.startswith("params."):
            cfg["params"][key.split(".", 1)[1]] = value
        else:
            cfg[key] = value
    (d / "config.json").write_text(json.dumps(cfg))
    before = digest(d)
    code, _, err = run_cli(["resume", str(d), "-q"], capsys)
    assert_one_line_error(code, err, needle)
    assert digest(d) == before


# --- bad input ------------------------------------------------------------------------------------------------
CLI_BAD = ["nan", "inf", "-1", "0", "1", "1" + "0" * 30, "abc", "true", "", "2.5", "1001"]


@pytest.mark.parametrize("option", ["--group-size", "--simulations", "--rounds", "--seed"])
def test_numeric_options_refuse_bad_values_in_one_line(tmp_path, capsys, option):
    for bad in CLI_BAD:
        if (option, bad) in {
            ("--seed", "0"),
            ("--seed", "1"),
            ("--rounds", "1"),
            ("--simulations", "1"),
            ("--rounds", "1001"),
            ("--simulations", "1001"),
            ("--seed", "1001"),
        }:
            continue  # valid values of these options
        code, _, err = run_cli(["run", "game", "--game", "cpr", option, bad, "--out", str(tmp_path / "o")], capsys)
        assert_one_line_error(code, err, option)
        assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--game", "chess"], "--game"),
        (["--game", "CPR"], "--game"),
        (["--game", ""], "--game"),
        ([], "--game"),
        (["--game", "o-ring", "--group-size", "10"], "no withdrawals reach"),
        (["--game", "public-goods", "--group-size", "2"], "group_multiplier"),
        (["--game", "cpr", "--group-size", "100"], "multiplier x capacity"),
        (["--game", "cpr-sanction", "--group-size", "1000", "--simulations", "100000"], "at most"),
        (["--game", "cpr", "--simulations", "100000", "--rounds", "10000"], "simulations x rounds"),
        (["--game", "collective-risk", "--rounds", "30"], "free-riding is no equilibrium"),
        (["--game", "cpr", "--set", "multiplier=nan"], "multiplier"),
        (["--game", "cpr", "--set", "multiplier=1e300"], "multiplier"),
        (["--game", "cpr", "--set", "multiplier=0.5"], "multiplier"),
        (["--game", "cpr", "--set", "capacity=abc"], "capacity"),
        (["--game", "cpr", "--set", "capacity=-5"], "capacity"),
        (["--game", "cpr", "--set", 'capacity="100"'], "capacity"),
        (["--game", "cpr", "--set", "sanction_cost=2"], "unknown parameter 'sanction_cost'"),
        (["--game", "cpr", "--set", "nothing"], "name=value"),
        (["--game", "cpr", "--set", "group_sizes=[5,1]"], "group_sizes"),
        (["--game", "cpr", "--set", "group_sizes=[]"], "group_sizes"),
        (["--game", "cpr", "--set", "rounds=5", "--rounds", "4"], "either"),
        (["--game", "weakest-link", "--set", "effort_cost=2"], "min_weight"),
        (["--game", "collective-risk", "--set", "loss_probability=1.5"], "loss_probability"),
        (["--game", "collective-risk", "--set", "threshold=1000"], "threshold"),
        (["--game", "o-ring", "--set", "reward=10"], "reward"),
        (["--game", "cpr", "--players", "llm", "--prompt", "poetry"], "--prompt"),
        (["--game", "cpr", "--players", "random", "--prompt", "cot"], "--players llm only"),
        (["--game", "cpr", "--players", "nash", "--deliberation"], "--players llm only"),
        (["--game", "cpr", "--players", "greedy"], "--players"),
        (["--game", "cpr", "--players", "scripted"], "--players"),
        (["--game", "cpr", "--players", "nash:x"], "--players"),
        (["--game", "cpr", "--players", "scripted:/nonexistent/x.json"], "not found"),
        (["--game", "cpr", "--agents", "llm", "--players", "nash"], "--agents"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path, capsys, args, needle):
    code, _, err = run_cli(["run", "game", *args, "--out", str(tmp_path / "o")], capsys)
    assert_one_line_error(code, err, needle)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "content,needle",
    [
        ("not json", "not valid JSON"),
        ('{"rounds": [{"actions": 11}]}', "0..10"),
        ('{"rounds": [{"actions": [1, 2]}]}', "one value per player"),
        ('{"rounds": [{"actions": 1, "sanctions": [[0, 1, 1]]}]}', "does not use"),
        ('{"game": "o-ring", "rounds": [{"actions": 1}]}', "not 'cpr'"),
    ],
)
def test_bad_scripted_files(tmp_path, capsys, content, needle):
    f = tmp_path / "s.json"
    f.write_text(content)
    code, _, err = run_cli(
        ["run", "game", "--game", "cpr", "--players", f"scripted:{f}", "--out", str(tmp_path / "o")], capsys
    )
    assert_one_line_error(code, err, needle)
    assert not (tmp_path / "o").exists()


# --- params, graph, help --------------------------------------------------------------------------------------
def test_params_lists_every_game_parameter(capsys):
    from cooplab.tasks.games.params import MODELS

    code, out, _ = run_cli(["params", "game", "--json"], capsys)
    rows = json.loads(out)
    listed = {(r["game"], r["name"]) for r in rows}
    assert (
        code == 0 and {(g, n) for g, m in MODELS.items() for n in m.model_fields} <= listed
    )  # every equation parameter
    run = {
        "players",
        "script_file",
        "prompt",
        "deliberation",
    }  # and every setting of the run beside them (issue 39 step 2)
    assert {(g, n) for g in MODELS for n in run} <= listed
    assert all(r["meaning"] and r["source"] for r in rows)
    code, out, _ = run_cli(["params", "game", "--game", "o-ring"], capsys)
    assert code == 0 and "success_threshold" in out and "multiplier" not in out


def test_graph_shows_the_phases_of_each_game(capsys):
    for game, nodes in (
        ("cpr-sanction", ("extract", "sanction", "settle")),
        ("public-goods", ("allocate", "settle")),
        ("collective-risk", ("contribute", "settle")),
    ):
        code, out, _ = run_cli(["graph", "game", "--game", game], capsys)
        assert code == 0 and all(n in out for n in nodes)
    assert "sanction" not in run_cli(["graph", "game", "--game", "cpr"], capsys)[1]


def test_the_game_option_offers_exactly_the_games_in_their_order():
    """``--game``'s choices (the Game enum of cooplab/cli/games.py, written out for the type checker)
    are the task's GAMES, in order: a game added to one and not the other fails here."""
    from cooplab.cli.games import Game

    assert [g.value for g in Game] == list(GAMES)
    assert [g.name for g in Game] == [g.replace("-", "_") for g in GAMES]


def test_help(capsys):
    for cmd in (["run", "game"], ["params", "game"], ["graph", "game"]):
        code, out, _ = run_cli(cmd + ["--help"], capsys)
        assert code == 0 and "Usage" in out and "--game" in out


def test_a_game_run_without_a_game_says_which_to_choose(tmp_path):
    """``cooplab.run(task="game")`` without ``game=`` is one clear line, not a TypeError about a keyword."""
    import cooplab
    from cooplab.limits import ConfigError

    with pytest.raises(ConfigError, match=r"say which game to play with game: one of weakest-link, cpr"):
        cooplab.run(task="game", rounds=2, out=str(tmp_path / "r"), quiet=True)
    assert not (tmp_path / "r").exists()
