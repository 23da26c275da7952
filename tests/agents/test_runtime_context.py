"""The typed runtime context: what nodes get as ``runtime.context``."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from cooplab.graphs.context import CoopContext, ModelService, SandboxProvider
from cooplab.graphs.ledger import Ledger

from ._support import service


def test_existing_callers_still_work_and_the_ledger_defaults_to_the_model_services():
    svc = service(["x"])
    ctx = CoopContext(llm=svc, run_dir=str(Path("/tmp/run")))
    assert ctx.ledger is svc.ledger and ctx.sandbox is None and ctx.run_dir == "/tmp/run"
    assert isinstance(svc, ModelService)
    assert CoopContext().ledger is None
    assert CoopContext(run_dir=Path("/tmp/x")).run_dir == "/tmp/x"  # pyright: ignore[reportArgumentType]  # a path becomes text
    own = Ledger()
    assert CoopContext(ledger=own).ledger is own  # no model service: a ledger for other charges only
    assert CoopContext(llm=svc, ledger=svc.ledger).ledger is svc.ledger


def test_a_second_ledger_beside_the_model_services_is_refused():
    with pytest.raises(ValueError, match="one budget cap"):
        CoopContext(llm=service([]), ledger=Ledger())
    with pytest.raises(TypeError):
        CoopContext(ledger="not a ledger")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        CoopContext(run_dir=3)  # type: ignore[arg-type]


def test_the_sandbox_pool_satisfies_the_protocol():
    from cooplab.sandbox.pool import AgentSandboxPool

    pool = AgentSandboxPool(backend="local")
    try:
        assert isinstance(pool, SandboxProvider)
    finally:
        pool.close()


class S(TypedDict, total=False):
    seen: str | None


def test_nodes_receive_the_typed_context_through_langgraph():
    svc = service([])

    def node(state: S, runtime: Runtime[CoopContext]) -> S:
        ctx = runtime.context
        assert isinstance(ctx, CoopContext) and ctx.ledger is svc.ledger
        return {"seen": ctx.run_dir}

    g = StateGraph(S, context_schema=CoopContext)
    g.add_node("n", node)
    g.add_edge(START, "n")
    g.add_edge("n", END)
    compiled = g.compile()
    out = asyncio.run(compiled.ainvoke({}, context=CoopContext(llm=svc, run_dir="/r")))
    assert out["seen"] == "/r"
    # LangGraph can still describe the context (its JSON schema): the services are described, not validated
    schema = compiled.get_context_jsonschema()
    assert schema is not None
    assert set(schema["properties"]) == {"llm", "sandbox", "run_dir", "ledger"}
    assert "model service" in schema["properties"]["llm"]["description"]


def test_the_context_and_the_ledger_never_import_the_layers_above():
    code = (
        "import sys, cooplab.graphs.context, cooplab.graphs.ledger; "
        "bad = sorted(m for m in sys.modules if m.split('.')[:2] in (['cooplab', 'agents'], ['cooplab', 'tasks'], "
        "['cooplab', 'sandbox'], ['cooplab', 'evals'])); print(bad); sys.exit(1 if bad else 0)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    code = (
        "import sys, cooplab.sandbox.pool; "
        "bad = sorted(m for m in sys.modules if m.split('.')[:2] in (['cooplab', 'agents'], ['cooplab', 'tasks'], "
        "['cooplab', 'graphs'], ['cooplab', 'evals'])); print(bad); sys.exit(1 if bad else 0)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    code = (
        "import sys, cooplab.agents.tools; "
        "bad = sorted(m for m in sys.modules if m.split('.')[:2] in (['cooplab', 'tasks'], ['cooplab', 'evals'])); "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
