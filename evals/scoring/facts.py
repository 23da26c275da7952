"""The fact scorers and the heuristic score built on them.

A report is cut into units that may or may not state findings (:func:`_units`); each fact of
the ground truth is then looked for by its kind (number, set, claim, label), with the negation,
comparative and item-matching rules those need, and judged found, contradicted or missing
(:class:`FactResult`, :func:`score_facts`). A fact is found only when the report commits to one
value, label, set or direction for it: a statement that offers several candidates together
(:func:`_joined`, :func:`_groups`) or as a guess (:func:`hedged`) does not count, and statements
that commit to something else count against it (:class:`_Tally`). :func:`truth_facts` checks a ground truth's facts,
:func:`heuristic_score` puts completeness, quality and accuracy together, and
:func:`truth_problems` tests that a truth's own statements are found.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from cooplab.evals.scoring.extraction import Number, context_re, extract_numbers, phrase_re, quality_parts
from cooplab.evals.scoring.sections import (
    SECTIONS,
    TOKEN_RE,
    clean_text,
    heading_blocks,
    logical_lines,
    section_presence,
    split_sentences,
    text_chunks,
)

FACT_KINDS: tuple[str, ...] = ("number", "set", "claim", "label")
#: a number (or a label) belongs to a context phrase if it is in the same sentence and at most
#: this many words away from it.
NUMBER_WINDOW = 12
LABEL_WINDOW = 15
#: a negation cue negates a phrase if it is in the same clause and at most this many words away.
NEGATION_WINDOW = 6
#: a number or label fact looks at no more than this many occurrences of its context phrases
#: (real reports have a few dozen; bounds the work on hostile input).
MAX_OCCURRENCES = 1000
#: a claim reads at most this many occurrences of its phrases (and of its opposite's) in one
#: sentence (a sentence states a claim once or twice; bounds the work on hostile input).
CLAIM_OCCURRENCES = 20


# =============================================================================================
# facts
# =============================================================================================
@dataclass(frozen=True)
class FactResult:
    """One fact's verdict: ``found`` (stated correctly), ``contradicted`` (stated wrongly) or
    ``missing`` (not stated), its score in [0, 1] and the text that decided it."""

    id: str
    kind: str
    status: Literal["found", "contradicted", "missing"]
    score: float
    evidence: str

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "status": self.status, "score": self.score, "evidence": self.evidence}


@dataclass(frozen=True)
class _Unit:
    """A sentence (or list item, table row, heading) of the report, lower-cased, and whether it
    may state findings (see :func:`_units`)."""

    text: str
    line: int
    kind: str  # "text" | "item" | "row" | "heading"
    findings: bool = True
    end: int = -1  # the last line (a paragraph or list item may wrap over several lines)

    @property
    def last(self) -> int:
        return max(self.line, self.end)


_FINDINGS_SECTIONS = frozenset({"abstract", "dataset", "results", "evaluation", "conclusion"})


def _units(text: str) -> list[_Unit]:
    """The report cut into units: the logical lines (:func:`logical_lines`: paragraphs, list
    items, table rows, headings, code lines), paragraphs and list items cut into sentences (the
    text after an inline heading "Results: ..." is a paragraph). A unit may state findings
    unless it is in the introduction or the methods (which state aims and procedures: "we
    tested for interactions" is no finding): text in a block of the abstract, dataset, results,
    evaluation or conclusion, in a combined block including one of them ("Methods and
    Results"), or outside every section (a report without headings)."""
    out: list[_Unit] = []
    procedural: set[int] = set()
    for b in heading_blocks(text):
        if not set(b.sections) & _FINDINGS_SECTIONS:
            procedural.update(b.rows)
    for kind, start, end, line in logical_lines(text):
        finding = start not in procedural
        low = line.lower()
        if kind in ("row", "heading"):
            out.extend(_Unit(c, start, kind, finding, end) for c in text_chunks(low))
            continue
        for sent in split_sentences(low):
            out.append(_Unit(sent, start, "item" if kind == "item" else "text", finding, end))
    return out


def _phrase_res(phrases: Any) -> list[re.Pattern]:
    if isinstance(phrases, str):
        phrases = [phrases]
    return [p for p in (context_re(str(x)) for x in (phrases or [])) if p is not None]


def _first_match(unit: str, pats: list[re.Pattern]) -> re.Match | None:
    best = None
    for p in pats:
        m = p.search(unit)
        if m and (best is None or m.start() < best.start()):
            best = m
    return best


def _all_matches(unit: str, pats: list[re.Pattern]) -> list[re.Match]:
    out = [m for p in pats for m in p.finditer(unit)]
    return sorted(out, key=lambda m: m.start())


_WORD_SPAN_RE = re.compile(r"\S+")


def _window(unit: str, start: int, end: int, n: int) -> tuple[int, int]:
    """Character bounds of the ``n`` words before ``start`` and the ``n`` words after ``end``
    (looking at most 20 characters a word away)."""
    reach = 20 * n
    region = max(0, start - reach)
    before = [m.start() for m in _WORD_SPAN_RE.finditer(unit, region, start)]
    if len(before) >= n:
        lo = before[-n]
    elif region == 0:
        lo = 0
    else:
        lo = before[1] if len(before) > 1 else start  # the first may be cut by the region
    hi = end
    for i, m in enumerate(_WORD_SPAN_RE.finditer(unit, end, min(len(unit), end + reach))):
        if i >= n:
            break
        hi = m.end()
    return lo, hi


_CLAUSE_RE = re.compile(r"[;:,()]|\s-\s|(?<![^\W_])(?:but|whereas|while|although|though|however|yet|unlike)(?![^\W_])")
_NEG_WORDS = {
    "no",
    "not",
    "never",
    "none",
    "neither",
    "nor",
    "without",
    "cannot",
    "absent",
    "absence",
    "lack",
    "lacks",
    "lacking",
    "failed",
    "fails",
    "fail",
    "unable",
    "insignificant",
    "nonsignificant",
    "non-significant",
    "nothing",
}


_COMPARISON_CUT_RE = re.compile(
    _CLAUSE_RE.pattern + r"|(?<![^\W_])(?:than|against|versus|vs|compared (?:to|with)|ahead of)(?![^\W_])"
)


def _clause(unit: str, start: int, end: int, comparisons: bool = False) -> tuple[int, int]:
    """The clause of ``unit`` around [start, end): cut at ``; : , ( )``, a spaced dash and
    but / whereas / while / although / though / however / yet / unlike; with ``comparisons``
    also at than / against / versus / vs / compared to / compared with / ahead of."""
    return _between_cuts(unit, start, end, _COMPARISON_CUT_RE if comparisons else _CLAUSE_RE)


def _between_cuts(unit: str, start: int, end: int, cuts: re.Pattern[str]) -> tuple[int, int]:
    """The bounds of the stretch of ``unit`` around [start, end) that no match of ``cuts`` crosses."""
    lo, hi = 0, len(unit)
    for m in cuts.finditer(unit):
        if m.end() <= start:
            lo = m.end()
        elif m.start() >= end:
            hi = m.start()
            break
    return lo, hi


def _is_neg(tok: str, nxt: str | None) -> bool:
    t = tok.strip(".,;:!?\"'()[]*")
    if t == "not" and nxt is not None and nxt.strip(".,;:!?\"'()[]*") == "only":
        return False
    return t in _NEG_WORDS or t.endswith("n't")


def negated(unit: str, start: int, end: int, window: int = NEGATION_WINDOW) -> bool:
    """Whether the phrase at [start, end) of ``unit`` is negated: a negation cue (no, not,
    never, none, neither, nor, without, cannot, absent/absence, lack, failed, unable,
    insignificant, any "-n't"; not "not only") within ``window`` words of it in its clause
    (:func:`_clause`). The phrase's own words are not cues ("no interaction" as a phrase is not
    a negated "interaction")."""
    lo, hi = _clause(unit, start, end)
    left = unit[lo:start].split()[-window:]
    right = unit[end:hi].split()[:window]
    toks = left + right
    return any(_is_neg(t, toks[i + 1] if i + 1 < len(toks) else None) for i, t in enumerate(toks))


# --- commitment: hedges and alternatives ----------------------------------------------------------
#: words that make a statement a guess, not a finding ("may be", "one of", "either ... or").
_HEDGE_RE = re.compile(
    r"(?<![^\W_])(?:possibly|perhaps|maybe|might|may|could|either|whether|candidates?|"
    r"alternatively|one of|some of|any of|and/or)(?![^\W_])"
)
#: a hedge is read from its sentence part: cut at ; : and at but / whereas / while / although /
#: though / however / yet (not at commas or brackets, which "possibly X, or possibly Y" uses).
_HEDGE_SPAN_RE = re.compile(r"[;:]|(?<![^\W_])(?:but|whereas|while|although|though|however|yet)(?![^\W_])")
#: how far a hedge word may stand before the phrase, and after it (unless it stands between the
#: phrase and the value or direction the statement gives it).
HEDGE_BEFORE = 6
HEDGE_AFTER = 3
_ALT_WORD_RE = re.compile(r"(?<![^\W_])(?:or|nor|either)(?![^\W_])")
_PURE_JOIN_RE = re.compile(
    r"^(?:[\s,;/\-\u2013\u2014]|(?<![^\W_])(?:and|or|nor|either|to|from|between|the|a|an)(?![^\W_]))*$"
)
_WORD_RE = re.compile(r"[^\W_]+")


def _part(unit: str, start: int, end: int) -> tuple[int, int]:
    """The bounds of the sentence part around [start, end) (cut by :data:`_HEDGE_SPAN_RE`)."""
    return _between_cuts(unit, start, end, _HEDGE_SPAN_RE)


def hedged(unit: str, start: int, end: int, evidence: tuple[int, int] | None = None) -> bool:
    """Whether the statement about the phrase at [start, end) of ``unit`` is a guess: a hedge
    word (possibly, perhaps, maybe, might, may, could, either, whether, candidate(s), one of,
    some of, any of, and/or) in the phrase's sentence part (:data:`_HEDGE_SPAN_RE`), at most
    :data:`HEDGE_BEFORE` words before the phrase, :data:`HEDGE_AFTER` words after it, or anywhere
    between the phrase and its ``evidence`` (the span of the value, label or comparative the
    statement gives it)."""
    lo, hi = _part(unit, start, end)
    before = " ".join(unit[lo:start].split()[-HEDGE_BEFORE:])
    after = " ".join(unit[end:hi].split()[:HEDGE_AFTER])
    between = ""
    if evidence is not None:
        between = unit[end : evidence[0]] if evidence[0] >= end else unit[evidence[1] : start]
    return any(_HEDGE_RE.search(t) for t in (before, after, between))


def _joined(between: str) -> bool:
    """Whether the text between two values (or names) offers them together: only connectors
    (commas, semicolons, dashes, slashes, and / or / nor / either / to / from / between, articles:
    "3, 4 or 5", "116-124", "between 10 and 20", "kriging or the random forest"), or an or /
    nor / either with at most two other words ("4 species or 5 species", "t = 120 or t = 130")."""
    if _PURE_JOIN_RE.match(between):
        return True
    return bool(_ALT_WORD_RE.search(between)) and len(_WORD_RE.findall(between)) <= 3


def _groups(unit: str, spans: list[tuple[int, int]], alternatives_only: bool = False) -> list[int]:
    """For spans of values or names in ``unit`` (sorted by start), the index of the group each
    belongs to: neighbours whose text between is :func:`_joined` (``alternatives_only``: and holds
    an or / nor / either, so that a list "A, B and C" is one statement of three items, while "A
    or B" offers two) share a group."""
    out: list[int] = []
    for i, (a, _b) in enumerate(spans):
        if i and spans[i - 1][1] <= a:
            between = unit[spans[i - 1][1] : a]
            same = _joined(between) and (not alternatives_only or bool(_ALT_WORD_RE.search(between)))
        else:
            same = i > 0  # overlapping spans name one thing
        out.append(out[-1] if same else i)
    return out


# --- comparatives ------------------------------------------------------------------------------
_COMPARATIVES: dict[str, tuple[str, int]] = {}
for _w in (
    "higher",
    "greater",
    "larger",
    "bigger",
    "stronger",
    "increased",
    "increase",
    "increases",
    "exceed",
    "exceeds",
    "exceeded",
    "exceeding",
    "above",
    "elevated",
    "inflated",
):
    _COMPARATIVES[_w] = ("magnitude", 1)
for _w in ("lower", "smaller", "weaker", "fewer", "decreased", "decrease", "decreases", "below", "reduced", "deflated"):
    _COMPARATIVES[_w] = ("magnitude", -1)
for _w in ("better", "outperform", "outperforms", "outperformed", "outperforming", "superior"):
    _COMPARATIVES[_w] = ("quality", 1)
for _w in ("worse", "underperform", "underperforms", "underperformed", "underperforming", "inferior"):
    _COMPARATIVES[_w] = ("quality", -1)
_COMP_RE = re.compile(r"(?<![^\W_])(" + "|".join(sorted(_COMPARATIVES, key=len, reverse=True)) + r")(?![^\W_])")
_THAN_RE = re.compile(r"(?<![^\W_])(?:than|compared (?:to|with)|relative to|versus|vs)(?![^\W_])")


def _orientation(
    unit: str, ctx: re.Match, axis: str | None, negation: bool = True, bounds: tuple[int, int] | None = None
) -> tuple[str, int] | None:
    """The direction a sentence gives the thing named at ``ctx``: the comparative nearest to it
    (on ``axis`` if given: "magnitude" higher/lower..., "quality" better/worse...), +1 or -1,
    flipped if "than" (compared to/with, relative to, versus, vs) stands between the comparative
    and the phrase (the phrase is then what is compared against: "random CV error is higher than
    spatial CV" says spatial CV is lower), and (if ``negation``) flipped if the phrase or the
    comparative (three words before it) is negated. Only comparatives within ``bounds`` (if
    given) are read. None if there is no such comparative."""
    best = None
    lo, hi = bounds or (0, len(unit))
    for m in _COMP_RE.finditer(unit, lo, hi):
        ax, sign = _COMPARATIVES[m.group(1)]
        if axis is not None and ax != axis:
            continue
        dist = ctx.start() - m.end() if m.end() <= ctx.start() else m.start() - ctx.end()
        if best is None or abs(dist) < best[0]:
            best = (abs(dist), m, ax, sign)
    if best is None:
        return None
    _, m, ax, sign = best
    if m.end() <= ctx.start() and _THAN_RE.search(unit, m.end(), ctx.start()):
        sign = -sign
    lo, _ = _clause(unit, m.start(), m.end())
    neg_comparative = any(_is_neg(t, None) for t in unit[lo : m.start()].split()[-3:])
    if negation and (negated(unit, ctx.start(), ctx.end()) or neg_comparative):
        sign = -sign
    return ax, sign


# --- items of a set / label --------------------------------------------------------------------
_ITEM_SPLIT_RE = re.compile(r"^([^\W\d_][^\W\d]*?)[\s_\-]?(\d+)$")
_ARROW_SPLIT_RE = re.compile(r"\s*(?:->|=>|-->)\s*")
_ARROW = r"\s*(?:-+>|=>|\bon\b|\bto\b)\s*"


def _numbered(s: str) -> tuple[str, int] | None:
    m = _ITEM_SPLIT_RE.match(s)
    return (m.group(1).rstrip("_- "), int(m.group(2))) if m else None


def _prefix_pattern(prefix: str) -> str:
    return r"[\s\-_]*".join(re.escape(w) for w in TOKEN_RE.findall(prefix)) + "s?"


def _item_key(item: str) -> tuple[str, re.Pattern, re.Pattern | None]:
    """An item's canonical key, its pattern, and its family's pattern (or None).

    * "prefix + number" (``BM03``, ``sensor_03``, ``sp2``): the prefix (optionally plural),
      then a space, ``_``, ``-`` or nothing, then the number with any leading zeros (``BM3`` =
      ``BM03``); its family: every "prefix + number" (``BM\\d+``), keyed ``bm#3``;
    * a directed pair ``A->B`` of two numbered items (``sp2->sp1``): A, then an arrow (``->``,
      ``-->``, ``=>``, ``\u2192``) or "on" or "to", then B; its family: every such pair of the
      same prefixes;
    * anything else (``elevation``, ``soil_ph``): a phrase (:func:`phrase_re`), no family."""
    s = str(item).strip().lower().replace("\u2192", "->")
    one = _numbered(s)
    if one:
        prefix, num = one
        pre = _prefix_pattern(prefix)
        item_re = re.compile(rf"(?<![^\W_])(?:{pre})[\s_\-]?0*{num}(?![\w.]\d|\w)", re.IGNORECASE)
        fam_re = re.compile(rf"(?<![^\W_])(?:{pre})[\s_\-]?(\d{{1,12}})(?![\w.]\d|\w)", re.IGNORECASE)
        return f"{prefix}#{num}", item_re, fam_re
    sides = _ARROW_SPLIT_RE.split(s)
    na = _numbered(sides[0]) if len(sides) == 2 else None
    nb = _numbered(sides[1]) if len(sides) == 2 else None
    if na and nb:
        (pa, a), (pb, b) = na, nb
        qa, qb = _prefix_pattern(pa), _prefix_pattern(pb)
        item_re = re.compile(
            rf"(?<![^\W_])(?:{qa})[\s_\-]?0*{a}{_ARROW}(?:{qb})[\s_\-]?0*{b}(?![\w.]\d|\w)", re.IGNORECASE
        )
        fam_re = re.compile(
            rf"(?<![^\W_])(?:{qa})[\s_\-]?(\d{{1,12}}){_ARROW}(?:{qb})[\s_\-]?(\d{{1,12}})(?![\w.]\d|\w)", re.IGNORECASE
        )
        return f"{pa}#{a}->{pb}#{b}", item_re, fam_re
    return s, phrase_re(s) or re.compile(re.escape(s), re.IGNORECASE), None


def _family_key(key: str, m: re.Match) -> str:
    """The key of a family member matched by ``m``, shaped like the truth item's ``key``."""
    if "->" in key:
        pa, pb = (side.split("#")[0] for side in key.split("->"))
        return f"{pa}#{int(m.group(1))}->{pb}#{int(m.group(2))}"
    return f"{key.split('#')[0]}#{int(m.group(1))}"


_Item = tuple[str, re.Pattern, "re.Pattern | None"]


def _mention_spans(text: str, truth: list[_Item], others: list[_Item]) -> list[tuple[str, int, int, bool]]:
    """Every naming of a truth item or of another item (a family member, an item of ``others``)
    in ``text``: (key, start, end, is a truth item)."""
    truth_keys = {k for k, _, _ in truth}
    out = [(k, m.start(), m.end(), True) for k, rx, _ in truth for m in rx.finditer(text)]
    for k, _, fam in truth:
        if fam is not None:
            for m in fam.finditer(text):
                key = _family_key(k, m)
                if key not in truth_keys:
                    out.append((key, m.start(), m.end(), False))
    out += [(k, m.start(), m.end(), False) for k, rx, _ in others if k not in truth_keys for m in rx.finditer(text)]
    return out


def _mentions(text: str, truth: list[_Item], others: list[_Item]) -> tuple[set[str], set[str]]:
    """The truth items and the other items (family members and ``others``) named in ``text``."""
    spans = _mention_spans(text, truth, others)
    return {k for k, _, _, t in spans if t}, {k for k, _, _, t in spans if not t}


def _distance(a: tuple[int, int], spans: list[tuple[int, int]]) -> int:
    """Characters between span ``a`` and the nearest of ``spans`` (sorted by start; 0 if they
    overlap). Phrase occurrences are short and barely overlap, so the spans starting next to
    ``a`` (found by bisection) are the nearest."""
    if not spans:
        return 10**9
    i = bisect.bisect_left(spans, (a[0], -1))
    near = spans[max(0, i - 3) : i + 3]
    return min(max(0, b0 - a[1], a[0] - b1) for b0, b1 in near)


def _snippet(text: str, n: int = 200) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= n else text[: n - 3] + "..."


def _number_close(n: Number, value: float, tol: float) -> bool:
    """A read number equals the truth within ``tol`` (plus a 1e-9 relative slack); a percentage
    also counts as its fraction (``4%`` = 0.04)."""
    slack = tol + 1e-9 * max(1.0, abs(value))
    if abs(n.value - value) <= slack:
        return True
    return n.percent and abs(n.value / 100.0 - value) <= slack


_QUANTIFIES_RE = re.compile(r"^[\s%]*(?:[^\W\d_][\w'-]*\s+)?$")
#: a number right after a phrase, in its clause, with only linking words between (at most
#: this many), is the value the statement gives it ("rmse 0.082", "the shift occurs at t = 40";
#: not "the patients fall into 3 subtypes").
DIRECT_WORDS = 3
_LINK_RE = re.compile(
    r"^(?:[\s:=~(\u2248]|(?<![^\W_])(?:is|are|was|were|be|been|of|at|equals?|reach(?:es|ed)?|about|"
    r"approximately|around|roughly|nearly|near|t|n|occurs?|occurred|ha[sd]|have|gives?|gave|count|"
    r"value|estimated|measured|lies|stands)(?![^\W_]))*$"
)


@dataclass
class _Tally:
    """The statements of one fact across a report: ``right`` committed to the truth, ``hedged``
    offered it among other candidates or as a guess, ``wrong`` committed to something else;
    with the first text of each."""

    right: int = 0
    hedged: int = 0
    wrong: int = 0
    first: dict[str, str] = field(default_factory=dict)

    def add(self, verdict: str, text: str) -> None:
        setattr(self, verdict, getattr(self, verdict) + 1)
        self.first.setdefault(verdict, text)

    def committed(self) -> bool:
        """Found: at least one statement commits to the truth, none hedges, and those that
        commit to the truth outnumber those that commit to something else."""
        return self.right > 0 and self.hedged == 0 and self.right > self.wrong

    def result(self, fact: dict[str, Any], kind: str, neutral: str | None = None) -> FactResult:
        """The fact's verdict (``neutral``: a text that gave numbers or names but no statement)."""
        first = self.first
        if self.committed():
            return FactResult(fact["id"], kind, "found", 1.0, _snippet(first["right"]))
        if self.hedged:
            return FactResult(fact["id"], kind, "contradicted", 0.0, "hedged: " + _snippet(first["hedged"]))
        if self.wrong or self.right:
            text = first.get("wrong") or first["right"]
            return FactResult(fact["id"], kind, "contradicted", 0.0, _snippet(text))
        if neutral is not None:
            return FactResult(fact["id"], kind, "contradicted", 0.0, _snippet(neutral))
        return FactResult(fact["id"], kind, "missing", 0.0, "")


def _number_verdict(
    unit: str, m: re.Match, nums: list[Number], close: list[bool], alone: list[bool]
) -> tuple[str | None, bool]:
    """What one occurrence of a number fact's phrase states: ("right" | "hedged" | "wrong" |
    None, whether numbers were read). ``nums``: the unit's numbers, ``close``: which are within
    the tolerance, ``alone``: which are offered only with close ones (their group, :func:`_groups`,
    is all close). See :func:`_score_number`."""
    lo, hi = _window(unit, m.start(), m.end(), NUMBER_WINDOW)
    first, last = (bisect.bisect_left(nums, x, key=lambda n: n.start) for x in (lo, hi))
    idx = [
        i
        for i in range(first, last)
        if nums[i].start + len(nums[i].text) <= hi and not (m.start() <= nums[i].start < m.end())
    ]
    before = [i for i in idx if nums[i].start < m.start()]
    direct = None
    if before and _QUANTIFIES_RE.match(unit[nums[before[-1]].start + len(nums[before[-1]].text) : m.start()]):
        direct = before[-1]
        idx = [direct]
    else:
        _, c_hi = _clause(unit, m.start(), m.end())
        after = [i for i in idx if nums[i].start >= m.end() and nums[i].start < c_hi]
        link = unit[m.end() : nums[after[0]].start] if after else ""
        if after and len(link.split()) <= DIRECT_WORDS and _LINK_RE.match(link):
            direct = after[0]
    good = [i for i in idx if close[i]]
    if good:
        n = nums[good[0]]
        guess = hedged(unit, m.start(), m.end(), (n.start, n.start + len(n.text)))
        return ("hedged" if guess or not any(alone[i] for i in good) else "right"), True
    if direct is not None:
        return "wrong", True
    return None, bool(idx)


def _score_number(fact: dict[str, Any], units: list[_Unit]) -> FactResult:
    """A number fact. For every occurrence of a context phrase in a sentence that may state
    findings (not a heading, not in the introduction or methods: :func:`_units`), the numbers
    near it are read: if a number directly precedes the phrase (at most one word between: "5
    species", "2 latent subtypes") it alone is read, as it counts that thing ("6 species linked
    by 4 interactions" states 6 species); otherwise every number within :data:`NUMBER_WINDOW`
    words of the phrase in its sentence (not inside the phrase itself). The occurrence is a
    statement that

    * commits to the truth ("right") if a number read is within the tolerance of the truth and
      every number offered together with it is too (:func:`_joined`: "t = 120-124" commits,
      "3, 4, 5 or 6 species" and "between 100 and 140" do not), and no hedge word goes with it
      (:func:`hedged`: "could be 5 species");
    * hedges ("hedged") if such a number is read but offered among other values or as a guess;
    * commits to another value ("wrong") if no close number is read and the number the phrase
      directly gives (the one counting it, or the first within :data:`DIRECT_WORDS` words after
      it in its clause: "reaches rmse 0.082") is not close.

    Found (1) when statements commit to the truth, none hedges, and they outnumber those that
    commit to another value (:class:`_Tally`); otherwise contradicted (0) if any statement gave
    numbers, missing (0) if none did. At most :data:`MAX_OCCURRENCES` occurrences are read."""
    value, tol = float(fact["value"]), float(fact.get("tolerance") or 0.0)
    pats = _phrase_res(fact.get("context"))
    tally = _Tally()
    neutral: str | None = None
    seen = 0
    for u in units:
        if u.kind == "heading" or not u.findings or seen >= MAX_OCCURRENCES:
            continue
        matches = _all_matches(u.text, pats)[: MAX_OCCURRENCES - seen]
        if not matches:
            continue
        nums = extract_numbers(u.text)
        groups = _groups(u.text, [(n.start, n.start + len(n.text)) for n in nums])
        close = [_number_close(n, value, tol) for n in nums]
        far_groups = {g for g, c in zip(groups, close, strict=False) if not c}
        alone = [g not in far_groups for g in groups]
        for m in matches:
            seen += 1
            verdict, read = _number_verdict(u.text, m, nums, close, alone)
            if verdict is not None:
                tally.add(verdict, u.text)
            elif read and neutral is None:
                neutral = u.text
    return tally.result(fact, "number", neutral)


def _affinities(unit: str, contexts: list[list[re.Pattern]]) -> list[int]:
    """For each context (a fact's phrases): how many of its phrases occur in ``unit``, not
    counting an occurrence that lies inside a longer occurrence of any context's phrase ("not
    significant" hides "significant")."""
    occ = sorted(
        (
            (m.start(), m.end(), c, k)
            for c, pats in enumerate(contexts)
            for k, p in enumerate(pats)
            for m in p.finditer(unit)
        ),
        key=lambda o: (o[0], -o[1]),
    )
    kept = []
    max_end, max_span = -1, None  # the furthest-reaching occurrence so far (it starts no later)
    for o in occ:
        if max_end >= o[1] and max_span != (o[0], o[1]):
            continue  # inside a longer occurrence
        kept.append(o)
        if o[1] > max_end:
            max_end, max_span = o[1], (o[0], o[1])
    return [len({k for _, _, c2, k in kept if c2 == c}) for c in range(len(contexts))]


_SET_CLAUSE_RE = re.compile(
    r";|(?<![^\W_])(?:but|whereas|while|although|though|however|unlike|except|apart from)(?![^\W_])"
    r"|,\s+and\s+(?=(?:the|a|an|this|these|those|its|their|it|they|we|in|within|on|for|with|at|by|"
    r"after|before|when|so|thus|therefore)(?![^\W_]))"
)


_ALTERNATIVE_NEXT_RE = re.compile(r"\s*(?:or|nor|alternatively|otherwise)(?![^\W_])")


def _set_clauses(units: list[_Unit]) -> list[_Unit]:
    """The units cut into clauses at ";", at but / whereas / while / although / though /
    however / unlike / except / apart from, and at ", and" before a determiner, pronoun or
    preposition (", and the", ", and within", ...), but not at other commas or colons, which
    separate the items of a list: "BM03 and BM11 are predictive, whereas BM05 is prognostic"
    names BM05 in another clause; "BM03, BM11, and BM05 are predictive" is one clause. A clause
    that opens with an alternative ("; or rather BM05") stays with the one before it, which it
    offers an alternative to."""
    out: list[_Unit] = []
    for u in units:
        if u.kind in ("heading", "row"):
            out.append(u)
            continue
        start = 0
        for m in _SET_CLAUSE_RE.finditer(u.text):
            if _ALTERNATIVE_NEXT_RE.match(u.text, m.end()):
                continue
            if u.text[start : m.start()].strip():
                out.append(_Unit(u.text[start : m.start()].strip(), u.line, u.kind, u.findings, u.end))
            start = m.end()
        if u.text[start:].strip():
            out.append(_Unit(u.text[start:].strip(), u.line, u.kind, u.findings, u.end))
    return out


def _set_hedged(unit: str, phrase: tuple[int, int], spans: list[tuple[str, int, int, bool]]) -> bool:
    """Whether a clause naming items offers them as alternatives or guesses: two items joined by
    or / nor / either (:func:`_groups`: "BM03 or BM11", "either BM03 and BM07 or BM11"), or a
    hedge word with the phrase (:func:`hedged`: "could be", "some of", "one of")."""
    groups = _groups(unit, [(a, b) for _, a, b, _ in spans], alternatives_only=True)
    if any(groups[i] == groups[i - 1] and spans[i - 1][2] <= spans[i][1] for i in range(1, len(spans))):
        return True  # two distinct namings offered as alternatives (overlapping ones name one item)
    return hedged(unit, phrase[0], phrase[1], spans[0][1:3])


#: words by which a clause outside a set fact's context claims something of the items it names:
#: a relation (drives, predicts, affects, is associated with, explains ...), an effect or its
#: size (effect, coefficient, correlation, odds ratio, importance, significant ...) or a
#: direction (the comparatives: higher, increases, reduced ...). Naming items without one of
#: these ("the columns are rainfall, soil and x") states nothing about them.
_SET_CLAIM_RE = re.compile(
    r"(?<![^\W_])(?:driv(?:e|es|en|ing|er|ers)|predict(?:s|ed|ing|ive|or|ors)?|affect(?:s|ed|ing)?|influenc(?:e|es|ed|ing)|"
    r"determin(?:e|es|ed|ing)|explain(?:s|ed|ing)?|caus(?:e|es|ed|ing)|modif(?:y|ies|ied|ying)|modulat(?:e|es|ed|ing)|"
    r"rais(?:e|es|ed|ing)|reduc(?:e|es|ing)|lower(?:s|ing)|boost(?:s|ed|ing)?|depend(?:s|ed|ing)?|"
    r"associat(?:ed|ion|ions)|correlat(?:e|es|ed|ion|ions)|relat(?:ed|ion|ionship)|link(?:ed)?|"
    r"contribut(?:e|es|ed|ing|ion)|effects?|impacts?|coefficients?|slopes?|odds ratio|importance|important|"
    r"significant(?:ly)?|strongest|weakest|main factors?|key factors?)(?![^\W_])"
)


def _claims_items(clause: str) -> bool:
    """Whether a clause claims something of the items it names (:data:`_SET_CLAIM_RE`, :data:`_COMP_RE`)."""
    return _SET_CLAIM_RE.search(clause) is not None or _COMP_RE.search(clause) is not None


def _score_set(fact: dict[str, Any], units: list[_Unit], set_facts: Sequence[dict[str, Any]] = ()) -> FactResult:
    """A set fact, scored by the items named against the truth items (right minus wrong).

    Where: the clauses (:func:`_set_clauses`; list items and table rows are whole) that may
    state findings (not in the introduction or methods: :func:`_units`) and belong to this
    fact's context, plus the list items or table rows directly below such a clause if it ends
    with ":", is a table header row or is a heading (one blank line allowed before the list).
    A clause belongs to the context if it contains one of its phrases and, when the truth has
    other set facts (``set_facts``), no other set fact's context has more of its phrases in the
    clause (:func:`_affinities`): "Positive interactions: ..." belongs to the positive set, not
    to the negative one whose context also has "interaction". In a clause tied with other set
    facts, the truth items named count, but another item counts as a false positive only if
    one of this fact's phrases is at least as near to it as any tied sibling's phrase ("The
    treatment benefits the subtype marked by BM10": BM10 is a subtype marker, not a false
    treatment-modifying biomarker).

    Named items: the truth items; false positives: other members of a truth item's family
    (``BM07`` when the truth is ``BM03``, ``BM11``) and items of the optional ``universe`` list
    not in the truth. A clause, or a list or table below one, that names more than
    max(4, 2 x the truth's size) distinct items, or every item of the universe, enumerates the
    candidates (a dataset description, a table of all biomarkers) and is ignored. A clause
    containing one of the optional ``negative_context`` phrases (naming the opposite kind of
    item, e.g. "prognostic" for predictive biomarkers, "no effect" for important covariates) is
    not this fact's context.

    Commitment: a clause that offers items as alternatives or guesses (:func:`_set_hedged`:
    "BM03 or BM07", "either ... or", "may include", "; or rather ...") makes the fact
    contradicted (0), and so do two statements naming two or more items each whose sets differ
    and neither contains the other ("The predictive biomarkers are BM03 and BM11. The predictive
    biomarkers are BM07 and BM19.").

    Score = max(0, right items - wrong items) / truth items: each wrongly named item cancels a
    right one, so naming the truth together with as many other candidates earns nothing. Found
    if the score is at least 0.5, contradicted if below with false positives named, else
    missing. If no item is named in context, the items named in clauses outside it count at half
    weight (score / 2), but only clauses that may state findings and claim something of the
    items (:func:`_claims_items`: a relation, an effect or its size, a direction; "rainfall
    raises yield", not "the columns are rainfall and soil"), do not hedge, and are no
    enumeration: a fact needs the claim, not the words."""
    truth = [_item_key(x) for x in fact["value"]]
    others = [_item_key(x) for x in (fact.get("universe") or [])]
    universe = {k for k, _, _ in others} | {k for k, _, _ in truth} if others else set()
    limit = max(4, 2 * len(truth))
    pats = _phrase_res(fact.get("context"))
    siblings = [f for f in set_facts if f is not fact and f.get("id") != fact.get("id")]
    contexts = [pats] + [_phrase_res(f.get("context")) for f in siblings]
    clauses = _set_clauses([u for u in units if u.findings])
    t_hit: set[str] = set()
    o_hit: set[str] = set()

    statements: list[frozenset[str]] = []  # the item sets of the statements naming two or more

    def take(named: list[tuple[str, bool]]) -> None:
        keys = {k for k, _ in named}
        if len(keys) > limit or (universe and len(universe) > len(truth) and universe <= keys):
            return  # an enumeration of candidates
        if len(keys) >= 2:
            statements.append(frozenset(keys))
        for k, is_truth in named:
            (t_hit if is_truth else o_hit).add(k)

    neg_pats = _phrase_res(fact.get("negative_context"))
    hedges: list[str] = []
    for i, u in enumerate(clauses):
        if _first_match(u.text, pats) is None or (neg_pats and _first_match(u.text, neg_pats) is not None):
            continue
        tied: list[list[re.Pattern]] = []
        if siblings:
            aff = _affinities(u.text, contexts)
            if aff[0] == 0 or aff[0] < max(aff[1:]):
                continue
            tied = [contexts[c] for c in range(1, len(contexts)) if aff[c] == aff[0]]
        if u.kind != "heading":
            named = []
            own = [(m.start(), m.end()) for m in _all_matches(u.text, pats)]
            rivals = sorted((m.start(), m.end()) for sp in tied for m in _all_matches(u.text, sp))
            spans = sorted(_mention_spans(u.text, truth, others), key=lambda s: (s[1], -s[2]))
            if spans and _set_hedged(u.text, own[0], spans):
                hedges.append(u.text)
                continue
            for key, a, b, is_truth in spans:
                # in a clause shared with an equally strong sibling, a non-truth item counts
                # only if this fact's phrase is at least as near to it as the sibling's
                if is_truth or not rivals or _distance((a, b), own) <= _distance((a, b), rivals):
                    named.append((key, is_truth))
            take(named)
        if u.text.rstrip().endswith(":") or u.kind in ("heading", "row"):
            # the list or table right below belongs to this context: the next line's units if
            # they are list items or table rows, and the items/rows on the lines directly after
            j = i + 1
            while j < len(clauses) and clauses[j].line <= u.last:
                j += 1
            last = None
            block = []
            while (
                j < len(clauses)
                and clauses[j].kind in ("item", "row")
                and (last is None or clauses[j].line <= last + 1)
            ):
                block.append(clauses[j].text)
                last = clauses[j].last
                j += 1
            if block:
                take([(k, t) for k, _, _, t in _mention_spans("\n".join(block), truth, others)])
    if hedges:
        return FactResult(fact["id"], "set", "contradicted", 0.0, "hedged: " + _snippet(hedges[0]))
    rival = next(((a, b) for a in statements for b in statements if not (a <= b or b <= a)), None)
    if rival is not None:
        return FactResult(
            fact["id"], "set", "contradicted", 0.0, f"names different sets: {sorted(rival[0])} and {sorted(rival[1])}"
        )
    weight = 1.0
    where = "in context"
    if not t_hit and not o_hit:
        for u in clauses:
            spans = (
                sorted(_mention_spans(u.text, truth, others), key=lambda s: (s[1], -s[2]))
                if u.kind != "heading"
                else []
            )
            if spans and _claims_items(u.text) and not _set_hedged(u.text, spans[0][1:3], spans):
                take([(k, t) for k, _, _, t in spans])
        weight, where = 0.5, "outside the context, in a claim (half weight)"
    if not t_hit and not o_hit:
        return FactResult(fact["id"], "set", "missing", 0.0, "")
    net = max(0, len(t_hit) - len(o_hit)) / len({k for k, _, _ in truth})
    evidence = f"{where}: named {sorted(t_hit)} of {sorted(k for k, _, _ in truth)}, others {sorted(o_hit)}"
    if net >= 0.5:
        status = "found"
    elif o_hit:
        status = "contradicted"
    else:
        status = "missing"
    return FactResult(fact["id"], "set", status, round(weight * net, 6), evidence)


def _comparative_span(unit: str, ctx: re.Match) -> tuple[int, int] | None:
    """The span of the comparative nearest to the phrase at ``ctx`` in its sentence part
    (:func:`_part`), or None."""
    lo, hi = _part(unit, ctx.start(), ctx.end())
    best = min(_COMP_RE.finditer(unit, lo, hi), key=lambda c: abs(c.start() - ctx.start()), default=None)
    return None if best is None else (best.start(), best.end())


def _claim_direction(fact: dict[str, Any]) -> tuple[str, int] | None:
    """The direction a comparative claim requires, or None for a plain claim (a statement
    without a comparative). The statement gives the axis and the raw direction (its
    :func:`_orientation`, negations ignored; the first comparative if no context phrase is in
    it); ``value`` decides: true keeps the direction, false reverses it. So a false claim
    "spatial CV gives a higher error than random CV" requires reports to say it is lower (or
    not higher), whether its statement is worded as the claim or as its denial."""
    stmt = str(fact.get("statement") or "").lower()
    m = _first_match(stmt, _phrase_res(fact.get("context")))
    if m is None:
        c = _COMP_RE.search(stmt)
        o = _COMPARATIVES[c.group(1)] if c else None
    else:
        o = _orientation(stmt, m, None, negation=False)
    if o is None:
        return None
    return o[0], o[1] if bool(fact["value"]) else -o[1]


#: an inquiry: a sentence part in which the phrase is only what was looked at ("we examined the
#: spatial autocorrelation") states no finding about it ...
_INQUIRY_RE = re.compile(
    r"(?<![^\W_])(?:look(?:ed)? (?:at|for)|examin(?:e|ed|ing)|stud(?:y|ied|ying)|investigat(?:e|ed|ing)|"
    r"explor(?:e|ed|ing)|consider(?:ed|ing)?|assess(?:ed|ing)?|check(?:ed|ing)?(?: for)?|"
    r"analy[sz](?:e|ed|ing)|test(?:ed|ing)? for|search(?:ed)? for|measur(?:e|ed|ing)|evaluat(?:e|ed|ing)|"
    r"quantif(?:y|ied|ying)|estimat(?:e|ed|ing)|describ(?:e|ed|ing))(?![^\W_])"
)
#: ... unless the part also reports a result ("we examined X and found it positive")
_RESULT_RE = re.compile(
    r"(?<![^\W_])(?:found|finds?|shows?|showed|shown|reveal(?:s|ed)?|indicat(?:es|ed)|confirm(?:s|ed)|"
    r"demonstrat(?:es|ed)|is|are|was|were|exists?|existed|present|detected|observed)(?![^\W_])"
)


def _only_inquired(unit: str, m: re.Match) -> bool:
    """Whether the phrase at ``m`` is only the object of an inquiry (:data:`_INQUIRY_RE`) in its
    sentence part, which reports no result (:data:`_RESULT_RE`)."""
    lo, hi = _part(unit, m.start(), m.end())
    part = unit[lo : m.start()] + " " + unit[m.end() : hi]
    return _INQUIRY_RE.search(unit, lo, m.start()) is not None and _RESULT_RE.search(part) is None


def _claim_assertion(unit: str, m: re.Match, value: bool, direction: tuple[str, int] | None) -> bool | None:
    """Whether the occurrence ``m`` of a claim's phrase agrees with the claim (True), disagrees
    or only guesses (False), or says nothing about it (None). See :func:`_score_claim`."""
    if direction is not None:
        o = _orientation(unit, m, direction[0], bounds=_part(unit, m.start(), m.end()))
        ok = None if o is None else (o[1] == direction[1])
    elif _only_inquired(unit, m):
        ok = None  # the topic named, nothing claimed of it
    else:
        ok = (not negated(unit, m.start(), m.end())) == value
    if ok is not None and hedged(unit, m.start(), m.end(), _comparative_span(unit, m)):
        return False
    return ok


def _score_claim(fact: dict[str, Any], units: list[_Unit]) -> FactResult:
    """A claim fact (value true: the report should assert it; false: deny it). Each sentence
    that may state findings (not a heading, not in the introduction or methods: :func:`_units`)
    containing a context phrase is one assertion; each occurrence of a phrase in it is read:

    * comparative claim (its statement has a comparative, e.g. "spatial CV gives a higher error
      than random CV"): the occurrence's orientation (:func:`_orientation`) on the statement's
      axis must equal the required direction (:func:`_claim_direction`); without a comparative
      on that axis it is neutral;
    * plain claim: the occurrence asserts the finding unless the phrase is negated
      (:func:`negated`); consistent if that equals ``value``. A phrase that is only the object
      of an inquiry in a part reporting no result ("we examined the spatial autocorrelation":
      :func:`_only_inquired`) asserts nothing: the claim needs its statement, not its words.

    An occurrence of an optional ``negative_context`` phrase (naming the opposite finding)
    asserts the opposite unless negated. A hedged occurrence (:func:`hedged`: "may be", "either
    ... or", "perhaps the reverse") is inconsistent: a guess commits to no direction. The
    sentence is consistent if some occurrence is and none is inconsistent, inconsistent if any
    is. Found (1) if some sentence is consistent and none inconsistent (a report that states the
    claim both ways has not committed to it); contradicted (0) if any is inconsistent; missing
    (0) if no sentence asserts anything."""
    value = bool(fact["value"])
    pats = _phrase_res(fact.get("context"))
    neg_pats = _phrase_res(fact.get("negative_context"))
    direction = _claim_direction(fact)
    good = bad = seen = 0
    ev_good = ev_bad = ""
    for u in units:
        if u.kind == "heading" or not u.findings or seen >= MAX_OCCURRENCES:
            continue
        ms = _all_matches(u.text, pats)[:CLAIM_OCCURRENCES]
        ns = _all_matches(u.text, neg_pats)[:CLAIM_OCCURRENCES]
        seen += len(ms) + len(ns)
        said = [_claim_assertion(u.text, m, value, direction) for m in ms]
        said += [negated(u.text, n.start(), n.end()) and not hedged(u.text, n.start(), n.end()) for n in ns]
        if False in said:
            bad += 1
            ev_bad = ev_bad or u.text
        elif True in said:
            good += 1
            ev_good = ev_good or u.text
    if good + bad == 0:
        return FactResult(fact["id"], "claim", "missing", 0.0, "")
    if bad == 0:
        return FactResult(fact["id"], "claim", "found", 1.0, _snippet(ev_good))
    return FactResult(fact["id"], "claim", "contradicted", 0.0, _snippet(ev_bad))


def _label_verdict(unit: str, m: re.Match, spans: list[tuple[str, int, int, bool]], groups: list[int]) -> str | None:
    """What one occurrence of a label fact's phrase states: "right" | "hedged" | "wrong" | None.
    ``spans``: every naming of a candidate in ``unit`` (:func:`_mention_spans`), sorted, with the
    group each belongs to (:func:`_groups`). See :func:`_score_label`."""
    lo, hi = _window(unit, m.start(), m.end(), LABEL_WINDOW)
    c_lo, c_hi = _clause(unit, m.start(), m.end(), comparisons=True)
    lo, hi = max(lo, c_lo), min(hi, c_hi)
    near = [i for i, (_, a, _, _) in enumerate(spans) if lo <= a < hi and not m.start() <= a < m.end()]
    named = [i for i in near if spans[i][3] and not negated(unit, spans[i][1], spans[i][2])]
    if named:
        i = named[0]
        offered = any(not spans[j][3] for j in range(len(spans)) if groups[j] == groups[i])
        return "hedged" if offered or hedged(unit, m.start(), m.end(), spans[i][1:3]) else "right"
    if near:  # another candidate named, or the label only negated
        return "wrong"
    return None


def _score_label(fact: dict[str, Any], units: list[_Unit]) -> FactResult:
    """A label fact. For every occurrence of a context phrase in a sentence that may state
    findings (not a heading, not in the introduction or methods: :func:`_units`), the text
    within :data:`LABEL_WINDOW` words of it and in its clause (:func:`_clause` with
    comparisons: "the random forest is the best model, ahead of kriging" does not name kriging
    the best) is searched for the label and its optional ``aliases`` (as items:
    :func:`_item_key`). The occurrence is a statement that

    * commits to the label ("right") if it is named and not negated (:func:`negated`), not
      offered together with another candidate (:func:`_joined`: "kriging or the random forest",
      "kriging, random forest and linear regression"), and no hedge word goes with it
      (:func:`hedged`: "is one of", "could be");
    * hedges ("hedged") if it is named but offered so;
    * commits to something else ("wrong") if instead one of the optional ``alternatives``, or
      another member of the label's family (``sensor_07`` for ``sensor_03``), is named, or the
      label only negated.

    Found (1) when statements commit to the label, none hedges, and they outnumber those that
    commit to something else (:class:`_Tally`); otherwise contradicted (0) if any statement named
    a candidate, missing (0) if none did."""
    names = [_item_key(x) for x in [fact["value"], *(fact.get("aliases") or [])]]
    alts = [_item_key(x) for x in (fact.get("alternatives") or [])]
    pats = _phrase_res(fact.get("context"))
    tally = _Tally()
    seen = 0
    for u in units:
        if u.kind == "heading" or not u.findings or seen >= MAX_OCCURRENCES:
            continue
        matches = _all_matches(u.text, pats)[: MAX_OCCURRENCES - seen]
        if not matches:
            continue
        spans = sorted(_mention_spans(u.text, names, alts), key=lambda s: (s[1], -s[2]))
        groups = _groups(u.text, [(a, b) for _, a, b, _ in spans])
        for m in matches:
            seen += 1
            verdict = _label_verdict(u.text, m, spans, groups)
            if verdict is not None:
                tally.add(verdict, u.text)
    return tally.result(fact, "label")


_SCORERS = {"number": _score_number, "set": _score_set, "claim": _score_claim, "label": _score_label}


def truth_facts(truth: dict[str, Any]) -> list[dict[str, Any]]:
    """The ground truth's facts, checked: each needs a string ``id``, a ``kind`` of
    :data:`FACT_KINDS`, a ``value`` of the right type (number: finite real; set: non-empty list
    of strings; claim: bool; label: non-empty string), a list of ``context`` phrases and a
    ``statement``; an optional ``requires`` names other facts of the truth (which require
    nothing themselves: :func:`score_facts`). Raises ValueError naming the first bad fact."""
    if not isinstance(truth, dict) or not isinstance(truth.get("facts"), list):
        raise ValueError("the ground truth must be an object with a 'facts' list")
    facts = []
    for i, f in enumerate(truth["facts"]):
        where = f"fact {i}" + (f" ({f.get('id')!r})" if isinstance(f, dict) and "id" in f else "")
        if not isinstance(f, dict):
            raise ValueError(f"{where}: must be an object")
        if not isinstance(f.get("id"), str) or not f["id"]:
            raise ValueError(f"{where}: needs a string 'id'")
        kind = f.get("kind")
        if kind not in FACT_KINDS:
            raise ValueError(f"{where}: kind must be one of {', '.join(FACT_KINDS)}, got {kind!r}")
        v = f.get("value")
        if kind == "number" and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)):
            raise ValueError(f"{where}: a number fact needs a finite numeric value")
        if kind == "number" and f.get("tolerance") is not None:
            t = f["tolerance"]
            if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t < 0:
                raise ValueError(f"{where}: tolerance must be a non-negative number")
        if kind == "set" and (not isinstance(v, list) or not v or not all(isinstance(x, str) and x.strip() for x in v)):
            raise ValueError(f"{where}: a set fact needs a non-empty list of strings")
        if kind == "claim" and not isinstance(v, bool):
            raise ValueError(f"{where}: a claim fact needs a boolean value")
        if kind == "label" and (not isinstance(v, str) or not v.strip()):
            raise ValueError(f"{where}: a label fact needs a non-empty string value")
        ctx = f.get("context")
        if not isinstance(ctx, list) or not all(isinstance(c, str) for c in ctx):
            raise ValueError(f"{where}: 'context' must be a list of phrases")
        if not isinstance(f.get("statement"), str):
            raise ValueError(f"{where}: needs a 'statement'")
        facts.append(f)
    ids = [f["id"] for f in facts]
    for f in facts:
        req = f.get("requires")
        if req is None:
            continue
        where = f"fact {f['id']!r}"
        if not isinstance(req, list) or not req or not all(isinstance(r, str) for r in req):
            raise ValueError(f"{where}: 'requires' must be a non-empty list of fact ids")
        bad = [r for r in req if r not in ids or r == f["id"]]
        if bad:
            raise ValueError(f"{where}: 'requires' names {bad[0]!r}, which is not another fact of this truth")
        chained = [r for r in req if facts[ids.index(r)].get("requires") is not None]
        if chained:
            raise ValueError(
                f"{where}: requires {chained[0]!r}, which has 'requires' itself; name the facts it rests on directly"
            )
    return facts


def score_facts(text: str, truth: dict[str, Any]) -> list[FactResult]:
    """Every fact of ``truth`` scored against ``text`` (already cleaned), in the truth's order.

    A fact with ``requires`` (a list of other facts' ids) is found only when every fact it
    requires is found too (:func:`_backed`): a finding a report can state without looking at
    the data (a claim that holds for every dataset of a task) counts only together with the
    data's findings it rests on."""
    units = _units(text)
    facts = truth_facts(truth)
    sets = [f for f in facts if f["kind"] == "set"]
    results = [_score_set(f, units, sets) if f["kind"] == "set" else _SCORERS[f["kind"]](f, units) for f in facts]
    by_id = {r.id: r for r in results}
    return [_backed(r, f, by_id) for r, f in zip(results, facts, strict=False)]


def _backed(result: FactResult, fact: dict[str, Any], by_id: dict[str, FactResult]) -> FactResult:
    """``result`` if the fact requires nothing, or every fact it ``requires`` is found; a found
    fact whose required facts are not all found becomes missing (score 0), its evidence saying
    which are not (a contradicted or missing one stays as it is)."""
    req = fact.get("requires") or []
    lacking = [r for r in req if by_id[r].status != "found"]
    if result.status != "found" or not lacking:
        return result
    return FactResult(
        result.id,
        result.kind,
        "missing",
        0.0,
        f"stated, but not backed by the data's findings it rests on ({', '.join(lacking)} not found): "
        + result.evidence,
    )


# =============================================================================================
# the heuristic score
# =============================================================================================
@dataclass(frozen=True)
class HeuristicScore:
    """The deterministic scorer's verdict on one report."""

    completeness: float
    quality: float
    accuracy: float
    sections: dict[str, bool]
    quality_parts: dict[str, float]
    quality_terms: dict[str, list[str]]
    facts: list[FactResult]
    truncated: bool = False

    def scores(self) -> dict[str, float]:
        return {"completeness": self.completeness, "quality": self.quality, "accuracy": self.accuracy}

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.scores(),
            "sections": dict(self.sections),
            "quality_parts": dict(self.quality_parts),
            "quality_terms": {k: list(v) for k, v in self.quality_terms.items()},
            "facts": [f.as_dict() for f in self.facts],
            "truncated": self.truncated,
        }


def heuristic_score(report: Any, truth: dict[str, Any]) -> HeuristicScore:
    """Score a report (str; bytes are decoded; anything else ``str()``-ed) against a ground
    truth. ``completeness`` = share of :data:`SECTIONS` present with substantive content
    (:func:`section_presence`); ``quality`` = mean of the four :func:`quality_parts`;
    ``accuracy`` = mean of the facts' scores (0 if the truth has no facts). Only the first
    :data:`MAX_CHARS` characters are read. Raises ValueError only for a malformed truth."""
    facts_ok = truth_facts(truth)  # fail on a bad truth before any work
    text, truncated = clean_text(report)
    sections = section_presence(text)
    parts, terms = quality_parts(text)
    facts = score_facts(text, truth) if facts_ok else []
    return HeuristicScore(
        completeness=round(sum(sections.values()) / len(SECTIONS), 6),
        quality=round(sum(parts.values()) / len(parts), 6),
        accuracy=round(sum(f.score for f in facts) / len(facts), 6) if facts else 0.0,
        sections=sections,
        quality_parts={k: round(v, 6) for k, v in parts.items()},
        quality_terms=terms,
        facts=facts,
        truncated=truncated,
    )


def truth_problems(truth: dict[str, Any]) -> list[str]:
    """What in a ground truth the heuristic scorer cannot verify: every fact's ``statement``,
    alone and among all the statements, must be found with score 1 (e.g. its context phrase and
    value must be in it, a claim's statement must agree with its value). Empty if all is well.
    A generator's tests should assert this is empty for every task and seed."""
    facts = truth_facts(truth)
    problems = []
    together = "\n".join(str(f["statement"]) for f in facts)
    joint = {r.id: r for r in score_facts(clean_text(together)[0], truth)}
    for f in facts:
        alone = _SCORERS[f["kind"]](f, _units(clean_text(str(f["statement"]))[0]))
        if alone.status != "found" or alone.score < 1.0:
            problems.append(
                f"{f['id']}: its statement alone is {alone.status} (score {alone.score}): {f['statement']!r}"
            )
        elif joint[f["id"]].status != "found" or joint[f["id"]].score < 1.0:
            j = joint[f["id"]]
            problems.append(f"{f['id']}: among the other statements it is {j.status} (score {j.score}; {j.evidence})")
    return problems


__all__ = [
    "FACT_KINDS",
    "LABEL_WINDOW",
    "MAX_OCCURRENCES",
    "NEGATION_WINDOW",
    "NUMBER_WINDOW",
    "FactResult",
    "HeuristicScore",
    "hedged",
    "heuristic_score",
    "negated",
    "score_facts",
    "truth_facts",
    "truth_problems",
]
