"""What a task shows in the run explorer (``cooplab view``): plain data blocks, no HTML.

A task describes one run's page as a list of :class:`Section` objects, each holding blocks
(:class:`Text`, :class:`Markdown`, :class:`Note`, :class:`KeyValues`, :class:`Table`, :class:`Plot`,
:class:`Image`, :class:`Code`, :class:`Link`, :class:`Choice`, :class:`Details`, :class:`Columns`). The explorer
(:mod:`cooplab.evals.explorer`) renders them with its own templates: every string is escaped, so a
task never writes markup and text from a run (a model's answer, an agent's name) can never run as
code in the browser. Links carry query parameters of the run's own page only (``Link(params=...)``),
never a free URL; images are files inside the run directory.

The hook, :meth:`cooplab.graphs.task.Task.explore`, returns these sections; the explorer falls back
to its built-in view of the task (CPR, diners, games) or to a generic one (config, summary, tables,
figures) when the hook returns None; the generic sections follow a task's own on every page. The
same sections make the file ``cooplab report`` writes. A :class:`Plot` with a ``key`` is overlaid with the other run's
plot of the same key when two runs are compared.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Union


@dataclass
class Text:
    """A paragraph of plain text (``pre=True``: keep line breaks, as in a model's answer)."""

    text: str
    pre: bool = False


@dataclass
class Markdown:
    """Text written in Markdown (a paper, a claims file), rendered by a Markdown library: headings,
    lists, tables, emphasis and code. Raw HTML in it stays text, and so do its links and images (a
    page never points its reader at an address a model wrote, nor loads anything)."""

    text: str


@dataclass
class Note:
    """A short notice: something missing or damaged in the run directory (``level``: info | warn)."""

    text: str
    level: str = "warn"


@dataclass
class KeyValues:
    """Named values, shown as cards (key numbers) or a two-column list."""

    items: Mapping[str, Any]
    title: str | None = None


@dataclass
class Table:
    """Rows of a table: a pandas DataFrame or a list of dicts. ``max_rows`` caps what is shown (the
    page says how many rows were left out); ``filterable`` adds a text filter over the rows.
    ``links`` maps a column to the query parameter its cells link to (e.g. ``{"round": "round"}``:
    each cell of column round links to ``?round=<value>`` on the run's page), or to (parameter,
    column whose value the link carries), e.g. ``{"name": ("agent", "id")}``; ``keep`` holds query
    parameters every such link keeps (e.g. the society shown). Columns whose name starts with ``_``
    are not shown (e.g. an id a link carries)."""

    rows: Any
    title: str | None = None
    max_rows: int = 500
    filterable: bool = True
    links: Mapping[str, Any] = field(default_factory=dict)
    keep: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class Plot:
    """A plot, drawn in the browser (hover shows the values, dragging zooms in): ``series`` maps a
    label to y values over ``x`` (the same length; None or NaN leaves a gap). ``kind``: line | step |
    bar | points. ``key`` names the plot across runs: a comparison overlays the two runs' plots of the
    same key. ``integer_x``: x ticks on whole numbers (rounds). ``bands`` maps a label to (lower,
    upper) values over ``x``: an interval drawn as a shaded band (as whiskers over categories, bars or
    points) in the colour of the series of the same label; ``scatter`` maps a label to (xs, ys):
    single values drawn as open dots (e.g. each seed of a condition). ``marks``: places on the x axis,
    each ``{"x": X, "label": TEXT}`` (a dotted vertical line) or ``{"x": X, "to": X2, "label": TEXT}``
    (a grey band from X to X2), e.g. the rounds two runs share and the first round they differ. Say in
    ``caption`` what every line, band, dot and mark is."""

    x: Sequence[Any]
    series: Mapping[str, Sequence[Any]]
    title: str = ""
    xlabel: str = ""
    ylabel: str = ""
    kind: str = "line"
    key: str | None = None
    integer_x: bool = True
    caption: str = ""
    #: labels of series drawn dashed (a comparison draws run B's lines dashed)
    dashed: Sequence[str] = ()
    bands: Mapping[str, Any] = field(default_factory=dict)
    scatter: Mapping[str, Any] = field(default_factory=dict)
    marks: Sequence[Mapping[str, Any]] = ()


@dataclass
class Image:
    """An image file of the run (``path`` relative to the run directory; PNG, JPEG, GIF, WebP or SVG
    served as an image, so scripts in an SVG never run)."""

    path: str
    caption: str = ""


@dataclass
class Code:
    """Code or program output, shown verbatim in a monospace box."""

    text: str
    language: str = ""
    title: str | None = None


@dataclass
class Link:
    """A link to the same run's page with these query parameters (e.g. ``{"agent": "2"}``), or with
    ``trace`` set: to the run's model calls (its traces page) filtered by these parameters."""

    text: str
    params: Mapping[str, Any] = field(default_factory=dict)
    trace: bool = False


@dataclass
class Choice:
    """A drop-down that opens the run's page with ``param`` set to the option picked (and the
    parameters of ``keep`` kept), e.g. one society of a batch of 100: ``options`` are (value, label)
    pairs, ``chosen`` the value shown now. With the previous and next option as links."""

    param: str
    options: Sequence[Any]
    chosen: Any = None
    label: str = ""
    keep: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class Details:
    """A collapsible group of blocks under a one-line summary (e.g. one tool call)."""

    summary: str
    blocks: list["Block"] = field(default_factory=list)
    open: bool = False


@dataclass
class Columns:
    """Blocks side by side: one list of blocks per column (e.g. a fact and the evidence for it)."""

    columns: list[list["Block"]] = field(default_factory=list)


Block = Union[Text, Markdown, Note, KeyValues, Table, Plot, Image, Code, Link, Choice, Details, Columns]


@dataclass
class Section:
    """A titled part of a run's page (its ``id`` is the anchor in the page's table of contents)."""

    title: str
    blocks: list[Block] = field(default_factory=list)
    id: str | None = None
