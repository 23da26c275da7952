"""Identifiers are text: a call id that looks like a number ("5e41512851534475", "1e999999",
"0000000000000012", "nan", "inf") is shown as it is by the explorer and the HTML report, never read
as a number (issue 38.0: one call id in a thousand crashed a page, depending on where the repository
was cloned)."""

from __future__ import annotations

import decimal
import json
import re
from pathlib import Path
from urllib.parse import urlencode

import httpx
import pandas as pd

from cooplab.evals.explorer.app import serve, stop
from cooplab.evals.report import write_report
from cooplab.evals.values import fmt, num
from cooplab.runs.registry import find  # the explorer's task lookup, as the command line passes it
from tests.helpers.summaries import summary

IDS = ["5e41512851534475", "1e999999", "0000000000000012", "nan", "inf", "-1E+5", "9" * 40]


def make_run(out: Path) -> Path:
    out.mkdir(parents=True)
    (out / "config.json").write_text(
        json.dumps(
            {
                "version": 2,
                "task": "cpr",
                "agents": "llm",
                "seed": 0,
                "params": {},
                "llm": {"model": "scripted:x.json"},
                "record": {"thread_id": IDS[0]},
            }
        )
    )
    s = summary("cpr", "cpr-llm", thread_id=IDS[2])  # a field the schema does not name: kept as the text it is
    s["ledger"].update(calls=len(IDS), cost_usd="0.0000012", cost_usd_float=1.2e-6)
    (out / "summary.json").write_text(json.dumps(s))
    pd.DataFrame(
        {
            "call_id": IDS,
            "model": ["m"] * len(IDS),
            "cost": ["0.0000001", "1e999999", "x", "0.0000002", "nan", "0", "1"],
            "input_tokens": range(len(IDS)),
        }
    ).to_parquet(out / "ledger.parquet", index=False)
    calls = [
        {
            "id": i,
            "run_type": "llm",
            "name": "m",
            "start_time": f"2026-01-01T00:00:0{n}",
            "inputs": {"messages": [[{"kwargs": {"type": "human", "content": f"Round 1. call {i}"}}]]},
            "outputs": {"generations": [[{"text": "ok"}]]},
            "extra": {"metadata": {"agent_id": 0, "round": 1, "phase": "harvest", "call_id": i, "thread_id": i}},
        }
        for n, i in enumerate(IDS)
    ]
    (out / "traces.jsonl").write_text("".join(json.dumps(c) + "\n" for c in calls))
    return out


def test_num_is_bounded_and_never_raises_whatever_the_global_decimal_context():
    from cooplab.evals.values import exact_sum

    ctx = decimal.getcontext()
    saved = (ctx.prec, ctx.Emax, ctx.Emin, dict(ctx.traps))
    try:
        for sig in (decimal.Inexact, decimal.Rounded, decimal.Overflow, decimal.Underflow, decimal.InvalidOperation):
            ctx.traps[sig] = True
        ctx.prec, ctx.Emax, ctx.Emin = 3, 10, -10
        assert [num(s) for s in IDS] == [None, None, 12.0, None, None, -100000.0, float("9" * 40)]
        assert num("1e300") == 1e300 and num("1e301") is None and num("0e-999999") == 0.0 and num("1e-400") is None
        assert num(decimal.Decimal("5e41512851534475")) is None and num("x" * 10_000) is None
        assert exact_sum(["0.1", "0.2", "1e999999", "nan"]) == decimal.Decimal("0.3")
        assert (
            fmt(decimal.Decimal("5e41512851534475")) == "5E+41512851534475"
            and fmt("5e41512851534475") == "5e41512851534475"
        )
        assert (ctx.prec, ctx.Emax, ctx.Emin) == (3, 10, -10)  # never changed
    finally:
        ctx.prec, ctx.Emax, ctx.Emin = saved[:3]
        for sig, on in saved[3].items():
            ctx.traps[sig] = on


def test_numbers_are_rounded_to_four_significant_digits():
    assert [fmt(v) for v in (0.8333333, 12.34567, 999.95, 1234.567, 123456.7, 0.000123456, 2.0, 1e12)] == [
        "0.8333",
        "12.35",
        "1000",
        "1235",
        "123457",
        "0.0001235",
        "2",
        "1e+12",
    ]


def test_pages_and_reports_show_call_ids_verbatim(tmp_path):
    run = make_run(tmp_path / "runs" / "ids")
    server, url = serve([tmp_path / "runs"], task_for=lambda name: None)
    try:
        for path, q in (
            ("", {}),
            ("run", {"id": "0/ids"}),
            ("traces", {"id": "0/ids"}),
            ("compare", {"a": "0/ids", "b": "0/ids"}),
        ):
            r = httpx.get(url + path + ("?" + urlencode(q) if q else ""))
            assert r.status_code == 200, (path, r.text[-1500:])
        page = httpx.get(url + "run?" + urlencode({"id": "0/ids"})).text
        for i in IDS:
            assert f"<td>{i}</td>" in page, i  # the ledger's call_id cells: verbatim, no numeric sort key
        assert not re.search(r'data-sort="[^"]*"><?[^<]*5e41512851534475', page)
        calls = httpx.get(url + "traces?" + urlencode({"id": "0/ids"})).text
        assert all(f"call {i}" in calls for i in IDS)
    finally:
        stop(server)
    info = write_report(run, tmp_path / "report.html", task_for=find)
    html_text = (tmp_path / "report.html").read_text()
    assert info["problems"] == [] and all(f">{i}<" in html_text for i in IDS)
