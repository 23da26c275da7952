"""A sweep-wide budget beside each cell's own (issue 29, item 10): ``budget`` caps every cell,
``sweep_budget`` caps what all cells spend together, on the local and the Ray executors. A cell
starts only when its whole budget fits in what the sweep has left; the others are "not started
(sweep_budget)" and start when the sweep runs again with a larger cap."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from cooplab.cli import main
from cooplab.runs import grid, sweeps
from tests.helpers.cli import fail_line

ANSWER = '{"effort": 0.2, "punish": null, "vote": 1, "belief": "Fish less.", "proposal": "At most ten tonnes each."}'
CELL_BUDGET = 0.001  # a cell of 2 agents x 1 round costs about $0.00024 at the default prices
SWEEP_BUDGET = 0.0015  # room for 3 such cells one after the other, never for the 4th beside the others' spending


def sweep_file(
    tmp_path: Path, sweep_budget, *, seeds=(0, 1, 2, 3), parallel=2, budget: float | None = CELL_BUDGET
) -> Path:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"answers": [ANSWER]}))
    fixed = {"agents": "llm", "model": f"scripted:{script}", "n_agents": 2, "rounds": 1, "cache": "off"}
    if budget is not None:
        fixed["budget"] = budget
    cfg = tmp_path / "sweep.json"
    raw = {"task": "cpr", "out": "out", "seeds": list(seeds), "parallel": parallel, "analysis": False, "fixed": fixed}
    if sweep_budget is not None:
        raw["sweep_budget"] = sweep_budget
    cfg.write_text(json.dumps(raw))
    return cfg


def run(cfg: Path, capsys, *extra: str) -> tuple[int, dict]:
    code = main(["sweep", str(cfg), "--json", *extra])
    out, err = capsys.readouterr()
    return code, json.loads(out)


def spent(out: Path) -> float:
    return sum(json.loads(p.read_text())["ledger"]["cost_usd_float"] for p in (out / "cells").glob("*/summary.json"))


def test_cells_together_spend_at_most_the_sweep_budget_and_the_rest_start_on_a_rerun(tmp_path, capsys):
    out = tmp_path / "out"
    code, res = run(sweep_file(tmp_path, SWEEP_BUDGET), capsys)
    assert code == 0
    assert spent(out) <= SWEEP_BUDGET
    started = res["ran"]
    assert res["not_started"] and len(started) + len(res["not_started"]) == 4 and not res["failed"]
    rows = {r["cell"]: r for r in res["table"]}
    assert all(rows[c]["status"] == sweeps.NOT_STARTED for c in res["not_started"])
    assert all(not (out / "cells" / c / "config.json").exists() for c in res["not_started"])
    assert res["sweep_budget"]["usd"] == SWEEP_BUDGET and res["sweep_budget"]["spent_usd"] == pytest.approx(spent(out))

    code, again = run(sweep_file(tmp_path, 0.01), capsys)  # a larger cap: the rest start, the finished are skipped
    assert (
        code == 0 and sorted(again["ran"]) == sorted(res["not_started"]) and sorted(again["skipped"]) == sorted(started)
    )
    assert spent(out) <= 0.01 and not again["not_started"]


def test_the_cli_says_how_many_cells_the_sweep_budget_left_out(tmp_path, capsys):
    code = main(["sweep", str(sweep_file(tmp_path, SWEEP_BUDGET, parallel=1))])
    out, _ = capsys.readouterr()
    assert code == 0
    last = out.strip().splitlines()[-1]
    assert (
        "3 ran" in last
        and "1 not started (sweep_budget $0.0015: $0.000" in last
        and "raise it and run the sweep again" in last
    ), last


def test_a_sweep_budget_smaller_than_one_cell_starts_nothing(tmp_path, capsys):
    code, res = run(sweep_file(tmp_path, 0.0005), capsys)
    assert code == 0 and res["ran"] == [] and len(res["not_started"]) == 4
    assert not (tmp_path / "out" / "cells").exists() or not any((tmp_path / "out" / "cells").glob("*/config.json"))


def test_the_per_cell_budget_alone_still_caps_each_cell(tmp_path, capsys):
    code, res = run(sweep_file(tmp_path, None), capsys)
    assert code == 0 and len(res["ran"]) == 4 and "sweep_budget" not in res
    for p in (tmp_path / "out" / "cells").glob("*/summary.json"):
        assert json.loads(p.read_text())["ledger"]["cost_usd_float"] <= CELL_BUDGET


@pytest.mark.parametrize(
    "value, needle",
    [
        (-1, "sweep_budget must be a finite number in [0, 1000000] (USD"),
        ("lots", "sweep_budget must be"),
        (True, "sweep_budget must be"),
        (1e300, "sweep_budget must be a finite number"),
    ],
)
def test_bad_sweep_budgets_are_one_line(tmp_path, capsys, value, needle):
    cfg = sweep_file(tmp_path, 1.0)
    raw = json.loads(cfg.read_text())
    raw["sweep_budget"] = value
    cfg.write_text(json.dumps(raw))
    assert needle in fail_line(capsys, ["sweep", str(cfg)])
    assert not (tmp_path / "out").exists()


def test_a_sweep_budget_needs_a_budget_per_cell(tmp_path, capsys):
    line = fail_line(capsys, ["sweep", str(sweep_file(tmp_path, 1.0, budget=None))])
    assert "has no budget of its own" in line and "sweep_budget" in line
    assert not (tmp_path / "out").exists()


def test_a_cell_interrupted_without_a_summary_counts_at_its_whole_budget(tmp_path):
    sw, _ = grid.load_file(sweep_file(tmp_path, 0.0035, seeds=(0, 1, 2)))
    todo = grid.jobs(sw)
    d = Path(todo[0]["dir"])
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps(todo[0]["config"]))  # started, killed before any summary
    assert sw.sweep_budget is not None
    budget = sweeps.SweepBudget(sw.sweep_budget, todo)
    assert budget.report()["spent_usd"] == pytest.approx(CELL_BUDGET)
    assert budget.admit(todo[1]) and budget.admit(todo[2])
    assert budget.report()["spent_usd"] == pytest.approx(3 * CELL_BUDGET)


def test_the_sweep_budget_holds_on_the_ray_executor(tmp_path, capsys):
    import ray  # noqa: F401 - test.sh installs every extra; a missing Ray fails here

    out = tmp_path / "out"
    code, res = run(sweep_file(tmp_path, SWEEP_BUDGET), capsys, "--executor", "ray")
    assert code == 0 and res["executor"] == "ray"
    assert spent(out) <= SWEEP_BUDGET and res["not_started"] and not res["failed"]
    assert len(res["ran"]) + len(res["not_started"]) == 4


def test_a_failed_runs_summary_keeps_what_it_paid(tmp_path):
    """A run that fails has no LLM service left to ask: its summary's ledger comes from the last
    checkpoint's audit trail plus the calls only the ledger journal holds, so a sweep counts them."""
    from cooplab.graphs.ledger import JOURNAL_FILE, Entry
    from cooplab.runs.runner import _restored_totals

    def entry(i: int) -> dict:
        return Entry(
            call_id=f"c{i}",
            model="scripted:x",
            agent="0",
            round=1,
            phase="harvest",
            input_tokens=1000,
            output_tokens=100,
            cost=str(Decimal("0.0008") + Decimal(i) / 10**6),
        ).as_dict()

    recorded = [entry(1), entry(2)]
    (tmp_path / JOURNAL_FILE).write_text("".join(json.dumps(e) + "\n" for e in [*recorded, entry(3)]))
    totals = _restored_totals(tmp_path, recorded)
    assert totals is not None
    assert totals["calls"] == 3 and Decimal(totals["cost_usd"]) == Decimal("0.002406")
    assert _restored_totals(tmp_path / "none", [{"not": "an entry"}]) is None  # unreadable: no number is made up
