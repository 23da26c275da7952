"""``cooplab report DIR`` (evals/report.py): the explorer's pages of a run, a sweep, a profile or a
folder of results in one self-contained HTML file.

The directories are made by the project's own commands (scripted LLM agents, rule agents, a tiny
CPR sweep, a tiny reference-player profile); hostile copies of them check escaping and damaged
files. Headless Chromium opens each file from disk (file://) over the DevTools protocol: the page
must log no error (a CSP refusal is one), every figure must decode, every plot must be drawn by the
inlined script, the tables must sort, and no hostile text may have run.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
from html import escape as html_escape
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from markupsafe import escape

from cooplab.cli import main
from cooplab.graphs.tracing import load_runs
from tests.explorer.test_explorer import elements, section, tables
from tests.helpers.chromium import DevTools

REPO = Path(__file__).resolve().parents[2]
CAUTIOUS = REPO / "examples" / "scripted" / "cautious.json"
HOSTILE = "<script>document.body.setAttribute('data-pwned','1')</script>"


def cli(args, capsys=None):
    code = main([str(a) for a in args])
    if capsys is None:
        return code, "", ""
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    """Real run, sweep and profile directories (made once for the module)."""
    base = tmp_path_factory.mktemp("report")
    d = {"llm": base / "llm", "rule": base / "rule", "sweep": base / "sweep", "profile": base / "profile"}
    assert (
        cli(
            [
                "run",
                "cpr",
                "--agents",
                "llm",
                "--model",
                f"scripted:{CAUTIOUS}",
                "--n-agents",
                3,
                "--rounds",
                2,
                "--cache",
                "off",
                "--out",
                d["llm"],
                "-q",
            ]
        )[0]
        == 0
    )
    assert (
        cli(
            [
                "run",
                "cpr",
                "--agents",
                "rule",
                "--n-agents",
                3,
                "--rounds",
                2,
                "--replicates",
                2,
                "--out",
                d["rule"],
                "-q",
            ]
        )[0]
        == 0
    )
    cfg = base / "sweep.json"
    cfg.write_text(
        json.dumps(
            {
                "out": str(d["sweep"]),
                "agents": "llm",
                "models": [f"scripted:{CAUTIOUS}"],
                "envs": ["harsh"],
                "populations": ["mixed", "selfish"],
                "ablations": ["full"],
                "trials": 1,
                "n_agents": 3,
                "rounds": 2,
                "seed": 0,
                "parallel": 2,
                "llm": {"cache": "off"},
            }
        )
    )
    assert cli(["sweep", cfg, "--json"])[0] == 0
    assert cli(["profile", "--players", "nash", "--simulations", 2, "--out", d["profile"], "--json"])[0] == 0
    return d


def report(capsys, target, *extra, expect=0) -> Any:
    """The command's --json answer (JSON) when it exits 0, else its stderr."""
    code, out, err = cli(["report", target, "--json", *extra], capsys)
    assert code == expect, err
    return json.loads(out) if code == 0 else err


def img_count(html: str) -> int:
    return len(re.findall(r'<img src="data:image/(?:png|jpeg|gif|webp|svg\+xml);base64,', html))


def page_of(html: str, anchor: str) -> str:
    """One page (article) of the file: up to the next page, or the end of the file's pages."""
    start = html.index(f'<article class="page" id="{anchor}">')
    ends = [i for i in (html.find('<article class="page"', start + 1), html.find("</main>", start)) if i >= 0]
    return html[start : min(ends)]


def test_help(capsys):
    code, out, _ = cli(["report", "--help"], capsys)
    assert code == 0 and "Usage: cooplab report" in out and "--out" in out and "--json" in out


def test_llm_run_is_its_explorer_page_and_its_model_calls(dirs, capsys):
    d = dirs["llm"]
    res = report(capsys, d)
    out = Path(res["path"])
    assert out == d / "report.html" and out.stat().st_size == res["bytes"]
    html = out.read_text()
    assert res["kind"] == "run" and res["label"] == "cpr run" and res["pages"] == ["llm", "model calls"]
    # the explorer's own sections of a CPR run, then the generic ones
    assert res["sections"] == [
        "Summary",
        "The lake",
        "Fishers by round",
        "Punishments: who fined whom",
        "Norms: proposed, voted, adopted",
        "Beliefs over time",
        "Configuration",
        "Tables",
        "Figures",
        "Traces",
        "Files",
    ]
    run = page_of(html, "run")
    for title in res["sections"]:
        assert re.search(rf'<section id="run-[a-z-]+"><h2>{re.escape(html_escape(title, quote=False))}</h2>', run), (
            title
        )
    pngs = sorted((d / "figures").glob("*.png"))
    assert pngs and res["figures"] == len(pngs) == img_count(html)
    assert base64.b64encode(pngs[0].read_bytes()).decode() in html  # the embedded bytes are the figure's bytes
    led = json.loads((d / "summary.json").read_text())["ledger"]
    costs = section(run, "run-summary")
    for label, key in (("calls", "calls"), ("input tokens", "input_tokens"), ("output tokens", "output_tokens")):
        assert f"<dt>{label}</dt><dd>{led[key]}</dd>" in costs
    assert f"${float(led['cost_usd']):.6g}" in costs
    # every table file, with its true row count; the configuration, readable
    for name in ("decisions", "ledger", "rounds"):
        assert f"{name} ({len(pd.read_parquet(d / f'{name}.parquet')):,} rows)" in section(run, "run-tables"), name
    assert "scripted:" + str(CAUTIOUS) in run and "price_in" in run
    # the model calls page of the same file, grouped by round, linked from the run's page
    calls = page_of(html, "calls")
    llm = [r for r in load_runs(d) if r["run_type"] == "llm"]
    assert calls.count('<article class="call">') == len(llm)
    assert '<section id="calls-round-1">' in calls and '<section id="calls-round-2">' in calls
    assert '<a href="#calls">every model call of this run' in run and f"cooplab traces view {d}" in run
    # a link to a page the file does not hold (one round, one fisher) is text, never a dead link
    hrefs = [h for t, a in elements(html) if t == "a" and (h := a.get("href"))]
    assert hrefs and all(h.startswith("#") for h in hrefs), [h for h in hrefs if not h.startswith("#")]
    anchors = {i for _, a in elements(html) if (i := a.get("id"))}
    assert {h[1:] for h in hrefs} <= anchors  # every link leads somewhere in the file
    check_self_contained(html)


def test_rule_run_and_text_output(dirs, capsys, tmp_path):
    out = tmp_path / "sub" / "rule.html"
    code, stdout, err = cli(["report", dirs["rule"], "--out", out], capsys)
    assert code == 0 and stdout.strip() == str(out), err
    html = out.read_text()
    assert "no LLM calls recorded" in html and "no traces.jsonl" in html
    assert img_count(html) == len(list((dirs["rule"] / "figures").glob("*.png")))
    assert (
        "showing society 0" in html and "2 in all; <code>cooplab view</code> shows any of them" in html
    )  # the drop-down, as text


def test_a_sweep_is_its_page_then_each_cells_page(dirs, capsys):
    d = dirs["sweep"]
    res = report(capsys, d)
    html = Path(res["path"]).read_text()
    cells = sorted(p for p in (d / "cells").iterdir())
    assert (
        res["kind"] == "sweep"
        and res["runs"] == len(cells) == 2
        and res["pages"][1:] == [f"cells/{c.name}" for c in cells]
    )
    assert res["sections"][:3] == ["Overview", "Conditions", "Cells by condition"] and "Notes" in res["sections"]
    group = page_of(html, "folder")
    # the costs of every cell, summed
    calls = sum(json.loads((c / "summary.json").read_text())["ledger"]["calls"] for c in cells)
    assert f"<dt>calls</dt><dd>{calls}</dd>" in section(group, "folder-overview")
    # each cell's row links to its page in the file
    for n, c in enumerate(cells, 1):
        m = re.search(rf'<a href="#(r{n}-[^"]+)">{re.escape(c.name)}</a>', group)
        assert m and f'<article class="page" id="{m.group(1)}">' in html
    figs = list((d / "analysis").glob("*.png")) + [p for c in cells for p in (c / "figures").glob("*.png")]
    assert res["figures"] == len(figs) == img_count(html)
    assert "<h4>CPR LLM society: statistics</h4>" in section(
        group, "folder-notes"
    )  # statistics.md, rendered by markdown-it
    assert "cells.csv" in section(group, "folder-tables") and "sweep.json" not in res["problems"]


def test_a_profile_is_its_page_then_each_games_page(dirs, capsys):
    d = dirs["profile"]
    res = report(capsys, d)
    html = Path(res["path"]).read_text()
    games = json.loads((d / "profile.json").read_text())["games"]
    assert res["kind"] == "profile" and res["label"] == "game profile" and res["runs"] == len(games) == 6
    assert (
        sorted(res["pages"][1:])
        == sorted(f"cells/game-{g}__s0" for g in games)
        == sorted(e["run_dir"] for e in games.values())
    )
    rows = tables(section(page_of(html, "folder"), "folder-profile"))["every game"]
    assert sorted(r[0] for r in rows[1:]) == sorted(games)
    assert base64.b64encode((d / "figures" / "profile.png").read_bytes()).decode() in html
    assert "profile-config.json" in section(page_of(html, "folder"), "folder-settings")


def test_a_folder_of_results_shows_its_notes_tables_and_figures(dirs, tmp_path, capsys):
    """A folder an analysis wrote (claims.md, efficiency.csv, a figure): its files, the Markdown
    rendered by markdown-it-py with raw HTML, links and images left as text."""
    d = tmp_path / "results"
    d.mkdir()
    shutil.copy(next((dirs["rule"] / "figures").glob("*.png")), d / "efficiency.png")
    pd.DataFrame({"model": ["m"], "ratio_total_tokens": [27.0]}).to_csv(d / "efficiency.csv", index=False)
    (d / "claims.md").write_text(
        f"# Claims\n\n| claim | holds |\n|---|---|\n| **cooperation** | yes |\n\n{HOSTILE}\n\n"
        "[click](javascript:alert(1)) ![x](http://evil.example/x.png) <http://evil.example/>\n"
    )
    res = report(capsys, d)
    html = Path(res["path"]).read_text()
    assert res["kind"] == "results" and res["pages"] == ["results"] and res["figures"] == 1
    notes = section(html, "folder-notes")
    assert "<h4>Claims</h4>" in notes and "<td><strong>cooperation</strong></td>" in notes
    assert (
        html_escape(HOSTILE, quote=False) in notes
        and "evil.example" in notes
        and "<a " not in notes
        and "<img" not in notes
    )
    assert "ratio_total_tokens" in section(html, "folder-tables")
    check_self_contained(html)


def test_large_tables_show_their_first_rows_and_their_count(dirs, capsys, tmp_path):
    """A decisions table of 5,000 rows shows its first 200 rows and says how many it has, not
    megabytes of HTML; a sweep's table.csv with NaN."""
    d = tmp_path / "generic"
    for i, src in enumerate((dirs["llm"], dirs["rule"])):
        shutil.copytree(src, d / "runs" / f"r{i}", ignore=shutil.ignore_patterns("report.html"))
    (d / "sweep.json").write_text(json.dumps({"task": "cpr", "cells": 2}))
    pd.DataFrame({"cell": ["r0", "r1"], "score": [1.5, float("nan")]}).to_csv(d / "table.csv", index=False)
    big = pd.DataFrame({"i": range(5000), "text": [f"row-{i}-" + "x" * 300 for i in range(5000)]})
    big.to_parquet(d / "runs" / "r0" / "decisions.parquet")
    res = report(capsys, d)
    html = Path(res["path"]).read_text()
    assert res["kind"] == "sweep" and res["runs"] == 2 and res["label"] == "sweep"
    assert "200 of 5,000 rows shown" in html and "row-199-" in html and "row-200-" not in html
    assert res["bytes"] < 4_000_000
    assert "table.csv (2 rows)" in html and ">NaN<" in html


def hostile_run(src: Path, d: Path) -> Path:
    shutil.copytree(src, d, ignore=shutil.ignore_patterns("report.html"))
    cfg = json.loads((d / "config.json").read_text())
    cfg["llm"]["model"] = HOSTILE
    cfg["note"] = '"><img src=x onerror=alert(1)> http://evil.example/x.js'
    text = (
        json.dumps(cfg)[:-1]
        + ', "nan": NaN, "huge": 1e999, "big": '
        + "9" * 400
        + ', "deep": '
        + "[" * 50
        + "]" * 50
        + "}"
    )
    (d / "config.json").write_text(text)
    s = json.loads((d / "summary.json").read_text())
    s["message"] = HOSTILE
    s["ledger"]["cost_usd"] = "NaN"
    s["ledger"]["calls"] = -5
    (d / "summary.json").write_text(json.dumps(s))
    with open(d / "traces.jsonl", "a") as fh:
        fh.write('{"id": "x", "name": "</code><script>x</script>"\n[1, 2]\n')
    (d / "figures" / "evil.png").write_text(HOSTILE)
    (d / "figures" / f"{HOSTILE[:8]}.png").write_bytes((d / "figures" / "run.png").read_bytes())
    pd.DataFrame({"<b>col</b>": [HOSTILE, "ok"], "v": [float("inf"), 1e308]}).to_csv(d / "notes.csv", index=False)
    (d / "broken.parquet").write_bytes(b"PAR1 not really")
    (d / "claims.md").write_text(f"# {HOSTILE}\n\n<img src=x onerror=alert(1)>\n")
    return d


def check_self_contained(html: str) -> None:
    """Nothing loads from anywhere: the inlined style and two scripts, allowed by hash, and data: images."""
    els = elements(html)
    scripts = [a for t, a in els if t == "script"]
    assert len(scripts) == 2 and not any(a.get("src") for a in scripts), scripts
    csp = [a["content"] for t, a in els if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    assert len(csp) == 1 and re.fullmatch(
        r"default-src 'none'; img-src data:; style-src 'sha256-[A-Za-z0-9+/=]+'; script-src "
        r"'sha256-[A-Za-z0-9+/=]+' 'sha256-[A-Za-z0-9+/=]+'; base-uri 'none'; form-action 'none'",
        csp[0],
    ), csp
    assert not [a for t, a in els if t == "link" and a.get("rel") == "stylesheet"]
    for t, a in els:
        for attr in ("src", "href", "action"):
            v = a.get(attr, "")
            assert not v.lower().startswith(("http:", "https:", "//", "/", "javascript:")), (t, a)


def check_escaped(html: str) -> None:
    check_self_contained(html)
    els = elements(html)
    assert "&lt;script&gt;document.body.setAttribute(" in html
    assert not [a for t, a in els if t == "img" and a.get("src") == "x"] and not [
        a for t, a in els if any(k.startswith("on") for k in a)
    ]
    assert "<b>col</b>" not in html and "&lt;b&gt;col&lt;/b&gt;" in html
    assert "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;" in html


def test_hostile_run_text_stays_text_and_damage_is_named(dirs, capsys, tmp_path):
    d = hostile_run(dirs["llm"], tmp_path / "hostile")
    res = report(capsys, d)
    html = Path(res["path"]).read_text()
    check_escaped(html)
    run = page_of(html, "run")
    assert (
        "&#34;nan&#34;: NaN" in run and "&#34;huge&#34;: Infinity" in run
    )  # config.json in full: non-finite numbers named
    problems = " | ".join(res["problems"])
    n = sum(1 for _ in open(d / "traces.jsonl"))
    assert f"2 damaged lines of traces.jsonl (not a readable JSON object) were skipped: lines {n - 1}, {n}" in problems
    assert "figures/evil.png is not an image" in problems
    assert "table broken is not shown" in problems and "broken.parquet" in problems
    assert res["figures"] == 2 == img_count(html)  # run.png and the copy with the hostile name
    # the damaged summary.json is one line naming its field; its values are not shown as the run's outcome
    assert "summary.json: ledger.calls: Input should be greater than or equal to 0 (got -5)" in problems
    s = json.loads((d / "summary.json").read_text())
    s["ledger"] = json.loads((dirs["llm"] / "summary.json").read_text())["ledger"]
    (d / "summary.json").write_text(json.dumps(s))  # only the message hostile: shown, as text
    assert f"the run stopped: {escape(HOSTILE)}" in page_of(Path(report(capsys, d)["path"]).read_text(), "run")


def test_damaged_json(dirs, capsys, tmp_path):
    d = tmp_path / "damaged"
    shutil.copytree(dirs["llm"], d, ignore=shutil.ignore_patterns("report.html"))
    (d / "config.json").write_text('{"task": "cpr", "llm": ' + HOSTILE)
    (d / "summary.json").write_text("[1, 2]")
    res = report(capsys, d)
    html = Path(res["path"]).read_text()
    check_self_contained(html)
    assert (
        "<script>document" not in html and "&lt;script&gt;document" in html
    )  # config.json's first characters, as text
    problems = " | ".join(res["problems"])
    assert "config.json is damaged (not valid JSON" in problems and "summary.json is not a JSON object" in problems


def test_default_out_keeps_another_programs_report(dirs, capsys, tmp_path):
    """Another program's report.html is left alone: the default output then goes next to it."""
    d = tmp_path / "science-like"
    shutil.copytree(dirs["rule"], d, ignore=shutil.ignore_patterns("report.html"))
    (d / "report.html").write_text("<html>the team's paper</html>")
    res = report(capsys, d)
    assert Path(res["path"]) == d / "cooplab-report.html"
    assert (d / "report.html").read_text() == "<html>the team's paper</html>"
    # our own earlier report.html is simply rewritten
    (d / "report.html").unlink()
    assert Path(report(capsys, d)["path"]) == Path(report(capsys, d)["path"]) == d / "report.html"


@pytest.mark.parametrize("case", ["missing", "empty", "file", "not-html", "out-is-dir", "unfinished-cells-only"])
def test_user_errors(case, dirs, capsys, tmp_path):
    target, extra = tmp_path, []
    if case == "missing":
        target = tmp_path / "nope"
    elif case == "file":
        target = tmp_path / "f.txt"
        target.write_text("x")
    elif case == "not-html":
        target, extra = dirs["rule"], ["--out", tmp_path / "config.json"]
    elif case == "out-is-dir":
        (tmp_path / "x.html").mkdir()
        target, extra = dirs["rule"], ["--out", tmp_path / "x.html"]
    elif case == "unfinished-cells-only":
        (tmp_path / "cells" / "a").mkdir(parents=True)
    err = report(capsys, target, *extra, expect=2)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cooplab: error: ") and "Traceback" not in err
    assert not (tmp_path / "config.json").exists()


# ----------------------------------------------------------------------------------------
# the file opened from disk in a real browser
def test_the_files_open_from_disk_in_headless_chromium(dirs, capsys, tmp_path):
    """Each file (a run with its model calls, a sweep, a profile, a hostile run) opened as
    file://: no console message (a CSP refusal would be one), every image decoded, every plot drawn
    by the inlined plots.js, a table sorted by the inlined explorer.js, no hostile script run."""
    files = {
        "llm": Path(report(capsys, dirs["llm"], "--out", tmp_path / "llm.html")["path"]),
        "sweep": Path(report(capsys, dirs["sweep"], "--out", tmp_path / "sweep.html")["path"]),
        "profile": Path(report(capsys, dirs["profile"], "--out", tmp_path / "profile.html")["path"]),
        "hostile": Path(
            report(capsys, hostile_run(dirs["llm"], tmp_path / "hostile"), "--out", tmp_path / "hostile.html")["path"]
        ),
    }
    with DevTools(tmp_path) as b:
        for name, path in files.items():
            b.events.clear()
            b.open(path.as_uri())
            assert b.console() == [], (name, b.console())
            widths = b.eval("Array.from(document.images).map(i => i.complete ? i.naturalWidth : 0)")
            assert widths and all(w > 0 for w in widths), (name, widths)
            plots = b.eval(
                "[document.querySelectorAll('figure.plot[data-plot]').length, "
                "document.querySelectorAll('figure.plot[data-drawn=\"1\"]').length]"
            )
            assert plots[0] >= 1 and plots[0] == plots[1], (name, plots)
            assert b.eval("document.body.getAttribute('data-pwned')") is None
            # the first sortable table of a CPR run sorts by a click on its first column, descending on a second click
            if name == "llm":
                got = b.eval("""(() => { const t = document.querySelector('#run-lake table.sortable');
                    const col = () => Array.from(t.tBodies[0].rows).map(r => Number(r.cells[0].dataset.sort));
                    const th = t.tHead.rows[0].cells[0]; th.click(); const up = col(); th.click(); return [up, col()]; })()""")  # noqa: E501 (text kept verbatim)
                assert got[0] == sorted(got[0]) and got[1] == sorted(got[0], reverse=True) and len(got[0]) == 2
        shot = b.send("Page.captureScreenshot", {"format": "png"})
    png = tmp_path / "shot.png"
    png.write_bytes(base64.b64decode(shot["data"]))
    from tests.explorer.test_explorer import image_stats

    _, _, colours, std = image_stats(png)
    assert colours > 50 and std > 5  # text, cards and figures: not a blank page


def test_markdown_goes_through_markdown_it_with_raw_html_links_and_images_off():
    """Headings three levels down, pipe tables, emphasis, code; raw HTML, links, autolinks and
    images stay text; a text longer than the bound is cut, and says so."""
    from cooplab.evals.explorer import markdown

    html, cut = markdown.to_html(
        "# Title\n\n## Part\n\n| a | b |\n|---|---|\n| **x** | `y` |\n\n"
        f"{HOSTILE}\n\n<div onclick=alert(1)>block</div>\n\n[a](javascript:alert(1)) ![i](http://e.x/i.png) <http://e.x/>"
    )
    assert not cut and "<h4>Title</h4>" in html and "<h5>Part</h5>" in html
    assert "<td><strong>x</strong></td>" in html and "<td><code>y</code></td>" in html
    assert "&lt;script&gt;" in html and "&lt;div onclick=alert(1)&gt;" in html
    assert "<a" not in html and "<img" not in html and "<script" not in html and "<div" not in html
    long, cut = markdown.to_html("word " * markdown.MAX_CHARS)
    assert cut and len(long) < markdown.MAX_CHARS + 100
