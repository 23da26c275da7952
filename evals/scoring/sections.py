"""Reading a report's structure.

The report made into clean text (:func:`clean_text`); headings recognized in their many forms
and mapped to the seven required sections (:func:`split_sections`); the Markdown logical lines
and the sentences in them (:func:`logical_lines`); and which sections carry substantive content
(:func:`is_substantive`, :func:`section_presence`). The sentence splitter lives here, not with
the extraction, because substantive content is counted in sentences; the other scoring modules
build on this one and this one imports none of them.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

SECTIONS: tuple[str, ...] = ("abstract", "introduction", "dataset", "methods", "results", "evaluation", "conclusion")

#: at most this many characters of a report are read (about 50,000 words, far beyond any real
#: report); the rest is ignored and the score says ``truncated``. Bounds the work on hostile input.
MAX_CHARS = 300_000
#: substantive content: at least this many words (of two or more letters) ...
MIN_WORDS = 25
#: ... in at least this many sentences (or list items / table rows) of three or more tokens ...
MIN_SENTENCES = 2
#: ... with at least this many distinct words (defeats "data data data ...").
MIN_DISTINCT_WORDS = 12


# =============================================================================================
# text hygiene
# =============================================================================================
_TRANSLATE = str.maketrans(
    {
        "\u2212": "-",
        "\u2010": "-",
        "\u2011": "-",
        "\u2012": "-",
        "\u2013": "-",
        "\u2014": " - ",
        "\u2015": " - ",
        "\u00a0": " ",
        "\u2009": " ",
        "\u202f": " ",
        "\u2007": " ",
        "\u200b": "",
        "\ufeff": "",
        "\u2264": "<=",
        "\u2265": ">=",
        "\u2248": "~",
        "\u00b1": " +/- ",
        "\u2018": "'",
        "\u2019": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u2022": "-",
        "\u2192": "->",
        "\u27f6": "->",
        "\u21d2": "=>",
    }
)
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
    (
        r"(?:description of (?:the )?)?(?:datasets?|data ?sets?|data)(?: "
        r"(?:description|overview|summary|characteristics|"
        r"exploration|collection|sources?|and preprocessing|preprocessing))?",
        "dataset",
        True,
    ),
    (r"exploratory data analysis|eda|study area", "dataset", True),
    (r"materials", "dataset", False),
    (
        r"methods?|methodology|methodological approach|approach(?:es)?|techniques|experimental (?:setup|design)",
        "methods",
        True,
    ),
    (
        r"models?|modell?ing|model architecture|analysis|pipeline|implementation|procedures?|feature engineering",
        "methods",
        False,
    ),
    (r"results?|findings|key findings|experiments?|experimental results|outcomes?", "results", True),
    (r"observations", "results", False),
    (r"evaluation|validation|performance|error analysis|model assessment", "evaluation", True),
    (r"metrics|robustness|benchmarks?|benchmarking", "evaluation", False),
    (r"conclusions?|concluding remarks|closing remarks|future work", "conclusion", True),
    (r"discussion|limitations|recommendations|outlook|implications", "conclusion", False),
    # known non-sections: they end the current section and are not scored
    (
        r"references|bibliography|appendix|appendices|acknowledge?ments?|table of contents|contents|"
        r"author contributions|code availability|supplementary(?: material)?",
        "other",
        True,
    ),
]
_KW_RES = [(re.compile(rf"(?<![^\W_])(?:{p})(?![^\W_])"), s, strong) for p, s, strong in _HEADING_KEYWORDS]
_CONNECTORS = {"and", "&", "/", "of", "the", "our", "a", "an", "for", "with", "in", "on"}

_MD_HEADING_RE = re.compile(r"^\s{0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t#]*$")
_HTML_HEADING_RE = re.compile(r"^\s*<h([1-6])[^>]*>(.*?)</h\1>\s*$", re.IGNORECASE)
_LATEX_HEADING_RE = re.compile(r"^\s*\\((?:sub)*)section\*?\{(.*)\}\s*$")
_LATEX_ABSTRACT_RE = re.compile(r"^\s*\\begin\{abstract\}\s*$")
_BOLD_LINE_RE = re.compile(r"^\s*(?:\*\*|__)(.+?)(?:\*\*|__)\s*:?\s*$")
_INLINE_RE = re.compile(
    r"^\s*(?:\*\*|__)?\s*([A-Za-z][A-Za-z &/]{1,40}?)\s*(?:\*\*|__)?\s*(?::|\s-\s)\s*(?:\*\*|__)?\s*(\S.*)$"
)
_NUMBERED_RE = re.compile(
    r"^\s*(?:section\s+)?(?:\d{1,2}(?:\.\d{1,2})*\.?|[ivx]{1,4}\.|[a-h]\.|\d{1,2}\))\s+(.+?)\s*$", re.IGNORECASE
)
_SETEXT_RE = re.compile(r"^\s{0,3}(=+|-+)\s*$")
_FENCE_RE = re.compile(r"^\s*(```|~~~)")
_NUM_PREFIX_RE = re.compile(
    r"^(?:section\s+)?(?:\d{1,2}(?:\.\d{1,2})*\.?|[ivx]{1,4}\.|[a-h][.)]|\d{1,2}\))\s+", re.IGNORECASE
)


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
def parse_heading(line: str, next_line: str | None) -> tuple[int, tuple[str, ...] | None, str | None, bool] | None:
    """Whether ``line`` is a heading: (level, sections or None if unrecognized, inline body,
    consumes the next line). Recognized forms, in order:

    * Markdown ``# Title`` (level = number of ``#``), HTML ``<h2>``, LaTeX ``\\section{}`` and
      ``\\begin{abstract}``: loose matching; an unrecognized one is still a heading (it may end a
      section, see :func:`heading_blocks`);
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
        if m is None:
            return None
        secs = _title_sections(m.group(1), strict=True)
        return (2, secs, s[m.start(2) :], False) if secs else None
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
    if (
        m
        and len(m.group(1).split()) <= 10
        and not m.group(1).rstrip(":").endswith(".")
        and not re.match(r"\s*(?:table|figure|fig\.?)\s", m.group(1), re.IGNORECASE)
    ):
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
class HeadingBlock:
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


def heading_blocks(text: str) -> list[HeadingBlock]:
    """The report as heading blocks, in order. Text before the first recognized heading (title,
    authors) belongs to no section. A recognized heading opens a block for its sections. An
    unrecognized Markdown/HTML/LaTeX heading at the same or a higher level than the open
    section's heading closes it (its text belongs to no section); a deeper one (a subsection such
    as ``### Random forest`` under ``## Methods``) continues it. Lines inside fenced code blocks
    are never headings."""
    blocks: list[HeadingBlock] = []
    current: HeadingBlock | None = None
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
        h = None if in_fence else parse_heading(line, lines[i + 1] if i + 1 < len(lines) else None)
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
        current = HeadingBlock(secs, line.strip(), level)
        if inline:
            current.add(inline, i)
        blocks.append(current)
    return blocks


def split_sections(text: Any) -> dict[str, str]:
    """The report's sections: {section: body text}, for the sections whose heading was found, in
    the order of :data:`SECTIONS`. A section with several headings (e.g. ``Results`` twice) gets
    their bodies joined; a combined heading ("Data and Methods") gives its body to both. See
    :func:`parse_heading` for the heading forms and :func:`heading_blocks` for where a section ends."""
    clean, _ = clean_text(text)
    out: dict[str, list[str]] = {}
    for b in heading_blocks(clean):
        for s in b.sections:
            out.setdefault(s, []).append(b.body)
    return {s: "\n\n".join(x for x in out[s] if x) for s in SECTIONS if s in out}


_PLACEHOLDER_RE = re.compile(
    r"\btbd\b|\btbc\b|\btodo\b|\bto-do\b|\bfixme\b|\bplaceholder\b|coming soon|\bxxx+\b|\blorem\b|\bipsum\b"
    r"|to be (?:completed|added|written|determined|filled(?: in)?|done|provided|updated|decided|confirmed|inserted)"
    r"|insert [^.]{0,40}? here|fill (?:this|in|out)|\[(?:section|content|text|insert|add)[^\]]{0,40}\]"
    r"|content (?:goes|will go) here|this section (?:is|will be) (?:empty|left blank|intentionally)",
    re.IGNORECASE,
)
_ITEM_RE = re.compile(r"^\s*(?:[-*+]|\d{1,2}[.)]|\(\d{1,2}\))\s+")
_TABLE_SEP_RE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?\s*$")
ALPHA_WORD_RE = re.compile(r"[^\W\d_]{2,}")
TOKEN_RE = re.compile(r"[^\W_]+")


def logical_lines(text: str) -> list[tuple[str, int, int, str]]:
    """The report's logical lines, as (kind, first line, last line, text), following Markdown:
    consecutive plain lines form one paragraph (a hard-wrapped sentence stays one sentence); a
    list item (``-``, ``*``, ``+``, ``1.``, ``2)``) starts a new one and takes the plain lines
    that follow it; a table row (``| ... |``), a heading (:func:`parse_heading`) and a line inside a
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
        h = parse_heading(line, lines[i + 1] if i + 1 < len(lines) else None)
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
        for sent in split_sentences(line.replace("|", " ")):
            if _PLACEHOLDER_RE.search(sent):
                continue
            if len(TOKEN_RE.findall(sent)) >= 3:
                n_sent += 1
            words.extend(w.lower() for w in ALPHA_WORD_RE.findall(sent))
    return n_sent >= MIN_SENTENCES and len(words) >= MIN_WORDS and len(set(words)) >= MIN_DISTINCT_WORDS


def section_presence(text: str) -> dict[str, bool]:
    """{section: present with substantive content} for the seven sections (``text`` already
    cleaned). A block whose body repeats an earlier block's body word for word (the same filler
    pasted under every heading) is not substantive."""
    present = {s: False for s in SECTIONS}
    seen: set[str] = set()
    for b in heading_blocks(text):
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
_ABBREV = (
    "e.g.",
    "i.e.",
    "approx.",
    "vs.",
    "etc.",
    "al.",
    "fig.",
    "figs.",
    "cf.",
    "ca.",
    "eq.",
    "resp.",
    "incl.",
    "est.",
    "avg.",
    "std.",
    "sec.",
    "tab.",
    "ref.",
    "corr.",
)
#: a "sentence" longer than this (no punctuation in a wall of text) is cut into pieces of at most
#: this many characters at white space, which bounds the per-sentence work on hostile input.
MAX_SENTENCE_CHARS = 2000


def split_sentences(line: str) -> list[str]:
    """A line cut after ``.``, ``!`` or ``?`` followed by white space, except after a common
    abbreviation (e.g., i.e., approx., vs., et al., Fig., ...). Decimals ("0.5") never split. A
    piece longer than :data:`MAX_SENTENCE_CHARS` is cut further (:func:`text_chunks`)."""
    pieces = _SENT_SPLIT_RE.split(line.strip())
    out: list[str] = []
    for p in pieces:
        if out and out[-1].lower().endswith(_ABBREV) and len(out[-1]) < MAX_SENTENCE_CHARS:
            out[-1] = out[-1] + " " + p
        elif p:
            out.append(p)
    if any(len(p) > MAX_SENTENCE_CHARS for p in out):
        out = [c for p in out for c in text_chunks(p)]
    return out


def text_chunks(text: str, size: int = MAX_SENTENCE_CHARS) -> list[str]:
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


__all__ = [
    "MAX_CHARS",
    "MAX_SENTENCE_CHARS",
    "MIN_DISTINCT_WORDS",
    "MIN_SENTENCES",
    "MIN_WORDS",
    "SECTIONS",
    "clean_text",
    "is_substantive",
    "logical_lines",
    "section_presence",
    "split_sections",
]
