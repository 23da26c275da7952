"""The per-agent sandbox pool (cooplab.sandbox.pool): one session per agent, reused, closed with the
pool, safe under threads and asyncio, never a silent fall back to local execution."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import TypedDict

import pytest

from cooplab.sandbox import (
    SandboxConfig,
    SandboxError,
    SandboxUnavailable,
    docker_backend,
)
from cooplab.sandbox.pool import AgentSandboxPool


class Limits(TypedDict):
    """The SandboxConfig limits these tests shorten."""

    timeout: float
    interrupt_grace: float


FAST = Limits(timeout=5.0, interrupt_grace=1.0)


def _pool(backend, dataset, **kw):
    return AgentSandboxPool(SandboxConfig(dataset=dataset, **FAST), backend=backend, **kw)


def test_one_session_per_agent_reused_and_isolated(backend, dataset):
    with _pool(backend, dataset) as pool:
        a = pool.run("data.lead", "secret = 41\nsecret + 1")
        assert (
            a.result.status == "ok" and a.result.result == "42" and a.agent_id == "data.lead" and a.backend == backend
        )
        assert a.seconds > 0
        again = pool.run("data.lead", "secret")
        assert again.result.result == "41"  # the same session: variables persist for that agent
        other = pool.run("modeling.lead", "'secret' in globals(), df.shape")
        assert other.result.result == "(False, (100, 3))"  # another agent: its own session, its own df
        assert pool.session("data.lead") is pool.session("data.lead") is not pool.session("modeling.lead")
        assert pool.agents() == ["data.lead", "modeling.lead"]
        use = pool.usage()
        assert use["data.lead"]["calls"] == 2 and use["modeling.lead"]["calls"] == 1
        assert use["data.lead"]["seconds"] >= a.seconds
        if backend == "docker":
            assert (
                pool.isolated and pool.session("data.lead").container_id != pool.session("modeling.lead").container_id
            )
        sessions = [pool.session(x) for x in pool.agents()]
    # closed with the pool: every session, and the pool refuses new work
    assert pool.closed and all(s._closed for s in sessions)
    with pytest.raises(SandboxError, match="closed"):
        pool.run("data.lead", "1")
    pool.close()  # idempotent


def test_concurrent_first_calls_of_one_agent_start_one_session(dataset):
    with _pool("local", dataset) as pool:
        barrier = threading.Barrier(6)
        results = []

        def worker(i):
            barrier.wait()
            results.append(pool.run("same", f"x{i} = {i}\n{i}").result.status)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results == ["ok"] * 6 and pool.agents() == ["same"]
        # all six calls ran in the one session: every variable is there
        r = pool.run("same", "sorted(k for k in globals() if k.startswith('x') and k[1:].isdigit())")
        assert r.result.result == str([f"x{i}" for i in range(6)])
        assert pool.usage()["same"]["calls"] == 7


def test_asyncio_callers_run_agents_in_parallel_and_one_agent_in_order(dataset):
    async def main():
        async with _pool("local", dataset) as pool:
            outs = await asyncio.gather(
                *(pool.arun(f"agent {i % 3}", "n = globals().get('n', 0) + 1\nn") for i in range(9))
            )
            results = [o.result.result for o in outs]
            assert None not in results, outs
            return pool, sorted(r for r in results if r is not None), pool.usage()

    pool, counts, use = asyncio.run(main())
    assert counts == sorted(["1", "2", "3"] * 3)  # three agents, three calls each, in order per agent
    assert set(use) == {"agent 0", "agent 1", "agent 2"} and all(u["calls"] == 3 for u in use.values())
    assert pool.closed


def test_docker_is_never_silently_replaced_by_local_execution(monkeypatch, dataset, caplog):
    import cooplab.sandbox.session as session_mod

    local_starts = []

    class NoLocal:
        def __init__(self, *a, **k):
            local_starts.append(1)
            raise AssertionError("a local sandbox was started")

    def no_daemon(*a, **k):
        raise SandboxUnavailable("no Docker daemon answers (test)")

    monkeypatch.setattr(session_mod, "LocalTransport", NoLocal)
    monkeypatch.setattr(docker_backend, "daemon_available", lambda: False)
    monkeypatch.setattr(docker_backend, "get_client", no_daemon)
    with pytest.raises(SandboxUnavailable, match="never falls back"):
        _pool("docker", dataset)
    # without the eager check the first call fails the same way, still without a local sandbox
    pool = _pool("docker", dataset, check=False)
    with pytest.raises(SandboxUnavailable, match="no Docker daemon"):
        pool.run("a", "1")
    assert pool.agents() == []
    pool.close()
    assert not local_starts
    # 'auto' is documented to use the local backend without a daemon: it says so
    monkeypatch.undo()
    monkeypatch.setattr(docker_backend, "daemon_available", lambda: False)
    with caplog.at_level(logging.WARNING, logger="cooplab.sandbox.pool"):
        auto = _pool("auto", dataset)
    assert auto.backend == "local" and not auto.isolated and "LOCAL backend" in caplog.text
    assert auto.run("a", "1 + 1").result.result == "2"
    auto.close()


def test_a_missing_image_is_refused_up_front(monkeypatch, dataset):
    monkeypatch.setattr(docker_backend, "daemon_available", lambda: True)
    monkeypatch.setattr(docker_backend, "image_available", lambda image: False)
    with pytest.raises(SandboxUnavailable, match="missing"):
        _pool("docker", dataset)


@pytest.mark.parametrize(
    "bad", [{"backend": "vm"}, {"warm": -1}, {"warm": 1.5}, {"warm": True}, {"timeout": float("nan")}]
)
def test_bad_pool_arguments_are_refused(bad, dataset):
    kw = {"backend": "local", **bad}
    with pytest.raises((ValueError, TypeError)):
        AgentSandboxPool(SandboxConfig(dataset=dataset), **kw)


@pytest.mark.parametrize("agent", ["", "  ", None, 3])
def test_bad_agent_ids_are_refused(agent, dataset):
    with _pool("local", dataset) as pool, pytest.raises(ValueError, match="agent id"):
        pool.session(agent)


def test_max_call_seconds_bounds_what_a_call_reports(dataset):
    with _pool("local", dataset) as pool:
        bound = pool.max_call_seconds()
        assert bound == 5.0 + 1.0 + 15.0 + pool.config.start_timeout
        assert pool.max_call_seconds(1) < bound
        r = pool.run("a", "import time\ntime.sleep(0.2)\n1", timeout=1)
        assert r.result.status == "ok" and 0.2 <= r.seconds <= pool.max_call_seconds(1)
        with pytest.raises(ValueError):
            pool.max_call_seconds(float("inf"))


@pytest.mark.docker
def test_a_warm_docker_pool_hands_each_agent_its_own_container(docker_ready, dataset):
    with _pool("docker", dataset, warm=2) as pool:
        assert pool._warm is not None and pool._warm.wait_ready(2, timeout=120)
        ids = {pool.session(a).container_id for a in ("x", "y")}
        assert len(ids) == 2 and None not in ids
        assert pool.run("x", "import os\nos.getuid()").result.result == "10001"
        names = [c["Id"] for c in docker_backend.list_sandbox_containers()]
        assert ids <= set(names)
    live = {c["Id"] for c in docker_backend.list_sandbox_containers()}
    assert not ids & live  # closed with the pool


def test_a_warm_sandbox_is_charged_the_seconds_its_start_took(dataset):
    """A sandbox started ahead by the warm pool costs its first call what a cold start would: the
    seconds its start took are added to that call (and only to that one)."""
    with _pool("local", dataset, warm=1) as pool:
        assert pool._warm is not None and pool._warm.wait_ready(1, timeout=120)
        first = pool.run("a", "1 + 1")
        start = pool.session("a").start_seconds
        assert start is not None and start > 0.05  # a worker's imports and the dataset: far above a round trip
        assert first.result.result == "2" and first.seconds >= start
        second = pool.run("a", "2 + 2")
        assert second.seconds < start  # the start is charged once
        assert pool.usage()["a"]["seconds"] >= start


def _recording_starts(monkeypatch):
    """Record every sandbox the warm pool starts: (thread name, transport)."""
    from cooplab.sandbox import session as session_mod

    made: list[tuple[str, object]] = []
    real = session_mod.start_transport

    def start(config, backend):
        t = real(config, backend)
        made.append((threading.current_thread().name, t))
        return t

    monkeypatch.setattr(session_mod, "start_transport", start)
    return made


def test_a_session_takes_the_sandbox_a_fill_is_starting_instead_of_a_second_cold_start(monkeypatch, dataset):
    from cooplab.sandbox.session import SandboxPool

    made = _recording_starts(monkeypatch)
    with SandboxPool(SandboxConfig(dataset=dataset, **FAST), size=1, backend="local") as warm:
        with warm.session() as s:  # asked at once: the pool's first sandbox is still starting
            assert s.run_code("1 + 1").result == "2"
            mine = s._transport
        # the session got the sandbox the pool was starting, not one started in the caller's thread
        assert [name for name, t in made if t is mine] == ["cooplab-sandbox-pool"]
        assert not any(name != "cooplab-sandbox-pool" for name, _ in made)


def test_closing_a_warm_pool_leaves_no_sandbox_starting_or_alive(monkeypatch, dataset):
    from cooplab.sandbox.session import SandboxPool

    made = _recording_starts(monkeypatch)
    warm = SandboxPool(SandboxConfig(dataset=dataset, **FAST), size=2, backend="local")
    warm.close()  # at once: both starts are in progress
    assert not [th for th in threading.enumerate() if th.name == "cooplab-sandbox-pool"]
    assert len(made) == 2
    for _, t in made:
        assert t.proc.poll() is not None  # type: ignore[attr-defined]  # killed, not left running


def test_a_pool_that_knows_its_agents_starts_one_sandbox_each_and_no_spare(monkeypatch, dataset):
    """``expected=3, warm=2``: two sandboxes start ahead, one more when the first agent takes its own,
    and none when the last agents take theirs: three agents, three starts, nothing left for nobody."""
    made = _recording_starts(monkeypatch)
    with _pool("local", dataset, warm=2, expected=3) as pool:
        assert pool._warm is not None and pool._warm.wait_ready(2, timeout=120)
        for agent in ("a", "b", "c"):
            assert pool.run(agent, "1 + 1").result.result == "2"
        assert pool._warm._ready.qsize() == 0 and pool._warm._filling == 0
        assert len(made) == 3 and all(name == "cooplab-sandbox-pool" for name, _ in made)
        # an agent the run did not announce still gets a sandbox (a cold start in its own thread)
        assert pool.run("d", "2 + 2").result.result == "4"
        assert len(made) == 4 and made[-1][0] != "cooplab-sandbox-pool"


def test_a_warm_pool_without_expected_agents_keeps_its_spare(monkeypatch, dataset):
    made = _recording_starts(monkeypatch)
    with _pool("local", dataset, warm=1) as pool:
        assert pool._warm is not None
        pool.run("a", "1")
        assert pool._warm.wait_ready(1, timeout=120)  # refilled: one spare is kept ready
        assert len(made) == 2


@pytest.mark.parametrize("bad", [-1, True, 1.5, "2"])
def test_expected_agents_must_be_a_count(bad, dataset):
    with pytest.raises(ValueError, match="expected must be"):
        _pool("local", dataset, warm=1, expected=bad)
