"""A sweep's mixed societies and invasions side by side: the per-model rows, the cross-play rows and
the invasion figures of every finished cell, each row labelled with its cell (``analysis/by_model.csv``,
``crossplay.csv``, ``invasion.csv``). Cells are read as data (their summary.json), never run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd


def _flat(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flat(f"{prefix}.{k}" if prefix else str(k), v, out)
    elif not isinstance(value, list):
        out[prefix] = value


def sweep_tables(cells: list[dict[str, Any]], dest: Path) -> dict[str, str]:
    """Write the tables that have rows; returns {table: path} (empty when no cell was mixed or invaded)."""
    rows: dict[str, list[dict[str, Any]]] = {"by_model": [], "crossplay": [], "invasion": []}
    for cell in cells:
        try:
            summary = json.loads((Path(cell["dir"]) / "summary.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(summary, dict):
            continue
        label = {
            "cell": Path(cell["dir"]).name,
            **{
                str(k): json.dumps(v) if isinstance(v, (dict, list)) else v
                for k, v in (cell.get("labels") or {}).items()
            },
        }
        for key in ("by_model", "crossplay"):
            for r in summary.get(key) or []:
                if isinstance(r, dict):
                    rows[key].append({**label, **r})
        inv = summary.get("invasion")
        if isinstance(inv, dict):
            flat: dict[str, Any] = {}
            _flat("", {k: v for k, v in inv.items() if k != "residents_metric_by_round"}, flat)
            rows["invasion"].append({**label, **flat})
    written = {}
    for key, found in rows.items():
        if found:
            dest.mkdir(parents=True, exist_ok=True)
            path = dest / f"{key}.csv"
            pd.DataFrame(found).to_csv(path, index=False)
            written[key] = str(path)
    return written


def analyze_mixed_cells(cells: list[dict[str, Any]], out: Any, *, analysis_out: Any = None) -> dict[str, Any] | None:
    """A world's ``analyze_sweep`` when all it adds is the mix: the cells' per-model rows, cross-play
    and invasions side by side in ``analysis_out`` (default ``out/analysis``); None when no cell has them."""
    dest = Path(analysis_out) if analysis_out is not None else Path(out) / "analysis"
    mixed = sweep_tables(cells, dest)
    return {"mix_tables": mixed, "analysis_dir": str(dest)} if mixed else None
