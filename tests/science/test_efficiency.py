"""``cooplab analyze efficiency``: a profile's ledger totals against science runs' (the paper's
§4.2 and Table 10), computed from the ledgers, shown in the report."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest

from cooplab.cli import main
from cooplab.evals import efficiency
from tests.games.test_llm_players import GOOD, script


def cli(args, capsys):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A scripted profile (two games, two simulations) and two scripted science runs."""
    tmp = tmp_path_factory.mktemp("eff")
    model = script(tmp, GOOD)
    code = main(
        [
            "profile",
            "--model",
            f"scripted:{model}",
            "--simulations",
            "2",
            "--seed",
            "3",
            "--games",
            "cpr,weakest-link",
            "--cache",
            "off",
            "--out",
            str(tmp / "prof"),
            "-q",
            "--json",
        ]
    )
    assert code == 0
    for seed in (0, 1):
        code = main(
            [
                "run",
                "science",
                "--task",
                "ecology",
                "--team",
                "oracle",
                "--sandbox-backend",
                "local",
                "--cache",
                "off",
                "--seed",
                str(seed),
                "--out",
                str(tmp / "sci" / "cells" / f"s{seed}"),
                "-q",
                "--json",
            ]
        )
        assert code == 0
    return tmp, f"scripted:{model}"


def _ledger_sum(d: Path, col: str) -> Decimal:
    lg = pd.read_parquet(d / "ledger.parquet")
    lg = lg[(lg["kind"] == "tokens") & ~lg["cached"].fillna(False).astype(bool)]
    return sum((Decimal(str(v)) for v in lg[col]), Decimal(0))


def test_the_comparison_is_the_ledgers_totals(made):
    tmp, model = made
    res = efficiency.compare([tmp / "prof"], [tmp / "sci"])
    table = res["table"].set_index("model")
    assert res["profiles"] == 1 and res["science_runs"] == 2
    prof = table.loc[model]
    from cooplab.tasks.games.profiles import game_dirs

    games = [game_dirs(tmp / "prof")[g] for g in ("cpr", "weakest-link")]  # the profile's cells
    assert (
        prof["profile_total_tokens"]
        == float(sum(_ledger_sum(g, "input_tokens") + _ledger_sum(g, "output_tokens") for g in games))
        > 0
    )
    assert prof["profile_cost_usd"] == pytest.approx(float(sum(_ledger_sum(g, "cost_usd_exact") for g in games)))
    sci_model = json.loads((tmp / "sci" / "cells" / "s0" / "config.json").read_text())["llm"]["model"]
    sci = table.loc[sci_model]
    runs = [tmp / "sci" / "cells" / f"s{s}" for s in (0, 1)]
    per_run = [float(_ledger_sum(r, "input_tokens") + _ledger_sum(r, "output_tokens")) for r in runs]
    assert (
        sci["science_runs"] == 2
        and sci["science_total_tokens_per_run"] == pytest.approx(sum(per_run) / 2)
        and per_run[0] > 0
    )
    # different models here, so no ratio; the same model in both gets one
    assert pd.isna(prof.get("ratio_total_tokens"))


def test_ratios_and_the_papers_table_10():
    t = {
        "model": "openai:qwen3-8b",
        "profile": "p",
        "games": 6,
        "simulations": 20,
        "decisions": 100,
        "wall_seconds": 10.0,
        "calls": 100.0,
        "input_tokens": 900.0,
        "output_tokens": 100.0,
        "total_tokens": 1000.0,
        "cost_usd": 0.01,
        "sandbox_usd": 0.0,
    }
    s = {
        "model": "openai:qwen3-8b",
        "run": "r",
        "status": "completed",
        "wall_seconds": 440.0,
        "calls": 50.0,
        "input_tokens": 20000.0,
        "output_tokens": 7000.0,
        "total_tokens": 27000.0,
        "cost_usd": 0.27,
        "sandbox_usd": 0.05,
    }
    orig_p, orig_s, orig_runs = efficiency.profile_row, efficiency.science_row, efficiency.science_runs
    try:
        efficiency.profile_row = lambda d: t
        efficiency.science_runs = lambda dirs: [Path("r")]
        efficiency.science_row = lambda d: s
        row = efficiency.compare([Path("p")], [Path("s")])["table"].iloc[0]
    finally:
        efficiency.profile_row, efficiency.science_row, efficiency.science_runs = orig_p, orig_s, orig_runs
    assert (
        row["ratio_total_tokens"] == 27.0
        and row["ratio_wall_seconds"] == 44.0
        and row["ratio_cost_usd"] == pytest.approx(27.0)
    )
    assert row["profile_output_tokens_per_decision"] == 1.0
    assert row["paper_science_total_tokens_per_run"] == 188376.0  # qwen3-8b in the paper's Table 10


def test_the_command_writes_files_the_report_shows(made, tmp_path, capsys):
    tmp, model = made
    code, out, err = cli(
        ["analyze", "efficiency", "--profiles", tmp / "prof", "--science", tmp / "sci", "--out", tmp_path / "eff"],
        capsys,
    )
    assert code == 0, err
    assert "profile tokens" in out and "{'" not in out
    for name in ("efficiency.csv", "efficiency.md", "efficiency.png"):
        assert (tmp_path / "eff" / name).stat().st_size > 0
    code, out, err = cli(["report", tmp_path / "eff"], capsys)
    assert code == 0, err
    html = next((tmp_path / "eff").glob("*.html")).read_text()
    assert "efficiency" in html and "science_total_tokens_per_run" in html


@pytest.mark.parametrize(
    "args, says",
    [
        ([], "at least one"),
        (["--profiles", "{missing}"], "no readable profile.json"),
        (["--science", "{missing}"], "not a directory"),
        (["--science", "{empty}"], "holds no run"),
    ],
)
def test_bad_input_is_one_line_exit_2_before_out(args, says, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    args = [a.format(missing=tmp_path / "missing", empty=tmp_path / "empty") for a in args]
    code, out, err = cli(["analyze", "efficiency", *args, "--out", tmp_path / "out"], capsys)
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()
