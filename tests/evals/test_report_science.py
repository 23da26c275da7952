"""A science run has one HTML file: the run writes ``report.html`` when it ends, and it is the file
``cooplab report`` writes, the explorer's pages of the run (its task's ``explore`` sections: the
scores, each fact's verdict and evidence beside the final paper rendered from Markdown, the
judges and their cost, the timeline, the code calls, the artifacts, the budget; then every page's
summary, tables, figures, traces and files); ``cooplab report DIR`` rewrites that same file."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from markupsafe import escape

from cooplab.cli import main
from cooplab.evals.report import MARKER

HOSTILE = "<script>document.body.setAttribute('data-pwned','1')</script>"


def cli(args, capsys):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


@pytest.fixture(scope="module")
def science_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("science") / "oracle"
    assert (
        main(
            [
                "run",
                "science",
                "--sandbox-backend",
                "local",
                "--cache",
                "off",
                "--task",
                "biomarker",
                "--team",
                "oracle",
                "--out",
                str(out),
                "-q",
            ]
        )
        == 0
    )
    return out


def _sections(html: str) -> list[str]:
    return re.findall(r'<section id="run-[^"]*"><h2>([^<]*)</h2>', html)


def test_the_run_writes_the_one_file(science_run, capsys):
    page = science_run / "report.html"
    html = page.read_text(encoding="utf-8")
    assert MARKER in html  # the file cooplab report writes, not a second kind of page
    secs = _sections(html)
    assert (
        secs[:2] == ["Science run", "Report: each fact&#39;s score and its evidence"]
        and "Figures" in secs
        and "Tables" in secs
    )
    scores = json.loads((science_run / "scores.json").read_text())
    for fact in scores["heuristic"]["facts"]:  # each fact's verdict, as its box's title
        assert f"{escape(fact['id'])} \u00b7 {escape(fact['kind'])} \u00b7 found \u00b7 score 1.00 \u00b7 right" in html
    h = scores["heuristic"]
    assert (
        f"Heuristic scores (0-1): completeness {h['completeness']:.2f}, quality {h['quality']:.2f}, accuracy "
        f"{h['accuracy']:.2f}" in html
    )
    # the final paper, rendered from its Markdown (its title a heading, its sections headings)
    assert "artifacts/final_paper.v1.md" in html and re.search(
        r"<h4>Subtypes and predictive biomarkers of treatment response \(\d+ patients\)</h4>", html
    )
    assert "figures/budget.png" in html and 'src="data:image/png;base64,' in html
    assert not (science_run / "cooplab-report.html").exists()
    # cooplab report on the run rewrites that same file (no second page)
    res = json.loads(cli(["report", science_run, "--json"], capsys))
    assert Path(res["path"]) == page and res["sections"][:2] == [
        "Science run",
        "Report: each fact's score and its evidence",
    ]
    assert res["pages"] == ["oracle", "model calls"] or res["pages"] == ["oracle"]
    assert not (science_run / "cooplab-report.html").exists()


def test_an_older_science_page_is_rewritten_in_place(science_run, capsys, tmp_path):
    d = tmp_path / "old"
    shutil.copytree(science_run, d)
    (d / "report.html").write_text(
        '<!doctype html><html><head><meta charset="utf-8"><title>cooplab science run: biomarker</title>'
    )
    res = json.loads(cli(["report", d, "--json"], capsys))
    assert Path(res["path"]) == d / "report.html" and MARKER in (d / "report.html").read_text()
    assert not (d / "cooplab-report.html").exists()


def test_hostile_scores_and_papers_stay_text(science_run, capsys, tmp_path):
    d = tmp_path / "hostile"
    shutil.copytree(science_run, d)
    scores = json.loads((d / "scores.json").read_text())
    scores["heuristic"]["facts"] = [
        {"id": HOSTILE, "status": "found", "score": "abc", "evidence": HOSTILE},
        "not a fact",
        None,
    ]
    scores["heuristic"]["accuracy"] = None
    scores["judges"] = [
        {
            "judge": HOSTILE,
            "k": 3,
            "completeness": 0.5,
            "quality": float("nan"),
            "accuracy": None,
            "std": {"completeness": 0.1},
            "ledger": {"cost_usd_float": 0.25},
            "budget_usd": 1,
        },
        7,
    ]
    (d / "scores.json").write_text(json.dumps(scores))
    (d / "artifacts" / "final_paper.v2.md").write_text(
        f"# {HOSTILE}\n\nthe second paper <img src=x onerror=alert(1)> [x](javascript:alert(1))"
    )
    (d / "artifacts" / "final_paper.v99x.md").write_text("not a version")
    res = json.loads(cli(["report", d, "--json"], capsys))
    html = Path(res["path"]).read_text()
    assert HOSTILE not in html and "<img src=x" not in html and 'href="javascript' not in html
    assert "accuracy not scored (no truth)" in html and "judge cost $0.2500 of its $1.0000 budget" in html
    assert f"Judge {escape(HOSTILE)} (k = 3): completeness 0.50" in html
    assert "artifacts/final_paper.v2.md" in html and "the second paper" in html and "not a version" not in html
    (d / "scores.json").write_text("{damaged")
    html = Path(json.loads(cli(["report", d, "--json"], capsys))["path"]).read_text()
    assert "scores.json cannot be read" in html


def test_the_files_open_from_disk_in_headless_chromium(science_run, capsys, tmp_path):
    """The run's own file and a copy with hostile scores and paper, opened as file://: no console
    message (a CSP refusal would be one), every image decoded, every plot drawn, no script of the run."""
    from tests.helpers.chromium import DevTools

    d = tmp_path / "hostile"
    shutil.copytree(science_run, d)
    scores = json.loads((d / "scores.json").read_text())
    scores["judges"] = [{"judge": HOSTILE, "k": 1, "completeness": 0.5, "quality": 0.5, "accuracy": 0.5}]
    (d / "scores.json").write_text(json.dumps(scores))
    (d / "artifacts" / "final_paper.v2.md").write_text(
        f"# {HOSTILE}\n\n<img src=x onerror=\"document.body.setAttribute('data-pwned','2')\">"
    )
    hostile = Path(json.loads(cli(["report", d, "--json"], capsys))["path"])
    with DevTools(tmp_path) as b:
        for path in (science_run / "report.html", hostile):
            b.events.clear()
            b.open(path.as_uri())
            assert b.console() == [], (path, b.console())
            widths = b.eval("Array.from(document.images).map(i => i.complete ? i.naturalWidth : 0)")
            assert widths and all(w > 0 for w in widths), widths
            plots = b.eval(
                "[document.querySelectorAll('figure.plot[data-plot]').length, "
                "document.querySelectorAll('figure.plot[data-drawn=\"1\"]').length]"
            )
            assert plots[0] >= 1 and plots[0] == plots[1], plots  # the budget per team, drawn by the inlined plots.js
            assert b.eval("document.body.getAttribute('data-pwned')") is None
            assert b.eval("document.querySelectorAll('script').length") == 2
