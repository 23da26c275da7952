"""Turning a task's sections (:mod:`cooplab.graphs.explore`) into what the templates show.

Nothing here writes markup: blocks become plain dicts of strings and numbers, and the Jinja
templates (autoescape on) write the HTML; the one exception is a :class:`~cooplab.graphs.explore.Markdown`
block, whose HTML is markdown-it-py's rendering of escaped text (:mod:`.markdown`). A plot becomes its
numbers as JSON in a ``data-plot`` attribute (escaped by the template), which the page's own
``static/plots.js`` draws as SVG in the browser (hover, zoom), putting every label in as text, never
as markup.

Where a link leads is :class:`Addresses`' choice: the app's own URLs (``/run?id=...``), or, in the
file ``cooplab report`` writes, an anchor of that file (None when the file does not hold the page:
the link is then shown as text). :func:`addressing` sets it for the pages rendered inside it.
"""

from __future__ import annotations

import base64
import functools
import math
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from cooplab.evals.explorer import markdown
from cooplab.evals.values import cut, fmt, num, slug
from cooplab.graphs import explore as ex

#: characters of one table cell shown (the rest is cut, with an ellipsis)
MAX_CELL_CHARS = 2_000
#: columns of a table shown at most
MAX_COLUMNS = 40
#: points of one plot series at most (longer series are thinned evenly)
MAX_POINTS = 2_000
#: series of one plot at most (the rest are named in the caption)
MAX_SERIES = 24
#: marks (lines and bands across the x axis) of one plot at most
MAX_MARKS = 12
#: bytes of one image file shown inline at most
MAX_IMAGE_BYTES = 8 << 20
#: bytes of images one file of ``cooplab report`` embeds at most (its :class:`ImageBudget`)
MAX_FILE_IMAGE_BYTES = 64 << 20
#: blocks nested in Details/Columns at most this deep
MAX_NESTING = 6
#: options of one drop-down at most
MAX_CHOICES = 10_000


def package_dir(name: str) -> Path:
    """A folder of the explorer's package data (``templates``, ``static``)."""
    return Path(str(resources.files(__name__.rpartition(".")[0]).joinpath(name)))


@functools.cache
def templates(layout: str = "base.html") -> Any:
    """The Jinja environment: the package's templates, autoescape on for every template. ``layout``:
    what every page extends (``base.html``, the app's page; ``part.html``, one page of the file
    ``cooplab report`` writes). One environment per layout and process, so a template is compiled
    once (Jinja checks the file's time and recompiles an edited one); nothing changes it after."""
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    env = Environment(
        loader=FileSystemLoader(str(package_dir("templates"))),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals["layout"] = layout
    return env


def app_url(page: str, query: Mapping[str, str]) -> str:
    """The app's address of a page: ``/PAGE?QUERY`` (``/`` for the list without a query)."""
    path = "/" if page in ("", "index") else f"/{page}"
    return path + ("?" + urlencode(dict(query)) if query else "")


class ImageBudget:
    """The bytes of images the pages being rendered may still embed (one file of many pages)."""

    def __init__(self, left: int):
        self.left = left


@dataclass(frozen=True)
class Addresses:
    """How the pages being rendered link to pages: ``href(page, query)`` gives an address or None
    (not reachable: the link is shown as text); ``forms``: whether a form can open a page (a
    drop-down; the app's pages can, a file cannot); ``prefix``: put before every anchor of the page
    (the sections of several pages share one file); ``images``: the bytes of images left to embed
    (None: no bound but :data:`MAX_IMAGE_BYTES` per image)."""

    href: Callable[[str, Mapping[str, str]], str | None] = app_url
    forms: bool = True
    prefix: str = ""
    images: ImageBudget | None = None


_ADDRESSES: ContextVar[Addresses] = ContextVar("cooplab_explorer_addresses", default=Addresses())  # noqa: B039 (a frozen dataclass)


@contextmanager
def addressing(addresses: Addresses) -> Iterator[Addresses]:
    """Render the pages inside the ``with`` block with these addresses (this thread or task only)."""
    token = _ADDRESSES.set(addresses)
    try:
        yield addresses
    finally:
        _ADDRESSES.reset(token)


def addresses() -> Addresses:
    """The addresses pages are rendered with now."""
    return _ADDRESSES.get()


def href(page: str, query: Mapping[str, str]) -> str | None:
    """Where a link to ``page`` with ``query`` leads (None: shown as text)."""
    return _ADDRESSES.get().href(page, query)


def _href(page: str, run_id: str, params: Mapping[str, Any]) -> str | None:
    """The address of ``page`` of run ``run_id``: the run's id, then each parameter that is not None as text."""
    return href(page, {"id": run_id, **{k: str(v) for k, v in params.items() if v is not None}})


def _page(run: Any) -> str:
    """The app page that shows ``run``: "run", or "group" for a sweep or a profile."""
    page = getattr(run, "page", "run")
    return page if page in ("run", "group") else "run"


def run_href(run_id: str, **params: Any) -> str | None:
    """The address of a run's page with query parameters (each value as text)."""
    return _href("run", run_id, params)


def trace_href(run_id: str, **params: Any) -> str | None:
    """The address of a run's traces page, filtered by these parameters."""
    return _href("traces", run_id, params)


def text(v: Any, limit: int = MAX_CELL_CHARS) -> str:
    """Any value as plain text (None as an em dash, NaN named, long text cut)."""
    return v if isinstance(v, str) and len(v) <= limit else fmt(v, limit)


def table_rows(rows: Any, max_rows: int) -> tuple[list[str], list[list[Any]], int]:
    """(columns, rows of cell values, total rows) of a DataFrame or a list of dicts."""
    try:
        import pandas as pd

        if isinstance(rows, pd.DataFrame):
            cols = [str(c) for c in rows.columns[:MAX_COLUMNS]]
            sub = rows.iloc[: max(max_rows, 0), :MAX_COLUMNS]
            return cols, [list(r) for r in sub.itertuples(index=False, name=None)], len(rows)
    except ImportError:  # pragma: no cover
        pass
    rows = [r for r in (rows or []) if isinstance(r, Mapping)]
    cols: list[str] = []
    for r in rows[:max_rows]:
        for k in r:
            if str(k) not in cols and len(cols) < MAX_COLUMNS:
                cols.append(str(k))
    return cols, [[r.get(c) for c in cols] for r in rows[:max_rows]], len(rows)


#: the last word of a column name that holds identifiers ("call_id", "thread id", "cache key")
_ID_WORDS = {"id", "ids", "key", "keys", "hash", "digest", "uuid", "sha", "sha256", "thread", "checkpoint", "cell"}
#: the first word of a column name that holds identifiers ("call", "run_id", "trace")
_ID_FIRST = {"call", "run", "thread", "trace", "span", "checkpoint", "parent"}


def is_identifier(column: Any) -> bool:
    """Whether a column holds identifiers (call, run, agent, thread ids, keys, hashes): text to show
    as it is and sort as text, never a number ("5e41512851534475" is a call id, not 5 x 10^41512851534475)."""
    words = [w for w in re.split(r"[\s_.\-/]+", str(column).lower()) if w]
    return bool(words) and (words[-1] in _ID_WORDS or words[0] in _ID_FIRST)


def cell(v: Any, column: Any = None) -> dict[str, Any]:
    """One table cell: its text and, for numbers, the value the sorter uses (a cell of an
    identifier column, :func:`is_identifier`, is text: shown verbatim, sorted as text)."""
    if column is not None and is_identifier(column):
        return {"text": text(v), "sort": ""}
    n = num(v)
    return {"text": text(v), "sort": "" if n is None else repr(n)}


#: line colours: distinct from each other and from :data:`MEAN_COLOUR` (a society's mean is never
#: drawn in an agent's colour); a label keeps its colour across the two runs of a comparison
PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#bcbd22",
    "#7b4173",
    "#aec7e8",
    "#ffbb78",
    "#98df8a",
    "#ff9896",
    "#c5b0d5",
    "#c49c94",
    "#f7b6d2",
    "#9edae5",
    "#dbdb8d",
    "#393b79",
    "#637939",
    "#8c6d31",
    "#843c39",
    "#5254a3",
)
#: the colour of a mean line ("mean", "society mean", "A · mean"): black, drawn thicker
MEAN_COLOUR = "#111111"


def is_mean(label: Any) -> bool:
    """Whether a series is a mean ("mean", "society mean", "mean of efficiency"): drawn black and
    thick, never in an agent's colour."""
    return re.search(r"(?:^|[^\w])mean(?:[^\w]|$)", _base(label).strip().lower()) is not None


def colours(labels: list[Any]) -> dict[str, str]:
    """A colour for every label: means black, the others the palette in order (a label and its
    twin of the other run, "A · x" and "B · x", share one)."""
    out: dict[str, str] = {}
    order: dict[str, int] = {}
    for label in labels:
        base = _base(label)
        if is_mean(label):
            out[str(label)] = MEAN_COLOUR
        else:
            out[str(label)] = PALETTE[order.setdefault(base, len(order)) % len(PALETTE)]
    return out


def _short(v: float | None) -> float | None:
    """A value rounded to 6 significant digits for the page (the page shows 4)."""
    return None if v is None else float(f"{v:.6g}")


def plot_data(p: ex.Plot) -> tuple[str | None, str | None]:
    """(the plot as JSON for the page's plots.js, None) or (None, why it cannot be drawn). Numbers
    only: a value that is not a finite number is a gap (null); long series are thinned evenly;
    labels are text the script puts in with textContent."""
    import json

    xs = list(p.x)[: MAX_POINTS * 50]
    if not xs:
        return None, "nothing to plot (no points)"
    step = max(1, math.ceil(len(xs) / MAX_POINTS))
    idx = list(range(0, len(xs), step))
    xnum = [num(xs[i]) for i in idx]
    categorical = any(v is None for v in xnum)
    xv = list(range(len(idx))) if categorical else [_short(v) for v in xnum]
    kind = p.kind if p.kind in ("line", "step", "bar", "points") else "line"
    labels = [str(label) for label, _ in list(p.series.items())[:MAX_SERIES]]
    col = colours(
        labels + [str(k) for k in p.bands if str(k) not in labels] + [str(k) for k in p.scatter if str(k) not in labels]
    )
    dashed = {str(d) for d in p.dashed}
    series = []
    for label, ys in list(p.series.items())[:MAX_SERIES]:
        ys = list(ys)
        yv = [_short(num(ys[i])) if i < len(ys) else None for i in idx]
        if all(v is None for v in yv):
            continue
        name = cut(str(label), 60)
        series.append(
            {
                "label": name,
                "y": yv,
                "colour": col[str(label)],
                "dashed": str(label) in dashed,
                "width": 3.0 if is_mean(label) else 1.6,
            }
        )
    bands = []
    for label, pair in list(p.bands.items())[:MAX_SERIES]:
        try:
            lo, hi = (list(v) for v in pair)
        except (TypeError, ValueError):
            continue
        lv = [_short(num(lo[i])) if i < len(lo) else None for i in idx]
        hv = [_short(num(hi[i])) if i < len(hi) else None for i in idx]
        if any(a is not None and b is not None for a, b in zip(lv, hv, strict=False)):
            bands.append({"label": cut(str(label), 60), "lo": lv, "hi": hv, "colour": col[str(label)]})
    scatter = []
    slot = {str(xs[i]): k for k, i in enumerate(idx)}  # a category's place on the x axis
    for label, pair in list(p.scatter.items())[:MAX_SERIES]:
        try:
            sx, sy = (list(v)[: MAX_POINTS * 10] for v in pair)
        except (TypeError, ValueError):
            continue
        px = [slot.get(str(x)) for x in sx] if categorical else [_short(num(x)) for x in sx]
        py = [_short(num(y)) for y in sy]
        keep = [(a, b) for a, b in zip(px, py, strict=False) if a is not None and b is not None]
        if keep:
            scatter.append(
                {
                    "label": cut(str(label), 60),
                    "x": [a for a, _ in keep],
                    "y": [b for _, b in keep],
                    "colour": col[str(label)],
                }
            )
    if not series and not bands and not scatter:
        return None, "nothing to plot (every value is missing or not a finite number)"
    marks = []
    for m in list(p.marks or [])[:MAX_MARKS] if not categorical else []:
        if not isinstance(m, Mapping) or num(m.get("x")) is None:
            continue
        to = num(m.get("to")) if m.get("to") is not None else None
        marks.append({"x": _short(num(m.get("x"))), "to": _short(to), "label": cut(str(m.get("label") or ""), 80)})
    data = {
        "title": cut(str(p.title), 120),
        "xlabel": cut(str(p.xlabel), 60),
        "ylabel": cut(str(p.ylabel), 60),
        "kind": kind,
        "integer_x": bool(p.integer_x),
        "categorical": categorical,
        "x": xv,
        "xticks": [cut(str(xs[i]), 24) for i in idx] if categorical else None,
        "series": series,
        "bands": bands,
        "scatter": scatter,
        "marks": marks,
    }
    return json.dumps(data, allow_nan=False, ensure_ascii=False), None


def _base(label: Any) -> str:
    """A series label without its run tag ("A · mean" -> "mean")."""
    text = str(label)
    return text.split(" \u00b7 ", 1)[1] if text[:4] in ("A \u00b7 ", "B \u00b7 ") else text


IMAGE_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def image_mime(head: bytes) -> str | None:
    """The image type of a file by its first bytes (PNG, JPEG, GIF, WebP), else None."""
    for magic, mime in IMAGE_MAGIC:
        if head.startswith(magic):
            return mime
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def image_uri(run: Any, rel: str) -> tuple[str | None, str | None]:
    """(a data: URI of an image file inside the run directory, None) or (None, why not)."""
    try:
        base = run.out.resolve()
        path = (base / rel).resolve()
        path.relative_to(base)
    except (OSError, ValueError):
        return None, f"{cut(rel, 120)} is not a file of this run"
    budget = addresses().images
    try:
        if not path.is_file() or path.stat().st_size > MAX_IMAGE_BYTES:
            return None, f"{cut(rel, 120)} is missing or too large to show"
        if budget is not None and path.stat().st_size > budget.left:
            return (
                None,
                f"{cut(rel, 120)} is not embedded: the images of this file already take {MAX_FILE_IMAGE_BYTES >> 20} "
                "MB",
            )
        data = path.read_bytes()
    except OSError as exc:
        return None, f"cannot read {cut(rel, 120)}: {exc.strerror or exc}"
    mime = image_mime(data[:16]) or ("image/svg+xml" if path.suffix.lower() == ".svg" else None)
    if mime is None:
        return None, f"{cut(rel, 120)} is not an image (PNG, JPEG, GIF, WebP or SVG)"
    if budget is not None:
        budget.left -= len(data)
    return f"data:{mime};base64," + base64.b64encode(data).decode("ascii"), None


def block(b: Any, run: Any, depth: int = 0) -> dict[str, Any]:
    """One block as a dict for the templates (``kind`` picks the macro)."""
    if depth > MAX_NESTING:
        return {"kind": "note", "text": "blocks nested too deeply to show", "level": "warn"}
    if isinstance(b, ex.Text):
        return {"kind": "text", "text": text(b.text, 100_000), "pre": bool(b.pre)}
    if isinstance(b, ex.Markdown):
        html, was_cut = markdown.to_html(b.text if isinstance(b.text, str) else text(b.text, markdown.MAX_CHARS))
        return {
            "kind": "markdown",
            "html": html,
            "note": f"the first {markdown.MAX_CHARS:,} characters of {len(b.text):,} are shown" if was_cut else None,
        }
    if isinstance(b, ex.Note):
        return {"kind": "note", "text": text(b.text, 2_000), "level": "info" if b.level == "info" else "warn"}
    if isinstance(b, ex.KeyValues):
        items = list(b.items.items()) if isinstance(b.items, Mapping) else []
        return {
            "kind": "kv",
            "title": text(b.title) if b.title else None,
            "items": [(text(k, 80), text(v, 400)) for k, v in items[:200]],
        }
    if isinstance(b, ex.Table):
        cols, rows, total = table_rows(b.rows, max(0, int(b.max_rows)))
        links = {
            str(k): (v, k) if isinstance(v, str) else (str(v[0]), str(v[1]))
            for k, v in dict(b.links or {}).items()
            if isinstance(v, str) or (isinstance(v, (tuple, list)) and len(v) == 2)
        }
        out_rows = []
        for r in rows:
            values = dict(zip(cols, r, strict=False))
            cells = []
            for c, v in zip(cols, r, strict=False):
                if c.startswith("_"):
                    continue
                d = cell(v, c)
                param, src = links.get(c, (None, None))
                target = values.get(src) if src is not None else None
                if param and target is not None and cell(target)["text"] != "\u2014":  # "id": another run's page
                    d["href"] = _href(
                        "run" if param == "id" else _page(run),
                        run.id,
                        {**dict(b.keep or {}), param: cell(target)["text"]},
                    )
                cells.append(d)
            out_rows.append(cells)
        return {
            "kind": "table",
            "title": text(b.title) if b.title else None,
            "columns": [c for c in cols if not c.startswith("_")],
            "rows": out_rows,
            "total": total,
            "shown": len(rows),
            "filterable": bool(b.filterable),
        }
    if isinstance(b, ex.Plot):
        data, problem = plot_data(b)
        return {
            "kind": "plot",
            "data": data,
            "problem": problem,
            "title": text(b.title),
            "caption": text(b.caption, 1_000),
            "alt": text(b.title or b.ylabel or "plot", 200),
        }
    if isinstance(b, ex.Choice):
        opts = [
            (str(o[0]), text(o[1], 120)) if isinstance(o, (tuple, list)) and len(o) == 2 else (str(o), text(o, 120))
            for o in list(b.options or [])[:MAX_CHOICES]
        ]
        values = [v for v, _ in opts]
        chosen = str(b.chosen) if b.chosen is not None else (values[0] if values else "")
        at = values.index(chosen) if chosen in values else -1
        keep = {str(k): str(v) for k, v in dict(b.keep or {}).items() if str(k) not in ("id", b.param)}
        near = {
            "prev": values[at - 1] if at > 0 else None,
            "next": values[at + 1] if 0 <= at < len(values) - 1 else None,
        }
        page = _page(run)
        here = addresses()
        return {
            "kind": "choice",
            "param": str(b.param),
            "options": opts,
            "chosen": chosen,
            "label": text(b.label, 200),
            "id": run.id,
            "keep": sorted(keep.items()),
            "count": len(values),
            "action": app_url(page, {}) if here.forms else None,
            "chosen_text": dict(opts).get(chosen, chosen),
            "prev": _href(page, run.id, {**keep, b.param: near["prev"]}) if near["prev"] is not None else None,
            "next": _href(page, run.id, {**keep, b.param: near["next"]}) if near["next"] is not None else None,
        }
    if isinstance(b, ex.Image):
        uri, problem = image_uri(run, str(b.path))
        if problem and hasattr(run, "notes"):  # named at the top of the page too
            run.notes.append(problem)
        return {
            "kind": "image",
            "src": uri,
            "problem": problem,
            "caption": text(b.caption, 1_000),
            "alt": text(b.path, 200),
        }
    if isinstance(b, ex.Code):
        return {"kind": "code", "text": text(b.text, 200_000), "title": text(b.title) if b.title else None}
    if isinstance(b, ex.Link):
        params = {str(k): text(v, 200) for k, v in dict(b.params or {}).items()}
        href = trace_href(run.id, **params) if b.trace else _href(_page(run), run.id, params)
        return {"kind": "link", "text": text(b.text, 300), "href": href}
    if isinstance(b, ex.Details):
        return {
            "kind": "details",
            "summary": text(b.summary, 300),
            "open": bool(b.open),
            "blocks": [block(x, run, depth + 1) for x in list(b.blocks or [])],
        }
    if isinstance(b, ex.Columns):
        return {
            "kind": "columns",
            "columns": [[block(x, run, depth + 1) for x in list(col or [])] for col in list(b.columns or [])[:4]],
        }
    return {"kind": "note", "text": f"a block of an unknown kind ({type(b).__name__}) is not shown", "level": "warn"}


def sections(secs: Any, run: Any) -> list[dict[str, Any]]:
    """A task's sections as dicts for the templates (anchors made unique, and prefixed with the
    page's :attr:`Addresses.prefix`)."""
    prefix = addresses().prefix
    out: list[dict[str, Any]] = []
    used: set[str] = set()
    for s in list(secs or []):
        if not isinstance(s, ex.Section):
            out.append(
                {
                    "title": "?",
                    "id": f"{prefix}s{len(out)}",
                    "blocks": [block(ex.Note(f"not a Section: {type(s).__name__}"), run)],
                }
            )
            continue
        sid = slug(s.id or s.title)
        while sid in used:
            sid += "-x"
        used.add(sid)
        out.append(
            {"title": text(s.title, 200), "id": prefix + sid, "blocks": [block(b, run) for b in list(s.blocks or [])]}
        )
    return out
