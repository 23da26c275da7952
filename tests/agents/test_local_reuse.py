"""The local model reuses what it has read (issue 41, point 5).

Unit tests of the kept states (:class:`PrefixStates`: longest-prefix lookup, superseded prefixes,
the byte bound), of how reused tokens are read from a backend's usage and counted per run; and on
the real model (SmolLM2-135M): a prompt that shares its beginning with an earlier one is not read
again even after another agent's call came between, and its answer is token for token the answer
of a cold read (same seed, same prompt)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from langchain_core.messages import AIMessage

import cooplab
from cooplab.agents import local_model as lm
from cooplab.agents.calls import reused_of
from cooplab.agents.llama_worker import PrefixStates, _reusing, answer, common_prefix


def toks(*xs: int) -> np.ndarray:
    return np.array(xs, dtype=np.intc)


def state(nbytes: int) -> np.ndarray:
    return np.zeros(nbytes, dtype=np.uint8)


def test_common_prefix():
    assert common_prefix(toks(1, 2, 3), toks(1, 2, 4)) == 2
    assert common_prefix(toks(1, 2), toks(1, 2, 3)) == 2
    assert common_prefix(toks(), toks(1)) == 0 and common_prefix(toks(5), toks(6)) == 0


def test_the_kept_state_sharing_the_longest_prefix_is_found():
    s = PrefixStates(1000)
    s.keep(toks(1, 2, 3, 4), state(10))
    s.keep(toks(1, 2, 9, 9, 9), state(10))
    s.keep(toks(7, 7), state(10))
    sid, n = s.longest(toks(1, 2, 9, 5))
    assert sid is not None and n == 3 and s.take(sid)[0].tolist() == [1, 2, 9, 9, 9]
    assert s.longest(toks(8)) == (None, 0)


def test_a_kept_prefix_of_a_new_sequence_is_superseded_and_a_covered_one_is_not_kept_again():
    s = PrefixStates(1000)
    s.keep(toks(1, 2), state(10))
    s.keep(toks(1, 2, 3), state(15))  # serves every prompt the first one did
    assert len(s) == 1 and s.bytes == 15 and s.dropped == 1
    assert s.covers(toks(1, 2)) and s.covers(toks(1, 2, 3)) and not s.covers(toks(1, 2, 3, 4))


def test_states_are_bounded_in_bytes_least_recently_used_out():
    s = PrefixStates(100)
    s.keep(toks(1), state(40))
    s.keep(toks(2), state(40))
    sid, _ = s.longest(toks(1))
    assert sid is not None
    s.take(sid)  # used: now the most recent
    s.keep(toks(3), state(40))  # over the bound: the least recently used (2) goes
    assert s.bytes == 80 and s.longest(toks(2)) == (None, 0) and s.longest(toks(1))[1] == 1
    assert not s.keep(toks(4), state(101))  # alone over the bound: not kept
    off = PrefixStates(0)
    assert not off.keep(toks(1), state(1)) and len(off) == 0


class StandInContext:
    """llama-cpp-python's context as the reusing model uses it; ``cuts`` says whether the memory
    drops the cells from a position on (a recurrent model's refuses any cut but a whole one)."""

    def __init__(self, cuts: bool):
        self.cuts, self.ctx, self.removed = cuts, None, []

    def kv_cache_seq_rm(self, seq_id: int, p0: int, p1: int) -> bool:
        self.removed.append(p0)
        return self.cuts or p0 == 0


class StandInLlama:
    """What the reusing model needs of llama-cpp-python's ``Llama``: ``generate`` evaluates the
    prompt tokens after the ``n_tokens`` it has, then makes two tokens; nothing native."""

    n_batch = 512

    def __init__(self, cuts: bool = True):
        self._ctx, self.n_tokens, self.input_ids = StandInContext(cuts), 0, np.zeros(64, dtype=np.intc)

    def eval(self, tokens):
        self.input_ids[self.n_tokens : self.n_tokens + len(tokens)] = tokens
        self.n_tokens += len(tokens)

    def generate(self, tokens, *args, **kwargs):
        self.eval(tokens[self.n_tokens :])
        for t in (90, 91):
            self.eval([t])
        return iter(())

    def create_chat_completion(self, *, prompt, **kwargs):
        list(self.generate(prompt))
        return {
            "choices": [{"message": {"content": "ok"}}],
            "usage": {"prompt_tokens": len(prompt), "completion_tokens": 2},
        }


class StandInLib:
    """The bindings a state is copied out and back with: the state of the live tokens as bytes."""

    def llama_state_seq_get_size(self, ctx, seq):
        return 8

    def llama_state_seq_get_data(self, ctx, dst, size, seq):
        return size

    def llama_state_seq_set_data(self, ctx, src, size, seq):
        return size


def stand_in(cuts: bool = True, max_bytes: int = 1000):
    llama = _reusing(StandInLlama, StandInLib())(cuts)
    llama.states = PrefixStates(max_bytes)
    return llama


def test_a_prompt_sharing_a_kept_prefix_reads_only_the_rest_and_never_the_answer():
    llama = stand_in()
    first = answer(llama, {"prompt": [1, 2, 3, 4, 5, 6]})
    assert first["usage"]["prompt_tokens_details"] == {"cached_tokens": 0} and len(llama.states) == 1
    assert llama.n_tokens == 6  # the answer's tokens are cut off
    second = answer(llama, {"prompt": [1, 2, 3, 4, 5, 6, 7, 8]})
    assert second["usage"]["prompt_tokens_details"] == {"cached_tokens": 6}


def test_a_memory_that_cannot_cut_the_answer_off_keeps_nothing_and_reads_every_prompt_afresh():
    """A recurrent model's memory refuses to drop the cells after a position: its state would hold
    the answer's tokens, so none is kept and the next prompt is read from its first token (keeping
    the live cache, as before, read the next prompt after the last answer's tokens)."""
    llama = stand_in(cuts=False)
    answer(llama, {"prompt": [1, 2, 3, 4, 5, 6]})
    assert len(llama.states) == 0 and llama.n_tokens == 0
    again = answer(llama, {"prompt": [1, 2, 3, 4, 5, 6, 7, 8]})
    assert again["usage"]["prompt_tokens_details"] == {"cached_tokens": 0} and llama.input_ids[:8].tolist() == list(
        range(1, 9)
    )


def test_a_failure_to_keep_a_state_never_fails_the_call():
    class Broken(StandInLib):
        def llama_state_seq_get_data(self, ctx, dst, size, seq):
            raise OSError("no memory for the copy")

    llama = _reusing(StandInLlama, Broken())()
    llama.states = PrefixStates(1000)
    out = answer(llama, {"prompt": [1, 2, 3, 4]})
    assert out["choices"][0]["message"]["content"] == "ok" and len(llama.states) == 0
    assert llama.n_tokens == 0  # what was live is read afresh next time
    assert answer(llama, {"prompt": [1, 2, 3, 4]})["usage"]["prompt_tokens_details"] == {"cached_tokens": 0}


@pytest.mark.parametrize(
    "usage,reused",
    [
        (
            {"prompt_tokens": 10, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 6}},
            6,
        ),  # OpenAI, the local model
        ({"prompt_tokens": 10, "completion_tokens": 2, "cached_tokens": 6}, 6),  # Gemini, as cooplab reads its usage
        ({"prompt_tokens": 10, "completion_tokens": 2}, 0),
        (
            {"prompt_tokens": 10, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 11}},
            0,
        ),  # more than the prompt
        ({"prompt_tokens": 10, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": -1}}, 0),
        ({"prompt_tokens": 10, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": True}}, 0),
        ({"prompt_tokens": 10, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": "6"}}, 0),
        ({"prompt_tokens": 10, "completion_tokens": 2, "prompt_tokens_details": "lots"}, 0),
        ("lots", 0),
    ],
)
def test_reused_tokens_are_read_from_the_reported_usage(usage, reused):
    msg = AIMessage(content="x", response_metadata={"usage_raw": usage})
    assert reused_of(msg, 10) == reused


def test_reused_tokens_are_read_from_langchains_usage_metadata():
    msg = AIMessage(
        content="x",
        usage_metadata={
            "input_tokens": 10,
            "output_tokens": 2,
            "total_tokens": 12,
            "input_token_details": {"cache_read": 4},
        },
    )
    assert reused_of(msg, 10) == 4


def test_geminis_cached_prompt_tokens_are_read():
    from cooplab.agents.providers import _google_usage

    body = {"usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 2, "cachedContentTokenCount": 6}}
    assert reused_of(AIMessage(content="x", response_metadata={"usage_raw": _google_usage(body)}), 10) == 6
    body["usageMetadata"].pop("cachedContentTokenCount")
    assert reused_of(AIMessage(content="x", response_metadata={"usage_raw": _google_usage(body)}), 10) == 0


def test_a_runs_summary_reports_the_prompt_tokens_reused(tmp_path):
    usage = {"prompt_tokens": 40, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 30}}
    script = tmp_path / "m.json"
    script.write_text(
        json.dumps(
            {
                "by_phase": {
                    "harvest": [{"text": '{"effort": 0.1}', "usage": usage}],
                    "punish": [{"text": '{"punish": null}', "usage": usage}],
                }
            }
        )
    )
    run = cooplab.run(
        task="cpr",
        agents="llm",
        model=f"scripted:{script}",
        n_agents=2,
        rounds=2,
        ablation="osl",
        cache="off",
        out=tmp_path / "run",
    )
    calls = run.summary["ledger"]["calls"]
    assert calls > 0 and run.summary["llm"]["prompt_reuse"] == {
        "prompt_tokens": 40 * calls,
        "tokens_reused": 30 * calls,
        "tokens_read": 10 * calls,
        "reused_share": 0.75,
    }


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "lots", "1e30"])
def test_a_hostile_reuse_setting_is_one_line(monkeypatch, value):
    monkeypatch.setenv("COOPLAB_LOCAL_REUSE_MB", value)
    with pytest.raises(lm.LocalModelError, match="COOPLAB_LOCAL_REUSE_MB must be a number of megabytes from 0"):
        lm.LocalModelProcess("/nonexistent.gguf")


# ---------------------------------------------------------------------------------------------
# the real model
# ---------------------------------------------------------------------------------------------
RULES = (
    "You work in a team of two analysts on a data set of orders. Read what the other teams wrote, run short code, "
    "store what you find, and tell your teammate what you did. Keep every answer short. "
) * 6


def turn(agent: int, step: int, seed: int) -> dict:
    """Agent ``agent``'s call at ``step`` of its conversation (the two agents' system prompts
    differ only at their end)."""
    msgs = [{"role": "system", "content": f"{RULES}You are analyst {agent + 1}."}]
    for t in range(step):
        msgs += [
            {"role": "user", "content": f"Step {t + 1}: the table has {1000 + 37 * t + agent} rows. What next?"},
            {"role": "assistant", "content": f"I will check column {t + 1} of the table."},
        ]
    msgs.append({"role": "user", "content": f"Step {step + 1}: what do you do now?"})
    return {"messages": msgs, "max_tokens": 4, "temperature": 0.7, "seed": seed}


@pytest.mark.integration
def test_the_real_model_reuses_what_it_read_across_agents_and_answers_as_a_cold_read():
    """Two agents' conversations interleaved (each call evicts the other agent's prompt from the
    live KV cache), first read cold, then with the kept states: every answer is the cold read's,
    token for token, and almost nothing is read again. Reading a prompt's last token alone (as
    llama-cpp-python does when it has the rest) changed the second answer here."""
    from cooplab.agents.models.local import local_model_path

    p = lm.LocalModelProcess(str(local_model_path()), n_ctx=2048)
    calls = [turn(agent, step, seed=11 * step + agent) for step in (0, 1) for agent in (0, 1)]
    try:
        cold = [p.chat(c, reuse=False) for c in calls]
        warm = [p.chat(c) for c in calls]
    finally:
        p.close()
    text = [o["choices"][0]["message"]["content"] for o in cold], [o["choices"][0]["message"]["content"] for o in warm]
    assert text[0] == text[1]
    usage = [o["usage"] for o in cold + warm]
    assert all(u["prompt_tokens_details"]["cached_tokens"] == 0 for u in usage[:4])
    # a prompt seen before: all of it but its last two tokens (a token is never read alone)
    assert all(u["prompt_tokens_details"]["cached_tokens"] == u["prompt_tokens"] - 2 for u in usage[4:])
    assert [u["prompt_tokens"] for u in usage[:4]] == [u["prompt_tokens"] for u in usage[4:]] and usage[0][
        "prompt_tokens"
    ] > 250
    assert (p.prompt_tokens, p.reused_tokens) == (
        sum(u["prompt_tokens"] for u in usage),
        sum(u["prompt_tokens_details"]["cached_tokens"] for u in usage),
    )
    assert p.meta["reuse_bytes"] == int(lm.REUSE_MB * 1024 * 1024)


@pytest.mark.integration
def test_the_next_turn_reads_only_what_follows_the_kept_prompt_and_answers_as_a_cold_read():
    """Agent 1's next turn quotes its own answer, after agent 2 called: its previous prompt is
    restored and only the answer and the new turn are read; the answer's own tokens are not
    reused (generated one at a time, their numbers are not a read's: reusing them, as
    llama-cpp-python does for the last call, changed 5 of 6 such answers), so the new answer is
    the cold read's."""
    from cooplab.agents.models.local import local_model_path

    p = lm.LocalModelProcess(str(local_model_path()), n_ctx=2048)
    try:
        call = turn(0, 0, seed=3)
        call["max_tokens"] = 24
        first = p.chat(call)
        p.chat(turn(1, 0, seed=4))
        said = first["choices"][0]["message"]["content"]
        nxt = {
            **call,
            "seed": 5,
            "max_tokens": 8,
            "messages": call["messages"]
            + [
                {"role": "assistant", "content": said},
                {"role": "user", "content": "The table is sorted now. What next?"},
            ],
        }
        warm, cold = p.chat(nxt), p.chat(nxt, reuse=False)
    finally:
        p.close()
    u, n0 = warm["usage"], first["usage"]["prompt_tokens"]
    assert said and warm["choices"][0]["message"]["content"] == cold["choices"][0]["message"]["content"]
    assert u["prompt_tokens_details"]["cached_tokens"] == n0  # the whole first prompt, nothing of its answer
