"""Read two run folders and compare them (:func:`cooplab.compare`, ``cooplab compare``): the
folders are data (their tables read through :func:`cooplab.graphs.rundir.read_table`, which refuses
a file leading out of its folder); the shared round comes from their fork records' lineages, never
from a path a record names. The comparison itself is :mod:`cooplab.evals.compare`."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from cooplab.evals import compare as cmp
from cooplab.graphs import rundir
from cooplab.limits import ConfigError
from cooplab.runs import store as runstore


def _side(path: Path, name: str) -> tuple[cmp.Side, dict[str, Any], str | None]:
    config = runstore.read_run_config(path)
    if not (path / "summary.json").is_file():
        raise runstore.RunDirError(f"{path} has no summary.json; compare finished (or stopped) runs ({name})")
    summary = rundir.read_json(rundir.inside(path, "summary.json"))
    if not isinstance(summary, dict):
        raise runstore.RunDirError(f"{path}/summary.json is not a JSON object; is it a cooplab run directory?")
    rounds = None
    if any((path / f"rounds.{ext}").exists() for ext in ("parquet", "csv")):
        rounds = rundir.read_table(path, "rounds")
    record = config.get("record")
    record = record if isinstance(record, dict) else {}
    tid = record.get("thread_id") if isinstance(record.get("thread_id"), str) else None
    return cmp.Side(str(path), summary, rounds), config, tid


def compare_dirs(a: Path, b: Path, *, out: Path | None = None, columns: Sequence[str] | None = None) -> cmp.Comparison:
    """Compare the runs in folders ``a`` and ``b`` (one-line RunDirError / ConfigError for bad input,
    before anything is written); with ``out``, write compare.json and compare.png there."""
    from cooplab.runs import registry
    from cooplab.runs.fork import common_round

    sa, ca, ta = _side(a, "A")
    sb, cb, tb = _side(b, "B")
    if ca.get("task") != cb.get("task"):
        raise ConfigError(
            f"{a} is a {ca.get('task')!r} run and {b} a {cb.get('task')!r} run; compare two runs of one task"
        )
    if columns is not None and (not isinstance(columns, (list, tuple)) or not all(isinstance(c, str) for c in columns)):
        raise ConfigError("columns must be a list of per-round column names")
    known = set(cmp.value_columns(sa.rounds)) & set(cmp.value_columns(sb.rounds))
    for c in columns or ():
        if c not in known:
            raise ConfigError(
                f"unknown column {c!r}; the per-round tables of both runs have: {', '.join(sorted(known)) or 'none'}"
            )
    try:
        default = getattr(registry.get(str(ca.get("task"))), "curve_columns", None)
    except registry.UnknownTask:
        default = None
    shared = common_round(ca, ta, cb, tb)
    if shared == -1:  # the same run twice
        shared = max(int(sa.summary.get("rounds_completed") or 0), 0)
    result = cmp.compare(
        sa,
        sb,
        common_round=shared,
        columns=list(columns) if columns else ([c for c in default if c in known] if default else None),
    )
    if out is not None:
        path = runstore.ensure_writable(out)
        runstore.write_json(path / "compare.json", result.to_dict())
        result.figure().savefig(path / "compare.png", dpi=110)
    return result


__all__ = ["compare_dirs"]
