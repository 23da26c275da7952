"""Cache keys and call ids do not depend on where the checkout or a model file lies (issue 38.0),
and identifiers read back from a run's tables stay text."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

import cooplab
from cooplab.agents.models import parse_model_spec
from cooplab.graphs.rundir import read_table, write_table

from .misbehaving_server import ANSWER


def _keys(cache: Path) -> set[str]:
    db = sqlite3.connect(cache)
    try:
        return {row[0] for row in db.execute("SELECT key FROM responses")}
    finally:
        db.close()


def test_a_scripted_file_is_named_by_its_content_not_by_its_folder(tmp_path):
    first = tmp_path / "clone-a" / "examples" / "answers.json"
    second = tmp_path / "elsewhere" / "deeper" / "still" / "fisher-answers.json"
    for p in (first, second):
        p.parent.mkdir(parents=True)
    first.write_text(json.dumps({"answers": [ANSWER]}))
    shutil.copy(first, second)
    assert parse_model_spec(f"scripted:{first}").identity() == parse_model_spec(f"scripted:{second}").identity()
    runs = {}
    for name, script in (("a", first), ("b", second)):
        runs[name] = cooplab.run(
            task="cpr",
            agents="llm",
            model=f"scripted:{script}",
            n_agents=2,
            rounds=1,
            cache=str(tmp_path / f"{name}.sqlite"),
            out=tmp_path / name,
            quiet=True,
        )
        assert runs[name].status == "completed", runs[name].stopped
        assert (
            json.loads((tmp_path / name / "config.json").read_text())["llm"]["model"] == f"scripted:{script}"
        )  # the path given
    ids = [sorted(runs[n].ledger["call_id"]) for n in "ab"]
    assert ids[0] == ids[1] and len(ids[0]) > 0
    assert _keys(tmp_path / "a.sqlite") == _keys(tmp_path / "b.sqlite")
    # other content, other keys
    second.write_text(json.dumps({"answers": [ANSWER, ANSWER]}))
    assert parse_model_spec(f"scripted:{first}").identity() != parse_model_spec(f"scripted:{second}").identity()


def test_call_ids_read_back_from_a_csv_table_stay_text(tmp_path):
    ids = ["5e41512851534475", "0123456789012345", "00000000000000e1", "a1b2c3d4e5f60718"]
    write_table(
        pd.DataFrame({"call_id": ids, "model": ["1", "2", "3", "4"], "input_tokens": [1, 2, 3, 4]}),
        tmp_path,
        "ledger",
        csv=True,
    )
    back = read_table(tmp_path, "ledger")
    assert back["call_id"].tolist() == ids and back["model"].tolist() == ["1", "2", "3", "4"]
    assert back["input_tokens"].tolist() == [1, 2, 3, 4]


def _ask(svc, round_: int = 1, text: str = "How hard will you fish?"):
    from langchain_core.messages import HumanMessage

    return svc.ask(
        agent=1, society=0, round=round_, phase="harvest", messages=[HumanMessage(content=text)], schema=None, attempt=0
    )


def test_the_same_call_asked_twice_in_a_run_is_two_calls_and_two_cache_entries(tmp_path):
    """A model asked the same prompt twice answers twice (a sampling model may answer differently);
    the cache keeps both answers, a rerun replays both in order, and the first keeps the key it
    always had (caches written before stay valid)."""
    import asyncio

    from cooplab.agents.cache import ResponseCache, cache_key
    from cooplab.graphs.ledger import Ledger

    from ._support import service

    path = tmp_path / "c.sqlite"

    async def first_run():
        svc = service(['{"effort": 0.1}', '{"effort": 0.9}'], cache=ResponseCache(path))
        a, b = await _ask(svc), await _ask(svc)
        return svc, a, b

    svc, a, b = asyncio.run(first_run())
    assert (
        (a.response.text, b.response.text) == ('{"effort": 0.1}', '{"effort": 0.9}') and not a.cached and not b.cached
    )
    assert a.entry is not None and b.entry is not None
    assert svc.live_calls == 2 and a.entry.call_id != b.entry.call_id
    spec = svc.model_for(1)[0]
    old = cache_key(
        model=spec.identity(),
        messages=[("human", "How hard will you fish?")],
        agent="0:1",
        round=1,
        phase="harvest",
        seed=0,
        attempt=0,
        schema=None,
    )
    assert _keys(path) == {old, cache_key(repeat_of=old, repeat=1)}

    async def rerun(ledger=None):
        svc = service([], cache=ResponseCache(path), ledger=ledger)  # no answers: a live call would fail
        return svc, [await _ask(svc) for _ in range(2 if ledger is None else 1)]

    again, replies = asyncio.run(rerun())
    assert [r.response.text for r in replies] == ['{"effort": 0.1}', '{"effort": 0.9}'] and all(
        r.cached for r in replies
    )
    assert again.live_calls == 0
    # a resumed run whose checkpoint holds the first asking: its next asking is the repeat
    resumed, [r] = asyncio.run(rerun(Ledger(entries=[svc.ledger.entries[0]])))  # restored from its dict
    assert r.response.text == '{"effort": 0.9}' and r.cached and resumed.live_calls == 0


def test_a_fork_s_prefix_replays_from_the_cache_or_names_the_missing_call(tmp_path):
    """Calls of rounds 1..K of a fork (LLMService.replay_only_through = K) are answered by the cache
    or refused, never made; a call after K is made as usual."""
    import asyncio

    from cooplab.agents.cache import ResponseCache
    from cooplab.agents.calls import PrefixCacheMiss

    from ._support import service

    path = tmp_path / "c.sqlite"

    async def go():
        parent = service(['{"effort": 0.3}'], cache=ResponseCache(path))
        await _ask(parent)
        fork = service(['{"effort": 0.7}'], cache=ResponseCache(path))
        fork.replay_only_through = 2
        hit = await _ask(fork)
        with pytest.raises(PrefixCacheMiss) as miss:
            await _ask(fork, round_=2, text="Another question")
        calls_then = fork.live_calls
        after = await _ask(fork, round_=3, text="Another question")
        return hit, miss.value, calls_then, after

    hit, miss, calls_then, after = asyncio.run(go())
    assert hit.cached and hit.response.text == '{"effort": 0.3}'
    line = str(miss)
    assert "0:1" in line and "round 2" in line and "'harvest'" in line and miss.call_id in line and "\n" not in line
    assert calls_then == 0  # refused, not made
    assert not after.cached and after.response.text == '{"effort": 0.7}'
