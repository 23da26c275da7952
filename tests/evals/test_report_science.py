"""A science run has one HTML page (issue 31, item 4): the run writes ``report.html`` and it is
the page ``cooplab report`` writes, with the science parts (scores, every fact's evidence, the
judges, the final paper, the budget figure); ``cooplab report DIR`` rewrites that same file."""

from __future__ import annotations

import json
import shutil
from html import escape as html_escape
from pathlib import Path

import pytest

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
    assert main(["run", "science", "--sandbox-backend", "local", "--cache", "off", "--task", "biomarker", "--team", "oracle",
                 "--out", str(out), "-q"]) == 0
    return out


def _sections(html: str) -> list[str]:
    import re

    return re.findall(r'<h3 id="[^"]*">([^<]*)</h3>', html)


def test_the_run_writes_the_one_page(science_run, capsys):
    page = science_run / "report.html"
    html = page.read_text(encoding="utf-8")
    assert MARKER in html  # the page cooplab report writes, not a second kind of page
    assert _sections(html)[:2] == ["Scores", "Final paper"] and "Figures" in _sections(html) and "Tables" in _sections(html)
    scores = json.loads((science_run / "scores.json").read_text())
    for fact in scores["heuristic"]["facts"]:
        assert f"<td>{html_escape(fact['id'])}</td><td>found</td><td>1.00</td>" in html
    assert "artifacts/final_paper.v1.md" in html and "Subtypes and predictive biomarkers" in html
    assert "figures/budget.png" in html and 'src="data:image/png;base64,' in html
    assert not (science_run / "cooplab-report.html").exists()
    # cooplab report on the run rewrites that same file (no second page)
    res = json.loads(cli(["report", science_run, "--json"], capsys))
    assert Path(res["path"]) == page and res["sections"][:2] == ["Scores", "Final paper"]
    assert not (science_run / "cooplab-report.html").exists()


def test_an_older_science_page_is_rewritten_in_place(science_run, capsys, tmp_path):
    d = tmp_path / "old"
    shutil.copytree(science_run, d)
    (d / "report.html").write_text('<!doctype html><html><head><meta charset="utf-8"><title>cooplab science run: biomarker</title>')
    res = json.loads(cli(["report", d, "--json"], capsys))
    assert Path(res["path"]) == d / "report.html" and MARKER in (d / "report.html").read_text()
    assert not (d / "cooplab-report.html").exists()


def test_hostile_scores_and_papers_stay_text(science_run, capsys, tmp_path):
    d = tmp_path / "hostile"
    shutil.copytree(science_run, d)
    scores = json.loads((d / "scores.json").read_text())
    scores["heuristic"]["facts"] = [{"id": HOSTILE, "status": "found", "score": "abc", "evidence": HOSTILE}, "not a fact", None]
    scores["heuristic"]["accuracy"] = None
    scores["judges"] = [{"judge": HOSTILE, "k": 3, "completeness": 0.5, "quality": float("nan"), "accuracy": None,
                         "std": {"completeness": 0.1}, "ledger": {"cost_usd_float": 0.25}, "budget_usd": 1}, 7]
    (d / "scores.json").write_text(json.dumps(scores))
    (d / "artifacts" / "final_paper.v2.md").write_text(f"# {HOSTILE}\n\nthe second paper")
    (d / "artifacts" / "final_paper.vX.md").write_text("not a version")
    res = json.loads(cli(["report", d, "--json"], capsys))
    html = Path(res["path"]).read_text()
    assert HOSTILE not in html and html_escape(HOSTILE) in html
    assert "accuracy not scored (no truth)" in html and "judge cost $0.2500 of its $1.0000 budget" in html
    assert "artifacts/final_paper.v2.md" in html and "the second paper" in html and "not a version" not in html
    (d / "scores.json").write_text("{damaged")
    res = json.loads(cli(["report", d, "--json"], capsys))
    assert any("scores.json is damaged" in p for p in res["problems"])
