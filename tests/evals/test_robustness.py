"""The robustness report of a sweep over prompt variants (evals/robustness.py): the spread across
variants, the parse-failure shares kept apart from behaviour, and the fragile flag, on sweep
folders built so that an effect changes sign, loses significance, or holds under every variant."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cooplab.evals import robustness as rb

FULL = [0.50, 0.60, 0.55]
HIGHER = [0.80, 0.90, 0.85]
LOWER = [0.20, 0.30, 0.25]


def make_sweep(
    root: Path,
    cells: dict[tuple[str, str], list[float]],
    *,
    attempts: dict[str, list[int]] | None = None,
    fallbacks: dict[str, list[bool]] | None = None,
) -> Path:
    """A sweep folder as ``cooplab sweep`` writes it: table.csv (cell, prompt_variant, ablation,
    seed, status) and one cell per (variant, ablation) whose summary lists one efficiency per society."""
    with (root / "table.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["cell", "prompt_variant", "ablation", "seed", "status", "efficiency.mean"])
        for (variant, ablation), values in cells.items():
            name = f"prompt_variant-{variant}__ablation-{ablation}__s0"
            w.writerow([name, variant, ablation, 0, "completed", float(np.mean(values))])
            d = root / "cells" / name
            d.mkdir(parents=True)
            (d / "config.json").write_text(
                json.dumps(
                    {"task": "cpr", "agents": "llm", "llm": {"model": "scripted:/x/m.json", "prompt_variant": variant}}
                )
            )
            (d / "summary.json").write_text(
                json.dumps(
                    {
                        "status": "completed",
                        "efficiency": {"mean": float(np.mean(values)), "n": len(values), "values": values},
                        "ledger": {"calls": 9, "mean": 3.0},
                    }
                )
            )
            a = (attempts or {}).get(variant, [1] * 4)
            f = (fallbacks or {}).get(variant, [False] * len(a))
            pd.DataFrame(
                {
                    "society": 0,
                    "agent": range(len(a)),
                    "round": 1,
                    "phase": "harvest",
                    "attempts": a,
                    "fallback_used": f,
                }
            ).to_csv(d / "decisions.csv", index=False)
    return root


def test_spread_across_variants_is_the_mean_range_and_sd_of_the_variant_means(tmp_path):
    sw = make_sweep(tmp_path, {("original", "full"): FULL, ("reword-a", "full"): HIGHER, ("reword-b", "full"): LOWER})
    rep = rb.robustness(sw, figure=False)
    [row] = [r for r in rep["spread"] if r["outcome"] == "efficiency"]
    means = [np.mean(FULL), np.mean(HIGHER), np.mean(LOWER)]
    assert row["variants"]["original"]["mean"] == pytest.approx(0.55) and row["variants"]["reword-a"]["n"] == 3
    assert row["mean"] == pytest.approx(np.mean(means)) and row["range"] == pytest.approx(0.6)
    assert row["min"] == pytest.approx(0.25) and row["max"] == pytest.approx(0.85)
    assert row["sd"] == pytest.approx(np.std(means, ddof=1))
    lo, hi = row["variants"]["original"]["low"], row["variants"]["original"]["high"]
    assert lo < 0.55 < hi and hi - 0.55 == pytest.approx(0.55 - lo)
    assert rep["variants"] == ["original", "reword-a", "reword-b"] and [r["outcome"] for r in rep["spread"]] == [
        "efficiency"
    ]  # not the ledger
    assert json.loads(Path(rep["json"]).read_text())["spread"][0]["range"] == pytest.approx(0.6)


def test_an_effect_that_changes_sign_across_variants_is_fragile(tmp_path):
    sw = make_sweep(
        tmp_path,
        {
            ("original", "full"): FULL,
            ("original", "neither"): HIGHER,
            ("reword-a", "full"): FULL,
            ("reword-a", "neither"): LOWER,
        },
    )
    rep = rb.robustness(sw, figure=False)
    [e] = rep["effects"]
    assert e["effect"] == "ablation: neither vs full" and e["outcome"] == "efficiency"
    assert e["variants"]["original"]["difference"] == pytest.approx(0.3) and e["variants"]["reword-a"][
        "difference"
    ] == pytest.approx(-0.3)
    assert e["variants"]["original"]["significant"] and e["variants"]["reword-a"]["significant"]
    assert e["fragile"] and e["changes_sign"] and "changes sign" in e["why"]
    assert len(rep["fragile"]) == 1 and "reword-a" in rep["fragile"][0]


def test_an_effect_with_the_same_sign_and_significance_everywhere_is_not_fragile(tmp_path):
    sw = make_sweep(
        tmp_path,
        {
            ("original", "full"): FULL,
            ("original", "neither"): HIGHER,
            ("reword-a", "full"): LOWER,
            ("reword-a", "neither"): FULL,
        },
    )
    rep = rb.robustness(sw, figure=False)
    [e] = rep["effects"]
    assert e["variants"]["original"]["difference"] > 0 and e["variants"]["reword-a"]["difference"] > 0
    assert not e["fragile"] and not e["changes_sign"] and not e["loses_significance"] and rep["fragile"] == []
    assert "significant under all" in e["why"]


def test_an_effect_that_loses_significance_under_a_variant_is_fragile(tmp_path):
    noisy_full, noisy_neither = [0.1, 0.9, 0.5], [0.2, 1.0, 0.6]  # the same sign, far from significant
    sw = make_sweep(
        tmp_path,
        {
            ("original", "full"): FULL,
            ("original", "neither"): HIGHER,
            ("reword-a", "full"): noisy_full,
            ("reword-a", "neither"): noisy_neither,
        },
    )
    [e] = rb.robustness(sw, figure=False)["effects"]
    assert not e["changes_sign"] and e["loses_significance"] and e["fragile"]
    assert e["variants"]["reword-a"]["p"] > 0.05 > e["variants"]["original"]["p"]


def test_parse_failures_and_fallbacks_are_shares_per_variant_kept_apart_from_behaviour(tmp_path):
    sw = make_sweep(
        tmp_path,
        {("original", "full"): FULL, ("reword-a", "full"): FULL},
        attempts={"original": [1, 1, 1, 1], "reword-a": [1, 2, 3, 3]},
        fallbacks={"reword-a": [False, False, False, True]},
    )
    rep = rb.robustness(sw, figure=False)
    by = {r["variant"]: r for r in rep["parsing"]}
    assert by["original"]["parse_failure_share"] == 0 and by["original"]["fallback_share"] == 0
    assert by["reword-a"]["decisions"] == 4 and by["reword-a"]["parse_failure_share"] == pytest.approx(0.75)
    assert by["reword-a"]["fallback_share"] == pytest.approx(0.25)
    [row] = rep["spread"]
    assert row["range"] == 0  # the same behaviour: the failures to parse are not counted as a difference of outcome


def test_the_figure_has_one_panel_per_outcome_with_every_variant(tmp_path):
    sw = make_sweep(tmp_path, {("original", "full"): FULL, ("reword-a", "full"): HIGHER})
    rep = rb.robustness(sw, out=tmp_path / "rep")
    assert Path(rep["figure"]).stat().st_size > 0 and Path(rep["figure"]).parent == tmp_path / "rep"
    fig = rb.draw(rep)
    [ax] = fig.axes
    assert [t.get_text() for t in ax.get_xticklabels()] == [
        "original",
        "reword-a",
    ] and "dashed" in fig.get_suptitle()


def test_bad_folders_are_one_line(tmp_path):
    with pytest.raises(rb.RobustnessError, match="table.csv"):
        rb.robustness(tmp_path)
    with pytest.raises(rb.RobustnessError, match="not a folder"):
        rb.robustness(tmp_path / "missing")
    (tmp_path / "one").mkdir()
    one = make_sweep(tmp_path / "one", {("original", "full"): FULL})
    with pytest.raises(rb.RobustnessError, match="one prompt variant only"):
        rb.robustness(one)
    with pytest.raises(rb.RobustnessError, match="alpha"):
        rb.robustness(one, alpha=float("nan"))


def test_a_damaged_cell_is_skipped_and_named(tmp_path):
    sw = make_sweep(tmp_path, {("original", "full"): FULL, ("reword-a", "full"): HIGHER, ("reword-b", "full"): LOWER})
    (sw / "cells" / "prompt_variant-reword-b__ablation-full__s0" / "summary.json").write_text("{not json")
    rep = rb.robustness(sw, figure=False)
    assert rep["variants"] == ["original", "reword-a"] and len(rep["skipped"]) == 1 and "reword-b" in rep["skipped"][0]


def test_the_command_prints_json_and_errors_in_one_line(tmp_path, capsys):
    from cooplab.cli import main

    sw = make_sweep(
        tmp_path,
        {
            ("original", "full"): FULL,
            ("original", "neither"): HIGHER,
            ("reword-a", "full"): FULL,
            ("reword-a", "neither"): LOWER,
        },
    )
    assert main(["robustness", str(sw), "--json", "--no-figure"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["effects"][0]["fragile"] is True and out["parsing"][0]["variant"] == "original"
    assert main(["robustness", str(sw)]) == 0
    text = capsys.readouterr().out
    assert "FRAGILE" in text and "range" in text and "first answer failed" in text
    assert main(["robustness", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("cooplab: error:") and len(err.strip().splitlines()) == 1
    assert main(["robustness", str(sw), "--alpha", "2"]) == 2
