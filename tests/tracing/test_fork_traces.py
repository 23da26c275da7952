"""How a fork's traces say what it is (issue 40 point 4, cooplab/runs/runner.py ``trace_start``): the
part of a run one process ran is labelled in its trace metadata (``started_as``: new, resumed or
fork); a fork's first part is tagged ``fork`` (never ``resumed``), and every traced run of a fork
names its parent's run id and round (``fork_of``, ``fork_at_round``). The OTLP export carries
both (``tag.tags``, the ``metadata`` attribute). A resumed fork is covered in
tests/runner/test_fork.py (kill -9, then resume)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import cooplab
from cooplab.graphs.tracing import load_runs
from tests.tracing.test_otlp import convert

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "scripted" / "cautious.json"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("forktraces")
    with pytest.MonkeyPatch.context() as mp:
        for k in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2"):
            mp.delenv(k, raising=False)
        parent = cooplab.run(
            task="cpr",
            agents="llm",
            model=f"scripted:{SCRIPT}",
            n_agents=2,
            rounds=3,
            seed=3,
            cache=str(base / "cache.sqlite"),
            out=base / "parent",
            quiet=True,
        )
        fork = cooplab.fork(parent.out, at_round=1, set=["r=0.6"], out=base / "fork", quiet=True)
    return parent.out, fork.out


def roots(run: Path) -> list[dict]:
    return [
        r for r in load_runs(run / "traces.jsonl") if r.get("parent_run_id") is None and r.get("run_type") == "chain"
    ]


def test_a_forks_first_part_is_traced_as_a_fork_naming_its_parent_and_round(runs):
    parent, fork = runs
    parent_id = json.loads((parent / "config.json").read_text())["record"]["thread_id"]
    [root] = roots(fork)
    md = root["extra"]["metadata"]
    assert "fork" in root["tags"] and "resumed" not in root["tags"]
    assert (md["started_as"], md["fork_of"], md["fork_at_round"]) == ("fork", parent_id, 1)
    calls = [r for r in load_runs(fork / "traces.jsonl") if r.get("run_type") == "llm"]
    assert calls and all(c["extra"]["metadata"]["fork_of"] == parent_id and "fork" in c["tags"] for c in calls)
    assert min(c["extra"]["metadata"]["round"] for c in calls) == 2  # no call of the shared round 1
    # the parent: a new run, neither a fork nor resumed
    [proot] = roots(parent)
    assert proot["extra"]["metadata"]["started_as"] == "new" and not {"fork", "resumed"} & set(proot["tags"])
    assert "fork_of" not in proot["extra"]["metadata"]


def test_the_otlp_export_of_a_fork_carries_its_tag_and_its_parent(runs):
    parent, fork = runs
    parent_id = json.loads((parent / "config.json").read_text())["record"]["thread_id"]
    spans, res = convert(fork)
    assert spans and not res.skipped
    [root] = [s for s in spans if s.parent is None]
    assert "fork" in root.attributes["tag.tags"]
    md = json.loads(root.attributes["metadata"])
    assert (md["started_as"], md["fork_of"], md["fork_at_round"]) == ("fork", parent_id, 1)
    llm = [s for s in spans if s.attributes.get("openinference.span.kind") == "LLM"]
    assert llm and all(json.loads(s.attributes["metadata"])["fork_of"] == parent_id for s in llm)
