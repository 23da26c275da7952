"""Sweeps and profiles: the folders that hold many runs, each with a page of its own; and folders
of results (what an analysis wrote: claims.md, statistics.md, efficiency.csv, figures), shown as
their files.

A **sweep** (``cooplab sweep``: run directories under ``cells/``, ``runs/``) is shown by condition:
its cells grouped by their grid values (the cell's name without its ``__sSEED`` part), one metric at
a time (``?metric=``), with one aggregate plot (the mean over each condition's seeds, its 95%
confidence interval and every seed's value) and a table per condition linking to every cell.

A **profile** (``cooplab profile``: ``profile.json``, ``figures/profile.png``, ``cells/*``) is
shown as its settings, one row per game (metric, Pareto proximity and their intervals as
``profile.json`` gives them), one plot of every game's Pareto proximity with its interval, and the
profile's figure.

Every page of a folder also shows the folder's own files: its figures (``figures/``, ``analysis/``),
notes (Markdown: ``statistics.md``, ``claims.md``), tables (``table.csv``, ``scores.csv``,
``analysis/cells.csv``, ...) and settings (``sweep.json``, ``profile-config.json``, ...).

Everything is read as data: ``table.csv`` and ``profile.json`` through the same bounded readers as a
run's files, never a link leading outside the folder.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cooplab.evals.explorer.runs import RUN_FOLDERS, RunDir, read_json, shown
from cooplab.evals.typed import sub
from cooplab.evals.values import cut, fmt, num
from cooplab.graphs import explore as ex

#: a cell's name ends in its seed: "rounds-3__s0", "model-x__players-5__s12"
_SEED = re.compile(r"__s(-?\d{1,12})$")
#: columns of table.csv that are bookkeeping, not results
_NOT_METRICS = {
    "seed",
    "replicates",
    "n_agents",
    "rounds",
    "rounds_completed",
    "agent_steps",
    "wall_seconds",
    "version",
}
#: metrics offered at most
MAX_METRICS = 60
#: conditions drawn at most
MAX_CONDITIONS = 400


@dataclass
class Group:
    """A sweep or a profile found under the folders given: ``id`` is its address (``/group?id=ID``)."""

    id: str
    out: Path
    root: Path
    kind: str  # "sweep" | "profile" | "results"
    cells: dict[str, str]  # cell folder name -> its run's id
    task_for: Any = field(
        default=None, repr=False
    )  # the registered tasks, as for a RunDir (types the cells' summaries)

    @property
    def name(self) -> str:
        rel = self.out.relative_to(self.root).as_posix()
        return shown(self.root.name if rel == "." else rel)


def kind_of(d: Path) -> str:
    """ "profile" or "sweep": what the folder's manifest.json says (its kind), else what the layouts
    before manifests show (profile.json beside games/); a damaged manifest counts as none here (the
    folder's page says what is wrong with it)."""
    from cooplab.graphs import runfiles

    try:
        m = runfiles.manifest_of(d)
    except runfiles.RunDirError:
        m = None
    if m is not None and not m.inferred:
        return "profile" if m.kind == "profile" else "sweep"
    return "profile" if (d / "profile.json").is_file() or (d / "profile-config.json").is_file() else "sweep"


def find(roots: list[Path], runs: list[RunDir]) -> list[Group]:
    """Every sweep (a folder whose cells/, runs/ or games/ hold run directories) and every profile
    (a folder with profile.json) among the runs found, in path order."""
    found: dict[Path, Group] = {}
    resolved = [Path(r).resolve() for r in roots]

    def group_of(d: Path) -> Group | None:
        if d in found:
            return found[d]
        for n, root in enumerate(resolved):
            try:
                rel = d.relative_to(root).as_posix()
            except ValueError:
                continue
            kind = kind_of(d)
            gid = f"{n}/{shown(rel)}" if rel != "." else f"{n}"
            found[d] = Group(id=gid, out=d, root=root, kind=kind, cells={})
            return found[d]
        return None

    for r in runs:
        if r.out.parent.name in RUN_FOLDERS:
            g = group_of(r.out.parent.parent)
            if g is not None:
                g.cells[shown(r.out.name)] = r.id
                g.task_for = g.task_for or r.task_for
    run_dirs = {r.out for r in runs}
    for n, root in enumerate(resolved):
        if root not in found and root not in run_dirs and has_results(root):
            found[root] = Group(id=f"{n}", out=root, root=root, kind="results", cells={})
    return sorted(found.values(), key=lambda g: g.id)


#: files that make a folder a folder of results (what an analysis or a sweep writes beside its runs)
RESULT_FILES = ("sweep.json", "profile.json", "scores.csv", "table.csv", "efficiency.csv", "claims.md", "statistics.md")


def has_results(d: Path) -> bool:
    """Whether ``d`` holds one of :data:`RESULT_FILES` (at its top or in ``analysis/``)."""
    return any((d / f).is_file() or (d / "analysis" / f).is_file() for f in RESULT_FILES)


def as_page(g: Group) -> RunDir:
    """A reader of the group's own files (its notes, links that stay inside it) for the blocks."""
    return RunDir(id=g.id, out=g.out, root=g.root, page="group", task_for=g.task_for)


# --- statistics ----------------------------------------------------------------------------------
#: two-sided 95% quantiles of Student's t for 1..30 degrees of freedom
_T95 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
)


def t95(df: int) -> float:
    """The two-sided 95% quantile of Student's t with ``df`` degrees of freedom."""
    if df <= 0:
        return math.nan
    if df <= len(_T95):
        return _T95[df - 1]
    return 1.95996 + 2.4 / df  # within 0.002 of the exact value above 30


def mean_ci(values: Sequence[float | None]) -> tuple[float | None, float | None, float | None]:
    """(mean, lower, upper) of a 95% t interval of the mean; no interval for fewer than two values."""
    xs = [v for v in values if v is not None and math.isfinite(v)]
    if not xs:
        return None, None, None
    m = sum(xs) / len(xs)
    if len(xs) < 2:
        return m, None, None
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))
    half = t95(len(xs) - 1) * sd / math.sqrt(len(xs))
    return m, m - half, m + half


# --- a sweep -------------------------------------------------------------------------------------
def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(_flatten(v, key + "."))
        elif not isinstance(v, (list, tuple)):
            out[key] = v
    return out


def cell_rows(g: Group, page: RunDir) -> list[dict[str, Any]]:
    """One row per cell: ``cell`` and the scalars of table.csv (else of each cell's summary.json)."""
    rows: list[dict[str, Any]] = []
    if page.has_table("table"):
        df = page.table("table")
        if df is not None and "cell" in df.columns:
            rows = [{str(k): v for k, v in r.items()} for r in df.to_dict("records")]
            for r in rows:
                r["cell"] = shown(r["cell"])
            return rows
    for name in sorted(g.cells):
        folder = _folder(g, name)  # each cell's summary.json through its schema (a damaged one gives no numbers)
        s = (
            RunDir(id=g.cells[name], out=g.out / folder / name, root=g.root, task_for=page.task_for).summary
            if folder
            else {}
        )
        rows.append({"cell": name, **(_flatten(s) if isinstance(s, Mapping) else {})})
    return rows


def _folder(g: Group, cell: str) -> str | None:
    for f in RUN_FOLDERS:
        if (g.out / f / cell).is_dir():
            return f
    return None


def condition_of(cell: str) -> tuple[str, str | None]:
    """(the cell's condition, its seed): "rounds-3__s0" -> ("rounds-3", "0")."""
    m = _SEED.search(cell)
    return (cell[: m.start()], m.group(1)) if m else (cell, None)


def grid_keys(cells: list[str]) -> list[str]:
    """The grid's keys read from the cells' names ("rounds-3__model-x__s0" -> rounds, model)."""
    keys: list[str] = []
    for c in cells:
        for part in condition_of(c)[0].split("__"):
            k = part.split("-", 1)[0]
            if k and k not in keys and "-" in part:
                keys.append(k)
    return keys


def metrics_of(rows: list[dict[str, Any]], skip: set[str]) -> list[str]:
    """The numeric result columns, means first ("survival_time.mean", "efficiency.mean", ...)."""
    cols: list[str] = []
    for r in rows:
        for k in r:
            if k not in cols:
                cols.append(k)
    good = [
        c
        for c in cols
        if c not in skip
        and c not in _NOT_METRICS
        and not c.endswith((".sem", ".ci95", ".n", ".sd"))
        and sum(num(r.get(c)) is not None for r in rows) >= max(1, len(rows) // 2)
    ]
    return (
        sorted((c for c in good if c.endswith(".mean")), key=good.index) + [c for c in good if not c.endswith(".mean")]
    )[:MAX_METRICS]


def sweep_sections(g: Group, query: Mapping[str, str]) -> list[ex.Section]:
    page = as_page(g)
    rows = cell_rows(g, page)
    if not rows:
        return [
            ex.Section("Cells", [ex.Note("no cell has results yet (no table.csv and no summary.json)")], id="cells")
        ]
    keys = grid_keys([str(r["cell"]) for r in rows])
    metrics = metrics_of(rows, {"cell", "status", *keys})
    metric = query.get("metric") if query.get("metric") in metrics else (metrics[0] if metrics else None)
    by: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        cond, seed = condition_of(str(r["cell"]))
        r["_seed"] = seed if seed is not None else r.get("seed")
        by.setdefault(cond, []).append(r)
    conds = list(by)[:MAX_CONDITIONS]
    blocks: list[ex.Block] = []
    if len(by) > MAX_CONDITIONS:
        blocks.append(ex.Note(f"{len(by)} conditions: the first {MAX_CONDITIONS} are shown"))
    if metric is None:
        blocks.append(ex.Note("the cells have no numeric results to aggregate"))
    else:
        blocks.append(ex.Choice("metric", [(m, m) for m in metrics], chosen=metric, label="metric:"))
        xnum: dict[str, float] = {}  # each condition's x when the one key varied is a number
        for c in conds if len(keys) == 1 else []:
            if (v := num(by[c][0].get(keys[0]))) is not None:
                xnum[c] = v
        numeric_x = len(keys) == 1 and len(xnum) == len(conds)
        order = sorted(conds, key=lambda c: xnum[c]) if numeric_x else conds
        stats = {c: mean_ci([num(r.get(metric)) for r in by[c]]) for c in order}
        xs: list[float] | list[str] = [xnum[c] for c in order] if numeric_x else [_label(c) for c in order]
        scatter_x, scatter_y = [], []
        for x, c in zip(xs, order, strict=False):
            for r in by[c]:
                if num(r.get(metric)) is not None:
                    scatter_x.append(x)
                    scatter_y.append(num(r.get(metric)))
        n = sorted({sum(num(r.get(metric)) is not None for r in by[c]) for c in order})
        seeds = f"{n[0]}" if len(n) == 1 else f"{n[0]} to {n[-1]}"
        label = f"mean of {metric}"
        blocks.append(
            ex.Plot(
                xs,
                {label: [stats[c][0] for c in order]},
                title=f"{metric} by condition",
                xlabel=keys[0] if numeric_x else "condition",
                ylabel=metric,
                kind="line" if numeric_x else "points",
                key=f"sweep-{metric}",
                integer_x=numeric_x and all(xnum[c].is_integer() for c in order),
                bands={label: ([stats[c][1] for c in order], [stats[c][2] for c in order])},
                scatter={"each seed": (scatter_x, scatter_y)},
                caption=f"black {'line' if numeric_x else 'dots'}: the mean of {metric} over the seeds of each "
                "condition "
                f"({seeds} seeds); {'grey band' if numeric_x else 'whiskers'}: the 95% confidence interval of that "
                "mean (Student's t, seeds - 1 degrees of freedom; none where a condition has a single seed); open "
                "dots: each seed's own value. A cell that is itself a batch of societies contributes its own "
                "mean, so the interval is over seeds, not societies.",
            )
        )
        table = []
        for c in order:
            m, lo, hi = stats[c]
            vals = [r for r in by[c] if num(r.get(metric)) is not None]
            table.append(
                {
                    "condition": _label(c),
                    "seeds": len(vals),
                    "mean": m,
                    "95% CI": f"{_f(lo)} to {_f(hi)}" if lo is not None else "\u2014",
                    "each seed": ", ".join(f"s{r['_seed']}: {_f(num(r.get(metric)))}" for r in vals),
                }
            )
        blocks.append(ex.Table(table, title=f"{metric}, condition by condition", filterable=True))
    cells: list[ex.Block] = []
    for c in conds:
        rs = [
            {
                "cell": r["cell"],
                "seed": r["_seed"],
                "status": r.get("status"),
                **({metric: r.get(metric)} if metric else {}),
                "_id": g.cells.get(str(r["cell"])),
            }
            for r in by[c]
        ]
        cells.append(
            ex.Details(
                f"{_label(c)}: {len(rs)} cell{'s' if len(rs) != 1 else ''}",
                [ex.Table(rs, links={"cell": ("id", "_id")}, filterable=False)],
            )
        )
    secs = [
        overview(g),
        ex.Section("Conditions", blocks, id="conditions"),
        ex.Section("Cells by condition", cells, id="cells"),
    ]
    return secs + folder_sections(g, page) + _files(g, page)


def _label(cond: str) -> str:
    """A condition as people read it: "rounds-3__model-x" -> "rounds=3, model=x"."""
    parts = []
    for p in cond.split("__"):
        k, sep, v = p.partition("-")
        parts.append(f"{k}={v}" if sep else p)
    return ", ".join(parts) or cond


def _f(v: float | None) -> str:
    return fmt(v)


# --- a profile -----------------------------------------------------------------------------------
def _cell_name(entry: Mapping[str, Any], game: Any) -> str:
    """The folder name of a game's run in a profile: the last part of its ``run_dir``
    (``cells/game-cpr__s0``; ``games/cpr`` before the grid layout), else the game's name."""
    run_dir = entry.get("run_dir")
    return run_dir.rsplit("/", 1)[-1] if isinstance(run_dir, str) and run_dir else str(game)


def profile_sections(g: Group, query: Mapping[str, str]) -> list[ex.Section]:
    page = as_page(g)
    path = page.file("profile.json")
    prof: Any = {}
    if path is not None and path.is_file():
        prof, problem = read_json(path)
        if problem:
            page.notes.append(problem)
            prof = {}
    if not isinstance(prof, Mapping):
        page.notes.append("profile.json is not a JSON object")
        prof = {}
    if not prof:
        page.notes.append("no readable profile.json (the profile has not finished, or the folder is incomplete)")
    settings = {
        k: prof.get(k)
        for k in (
            "label",
            "status",
            "players",
            "model",
            "prompt",
            "deliberation",
            "simulations",
            "group_size",
            "seed",
            "budget_usd",
            "max_fallback",
        )
        if k in prof
    }
    blocks: list[ex.Block] = [ex.KeyValues(settings, title="the profile")]
    games = sub(prof, "games")
    rows, xs, ys, lo, hi = [], [], [], [], []
    for name, gm in list(games.items())[:200]:
        if not isinstance(gm, Mapping):
            continue
        metric = sub(gm, "metric")
        prox = sub(gm, "pareto_proximity")
        fb = sub(gm, "fallback")
        ci, pci = _pair(metric.get("ci95")), _pair(prox.get("ci95"))
        title = gm.get("title")
        title = title if isinstance(title, str) else str(name)
        rows.append(
            {
                "game": str(name),
                "title": title,
                "status": gm.get("status"),
                "metric": metric.get("label") or metric.get("name"),
                "mean": metric.get("mean"),
                "metric 95% CI": f"{_f(ci[0])} to {_f(ci[1])}" if ci[0] is not None else "\u2014",
                "Nash": metric.get("nash"),
                "Pareto": metric.get("pareto"),
                "Pareto proximity": prox.get("mean"),
                "proximity 95% CI": f"{_f(pci[0])} to {_f(pci[1])}" if pci[0] is not None else "\u2014",
                "fallback share": fb.get("share"),
                "_id": g.cells.get(shown(_cell_name(gm, name))),
            }
        )
        xs.append(cut(title, 24))
        ys.append(prox.get("mean"))
        lo.append(pci[0])
        hi.append(pci[1])
    if rows:
        blocks.append(ex.Table(rows, title="every game", links={"game": ("id", "_id")}, filterable=len(rows) > 5))
        label = "mean Pareto proximity"
        sims = prof.get("simulations")
        blocks.append(
            ex.Plot(
                xs,
                {label: ys},
                title="Pareto proximity by game",
                xlabel="game",
                ylabel="Pareto proximity",
                kind="points",
                key="profile-proximity",
                integer_x=False,
                bands={label: (lo, hi)},
                caption=f"black dots: each game's mean Pareto proximity over its {sims if sims is not None else ''} "
                "simulations (0: the Pareto outcome, 1: the Nash outcome or beyond); whiskers: its 95% "
                "confidence interval, as profile.json gives it",
            )
        )
    else:
        blocks.append(ex.Note("profile.json lists no game"))
    figs: list[ex.Block] = [ex.Image(p, caption=p) for p in ("figures/profile.png",) if (g.out / p).is_file()]
    secs = [overview(g), ex.Section("Profile", blocks, id="profile")]
    if figs:
        secs.append(ex.Section("The profile's figure", figs, id="figure"))
    if prof:
        secs.append(
            ex.Section("profile.json", [ex.Details("profile.json in full", [ex.Code(_json(prof), "json")])], id="json")
        )
    return secs + folder_sections(g, page, skip={"figures/profile.png", "profile.json"}) + _files(g, page)


# --- what any such folder holds -----------------------------------------------------------------
#: the folders of a group whose files are shown ("" is the group's own folder)
FILE_FOLDERS = ("", "figures", "analysis", "analysis/figures")
IMAGE_SUFFIXES = (".png", ".svg", ".jpg", ".jpeg", ".gif", ".webp")
#: files of each kind shown at most, and the bytes of one Markdown file read
MAX_FILES_SHOWN = 40
MAX_NOTE_BYTES = 256 << 10
#: table rows shown of each table
PREVIEW_ROWS = 200


def _listed(page: RunDir, suffixes: tuple[str, ...], folders: tuple[str, ...] = FILE_FOLDERS) -> list[str]:
    """The files (relative to the group's folder) of ``folders`` with these suffixes, in order; a
    folder leading outside the group's folder is never listed."""
    out: list[str] = []
    for f in folders:
        where = page.out if not f else page.file(f)
        if where is None or not where.is_dir():
            continue
        try:
            names = sorted(p.name for p in where.iterdir() if p.suffix.lower() in suffixes and p.is_file())
        except OSError:
            continue
        out += [f"{f}/{n}" if f else n for n in names]
    return out[:MAX_FILES_SHOWN]


def folder_sections(g: Group, page: RunDir, skip: set[str] = frozenset()) -> list[ex.Section]:  # type: ignore[assignment]
    """The folder's own figures, notes (Markdown), tables and settings (JSON), ``skip`` left out."""
    from cooplab.evals.explorer.runs import read_text_head

    secs: list[ex.Section] = []
    figs: list[ex.Block] = [
        ex.Image(rel, caption=shown(rel)) for rel in _listed(page, IMAGE_SUFFIXES) if rel not in skip
    ]
    if figs:
        secs.append(ex.Section("Figures", figs, id="figures"))
    notes: list[ex.Block] = []
    for rel in _listed(page, (".md",), ("", "analysis")):
        path = page.file(rel)
        if rel not in skip and path is not None:
            notes.append(ex.Details(shown(rel), [ex.Markdown(read_text_head(path, MAX_NOTE_BYTES))], open=True))
    if notes:
        secs.append(ex.Section("Notes", notes, id="notes"))
    tables: list[ex.Block] = []
    for rel in _listed(page, (".csv", ".parquet"), ("", "analysis")):
        folder, _, name = rel.rpartition("/")
        reader = RunDir(id=g.id, out=page.file(folder) or page.out, root=g.root) if folder else page
        stem = name.rsplit(".", 1)[0]
        df = reader.table(stem) if rel not in skip else None
        if reader is not page:
            page.notes.extend(reader.notes)
        if df is not None:
            tables.append(
                ex.Details(
                    f"{shown(rel)} ({len(df):,} rows)", [ex.Table(df, max_rows=PREVIEW_ROWS)], open=len(tables) < 3
                )
            )
    if tables:
        secs.append(ex.Section("Tables", tables, id="tables"))
    settings: list[ex.Block] = []
    for rel in _listed(page, (".json",), ("", "analysis")):
        path = page.file(rel)
        if rel in skip or path is None:
            continue
        obj, problem = read_json(path)
        if problem:
            page.notes.append(problem)
            continue
        settings.append(ex.Details(shown(rel), [ex.Code(_json(obj), "json")]))
    if settings:
        secs.append(ex.Section("Settings", settings, id="settings"))
    return secs


def _json(obj: Any) -> str:
    import json

    try:
        return json.dumps(obj, indent=2, default=str, ensure_ascii=False)[:200_000]
    except (TypeError, ValueError, RecursionError):
        return cut(repr(obj), 200_000)


def overview(g: Group) -> ex.Section:
    """How many runs there are by status, and what their LLM calls cost in all (from each run's summary.json)."""
    statuses: dict[str, int] = {}
    sums: dict[str, float] = {}
    with_calls = 0
    for name in sorted(g.cells):
        folder = _folder(g, name)
        cell = RunDir(id=g.cells[name], out=g.out / folder / name, root=g.root, task_for=g.task_for) if folder else None
        s = cell.summary if cell is not None else {}
        status = s.get("status")
        if not isinstance(status, str):
            status = "unfinished" if cell is not None and cell.config else "?"
        statuses[status] = statuses.get(status, 0) + 1
        led = s.get("ledger") if isinstance(s.get("ledger"), Mapping) else None
        if led is None:
            continue
        with_calls += 1
        for label, key in (
            ("calls", "calls"),
            ("cached calls", "cached_calls"),
            ("input tokens", "input_tokens"),
            ("output tokens", "output_tokens"),
            ("cost (USD)", "cost_usd_float"),
        ):
            if num(led.get(key)) is not None:
                sums[label] = sums.get(label, 0.0) + num(led.get(key))  # type: ignore[operator]
    blocks: list[ex.Block] = [
        ex.KeyValues({"kind": g.kind, "runs": len(g.cells), **{f"status {k}": v for k, v in sorted(statuses.items())}})
    ]
    if with_calls:
        costs = {k: (f"${v:.6g}" if k == "cost (USD)" else int(v)) for k, v in sums.items()}
        blocks.append(
            ex.KeyValues(
                {**costs, "runs with LLM calls": f"{with_calls} of {len(g.cells)}"}, title="LLM costs (all runs)"
            )
        )
    else:
        blocks.append(ex.Note("no LLM calls recorded (rule-based agents, or no ledger)", level="info"))
    return ex.Section("Overview", blocks, id="overview")


def _pair(v: Any) -> tuple[float | None, float | None]:
    if isinstance(v, (list, tuple)) and len(v) == 2 and num(v[0]) is not None and num(v[1]) is not None:
        return num(v[0]), num(v[1])
    return None, None


def _files(g: Group, page: RunDir) -> list[ex.Section]:
    """The group's notes (what could not be read)."""
    return (
        [ex.Section("Problems", [ex.Note(n) for n in dict.fromkeys(page.notes)], id="problems")] if page.notes else []
    )


def sections(g: Group, query: Mapping[str, str]) -> list[ex.Section]:
    """The sections of a group's page: a profile's, a sweep's, or a folder of results' files alone."""
    if g.kind == "results":
        page = as_page(g)
        return folder_sections(g, page) + _files(g, page)
    return profile_sections(g, query) if g.kind == "profile" else sweep_sections(g, query)
