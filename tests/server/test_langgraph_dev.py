"""Integration: ``langgraph dev`` (LangGraph's own server, in-memory runtime) serves every graph of
langgraph.json, offline; a scripted CPR society and the science oracle team run through
``langgraph-sdk`` to completion and give the numbers ``cooplab run`` gives for the same settings.

The server runs as its own process group in a temporary folder, with telemetry and LangSmith
tracing off and every proxy variable pointing at a loopback listener that counts connections: the
test fails if the server tried to reach any host but itself. Readiness is the server answering
``/ok`` (polled, bounded by a generous deadline); at the end the process group is stopped."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from cooplab.cli import main

pytestmark = [pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
SCRIPTED = ROOT / "examples" / "scripted" / "cautious.json"
GRAPH_IDS = {"cpr", "diners", "game", "science"}
#: what differs between two runs of the same settings: the time they took
VARYING = {"wall_seconds", "sandbox_seconds_by_team"}
#: how long the server may take to start on a loaded 2-core machine
START_DEADLINE = 180.0


class ProxyRecorder:
    """A loopback listener standing in for every proxy: it records the first line of each request
    made to it (``CONNECT host:443 ...``, ``GET http://host/...``) and drops the connection."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.requests: list[str] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5.0)
                try:
                    head = conn.recv(512)
                except OSError:
                    head = b""
                self.requests.append(head.split(b"\r\n", 1)[0].decode("latin-1") or "(nothing sent)")

    def close(self) -> None:
        self.sock.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def langgraph_cli() -> str:
    exe = Path(sys.executable).with_name("langgraph")
    if not exe.exists():
        pytest.fail(
            "langgraph-cli is not installed: pip install -e '.[server]' (scripts/setup.sh installs it)", pytrace=False
        )
    return str(exe)


def offline_env(tmp: Path, proxy_port: int) -> dict[str, str]:
    """The server's environment: no telemetry, no version check, no tracing, no keys, no opt-in of the operator
    (COOPLAB_SERVE_ALLOW_*), and every proxy at the recorder."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LANGSMITH_", "LANGCHAIN_", "LANGGRAPH_", "OPENAI_", "COOPLAB_SERVE_"))
    }
    proxy = f"http://127.0.0.1:{proxy_port}"
    env.update(
        LANGGRAPH_CLI_NO_ANALYTICS="1",
        LANGGRAPH_NO_VERSION_CHECK="true",
        LANGSMITH_TRACING="false",
        LANGCHAIN_TRACING_V2="false",
        COOPLAB_SERVER_RUNS=str(tmp / "runs"),
        HTTP_PROXY=proxy,
        HTTPS_PROXY=proxy,
        ALL_PROXY=proxy,
        http_proxy=proxy,
        https_proxy=proxy,
        all_proxy=proxy,
        NO_PROXY="127.0.0.1,localhost",
        no_proxy="127.0.0.1,localhost",
    )
    return env


def wait_ready(url: str, proc: subprocess.Popen, log: Path) -> None:
    """Poll ``/ok`` until the server answers (it died, or the deadline passed: fail with its log)."""
    deadline = time.monotonic() + START_DEADLINE
    with httpx.Client(trust_env=False, timeout=5.0) as client:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"langgraph dev exited with {proc.returncode}:\n{log.read_text()[-3000:]}", pytrace=False)
            try:
                if client.get(f"{url}/ok").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.25)  # polling interval, not a wait for a result
    pytest.fail(
        f"langgraph dev did not answer /ok within {START_DEADLINE:.0f} s:\n{log.read_text()[-3000:]}", pytrace=False
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``langgraph dev`` on a free loopback port, in a fresh folder, offline; stopped at the end."""
    tmp = tmp_path_factory.mktemp("langgraph-dev")
    shutil.copy(ROOT / "langgraph.json", tmp / "langgraph.json")
    counter = ProxyRecorder()
    port = free_port()
    log = tmp / "server.log"
    env = {
        **offline_env(tmp, counter.port),
        "COOPLAB_SERVE_ALLOW_PATHS": "1",
    }  # the scripted model is a file (the operator allows it)
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
        yield {"url": url, "runs": tmp / "runs", "counter": counter, "log": log}
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        counter.close()
    assert not counter.requests, f"the server tried to reach other hosts: {counter.requests}"


def run_on_server(url: str, graph_id: str, context: dict, *, status: str = "success") -> dict:
    """One run of ``graph_id`` on a new thread through langgraph-sdk, which must end with ``status``:
    its final state (success) or what the run's join returned (error)."""
    from langgraph_sdk import get_client

    async def go() -> dict:
        client = get_client(url=url)
        thread = await client.threads.create()
        run = await client.runs.create(thread["thread_id"], graph_id, input={}, context=context)
        joined = await client.runs.join(thread["thread_id"], run["run_id"])
        done = await client.runs.get(thread["thread_id"], run["run_id"])
        assert done["status"] == status, (done, joined)
        out = (await client.threads.get_state(thread["thread_id"]))["values"] if status == "success" else joined
        assert isinstance(out, dict), out  # a graph's state; a failed run's join is its error object
        return out

    return asyncio.run(go())


def cooplab_run(tmp_path: Path, capsys, *args: str) -> dict:
    code = main(["run", *args, "--out", str(tmp_path / "ref"), "-q", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def comparable(summary: dict) -> dict:
    """A summary without what differs between two runs of the same settings: times, and the seconds
    the sandbox took (charged at rate 0, so the costs still agree)."""
    out = {k: v for k, v in summary.items() if k not in VARYING}
    sandbox = ((out.get("ledger") or {}).get("by_kind") or {}).get("sandbox_seconds")
    if sandbox is not None:
        out["ledger"] = {
            **out["ledger"],
            "by_kind": {**out["ledger"]["by_kind"], "sandbox_seconds": {**sandbox, "units": "timed"}},
        }
    return out


def assert_same_outcome(served: dict, ref: dict) -> None:
    assert comparable(served) == comparable(ref)


def test_the_server_lists_every_graph_with_its_settings(server):
    with httpx.Client(base_url=server["url"], trust_env=False, timeout=30.0) as client:
        found = client.post("/assistants/search", json={"limit": 100}).json()
        assert {a["graph_id"] for a in found} == GRAPH_IDS
        for a in found:
            schemas = client.get(f"/assistants/{a['assistant_id']}/schemas").json()
            assert {"agents", "seed", "model", "budget", "options"} <= set(schemas["context_schema"]["properties"])
            drawn = client.get(f"/assistants/{a['assistant_id']}/graph", params={"xray": "true"}).json()
            assert any(str(n["id"]).startswith(f"{a['graph_id']}:") for n in drawn["nodes"]), (
                drawn
            )  # the task's nodes, for Studio


def test_a_bad_setting_reaches_the_client_as_one_line(server):
    joined = run_on_server(server["url"], "cpr", {"seed": -3}, status="error")
    assert joined["__error__"]["error"] == "SettingsError" and "--seed" in joined["__error__"]["message"], joined
    assert "\n" not in joined["__error__"]["message"]
    assert not list(
        server["runs"].glob("cpr-*")
    )  # refused before a run directory was made (the first cpr run of this server)


def test_a_scripted_cpr_society_gives_the_numbers_of_cooplab_run(server, tmp_path, capsys):
    settings = {"agents": "llm", "model": f"scripted:{SCRIPTED}", "seed": 4, "options": {"n_agents": 3, "rounds": 4}}
    values = run_on_server(server["url"], "cpr", settings)
    ref = cooplab_run(
        tmp_path,
        capsys,
        "cpr",
        "--agents",
        "llm",
        "--model",
        f"scripted:{SCRIPTED}",
        "--seed",
        "4",
        "--n-agents",
        "3",
        "--rounds",
        "4",
        "--cache",
        "off",
    )
    assert values["summary"]["status"] == "completed" and values["summary"]["ledger"]["calls"] > 0
    assert_same_outcome(values["summary"], ref)
    assert (
        values["P"] == json.loads(json.dumps(values["P"])) and len(values["P"]) == 1 and len(values["P"][0]) == 3
    )  # plain JSON
    assert Path(values["run_dir"]).parent == server["runs"] and (Path(values["run_dir"]) / "summary.json").is_file()


@pytest.mark.docker
def test_the_science_oracle_team_gives_the_numbers_of_cooplab_run(server, tmp_path, capsys, docker_ready):
    values = run_on_server(server["url"], "science", {"seed": 1, "options": {"task": "anomaly", "team": "oracle"}})
    ref = cooplab_run(
        tmp_path, capsys, "science", "--task", "anomaly", "--team", "oracle", "--seed", "1", "--cache", "off"
    )
    assert values["summary"]["status"] == "completed" and min(values["summary"]["scores"].values()) >= 0.9
    assert_same_outcome(values["summary"], ref)
