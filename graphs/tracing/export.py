"""Reading a finished run's ``traces.jsonl`` back, and exporting it to a LangSmith-compatible endpoint.

:func:`load_runs` returns the recorded runs (optionally validated against
``langsmith.schemas.Run``); :func:`export_traces` sends them, parents first and scrubbed
again, through the LangSmith client's batch ingest (``POST {endpoint}/runs/batch``). Errors
are one-line exceptions the ``cooplab traces`` CLI prints as they are.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from cooplab.graphs.rundir import TRACES_FILE
from cooplab.limits import parse_json

from .scrubbing import scrub, secret_values

logger = logging.getLogger("cooplab.graphs.tracing")  # one logger for the package


class TraceFileError(ValueError):
    """A missing or malformed traces.jsonl (user-facing, one line)."""


class ExportError(RuntimeError):
    """The endpoint refused or could not be reached (one line)."""


class ExportConfigError(ValueError):
    """Export asked for without the settings it needs (user-facing, one line)."""


def traces_path(run_dir: str | os.PathLike[str]) -> Path:
    p = Path(run_dir)
    return p if p.is_file() else p / TRACES_FILE


def load_runs(run_dir: str | os.PathLike[str], *, validate: bool = False) -> list[dict[str, Any]]:
    """The runs recorded in ``run_dir/traces.jsonl`` (or a traces file given directly),
    in file order. Blank lines are skipped; a malformed line raises :class:`TraceFileError`
    (a last line cut short by a crash is skipped instead). ``validate``: check every run
    against ``langsmith.schemas.Run``."""
    path = traces_path(run_dir)
    if not path.is_file():
        raise TraceFileError(f"no {TRACES_FILE} in {run_dir}")
    runs: list[dict[str, Any]] = []
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = parse_json(line, f"{path}:{i}", error=TraceFileError)
        except TraceFileError:
            if i == len(lines):  # a last line cut short by a crash mid-write
                logger.warning("%s: skipped a cut-off last line", path)
                continue
            raise
        try:
            if not isinstance(rec, dict) or "id" not in rec:
                raise ValueError("not a run object")
            if validate:
                from langsmith.schemas import Run

                Run(**rec)
        except Exception as exc:
            raise TraceFileError(f"{path}:{i}: not a LangSmith run: {str(exc).splitlines()[0]}") from None
        runs.append(rec)
    return runs


_EXPORT_FIELDS = (
    "id", "trace_id", "parent_run_id", "dotted_order", "name", "run_type", "start_time", "end_time",
    "inputs", "outputs", "error", "extra", "tags", "status",
)


def export_traces(
    run_dir: str | os.PathLike[str],
    endpoint: str | None = None,
    api_key: str | None = None,
    project: str | None = None,
    *,
    batch_size: int = 100,
) -> int:
    """Send a finished run's ``traces.jsonl`` to a LangSmith-compatible endpoint; return the
    number of runs sent. Runs go parent-first (by ``dotted_order``) through the LangSmith
    client's batch ingest (``POST {endpoint}/runs/batch``). ``endpoint``/``api_key``/
    ``project`` default to LANGSMITH_ENDPOINT/LANGSMITH_API_KEY/LANGSMITH_PROJECT. Values
    are scrubbed again before sending. Raises :class:`TraceFileError` (bad file),
    :class:`ExportConfigError` (neither endpoint nor key: nothing is sent) or
    :class:`ExportError` (the endpoint refused or could not be reached).
    """
    from langsmith import Client

    runs = load_runs(run_dir, validate=True)
    seen: set[str] = set()
    uniq = []
    for r in runs:
        if r["id"] not in seen:
            seen.add(r["id"])
            uniq.append(r)
    uniq.sort(key=lambda r: r.get("dotted_order") or "")
    if not uniq:
        return 0
    endpoint = endpoint or os.environ.get("LANGSMITH_ENDPOINT") or os.environ.get("LANGCHAIN_ENDPOINT") or None
    api_key = api_key or os.environ.get("LANGSMITH_API_KEY") or os.environ.get("LANGCHAIN_API_KEY") or None
    project = project or os.environ.get("LANGSMITH_PROJECT") or os.environ.get("LANGCHAIN_PROJECT") or "cooplab"
    if endpoint is None and api_key is None:
        raise ExportConfigError(
            "no endpoint and no API key: set LANGSMITH_API_KEY (and LANGSMITH_ENDPOINT or --endpoint "
            "for a server other than LangSmith's)"
        )
    errors: list[BaseException] = []
    try:
        client = Client(
            api_url=endpoint,
            api_key=api_key,
            auto_batch_tracing=False,
            info={},  # do not ask the endpoint for its capabilities: plain /runs/batch
            tracing_sampling_rate=1.0,
            omit_traced_runtime_info=True,
            tracing_error_callback=errors.append,
        )
    except Exception as exc:
        raise ExportError(f"cannot create a LangSmith client: {str(exc).splitlines()[0]}") from None
    secrets = secret_values()
    ls_logger = logging.getLogger("langsmith")
    old_level = ls_logger.level
    ls_logger.setLevel(logging.CRITICAL)  # failures are reported once, by ExportError
    try:
        for i in range(0, len(uniq), batch_size):
            batch = []
            for r in uniq[i : i + batch_size]:
                body = {k: r.get(k) for k in _EXPORT_FIELDS if r.get(k) is not None}
                body["inputs"] = body.get("inputs") or {}
                body["session_name"] = project
                batch.append(scrub(body, secrets))
            client.batch_ingest_runs(create=batch)
            if errors:
                break
    except Exception as exc:
        errors.append(exc)
    finally:
        ls_logger.setLevel(old_level)
        try:
            client.close() if hasattr(client, "close") else None
        except Exception:
            pass
    if errors:
        msg = scrub(str(errors[0]).splitlines()[0] if str(errors[0]) else type(errors[0]).__name__, secrets)
        raise ExportError(f"export to {endpoint or 'the LangSmith default endpoint'} failed: {msg}")
    return len(uniq)
