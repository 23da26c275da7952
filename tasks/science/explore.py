"""A science run as the run explorer (``cooplab view``) shows it: what the run directory holds,
read defensively, and the page's sections.

Two halves:

* **recording** (during a run): :func:`record_sandbox_call` keeps every ``run_code`` call of a
  team in ``sandbox_calls.jsonl`` (who ran it, in which pass, the code, stdout, stderr, the
  result, the error) and the PNG figures it produced under ``sandbox_figures/``, so the explorer
  can show a call's output and figures without the trace file;
* **reading** (:func:`load_run`): every file of a science run directory is optional and may be
  damaged; what cannot be read becomes a one-line note in :attr:`ScienceRun.notes` and the rest
  is still shown. :func:`sections` turns the result into the explorer's plain data blocks
  (:mod:`cooplab.graphs.explore`), which the explorer escapes: no text from a run is ever markup.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cooplab.graphs import rundir
from cooplab.limits import clean_text, one_line

SANDBOX_CALLS = "sandbox_calls.jsonl"  #: one JSON line per run_code call of a science team
SANDBOX_FIGURES = "sandbox_figures"  #: the PNG figures those calls produced
ARTIFACT_INDEX = "artifacts/index.json"  #: who wrote each artifact version, in which pass
MAX_RECORD_CHARS = 20_000  #: each text field of a recorded call (code, stdout, stderr, result, traceback) at most
SHOW_CHARS = 4_000  #: what the page shows of one output before cutting it (with a note)
MAX_LINES = 20_000  #: JSON lines read from one file at most
MAX_JSONL_BYTES = 64 << 20  #: bytes read from one JSON-lines file at most
MAX_CALLS_SHOWN = 100  #: code calls on one page at most (the team and call links show the others)
MAX_FIGURES_SHOWN = 30  #: figures embedded in one page at most
PREVIEW_LINES = 30  #: lines of a long program shown before its whole text (in a closed box)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


# --- recording ---------------------------------------------------------------------------------------
def _safe_part(text: Any, limit: int = 40) -> str:
    """``text`` as a file-name part: letters, digits, ``_.-`` only, no leading dot, at most ``limit``."""
    s = _SAFE.sub("_", str(text)).lstrip(".")[:limit]
    return s or "x"


def _capped(text: Any) -> tuple[str, bool]:
    """(``text`` as clean text cut to :data:`MAX_RECORD_CHARS`, whether it was cut)."""
    s = clean_text("" if text is None else str(text))
    return (s[:MAX_RECORD_CHARS], True) if len(s) > MAX_RECORD_CHARS else (s, False)


def save_figures(run_dir: Path, stem: str, figures: list[bytes]) -> tuple[list[str], int]:
    """Write the PNG ``figures`` as ``sandbox_figures/STEM-N.png``; (their paths relative to
    ``run_dir``, how many were dropped for not being PNG)."""
    paths, dropped = [], 0
    for i, data in enumerate(figures or []):
        if not isinstance(data, (bytes, bytearray)) or not bytes(data).startswith(PNG_MAGIC):
            dropped += 1
            continue
        rel = f"{SANDBOX_FIGURES}/{stem}-{i + 1}.png"
        (run_dir / SANDBOX_FIGURES).mkdir(exist_ok=True)
        rundir.write_atomic(run_dir / rel, bytes(data))
        paths.append(rel)
    return paths, dropped


def call_record(
    result: Any,
    code: str,
    description: str,
    *,
    agent: str,
    team: str | None,
    visit: int | None,
    round: int | None,
    phase: str,
    call_id: str,
) -> dict[str, Any]:
    """The JSON record of one ``run_code`` call, the figures not yet saved (``cut``: the text fields
    cut to :data:`MAX_RECORD_CHARS`)."""
    rec: dict[str, Any] = {
        "agent": agent,
        "team": team,
        "visit": visit,
        "round": round,
        "phase": phase,
        "call_id": call_id,
        "status": getattr(result, "status", None),
        "seconds": getattr(result, "duration", None),
        "state_reset": bool(getattr(result, "state_reset", False)),
        "truncated": bool(getattr(result, "truncated", False)),
    }
    cut = []
    err = getattr(result, "error", None)
    fields = {
        "description": description,
        "code": code,
        "stdout": getattr(result, "stdout", ""),
        "stderr": getattr(result, "stderr", ""),
        "result": getattr(result, "result", None),
        "error": f"{err.type}: {err.message}" if err is not None else None,
        "traceback": err.traceback if err is not None else None,
    }
    for k, v in fields.items():
        if v is None:
            rec[k] = None
            continue
        rec[k], was_cut = _capped(v)
        if was_cut:
            cut.append(k)
    rec["cut"] = cut
    return rec


def record_sandbox_call(result: Any, code: str, description: str, runtime: Any, *, prefix: str = "") -> None:
    """``run_code``'s ``on_result`` hook for science teams: append the call to
    ``sandbox_calls.jsonl`` and save its figures, in the run directory of the calling agent's
    context (nothing without one). ``prefix``: code the run puts before every call's code (your
    own data's set-up), left out of the record so it shows the agent's code. A resumed node that
    reruns a call appends it again (and rewrites its figures): readers keep the last record of each
    (team, pass, agent, call id). Never raises into the tool: a disk error only loses the record."""
    from cooplab.agents.tools import caller_of

    if prefix and code.startswith(prefix):
        code = code[len(prefix) :]
    caller = caller_of(runtime)
    out = getattr(caller.context, "run_dir", None)
    if not out:
        return
    visit = _current_visit()
    call_id = str(getattr(runtime, "tool_call_id", "") or "")
    rec = call_record(
        result,
        code,
        description,
        agent=caller.agent_id,
        team=caller.team,
        visit=visit,
        round=caller.round,
        phase=caller.phase,
        call_id=call_id,
    )
    out = Path(out)
    try:
        stem = "-".join(_safe_part(p) for p in (caller.team or "team", visit or 0, caller.agent_id, call_id or "call"))
        rec["figures"], rec["figures_dropped"] = save_figures(out, stem, list(getattr(result, "figures", None) or []))
        with open(out / SANDBOX_CALLS, "a", encoding="utf-8") as f:
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    except OSError:
        return


def _current_visit() -> int | None:
    """The pass of the team node running now (its workspace's), or None outside a node."""
    from cooplab.tasks.science.workspace import CURRENT

    try:
        return int(CURRENT.get().visit)
    except (LookupError, TypeError, ValueError):
        return None


def artifact_index(artifacts: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """Who wrote each artifact version, in which pass (``artifacts/index.json``; the contents are
    the ``NAME.vN.md`` files next to it)."""
    return [
        {
            "name": n,
            "version": a.get("version"),
            "agent": a.get("agent"),
            "team": a.get("team"),
            "visit": a.get("visit"),
            "description": a.get("description", ""),
            "chars": len(a.get("content") or ""),
            "file": f"{n}.v{a.get('version')}.md",
        }
        for n, versions in artifacts.items()
        for a in versions
    ]


# --- reading -----------------------------------------------------------------------------------------
@dataclass
class ScienceRun:
    """What a science run directory holds, each part possibly empty (see :attr:`notes`)."""

    out: Path
    notes: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    timeline: list[dict[str, Any]] = field(default_factory=list)
    loops: list[dict[str, Any]] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    routing: list[dict[str, Any]] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    ledger: list[dict[str, Any]] = field(default_factory=list)
    scores: dict[str, Any] = field(default_factory=dict)
    truth: dict[str, Any] = field(default_factory=dict)

    def note(self, text: Any) -> None:
        self.notes.append(one_line(text, 300))


def _json_file(run: ScienceRun, rel: str, what: str, kind: type = dict) -> Any:
    """The JSON value of ``run.out / rel`` if it is a ``kind``, else ``kind()`` and a note (a link
    leading outside the run folder is not read)."""
    p = _inside(run, rel)
    if p is None:
        return kind()
    if not p.is_file():
        run.note(f"{rel} is missing: {what} cannot be shown")
        return kind()
    try:
        v = rundir.read_json(p)
    except (OSError, ValueError) as exc:  # RunDirError is a ValueError
        run.note(f"{rel} cannot be read ({one_line(exc, 160)}): {what} cannot be shown")
        return kind()
    if not isinstance(v, kind):
        run.note(
            f"{rel} holds {type(v).__name__}, not a JSON {'object' if kind is dict else 'list'}: {what} cannot be shown"
        )
        return kind()
    return v


def _summary(run: ScienceRun) -> dict[str, Any]:
    """summary.json through its schema (the science task's results model): its JSON, or {} and one
    note naming the damaged field."""
    from cooplab.graphs import runfiles
    from cooplab.tasks.science.results import ScienceResults

    raw = _json_file(run, runfiles.SUMMARY_FILE, "the run's outcome")
    if not raw:
        return raw
    try:
        return runfiles.parse_summary(raw, runfiles.SUMMARY_FILE, ScienceResults).as_json()
    except runfiles.SchemaError as exc:
        run.note(f"{one_line(exc, 300)}: the run's outcome cannot be shown")
        return {}


def _jsonl_file(run: ScienceRun, rel: str, what: str) -> list[dict[str, Any]]:
    """The JSON objects of the lines of ``run.out / rel``; a bad line is skipped with a note."""
    p = _inside(run, rel)
    if p is None or not p.is_file():
        return []
    rows, bad, size = [], 0, 0
    try:
        with open(p, encoding="utf-8", errors="replace") as f:
            for i, line in enumerate(f):
                size += len(line)
                if i >= MAX_LINES or size > MAX_JSONL_BYTES:
                    run.note(
                        f"{rel} is longer than {MAX_LINES} lines or {MAX_JSONL_BYTES >> 20} MB: only its start is shown"
                    )
                    break
                if not line.strip():
                    continue
                try:
                    v = json.loads(line)
                except (ValueError, RecursionError):
                    v = None
                if isinstance(v, dict):
                    rows.append(v)
                else:
                    bad += 1
    except OSError as exc:
        run.note(f"{rel} cannot be read ({one_line(exc, 160)}): {what} cannot be shown")
    if bad:
        run.note(f"{rel}: {bad} line(s) are not JSON objects and were skipped ({what})")
    return rows


def _inside(run: ScienceRun, rel: str) -> Path | None:
    """``run.out / rel``, or None and a note when it leads outside the run folder (a symbolic link
    in a shared run folder must never show the reader's own files)."""
    try:
        return rundir.inside(run.out, rel)
    except rundir.RunDirError as exc:
        run.note(exc)
        return None


def _table(run: ScienceRun, stem: str, what: str) -> list[dict[str, Any]]:
    """The rows of ``stem.parquet`` / ``stem.csv`` as dicts, or [] and a note."""
    if not any((run.out / f"{stem}.{e}").is_file() for e in ("parquet", "csv")):
        run.note(f"{stem}.parquet is missing: {what} cannot be shown")
        return []
    try:
        df = rundir.read_table(run.out, stem)
    except Exception as exc:  # noqa: BLE001 - pyarrow and pandas raise many kinds on a damaged file
        run.note(f"{stem} table cannot be read ({one_line(exc, 160)}): {what} cannot be shown")
        return []
    return [{k: _plain(v) for k, v in r.items()} for r in df.to_dict("records")]


def _plain(v: Any) -> Any:
    """A table cell as a plain Python value (NaN and NA as None)."""
    try:
        if v is None or (not isinstance(v, (str, bytes, list, dict)) and v != v):
            return None
    except (TypeError, ValueError):
        return v
    return v.item() if hasattr(v, "item") and not isinstance(v, (str, bytes, list, dict)) else v


def load_run(out: Path) -> ScienceRun:
    """Read a science run directory; never raises for a missing or damaged file (see the notes)."""
    run = ScienceRun(out=Path(out))
    if not run.out.is_dir():
        run.note(f"{run.out} is not a directory")
        return run
    run.config = _json_file(run, "config.json", "the run's settings")
    run.summary = _summary(run)
    run.scores = _json_file(run, "scores.json", "the scores and the evidence for each fact")
    run.truth = _json_file(run, "dataset/ground_truth.json", "what each fact should say")
    run.timeline = _table(run, "timeline", "the teams' passes")
    run.loops = _table(run, "tool_loops", "the agents' tool loops")
    run.ledger = _table(run, "ledger", "the budget over time")
    run.calls = _calls(run)
    run.routing = _jsonl_file(run, "routing.jsonl", "the requests between teams")
    run.messages = _jsonl_file(run, "messages.jsonl", "the messages between teams")
    run.artifacts = _artifacts(run)
    return run


def _calls(run: ScienceRun) -> list[dict[str, Any]]:
    """The recorded run_code calls, the last record of each (team, pass, agent, call id); for a
    run without ``sandbox_calls.jsonl``, the calls of the tool loops (code only, with a note)."""
    if (run.out / SANDBOX_CALLS).is_file():
        last: dict[tuple, dict[str, Any]] = {}
        for r in _jsonl_file(run, SANDBOX_CALLS, "the code calls"):
            last[_call_key(r)] = r
        made = _loop_call_keys(run)
        if made is None:  # no tool loop table (a run that stopped early): every record is shown
            return list(last.values())
        kept = [r for k, r in last.items() if k in made]
        if len(kept) < len(last):
            run.note(
                f"{len(last) - len(kept)} record(s) of {SANDBOX_CALLS} match no tool call of this run's tool loops "
                "(left by a node that was interrupted and run again, or by an earlier run in the same directory) "
                "and are not shown"
            )
        return kept
    calls = []
    for lp in run.loops:
        for c in _loop_calls(run, lp):
            if c.get("name") != "run_code":
                continue
            args = _args(c.get("args"))
            calls.append(
                {
                    "agent": lp.get("agent_id"),
                    "team": lp.get("team"),
                    "visit": lp.get("visit"),
                    "round": lp.get("round"),
                    "phase": lp.get("phase"),
                    "call_id": c.get("id"),
                    "status": c.get("status"),
                    "seconds": c.get("seconds"),
                    "code": str(args.get("code", "")),
                    "description": str(args.get("description", "")),
                    "recorded": False,
                }
            )
    if calls:
        run.note(
            f"{SANDBOX_CALLS} is missing (a run made before it was recorded): the code calls show their code, "
            "not their output or figures"
        )
    return calls


def _call_key(r: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """What names one code call across files: (team, pass, agent, call id) as text."""
    return tuple(str(r.get(k)) for k in ("team", "visit", "agent", "call_id"))  # type: ignore[return-value]


def _loop_call_keys(run: ScienceRun) -> set[tuple[str, str, str, str]] | None:
    """The keys of the run_code calls the tool loops made (the checkpointed record of the run),
    or None when there is no tool loop table to check against."""
    if not run.loops:
        return None
    return {
        _call_key({**lp, "agent": lp.get("agent_id"), "call_id": c.get("id")})
        for lp in run.loops
        for c in _loop_calls(run, lp)
        if c.get("name") == "run_code"
    }


def _loop_calls(run: ScienceRun, loop: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A tool loop's calls (its ``tool_calls`` column: JSON text of a list of objects)."""
    raw = loop.get("tool_calls")
    if isinstance(raw, list):
        v = raw
    else:
        try:
            v = json.loads(raw) if isinstance(raw, str) and raw else []
        except (ValueError, RecursionError):
            run.note(f"the tool calls of {one_line(loop.get('agent'), 40)}'s loop are not JSON and were skipped")
            return []
    return [c for c in v if isinstance(c, dict)] if isinstance(v, list) else []


def _args(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        v = json.loads(raw) if isinstance(raw, str) else {}
    except (ValueError, RecursionError):
        return {"code": str(raw)}
    return v if isinstance(v, dict) else {}


_VERSION_RE = re.compile(r"^(?P<name>[A-Za-z][A-Za-z0-9_\-]{0,63})\.v(?P<v>[0-9]{1,6})\.md$")


def _artifacts(run: ScienceRun) -> list[dict[str, Any]]:
    """Every artifact version (name, version, file, and who wrote it in which pass when
    ``artifacts/index.json`` says), in pipeline, name and version order."""
    adir = run.out / "artifacts"
    if not adir.is_dir():
        run.note("artifacts/ is missing: no artifact can be shown")
        return []
    meta = {}
    if (run.out / ARTIFACT_INDEX).is_file():
        for m in _json_file(run, ARTIFACT_INDEX, "who wrote each artifact", kind=list):
            if isinstance(m, dict):
                meta[(str(m.get("name")), str(m.get("version")))] = m
    found = []
    for p in adir.iterdir():
        m = _VERSION_RE.match(p.name)
        if m and p.is_file():
            info = meta.get((m["name"], m["v"]), {})
            found.append(
                {
                    "name": m["name"],
                    "version": int(m["v"]),
                    "file": f"artifacts/{p.name}",
                    "agent": info.get("agent"),
                    "team": info.get("team"),
                    "visit": info.get("visit"),
                    "description": info.get("description"),
                }
            )
    return sorted(found, key=lambda a: (_team_rank(a.get("team")), a["name"], a["version"]))


def _team_rank(team: Any) -> int:
    """A team's place in the pipeline (data, model, eval, writing, solo; unknown last)."""
    from cooplab.tasks.science.roles import SOLO_TEAM, TEAMS

    order = (*TEAMS, SOLO_TEAM)
    return order.index(team) if team in order else len(order)


def read_text(run: ScienceRun, rel: str, limit: int = 200_000) -> str | None:
    """A text file of the run (decoded leniently, cut to ``limit``), or None and a note."""
    p = _inside(run, rel)
    if p is None:
        return None
    try:
        with open(p, "rb") as f:
            data = f.read(limit + 1)
    except OSError as exc:
        run.note(f"{rel} cannot be read ({one_line(exc, 160)})")
        return None
    text = clean_text(data[:limit].decode("utf-8", errors="replace"))
    return text + (f"\n[... the file is longer than {limit} bytes; the rest is not shown]" if len(data) > limit else "")


def money(v: Any) -> float | None:
    """A cost cell (Decimal text, number) as a finite float, else None (bounded:
    :func:`cooplab.evals.values.num`, no decimal trap escapes)."""
    from cooplab.evals.values import num

    return num(v)


# --- the page ----------------------------------------------------------------------------------------
_FIGURE_RE = re.compile(r"^sandbox_figures/[A-Za-z0-9_.-]{1,200}\.png$")
_QUERY_RE = re.compile(r"^[A-Za-z0-9_.#:-]{1,80}$")


def sections(out: Path, query: Mapping[str, Any] | None = None) -> list[Any]:
    """The explorer's sections of a science run (``query``: the page's parameters, hostile; ``call``
    shows that code call alone, ``team`` keeps the code calls of one team)."""
    from cooplab.graphs.explore import Section

    run = load_run(out)
    q = {k: str(v) for k, v in (query or {}).items() if isinstance(v, str) and _QUERY_RE.match(str(v))}
    parts = [
        ("science-overview", "Science run", _overview),
        ("science-facts", "Report: each fact's score and its evidence", _facts),
        ("science-timeline", "Timeline of teams and passes", _timeline),
        ("science-calls", "Code calls: code, output and figures", lambda r: _code_calls(r, q)),
        ("science-artifacts", "Artifacts and their versions", _artifact_blocks),
        ("science-budget", "Budget over time per team", _budget),
    ]
    made = [Section(title=title, blocks=fn(run), id=sid) for sid, title, fn in parts]
    if run.notes:  # the notes of every part, gathered at the top
        from cooplab.graphs.explore import Note

        made[0].blocks[:0] = [Note(n) for n in dict.fromkeys(run.notes)]
    return made


def _fmt(v: Any, digits: int = 2) -> str:
    """A score or number for the page ("n/a" when it is not a finite number)."""
    if isinstance(v, bool) or v is None:
        return "n/a" if v is None else str(v)
    try:
        f = float(v)
    except (TypeError, ValueError):
        return one_line(v, 80)
    return f"{f:.{digits}f}" if f == f and abs(f) != float("inf") else "n/a"


def _role_names(run: ScienceRun) -> dict[str, str]:
    """agent id -> its role's name (e.g. ``data.0`` -> Data Lead) for the run's team size."""
    from cooplab.tasks.science.roles import pipeline_roles

    P = got if isinstance(got := run.config.get("params"), dict) else {}
    size = got if (got := P.get("team_size")) in (1, 2, 3) else 3
    pipeline = "solo" if P.get("pipeline") == "solo" else "teams"
    return {r.agent_id: r.name for r in pipeline_roles(pipeline, size)}


def _who(run: ScienceRun, agent: Any) -> str:
    name = _role_names(run).get(str(agent))
    return f"{one_line(agent, 40)} ({name})" if name else one_line(agent, 40)


def _overview(run: ScienceRun) -> list[Any]:
    from cooplab.graphs.explore import KeyValues

    s, P = run.summary, got if isinstance(got := run.config.get("params"), dict) else {}
    sc = got if isinstance(got := s.get("scores"), dict) else {}
    cost = (s.get("ledger") or {}).get("cost_usd_float") if isinstance(s.get("ledger"), dict) else None
    items = {
        "task": s.get("science_task", P.get("task")),
        "team": s.get("team", P.get("team")),
        "pipeline": s.get("pipeline", P.get("pipeline")),
        "team size": s.get("team_size", P.get("team_size")),
        "status": s.get("status"),
        "scored": s.get("scored"),
        **{k: score_text(sc.get(k)) if k in sc else None for k in ("completeness", "quality", "accuracy")},
        "passes": ", ".join(map(str, s.get("passes") or [])) if isinstance(s.get("passes"), list) else None,
        "cost (USD)": _fmt(cost, 4),
    }
    return [KeyValues({k: one_line(v, 200) for k, v in items.items() if v is not None}, title="at a glance")]


# --- facts -----------------------------------------------------------------------------------------
def _truth_facts(run: ScienceRun) -> dict[str, dict[str, Any]]:
    facts = got if isinstance(got := run.truth.get("facts"), list) else []
    return {str(f.get("id")): f for f in facts if isinstance(f, dict)}


def _why(f: Mapping[str, Any]) -> str:
    """The heuristic scorer's evidence for a fact, or what its absence means."""
    ev = f.get("evidence")
    if isinstance(ev, str) and ev.strip():
        return clean_text(ev)
    if f.get("status") == "missing":
        return "no statement of the report commits to a value for this fact (nothing found near its context words)"
    return "the scorer gave no evidence"


def _judge_rows(run: ScienceRun) -> list[dict[str, Any]]:
    """One row per judge sample: its accuracy rating and rationale (the judge rates the whole report)."""
    rows = []
    for j in run.scores.get("judges") or []:
        if not isinstance(j, dict):
            continue
        for i, v in enumerate(j.get("verdicts") or []):
            if isinstance(v, dict):
                rows.append(
                    {
                        "judge": one_line(j.get("judge"), 80),
                        "sample": i + 1,
                        **{d: v.get(d) for d in ("accuracy", "completeness", "quality")},
                        "accuracy rationale": clean_text(str(v.get("accuracy_rationale", ""))),
                    }
                )
            elif v is None:
                rows.append(
                    {"judge": one_line(j.get("judge"), 80), "sample": i + 1, "accuracy rationale": "(no valid verdict)"}
                )
    return rows


def _judge_fact(run: ScienceRun, fid: str) -> list[str]:
    """Per-fact judge output, when a judge entry carries ``facts`` (id, score, evidence/rationale)."""
    said = []
    for j in run.scores.get("judges") or []:
        for f in (j.get("facts") or []) if isinstance(j, dict) and isinstance(j.get("facts"), list) else []:
            if isinstance(f, dict) and str(f.get("id")) == fid:
                why = f.get("evidence") or f.get("rationale") or ""
                said.append(
                    f"judge {one_line(j.get('judge'), 60)}: score {_fmt(f.get('score'))}; {clean_text(str(why))}"
                )
    return said


def score_text(v: Any) -> str:
    """A 0-1 score as the page says it: two decimals, "not scored (no truth)" for null (a run on
    your own data has no ground truth to score accuracy against)."""
    if v is None:
        return "not scored (no truth)"
    x = money(v)
    return f"{x:.2f}" if x is not None else one_line(v, 40)


def judge_cost(entry: Mapping[str, Any]) -> str:
    """ "; judge cost $x of its $b budget" of a judge's scores.json entry (its own ledger, apart from the team's)."""
    led = entry.get("ledger")
    cost = money(led.get("cost_usd_float")) if isinstance(led, Mapping) else None
    if cost is None:
        return ""
    cap = money(entry.get("budget_usd"))
    return f"; judge cost ${cost:.4f}" + (f" of its ${cap:.4f} budget" if cap is not None else "")


def _scores_lines(run: ScienceRun) -> list[str]:
    """The heuristic scores in one line, then one line per LLM judge (its scores, their spread over
    its k readings, and what the judge cost)."""
    from cooplab.evals.text import counts_text

    h = got if isinstance(got := run.scores.get("heuristic"), dict) else {}
    lines = [
        f"Heuristic scores (0-1): completeness {score_text(h.get('completeness'))}, quality "
        f"{score_text(h.get('quality'))}, "
        f"accuracy {score_text(h.get('accuracy'))} (scored: {one_line(run.scores.get('scored'), 80)})."
    ]
    for j in run.scores.get("judges") or [] if isinstance(run.scores.get("judges"), list) else []:
        if not isinstance(j, dict):
            continue
        spread = j.get("std")
        spread_text = (
            counts_text({str(k): score_text(v) for k, v in spread.items()}) if isinstance(spread, dict) else "none"
        )
        lines.append(
            f"Judge {one_line(j.get('judge'), 80)} (k = {one_line(j.get('k'), 10)}): completeness "
            f"{score_text(j.get('completeness'))}, "
            f"quality {score_text(j.get('quality'))}, accuracy {score_text(j.get('accuracy'))}; spread (s.d. over its "
            "k "
            f"readings) {spread_text}{judge_cost(j)}."
        )
    return lines


def _facts(run: ScienceRun) -> list[Any]:
    """The scores (heuristic and each judge's), the summary line, then the final paper (rendered
    Markdown) beside its facts (each: status, score, the truth, the scorer's evidence and any judge's
    word on it), then the judge's ratings and reasons."""
    from cooplab.graphs.explore import Columns, Markdown, Note, Table, Text

    h = got if isinstance(got := run.scores.get("heuristic"), dict) else {}
    facts = [f for f in h.get("facts") or [] if isinstance(f, dict)] if isinstance(h.get("facts"), list) else []
    blocks: list[Any] = (
        [Text(line) for line in _scores_lines(run)] if run.scores else [Note("no scores.json: the run was not scored")]
    )
    if facts:
        wrong = [str(f.get("id")) for f in facts if _score(f) < 1.0]
        blocks.append(
            Text(
                f"{len(facts) - len(wrong)} of {len(facts)} facts found in full"
                + (f"; not found or wrong: {', '.join(one_line(w, 60) for w in wrong)}" if wrong else "")
                + f" (scored: {one_line(run.scores.get('scored'), 80)})."
            )
        )
    else:
        blocks.append(Note("no per-fact scores in scores.json (the run was not scored, or has no ground truth)"))
    paper = [a for a in run.artifacts if a["name"] == "final_paper"]
    text = read_text(run, paper[-1]["file"]) if paper else None
    left: list[Any] = (
        [Text(f"The final paper ({paper[-1]['file']}, version {paper[-1]['version']}), as scored:"), Markdown(text)]
        if text is not None
        else [Note("no final paper to show")]
    )
    blocks.append(Columns([left, _fact_cards(run, facts)]))
    judged = _judge_rows(run)
    if judged:
        blocks.append(Table(judged, title="the LLM judge's ratings (1-5) and reasons, per sample"))
    return blocks


def _fact_cards(run: ScienceRun, facts: list[dict[str, Any]]) -> list[Any]:
    """One open box per fact: the verdict in its title, the truth and the evidence inside."""
    from cooplab.graphs.explore import Details, Text

    truth = _truth_facts(run)
    cards = []
    for f in facts:
        fid = str(f.get("id"))
        mark = _verdict(f)
        t = truth.get(fid, {})
        inner: list[Any] = [
            Text("The truth: " + clean_text(str(t.get("statement") or "(not in the ground truth file)"))),
            Text("Evidence (heuristic scorer): " + _why(f)),
        ] + [Text(s) for s in _judge_fact(run, fid)]
        head = f"{fid} · {one_line(f.get('kind') or '?', 20)} · {one_line(f.get('status') or '?', 30)}"
        cards.append(Details(f"{head} · score {_fmt(f.get('score'))} · {mark}", inner, open=True))
    return cards


def _verdict(f: Mapping[str, Any]) -> str:
    """A fact's outcome in words: right, partly right, WRONG (the report commits to something
    else, or hedges) or NOT STATED."""
    if _score(f) >= 1.0:
        return "right"
    if _score(f) > 0:
        return "partly right"
    return "NOT STATED" if f.get("status") == "missing" else "WRONG"


def _score(f: Mapping[str, Any]) -> float:
    try:
        score = f.get("score")
        if score is None:
            return 0.0
        v = float(score)
    except (TypeError, ValueError):
        return 0.0
    return v if v == v else 0.0


# --- timeline ----------------------------------------------------------------------------------------
def _passes(run: ScienceRun) -> list[tuple[Any, Any]]:
    """The (team, pass) pairs in the order the run went through them."""
    seen: dict[tuple, None] = {}
    for r in run.timeline:
        seen.setdefault((r.get("team"), r.get("visit")), None)
    return list(seen)


def _timeline(run: ScienceRun) -> list[Any]:
    from cooplab.graphs.explore import Details, Link, Note, Table

    if not run.timeline:
        return [Note("no timeline: the run wrote no team pass (or timeline.parquet is missing)")]
    rows, prev = [], 0.0
    for team, visit in _passes(run):
        nodes = [r for r in run.timeline if (r.get("team"), r.get("visit")) == (team, visit)]
        spent = money(nodes[-1].get("spent_usd"))
        loops = [lp for lp in run.loops if (lp.get("team"), lp.get("visit")) == (team, visit)]
        agents = sorted({str(lp.get("agent_id")) for lp in loops})
        rows.append(
            {
                "pass": f"{team}#{visit}",
                "steps": " > ".join(str(r.get("node")) for r in nodes),
                "agents": ", ".join(_who(run, a) for a in agents),
                "wrote": ", ".join(
                    f"{a['name']} v{a['version']}"
                    for a in run.artifacts
                    if (a.get("team"), a.get("visit")) == (team, visit)
                )
                or "-",
                "code calls": sum(1 for c in run.calls if (c.get("team"), c.get("visit")) == (team, visit)),
                "seconds": _fmt(sum(money(r.get("seconds")) or 0.0 for r in nodes), 1),
                "cost (USD)": _fmt(None if spent is None else spent - prev, 4),
            }
        )
        prev = spent if spent is not None else prev
    blocks: list[Any] = [Table(rows, title="passes, in order (a team's second pass is a redo another team asked for)")]
    if not any(a.get("team") for a in run.artifacts) and run.artifacts:
        blocks.append(
            Note("artifacts/index.json is missing: which pass wrote each artifact is not known", level="info")
        )
    loops = [
        {
            "pass": f"{lp.get('team')}#{lp.get('visit')}",
            "step": lp.get("node"),
            "agent": _who(run, lp.get("agent_id")),
            "stop": lp.get("stop_reason"),
            "model steps": lp.get("steps"),
            "tool calls": lp.get("n_tool_calls"),
            "tools": ", ".join(str(c.get("name")) for c in _loop_calls(run, lp)),
            "cost (USD)": _fmt(money(lp.get("cost_usd_exact")), 4),
        }
        for lp in run.loops
    ]
    if loops:
        blocks.append(Table(loops, title="every agent's tool loop: who did what in each step"))
        blocks += _between_teams(run)
        agents = sorted({str(lp.get("agent_id")) for lp in run.loops if lp.get("agent_id")})
        blocks.append(
            Details(
                "each agent's model calls (prompts and answers, from the trace)",
                [Link(f"{_who(run, a)}: its model calls", {"agent": a}, trace=True) for a in agents],
            )
        )
    return blocks


def _between_teams(run: ScienceRun) -> list[Any]:
    """The requests a team made of an earlier one (and whether each was served: the reason for a
    redo pass), and the messages between teams."""
    from cooplab.graphs.explore import Table

    blocks: list[Any] = []
    if run.routing:
        rows = [
            {
                "from": f"{one_line(r.get('from_team'), 20)}#{one_line(r.get('visit'), 6)}",
                "agent": _who(run, r.get("agent")),
                "to team": one_line(r.get("target_team"), 20),
                "kind": one_line(r.get("kind"), 20),
                "request": clean_text(str(r.get("request") or "")),
                "decision": one_line(r.get("decision"), 20),
                "why": one_line(r.get("reason"), 300),
            }
            for r in run.routing
        ]
        blocks.append(
            Table(
                rows, title="requests to earlier teams, and whether each was served (a served request is a redo pass)"
            )
        )
    if run.messages:
        rows = [
            {
                "from": f"{one_line(m.get('from_team'), 20)}#{one_line(m.get('visit'), 6)}",
                "agent": _who(run, m.get("agent")),
                "to team": one_line(m.get("to_team"), 20),
                "message": clean_text(str(m.get("content") or "")),
            }
            for m in run.messages
        ]
        blocks.append(Table(rows, title="messages between teams"))
    return blocks


# --- code calls --------------------------------------------------------------------------------------
def _shown(text: Any, title: str, cut_when_recorded: bool = False) -> list[Any]:
    """An output as a code box cut to :data:`SHOW_CHARS`, with a note when it was cut (here or when recorded)."""
    from cooplab.graphs.explore import Code, Note

    s = clean_text(str(text))
    blocks: list[Any] = [Code(s[:SHOW_CHARS], title=title)]
    if len(s) > SHOW_CHARS:
        blocks.append(
            Note(
                f"{title}: {len(s) - SHOW_CHARS} more characters not shown (all of it is in {SANDBOX_CALLS})",
                level="info",
            )
        )
    if cut_when_recorded:
        blocks.append(
            Note(f"{title}: longer than {MAX_RECORD_CHARS} characters; only the first were recorded", level="info")
        )
    return blocks


def _code_box(code: str) -> list[Any]:
    """A call's code: all of it when short, else its first :data:`PREVIEW_LINES` lines and the
    whole code in a closed box (a long program does not bury the output below it)."""
    from cooplab.graphs.explore import Code, Details

    lines = code.splitlines()
    if len(lines) <= PREVIEW_LINES + 10:
        return [Code(code, language="python", title="code")]
    return [
        Code(
            "\n".join(lines[:PREVIEW_LINES]),
            language="python",
            title=f"code (the first {PREVIEW_LINES} of {len(lines)} lines)",
        ),
        Details(f"all {len(lines)} lines of the code", [Code(code, language="python")]),
    ]


def _figures(c: Mapping[str, Any]) -> list[Any]:
    """A call record's figure paths (a list, else none)."""
    return list(got) if isinstance(got := c.get("figures"), list) else []


def _call_blocks(run: ScienceRun, c: Mapping[str, Any], shown: list[int]) -> list[Any]:
    """One call's code, outputs and figures; ``shown`` counts the figures embedded in the page so
    far (past :data:`MAX_FIGURES_SHOWN` a link to the call alone replaces them)."""
    from cooplab.graphs.explore import Code, Image, Link, Note

    cut = set(c.get("cut") or []) if isinstance(c.get("cut"), list) else set()
    blocks: list[Any] = []
    if c.get("description"):
        blocks.append(Code(clean_text(str(c["description"])), title="what the agent said the code is for"))
    blocks += _code_box(clean_text(str(c.get("code") or "")))
    if c.get("recorded") is False:
        return blocks + [Note("output not recorded by this run", level="info")]
    for k in ("stdout", "stderr", "result"):
        if c.get(k):
            blocks += _shown(c[k], k, k in cut)
    if c.get("error"):
        blocks += _shown(f"{c['error']}\n{c.get('traceback') or ''}".rstrip(), "error", "traceback" in cut)
    if c.get("truncated"):
        blocks.append(Note("the sandbox cut this call's output at its own limit", level="info"))
    if c.get("state_reset"):
        blocks.append(Note("the sandbox was restarted before this call: its variables were lost", level="info"))
    for rel in _figures(c):
        if isinstance(rel, str) and _FIGURE_RE.match(rel) and (run.out / rel).is_file():
            if shown[0] >= MAX_FIGURES_SHOWN:
                blocks.append(
                    Link(
                        f"{MAX_FIGURES_SHOWN} figures are shown on this page; open this call alone to see its figures",
                        {"call": str(c.get("call_id"))},
                    )
                )
                break
            shown[0] += 1
            blocks.append(
                Image(
                    rel, caption=f"figure from {one_line(c.get('agent'), 40)}'s call {one_line(c.get('call_id'), 40)}"
                )
            )
        else:
            blocks.append(
                Note(f"a figure of this call is not shown: {one_line(rel, 80)} is not a PNG file of {SANDBOX_FIGURES}/")
            )
    if c.get("figures_dropped"):
        blocks.append(
            Note(
                f"{one_line(c['figures_dropped'], 10)} image(s) of this call were not PNG and were not kept",
                level="info",
            )
        )
    return blocks


def _code_calls(run: ScienceRun, q: Mapping[str, str]) -> list[Any]:
    from cooplab.graphs.explore import Details, Link, Note

    calls = run.calls
    teams = sorted({str(c.get("team")) for c in calls}, key=lambda t: (_team_rank(t), t))
    blocks: list[Any] = []
    if len(teams) > 1:
        blocks += [Link(f"only {t}", {"team": t}) for t in teams] + [Link("all teams", {})]
    if q.get("team") in teams:
        calls = [c for c in calls if str(c.get("team")) == q["team"]]
    if q.get("call") in {str(c.get("call_id")) for c in calls}:
        calls = [c for c in calls if str(c.get("call_id")) == q["call"]]
        blocks.append(Link("all code calls", {}))
    if not calls:
        return blocks + [Note("no code was run (the run has no run_code call)", level="info")]
    if len(calls) > MAX_CALLS_SHOWN:
        blocks.append(
            Note(
                f"{len(calls)} code calls: the first {MAX_CALLS_SHOWN} are shown (keep one team's with the links "
                "above)",
                level="info",
            )
        )
    shown = [0]
    for i, c in enumerate(calls[:MAX_CALLS_SHOWN]):
        n_fig = len(_figures(c))
        head = (
            f"{one_line(c.get('team'), 20)}#{one_line(c.get('visit'), 6)} · {_who(run, c.get('agent'))} · "
            f"call {one_line(c.get('call_id'), 40)} · {one_line(c.get('status'), 20)} · {_fmt(c.get('seconds'), 2)} s"
            + (f" · {n_fig} figure(s)" if n_fig else "")
            + (f" · {one_line(c.get('description'), 80)}" if c.get("description") else "")
        )
        blocks.append(Details(head, _call_blocks(run, c, shown), open=i == 0))
    return blocks


# --- artifacts ---------------------------------------------------------------------------------------
def _artifact_blocks(run: ScienceRun) -> list[Any]:
    from cooplab.graphs.explore import Details, Note, Table, Text

    if not run.artifacts:
        return [Note("no artifact was written", level="info")]
    rows = [
        {
            "artifact": a["name"],
            "version": a["version"],
            "by": _who(run, a["agent"]) if a.get("agent") else "?",
            "pass": f"{a['team']}#{a['visit']}" if a.get("team") else "?",
            "description": one_line(a.get("description") or "", 200),
        }
        for a in run.artifacts
    ]
    blocks: list[Any] = [Table(rows, title="every version of every artifact")]
    for a in run.artifacts:
        text = read_text(run, a["file"])
        blocks.append(
            Details(
                f"{a['name']} v{a['version']}", [Text(text, pre=True) if text is not None else Note("cannot be read")]
            )
        )
    return blocks


# --- budget ------------------------------------------------------------------------------------------
def _budget(run: ScienceRun) -> list[Any]:
    from cooplab.graphs.explore import Note, Plot, Table

    if not run.ledger:
        return [Note("no ledger: the budget over time cannot be shown")]
    costs = [money(e.get("cost_usd_exact")) for e in run.ledger]
    bad = sum(1 for c in costs if c is None)
    teams = list(dict.fromkeys(str(e.get("team") or "?") for e in run.ledger))
    series: dict[str, list[float]] = {t: [] for t in teams}
    total, acc = [], {t: 0.0 for t in teams}
    for e, c in zip(run.ledger, costs, strict=False):
        acc[str(e.get("team") or "?")] += c or 0.0
        for t in teams:
            series[t].append(acc[t])
        total.append(sum(acc.values()))
    series["all teams"] = total
    llm = got if isinstance(got := run.config.get("llm"), dict) else {}
    cap = money(llm.get("budget")) if llm.get("budget") is not None else None
    if cap is not None:
        series["budget cap"] = [cap] * len(total)
    blocks: list[Any] = [
        Plot(
            x=list(range(1, len(total) + 1)),
            series=series,
            kind="step",
            key="science-budget",
            title="USD spent per team (cumulative)",
            xlabel="charge, in order (a model call or a sandbox call)",
            ylabel="USD spent",
            caption="each line is one team's running total; 'all teams' is their sum",
        )
    ]
    if bad:
        blocks.append(Note(f"{bad} ledger row(s) have no readable cost and count as 0"))
    per = []
    for t in teams:
        es = [(e, c) for e, c in zip(run.ledger, costs, strict=False) if str(e.get("team") or "?") == t]
        per.append(
            {
                "team": t,
                "model calls": sum(1 for e, _ in es if e.get("kind") in (None, "tokens")),
                "sandbox seconds": _fmt(
                    sum(money(e.get("units")) or 0.0 for e, _ in es if e.get("kind") == "sandbox_seconds"), 2
                ),
                "cost (USD)": _fmt(sum(c or 0.0 for _, c in es), 4),
            }
        )
    blocks.append(Table(per, title="spent per team", filterable=False))
    return blocks


def key_numbers(summary: Mapping[str, Any]) -> dict[str, Any]:
    """A science run's key numbers in the explorer's list (summary.json's JSON): its task, the heuristic
    scores (accuracy first) and the cost."""
    from cooplab.evals.explorer.views.societies import known

    scores = got if isinstance(got := summary.get("scores"), Mapping) else {}
    out: dict[str, Any] = {"science task": summary.get("science_task")}
    out.update({k: scores.get(k) for k in ("accuracy", "completeness", "quality") if k in scores})
    return known(out, summary)
