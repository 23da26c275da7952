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
    "id",
    "trace_id",
    "parent_run_id",
    "dotted_order",
    "name",
    "run_type",
    "start_time",
    "end_time",
    "inputs",
    "outputs",
    "error",
    "extra",
    "tags",
    "status",
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
    where = endpoint or "the LangSmith default endpoint"
    _check_reachable(endpoint or _DEFAULT_ENDPOINT)
    try:
        client = Client(
            api_url=endpoint,
            api_key=api_key,
            auto_batch_tracing=False,
            info={},  # do not ask the endpoint for its capabilities: plain /runs/batch
            tracing_sampling_rate=1.0,
            omit_traced_runtime_info=True,
            tracing_error_callback=errors.append,
            retry_config=_retry_config(),
            timeout_ms=(CONNECT_TIMEOUT_S * 1000, 30_000),
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
        raise ExportError(f"export to {where} failed: {scrub(reason(errors[0]), secrets)}")
    return len(uniq)


_DEFAULT_ENDPOINT = "https://api.smith.langchain.com"
#: seconds to open a connection to the endpoint (the check before sending, and each request's)
CONNECT_TIMEOUT_S = 5


def _check_reachable(url: str) -> None:
    """Open (and close) one TCP connection to the endpoint before anything is sent: a refused
    connection or a name that does not resolve is one line at once, not the client's rounds of
    retries."""
    import socket
    from urllib.parse import urlparse

    u = urlparse(url)
    try:
        port = u.port or (443 if u.scheme == "https" else 80)
    except ValueError:
        raise ExportError(f"cannot reach {url}: the port is not a number in 1..65535") from None
    if not u.hostname:
        raise ExportError(f"cannot reach {url}: no host in the URL")
    try:
        socket.create_connection((u.hostname, port), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise ExportError(
            f"cannot reach {url}: {_os_reason(exc)}; is the server running (check --endpoint or LANGSMITH_ENDPOINT)?"
        ) from None


def _retry_config():
    """Few, quick retries inside one request (the client retries each request three times besides)."""
    from langsmith.utils import LangSmithRetry

    return LangSmithRetry(
        total=1,
        connect=0,
        backoff_factor=0.5,
        status_forcelist=[429, 500, 502, 503, 504, 408, 425],
        allowed_methods=None,
        raise_on_redirect=False,
        raise_on_status=False,
        respect_retry_after_header=True,
    )


def _os_reason(exc: OSError) -> str:
    return (
        (exc.strerror or str(exc) or type(exc).__name__).strip().rstrip(".").lower()
        if not isinstance(exc, TimeoutError)
        else f"no answer within {CONNECT_TIMEOUT_S} s"
    )


def reason(exc: BaseException, limit: int = 200) -> str:
    """Why an export failed, briefly: the operating system's reason deepest in the chain of causes
    (a refused or reset connection, a timeout), else the error's first line, cut to ``limit``
    characters (never the transport's long repr of its retries)."""
    seen: set[int] = set()
    todo, found = [exc], None
    while todo:
        e = todo.pop()
        if id(e) in seen or len(seen) > 50:
            continue
        seen.add(id(e))
        if isinstance(e, OSError) and not type(e).__module__.startswith(("urllib3", "requests", "langsmith")):
            found = e  # the socket's own error (refused, reset, closed without an answer, timed out)
        nxt = [e.__cause__, e.__context__, getattr(e, "reason", None), *getattr(e, "args", ())]
        todo += [x for x in nxt if isinstance(x, BaseException)]
    if found is not None:
        return f"connection failed: {_os_reason(found)}"
    first = (str(exc).splitlines() or [type(exc).__name__])[0]
    first = first.split(" HTTPError(")[0].split(" ConnectionError(")[0]
    return first if len(first) <= limit else first[: limit - 3] + "..."
