"""The table ``cooplab sweep`` prints names every column in full (issue 31, item 4)."""

from cooplab.runs.sweeps import format_table


def test_headers_are_never_cut():
    rows = [
        {"cell": "harsh__full__s0", "status": "completed", "survival_time.mean": 5.0, "ledger.cost_usd_float": 0.00725}
    ]
    lines = format_table(rows, ["cell", "status", "survival_time.mean", "ledger.cost_usd_float"])
    assert lines[0].split() == ["cell", "status", "survival_time.mean", "ledger.cost_usd_float"]
    assert lines[1].split() == ["harsh__full__s0", "completed", "5", "0.00725"]
    # the columns line up under their headers
    assert lines[1].index("0.00725") == lines[0].index("ledger.cost_usd_float")


def test_a_value_wider_than_its_column_says_it_was_cut():
    rows = [{"cell": "c", "status": "failed: " + "x" * 40}]
    lines = format_table(rows, ["cell", "status"])
    status = lines[1].split(None, 1)[1]
    assert status.endswith("\u2026") and len(status) == 14
