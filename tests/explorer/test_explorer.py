"""The run explorer (``cooplab view``) as a person uses it: a real server on loopback, pages loaded in
headless Chromium (their DOM after scripts ran, and screenshots), answers checked against the run's
own tables. The runs come from conftest.py (scripted models and rule agents)."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import socket
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlencode

import httpx
import pandas as pd
import pytest

from cooplab.cli import main
from cooplab.cli.view import stop_started, task_for
from cooplab.evals.explorer.app import CSP, serve, stop
from cooplab.evals.typed import as_frame
from cooplab.graphs import explore as ex
from cooplab.graphs.task import Task
from tests.explorer.conftest import HOSTILE_BELIEF, HOSTILE_DIR, HOSTILE_NORM
from tests.helpers.chromium import browse
from tests.helpers.cli import fail_line
from tests.helpers.summaries import write_summary


@pytest.fixture(scope="module")
def site(runs):
    server, url = serve([runs], task_for=task_for)
    yield url
    stop(server)


def page(site: str, path: str, **query) -> str:
    return site + path.lstrip("/") + ("?" + urlencode(query) if query else "")


def run_page(site: str, name: str, **query) -> str:
    return page(site, "run", id=f"0/{name}", **query)


def dom(tmp_path: Path, url: str) -> str:
    """The page's DOM after its scripts ran, as Chromium serializes it."""
    res = browse(tmp_path, url, "--dump-dom", size="1300,1000")
    assert res.returncode == 0 and "<main>" in res.stdout, res.stderr[-2000:]
    return res.stdout


def section(html_text: str, sid: str) -> str:
    start = html_text.index(f'<section id="{sid}">')
    return html_text[start : html_text.index("</section>", start)]


class Tables(HTMLParser):
    """Every table of a page: its title (the <h4> before it) and its rows as lists of cell texts."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[tuple[str, list[list[str]]]] = []
        self.title, self.in_h4, self.cell, self.row = "", False, None, None

    def handle_starttag(self, tag, attrs):
        if tag == "h4":
            self.in_h4, self.title = True, ""
        elif tag == "table":
            self.tables.append((self.title, []))
        elif tag == "tr":
            self.row = []
        elif tag in ("td", "th"):
            self.cell = ""
        elif tag == "br" and self.cell is not None:
            self.cell += "\n"

    def handle_endtag(self, tag):
        if tag == "h4":
            self.in_h4 = False
        elif tag in ("td", "th") and self.row is not None:
            self.row.append((self.cell or "").strip())
            self.cell = None
        elif tag == "tr" and self.tables and self.row is not None:
            self.tables[-1][1].append(self.row)
            self.row = None

    def handle_data(self, data):
        if self.in_h4:
            self.title += data
        if self.cell is not None:
            self.cell += data


def tables(html_text: str) -> dict[str, list[list[str]]]:
    p = Tables()
    p.feed(html_text)
    return {title.strip(): rows for title, rows in p.tables}


class Elements(HTMLParser):
    """Every element of a page with its attributes (to find what a payload could have injected)."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag, attrs):
        self.found.append((tag, {k: v or "" for k, v in attrs}))


def elements(html_text: str) -> list[tuple[str, dict[str, str]]]:
    p = Elements()
    p.feed(html_text)
    return p.found


def assert_inert(html_text: str) -> None:
    """No script but the page's own, no element a payload would add, nothing a payload would set."""
    els = elements(html_text)
    assert [a.get("src") for t, a in els if t == "script"] == ["/static/explorer.js", "/static/plots.js"]
    assert not [a for t, a in els if t == "img" and a.get("src") == "x"]
    assert not [a for t, a in els if any(k.startswith("on") for k in a)]
    assert "data-pwned" not in html_text.split("<body", 1)[1].split(">", 1)[0]


def image_stats(path: Path) -> tuple[int, int, int, float]:
    """Width, height, distinct colours and pixel standard deviation of a PNG."""
    import matplotlib.image as mpimg
    import numpy as np

    img = mpimg.imread(path)
    rgb = (img[..., :3] * 255).astype(np.uint8).reshape(-1, 3)
    return img.shape[1], img.shape[0], len(np.unique(rgb, axis=0)), float(rgb.std())


def screenshot(tmp_path: Path, url: str, name: str) -> Path:
    """A screenshot of the page, checked to show something (text, tables, plots), and written to
    $COOPLAB_EXPLORER_SHOTS (e.g. docs/img) when it is set."""
    png = tmp_path / f"{name}.png"
    res = browse(tmp_path, url, f"--screenshot={png}", size="1300,1000")
    assert png.is_file(), res.stderr[-2000:]
    w, h, colours, std = image_stats(png)
    assert (w, h) == (1300, 1000) and colours > 50 and std > 5, (name, colours, std)
    out = os.environ.get("COOPLAB_EXPLORER_SHOTS")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        shutil.copy(png, Path(out) / png.name)
    return png


def decisions(runs: Path, name: str) -> pd.DataFrame:
    return pd.read_parquet(runs / name / "decisions.parquet")


# --- the list --------------------------------------------------------------------------------------
def test_the_list_shows_every_run_under_the_folder_sweeps_cells_too(site, runs, tmp_path):
    html_text = dom(tmp_path, site)
    rows = tables(html_text)[""]
    names = [r[2].split("\n")[0] for r in rows[1:]]
    assert sorted(names) == sorted(
        [
            "cpr-llm",
            "cpr-greedy",
            HOSTILE_DIR,
            "diners",
            "profile/cells/game-cpr-sanction__s0",
            "sweep/cells/rounds-3__s0",
            "sweep/cells/rounds-4__s0",
            "broken",
        ]
    )
    by_name = {r[2].split("\n")[0]: r for r in rows[1:]}
    assert by_name["cpr-llm"][3:5] == ["cpr", "completed"] and "cautious.json" in by_name["cpr-llm"][5]
    assert "survival time" in by_name["cpr-llm"][6] and "cost (USD)" in by_name["cpr-llm"][6]
    assert (
        by_name["diners"][3] == "diners" and by_name["diners"][5] == "rule" and "final shares" in by_name["diners"][6]
    )
    assert (
        by_name["profile/cells/game-cpr-sanction__s0"][3] == "game"
        and "Pareto proximity" in by_name["profile/cells/game-cpr-sanction__s0"][6]
    )
    assert "summary.json is damaged" in by_name["broken"][2]
    assert 'action="/compare"' in html_text and html_text.count('name="a"') == len(names) == html_text.count('name="b"')
    assert_inert(html_text)
    screenshot(tmp_path, site, "explorer-list")


def test_the_list_filters_and_sorts_in_the_browser(site, tmp_path):
    """The page's own script runs under the CSP: ?q= filters the rows, ?sort=N sorts by column N."""
    rows = tables(dom(tmp_path, page(site, "", q="cpr llm")))[""]
    shown = [r[2] for r in rows[1:] if r]
    html_text = dom(tmp_path, page(site, "", q="game"))
    hidden = [a for t, a in elements(html_text) if t == "tr" and "hidden" in a.get("class", "")]
    assert len(hidden) == 7 and 'data-task="game"' in html_text  # only the profile's game is left
    assert "cpr-llm" in shown
    order = [r[3] for r in tables(dom(tmp_path, page(site, "", sort="3")))[""][1:]]
    assert order == sorted(order) and order != sorted(order, reverse=True)
    desc = [r[3] for r in tables(dom(tmp_path, page(site, "", sort="-3")))[""][1:]]
    assert desc == sorted(order, reverse=True)


# --- a CPR run of LLM fishers ----------------------------------------------------------------------
def test_who_fined_whom_in_round_5_and_what_fisher_2_said(site, runs, tmp_path):
    d = decisions(runs, "cpr-llm")
    r5 = as_frame(d[d["round"] == 5])
    fined = sorted(
        (f"Fisher {a + 1}", f"Fisher {json.loads(p)['punish']}")
        for a, p in as_frame(r5[r5.phase == "punish"][["agent", "parsed"]]).values
        if json.loads(p)["punish"] is not None
    )
    assert fined  # the scripted fishers fine someone in round 5 (seed 4)
    html_text = dom(tmp_path, run_page(site, "cpr-llm", round=5))
    rnd = section(html_text, "round")
    shown = tables(rnd)["who fined whom, round by round"]
    assert shown[0] == ["round", "who", "fined"]
    assert sorted((r[1], r[2]) for r in shown[1:]) == fined and {r[0] for r in shown[1:]} == {"5"}
    talk = rnd.split("what Fisher 2 was asked and answered in round 5", 1)[1].split("<summary>what Fisher 3", 1)[0]
    said = r5[r5.agent == 1].raw.tolist()
    assert len(said) >= 3  # harvest, punish, propose (vote)
    for answer in said:
        assert html.escape(answer, quote=False) in talk
    assert "Your name is Fisher 2." in talk and "Round 5" in talk
    adopted = pd.read_parquet(runs / "cpr-llm" / "norms_adopted.parquet")
    assert html.escape(adopted[adopted["round"] == 5].norm.iloc[0], quote=False) in rnd
    screenshot(tmp_path, run_page(site, "cpr-llm", round=5), "explorer-cpr-round")


def test_a_cpr_run_shows_the_lake_agents_norms_and_beliefs(site, runs, tmp_path):
    html_text = dom(tmp_path, run_page(site, "cpr-llm"))
    for sid in ("lake", "agents", "fines", "norms", "beliefs"):
        assert f'<section id="{sid}">' in html_text
    t = tables(section(html_text, "agents"))["every fisher, every round"]
    assert len(t) == 1 + 4 * 6 and t[0][:3] == ["round", "fisher", "type"]
    rounds = pd.read_parquet(runs / "cpr-llm" / "rounds.parquet")
    lake = tables(section(html_text, "lake"))["round by round"]
    assert [r[0] for r in lake[1:]] == [str(r) for r in rounds["round"]]
    norms = tables(section(html_text, "norms"))
    d = decisions(runs, "cpr-llm")
    proposals = {json.loads(p)["proposal"] for p in d[d.phase == "propose"].parsed}
    assert {r[2] for r in norms["norms proposed"][1:]} == proposals
    assert len(norms["votes"]) == 1 + (d.phase == "vote").sum()
    adopted = pd.read_parquet(runs / "cpr-llm" / "norms_adopted.parquet")
    votes = [r[norms["norms adopted"][0].index("votes")] for r in norms["norms adopted"][1:]]
    assert votes == [
        ", ".join(f"option {o}: {n}" for o, n in json.loads(v)) or "no vote (a single proposal)" for v in adopted.votes
    ]  # never a Python list
    assert all(re.fullmatch(r"option \d+: \d+(, option \d+: \d+)*|no vote \(a single proposal\)", v) for v in votes)
    beliefs = tables(section(html_text, "beliefs"))["each fisher's personal norm in words, as it changed"]
    assert beliefs[0][:3] == ["fisher", "at the start", "after round 1"] and len(beliefs) == 5
    assert html_text.count('data-drawn="1"') >= 3 and html_text.count("<svg") >= 3  # drawn by plots.js under the CSP
    screenshot(tmp_path, run_page(site, "cpr-llm"), "explorer-cpr")


def test_follow_one_fisher_across_rounds(site, runs, tmp_path):
    start = dom(tmp_path, run_page(site, "cpr-llm"))
    link = html.unescape(next(a["href"] for t, a in elements(start) if t == "a" and "agent=1" in a.get("href", "")))
    html_text = dom(tmp_path, site + link.lstrip("/"))
    me = section(html_text, "agent")
    assert "Fisher 2 across rounds" in me
    rows = tables(me)["Fisher 2, round by round"]
    d = decisions(runs, "cpr-llm")
    efforts = [
        json.loads(p)["effort"]
        for p in as_frame(d[(d.agent == 1) & (d.phase == "harvest")]).sort_values("round").parsed
    ]
    assert [r[0] for r in rows[1:]] == [str(r) for r in range(1, 7)] and {r[1] for r in rows[1:]} == {"Fisher 2"}
    assert [float(r[3]) for r in rows[1:]] == pytest.approx(efforts)
    for answer in d[d.agent == 1].raw:
        assert html.escape(answer, quote=False) in me
    screenshot(tmp_path, site + link.lstrip("/"), "explorer-cpr-agent")


def test_the_traces_page_lists_one_rounds_calls(site, runs, tmp_path):
    html_text = dom(tmp_path, page(site, "traces", id="0/cpr-llm", round=2, agent=0))
    d = decisions(runs, "cpr-llm")
    assert (
        html_text.count('<article class="call">')
        == len(d[(d.agent == 0) & (d["round"] == 2)]) + d[(d.agent == 0) & (d["round"] == 2)].attempts.sub(1).sum()
    )
    assert "Fisher 1 \u00b7 harvest \u00b7 round 2" in html_text


# --- diners and games ------------------------------------------------------------------------------
def test_a_diners_run_shows_strategies_diners_and_punishments(site, runs, tmp_path):
    html_text = dom(tmp_path, run_page(site, "diners", society="0/2"))
    pun = pd.read_parquet(runs / "diners" / "punishments.parquet")
    mine = pun[(pun.condition == 0) & (pun.replicate == 2)]
    fines_shown = tables(section(html_text, "fines")).get("who punished whom, iteration by iteration", [[]])
    assert len(fines_shown) - 1 == len(mine)
    rows = tables(section(html_text, "agents"))["every diner, every iteration"]
    assert len(rows) == 1 + 8 * 12 and "strategy" in rows[0] and "order" in rows[0]
    assert "showing society 0/2" in html_text


def test_a_game_profile_shows_players_and_sanctions(site, runs, tmp_path):
    name = "profile/cells/game-cpr-sanction__s0"
    html_text = dom(tmp_path, run_page(site, name, round=2))
    players = pd.read_parquet(runs / name / "players.parquet")
    sanctions = pd.read_parquet(runs / name / "sanctions.parquet")
    rows = tables(section(html_text, "agents"))["every player, every round"]
    assert len(rows) - 1 == (players.simulation == 0).sum()
    matrix = tables(section(html_text, "fines"))["times sanctioned (tokens) (rows: who; columns: whom)"]
    total = sum(float(c) for r in matrix[1:] for c in r[1:] if c)
    assert total == sanctions[sanctions.simulation == 0].tokens.sum()
    r2 = tables(section(html_text, "round"))["round 2"]
    assert len(r2) - 1 == ((players.simulation == 0) & (players["round"] == 2)).sum()
    screenshot(tmp_path, run_page(site, name), "explorer-game")


def test_a_profile_has_its_own_page_with_its_games_and_figure(site, runs, tmp_path):
    listing = dom(tmp_path, site)
    assert 'href="/group?id=0%2Fprofile"' in listing and 'href="/group?id=0%2Fsweep"' in listing
    html_text = dom(tmp_path, page(site, "group", id="0/profile"))
    prof = json.loads((runs / "profile" / "profile.json").read_text())
    game = prof["games"]["cpr-sanction"]
    row = tables(section(html_text, "profile"))["every game"]
    got = dict(zip(row[0], row[1], strict=False))
    assert got["game"] == "cpr-sanction" and got["title"] == game["title"] and got["metric"] == game["metric"]["label"]
    assert float(got["mean"]) == pytest.approx(game["metric"]["mean"], rel=1e-3)
    assert float(got["Pareto proximity"]) == pytest.approx(game["pareto_proximity"]["mean"], rel=1e-3)
    lo, hi = (float(v) for v in got["proximity 95% CI"].split(" to "))
    assert [lo, hi] == pytest.approx(game["pareto_proximity"]["ci95"], rel=1e-3)
    assert 'href="/run?id=0%2Fprofile%2Fcells%2Fgame-cpr-sanction__s0"' in html_text
    assert html_text.count('data-drawn="1"') == 1 and "whiskers: its 95% confidence interval" in html_text
    assert '<img src="data:image/png;base64,' in section(html_text, "figure")
    assert_inert(html_text)
    screenshot(tmp_path, page(site, "group", id="0/profile"), "explorer-profile")


# --- two runs side by side -------------------------------------------------------------------------
def test_compare_two_runs_key_numbers_and_overlaid_plots(site, runs, tmp_path):
    url = page(site, "compare", a="0/cpr-llm", b="0/cpr-greedy")
    html_text = dom(tmp_path, url)
    t = tables(html_text)[""]
    assert t[0][1:] == ["A \u00b7 cpr-llm", "B \u00b7 cpr-greedy"]
    by = {r[0]: r[1:] for r in t[1:]}
    assert "greedy.json" in by["model"][1] and "cautious.json" in by["model"][0]
    ea = json.loads((runs / "cpr-llm" / "summary.json").read_text())["efficiency"]["mean"]
    eb = json.loads((runs / "cpr-greedy" / "summary.json").read_text())["efficiency"]["mean"]
    assert [float(x) for x in by["efficiency"]] == pytest.approx([ea, eb], rel=1e-3)  # 4 significant digits
    assert html_text.count('data-drawn="1"') >= 3 and html_text.count("<svg") >= 3
    assert (
        "Norms: proposed, voted, adopted, side by side" in html_text
        and "Punishments: who fined whom, side by side" in html_text
    )
    for name in ("cpr-llm", "cpr-greedy"):  # each run's adopted norms, with links into its own page
        adopted = pd.read_parquet(runs / name / "norms_adopted.parquet")
        assert all(html.escape(n, quote=False) in html_text for n in adopted.norm)
        assert f"/run?id=0%2F{name}&amp;round=1" in html_text
    screenshot(tmp_path, url, "explorer-compare")


# --- hostile run text ------------------------------------------------------------------------------
@pytest.mark.parametrize("query", [{}, {"round": 1}, {"agent": 0}])
def test_hostile_run_text_stays_text(site, runs, tmp_path, query):
    html_text = dom(tmp_path, run_page(site, HOSTILE_DIR, **query))
    assert_inert(html_text)
    body = html_text.split("<body", 1)[1]
    assert html.escape(HOSTILE_NORM, quote=False) in body and html.escape(HOSTILE_BELIEF, quote=False) in body
    assert html.escape(HOSTILE_DIR, quote=False) in body


def test_hostile_text_on_the_list_traces_and_compare_pages(site, runs, tmp_path):
    for url in (
        site,
        page(site, "traces", id=f"0/{HOSTILE_DIR}"),
        page(site, "compare", a=f"0/{HOSTILE_DIR}", b="0/cpr-llm"),
    ):
        html_text = dom(tmp_path, url)
        assert_inert(html_text)
        assert html.escape(HOSTILE_DIR, quote=False) in html_text


# --- safety of the server --------------------------------------------------------------------------
def raw_http(url: str, request: bytes) -> tuple[int, dict[str, str], bytes]:
    host, port = url.split("//")[1].rstrip("/").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(request)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    return int(lines[0].split(" ", 2)[1]), headers, body


@pytest.mark.parametrize(
    "host", ["evil.example:{port}", "localhost.evil.com:{port}", "127.0.0.1:{other}", "localhost", "rebind.test"]
)
def test_a_foreign_host_gets_nothing(site, host):
    port = int(site.rstrip("/").rsplit(":", 1)[1])
    host = host.format(port=port, other=port + 1)
    for path in (
        "/",
        "/run?id=0/cpr-llm",
        "/compare?a=0/cpr-llm&b=0/diners",
        "/traces?id=0/cpr-llm",
        "/static/explorer.js",
    ):
        code, _, body = raw_http(site, f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        assert code == 421 and b"Fisher" not in body and b"cpr-llm" not in body


def test_no_host_gets_nothing_and_pages_carry_a_strict_csp(site):
    code, _, body = raw_http(site, b"GET / HTTP/1.0\r\n\r\n")
    assert code == 400 and b"cpr-llm" not in body
    port = site.rstrip("/").rsplit(":", 1)[1]
    code, headers, body = raw_http(
        site, f"GET /run?id=0/cpr-llm HTTP/1.1\r\nHost: localhost:{port}\r\nConnection: close\r\n\r\n".encode()
    )
    assert code == 200 and headers["content-security-policy"] == CSP and headers["x-content-type-options"] == "nosniff"
    assert "script-src 'self'" in CSP and "unsafe-inline" not in CSP and "unsafe-eval" not in CSP
    assert b"<script>" not in body and b"onclick" not in body  # no inline script at all


@pytest.mark.parametrize(
    "query",
    [
        {"id": "../../etc"},
        {"id": "0/../.."},
        {"id": "9/cpr-llm"},
        {"id": "0/cpr-llm", "round": "<script>alert(1)</script>"},
        {"id": "0/cpr-llm", "agent": "-5", "society": "99"},
        {"id": "0/cpr-llm", "sort": "<b>"},
        {"id": "0/cpr-llm", "round": "9" * 30},
        {"id": "0/cpr-llm", "round": "1e309"},
    ],
)
def test_hostile_queries_get_a_page_or_a_404_never_a_500(site, query):
    r = httpx.get(page(site, "run", **query))
    assert r.status_code in (200, 404) and "Traceback" not in r.text and "<script>alert" not in r.text
    if r.status_code == 404:
        assert "no run with id" in r.text


@pytest.mark.parametrize("path", ["/static/../app.py", "/static/%2e%2e/app.py", "/static/..%2fpages.py", "/static/"])
def test_static_files_are_only_the_pages_own(site, path):
    port = site.rstrip("/").rsplit(":", 1)[1]
    code, _, body = raw_http(
        site, f"GET {path} HTTP/1.1\r\nHost: localhost:{port}\r\nConnection: close\r\n\r\n".encode()
    )
    assert code == 404 and b"import" not in body


def test_a_damaged_run_shows_what_is_there_and_notes_the_rest(site, tmp_path):
    html_text = dom(tmp_path, run_page(site, "broken"))
    assert "summary.json is damaged" in html_text and "table rounds could not be read" in html_text
    assert "no checkpoints.sqlite" in html_text and '<section id="norms">' in html_text  # the decisions are still there


# --- the task hook ---------------------------------------------------------------------------------
class Ultimatum(Task):
    name = "ultimatum-test"

    def explore(self, run, query):
        if query.get("boom"):
            raise RuntimeError("the view broke")
        return [
            ex.Section(
                "Offers",
                [
                    ex.Text(f"offer of {run.summary.get('offer')}"),
                    ex.Plot([1, 2, 3], {"offer": [1, 2, 3]}, title="offers", key="offers"),
                ],
            )
        ]

    def key_numbers(self, summary):
        return {"offer": summary.get("offer")}


def test_a_science_runs_key_numbers_lead_with_accuracy_and_cost(tmp_path):
    from cooplab.evals.explorer.runs import RunDir
    from cooplab.evals.explorer.views import key_numbers

    run = tmp_path / "sci"
    run.mkdir()
    summary = json.loads(
        (Path(__file__).parents[1] / "runner" / "data" / "summaries" / "science-oracle.json").read_text()
    )
    summary["science_task"], summary["scores"] = "ecology", {"completeness": 1.0, "quality": 0.5, "accuracy": 0.75}
    summary["ledger"]["cost_usd_float"] = 0.0123
    (run / "summary.json").write_text(json.dumps(summary))
    from cooplab.runs.registry import get

    got = key_numbers(RunDir(id="0/sci", out=run, root=tmp_path), get("science"))  # the task's own hook
    assert list(got) == ["science task", "accuracy", "completeness", "quality", "cost (USD)"]
    assert got["accuracy"] == 0.75 and got["cost (USD)"] == "0.0123"


def test_a_third_party_task_shows_its_own_sections_through_the_hook(tmp_path):
    run = tmp_path / "runs" / "u1"
    run.mkdir(parents=True)
    (run / "config.json").write_text(
        json.dumps({"version": 2, "task": "ultimatum-test", "agents": "rule", "seed": 0, "params": {}})
    )
    write_summary(run, "ultimatum-test", offer=4)
    (tmp_path / "runs" / "u2").mkdir()  # a run still going: config.json only
    (tmp_path / "runs" / "u2" / "config.json").write_text(
        json.dumps({"version": 2, "task": "ultimatum-test", "agents": "llm", "llm": {"model": "openai:m"}})
    )
    server, url = serve([tmp_path / "runs"], task_for=lambda name: Ultimatum() if name == "ultimatum-test" else None)
    try:
        listing = httpx.get(url).text
        assert "<b>offer</b> 4" in listing
        assert (
            "running or unfinished" in listing
            and "no summary.json (the run has not finished" in listing
            and "openai:m" in listing
        )
        own = httpx.get(url + "run?" + urlencode({"id": "0/u1"})).text
        assert '<section id="offers"><h2>Offers</h2>' in own and "offer of 4" in own
        broken = httpx.get(url + "run?" + urlencode({"id": "0/u1", "boom": "1"})).text
        assert (
            "the task&#39;s explore() failed: RuntimeError: the view broke" in broken
            and '<section id="config">' in broken
        )
    finally:
        stop(server)


# --- the command line ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args",
    [
        ["/nonexistent/runs"],
        ["{file}"],
        ["{empty}"],
        ["{runs}", "--port", "70000"],
        ["{runs}", "--host", "example.com"],
    ],
)
def test_cooplab_view_refuses_bad_input_in_one_line(capsys, runs, tmp_path, args):
    (tmp_path / "f.txt").write_text("x")
    (tmp_path / "empty").mkdir()
    argv = ["view", *[a.format(file=tmp_path / "f.txt", empty=tmp_path / "empty", runs=runs) for a in args]]
    line = fail_line(capsys, argv)
    assert any(w in line for w in ("does not exist", "not a directory", "no run directories", "--port", "--host"))


def test_cooplab_view_prints_its_url_and_serves(capsys, runs):
    assert main(["view", str(runs), "--json", "--no-block"]) == 0
    out = json.loads(capsys.readouterr().out)
    try:
        assert out["url"].startswith("http://127.0.0.1:") and out["runs"] == 8 and out["dirs"] == [str(runs)]
        assert "cpr-llm" in httpx.get(out["url"]).text
    finally:
        stop_started()


def test_ctrl_c_stops_the_served_explorer_in_one_line(capsys, runs, monkeypatch):
    """Ctrl-C while ``cooplab view`` (or ``traces view``) serves: one line saying it stopped, the
    server's thread ended, nothing raised (it called a ``stop`` that the explorer package lacks: an
    AttributeError traceback after the line)."""
    from types import SimpleNamespace

    from cooplab.cli import view

    server, url = serve([runs], task_for=task_for)

    def ctrl_c(seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(view, "time", SimpleNamespace(sleep=ctrl_c))  # the wait loop's sleep, only there
    view.serve_until_stopped(server, "cooplab view")
    assert capsys.readouterr().err.strip() == "cooplab view stopped"
    assert not server._cooplab_thread.is_alive()
    with pytest.raises(httpx.TransportError):
        httpx.get(url, timeout=5)


# --- hostile values in a run's files ---------------------------------------------------------------
def test_non_finite_huge_and_wrong_typed_values_are_shown_never_a_crash(tmp_path):
    run = tmp_path / "runs" / "odd"
    run.mkdir(parents=True)
    (run / "config.json").write_text(
        '{"version": 2, "task": "cpr", "agents": "llm", "llm": "not an object", "params": [1, 2]}'
    )
    write_summary(
        run,
        status=["x"],
        survival_time={"mean": float("inf"), "sem": float("nan")},
        efficiency={"mean": 1e308, "sem": -1},
        ledger={"cost_usd_float": -1},
        collapse="none",
    )
    pd.DataFrame(
        {
            "condition": [0, 0, 0],
            "replicate": [0, 0, 0],
            "round": [1, 2, 3],
            "R": [float("inf"), float("nan"), -1e300],
            "R_plus": [1.0, 2.0, 3.0],
            "H": ["a", None, 2.5],
        }
    ).to_csv(run / "rounds.csv", index=False)
    (run / "decisions.csv").write_text(
        'society,agent,round,phase,parsed,raw\n0,0,1,punish,"{""punish"": 1e999}",x\n'
        "0,1,1,propose,[1],y\nx,y,z,punish,{},z\n"
    )
    call = {
        "id": "c1",
        "run_type": "llm",
        "name": "m",
        "inputs": {"messages": [[{"kwargs": {"type": "human", "content": "Round 1. <b>hi</b>"}}]]},
        "outputs": {"generations": [[{"text": '{"punish": 1}'}]]},
        "extra": {"metadata": {"agent_id": 0, "round": "1", "phase": "punish"}},
    }
    named = {
        **call,
        "id": "c2",
        "extra": {"metadata": {"agent_id": "eve", "agent_name": "Eve \"the' <i>bad</i>", "round": 1, "phase": "x"}},
    }
    (run / "traces.jsonl").write_text(
        '{"run_type": "llm", "inputs\n[1, 2]\n'
        + "[" * 5000
        + '"llm"'
        + "]" * 5000
        + "\n"
        + json.dumps(call)
        + "\n"
        + json.dumps(named)
        + "\n"
    )
    server, url = serve([tmp_path / "runs"], task_for=task_for)
    try:
        calls = httpx.get(url + "traces?" + urlencode({"id": "0/odd", "round": "1"})).text
        assert (
            calls.count('<article class="call">') == 2
            and "3 damaged lines of traces.jsonl (not a readable JSON object) were skipped: lines 1, 2, 3" in calls
        )
        assert "Eve &#34;the&#39; &lt;i&gt;bad&lt;/i&gt; \u00b7 x \u00b7 round 1" in calls and "<i>" not in calls
        assert "Round 1. &lt;b&gt;hi&lt;/b&gt;" in calls and "Fisher 1 \u00b7 punish \u00b7 round 1" in calls
        listing = httpx.get(url)
        # the damaged summary.json is one line naming its first bad field; none of its values is shown as a result
        assert (
            listing.status_code == 200
            and "summary.json: status: Input should be" in listing.text
            and "odd" in listing.text
        )
        for q in ({}, {"round": "1"}, {"agent": "0"}, {"society": "0", "round": "2"}):
            r = httpx.get(url + "run?" + urlencode({"id": "0/odd", **q}))
            assert r.status_code == 200 and "Traceback" not in r.text and "view failed" not in r.text, (
                q,
                r.text[-2000:],
            )
            assert (
                '<section id="lake">' in r.text
                and "decisions without a whole society, agent or round are left out" in r.text
            )
        cmp = httpx.get(url + "compare?" + urlencode({"a": "0/odd", "b": "0/odd"}))
        assert cmp.status_code == 200
    finally:
        stop(server)


# --- who and when of a call in traces written before calls were labelled --------------------------
@pytest.mark.parametrize(
    "system, human, agent, name, rnd",
    [
        (
            "You are one of 4 fishers ... Your name is Fisher 3.",
            "Round 4.\n\nThe lake now holds 900 tonnes.",
            2,
            "Fisher 3",
            4,
        ),
        (
            "You are Player 2 in Group 1.\n\nGAME RULES: ...",
            "=== Round 2 of 3 ===\n\nPREVIOUS ROUNDS: ...",
            1,
            "Player 2",
            2,
        ),
        (
            "You are Alex. You like food.\nYou are member 5 of a group of 4 friends who dine out.",
            "Iteration 3, at the pub. ...",
            4,
            None,
            3,
        ),
    ],
)
def test_unlabelled_calls_are_read_from_their_prompts(system, human, agent, name, rnd):
    from cooplab.evals.explorer.traces import facts

    msgs = [
        {"kwargs": {"type": "system", "content": system}},
        {"kwargs": {"type": "human", "content": human}},
        {"kwargs": {"type": "human", "content": "Round 99 was not valid JSON; answer again."}},
    ]
    f = facts({"run_type": "llm", "inputs": {"messages": [msgs]}, "extra": {"metadata": {"langgraph_node": "act"}}})
    assert (f["agent"], f["agent_name"], f["round"], f["phase"]) == (agent, name, rnd, "act")
    labelled = facts(
        {
            "run_type": "llm",
            "inputs": {"messages": [msgs]},
            "extra": {
                "metadata": {"agent_id": 7, "agent_name": "Fisher 8", "round": 11, "phase": "vote", "society": 2}
            },
        }
    )
    assert (labelled["agent"], labelled["agent_name"], labelled["round"], labelled["phase"], labelled["society"]) == (
        7,
        "Fisher 8",
        11,
        "vote",
        2,
    )  # a trace written when agent_id was the agent's number
    now = facts(
        {
            "run_type": "llm",
            "inputs": {"messages": [msgs]},
            "extra": {"metadata": {"agent_id": "2:7", "agent": 7, "round": 11, "phase": "vote", "society": 2}},
        }
    )
    assert (now["agent"], now["society"], now["round"]) == (7, 2, 11)  # agent_id is the tables' text key


def test_a_punisher_or_target_that_is_no_agent_id_is_listed_but_left_out_of_the_matrix():
    """A pair whose punisher (or target) is not an agent number (missing in a damaged table) stays
    in the list; the who-fined-whom matrix has rows and columns for agent numbers only."""
    from cooplab.evals.explorer.views.common import Spec, fines

    spec = Spec(noun="Fisher", society=("society",), round="round", agent="agent")
    listed, matrix = fines(
        [
            {"round": 1, "punisher": 0, "target": 2},
            {"round": 2, "punisher": None, "target": 1},
            {"round": 2, "punisher": "x", "target": 0},
        ],
        spec,
    )
    assert isinstance(listed, ex.Table) and isinstance(matrix, ex.Table)
    assert len(listed.rows) == 3
    assert [r["who \u2193 / fined \u2192"] for r in matrix.rows] == ["Fisher 1", "Fisher 2", "Fisher 3"]
    assert matrix.rows[0]["Fisher 3"] == 1 and matrix.rows[1]["Fisher 1"] == ""
