"""The LLM agent layer with scripted models: structured decisions, retries and fallbacks,
transport errors, the response cache, and the credit ledger under concurrency."""

import asyncio
import json
from decimal import Decimal
from typing import TypeVar

import pytest
from langchain_core.messages import BaseMessage, HumanMessage
from pydantic import BaseModel, Field

from cooplab.agents.cache import ResponseCache, cache_key
from cooplab.agents.decisions import (
    DecisionRecord,
    DecisionSpec,
    LLMService,
    ModelUnavailable,
    decide,
    parse_json,
)
from cooplab.agents.models import (
    ModelSpec,
    ModelSpecError,
    ScriptedChatModel,
    parse_model_spec,
)
from cooplab.agents.usage import count_tokens
from cooplab.graphs.ledger import BudgetExhausted, Ledger, Rates
from cooplab.tasks.cpr.llm import EFFORT

D = TypeVar("D", bound=BaseModel)


class Target(BaseModel):
    target: int | None = Field(description="id of the peer to punish, or null")


def _check_target(v: Target, ctx):
    if v.target is not None and v.target not in ctx["peers"]:
        raise ValueError(f"target {v.target} is not one of the peers shown {ctx['peers']}")


TARGET = DecisionSpec(
    phase="punish", schema=Target, check=_check_target, fallback=lambda ctx: Target(target=None), max_attempts=3
)


def service(answers, **kw):
    spec = ModelSpec("scripted", "test", max_tokens=32)
    model = ScriptedChatModel(answers=answers)
    svc = LLMService(models={"default": (spec, model)}, backoff_base=0.001, **kw)
    return svc, model


def ask(svc, spec: DecisionSpec[D] = EFFORT, ctx=None, agent=0, round_=1) -> tuple[D | None, DecisionRecord]:
    msgs: list[BaseMessage] = [HumanMessage(content=f"decide, agent {agent}, round {round_}")]
    return asyncio.run(
        decide(svc, spec, msgs, society=0, agent=agent, round=round_, ctx=ctx or {"previous_effort": 0.25})
    )


@pytest.mark.parametrize(
    "bad,why",
    [
        ('{"effort": 0.3', "malformed"),
        ('{"effort": 1.5}', "less than or equal to 1"),
        ('{"effort": -0.1}', "greater than or equal to 0"),
        ('{"effort": "lots"}', "effort"),
        ("", "empty"),
        ("I'm sorry, but I can't help with deciding how much to fish.", "no JSON"),
        ('["effort", 0.3]', "JSON object"),
    ],
)
def test_invalid_answer_is_retried_with_the_error_fed_back(bad, why):
    svc, model = service([bad, '{"effort": 0.6}'])
    value, rec = ask(svc)
    assert value is not None and value.effort == 0.6 and rec.attempts == 2 and not rec.fallback_used
    assert rec.error is None and rec.raw == '{"effort": 0.6}'
    # the second call saw the bad answer and the validation error
    svc2, _ = service([bad] * 3)
    value2, rec2 = ask(svc2)
    assert value2 is not None and rec2.error is not None
    assert rec2.fallback_used and rec2.attempts == 3 and value2.effort == 0.25  # documented fallback: previous effort
    assert why.lower() in rec2.error.lower()


def test_feedback_message_contains_the_validation_error():
    seen = []

    class Spy(ScriptedChatModel):
        def _answer(self, messages, kwargs):
            seen.append([str(m.content) for m in messages])
            return super()._answer(messages, kwargs)

    spec = ModelSpec("scripted", "spy")
    svc = LLMService(models={"default": (spec, Spy(answers=['{"effort": 2}', '{"effort": 0.5}']))})
    ask(svc)
    assert len(seen) == 2 and len(seen[1]) == 3
    assert seen[1][1] == '{"effort": 2}' and "invalid" in seen[1][2] and "less than or equal to 1" in seen[1][2]


def test_ids_must_exist_among_the_peers_shown():
    svc, _ = service(['{"target": 7}', '{"target": 2}'])
    value, rec = ask(svc, TARGET, {"peers": [1, 2, 3]})
    assert value is not None and value.target == 2 and rec.attempts == 2
    svc, _ = service(['{"target": 9}'] * 3)
    value, rec = ask(svc, TARGET, {"peers": [1, 2, 3]})
    assert value is not None and rec.error is not None
    assert value.target is None and rec.fallback_used and "not one of the peers" in rec.error


def test_json_inside_prose_is_accepted():
    assert parse_json('Sure! Here it is: ```json\n{"effort": 0.4}\n``` hope it helps') == {"effort": 0.4}


def test_transient_transport_errors_are_retried_then_succeed():
    svc, _ = service([{"error": "timeout"}, {"error": "429"}, {"error": "500"}, '{"effort": 0.7}'])
    value, rec = ask(svc)
    assert value is not None and value.effort == 0.7 and rec.attempts == 1
    assert svc.ledger.totals()["calls"] == 1  # failed transport attempts are not charged


def test_persistent_transport_failure_raises_model_unavailable_and_releases_reservations():
    svc, _ = service([{"error": "connection"}], max_transport_retries=3)
    with pytest.raises(ModelUnavailable, match="unreachable after 4 attempts"):
        ask(svc)
    assert svc.ledger.in_flight == 0 and svc.ledger.spent == 0


def test_tokens_recorded_for_every_call_and_charged_exactly():
    svc, _ = service(['{"effort": 0.3}'])
    _, rec = ask(svc)
    (entry,) = svc.ledger.entries
    assert entry.input_tokens > 0 and entry.output_tokens == count_tokens('{"effort": 0.3}')
    expected = (
        Decimal(entry.input_tokens) * Decimal("0.0005") / 1000 + Decimal(entry.output_tokens) * Decimal("0.003") / 1000
    )
    assert Decimal(entry.cost) == expected and Decimal(rec.cost) == expected


def test_cache_replays_without_calling_the_model(tmp_path):
    calls = {"n": 0}

    class Counting(ScriptedChatModel):
        def _answer(self, messages, kwargs):
            calls["n"] += 1
            return super()._answer(messages, kwargs)

    spec = ModelSpec("scripted", "c")

    def run():
        svc = LLMService(
            models={"default": (spec, Counting(answers=['{"effort": 0.3}', '{"effort": 0.9}']))},
            cache=ResponseCache(tmp_path / "c.sqlite"),
        )
        out = []
        for a in range(4):
            value, _ = ask(svc, agent=a)
            assert value is not None
            out.append(value.effort)
        svc.cache.close()
        return out, svc

    first, svc1 = run()
    n_first = calls["n"]
    second, svc2 = run()
    assert n_first == 4 and calls["n"] == 4  # the rerun made no model call
    assert first == second
    assert svc2.ledger.totals()["cached_calls"] == 4 and svc2.ledger.spent == svc1.ledger.spent


def test_cache_key_depends_on_every_part():
    base = dict(
        model={"model": "m", "temperature": 0.7},
        messages=[("human", "x")],
        agent="0:1",
        round=1,
        phase="harvest",
        seed=0,
        attempt=0,
    )
    k = cache_key(**base)
    assert k == cache_key(**dict(base))
    for field, other in [
        ("agent", "0:2"),
        ("round", 2),
        ("phase", "punish"),
        ("seed", 1),
        ("attempt", 1),
        ("messages", [("human", "y")]),
        ("model", {"model": "m", "temperature": 0.8}),
    ]:
        assert cache_key(**{**base, field: other}) != k, field


def test_concurrent_charging_never_overspends_beyond_in_flight_reservations():
    # 200 concurrent calls with latency against a budget that covers only some of them
    spec = ModelSpec("scripted", "b", max_tokens=10)
    model = ScriptedChatModel(answers=['{"effort": 0.5}'], latency=0.005)
    ledger = Ledger(budget=Decimal("0.003"))
    svc = LLMService(models={"default": (spec, model)}, ledger=ledger, max_concurrency=50)
    peak = {"v": Decimal(0)}

    async def one(i):
        try:
            r = await decide(
                svc,
                EFFORT,
                [HumanMessage(content=f"agent {i} decide now")],
                society=0,
                agent=i,
                round=1,
                ctx={"previous_effort": 0.1},
            )
            peak["v"] = max(peak["v"], ledger.spent + ledger.in_flight)
            return r
        except BudgetExhausted:
            return None

    async def main():
        return await asyncio.gather(*(one(i) for i in range(200)))

    results = asyncio.run(main())
    done = [r for r in results if r is not None]
    refused = len(results) - len(done)
    assert 0 < len(done) < 200 and refused > 0
    assert ledger.budget is not None and ledger.spent <= ledger.budget and peak["v"] <= ledger.budget
    assert ledger.in_flight == 0
    # the sum of charges equals recorded tokens times rates, to the cent and below
    total = sum(
        Decimal(e.input_tokens) * Decimal("0.0005") / 1000 + Decimal(e.output_tokens) * Decimal("0.003") / 1000
        for e in ledger.entries
    )
    assert total == ledger.spent == sum(Decimal(e.cost) for e in ledger.entries)


def test_per_model_rates():
    ledger = Ledger(rates={"openai:big": Rates(Decimal("0.01"), Decimal("0.03"))})
    assert ledger.cost("openai:big", 1000, 1000) == Decimal("0.04")
    assert ledger.cost("local:x", 1000, 1000) == Decimal("0.0035")


def test_model_spec_parsing(tmp_path):
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"answers": ["{}"]}))
    assert parse_model_spec(f"scripted:{f}").kind == "scripted"
    s = parse_model_spec("openai:gpt-4o-mini", base_url="http://127.0.0.1:9/v1")
    assert s.kind == "openai" and s.name == "gpt-4o-mini" and s.base_url
    for bad in ("gpt-4", "openai:", f"scripted:{tmp_path / 'missing.json'}"):
        with pytest.raises(ModelSpecError):
            parse_model_spec(bad)


def test_scripted_prompt_hash_selection_is_order_free():
    m = ScriptedChatModel(answers=["a", "b", "c", "d"], select="prompt_hash")
    first = [m.invoke([HumanMessage(content=f"p{i}")]).content for i in range(6)]
    m2 = ScriptedChatModel(answers=["a", "b", "c", "d"], select="prompt_hash")
    second = [m2.invoke([HumanMessage(content=f"p{i}")]).content for i in reversed(range(6))]
    assert first == list(reversed(second))


def test_a_kept_token_count_is_the_count():
    """Counts of texts up to COUNT_MEMO_CHARS are kept; every text, kept or not, counts its words and
    punctuation marks, asked once or again, and the memo stays bounded."""
    from cooplab.agents import usage as U

    short = "You are one of 10 fishers, sharing a lake: fish (or not)!"
    assert count_tokens(short) == count_tokens(short) == 17
    long = "word, " * (U.COUNT_MEMO_CHARS // 6 + 10)  # beyond the memo: counted each time
    assert len(long) > U.COUNT_MEMO_CHARS and count_tokens(long) == 2 * long.count(",")
    edge = "a" * U.COUNT_MEMO_CHARS
    assert count_tokens(edge) == 1 and count_tokens(edge + " b") == 2
    assert count_tokens("") == 0 and count_tokens(None) == 0  # type: ignore[arg-type]
    for i in range(3000):
        count_tokens(f"text number {i}.")
    assert U._kept_count.cache_info().currsize <= 1024
    with pytest.raises(TypeError):
        count_tokens(["not", "text"])  # type: ignore[arg-type]
