"""A hosted model's own token count, where its tokenizer can be had here: OpenAI's byte-pair
encodings read with tiktoken from pinned files.

``cooplab plan`` runs its pilot on a scripted model when the cells use a paid model. A scripted
model reports cooplab's own count (words and punctuation marks, :func:`cooplab.agents.usage.count_tokens`),
which undercounts a real tokenizer. For OpenAI's models the real count is available offline:

* which encoding a model uses is tiktoken's own table (``tiktoken.model.encoding_name_for_model``:
  ``o200k_base`` for the gpt-4o, gpt-4.1, gpt-5 and o-series families, ``cl100k_base`` for gpt-4
  and gpt-3.5-turbo);
* the encoding's merge table is a pinned model file (``cooplab models fetch tiktoken``,
  :mod:`cooplab.agents.model_files`), loaded with tiktoken's reader and checked against the same
  SHA-256 tiktoken itself pins, so nothing is downloaded at run time;
* a chat request's prompt is counted the way OpenAI's guide to counting chat tokens does: each
  message's content plus 3 tokens of framing (1 more with a ``name``), plus 3 that prime the reply.
  Tool calls and tool schemas are counted as their JSON text, an approximation.

Other providers' tokenizers are not public as files (Anthropic, Google) or not pinned here; for
them :func:`encoding_for` returns None and the caller keeps cooplab's own count and says so.
"""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import tiktoken

#: the encodings cooplab can load: the regular expression that splits text before the merges, and
#: the special tokens (tiktoken_ext.openai_public's values for the same files)
_O200K_SPLIT = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_CL100K_SPLIT = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|"""
    r"""\s+(?!\S)|\s"""
)
ENCODINGS: dict[str, tuple[str, dict[str, int]]] = {
    "o200k_base": (_O200K_SPLIT, {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}),
    "cl100k_base": (
        _CL100K_SPLIT,
        {
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
    ),
}
#: providers whose model names follow OpenAI's (the same tokenizers)
OPENAI_KINDS = ("openai", "azure")
#: tokens of framing around each chat message, one more for a message with a name, and the tokens
#: that prime the reply (OpenAI's counting guide for the gpt-4o and gpt-4 families)
PER_MESSAGE = 3
PER_NAME = 1
REPLY_PRIMING = 3

_LOADED: dict[str, tiktoken.Encoding] = {}
_LOCK = threading.Lock()


class TokenizerUnavailable(Exception):
    """An encoding that cannot be loaded here (one line saying why and what to run)."""


def encoding_for(spec: Any) -> str | None:
    """The name of the encoding a model spec's model uses (``openai:gpt-4o-mini`` ->
    ``o200k_base``), or None when cooplab cannot count that model's tokens itself: another
    provider, a model name tiktoken does not know, an encoding not in :data:`ENCODINGS`."""
    if not isinstance(spec, str) or ":" not in spec:
        return None
    kind, _, name = spec.partition(":")
    if kind not in OPENAI_KINDS or not name.strip():
        return None
    try:
        from tiktoken.model import encoding_name_for_model
    except ImportError:
        return None
    try:
        enc = encoding_name_for_model(name.strip())
    except KeyError:
        return None
    return enc if enc in ENCODINGS else None


def load(name: str) -> tiktoken.Encoding:
    """The encoding ``name``, read from its pinned file (SHA-256 checked by
    :mod:`~cooplab.agents.model_files` and again by tiktoken's reader) once per process.
    :class:`TokenizerUnavailable` when tiktoken or the file is missing."""
    if name not in ENCODINGS:
        raise TokenizerUnavailable(f"cooplab cannot load the encoding {name!r} (it knows {', '.join(ENCODINGS)})")
    with _LOCK:
        if name in _LOADED:
            return _LOADED[name]
    try:
        import tiktoken
        from tiktoken.load import load_tiktoken_bpe
    except ImportError:
        raise TokenizerUnavailable("tiktoken is not installed (pip install tiktoken)") from None
    from cooplab.agents import model_files as mf

    try:
        folder = mf.verified_dir("tiktoken", f"counting tokens as {name}")
    except mf.ModelFilesError as exc:
        raise TokenizerUnavailable(str(exc)) from None
    pinned = next(f for f in mf.model("tiktoken").files if f.name == f"{name}.tiktoken")
    split, special = ENCODINGS[name]
    enc = tiktoken.Encoding(
        name=name,
        pat_str=split,
        mergeable_ranks=load_tiktoken_bpe(str(folder / pinned.name), expected_hash=pinned.sha256),
        special_tokens=special,
    )
    with _LOCK:
        return _LOADED.setdefault(name, enc)


def text_tokens(enc: tiktoken.Encoding, text: str) -> int:
    """The tokens of ``text`` (special-token spellings in it count as ordinary text, as an API
    treats a user's text)."""
    return len(enc.encode(text or "", disallowed_special=()))


def _content(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content blocks: their text parts
        parts = [b if isinstance(b, str) else str(b.get("text", "")) for b in content if isinstance(b, (str, dict))]
        return "".join(parts)
    return str(content)


def chat_tokens(enc: tiktoken.Encoding, messages: list[Any]) -> int:
    """The prompt tokens of a chat request, counted as OpenAI's guide counts them (see the module):
    each message's text, its tool calls' JSON and its framing, plus the reply's priming."""
    n = REPLY_PRIMING
    for m in messages:
        n += PER_MESSAGE + text_tokens(enc, _content(getattr(m, "content", m)))
        if getattr(m, "name", None):
            n += PER_NAME + text_tokens(enc, str(m.name))
        calls = getattr(m, "tool_calls", None)
        if calls:
            n += text_tokens(enc, json.dumps([[c.get("name"), c.get("args")] for c in calls], sort_keys=True))
    return n


def answer_tokens(enc: tiktoken.Encoding, text: str, tool_calls: list[dict[str, Any]] | None = None) -> int:
    """The completion tokens of an answer: its text and its tool calls' JSON."""
    n = text_tokens(enc, text)
    if tool_calls:
        n += text_tokens(enc, json.dumps([[c.get("name"), c.get("args")] for c in tool_calls], sort_keys=True))
    return n
