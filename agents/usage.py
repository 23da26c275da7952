"""Token usage of one model call: its upper bound, and the validation of what a backend reports.

The credit ledger reserves a call's worst case before the call and charges its actual usage
after it; the cap holds only if the reservation is a true upper bound and the charge can never
exceed it. Both sides live here, used by every model path (OpenAI-compatible, local llama.cpp,
scripted, cache replays):

* :func:`input_bound` bounds the prompt tokens from the request itself. A BPE token covers at
  least one byte of its text (byte-level BPE; SentencePiece with byte fallback), so a prompt
  has at most as many tokens as the UTF-8 bytes of its messages, plus what the chat template
  adds: at most :data:`MESSAGE_OVERHEAD` tokens per message (role markers, separators, a
  SentencePiece prefix) and :data:`TEMPLATE_OVERHEAD` once (BOS, a template's default system
  prompt, the assistant header), plus the bytes of any schema or tools sent with the request.
* the output is bounded by the call's ``max_tokens``; so are the bytes of an answer
  (:func:`answer_bytes_bound`: no token stands for more than :data:`MAX_TOKEN_BYTES` bytes) and of
  the response body that carries it (:func:`body_bytes_bound`), which caps what is read from a
  server and what is stored.
* :func:`check_usage` turns whatever a backend reported into a :class:`Usage`. A count that is
  missing, not an integer (a string, a bool, NaN, 2.5, ...), negative, or larger than the bound
  is an error of the model endpoint: the call is charged at its bounds (its reservation, never
  the reported number) and the usage carries the reason.
* a count below what the call's text can be (:class:`TextEstimate`: fewer tokens than its UTF-8
  bytes / :data:`MAX_TOKEN_BYTES`, e.g. 0 tokens, or 1 token for 8 KB of answer, as a gateway that
  zeroes usage reports) is implausibly low: that side is charged cooplab's own count of the text
  (at least that floor, at most the bound), and the usage carries the reason too. The floor is a
  true lower bound (no token stands for more bytes), so a model's honest count is never flagged.
* :func:`count_tokens` and :func:`messages_tokens` are cooplab's own count where a backend reports
  none (a scripted model, an endpoint without ``usage``): words and punctuation marks, an approximation.
"""

from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

MESSAGE_OVERHEAD = 16  # tokens a chat template may add around one message
TEMPLATE_OVERHEAD = 128  # tokens a chat template may add once per request
#: UTF-8 bytes one output token stands for at most (the longest tokens of common vocabularies, runs
#: of blanks or of one symbol, are well below it)
MAX_TOKEN_BYTES = 256
#: bytes of an answer besides what its tokens say: the JSON around tool calls, their ids
ANSWER_OVERHEAD = 4096
#: bytes of a chat completion's body besides its answer: ids, the model's name, usage, finish reason
BODY_OVERHEAD = 64 * 1024
#: JSON spells one byte of text in at most 6 (``\u0000``)
JSON_ESCAPE = 6


def answer_bytes_bound(max_tokens: int) -> int:
    """The UTF-8 bytes an answer of at most ``max_tokens`` tokens can hold (tool calls included)."""
    return MAX_TOKEN_BYTES * max(int(max_tokens), 1) + ANSWER_OVERHEAD


def body_bytes_bound(max_tokens: int) -> int:
    """The bytes of a chat-completion body whose answer has at most ``max_tokens`` tokens: what is
    read from a server at most (184 KiB for 64 tokens, 1.5 MB per 1,000 tokens more)."""
    return BODY_OVERHEAD + JSON_ESCAPE * answer_bytes_bound(max_tokens)


def _nbytes(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, str):
        return len(value.encode("utf-8"))
    return len(json.dumps(value, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8"))


def input_bound(messages: list[Any], *sent: Any) -> int:
    """An upper bound of the prompt tokens of a request: the UTF-8 bytes of every message's
    content (and name, tool calls) plus the template overheads, plus the bytes of whatever else
    is sent with it (``sent``: a response schema, tools)."""
    n = TEMPLATE_OVERHEAD
    for m in messages:
        content = getattr(m, "content", m)
        n += MESSAGE_OVERHEAD + _nbytes(content)
        extra = getattr(m, "additional_kwargs", None)
        if extra:
            n += _nbytes(extra)
        name = getattr(m, "name", None)
        if name:
            n += _nbytes(name)
    for s in sent:
        n += _nbytes(s)
    return n


_TOKEN_RE = re.compile(r"\w+|[^\w\s]", re.UNICODE)
#: texts up to this many characters have their count kept (:func:`count_tokens`)
COUNT_MEMO_CHARS = 16_384


@functools.lru_cache(maxsize=1024)
def _kept_count(text: str) -> int:
    return len(_TOKEN_RE.findall(text))


def count_tokens(text: str) -> int:
    """Our own token count where a backend reports none: words and punctuation marks
    (a documented approximation; real BPE counts are typically 1.0-1.4x this).

    The count of a text of at most :data:`COUNT_MEMO_CHARS` characters is kept (the last 1,024,
    at most 16 million characters): every agent of a society gets the same system prompt, and hashing it
    again costs about 2 us where the count costs about 90 us for 2,500 characters."""
    if type(text) is str and len(text) <= COUNT_MEMO_CHARS:
        return _kept_count(text)
    return len(_TOKEN_RE.findall(text or ""))


def messages_tokens(messages: list[Any]) -> int:
    """Our own count of a prompt's tokens (chat messages): :func:`count_tokens` of each message's
    content, plus 4 per message for its role and separators."""
    return sum(count_tokens(str(m.content)) + 4 for m in messages)


@dataclass(frozen=True)
class TextEstimate:
    """What a call's own text says of its tokens: the UTF-8 bytes of its prompt (the messages'
    contents) and of its answer (text and tool calls), and cooplab's count of them (words and
    punctuation marks, :func:`count_tokens`, a documented approximation)."""

    input_bytes: int
    output_bytes: int
    input_tokens: int
    output_tokens: int

    @property
    def input_floor(self) -> int:
        """The fewest prompt tokens the messages' contents can be (no token stands for more than
        :data:`MAX_TOKEN_BYTES` bytes)."""
        return -(-max(int(self.input_bytes), 0) // MAX_TOKEN_BYTES)

    @property
    def output_floor(self) -> int:
        """The fewest completion tokens the answer can be."""
        return -(-max(int(self.output_bytes), 0) // MAX_TOKEN_BYTES)


@dataclass(frozen=True)
class Usage:
    """Validated token counts of one call; ``error`` says why the reported usage was rejected
    (then the counts are the call's bounds)."""

    input_tokens: int
    output_tokens: int
    error: str | None = None


def _count(value: Any, what: str, bound: int) -> tuple[int | None, str | None]:
    if value is None:
        return None, f"{what} missing"
    if isinstance(value, bool):
        return None, f"{what} is a boolean ({value})"
    if isinstance(value, int):
        n = value
    elif isinstance(value, (float, Decimal)):
        if not math.isfinite(value):
            return None, f"{what} is not finite ({value})"
        if value != int(value):
            return None, f"{what} is not an integer ({value})"
        n = int(value)
    else:
        return None, f"{what} is not a number ({_short(value)})"
    if n < 0:
        return None, f"{what} is negative ({n})"
    if n > bound:
        return None, f"{what} {n} exceeds the bound {bound} for this request"
    return n, None


def _short(value: Any, limit: int = 40) -> str:
    text = " ".join(repr(value).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _pick(d: dict, *names: str) -> Any:
    for name in names:
        if name in d:
            return d[name]
    return None


def check_usage(
    reported: Any,
    *,
    input_bound: int,
    output_bound: int,
    source: str = "the endpoint",
    text: TextEstimate | None = None,
) -> Usage:
    """Validate reported usage (OpenAI ``prompt_tokens``/``completion_tokens`` or LangChain
    ``input_tokens``/``output_tokens``) against the call's bounds. Invalid: charged at the bounds.
    With ``text``, a count below the floor of the text it counts is implausibly low: that count is
    charged cooplab's estimate of the text instead (:func:`plausible`)."""
    if not isinstance(reported, dict):
        why = "usage missing" if reported is None else f"usage is not an object ({_short(reported)})"
        return Usage(input_bound, output_bound, f"{source}: {why}")
    i, ei = _count(_pick(reported, "prompt_tokens", "input_tokens"), "prompt tokens", input_bound)
    o, eo = _count(_pick(reported, "completion_tokens", "output_tokens"), "completion tokens", output_bound)
    if ei or eo or i is None or o is None:  # (a count is None only with its error)
        return Usage(input_bound, output_bound, f"{source}: " + "; ".join(e for e in (ei, eo) if e))
    return (
        Usage(i, o)
        if text is None
        else plausible(i, o, text, input_bound=input_bound, output_bound=output_bound, source=source)
    )


def plausible(
    i: int, o: int, text: TextEstimate, *, input_bound: int, output_bound: int, source: str = "the endpoint"
) -> Usage:
    """Valid reported counts ``i``, ``o`` held against the floors of the text they count
    (:class:`TextEstimate`): a count below its floor is replaced by cooplab's estimate of that text
    (at least the floor, at most the bound) and the usage says why; otherwise they stand as reported."""
    why = []
    if i < text.input_floor:
        why.append(f"{i} prompt tokens for {text.input_bytes} bytes of prompt (at least {text.input_floor})")
        i = min(max(text.input_tokens, text.input_floor), input_bound)
    if o < text.output_floor:
        why.append(f"{o} completion tokens for {text.output_bytes} bytes of answer (at least {text.output_floor})")
        o = min(max(text.output_tokens, text.output_floor), output_bound)
    if not why:
        return Usage(i, o)
    return Usage(
        i, o, f"{source}: usage implausibly low: {'; '.join(why)}; charged cooplab's estimate ({i} in, {o} out)"
    )


def counted_usage(input_tokens: int, output_tokens: int, *, input_bound: int, output_bound: int) -> Usage:
    """Usage counted by cooplab itself (a backend that reports none, a scripted model): an
    approximation, so it is clamped to the bounds rather than flagged."""
    return Usage(min(max(int(input_tokens), 0), input_bound), min(max(int(output_tokens), 0), output_bound))


__all__ = [
    "MAX_TOKEN_BYTES",
    "MESSAGE_OVERHEAD",
    "TEMPLATE_OVERHEAD",
    "TextEstimate",
    "Usage",
    "plausible",
    "answer_bytes_bound",
    "body_bytes_bound",
    "check_usage",
    "counted_usage",
    "input_bound",
]
