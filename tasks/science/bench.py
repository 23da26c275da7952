"""Benchmark mode: ``cooplab bench science SUITE.jsonl --tables DIR [--labels LABELS.jsonl] ...``.

A suite is closed-form data-analysis questions, one JSON object per line (the convention of
public data-analysis benchmarks such as InfiAgent-DABench): ``id``, ``question``,
``constraints``, ``format`` (the answer template, ``@name[value]`` parts), ``file_name`` (a table
under ``--tables``), optional ``level`` and ``concepts``. Labels, one object per line: ``id`` and
``common_answers`` (a list of ``[name, value]`` pairs).

Every item is one science run on its own data (:func:`cooplab.tasks.science.owndata.custom_config`:
the item's table is the dataset, question + constraints + format the task text). The bench is a
grid sweep of the science task run by the engine's grid runner (``jobs_on.run_grid``,
:mod:`cooplab.runs.grid`; :func:`sweep_of`): one cell per item that can run,
``OUT/cells/item-ID__sSEED`` run directories, ``OUT/manifest.json`` of kind ``bench``, concurrent,
finished items skipped on a rerun, ``--executor ray``. The science task's ``analyze_sweep`` then
writes the bench's files from the manifest (:func:`analyze`). A bench of the earlier
``OUT/items/ID`` layout reads as it is; ``cooplab migrate`` moves it (``formats.bench_cells``).

The answers are the ``@name[value]`` parts of the final artifact (the last one of each name
wins); an item is correct when every labelled sub-answer matches
(:mod:`cooplab.tasks.science.bench_answers`: numbers at the label's precision, text, lists, dicts). An
item that cannot be run or scored (a problem in its suite line or its labels) is kept, left out
of the accuracy and listed with the reason (``why_not_scored``, ``not_scored``, report.md); one
such item never stops the others. ``OUT/results.parquet`` (one row per item), ``OUT/summary.json``, ``OUT/report.md``,
``OUT/figures/accuracy-cost.png``.

``--team answers:FILE`` is the scripted team ``builtin:science-answers:PATH``: every agent marks
its work complete and the writing lead writes a final paper holding the given answer text (JSONL
``id``, ``answer``). It checks the extraction and the scorer end to end, through the same graph,
sandbox and ledger as an LLM team.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cooplab.evals.calibration import wilson  # noqa: F401 - the 95% Wilson interval, shared with cooplab calibrate
from cooplab.graphs.formats import BENCH_ID, BENCH_OUTPUTS, bench_cell
from cooplab.graphs.jobs import Runs
from cooplab.limits import ConfigError, one_line, parse_json
from cooplab.tasks.science.bench_answers import Value, answer_parts, extract, label_value, match, same, shown  # noqa: F401 - extract, match: the API

ID_RE = BENCH_ID
MAX_LINE = 100_000


class BenchError(ValueError):
    """A suite, labels or answers file that cannot be used (the message is one line)."""


# --- reading ------------------------------------------------------------------------------------
def _no_constant(c: str) -> Any:
    raise ValueError(f"{c} is not allowed")


def _lines(path: Path, what: str, constants: bool = False) -> Iterable[tuple[int, Any]]:
    """The JSON objects of a JSONL file with their line numbers (``constants``: NaN and Infinity
    accepted, as Python writes them). BenchError (one line naming the line) otherwise."""
    from cooplab.tasks.science.owndata import read_utf8

    p = Path(path)
    return _text_lines(read_utf8(p, what, BenchError), f"{what} {p}", constants)


def _text_lines(text: str, where: str, constants: bool = False) -> Iterable[tuple[int, Any]]:
    """:func:`_lines` of a file's text (``where``: what and which file, for the messages)."""
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if len(line) > MAX_LINE:
            raise BenchError(f"{where} line {n}: longer than {MAX_LINE} characters")
        obj = parse_json(
            line, f"{where} line {n}", error=BenchError, parse_constant=None if constants else _no_constant
        )
        if not isinstance(obj, dict):
            raise BenchError(f"{where} line {n}: expected a JSON object, got {type(obj).__name__}")
        yield n, obj


def _item_id(obj: dict[str, Any]) -> tuple[str | None, str | None]:
    """(the item's id, None) or (None, why it cannot be one: an id names a directory)."""
    v = obj.get("id")
    if isinstance(v, bool) or not isinstance(v, (str, int)):
        return None, f"id must be a string or an integer, got {one_line(repr(v), 80)}"
    s = str(v).strip()
    if not ID_RE.match(s):
        return None, f"id {one_line(repr(s), 80)} must be 1-100 letters, digits, '.', '_' or '-' (it names a directory)"
    return s, None


def _text(obj: dict[str, Any], key: str) -> str:
    v = obj.get(key)
    return v.strip() if isinstance(v, str) else ""


def _concepts(v: Any) -> list[str]:
    """The concepts of an item: a list of texts, or one comma-separated text (anything else: none)."""
    if isinstance(v, str):
        v = v.split(",")
    return [c.strip() for c in v if isinstance(c, str) and c.strip()] if isinstance(v, list) else []


def _item_problem(obj: dict[str, Any], tdir: Path) -> str | None:
    """Why an item of a suite cannot be run (None if it can)."""
    for key in ("question", "format", "file_name"):
        if not _text(obj, key):
            return f"{key} must be non-empty text, got {one_line(repr(obj.get(key)), 80)}"
    if not isinstance(obj.get("constraints", ""), str):
        return f"constraints must be text, got {one_line(repr(obj.get('constraints')), 80)}"
    if not answer_parts(obj["format"]):
        return f"format {one_line(repr(obj['format']), 80)} has no @name[...] answer part"
    fname = _text(obj, "file_name")
    table = (tdir / fname).resolve()
    if tdir.resolve() not in table.parents or not table.is_file():
        return f"file_name {one_line(repr(fname), 80)} is not a file under --tables {tdir}"
    return None


def load_suite(path: Path | str, tables: Path | str) -> list[dict[str, Any]]:
    """Every item of the suite, in order. An item that cannot be run (no usable id, a duplicate
    id or one naming the same run folder as an earlier id (``a-`` and ``a``: :func:`bench_cell`), a
    missing question, format or table, a format without @name[...] parts) is kept with
    ``problem`` saying why, and is reported, never run; a level or concepts of an odd type are
    dropped. BenchError (one line) only for the files themselves: ``--tables`` not a directory, a
    line that is not a JSON object, no item at all."""
    tdir = Path(tables)
    if not tdir.is_dir():
        raise BenchError(f"--tables {tdir} is not a directory")
    items, seen, folders = [], {}, {}
    for n, obj in _lines(Path(path), "suite"):
        iid, problem = _item_id(obj)
        if iid is not None and iid in seen:
            problem = f"duplicate id {iid!r} (first on line {seen[iid]})"
        elif iid is not None and bench_cell(iid, 0) in folders:
            first = folders[bench_cell(iid, 0)]
            problem = f"id {iid!r} names the same run folder as id {first[0]!r} (line {first[1]}): make them differ"
        elif iid is not None:
            seen[iid] = n
            folders[bench_cell(iid, 0)] = (iid, n)
        problem = problem or _item_problem(obj, tdir)
        level = obj.get("level")
        fname = _text(obj, "file_name")
        items.append(
            {
                "id": iid if iid is not None else f"line-{n}",
                "line": n,
                "question": _text(obj, "question"),
                "constraints": _text(obj, "constraints"),
                "format": _text(obj, "format"),
                "names": [name for name, _ in answer_parts(_text(obj, "format"))],
                "file_name": fname,
                "table": str((tdir / fname).resolve()) if fname else "",
                "level": str(level) if isinstance(level, (str, int)) and not isinstance(level, bool) else None,
                "concepts": _concepts(obj.get("concepts", [])),
                "problem": problem,
            }
        )
    if not items:
        raise BenchError(f"suite {path} has no items")
    return items


@dataclass(frozen=True)
class Labels:
    """One item's labels: (name, value) pairs (values read by :func:`label_value`), or why they
    cannot score it."""

    pairs: tuple[tuple[str, Value], ...] = ()
    problem: str | None = None

    def shown(self) -> str:
        return json.dumps({name: shown(v) for name, v in self.pairs}, ensure_ascii=False)


def _labels(obj: dict[str, Any]) -> Labels:
    """The labels of one line (see :func:`load_labels`)."""
    ca = obj.get("common_answers")
    if not isinstance(ca, list) or not ca:
        return Labels(problem="common_answers must be a non-empty list of [name, value] pairs")
    pairs: dict[str, Value] = {}
    for k, pair in enumerate(ca, 1):
        if not isinstance(pair, list) or len(pair) != 2 or not isinstance(pair[0], str) or not pair[0].strip():
            return Labels(
                problem=f"common_answers item {k} is not a [name, value] pair: {one_line(json.dumps(pair), 80)}"
            )
        name = pair[0].strip()
        try:
            value = label_value(pair[1])
        except ValueError as exc:
            return Labels(problem=f"the label of {name!r}: {exc}")
        if name in pairs and pairs[name] != value:
            return Labels(
                problem=f"{name!r} is given twice with different values ({shown(pairs[name])} and {shown(value)})"
            )
        pairs[name] = value
    return Labels(tuple(pairs.items()))


def load_labels(path: Path | str) -> tuple[dict[str, Labels], list[str]]:
    """``{id: Labels}``, and notes on the lines that name no usable id. Every line is kept: a
    label value may be text (quoted or not, empty, ``nan``), a number (also a bare ``NaN``), a
    list or an object, or text holding a list or dict; a name given twice with the same value
    counts once. A line that cannot score its item (no pairs, a null value, a name given twice
    with different values, an id given again with other answers) marks that item not scored,
    with the reason. BenchError (one line) only for a line that is not a JSON object."""
    return _labels_of(_lines(Path(path), "labels", constants=True))


def _labels_of(lines: Iterable[tuple[int, Any]]) -> tuple[dict[str, Labels], list[str]]:
    """:func:`load_labels` of a labels file's parsed lines."""
    out: dict[str, Labels] = {}
    notes: list[str] = []
    seen: dict[str, int] = {}
    for n, obj in lines:
        iid, why = _item_id(obj)
        if iid is None:
            notes.append(f"labels line {n}: {why}")
            continue
        lab = _labels(obj)
        if iid in seen:
            if lab != out[iid]:
                out[iid] = Labels(
                    problem=f"labels line {n} gives id {iid!r} again with other answers (first on line {seen[iid]})"
                )
            continue
        seen[iid] = n
        out[iid] = lab
    return out, notes


def load_answers(path: Path | str) -> dict[str, str]:
    out: dict[str, str] = {}
    for n, obj in _lines(Path(path), "answers"):
        where = f"answers {path} line {n}"
        iid, why = _item_id(obj)
        if iid is None:
            raise BenchError(f"{where}: {why}")
        if iid in out:
            raise BenchError(f"{where}: duplicate id {iid!r}")
        if not isinstance(obj.get("answer"), str):
            raise BenchError(f"{where}: answer must be text, got {obj.get('answer')!r}")
        out[iid] = obj["answer"]
    return out


# --- scoring -----------------------------------------------------------------------------------------
def score_item(labels: Labels | None, answers: dict[str, str]) -> dict[str, Any]:
    """An item's score: every labelled sub-answer compared (:func:`same`); ``correct`` None and
    ``why`` set when the item cannot be scored (unusable labels; None: no labels)."""
    if labels is None or labels.problem:
        return {
            "correct": None,
            "n_sub": 0,
            "n_sub_correct": 0,
            "sub": {},
            "why": None if labels is None else labels.problem,
        }
    sub = {name: same(value, answers.get(name)) for name, value in labels.pairs}
    return {
        "correct": all(sub.values()),
        "n_sub": len(sub),
        "n_sub_correct": sum(sub.values()),
        "sub": sub,
        "why": None,
    }


def task_text(item: dict[str, Any]) -> str:
    parts = [f"QUESTION: {item['question']}"]
    if item["constraints"]:
        parts.append(f"CONSTRAINTS: {item['constraints']}")
    parts.append(f"ANSWER FORMAT: {item['format']}")
    parts.append(
        "Compute the answer from the data with code. The final paper must end with the answer in exactly the "
        "answer format, each @name[...] part filled in with the value (no units), for example @name[0.42]."
    )
    return "\n\n".join(parts)


# --- the bench ---------------------------------------------------------------------------------------
def _sha(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def item_config(
    it: dict[str, Any],
    out: Path,
    *,
    team_size: int,
    budget_per_item: float | None,
    visibility: str,
    model: str,
    seed: int,
    backend: str,
    llm: dict[str, Any],
    answers: dict[str, str] | None,
) -> dict[str, Any]:
    """The config.json of one item that can run (a science run on its own table, see the module's
    docstring); with scripted ``answers`` the item's answer text is written to ``OUT/answers/ID.txt``."""
    from cooplab.tasks.science.owndata import custom_config

    spec = model
    if answers is not None:
        adir = out / "answers"
        adir.mkdir(parents=True, exist_ok=True)
        f = adir / f"{it['id']}.txt"
        text = answers.get(it["id"], "")
        if not f.exists() or f.read_text(encoding="utf-8") != text:
            f.write_text(text, encoding="utf-8")
        spec = f"builtin:science-answers:{f.resolve()}"
    cfg = custom_config(
        [it["table"]],
        task_text(it),
        None,
        team="llm",
        seed=seed,
        backend=backend,
        llm={**llm, "model": spec, "budget": budget_per_item},
        team_size=team_size,
        visibility=visibility,
        pipeline="solo" if team_size == 1 else "teams",
    )
    cfg["csv"] = False
    cfg["record"] = {**cfg["record"], "bench_item": it["id"]}
    return cfg


def sweep_of(out: Path, items: list[dict[str, Any]], *, seed: int, parallel: int) -> dict[str, Any]:
    """The bench as a grid sweep of the ``science`` task (:mod:`cooplab.runs.grid`): one cell per
    item that can run (grid ``{"item": [ID, ...]}``, the bench's seed: ``OUT/cells/item-ID__sSEED``,
    :func:`cooplab.graphs.formats.bench_cell`), ``parallel`` cells at a time. Each cell's
    config.json is :func:`item_config` (passed to the grid runner as ``config_of``)."""
    return {
        "task": "science",
        "out": str(out),
        "grid": {"item": [it["id"] for it in items if not it["problem"]]},
        "seeds": [seed],
        "parallel": parallel,
    }


def final_text(run_dir: Path) -> tuple[str, str]:
    """(text, where) of a run's final artifact: the last final_paper version, else every artifact's last version."""
    adir = Path(run_dir) / "artifacts"
    if not adir.is_dir():
        return "", "nothing (no artifacts)"
    latest: dict[str, tuple[int, Path]] = {}
    for p in adir.glob("*.v*.md"):
        name, _, v = p.name[:-3].rpartition(".v")
        if v.isdigit() and (name not in latest or int(v) > latest[name][0]):
            latest[name] = (int(v), p)
    if "final_paper" in latest:
        return latest["final_paper"][1].read_text(encoding="utf-8"), "final_paper"
    text = "\n\n".join(latest[n][1].read_text(encoding="utf-8") for n in sorted(latest))
    return text, "other artifacts (no final_paper)" if latest else "nothing (no artifacts)"


def _scored(it: dict[str, Any], answers: dict[str, str], labels: dict[str, Labels] | None) -> dict[str, Any]:
    """The item's score, with why it has none: not run (a problem in the suite), no label, an
    unusable label. Scoring one item never stops the bench: anything it raises is that item's
    reason (the comparisons are bounded, so this is a guard, not the rule)."""
    if it["problem"]:
        return {**score_item(None, {}), "why": f"not run: {it['problem']}"}
    if labels is None:
        return score_item(None, answers)
    lab = labels.get(it["id"])
    if lab is None:
        return {**score_item(None, answers), "why": "no label for this id"}
    try:
        return score_item(lab, answers)
    except Exception as exc:  # noqa: BLE001 - one item's failure is reported with that item, see the docstring
        return {**score_item(None, answers), "why": f"could not be scored: {type(exc).__name__}: {one_line(exc, 200)}"}


def item_row(it: dict[str, Any], run_dir: Path, labels: dict[str, Labels] | None, error: str | None) -> dict[str, Any]:
    """One row of results.parquet. An item that was not run (a problem in the suite) reads nothing
    from ``run_dir`` (its id may be another item's)."""
    from cooplab.graphs.rundir import RunDirError
    from cooplab.graphs.runfiles import read_summary
    from cooplab.tasks.science.results import ScienceResults

    s = None
    if not it["problem"] and (run_dir / "summary.json").exists():
        try:
            s = read_summary(run_dir, ScienceResults)
        except RunDirError as exc:  # the item's row says so, in one line; the others go on
            error = error or str(exc)
    led = s.ledger if s is not None else None
    text, where = final_text(run_dir) if not it["problem"] else ("", "nothing (not run)")
    answers = extract(text)
    sc = _scored(it, answers, labels)
    lab = (labels or {}).get(it["id"])
    return {
        "id": it["id"],
        "line": it["line"],
        "level": it["level"],
        "concepts": ",".join(it["concepts"]),
        "file_name": it["file_name"],
        "status": s.status if s is not None else ("failed" if error else "not run"),
        "correct": sc["correct"],
        "n_sub": sc["n_sub"],
        "n_sub_correct": sc["n_sub_correct"],
        "why_not_scored": sc["why"],
        "answers": json.dumps(answers, ensure_ascii=False),
        "sub_correct": json.dumps(sc["sub"]),
        "expected": lab.shown() if lab is not None and not it["problem"] else "{}",
        "answer_source": where,
        "tokens_in": led.input_tokens if led else 0,
        "tokens_out": led.output_tokens if led else 0,
        "cost_usd": led.cost_usd_float if led else 0.0,
        "wall_seconds": s.wall_seconds if s is not None else None,
        "error": error,
        "run_dir": "" if it["problem"] else str(run_dir),
    }


def _acc(rows: list[dict[str, Any]]) -> dict[str, Any]:
    scored = [r for r in rows if r["correct"] is not None]
    k, n = sum(1 for r in scored if r["correct"]), len(scored)
    ks, ns = sum(r["n_sub_correct"] for r in scored), sum(r["n_sub"] for r in scored)
    lo, hi = wilson(k, n)
    slo, shi = wilson(ks, ns)
    return {
        "items": len(rows),
        "scored": n,
        "correct": k,
        "accuracy": k / n if n else None,
        "ci95": [lo, hi],
        "sub_answers": ns,
        "sub_correct": ks,
        "sub_accuracy": ks / ns if ns else None,
        "sub_ci95": [slo, shi],
    }


#: Run statuses that are the team's own outcome. Other items (stopped by an error: model or sandbox
#: unavailable, a crash) count as wrong in ``accuracy`` - the convention of public benchmarks - and
#: ``finished`` gives the accuracy without them, so an infrastructure failure can be told apart.
TEAM_OUTCOMES = ("completed", "budget_exhausted")


def summarize(rows: list[dict[str, Any]], meta: dict[str, Any]) -> dict[str, Any]:
    overall = _acc(rows)
    fin = _acc([r for r in rows if r["status"] in TEAM_OUTCOMES])
    levels = sorted({r["level"] for r in rows if r["level"] is not None})
    concepts = sorted({c for r in rows for c in r["concepts"].split(",") if c})
    cost = sum(r["cost_usd"] for r in rows)
    walls = [r["wall_seconds"] for r in rows if isinstance(r["wall_seconds"], (int, float))]
    return {
        **meta,
        **overall,
        "by_level": {lv: _acc([r for r in rows if r["level"] == lv]) for lv in levels},
        "by_concept": {c: _acc([r for r in rows if c in r["concepts"].split(",")]) for c in concepts},
        "tokens_in": sum(r["tokens_in"] for r in rows),
        "tokens_out": sum(r["tokens_out"] for r in rows),
        "cost_usd": round(cost, 6),
        "cost_per_item_usd": round(cost / len(rows), 6) if rows else None,
        "cost_per_correct_usd": round(cost / overall["correct"], 6) if overall["correct"] else None,
        "wall_seconds_per_item_mean": round(sum(walls) / len(walls), 3) if walls else None,
        "statuses": {st: sum(1 for r in rows if r["status"] == st) for st in sorted({r["status"] for r in rows})},
        "finished": {k: fin[k] for k in ("items", "scored", "correct", "accuracy", "ci95")},
        "not_scored": [
            {"id": r["id"], "line": r["line"], "why": r["why_not_scored"]} for r in rows if r["why_not_scored"]
        ],
    }


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _table(title: str, groups: dict[str, dict[str, Any]]) -> list[str]:
    lines = [
        f"## {title}",
        "",
        "| group | items | correct | accuracy | 95% CI | sub-answers correct |",
        "|---|---|---|---|---|---|",
    ]
    for g, a in groups.items():
        ci = "n/a" if a["ci95"][0] is None else f"{_pct(a['ci95'][0])}–{_pct(a['ci95'][1])}"
        lines.append(
            f"| {g} | {a['scored']} | {a['correct']} | {_pct(a['accuracy'])} | {ci} | "
            f"{a['sub_correct']}/{a['sub_answers']} |"
        )
    return lines + [""]


def write_report(out: Path, s: dict[str, Any]) -> Path:
    cpc = s["cost_per_correct_usd"]
    lines = [
        f"# Benchmark: {s['suite']}",
        "",
        f"Team `{s['team']}`, team size {s['team_size']}, model `{s['model']}`, budget per item "
        f"{s['budget_per_item']}, visibility {s['visibility']}, seed {s['seed']}, {s['items']} items "
        f"({s['scored']} with labels).",
        "",
        f"- accuracy (every sub-answer right): {s['correct']}/{s['scored']} = {_pct(s['accuracy'])}"
        + ("" if s["ci95"][0] is None else f" (95% Wilson {_pct(s['ci95'][0])}–{_pct(s['ci95'][1])})"),
        f"- sub-answer accuracy: {s['sub_correct']}/{s['sub_answers']} = {_pct(s['sub_accuracy'])}",
        f"- cost ${s['cost_usd']:.6f} (${s['cost_per_item_usd']:.6f} per item), cost per correct answer "
        + ("n/a (none correct)" if cpc is None else f"${cpc:.6f}"),
        f"- tokens in {s['tokens_in']}, out {s['tokens_out']}; mean wall time per item "
        f"{s['wall_seconds_per_item_mean']} s; "
        f"statuses {s['statuses']}",
    ]
    f = s.get("finished") or {}
    if f and f.get("items") != s["items"]:
        lines.append(
            f"- {s['items'] - f['items']} item(s) stopped by an error count as wrong above; over the {f['items']} "
            "whose run "
            f"finished (completed or budget exhausted): {f['correct']}/{f['scored']} = {_pct(f['accuracy'])}"
        )
    lines += [""]
    if s.get("not_scored") or s.get("label_notes"):
        lines += ["## Items not scored", "", "They are left out of the accuracy.", ""]
        lines += [f"- `{n['id']}` (suite line {n['line']}): {n['why']}" for n in s.get("not_scored") or []]
        lines += [f"- {note}" for note in s.get("label_notes") or []]
        lines += [""]
    lines += _table("By level", s["by_level"]) + _table("By concept", s["by_concept"])
    lines += ["Figure: figures/accuracy-cost.png. One row per item: results.parquet.", ""]
    p = out / "report.md"
    p.write_text("\n".join(lines), encoding="utf-8")
    return p


def figure(summaries: list[tuple[str, dict[str, Any]]], path: Path) -> Path:
    """Accuracy (with its 95% Wilson interval) against cost per item, one point per bench."""
    from cooplab.evals.canvas import subplots

    fig, ax = subplots(figsize=(5, 3.6))
    for label, s in summaries:
        if s.get("accuracy") is None:
            continue
        x, y = s["cost_per_item_usd"] or 0.0, s["accuracy"]
        lo, hi = s["ci95"]
        ax.errorbar([x], [y], yerr=[[max(0.0, y - lo)], [max(0.0, hi - y)]], fmt="o", capsize=4, label=label)
    ax.set_xlabel("cost per item (USD)")
    ax.set_ylabel("accuracy (all sub-answers right)")
    ax.set_ylim(-0.02, 1.02)
    ax.legend(fontsize=7, loc="best")
    ax.set_title("accuracy vs cost (95% Wilson intervals)", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    return path


#: the model settings a bench records in bench.json (the model, budget and cache are recorded apart, or not at all)
BENCH_LLM = ("base_url", "temperature", "max_tokens", "max_concurrency", "rps", "price_in", "price_out")


def bench_llm(llm: dict[str, Any] | None) -> dict[str, Any]:
    """The model settings of a bench as bench.json records them: those given, over the defaults of
    a science run on its own data (``owndata.custom_config``: the science output cap)."""
    from cooplab.agents.settings import LLMSettings
    from cooplab.tasks.science.defaults import MAX_TOKENS

    given = {k: v for k, v in (llm or {}).items() if k in BENCH_LLM}
    return LLMSettings.model_validate({"max_tokens": MAX_TOKENS, **given}, strict=False).model_dump(
        include=set(BENCH_LLM)
    )


def check_settings(out: Path, settings: dict[str, Any]) -> None:
    """A rerun must use the settings the bench directory was started with (else its finished items
    would be reused for other settings); ``OUT/bench.json`` records them. ``--limit`` may change."""
    p = out / "bench.json"
    if p.exists():
        try:
            old = parse_json(p.read_bytes(), str(p), error=BenchError)
        except OSError as exc:
            raise BenchError(f"{p} cannot be read ({exc.strerror or exc}); use a new --out") from None
        except BenchError as exc:
            raise BenchError(f"{exc}; use a new --out") from None
        if isinstance(old, dict) and isinstance(old.get("llm"), dict):
            old["llm"] = bench_llm(old["llm"])  # a bench started before an option existed ran with its default
        diff = sorted(k for k in set(old) | set(settings) if old.get(k) != settings.get(k))
        if diff:
            raise BenchError(
                f"{out} was started with other settings ({', '.join(diff)} differ); rerun with the same ones or use a "
                "new --out"
            )


#: what one invocation of the bench hands its analysis (:func:`analyze`): the items, the labels file, the meta
RUN_FILE = "bench-run.json"


def run_bench(
    suite: Path,
    tables: Path,
    out: Path,
    *,
    jobs_on: Runs,
    labels: Path | None,
    team: str,
    team_size: int,
    budget_per_item: float | None,
    budget: float | None,
    visibility: str,
    model: str,
    limit: int | None,
    seed: int,
    parallel: int,
    executor: str,
    backend: str = "docker",
    llm: dict[str, Any] | None = None,
    log=lambda s: None,
    quiet: bool = True,
) -> dict[str, Any]:
    """Run (or resume) a bench on ``jobs_on`` (the engine, :data:`cooplab.runs.engine.ENGINE`) and
    return its summary: the items are the cells of one grid sweep (:func:`sweep_of`) run by the
    engine's grid runner, and the science task's
    :meth:`~cooplab.tasks.science.task.ScienceTask.analyze_sweep` writes the bench's files from the
    folder's manifest (:func:`analyze`). A folder of the earlier ``items/`` layout is refused (one
    line: ``cooplab migrate`` moves it)."""
    from cooplab.graphs.rundir import write_json

    items = load_suite(suite, tables)
    from cooplab.tasks.science.owndata import read_utf8

    labels_text = read_utf8(Path(labels), "labels", BenchError) if labels is not None else None
    labs, label_notes = (
        _labels_of(_text_lines(labels_text, f"labels {labels}", constants=True))
        if labels_text is not None
        else (None, [])
    )
    if limit is not None:
        items = items[:limit]
    if all(it["problem"] for it in items):
        raise BenchError(
            f"no item of suite {suite} can be run; the first: line {items[0]['line']}: {items[0]['problem']}"
        )
    answers = None
    if team.startswith("answers:"):
        answers = load_answers(Path(team[len("answers:") :]))
    elif team != "llm":
        raise BenchError(f"--team must be llm or answers:FILE, got {team!r}")
    if budget is not None and budget_per_item is not None:
        raise BenchError("give --budget-per-item or --budget (the whole suite), not both")
    per_item = budget / len(items) if budget is not None else budget_per_item
    out = Path(out)
    if (out / "items").is_dir() and not (out / "cells").exists() and any((out / "items").iterdir()):
        raise BenchError(
            f"{out} is a bench in the earlier items/ layout; run `cooplab migrate {out}` to move its items into "
            "cells/, then run the bench again"
        )
    settings = {
        "suite_sha256": _sha(Path(suite)),
        "team": team.split(":", 1)[0],
        "answers_sha256": _sha(Path(team[len("answers:") :])) if answers is not None else None,
        "team_size": team_size,
        "model": model if answers is None else None,
        "visibility": visibility,
        "budget_per_item": per_item,
        "seed": seed,
        "sandbox": backend,
        "llm": bench_llm(llm),
    }
    check_settings(out, settings)
    runnable = {it["id"]: it for it in items if not it["problem"]}
    configs = {
        iid: item_config(
            it,
            out,
            team_size=team_size,
            budget_per_item=per_item,
            visibility=visibility,
            model=model,
            seed=seed,
            backend=backend,
            llm=llm or {},
            answers=answers,
        )
        for iid, it in runnable.items()
    }
    sweep = sweep_of(out, items, seed=seed, parallel=parallel)
    try:  # the cells named before anything else is written
        jobs_on.cell_names(sweep, f"bench {out}")
    except ConfigError as exc:
        raise BenchError(str(exc)) from None
    if not (out / "bench.json").exists():
        out.mkdir(parents=True, exist_ok=True)
        (out / "bench.json").write_text(json.dumps(settings, indent=1, default=str) + "\n", encoding="utf-8")
    meta = {
        "suite": str(suite),
        "suite_sha256": _sha(Path(suite)),
        "labels": None if labels is None else str(labels),
        "team": team,
        "team_size": team_size,
        "model": model if answers is None else "builtin:science-answers",
        "budget_per_item": per_item,
        "visibility": visibility,
        "seed": seed,
        "executor": executor,
        "sandbox": backend,
    }
    write_json(
        out / RUN_FILE,
        {
            "meta": meta,
            # the labels themselves, not their file's path: the analysis reads nothing a run folder points to
            "labels_text": labels_text,
            "label_notes": label_notes,
            "items": items,
            "started": time.time(),
            "team_label": f"{team} n={team_size}",
        },
    )
    try:
        res = jobs_on.run_grid(
            sweep,
            where=f"bench {out}",
            config_of=lambda cell: configs[str(cell["item"])],
            kind="bench",
            outputs=BENCH_OUTPUTS,
            executor=executor,
            log=log,
            quiet=quiet,
        )
    except ConfigError as exc:
        raise BenchError(str(exc)) from None
    if res.get("analysis_error"):
        raise BenchError(res["analysis_error"])
    return res["bench"]


def analyze(out: Path, cells: list[dict[str, Any]]) -> dict[str, Any]:
    """The bench's files from its folder: ``results.parquet`` (one row per item of the suite, in
    order), ``summary.json``, ``report.md`` and ``figures/accuracy-cost.png``. Each item that ran is
    found through the folder's manifest (its cell's run directory, status and error); the items, the
    labels and the settings are those this invocation recorded (``bench-run.json``); ``cells`` (the
    finished cells the grid runner hands over) say what this invocation did with each (ran,
    resumed, skipped). Returns ``{"bench": summary}`` for the sweep's result."""
    import pandas as pd

    from cooplab.graphs import runfiles
    from cooplab.graphs.rundir import RunDirError, read_json, write_json

    out = Path(out)
    try:
        run = read_json(out / RUN_FILE)
        m = runfiles.read_manifest(out)
    except (OSError, ValueError, RunDirError) as exc:
        raise BenchError(f"{out} cannot be analysed as a bench ({one_line(exc, 200)}); run the bench again") from None
    if not isinstance(run, dict) or not isinstance(run.get("items"), list):
        raise BenchError(f"{out / RUN_FILE} is not what cooplab bench science writes; run the bench again")
    text = run.get("labels_text")
    labs = _labels_of(_text_lines(text, f"labels kept in {out / RUN_FILE}", constants=True))[0] if text else None
    by_item = {str(c.labels.get("item")): c for c in m.cells if c.dir is not None}
    steps: dict[str, list[str]] = {"ran": [], "resumed": [], "skipped": []}
    finished = set()
    for c in cells:
        item = str((c.get("labels") or {}).get("item"))
        finished.add(item)
        if c.get("step") in steps:
            steps[c["step"]].append(item)
    failed = [{"item": iid, "error": c.error} for iid, c in by_item.items() if c.error and iid not in finished]
    errors = {f["item"]: f["error"] for f in failed}
    rows = []
    for it in run["items"]:
        c = by_item.get(it["id"]) if not it["problem"] else None
        run_dir = out / c.dir if c is not None and c.dir is not None else out / "cells" / "-"
        try:
            rows.append(item_row(it, run_dir, labs, None if it["problem"] else errors.get(it["id"])))
        except RunDirError as exc:  # pragma: no cover - item_row reads what it can; a guard
            raise BenchError(str(exc)) from None
    meta = {
        **run["meta"],
        "ran": sorted(steps["ran"]),
        "resumed": sorted(steps["resumed"]),
        "skipped": sorted(steps["skipped"]),
        "failed": failed,
        "seconds_this_invocation": round(time.time() - float(run.get("started") or time.time()), 3),
        "label_notes": run.get("label_notes") or [],
    }
    s = summarize(rows, meta)
    pd.DataFrame(rows).to_parquet(out / "results.parquet", index=False)
    write_json(out / "summary.json", s)
    write_report(out, s)
    figure([(str(run.get("team_label") or meta["team"]), s)], out / "figures" / "accuracy-cost.png")
    return {"bench": s}
