"""The generic view of any run: key numbers, costs, configuration, tables, figures, traces."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from cooplab.evals.report import costs_of, fmt, headline, num
from cooplab.graphs import explore as ex
from cooplab.graphs.rundir import TRACES_FILE

#: rows of each table shown by the generic view
PREVIEW_ROWS = 200
#: figure files shown at most
MAX_FIGURES = 24


def key_numbers(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The report's headline numbers of a summary (any task), plus its cost when it has one."""
    out = dict(headline(dict(summary))) if isinstance(summary, Mapping) else {}
    led = summary.get("ledger") if isinstance(summary, Mapping) else None
    if isinstance(led, Mapping) and num(led.get("cost_usd_float")) is not None:
        out["cost (USD)"] = f"{num(led['cost_usd_float']):.4g}"
    return out


def summary_section(run: Any) -> ex.Section:
    blocks: list[ex.Block] = [ex.KeyValues({"task": run.task, "status": run.status, **key_numbers(run.summary)})]
    msg = run.summary.get("message")
    if isinstance(msg, str) and msg:
        blocks.append(ex.Note(f"the run stopped: {msg}", level="info"))
    costs = costs_of(run.summary, run.out)
    if costs and "problem" not in costs:  # exact decimal costs shown to 4 significant digits (the ledger keeps them exact)
        blocks.append(ex.KeyValues({k: (fmt(num(v)) if k.startswith(("cost", "judge cost")) and num(v) is not None else v)
                                    for k, v in costs.items() if k != "source"}, title="LLM costs"))
    elif costs:
        blocks.append(ex.Note(costs["problem"]))
    return ex.Section("Summary", blocks, id="summary")


def config_section(run: Any) -> ex.Section:
    cfg = run.config
    flat = {k: v for k, v in cfg.items() if not isinstance(v, (dict, list))}
    params = cfg.get("params") if isinstance(cfg.get("params"), Mapping) else {}
    blocks: list[ex.Block] = [ex.KeyValues(flat, title="run"), ex.KeyValues(dict(params), title="params")]
    try:
        blocks.append(ex.Details("config.json in full", [ex.Code(json.dumps(cfg, indent=2, default=str), "json")]))
    except (TypeError, ValueError, RecursionError):
        pass
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


def figures_section(run: Any) -> ex.Section | None:
    folder = run.file("figures")
    if folder is None:
        return None
    try:
        files = sorted(p for p in folder.iterdir() if p.suffix.lower() in (".png", ".svg", ".jpg", ".jpeg") and p.is_file())
    except OSError:
        return None
    blocks = [ex.Image(p.relative_to(run.out).as_posix(), caption=p.name) for p in files[:MAX_FIGURES]]
    return ex.Section("Figures", blocks, id="figures") if blocks else None


def traces_section(run: Any) -> ex.Section | None:
    if not (run.out / TRACES_FILE).is_file():
        return None
    return ex.Section("Traces", [ex.Link("every model call and graph step of this run", {}, trace=True)], id="traces")


def view(run: Any, query: Mapping[str, str]) -> list[ex.Section]:
    """Summary, configuration, tables, figures and traces of any run."""
    secs = [summary_section(run), config_section(run), tables_section(run), figures_section(run), traces_section(run)]
    return [s for s in secs if s is not None]

