"""Record every graph run, node run, model call and tool call in the LangSmith run format.

:class:`JsonlTracer` is a LangChain callback handler. Pass it (or everything
:func:`tracing_callbacks` returns) in ``config["callbacks"]`` of ``invoke``/``ainvoke``/
``stream``/``astream``; when a root run ends it appends one JSON line per run of that run's
tree (root graph run, each node's chain run, each ``llm`` run, each ``tool`` run) to
``traces.jsonl``. Each line loads into :class:`langsmith.schemas.Run`.

Every value written goes through :func:`to_jsonable` (numpy arrays summarized above a size,
long strings and lists cut, anything unknown turned into its ``repr``) and :func:`scrub`
(secrets replaced by ``"***"``). See docs/traces.md.

The package's modules, lowest first (each imports only those above it):

* :mod:`.scrubbing` secret scrubbing (:func:`scrub`, :func:`secret_values`, :func:`is_secret_key`);
* :mod:`.convert`   JSON conversion of values and its limits (:func:`to_jsonable`,
  :func:`fit_line`, :func:`safe_value`, ``MAX_*``);
* :mod:`.labels`    who did what: the metadata, tags and run names of runs and calls;
* :mod:`.charges`   what the ledger charged for each traced model call (matched by call id);
* :mod:`.tracer`    the callback handler, its crash-safe journal and :func:`recover_interrupted`;
* :mod:`.live`      :func:`tracing_callbacks` and the scrubbing client of live LangSmith tracing;
* :mod:`.export`    reading ``traces.jsonl`` back (:func:`load_runs`) and :func:`export_traces`.

Every public name is re-exported here: ``from cooplab.graphs.tracing import X`` is the
supported import. The limits (``MAX_STR_CHARS``, ...) are read from :mod:`.convert` when they
are used, so change them there (``cooplab.graphs.tracing.convert.MAX_STR_CHARS = ...``), not
on the package.
"""

from __future__ import annotations

from cooplab.graphs.rundir import TRACES_FILE

from .charges import Charge, ledger_charges, ledger_totals, match_charges
from .convert import (
    LIST_KEEP,
    MAX_ARRAY_ITEMS,
    MAX_DEPTH,
    MAX_LINE_CHARS,
    MAX_LIST_ITEMS,
    MAX_MESSAGES,
    MAX_STR_CHARS,
    fit_line,
    safe_value,
    to_jsonable,
)
from .export import (
    ExportConfigError,
    ExportError,
    TraceFileError,
    export_traces,
    load_runs,
    traces_path,
)
from .labels import (
    CACHED,
    agent_name,
    call_config,
    call_labels,
    call_name,
    is_cached,
    labelled,
    replay_config,
    run_metadata,
    run_tags,
)
from .live import live_tracing_enabled, scrubbing_client, tracing_callbacks
from .scrubbing import REDACTED, is_secret_key, scrub, secret_values
from .tracer import INTERRUPTED, JsonlTracer, journal_path, recover_interrupted

__all__ = [
    "Charge",
    "ledger_charges",
    "ledger_totals",
    "match_charges",
    "CACHED",
    "agent_name",
    "call_config",
    "call_labels",
    "call_name",
    "is_cached",
    "labelled",
    "replay_config",
    "run_metadata",
    "run_tags",
    "INTERRUPTED",
    "LIST_KEEP",
    "MAX_ARRAY_ITEMS",
    "MAX_DEPTH",
    "MAX_LINE_CHARS",
    "MAX_LIST_ITEMS",
    "MAX_MESSAGES",
    "MAX_STR_CHARS",
    "REDACTED",
    "TRACES_FILE",
    "ExportConfigError",
    "ExportError",
    "JsonlTracer",
    "TraceFileError",
    "export_traces",
    "fit_line",
    "is_secret_key",
    "journal_path",
    "live_tracing_enabled",
    "load_runs",
    "recover_interrupted",
    "safe_value",
    "scrub",
    "scrubbing_client",
    "secret_values",
    "to_jsonable",
    "traces_path",
    "tracing_callbacks",
]
