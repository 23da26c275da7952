"""Science teams on your own data: ``cooplab run science --dataset PATH [--dataset PATH ...]
--task-file TASK.md [--truth TRUTH.json] ...`` and, from Python, :func:`custom_config`.

A custom run's config.json holds ``custom``: the task text (it replaces the built-in task text in
the team prompts), the input files (path, SHA-256, format, detected encoding and separator, shape)
and the truth (the facts as the scorer reads them, or null). ``prepare_run`` reads every input
file (the separator and the encoding are sniffed) and writes one canonical file the sandbox loads
as ``df``: ``dataset/data.csv`` (UTF-8, comma) for one CSV, ``dataset/data.parquet`` for one
Parquet file, and for several files ``dataset/data.csv`` holding them side by side, which the
``run_code`` tool turns into a dict of frames keyed by file stem (:data:`MULTI_PREAMBLE`).

Truth (optional) is a JSON object ``{"facts": [...]}``; each fact has a ``name`` and a ``kind``:
``number`` (``value``, ``tolerance``), ``category`` (``value``, optional ``alternatives``) or
``keywords`` (``value``: a list); ``context`` (phrases naming the finding; default: the name with
spaces) and ``statement`` (a sentence a correct report contains) are optional. The facts map onto
the built-in tasks' fact kinds number, label and set, so accuracy is scored by the same matching.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from cooplab.limits import sha256_file

MAX_TASK_CHARS = 20_000
SNIFF_BYTES = 64 * 1024
META_COLUMN = "__cooplab_frames__"
#: run before an agent's code when several files were given: the combined frame becomes a dict of
#: frames keyed by file stem (again after a session restart, which reloads the combined file)
MULTI_PREAMBLE = (
    "if '_cooplab_frames' not in globals() and hasattr(globals().get('df'), 'columns') and "
    f"{META_COLUMN!r} in df.columns: import json as _cj; _cm = _cj.loads(df[{META_COLUMN!r}].dropna().iloc[0]); "
    "df = {f['stem']: df.iloc[:f['rows']][f['cols']].astype(f['dtypes']).set_axis(f['names'], "
    "axis=1).reset_index(drop=True) "
    "for f in _cm}; _cooplab_frames = list(df)\n"
)


class OwnDataError(ValueError):
    """A custom task's file or truth cannot be used (one line)."""


# --- reading unfamiliar tables ---------------------------------------------------------------------
def _encoding(raw: bytes) -> str:
    if raw.startswith(b"\xef\xbb\xbf"):
        return "utf-8-sig"
    try:
        raw.decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError:
        pass
    try:
        raw.decode("cp1252")
        return "cp1252"
    except UnicodeDecodeError:
        return "latin-1"


def _separator(sample: str) -> str:
    lines = [ln for ln in sample.splitlines()[:50] if ln.strip()]
    if len(lines) > 1 and not sample.endswith("\n"):
        lines = lines[:-1]  # a line cut by the sample's end
    try:
        return csv.Sniffer().sniff("\n".join(lines), delimiters=",;\t|").delimiter
    except csv.Error:
        counts = {d: lines[0].count(d) for d in ",;\t|"} if lines else {}
        best = max(counts, key=lambda d: counts[d]) if counts else ","
        return best if counts.get(best) else ","


def read_table(path: Path | str) -> tuple[Any, dict[str, Any]]:
    """(frame, info) of one input file: CSV/TSV in any common encoding and separator, or Parquet.
    OwnDataError (one line) for a file that cannot be read."""
    import pandas as pd

    p = Path(path)
    if not p.exists():
        raise OwnDataError(f"dataset {p} does not exist")
    if not p.is_file():
        raise OwnDataError(f"dataset {p} is not a file")
    size = p.stat().st_size
    if size == 0:
        raise OwnDataError(f"dataset {p} is empty")
    with open(p, "rb") as f:
        head = f.read(SNIFF_BYTES)
    info: dict[str, Any] = {"path": str(p.resolve()), "stem": p.stem, "bytes": size, "sha256": sha256_file(p)}
    if head.startswith(b"PAR1") or p.suffix.lower() in (".parquet", ".pq"):
        try:
            df = pd.read_parquet(p)
        except ImportError:
            raise OwnDataError(f"dataset {p}: reading Parquet needs pyarrow (pip install pyarrow)") from None
        except Exception as exc:  # noqa: BLE001 - any reader error is the file's problem
            raise OwnDataError(f"dataset {p} is not a readable Parquet file ({type(exc).__name__})") from None
        info.update(format="parquet", encoding=None, separator=None)
    else:
        if b"\x00" in head:
            raise OwnDataError(f"dataset {p} looks binary (NUL bytes); give a CSV/TSV text file or Parquet")
        raw = p.read_bytes()
        enc = _encoding(raw)
        sep = _separator(head.decode(enc, errors="replace"))
        try:
            df = pd.read_csv(io.BytesIO(raw), sep=sep, encoding=enc, low_memory=False)
        except Exception as exc:  # noqa: BLE001
            msg = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
            raise OwnDataError(f"dataset {p} cannot be read as a table ({msg})") from None
        info.update(format="csv", encoding=enc, separator=sep)
    if df.shape[0] == 0 or df.shape[1] == 0:
        raise OwnDataError(f"dataset {p} has no data rows (shape {df.shape[0]} x {df.shape[1]})")
    info.update(rows=int(df.shape[0]), columns=int(df.shape[1]))
    return df, info


def inspect_datasets(paths: Sequence[Path | str], *, columns: list[str] | None = None) -> list[dict[str, Any]]:
    """Read every input (checked before a run starts) and return their infos; stems must differ.
    ``columns``: a list that gets every input's column names (the candidates of a keywords fact)."""
    if not paths:
        raise OwnDataError("give at least one --dataset")
    infos = []
    for p in paths:
        df, info = read_table(p)
        infos.append(info)
        if columns is not None:
            columns.extend(str(c) for c in df.columns)
    stems = [i["stem"] for i in infos]
    dup = next((s for s in stems if stems.count(s) > 1), None)
    if dup is not None:
        raise OwnDataError(f"two datasets have the file stem {dup!r}; the frames are keyed by stem, so rename one")
    return infos


#: a keywords fact gets the data's columns as its candidates only up to this many columns
MAX_UNIVERSE = 500


def _words(text: str) -> str:
    return " " + " ".join(re.findall(r"[^\W_]+", text.lower())) + " "


def with_candidates(facts: list[dict[str, Any]], columns: Sequence[str]) -> list[dict[str, Any]]:
    """``facts`` with every keywords (set) fact given the data's other columns as its
    ``universe``: a column the report names in the fact's context that is not a keyword then
    counts against the fact, and a list of every column is an enumeration, not a finding. A column
    whose words contain a keyword's, or are contained in them (``rainfall_mm`` for ``rainfall``),
    or are in the fact's context (``yield`` in "drivers of yield") is no candidate against it;
    with more than :data:`MAX_UNIVERSE` columns no universe is set."""
    names = list(dict.fromkeys(c for c in columns if c.strip()))
    if len(names) > MAX_UNIVERSE:
        return facts
    out = []
    for f in facts:
        if f["kind"] == "set" and "universe" not in f:
            keys = [_words(k) for k in f["value"]]
            context = " ".join(_words(c) for c in f["context"])
            others = [
                c for c in names if _words(c) not in context and not any(k in _words(c) or _words(c) in k for k in keys)
            ]
            if others:
                f = {**f, "universe": others}
        out.append(f)
    return out


def write_canonical(infos: list[dict[str, Any]], d: Path) -> Path:
    """Write the file the sandbox pre-loads (see the module docstring) into ``d``; return it."""
    import pandas as pd

    d.mkdir(parents=True, exist_ok=True)
    frames = [read_table(i["path"])[0] for i in infos]
    if len(frames) == 1:
        if infos[0]["format"] == "parquet":
            target = d / "data.parquet"
            target.write_bytes(Path(infos[0]["path"]).read_bytes())
        else:
            target = d / "data.csv"
            frames[0].to_csv(target, index=False)
        return target
    parts, meta = [], []
    for k, (info, f) in enumerate(zip(infos, frames, strict=False)):
        # dtypes as read back from a CSV of this frame (what a single file would give)
        back = pd.read_csv(io.StringIO(f.to_csv(index=False)), low_memory=False)
        cols = [f"f{k}c{j}" for j in range(back.shape[1])]
        meta.append(
            {
                "stem": info["stem"],
                "rows": int(back.shape[0]),
                "cols": cols,
                "names": [str(c) for c in back.columns],
                "dtypes": {c: str(t) for c, t in zip(cols, back.dtypes, strict=False)},
            }
        )
        parts.append(back.set_axis(cols, axis=1))
    n = max(len(x) for x in parts)
    parts.append(pd.DataFrame({META_COLUMN: [json.dumps(meta)] + [None] * (n - 1)}))
    combined = pd.concat(parts, axis=1)
    target = d / "data.csv"
    combined.to_csv(target, index=False)
    return target


def data_note(infos: list[dict[str, Any]]) -> str:
    """What the teams are told about the data (appended to the task text)."""

    def shape(i: dict[str, Any]) -> str:
        return f"{i['rows']} rows x {i['columns']} columns"

    if len(infos) == 1:
        i = infos[0]
        return f"DATA: the file {Path(i['path']).name} ({shape(i)}) is pre-loaded as the pandas DataFrame `df`."
    lines = ["DATA: `df` is a dict of pandas DataFrames keyed by file stem:"]
    lines += [f"- df[{i['stem']!r}]: {Path(i['path']).name} ({shape(i)})" for i in infos]
    return "\n".join(lines)


# --- the task text ----------------------------------------------------------------------------------
def read_utf8(path: Path | str, what: str, error: type[ValueError] = OwnDataError) -> str:
    """The text of a UTF-8 file (a BOM is dropped), else ``error``: one line naming ``what`` and why."""
    p = Path(path)
    if not p.is_file():
        raise error(f"{what} {p} does not exist or is not a file")
    try:
        return p.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise error(f"{what} {p} is not UTF-8 text") from None


def read_task_file(path: Path | str) -> str:
    p = Path(path)
    text = read_utf8(p, "task file").strip()
    if not text:
        raise OwnDataError(f"task file {p} is empty; describe what the teams should find out")
    if len(text) > MAX_TASK_CHARS:
        raise OwnDataError(f"task file {p} has {len(text)} characters; at most {MAX_TASK_CHARS}")
    return text


# --- truth ------------------------------------------------------------------------------------------
class _Fact(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)

    name: str = Field(min_length=1, max_length=100, pattern=r"\S")
    context: list[str] | None = Field(
        None, description="Phrases that name the finding in a report (default: the name)."
    )
    statement: str | None = Field(None, max_length=2000, description="A sentence a correct report contains.")

    @field_validator("context")
    @classmethod
    def _ctx(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and (not v or not all(c.strip() for c in v)):
            raise ValueError("context must be a non-empty list of non-empty phrases")
        return v


class NumberFact(_Fact):
    kind: Literal["number"]
    value: float
    tolerance: float = Field(0.0, ge=0)

    @field_validator("value", "tolerance", mode="before")
    @classmethod
    def _num(cls, v: Any) -> Any:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError(f"must be a finite number, got {v!r}")
        return float(v)


class CategoryFact(_Fact):
    kind: Literal["category"]
    value: str = Field(min_length=1, max_length=200, pattern=r"\S")
    alternatives: list[str] = Field(
        default_factory=list, description="The other possible answers (a report naming one is wrong)."
    )


class KeywordsFact(_Fact):
    kind: Literal["keywords"]
    value: list[str] = Field(min_length=1, max_length=200)

    @field_validator("value")
    @classmethod
    def _kw(cls, v: list[str]) -> list[str]:
        if not all(x.strip() for x in v):
            raise ValueError("keywords must be non-empty strings")
        return v


class Truth(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    facts: list[Annotated[Union[NumberFact, CategoryFact, KeywordsFact], Field(discriminator="kind")]] = Field(
        min_length=1, max_length=200
    )

    @model_validator(mode="after")
    def _unique(self) -> "Truth":
        names = [f.name.strip() for f in self.facts]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup is not None:
            raise ValueError(f"fact names must be unique; {dup!r} is given twice")
        return self


def _first(exc: ValidationError) -> str:
    e = exc.errors()[0]
    loc = (
        ".".join(
            str(x)
            for x in e["loc"]
            if str(x) not in ("number", "category", "keywords") and not str(x).startswith(("function-", "tagged-union"))
        )
        or "truth"
    )
    return f"{loc}: {e['msg'].removeprefix('Value error, ')}"


def parse_truth(raw: Any, where: str = "truth") -> list[dict[str, Any]]:
    """The facts of a truth object in the built-in fact structure (``cooplab.evals.science_scoring``);
    OwnDataError (one line) for a bad truth."""
    if isinstance(raw, dict) and isinstance(raw.get("facts"), list):
        for i, f in enumerate(raw["facts"]):
            if isinstance(f, dict) and f.get("kind") not in ("number", "category", "keywords"):
                raise OwnDataError(
                    f"{where}: facts.{i}.kind must be number, category or keywords, got {f.get('kind')!r}"
                )
    try:
        t = Truth.model_validate(raw)
    except ValidationError as exc:
        raise OwnDataError(f"{where}: {_first(exc)}") from None
    out = []
    for f in t.facts:
        name = f.name.strip()
        context = [c.strip().lower() for c in (f.context or [name.replace("_", " ")])]
        if f.kind == "number":
            v = int(f.value) if f.value.is_integer() else f.value
            stmt = f.statement or f"The {context[0]} is {v}."
            out.append(
                {
                    "id": name,
                    "kind": "number",
                    "value": f.value,
                    "tolerance": f.tolerance,
                    "context": context,
                    "statement": stmt,
                }
            )
        elif f.kind == "category":
            stmt = f.statement or f"The {context[0]} is {f.value}."
            fact = {"id": name, "kind": "label", "value": f.value, "context": context, "statement": stmt}
            if f.alternatives:
                fact["alternatives"] = list(f.alternatives)
            out.append(fact)
        else:
            stmt = f.statement or f"The {context[0]} are {', '.join(f.value)}."
            out.append({"id": name, "kind": "set", "value": list(f.value), "context": context, "statement": stmt})
    from cooplab.evals.science_scoring import truth_facts

    try:
        truth_facts({"facts": out})
    except ValueError as exc:
        raise OwnDataError(f"{where}: {exc}") from None
    return out


def read_truth(path: Path | str) -> list[dict[str, Any]]:
    from cooplab.limits import parse_json

    p = Path(path)
    raw = parse_json(read_utf8(p, "truth file"), f"truth file {p}", error=OwnDataError, parse_constant=float)
    return parse_truth(raw, f"truth file {p}")


# --- the Python API ---------------------------------------------------------------------------------
def custom_section(datasets: Sequence[Path | str], task: str, truth: Any = None) -> dict[str, Any]:
    """config["params"]["custom"] of a run on your own data: ``datasets`` (paths), ``task`` (the task text),
    ``truth`` (None, a truth dict ``{"facts": [...]}``, or a path to a truth JSON file)."""
    if not isinstance(task, str) or not task.strip():
        raise OwnDataError("the task description must be non-empty text")
    columns: list[str] = []
    infos = inspect_datasets(list(datasets), columns=columns)
    if truth is None:
        facts = None
    elif isinstance(truth, (str, Path)):
        facts = read_truth(truth)
    else:
        facts = parse_truth(truth)
    if facts is not None:
        facts = with_candidates(facts, columns)
    return {"task": task.strip()[:MAX_TASK_CHARS], "datasets": infos, "facts": facts}


def custom_team_model(team: str) -> str | None:
    """The scripted teams of a run on your own data: ``oracle`` is the describing team (it computes
    and states the data's shape, missing values and column means), ``garbage`` the useless report."""
    return {"oracle": "builtin:science-describe:data", "garbage": "builtin:science-garbage:ecology"}.get(team)


def custom_config(
    datasets: Sequence[Path | str],
    task: str,
    truth: Any = None,
    *,
    team: Literal["llm", "oracle", "garbage"] = "llm",
    seed: int = 0,
    backend: str = "docker",
    llm: dict[str, Any] | None = None,
    **params: Any,
) -> dict[str, Any]:
    """A complete run config for :func:`cooplab.run` (see docs/science.md, "Your own data")."""
    from cooplab.agents.settings import LLMSettings
    from cooplab.limits import in_file, validate
    from cooplab.tasks.science import scripted  # noqa: F401 - registers the built-in scripted teams (and the bench's)
    from cooplab.tasks.science.defaults import MAX_TOKENS
    from cooplab.tasks.science.params import ScienceParams

    P = ScienceParams(team=team, **params)
    settings = validate(LLMSettings, {"max_tokens": MAX_TOKENS, **(llm or {})}, in_file("llm"), strict=False)
    settings = settings.model_copy(update={"model": custom_team_model(team) or settings.model}).resolve()
    return {
        "version": 2,
        "task": "science",
        "agents": "llm",
        "seed": seed,
        "csv": False,
        "params": {**P.model_dump(mode="json"), "judge": None, "custom": custom_section(datasets, task, truth)},
        "llm": settings.model_dump(mode="json"),
        "sandbox": {"backend": backend, "timeout": 30.0, "rate": 0.0},
        "record": {"dataset": {"sha256": None}},
    }
