"""``cooplab report DIR``: the explorer's pages of a run, a sweep, a profile or a folder of results,
written to one self-contained HTML file.

The file holds the pages ``cooplab view`` serves, made by the same code and templates
(:mod:`cooplab.evals.explorer`), one after the other:

- a **run** directory: the run's page, then its model calls (the traces page);
- a **sweep** or a **profile** (run directories under ``cells/``, ``runs/`` or ``games/``): its page
  (conditions or games, costs, the folder's figures, notes, tables and settings), then the page of
  each of its runs (the first :data:`MAX_RUN_PAGES`);
- a folder of **results** (what an analysis wrote: ``claims.md``, ``statistics.md``,
  ``efficiency.csv``, figures): its figures, notes, tables and settings.

A link between these pages is an anchor of the file; a link to a page the file does not hold (one
round, one agent, another society) is shown as text, and a drop-down as the option shown. The CSS
and the explorer's two scripts (sorting and filtering tables, drawing the plots) are inlined and
allowed by their SHA-256 in the file's Content-Security-Policy, which forbids every other script,
style and load; images are ``data:`` URIs. So the file can be mailed and opened offline, and text of
a run (a model's answer, a file name) reaches it only through Jinja's autoescape.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as _dt
import errno
import hashlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from markupsafe import Markup

from cooplab.evals.explorer import groups, pages, render
from cooplab.evals.explorer.runs import RUN_FOLDERS, is_run_dir, read_text_head, shown
from cooplab.evals.values import slug
from cooplab.graphs import rundir
from cooplab.graphs.rundir import TRACES_FILE

GENERATOR = "cooplab report"
#: how a file written by ``cooplab report`` begins its generator tag (an earlier file is rewritten)
MARKER = f'<meta name="generator" content="{GENERATOR}'
#: how the science task's own page began before it became this file (older runs): rewritten too
LEGACY_SCIENCE_TITLE = "<title>cooplab science run"
#: the pages of a sweep's or profile's runs in one file at most (each run's key numbers are on the group's page)
MAX_RUN_PAGES = 60
#: the file's policy: nothing loads from anywhere; only the inlined style and scripts (by hash) apply
CSP = "default-src 'none'; img-src data:; style-src {style}; script-src {scripts}; base-uri 'none'; form-action 'none'"

#: task name -> its registered Task (or None); the command line passes the registry's
TaskLookup = Callable[[str], Any]


class ReportError(ValueError):
    """A user-facing problem (one line): the directory is missing, empty or of no known kind, or
    ``--out`` is no place for the file (not .html, a directory, in a read-only folder); exit 2."""


class ReportWriteError(ReportError):
    """The file could not be written where it may go (a full disk, an I/O error): one line naming
    the file and the system's reason; nothing was written (exit 1)."""


#: errors of a place that cannot take the file at all (the user's --out), as opposed to a failing disk
_NOT_WRITABLE = (errno.EROFS, errno.EACCES, errno.EPERM)


def _write_problem(out: Path, exc: OSError) -> ReportError:
    why = exc.strerror or str(exc)
    if exc.errno in _NOT_WRITABLE:
        return ReportError(f"cannot write --out {out}: {why}; choose a folder you can write to")
    return ReportWriteError(f"cannot write {out}: {why}; nothing was written")


# --- what the folder is ------------------------------------------------------------------------
def detect(d: Path) -> str:
    """ "run", "sweep", "profile" or "results"; a one-line :class:`ReportError` for anything else. A folder
    of many runs is known by its typed manifest (:func:`cooplab.graphs.runfiles.manifest_of`: its
    manifest.json, or the one inferred from a layout written before manifests) with at least one run
    directory among its cells in a folder the explorer groups (:data:`RUN_FOLDERS`): a profile, or a
    sweep (any other kind, as the explorer's group page has it)."""
    if not d.exists():
        raise ReportError(
            f"{d} does not exist; give a run directory ('cooplab run ... --out DIR') or a sweep directory"
        )
    if not d.is_dir():
        raise ReportError(f"{d} is not a directory; give a run directory or a sweep directory")
    from cooplab.graphs import runfiles

    try:
        manifest = runfiles.manifest_of(d)  # a damaged manifest.json is one line naming its field
    except rundir.RunDirError as exc:
        raise ReportError(str(exc)) from None
    if manifest is not None and any(_shown_cell(d, c.dir) for c in manifest.cells):
        return "profile" if manifest.kind == "profile" else "sweep"
    if is_run_dir(d):
        return "run"
    if groups.has_results(d):
        return "results"
    raise ReportError(
        f"{d} is neither a run directory (no config.json, summary.json or traces.jsonl) nor a sweep directory "
        f"(no manifest.json naming run directories, and none under {', '.join(f'{f}/' for f in RUN_FOLDERS)}) nor a "
        f"folder of results ({', '.join(groups.RESULT_FILES)}); nothing to report"
    )


def _shown_cell(d: Path, rel: str | None) -> bool:
    """Whether a manifest's cell is a run directory the explorer shows in the folder's group page."""
    if rel is None or rel.split("/")[0] not in RUN_FOLDERS:
        return False
    c = d / rel
    return is_run_dir(c) and not c.is_symlink()


LABELS = {"run": "run", "sweep": "sweep", "profile": "game profile", "results": "results"}


# --- the pages of the file ---------------------------------------------------------------------
@dataclass
class Planned:
    """One page of the file: which page of the app it is (``page``, ``query``) and its anchor."""

    page: str
    query: dict[str, str]
    anchor: str
    html: Any = None
    title: str = ""
    sections: list[str] = field(default_factory=list)


def _key(page: str, query: Mapping[str, str]) -> tuple[str, tuple[tuple[str, str], ...]]:
    return page, tuple(sorted((str(k), str(v)) for k, v in query.items()))


def _plan(kind: str, site: pages.Site) -> tuple[list[Planned], list[str]]:
    """The pages of the file, in order, and notes on what was left out."""
    notes: list[str] = []
    if kind == "run":
        run = site.get("0")
        plan = [Planned("run", {"id": "0"}, "run")]
        if run is not None and (run.out / TRACES_FILE).is_file():
            plan.append(Planned("traces", {"id": "0"}, "calls"))
        return plan, notes
    plan = [Planned("group", {"id": "0"}, "folder")]
    g = site.group("0")
    cells = sorted(g.cells.items()) if g is not None else []
    for n, (name, rid) in enumerate(cells[:MAX_RUN_PAGES]):
        plan.append(Planned("run", {"id": rid}, f"r{n + 1}-{slug(name)[:40]}"))
    if len(cells) > MAX_RUN_PAGES:
        notes.append(
            f"the first {MAX_RUN_PAGES} of the {len(cells)} runs have their page in this file; 'cooplab view "
            f"{shown(site.roots[0])}' shows every one"
        )
    return plan, notes


def _address(plan: list[Planned]) -> Callable[[str, Mapping[str, str]], str | None]:
    """Links of the file: a page it holds is its anchor; a traces link filtered by round alone, that
    round's part of the model calls; anything else is not reachable (None: shown as text)."""
    anchors = {_key(p.page, p.query): p.anchor for p in plan}

    def href(page: str, query: Mapping[str, str]) -> str | None:
        q = {str(k): str(v) for k, v in query.items()}
        if _key(page, q) in anchors:
            return "#" + anchors[_key(page, q)]
        if page == "traces" and _key("traces", {"id": q.get("id", "")}) in anchors:
            whole = anchors[_key("traces", {"id": q.get("id", "")})]
            rest = {k: v for k, v in q.items() if k != "id"}
            if set(rest) == {"round"}:
                return f"#{whole}-round-{slug(rest['round'])}"
        return None

    return href


def _assets() -> dict[str, str]:
    """The explorer's stylesheet and scripts (package data), to inline."""
    static = render.package_dir("static")
    return {name: (static / name).read_text(encoding="utf-8") for name in ("explorer.css", "explorer.js", "plots.js")}


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def build(d: Path, *, task_for: TaskLookup | None = None) -> tuple[str, dict[str, Any]]:
    """The file for directory ``d`` and a description of it (kind, pages, sections, figures, problems)."""
    from cooplab._version import __version__

    kind = detect(d)
    site = pages.Site(roots=[d], task_for=task_for or (lambda name: None))
    site.scan()
    plan, notes = _plan(kind, site)
    env = render.templates(layout="part.html")
    href = _address(plan)
    budget = render.ImageBudget(render.MAX_FILE_IMAGE_BYTES)
    problems: list[str] = []
    for p in plan:
        with render.addressing(render.Addresses(href=href, forms=False, prefix=f"{p.anchor}-", images=budget)):
            ctx, code = getattr(site, {"run": "run_page", "group": "group_page", "traces": "traces_page"}[p.page])(
                p.query
            )
            name = (
                {"run": "run.html", "group": "group.html", "traces": "traces.html"}[p.page]
                if code == 200
                else "error.html"
            )
            p.html = Markup(env.get_template(name).render(**ctx, anchor=p.anchor))
        p.title = _title(p, ctx)
        p.sections = [s["title"] for s in ctx.get("sections") or []] or [g["title"] for g in ctx.get("rounds") or []]
        problems += [f"{p.title}: {n}" for n in ctx.get("notes") or []]
    assets = _assets()
    css, js, plots = assets["explorer.css"], assets["explorer.js"], assets["plots.js"]
    csp = CSP.format(style=_sha256(css), scripts=f"{_sha256(js)} {_sha256(plots)}")
    name = shown(d.resolve().name or d)
    first = site.get("0") if kind == "run" else None
    label = f"{first.task} run" if first is not None and first.task != "?" else LABELS[kind]
    created = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    doc = env.get_template("file.html").render(
        csp=csp,
        version=__version__,
        title=name,
        kind=kind,
        label=label,
        path=shown(d.resolve()),
        created=created,
        css=Markup(css),
        explorer_js=Markup(js),
        plots_js=Markup(plots),
        notes=notes,
        pages=[{"anchor": p.anchor, "title": p.title, "html": p.html} for p in plan],
    )
    runs = sum(1 for p in plan if p.page == "run")
    g = site.group("0") if kind != "run" else None
    info = {
        "kind": kind,
        "label": label,
        "runs": len(g.cells) if g is not None else 1,
        "run_pages": runs,
        "pages": [p.title for p in plan],
        "sections": plan[0].sections,
        "figures": doc.count('<img src="data:'),
        "problems": list(dict.fromkeys(problems)),
        "notes": notes,
    }
    return doc, info


def _title(p: Planned, ctx: Mapping[str, Any]) -> str:
    if p.page == "traces":
        return "model calls"
    if p.page == "group":
        return ctx["group"]["name"] if "group" in ctx else "folder"
    return ctx["run"]["name"] if "run" in ctx else str(ctx.get("title", "run"))


# --- writing it ----------------------------------------------------------------------------------
def default_out(d: Path) -> Path:
    """DIR/report.html (a science run writes this same file itself; an earlier cooplab file, or an
    older cooplab science page, is rewritten), or DIR/cooplab-report.html when DIR/report.html is
    another program's page."""
    p = d / "report.html"
    if p.exists():
        head = read_text_head(p, 4000)
        if MARKER not in head and LEGACY_SCIENCE_TITLE not in head:
            return d / "cooplab-report.html"
    return p


def write_report(d: Path, out: Path | None = None, *, task_for: TaskLookup | None = None) -> dict[str, Any]:
    """Write the file for ``d`` (``task_for``: the registered tasks, for their pages); {"path",
    "kind", "label", "runs", "pages", "sections", "figures", "problems", "bytes"}."""
    d = Path(d)
    detect(d)  # a one-line error before anything is written
    out = Path(out) if out is not None else default_out(d)
    if out.suffix.lower() not in (".html", ".htm"):
        raise ReportError(
            f"--out {out} must be an .html file (e.g. --out "
            f"{out.with_suffix('.html') if out.suffix else out / 'report.html'})"
        )
    if out.is_dir():
        raise ReportError(f"--out {out} is a directory; give a file name such as {out / 'report.html'}")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportError(f"cannot create {out.parent} for --out: {exc.strerror or exc}") from None
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:  # claim the temporary file first: a read-only folder is refused before the file is built
        tmp.touch()
    except OSError as exc:
        raise _write_problem(out, exc) from None
    try:
        doc, info = build(d, task_for=task_for)
        data = doc.encode("utf-8", errors="replace")  # a lone surrogate (a name in another encoding) becomes "?"
        try:
            rundir.write_atomic(out, data, tmp)
        except OSError as exc:
            raise _write_problem(out, exc) from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)  # gone after a success; left by a failure of build()
    return {"path": str(out), **info, "bytes": len(data)}
