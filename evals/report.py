"""``cooplab report DIR``: one self-contained HTML page for a run directory or a sweep directory.

The page holds the configuration, the status and summary numbers, the costs (tokens, USD, calls,
cached calls), every figure (embedded as ``data:`` URIs), the tables (small ones in full, large
ones as their first rows plus counts) and links to the traces. It makes no request of its own: a
Content-Security-Policy in the page forbids every load except ``data:`` images and the page's own
style and (nonce-tagged) script, so it can be mailed and opened offline.

What kind of directory it is comes from its files:

- a **sweep** holds run directories under ``cells/``, ``runs/`` or ``games/`` (a CPR or generic
  sweep, a science sweep, a ``cooplab profile``), possibly with ``sweep.json``, ``profile.json``,
  ``scores.csv``, ``table.csv``, ``analysis/`` (figures, ``statistics.md``) and ``figures/``;
- a **run** holds ``config.json`` or ``summary.json`` (written by ``cooplab run``).

Every value read from a file is escaped and cut to a readable length; damaged files (JSON that does
not parse, a table that does not load, an image that is not one, damaged trace lines) are named on
the page instead of stopping it.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as _dt
import errno
import html
import json
import math
import os
import re
import secrets
import shlex
from dataclasses import dataclass, field
from decimal import Context, Decimal, InvalidOperation, localcontext
from pathlib import Path
from typing import Any, Iterable
from urllib.parse import quote

from cooplab.graphs import rundir
from cooplab.graphs.rundir import TRACES_FILE

#: the folders of a sweep directory that hold its run directories
RUN_FOLDERS = ("cells", "runs", "games")
#: a table with at most this many rows is shown in full; a longer one shows PREVIEW_ROWS rows
FULL_ROWS = 30
PREVIEW_ROWS = 10
MAX_COLUMNS = 30
MAX_CELL_CHARS = 160
MAX_TEXT_CHARS = 400
#: table rows rendered on one page at most (the rest of the tables show their counts only)
PAGE_TABLE_ROWS = 3000
#: an image larger than this is linked instead of embedded; all embedded images at most PAGE_IMAGE_BYTES
MAX_IMAGE_BYTES = 8 << 20
PAGE_IMAGE_BYTES = 64 << 20
#: JSON files larger than this are not parsed (config.json and summary.json are a few kB)
MAX_JSON_BYTES = 16 << 20
#: traces.jsonl: lines beyond this many bytes are counted, not parsed
MAX_TRACE_SCAN_BYTES = 256 << 20
#: run sections on one sweep page at most (every run still gets its row in the runs table)
MAX_RUN_SECTIONS = 400
MAX_FILES_LISTED = 120
MAX_MARKDOWN_CHARS = 60_000
GENERATOR = "cooplab report"
#: how a page written by ``cooplab report`` begins its generator tag (an earlier page is rewritten)
MARKER = f'<meta name="generator" content="{GENERATOR}'

IMAGE_TYPES = {".png", ".jpg", ".jpeg", ".gif", ".webp"}
TABLE_TYPES = {".parquet", ".csv"}
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'nonce-{nonce}'; base-uri 'none'; form-action 'none'"


class ReportError(ValueError):
    """A user-facing problem (one line): the directory is missing, empty or of no known kind, or
    ``--out`` is no place for the page (not .html, a directory, in a read-only folder); exit 2."""


class ReportWriteError(ReportError):
    """The page could not be written where it may go (a full disk, an I/O error): one line naming
    the file and the system's reason; nothing was written (exit 1)."""


#: errors of a place that cannot take the page at all (the user's --out), as opposed to a failing disk
_NOT_WRITABLE = (errno.EROFS, errno.EACCES, errno.EPERM)


def _write_problem(out: Path, exc: OSError) -> ReportError:
    why = exc.strerror or str(exc)
    if exc.errno in _NOT_WRITABLE:
        return ReportError(f"cannot write --out {out}: {why}; choose a folder you can write to")
    return ReportWriteError(f"cannot write {out}: {why}; nothing was written")


# --- values as text ---------------------------------------------------------------------------
def esc(x: Any) -> str:
    """Any value as escaped HTML text (cut to a readable length)."""
    return html.escape(x if isinstance(x, str) else fmt(x), quote=True)


def cut(text: str, limit: int = MAX_TEXT_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def fmt(v: Any, limit: int = MAX_TEXT_CHARS) -> str:
    """A value as short plain text: NaN and infinities named, fractions to 4 significant digits
    (0.8333, 12.35; 1,000 to 10^9 as whole numbers), huge and tiny numbers in scientific notation,
    long strings and nested values cut. Text is shown as it is (an id that looks like a number stays
    the id)."""
    if v is None:
        return "\u2014"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        if abs(v) < 10**15:
            return str(v)
        try:
            return f"{float(v):.4e}"
        except OverflowError:
            return f"{'-' if v < 0 else ''}~10^{int(v.bit_length() * 0.30103)}"
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "\u221e" if v > 0 else "-\u221e"
        if v == 0:
            return "0"
        if abs(v) >= 1e9 or abs(v) < 1e-4:
            return f"{v:.4g}"
        if abs(v) >= 1000:  # 4 significant digits or more: rounded to a whole number, never 1.235e+05
            return f"{v:.0f}"
        return f"{v:.4g}"
    if isinstance(v, Decimal):
        f = _bounded(v)
        return fmt(f, limit) if f is not None else cut(str(v), limit)
    if isinstance(v, str):
        return cut(v, limit)
    if isinstance(v, (list, tuple, dict)):
        try:
            text = json.dumps(v, default=str, allow_nan=True, ensure_ascii=False)
        except (ValueError, TypeError, RecursionError):
            text = repr(v)
        return cut(text, limit)
    try:  # numpy scalars, pandas timestamps, ...
        import numpy as np

        if isinstance(v, np.generic):
            return fmt(v.item(), limit)
    except ImportError:  # pragma: no cover
        pass
    return cut(str(v), limit)


#: a number written as text longer than this is not read as a number (ids, hashes and prose stay text)
MAX_NUMBER_CHARS = 64
#: decimal exponents beyond +-this are not read as numbers ("5e41512851534475" is a call id, not 10^41512851534475)
MAX_EXPONENT = 300
#: the decimal context of every sum this module does: its own (the user's global context is never read or
#: changed), no trap (an overflow is an infinity the caller checks, never an exception)
EXACT = Context(prec=60, Emax=999_999, Emin=-999_999, traps=[])


def num(v: Any) -> float | None:
    """A finite number from an int, float, Decimal or decimal string; None for anything else.

    Bounded: text longer than :data:`MAX_NUMBER_CHARS` or with an exponent beyond
    :data:`MAX_EXPONENT`, NaN and infinities are None; no decimal signal can escape, whatever the
    global decimal context says. Identifiers (call, run, agent and thread ids) are never passed
    here: they are text, whatever they look like."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        try:
            f = float(v)
        except OverflowError:
            return None
        return f if math.isfinite(f) else None
    if isinstance(v, str):
        s = v.strip()
        if not s or len(s) > MAX_NUMBER_CHARS:
            return None
        with localcontext(EXACT):
            try:
                d = Decimal(s)
            except (InvalidOperation, ValueError, ArithmeticError):
                return None
        return _bounded(d)
    if isinstance(v, Decimal):
        return _bounded(v)
    try:
        import numpy as np

        if isinstance(v, np.generic):
            return num(v.item())
    except ImportError:  # pragma: no cover
        pass
    return None


def _bounded(d: Decimal) -> float | None:
    """A finite Decimal within the exponent bound as a float (no context used), else None."""
    if not d.is_finite():
        return None
    if d.is_zero():
        return 0.0
    if not -MAX_EXPONENT <= d.adjusted() <= MAX_EXPONENT:
        return None
    return float(d)


def exact_sum(values: Iterable[Any]) -> Decimal | None:
    """The exact sum of the values that are numbers (:func:`num`), in :data:`EXACT` (None when it is
    not finite)."""
    with localcontext(EXACT):
        total = Decimal(0)
        for v in values:
            if num(v) is not None:
                total += Decimal(str(v).strip()) if not isinstance(v, Decimal) else v
        return total if total.is_finite() else None


def dig(d: Any, dotted: str) -> Any:
    for k in dotted.split("."):
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:80] or "x"


def human_bytes(n: int) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"  # pragma: no cover


# --- reading files (never raising) ------------------------------------------------------------
def read_json(path: Path) -> tuple[Any, str | None]:
    """(the parsed file, None) or (None, what is wrong with it)."""
    try:
        if path.stat().st_size > MAX_JSON_BYTES:
            return None, f"{path.name} is {human_bytes(path.stat().st_size)}, too large to show"
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"cannot read {path.name}: {getattr(exc, 'strerror', None) or exc}"
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        return None, f"{path.name} is damaged (not valid JSON: {exc.msg} at line {exc.lineno})"
    except (ValueError, RecursionError) as exc:
        return None, f"{path.name} is damaged ({cut(str(exc), 120)})"


def read_text_head(path: Path, limit: int) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read(limit).decode("utf-8", errors="replace")
    except OSError:
        return ""


def table_preview(path: Path, rows: int) -> tuple[Any, int | None, bool, str | None]:
    """(the first ``rows`` rows as a DataFrame, the table's row count, whether the count is
    approximate, a problem) of a Parquet or CSV file."""
    import pandas as pd

    try:
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            with open(path, "rb") as fh:  # Python opens it: a folder name that is not UTF-8 reads like any other
                rundir.table_footprint(path, fh)  # over the bounds: refused by its footer, before any value is read
                text = rundir.text_columns(pq.ParquetFile(fh).schema_arrow)
                pf = pq.ParquetFile(fh, read_dictionary=text or None)
                total = pf.metadata.num_rows
                if rows <= 0 or total == 0:
                    return pf.schema_arrow.empty_table().to_pandas(), total, False, None
                batch = next(pf.iter_batches(batch_size=rows), None)
                if batch is None:
                    return pf.schema_arrow.empty_table().to_pandas(), total, False, None
                import pyarrow as pa

                head = rundir.expand(pa.Table.from_batches([batch]), path, text).to_pandas()  # measured before it is decoded
                return head.head(rows), total, False, None
        size = path.stat().st_size
        if size <= 8 << 20:
            df = pd.read_csv(path)
            return df.head(rows), len(df), False, None
        head = pd.read_csv(path, nrows=max(rows, 1)).head(rows)
        with open(path, "rb") as fh:
            lines = sum(block.count(b"\n") for block in iter(lambda: fh.read(1 << 20), b""))
        return head, max(lines - 1, 0), True, None
    except Exception as exc:  # noqa: BLE001 - a damaged table is shown as damaged, never fatal
        return None, None, False, f"{path.name} could not be read ({cut(f'{type(exc).__name__}: {exc}', 200)})"


IMAGE_MAGIC = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF87a", "image/gif"), (b"GIF89a", "image/gif"))


def image_mime(head: bytes) -> str | None:
    for magic, mime in IMAGE_MAGIC:
        if head.startswith(magic):
            return mime
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def scan_traces(path: Path) -> dict[str, Any]:
    """Lines, records, damaged lines (their numbers) and records per run type of a traces.jsonl."""
    res: dict[str, Any] = {"bytes": 0, "lines": 0, "records": 0, "damaged": 0, "damaged_lines": [], "run_types": {},
                           "scanned_all": True, "error": None}
    try:
        res["bytes"] = path.stat().st_size
        scanned = 0
        with open(path, "rb") as fh:
            for i, raw in enumerate(fh, 1):
                if not raw.strip():
                    continue
                res["lines"] += 1
                scanned += len(raw)
                if scanned > MAX_TRACE_SCAN_BYTES:
                    res["scanned_all"] = False
                    continue
                try:
                    rec = json.loads(raw)
                    if not isinstance(rec, dict):
                        raise ValueError("not an object")
                except (ValueError, RecursionError):
                    res["damaged"] += 1
                    if len(res["damaged_lines"]) < 10:
                        res["damaged_lines"].append(i)
                    continue
                res["records"] += 1
                kind = rec.get("run_type")
                kind = kind if isinstance(kind, str) else "?"
                kind = cut(kind, 40)
                if kind in res["run_types"] or len(res["run_types"]) < 20:
                    res["run_types"][kind] = res["run_types"].get(kind, 0) + 1
    except OSError as exc:
        res["error"] = f"cannot read {path.name}: {exc.strerror or exc}"
    return res


# --- what a directory is ----------------------------------------------------------------------
def is_run_dir(p: Path) -> bool:
    return p.is_dir() and ((p / "config.json").is_file() or (p / "summary.json").is_file())


def child_runs(d: Path) -> list[Path]:
    """The run directories of a sweep: DIR/{cells,runs,games}/* holding config.json or summary.json."""
    found = []
    for folder in RUN_FOLDERS:
        sub = d / folder
        if not sub.is_dir():
            continue
        try:
            entries = sorted(sub.iterdir())
        except OSError:
            continue
        found += [c for c in entries if not c.is_symlink() and is_run_dir(c)]
    return found


def detect(d: Path) -> tuple[str, list[Path]]:
    """("sweep", its runs) or ("run", []); a one-line ReportError for anything else."""
    if not d.exists():
        raise ReportError(f"{d} does not exist; give a run directory ('cooplab run ... --out DIR') or a sweep directory")
    if not d.is_dir():
        raise ReportError(f"{d} is not a directory; give a run directory or a sweep directory")
    runs = child_runs(d)
    if runs:
        return "sweep", runs
    if is_run_dir(d):
        return "run", []
    markers = [m for m in ("sweep.json", "profile.json", "scores.csv", "table.csv", "efficiency.csv") if (d / m).is_file()]
    if markers:
        return "sweep", []
    raise ReportError(f"{d} is neither a run directory (no config.json or summary.json) nor a sweep directory "
                      f"(no run directories under {', '.join(f'{f}/' for f in RUN_FOLDERS)}); nothing to report")


def sweep_kind(d: Path) -> str:
    if (d / "profile.json").is_file() or (d / "profile-config.json").is_file():
        return "game profile"
    if (d / "sweep.json").is_file():
        return "sweep"
    if (d / "scores.csv").is_file() or (d / "runs").is_dir():
        return "science sweep"
    if (d / "analysis").is_dir():
        return "CPR sweep"
    return "sweep"


# --- the page being built ---------------------------------------------------------------------
@dataclass
class Page:
    out_dir: Path
    out_file: Path | None = None
    table_rows_left: int = PAGE_TABLE_ROWS
    image_bytes_left: int = PAGE_IMAGE_BYTES
    figures: int = 0
    figures_linked: int = 0
    tables: int = 0
    tables_capped: int = 0
    problems: list[str] = field(default_factory=list)
    ids: set[str] = field(default_factory=set)

    def new_id(self, text: str) -> str:
        base = slug(text)
        name, i = base, 2
        while name in self.ids:
            name, i = f"{base}-{i}", i + 1
        self.ids.add(name)
        return name

    def href(self, target: Path) -> str:
        """A relative link from the page to ``target`` (URL-quoted)."""
        try:
            rel = os.path.relpath(Path(target).resolve(), self.out_dir.resolve())
        except ValueError:
            return Path(target).resolve().as_uri()
        return quote(os.fsencode(rel.replace(os.sep, "/")))  # a name that is not UTF-8: its own bytes, %-encoded

    def problem(self, where: str, text: str) -> str:
        self.problems.append(f"{where}: {text}")
        return f'<p class="problem">\u26a0 {esc(text)}</p>'


# --- rendering blocks -------------------------------------------------------------------------
def kv_table(obj: Any, depth: int = 0, max_keys: int = 200) -> str:
    """A JSON value as nested key/value tables (deep or long values as compact JSON)."""
    if isinstance(obj, dict):
        if not obj:
            return '<span class="muted">{}</span>'
        if depth >= 4:
            return f"<code>{esc(fmt(obj))}</code>"
        rows = []
        for i, (k, v) in enumerate(obj.items()):
            if i >= max_keys:
                rows.append(f'<tr><td colspan="2" class="muted">\u2026 {len(obj) - max_keys} more keys</td></tr>')
                break
            rows.append(f'<tr><th>{esc(cut(str(k), 120))}</th><td>{kv_table(v, depth + 1)}</td></tr>')
        return f'<table class="kv">{"".join(rows)}</table>'
    if isinstance(obj, list):
        if obj and all(isinstance(x, dict) for x in obj) and depth < 3 and len(obj) <= 12:
            return "".join(kv_table(x, depth + 1) for x in obj)
        return f"<code>{esc(fmt(obj))}</code>"
    cls = ' class="num"' if isinstance(obj, (int, float)) and not isinstance(obj, bool) else ""
    return f"<span{cls}>{esc(fmt(obj))}</span>"


def cards(items: Iterable[tuple[str, Any]]) -> str:
    parts = []
    for label, value in items:
        body = value if isinstance(value, Html) else esc(fmt(value, 120))
        parts.append(f'<div class="card"><div class="label">{esc(label)}</div><div class="value">{body}</div></div>')
    return f'<div class="cards">{"".join(parts)}</div>' if parts else ""


class Html(str):
    """Text that is already HTML (not escaped again)."""


def status_badge(status: Any) -> Html:
    s = fmt(status, 60)
    cls = {"completed": "ok", "budget_exhausted": "warn", "stopped": "warn", "failed": "bad"}.get(s, "other")
    return Html(f'<span class="badge {cls}">{esc(s)}</span>')


def df_html(df: Any) -> str:
    cols = list(df.columns)[:MAX_COLUMNS]
    head = "".join(f"<th>{esc(cut(str(c), 60))}</th>" for c in cols)
    body = []
    for row in df[cols].itertuples(index=False, name=None):
        cells = []
        for v in row:
            n = isinstance(v, (int, float)) and not isinstance(v, bool) or type(v).__name__.startswith(("int", "float"))
            cells.append(f'<td{" class=num" if n else ""}>{esc(fmt(v, MAX_CELL_CHARS))}</td>')
        body.append(f"<tr>{''.join(cells)}</tr>")
    return f'<div class="scroll"><table class="data"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


def table_block(page: Page, path: Path, label: str, where: str) -> str:
    """One table file: a heading with its counts, then all its rows (small) or its first rows."""
    page.tables += 1
    want = min(FULL_ROWS, page.table_rows_left)
    df, total, approx, problem = table_preview(path, want)
    link = f'<a href="{esc(page.href(path))}">{esc(label)}</a>'
    if problem:
        return f'<div class="table"><h4>{link}</h4>{page.problem(where, problem)}</div>'
    ncols = len(df.columns)
    if total is not None and total > FULL_ROWS:
        df = df.head(min(PREVIEW_ROWS, want))
    shown = len(df)
    page.table_rows_left -= shown
    count = f"{'about ' if approx else ''}{total:,} rows \u00d7 {ncols} columns" if total is not None else f"{ncols} columns"
    notes = []
    if total is not None and shown < total:
        page.tables_capped += 1
        why = "" if shown or total == 0 else " (this page's row budget is spent)"
        notes.append(f"showing the first {shown:,} of {total:,} rows{why}; the full table is in the linked file")
    if ncols > MAX_COLUMNS:
        notes.append(f"showing {MAX_COLUMNS} of {ncols} columns")
    note = f'<p class="note">{esc("; ".join(notes))}</p>' if notes else ""
    grid = df_html(df) if shown else ""
    return f'<div class="table"><h4>{link} <span class="muted">{esc(count)}</span></h4>{note}{grid}</div>'


def figure_block(page: Page, path: Path, label: str, where: str) -> str:
    link = f'<a href="{esc(page.href(path))}">{esc(label)}</a>'
    if path.is_symlink():
        return page.problem(where, f"{label} is a symbolic link; not embedded")
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            head = fh.read(16)
    except OSError as exc:
        return page.problem(where, f"cannot read {label}: {exc.strerror or exc}")
    mime = image_mime(head)
    if mime is None:
        return page.problem(where, f"{label} is not a PNG, JPEG, GIF or WebP image (damaged?); not embedded")
    if size > MAX_IMAGE_BYTES or size > page.image_bytes_left:
        page.figures_linked += 1
        why = f"{human_bytes(size)}, over the {human_bytes(MAX_IMAGE_BYTES)} limit per image" if size > MAX_IMAGE_BYTES \
            else "this page's image budget is spent"
        return f'<figure class="linked"><figcaption>{link} <span class="muted">(not embedded: {esc(why)})</span></figcaption></figure>'
    try:
        data = path.read_bytes()
    except OSError as exc:
        return page.problem(where, f"cannot read {label}: {exc.strerror or exc}")
    page.image_bytes_left -= len(data)
    page.figures += 1
    uri = f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
    return f'<figure><img src="{uri}" alt="{esc(label)}" loading="eager"><figcaption>{link}</figcaption></figure>'


def inline_md(text: str) -> str:
    t = html.escape(text, quote=True)
    t = re.sub(r"`([^`]+)`", r"<code>\1</code>", t)
    return re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", t)


def markdown(text: str) -> str:
    """A small, safe subset of Markdown (headings, lists, pipe tables, paragraphs, `code`,
    **bold**); everything is escaped first."""
    out: list[str] = []
    para: list[str] = []
    items: list[str] = []
    rows: list[list[str]] = []

    def flush() -> None:
        if para:
            out.append(f"<p>{inline_md(' '.join(para))}</p>")
            para.clear()
        if items:
            out.append("<ul>" + "".join(f"<li>{inline_md(x)}</li>" for x in items) + "</ul>")
            items.clear()
        if rows:
            body = [r for r in rows if not all(re.fullmatch(r":?-{2,}:?", c.strip()) for c in r if c.strip())]
            if body:
                head, rest = body[0], body[1:]
                out.append('<div class="scroll"><table class="data"><thead><tr>' + "".join(f"<th>{inline_md(c)}</th>" for c in head)
                           + "</tr></thead><tbody>" + "".join("<tr>" + "".join(f"<td>{inline_md(c)}</td>" for c in r) + "</tr>"
                                                             for r in rest) + "</tbody></table></div>")
            rows.clear()

    for line in text.splitlines():
        s = line.strip()
        m = re.match(r"(#{1,6})\s+(.*)", s)
        if not s:
            flush()
        elif m:
            flush()
            level = min(len(m.group(1)) + 3, 6)
            out.append(f"<h{level}>{inline_md(m.group(2))}</h{level}>")
        elif s.startswith("|"):
            if para or items:
                saved = list(rows)
                rows.clear()
                flush()
                rows.extend(saved)
            rows.append([c.strip() for c in s.strip("|").split("|")])
        elif re.match(r"[-*]\s+", s):
            if para or rows:
                saved = list(items)
                items.clear()
                flush()
                items.extend(saved)
            items.append(re.sub(r"^[-*]\s+", "", s))
        else:
            if items or rows:
                flush()
            para.append(s)
    flush()
    return "".join(out)


def markdown_block(page: Page, path: Path, label: str, where: str) -> str:
    try:
        size = path.stat().st_size
    except OSError as exc:
        return page.problem(where, f"cannot read {label}: {exc.strerror or exc}")
    text = read_text_head(path, MAX_MARKDOWN_CHARS)
    note = f'<p class="note">showing the first {MAX_MARKDOWN_CHARS:,} characters of {human_bytes(size)}</p>' if size > MAX_MARKDOWN_CHARS else ""
    return f'<div class="md"><h4><a href="{esc(page.href(path))}">{esc(label)}</a></h4>{note}{markdown(text)}</div>'


def json_block(page: Page, path: Path, label: str, where: str, *, open_: bool = True, skip: tuple[str, ...] = ()) -> str:
    obj, problem = read_json(path)
    link = f'<a href="{esc(page.href(path))}">{esc(label)}</a>'
    if problem:
        raw = read_text_head(path, 2000)
        return (f'<div class="json"><h4>{link}</h4>{page.problem(where, problem)}'
                f'<details><summary>the file\'s first {len(raw):,} characters</summary><pre>{esc(raw)}</pre></details></div>')
    shown = {k: v for k, v in obj.items() if k not in skip} if isinstance(obj, dict) else obj
    note = f'<p class="note">{esc(", ".join(skip))} shown below, one row per run</p>' if skip and isinstance(obj, dict) else ""
    return (f'<details class="json"{" open" if open_ else ""}><summary>{link}</summary>{note}{kv_table(shown)}</details>')


# --- one run ----------------------------------------------------------------------------------
def headline(summary: dict[str, Any]) -> list[tuple[str, Any]]:
    """A run's key numbers (by task; any task's top-level numbers otherwise)."""
    task = summary.get("task")
    out: list[tuple[str, Any]] = []

    def mean_sem(key: str, label: str) -> None:
        v = summary.get(key)
        if isinstance(v, dict) and "mean" in v:
            sem = num(v.get("sem"))
            out.append((label, fmt(v.get("mean")) + (f" \u00b1 {fmt(sem)}" if sem is not None else "")))

    if task == "cpr":
        mean_sem("survival_time", "survival time")
        mean_sem("efficiency", "efficiency")
        out.append(("rounds", summary.get("rounds_completed")))
        if isinstance(summary.get("survival_time"), dict):
            out.append(("societies", summary["survival_time"].get("n")))
    elif task == "game":
        out.append(("game", summary.get("game")))
        metric = summary.get("metric") if isinstance(summary.get("metric"), dict) else {}
        out.append(("metric", metric.get("label") or metric.get("name")))
        out.append(("mean", metric.get("mean")))
        out.append(("Pareto proximity", dig(summary, "pareto_proximity.mean")))
        out.append(("rounds", summary.get("rounds_completed")))
    elif task == "science":
        out.append(("science task", summary.get("science_task")))
        scores = summary.get("scores") if isinstance(summary.get("scores"), dict) else {}
        out += [(str(k), v) for k, v in list(scores.items())[:4]]
    elif task == "diners":
        out.append(("iterations", summary.get("iterations_completed")))
        shares = summary.get("final_shares")
        if isinstance(shares, dict):
            out.append(("final shares", ", ".join(f"{cut(str(k), 10)} {fmt(v)}" for k, v in list(shares.items())[:8])))
    else:
        skip = {"seed", "wall_seconds", "replicates", "n_agents"}
        out += [(k, v) for k, v in summary.items() if k not in skip and isinstance(v, (int, float)) and not isinstance(v, bool)][:4]
    return [(k, v) for k, v in out if v is not None]


def costs_of(summary: Any, run_dir: Path | None) -> dict[str, Any] | None:
    """calls, cached_calls, input/output tokens, cost (USD), budget, usage errors and response-cache
    hits of a run, from its summary's ledger (else its ledger table); None for a run without LLM calls."""
    led = summary.get("ledger") if isinstance(summary, dict) else None
    res: dict[str, Any] = {}
    if isinstance(led, dict):
        res = {"calls": led.get("calls"), "cached calls": led.get("cached_calls"), "input tokens": led.get("input_tokens"),
               "output tokens": led.get("output_tokens"),
               "cost (USD)": led.get("cost_usd") if num(led.get("cost_usd")) is not None else led.get("cost_usd_float"),
               "budget (USD)": led.get("budget_usd"), "usage errors": led.get("usage_errors")}
        res["source"] = "summary.json"
    elif run_dir is not None and any((run_dir / f"ledger.{e}").is_file() for e in ("parquet", "csv")):
        try:
            from cooplab.graphs import rundir

            lg = rundir.read_table(run_dir, "ledger")
            total = exact_sum(lg["cost"]) if "cost" in lg else None
            res = {"calls": len(lg), "cached calls": int(lg["cached"].sum()) if "cached" in lg else None,
                   "input tokens": int(lg["input_tokens"].sum()) if "input_tokens" in lg else None,
                   "output tokens": int(lg["output_tokens"].sum()) if "output_tokens" in lg else None,
                   "cost (USD)": str(total) if total is not None else None, "source": "ledger table"}
        except Exception as exc:  # noqa: BLE001
            return {"problem": f"the ledger table could not be read ({cut(f'{type(exc).__name__}: {exc}', 200)})"}
    else:
        return None
    llm = summary.get("llm") if isinstance(summary, dict) else None
    if isinstance(llm, dict):
        res["response cache hits"] = llm.get("cache_hits")
        res["response cache misses"] = llm.get("cache_misses")
    judge = summary.get("judge") if isinstance(summary, dict) else None
    if isinstance(judge, dict) and num(judge.get("cost_usd")) is not None:  # a science run's judge: its own ledger, beside the team's
        res["judge cost (USD)"] = f"${num(judge['cost_usd']):.6g}"
        res["judge budget (USD)"] = judge.get("budget_usd")
    return {k: v for k, v in res.items() if v is not None}


def cost_cards(c: dict[str, Any] | None) -> str:
    if c is None:
        return '<p class="muted">No LLM calls recorded (rule-based agents, or no ledger).</p>'
    if "problem" in c:
        return f'<p class="problem">\u26a0 {esc(c["problem"])}</p>'
    items = [(k, v if k != "cost (USD)" or num(v) is None else f"${num(v):.6g}") for k, v in c.items() if k != "source"]
    return cards(items) + f'<p class="note">from {esc(c.get("source", ""))}</p>'


def list_files(d: Path, exts: set[str], folders: Iterable[str] = ("",)) -> list[Path]:
    found = []
    for folder in folders:
        sub = d / folder if folder else d
        try:
            found += sorted(p for p in sub.iterdir() if p.suffix.lower() in exts and p.is_file())
        except OSError:
            continue
    return found


def run_section(page: Page, d: Path, *, level: int, sid: str, title: str, in_sweep: bool) -> tuple[str, dict[str, Any]]:
    """The HTML of one run directory's section, and its row for a sweep's runs table."""
    where = title
    h = f"h{level}"
    subs: list[tuple[str, str]] = []

    def sub(text: str) -> str:
        """A sub-heading with an id (listed in the row's "sections")."""
        hid = page.new_id(f"{sid}-{text}")
        subs.append((hid, text))
        return f'<h{level + 1} id="{esc(hid)}">{esc(text)}</h{level + 1}>'
    config, config_problem = read_json(d / "config.json") if (d / "config.json").is_file() else (None, "no config.json")
    summary, summary_problem = read_json(d / "summary.json") if (d / "summary.json").is_file() else (None, None)
    if config is not None and not isinstance(config, dict):
        config, config_problem = None, "config.json is damaged (not a JSON object)"
    config = rundir.upgrade_config(config) if config is not None else None  # runs of older versions read alike
    if summary is not None and not isinstance(summary, dict):
        summary, summary_problem = None, "summary.json is damaged (not a JSON object)"
    info = summary or {}
    if summary is not None:
        status = info.get("status", "unknown")
    elif summary_problem:
        status = "unknown"
    else:
        status = "unfinished"
    task = info.get("task") if summary is not None else (config or {}).get("task")
    agents = info.get("agents") if summary is not None else (config or {}).get("agents")
    cost = costs_of(summary, d)
    row = {"id": sid, "title": title, "status": fmt(status, 60), "task": task, "agents": agents, "headline": headline(info),
           "cost": cost, "wall_seconds": info.get("wall_seconds"), "traces": (d / TRACES_FILE).is_file(), "dir": d, "sections": subs}

    parts = [f'<section class="run" id="{esc(sid)}"><{h}>{esc(title)} {status_badge(status)}</{h}>']
    parts.append(f'<p class="path">{esc(str(d))}</p>')
    if summary_problem:
        parts.append(page.problem(where, summary_problem))
    elif summary is None:
        parts.append('<p class="note">No summary.json: the run has not finished (or was interrupted); '
                     f"<code>cooplab resume {esc(shlex.quote(str(d)))}</code> continues it.</p>")
    if isinstance(info.get("message"), str):
        parts.append(f'<p class="message">{esc(info["message"])}</p>')
    if info.get("figure_error"):
        parts.append(page.problem(where, f"the run's figure failed: {fmt(info['figure_error'])}"))
    basics = [("status", status_badge(status)), ("task", task), ("agents", agents)] + headline(info)
    basics += [("seed", info.get("seed", (config or {}).get("seed"))), ("wall time (s)", info.get("wall_seconds"))]
    created = ((config or {}).get("record") or {}).get("created") if isinstance((config or {}).get("record"), dict) else None
    if created is not None:
        basics.append(("started", created))
    parts.append(cards((k, v) for k, v in basics if v is not None))

    if task == "science":  # the team's scores, facts and paper: the science run's one page is this one
        from cooplab.evals.report_science import science_sections

        parts.append(science_sections(page, d, sub, where))

    parts.append(sub("Costs") + cost_cards(cost))

    figs = list_files(d, IMAGE_TYPES, ("figures", ""))
    if figs:
        parts.append(sub("Figures") + '<div class="figures">'
                     + "".join(figure_block(page, p, p.relative_to(d).as_posix(), where) for p in figs) + "</div>")

    tables = list_files(d, TABLE_TYPES)
    if tables:
        parts.append(sub("Tables") + "".join(table_block(page, p, p.name, where) for p in tables))

    if summary is not None:
        parts.append(sub("Summary") + f'<details{"" if in_sweep else " open"}><summary>summary.json</summary>{kv_table(summary)}</details>')

    parts.append(sub("Configuration"))
    if config is not None:
        record = config.get("record") if isinstance(config.get("record"), dict) else {}
        env = record.get("environment")
        shown = {**config, "record": {k: v for k, v in record.items() if k != "environment"}} if record else config
        parts.append(f'<details{"" if in_sweep else " open"}><summary>config.json</summary>{kv_table(shown)}</details>')
        if env is not None:
            parts.append(f"<details><summary>environment (versions, git commit, machine)</summary>{kv_table(env)}</details>")
    else:
        parts.append(page.problem(where, config_problem or "no config.json"))
        raw = read_text_head(d / "config.json", 2000)
        if raw:
            parts.append(f"<details><summary>the file's first {len(raw):,} characters</summary><pre>{esc(raw)}</pre></details>")

    parts.append(traces_block(page, d, sub("Traces"), where))

    err = d / "error.log"
    if err.is_file():
        tail = read_text_head(err, 200_000).splitlines()[-40:]
        parts.append(sub("error.log") + f"<p class=\"note\">its last {len(tail)} lines "
                     f'(<a href="{esc(page.href(err))}">the whole file</a>)</p><pre>{esc(chr(10).join(tail))}</pre>')

    parts.append(sub("Files") + files_block(page, d))
    parts.append("</section>")
    return "".join(parts), row


def traces_block(page: Page, d: Path, heading: str, where: str) -> str:
    path = d / TRACES_FILE
    if not path.is_file():
        return heading + '<p class="muted">No traces.jsonl (only LLM runs are traced).</p>'
    t = scan_traces(path)
    cmd = f"cooplab traces view {shlex.quote(str(d))}"
    parts = [heading,
             f'<p><a href="{esc(page.href(path))}">traces.jsonl</a> ({esc(human_bytes(t["bytes"]))}, {t["records"]:,} runs'
             f' in LangSmith run format). Open the trace viewer with <code class="cmd">{esc(cmd)}</code>.</p>']
    if t["run_types"]:
        parts.append(cards((f"{k} runs", v) for k, v in sorted(t["run_types"].items())))
    if t["error"]:
        parts.append(page.problem(where, t["error"]))
    if t["damaged"]:
        lines = ", ".join(str(i) for i in t["damaged_lines"]) + (", \u2026" if t["damaged"] > len(t["damaged_lines"]) else "")
        parts.append(page.problem(where, f"traces.jsonl has {t['damaged']} damaged line(s) (not JSON objects): line {lines}"))
    if not t["scanned_all"]:
        parts.append(f'<p class="note">only the first {human_bytes(MAX_TRACE_SCAN_BYTES)} were checked; '
                     f'{t["lines"]:,} lines in all</p>')
    return "".join(parts)


def files_block(page: Page, d: Path) -> str:
    try:
        entries = sorted(d.iterdir(), key=lambda p: (not p.is_dir(), p.name))
    except OSError:
        return ""
    items = []
    for p in entries[:MAX_FILES_LISTED]:
        if p.name.startswith(".") or (page.out_file is not None and p.resolve() == page.out_file.resolve()):
            continue
        try:
            if p.is_dir():
                n = sum(1 for _ in p.iterdir())
                size = f"{n} entries"
            else:
                size = human_bytes(p.stat().st_size)
        except OSError:
            size = "unreadable"
        name = p.name + ("/" if p.is_dir() else "")
        items.append(f'<li><a href="{esc(page.href(p))}">{esc(name)}</a> <span class="muted">{esc(size)}</span></li>')
    more = f'<li class="muted">\u2026 {len(entries) - MAX_FILES_LISTED} more</li>' if len(entries) > MAX_FILES_LISTED else ""
    extra = ""
    if (d / "report.html").is_file() and MARKER not in read_text_head(d / "report.html", 4000):
        extra = f'<p>This run\'s own page: <a href="{esc(page.href(d / "report.html"))}">report.html</a>.</p>'
    return f'{extra}<details><summary>{len(entries)} entries</summary><ul class="files">{"".join(items)}{more}</ul></details>'


# --- a sweep ----------------------------------------------------------------------------------
COST_KEYS = ("calls", "cached calls", "input tokens", "output tokens", "cost (USD)")


def runs_table(rows: list[dict[str, Any]], page: Page, linked: set[str]) -> str:
    labels: list[str] = []
    for r in rows:
        for k, _ in r["headline"]:
            if k not in labels and len(labels) < 6:
                labels.append(k)
    head = ["run", "status", "task", "agents", *labels, "calls", "tokens in", "tokens out", "cost (USD)", "wall (s)", "traces"]
    body = []
    for r in rows:
        hl = dict(r["headline"])
        c = r["cost"] if isinstance(r["cost"], dict) else {}
        name = esc(r["title"])
        name = f'<a href="#{esc(r["id"])}">{name}</a>' if r["id"] in linked else name
        cells = [name, status_badge(r["status"]), esc(fmt(r["task"], 40)), esc(fmt(r["agents"], 40))]
        cells += [f'<span class="num">{esc(fmt(hl.get(k), 60))}</span>' for k in labels]
        cost = num(c.get("cost (USD)"))
        cells += [esc(fmt(c.get("calls"))), esc(fmt(c.get("input tokens"))), esc(fmt(c.get("output tokens"))),
                  esc("\u2014" if cost is None else f"{cost:.6g}"), esc(fmt(r["wall_seconds"]))]
        cells.append(f'<a href="{esc(page.href(r["dir"] / TRACES_FILE))}">traces.jsonl</a>' if r["traces"] else "\u2014")
        body.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return ('<div class="scroll"><table class="data runs"><thead><tr>' + "".join(f"<th>{esc(x)}</th>" for x in head)
            + f'</tr></thead><tbody>{"".join(body)}</tbody></table></div>')


def totals(rows: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    sums: dict[str, float] = {}
    with_cost = 0
    for r in rows:
        c = r["cost"]
        if not isinstance(c, dict) or "problem" in c:
            continue
        with_cost += 1
        for k in COST_KEYS:
            v = num(c.get(k))
            if v is not None:
                sums[k] = sums.get(k, 0.0) + v
    if not with_cost:
        return []
    out: list[tuple[str, Any]] = [(k, int(v) if k != "cost (USD)" else f"${v:.6g}") for k, v in sums.items()]
    out.append(("runs with LLM calls", f"{with_cost} of {len(rows)}"))
    return out


# --- the page ---------------------------------------------------------------------------------
STYLE = """
:root{--fg:#1d2430;--muted:#677184;--bg:#fff;--panel:#f5f7fa;--line:#dde2ea;--accent:#2f5fb3;--ok:#1d7a46;--warn:#a86200;--bad:#b42318}
*{box-sizing:border-box}
body{margin:0;font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:var(--fg);background:var(--bg)}
header{background:#1f3a68;color:#fff;padding:20px 32px}
header h1{margin:0 0 4px;font-size:24px;font-weight:600}
header .sub{opacity:.85;font-size:13px;word-break:break-all}
nav.toc{position:sticky;top:0;z-index:2;background:var(--panel);border-bottom:1px solid var(--line);padding:8px 32px;font-size:13px}
nav.toc a{margin-right:14px;color:var(--accent);text-decoration:none;white-space:nowrap}
main{max-width:1200px;margin:0 auto;padding:8px 32px 40px}
h2{margin:32px 0 12px;padding-bottom:4px;border-bottom:2px solid var(--line);font-size:20px}
h3{margin:28px 0 10px;font-size:18px}
h4{margin:18px 0 8px;font-size:15px}
h5,h6{margin:12px 0 6px;font-size:14px}
a{color:var(--accent)}
section.run{border:1px solid var(--line);border-radius:8px;padding:4px 18px 14px;margin:18px 0}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:10px 0}
.card{background:var(--panel);border:1px solid var(--line);border-radius:6px;padding:8px 12px;min-width:120px;max-width:360px}
.card .label{font-size:12px;color:var(--muted);text-transform:uppercase;letter-spacing:.03em}
.card .value{font-size:17px;font-weight:600;word-break:break-word}
.badge{display:inline-block;white-space:nowrap;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600;color:#fff;vertical-align:middle}
.badge.ok{background:var(--ok)}.badge.warn{background:var(--warn)}.badge.bad{background:var(--bad)}.badge.other{background:var(--muted)}
.scroll{overflow-x:auto;margin:6px 0 12px}
table.data{border-collapse:collapse;font-size:13px;min-width:40%}
table.data th,table.data td{border-bottom:1px solid var(--line);padding:4px 10px;text-align:left;vertical-align:top;max-width:420px;overflow-wrap:break-word}
table.data thead th{background:var(--panel);position:sticky;top:0}
table.data tbody tr:nth-child(even){background:#fafbfd}
td.num,span.num,.runs td{font-variant-numeric:tabular-nums}
table.kv{border-collapse:collapse;font-size:13px;margin:2px 0}
table.kv th{text-align:left;font-weight:600;color:#34405a;padding:2px 12px 2px 0;vertical-align:top;white-space:nowrap}
table.kv td{padding:2px 0;overflow-wrap:anywhere}
table.kv table.kv{border-left:2px solid var(--line);padding-left:8px}
details{margin:6px 0}
summary{cursor:pointer;color:var(--accent)}
.figures{display:flex;flex-wrap:wrap;gap:16px;align-items:flex-start}
.figures figure{flex:1 1 460px;max-width:860px}
figure{margin:8px 0;max-width:100%}
figure img{max-width:100%;height:auto;border:1px solid var(--line);border-radius:4px;background:#fff}
figcaption{font-size:12px;color:var(--muted)}
.muted{color:var(--muted);font-weight:normal;font-size:13px}
.note{color:var(--muted);font-size:13px;margin:4px 0}
ul.problem{padding-left:28px}
.problem{color:var(--bad);background:#fdf0ef;border-left:3px solid var(--bad);padding:4px 10px;margin:6px 0}
.message{background:#fff6e6;border-left:3px solid var(--warn);padding:4px 10px}
.path{color:var(--muted);font-size:12px;word-break:break-all;margin:0}
pre{background:var(--panel);border:1px solid var(--line);padding:8px;overflow:auto;font-size:12px;max-height:420px;white-space:pre-wrap;word-break:break-word}
code{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:12.5px;background:var(--panel);padding:0 3px;border-radius:3px;word-break:break-word}
ul.files{columns:2;font-size:13px}
footer{color:var(--muted);font-size:12px;text-align:center;padding:20px}
img.broken{outline:3px solid var(--bad)}
"""

# records every image's natural width in the DOM (data-natural-width, and body data-images
# "loaded/total"), so that a headless browser's DOM dump shows whether the figures decoded
CHECK_SCRIPT = """window.addEventListener("load",function(){var im=document.images,ok=0;for(var i=0;i<im.length;i++){var w=im[i].naturalWidth;
im[i].setAttribute("data-natural-width",String(w));if(w>0){ok++}else{im[i].classList.add("broken")}}
document.body.setAttribute("data-images",ok+"/"+im.length)});"""


def build(d: Path, out: Path) -> tuple[str, dict[str, Any]]:
    """The page for directory ``d`` (to be written at ``out``) and a description of it."""
    from cooplab._version import __version__

    kind, runs = detect(d)
    page = Page(out_dir=out.parent, out_file=out)
    sections: list[tuple[str, str, str]] = []  # (id, title, html)
    name = d.resolve().name or str(d)
    if kind == "run":
        body, row = run_section(page, d, level=2, sid=page.new_id("run"), title=name, in_sweep=False)
        label = f"{fmt(row['task'], 40)} run" if row["task"] else "run"
        # a single run: its blocks become the page's sections
        sections.append(("run", "Run", body))
        n_runs = 1
    else:
        label = sweep_kind(d)
        n_runs = len(runs)
        rows, bodies = [], []
        linked: set[str] = set()
        for i, r in enumerate(runs):
            rel = r.relative_to(d).as_posix()
            sid = page.new_id(f"run-{rel}")
            if i < MAX_RUN_SECTIONS:
                body, row = run_section(page, r, level=3, sid=sid, title=rel, in_sweep=True)
                bodies.append(body)
                linked.add(sid)
            else:
                _, row = run_section(Page(out_dir=page.out_dir, table_rows_left=0, image_bytes_left=0), r, level=3, sid=sid,
                                     title=rel, in_sweep=True)
            rows.append(row)
        statuses: dict[str, int] = {}
        for r in rows:
            statuses[r["status"]] = statuses.get(r["status"], 0) + 1
        overview = [cards([("kind", label), ("runs", n_runs)] + [(s, v) for s, v in sorted(statuses.items())])]
        tot = totals(rows)
        overview.append("<h3>Costs (all runs)</h3>" + (cards(tot) if tot else '<p class="muted">No LLM calls recorded.</p>'))
        sections.append(("overview", "Overview", "".join(overview)))
        runs_html = runs_table(rows, page, linked) if rows else '<p class="muted">No run directories yet.</p>'
        if n_runs > MAX_RUN_SECTIONS:
            runs_html += f'<p class="note">the first {MAX_RUN_SECTIONS} runs have a section below; the other {n_runs - MAX_RUN_SECTIONS} only their row</p>'
        sections.append(("runs", "Runs", runs_html))

        conf = [json_block(page, p, p.name, "sweep", open_=p.name != "analysis.json",
                           skip=("games",) if p.name == "profile.json" else ())
                for p in list_files(d, {".json"}, ("", "analysis")) if p.name != "report.json"]
        figs = list_files(d, IMAGE_TYPES, ("figures", "", "analysis", "analysis/figures"))
        if figs:
            sections.append(("figures", "Figures", '<div class="figures">' + "".join(
                figure_block(page, p, p.relative_to(d).as_posix(), "sweep") for p in figs) + "</div>"))
        mds = list_files(d, {".md"}, ("", "analysis"))
        if mds:
            sections.append(("statistics", "Statistics and notes",
                             "".join(markdown_block(page, p, p.relative_to(d).as_posix(), "sweep") for p in mds)))
        tabs = list_files(d, TABLE_TYPES, ("", "analysis"))
        if tabs:
            sections.append(("tables", "Tables", "".join(table_block(page, p, p.relative_to(d).as_posix(), "sweep") for p in tabs)))
        if conf:
            sections.append(("configuration", "Configuration", "".join(conf)))
        if bodies:
            sections.append(("run-details", "Each run", "".join(bodies)))

    if page.problems:
        items = "".join(f"<li>{esc(p)}</li>" for p in page.problems[:200])
        sections.insert(0, ("problems", f"Problems ({len(page.problems)})",
                            f'<p>Some files could not be shown in full:</p><ul class="problem">{items}</ul>'))
    caps = []
    if page.tables_capped:
        caps.append(f"{page.tables_capped} of {page.tables} tables are shown by their first rows only (at most {FULL_ROWS} rows "
                    f"are shown in full; longer tables show {PREVIEW_ROWS}); the linked files hold every row")
    if page.figures_linked:
        caps.append(f"{page.figures_linked} figures are linked, not embedded (size limits)")

    nonce = secrets.token_urlsafe(18)
    created = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    listed = [(sid, title) for sid, title, _ in sections if sid != "run"] + (row["sections"] if kind == "run" else [])
    toc = "".join(f'<a href="#{esc(sid)}">{esc(title)}</a>' for sid, title in listed)
    main_html = "".join(f'<section id="{esc(sid)}"><h2>{esc(title)}</h2>{body}</section>' if sid != "run" else body
                        for sid, title, body in sections)
    cap_html = "".join(f'<p class="note">{esc(c)}</p>' for c in caps)
    doc = f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP.format(nonce=nonce)}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<meta name="generator" content="{GENERATOR} {esc(__version__)}">
<title>cooplab report: {esc(name)}</title>
<style>{STYLE}</style>
</head>
<body data-images="pending" data-kind="{esc(kind)}">
<header><h1>cooplab report: {esc(name)}</h1><div class="sub">{esc(label)} \u00b7 {esc(str(d.resolve()))}</div></header>
<nav class="toc">{toc}</nav>
<main>
{cap_html}
{main_html}
</main>
<footer>Written by <code>cooplab report</code> (cooplab {esc(__version__)}) at {esc(created)}. Self-contained: no network requests.</footer>
<script nonce="{nonce}">{CHECK_SCRIPT}</script>
</body>
</html>
"""
    info = {"kind": kind, "label": label, "runs": n_runs, "sections": [title for _, title in listed],
            "figures": page.figures, "figures_linked": page.figures_linked, "tables": page.tables,
            "tables_capped": page.tables_capped, "problems": page.problems}
    return doc, info


#: how the science task's own page began before it became this page (older runs): rewritten too
LEGACY_SCIENCE_TITLE = "<title>cooplab science run"


def default_out(d: Path) -> Path:
    """DIR/report.html (a science run writes this same page itself; an earlier cooplab page, or an
    older cooplab science page, is rewritten), or DIR/cooplab-report.html when DIR/report.html is
    another program's page."""
    p = d / "report.html"
    if p.exists():
        head = read_text_head(p, 4000)
        if MARKER not in head and LEGACY_SCIENCE_TITLE not in head:
            return d / "cooplab-report.html"
    return p


def write_report(d: Path, out: Path | None = None) -> dict[str, Any]:
    """Write the page for ``d``; {"path", "kind", "runs", "sections", "figures", "bytes", ...}."""
    d = Path(d)
    detect(d)  # a one-line error before anything is written
    out = Path(out) if out is not None else default_out(d)
    if out.suffix.lower() not in (".html", ".htm"):
        raise ReportError(f"--out {out} must be an .html file (e.g. --out {out.with_suffix('.html') if out.suffix else out / 'report.html'})")
    if out.is_dir():
        raise ReportError(f"--out {out} is a directory; give a file name such as {out / 'report.html'}")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportError(f"cannot create {out.parent} for --out: {exc.strerror or exc}") from None
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:  # claim the temporary file first: a read-only folder is refused before the page is built
        tmp.touch()
    except OSError as exc:
        raise _write_problem(out, exc) from None
    try:
        doc, info = build(d, out)
        data = doc.encode("utf-8", errors="replace")
        try:
            rundir.write_atomic(out, data, tmp)
        except OSError as exc:
            raise _write_problem(out, exc) from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)  # gone after a success; left by a failure of build()
    return {"path": str(out), **info, "bytes": len(data)}
