"""Forks on the explorer: a run's lineage on its page, and the fork comparison of the compare page.

A fork's config.json records its parent (``record.fork``: the parent's folder as given, its run id,
the round K, the changes, the lineage). The explorer finds the parent **by its run id** among the
runs under the folders given to ``cooplab view`` (their ``record.thread_id``), never by the folder
the record names: a run folder is data, and a path written in it opens nothing. Forks of a run are
found the same way (the runs whose record names this run's id as parent).

The compare page's fork part is :mod:`cooplab.evals.compare` on the two runs' summaries and
per-round tables, read through each run's own reader (:class:`~cooplab.evals.explorer.runs.RunDir`,
which refuses a file leading out of its folder): the rounds the runs share (by their lineages,
:func:`cooplab.graphs.forks.common_round`), the first round whose rows differ, the outcome curves of
both runs on one plot per column with the shared rounds shaded and the first difference marked, and
B - A of every outcome with its 95% interval (paired when the runs share a start, else Welch's).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from cooplab.evals.explorer import render
from cooplab.evals.explorer.runs import RunDir
from cooplab.evals.values import cut, fmt
from cooplab.graphs import explore as ex

#: forks of one run listed on its page at most
MAX_FORKS = 200
#: per-round columns drawn on the compare page when the task names none
DEFAULT_CURVES = 4


def run_id(run: RunDir) -> str | None:
    """A run's id as its config.json records it (``record.thread_id``), or None."""
    rec = run.config.get("record")
    tid = rec.get("thread_id") if isinstance(rec, Mapping) else None
    return tid if isinstance(tid, str) and tid else None


def fork_of(run: RunDir) -> dict[str, Any] | None:
    """What a fork's config.json says of its parent: ``parent_id`` (the parent's run id, or None),
    ``at_round`` (K, or None), ``where`` (K in words: "at the end of round K", or that the record
    does not say) and ``changes`` (as text); None for a run that is not a fork."""
    from cooplab.graphs.forks import fork_record, prefix_rounds

    rec = fork_record(run.config)
    if rec is None:
        return None
    pid = rec.get("parent_thread_id")
    k = prefix_rounds(run.config)
    return {
        "parent_id": pid if isinstance(pid, str) and pid else None,
        "at_round": k,
        "where": at_round_words(k),
        "changes": changes_text(rec.get("changes")),
    }


def at_round_words(k: int | None) -> str:
    """Where a fork left its parent, in words (a damaged record may not say)."""
    return f"at the end of round {k}" if k is not None else "at a round its record does not say"


def changes_text(changes: Any) -> str:
    """A fork's changes in one line ("set r=0.6; model scripted:..."; "no changes")."""
    if not isinstance(changes, Mapping) or not changes:
        return "no changes"
    parts = []
    for k, v in changes.items():
        if isinstance(v, Mapping):
            parts.append(f"{k} " + ", ".join(f"{a}={fmt(b, 80)}" for a, b in v.items()))
        else:
            parts.append(f"{k} {fmt(v, 200)}")
    return cut("; ".join(parts), 400)


def by_id(runs: Iterable[RunDir]) -> dict[str, RunDir]:
    """The runs by their recorded run id (the first of two folders holding one run id: a copy)."""
    out: dict[str, RunDir] = {}
    for r in runs:
        if r.page != "run":
            continue
        tid = run_id(r)
        if tid is not None and tid not in out:
            out[tid] = r
    return out


def compare_href(a: RunDir, b: RunDir) -> str | None:
    return render.href("compare", {"a": a.id, "b": b.id})


def lineage_section(run: RunDir, runs: Iterable[RunDir]) -> dict[str, Any] | None:
    """The "Forks" section of a run's page, as the templates take it: its parent (a link, and one to
    compare the two) when it is a fork, and the forks of it under the folders; None when it is neither."""
    runs = list(runs)
    ids = by_id(runs)
    mine = run_id(run)
    rec = fork_of(run)
    blocks: list[dict[str, Any]] = []
    if rec is not None:
        parent = ids.get(rec["parent_id"]) if rec["parent_id"] else None
        k, where = rec["at_round"], rec["where"]
        if parent is not None and parent.out != run.out:
            blocks.append(
                {
                    "kind": "kv",
                    "title": None,
                    "items": [
                        ("fork of", parent.name),
                        ("forked", where),
                        ("changes", rec["changes"]),
                        ("rounds shared with the parent", f"1..{k}" if k else "none" if k == 0 else "not recorded"),
                    ],
                }
            )
            blocks.append(
                {"kind": "link", "text": f"open the parent, {parent.name}", "href": render.run_href(parent.id)}
            )
            blocks.append(
                {
                    "kind": "link",
                    "text": "compare this fork with its parent (A: the parent, B: this fork)",
                    "href": compare_href(parent, run),
                }
            )
        else:
            blocks.append(
                {
                    "kind": "note",
                    "level": "info",
                    "text": f"a fork {where} ({rec['changes']}) of the run with id "
                    f"{cut(str(rec['parent_id']), 120)!r}, which is not under the folders given to cooplab view "
                    "(give its folder too to link and compare them)",
                }
            )
    kids = []
    if mine is not None:
        for r in runs:
            if r.page != "run" or r.out == run.out:
                continue
            got = fork_of(r)
            if got is not None and got["parent_id"] == mine:
                kids.append((r, got))
    if kids:
        rows = []
        for r, got in kids[:MAX_FORKS]:
            rows.append(
                [
                    {"text": render.text(r.name, 300), "href": render.run_href(r.id), "sort": ""},
                    {
                        "text": render.text(got["at_round"]),
                        "sort": repr(got["at_round"]) if got["at_round"] is not None else "",
                    },
                    {"text": render.text(got["changes"]), "sort": ""},
                    {"text": render.text(r.status), "sort": ""},
                    {"text": "compare with this run", "href": compare_href(run, r), "sort": ""},
                ]
            )
        blocks.append(
            {
                "kind": "table",
                "title": "Forks of this run",
                "columns": ["fork", "forked at the end of round", "changes", "status", "compare"],
                "rows": rows,
                "total": len(kids),
                "shown": len(rows),
                "filterable": True,
            }
        )
    if not blocks:
        return None
    return {"title": "Forks", "id": render.addresses().prefix + "forks", "blocks": blocks}


def relation(a: RunDir, b: RunDir, shared: int) -> str:
    """How two runs are related, in words."""
    ra, rb = fork_of(a), fork_of(b)
    ia, ib = run_id(a), run_id(b)
    if rb is not None and ia is not None and rb["parent_id"] == ia:
        return f"B is a fork of A {rb['where']} ({rb['changes']})"
    if ra is not None and ib is not None and ra["parent_id"] == ib:
        return f"A is a fork of B {ra['where']} ({ra['changes']})"
    if ia is not None and ia == ib:
        return "A and B are the same run (one run id)"
    if shared > 0:
        return f"A and B share rounds 1..{shared} through their fork records (forks of one run, or a fork of a fork)"
    return "A and B share no round by their fork records (separate runs: their societies are compared unpaired)"


def comparison(a: RunDir, b: RunDir, task: Any = None) -> dict[str, Any]:
    """The fork part of the compare page of runs ``a`` and ``b`` (one task): ``facts`` (pairs of
    text), ``plots`` (rendered plot blocks), ``table`` (the rendered B - A table), ``notes``."""
    from cooplab.evals import compare as cmp
    from cooplab.graphs.forks import common_round

    notes: list[str] = []
    ta, tb = run_id(a), run_id(b)
    shared = common_round(a.config, ta, b.config, tb)
    ra = a.table("rounds") if a.has_table("rounds") else None
    rb = b.table("rounds") if b.has_table("rounds") else None
    if shared == -1:  # one run twice
        done = a.summary.get("rounds_completed")
        shared = done if isinstance(done, int) and not isinstance(done, bool) and done > 0 else 0
    known = [c for c in cmp.value_columns(ra) if rb is not None and c in rb.columns]
    wanted = getattr(task, "curve_columns", None)
    cols = [c for c in wanted if c in known] if isinstance(wanted, (list, tuple)) else []
    cols = cols or known[:DEFAULT_CURVES]
    res = cmp.compare(cmp.Side("A", a.summary, ra), cmp.Side("B", b.summary, rb), common_round=shared, columns=cols)
    if ra is None or rb is None:
        notes.append(
            "no curves and no first differing round: "
            + " and ".join(f"run {t} has no readable per-round table" for t, df in (("A", ra), ("B", rb)) if df is None)
        )
    first = res.first_difference
    facts = [
        ("relation", relation(a, b, shared)),
        (
            "rounds shared",
            f"1..{shared} (B's rounds 1..{shared} are read from the same checkpoints, not run again)"
            if shared > 0
            else "none",
        ),
        (
            "first round that differs",
            str(first)
            if first is not None
            else (
                "none: the per-round tables agree on every round both reach"
                if ra is not None and rb is not None
                else "not known"
            ),
        ),
    ]
    plots = [render.block(p, a) for p in curve_plots(res, shared)]
    return {
        "facts": [(render.text(k, 60), render.text(v, 400)) for k, v in facts],
        "plots": plots,
        "table": outcome_table(res.outcomes),
        "notes": notes,
        "paired": shared != 0,
    }


def curve_plots(res: Any, shared: int) -> list[ex.Plot]:
    """One plot per curve column: run A's per-round mean (solid) and run B's (dashed, same colour),
    the shared rounds shaded, the first differing round marked."""
    out = []
    for col in res.columns:
        part = res.curves[res.curves["column"] == col]
        rounds = sorted({int(r) for r in part["round"]})
        series: dict[str, list[Any]] = {}
        for tag in ("A", "B"):
            g = part[part["run"] == tag]
            at = {int(r): float(m) for r, m in zip(g["round"], g["mean"], strict=False)}
            series[f"{tag} \u00b7 {col}"] = [at.get(r) for r in rounds]
        marks: list[dict[str, Any]] = []
        if shared > 0:
            marks.append(
                {
                    "x": 0.5,
                    "to": shared + 0.5,
                    "label": f"rounds 1..{shared} shared (fork at the end of round {shared})",
                }
            )
        if res.first_difference is not None:
            marks.append({"x": res.first_difference, "label": f"first difference: round {res.first_difference}"})
        caption = (
            f"Each line is {col} per round, the mean over the run's societies: run A solid, run B dashed (one colour). "
            + (
                f"The grey band covers rounds 1..{shared}, which the runs share (the fork took them from the "
                "checkpoint at "
                f"the end of round {shared}; both lines lie on each other there). "
                if shared > 0
                else "The runs share no round by their fork records (no grey band). "
            )
            + (
                f"The red dotted line marks round {res.first_difference}, the first round whose per-round rows differ "
                "(in any column, society by society, not only this one)."
                if res.first_difference is not None
                else "No red line: the per-round rows agree on every round both runs reach."
            )
        )
        out.append(
            ex.Plot(
                rounds,
                series,
                title=f"{col} per round, A and B",
                xlabel="round",
                ylabel=col,
                key=f"fork-{col}",
                caption=caption,
                dashed=[f"B \u00b7 {col}"],
                marks=marks,
            )
        )
    return out


def outcome_table(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The B - A table (rendered): each outcome's value in A and B, the difference, its 95% interval
    and how it was computed."""
    cols = ["outcome", "A", "B", "B \u2212 A", "95% interval of B \u2212 A", "interval", "societies (A / B)"]
    out = []
    for o in rows:
        lo, hi = o.get("low"), o.get("high")
        ci = f"[{fmt(lo)}, {fmt(hi)}]" if lo is not None and hi is not None else "\u2014"
        how = o.get("interval") or (
            "one value each: no interval" if o.get("n_a") in (None, 1) or o.get("n_b") in (None, 1) else "\u2014"
        )
        n = f"{o['n_a']} / {o['n_b']}" if o.get("n_a") is not None and o.get("n_b") is not None else "\u2014"
        cells = [render.text(o.get("outcome"), 120), o.get("a"), o.get("b"), o.get("difference"), ci, how, n]
        out.append([render.cell(v) for v in cells])
    return {
        "kind": "table",
        "title": "Every outcome: B \u2212 A",
        "columns": cols,
        "rows": out,
        "total": len(out),
        "shown": len(out),
        "filterable": True,
    }


__all__ = [
    "by_id",
    "changes_text",
    "comparison",
    "curve_plots",
    "fork_of",
    "lineage_section",
    "outcome_table",
    "relation",
    "run_id",
]
