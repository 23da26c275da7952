"""Closed-form answers of a benchmark item: reading them from text and comparing them with labels.

An answer part is ``@name[value]``. The value runs to the bracket that closes the opening one, so
it may hold brackets of its own: a list ``@outliers[[3, 7]]``, a dict ``@stats[{'a': [1, 2]}]``
(:func:`answer_parts`). A value is read (:func:`parse_value`) as a list (``[...]`` or ``(...)``), a
dict (``{key: value, ...}``) or a scalar text; labels are read the same way, and a label may also
be a JSON list or object (:func:`label_value`).

A sub-answer matches its label (:func:`same`) when

* scalar: both, once stripped of one layer of matching quotes, are numbers and the answer lies
  within half a unit of the label's last digit written out in full (``"0.35"``: 0.345-0.355;
  ``"12"`` and ``"1e3"`` = 1000: half a unit either side), or both are the same text
  (case and runs of spaces ignored; ``"nan"`` is text; an empty label wants an empty answer);
* list: the same number of items, matched one to one in any order (an answer without brackets
  is split at its commas);
* dict: the same keys (case ignored), each value matching.

A number is digits with an optional sign, fraction, exponent and trailing ``%``; commas only as
thousands separators in groups of three (``1,234.5``; ``1,0,0`` is text, not 100); a number
whose exponent is beyond +-:data:`MAX_EXPONENT` (``1e999999999``) is compared as text, so no
answer can overflow the arithmetic.
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal, InvalidOperation
from typing import Any, Union

#: the longest value of one answer part, in characters (a longer one is ignored).
MAX_VALUE_CHARS = 10_000
#: lists and dicts nested deeper than this are compared as text.
MAX_DEPTH = 20
#: numbers whose decimal exponent lies beyond +-this are compared as text.
MAX_EXPONENT = 1000
#: lists longer than this are matched in order only (matching in any order costs n^2).
MAX_UNORDERED = 200

Value = Union[str, list, dict]

_OPEN_RE = re.compile(r"@([A-Za-z_][A-Za-z0-9_]*)\[")
_NUMBER_RE = re.compile(r"^[+-]?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d{1,12})?$")
_PAIRS = {"[": "]", "(": ")", "{": "}"}
_QUOTES = ("'", '"')


# --- reading answer parts ------------------------------------------------------------------------
def answer_parts(text: str) -> list[tuple[str, str]]:
    """Every ``@name[value]`` part of ``text`` whose brackets close on its line, in order of
    their start, the value stripped. One pass: a part that never closes is skipped, the parts
    inside it still count (``@n[1.0 and @k[]`` gives ``k``)."""
    text = text or ""
    opens = {m.start(): m for m in _OPEN_RE.finditer(text)}
    stack: list[tuple[int, re.Match | None]] = []  # (where the value starts, the @name[ match or None)
    parts: list[tuple[int, str, str]] = []
    i = 0
    while i < len(text):
        m = opens.get(i)
        if m is not None:
            stack.append((m.end(), m))
            i = m.end()
            continue
        c = text[i]
        if c == "\n":
            stack.clear()
        elif c == "[":
            stack.append((i + 1, None))
        elif c == "]" and stack:
            start, named = stack.pop()
            if named is not None and i - start <= MAX_VALUE_CHARS:
                parts.append((named.start(), named.group(1), text[start:i].strip()))
        i += 1
    return [(name, value) for _, name, value in sorted(parts)]


def extract(text: str) -> dict[str, str]:
    """The ``@name[value]`` answers of a text; the last one of each name wins (the final answer)."""
    return dict(answer_parts(text))


# --- reading values --------------------------------------------------------------------------------
def _closes_at_end(s: str) -> bool:
    """Whether the bracket opening ``s`` is closed by its last character (``[1] + [2]`` is not)."""
    depth = 0
    for i, c in enumerate(s):
        if c in _PAIRS:
            depth += 1
        elif c in _PAIRS.values():
            depth -= 1
            if depth == 0:
                return i == len(s) - 1
    return False


def _split_top(s: str, sep: str) -> list[str]:
    """``s`` cut at ``sep`` outside brackets and outside quoted items (a quote opens a string
    only at the start of an item, so the apostrophe of ``men's`` does not)."""
    out, depth, quote, start, at_item_start = [], 0, None, 0, True
    for i, c in enumerate(s):
        if quote is not None:
            if c == quote:
                quote = None
            continue
        if at_item_start and c in _QUOTES:
            quote = c
            at_item_start = False
            continue
        if not c.isspace():
            at_item_start = False
        if c in _PAIRS:
            depth += 1
        elif c in _PAIRS.values():
            depth -= 1
        elif c == sep and depth == 0:
            out.append(s[start:i])
            start = i + 1
            at_item_start = True
    out.append(s[start:])
    return out


def unquote(s: str) -> str:
    """``s`` stripped, without one layer of matching quotes around it."""
    s = s.strip()
    if len(s) >= 2 and s[0] in _QUOTES and s[-1] == s[0]:
        return s[1:-1].strip()
    return s


def _key(s: str) -> str:
    return " ".join(unquote(s).split()).casefold()


def parse_value(text: str, depth: int = 0) -> Value:
    """A value's text as a list, a dict or (anything else) its stripped text."""
    s = text.strip()
    if depth >= MAX_DEPTH or len(s) < 2 or not _closes_at_end(s):
        return s
    if s[0] in "[(":
        inner = s[1:-1]
        return [parse_value(p, depth + 1) for p in _split_top(inner, ",")] if inner.strip() else []
    out: dict[str, Value] = {}
    for item in _split_top(s[1:-1], ","):
        if not item.strip():
            continue
        kv = _split_top(item, ":")
        if len(kv) < 2:
            return s  # braces around something that is not key: value pairs
        out[_key(kv[0])] = parse_value(":".join(kv[1:]), depth + 1)
    return out


def label_value(v: Any, depth: int = 0) -> Value:
    """A label as given in a labels file (JSON): text is read by :func:`parse_value`; numbers
    as written (a float by its shortest repr; NaN and infinities as the text ``nan``, ``inf``);
    ``true``/``false`` as text; lists and objects item by item. ValueError for null or for
    nesting deeper than :data:`MAX_DEPTH`."""
    if depth > MAX_DEPTH:
        raise ValueError("the label is nested too deeply")
    if isinstance(v, str):
        return parse_value(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else str(v).lower()
    if isinstance(v, list):
        return [label_value(x, depth + 1) for x in v]
    if isinstance(v, dict):
        return {_key(str(k)): label_value(x, depth + 1) for k, x in v.items()}
    raise ValueError(f"a label value must be text, a number, a list or an object, got {json.dumps(v)}")


# --- comparing -------------------------------------------------------------------------------------
def number(text: str) -> Decimal | None:
    """``text`` as a number (see the module docstring), or None."""
    s = text.strip()
    if s.endswith("%"):
        s = s[:-1].rstrip()
    if not _NUMBER_RE.match(s):
        return None
    try:
        d = Decimal(s.replace(",", ""))
    except InvalidOperation:  # pragma: no cover - the pattern admits only valid literals
        return None
    if not d.is_finite() or abs(_exponent(d)) > MAX_EXPONENT or abs(d.adjusted()) > MAX_EXPONENT:
        return None
    return d


def _exponent(d: Decimal) -> int:
    """The exponent of a finite Decimal (:func:`number` returns only those; NaN and the infinities
    have a letter there instead)."""
    e = d.as_tuple().exponent
    if not isinstance(e, int):
        raise ValueError(f"{d} is not a finite number")
    return e


def match(label: str, answer: str | None) -> bool:
    """A scalar sub-answer matches its scalar label (see the module docstring)."""
    if answer is None:
        return False
    lab_text, ans_text = unquote(label), unquote(answer)
    lab = number(lab_text)
    if lab is not None:
        ans = number(ans_text)
        if ans is None:
            return False
        half = Decimal(5).scaleb(min(_exponent(lab), 0) - 1)
        return abs(ans - lab) <= half
    return _key(ans_text) == _key(lab_text)


def _one_to_one(labels: list[Value], answers: list[Value]) -> bool:
    """Whether the answers can be paired one to one with the labels they match (in order first,
    then in any order by augmenting paths, for at most :data:`MAX_UNORDERED` items)."""
    if len(labels) != len(answers):
        return False
    if all(same(lab, ans) for lab, ans in zip(labels, answers, strict=False)):
        return True
    if len(labels) > MAX_UNORDERED:
        return False
    ok = [[j for j, ans in enumerate(answers) if same(lab, ans)] for lab in labels]
    owner: dict[int, int] = {}

    def place(i: int, seen: set[int]) -> bool:
        for j in ok[i]:
            if j not in seen:
                seen.add(j)
                if j not in owner or place(owner[j], seen):
                    owner[j] = i
                    return True
        return False

    return all(place(i, set()) for i in range(len(labels)))


def same(label: Value, answer: Value | None) -> bool:
    """An answer (text, or already read by :func:`parse_value`) matches a label (read by
    :func:`label_value`); see the module docstring."""
    if answer is None:
        return False
    if isinstance(answer, str):
        answer = parse_value(answer)
    if isinstance(label, dict):
        return isinstance(answer, dict) and set(answer) == set(label) and all(same(label[k], answer[k]) for k in label)
    if isinstance(label, list):
        if isinstance(answer, str):
            answer = [parse_value(p) for p in _split_top(answer, ",")] if answer.strip() else []
        return isinstance(answer, list) and _one_to_one(label, answer)
    if isinstance(answer, list) and len(answer) == 1:
        answer = answer[0]
    return isinstance(answer, str) and match(label, answer)


def shown(v: Value) -> str:
    """A label as the results table shows it (its JSON)."""
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)


__all__ = [
    "MAX_DEPTH",
    "MAX_EXPONENT",
    "MAX_VALUE_CHARS",
    "Value",
    "answer_parts",
    "extract",
    "label_value",
    "match",
    "number",
    "parse_value",
    "same",
    "shown",
    "unquote",
]
