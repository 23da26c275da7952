"""The offline trace viewer (evals/trace_viewer.py, its page evals/trace_viewer.html) and the ``traces`` CLI.

The page is checked as a person sees it: headless Chromium takes a screenshot and dumps the
DOM after the page's JavaScript has fetched and drawn the runs. Chromium comes from the
Debian package (scripts/ensure-chromium.sh). Under CI a missing Chromium fails the test.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import tomllib
import urllib.error
import urllib.request
from importlib import resources
from pathlib import Path

import click
from click.testing import CliRunner
import pytest

from cooplab.cli import main
from tests.helpers.chromium import browse
from cooplab.evals import trace_viewer
from cooplab.evals.trace_viewer import serve
from cooplab.graphs.tracing import load_runs
from tests.tracing.test_tracing import (  # noqa: F401  (_no_live_tracing: an autouse fixture here too)
    FakeLangSmith,
    _clear_langsmith_env_cache,
    _no_live_tracing,
    make_traces,
)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("run")
    with pytest.MonkeyPatch.context() as mp:
        for k in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2"):
            mp.delenv(k, raising=False)
        _clear_langsmith_env_cache()
        make_traces(d, "ainvoke")
        make_traces(d, "invoke")
    _clear_langsmith_env_cache()
    return d


@pytest.fixture
def viewer(run_dir):
    server, url = serve(run_dir, host="127.0.0.1", port=0)
    yield url
    server.shutdown()
    server.server_close()


def get(url: str) -> tuple[int, dict, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def test_api_serves_runs(viewer, run_dir):
    assert viewer.startswith("http://127.0.0.1:")
    code, headers, body = get(viewer + "api/runs")
    assert code == 200 and headers["Content-Type"].startswith("application/json")
    runs = json.loads(body)
    assert runs == load_runs(run_dir)
    assert {r["name"] for r in runs} >= {"society", "think", "act", "UsageChatModel", "harvest_tool"}
    summary = json.loads(get(viewer + "api/runs?summary=1")[2])
    assert [r["id"] for r in summary] == [r["id"] for r in runs]
    assert all("inputs" not in r and "outputs" not in r for r in summary)
    llm = next(r for r in summary if r["run_type"] == "llm")
    assert llm["total_tokens"] == 13 and llm["langgraph_node"] == "think"
    code, _, body = get(viewer + "api/runs/" + llm["id"])
    assert code == 200 and json.loads(body)["outputs"]["generations"][0][0]["text"] == "harvest 3"
    code, _, body = get(viewer + "api/runs/00000000-0000-0000-0000-000000000000")
    assert code == 404 and "error" in json.loads(body)
    assert get(viewer + "nope")[0] == 404


def test_page_is_self_contained(viewer):
    code, headers, body = get(viewer)
    assert code == 200 and headers["Content-Type"].startswith("text/html")
    html = body.decode()
    assert "<script>" in html and "api/runs" in html
    for external in ('src="http', "src='http", 'href="http', "@import", "cdn"):
        assert external not in html.lower()
    assert "default-src 'none'" in headers["Content-Security-Policy"]


def test_page_is_package_data(viewer, run_dir):
    """The page is evals/trace_viewer.html, loaded with importlib.resources and shipped in the
    wheel (pyproject package-data); its __TITLE__ placeholders become the escaped run directory."""
    template = resources.files("cooplab.evals").joinpath("trace_viewer.html").read_text(encoding="utf-8")
    assert template.count("__TITLE__") == 2 and template.startswith("<!doctype html>")
    html = get(viewer)[2].decode()
    assert html == template.replace("__TITLE__", trace_viewer._html_escape(str(run_dir)))
    assert "__TITLE__" not in html and f"<title>traces: {run_dir}</title>" in html
    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    assert "trace_viewer.html" in pyproject["tool"]["setuptools"]["package-data"]["cooplab.evals"]


def test_api_follows_a_growing_file(tmp_path):
    server, url = serve(tmp_path)
    try:
        assert json.loads(get(url + "api/runs")[2]) == []
        assert json.loads(get(url + "api/info")[2])["exists"] is False
        make_traces(tmp_path, "invoke")
        n = len(json.loads(get(url + "api/runs")[2]))
        assert n >= 5
        with open(tmp_path / "traces.jsonl", "a") as fh:
            fh.write("{not json\n")
        assert len(json.loads(get(url + "api/runs")[2])) == n
        assert json.loads(get(url + "api/info")[2])["bad_lines"] == 1
    finally:
        server.shutdown()
        server.server_close()


# ----------------------------------------------------------------------------------------
# the page as a person sees it
def _run_chromium(tmp_path: Path, url: str, *args: str) -> subprocess.CompletedProcess:
    return browse(tmp_path, url, *args, size="1200,800")


def _image_stats(path: Path) -> tuple[int, int, int, float]:
    """Width, height, number of distinct colours and the pixel standard deviation of a PNG."""
    import matplotlib.image as mpimg
    import numpy as np

    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    img = mpimg.imread(path)
    h, w = img.shape[:2]
    rgb = (img[..., :3] * 255).astype(np.uint8).reshape(-1, 3)
    colours = len(np.unique(rgb, axis=0))
    return w, h, colours, float(rgb.std())


def test_page_screenshot_and_dom(viewer, run_dir, tmp_path):
    runs = load_runs(run_dir)
    llm = next(r for r in runs if r["run_type"] == "llm")
    png = tmp_path / "viewer.png"
    res = _run_chromium(tmp_path, f"{viewer}#expand=all&run={llm['id']}", f"--screenshot={png}")
    assert png.is_file(), res.stderr[-2000:]
    assert png.stat().st_size > 10_000
    w, h, colours, std = _image_stats(png)
    assert (w, h) == (1200, 800)
    assert colours > 50 and std > 5  # text, badges and panels; not a blank page

    dom = _run_chromium(tmp_path, viewer, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    assert 'data-loaded="1"' in html, html[:2000]
    for name in ("society", "think", "act", "UsageChatModel", "harvest_tool"):
        assert f'class="name">{name}<' in html
    assert html.count('class="badge t-llm"') == sum(r["run_type"] == "llm" for r in runs)
    assert "13 tok (11 in / 2 out)" in html
    assert "2</b> traces" in html

    detail = _run_chromium(tmp_path, f"{viewer}#run={llm['id']}", "--dump-dom").stdout
    assert "llm: UsageChatModel" in detail and "harvest 3" in detail and "Stock is 60" in detail


# ----------------------------------------------------------------------------------------
# the CLI (mounted as "cooplab traces"), through the real entry point cooplab.cli.main
@click.command(context_settings={"ignore_unknown_options": True, "help_option_names": []})
@click.argument("argv", nargs=-1, type=click.UNPROCESSED)
def _cooplab(argv):
    sys.exit(main(list(argv)))


def traces(args, **kwargs):
    """``cooplab traces ARGS`` as the ``cooplab`` command runs it (errors become one
    ``cooplab: error:`` line), as a CliRunner result."""
    return CliRunner().invoke(_cooplab, ["traces", *args], **kwargs)


def test_cli_help():
    for args in (["--help"], ["export", "--help"], ["view", "--help"]):
        res = traces(args)
        assert res.exit_code == 0 and "Usage" in res.output


def test_cli_export(run_dir):
    srv = FakeLangSmith()
    try:
        res = traces(["export", str(run_dir), "--endpoint", srv.url, "--project", "p1", "--json"],
                            env={"LANGSMITH_API_KEY": "cli-key-123456789"})
        assert res.exit_code == 0, res.output
        out = json.loads(res.stdout)
        assert out["runs"] == len(load_runs(run_dir)) and out["project"] == "p1"
        assert len(srv.batch_posts()) == out["runs"]
        assert srv.requests[-1]["headers"].get("x-api-key") == "cli-key-123456789"
    finally:
        srv.close()


def test_cli_export_refused(run_dir):
    srv = FakeLangSmith(status=403)
    try:
        res = traces(["export", str(run_dir), "--endpoint", srv.url])
        assert res.exit_code == 1 and "Traceback" not in res.output
        assert res.stderr.strip().startswith("cooplab: error: export to") and len(res.stderr.strip().splitlines()) == 1
    finally:
        srv.close()


@pytest.mark.parametrize("args", [
    ["export", "/nonexistent/run"],
    ["export", "{tmp}"],
    ["export", "{run}", "--endpoint", "ftp://x"],
    ["export", "{run}"],  # no endpoint, no LANGSMITH_API_KEY
    ["view", "/nonexistent/run"],
    ["view", "{run}", "--port", "70000"],
])
def test_cli_user_errors(args, run_dir, tmp_path):
    args = [a.replace("{tmp}", str(tmp_path)).replace("{run}", str(run_dir)) for a in args]
    res = traces(args)
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("cooplab: error: ")


def test_cli_user_error_through_the_console_script(tmp_path):
    exe = Path(sys.executable).with_name("cooplab")
    if not exe.is_file():
        pytest.skip("no cooplab console script next to this Python")
    for args in (["traces", "view", str(tmp_path / "nope")], ["traces", "export", str(tmp_path)]):
        p = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=120)
        assert p.returncode == 2 and p.stdout == "", (p.stdout, p.stderr)
        assert len(p.stderr.splitlines()) == 1 and p.stderr.startswith("cooplab: error: "), p.stderr


def test_cli_view_no_block(run_dir):
    from cooplab.cli.view import STARTED, stop_started

    res = traces(["view", str(run_dir), "--no-block"])
    try:
        assert res.exit_code == 0, res.output
        url, pid = re.search(r"(http://127\.0\.0\.1:\d+/) \(server pid (\d+);", res.stdout).groups()
        assert int(pid) == STARTED[-1].pid
        assert len(json.loads(get(url + "api/runs")[2])) == len(load_runs(run_dir))
    finally:
        stop_started()


# ----------------------------------------------------------------------------------------
# hostile requests and hostile files (issue 29, items 13 and 14)
@pytest.fixture(scope="module")
def running_viewer(run_dir):
    """``cooplab traces view RUN_DIR`` as a user starts it: a separate process, blocking; its URL
    is read from its first line of output. Stopped (SIGTERM, by its pid) at the end."""
    exe = Path(sys.executable).with_name("cooplab")
    proc = subprocess.Popen([str(exe), "traces", "view", str(run_dir)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()  # "trace viewer for DIR: http://127.0.0.1:PORT/  (Ctrl-C to stop)"
        assert "http://127.0.0.1:" in line, (line, proc.stderr.read() if proc.poll() is not None else "")
        yield line.split("http://", 1)[1].split("/", 1)[0]  # 127.0.0.1:PORT
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def raw_http(address: str, request: bytes) -> tuple[int, bytes]:
    """Send ``request`` as it is over a new TCP connection to ``address`` (host:port); the status
    and body of the answer (the viewer closes the connection after each answer)."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(request)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def secrets_of(run_dir: Path) -> list[bytes]:
    """Strings only the traces hold: a prompt, an answer and every run id."""
    return [b"harvest 3", b"Stock is 60", *(r["id"].encode() for r in load_runs(run_dir))]


PATHS = ["/", "/api/runs", "/api/runs?summary=1", "/api/info", "/api/runs/{id}"]


@pytest.mark.parametrize("host", [
    "evil.example", "evil.example:{port}", "attacker.test:{port}",
    "localhost.evil.com:{port}", "127.0.0.1.nip.io:{port}", "localhost.:{port}", "127.0.0.2:{port}", "0.0.0.0:{port}",
    "localhost:{other}", "127.0.0.1:{other}", "[::1]:{other}", "localhost", "127.0.0.1", "localhost:{port}@evil.example",
    "localhost:{port} evil.example", "", " ",
])
def test_a_foreign_host_gets_nothing(running_viewer, run_dir, host):
    """A page that points its own name at 127.0.0.1 (DNS rebinding) sends that name as Host."""
    port = int(running_viewer.rsplit(":", 1)[1])
    host = host.format(port=port, other=port + 1 if port < 65535 else port - 1)
    rid = load_runs(run_dir)[0]["id"]
    for path in PATHS:
        for method in ("GET", "HEAD"):
            code, body = raw_http(running_viewer, f"{method} {path.format(id=rid)} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
            assert code in (400, 421), (host, path, code)
            assert not any(s in body for s in secrets_of(run_dir)), (host, path)


@pytest.mark.parametrize("request_head", [
    b"GET /api/runs HTTP/1.0\r\n\r\n",  # HTTP/1.0 without a Host
    b"GET /api/runs HTTP/1.1\r\nConnection: close\r\n\r\n",
    b"GET /api/runs HTTP/1.1\r\nHost: localhost:{port}\r\nHost: evil.example\r\nConnection: close\r\n\r\n",  # two Hosts
])
def test_no_host_or_two_hosts_get_nothing(running_viewer, run_dir, request_head):
    port = running_viewer.rsplit(":", 1)[1]
    code, body = raw_http(running_viewer, request_head.replace(b"{port}", port.encode()))
    assert code == 400 and not any(s in body for s in secrets_of(run_dir))


@pytest.mark.parametrize("name", ["localhost", "127.0.0.1", "[::1]", "LocalHost"])
def test_loopback_names_with_the_bound_port_are_served(running_viewer, run_dir, name):
    port = running_viewer.rsplit(":", 1)[1]
    for path in PATHS:
        rid = load_runs(run_dir)[0]["id"]
        code, body = raw_http(running_viewer, f"GET {path.format(id=rid)} HTTP/1.1\r\nHost: {name}:{port}\r\nConnection: close\r\n\r\n".encode())
        assert code == 200, (name, path, body[:200])
    code, body = raw_http(running_viewer, f"GET /api/runs HTTP/1.0\r\nHost: {name}:{port}\r\n\r\n".encode())
    assert code == 200 and json.loads(body) == load_runs(run_dir)


def test_a_rebound_name_in_a_real_browser_shows_no_run(running_viewer, run_dir, tmp_path):
    """Chromium told that rebind.test is 127.0.0.1 (as a DNS-rebinding attacker arranges) loads the
    viewer's URL under that name: no run reaches the page; under localhost the same page shows them."""
    port = running_viewer.rsplit(":", 1)[1]
    rules = "--host-resolver-rules=MAP rebind.test 127.0.0.1"
    foreign = browse(tmp_path, f"http://rebind.test:{port}/", rules, "--dump-dom").stdout
    assert "this viewer answers only requests for localhost" in foreign  # Chromium reached the viewer, which refused it
    assert 'class="name">society<' not in foreign and "harvest" not in foreign and 'data-loaded="1"' not in foreign
    own = browse(tmp_path, f"http://localhost:{port}/", "--dump-dom").stdout
    assert 'class="name">society<' in own and 'data-loaded="1"' in own


def test_host_allowed_by_hand():
    ok = trace_viewer.host_allowed
    assert ok("localhost:8080", ("127.0.0.1", 8080)) and ok("[::1]:8080", ("::1", 8080, 0, 0))
    assert ok("192.168.1.5:8080", ("192.168.1.5", 8080))  # the literal address it is bound to
    assert not ok("0.0.0.0:8080", ("0.0.0.0", 8080)) and not ok("[::]:8080", ("::", 8080, 0, 0))
    assert ok("localhost", ("127.0.0.1", 80)) and not ok("localhost", ("127.0.0.1", 8080))
    assert not ok(None, ("127.0.0.1", 8080)) and not ok("localhost:08080", ("127.0.0.1", 8080))


def _deep_line(levels: int = 40_000) -> str:
    return '{"id": "deep", "inputs": ' + "[" * levels + "]" * levels + "}\n"


def test_a_deeply_nested_line_is_skipped_and_named_never_a_500(run_dir, tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    good = (run_dir / "traces.jsonl").read_text().splitlines(keepends=True)
    lines = [*good[:3], _deep_line(), *good[3:], "{not json\n", _deep_line(500)]
    (d / "traces.jsonl").write_text("".join(lines))
    server, url = serve(d)
    try:
        for path in ("", "api/runs", "api/runs?summary=1", "api/info", "api/runs/" + load_runs(run_dir)[0]["id"], "api/runs/deep"):
            code, _, body = get(url + path)
            assert code == (404 if path.endswith("deep") else 200), (path, body[:300])
        runs = json.loads(get(url + "api/runs")[2])
        assert runs == load_runs(run_dir)  # every readable run, in order
        info = json.loads(get(url + "api/info")[2])
        assert info["bad_lines"] == 3 and info["bad_line_numbers"] == [4, len(lines) - 1, len(lines)] and info["runs"] == len(good)
    finally:
        server.shutdown()
        server.server_close()


def test_the_page_says_which_lines_were_skipped(run_dir, tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    good = (run_dir / "traces.jsonl").read_text().splitlines(keepends=True)
    (d / "traces.jsonl").write_text("".join([good[0], _deep_line(), *good[1:]]))
    server, url = serve(d)
    try:
        dom = browse(tmp_path, url, "--dump-dom").stdout
    finally:
        server.shutdown()
        server.server_close()
    assert 'data-loaded="1"' in dom and 'class="name">society<' in dom
    assert "1 unreadable line skipped (line 2)" in dom


# ----------------------------------------------------------------------------------------
# two token counts of one run: what the model reported, what the ledger charged
def test_the_header_says_what_the_model_reported_and_what_the_ledger_charged(tmp_path, capsys):
    """A scripted model whose answers are longer than --max-tokens: the ledger charges the cap, the
    traces hold the reported usage; the viewer shows both, each named, and each call's charge."""
    out = tmp_path / "run"
    model = Path(__file__).resolve().parents[2] / "examples/scripted/cautious.json"
    assert main(["run", "cpr", "--agents", "llm", "--model", f"scripted:{model}", "--n-agents", "3", "--rounds", "2",
                 "--max-tokens", "4", "--out", str(out), "-q", "--cache", "off"]) in (0, None)
    capsys.readouterr()
    ledger = json.loads((out / "summary.json").read_text())["ledger"]
    llm = [r for r in load_runs(out) if r["run_type"] == "llm"]
    reported = sum(r["completion_tokens"] for r in llm)
    assert reported > ledger["output_tokens"] and ledger["calls"] == len(llm)  # the answers are longer than the cap
    server, url = serve(out, host="127.0.0.1", port=0)
    try:
        _, _, body = get(url + "/api/info")
        info = json.loads(body)["ledger"]
        assert (info["calls"], info["input_tokens"], info["output_tokens"]) == (ledger["calls"], ledger["input_tokens"], ledger["output_tokens"])
        assert info["cost_usd"] == pytest.approx(ledger["cost_usd_float"])
        _, _, body = get(url + "/api/runs?summary=1")
        calls = [r for r in json.loads(body) if r["run_type"] == "llm"]
        assert all(r["charged_completion_tokens"] <= r["completion_tokens"] for r in calls) and len(calls) == len(llm)
        assert sum(r["charged_completion_tokens"] for r in calls) == ledger["output_tokens"]
        assert sum(r["charged_prompt_tokens"] for r in calls) == ledger["input_tokens"]
        assert sum(r["cost_usd"] for r in calls) == pytest.approx(ledger["cost_usd_float"])
        html = _run_chromium(tmp_path, url, "--dump-dom").stdout
        assert f"{reported + sum(r['prompt_tokens'] for r in llm)}</b> tokens reported by the model" in html
        assert (f"{ledger['input_tokens'] + ledger['output_tokens']}</b> charged tokens (ledger: {ledger['input_tokens']} in / "
                f"{ledger['output_tokens']} out, {ledger['calls']} calls") in html
        detail = _run_chromium(tmp_path, f"{url}#run={llm[0]['id']}", "--dump-dom").stdout
        assert "charged (ledger)" in detail and "tokens reported by the model" in detail and "Fisher 1" in detail
    finally:
        server.shutdown()
        server.server_close()
