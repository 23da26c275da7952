"""Each layer of the model call path alone (``agents/calls.py``), then their order in CallPath.

Layers are driven with stub inner layers, a fake clock and a fake sleep (what the layer asked to
wait is recorded; nothing waits on the wall clock)."""

from __future__ import annotations

import asyncio
import math
from decimal import Decimal

import httpx
import httpx2
import openai
import pytest
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from cooplab.agents.cache import CachedResponse, ResponseCache
from cooplab.agents.calls import (
    AdapterLayer,
    BudgetLayer,
    CacheLayer,
    CallPath,
    EndpointFailure,
    LlamaAdapter,
    ModelUnavailable,
    ProviderAdapter,
    RateLimitLayer,
    Reply,
    Request,
    RetryLayer,
    ScriptedAdapter,
    adapter_type,
)
from cooplab.agents.models import (
    EndpointResponseError,
    LlamaCppChat,
    ModelSpec,
    ScriptedChatModel,
    TransientModelError,
    make_chat_model,
)
from cooplab.graphs.ledger import BudgetExhausted, Ledger

from ._support import RecordingLedger

SPEC = ModelSpec("scripted", "layers", max_tokens=16)
KEY = "ab12" * 16
IN_BOUND, OUT_BOUND = 200, 16


def request(model=None, *, key: str = KEY, agent: str = "0:1", spec: ModelSpec = SPEC, **kw) -> Request:
    model = model if model is not None else ScriptedChatModel(answers=["ok"])
    return Request(
        spec,
        adapter_type(model)(spec, model),
        model,
        key,
        [HumanMessage(content="decide")],
        kw.pop("kwargs", {}),
        kw.pop("input_bound", IN_BOUND),
        kw.pop("output_bound", OUT_BOUND),
        agent,
        3,
        "harvest",
        **kw,
    )


def reply(text: str = "ok", i: int = 20, o: int = 4, error: str | None = None) -> Reply:
    return Reply(CachedResponse(text, i, o, 0.01, error))


class Inner:
    """A stub inner layer: answers ``replies`` in turn (an exception is raised), records requests."""

    def __init__(self, *replies, gate: asyncio.Event | None = None):
        self.replies, self.gate = list(replies) or [reply()], gate
        self.seen: list[Request] = []
        self.inside = self.peak = 0

    async def __call__(self, request: Request) -> Reply:
        self.seen.append(request)
        self.inside += 1
        self.peak = max(self.peak, self.inside)
        try:
            if self.gate is not None:
                await self.gate.wait()
            r = self.replies[min(len(self.seen), len(self.replies)) - 1]
            if isinstance(r, BaseException):
                raise r
            return Reply(r.response)  # a fresh reply: layers set its entry
        finally:
            self.inside -= 1


class FakeTime:
    """A monotonic clock that only moves when told; ``sleep`` records the wait (and, with
    ``advance``, moves the clock by it)."""

    def __init__(self, advance: bool = True):
        self.now, self.advance = 0.0, advance
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        if self.advance:
            self.now += seconds
        await asyncio.sleep(0)


def cost(i: int, o: int) -> Decimal:
    return Ledger().cost(SPEC.id, i, o)


# --- cache ---------------------------------------------------------------------------------------
def test_a_cache_hit_replays_without_the_inner_layers_charged_its_stored_usage_unreserved(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    cache.put(KEY, CachedResponse("stored", 11, 3, 0.25), SPEC.id)
    ledger = RecordingLedger()
    inner = Inner(RuntimeError("the inner layers must not run on a hit"))
    layer = CacheLayer(inner, cache, BudgetLayer(inner, ledger).charge_known)
    r = asyncio.run(layer(request()))
    assert inner.seen == [] and ledger.reservations == []
    assert r.cached and (r.response.text, r.response.input_tokens, r.response.output_tokens) == ("stored", 11, 3)
    assert r.entry is not None
    assert r.entry.cached and (r.entry.input_tokens, r.entry.output_tokens) == (11, 3) and ledger.spent == cost(11, 3)
    assert ledger.entries == [r.entry] and r.entry.call_id == KEY[:16] and r.entry.agent == "0:1"


def test_a_replay_that_does_not_fit_the_cap_is_refused_and_records_nothing(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    cache.put(KEY, CachedResponse("stored", 100, 10, 0.0), SPEC.id)
    ledger = Ledger(budget=cost(100, 10) - Decimal("0.000001"))
    inner = Inner()
    with pytest.raises(BudgetExhausted):
        asyncio.run(CacheLayer(inner, cache, BudgetLayer(inner, ledger).charge_known)(request()))
    assert inner.seen == [] and ledger.entries == [] and ledger.spent == 0


@pytest.mark.parametrize("stored", [(10**9, 3), (-5, 3), (11, 10**6)])
def test_a_damaged_cache_row_is_charged_at_the_bounds_and_flagged(tmp_path, stored):
    cache = ResponseCache(tmp_path / "c.sqlite")
    input_tokens, output_tokens = stored
    cache.put(KEY, CachedResponse("stored", input_tokens, output_tokens, 0.0), SPEC.id)
    ledger = Ledger()
    r = asyncio.run(CacheLayer(Inner(), cache, BudgetLayer(Inner(), ledger).charge_known)(request()))
    assert r.entry is not None and r.entry.usage_error is not None
    assert (r.entry.input_tokens, r.entry.output_tokens) == (IN_BOUND, OUT_BOUND)
    assert r.entry.usage_error.startswith("the cache:") and r.response.usage_error == r.entry.usage_error


def test_a_miss_runs_the_inner_layers_once_then_replays(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    ledger = Ledger()
    inner = Inner(reply("fresh", 20, 4))
    budget = BudgetLayer(inner, ledger)
    layer = CacheLayer(budget, cache, budget.charge_known)
    first = asyncio.run(layer(request()))
    second = asyncio.run(layer(request()))
    assert len(inner.seen) == 1 and not first.cached and second.cached
    assert second.response.text == "fresh" and [e.cached for e in ledger.entries] == [False, True]
    assert ledger.spent == 2 * cost(20, 4)


def test_a_failed_call_is_not_cached(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    layer = CacheLayer(Inner(RuntimeError("down")), cache, BudgetLayer(Inner(), Ledger()).charge_known)
    with pytest.raises(RuntimeError):
        asyncio.run(layer(request()))
    assert cache.get(KEY) is None


# --- budget --------------------------------------------------------------------------------------
def test_the_budget_reserves_the_bound_charges_the_usage_and_releases_the_rest():
    ledger = RecordingLedger(budget=Decimal("1"))
    during = []

    class Watch(Inner):
        async def __call__(self, request):
            during.append((ledger.in_flight, ledger.spent))
            return await super().__call__(request)

    r = asyncio.run(BudgetLayer(Watch(reply("x", 20, 4)), ledger)(request(team="data")))
    assert ledger.reservations == [cost(IN_BOUND, OUT_BOUND)] and during == [(cost(IN_BOUND, OUT_BOUND), 0)]
    assert ledger.in_flight == 0 and ledger.spent == cost(20, 4) < cost(IN_BOUND, OUT_BOUND)
    e = r.entry
    assert e is not None
    assert (e.call_id, e.model, e.agent, e.round, e.phase, e.team, e.cached) == (
        KEY[:16],
        SPEC.id,
        "0:1",
        3,
        "harvest",
        "data",
        False,
    )


def test_the_budget_releases_the_reservation_when_the_call_fails():
    ledger = Ledger(budget=Decimal("1"))
    with pytest.raises(ModelUnavailable):
        asyncio.run(BudgetLayer(Inner(ModelUnavailable("down")), ledger)(request()))
    assert ledger.in_flight == 0 and ledger.spent == 0 and ledger.entries == []


def test_the_budget_refuses_a_call_whose_bound_does_not_fit_before_calling():
    ledger = Ledger(budget=cost(IN_BOUND, OUT_BOUND) - Decimal("0.000001"))
    inner = Inner()
    with pytest.raises(BudgetExhausted):
        asyncio.run(BudgetLayer(inner, ledger)(request()))
    assert inner.seen == [] and ledger.in_flight == 0 and ledger.entries == []


def test_concurrent_calls_never_hold_more_than_the_cap():
    bound = cost(IN_BOUND, OUT_BOUND)
    ledger = RecordingLedger(budget=3 * bound + bound / 2)  # room for three reservations, not four

    async def main():
        gate = asyncio.Event()
        inner = Inner(reply("x", 20, 4), gate=gate)
        layer = BudgetLayer(inner, ledger)
        tasks = [asyncio.create_task(layer(request(agent=f"0:{i}"))) for i in range(10)]
        await asyncio.sleep(0)
        inside, held = inner.inside, ledger.in_flight
        gate.set()
        out = await asyncio.gather(*tasks, return_exceptions=True)
        return inside, held, out, inner

    inside, held, out, inner = asyncio.run(main())
    refused = [r for r in out if isinstance(r, BudgetExhausted)]
    assert inside == 3 and held == 3 * bound and len(refused) == 7 and len(inner.seen) == 3
    assert ledger.budget is not None
    assert ledger.peak <= ledger.budget and ledger.in_flight == 0 and ledger.spent == 3 * cost(20, 4)
    # the charged calls freed the rest of their reservations: a new call fits again
    assert asyncio.run(BudgetLayer(Inner(), ledger)(request())).entry is not None


# --- rate limit -------------------------------------------------------------------------------------
def test_call_starts_are_spaced_by_one_over_rps_on_the_clock():
    t = FakeTime(advance=True)
    starts = []

    class Stamp(Inner):
        async def __call__(self, request):
            starts.append(t.now)
            return await super().__call__(request)

    layer = RateLimitLayer(Stamp(), max_concurrency=8, rps=4, clock=t.clock, sleep=t.sleep)

    async def main():
        await layer(request())  # t = 0: no wait
        t.now += 0.1
        await layer(request())  # due at 0.25
        await layer(request())  # due at 0.5
        t.now = 2.0  # idle: the bucket does not save up starts
        await layer(request())
        await layer(request())

    asyncio.run(main())
    assert starts == pytest.approx([0.0, 0.25, 0.5, 2.0, 2.25])
    assert t.sleeps == pytest.approx([0.15, 0.25, 0.25])


def test_concurrent_starts_are_queued_one_interval_apart():
    t = FakeTime(advance=False)
    layer = RateLimitLayer(Inner(), max_concurrency=8, rps=4, clock=t.clock, sleep=t.sleep)

    async def main():
        await asyncio.gather(*(layer(request()) for _ in range(5)))

    asyncio.run(main())
    assert sorted(t.sleeps) == pytest.approx([0.25, 0.5, 0.75, 1.0])  # the first starts at once


def test_no_rate_means_no_wait():
    t = FakeTime()
    asyncio.run(RateLimitLayer(Inner(), max_concurrency=2, rps=None, clock=t.clock, sleep=t.sleep)(request()))
    assert t.sleeps == []


def test_at_most_max_concurrency_requests_are_inside_at_once():
    async def main():
        gate = asyncio.Event()
        inner = Inner(gate=gate)
        layer = RateLimitLayer(inner, max_concurrency=2, rps=None)
        tasks = [asyncio.create_task(layer(request())) for _ in range(5)]
        for _ in range(5):
            await asyncio.sleep(0)
        waiting_inside = inner.inside
        gate.set()
        await asyncio.gather(*tasks)
        return waiting_inside, inner

    waiting_inside, inner = asyncio.run(main())
    assert waiting_inside == 2 and inner.peak == 2 and len(inner.seen) == 5


# --- retry -------------------------------------------------------------------------------------------
def transient(msg: str = "scripted transport failure") -> EndpointFailure:
    try:
        raise TransientModelError("timeout", msg)
    except TransientModelError as exc:
        return EndpointFailure(SPEC, exc, transient=True)


def test_transient_failures_are_retried_with_the_same_request_and_doubling_waits():
    t = FakeTime()
    inner = Inner(transient(), transient(), reply("finally"))
    layer = RetryLayer(inner, retries=4, base=0.5, cap=8.0, sleep=t.sleep)
    req = request()
    r = asyncio.run(layer(req))
    assert r.response.text == "finally" and layer.count == 2 and t.sleeps == [0.5, 1.0]
    assert len(inner.seen) == 3 and all(s is req for s in inner.seen)


def test_retries_are_bounded_then_one_line_naming_the_model():
    t = FakeTime()
    failure = transient()
    inner = Inner(failure)
    layer = RetryLayer(inner, retries=4, base=3.0, cap=5.0, sleep=t.sleep)
    with pytest.raises(ModelUnavailable) as ei:
        asyncio.run(layer(request()))
    msg = str(ei.value)
    assert (
        msg == "model scripted:layers unreachable after 5 attempts: TransientModelError: timeout: scripted transport "
        "failure"
    )
    assert "\n" not in msg and ei.value.__cause__ is failure.cause
    assert len(inner.seen) == 5 and layer.count == 4 and t.sleeps == [3.0, 5.0, 5.0, 5.0]


def test_malformed_responses_give_up_with_their_own_message():
    failure = EndpointFailure(SPEC, EndpointResponseError("no choices"), transient=True)
    with pytest.raises(
        ModelUnavailable,
        match=r"^model scripted:layers returned malformed responses 3 times: malformed response: no choices$",
    ):
        asyncio.run(RetryLayer(Inner(failure), retries=2, base=0.0, cap=0.0, sleep=FakeTime().sleep)(request()))


def test_a_permanent_failure_is_not_retried():
    t = FakeTime()
    spec = ModelSpec("openai", "m", base_url="http://127.0.0.1:9/v1")
    resp = httpx2.Response(401, request=httpx2.Request("POST", "http://127.0.0.1:9/v1"))  # openai's own httpx
    failure = ProviderAdapter(spec, None).failure(openai.APIStatusError("bad key", response=resp, body=None))
    inner = Inner(failure)
    layer = RetryLayer(inner, retries=4, base=0.5, cap=8.0, sleep=t.sleep)
    with pytest.raises(
        ModelUnavailable, match=r"^model openai:m at http://127.0.0.1:9/v1 rejected the request \(HTTP 401\): bad key$"
    ):
        asyncio.run(layer(request(spec=spec)))
    assert len(inner.seen) == 1 and layer.count == 0 and t.sleeps == []


def test_other_errors_pass_through_the_retry_layer_untouched():
    bug = KeyError("a bug")
    inner = Inner(bug)
    layer = RetryLayer(inner, retries=4, base=0.5, cap=8.0, sleep=FakeTime().sleep)
    with pytest.raises(KeyError) as ei:
        asyncio.run(layer(request()))
    assert ei.value is bug and len(inner.seen) == 1 and layer.count == 0


# --- provider adapter ---------------------------------------------------------------------------------
def scripted(answer) -> ScriptedChatModel:
    return ScriptedChatModel(answers=[answer])


@pytest.mark.parametrize(
    "usage,why",
    [
        (None, "usage missing"),
        ({"completion_tokens": 2}, "prompt tokens missing"),
        ({"prompt_tokens": -3, "completion_tokens": 2}, "prompt tokens is negative"),
        ({"prompt_tokens": float("nan"), "completion_tokens": 2}, "prompt tokens is not finite"),
        (
            {"prompt_tokens": 5, "completion_tokens": OUT_BOUND + 1},
            f"completion tokens {OUT_BOUND + 1} exceeds the bound {OUT_BOUND}",
        ),
        ({"prompt_tokens": "12", "completion_tokens": 2}, "prompt tokens is not a number"),
        ({"prompt_tokens": True, "completion_tokens": 2}, "prompt tokens is a boolean"),
        ({"prompt_tokens": 2.5, "completion_tokens": 2}, "prompt tokens is not an integer"),
        ([5, 2], "usage is not an object"),
    ],
)
def test_hostile_reported_usage_is_charged_at_the_bounds_and_flagged(usage, why):
    model = scripted({"text": "hi", "usage": usage})
    r = asyncio.run(ScriptedAdapter(SPEC, model).invoke(request(model)))
    assert (r.response.input_tokens, r.response.output_tokens) == (IN_BOUND, OUT_BOUND)
    assert r.response.usage_error is not None
    assert r.response.usage_error.startswith("the endpoint: ") and why in r.response.usage_error


def test_valid_reported_usage_is_taken_as_is():
    model = scripted({"text": "hi", "usage": {"prompt_tokens": 17, "completion_tokens": 3}})
    r = asyncio.run(ScriptedAdapter(SPEC, model).invoke(request(model)))
    assert (r.response.text, r.response.input_tokens, r.response.output_tokens, r.response.usage_error) == (
        "hi",
        17,
        3,
        None,
    )
    assert r.response.latency >= 0 and not r.cached and r.entry is None


class MetadataModel(BaseChatModel):
    """A LangChain chat model of no known provider, reporting ``usage_metadata`` only."""

    usage: dict

    @property
    def _llm_type(self) -> str:
        return "metadata"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        msg = AIMessage(content="meta", usage_metadata=self.usage)
        return ChatResult(generations=[ChatGeneration(message=msg)])


def test_usage_metadata_of_another_backend_is_checked_like_an_endpoint_report():
    big = MetadataModel(usage={"input_tokens": 10**7, "output_tokens": 2, "total_tokens": 10**7 + 2})
    assert adapter_type(big) is ProviderAdapter
    r = asyncio.run(ProviderAdapter(SPEC, big).invoke(request(big)))
    assert (r.response.input_tokens, r.response.output_tokens) == (IN_BOUND, OUT_BOUND)
    assert r.response.usage_error is not None and "exceeds the bound" in r.response.usage_error
    ok = MetadataModel(usage={"input_tokens": 9, "output_tokens": 2, "total_tokens": 11})
    r = asyncio.run(ProviderAdapter(SPEC, ok).invoke(request(ok)))
    assert (r.response.input_tokens, r.response.output_tokens, r.response.usage_error) == (9, 2, None)


def test_usage_the_scripted_model_does_not_report_is_counted_and_clamped():
    r = asyncio.run(ScriptedAdapter(SPEC, scripted("word " * 50)).invoke(request(scripted("word " * 50))))
    assert r.response.usage_error is None and r.response.output_tokens == OUT_BOUND  # 50 words, clamped to the cap
    assert 0 < r.response.input_tokens <= IN_BOUND


def test_to_text_makes_the_text_that_is_returned():
    model = scripted("plain")
    r = asyncio.run(ScriptedAdapter(SPEC, model).invoke(request(model, to_text=lambda m: f"<{m.content}>")))
    assert r.response.text == "<plain>"


def test_provider_errors_become_transient_or_permanent_failures_and_bugs_pass():
    model = scripted({"error": "timeout"})
    with pytest.raises(EndpointFailure) as ei:
        asyncio.run(ScriptedAdapter(SPEC, model).invoke(request(model)))
    assert (
        ei.value.transient and isinstance(ei.value.cause, TransientModelError) and ei.value.__cause__ is ei.value.cause
    )

    class Buggy(ScriptedChatModel):
        def _answer(self, messages, kwargs):
            raise AttributeError("a bug")

    with pytest.raises(AttributeError, match="a bug"):
        asyncio.run(ScriptedAdapter(SPEC, Buggy(answers=["x"])).invoke(request(Buggy(answers=["x"]))))
    resp = httpx2.Response(404, request=httpx2.Request("POST", "http://h/v1"))
    not_found = ProviderAdapter(SPEC, None).failure(openai.NotFoundError("no model", response=resp, body=None))
    assert not_found is not None and not_found.transient is False
    timeout = ProviderAdapter(SPEC, None).failure(httpx.ReadTimeout("slow"))
    assert timeout is not None and timeout.transient is True


SCHEMA = {
    "type": "object",
    "properties": {"effort": {"type": "number", "minimum": 0, "maximum": 1}},
    "required": ["effort"],
}


def test_each_provider_asks_for_structured_output_its_own_way(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    s = ScriptedAdapter(SPEC, scripted("x"))
    assert s.response_format(SCHEMA) is None and s.call_options(key=KEY, phase="vote", max_tokens=9) == {
        "phase": "vote"
    }

    llama = adapter_type(LlamaCppChat(model_path="/none.gguf"))(ModelSpec("local", "m.gguf"), None)
    assert isinstance(llama, LlamaAdapter)
    rf = llama.response_format(SCHEMA)
    assert rf is not None
    assert rf["type"] == "json_object" and rf["schema"]["properties"]["effort"]["enum"][:3] == [0.0, 0.05, 0.1]
    narrow = {"type": "object", "properties": {"target": {"enum": [2, 5]}}}
    rf = llama.response_format(SCHEMA, narrow)
    assert rf is not None and rf["schema"] == narrow  # the narrower decoding schema wins
    assert llama.call_options(key=KEY, phase="vote", max_tokens=9) == {"seed": int(KEY[:8], 16), "max_tokens": 9}
    assert llama.call_options(key=KEY, phase="vote", max_tokens=None) == {"seed": int(KEY[:8], 16)}

    served = ModelSpec("openai", "m", base_url="http://127.0.0.1:9/v1")
    chat = make_chat_model(served)
    assert adapter_type(chat) is ProviderAdapter
    assert ProviderAdapter(served, chat).response_format(SCHEMA, narrow) == {"type": "json_object", "schema": SCHEMA}
    assert ProviderAdapter(ModelSpec("openai", "gpt"), chat).response_format(SCHEMA) == {"type": "json_object"}


def test_the_adapter_says_how_tools_are_called():
    assert (
        adapter_type(LlamaCppChat(model_path="/none.gguf")).tool_protocol(LlamaCppChat(model_path="/none.gguf"))
        == "json"
    )
    assert adapter_type(scripted("x")).tool_protocol(scripted("x")) == "native"
    no_tools = MetadataModel(usage={})
    assert adapter_type(no_tools).tool_protocol(no_tools) == "json"


# --- the path ------------------------------------------------------------------------------------
def test_the_path_retries_outside_the_rate_limit_and_counts_calls(tmp_path):
    """Every attempt waits for the rate limiter and the backoff waits come between: the order of
    the recorded waits tells retry -> rate limit apart from rate limit -> retry."""
    t = FakeTime(advance=False)
    ledger = RecordingLedger()
    path = CallPath(
        ledger=ledger,
        cache=ResponseCache(tmp_path / "c.sqlite"),
        rps=10,
        retries=2,
        backoff_base=0.25,
        clock=t.clock,
        sleep=t.sleep,
    )
    model = ScriptedChatModel(answers=[{"error": "timeout"}, {"error": "500"}, "fine"])
    r = asyncio.run(path(request(model)))
    assert r.response.text == "fine" and t.sleeps == pytest.approx([0.25, 0.1, 0.5, 0.2])
    assert path.adapter.calls == 3 and path.retry.count == 2 and len(ledger.reservations) == 1 and ledger.in_flight == 0
    again = asyncio.run(path(request(model)))  # replayed: no reservation, no model call
    assert again.cached and path.adapter.calls == 3 and len(ledger.reservations) == 1 and len(ledger.entries) == 2


def test_the_path_refuses_over_budget_before_the_rate_limit_or_the_model():
    t = FakeTime()
    path = CallPath(ledger=Ledger(budget=Decimal(0)), cache=ResponseCache(None), rps=1, clock=t.clock, sleep=t.sleep)
    with pytest.raises(BudgetExhausted):
        asyncio.run(path(request()))
    assert path.adapter.calls == 0 and path.rate.limiter._next == 0.0 and not math.isnan(t.now)


def test_adapter_layer_counts_every_request_that_reaches_a_model():
    layer = AdapterLayer()
    model = scripted("x")
    asyncio.run(layer(request(model)))
    asyncio.run(layer(request(model)))
    assert layer.calls == 2


# --- the direct call of an unobserved model -------------------------------------------------------
class _Starts:
    """Counts the LangChain runs started for chat model calls (``on_chat_model_start``)."""

    def __init__(self, monkeypatch):
        from langchain_core.callbacks.manager import AsyncCallbackManager

        self.n = 0
        real = AsyncCallbackManager.on_chat_model_start

        async def counting(manager, *a, **kw):
            self.n += 1
            return await real(manager, *a, **kw)

        monkeypatch.setattr(AsyncCallbackManager, "on_chat_model_start", counting)


def _usage_answer() -> ScriptedChatModel:
    return ScriptedChatModel(
        answers=[
            {"text": '{"effort": 0.5}', "usage": {"prompt_tokens": 12, "completion_tokens": 5}},
            '{"effort": 0.25}',
        ]
    )


def test_an_unobserved_call_of_a_cooplab_model_starts_no_langchain_run_and_answers_the_same(monkeypatch):
    """Nothing observes the call (no callbacks, no tracing): the scripted model is asked directly,
    with the same answers, usage and metadata as through ``ainvoke``."""
    starts = _Starts(monkeypatch)
    direct = [asyncio.run(ScriptedAdapter(SPEC, m).invoke(request(m))) for m in [_usage_answer()] for _ in range(2)]
    assert starts.n == 0
    model = _usage_answer()
    via_langchain = [asyncio.run(model.ainvoke([HumanMessage(content="decide")], phase="harvest")) for _ in range(2)]
    assert starts.n == 2
    assert (
        [r.response.text for r in direct]
        == [m.content for m in via_langchain]
        == ['{"effort": 0.5}', '{"effort": 0.25}']
    )
    assert [(r.response.input_tokens, r.response.output_tokens, r.response.usage_error) for r in direct] == [
        (12, 5, None),
        (5, 9, None),
    ]
    msg = asyncio.run(
        __import__("cooplab.agents.calls", fromlist=["direct_call"]).direct_call(
            _usage_answer(), [HumanMessage(content="decide")], None, {"phase": "harvest"}
        )
    )
    assert (
        msg.response_metadata == via_langchain[0].response_metadata
        and msg.usage_metadata == via_langchain[0].usage_metadata
    )


def test_an_observed_call_still_goes_through_langchain(monkeypatch):
    """A handler in the call's config, or LangChain's debug mode, sees the call as before."""
    from langchain_core.callbacks import AsyncCallbackHandler
    from langchain_core.globals import get_debug, set_debug

    class Seen(AsyncCallbackHandler):
        calls = 0

        async def on_chat_model_start(self, *a, **kw):
            Seen.calls += 1

    starts = _Starts(monkeypatch)
    model = ScriptedChatModel(answers=["ok"])
    r = asyncio.run(ScriptedAdapter(SPEC, model).invoke(request(model, config={"callbacks": [Seen()]})))
    assert r.response.text == "ok" and Seen.calls == 1 and starts.n == 1
    was = get_debug()
    set_debug(True)
    try:
        asyncio.run(ScriptedAdapter(SPEC, model).invoke(request(model)))
    finally:
        set_debug(was)
    assert starts.n == 2


def test_whether_a_node_s_calls_are_observed_is_decided_once_per_node_run(monkeypatch):
    """Every decision of a phase runs under its node's one callback manager: LangChain's configure
    runs once for them, not once per call; another manager (the next node's) is decided afresh."""
    from langchain_core.callbacks.manager import AsyncCallbackManager

    from cooplab.agents.calls import direct_call

    n = {"configure": 0}
    real = AsyncCallbackManager.configure.__func__

    def counting(cls, *a, **kw):
        n["configure"] += 1
        return real(cls, *a, **kw)

    monkeypatch.setattr(AsyncCallbackManager, "configure", classmethod(counting))
    model = ScriptedChatModel(answers=["ok"])
    node = AsyncCallbackManager(handlers=[])

    async def phase(manager):
        return await asyncio.gather(
            *(direct_call(model, [HumanMessage(content="decide")], {"callbacks": manager}, {}) for _ in range(5))
        )

    assert all(m is not None and m.content == "ok" for m in asyncio.run(phase(node)))
    assert n["configure"] == 1
    asyncio.run(phase(AsyncCallbackManager(handlers=[])))
    assert n["configure"] == 2
