"""A science run's one-page ``report.html``: the final paper rendered, the scores, the budget spent
per team over the run (``figures/budget.png``, also embedded) and the team timeline."""

from __future__ import annotations

import base64
import html
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cooplab.graphs import rundir


def budget_figure(out: Path, path: Path) -> Path | None:
    """Cumulative cost per team over the run's charges (in the order they were made)."""
    try:
        lg = rundir.read_table(out, "ledger")
    except (FileNotFoundError, OSError, ValueError):
        return None
    if lg.empty:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lg = lg.reset_index(drop=True)
    lg["cost_f"] = lg["cost"].astype(float)
    fig, ax = plt.subplots(figsize=(7, 3.2))
    for team, g in lg.groupby(lg["team"].fillna("?"), sort=False):
        ax.step(g.index, g["cost_f"].cumsum(), where="post", label=str(team))
    ax.plot(lg.index, lg["cost_f"].cumsum(), color="0.3", ls=":", label="all teams")
    cfg = rundir.read_json(out / "config.json")
    budget = (cfg.get("llm") or {}).get("budget")
    if budget:
        ax.axhline(float(budget), color="tab:red", ls="--", lw=1, label="budget")
    ax.set_xlabel("charge (model call or sandbox call), in order")
    ax.set_ylabel("USD spent")
    ax.legend(fontsize=8)
    ax.set_title("Budget spent per team over the run", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _markdown(text: str) -> str:
    """A small, safe Markdown-to-HTML rendering (headings, lists, paragraphs, tables as text)."""
    out, para = [], []

    def flush() -> None:
        if para:
            out.append("<p>" + " ".join(para) + "</p>")
            para.clear()

    for line in text.splitlines():
        s = html.escape(line.rstrip())
        m = re.match(r"^(#{1,4})\s+(.*)", s)
        if m:
            flush()
            k = len(m.group(1)) + 1
            out.append(f"<h{k}>{m.group(2)}</h{k}>")
        elif re.match(r"^\s*[-*]\s+", s):
            flush()
            out.append("<li>" + re.sub(r"^\s*[-*]\s+", "", s) + "</li>")
        elif s.strip().startswith("|"):
            flush()
            out.append(f"<pre>{s}</pre>")
        elif not s.strip():
            flush()
        else:
            para.append(s)
    flush()
    body = "\n".join(out)
    return re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", body)


def _judge_cost(entry: Mapping[str, Any]) -> str:
    """"; cost $x of $b" of a judge's scores.json entry (its own ledger, apart from the team's)."""
    ledger = entry.get("ledger")
    cost = ledger.get("cost_usd_float") if isinstance(ledger, Mapping) else None
    if not isinstance(cost, (int, float)) or isinstance(cost, bool):
        return ""
    cap = entry.get("budget_usd")
    return f"; judge cost ${float(cost):.4f}" + (f" of its ${float(cap):.4f} budget" if isinstance(cap, (int, float)) else "")


def write_report(out: Path, summary: Mapping[str, Any]) -> Path:
    out = Path(out)
    fig = budget_figure(out, out / "figures" / "budget.png")
    scores = rundir.read_json(out / "scores.json") if (out / "scores.json").exists() else {}
    arts = sorted((out / "artifacts").glob("final_paper.v*.md"), key=lambda p: int(p.stem.rsplit(".v", 1)[1]))
    paper = arts[-1].read_text(encoding="utf-8") if arts else "(no final paper was written)"
    h = scores.get("heuristic") or {}
    rows = "".join(f"<tr><td>{html.escape(str(f['id']))}</td><td>{html.escape(str(f['status']))}</td><td>{f['score']:.2f}</td>"
                   f"<td>{html.escape(str(f.get('evidence', ''))[:200])}</td></tr>" for f in h.get("facts", []))
    judges = ""
    for j in scores.get("judges") or []:
        judges += (f"<p>Judge <code>{html.escape(str(j.get('judge')))}</code> (k = {j.get('k')}): completeness "
                   f"{j.get('completeness')}, quality {j.get('quality')}, accuracy {'not scored (no truth)' if j.get('accuracy') is None else j.get('accuracy')}; spread {json.dumps(j.get('std'))}"
                   f"{_judge_cost(j)}</p>")
    timeline = ""
    try:
        tl = rundir.read_table(out, "timeline")
        timeline = tl.to_html(index=False, border=0)
    except (FileNotFoundError, OSError, ValueError):
        pass
    img = ""
    if fig is not None:
        img = f'<img alt="budget per team" src="data:image/png;base64,{base64.b64encode(fig.read_bytes()).decode()}">'
    s = summary
    doc = f"""<!doctype html><html><head><meta charset="utf-8"><title>cooplab science run: {html.escape(str(s.get('science_task')))}</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:2em auto;line-height:1.4}} table{{border-collapse:collapse;font-size:90%}}
td,th{{border-bottom:1px solid #ddd;padding:2px 6px;text-align:left}} .paper{{border:1px solid #ccc;padding:1em;background:#fafafa}}</style>
</head><body>
<h1>Science run: {html.escape(str(s.get('science_task')))} ({html.escape(str(s.get('team')))} team)</h1>
<p>Status <b>{html.escape(str(s.get('status')))}</b>; team size {s.get('team_size')}; visibility {html.escape(str(s.get('visibility')))};
prompt {html.escape(str(s.get('prompt')))}; cost ${(s.get('ledger') or {}).get('cost_usd_float', 0):.4f}; passes {html.escape(', '.join(s.get('passes') or []))}.</p>
<h2>Scores</h2>
<p>Heuristic (0-1): completeness {h.get('completeness', 0):.2f}, quality {h.get('quality', 0):.2f}, accuracy {'not scored (no truth)' if h.get('accuracy', 0) is None else format(h.get('accuracy', 0), '.2f')}
(scored: {html.escape(str(scores.get('scored')))}).</p>{judges}
<table><tr><th>fact</th><th>status</th><th>score</th><th>evidence</th></tr>{rows}</table>
<h2>Budget</h2>{img}
<h2>Timeline</h2>{timeline}
<h2>Final paper</h2><div class="paper">{_markdown(paper)}</div>
</body></html>"""
    path = out / "report.html"
    path.write_text(doc, encoding="utf-8")
    return path
