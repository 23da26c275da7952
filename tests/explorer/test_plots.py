"""The explorer as a person uses it, in headless Chromium driven over the DevTools protocol (issue
38, point 6): plots drawn by the page's own script under its Content-Security-Policy answer the
mouse (hover shows the values, a drag zooms, the legend hides a line), a mean is never drawn in an
agent's colour, every society of a 100-society run is one pick away in a drop-down, and a sweep's
cells are grouped by condition with one aggregate plot whose interval is the one computed here."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from urllib.parse import urlencode

import httpx
import pandas as pd
import pytest

import cooplab
from cooplab.evals.explorer.app import CSP, serve, stop
from cooplab.evals.typed import as_frame
from cooplab.evals.values import fmt
from cooplab.runs.registry import find  # the explorer's task lookup, as the command line passes it
from tests.helpers.chromium import DevTools

SOCIETIES = 100


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("plots") / "runs"
    cooplab.run(
        task="cpr", agents="rule", rounds=5, n_agents=4, replicates=SOCIETIES, seed=3, out=root / "many", quiet=True
    )
    cooplab.sweep(
        "cpr", out=root / "sweep", grid={"rounds": [3, 5]}, seeds=[0, 1, 2], analysis=False, n_agents=3, replicates=2
    )
    return root


@pytest.fixture(scope="module")
def site(runs):
    server, url = serve([runs], task_for=find)
    yield url
    stop(server)


@pytest.fixture()
def browser(tmp_path):
    with DevTools(tmp_path) as b:
        yield b


def url_of(site: str, page: str, **q) -> str:
    return site + page + "?" + urlencode(q)


def box(b: DevTools, selector: str) -> list[float]:
    """The page coordinates of an element, scrolled into view."""
    return b.eval(
        f"(function(){{var e=document.querySelector({json.dumps(selector)});e.scrollIntoView({{block:'center'}});"
        "var r=e.getBoundingClientRect();return [r.left,r.top,r.width,r.height]})()"
    )


def test_hover_zoom_and_legend_answer_the_mouse_under_the_csp(site, runs, browser):
    b = browser
    b.open(url_of(site, "run", id="0/many", society="7"))
    drawn = b.eval(
        "Array.from(document.querySelectorAll('figure.plot')).map(f => [f.getAttribute('data-drawn'), "
        "!!f.querySelector('svg')])"
    )
    assert len(drawn) >= 3 and all(d == ["1", True] for d in drawn)
    assert not [m for m in b.console() if "Content Security Policy" in m or "Refused" in m]
    # hover over the lake: the tooltip names the round and the values of that round's row in the rounds table
    lake = "figure.plot[data-plot*='stock at the start'] .overlay"
    x, y, w, h = box(b, lake)
    b.mouse("mouseMoved", x + w * 0.5, y + h * 0.5)
    tip = b.eval("document.querySelector(\"figure.plot[data-plot*='stock at the start'] .tip\").textContent")
    said = re.match(r"round (\d+)", tip)
    assert said, tip
    shown_round = int(said.group(1))
    rounds = pd.read_parquet(runs / "many" / "rounds.parquet")
    row = rounds[(rounds.replicate == 7) & (rounds["round"] == shown_round)].iloc[
        0
    ]  # one condition: society k is replicate k
    assert f"stock at the start: {fmt(float(row.R))}" in tip and f"catch: {fmt(float(row.H))}" in tip
    # drag across the left half: the x axis now spans about that half
    b.mouse("mousePressed", x + 2, y + h / 2, "left", 1)
    b.mouse("mouseMoved", x + w * 0.5, y + h / 2, "left")
    b.mouse("mouseReleased", x + w * 0.5, y + h / 2, "left", 1)
    zoom = b.eval("document.querySelector(\"figure.plot[data-plot*='stock at the start']\").getAttribute('data-zoom')")
    lo, hi = (float(v) for v in zoom.split(" to "))
    assert 0.8 <= lo < 1.2 and 2.6 < hi < 3.4, zoom  # rounds 1..5 padded: half the plot is about rounds 1 to 3
    rx, ry, rw, rh = box(b, "figure.plot[data-plot*='stock at the start'] button.reset")
    b.mouse("mousePressed", rx + rw / 2, ry + rh / 2, "left", 1)
    b.mouse("mouseReleased", rx + rw / 2, ry + rh / 2, "left", 1)
    assert (
        b.eval("document.querySelector(\"figure.plot[data-plot*='stock at the start']\").getAttribute('data-zoom')")
        == ""
    )
    # the legend hides a line and shows it again
    harvest = "figure.plot[data-plot*='harvest by round']"
    lines = f'document.querySelectorAll("{harvest} path.line").length'
    before = b.eval(lines)
    kx, ky, kw, kh = box(b, f"{harvest} ul.legend button.key")
    b.mouse("mousePressed", kx + kw / 2, ky + kh / 2, "left", 1)
    b.mouse("mouseReleased", kx + kw / 2, ky + kh / 2, "left", 1)
    assert b.eval(lines) == before - 1


def test_a_mean_is_never_drawn_in_an_agents_colour(site, browser):
    b = browser
    b.open(url_of(site, "run", id="0/many"))
    plots = b.eval(
        "Array.from(document.querySelectorAll('figure.plot')).map(f => Array.from(f.querySelectorAll('path.line'))"
        ".map(p => [p.getAttribute('stroke'), p.getAttribute('stroke-width')]))"
    )
    per_agent = [p for p in plots if len(p) == 5]  # four fishers and their mean
    assert len(per_agent) >= 2
    for lines in per_agent:
        mean = [c for c, wdt in lines if float(wdt) > 2]
        agents = [c for c, wdt in lines if float(wdt) <= 2]
        assert len(mean) == 1 and len(agents) == 4 and mean[0] not in agents and len(set(agents)) == 4


def test_every_society_of_a_100_society_run_is_one_pick_away(site, runs, browser):
    b = browser
    b.open(url_of(site, "run", id="0/many"))
    options = b.eval(
        "Array.from(document.querySelectorAll('form.choice select[name=society] option')).map(o => o.value)"
    )
    assert options == [str(i) for i in range(SOCIETIES)]
    text = b.eval("document.body.textContent")
    assert f"{SOCIETIES} societies in this run" in text and "societys" not in text
    # pick society 73 as a person does: the page opens it (the page's script submits the form)
    b.events.clear()
    b.eval(
        "(function(){var s=document.querySelector('form.choice select[name=society]');s.focus();s.value='73';"
        "s.dispatchEvent(new Event('change', {bubbles: true}));})()"
    )
    b.wait_event("Page.loadEventFired")
    assert "society=73" in b.eval("location.search") and "showing society 73" in b.eval("document.body.textContent")
    shown = b.eval(
        "Array.from(document.querySelectorAll('#lake table.data tbody tr')).map(r => r.cells[1].textContent)"
    )
    rounds = pd.read_parquet(runs / "many" / "rounds.parquet")
    assert shown == [fmt(float(v)) for v in as_frame(rounds[rounds.replicate == 73]).sort_values("round").R]
    # and the next one is a link away
    nx, ny, nw, nh = box(b, "form.choice a.next")
    b.events.clear()
    b.mouse("mousePressed", nx + nw / 2, ny + nh / 2, "left", 1)
    b.mouse("mouseReleased", nx + nw / 2, ny + nh / 2, "left", 1)
    b.wait_event("Page.loadEventFired")
    assert "showing society 74" in b.eval("document.body.textContent")


def t95(n: int) -> float:
    from scipy import stats

    return float(stats.t.ppf(0.975, n - 1))


def test_a_sweep_is_grouped_by_condition_with_one_aggregate_plot(site, runs, browser):
    listing = httpx.get(site).text
    assert 'href="/group?id=0%2Fsweep"' in listing
    b = browser
    b.open(url_of(site, "group", id="0/sweep", metric="efficiency.mean"))
    assert not [m for m in b.console() if "Content Security Policy" in m or "Refused" in m]
    data = json.loads(b.eval("document.querySelector('#conditions figure.plot').getAttribute('data-plot')"))
    assert b.eval("document.querySelector('#conditions figure.plot').getAttribute('data-drawn')") == "1"
    assert data["x"] == [3, 5] and data["series"][0]["label"] == "mean of efficiency.mean"
    caption = b.eval("document.querySelector('#conditions figure.plot figcaption').textContent")
    for words in ("mean of efficiency.mean over the seeds", "95% confidence interval", "each seed's own value"):
        assert words in caption
    for i, rounds in enumerate((3, 5)):
        values = [
            json.loads((runs / "sweep" / "cells" / f"rounds-{rounds}__s{s}" / "summary.json").read_text())[
                "efficiency"
            ]["mean"]
            for s in (0, 1, 2)
        ]
        m = sum(values) / 3
        half = t95(3) * math.sqrt(sum((v - m) ** 2 for v in values) / 2) / math.sqrt(3)
        assert data["series"][0]["y"][i] == pytest.approx(m, rel=1e-5)
        assert data["bands"][0]["lo"][i] == pytest.approx(m - half, rel=1e-3) and data["bands"][0]["hi"][
            i
        ] == pytest.approx(m + half, rel=1e-3)
        assert sorted(
            y for x, y in zip(data["scatter"][0]["x"], data["scatter"][0]["y"], strict=False) if x == rounds
        ) == pytest.approx(sorted(values), rel=1e-5)
    conditions = b.eval(
        "Array.from(document.querySelectorAll('#conditions table.data tbody tr')).map(r => [r.cells[0].textContent, "
        "r.cells[1].textContent])"
    )
    assert conditions == [["rounds=3", "3"], ["rounds=5", "3"]]
    cells = b.eval("Array.from(document.querySelectorAll('#cells a')).map(a => a.getAttribute('href'))")
    assert len(cells) == 6 and all(httpx.get(site + h.lstrip("/")).status_code == 200 for h in cells)
    # hover the aggregate: the mean and its interval
    x, y, w, h = box(b, "#conditions figure.plot .overlay")
    b.mouse("mouseMoved", x + w - 3, y + h / 2)
    tip = b.eval("document.querySelector('#conditions figure.plot .tip').textContent")
    assert (
        tip.startswith("rounds 5")
        and f"mean of efficiency.mean: {fmt(data['series'][0]['y'][1])}" in tip
        and " to " in tip
    )


def test_group_pages_carry_the_csp_and_refuse_unknown_ids(site):
    r = httpx.get(url_of(site, "group", id="0/sweep"))
    assert r.status_code == 200 and r.headers["content-security-policy"] == CSP and "<script>" not in r.text
    assert httpx.get(url_of(site, "group", id="../../etc")).status_code == 404
    assert httpx.get(url_of(site, "group", id="0/many")).status_code == 404  # a run, not a sweep
