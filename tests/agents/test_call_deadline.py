"""A call's whole time is bounded (issue 38, item 10): ``--call-deadline`` bounds a call's attempts
and the waits between them, so a server that stalls holds a run for the deadline, not the call
timeout times every retry; the line that ends the run names the server, how long and how many
attempts. The layers run on a fake clock here (no wall-clock waits); the run against a real
stalled server on loopback is in test_hostile_servers.py."""

from __future__ import annotations

import asyncio

import pytest

from cooplab.agents.cache import CachedResponse, ResponseCache
from cooplab.agents.calls import CallPath, EndpointFailure, ModelUnavailable, ProviderAdapter, Reply, server_of
from cooplab.agents.decisions import LLMService
from cooplab.agents.models import CallTimedOut, ModelSpec, ScriptedChatModel
from cooplab.agents.settings import LLMSettings
from cooplab.graphs.ledger import Ledger
from cooplab.limits import ConfigError, in_file, validate

from .test_call_layers import FakeTime, request

#: the issue's bound: a stalled server ends a default run in under 10 minutes
TEN_MINUTES = 600.0


class Stalled(ProviderAdapter):
    """A server that never completes an answer: every attempt lasts its whole timeout on the fake
    clock, then fails as the call timeout does. ``answer_after`` attempts it answers at once."""

    def __init__(self, spec: ModelSpec, time: FakeTime, *, answer_after: int | None = None, hold: float = 0.0):
        super().__init__(spec, ScriptedChatModel(answers=["ok"]))
        self.time, self.answer_after, self.hold = time, answer_after, hold
        self.timeouts: list[float | None] = []

    async def invoke(self, request, timeout=None):
        self.timeouts.append(timeout)
        if self.answer_after is not None and len(self.timeouts) > self.answer_after:
            self.time.now += self.hold
            await asyncio.sleep(0)
            return Reply(CachedResponse("ok", 10, 2, self.hold))
        self.time.now += timeout if timeout is not None else 10**9
        await asyncio.sleep(0)
        raise EndpointFailure(self.spec, CallTimedOut(float(timeout or 0)), transient=True)


def path(time: FakeTime, **kw) -> CallPath:
    """The call path of a service at its defaults (retries, backoff, call timeout, deadline: those of
    :class:`LLMSettings` and :class:`LLMService`), on the fake clock."""
    s, svc = LLMSettings(), LLMService(models={})
    opts = dict(
        retries=svc.max_transport_retries,
        backoff_base=svc.backoff_base,
        backoff_max=svc.backoff_max,
        call_timeout=s.call_timeout,
        call_deadline=s.call_deadline,
    )
    return CallPath(ledger=Ledger(), cache=ResponseCache(None), clock=time.clock, sleep=time.sleep, **{**opts, **kw})


SERVER = ModelSpec("openai", "slow-thinker", base_url="http://127.0.0.1:8011/v1")


def call_to(adapter: ProviderAdapter, key: str = "ab12" * 16):
    """A request of ``adapter``'s model sent through ``adapter``."""
    r = request(spec=adapter.spec, key=key)
    r.adapter = adapter
    return r


def stalled_call(time: FakeTime, p: CallPath, spec: ModelSpec = SERVER, **adapter) -> tuple[Stalled, ModelUnavailable]:
    a = Stalled(spec, time, **adapter)
    with pytest.raises(ModelUnavailable) as ei:
        asyncio.run(p(call_to(a)))
    return a, ei.value


def test_by_default_a_stalled_server_ends_a_call_within_ten_minutes_retries_included():
    s, svc = LLMSettings(), LLMService(models={})
    assert svc.call_deadline is not None
    assert s.call_deadline == svc.call_deadline <= TEN_MINUTES  # the same default in Python and on the command line
    t = FakeTime()
    a, exc = stalled_call(t, path(t))
    assert t.now <= TEN_MINUTES  # every attempt and every wait, on the clock the layers read
    assert len(a.timeouts) < 1 + svc.max_transport_retries  # cut short by the deadline, not by the retry count
    timeouts = [x for x in a.timeouts if x is not None]
    assert len(timeouts) == len(a.timeouts)  # every attempt was given its timeout
    assert a.timeouts[0] == s.call_timeout and sum(timeouts) + sum(t.sleeps) == pytest.approx(s.call_deadline)
    msg = str(exc)
    assert msg.startswith(
        f"model openai:slow-thinker at 127.0.0.1:8011 stalled: no complete answer within the call deadline of "
        f"{s.call_deadline:g} s ({len(a.timeouts)} attempts in {s.call_deadline:.1f} s)"
    )
    assert "raise --call-deadline" in msg and "\n" not in msg


def test_without_a_deadline_the_same_server_would_hold_a_call_for_every_retry():
    """What the deadline prevents: the call timeout alone lets a stalled server hold a call 5 x 300 s."""
    t = FakeTime()
    a, exc = stalled_call(t, path(t, call_deadline=None))
    assert len(a.timeouts) == 5 and t.now > 4 * TEN_MINUTES / 2
    assert "within the call timeout of 300 s, 5 times" in str(exc)


def test_a_deadline_shorter_than_the_call_timeout_cuts_the_first_attempt():
    t = FakeTime()
    a, exc = stalled_call(t, path(t, call_timeout=300.0, call_deadline=2.5))
    assert a.timeouts == [2.5] and t.sleeps == [] and t.now == 2.5
    assert (
        "at 127.0.0.1:8011 stalled: no complete answer within the call deadline of 2.5 s (1 attempt in 2.5 s)"
        in str(exc)
    )


def test_no_retry_starts_that_could_not_begin_before_the_deadline():
    t = FakeTime()
    # attempts of 1 s, waits 0.5, 1, 2: after the third attempt 4.5 s are used and 0.5 s left, less than the 2 s wait
    a, exc = stalled_call(t, path(t, call_timeout=1.0, call_deadline=5.0))
    assert a.timeouts == [1.0, 1.0, 1.0] and t.sleeps == [0.5, 1.0] and t.now == 4.5
    assert "(3 attempts in 4.5 s)" in str(exc)


def test_a_call_that_answers_within_its_deadline_is_unaffected():
    t = FakeTime()
    a = Stalled(SERVER, t, answer_after=1, hold=2.0)
    r = asyncio.run(path(t, call_timeout=3.0, call_deadline=6.0)(call_to(a)))
    assert r.response.text == "ok" and a.timeouts == [3.0, 2.5]  # the retry had what was left: 6 - 3 - 0.5


def test_waiting_for_a_free_slot_does_not_count_against_a_call_s_deadline():
    """Two calls, one slot: the second waits while the first takes 8 s of its 10, then has its own 10."""
    t = FakeTime()
    p = path(t, max_concurrency=1, call_timeout=300.0, call_deadline=10.0)
    first, second = Stalled(SERVER, t, answer_after=0, hold=8.0), Stalled(SERVER, t, answer_after=0, hold=9.0)

    async def both():
        return await asyncio.gather(p(call_to(first)), p(call_to(second, key="cd34" * 16)))

    assert [r.response.text for r in asyncio.run(both())] == ["ok", "ok"] and t.now == 17.0
    assert first.timeouts == second.timeouts == [10.0]


def test_the_stalled_server_is_named_by_host_and_port(monkeypatch):
    for k in ("OPENAI_API_BASE", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "OLLAMA_HOST"):
        monkeypatch.delenv(k, raising=False)
    assert server_of(ModelSpec("openai", "gpt-4o-mini")) == "api.openai.com:443"
    assert server_of(ModelSpec("openai", "x", base_url="http://LocalHost/v1")) == "localhost:80"
    assert server_of(ModelSpec("openai", "x", base_url="http://[::1]:8000/v1")) == "[::1]:8000"
    monkeypatch.setenv("OLLAMA_HOST", "10.0.0.7:11434")
    assert server_of(ModelSpec("ollama", "llama3")) == "10.0.0.7:11434"
    assert server_of(ModelSpec("local", "smollm2")) == "the local model's process"


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), 86_401, True, "600"])
def test_a_bad_call_deadline_in_a_config_file_is_one_line(bad):
    with pytest.raises(ConfigError, match=r"^sweep x.json: llm.call_deadline must be") as e:
        validate(LLMSettings, {"call_deadline": bad}, in_file("sweep x.json", "llm"), strict=False)
    assert "\n" not in str(e.value)
