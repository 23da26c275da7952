"""The files a run writes, as typed models: ``summary.json`` (:class:`RunSummary`) and the manifest
of a folder of many runs (``manifest.json``, :class:`Manifest`). Every writer and every reader goes
through this module, so a damaged file is found in one place and said in one line::

    runs/a/summary.json: ledger.calls: Input should be a valid integer (got "x")

**summary.json** is one flat JSON object: the runner's fields (:data:`COMMON`: ``version``, ``task``,
``agents``, ``status``, ``seed``, ``wall_seconds``, ``message``, ``error_log``, ``ledger``, ``llm``,
``decisions``, ``figure_error``) beside the task's own results. A task declares its results as a
pydantic model (``Task.Results``, a :class:`Results` subclass: ``tasks/cpr/results.py`` is an
example); in Python they are ``summary.results`` (``run.summary.results.survival_time.mean``), on
disk they sit at the top level, so the file (and ``--json``) reads as before. A task that declares
no model gets :class:`FreeResults`: any JSON values, finite numbers only.

Rules every model here follows (Inspect's ``EvalLog`` is the pattern):

- **Strict when read.** Files are validated with ``strict=True``: ``"3"`` is not a count, ``1.0`` is
  not an integer, ``true`` is not a number; every float is finite (``NaN`` and ``Infinity`` are
  damage: the writer turns a non-finite number into ``null`` and the schema says which fields may be
  null); counts are never negative; text has a length cap.
- **Unknown fields are kept, typed.** A field the schema does not name (a file of a newer
  cooplab, a task's field added after its model) is read and written back as it is, but it must
  still be JSON with finite numbers (``JsonValue``): an old or newer run folder opens, and a
  damaged value is still one line. The writer validates before it writes, so a task whose outputs
  leave its own schema fails in its own tests.
- **Versions.** ``version`` is written in every file; a summary without one was written before the
  schema (version 1) and is read through :func:`cooplab.graphs.formats.upgrade_summary`, beside the
  converters of every earlier shape of the run files and the format's version (``FORMAT``, 0.1,
  declared stable); ``cooplab migrate`` (:mod:`cooplab.runs.migrate`) rewrites old files in place.

**manifest.json** is written by every command that makes a folder of many runs (a grid sweep, a
game profile, a bench, a calibration): the kind of folder, the task, and its cells (name, run
directory relative to the folder, labels, status). A folder made before manifests existed is read
through :func:`manifest_of`, which infers the same model from the earlier layouts (``cells/``,
``runs/``, ``games/``, ``items/``).

This module sits in the graph layer (below the engine, the tasks and the evals), so all of them
use it; it imports nothing above :mod:`cooplab.graphs.rundir` and :mod:`cooplab.limits`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, ClassVar, Generic, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    SerializeAsAny,
    StringConstraints,
    ValidationError,
    model_serializer,
    model_validator,
)

from cooplab.graphs.formats import FORMAT, MANIFEST_VERSION, SUMMARY_VERSION, upgrade_summary  # noqa: F401
from cooplab.graphs.rundir import RunDirError, jsonable, read_json, write_json
from cooplab.limits import MAX_SEED, one_line

#: the file names
SUMMARY_FILE = "summary.json"
MANIFEST_FILE = "manifest.json"
#: characters of a free text field (a message, an error) at most; the writer cuts longer ones
MAX_TEXT = 4000
#: characters of a name (a task, a model, a kind of charge, a label) at most
MAX_NAME = 400
#: characters of a path (a scripted model's file, a run directory) at most
MAX_PATH = 4096

#: an exact amount (USD, tokens, seconds) at most: more than any run spends, less than a float's range
MAX_EXACT = Decimal("1e15")

#: a run's end: ran to its last round, stopped cleanly (a model unreachable: resumable), its budget
#: spent, or an unexpected error (error.log beside it)
STATUSES = ("completed", "stopped", "budget_exhausted", "failed")


class SchemaError(RunDirError):
    """A file of a run directory that does not match its schema (one line: the file, the field,
    what is wrong and what was found)."""


# --- the one formatter -------------------------------------------------------------------------
#: pydantic's tags of a union's members and of wrapped validators in an error's location (not field names)
_TAG = re.compile(
    r"(?:\[key\]|int|float|str|bool|none|list|dict|tuple|json-or-python|is-instance|lax-or-strict|"
    r"[a-z]+(?:-[a-z]+)*\[.*\])"
)


def _got(value: Any) -> str:
    """A value as an error line shows it: JSON spelling, cut short."""
    if isinstance(value, Mapping):
        return "an object" if value else "{}"
    if isinstance(value, (list, tuple)):
        return f"a list of {len(value)}" if value else "[]"
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, str):
        return json.dumps(value[:60] + ("..." if len(value) > 60 else ""), ensure_ascii=False)
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = type(value).__name__
    return text if len(text) <= 60 else text[:57] + "..."


def _part(x: Any) -> str:
    """One part of a field's path as a line shows it: a key from the file is cut short and spelled
    as JSON when it is not plain printable text."""
    text = str(x)
    if not text.isprintable():
        text = json.dumps(text, ensure_ascii=True)
    return text if len(text) <= 40 else text[:37] + "..."


def error_line(exc: ValidationError, where: str | None = None, *, hide: tuple[str, ...] = ("results",)) -> str:
    """A pydantic ``ValidationError`` as one line: ``WHERE: field.path: what is wrong (got VALUE)``,
    from its first error. ``hide``: location parts that are not in the file (the results block sits
    at the top level of summary.json); union and validator tags are left out too."""
    e = exc.errors(include_url=False)[0]
    loc = ".".join(
        _part(x)
        for i, x in enumerate(e["loc"])
        if not (i == 0 and x in hide) and not (isinstance(x, str) and _TAG.fullmatch(x))
    )
    msg = str(e["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    kind = e.get("type", "")
    if kind == "extra_forbidden":
        msg = "unknown field (not one this version of cooplab writes)"
    text = f"{loc}: {msg}" if loc else msg
    if kind not in ("missing", "extra_forbidden") and loc and "input" in e and not msg.endswith(")"):
        text += f" (got {_got(e['input'])})"
    text = one_line(text, 600)
    return f"{where}: {text}" if where else text


# --- field types --------------------------------------------------------------------------------
#: a count: not negative, and no more than a signed 64-bit integer holds (a Parquet column, numpy)
Count = Annotated[int, Field(ge=0, le=2**63 - 1)]
Seconds = Annotated[float, Field(ge=0)]
Usd = Annotated[float, Field(ge=0)]
Share = Annotated[float, Field(ge=0, le=1)]
Seed = Annotated[int, Field(ge=0, le=MAX_SEED)]
Name = Annotated[str, StringConstraints(min_length=1, max_length=MAX_NAME)]
#: how a run ended (``summary.json``'s ``status``)
RunStatus = Literal["completed", "stopped", "budget_exhausted", "failed"]
#: what a folder of many runs is (``manifest.json``'s ``kind``)
ManifestKind = Literal["sweep", "profile", "bench", "calibration"]
Text = Annotated[str, StringConstraints(max_length=MAX_TEXT)]
PathText = Annotated[str, StringConstraints(min_length=1, max_length=MAX_PATH)]
#: a number written as given: an integer stays an integer (a float field would write 6 as 6.0)
Number = int | float


def _exact(text: str) -> str:
    """An exact amount (a decimal number as text, as the ledger sums money): finite and not negative."""
    if len(text) > 80:
        raise ValueError("an exact amount has at most 80 characters")
    try:
        d = Decimal(text)
    except InvalidOperation:
        raise ValueError('must be a decimal number as text, e.g. "0.0123"') from None
    if not d.is_finite() or d < 0:
        raise ValueError("must be a finite amount of at least 0")
    if d > MAX_EXACT or (d and d.adjusted() < -40):
        raise ValueError(f"must be at most {MAX_EXACT} and not smaller than 1e-40 (unless 0)")
    return text


#: an exact amount in USD (or units: tokens, seconds), a decimal number as text (``"0.0061210"``)
Exact = Annotated[str, AfterValidator(_exact)]


class FileModel(BaseModel):
    """The base of every model here: unknown fields kept as JSON, non-finite floats refused (see the
    module). A field whose default is None is written only when it was given (an LLM run's own
    fields, a stopped run's ``censored``), so files keep the shape they had before the schema."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False, validate_default=False)
    #: fields the schema does not name are kept, as JSON values with finite numbers
    __pydantic_extra__: dict[str, JsonValue] = Field(init=False)  # type: ignore[assignment]

    @model_serializer(mode="wrap")
    def _given(self, handler: Any) -> Any:
        d = handler(self)
        if isinstance(d, dict):
            for name in _unless_given(type(self)):
                if name not in self.model_fields_set:
                    d.pop(name, None)
        return d


def _unless_given(cls: type[BaseModel]) -> tuple[str, ...]:
    """The fields of ``cls`` written only when given (their default is None)."""
    got = cls.__dict__.get("_optional_fields")
    if got is None:
        got = tuple(
            n
            for n, f in cls.model_fields.items()
            if not f.is_required() and f.default is None and f.default_factory is None
        )
        type.__setattr__(cls, "_optional_fields", got)
    return got


# --- the runner's fields ------------------------------------------------------------------------
class KindTotals(FileModel):
    """One kind of charge of the ledger (``tokens``, ``sandbox_seconds``)."""

    entries: Count = Field(description="charges of this kind")
    units: Exact = Field(description="tokens in and out for tokens; seconds (or the kind's unit) otherwise")
    cost_usd: Exact = Field(description="what they cost, exact")


class LedgerTotals(FileModel):
    """What the credit ledger holds at the end of the run (:meth:`cooplab.graphs.ledger.Ledger.totals`)."""

    calls: Count = Field(description="model calls charged (cache replays included)")
    cached_calls: Count = Field(description="of them, answered from the response cache")
    usage_errors: Count | None = Field(
        description="calls whose reported usage was unusable (charged at their bound); "
        "null in runs made before it was counted"
    )
    input_tokens: Count
    output_tokens: Count
    cost_usd: Exact = Field(description="what the run spent, exact (USD)")
    cost_usd_float: Usd = Field(description="the same as a number")
    budget_usd: Exact | None = Field(description="the cap (USD), null for none")
    rates_per_1k: dict[Name, Annotated[list[Exact], Field(min_length=2, max_length=2)]] = Field(
        description='USD per 1,000 input and output tokens, per model ("default": the run\'s nominal prices)'
    )
    by_kind: dict[Name, KindTotals] | None = Field(
        description="per kind of charge; null in runs made before it was recorded"
    )
    unit_rates: dict[Name, Exact] | None = Field(
        description="USD per unit of the other kinds (sandbox_seconds); null in runs made before it was recorded"
    )

    @model_validator(mode="after")
    def _consistent(self) -> "LedgerTotals":
        if self.cached_calls > self.calls:
            raise ValueError(f"cached_calls ({self.cached_calls}) cannot be more than calls ({self.calls})")
        if self.usage_errors is not None and self.usage_errors > self.calls:
            raise ValueError(f"usage_errors ({self.usage_errors}) cannot be more than calls ({self.calls})")
        return self


class JudgeLedger(FileModel):
    """What a science run's judge spent (its own ledger; the fields it reports)."""

    calls: Count | None = None
    cached_calls: Count | None = None
    input_tokens: Count | None = None
    output_tokens: Count | None = None
    cost_usd_float: Usd | None = None


class PromptReuse(FileModel):
    """What a model read and reused of the prompts of the run's live calls (the local model's kept
    states, a provider's prompt cache)."""

    prompt_tokens: Count
    tokens_reused: Count
    tokens_read: Count
    reused_share: Share | None = Field(description="null before any live call")


class LLMStats(FileModel):
    """The response cache of an LLM run (and what its model reused of the prompts)."""

    cache_hits: Count
    cache_misses: Count
    prompt_reuse: PromptReuse | None = None
    sandbox_replayed: Count | None = Field(
        default=None, description="run_code calls answered from the cache (no sandbox ran them); null without a sandbox"
    )
    sandbox_executed: Count | None = Field(default=None, description="run_code calls run in a sandbox")


class DecisionStats(FileModel):
    """The structured decisions of an LLM run (decisions.* has one row each)."""

    count: Count
    fallback_used: Count = Field(description="decisions that fell back to the documented default")
    mean_attempts: Annotated[float, Field(ge=0)] = Field(description="model calls per decision, on average")

    @model_validator(mode="after")
    def _consistent(self) -> "DecisionStats":
        if self.fallback_used > self.count:
            raise ValueError(f"fallback_used ({self.fallback_used}) cannot be more than count ({self.count})")
        return self


# --- the task's results -------------------------------------------------------------------------
class Results(FileModel):
    """The base of a task's results (``Task.Results``): one field per entry of summary.json the task
    writes, with its type and bounds. Fields sit at the top level of the file, so their names must
    differ from the runner's (:data:`COMMON`); :func:`check_results` says so when a task registers.

    ``since_v1``: fields added while summaries had no version, with the value that stands for them
    in a file written before them (None: "not recorded"); :func:`upgrade_summary` fills them in."""

    since_v1: ClassVar[dict[str, Any]] = {}

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> Any:
        """The results from plain Python values as a task computes them: numpy numbers and arrays
        become JSON numbers and lists, a non-finite float becomes null (the field must allow it),
        as the file will hold them."""
        return cls.model_validate(jsonable(dict(values)))

    def flat(self) -> dict[str, Any]:
        """The results as summary.json holds them (JSON values; optional fields only when given)."""
        return self.model_dump(mode="json")


class FreeResults(Results):
    """The results of a task that declares no model: any JSON values (finite numbers only), kept
    as the fields every :class:`FileModel` keeps when its schema does not name them."""


R = TypeVar("R", bound=Results)


class RunSummary(FileModel, Generic[R]):
    """A run's ``summary.json``: the runner's fields and the task's ``results`` (a ``Task.Results``).

    Dict-style reading (``summary["ledger"]["calls"]``, ``summary.get("message")``, ``"x" in
    summary``) reads the file's JSON form, as code written before the schema did; new code reads
    the attributes (``summary.ledger.calls``, ``summary.results.survival_time.mean``)."""

    version: Literal[2] = Field(default=2, description="the format of this file (files without it are version 1)")
    task: Name = Field(description="the registered task that ran")
    agents: Name | None = Field(description="who decided (rule, llm, or the task's own kinds)")
    status: RunStatus = Field(
        description="completed; stopped (a model or service unreachable: resumable); budget_exhausted; failed "
        "(error.log)"
    )
    seed: Seed | None = Field(description="the run's seed")
    wall_seconds: Seconds | None = Field(default=None, description="wall time of the last invocation (run or resume)")
    message: Text | None = Field(default=None, description="why the run stopped early, in one line")
    error_log: Text | None = Field(
        default=None, description="the traceback's file, when the run failed before any state could be read"
    )
    ledger: LedgerTotals | None = Field(default=None, description="the credit ledger's totals (LLM runs)")
    llm: LLMStats | None = Field(default=None, description="the response cache (LLM runs)")
    decisions: DecisionStats | None = Field(default=None, description="the structured decisions (LLM runs)")
    figure_error: Text | None = Field(
        default=None, description="why figures/run.png could not be drawn (the run is complete)"
    )
    results: SerializeAsAny[R] | None = Field(
        default=None,
        description="the task's results (at the top level of the file); "
        "null only in a failed run's summary of essentials",
    )

    # --- the file's flat form <-> the model ------------------------------------------------
    @model_validator(mode="before")
    @classmethod
    def _nest(cls, data: Any) -> Any:
        """summary.json keeps the results at the top level: gather them under ``results``."""
        if not isinstance(data, Mapping):
            return data
        rest = [k for k in data if k not in COMMON]
        if rest == ["results"] or not rest:
            return data  # already nested (Python), or no results at all
        out = {k: v for k, v in data.items() if k in COMMON}
        out["results"] = {k: data[k] for k in rest}
        return out

    @model_validator(mode="after")
    def _complete(self) -> "RunSummary[R]":
        if self.results is None and self.status != "failed":
            raise ValueError(
                f"a run with status {self.status} has the task's results beside the runner's fields; this file has none"
            )
        if self.wall_seconds is None and self.results is not None:
            raise ValueError("wall_seconds: Field required")
        if self.agents == "llm" and self.status != "failed":
            for name in ("ledger", "llm"):
                if getattr(self, name) is None:
                    raise ValueError(
                        f"{name}: required in an LLM run's summary (its ledger's totals and response cache)"
                    )
        return self

    @model_serializer(mode="wrap")
    def _given(self, handler: Any) -> dict[str, Any]:  # the same name: it replaces FileModel's
        d = handler(self)
        res = d.pop("results", None) or {}
        out = {k: d[k] for k in ("version", "task", "agents", "status")}
        clash = sorted(set(res) & set(COMMON))
        if clash:  # a results model that breaks check_results; never write a file that reads back differently
            raise ValueError(f"the results field {clash[0]!r} is one of the runner's fields; rename it")
        out.update(res)
        out["seed"] = d["seed"]
        out.update({k: v for k, v in d.items() if k not in out and v is not None})
        return out

    # --- reading it like the JSON it was -----------------------------------------------------
    def as_json(self) -> dict[str, Any]:
        """The file's JSON object (what summary.json holds and ``--json`` prints)."""
        return self.model_dump(mode="json")

    def __getitem__(self, key: str) -> Any:
        return self.as_json()[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.as_json().get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self.as_json()

    def keys(self) -> Any:
        return self.as_json().keys()

    def items(self) -> Any:
        return self.as_json().items()

    @property
    def rounds_completed(self) -> int | None:
        """Rounds the run completed, when its task counts them (``results.rounds_completed``)."""
        v = getattr(self.results, "rounds_completed", None)
        return v if isinstance(v, int) else None

    @property
    def cost_usd(self) -> float | None:
        """What the run's LLM calls cost (USD), or None for a run without a ledger."""
        return None if self.ledger is None else self.ledger.cost_usd_float


#: the runner's fields of summary.json (a task's results may not use these names)
COMMON: frozenset[str] = frozenset(RunSummary.model_fields) - {"results"}


def check_results(model: Any, task: str = "task") -> type[Results]:
    """``model`` as a task's results model: a :class:`Results` subclass whose fields are not the
    runner's; a TypeError saying what to change otherwise."""
    if not (isinstance(model, type) and issubclass(model, Results)):
        raise TypeError(f"{task}.Results must be a subclass of cooplab.graphs.runfiles.Results, got {model!r}")
    clash = sorted(set(model.model_fields) & (COMMON | {"results"}))
    if clash:
        raise TypeError(
            f"{task}.Results field {clash[0]!r} is one of summary.json's runner fields "
            f"({', '.join(sorted(COMMON))}); rename it"
        )
    return model


def summary_model(results: type[Results] | None = None) -> type[RunSummary[Any]]:
    """The summary model of a task whose results are ``results`` (None: :class:`FreeResults`)."""
    return RunSummary[results or FreeResults]  # type: ignore[index]


def parse_summary(raw: Any, where: str, results: type[Results] | None = None) -> RunSummary[Any]:
    """A summary from its JSON value (``where``: the file, for the message), upgraded and
    validated; a one-line :class:`SchemaError` otherwise."""
    if not isinstance(raw, dict):
        raise SchemaError(f"{where}: must be a JSON object (a run's summary), got {_got(raw)}")
    version = raw.get("version", 1)
    if version != SUMMARY_VERSION and version != 1:
        raise SchemaError(
            f"{where}: version {_got(version)} is not one this cooplab reads (1 or {SUMMARY_VERSION}); "
            "a newer cooplab wrote it: upgrade cooplab to read it"
        )
    try:
        return summary_model(results).model_validate(upgrade_summary(raw, results), strict=True)
    except ValidationError as exc:
        raise SchemaError(error_line(exc, where)) from None


def read_summary(
    out: str | Path, results: type[Results] | None = None, *, lookup: Callable[[str], Any] | None = None
) -> RunSummary[Any]:
    """``out/summary.json`` as a :class:`RunSummary`, its results validated with ``results`` (the
    task's model) or, given ``lookup`` (task name -> the registered task; the engine passes its
    registry), with the model of the task the file names; else as any JSON. One-line
    :class:`~cooplab.graphs.rundir.RunDirError` for a missing, unreadable or damaged file."""
    path = Path(out) / SUMMARY_FILE
    try:
        raw = read_json(path)
    except FileNotFoundError:
        raise RunDirError(f"{out} has no {SUMMARY_FILE}; is it a finished cooplab run directory?") from None
    except OSError as exc:
        raise RunDirError(f"{path} cannot be read ({exc.strerror or exc})") from None
    if results is None and lookup is not None:
        results = results_for(lookup)(raw.get("task") if isinstance(raw, dict) else None)
    return parse_summary(raw, str(path), results)


def results_for(lookup: Callable[[str], Any] | None) -> Callable[[Any], type[Results] | None]:
    """A task name -> its results model, from a lookup of registered tasks (None when the task is
    unknown, broken, or declares none)."""

    def find(name: Any) -> type[Results] | None:
        if lookup is None or not isinstance(name, str):
            return None
        try:
            model = getattr(lookup(name), "Results", None)
        except Exception:  # noqa: BLE001 - an unknown or broken task: its results are read as any JSON
            return None
        return model if isinstance(model, type) and issubclass(model, Results) else None

    return find


def try_summary(
    out: str | Path, lookup: Callable[[str], Any] | None = None
) -> tuple[RunSummary[Any] | None, str | None]:
    """(the summary, None), (None, None) when there is no summary.json yet, or (None, its one-line
    problem): for readers that show a damaged run rather than stop (the explorer, tables of runs)."""
    if not (Path(out) / SUMMARY_FILE).exists():
        return None, None
    try:
        return read_summary(out, lookup=lookup), None
    except RunDirError as exc:
        return None, str(exc)


def new_summary(
    results_model: type[Results] | None, out: str | Path, *, results: Any = None, **common: Any
) -> RunSummary[Any]:
    """The summary a run is about to write: the runner's fields (``common``) and the task's
    ``results`` (an instance of its model, or a mapping: a task written before results were typed,
    which may also set ``seed``), validated exactly as a reader will validate the file, so what is
    written always reads back. A task whose results leave its model is a one-line
    :class:`SchemaError` naming the field."""
    where = str(Path(out) / SUMMARY_FILE)
    flat: dict[str, Any] = {}
    if isinstance(results, BaseModel):
        flat = results.model_dump(mode="json")
    elif isinstance(results, Mapping):
        flat = dict(results)
        if "seed" in flat:
            common["seed"] = flat.pop("seed")  # the task's own, as before results were typed
        taken = sorted(set(flat) & (COMMON | {"results"}))
        if taken:
            raise SchemaError(
                f"{where}: the {common.get('task')} task's results set {taken[0]!r}, one of the runner's fields; "
                "leave it to the runner, or rename it"
            )
    elif results is not None:
        raise SchemaError(
            f"{where}: the {common.get('task')} task's outputs() must return its Results (or a mapping), "
            f"got {type(results).__name__}"
        )
    for key in ("message", "error_log", "figure_error"):
        if isinstance(common.get(key), str):
            common[key] = one_line(common[key], MAX_TEXT)
    raw = jsonable({**common, **flat})
    raw["version"] = SUMMARY_VERSION
    try:
        return summary_model(results_model).model_validate(raw, strict=True)
    except ValidationError as exc:
        raise SchemaError(
            f"the {common.get('task')} task's summary does not match its schema: {error_line(exc, where)}"
        ) from None


def write_summary(out: str | Path, summary: RunSummary[Any]) -> None:
    """Write ``out/summary.json`` (atomically) from a validated summary."""
    write_json(Path(out) / SUMMARY_FILE, summary.as_json())


# --- a folder of many runs ------------------------------------------------------------------------
def _inside(text: str) -> str:
    """A path relative to the folder that stays inside it (no absolute path, no ``..``)."""
    p = PurePosixPath(text)
    if p.is_absolute() or "\\" in text or any(part in ("..", "") for part in text.split("/")) or text.startswith("~"):
        raise ValueError("must be a path inside the folder (relative, without ..)")
    return text


#: a path inside the folder of many runs (``cells/NAME``)
Inside = Annotated[str, StringConstraints(min_length=1, max_length=MAX_PATH), AfterValidator(_inside)]
KINDS = ("sweep", "profile", "bench", "calibration")


class ManifestCell(FileModel):
    """One run of a folder of many runs."""

    name: Name = Field(description="the cell's name (its run directory's folder name)")
    dir: Inside | None = Field(description="its run directory, relative to the folder (null: not a run directory)")
    labels: dict[Name, JsonValue] = Field(
        default_factory=dict, description="what sets it apart: grid values, seed, game, item"
    )
    status: RunStatus | None = Field(
        default=None,
        description="its summary's status when the manifest was written; null: not run yet (or its summary is damaged: "
        "see error)",
    )
    error: Text | None = Field(default=None, description="why it failed, in one line")


class Manifest(FileModel):
    """``manifest.json`` of a folder of many runs (a sweep, a profile, a bench, a calibration)."""

    version: Literal[1] = Field(default=1, description="the format of this file")
    kind: ManifestKind
    task: Name | None = Field(description="the task every cell runs")
    created: Text | None = Field(default=None, description="when the folder was made (UTC, ISO 8601)")
    updated: Text | None = Field(default=None, description="when this file was last written")
    cells: list[ManifestCell] = Field(default_factory=list)
    outputs: dict[Name, Inside] = Field(
        default_factory=dict, description="the folder's own files: table, analysis, profile, report"
    )
    counts: dict[Name, Count] = Field(
        default_factory=dict, description="what the cells do not list (a calibration's samples)"
    )
    inferred: bool = Field(
        default=False, description="true when read from a folder made before manifests (never written)"
    )

    @model_validator(mode="after")
    def _unique(self) -> "Manifest":
        seen: set[str] = set()
        for c in self.cells:
            if c.name in seen:
                raise ValueError(f"cells: two cells are named {c.name!r}")
            seen.add(c.name)
        return self

    def runs(self, folder: str | Path) -> list[tuple[ManifestCell, Path]]:
        """The cells that are run directories, each with its path under ``folder``."""
        return [(c, Path(folder) / c.dir) for c in self.cells if c.dir is not None]

    def dirs_by(self, folder: str | Path, key: str) -> dict[str, Path]:
        """The run directories under ``folder`` by the value of the cells' label ``key`` as text (a
        game profile's by game); a cell without that label, as in a layout inferred from before
        manifests, by its name; the first cell of a value wins."""
        out: dict[str, Path] = {}
        for c, d in self.runs(folder):
            v = c.labels.get(key, c.name)
            out.setdefault(v if isinstance(v, str) else json.dumps(v), d)
        return out


def dirs_by(folder: str | Path, key: str) -> dict[str, Path]:
    """The run directories of a folder of many runs by the cells' label ``key`` (:meth:`Manifest.dirs_by`;
    earlier layouts through :func:`manifest_of`); {} for a folder that is none; a damaged manifest is a
    one-line RunDirError."""
    m = manifest_of(folder)
    return {} if m is None else m.dirs_by(Path(folder), key)


#: the folders the layouts before manifests kept their run directories in
RUN_FOLDERS = ("cells", "runs", "games", "items")


def write_manifest(folder: str | Path, manifest: Manifest) -> Manifest:
    """Write ``folder/manifest.json`` (validated, atomically; ``created`` kept from the one there)."""
    from cooplab.graphs.rundir import now

    path = Path(folder) / MANIFEST_FILE
    created = manifest.created
    if created is None and path.is_file():
        try:
            created = read_manifest(folder).created
        except RunDirError:
            created = None
    m = Manifest.model_validate(
        {**manifest.model_dump(mode="json", exclude={"inferred"}), "created": created or now(), "updated": now()},
        strict=True,
    )
    write_json(path, m.model_dump(mode="json", exclude={"inferred"}))
    return m


def read_manifest(folder: str | Path) -> Manifest:
    """``folder/manifest.json`` as a :class:`Manifest`; a one-line RunDirError when it is missing or damaged."""
    path = Path(folder) / MANIFEST_FILE
    try:
        raw = read_json(path)
    except FileNotFoundError:
        raise RunDirError(f"{folder} has no {MANIFEST_FILE}; is it a folder of many runs?") from None
    except OSError as exc:
        raise RunDirError(f"{path} cannot be read ({exc.strerror or exc})") from None
    if not isinstance(raw, dict):
        raise SchemaError(f"{path}: must be a JSON object (a folder's manifest), got {_got(raw)}")
    if raw.get("version", 1) != MANIFEST_VERSION:
        raise SchemaError(
            f"{path}: version {_got(raw.get('version'))} is not one this cooplab reads ({MANIFEST_VERSION}); "
            "a newer cooplab wrote it: upgrade cooplab to read it"
        )
    try:
        return Manifest.model_validate(
            {k: v for k, v in raw.items() if k != "inferred"} if raw.get("inferred") is False else raw, strict=True
        )
    except ValidationError as exc:
        raise SchemaError(error_line(exc, str(path))) from None


def _is_run(d: Path) -> bool:
    return d.is_dir() and not d.is_symlink() and ((d / "config.json").is_file() or (d / SUMMARY_FILE).is_file())


def manifest_of(folder: str | Path) -> Manifest | None:
    """The manifest of a folder of many runs: its manifest.json (one-line RunDirError when damaged),
    else the one inferred from a layout written before manifests existed (None: not such a folder).

    Earlier layouts: a grid sweep's ``cells/`` (and ``table.csv``), science sweeps' ``runs/``, a game
    profile's ``games/`` with ``profile.json`` or ``profile-config.json``, a bench's ``items/`` with
    ``bench.json``, a calibration's ``design.json`` with ``samples.jsonl``."""
    folder = Path(folder)
    if (folder / MANIFEST_FILE).is_file():
        return read_manifest(folder)
    if (folder / "design.json").is_file() and (folder / "samples.jsonl").is_file():
        return Manifest(
            kind="calibration",
            task=None,
            inferred=True,
            outputs={
                k: v
                for k, v in (("summary", SUMMARY_FILE), ("report", "report.md"), ("samples", "samples.csv"))
                if (folder / v).is_file()
            },
        )
    cells: list[ManifestCell] = []
    for sub in RUN_FOLDERS:
        d = folder / sub
        if not d.is_dir() or d.is_symlink():
            continue
        try:
            entries = sorted(d.iterdir())
        except OSError:
            continue
        for c in entries:
            if _is_run(c) and c.name.isprintable() and len(c.name) <= MAX_NAME:
                cells.append(ManifestCell(name=c.name, dir=f"{sub}/{c.name}", labels={}, status=None))
    if not cells:
        return None
    if (folder / "profile.json").is_file() or (folder / "profile-config.json").is_file():
        kind, task = "profile", "game"
    elif (folder / "bench.json").is_file() or (folder / "items").is_dir():
        kind, task = "bench", "science"
    else:
        kind, task = "sweep", None
    outputs = {
        k: v
        for k, v in (
            ("table", "table.csv"),
            ("analysis", "analysis"),
            ("profile", "profile.json"),
            ("summary", SUMMARY_FILE),
            ("report", "report.md"),
            ("scores", "scores.csv"),
        )
        if (folder / v).exists()
    }
    return Manifest(kind=kind, task=task, cells=cells, outputs=outputs, inferred=True)


def is_many_runs(folder: str | Path) -> bool:
    """Whether ``folder`` is a folder of many runs (a manifest, or an earlier layout's files), so
    that its own summary.json (a bench's, a calibration's) is not read as a run's."""
    folder = Path(folder)
    return (
        (folder / MANIFEST_FILE).is_file()
        or ((folder / "design.json").is_file() and (folder / "samples.jsonl").is_file())
        or (folder / "bench.json").is_file()
    )
