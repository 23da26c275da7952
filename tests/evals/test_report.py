"""``cooplab report DIR`` (evals/report.py): one self-contained HTML page for a run or a sweep.

The directories are made by the project's own commands (scripted LLM agents, rule agents, a tiny
CPR sweep, a tiny reference-player profile); hostile copies of them check escaping and damaged
files. Headless Chromium (scripts/ensure-chromium.sh; under CI a missing Chromium fails) loads the
page from a local HTTP server that logs every request: the page must render, every figure must
decode, and the page must be the only request.
"""

from __future__ import annotations

import base64
from html import escape as html_escape
import json
import os
import re
import shutil
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pandas as pd
import pytest

from cooplab.cli import main
from tests.helpers.chromium import browse

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
    assert cli(["run", "cpr", "--agents", "llm", "--model", f"scripted:{CAUTIOUS}", "--n-agents", 3, "--rounds", 2,
                "--cache", "off", "--out", d["llm"], "-q"])[0] == 0
    assert cli(["run", "cpr", "--agents", "rule", "--n-agents", 3, "--rounds", 2, "--replicates", 2, "--out", d["rule"], "-q"])[0] == 0
    cfg = base / "sweep.json"
    cfg.write_text(json.dumps({"out": str(d["sweep"]), "agents": "llm", "models": [f"scripted:{CAUTIOUS}"], "envs": ["harsh"],
                               "populations": ["mixed", "selfish"], "ablations": ["full"], "trials": 1, "n_agents": 3,
                               "rounds": 2, "seed": 0, "parallel": 2, "llm": {"cache": "off"}}))
    assert cli(["sweep", cfg, "--json"])[0] == 0
    assert cli(["profile", "--players", "nash", "--simulations", 2, "--out", d["profile"], "--json"])[0] == 0
    return d


def report(capsys, target, *extra, expect=0):
    code, out, err = cli(["report", target, "--json", *extra], capsys)
    assert code == expect, err
    return json.loads(out) if code == 0 else err


def img_count(html: str) -> int:
    return len(re.findall(r'<img src="data:image/(?:png|jpeg|gif|webp);base64,', html))


def test_help(capsys):
    code, out, _ = cli(["report", "--help"], capsys)
    assert code == 0 and "Usage: cooplab report" in out and "--out" in out and "--json" in out


def test_llm_run(dirs, capsys):
    d = dirs["llm"]
    res = report(capsys, d)
    out = Path(res["path"])
    assert out == d / "report.html" and out.stat().st_size == res["bytes"]
    html = out.read_text()
    assert res["kind"] == "run" and res["label"] == "cpr run"
    assert res["sections"] == ["Costs", "Figures", "Tables", "Summary", "Configuration", "Traces", "Files"]
    for title in res["sections"]:
        assert re.search(rf'<h3 id="[^"]+">{title}</h3>', html)
    pngs = sorted((d / "figures").glob("*.png"))
    assert pngs and res["figures"] == len(pngs) == img_count(html)
    # the embedded bytes are the figure's bytes
    assert base64.b64encode(pngs[0].read_bytes()).decode() in html
    summary = json.loads((d / "summary.json").read_text())
    led = summary["ledger"]
    for label, key in (("calls", "calls"), ("input tokens", "input_tokens"), ("output tokens", "output_tokens")):
        assert f'<div class="label">{label}</div><div class="value">{led[key]}</div>' in html
    assert f"${float(led['cost_usd']):.6g}" in html
    # tables: every table file is shown, with its true row count
    for name in ("decisions.parquet", "ledger.parquet", "rounds.parquet"):
        n = len(pd.read_parquet(d / name))
        assert re.search(rf'>{re.escape(name)}</a> <span class="muted">{n:,} rows', html), name
    # config (readable) and traces (relative link + viewer command)
    assert "scripted:" + str(CAUTIOUS) in html and "price_in" in html
    assert '<a href="traces.jsonl">traces.jsonl</a>' in html and f"cooplab traces view {d}" in html
    check_self_contained(html)


def test_rule_run_and_text_output(dirs, capsys, tmp_path):
    out = tmp_path / "sub" / "rule.html"
    code, stdout, err = cli(["report", dirs["rule"], "--out", out], capsys)
    assert code == 0 and stdout.strip() == str(out), err
    html = out.read_text()
    assert "No LLM calls recorded" in html and "No traces.jsonl" in html
    assert img_count(html) == len(list((dirs["rule"] / "figures").glob("*.png")))
    # links are relative to the page, wherever it is written
    assert f'href="{os.path.relpath(dirs["rule"] / "rounds.parquet", out.parent)}"' in html


def test_cpr_sweep(dirs, capsys):
    d = dirs["sweep"]
    res = report(capsys, d)
    html = Path(res["path"]).read_text()
    cells = sorted(p for p in (d / "cells").iterdir())
    assert res["kind"] == "sweep" and res["label"] == "CPR sweep" and res["runs"] == len(cells) == 2
    assert res["sections"][:2] == ["Overview", "Runs"] and "Statistics and notes" in res["sections"]
    figs = list((d / "analysis").glob("*.png")) + [p for c in cells for p in (c / "figures").glob("*.png")]
    assert res["figures"] == len(figs) == img_count(html)
    # one row per cell, each linking to its section
    runs = html.split('<table class="data runs">')[1].split("</table>")[0]
    assert runs.count("<tr>") == len(cells) + 1
    for c in cells:
        m = re.search(rf'<a href="#([^"]+)">cells/{re.escape(c.name)}</a>', runs)
        assert m and f'<section class="run" id="{m.group(1)}">' in html
    calls = sum(json.loads((c / "summary.json").read_text())["ledger"]["calls"] for c in cells)
    assert f'<div class="label">calls</div><div class="value">{calls}</div>' in html
    assert "<h4>CPR LLM society: statistics</h4>" in html  # statistics.md, rendered


def test_profile(dirs, capsys):
    d = dirs["profile"]
    res = report(capsys, d)
    html = Path(res["path"]).read_text()
    games = json.loads((d / "profile.json").read_text())["games"]
    assert res["label"] == "game profile" and res["runs"] == len(games) == 6
    for game in games:
        assert f">games/{game}</a>" in html
    assert base64.b64encode((d / "figures" / "profile.png").read_bytes()).decode() in html
    assert "Configuration" in res["sections"] and "profile-config.json" in html


def test_generic_sweep_and_large_tables(dirs, capsys, tmp_path):
    """A directory with run directories under runs/ (any task), a table.csv and sweep.json; a
    decisions table of 5,000 rows shows its first rows and its count, not megabytes of HTML."""
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
    assert "showing the first 10 of 5,000 rows" in html and "row-9-" in html and "row-10-" not in html
    assert res["bytes"] < 2_000_000 and res["tables_capped"] >= 1
    assert ">table.csv</a>" in html and ">NaN<" in html


def hostile_run(src: Path, d: Path) -> Path:
    shutil.copytree(src, d, ignore=shutil.ignore_patterns("report.html"))
    cfg = json.loads((d / "config.json").read_text())
    cfg["llm"]["model"] = HOSTILE
    cfg["note"] = '"><img src=x onerror=alert(1)> http://evil.example/x.js'
    text = json.dumps(cfg)[:-1] + ', "nan": NaN, "huge": 1e999, "big": ' + "9" * 400 + ', "deep": ' + "[" * 50 + "]" * 50 + "}"
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
    return d


def check_self_contained(html: str) -> None:
    assert html.count("<script") == 1, "only the page's own script"
    assert "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:;" in html
    for attr in re.findall(r'(?:src|href)\s*=\s*"([^"]*)"', html):
        assert not attr.lower().startswith(("http:", "https:", "//")), attr


def check_escaped(html: str, table: bool = True) -> None:
    check_self_contained(html)
    assert "&lt;script&gt;document.body.setAttribute(" in html
    assert "<img src=x" not in html and "<b>col</b>" not in html
    if table:
        assert "&lt;b&gt;col&lt;/b&gt;" in html and "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;" in html


def test_hostile_run(dirs, capsys, tmp_path):
    d = hostile_run(dirs["llm"], tmp_path / "hostile")
    res = report(capsys, d)
    html = Path(res["path"]).read_text()
    check_escaped(html)
    assert '<th>nan</th><td><span class="num">NaN</span>' in html and '<th>huge</th><td><span class="num">\u221e</span>' in html
    assert '<th>big</th><td><span class="num">~10^400</span>' in html  # a 400-digit integer, shortened
    problems = " | ".join(res["problems"])
    n = sum(1 for _ in open(d / "traces.jsonl"))
    assert f"traces.jsonl has 2 damaged line(s) (not JSON objects): line {n - 1}, {n}" in problems
    assert "figures/evil.png is not a PNG, JPEG, GIF or WebP image" in problems
    assert "broken.parquet could not be read" in problems
    assert res["figures"] == 2 == img_count(html)  # run.png and the copy with the hostile name
    assert len(res["problems"]) == 3 and res["sections"][0] == "Problems (3)"
    assert f'<p class="message">{html_escape(HOSTILE)}</p>' in html


def test_damaged_json(dirs, capsys, tmp_path):
    d = tmp_path / "damaged"
    shutil.copytree(dirs["llm"], d, ignore=shutil.ignore_patterns("report.html"))
    (d / "config.json").write_text('{"task": "cpr", "llm": ' + HOSTILE)
    (d / "summary.json").write_text("[1, 2]")
    res = report(capsys, d)
    html = Path(res["path"]).read_text()
    check_escaped(html, table=False)
    problems = " | ".join(res["problems"])
    assert "config.json is damaged (not valid JSON" in problems and "summary.json is damaged (not a JSON object)" in problems
    assert '<span class="badge other">unknown</span>' in html


def test_default_out_keeps_another_programs_report(dirs, capsys, tmp_path):
    """Another program's report.html is left alone: the default output then goes next to it."""
    d = tmp_path / "science-like"
    shutil.copytree(dirs["rule"], d, ignore=shutil.ignore_patterns("report.html"))
    (d / "report.html").write_text("<html>the team's paper</html>")
    res = report(capsys, d)
    assert Path(res["path"]) == d / "cooplab-report.html"
    assert (d / "report.html").read_text() == "<html>the team's paper</html>"
    assert '<a href="report.html">report.html</a>' in Path(res["path"]).read_text()
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
# the page in a real browser
class LoggingServer:
    """A local HTTP server for one directory that records every request path."""

    def __init__(self, root: Path):
        self.requests: list[str] = []
        log = self.requests

        class Handler(SimpleHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                log.append(self.path)
                super().do_GET()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Handler, directory=str(root)))
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("which", ["sweep", "hostile"])
def test_page_in_headless_chromium(which, dirs, capsys, tmp_path):
    d = dirs["sweep"] if which == "sweep" else hostile_run(dirs["llm"], tmp_path / "hostile")
    res = report(capsys, d, "--out", tmp_path / "site" / "page.html")
    html = Path(res["path"]).read_text()
    srv = LoggingServer(tmp_path / "site")
    try:
        dom = browse(tmp_path, srv.url + "page.html", "--dump-dom")
        assert dom.returncode == 0, dom.stderr[-2000:]
        png = tmp_path / "shot.png"
        shot = browse(tmp_path, srv.url + "page.html", f"--screenshot={png}")
        assert png.is_file(), shot.stderr[-2000:]
    finally:
        srv.close()
    assert srv.requests == ["/page.html", "/page.html"], srv.requests  # nothing but the page, twice (two browsers)
    page = dom.stdout
    n = res["figures"]
    assert n >= 1 and f'data-images="{n}/{n}"' in page, page[:3000]
    widths = [int(w) for w in re.findall(r'data-natural-width="(\d+)"', page)]
    assert len(widths) == n and all(w > 0 for w in widths)
    assert "data-pwned" not in page.split("<body", 1)[1].split(">", 1)[0]
    for title in res["sections"]:
        assert re.search(rf">{re.escape(title)}</h[23]>", page), title
    assert page.count("<table") >= 3
    (check_escaped if which == "hostile" else check_self_contained)(html)

    import matplotlib.image as mpimg
    import numpy as np

    img = mpimg.imread(png)
    assert img.shape[:2] == (900, 1200)
    rgb = (img[..., :3] * 255).astype(np.uint8).reshape(-1, 3)
    assert len(np.unique(rgb, axis=0)) > 50 and rgb.std() > 5  # text, cards and figures; not a blank page
