"""Scoring a science team's final report against its task's ground truth (§4.1.2, Appendix L).

Three dimensions, each in [0, 1]:

* **completeness**: the share of the seven required sections (:data:`SECTIONS`) present with
  substantive content;
* **quality**: task-agnostic signs of rigor: specific numbers, standard methods, statistical
  tests, cross-references to the other teams' work;
* **accuracy**: the task's known facts (``ground_truth.json``) stated correctly.

Two scorers:

* :func:`heuristic_score`: deterministic rules, summarized here and documented in full where
  they are implemented; the module constants (windows, thresholds, saturation points,
  vocabularies) are the knobs.

  - *Text* (:func:`clean_text`): bytes decoded leniently, the first :data:`MAX_CHARS`
    characters read, Unicode normalized. Markdown structure (:func:`logical_lines`): wrapped
    lines of a paragraph form one paragraph; list items, table rows, headings and code lines
    stand alone; sentences are cut at ``.!?`` (not after common abbreviations or in decimals).
  - *Sections* (:func:`_heading`, :func:`_blocks`): Markdown, bold, underlined, numbered,
    HTML, LaTeX, plain and inline ("Methods: ...") headings, matched against synonyms
    ("Dataset Description", "Materials and Methods", "Discussion and Conclusion", ...).
    *Substantive* (:func:`is_substantive`): at least :data:`MIN_SENTENCES` sentences,
    :data:`MIN_WORDS` words and :data:`MIN_DISTINCT_WORDS` distinct words once placeholder
    sentences (TBD, "to be completed", lorem ipsum, ...) are dropped, and not a copy of an
    earlier section's body. Completeness = substantive sections / 7.
  - *Quality* (:func:`quality_parts`): the mean of four parts, each a count of distinct items
    over a saturation point: numbers stated (:data:`NUMBERS_FULL`), standard methods named
    (:data:`METHOD_TERMS`, :data:`METHODS_FULL`), statistical tests and inference
    (:data:`TEST_TERMS`, :data:`TESTS_FULL`), references to other teams and their artifacts
    (:data:`CROSS_REF_TERMS`, :data:`CROSS_REFS_FULL`).
  - *Accuracy* (:func:`score_facts`): the mean of the facts' scores. Facts are only looked for
    in text that may state findings: not in the introduction or the methods (:func:`_units`).
    A *number* is found if a number within its tolerance stands next to a context phrase
    (:func:`_score_number`); a *set* scores the F1 of the items named in its context
    (:func:`_score_set`); a *claim* counts the sentences asserting and denying it, with
    negations and comparatives ("higher than") read (:func:`_score_claim`); a *label* is
    found if it is named next to its context (:func:`_score_label`). Each fact is ``found``,
    ``contradicted`` or ``missing`` (:class:`FactResult`).

* :func:`judge_report`: an LLM judge with the Appendix L rubric and response format, asked
  through the decision layer (:mod:`cooplab.agents.decisions`): the answer is validated
  (:class:`JudgeVerdict`), a validation error is fed back and the judge asked again up to
  ``max_attempts`` times, and a sample that never validates is recorded as a fallback and left
  out of the means. ``k`` samples per report give a mean and a spread; :func:`judge_agreement`
  and :func:`compare_judges` compare two judges (or a judge and the heuristic) over many
  reports.

Ground truth format (one JSON object per task and seed)::

    {"task": "ecology", "seed": 0, "description": "...", "equations": "...",
     "facts": [{"id": ..., "kind": "number" | "set" | "claim" | "label", "value": ...,
                "context": [phrases], "statement": "one sentence a correct report contains",
                # optional: "tolerance" (number); "universe" (set: all candidate items);
                # "negative_context" (set, claim: phrases naming the opposite); "aliases" and
                # "alternatives" (label)
               }, ...],
     "details": {...}}

:func:`truth_problems` checks a ground truth against these rules: every fact's own
``statement``, alone and among the others, must be found by the heuristic scorer (a
generator's self-test).
"""

from __future__ import annotations

import asyncio
import bisect
import json
import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

import numpy as np
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, ConfigDict, Field

from cooplab.agents.decisions import DecisionRecord, DecisionSpec, LLMService, decide

SECTIONS: tuple[str, ...] = ("abstract", "introduction", "dataset", "methods", "results", "evaluation", "conclusion")
FACT_KINDS: tuple[str, ...] = ("number", "set", "claim", "label")

#: at most this many characters of a report are read (about 50,000 words, far beyond any real
#: report); the rest is ignored and the score says ``truncated``. Bounds the work on hostile input.
MAX_CHARS = 300_000
#: substantive content: at least this many words (of two or more letters) ...
MIN_WORDS = 25
#: ... in at least this many sentences (or list items / table rows) of three or more tokens ...
MIN_SENTENCES = 2
#: ... with at least this many distinct words (defeats "data data data ...").
MIN_DISTINCT_WORDS = 12
#: quality saturation points: this many distinct numbers, named methods, statistical tests and
#: cross-references each give a full part score (linear below).
NUMBERS_FULL = 10
METHODS_FULL = 3
TESTS_FULL = 2
CROSS_REFS_FULL = 2
#: a number (or a label) belongs to a context phrase if it is in the same sentence and at most
#: this many words away from it.
NUMBER_WINDOW = 12
LABEL_WINDOW = 15
#: a negation cue negates a phrase if it is in the same clause and at most this many words away.
NEGATION_WINDOW = 6
#: a number or label fact looks at no more than this many occurrences of its context phrases
#: (real reports have a few dozen; bounds the work on hostile input).
MAX_OCCURRENCES = 1000


# =============================================================================================
# text hygiene
# =============================================================================================
_TRANSLATE = str.maketrans({
    "\u2212": "-", "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": " - ", "\u2015": " - ",
    "\u00a0": " ", "\u2009": " ", "\u202f": " ", "\u2007": " ", "\u200b": "", "\ufeff": "",
    "\u2264": "<=", "\u2265": ">=", "\u2248": "~", "\u00b1": " +/- ", "\u2018": "'", "\u2019": "'",
    "\u201c": '"', "\u201d": '"', "\u2022": "-", "\u2192": "->", "\u27f6": "->", "\u21d2": "=>",
})
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def clean_text(report: Any, max_chars: int = MAX_CHARS) -> tuple[str, bool]:
    """The report as scoreable text, and whether it was cut. Rules: ``None`` is empty; bytes are
    decoded as UTF-8 with undecodable bytes replaced; any other object is ``str()``-ed; lone
    surrogates are replaced; only the first ``max_chars`` characters are kept; line ends are
    ``\\n``; Unicode is NFKC-normalized (full-width digits, ligatures, superscripts); typographic
    minus signs and dashes become ``-``, non-breaking spaces spaces, and control characters
    (other than newline and tab) spaces."""
    if report is None:
        return "", False
    truncated = False
    if isinstance(report, (bytes, bytearray, memoryview)):
        raw = bytes(report[: max_chars * 4 + 1])
        truncated = len(raw) > max_chars * 4
        text = raw[: max_chars * 4].decode("utf-8", errors="replace")
    elif isinstance(report, str):
        text = report
    else:
        text = str(report)
    truncated = truncated or len(text) > max_chars
    text = text[:max_chars]
    text = text.encode("utf-8", errors="replace").decode("utf-8", errors="replace")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = unicodedata.normalize("NFKC", text)[:max_chars]
    text = text.translate(_TRANSLATE)
    return _CONTROL_RE.sub(" ", text), truncated


# =============================================================================================
# sections
# =============================================================================================
# (pattern on a normalized heading title, section, strong). A heading maps to the sections of its
# strong keywords; weak keywords ("summary", "discussion", "model", ...) only count when no strong
# one is present, so "Results and Discussion" is results and "Discussion" alone the conclusion.
_HEADING_KEYWORDS: list[tuple[str, str, bool]] = [
    (r"abstract", "abstract", True),
    (r"executive summary", "abstract", True),
    (r"synopsis", "abstract", True),
    (r"tl dr", "abstract", True),
    (r"summary", "abstract", False),
    (r"overview", "abstract", False),
    (r"introduction|intro", "introduction", True),
    (r"background", "introduction", True),
    (r"motivation", "introduction", True),
    (r"problem (?:statement|definition|formulation|description)", "introduction", True),
    (r"research questions?|objectives?|aims?(?: and scope)?|scope", "introduction", False),
    (r"(?:description of (?:the )?)?(?:datasets?|data ?sets?|data)(?: (?:description|overview|summary|characteristics|"
     r"exploration|collection|sources?|and preprocessing|preprocessing))?", "dataset", True),
    (r"exploratory data analysis|eda|study area", "dataset", True),
    (r"materials", "dataset", False),
    (r"methods?|methodology|methodological approach|approach(?:es)?|techniques|experimental (?:setup|design)",
     "methods", True),
    (r"models?|modell?ing|model architecture|analysis|pipeline|implementation|procedures?|feature engineering",
     "methods", False),
    (r"results?|findings|key findings|experiments?|experimental results|outcomes?", "results", True),
    (r"observations", "results", False),
    (r"evaluation|validation|performance|error analysis|model assessment", "evaluation", True),
    (r"metrics|robustness|benchmarks?|benchmarking", "evaluation", False),
    (r"conclusions?|concluding remarks|closing remarks|future work", "conclusion", True),
    (r"discussion|limitations|recommendations|outlook|implications", "conclusion", False),
    # known non-sections: they end the current section and are not scored
    (r"references|bibliography|appendix|appendices|acknowledge?ments?|table of contents|contents|"
     r"author contributions|code availability|supplementary(?: material)?", "other", True),
]
_KW_RES = [(re.compile(rf"(?<![^\W_])(?:{p})(?![^\W_])"), s, strong) for p, s, strong in _HEADING_KEYWORDS]
_CONNECTORS = {"and", "&", "/", "of", "the", "our", "a", "an", "for", "with", "in", "on"}

_MD_HEADING_RE = re.compile(r"^\s{0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t#]*$")
_HTML_HEADING_RE = re.compile(r"^\s*<h([1-6])[^>]*>(.*?)</h\1>\s*$", re.IGNORECASE)
_LATEX_HEADING_RE = re.compile(r"^\s*\\((?:sub)*)section\*?\{(.*)\}\s*$")
_LATEX_ABSTRACT_RE = re.compile(r"^\s*\\begin\{abstract\}\s*$")
_BOLD_LINE_RE = re.compile(r"^\s*(?:\*\*|__)(.+?)(?:\*\*|__)\s*:?\s*$")
_INLINE_RE = re.compile(r"^\s*(?:\*\*|__)?\s*([A-Za-z][A-Za-z &/]{1,40}?)\s*(?:\*\*|__)?\s*(?::|\s-\s)\s*(?:\*\*|__)?\s*(\S.*)$")
_NUMBERED_RE = re.compile(r"^\s*(?:section\s+)?(?:\d{1,2}(?:\.\d{1,2})*\.?|[ivx]{1,4}\.|[a-h]\.|\d{1,2}\))\s+(.+?)\s*$", re.IGNORECASE)
_SETEXT_RE = re.compile(r"^\s{0,3}(=+|-+)\s*$")
_FENCE_RE = re.compile(r"^\s*(```|~~~)")
_NUM_PREFIX_RE = re.compile(r"^(?:section\s+)?(?:\d{1,2}(?:\.\d{1,2})*\.?|[ivx]{1,4}\.|[a-h][.)]|\d{1,2}\))\s+", re.IGNORECASE)


def _norm_title(title: str) -> str:
    """Lower case, Markdown emphasis, numbering and punctuation dropped, spaces collapsed."""
    t = re.sub(r"[*_`#<>\[\]]", " ", title).strip()
    t = _NUM_PREFIX_RE.sub("", t)
    t = re.sub(r"[^\w\s&/]", " ", t.lower()).replace("_", " ")
    return re.sub(r"\s+", " ", t).strip()


def _title_sections(title: str, strict: bool) -> tuple[str, ...] | None:
    """The sections a heading title names, ``("other",)`` for a known non-section, or None.

    Strict (a heading without markup: a plain line): the whole title must be keywords and
    connectors ("Results and Discussion", "DATA & METHODS"); it names the sections of all its
    strong keywords (else of its weak ones). Loose (a Markdown, bold, HTML, LaTeX or underlined
    heading): a title that passes the strict rule is read strictly ("Data and Methods" names
    both); otherwise, at most 12 words, named by its earliest strong keyword (else earliest weak
    one), so "Model Evaluation on Held-out Data" is the evaluation."""
    t = _norm_title(title)
    if not t or len(t.split()) > 12:
        return None
    hits = []  # (start, end, section, strong)
    for rx, sec, strong in _KW_RES:
        for m in rx.finditer(t):
            hits.append((m.start(), m.end(), sec, strong))
    if not hits:
        return None
    rest = t
    for a, b, _, _ in sorted(hits, key=lambda h: h[0] - h[1]):  # longest first
        rest = rest[:a] + " " * (b - a) + rest[b:]
    strong = sorted(h for h in hits if h[3])
    chosen = strong or sorted(hits)
    if any(w not in _CONNECTORS for w in rest.split()):  # more than keywords and connectors
        return None if strict else (chosen[0][2],)
    out: list[str] = []
    for h in chosen:
        if h[2] not in out:
            out.append(h[2])
    secs = [s for s in out if s != "other"]
    return tuple(secs) if secs else ("other",)


def _is_title_case(title: str) -> bool:
    words = re.findall(r"[^\W\d_]+", title)
    return bool(words) and all(w[0].isupper() for w in words if len(w) >= 4)


@lru_cache(maxsize=1 << 15)
def _heading(line: str, next_line: str | None) -> tuple[int, tuple[str, ...] | None, str | None, bool] | None:
    """Whether ``line`` is a heading: (level, sections or None if unrecognized, inline body,
    consumes the next line). Recognized forms, in order:

    * Markdown ``# Title`` (level = number of ``#``), HTML ``<h2>``, LaTeX ``\\section{}`` and
      ``\\begin{abstract}``: loose matching; an unrecognized one is still a heading (it may end a
      section, see :func:`_blocks`);
    * a bold line ``**Methods**`` / ``__Methods:__`` (level 2): loose, at most 10 words, not
      ending with a period, not a table or figure caption;
    * a line underlined with ``===`` (level 1) or ``---`` (level 2): strict, or loose if at
      most 6 words in Title Case with no final period (a sentence above a ``---`` rule is text);
    * a numbered line ``2. Methods`` / ``IV. Results`` / ``Section 3 Data``: strict, or loose if
      at most 6 words in Title Case with no final period (level 2);
    * a plain line ``Methods`` / ``RESULTS AND DISCUSSION`` / ``Methods:``: strict, or loose if
      at most 6 words in Title Case with no final period (level 2);
    * an inline heading ``Methods: we fitted ...`` / ``**Abstract:** ...``: strict title before
      the colon, the rest of the line is the section's first body line.
    """
    s = line.strip()
    if not s:
        return None
    if len(s) > 200:  # too long for a heading line; only an inline heading "Methods: ..." remains
        m = _INLINE_RE.match(s[:300])
        secs = _title_sections(m.group(1), strict=True) if m else None
        return (2, secs, s[m.start(2):], False) if secs else None
    m = _MD_HEADING_RE.match(line)
    if m:
        title = m.group(2) or ""
        return len(m.group(1)), _title_sections(title, strict=False) if title else None, None, False
    m = _HTML_HEADING_RE.match(s)
    if m:
        return int(m.group(1)), _title_sections(re.sub(r"<[^>]+>", " ", m.group(2)), strict=False), None, False
    if _LATEX_ABSTRACT_RE.match(s):
        return 2, ("abstract",), None, False
    m = _LATEX_HEADING_RE.match(s)
    if m:
        return 2 + len(m.group(1)) // 3, _title_sections(m.group(2), strict=False), None, False
    m = _BOLD_LINE_RE.match(s)
    if m and len(m.group(1).split()) <= 10 and not m.group(1).rstrip(":").endswith(".") \
            and not re.match(r"\s*(?:table|figure|fig\.?)\s", m.group(1), re.IGNORECASE):
        secs = _title_sections(m.group(1), strict=False)
        return (2, secs, None, False) if secs else None
    words = s.split()
    title_like = len(words) <= 6 and not s.endswith((".", "?", "!", ",", ";")) and _is_title_case(s)
    if next_line is not None and _SETEXT_RE.match(next_line) and not s.startswith(("|", "-", "*")):
        secs = _title_sections(s, strict=True) or (_title_sections(s, strict=False) if title_like else None)
        if secs:
            return (1 if next_line.strip().startswith("=") else 2), secs, None, True
    m = _NUMBERED_RE.match(s)
    if m:
        title = m.group(1).rstrip(":")
        secs = _title_sections(title, strict=True)
        if secs is None and len(title.split()) <= 6 and not title.endswith(".") and _is_title_case(title):
            secs = _title_sections(title, strict=False)
        return (2, secs, None, False) if secs else None
    secs = _title_sections(s.rstrip(":"), strict=True)
    if secs is None and title_like:
        secs = _title_sections(s.rstrip(":"), strict=False)
    if secs:
        return 2, secs, None, False
    m = _INLINE_RE.match(s)
    if m:
        secs = _title_sections(m.group(1), strict=True)
        if secs:
            return 2, secs, m.group(2), False
    return None


@dataclass
class _Block:
    sections: tuple[str, ...]
    heading: str
    level: int
    lines: list[str] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)  # the line number of each of ``lines``

    def add(self, line: str, row: int) -> None:
        self.lines.append(line)
        self.rows.append(row)

    @property
    def body(self) -> str:
        return "\n".join(self.lines).strip()


def _blocks(text: str) -> list[_Block]:
    """The report as heading blocks, in order. Text before the first recognized heading (title,
    authors) belongs to no section. A recognized heading opens a block for its sections. An
    unrecognized Markdown/HTML/LaTeX heading at the same or a higher level than the open
    section's heading closes it (its text belongs to no section); a deeper one (a subsection such
    as ``### Random forest`` under ``## Methods``) continues it. Lines inside fenced code blocks
    are never headings."""
    blocks: list[_Block] = []
    current: _Block | None = None
    in_fence = False
    lines = text.split("\n")
    skip = False
    for i, line in enumerate(lines):
        if skip:
            skip = False
            continue
        if _FENCE_RE.match(line):
            in_fence = not in_fence
            if current is not None:
                current.add(line, i)
            continue
        h = None if in_fence else _heading(line, lines[i + 1] if i + 1 < len(lines) else None)
        if h is None:
            if current is not None:
                current.add(line, i)
            continue
        level, secs, inline, consumes = h
        skip = consumes
        if secs is None:  # an unrecognized heading
            if current is not None and level <= current.level:
                current = None
            elif current is not None:
                current.add(line, i)
            continue
        if secs == ("other",):
            current = None
            continue
        current = _Block(secs, line.strip(), level)
        if inline:
            current.add(inline, i)
        blocks.append(current)
    return blocks


def split_sections(text: Any) -> dict[str, str]:
    """The report's sections: {section: body text}, for the sections whose heading was found, in
    the order of :data:`SECTIONS`. A section with several headings (e.g. ``Results`` twice) gets
    their bodies joined; a combined heading ("Data and Methods") gives its body to both. See
    :func:`_heading` for the heading forms and :func:`_blocks` for where a section ends."""
    clean, _ = clean_text(text)
    out: dict[str, list[str]] = {}
    for b in _blocks(clean):
        for s in b.sections:
            out.setdefault(s, []).append(b.body)
    return {s: "\n\n".join(x for x in out[s] if x) for s in SECTIONS if s in out}


_PLACEHOLDER_RE = re.compile(
    r"\btbd\b|\btbc\b|\btodo\b|\bto-do\b|\bfixme\b|\bplaceholder\b|coming soon|\bxxx+\b|\blorem\b|\bipsum\b"
    r"|to be (?:completed|added|written|determined|filled(?: in)?|done|provided|updated|decided|confirmed|inserted)"
    r"|insert [^.]{0,40}? here|fill (?:this|in|out)|\[(?:section|content|text|insert|add)[^\]]{0,40}\]"
    r"|content (?:goes|will go) here|this section (?:is|will be) (?:empty|left blank|intentionally)",
    re.IGNORECASE)
_ITEM_RE = re.compile(r"^\s*(?:[-*+]|\d{1,2}[.)]|\(\d{1,2}\))\s+")
_TABLE_SEP_RE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?\s*$")
_ALPHA_WORD_RE = re.compile(r"[^\W\d_]{2,}")
_TOKEN_RE = re.compile(r"[^\W_]+")


def logical_lines(text: str) -> list[tuple[str, int, int, str]]:
    """The report's logical lines, as (kind, first line, last line, text), following Markdown:
    consecutive plain lines form one paragraph (a hard-wrapped sentence stays one sentence); a
    list item (``-``, ``*``, ``+``, ``1.``, ``2)``) starts a new one and takes the plain lines
    that follow it; a table row (``| ... |``), a heading (:func:`_heading`) and a line inside a
    fenced code block stand alone; blank lines, table separators and ``---`` rules end a
    paragraph. Kinds: "text", "item", "row", "heading", "code"; the text after an inline
    heading ("Methods: we fitted ...") starts a paragraph."""
    lines = text.split("\n")
    out: list[tuple[str, int, int, str]] = []
    buf: list[Any] | None = None  # [kind, first, last, parts]

    def flush() -> None:
        nonlocal buf
        if buf is not None:
            out.append((buf[0], buf[1], buf[2], " ".join(buf[3])))
            buf = None

    in_fence = skip = False
    for i, line in enumerate(lines):
        if skip:
            skip = False
            continue
        s = line.strip()
        if _FENCE_RE.match(line):
            flush()
            in_fence = not in_fence
            continue
        if in_fence:
            if s:
                out.append(("code", i, i, s))
            continue
        if not s or _TABLE_SEP_RE.match(line):
            flush()
            continue
        if s.startswith("|"):
            flush()
            out.append(("row", i, i, s))
            continue
        h = _heading(line, lines[i + 1] if i + 1 < len(lines) else None)
        if h is not None:
            flush()
            skip = h[3]
            if h[2] is None:
                out.append(("heading", i, i, s))
            else:
                buf = ["text", i, i, [h[2].strip()]]
            continue
        if _ITEM_RE.match(line):
            flush()
            buf = ["item", i, i, [s]]
        elif buf is None:
            buf = ["text", i, i, [s]]
        else:
            buf[2] = i
            buf[3].append(s)
    flush()
    return out


def is_substantive(body: str) -> bool:
    """Whether a section body is substantive content. Rules: a body containing "lorem ipsum" is
    placeholder text; otherwise it is cut into sentences (and list items, table rows), table
    separator rows dropped, and sentences containing a placeholder marker (TBD, TODO, "to be
    completed", "insert ... here", "[section content]", ...) dropped (sentences as in
    :func:`logical_lines`, subheadings not counted); what is left must have at
    least :data:`MIN_SENTENCES` sentences of three or more tokens, :data:`MIN_WORDS` words of two
    or more letters and :data:`MIN_DISTINCT_WORDS` distinct such words."""
    if not body or re.search(r"lorem\s+ipsum", body, re.IGNORECASE):
        return False
    words: list[str] = []
    n_sent = 0
    for kind, _, _, line in logical_lines(body):
        if kind == "heading":
            continue
        for sent in _split_sentences(line.replace("|", " ")):
            if _PLACEHOLDER_RE.search(sent):
                continue
            if len(_TOKEN_RE.findall(sent)) >= 3:
                n_sent += 1
            words.extend(w.lower() for w in _ALPHA_WORD_RE.findall(sent))
    return n_sent >= MIN_SENTENCES and len(words) >= MIN_WORDS and len(set(words)) >= MIN_DISTINCT_WORDS


def section_presence(text: str) -> dict[str, bool]:
    """{section: present with substantive content} for the seven sections (``text`` already
    cleaned). A block whose body repeats an earlier block's body word for word (the same filler
    pasted under every heading) is not substantive."""
    present = {s: False for s in SECTIONS}
    seen: set[str] = set()
    for b in _blocks(text):
        key = re.sub(r"\s+", " ", b.body.lower()).strip()
        if not key or key in seen:
            continue
        seen.add(key)
        if is_substantive(b.body):
            for s in b.sections:
                present[s] = True
    return present


# =============================================================================================
# sentences and numbers
# =============================================================================================
_SENT_SPLIT_RE = re.compile(r"(?<=[.!?])\s+")
_ABBREV = ("e.g.", "i.e.", "approx.", "vs.", "etc.", "al.", "fig.", "figs.", "cf.", "ca.", "eq.", "resp.", "incl.",
           "est.", "avg.", "std.", "sec.", "tab.", "ref.", "corr.")
#: a "sentence" longer than this (no punctuation in a wall of text) is cut into pieces of at most
#: this many characters at white space, which bounds the per-sentence work on hostile input.
MAX_SENTENCE_CHARS = 2000


def _split_sentences(line: str) -> list[str]:
    """A line cut after ``.``, ``!`` or ``?`` followed by white space, except after a common
    abbreviation (e.g., i.e., approx., vs., et al., Fig., ...). Decimals ("0.5") never split. A
    piece longer than :data:`MAX_SENTENCE_CHARS` is cut further (:func:`_chunks`)."""
    pieces = _SENT_SPLIT_RE.split(line.strip())
    out: list[str] = []
    for p in pieces:
        if out and out[-1].lower().endswith(_ABBREV) and len(out[-1]) < MAX_SENTENCE_CHARS:
            out[-1] = out[-1] + " " + p
        elif p:
            out.append(p)
    if any(len(p) > MAX_SENTENCE_CHARS for p in out):
        out = [c for p in out for c in _chunks(p)]
    return out


def _chunks(text: str, size: int = MAX_SENTENCE_CHARS) -> list[str]:
    """``text`` in pieces of at most ``size`` characters, cut at white space where possible."""
    out = []
    while len(text) > size:
        cut = text.rfind(" ", size // 2, size)
        cut = cut if cut > 0 else size
        out.append(text[:cut])
        text = text[cut:].lstrip()
    if text:
        out.append(text)
    return out


_NUMBER_RE = re.compile(
    r"(?:(?<![\w.)\]%])(?P<sign>[-+]))?(?<![\w.])"
    r"(?:(?P<int>\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?P<frac>\.\d+)?|(?P<frac0>\.\d+))"
    r"(?:[eE](?P<exp>[-+]?\d{1,3})(?![\w]))?"
    r"(?:\s?[x×*]\s?10\s?(?:\^|\*\*)\s?\(?(?P<exp2>[-+]?\d{1,3})\)?)?"
    r"(?P<pct>\s?%)?")
_NUMBER_WORDS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
                 "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16,
                 "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50}
_NUMBER_WORD_RE = re.compile(r"(?<![\w-])(" + "|".join(_NUMBER_WORDS) + r")(?![\w-])", re.IGNORECASE)


@dataclass(frozen=True)
class Number:
    """A number read from text: its value, whether it was a percentage, and its text."""

    value: float
    percent: bool
    text: str
    start: int


def extract_numbers(text: str, words: bool = True) -> list[Number]:
    """The numbers in ``text``, in order. Read: integers, decimals (``0.5``, ``.05``), thousands
    separators (``1,234.5``), signs (``-3.2``, but the ``-`` of a range ``110-130`` is not a
    sign), exponents (``1e-3``, ``2.5E+04``, ``3 x 10^-4``), percentages (``12%``, marked as such),
    numbers after ``=`` (``t=120``) and the number words two..twenty, thirty, forty, fifty (not
    "one": too often not a count). Not read: digits glued to letters or an underscore (``BM03``,
    ``sensor_03``, ``R2``) and non-finite values."""
    out: list[Number] = []
    for m in _NUMBER_RE.finditer(text):
        try:
            if m.group("int") is not None:
                base = m.group("int").replace(",", "") + (m.group("frac") or "")
            else:
                base = "0" + m.group("frac0")
            exp = m.group("exp") or m.group("exp2")
            v = float(base) * (10.0 ** int(exp) if exp else 1.0)
        except (OverflowError, ValueError):
            continue
        if m.group("sign") == "-":
            v = -v
        if math.isfinite(v):
            out.append(Number(v, bool(m.group("pct")), m.group(0).strip(), m.start()))
    if words:
        for m in _NUMBER_WORD_RE.finditer(text):
            out.append(Number(float(_NUMBER_WORDS[m.group(1).lower()]), False, m.group(1), m.start()))
        out.sort(key=lambda n: n.start)
    return out


# =============================================================================================
# quality
# =============================================================================================
# (name, pattern): matched case-insensitively as whole words, specific entries first: where two
# entries match at the same place the earlier one wins (see find_terms), so a generic entry
# ("regression") does not count again inside a specific one ("logistic regression").
METHOD_TERMS: list[tuple[str, str]] = [
    ("logistic regression", r"logistic regression"),
    ("linear regression", r"(?:ordinary least squares|ols|linear|multiple|multivariate) regression|least squares"),
    ("regularized regression", r"ridge(?: regression)?|lasso|elastic[- ]?net"),
    ("poisson/glm", r"poisson regression|generali[sz]ed linear models?|\bglms?\b|generali[sz]ed additive models?|\bgams?\b"),
    ("mixed effects", r"mixed[- ]effects?(?: models?)?|hierarchical (?:bayesian )?models?"),
    ("geographically weighted regression", r"geographically weighted regression|\bgwr\b"),
    ("random forest", r"random forests?"),
    ("gradient boosting", r"gradient[- ]boost(?:ing|ed)(?: trees| machines?)?|xgboost|lightgbm|catboost"),
    ("decision tree", r"decision trees?|\bcart\b"),
    ("support vector machine", r"support vector (?:machines?|regression)|\bsvm\b|\bsvr\b"),
    ("k-nearest neighbours", r"k[- ]?nearest neighbou?rs?|\bk-?nn\b"),
    ("neural network", r"neural networks?|\bmlp\b|multi-?layer perceptron|\blstm\b|autoencoders?"),
    ("k-means", r"k[- ]?means"),
    ("hierarchical clustering", r"hierarchical clustering|agglomerative clustering|ward'?s (?:method|linkage)"),
    ("dbscan", r"\bdbscan\b|\bhdbscan\b"),
    ("gaussian mixture", r"gaussian mixture(?: models?)?|\bgmm\b"),
    ("pca", r"principal components?(?: analysis)?|\bpca\b"),
    ("embedding", r"\bt-?sne\b|\bumap\b"),
    ("cross-validation", r"cross[- ]?validat(?:ion|ed)|\bk[- ]?fold\b|leave[- ]one[- ]out|\bloocv\b|spatial(?:ly)? blocked"),
    ("grid search", r"grid[- ]search|hyperparameter (?:tuning|search|optimi[sz]ation)"),
    ("arima", r"\b(?:s?arima|sarimax)\b|autoregressive(?: integrated)?(?: moving average)?|\bvar model|vector autoregression"),
    ("exponential smoothing", r"exponential smoothing|holt[- ]winters"),
    ("isolation forest", r"isolation forests?"),
    ("local outlier factor", r"local outlier factor|\blof\b"),
    ("one-class svm", r"one[- ]class svm"),
    ("z-score", r"z[- ]?scores?|standard scores?"),
    ("rolling statistics", r"rolling (?:mean|median|window|average|statistics)|moving (?:average|window)|\bewma\b"),
    ("iqr rule", r"\biqr\b|interquartile range"),
    ("mahalanobis distance", r"mahalanobis"),
    ("change-point detection", r"change[- ]?point (?:detection|analysis)|\bpelt\b|binary segmentation|\bcusum\b|\bbocpd\b"),
    ("population models", r"ricker(?: model)?|lotka[- ]volterra|gompertz|logistic growth|beverton[- ]holt"),
    ("kriging", r"(?:ordinary |universal |regression )?kriging|gaussian process(?: regression)?|variograms?|semivariograms?"),
    ("inverse distance weighting", r"inverse distance weight(?:ing|ed)|\bidw\b"),
    ("survival analysis", r"cox (?:proportional hazards|regression|model)|kaplan[- ]meier|survival analysis"),
    ("feature importance", r"shap(?: values)?|permutation importance|feature importances?"),
    ("causal/uplift", r"causal forests?|uplift model(?:l?ing)?|t-learner|s-learner|x-learner|interaction terms?"),
    ("regression", r"regression"),
    ("clustering", r"clustering"),
]
TEST_TERMS: list[tuple[str, str]] = [
    ("t-test", r"\bt[- ]?tests?\b|student'?s t|welch'?s?(?: t)?(?:[- ]test)?"),
    ("p-value", r"\bp[- ]?values?\b|(?<![\w.])p\s*(?:<=|>=|[<>=])\s*(?:0?\.\d|\d)"),
    ("confidence interval", r"confidence intervals?|credible intervals?|\b\d{2}(?:\.\d)?\s*%\s*c[ri]\b|\bci\b"),
    ("chi-square", r"chi[- ]?squared?|χ\s*2|\bchi2\b"),
    ("anova", r"\banova\b|analysis of variance|\bf[- ]tests?\b"),
    ("permutation test", r"permutation tests?"),
    ("bootstrap", r"bootstrap(?:ped|ping|s)?"),
    ("wilcoxon", r"wilcoxon"),
    ("mann-whitney", r"mann[- ]whitney"),
    ("kruskal-wallis", r"kruskal[- ]wallis"),
    ("kolmogorov-smirnov", r"kolmogorov[- ]smirnov|\bks[- ]test\b"),
    ("shapiro-wilk", r"shapiro[- ]wilk"),
    ("fisher exact", r"fisher'?s exact"),
    ("granger causality", r"granger(?:[- ]caus\w*)?"),
    ("dickey-fuller", r"dickey[- ]fuller|\badf test\b|\bkpss\b"),
    ("moran's i", r"moran'?s i\b|\bmoran\b|geary'?s c"),
    ("change-point test", r"pettitt(?:'s)? test|chow test"),
    ("likelihood ratio", r"likelihood[- ]ratio(?: tests?)?|\baic\b|\bbic\b"),
    ("diebold-mariano", r"diebold[- ]mariano"),
    ("mcnemar", r"mcnemar"),
    ("correlation test", r"pearson(?:'s)?(?: r| correlation)?|spearman(?:'s)?(?: rho| correlation)?|kendall'?s? tau"),
    ("multiple testing", r"bonferroni|benjamini[- ]hochberg|false discovery rate|\bfdr\b|holm"),
    ("significance", r"statistically significant|significance level|significant at|null hypothesis|hypothesis test(?:ing|s)?"),
    ("effect size", r"effect sizes?|cohen'?s d\b|odds ratios?|hazard ratios?"),
    ("standard error", r"standard errors?|\bs\.e\.m?\b|\bsem\b"),
    ("z-test", r"\bz[- ]tests?\b"),
]
CROSS_REF_TERMS: list[tuple[str, str]] = [
    ("data team", r"data (?:team|lead|engineers?|analysts?|domain expert)s?"),
    ("model team", r"(?:model(?:l?ing)?|ml) (?:team|engineers?)|experimentalists?"),
    ("evaluation team", r"eval(?:uation)? (?:team|lead)|error analysts?"),
    ("writing team", r"writing team|lead author|results writer"),
    ("dataset_description", r"dataset_description|dataset description (?:artifact|report|document)"),
    ("model_architecture", r"model_architecture|model architecture (?:artifact|report|document)"),
    ("evaluation_report", r"evaluation_report|evaluation report (?:artifact|document)"),
    ("experiment_results", r"experiment_results|experiment results (?:artifact|document)"),
    ("upstream", r"upstream|(?:previous|other|earlier) teams?|(?:the|each) teams?'|teams' (?:work|outputs|artifacts)"),
    ("artifact", r"artifacts?|artefacts?"),
]


@lru_cache(maxsize=64)
def _vocab_re(vocabulary: tuple[tuple[str, str], ...]) -> re.Pattern:
    """One pattern for a whole vocabulary: its entries as alternatives in order (group i is
    entry i), whole words, for lower-cased text."""
    alts = "|".join(f"(?P<g{i}>{pattern})" for i, (_, pattern) in enumerate(vocabulary))
    return re.compile(rf"(?<![^\W_])(?=[^\W_])(?:{alts})(?![^\W_])")


def find_terms(text: str, vocabulary: Sequence[tuple[str, str]]) -> list[str]:
    """The distinct vocabulary entries named in ``text`` (whole words, case-insensitive), in
    vocabulary order. One left-to-right scan; where several entries match at the same place
    the earlier entry (the more specific one) wins and its text is consumed, so a generic entry
    ("regression") never re-counts the text of a specific one ("logistic regression")."""
    vocab = tuple((str(n), str(p)) for n, p in vocabulary)
    if not vocab:
        return []
    hit: set[int] = set()
    for m in _vocab_re(vocab).finditer(text.lower()):
        hit.add(int(m.lastgroup[1:]))
    return [vocab[i][0] for i in sorted(hit)]


_ENUM_RE = re.compile(r"^\s*(?:\d{1,2}[.)]|\(\d{1,2}\))\s")
_REF_BEFORE_RE = re.compile(r"(?:table|figure|fig\.?|section|appendix|eq\.?|equation|step|phase|team)\s*$", re.IGNORECASE)


def result_numbers(text: str) -> list[str]:
    """The distinct numbers a report states (as normalized values), for the quality score. Not
    counted: heading lines; list enumerators (``1.``, ``2)``); numbers right after Table,
    Figure, Section, Appendix, Eq., Step, Phase or Team; number words; numbers on a line without
    a word of two letters or more unless the line is a table row."""
    values: list[str] = []
    seen: set[str] = set()
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if not line.strip() or _heading(line, lines[i + 1] if i + 1 < len(lines) else None) is not None:
            continue
        if not (line.lstrip().startswith("|") or _ALPHA_WORD_RE.search(line)):
            continue
        enum = _ENUM_RE.match(line)
        for n in extract_numbers(line, words=False):
            if enum and n.start < enum.end():
                continue
            if _REF_BEFORE_RE.search(line[max(0, n.start - 16): n.start]):
                continue
            key = f"{n.value:.6g}" + ("%" if n.percent else "")
            if key not in seen:
                seen.add(key)
                values.append(key)
    return values


def quality_parts(text: str) -> tuple[dict[str, float], dict[str, list[str]]]:
    """The four parts of the quality score and the terms behind each. ``numbers``: distinct
    numbers stated (:func:`result_numbers`) / :data:`NUMBERS_FULL`; ``methods``: distinct
    standard methods named (:data:`METHOD_TERMS`) / :data:`METHODS_FULL`; ``tests``: distinct
    statistical tests or inference terms (:data:`TEST_TERMS`: tests, p-values, confidence
    intervals, ...) / :data:`TESTS_FULL`; ``cross_refs``: distinct references to other teams and
    their artifacts (:data:`CROSS_REF_TERMS`) / :data:`CROSS_REFS_FULL`; each capped at 1."""
    terms = {
        "numbers": result_numbers(text),
        "methods": find_terms(text, METHOD_TERMS),
        "tests": find_terms(text, TEST_TERMS),
        "cross_refs": find_terms(text, CROSS_REF_TERMS),
    }
    full = {"numbers": NUMBERS_FULL, "methods": METHODS_FULL, "tests": TESTS_FULL, "cross_refs": CROSS_REFS_FULL}
    parts = {k: min(1.0, len(v) / full[k]) for k, v in terms.items()}
    return parts, terms


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
    for b in _blocks(text):
        if not set(b.sections) & _FINDINGS_SECTIONS:
            procedural.update(b.rows)
    for kind, start, end, line in logical_lines(text):
        finding = start not in procedural
        low = line.lower()
        if kind in ("row", "heading"):
            out.extend(_Unit(c, start, kind, finding, end) for c in _chunks(low))
            continue
        for sent in _split_sentences(low):
            out.append(_Unit(sent, start, "item" if kind == "item" else "text", finding, end))
    return out


@lru_cache(maxsize=4096)
def phrase_re(phrase: str) -> re.Pattern | None:
    """A context phrase as a pattern: its words (split at spaces, hyphens, underscores and
    punctuation) in order with any of those (or nothing) between them, case-insensitive. The
    first word starts a word (an underscore counts as a boundary: "species" matches
    ``n_species``); the last word is a prefix: any letters may follow, so a stem works
    ("anomal" matches "anomalies", "anomalous"; "interaction" matches "interactions"), and a
    last word ending in consonant + "y" drops the "y" ("anomaly" matches "anomalies"); digits
    may not follow. Never right after "non-"/"non " ("spatial cv" does not match "non-spatial
    CV")."""
    words = _TOKEN_RE.findall(str(phrase).lower())
    if not words:
        return None
    parts = [re.escape(w) for w in words[:-1]]
    last = words[-1]
    if len(last) > 3 and last.endswith("y") and last[-2] not in "aeiouy":
        last = last[:-1]
    parts.append(re.escape(last) + r"[^\W\d_]*")
    body = r"[\s\-_/]*".join(parts)
    return re.compile(rf"(?<![^\W_])(?<!non-)(?<!non )(?:{body})(?![^\W_])", re.IGNORECASE)


def _phrase_res(phrases: Any) -> list[re.Pattern]:
    if isinstance(phrases, str):
        phrases = [phrases]
    return [p for p in (phrase_re(str(x)) for x in (phrases or [])) if p is not None]


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
_NEG_WORDS = {"no", "not", "never", "none", "neither", "nor", "without", "cannot", "absent", "absence", "lack", "lacks",
              "lacking", "failed", "fails", "fail", "unable", "insignificant", "nonsignificant", "non-significant", "nothing"}


_COMPARISON_CUT_RE = re.compile(_CLAUSE_RE.pattern + r"|(?<![^\W_])(?:than|against|versus|vs|compared (?:to|with)|ahead of)(?![^\W_])")


def _clause(unit: str, start: int, end: int, comparisons: bool = False) -> tuple[int, int]:
    """The clause of ``unit`` around [start, end): cut at ``; : , ( )``, a spaced dash and
    but / whereas / while / although / though / however / yet / unlike; with ``comparisons``
    also at than / against / versus / vs / compared to / compared with / ahead of."""
    lo, hi = 0, len(unit)
    for m in (_COMPARISON_CUT_RE if comparisons else _CLAUSE_RE).finditer(unit):
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


# --- comparatives ------------------------------------------------------------------------------
_COMPARATIVES: dict[str, tuple[str, int]] = {}
for _w in ("higher", "greater", "larger", "bigger", "stronger", "increased", "increase", "increases", "exceed", "exceeds",
           "exceeded", "exceeding", "above", "elevated", "inflated"):
    _COMPARATIVES[_w] = ("magnitude", 1)
for _w in ("lower", "smaller", "weaker", "fewer", "decreased", "decrease", "decreases", "below", "reduced", "deflated"):
    _COMPARATIVES[_w] = ("magnitude", -1)
for _w in ("better", "outperform", "outperforms", "outperformed", "outperforming", "superior"):
    _COMPARATIVES[_w] = ("quality", 1)
for _w in ("worse", "underperform", "underperforms", "underperformed", "underperforming", "inferior"):
    _COMPARATIVES[_w] = ("quality", -1)
_COMP_RE = re.compile(r"(?<![^\W_])(" + "|".join(sorted(_COMPARATIVES, key=len, reverse=True)) + r")(?![^\W_])")
_THAN_RE = re.compile(r"(?<![^\W_])(?:than|compared (?:to|with)|relative to|versus|vs)(?![^\W_])")


def _orientation(unit: str, ctx: re.Match, axis: str | None, negation: bool = True) -> tuple[str, int] | None:
    """The direction a sentence gives the thing named at ``ctx``: the comparative nearest to it
    (on ``axis`` if given: "magnitude" higher/lower..., "quality" better/worse...), +1 or -1,
    flipped if "than" (compared to/with, relative to, versus, vs) stands between the comparative
    and the phrase (the phrase is then what is compared against: "random CV error is higher than
    spatial CV" says spatial CV is lower), and (if ``negation``) flipped if the phrase or the
    comparative (three words before it) is negated. None if the sentence has no such
    comparative."""
    best = None
    for m in _COMP_RE.finditer(unit):
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
    neg_comparative = any(_is_neg(t, None) for t in unit[lo:m.start()].split()[-3:])
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
    return r"[\s\-_]*".join(re.escape(w) for w in _TOKEN_RE.findall(prefix)) + "s?"


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
    if len(sides) == 2 and all(_numbered(x) for x in sides):
        (pa, a), (pb, b) = _numbered(sides[0]), _numbered(sides[1])
        qa, qb = _prefix_pattern(pa), _prefix_pattern(pb)
        item_re = re.compile(rf"(?<![^\W_])(?:{qa})[\s_\-]?0*{a}{_ARROW}(?:{qb})[\s_\-]?0*{b}(?![\w.]\d|\w)", re.IGNORECASE)
        fam_re = re.compile(rf"(?<![^\W_])(?:{qa})[\s_\-]?(\d{{1,12}}){_ARROW}(?:{qb})[\s_\-]?(\d{{1,12}})(?![\w.]\d|\w)",
                            re.IGNORECASE)
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
    near = spans[max(0, i - 3): i + 3]
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


def _score_number(fact: dict[str, Any], units: list[_Unit]) -> FactResult:
    """A number fact. For every occurrence of a context phrase in a sentence that may state
    findings (not a heading, not in the introduction or methods: :func:`_units`), the numbers
    near it are read: if a number directly precedes the phrase (at most one word between: "5
    species", "2 latent subtypes") it alone is read, as it counts that thing ("6 species linked
    by 4 interactions" states 6 species); otherwise every number within :data:`NUMBER_WINDOW`
    words of the phrase in its sentence (not inside the phrase itself). Found (1) if a number
    read is within the tolerance of the truth; contradicted (0) if numbers were read next to the
    context but none is close; missing (0) if none was read. At most :data:`MAX_OCCURRENCES`
    occurrences are read."""
    value, tol = float(fact["value"]), float(fact.get("tolerance") or 0.0)
    pats = _phrase_res(fact.get("context"))
    wrong: str | None = None
    seen = 0
    for u in units:
        if u.kind == "heading" or not u.findings or seen >= MAX_OCCURRENCES:
            continue
        for m in _all_matches(u.text, pats)[: MAX_OCCURRENCES - seen]:
            seen += 1
            lo, hi = _window(u.text, m.start(), m.end(), NUMBER_WINDOW)
            before = extract_numbers(u.text[lo:m.start()])
            if before and _QUANTIFIES_RE.match(u.text[lo + before[-1].start + len(before[-1].text):m.start()]):
                nums = [before[-1]]
            else:
                nums = before + extract_numbers(u.text[m.end():hi])
            if any(_number_close(n, value, tol) for n in nums):
                return FactResult(fact["id"], "number", "found", 1.0, _snippet(u.text))
            if nums and wrong is None:
                wrong = _snippet(u.text)
    if wrong is not None:
        return FactResult(fact["id"], "number", "contradicted", 0.0, wrong)
    return FactResult(fact["id"], "number", "missing", 0.0, "")


def _affinities(unit: str, contexts: list[list[re.Pattern]]) -> list[int]:
    """For each context (a fact's phrases): how many of its phrases occur in ``unit``, not
    counting an occurrence that lies inside a longer occurrence of any context's phrase ("not
    significant" hides "significant")."""
    occ = sorted(((m.start(), m.end(), c, k) for c, pats in enumerate(contexts) for k, p in enumerate(pats)
                  for m in p.finditer(unit)), key=lambda o: (o[0], -o[1]))
    kept = []
    max_end, max_span = -1, None  # the furthest-reaching occurrence so far (it starts no later)
    for o in occ:
        if max_end >= o[1] and max_span != (o[0], o[1]):
            continue  # inside a longer occurrence
        kept.append(o)
        if o[1] > max_end:
            max_end, max_span = o[1], (o[0], o[1])
    return [len({k for _, _, c2, k in kept if c2 == c}) for c in range(len(contexts))]


_SET_CLAUSE_RE = re.compile(r";|(?<![^\W_])(?:but|whereas|while|although|though|however|unlike|except|apart from)(?![^\W_])"
                            r"|,\s+and\s+(?=(?:the|a|an|this|these|those|its|their|it|they|we|in|within|on|for|with|at|by|"
                            r"after|before|when|so|thus|therefore)(?![^\W_]))")


def _set_clauses(units: list[_Unit]) -> list[_Unit]:
    """The units cut into clauses at ";", at but / whereas / while / although / though /
    however / unlike / except / apart from, and at ", and" before a determiner, pronoun or
    preposition (", and the", ", and within", ...), but not at other commas or colons, which
    separate the items of a list: "BM03 and BM11 are predictive, whereas BM05 is prognostic"
    names BM05 in another clause; "BM03, BM11, and BM05 are predictive" is one clause."""
    out: list[_Unit] = []
    for u in units:
        if u.kind in ("heading", "row"):
            out.append(u)
            continue
        start = 0
        for m in _SET_CLAUSE_RE.finditer(u.text):
            if u.text[start:m.start()].strip():
                out.append(_Unit(u.text[start:m.start()].strip(), u.line, u.kind, u.findings, u.end))
            start = m.end()
        if u.text[start:].strip():
            out.append(_Unit(u.text[start:].strip(), u.line, u.kind, u.findings, u.end))
    return out


def _score_set(fact: dict[str, Any], units: list[_Unit], set_facts: Sequence[dict[str, Any]] = ()) -> FactResult:
    """A set fact, scored by F1 between the items named and the truth items.

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

    Found if F1 >= 0.5, contradicted if below with false positives named, else missing (score =
    F1 either way). If no item is named in context, the items named anywhere in the report
    (enumerations again ignored) count at half weight (score = F1 / 2)."""
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

    def take(named: list[tuple[str, bool]]) -> None:
        keys = {k for k, _ in named}
        if len(keys) > limit or (universe and len(universe) > len(truth) and universe <= keys):
            return  # an enumeration of candidates
        for k, is_truth in named:
            (t_hit if is_truth else o_hit).add(k)

    neg_pats = _phrase_res(fact.get("negative_context"))
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
            for key, a, b, is_truth in _mention_spans(u.text, truth, others):
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
            while j < len(clauses) and clauses[j].kind in ("item", "row") and (last is None or clauses[j].line <= last + 1):
                block.append(clauses[j].text)
                last = clauses[j].last
                j += 1
            if block:
                take([(k, t) for k, _, _, t in _mention_spans("\n".join(block), truth, others)])
    weight = 1.0
    where = "in context"
    if not t_hit and not o_hit:
        for u in units:
            if u.kind != "heading":
                take([(k, t) for k, _, _, t in _mention_spans(u.text, truth, others)])
        weight, where = 0.5, "outside the context (half weight)"
    if not t_hit and not o_hit:
        return FactResult(fact["id"], "set", "missing", 0.0, "")
    precision = len(t_hit) / (len(t_hit) + len(o_hit))
    recall = len(t_hit) / len(truth)
    f1 = 0.0 if not t_hit else 2 * precision * recall / (precision + recall)
    evidence = f"{where}: named {sorted(t_hit)} of {sorted(k for k, _, _ in truth)}, others {sorted(o_hit)}"
    if f1 >= 0.5:
        status = "found"
    elif o_hit:
        status = "contradicted"
    else:
        status = "missing"
    return FactResult(fact["id"], "set", status, round(weight * f1, 6), evidence)


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


def _score_claim(fact: dict[str, Any], units: list[_Unit]) -> FactResult:
    """A claim fact (value true: the report should assert it; false: deny it). Each sentence
    that may state findings (not a heading, not in the introduction or methods: :func:`_units`)
    containing a context phrase is one assertion:

    * comparative claim (its statement has a comparative, e.g. "spatial CV gives a higher error
      than random CV"): the sentence's orientation (:func:`_orientation`) on the statement's
      axis must equal the required direction (:func:`_claim_direction`); a sentence without a
      comparative on that axis is neutral;
    * plain claim: the sentence asserts the finding unless the phrase is negated
      (:func:`negated`); consistent if that equals ``value``.

    A sentence containing an optional ``negative_context`` phrase (naming the opposite finding)
    asserts the opposite unless negated. Score = consistent / (consistent + inconsistent); found
    if consistent > inconsistent, contradicted if inconsistent >= consistent > 0 or only
    inconsistent, missing if no assertion."""
    value = bool(fact["value"])
    pats = _phrase_res(fact.get("context"))
    neg_pats = _phrase_res(fact.get("negative_context"))
    direction = _claim_direction(fact)
    good = bad = 0
    ev_good = ev_bad = ""
    for u in units:
        if u.kind == "heading" or not u.findings:
            continue
        m = _first_match(u.text, pats)
        if m is not None:
            if direction is not None:
                o = _orientation(u.text, m, direction[0])
                ok = None if o is None else (o[1] == direction[1])
            else:
                ok = (not negated(u.text, m.start(), m.end())) == value
            if ok is True:
                good += 1
                ev_good = ev_good or u.text
            elif ok is False:
                bad += 1
                ev_bad = ev_bad or u.text
        n = _first_match(u.text, neg_pats)
        if n is not None:
            opposite = not negated(u.text, n.start(), n.end())
            if opposite:
                bad += 1
                ev_bad = ev_bad or u.text
            else:
                good += 1
                ev_good = ev_good or u.text
    if good + bad == 0:
        return FactResult(fact["id"], "claim", "missing", 0.0, "")
    score = good / (good + bad)
    if good > bad:
        return FactResult(fact["id"], "claim", "found", round(score, 6), _snippet(ev_good))
    return FactResult(fact["id"], "claim", "contradicted", round(score, 6), _snippet(ev_bad))


def _score_label(fact: dict[str, Any], units: list[_Unit]) -> FactResult:
    """A label fact. For every occurrence of a context phrase in a sentence that may state
    findings (not a heading, not in the introduction or methods: :func:`_units`), the text
    within :data:`LABEL_WINDOW` words of it and in its clause (:func:`_clause` with
    comparisons: "the random forest is the best model, ahead of kriging" does not name kriging
    the best) is searched for the label and its optional
    ``aliases`` (as items: :func:`_item_key`). Found (1) if one is named and not negated
    (:func:`negated`); contradicted (0) if instead one of the optional ``alternatives``, or
    another member of the label's family (``sensor_07`` for ``sensor_03``), is named, or the
    label only negated; missing (0) otherwise."""
    names = [_item_key(x) for x in [fact["value"], *(fact.get("aliases") or [])]]
    alts = [_item_key(x) for x in (fact.get("alternatives") or [])]
    truth_keys = {k for k, _, _ in names}
    pats = _phrase_res(fact.get("context"))
    wrong = ""
    seen = 0
    for u in units:
        if u.kind == "heading" or not u.findings or seen >= MAX_OCCURRENCES:
            continue
        for m in _all_matches(u.text, pats)[: MAX_OCCURRENCES - seen]:
            seen += 1
            lo, hi = _window(u.text, m.start(), m.end(), LABEL_WINDOW)
            c_lo, c_hi = _clause(u.text, m.start(), m.end(), comparisons=True)
            lo, hi = max(lo, c_lo), min(hi, c_hi)
            for _, rx, _ in names:
                for h in rx.finditer(u.text, lo, hi):
                    if m.start() <= h.start() < m.end():
                        continue
                    if not negated(u.text, h.start(), h.end()):
                        return FactResult(fact["id"], "label", "found", 1.0, _snippet(u.text))
                    wrong = wrong or u.text
            window = u.text[lo:hi]
            _, o_hit = _mentions(window, names, alts)
            if o_hit - truth_keys:
                wrong = wrong or u.text
    if wrong:
        return FactResult(fact["id"], "label", "contradicted", 0.0, _snippet(wrong))
    return FactResult(fact["id"], "label", "missing", 0.0, "")


_SCORERS = {"number": _score_number, "set": _score_set, "claim": _score_claim, "label": _score_label}


def truth_facts(truth: dict[str, Any]) -> list[dict[str, Any]]:
    """The ground truth's facts, checked: each needs a string ``id``, a ``kind`` of
    :data:`FACT_KINDS`, a ``value`` of the right type (number: finite real; set: non-empty list
    of strings; claim: bool; label: non-empty string), a list of ``context`` phrases and a
    ``statement``. Raises ValueError naming the first bad fact."""
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
    return facts


def score_facts(text: str, truth: dict[str, Any]) -> list[FactResult]:
    """Every fact of ``truth`` scored against ``text`` (already cleaned), in the truth's order."""
    units = _units(text)
    facts = truth_facts(truth)
    sets = [f for f in facts if f["kind"] == "set"]
    return [_score_set(f, units, sets) if f["kind"] == "set" else _SCORERS[f["kind"]](f, units) for f in facts]


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
        return {**self.scores(), "sections": dict(self.sections), "quality_parts": dict(self.quality_parts),
                "quality_terms": {k: list(v) for k, v in self.quality_terms.items()},
                "facts": [f.as_dict() for f in self.facts], "truncated": self.truncated}


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
        sections=sections, quality_parts={k: round(v, 6) for k, v in parts.items()}, quality_terms=terms,
        facts=facts, truncated=truncated)


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
            problems.append(f"{f['id']}: its statement alone is {alone.status} (score {alone.score}): {f['statement']!r}")
        elif joint[f["id"]].status != "found" or joint[f["id"]].score < 1.0:
            j = joint[f["id"]]
            problems.append(f"{f['id']}: among the other statements it is {j.status} (score {j.score}; {j.evidence})")
    return problems


# =============================================================================================
# the LLM judge (Appendix L)
# =============================================================================================
# The rubric and the response format are the instrument of Appendix L, reproduced as published.
JUDGE_SYSTEM = """You are an expert scientific reviewer evaluating reports produced by AI agent
teams. Each report was generated by a multi-agent LLM pipeline that analyzed a
dataset and produced a scientific report. You will evaluate one report at a time
on three metrics using the rubrics below.

Rate each metric on a 1-5 integer scale. Respond ONLY with valid JSON matching
the schema provided. Do not include any other text."""

JUDGE_USER_TEMPLATE = """## Task context

Science task: {task}
Task description: {task_description}

## Ground truth (known facts about the dataset)

{ground_truth_text}

## Report to evaluate

{report_text}

## Evaluation rubrics

Rate each of the following three metrics on a 1-5 scale.

### 1. Completeness (structure and coverage)

How complete is the report as a scientific document? A complete report has
seven required sections: (1) abstract, (2) introduction, (3) dataset
description, (4) methods, (5) results, (6) evaluation, (7) conclusion.
For each section, assess whether it is present with substantive content
(not just a heading or a single sentence).

- 5 (Exemplary): All 7 sections present with substantive content in each.
  Logical flow between sections.
- 4 (Good): 6 of 7 sections present with substantive content. The missing
  or thin section is minor.
- 3 (Adequate): 4-5 sections present with substantive content. The report
  reads as a partial draft.
- 2 (Poor): 2-3 sections present with substantive content. Only fragments
  of a report.
- 1 (Minimal): Fewer than 2 sections present, or the text is largely
  incoherent/boilerplate with no substantive analysis.

In addition to the overall score, report which of the 7 sections are present
with substantive content (true/false for each).

### 2. Quality (methodological rigor and presentation)

How rigorous and well-presented is the scientific analysis?

- 5 (Exemplary): Uses appropriate methodology with clear justification.
  Reports specific quantitative results (metrics, p-values, confidence
  intervals). Statistical tests are applied correctly. References upstream
  team outputs and integrates findings coherently. Tables or structured
  results present.
- 4 (Good): Sound methodology with quantitative results reported. Minor
  gaps in statistical rigor or integration of upstream work.
- 3 (Adequate): Some methodology described and some numbers reported, but
  analysis is shallow. May lack statistical tests or cross-references to
  other teams' outputs.
- 2 (Poor): Vague or boilerplate methodology. Few or no concrete numbers.
  No evidence of statistical testing or integration across pipeline stages.
- 1 (Minimal): No discernible methodology. Generic text with no
  quantitative results. Could apply to any dataset.

### 3. Accuracy (correctness of scientific findings)

How accurately does the report capture the true patterns in the data? Use
the ground truth provided above to assess this.

- 5 (Exemplary): Correctly identifies all major phenomena in the data (per
  the ground truth). Key quantitative findings are consistent with ground
  truth. Demonstrates genuine understanding of the dataset.
- 4 (Good): Identifies most major phenomena. Findings are largely
  consistent with ground truth, with minor omissions or imprecisions.
- 3 (Adequate): Identifies some true patterns but misses important ones.
  Mix of correct and incorrect or unsupported claims.
- 2 (Poor): Identifies few true patterns. Contains substantial errors or
  fabricated findings not supported by the data.
- 1 (Minimal): No correct findings. Analysis is entirely generic,
  fabricated, or contradicts the ground truth.

## Response format

Respond with ONLY this JSON object, no other text:

{
  "completeness": <int 1-5>,
  "completeness_rationale": "<one sentence>",
  "sections": {
    "abstract": <true/false>,
    "introduction": <true/false>,
    "dataset": <true/false>,
    "methods": <true/false>,
    "results": <true/false>,
    "evaluation": <true/false>,
    "conclusion": <true/false>
  },
  "quality": <int 1-5>,
  "quality_rationale": "<one sentence>",
  "accuracy": <int 1-5>,
  "accuracy_rationale": "<one sentence>"
}"""

#: the judge reads at most this many characters of a report (about 25k tokens); a longer report
#: is cut with a visible marker so the prompt fits the judge's context.
JUDGE_MAX_REPORT_CHARS = 100_000
#: Appendix L: a maximum of 512 output tokens.
JUDGE_MAX_TOKENS = 512
JUDGE_PHASE = "judge"
_PLACEHOLDER_FIELDS = ("task", "task_description", "ground_truth_text", "report_text")
_FIELD_RE = re.compile(r"\{(" + "|".join(_PLACEHOLDER_FIELDS) + r")\}")


def _value_text(v: Any, limit: int = 300) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)) and all(isinstance(x, (str, int, float)) and not isinstance(x, bool) for x in v):
        s = ", ".join(str(x) for x in v)
    elif isinstance(v, (dict, list, tuple)):
        s = json.dumps(v, default=str, separators=(", ", ": "))
    else:
        s = str(v)
    return s if len(s) <= limit else s[: limit - 3] + "..."


def ground_truth_text(truth: dict[str, Any], max_chars: int = 4000) -> str:
    """The ground truth as the judge reads it: the facts' statements (what a correct report
    says), then each fact's key value (with its tolerance), the generating equations if any, and
    the scalar or short entries of ``details`` (nested one level, long values cut), at most
    ``max_chars`` characters in all."""
    facts = truth_facts(truth)
    lines = ["Findings a correct report states:"]
    lines += [f"- {f['statement']}" for f in facts]
    lines += ["", "Key values:"]
    for f in facts:
        v = _value_text(f["value"])
        tol = f.get("tolerance")
        lines.append(f"- {f['id']} = {v}" + (f" (+/- {tol})" if f["kind"] == "number" and tol else ""))
    if truth.get("equations"):
        lines += ["", f"Generating model: {_value_text(truth['equations'], 800)}"]
    details = truth.get("details")
    if isinstance(details, dict) and details:
        lines += ["", "Other parameters:"]
        n = 0
        for k, v in details.items():
            if n >= 40:
                break
            if isinstance(v, dict):
                for k2, v2 in v.items():
                    if n >= 40:
                        break
                    lines.append(f"- {k}.{k2} = {_value_text(v2, 200)}")
                    n += 1
            else:
                lines.append(f"- {k} = {_value_text(v, 200)}")
                n += 1
    text = "\n".join(lines)
    return text if len(text) <= max_chars else text[: max_chars - 18] + "\n[... cut ...]"


def judge_prompt(report: Any, truth: dict[str, Any], *, task_description: str | None = None,
                 max_report_chars: int = JUDGE_MAX_REPORT_CHARS) -> str:
    """The user message: :data:`JUDGE_USER_TEMPLATE` with its four fields filled in one pass (a
    report quoting ``{task}`` is left as it is). The report is cleaned (:func:`clean_text`) and
    cut at ``max_report_chars`` with a marker saying how much was left out."""
    text, _ = clean_text(report, max_chars=MAX_CHARS)
    if len(text) > max_report_chars:
        text = text[:max_report_chars] + f"\n\n[... the report continues for {len(text) - max_report_chars} more characters ...]"
    values = {
        "task": str(truth.get("task", "")),
        "task_description": str(task_description if task_description is not None else truth.get("description", "")),
        "ground_truth_text": ground_truth_text(truth),
        "report_text": text if text.strip() else "(the report is empty)",
    }
    return _FIELD_RE.sub(lambda m: values[m.group(1)], JUDGE_USER_TEMPLATE)


def judge_messages(report: Any, truth: dict[str, Any], **kw: Any) -> list[BaseMessage]:
    """The judge's conversation: the Appendix L system prompt and the filled user template."""
    return [SystemMessage(content=JUDGE_SYSTEM), HumanMessage(content=judge_prompt(report, truth, **kw))]


class JudgeSections(BaseModel):
    """Which sections the judge saw with substantive content."""

    model_config = ConfigDict(extra="forbid", strict=True)
    abstract: bool
    introduction: bool
    dataset: bool
    methods: bool
    results: bool
    evaluation: bool
    conclusion: bool


Rating = Field(ge=1, le=5, description="an integer from 1 to 5")
Rationale = Field(min_length=1, max_length=2000, description="one sentence")


class JudgeVerdict(BaseModel):
    """The Appendix L response format. Strict: ratings are JSON integers 1-5 (not "5", 4.0 or
    true), rationales strings, all seven section flags booleans; every key required and no
    other key allowed."""

    model_config = ConfigDict(extra="forbid", strict=True)
    completeness: int = Rating
    completeness_rationale: str = Rationale
    sections: JudgeSections
    quality: int = Rating
    quality_rationale: str = Rationale
    accuracy: int = Rating
    accuracy_rationale: str = Rationale

    def unit_scores(self) -> dict[str, float]:
        """The three ratings mapped to [0, 1] (:func:`to_unit`)."""
        return {d: to_unit(getattr(self, d)) for d in ("completeness", "quality", "accuracy")}


def to_unit(score: int) -> float:
    """A 1-5 rating on [0, 1]: (s - 1) / 4. Raises ValueError outside 1..5 or for a non-integer."""
    if isinstance(score, bool) or not isinstance(score, (int, np.integer)) or not 1 <= int(score) <= 5:
        raise ValueError(f"a judge rating is an integer from 1 to 5, got {score!r}")
    return (int(score) - 1) / 4.0


def _inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with ``$ref``s to ``$defs`` replaced by the definitions (for grammar-based
    decoders that do not follow references)."""
    defs = schema.get("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node and node["$ref"].startswith("#/$defs/"):
                return walk(defs[node["$ref"].split("/")[-1]])
            return {k: walk(v) for k, v in node.items() if k != "$defs"}
        if isinstance(node, list):
            return [walk(x) for x in node]
        return node

    return walk(schema)


_JUDGE_INSTRUCTIONS = ('Reply with ONLY the JSON object of the response format: {"completeness": <int 1-5>, '
                       '"completeness_rationale": "<one sentence>", "sections": {"abstract": <true/false>, "introduction": '
                       '<true/false>, "dataset": <true/false>, "methods": <true/false>, "results": <true/false>, "evaluation": '
                       '<true/false>, "conclusion": <true/false>}, "quality": <int 1-5>, "quality_rationale": "<one sentence>", '
                       '"accuracy": <int 1-5>, "accuracy_rationale": "<one sentence>"}.')


def judge_spec(*, max_attempts: int = 3, max_tokens: int = JUDGE_MAX_TOKENS, phase: str = JUDGE_PHASE) -> DecisionSpec[JudgeVerdict]:
    """The judge's decision: schema :class:`JudgeVerdict`, an invalid answer's error fed back
    and the judge asked again up to ``max_attempts`` times, output capped at ``max_tokens``, and
    no fallback value: a sample that never validates is recorded (``fallback_used``) and left
    out of the means, never replaced by an invented rating. Grammar-constrained decoders get the
    schema with its references inlined."""
    return DecisionSpec(phase=phase, schema=JudgeVerdict, fallback=None, max_attempts=max_attempts, max_tokens=max_tokens,
                        instructions=_JUDGE_INSTRUCTIONS, constrain=lambda schema, ctx: _inline_refs(schema))


DIMENSIONS: tuple[str, ...] = ("completeness", "quality", "accuracy")


@dataclass
class JudgeResult:
    """A judge's k samples on one report. ``completeness``/``quality``/``accuracy``: the mean of
    the valid samples on [0, 1] (None if none was valid); ``std``: their population standard
    deviation (ddof = 0: the spread of these k answers; 0 for one); ``sections``: the share of
    valid samples that saw each section; ``verdicts``: the k parsed answers (None for a sample
    that fell back); ``records``: the k decision records; ``n_fallback``: samples that never
    gave a valid answer."""

    judge: str
    k: int
    completeness: float | None
    quality: float | None
    accuracy: float | None
    std: dict[str, float | None]
    sections: dict[str, float | None]
    verdicts: list[JudgeVerdict | None]
    records: list[DecisionRecord]
    n_fallback: int

    def scores(self) -> dict[str, float | None]:
        return {d: getattr(self, d) for d in DIMENSIONS}

    def as_dict(self) -> dict[str, Any]:
        return {"judge": self.judge, "k": self.k, **self.scores(), "std": dict(self.std), "sections": dict(self.sections),
                "verdicts": [v.model_dump() if v is not None else None for v in self.verdicts],
                "records": [r.as_dict() for r in self.records], "n_fallback": self.n_fallback}


async def judge_report(service: LLMService, report: Any, truth: dict[str, Any], *, k: int = 3, judge_name: str | None = None,
                       agent: int = 0, society: int = 0, spec: DecisionSpec[JudgeVerdict] | None = None,
                       task_description: str | None = None, max_report_chars: int = JUDGE_MAX_REPORT_CHARS,
                       config: dict | None = None) -> JudgeResult:
    """Ask the judge (the service's model for ``agent``: its ``"default"`` model unless the
    service maps ``str(agent)`` to another) to rate ``report`` ``k`` times, concurrently.

    Sample ``i`` is the decision of round ``i``: the round is part of the decision layer's cache
    key (with the model identity, messages, agent, phase, seed and attempt), so the k samples
    are k distinct calls with distinct sampling seeds, and rerunning replays each from the cache.
    Every call is charged to ``service.ledger`` (give the judge its own service and ledger so it
    never spends a team's budget). All samples run to completion, then the first failure (e.g.
    ``ModelUnavailable``, ``BudgetExhausted``) is raised."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    spec = spec or judge_spec()
    messages = judge_messages(report, truth, task_description=task_description, max_report_chars=max_report_chars)

    async def one(i: int):
        return await decide(service, spec, messages, society=society, agent=agent, round=i, ctx={}, config=config)

    results = await asyncio.gather(*(one(i) for i in range(k)), return_exceptions=True)
    failures = [r for r in results if isinstance(r, BaseException)]
    if failures:
        raise failures[0]
    verdicts: list[JudgeVerdict | None] = [v for v, _ in results]
    records = [rec for _, rec in results]
    valid = [v for v in verdicts if v is not None]
    means: dict[str, float | None] = {}
    stds: dict[str, float | None] = {}
    for d in DIMENSIONS:
        xs = np.array([to_unit(getattr(v, d)) for v in valid], dtype=float)
        means[d] = round(float(xs.mean()), 6) if xs.size else None
        stds[d] = round(float(xs.std(ddof=0)), 6) if xs.size else None
    sections = {s: (round(sum(getattr(v.sections, s) for v in valid) / len(valid), 6) if valid else None) for s in SECTIONS}
    name = judge_name or service.model_for(agent)[0].id
    return JudgeResult(judge=name, k=k, completeness=means["completeness"], quality=means["quality"], accuracy=means["accuracy"],
                       std=stds, sections=sections, verdicts=verdicts, records=records,
                       n_fallback=sum(1 for r in records if r.fallback_used))


def judge_agreement(scores_a: Sequence[float | None], scores_b: Sequence[float | None]) -> dict[str, Any]:
    """Agreement of two scorers over the same reports (paired lists). Pairs where either score
    is None or NaN are dropped (counted in ``n_dropped``). Returns ``n``, ``pearson_r`` (None
    with a ``reason`` if fewer than two pairs or either side is constant), ``mean_abs_diff``
    (None if no pair) and ``mean_a``/``mean_b`` (a calibration difference shows there: Appendix
    L's judges correlate at r = 0.59 on accuracy but differ in mean). Raises ValueError if the
    lists differ in length."""
    if len(scores_a) != len(scores_b):
        raise ValueError(f"the two score lists differ in length ({len(scores_a)} vs {len(scores_b)})")

    def ok(x: Any) -> bool:
        return x is not None and not isinstance(x, bool) and isinstance(x, (int, float, np.floating, np.integer)) \
            and math.isfinite(float(x))

    pairs = [(float(a), float(b)) for a, b in zip(scores_a, scores_b) if ok(a) and ok(b)]
    out: dict[str, Any] = {"n": len(pairs), "n_dropped": len(scores_a) - len(pairs), "pearson_r": None, "reason": None,
                           "mean_abs_diff": None, "mean_a": None, "mean_b": None}
    if not pairs:
        out["reason"] = "no pair of valid scores"
        return out
    a = np.array([p[0] for p in pairs])
    b = np.array([p[1] for p in pairs])
    out["mean_abs_diff"] = round(float(np.abs(a - b).mean()), 6)
    out["mean_a"], out["mean_b"] = round(float(a.mean()), 6), round(float(b.mean()), 6)
    if len(pairs) < 2:
        out["reason"] = "fewer than two pairs"
        return out
    constant = [name for name, x in (("first", a), ("second", b)) if float(x.max() - x.min()) <= 1e-12 * max(1.0, float(np.abs(x).max()))]
    if constant:
        out["reason"] = f"the {' and the '.join(constant)} scores are constant: correlation undefined"
        return out
    da, db = a - a.mean(), b - b.mean()
    r = float((da * db).sum() / np.sqrt((da * da).sum() * (db * db).sum()))
    out["pearson_r"] = round(max(-1.0, min(1.0, r)), 6)
    return out


def compare_judges(results_a: Sequence[JudgeResult | HeuristicScore | dict[str, Any] | None],
                   results_b: Sequence[JudgeResult | HeuristicScore | dict[str, Any] | None]) -> dict[str, dict[str, Any]]:
    """:func:`judge_agreement` per dimension between two scorers' results over the same reports
    (a judge's :class:`JudgeResult`, a :class:`HeuristicScore`, or a dict of the three scores)."""

    def get(r: Any, d: str) -> float | None:
        if r is None:
            return None
        if isinstance(r, dict):
            return r.get(d)
        return getattr(r, d, None)

    return {d: judge_agreement([get(r, d) for r in results_a], [get(r, d) for r in results_b]) for d in DIMENSIONS}


__all__ = [
    "CROSS_REF_TERMS", "DIMENSIONS", "FACT_KINDS", "JUDGE_MAX_REPORT_CHARS", "JUDGE_MAX_TOKENS", "JUDGE_SYSTEM",
    "JUDGE_USER_TEMPLATE", "MAX_CHARS", "METHOD_TERMS", "SECTIONS", "TEST_TERMS", "FactResult", "HeuristicScore",
    "JudgeResult", "JudgeSections", "JudgeVerdict", "Number", "clean_text", "compare_judges", "extract_numbers",
    "find_terms", "ground_truth_text", "heuristic_score", "is_substantive", "judge_agreement", "judge_messages",
    "judge_prompt", "judge_report", "judge_spec", "phrase_re", "quality_parts", "result_numbers", "score_facts",
    "section_presence", "split_sections", "to_unit", "truth_facts", "truth_problems",
]
