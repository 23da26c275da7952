"""A rerun answers the agents' ``run_code`` calls from the response cache (sandbox/replay.py).

The unit tests drive :class:`ReplayingSandboxPool` over a stand-in pool that runs each agent's code
in its own namespace (so a catch-up that skipped or reordered code shows up as a wrong value) and
counts what it ran, with a real :class:`ResponseCache` file. The last test runs a science team
twice through ``cooplab.run`` on the local sandbox and checks the rerun started no sandbox."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest

import cooplab
from cooplab.agents.cache import ResponseCache
from cooplab.sandbox import ExecResult, SandboxConfig
from cooplab.sandbox.pool import SandboxCall
from cooplab.sandbox.replay import ReplayingSandboxPool, call_key, decode, encode, scope_of


class Namespaces:
    """A pool whose sandboxes are dicts: ``run`` executes the code in the agent's dict and returns
    the value of ``out``; the code ``hang`` answers as a timed-out call (its sandbox restarted)."""

    backend = "local"

    def __init__(self, tmp: Path) -> None:
        data = tmp / "data.csv"
        data.write_text("a,b\n1,2\n")
        self.config = SandboxConfig(dataset=data)
        self.spaces: dict[str, dict] = {}
        self.ran: list[tuple[str, str]] = []
        self.closed = False

    def agents(self) -> list[str]:
        return sorted(self.spaces)

    def max_call_seconds(self, timeout=None) -> float:
        return 40.0

    def discard(self, agent_id: str) -> None:
        self.spaces.pop(agent_id, None)

    def session(self, agent_id: str):
        class S:
            start_seconds = 0.5

        return S()

    def run(self, agent_id: str, code: str, timeout=None) -> SandboxCall:
        first = agent_id not in self.spaces
        space = self.spaces.setdefault(agent_id, {})
        self.ran.append((agent_id, code))
        if code == "hang":
            self.spaces[agent_id] = {}
            return SandboxCall(agent_id, ExecResult(status="timeout", state_reset=True), 40.0, "local")
        try:
            exec(code, space)  # the tests' own strings
            result = ExecResult(status="ok", result=repr(space.get("out")), figures=[b"\x89PNG" + code.encode()])
        except Exception as exc:  # noqa: BLE001
            result = ExecResult(status="error", stderr=f"{type(exc).__name__}: {exc}")
        return SandboxCall(agent_id, result, 0.25 + (0.5 if first else 0.0), "local")

    def close(self) -> None:
        self.closed = True


def _pool(tmp: Path, cache: ResponseCache, seed: int = 0) -> tuple[ReplayingSandboxPool, Namespaces]:
    inner = Namespaces(tmp)
    pool = ReplayingSandboxPool.wrap(inner, cache, seed)
    assert isinstance(pool, ReplayingSandboxPool)
    return pool, inner


def _results(pool, calls) -> list[tuple[str, str | None, float]]:
    out = []
    for agent, code in calls:
        c = pool.run(agent, code)
        out.append((c.result.status, c.result.result, c.seconds))
    return out


SESSION = [("a", "x = 2"), ("b", "x = 10"), ("a", "x = x * 3; out = x"), ("b", "out = x + 1")]


def test_a_rerun_runs_no_code_and_gets_every_result_and_charge_of_the_first(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    first, inner1 = _pool(tmp_path, cache)
    got1 = _results(first, SESSION)
    assert got1[2][:2] == ("ok", "6") and got1[3][:2] == ("ok", "11")
    assert len(inner1.ran) == 4 and first.stats() == {"sandbox_replayed": 0, "sandbox_executed": 4}

    again, inner2 = _pool(tmp_path, cache)
    got2 = _results(again, SESSION)
    assert got2 == got1  # the same results, and the same seconds charged (the start included)
    assert inner2.ran == [] and again.stats() == {"sandbox_replayed": 4, "sandbox_executed": 0}
    figures = again.run("a", "out = 0").result  # a miss after hits: run for real, figures kept
    assert inner2.ran[-1] == ("a", "out = 0") and figures.figures == [b"\x89PNG" + b"out = 0"]
    again.close()
    assert inner2.closed


def test_a_rerun_that_takes_another_path_catches_the_sandbox_up_in_order_and_charges_only_the_new_call(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    first, _ = _pool(tmp_path, cache)
    _results(first, SESSION)
    again, inner = _pool(tmp_path, cache)
    _results(again, SESSION[:3])  # all answered from the cache
    assert inner.ran == []
    c = again.run("a", "out = x + 100")  # not stored: a's sandbox runs a's two calls first, then this one
    assert c.result.result == "106"
    assert inner.ran == [("a", "x = 2"), ("a", "x = x * 3; out = x"), ("a", "out = x + 100")]
    assert c.seconds == pytest.approx(0.25 + 0.5)  # its own seconds and the start its catch-up paid; not the catch-up
    c = again.run("a", "out = x - 1")  # the sandbox is live now: no second catch-up
    assert c.result.result == "5" and inner.ran[-1] == ("a", "out = x - 1") and len(inner.ran) == 4
    assert again.run("b", "out = x + 1").result.result == "11"  # b's own chain still replays
    assert len(inner.ran) == 4


def test_a_key_holds_the_whole_history_the_agent_the_seed_and_the_data(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    first, _ = _pool(tmp_path, cache)
    _results(first, [("a", "x = 1"), ("a", "out = x")])
    # the same last code after another first one: not the stored call
    other, inner = _pool(tmp_path, cache)
    assert other.run("a", "x = 5").result.status == "ok" and other.run("a", "out = x").result.result == "5"
    # another agent, another seed: run
    assert _pool(tmp_path, cache)[0].run("z", "x = 1") and _pool(tmp_path, cache, seed=1)[0].run("a", "x = 1")
    config = SandboxConfig(dataset=tmp_path / "data.csv")
    s = scope_of(config, "local", 0)
    assert s is not None and s != scope_of(config, "local", 1)
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    (moved / "data.csv").write_bytes((tmp_path / "data.csv").read_bytes())
    assert scope_of(SandboxConfig(dataset=moved / "data.csv"), "local", 0) == s  # the folder is not in the key
    (moved / "data.csv").write_text("a,b\n1,3\n")
    assert scope_of(SandboxConfig(dataset=moved / "data.csv"), "local", 0) != s  # the data is
    assert scope_of(config.with_overrides(memory="1g"), "local", 0) != s
    assert call_key(s, "a", "", "x", None) != call_key(s, "a", "", "x", 5.0)


def test_a_replayed_timeout_empties_what_a_later_catch_up_runs(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    first, _ = _pool(tmp_path, cache)
    got = _results(first, [("a", "x = 1"), ("a", "hang"), ("a", "y = 2"), ("a", "out = 'x' in globals()")])
    assert got[1][0] == "timeout" and got[3][1] == "False"
    again, inner = _pool(tmp_path, cache)
    _results(again, [("a", "x = 1"), ("a", "hang"), ("a", "y = 2")])
    assert again.run("a", "out = ('x' in globals(), y)").result.result == "(False, 2)"
    assert inner.ran == [("a", "y = 2"), ("a", "out = ('x' in globals(), y)")]  # nothing before the reset


def test_a_replayed_timeout_throws_away_a_sandbox_that_still_holds_lost_variables(tmp_path):
    """A call that could not be stored (a lost write) makes the rerun run it, and the calls after
    it replay again; a replayed timeout then means the live sandbox holds what the first lost."""
    cache = ResponseCache(tmp_path / "c.sqlite")
    first, _ = _pool(tmp_path, cache)
    calls = [("a", "x = 1"), ("a", "hang"), ("a", "out = 'x' in globals()")]
    _results(first, calls)
    s = first._scope
    lost = call_key(s, "a", "", "x = 1", None)
    with sqlite3.connect(tmp_path / "c.sqlite") as db:  # the row's write was lost
        db.execute("DELETE FROM sandbox_calls WHERE key = ?", (lost,))
    again, inner = _pool(tmp_path, cache)
    _results(again, calls[:2])  # x = 1 runs for real; hang replays (no 40 s wait)
    assert inner.ran == [("a", "x = 1")] and inner.spaces["a"] == {
        "x": 1,
        "__builtins__": inner.spaces["a"]["__builtins__"],
    }
    assert again.run("a", "out = 'x' in globals()").result.result == "False"  # replayed, as stored
    assert again.run("a", "out = ('x' in globals(), 7)").result.result == "(False, 7)"  # live, in a fresh sandbox


@pytest.mark.parametrize(
    "value",
    [
        "not json",
        "[]",
        json.dumps({"result": {"status": "ok"}, "seconds": float("nan")}),
        json.dumps({"result": {"status": "ok"}, "seconds": -1}),
        json.dumps({"result": {"status": "ok"}, "seconds": 1e9}),
        json.dumps({"result": {"status": "ok"}, "seconds": True}),
        json.dumps({"result": {"status": "maybe"}, "seconds": 1}),
        json.dumps({"result": {"status": "ok", "figures": ["%%%"]}, "seconds": 1}),
        json.dumps({"result": {"status": "ok", "figures": [1]}, "seconds": 1}),
        json.dumps({"result": {"status": "ok", "stdout": ["x"]}, "seconds": 1}),
    ],
)
def test_a_damaged_or_foreign_row_is_run_again_never_answered(tmp_path, value):
    assert decode(value, 40.0) is None
    cache = ResponseCache(tmp_path / "c.sqlite")
    first, _ = _pool(tmp_path, cache)
    first.run("a", "out = 1")
    with sqlite3.connect(tmp_path / "c.sqlite") as db:
        db.execute("UPDATE sandbox_calls SET value = ?", (value,))
    again, inner = _pool(tmp_path, cache)
    assert again.run("a", "out = 1").result.result == "1" and inner.ran == [("a", "out = 1")]


def test_stored_results_round_trip_and_a_cache_off_or_foreign_table_keeps_nothing(tmp_path):
    r = ExecResult(status="error", stdout="é\n", figures=[b"\x89PNG\x00\xff"], state_reset=True, truncated=True)
    assert decode(encode(r, 1.5), 40.0) == (r, 1.5)
    inner = Namespaces(tmp_path)
    assert ReplayingSandboxPool.wrap(inner, ResponseCache(None), 0) is inner
    assert ReplayingSandboxPool.wrap(None, ResponseCache(tmp_path / "x.sqlite"), 0) is None
    foreign = tmp_path / "foreign.sqlite"
    with sqlite3.connect(foreign) as db:
        db.execute("CREATE VIEW sandbox_calls AS SELECT 1 AS key, 2 AS value")
    cache = ResponseCache(foreign)
    pool, inner = _pool(tmp_path, cache)
    pool.run("a", "out = 1")
    pool2, inner2 = _pool(tmp_path, cache)
    assert pool2.run("a", "out = 1").result.result == "1" and inner2.ran == [("a", "out = 1")]


def test_calls_of_one_agent_in_flight_together_keep_their_order_on_a_rerun(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    codes = [f"x = {i}; out = x" for i in range(6)]

    async def together(pool):
        return await asyncio.gather(*(pool.arun("a", c) for c in codes))

    first, inner = _pool(tmp_path, cache)
    asyncio.run(together(first))
    assert [c for _, c in inner.ran] == codes
    again, inner2 = _pool(tmp_path, cache)
    got = asyncio.run(together(again))
    assert [g.result.result for g in got] == [str(i) for i in range(6)] and inner2.ran == []


def test_a_science_rerun_starts_no_sandbox_and_charges_what_the_first_run_charged(tmp_path):
    kw = dict(
        task="science",
        agents="llm",
        team="oracle",
        sandbox_backend="local",
        seed=5,
        quiet=True,
        cache=str(tmp_path / "cache.sqlite"),
        sandbox_rate=0.01,
        set=["data_size=small"],
    )
    first = cooplab.run(out=tmp_path / "first", **kw)
    again = cooplab.run(out=tmp_path / "again", **kw)
    s1 = json.loads((tmp_path / "first" / "summary.json").read_text())
    s2 = json.loads((tmp_path / "again" / "summary.json").read_text())
    assert s1["llm"]["sandbox_executed"] > 0 and s1["llm"]["sandbox_replayed"] == 0
    assert s2["llm"]["sandbox_replayed"] == s1["llm"]["sandbox_executed"] and s2["llm"]["sandbox_executed"] == 0
    assert s2["ledger"]["by_kind"]["sandbox_seconds"] == s1["ledger"]["by_kind"]["sandbox_seconds"]
    assert float(s1["ledger"]["by_kind"]["sandbox_seconds"]["cost_usd"]) > 0  # charged at a rate, identically
    assert again.summary.results.scores == first.summary.results.scores

    def calls(run: str) -> list[dict]:
        rows = [json.loads(x) for x in (tmp_path / run / "sandbox_calls.jsonl").read_text().splitlines()]
        return [{k: v for k, v in r.items() if k != "duration"} for r in rows]

    assert calls("again") == calls("first")
