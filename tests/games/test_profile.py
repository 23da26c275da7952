"""``cooplab profile``: the six games for one model (scripted LLM players end to end), profile.json
against the games' own summaries, the merged decisions and ledger, continuing an interrupted profile
without paying twice, a profile-wide budget, other settings refused, and the Figure 2 drawing of
one or several profiles (hostile profile files refused in one line)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from cooplab.cli import main
from cooplab.tasks.games import profiles as pf
from cooplab.tasks.games.params import GAMES
from tests.games.test_llm_players import GOOD, script


def cell(out, game):
    """A game's run directory in a profile folder: the grid sweep's cell ``cells/game-GAME__sSEED``."""
    return pf.game_dirs(out)[game]


def cli(args, capsys):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def profile(tmp_path, capsys, model, out="prof", extra=(), expect=0) -> tuple[Any, Path, str]:
    """Run ``cooplab profile``; its --json answer (None when it printed none), its folder and stderr."""
    code, stdout, err = cli(
        [
            "profile",
            "--model",
            f"scripted:{model}",
            "--simulations",
            2,
            "--seed",
            3,
            "--cache",
            str(tmp_path / "cache.sqlite"),
            *extra,
            "--out",
            tmp_path / out,
            "-q",
            "--json",
        ],
        capsys,
    )
    assert code == expect, err
    return (json.loads(stdout) if stdout.strip() else None), tmp_path / out, err


def test_scripted_llm_profile_end_to_end(tmp_path, capsys):
    p, out, _ = profile(tmp_path, capsys, script(tmp_path, GOOD))
    assert p["status"] == "completed" and list(p["games"]) == list(GAMES) and p["simulations"] == 2
    assert json.loads((out / "profile.json").read_text()) == p
    total_decisions = total_calls = 0
    for game in GAMES:
        s = json.loads((cell(out, game) / "summary.json").read_text())
        e = p["games"][game]
        assert s["status"] == e["status"] == "completed" and s["players"] == "llm" and s["simulations"] == 2
        for k in ("mean", "ci95", "sd", "nash", "pareto", "label"):
            assert e["metric"][k] == s["metric"][k], (game, k)
        assert e["pareto_proximity"] == s["pareto_proximity"] and e["metric"]["n"] == 2
        total_decisions += s["decisions"]["count"]
        total_calls += s["ledger"]["calls"]
    d = pd.read_parquet(out / "decisions.parquet")
    assert len(d) == total_decisions == p["totals"]["decisions"] and set(d["game"]) == set(GAMES)
    lg = pd.read_parquet(out / "ledger.parquet")
    assert set(lg["game"]) == set(GAMES) and p["totals"]["calls"] == total_calls
    assert p["totals"]["output_tokens_per_decision"] > 0
    assert (out / "figures" / "profile.png").stat().st_size > 10_000


def test_reference_profiles_have_proximity_one_and_zero(tmp_path, capsys):
    for kind, want in (("nash", 1.0), ("pareto", 0.0)):
        code, stdout, err = cli(
            ["profile", "--players", kind, "--simulations", 3, "--out", tmp_path / kind, "--json"], capsys
        )
        assert code == 0, err
        p = json.loads(stdout)
        assert p["label"] == kind and p["model"] is None
        for game, e in p["games"].items():
            assert e["pareto_proximity"]["mean"] == want, game
            assert e["metric"]["mean"] == e["metric"][kind], game
        from cooplab.graphs import runfiles  # the profile's manifest: one cell per game, with its status

        m = runfiles.read_manifest(tmp_path / kind)
        assert (
            m.kind == "profile"
            and m.task == "game"
            and [c.name for c in m.cells] == [f"game-{g}__s0" for g in p["games"]]
        )
        assert {c.status for c in m.cells} == {"completed"} and [c.labels for c in m.cells] == [
            {"game": g, "seed": 0} for g in p["games"]
        ]
        assert all(p["games"][c.labels["game"]]["run_dir"] == c.dir == f"cells/{c.name}" for c in m.cells)
        assert m.outputs == {
            "table": "table.csv",
            "profile": "profile.json",
            "settings": "profile-config.json",
            "figure": "figures/profile.png",
        }
        assert not (tmp_path / kind / "games").exists()  # one layout: the grid sweep's


def test_interrupted_profile_continues_without_paying_twice(tmp_path, capsys, monkeypatch):
    from cooplab.tasks.games import task as gt

    model = script(tmp_path, GOOD)
    ref, _, _ = profile(tmp_path, capsys, model, out="ref", extra=["--cache", "off"])
    real = gt.phases_for

    def crashing(P, policies):  # the third game stops in its second round
        nodes = real(P, policies)
        settle = nodes["settle"]

        def settle_then_crash(state):
            if P.GAME == GAMES[2] and state["round"] == 2:
                raise KeyboardInterrupt
            return settle(state)

        nodes["settle"] = settle_then_crash
        return nodes

    monkeypatch.setattr(gt, "phases_for", crashing)
    args = [
        "profile",
        "--model",
        f"scripted:{model}",
        "--simulations",
        2,
        "--seed",
        3,
        "--cache",
        "off",
        "--out",
        tmp_path / "p",
    ]
    code, _, err = cli(args, capsys)
    assert code == 130 and "run the same command again" in err
    assert (tmp_path / "p" / "cells" / f"game-{GAMES[1]}__s3" / "summary.json").exists()
    assert not (tmp_path / "p" / "cells" / f"game-{GAMES[3]}__s3").exists()
    monkeypatch.setattr(gt, "phases_for", real)
    code, stdout, err = cli(args + ["--json"], capsys)
    assert code == 0, err
    assert (
        f"{GAMES[0]}: finished earlier, read back" in err
        and f"{GAMES[2]}: resuming" in err
        and f"{GAMES[3]}: playing" in err
    )
    got = json.loads(stdout)
    for game in GAMES:
        assert got["games"][game]["metric"] == ref["games"][game]["metric"], game
    # the calls made before the interruption were not made again: the same number of model calls
    assert got["totals"]["calls"] == ref["totals"]["calls"] and got["totals"]["decisions"] == ref["totals"]["decisions"]


def test_other_settings_in_the_same_directory_are_refused_and_force_starts_over(tmp_path, capsys):
    model = script(tmp_path, GOOD)
    profile(tmp_path, capsys, model, extra=["--games", "cpr"])
    code, _, err = cli(
        [
            "profile",
            "--model",
            f"scripted:{model}",
            "--simulations",
            3,
            "--seed",
            3,
            "--games",
            "cpr",
            "--out",
            tmp_path / "prof",
        ],
        capsys,
    )
    assert (
        code == 2
        and err.startswith("cooplab: error: ")
        and "(simulations 2 -> 3)" in err
        and len(err.strip().splitlines()) == 1
    )
    code, _, err = cli(
        [
            "profile",
            "--model",
            f"scripted:{model}",
            "--simulations",
            2,
            "--seed",
            3,
            "--games",
            "cpr",
            "--budget",
            1,
            "--out",
            tmp_path / "prof",
        ],
        capsys,
    )
    assert code == 2 and "llm.budget None -> 1.0" in err
    # the same request continues (the cache file may differ: it only stores answers)
    code, _, err = cli(
        [
            "profile",
            "--model",
            f"scripted:{model}",
            "--simulations",
            2,
            "--seed",
            3,
            "--games",
            "cpr",
            "--cache",
            "off",
            "--out",
            tmp_path / "prof",
        ],
        capsys,
    )
    assert code == 0 and "cpr: finished earlier, read back" in err
    code, stdout, err = cli(
        [
            "profile",
            "--model",
            f"scripted:{model}",
            "--simulations",
            3,
            "--games",
            "cpr",
            "--force",
            "--json",
            "-q",
            "--out",
            tmp_path / "prof",
        ],
        capsys,
    )
    assert code == 0, err and json.loads(stdout)["simulations"] == 3
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "x.txt").write_text("mine")
    code, _, err = cli(["profile", "--players", "nash", "--out", tmp_path / "other"], capsys)
    assert code == 2 and "not empty" in err and (tmp_path / "other" / "x.txt").read_text() == "mine"


def test_profile_budget_is_shared_by_the_games_and_never_overshot(tmp_path, capsys):
    model = script(tmp_path, GOOD)
    budget = 0.05  # weakest-link spends about $0.01, but every decision reserves its worst case (3 attempts) first
    p, out, err = profile(
        tmp_path, capsys, model, extra=["--budget", budget, "--cache", "off"]
    )  # a clean end, like 'cooplab run'
    assert json.loads((out / "profile.json").read_text()) == p
    assert p["status"] == "budget_exhausted" and p["budget_usd"] == budget
    assert p["totals"]["cost_usd"] <= budget
    statuses = [p["games"][g]["status"] for g in GAMES]
    assert statuses[0] == "completed" and "budget_exhausted" in statuses and statuses[-1] == "not_run"
    # each game's own budget was what the games before it left
    spent = 0.0
    for g in GAMES:
        cfg_path = out / "cells" / f"game-{g}__s3" / "config.json"
        if not cfg_path.exists():
            continue
        cfg = json.loads(cfg_path.read_text())
        assert cfg["llm"]["budget"] == pytest.approx(budget - spent)
        spent += p["games"][g]["ledger"]["cost_usd_float"]
    # the same profile again: the game its budget stopped is read back as it ended (resuming it would only
    # replay its stop), and nothing is paid again
    stopped = next(g for g in GAMES if p["games"][g]["status"] == "budget_exhausted")
    journal = (cell(out, stopped) / "ledger-journal.jsonl").read_bytes()
    again, _, err = profile(tmp_path, capsys, model, extra=["--budget", budget, "--cache", "off"])
    assert again["status"] == "budget_exhausted" and again["totals"] == p["totals"]
    assert (cell(out, stopped) / "ledger-journal.jsonl").read_bytes() == journal


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--games", "chess"], "--games must be"),
        (["--games", "cpr,cpr"], "twice"),
        (["--games", ","], "--games must be"),
        (["--simulations", "0"], "--simulations"),
        (["--simulations", "-3"], "--simulations"),
        (["--simulations", "1e9"], "--simulations"),
        (["--simulations", "nan"], "--simulations"),
        (["--players", "dice"], "--players must be"),
        (["--group-size", "1"], "--group-size"),
        (["--group-size", "x"], "--group-size"),
        (["--players", "nash", "--prompt", "cot"], "apply to LLM players only"),
        (["--prompt", "poem"], "--prompt must be"),
        (["--prompt-variant", "no-such-wording"], "unknown prompt variant 'no-such-wording'"),
        (["--players", "nash", "--prompt-variant", "reword-a"], "--prompt-variant words the LLM players' prompts"),
        (["--budget", "-1"], "--budget"),
        (["--budget", "inf"], "--budget"),
        (["--temperature", "nan"], "--temperature"),
    ],
)
def test_bad_profile_options_are_one_line_errors(tmp_path, capsys, args, needle):
    model = script(tmp_path, GOOD)
    code, _, err = cli(["profile", "--model", f"scripted:{model}", *args, "--out", tmp_path / "p"], capsys)
    assert code == 2 and err.startswith("cooplab: error: ") and needle in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "p" / "profile-config.json").exists()


def test_a_profile_passes_its_prompt_variant_to_every_game(tmp_path, capsys):
    """--prompt-variant: every game run of the profile records it (llm.prompt_variant: the runs' prompts are the
    variant's)."""
    p, out, _ = profile(
        tmp_path, capsys, script(tmp_path, GOOD), extra=("--games", "cpr,public-goods", "--prompt-variant", "reword-b")
    )
    assert p["status"] == "completed"
    for g in ("cpr", "public-goods"):
        config = json.loads((cell(out, g) / "config.json").read_text())
        assert config["llm"]["prompt_variant"] == "reword-b"
    req = json.loads((out / "profile-config.json").read_text())
    assert req["llm"]["prompt_variant"] == "reword-b"


# --- the figure of several profiles --------------------------------------------------------------------
def test_figure_of_several_profiles(tmp_path, capsys):
    for kind in ("nash", "pareto", "random"):
        assert cli(["profile", "--players", kind, "--simulations", 3, "--out", tmp_path / kind, "-q"], capsys)[0] == 0
    dirs = [tmp_path / k for k in ("nash", "pareto", "random")]
    code, out, err = cli(
        ["figures", "profile", *dirs, "--label", "N", "--label", "P", "--label", "R", "--out", tmp_path / "f.png"],
        capsys,
    )
    assert code == 0, err and (tmp_path / "f.png").stat().st_size > 10_000
    code, _, err = cli(["figures", "profile", *dirs, "--label", "N", "--out", tmp_path / "g.png"], capsys)
    assert code == 2 and "--label" in err
    code, _, err = cli(["figures", "profile", dirs[0], "--out", tmp_path / "g.txt"], capsys)
    assert code == 2 and ".png" in err


@pytest.mark.parametrize(
    "edit, needle",
    [
        (lambda p: p.update(kind="other"), "is not a cooplab profile"),
        (lambda p: p["games"]["cpr"]["metric"].update(mean=float("nan")), "finite"),
        (lambda p: p["games"]["cpr"]["metric"].update(mean="high"), "finite"),
        (lambda p: p["games"]["cpr"]["metric"].update(ci95=[1]), "ci95"),
        (lambda p: p["games"]["cpr"]["metric"].update(nash=1e999), "finite"),
        (lambda p: p["games"].update(chess={"metric": {}}), "games.chess"),
        (lambda p: p.update(games=[1, 2]), "is not a cooplab profile"),
    ],
)
def test_hostile_profile_files_are_refused_in_one_line(tmp_path, capsys, edit, needle):
    assert (
        cli(
            ["profile", "--players", "nash", "--simulations", 2, "--games", "cpr", "--out", tmp_path / "p", "-q"],
            capsys,
        )[0]
        == 0
    )
    f = tmp_path / "p" / "profile.json"
    p = json.loads(f.read_text())
    edit(p)
    f.write_text(json.dumps(p).replace("NaN", "NaN"))
    code, _, err = cli(["figures", "profile", tmp_path / "p", "--out", tmp_path / "f.png"], capsys)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1
    f.write_text("{not json")
    code, _, err = cli(["figures", "profile", tmp_path / "p", "--out", tmp_path / "f.png"], capsys)
    assert code == 2 and "cannot be read" in err
    code, _, err = cli(["figures", "profile", tmp_path / "missing", "--out", tmp_path / "f.png"], capsys)
    assert code == 2 and "no profile.json" in err


def test_group_size_applies_to_every_game(tmp_path, capsys):
    code, stdout, err = cli(
        ["profile", "--players", "random", "--simulations", 2, "--group-size", 3, "--out", tmp_path / "p", "--json"],
        capsys,
    )
    assert code == 0, err
    p = json.loads(stdout)
    assert p["group_size"] == 3 and all(e["group_sizes"] == [3, 3] for e in p["games"].values())
    assert (
        p["games"]["o-ring"]["metric"]["pareto"]
        == json.loads((cell(tmp_path / "p", "o-ring") / "summary.json").read_text())["metric"]["pareto"]
    )


def test_request_checks_the_simulations_against_every_game():
    with pytest.raises(pf.ProfileError, match="--simulations"):
        pf.request(players="nash", simulations=10**9)
    r = pf.request(players="nash", simulations=4, games=["o-ring", "cpr"])
    assert r["games"] == ["o-ring", "cpr"] and r["llm"] is None
    with pytest.raises(pf.ProfileError):
        pf.request(players="llm", llm=None)


# --- the Pareto references a profile is read against ------------------------------------------------------------
def test_profile_prints_the_references_it_uses(tmp_path, capsys):
    """Collective Risk's and O-Ring's Pareto values rest on a choice (the fair share with the configured
    N; the cheapest success): every output names the values used, and --pareto-reference sets them."""
    code, stdout, err = cli(["profile", "--players", "random", "--simulations", 2, "--out", tmp_path / "d"], capsys)
    assert code == 0, err
    assert "collective-risk  contribution per round" in stdout and "(Nash 0, Pareto 1 (fair share T/(N R)))" in stdout
    assert "(Nash 0, Pareto 6 (cheapest success t*/N))" in stdout and "(Nash 10, Pareto 0)" in stdout
    p = json.loads((tmp_path / "d" / "profile.json").read_text())
    assert p["references"]["collective-risk"] == {"nash": 0.0, "pareto": 1.0, "pareto_basis": "fair share T/(N R)"}
    assert p["references"]["o-ring"] == {"nash": 0.0, "pareto": 6.0, "pareto_basis": "cheapest success t*/N"}
    args = [
        "profile",
        "--players",
        "random",
        "--simulations",
        2,
        "--pareto-reference",
        "collective-risk=1.25",
        "--pareto-reference",
        "o-ring=10",
        "--out",
        tmp_path / "s",
    ]
    code, stdout, err = cli(args + ["--json"], capsys)
    assert code == 0, err
    p = json.loads(stdout)
    assert json.loads((tmp_path / "s" / "profile.json").read_text()) == p
    for game, value in (("collective-risk", 1.25), ("o-ring", 10.0)):
        assert p["references"][game] == {"nash": 0.0, "pareto": value, "pareto_basis": "set by pareto_reference"}
        assert p["games"][game]["metric"]["pareto"] == value
        cfg = json.loads((cell(tmp_path / "s", game) / "config.json").read_text())
        assert cfg["params"]["pareto_reference"] == value  # the game run itself measures from it
        assert 0.0 <= p["games"][game]["pareto_proximity"]["mean"] <= 1.0
    # random players withdraw about 5 of 10: far from a Pareto value of 10, near the cheapest success (6)
    assert p["games"]["o-ring"]["pareto_proximity"]["mean"] > 0.4
    code, stdout, err = cli(args, capsys)
    assert code == 0, (
        err and "Pareto 1.25 (set by pareto_reference)" in stdout and "Pareto 10 (set by pareto_reference)" in stdout
    )
    # the references are part of the profile: another value in the same directory is refused
    code, _, err = cli(["profile", "--players", "random", "--simulations", 2, "--out", tmp_path / "s"], capsys)
    assert code == 2 and "pareto_references" in err and len(err.strip().splitlines()) == 1


def test_figure_caption_and_legend_name_the_references(tmp_path, capsys):
    from cooplab.tasks.games.figures import reference_caption

    for name, extra in (("d", []), ("s", ["--pareto-reference", "collective-risk=1.25"])):
        assert (
            cli(["profile", "--players", "random", "--simulations", 2, *extra, "--out", tmp_path / name, "-q"], capsys)[
                0
            ]
            == 0
        )
    d, s = pf.load_profile(tmp_path / "d"), pf.load_profile(tmp_path / "s")
    assert (
        reference_caption([d])
        == "Pareto references: Collective Risk 1 (fair share T/(N R)); O-Ring 6 (cheapest success t*/N)"
    )
    assert reference_caption([d, s]) == (
        "Pareto references: Collective Risk 1 (fair share T/(N R)) / 1.25 (set by pareto_reference); "
        "O-Ring 6 (cheapest success t*/N)"
    )
    code, _, err = cli(["figures", "profile", tmp_path / "d", tmp_path / "s", "--out", tmp_path / "f.png"], capsys)
    assert code == 0, err and (tmp_path / "f.png").stat().st_size > 10_000


@pytest.mark.parametrize(
    "ref, needle",
    [
        ("cpr=3", "'cpr' has no settable Pareto reference"),
        ("collective-risk", "expects GAME=VALUE"),
        ("collective-risk=nan", "must be a finite number"),
        ("collective-risk=0", "pareto_reference must be a finite number in (0, "),
        ("collective-risk=11", "at most the endowment"),
        ("o-ring=1e999", "must be a finite number"),
        ("o-ring=x", "must be a finite number"),
    ],
)
def test_bad_pareto_references_are_one_line_errors(tmp_path, capsys, ref, needle):
    code, _, err = cli(["profile", "--players", "random", "--pareto-reference", ref, "--out", tmp_path / "p"], capsys)
    assert code == 2 and err.startswith("cooplab: error: ") and needle in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "p").exists()
