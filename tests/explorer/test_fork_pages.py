"""Forks on the explorer (issue 40 point 4, evals/explorer/forks.py): a run's page links its parent
and its forks (found by run id among the runs served, never by a path a record names), and the
compare page shows two runs round by round: the curves of both with the shared rounds and the first
differing round marked, and B - A of every outcome with its interval. A real server on loopback;
the pages are loaded in headless Chromium (their DOM after plots.js drew them) or over HTTP.

One scripted LLM CPR parent (3 fishers, 4 rounds, 2 societies), a fork of it at round 2 with a
faster regrowth, and a rule-based diners run (another task)."""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path
from urllib.parse import urlencode

import httpx
import pandas as pd
import pytest

import cooplab
from cooplab.cli.view import task_for
from cooplab.evals.explorer.app import serve, stop
from tests.explorer.test_explorer import assert_inert, dom, tables

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "scripted" / "cautious.json"
#: markup a forged fork record might carry: it must reach the page as text
HOSTILE = "<img src=x onerror=\"document.body.setAttribute('data-pwned','fork')\">"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("forkpages") / "runs"
    cache = root.parent / "cache.sqlite"
    cooplab.run(
        task="cpr",
        agents="llm",
        model=f"scripted:{SCRIPT}",
        n_agents=3,
        rounds=4,
        replicates=2,
        seed=9,
        cache=str(cache),
        out=root / "base",
        quiet=True,
    )
    cooplab.fork(root / "base", at_round=2, out=root / "rich", set=["r=0.6"], quiet=True)
    cooplab.run(task="diners", replicates=2, iterations=4, seed=1, out=root / "diners", quiet=True)
    # a copy of the fork whose record names a path outside the folders and carries markup: the
    # parent is still found by its run id; the path opens nothing
    forged = root / "forged"
    shutil.copytree(root / "rich", forged, ignore=shutil.ignore_patterns("checkpoints.sqlite*", ".cooplab.lock"))
    cfg = json.loads((forged / "config.json").read_text())
    cfg["record"]["thread_id"] = "forged-run"
    cfg["record"]["fork"].update(parent="/etc", changes={"set": {"note": HOSTILE}})
    (forged / "config.json").write_text(json.dumps(cfg))
    # an orphan: its parent's run id is not under the folders
    orphan = root / "orphan"
    shutil.copytree(root / "rich", orphan, ignore=shutil.ignore_patterns("checkpoints.sqlite*", ".cooplab.lock"))
    cfg = json.loads((orphan / "config.json").read_text())
    cfg["record"]["thread_id"] = "orphan-run"
    cfg["record"]["fork"].update(
        parent="../../etc", parent_thread_id="no-such-run", lineage=[{"thread_id": "no-such-run", "rounds": 2}]
    )
    (orphan / "config.json").write_text(json.dumps(cfg))
    # two copies of the parent whose per-round tables name round 10**12 (a hand-edited table): the
    # first differing round is looked for among the rounds there are, never every number up to it
    for name in ("huge-a", "huge-b"):
        d = root / name
        shutil.copytree(
            root / "base", d, ignore=shutil.ignore_patterns("checkpoints.sqlite*", ".cooplab.lock", "traces.jsonl")
        )
        cfg = json.loads((d / "config.json").read_text())
        cfg["record"]["thread_id"] = name
        (d / "config.json").write_text(json.dumps(cfg))
        df = pd.read_parquet(d / "rounds.parquet")
        df.loc[df.index[-1], "round"] = 10**12
        df.to_parquet(d / "rounds.parquet", index=False)
    # a fork whose record lost its round (a damaged config.json; its traces lost it too)
    noround = root / "noround"
    shutil.copytree(root / "rich", noround, ignore=shutil.ignore_patterns("checkpoints.sqlite*", ".cooplab.lock"))
    cfg = json.loads((noround / "config.json").read_text())
    cfg["record"]["thread_id"] = "noround-run"
    del cfg["record"]["fork"]["at_round"]
    (noround / "config.json").write_text(json.dumps(cfg))
    lines = (noround / "traces.jsonl").read_text().splitlines()
    (noround / "traces.jsonl").write_text(
        "\n".join(re.sub(r'"fork_at_round": ?2', '"fork_at_round": null', x) for x in lines)
    )
    server, url = serve([root], task_for=task_for)
    yield url, root
    stop(server)


def page(url: str, path: str, **query) -> str:
    return url + path + "?" + urlencode(query)


def hrefs(text: str) -> list[str]:
    return [html.unescape(h) for h in re.findall(r'href="([^"]+)"', text)]


def test_the_compare_page_of_a_fork_and_its_parent_shows_curves_marks_and_the_differences(served, tmp_path):
    url, root = served
    # from the fork's page, one click: the link to compare it with its parent
    fork_page = httpx.get(page(url, "run", id="0/rich")).text
    link = next(h for h in hrefs(fork_page) if h.startswith("/compare?"))
    assert link == "/compare?" + urlencode({"a": "0/base", "b": "0/rich"}) and "/run?id=0%2Fbase" in fork_page
    assert "set r=0.6" in fork_page and "at the end of round 2" in fork_page
    # the parent's page lists the fork, with a link to compare them
    parent_page = httpx.get(page(url, "run", id="0/base")).text
    forks = tables(parent_page)["Forks of this run"]
    assert forks[0] == ["fork", "forked at the end of round", "changes", "status", "compare"]
    assert [r[0] for r in forks[1:]] == [
        "forged",
        "noround",
        "rich",
    ]  # by run id: the forged and damaged copies name it too; the orphan does not
    assert forks[3][:4] == ["rich", "2", "set r=0.6", "completed"]
    assert forks[2][1] == "—"  # the damaged record's round: a dash, never "None"

    html_text = dom(tmp_path, url + link.lstrip("/"))
    assert_inert(html_text)
    rounds = html_text[html_text.index('<section id="rounds">') :]
    rounds = rounds[: rounds.index("</section>")]
    assert "B is a fork of A at the end of round 2 (set r=0.6)" in rounds
    assert "1..2 (B" in rounds and "<dt>first round that differs</dt><dd>3</dd>" in rounds
    expected = cooplab.compare(root / "base", root / "rich")
    assert (expected.common_round, expected.first_difference) == (2, 3)
    # one plot per curve column, both runs drawn (B dashed), the shared rounds shaded and the first difference marked
    figures = re.findall(r'<figure class="plot"[^>]*data-drawn="1".*?</figure>', rounds, re.S)
    assert len(figures) == len(expected.columns) == 4
    for fig, col in zip(figures, expected.columns, strict=False):
        assert f"{col} per round, A and B" in fig
        assert fig.count('class="mark mark-band"') == 1 and fig.count('class="mark mark-line"') == 1
        assert "rounds 1..2 shared (fork at the end of round 2)" in fig and "first difference: round 3" in fig
        assert 'stroke-dasharray="6 4"' in fig and fig.count('class="line"') == 2
        caption = re.search(r"<figcaption>(.*?)</figcaption>", fig, re.S).group(1)
        assert (
            "run A solid, run B dashed" in caption
            and "grey band covers rounds 1..2" in caption
            and "red dotted line marks round 3" in caption
        )
    # the B - A table: every outcome of cooplab.compare, the interval paired
    t = tables(rounds)["Every outcome: B \u2212 A"]
    assert t[0] == ["outcome", "A", "B", "B \u2212 A", "95% interval of B \u2212 A", "interval", "societies (A / B)"]
    by = {r[0]: r for r in t[1:]}
    assert set(by) == {o["outcome"] for o in expected.outcomes} and "version" not in by
    eff = next(o for o in expected.outcomes if o["outcome"] == "efficiency")
    row = by["efficiency"]
    assert (
        float(row[3]) == pytest.approx(eff["difference"], rel=1e-3) and row[5] == "paired t, 95%" and row[6] == "2 / 2"
    )
    lo, hi = (float(x) for x in row[4].strip("[]").split(","))
    assert (lo, hi) == (pytest.approx(eff["low"], rel=1e-3), pytest.approx(eff["high"], rel=1e-3))
    assert "paired t interval of the per-society differences" in rounds


def test_hostile_compare_parameters_get_one_clear_message(served):
    url, _ = served
    cases = [
        ({"a": "0/nope", "b": "0/rich"}, 404, "no run with id a = '0/nope' under the folders given"),
        ({"a": "0/../../etc", "b": "0/rich"}, 404, "no run with id a = '0/../../etc'"),
        ({"a": "0/base", "b": "/etc/passwd"}, 404, "no run with id b = '/etc/passwd'"),
        ({"a": "0/base", "b": "0/base/../rich"}, 404, "no run with id b = '0/base/../rich'"),
        ({"a": "0/base"}, 404, "no run with id b = ''"),
        (
            {"a": "0/base", "b": "0/diners"},
            400,
            "base is a 'cpr' run and diners a 'diners' run; compare two runs of one task",
        ),
    ]
    for query, code, message in cases:
        r = httpx.get(url + "compare?" + urlencode(query))
        assert r.status_code == code, query
        body = html.unescape(r.text.split("<main>", 1)[1])
        assert message in body, (query, body[:400])
        assert body.count('class="note') <= 1 and "root:" not in body and "Traceback" not in body


def test_a_round_numbered_10_to_the_12_is_compared_at_once(served):
    url, _ = served
    r = httpx.get(
        page(url, "compare", a="0/huge-a", b="0/huge-b"), timeout=120
    )  # before: a loop over 10**12 rounds, no answer
    assert r.status_code == 200
    assert (
        "<dt>first round that differs</dt><dd>none: the per-round tables agree on every round both reach</dd>" in r.text
    )


def test_a_forged_fork_record_is_read_as_text_and_its_path_opens_nothing(served, tmp_path):
    url, root = served
    forged = dom(tmp_path, page(url, "run", id="0/forged"))
    assert_inert(forged)
    sec = forged[forged.index('<section id="forks">') :]
    sec = sec[: sec.index("</section>")]
    assert (
        html.escape(HOSTILE, quote=False) in sec and "/etc" not in sec
    )  # its parent by run id: the base run, not /etc
    assert "/compare?a=0%2Fbase&amp;b=0%2Fforged" in sec
    orphan = httpx.get(page(url, "run", id="0/orphan")).text
    sec = orphan[orphan.index('<section id="forks">') :]
    assert (
        "of the run with id &#39;no-such-run&#39;, which is not under the folders given" in sec.split("</section>")[0]
    )
    assert "/compare?" not in sec.split("</section>")[0] and "etc" not in sec.split("</section>")[0]
    # the compare page of the orphan and the base: no lineage in common, so no band, an unpaired interval
    text = httpx.get(page(url, "compare", a="0/base", b="0/orphan")).text
    assert "share no round by their fork records" in text and "Welch" in text


def test_the_traces_page_of_a_fork_names_its_parent_and_the_part_traced_as_a_fork(served):
    url, root = served
    text = httpx.get(page(url, "traces", id="0/rich")).text
    note = re.search(r'<p class="note info fork">(.*?)</p>', text, re.S).group(1)
    assert 'A fork of <a href="/run?id=0%2Fbase">base</a> at the end of round 2' in note
    assert '<a href="/traces?id=0%2Fbase">' in note and "/compare?a=0%2Fbase&amp;b=0%2Frich" in note
    parent_id = json.loads((root / "base" / "config.json").read_text())["record"]["thread_id"]
    assert f"1. a fork&#39;s start, from its parent&#39;s checkpoint (of run {parent_id}, round 2)" in text
    assert 'class="note info fork"' not in httpx.get(page(url, "traces", id="0/base")).text


def test_a_fork_whose_record_lost_its_round_says_so_and_never_round_none(served):
    url, root = served
    assert '"fork_at_round": null' in (root / "noround" / "traces.jsonl").read_text()
    traces = httpx.get(page(url, "traces", id="0/noround")).text
    note = re.search(r'<p class="note info fork">(.*?)</p>', traces, re.S).group(1)
    assert "at a round its record does not say" in note and "its first rounds are the parent" in note
    assert "round not recorded)" in traces
    run = httpx.get(page(url, "run", id="0/noround")).text
    sec = run[run.index('<section id="forks">') :].split("</section>")[0]
    assert "at a round its record does not say" in sec and "not recorded" in sec
    for text in (traces, run):
        assert "None" not in re.sub(r"<[^>]+>", "", text)
