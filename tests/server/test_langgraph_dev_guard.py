"""Integration: ``langgraph dev`` with our langgraph.json obeys no web page but Studio's, and its
served graphs refuse what the operator did not allow (issue 37, point 2).

One real server (offline, as in test_langgraph_dev.py) with no opt-in set, and an attacker's page
served from a second loopback port, loaded in headless Chromium. The page tries what any page can:
``text/plain`` and body-without-type POSTs (no CORS preflight needed), a JSON POST (preflighted), and
reading an answer. Nothing may run (no run directory, no thread), the page may read nothing, and
every attempt is refused by the guard (its line in the server's log). Then direct requests: a
rebinding ``Host`` is refused, Studio's origin and the server's own names still work, and a run the
client asks for with refused settings ends in one line naming the variable that would allow it."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import signal
import subprocess
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from tests.helpers.chromium import browse
from tests.server.test_langgraph_dev import (
    ROOT,
    ProxyRecorder,
    free_port,
    langgraph_cli,
    offline_env,
    run_on_server,
    wait_ready,
)

pytestmark = [pytest.mark.integration]

STUDIO = "https://smith.langchain.com"
#: a small rule-based CPR run: what the attacker's page asks the server to run
SMALL_RUN = {
    "assistant_id": "cpr",
    "input": {},
    "context": {"seed": 1, "options": {"n_agents": 2, "rounds": 2, "replicates": 1}},
}

PAGE = """<!doctype html><html><body><pre id="out">pending</pre><script>
const target = %(target)s, run = %(run)s, out = {};
async function attempt(name, path, init) {
  try {
    const r = await fetch(target + path, init);
    out[name] = "read " + r.status + " " + (await r.text()).slice(0, 200);
  } catch (e) { out[name] = "blocked " + e.name; }
}
(async () => {
  await attempt("text_plain_run", "/runs/wait", {method: "POST", headers: {"Content-Type": "text/plain"}, body: run});
  await attempt("untyped_blob_run", "/runs/wait", {method: "POST", body: new Blob([run])});
  await attempt("no_cors_thread", "/threads", {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body: "{}"});
  await attempt("json_run", "/runs/wait", {method: "POST", headers: {"Content-Type": "application/json"}, body: run});
  await attempt("read_ok", "/ok", {});
  document.getElementById("out").textContent = JSON.stringify(out);
})();
</script></body></html>"""  # noqa: E501 (text kept verbatim)


class PageServer:
    """The attacker's page on a second loopback port (another origin); it records what was fetched."""

    def __init__(self, root: Path) -> None:
        handler = partial(_Quiet, directory=str(root))
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # no request lines on the test's stderr
        pass


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``langgraph dev`` with the shipped langgraph.json, offline, and no opt-in of the operator."""
    tmp = tmp_path_factory.mktemp("langgraph-guard")
    shutil.copy(ROOT / "langgraph.json", tmp / "langgraph.json")
    counter = ProxyRecorder()
    port = free_port()
    log = tmp / "server.log"
    env = offline_env(tmp, counter.port)  # no COOPLAB_SERVE_ALLOW_* variable: every opt-in off
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                langgraph_cli(),
                "dev",
                "--config",
                str(tmp / "langgraph.json"),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--no-browser",
                "--no-reload",
            ],
            cwd=tmp,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, proc, log)
        yield {"url": url, "port": port, "runs": tmp / "runs", "log": log, "tmp": tmp}
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        counter.close()
    assert not counter.requests, f"the server tried to reach other hosts: {counter.requests}"


def client(server, **headers) -> httpx.Client:
    return httpx.Client(base_url=server["url"], trust_env=False, timeout=30.0, headers=headers)


def threads(server) -> list:
    with client(server) as c:
        found = c.post("/threads/search", json={"limit": 100})
        assert found.status_code == 200, found.text
        return found.json()


def no_run_dirs(server) -> bool:
    return not server["runs"].exists() or not any(server["runs"].iterdir())


def refusals(server) -> list[str]:
    return [line for line in server["log"].read_text(errors="replace").splitlines() if "cooplab: refused" in line]


def test_a_page_on_another_origin_runs_nothing_and_reads_nothing(server, tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text(
        PAGE % {"target": json.dumps(server["url"]), "run": json.dumps(json.dumps(SMALL_RUN))}
    )
    before = len(threads(server))
    page = PageServer(site)
    try:
        dom = browse(tmp_path, f"http://127.0.0.1:{page.port}/index.html", "--dump-dom").stdout
    finally:
        page.close()
    seen = re.search(r'<pre id="out">(.*?)</pre>', dom, re.S)
    assert seen and seen.group(1) != "pending", dom[-2000:]
    out = json.loads(html.unescape(seen.group(1)))
    assert set(out) == {"text_plain_run", "untyped_blob_run", "no_cors_thread", "json_run", "read_ok"}, out
    # the page could read nothing (a no-cors answer is opaque: status 0, no text)
    assert all(v.startswith("blocked") for k, v in out.items() if k != "no_cors_thread"), out
    assert out["no_cors_thread"] == "read 0 ", out
    # nothing ran: no run directory, no thread
    assert no_run_dirs(server) and len(threads(server)) == before
    # each attempt reached the server and was refused by the guard (the JSON POST at its preflight)
    lines = refusals(server)
    for method, path in (("POST", "/runs/wait"), ("POST", "/threads"), ("OPTIONS", "/runs/wait"), ("GET", "/ok")):
        assert any(f"refused {method} '{path}'" in line and f"127.0.0.1:{page.port}" in line for line in lines), (
            method,
            path,
            lines,
        )


@pytest.mark.parametrize(
    "host", ["evil.example", "rebind.attacker.test:{port}", "127.0.0.1.nip.io:{port}", "localhost.:{port}x"]
)
def test_a_host_that_is_not_this_server_is_refused(server, host):
    """DNS rebinding: a page whose name resolves to 127.0.0.1 reaches the server with its own name as Host."""
    host, before = host.format(port=server["port"]), len(threads(server))
    with client(server, host=host) as c:
        for answer in (
            c.get("/ok"),
            c.post("/assistants/search", json={"limit": 1}),
            c.post("/runs/wait", json=SMALL_RUN),
        ):
            assert answer.status_code == 403 and "Host" in answer.json()["message"], answer.text
            assert "access-control-allow-origin" not in answer.headers
    assert len(threads(server)) == before and no_run_dirs(server)


def test_studio_and_the_servers_own_names_still_work(server):
    port = server["port"]
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}", f"[::1]:{port}"):
        with client(server, host=host) as c:
            assert c.get("/ok").status_code == 200, host
    with client(server, origin=STUDIO) as c:
        pre = c.options(
            "/assistants/search",
            headers={
                "access-control-request-method": "POST",
                "access-control-request-headers": "content-type",
                "access-control-request-private-network": "true",
            },
        )
        assert pre.status_code == 200 and pre.headers["access-control-allow-origin"] == STUDIO, (
            pre.status_code,
            pre.headers,
        )
        assert pre.headers.get("access-control-allow-private-network") == "true"  # Studio on loopback in Chrome
        found = c.post("/assistants/search", json={"limit": 100})
        assert found.status_code == 200 and found.headers["access-control-allow-origin"] == STUDIO
        assert {a["graph_id"] for a in found.json()} == {"cpr", "diners", "game", "science"}
        assert (
            c.get("/openapi.json").status_code == 200 and c.get("/docs").status_code == 200
        )  # the server's own routes
    with client(server, origin=server["url"]) as c:  # the server's own pages (/docs)
        assert c.post("/assistants/search", json={"limit": 1}).status_code == 200
    with client(
        server, origin=f"http://127.0.0.1:{free_port()}"
    ) as c:  # another loopback origin: no preflight approval
        pre = c.options(
            "/runs/wait",
            headers={"access-control-request-method": "POST", "access-control-request-private-network": "true"},
        )
        assert pre.status_code == 403 and "access-control-allow-private-network" not in pre.headers
        assert "access-control-allow-origin" not in pre.headers


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None]
)
def test_a_post_that_is_not_json_is_refused_even_without_an_origin(server, content_type):
    headers, before = ({} if content_type is None else {"content-type": content_type}), len(threads(server))
    with client(server) as c:
        answer = c.post("/threads", content=b"{}", headers=headers)
    assert answer.status_code == 403 and "application/json" in answer.json()["message"], answer.text
    assert len(threads(server)) == before


@pytest.mark.parametrize(
    "graph_id, context, variable",
    [
        ("science", {"sandbox": {"backend": "local"}}, "COOPLAB_SERVE_ALLOW_LOCAL_SANDBOX"),
        (
            "cpr",
            {
                "agents": "llm",
                "model": "openai:gpt-4o-mini",
                "budget": 0.01,
                "llm": {"base_url": "http://127.0.0.1:9/v1"},
            },
            "COOPLAB_SERVE_ALLOW_CLIENT_SERVERS",
        ),
        (
            "cpr",
            {"agents": "llm", "model": f"scripted:{ROOT / 'examples' / 'scripted' / 'cautious.json'}"},
            "COOPLAB_SERVE_ALLOW_PATHS",
        ),
        ("cpr", {"agents": "llm", "model": "openai:gpt-4o-mini"}, "COOPLAB_SERVE_ALLOW_UNBUDGETED"),
    ],
)
def test_a_served_run_with_a_refused_setting_ends_in_one_line(server, graph_id, context, variable):
    joined = run_on_server(server["url"], graph_id, context, status="error")
    error = joined["__error__"]
    assert error["error"] == "SettingsError" and f"{variable}=1" in error["message"] and "\n" not in error["message"], (
        joined
    )
    assert no_run_dirs(server)
