"""The generic sections of any run's page: key numbers and costs, configuration, tables, figures,
notes (its Markdown files), traces, its error log and its files. Every page shows them after the
task's own sections (:func:`tail`); a task without a view of its own gets them alone (:func:`view`).
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Mapping
from typing import Any

from cooplab.evals.explorer.runs import read_text_head, shown
from cooplab.evals.typed import sub
from cooplab.evals.values import cut, exact_sum, fmt, human_bytes, num
from cooplab.graphs import explore as ex
from cooplab.graphs.rundir import TRACES_FILE

#: rows of each table shown by the generic view
PREVIEW_ROWS = 200
#: figure files shown at most
MAX_FIGURES = 24
#: Markdown files shown at most, and the bytes read of each
MAX_NOTES = 12
MAX_NOTE_BYTES = 256 << 10
#: lines of error.log shown (its last ones), and the bytes of its end read
LOG_LINES = 40
LOG_BYTES = 200_000
#: entries of the run folder listed at most
MAX_FILES = 120
#: summary.json's keys that are bookkeeping, not results (left out of the key numbers)
_NOT_NUMBERS = {"seed", "wall_seconds", "replicates", "n_agents", "version"}
IMAGE_SUFFIXES = (".png", ".svg", ".jpg", ".jpeg", ".gif", ".webp")


def key_numbers(summary: Mapping[str, Any]) -> dict[str, Any]:
    """Any run's key numbers: the first four top-level numbers of its summary, and its cost when it
    has one (:func:`cost_number`). A task names its own with ``Task.key_numbers``."""
    if not isinstance(summary, Mapping):
        return {}
    out = {
        str(k): v
        for k, v in summary.items()
        if k not in _NOT_NUMBERS and isinstance(v, (int, float)) and not isinstance(v, bool)
    }
    return {**dict(list(out.items())[:4]), **cost_number(summary)}


def cost_number(summary: Mapping[str, Any]) -> dict[str, str]:
    """``{"cost (USD)": "0.0123"}`` of a summary whose ledger has a cost, else ``{}``."""
    led = summary.get("ledger") if isinstance(summary, Mapping) else None
    if isinstance(led, Mapping) and num(led.get("cost_usd_float")) is not None:
        return {"cost (USD)": f"{num(led['cost_usd_float']):.4g}"}
    return {}


def costs_of(run: Any) -> dict[str, Any] | None:
    """Calls, cached calls, input and output tokens, cost (USD), budget, usage errors and
    response-cache hits of a run, from its summary's ledger (else summed from its ledger table);
    None for a run without LLM calls. ``problem``: why the ledger table could not be read."""
    summary = run.summary
    led = summary.get("ledger")
    res: dict[str, Any] = {}
    if isinstance(led, Mapping):
        res = {
            "calls": led.get("calls"),
            "cached calls": led.get("cached_calls"),
            "input tokens": led.get("input_tokens"),
            "output tokens": led.get("output_tokens"),
            "cost (USD)": led.get("cost_usd") if num(led.get("cost_usd")) is not None else led.get("cost_usd_float"),
            "budget (USD)": led.get("budget_usd"),
            "usage errors": led.get("usage_errors"),
            "from": "summary.json",
        }
    elif run.has_table("ledger"):
        lg = run.table("ledger")
        if lg is None:
            return {"problem": "the ledger table could not be read"}
        total = exact_sum(lg["cost_usd_exact"]) if "cost_usd_exact" in lg else None
        ints = {
            k: num(lg[c].sum()) if c in lg else None
            for k, c in (
                ("cached calls", "cached"),
                ("input tokens", "input_tokens"),
                ("output tokens", "output_tokens"),
            )
        }
        res = {
            "calls": len(lg),
            **{k: int(v) if v is not None else None for k, v in ints.items()},
            "cost (USD)": str(total) if total is not None else None,
            "from": "the ledger table",
        }
    else:
        return None
    llm = summary.get("llm")
    if isinstance(llm, Mapping):
        res["response cache hits"] = llm.get("cache_hits")
        res["response cache misses"] = llm.get("cache_misses")
    judge = summary.get("judge")
    if (
        isinstance(judge, Mapping) and num(judge.get("cost_usd")) is not None
    ):  # a science run's judge: its own ledger, beside the team's
        res["judge cost (USD)"] = judge.get("cost_usd")
        res["judge budget (USD)"] = judge.get("budget_usd")
    return {k: v for k, v in res.items() if v is not None}


def summary_section(run: Any, numbers: Mapping[str, Any] | None = None) -> ex.Section:
    """Status, key numbers (``numbers``: the task's, else :func:`key_numbers`), when it started and
    how long it took; why it stopped; its costs; summary.json in full."""
    s, cfg = run.summary, run.config
    record = sub(cfg, "record")
    numbers = key_numbers(s) if numbers is None else numbers
    facts = {
        "task": run.task,
        "status": run.status,
        "agents": s.get("agents", cfg.get("agents")),
        **numbers,
        "seed": s.get("seed", cfg.get("seed")),
        "wall time (s)": s.get("wall_seconds"),
        "started": record.get("created"),
    }
    blocks: list[ex.Block] = [ex.KeyValues({k: v for k, v in facts.items() if v is not None})]
    msg = s.get("message")
    if isinstance(msg, str) and msg:
        blocks.append(ex.Note(f"the run stopped: {msg}", level="info"))
    if s.get("figure_error"):
        blocks.append(ex.Note(f"the run's figure failed: {fmt(s['figure_error'])}"))
    if not s and cfg:
        blocks.append(
            ex.Note(
                f"no summary.json: the run has not finished (or was interrupted); 'cooplab resume {shown(run.out)}' "
                "continues it",
                level="info",
            )
        )
    costs = costs_of(run)
    if costs is None:
        blocks.append(ex.Note("no LLM calls recorded (rule-based agents, or no ledger)", level="info"))
    elif "problem" in costs:
        blocks.append(ex.Note(costs["problem"]))
    else:  # exact decimal costs shown to 6 significant digits (the ledger keeps them exact)
        blocks.append(
            ex.KeyValues(
                {
                    k: (f"${num(v):.6g}" if k.endswith("(USD)") and num(v) is not None else v)
                    for k, v in costs.items()
                    if k != "from"
                },
                title=f"LLM costs (from {costs['from']})",
            )
        )
    if s:
        blocks.append(ex.Details("summary.json in full", [ex.Code(_json(s), "json")]))
    return ex.Section("Summary", blocks, id="summary")


def _json(obj: Any) -> str:
    try:
        return json.dumps(obj, indent=2, default=str, ensure_ascii=False)[:200_000]
    except (TypeError, ValueError, RecursionError):
        return cut(repr(obj), 200_000)


def config_section(run: Any) -> ex.Section:
    """The run's settings and parameters, config.json in full and the recorded environment (versions,
    git commit, machine) folded apart."""
    cfg = run.config
    flat = {k: v for k, v in cfg.items() if not isinstance(v, (dict, list))}
    params = sub(cfg, "params")
    blocks: list[ex.Block] = [ex.KeyValues(flat, title="run"), ex.KeyValues(dict(params), title="params")]
    record = cfg.get("record") if isinstance(cfg.get("record"), Mapping) else None
    env = record.get("environment") if record is not None else None
    shown_cfg = (
        {**cfg, "record": {k: v for k, v in record.items() if k != "environment"}} if record is not None else cfg
    )
    if cfg:
        blocks.append(ex.Details("config.json in full", [ex.Code(_json(shown_cfg), "json")]))
    elif run.file("config.json") is not None and (run.out / "config.json").is_file():
        raw = read_text_head(run.out / "config.json", 2000)
        blocks.append(ex.Details(f"config.json's first {len(raw):,} characters", [ex.Code(raw)]))
    if env is not None:
        blocks.append(ex.Details("the environment (versions, git commit, machine)", [ex.Code(_json(env), "json")]))
    return ex.Section("Configuration", blocks, id="config")


def tables_section(run: Any) -> ex.Section | None:
    blocks: list[ex.Block] = []
    for name in run.tables:
        df = run.table(name)
        if df is None:
            blocks.append(ex.Note(f"table {name} could not be read"))
            continue
        blocks.append(ex.Details(f"{name} ({len(df)} rows)", [ex.Table(df, max_rows=PREVIEW_ROWS)]))
    return ex.Section("Tables", blocks, id="tables") if blocks else None


def _files(run: Any, folder: str, suffixes: tuple[str, ...]) -> list[Any]:
    """The files of ``folder`` (a folder of the run, "" for its top) with these suffixes, in name order
    (none when the folder leads outside the run folder)."""
    where = run.file(folder) if folder else run.out
    if where is None:
        return []
    try:
        return sorted(p for p in where.iterdir() if p.suffix.lower() in suffixes and p.is_file())
    except OSError:
        return []


def figures_section(run: Any) -> ex.Section | None:
    """The images of ``figures/`` and of the run folder's top."""
    files = _files(run, "figures", IMAGE_SUFFIXES) + _files(run, "", IMAGE_SUFFIXES)
    blocks: list[ex.Block] = [
        ex.Image(p.relative_to(run.out).as_posix(), caption=shown(p.relative_to(run.out).as_posix()))
        for p in files[:MAX_FIGURES]
    ]
    if len(files) > MAX_FIGURES:
        blocks.append(ex.Note(f"{len(files) - MAX_FIGURES} more figures are not shown", level="info"))
    return ex.Section("Figures", blocks, id="figures") if blocks else None


def notes_section(run: Any) -> ex.Section | None:
    """The run folder's Markdown files (a calibration's report.md, claims.md, statistics.md), rendered."""
    blocks: list[ex.Block] = []
    for p in _files(run, "", (".md",))[:MAX_NOTES]:
        if run.file(p.name) is None:
            continue
        blocks.append(ex.Details(shown(p.name), [ex.Markdown(read_text_head(p, MAX_NOTE_BYTES))], open=True))
    return ex.Section("Notes", blocks, id="notes") if blocks else None


def traces_section(run: Any) -> ex.Section:
    """The link to the run's model calls, and the size of its traces.jsonl."""
    path = run.out / TRACES_FILE
    if not path.is_file():
        return ex.Section("Traces", [ex.Note("no traces.jsonl (only LLM runs are traced)", level="info")], id="traces")
    try:
        size = f" ({human_bytes(path.stat().st_size)}, LangSmith run format)"
    except OSError:
        size = ""
    return ex.Section(
        "Traces",
        [
            ex.Link("every model call of this run: prompts, answers, tokens and what each was charged", {}, trace=True),
            ex.Text(
                f"traces.jsonl{size}; 'cooplab traces view {shown(run.out)}' opens the same page, "
                "'cooplab traces export' sends it to LangSmith or an OpenTelemetry collector"
            ),
        ],
        id="traces",
    )


def log_section(run: Any) -> ex.Section | None:
    """The last lines of the run's error.log."""
    if run.file("error.log") is None or not (run.out / "error.log").is_file():
        return None
    path = run.out / "error.log"
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, path.stat().st_size - LOG_BYTES))
            lines = fh.read().decode("utf-8", errors="replace").splitlines()[-LOG_LINES:]
    except OSError as exc:
        return ex.Section("error.log", [ex.Note(f"cannot read error.log: {exc.strerror or exc}")], id="error-log")
    return ex.Section("error.log", [ex.Code("\n".join(lines), title=f"its last {len(lines)} lines")], id="error-log")


def files_section(run: Any) -> ex.Section | None:
    """What the run folder holds: each entry with its size (a folder: its number of entries)."""
    try:
        entries = sorted(run.out.iterdir(), key=lambda p: (not p.is_dir(), p.name))
    except OSError:
        return None
    rows = []
    for p in [e for e in entries if not e.name.startswith(".")][:MAX_FILES]:
        try:
            if p.is_symlink():
                size = "a link"
            elif p.is_dir():
                size = f"{sum(1 for _ in p.iterdir()):,} entries"
            else:
                size = human_bytes(p.stat().st_size)
            when = _dt.datetime.fromtimestamp(p.lstat().st_mtime, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M")
        except OSError:
            size, when = "unreadable", None
        rows.append(
            {
                "name": shown(p.name) + ("/" if p.is_dir() and not p.is_symlink() else ""),
                "size": size,
                "changed (UTC)": when,
            }
        )
    blocks: list[ex.Block] = [ex.Table(rows, filterable=len(rows) > 10, max_rows=MAX_FILES)]
    if len(entries) > MAX_FILES:
        blocks.append(ex.Note(f"{len(entries) - MAX_FILES} more entries are not listed", level="info"))
    return ex.Section("Files", [ex.Details(f"{len(rows)} entries of {shown(run.out)}", blocks)], id="files")


def tail(run: Any) -> list[ex.Section]:
    """The generic sections every page ends with: configuration, tables, figures, notes, traces, the
    error log and the files."""
    secs = [
        config_section(run),
        tables_section(run),
        figures_section(run),
        notes_section(run),
        traces_section(run),
        log_section(run),
        files_section(run),
    ]
    return [s for s in secs if s is not None]


def view(run: Any, query: Mapping[str, str]) -> list[ex.Section]:
    """Summary, then the generic sections (:func:`tail`) of any run."""
    return [summary_section(run), *tail(run)]
