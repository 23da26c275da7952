"""Markdown of a run (a paper, claims.md, statistics.md) as HTML for the explorer's pages, through
markdown-it-py (CommonMark, with GitHub's pipe tables).

The text is hostile (a model wrote the paper; a shared folder's files are anyone's): raw HTML is not
parsed (a ``<script>`` in the text is shown as text), and links, autolinks and images are switched
off, so their source stays text (a page never points its reader at an address a model wrote, nor
loads anything from anywhere). Headings are moved down three levels (``#`` becomes ``<h4>``) to sit
inside a page's sections.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from markupsafe import Markup

#: characters of one Markdown text rendered at most (the page says when it is cut)
MAX_CHARS = 60_000
#: levels a heading is moved down (a paper's "# Title" sits under the section's <h2>)
SHIFT = 3


@lru_cache(maxsize=1)
def _parser() -> Any:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable("table")
    md.disable(["link", "image", "autolink"])
    return md


def to_html(text: str) -> tuple[Markup, bool]:
    """(the text as HTML, whether it was cut to :data:`MAX_CHARS`). Every character of the text is
    escaped by the renderer; the result is the renderer's markup only."""
    cut = len(text) > MAX_CHARS
    md = _parser()
    tokens = md.parse(text[:MAX_CHARS] if cut else text)
    for t in tokens:
        if t.type in ("heading_open", "heading_close"):
            t.tag = f"h{min(int(t.tag[1]) + SHIFT, 6)}"
    return Markup(md.renderer.render(tokens, md.options, {})), cut
