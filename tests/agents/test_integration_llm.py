"""Integration: the real embedded local model, and ChatOpenAI against a real
``python -m llama_cpp.server`` serving the same model on loopback."""

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pandas as pd
import pytest
from langchain_core.messages import HumanMessage

from cooplab.agents.decisions import LLMService, ModelUnavailable, decide
from cooplab.agents.models import make_chat_model, parse_model_spec
from cooplab.agents.models.local import local_model_path
from cooplab.cli import main
from cooplab.evals.typed import column
from cooplab.tasks.cpr.llm import EFFORT

pytestmark = pytest.mark.integration


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_local_model_runs_the_cpr_society_end_to_end(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(
        [
            "run",
            "cpr",
            "--agents",
            "llm",
            "--model",
            "local",
            "--n-agents",
            "2",
            "--rounds",
            "2",
            "--out",
            str(out),
            "--cache",
            str(tmp_path / "c.sqlite"),
            "-q",
            "--json",
        ]
    )
    stdout, err = capsys.readouterr()
    assert code == 0, err
    s = json.loads(stdout)
    d = pd.read_parquet(out / "decisions.parquet")
    assert s["status"] == "completed"
    per_phase = d.groupby("phase").size().to_dict()
    # round 1: effort, punish, propose (+ vote if 2+ distinct proposals); round 2 (last): effort, punish
    assert per_phase["harvest"] == 4 and per_phase["punish"] == 4 and per_phase["propose"] == 2
    assert per_phase.get("vote", 0) in (0, 2)
    assert (column(d, "input_tokens") > 100).all() and (column(d, "output_tokens") > 0).all()
    # every effort decision ended with a valid effort in [0, 1], decoded or by fallback
    efforts = [json.loads(p)["effort"] for p in d[d.phase == "harvest"]["parsed"]]
    assert all(0 <= e <= 1 for e in efforts)
    # grammar-constrained decoding: effort, punish and vote answers are JSON objects on every attempt
    for raw in d[d.phase.isin(["harvest", "punish", "vote"])]["raw"]:
        assert isinstance(json.loads(raw), dict)
    # the model ran in its own process: no native llama.cpp code was loaded into this one
    assert "llama_cpp" not in sys.modules


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory):
    port = _free_port()
    log_path = tmp_path_factory.mktemp("server") / "server.log"
    log = open(log_path, "wb")  # a pipe nobody reads would fill up and block the server
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(local_model_path()),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            "2048",
            "--model_alias",
            "smollm2",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.time() + 180
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"llama_cpp.server exited: {log_path.read_text()[-2000:]}")
        try:
            opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never via a proxy
            with opener.open(url + "/models", timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            time.sleep(0.5)
    else:
        proc.kill()
        raise RuntimeError("llama_cpp.server did not start in 180 s")
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


def test_chat_openai_against_a_real_llama_cpp_server(llama_server, tmp_path, capsys):
    spec = parse_model_spec("openai:smollm2", base_url=llama_server, max_tokens=32)
    svc = LLMService(models={"default": (spec, make_chat_model(spec))})
    value, rec = asyncio.run(
        decide(
            svc,
            EFFORT,
            [HumanMessage(content='How hard will you fish this round? Reply {"effort": <0..1>}')],
            society=0,
            agent=0,
            round=1,
            ctx={"previous_effort": 0.5},
        )
    )
    assert value is not None and 0 <= value.effort <= 1
    assert rec.input_tokens > 5 and rec.output_tokens > 0  # reported by the server's usage
    assert svc.ledger.totals()["calls"] == rec.attempts
    # the whole society through the CLI against the server
    out = tmp_path / "run"
    code = main(
        [
            "run",
            "cpr",
            "--agents",
            "llm",
            "--model",
            "openai:smollm2",
            "--base-url",
            llama_server,
            "--n-agents",
            "2",
            "--rounds",
            "2",
            "--out",
            str(out),
            "--cache",
            "off",
            "-q",
            "--json",
        ]
    )
    stdout, err = capsys.readouterr()
    assert code == 0, err
    d = pd.read_parquet(out / "decisions.parquet")
    assert (column(d, "phase") == "harvest").sum() == 4 and json.loads(stdout)["decisions"]["count"] == len(d)


def test_refused_connection_retries_with_backoff_then_stops(tmp_path):
    spec = parse_model_spec("openai:smollm2", base_url=f"http://127.0.0.1:{_free_port()}/v1")
    svc = LLMService(models={"default": (spec, make_chat_model(spec))}, max_transport_retries=2, backoff_base=0.05)
    t0 = time.perf_counter()
    with pytest.raises(ModelUnavailable, match="unreachable after 3 attempts"):
        asyncio.run(
            decide(svc, EFFORT, [HumanMessage(content="x")], society=0, agent=0, round=1, ctx={"previous_effort": 0.5})
        )
    assert time.perf_counter() - t0 >= 0.05 + 0.1  # two backoff sleeps happened
    assert svc.ledger.spent == 0 and svc.ledger.in_flight == 0


def test_a_sweep_on_ray_calls_the_server_from_its_workers_and_replays_from_the_shared_cache(
    llama_server, tmp_path, capsys
):
    """Model endpoints and the response cache from Ray worker processes: two cells call the real
    server at once, writing one cache file; the same sweep again (cells deleted) is answered
    entirely from that cache, with the same decisions."""
    import shutil

    import ray  # test.sh installs every extra; a missing Ray fails here, not skips

    cfg = tmp_path / "sweep.json"
    cfg.write_text(
        json.dumps(
            {
                "task": "cpr",
                "out": str(tmp_path / "s"),
                "seeds": [5],
                "parallel": 2,
                "fixed": {
                    "agents": "llm",
                    "model": "openai:smollm2",
                    "env": "harsh",
                    "population": "mixed",
                    "replicates": 1,
                    "n_agents": 2,
                    "rounds": 1,
                    "base_url": llama_server,
                    "cache": str(tmp_path / "cache.sqlite"),
                    "max_tokens": 48,
                },
                "grid": {"ablation": ["full", "neither"]},
            }
        )
    )
    runs = []
    # one local Ray instance for both sweeps (each would start and stop its own: seconds of start-up
    # apiece); the sweep finds it running and leaves it up. Its cells run in Ray worker processes
    # either way, and a cell keeps nothing in memory between runs: the replay can only come from the file.
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        for _ in range(2):
            code = main(["sweep", str(cfg), "--executor", "ray", "--no-analysis", "--json"])
            out, err = capsys.readouterr()
            assert code == 0, err
            res = json.loads(out)
            assert len(res["ran"]) == 2 and all(p["pid"] != os.getpid() for p in res["placement"].values())
            runs.append({r["cell"]: r for r in res["table"]})
            decisions = {
                c: pd.read_parquet(tmp_path / "s" / "cells" / c / "decisions.parquet")[
                    ["agent", "phase", "raw", "parsed"]
                ]
                for c in runs[-1]
            }
            runs[-1]["decisions"] = decisions
            shutil.rmtree(tmp_path / "s" / "cells")
    finally:
        ray.shutdown()
    first, again = runs
    for cell in ("ablation-full__s5", "ablation-neither__s5"):
        assert first[cell]["ledger.calls"] > 0 and first[cell]["ledger.cached_calls"] == 0  # the server answered
        assert (
            again[cell]["ledger.cached_calls"] == again[cell]["ledger.calls"] == first[cell]["ledger.calls"]
        )  # all replayed
        pd.testing.assert_frame_equal(first["decisions"][cell], again["decisions"][cell])
