"""The offline trace viewer (evals/trace_viewer.py, its page evals/trace_viewer.html) and the ``traces`` CLI.

The page is checked as a person sees it: headless Chromium takes a screenshot and dumps the
DOM after the page's JavaScript has fetched and drawn the runs. Chromium comes from the
Debian package (scripts/ensure-chromium.sh). Under CI a missing Chromium fails the test.
"""

from __future__ import annotations

import json
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


def test_cli_view_no_block(run_dir, monkeypatch):
    started = []
    real = trace_viewer.view
    monkeypatch.setattr(trace_viewer, "view", lambda *a, **k: started.append(real(*a, **k)) or started[-1])
    res = traces(["view", str(run_dir), "--no-block"])
    assert res.exit_code == 0, res.output
    url = res.stdout.strip().splitlines()[-1]
    assert url.startswith("http://127.0.0.1:")
    try:
        assert len(json.loads(get(url + "api/runs")[2])) == len(load_runs(run_dir))
    finally:
        server, _ = started[0]
        server.shutdown()
        server.server_close()
