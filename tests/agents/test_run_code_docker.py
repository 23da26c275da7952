"""The ``run_code`` tool in a tool loop on the real Docker sandbox (marker ``docker``)."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import pytest
from langchain_core.messages import HumanMessage, ToolMessage

from cooplab.agents.tools import (
    SANDBOX_SECONDS,
    ToolAgent,
    ToolSetupError,
    run_code_tool,
)
from cooplab.graphs.context import CoopContext
from cooplab.graphs.ledger import BudgetExhausted
from cooplab.sandbox import SandboxConfig
from cooplab.sandbox.pool import AgentSandboxPool

from ._support import USAGE, call, loop_of, quoting_final, service

RATE = Decimal("0.002")  # $ per sandbox second


@pytest.fixture
def docker_pool(docker_ready, dataset):
    with AgentSandboxPool(SandboxConfig(dataset=dataset, timeout=10, interrupt_grace=1), backend="docker") as pool:
        yield pool


@pytest.mark.docker
def test_a_scripted_agent_runs_code_in_docker_reads_the_result_and_answers(docker_pool):
    svc = service(
        [
            call("run_code", USAGE, code="total = int(df['a'].sum() * 3)\nprint('total', total)"),
            call("run_code", USAGE, code="total + 1"),
            quoting_final("The total plus one is"),
        ],
        unit_rates={SANDBOX_SECONDS: RATE},
    )
    agent = ToolAgent("data.lead", [run_code_tool()], team="data")
    res = asyncio.run(
        agent.arun(
            [HumanMessage(content="Sum column a of df, times 3, plus one.")],
            context=CoopContext(llm=svc, sandbox=docker_pool),
            round=2,
        )
    )
    # sum(0..99) * 3 + 1 = 14851, computed in the container, read back by the model
    assert res.stop_reason == "final" and res.final == "The total plus one is 14851"
    results = [m for m in res.messages if isinstance(m, ToolMessage)]
    assert "status: ok" in results[0].content and "total 14850" in results[0].content
    assert "status: ok" in results[1].content and "14851" in results[1].content  # the variable persisted
    # the agent got its own container from the pool
    session = docker_pool.session("data.lead")
    assert docker_pool.backend == "docker" and session.container_id and docker_pool.agents() == ["data.lead"]
    # every model call and every sandbox second charged to the agent, in one ledger
    led = svc.ledger
    sandbox = [e for e in led.entries if e.kind == SANDBOX_SECONDS]
    assert [e.kind for e in led.entries] == ["tokens", SANDBOX_SECONDS, "tokens", SANDBOX_SECONDS, "tokens"]
    assert all(
        e.agent == "data.lead" and e.team == "data" and e.round == 2 and e.model == "sandbox:docker" for e in sandbox
    )
    units = []
    for e in sandbox:
        assert e.units is not None and e.rate is not None  # a sandbox charge names both
        assert Decimal(e.units) > 0 and Decimal(e.rate) == RATE and Decimal(e.cost) == Decimal(e.units) * RATE
        units.append(Decimal(e.units))
    assert sum(units) <= Decimal(str(docker_pool.usage()["data.lead"]["seconds"])) + Decimal("0.00001")
    assert led.spent == res.cost == sum(Decimal(e.cost) for e in led.entries)
    assert led.totals()["by_kind"][SANDBOX_SECONDS]["entries"] == 2 and led.totals()["calls"] == 3


@pytest.mark.docker
def test_code_errors_come_back_as_results_and_sandbox_seconds_respect_the_budget(docker_pool):
    svc = service([call("run_code", code="1 / 0"), quoting_final("saw"), call("run_code", code="2 + 2")])
    agent = ToolAgent("modeling.lead", [run_code_tool()])
    res = asyncio.run(agent.arun([HumanMessage(content="divide")], context=CoopContext(llm=svc, sandbox=docker_pool)))
    assert res.stop_reason == "final"
    tm = [m for m in res.messages if isinstance(m, ToolMessage)][0]
    assert "status: error" in tm.content and "ZeroDivisionError" in tm.content
    # a sandbox call whose reserved upper bound (timeout + grace + margin + one restart) does not fit is not made
    led = svc.ledger
    led.unit_rates[SANDBOX_SECONDS] = Decimal("1")
    led.budget = led.spent + Decimal("10")  # less than the bound of one call (> 10 s)
    with pytest.raises(BudgetExhausted) as ei:
        asyncio.run(agent.arun([HumanMessage(content="again")], context=CoopContext(llm=svc, sandbox=docker_pool)))
    assert loop_of(ei.value).steps == 1 and led.in_flight == 0 and led.spent <= led.budget
    assert docker_pool.usage()["modeling.lead"]["calls"] == 1  # the second call never ran


def test_run_code_without_a_sandbox_pool_is_a_setup_error_not_a_model_error():
    svc = service([call("run_code", code="1")])
    with pytest.raises(ToolSetupError, match="sandbox pool"):
        asyncio.run(ToolAgent("a", [run_code_tool()]).arun([HumanMessage(content="x")], context=CoopContext(llm=svc)))
