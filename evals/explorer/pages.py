"""What each page of the explorer shows, as template contexts (plain data, escaped by Jinja).

:class:`Site` holds the folders given to ``cooplab view`` and re-reads them on every list page (a run
that finished since shows up); run ids are looked up among the runs found, so a request can never
name a path outside those folders.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cooplab.evals.explorer import forks, groups, render, traces, views
from cooplab.evals.explorer.runs import ConfigCache, RunDir, discover, shown
from cooplab.evals.typed import sub
from cooplab.evals.values import cut, human_bytes, num, slug
from cooplab.graphs import explore as ex

#: lines of one run in an overlaid plot at most (plots with more lines and a "mean" line overlay the means)
MAX_OVERLAID = 5
#: query values longer than this are refused (ids, agents, rounds are short)
MAX_QUERY_CHARS = 400


def model_of(config: Mapping[str, Any]) -> str:
    """The run's model ("rule" for rule-based agents; per-agent models counted)."""
    if config.get("agents") != "llm":
        a = config.get("agents")
        return a if isinstance(a, str) and a else "?"
    llm = sub(config, "llm")
    model = llm.get("model")
    text = cut(model, 80) if isinstance(model, str) else "?"
    per = llm.get("agent_models")
    if isinstance(per, Mapping) and per:
        text += f" (+{len(per)} per-agent)"
    return text


def clean_query(q: Mapping[str, str]) -> dict[str, str]:
    """Query parameters, with over-long values dropped (hostile text stays text)."""
    return {str(k): str(v) for k, v in q.items() if len(str(v)) <= MAX_QUERY_CHARS and len(str(k)) <= 40}


@dataclass
class Site:
    roots: list[Path]
    task_for: Callable[[str], Any]
    _runs: dict[str, RunDir] = field(default_factory=dict)
    _groups: dict[str, groups.Group] = field(default_factory=dict)
    #: config.json of every served run as last read: a page view re-reads only the files that changed
    configs: ConfigCache = field(default_factory=ConfigCache)

    # --- finding runs ---------------------------------------------------------------------
    def scan(self) -> list[RunDir]:
        runs = discover(self.roots, self.task, self.configs)
        self.configs.keep_only({r.out for r in runs})
        self._runs = {r.id: r for r in runs}
        self._groups = {g.id: g for g in groups.find(self.roots, runs)}
        return runs

    def group(self, gid: str | None) -> groups.Group | None:
        """The sweep or profile with this id (None when there is none under the folders)."""
        if not gid:
            return None
        if gid not in self._groups:
            self.scan()
        return self._groups.get(gid)

    def get(self, run_id: str | None) -> RunDir | None:
        """A fresh reader of the run with this id (None when no such run is under the folders)."""
        if not run_id:
            return None
        if run_id not in self._runs:
            self.scan()
        r = self._runs.get(run_id)
        return (
            RunDir(id=r.id, out=r.out, root=r.root, task_for=self.task, configs=self.configs) if r is not None else None
        )

    def task(self, name: str) -> Any:
        try:
            return self.task_for(name)
        except Exception:  # noqa: BLE001 - an unknown or broken task: the built-in or generic view
            return None

    def base(self, title: str) -> dict[str, Any]:
        return {"title": title, "roots": [shown(r) for r in self.roots]}

    # --- pages ----------------------------------------------------------------------------
    def index(self, query: Mapping[str, str]) -> dict[str, Any]:
        rows = []
        for r in self.scan():
            keys = views.key_numbers(r, self.task(r.task))
            rows.append(
                {
                    "id": r.id,
                    "href": render.run_href(r.id),
                    "name": r.name,
                    "root": shown(r.root),
                    "task": r.task,
                    "status": r.status,
                    "model": model_of(r.config),
                    "date": r.date,
                    "numbers": [(render.text(k, 60), render.text(v, 120)) for k, v in list(keys.items())[:6]],
                    "notes": list(r.notes),
                }
            )
        q = clean_query(query)
        sort = q.get("sort", "")
        sets = [
            {
                "href": render.href("group", {"id": g.id}),
                "name": g.name,
                "kind": g.kind,
                "cells": len(g.cells),
                "conditions": len({groups.condition_of(c)[0] for c in g.cells}) if g.kind == "sweep" else None,
            }
            for g in self._groups.values()
        ]
        return {
            **self.base("cooplab runs"),
            "runs": rows,
            "groups": sets,
            "filter": q.get("q", ""),
            "sort": sort if sort.lstrip("-").isdigit() and len(sort) <= 3 else "",
        }

    def run_page(self, query: Mapping[str, str]) -> tuple[dict[str, Any], int]:
        q = clean_query(query)
        run = self.get(q.get("id"))
        if run is None:
            return {
                **self.base("no such run"),
                "message": f"no run with id {cut(str(query.get('id', '')), 200)!r} under "
                "the folders given; go back to the list",
            }, 404
        secs = views.sections(run, q, self.task(run.task))
        rendered = render.sections(secs, run)
        lineage = forks.lineage_section(
            run, self.scan()
        )  # its parent and its forks, found by run id (evals/explorer/forks.py)
        if lineage is not None:
            rendered.insert(0, lineage)
        return {
            **self.base(f"{run.name} \u00b7 {run.task}"),
            "run": self.header(run),
            "sections": rendered,
            "notes": list(dict.fromkeys(run.notes)),
            "query": q,
        }, 200

    def group_page(self, query: Mapping[str, str]) -> tuple[dict[str, Any], int]:
        q = clean_query(query)
        g = self.group(q.get("id"))
        if g is None:
            return {
                **self.base("no such sweep or profile"),
                "message": f"no sweep or profile with id {cut(str(query.get('id', '')), 200)!r} "
                "under the folders given; go back to the list",
            }, 404
        secs = groups.sections(g, q)
        page = groups.as_page(g)
        return {
            **self.base(f"{g.name} \u00b7 {g.kind}"),
            "group": {"id": g.id, "name": g.name, "kind": g.kind, "path": shown(g.out), "cells": len(g.cells)},
            "sections": render.sections(secs, page),
            "query": q,
        }, 200

    def header(self, run: RunDir) -> dict[str, Any]:
        return {
            "id": run.id,
            "name": run.name,
            "task": run.task,
            "status": run.status,
            "model": model_of(run.config),
            "date": run.date,
            "path": shown(run.out),
            "href": render.run_href(run.id),
        }

    def compare_page(self, query: Mapping[str, str]) -> tuple[dict[str, Any], int]:
        q = clean_query(query)
        a, b = self.get(q.get("a")), self.get(q.get("b"))
        if a is None or b is None:
            missing = [f"{k} = {cut(str(query.get(k, '')), 120)!r}" for k, r in (("a", a), ("b", b)) if r is None]
            return {
                **self.base("compare"),
                "message": f"no run with id {' and '.join(missing)} under the folders given; "
                "compare two runs of the list: /compare?a=ID&b=ID (pick A and B on the list page)",
            }, 404
        if a.task != b.task:
            return {
                **self.base("compare"),
                "message": f"{a.name} is a {a.task!r} run and {b.name} a {b.task!r} run; compare two runs of one task",
            }, 400
        notes = []
        ka, kb = views.key_numbers(a, self.task(a.task)), views.key_numbers(b, self.task(b.task))
        keys = list(dict.fromkeys([*ka, *kb]))
        numbers = [(render.text(k, 60), render.text(ka.get(k), 200), render.text(kb.get(k), 200)) for k in keys]
        sa = views.sections(a, {}, self.task(a.task))
        sb = views.sections(b, {}, self.task(b.task))
        plots = overlay(plots_of(sa), plots_of(sb))
        try:
            fork = forks.comparison(a, b, self.task(a.task))
        except Exception as exc:  # noqa: BLE001 - damaged tables: the rest of the page still shows
            fork = None
            notes.append(
                f"the round-by-round comparison could not be made ({cut(f'{type(exc).__name__}: {exc}', 300)})"
            )
        return {
            **self.base(f"compare {a.name} and {b.name}"),
            "a": self.header(a),
            "b": self.header(b),
            "numbers": numbers,
            "fork": fork,
            "plots": [render.block(p, a) for p in plots],
            "twins": twins(sa, sb, a, b),
            "notes": notes + [f"A: {n}" for n in dict.fromkeys(a.notes)] + [f"B: {n}" for n in dict.fromkeys(b.notes)],
        }, 200

    def traces_page(self, query: Mapping[str, str]) -> tuple[dict[str, Any], int]:
        q = clean_query(query)
        run = self.get(q.get("id"))
        if run is None:
            return {**self.base("no such run"), "message": "no such run under the folders given"}, 404
        filters = {k: q[k] for k in traces.FILTERS if q.get(k)}
        calls, note = traces.calls(run, filters)
        tf = traces.trace_file(run)
        noun = views.noun(run.task, self.task(run.task))
        prefix = render.addresses().prefix
        for n, c in enumerate(calls):
            if not c.get("agent_name") and isinstance(c.get("agent"), int):
                c["agent_name"] = f"{noun} {c['agent'] + 1}"
            c["anchor"] = f"{prefix}call-{n + 1}"
            c["facts"] = call_facts(c)
        return {
            **self.base(f"model calls of {run.name}"),
            "run": self.header(run),
            "calls": calls,
            "filters": filters,
            "rounds": by_round(calls, prefix),
            "totals": trace_totals(tf, calls),
            "notes": [note] if note else [],
            "fork": self.fork_of(run),
        }, 200

    def fork_of(self, run: RunDir) -> dict[str, Any] | None:
        """What the traces page says of a fork: its parent (found by run id among the runs under the
        folders; None when not there) and K, with links to the parent's page and model calls."""
        rec = forks.fork_of(run)
        if rec is None:
            return None
        parent = forks.by_id(self.scan()).get(rec["parent_id"]) if rec["parent_id"] else None
        return {
            "at_round": rec["at_round"],
            "where": rec["where"],
            "changes": rec["changes"],
            "parent_id": render.text(rec["parent_id"], 120),
            "parent_name": parent.name if parent is not None else None,
            "parent_href": render.run_href(parent.id) if parent is not None else None,
            "parent_traces": render.trace_href(parent.id) if parent is not None else None,
            "compare": forks.compare_href(parent, run) if parent is not None else None,
        }


def call_facts(c: Mapping[str, Any]) -> list[tuple[str, str]]:
    """What the traces page says of one model call besides its messages: where in the graph, when,
    how long, the tokens the model reported and what the ledger charged (replays: nothing)."""
    out = [
        ("node", c.get("node")),
        ("started", c.get("start")),
        ("took", f"{c['seconds']:.3g} s" if isinstance(c.get("seconds"), float) else None),
        ("tokens reported by the model", traces.tokens_text(c.get("reported"))),
    ]
    ch = c.get("charged")
    if ch is not None:
        out.append(
            ("charged (ledger)", f"{traces.tokens_text((ch.input_tokens, ch.output_tokens))}, {traces.usd(ch.cost)}")
        )
    elif c.get("cached"):
        out.append(("charged (ledger)", "nothing: answered from the response cache, no model was asked"))
    out += [("call id", c.get("call_id")), ("run id", c.get("run_id"))]
    return [(k, render.text(v, 200)) for k, v in out if v not in (None, "")]


def by_round(calls: list[dict[str, Any]], prefix: str = "") -> list[dict[str, Any]]:
    """The calls grouped by their round, in order of the rounds (calls of no known round last); one
    group of every call when none has a round."""
    if not any(c.get("round") is not None for c in calls):
        return [{"title": "every call", "id": f"{prefix}calls", "calls": calls}] if calls else []
    groups: dict[Any, list[dict[str, Any]]] = {}
    for c in calls:
        groups.setdefault(c.get("round"), []).append(c)
    order = sorted((r for r in groups if r is not None), key=lambda r: (num(r) is None, num(r) or 0, str(r)))
    out = [
        {"title": f"round {render.text(r, 40)}", "id": f"{prefix}round-{slug(str(r))}", "calls": groups[r]}
        for r in order
    ]
    if None in groups:
        out.append({"title": "no round", "id": f"{prefix}round-none", "calls": groups[None]})
    return out


def trace_totals(tf: traces.TraceFile, calls: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The traces page's header: the calls shown, the tokens the model reported over them, what the
    ledger charged for the whole run, and what the file holds."""
    cached = sum(1 for c in calls if c.get("cached"))
    reported = [c["reported"] for c in calls if c.get("reported")]
    out = [("model calls", f"{len(calls):,}" + (f" ({cached:,} answered from the response cache)" if cached else ""))]
    if reported:
        out.append(
            (
                "tokens reported by the model",
                traces.tokens_text((sum(p[0] for p in reported), sum(p[1] for p in reported))),
            )
        )
    led = tf.charged
    if led is not None:
        out.append(
            (
                "charged tokens (ledger, the whole run)",
                f"{traces.tokens_text((led['input_tokens'], led['output_tokens']))}, "
                f"{led['calls']:,} calls, {traces.usd(led['cost_usd'])}",
            )
        )
    if len(tf.starts) > 1 or any(s["started_as"] != "new" for s in tf.starts):
        words = {
            "new": "from its first step",
            "resumed": "resumed from a checkpoint",
            "fork": "a fork's start, from its parent's checkpoint",
        }
        out.append(
            (
                "parts traced (one per process)",
                "; ".join(
                    f"{n}. {words[s['started_as']]}"
                    + (
                        f" (of run {cut(s['fork_of'], 60)}, round "
                        + (str(s["fork_at_round"]) if s.get("fork_at_round") is not None else "not recorded")
                        + ")"
                        if s["started_as"] == "fork" and s.get("fork_of")
                        else ""
                    )
                    for n, s in enumerate(tf.starts[:20], 1)
                )
                + ("; …" if len(tf.starts) > 20 else ""),
            )
        )
    if tf.exists:
        kinds = ", ".join(f"{k} {v:,}" for k, v in sorted(tf.run_types.items()))
        out.append(
            ("traces.jsonl", f"{human_bytes(tf.bytes)}, {tf.records:,} records" + (f" ({kinds})" if kinds else ""))
        )
    return out


#: sections shown side by side on the comparison page when either run has them (their tables and notes)
TWIN_SECTIONS = ("fines", "norms")


def twins(sa: list[ex.Section], sb: list[ex.Section], a: RunDir, b: RunDir) -> list[dict[str, Any]]:
    """The sections of :data:`TWIN_SECTIONS` of both runs, each run's blocks (plots left out) rendered
    with its own links."""
    by_a = {s.id: s for s in sa if isinstance(s, ex.Section)}
    by_b = {s.id: s for s in sb if isinstance(s, ex.Section)}
    out = []
    for sid in TWIN_SECTIONS:
        if sid not in by_a and sid not in by_b:
            continue
        sides = []
        for sec, run in ((by_a.get(sid), a), (by_b.get(sid), b)):
            blocks = [x for x in (sec.blocks if sec else []) if not isinstance(x, ex.Plot)]
            sides.append(
                [render.block(x, run) for x in blocks] or [render.block(ex.Note("not in this run", level="info"), run)]
            )
        title = (by_a[sid] if sid in by_a else by_b[sid]).title
        out.append({"title": render.text(title, 200), "a": sides[0], "b": sides[1]})
    return out


def plots_of(secs: list[ex.Section]) -> dict[str, ex.Plot]:
    """The keyed plots of a page, by key (nested blocks included)."""
    found: dict[str, ex.Plot] = {}

    def walk(blocks: list[Any]) -> None:
        for b in blocks:
            if isinstance(b, ex.Plot) and b.key and b.key not in found:
                found[b.key] = b
            elif isinstance(b, ex.Details):
                walk(b.blocks)
            elif isinstance(b, ex.Columns):
                for col in b.columns:
                    walk(col)

    for s in secs:
        if isinstance(s, ex.Section):
            walk(s.blocks)
    return found


def overlay(pa: dict[str, ex.Plot], pb: dict[str, ex.Plot]) -> list[ex.Plot]:
    """One plot per key of either run: both runs' series on the same axes (labelled A and B)."""
    out = []
    for key in dict.fromkeys([*pa, *pb]):
        parts = [(tag, p) for tag, p in (("A", pa.get(key)), ("B", pb.get(key))) if p is not None]
        xs = sorted({x for _, p in parts for x in (num(v) for v in p.x) if x is not None})
        series: dict[str, list[Any]] = {}
        for tag, p in parts:
            pos = {num(v): i for i, v in enumerate(p.x)}
            items = list(p.series.items())
            if len(items) > MAX_OVERLAID and "mean" in p.series:  # one line per agent: the runs' means only
                items = [("mean", p.series["mean"])]
            for label, ys in items[:MAX_OVERLAID]:
                ys = list(ys)
                series[f"{tag} \u00b7 {label}"] = [
                    ys[pos[x]] if x in pos and pos[x] < len(ys) else math.nan for x in xs
                ]
        first = parts[0][1]
        only = "" if len(parts) == 2 else f" (only run {parts[0][0]} has this plot)"
        caption = "run A solid, run B dashed" + (f"; {first.caption}" if first.caption else "")
        out.append(
            ex.Plot(
                xs,
                series,
                title=first.title + only,
                xlabel=first.xlabel,
                ylabel=first.ylabel,
                kind=first.kind,
                key=key,
                integer_x=first.integer_x,
                caption=caption,
                dashed=[k for k in series if k.startswith("B ")],
            )
        )
    return out
