"""``cooplab traces view DIR``: the run explorer's traces page for one run (evals/explorer), which
took the place of the separate trace viewer.

A scripted CPR society whose answers are longer than ``--max-tokens``: the ledger charges the cap,
the traces hold what the model reported. ``cooplab traces view`` is started as a user starts it (a
process of its own, blocking) and its page read over HTTP and in headless Chromium: the calls grouped
by round, each call's details (node, time, both token counts, its charge, its ids), the run's
totals; foreign, look-alike, wrong-port, missing and repeated ``Host`` headers get nothing.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import click
import httpx
import pytest
from click.testing import CliRunner

from cooplab.cli import main
from cooplab.evals.explorer.app import host_allowed, serve, stop
from cooplab.graphs.tracing import load_runs
from cooplab.runs.registry import find  # the explorer's task lookup, as the command line passes it
from tests.explorer.test_explorer import section
from tests.helpers.chromium import browse

REPO = Path(__file__).resolve().parents[2]
EXE = Path(sys.executable).with_name("cooplab")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("traces") / "run"
    assert main(
        [
            "run",
            "cpr",
            "--agents",
            "llm",
            "--model",
            f"scripted:{REPO / 'examples/scripted/cautious.json'}",
            "--n-agents",
            "3",
            "--rounds",
            "2",
            "--max-tokens",
            "4",
            "--out",
            str(out),
            "-q",
            "--cache",
            "off",
        ]
    ) in (0, None)
    return out


@pytest.fixture(scope="module")
def running(run_dir):
    """``cooplab traces view RUN_DIR`` as a user starts it: a separate process, blocking; its page's
    URL is read from its first line. Stopped (SIGTERM, by its pid) at the end."""
    if not EXE.is_file():
        pytest.fail(f"no cooplab console script next to {sys.executable}")
    proc = subprocess.Popen(
        [str(EXE), "traces", "view", str(run_dir)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stderr is not None  # both PIPE
    try:
        line = proc.stdout.readline()  # "model calls of DIR: http://127.0.0.1:PORT/traces?id=0  (Ctrl-C to stop)"
        m = re.search(r"(http://127\.0\.0\.1:\d+/traces\?id=0)", line)
        assert m, (line, proc.stderr.read() if proc.poll() is not None else "")
        yield m.group(1)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def llm_runs(run_dir: Path) -> list[dict]:
    return [r for r in load_runs(run_dir) if r["run_type"] == "llm"]


def test_the_page_groups_the_calls_by_round_with_each_calls_details(running, run_dir):
    html = httpx.get(running).text
    llm = llm_runs(run_dir)
    rounds = sorted({r["extra"]["metadata"]["round"] for r in llm})
    assert rounds == [1, 2] and html.count('<article class="call">') == len(llm)
    for rnd in rounds:
        part = section(html, f"round-{rnd}")
        mine = [r for r in llm if r["extra"]["metadata"]["round"] == rnd]
        assert part.count('<article class="call">') == len(mine) and f"<h2>round {rnd} <span" in part
        for r in mine:  # every call: who, phase and round, its node, both token counts, its ids
            md = r["extra"]["metadata"]
            assert f"{md['agent_name']} \u00b7 {md['phase']} \u00b7 round {rnd}" in part
            assert f"<dt>call id</dt><dd>{md['call_id']}</dd>" in part and f"<dt>run id</dt><dd>{r['id']}</dd>" in part
            reported = r["prompt_tokens"] + r["completion_tokens"]
            assert (
                f"<dt>tokens reported by the model</dt><dd>{reported:,} ({r['prompt_tokens']:,} in / "
                f"{r['completion_tokens']:,} out)</dd>" in part
            )


def test_the_header_says_what_the_model_reported_and_what_the_ledger_charged(running, run_dir):
    """Answers longer than --max-tokens: the ledger charges the cap, the traces hold the reported
    usage; the page shows both, each named, and each call's charge, which sum to the ledger's."""
    ledger = json.loads((run_dir / "summary.json").read_text())["ledger"]
    llm = llm_runs(run_dir)
    reported_in, reported_out = sum(r["prompt_tokens"] for r in llm), sum(r["completion_tokens"] for r in llm)
    assert reported_out > ledger["output_tokens"] and ledger["calls"] == len(llm)  # the answers are longer than the cap
    html = httpx.get(running).text
    assert (
        f"<dt>tokens reported by the model</dt><dd>{reported_in + reported_out:,} ({reported_in:,} in / "
        f"{reported_out:,} out)</dd>" in html
    )
    cost = float(ledger["cost_usd"])
    assert (
        f"<dt>charged tokens (ledger, the whole run)</dt><dd>{ledger['input_tokens'] + ledger['output_tokens']:,} "
        f"({ledger['input_tokens']:,} in / {ledger['output_tokens']:,} out), {ledger['calls']:,} calls, "
        f"${cost:.6g}</dd>"
    ) in html
    charged = re.findall(
        r"<dt>charged \(ledger\)</dt><dd>[\d,]+ \(([\d,]+) in / ([\d,]+) out\), \$([0-9.e-]+)</dd>", html
    )
    assert len(charged) == len(llm)
    assert sum(int(i.replace(",", "")) for i, _, _ in charged) == ledger["input_tokens"]
    assert sum(int(o.replace(",", "")) for _, o, _ in charged) == ledger["output_tokens"]
    assert sum(float(c) for _, _, c in charged) == pytest.approx(ledger["cost_usd_float"], rel=1e-4)


def secrets_of(run_dir: Path) -> list[bytes]:
    """Strings only the run holds: a prompt's words and every call's run id."""
    return [b"Your name is Fisher", *(r["id"].encode() for r in llm_runs(run_dir))]


def raw_http(url: str, request: bytes) -> tuple[int, bytes]:
    """Send ``request`` as it is over a new TCP connection to the server of ``url``; the status and body."""
    host, port = url.split("//")[1].split("/")[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(request)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


@pytest.mark.parametrize(
    "host",
    [
        "evil.example:{port}",
        "localhost.evil.com:{port}",
        "127.0.0.1.nip.io:{port}",
        "localhost.:{port}",
        "127.0.0.2:{port}",
        "0.0.0.0:{port}",
        "localhost:{other}",
        "[::1]:{other}",
        "localhost",
        "localhost:{port}@evil.example",
        "",
    ],
)
def test_a_foreign_host_gets_nothing(running, run_dir, host):
    """A page that points its own name at 127.0.0.1 (DNS rebinding) sends that name as Host."""
    port = int(running.split("//")[1].split("/")[0].rsplit(":", 1)[1])
    host = host.format(port=port, other=port + 1 if port < 65535 else port - 1)
    for method in ("GET", "HEAD"):
        code, body = raw_http(
            running, f"{method} /traces?id=0 HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()
        )
        assert code in (400, 421), (host, code)
        assert not any(s in body for s in secrets_of(run_dir)), host


@pytest.mark.parametrize(
    "request_head",
    [
        b"GET /traces?id=0 HTTP/1.0\r\n\r\n",  # HTTP/1.0 without a Host
        # two Hosts
        b"GET /traces?id=0 HTTP/1.1\r\nHost: localhost:{port}\r\nHost: evil.example\r\nConnection: close\r\n\r\n",
    ],
)
def test_no_host_or_two_hosts_get_nothing(running, run_dir, request_head):
    port = running.split("//")[1].split("/")[0].rsplit(":", 1)[1]
    code, body = raw_http(running, request_head.replace(b"{port}", port.encode()))
    assert code == 400 and not any(s in body for s in secrets_of(run_dir))


def test_a_rebound_name_in_a_real_browser_shows_no_call(running, tmp_path):
    """Chromium told that rebind.test is 127.0.0.1 (as a DNS-rebinding attacker arranges) loads the
    page under that name: no call reaches it; under localhost the same page shows them."""
    port = running.split("//")[1].split("/")[0].rsplit(":", 1)[1]
    foreign = browse(
        tmp_path,
        f"http://rebind.test:{port}/traces?id=0",
        "--host-resolver-rules=MAP rebind.test 127.0.0.1",
        "--dump-dom",
    ).stdout
    assert "this explorer answers only requests for localhost" in foreign and "Fisher" not in foreign
    own = browse(tmp_path, f"http://localhost:{port}/traces?id=0", "--dump-dom").stdout
    assert '<article class="call">' in own and "Fisher 1 \u00b7 harvest \u00b7 round 1" in own


def test_host_allowed_by_hand():
    ok = host_allowed
    assert (
        ok("localhost:8080", ("127.0.0.1", 8080))
        and ok("[::1]:8080", ("::1", 8080, 0, 0))
        and ok("LocalHost:8080", ("127.0.0.1", 8080))
    )
    assert ok("192.168.1.5:8080", ("192.168.1.5", 8080))  # the literal address it is bound to
    assert not ok("0.0.0.0:8080", ("0.0.0.0", 8080)) and not ok("[::]:8080", ("::", 8080, 0, 0))
    assert ok("localhost", ("127.0.0.1", 80)) and not ok("localhost", ("127.0.0.1", 8080))
    assert not ok(None, ("127.0.0.1", 8080)) and not ok("localhost:08080", ("127.0.0.1", 8080))


def _deep_line(levels: int = 40_000) -> str:
    return '{"id": "deep", "run_type": "llm", "inputs": ' + "[" * levels + "]" * levels + "}\n"


def test_lines_it_cannot_read_are_skipped_and_named_never_a_500(run_dir, tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    good = (run_dir / "traces.jsonl").read_text().splitlines(keepends=True)
    lines = [*good[:3], _deep_line(), *good[3:], "{not json\n", "[1, 2]\n", _deep_line(500)]
    (d / "traces.jsonl").write_text("".join(lines))
    server, url = serve([d], task_for=find)
    try:
        r = httpx.get(url + "traces?id=0")
        assert r.status_code == 200 and r.text.count('<article class="call">') == len(llm_runs(run_dir))
        n = len(lines)
        assert (
            f"4 damaged lines of traces.jsonl (not a readable JSON object) were skipped: lines 4, {n - 2}, {n - 1}, {n}"
            in r.text
        )
        assert httpx.get(url + "run?id=0").status_code == 200
    finally:
        stop(server)


# ----------------------------------------------------------------------------------------
# the command line, through the real entry point cooplab.cli.main
@click.command(context_settings={"ignore_unknown_options": True, "help_option_names": []})
@click.argument("argv", nargs=-1, type=click.UNPROCESSED)
def _cooplab(argv):
    sys.exit(main(list(argv)))


def traces(args, **kwargs):
    return CliRunner().invoke(_cooplab, ["traces", *args], **kwargs)


def test_cli_help():
    for args in (["--help"], ["view", "--help"]):
        res = traces(args)
        assert res.exit_code == 0 and "Usage" in res.output


@pytest.mark.parametrize(
    "args", [["view", "/nonexistent/run"], ["view", "{tmp}"], ["view", "{run}", "--port", "70000"]]
)
def test_cli_user_errors(args, run_dir, tmp_path):
    res = traces([a.replace("{tmp}", str(tmp_path)).replace("{run}", str(run_dir)) for a in args])
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("cooplab: error: ")


def test_cli_view_no_block_serves_the_page_from_a_process_of_its_own(run_dir):
    from cooplab.cli.view import STARTED, stop_started

    res = traces(["view", str(run_dir), "--no-block"])
    try:
        assert res.exit_code == 0, res.output
        said = re.search(r"(http://127\.0\.0\.1:\d+/traces\?id=0) \(server pid (\d+);", res.stdout)
        assert said, res.stdout
        url, pid = said.groups()
        assert int(pid) == STARTED[-1].pid
        assert httpx.get(url).text.count('<article class="call">') == len(llm_runs(run_dir))
    finally:
        stop_started()
