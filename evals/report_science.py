"""The science run's part of its one HTML page (``cooplab report``, evals/report.py): the scores
with every fact's status, score and evidence, the judges' scores and cost, and the final paper
rendered. Everything read from the run is escaped; damaged files are named, never fatal."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable

_PAPER = re.compile(r"final_paper\.v(\d{1,9})\.md")


def _score(v: Any) -> str:
    """A 0-1 score as text: two decimals, ``not scored (no truth)`` for null."""
    from cooplab.evals.report import fmt, num

    if v is None:
        return "not scored (no truth)"
    x = num(v)
    return f"{x:.2f}" if x is not None else fmt(v, 40)


def judge_cost(entry: dict[str, Any]) -> str:
    """``; judge cost $x of its $b budget`` of a judge's scores.json entry (its own ledger, apart from the team's)."""
    from cooplab.evals.report import num

    ledger = entry.get("ledger")
    cost = num(ledger.get("cost_usd_float")) if isinstance(ledger, dict) else None
    if cost is None:
        return ""
    cap = num(entry.get("budget_usd"))
    return f"; judge cost ${cost:.4f}" + (f" of its ${cap:.4f} budget" if cap is not None else "")


def _judges(judges: Any) -> str:
    from cooplab.evals.report import esc
    from cooplab.evals.text import counts_text

    out = []
    for j in judges if isinstance(judges, list) else []:
        if not isinstance(j, dict):
            continue
        spread = j.get("std")
        spread_text = counts_text({k: _score(v) for k, v in spread.items()}) if isinstance(spread, dict) else "none"
        out.append(f"<p>Judge <code>{esc(j.get('judge'))}</code> (k = {esc(j.get('k'))}): completeness {esc(_score(j.get('completeness')))}, "
                   f"quality {esc(_score(j.get('quality')))}, accuracy {esc(_score(j.get('accuracy')))}; "
                   f"spread (s.d. over its k readings) {esc(spread_text)}{esc(judge_cost(j))}</p>")
    return "".join(out)


def _facts(facts: Any) -> str:
    from cooplab.evals.report import esc

    rows = [f for f in (facts if isinstance(facts, list) else []) if isinstance(f, dict)]
    if not rows:
        return '<p class="muted">No facts were scored.</p>'
    body = "".join(f"<tr><td>{esc(f.get('id'))}</td><td>{esc(f.get('status'))}</td><td>{esc(_score(f.get('score')))}</td>"
                   f"<td>{esc(f.get('evidence', ''))}</td></tr>" for f in rows)
    return ('<div class="scroll"><table class="data"><thead><tr><th>fact</th><th>status</th><th>score</th><th>evidence</th>'
            f"</tr></thead><tbody>{body}</tbody></table></div>")


def scores_block(page: Any, d: Path, where: str) -> str:
    """The scores of ``d/scores.json``: heuristic scores, each judge's, and the facts table."""
    from cooplab.evals.report import esc, read_json

    path = d / "scores.json"
    if not path.is_file():
        return '<p class="muted">No scores.json: the run was not scored.</p>'
    scores, problem = read_json(path)
    if problem or not isinstance(scores, dict):
        return page.problem(where, problem or "scores.json is damaged (not a JSON object)")
    h = scores.get("heuristic") if isinstance(scores.get("heuristic"), dict) else {}
    head = (f"<p>Heuristic scores (0-1): completeness {esc(_score(h.get('completeness')))}, quality {esc(_score(h.get('quality')))}, "
            f"accuracy {esc(_score(h.get('accuracy')))} (scored: {esc(scores.get('scored'))}).</p>")
    return head + _judges(scores.get("judges")) + _facts(h.get("facts"))


def newest_paper(d: Path) -> Path | None:
    """The run's last final paper (``artifacts/final_paper.vN.md`` with the largest N)."""
    try:
        found = [(int(m.group(1)), p) for p in (d / "artifacts").iterdir() if (m := _PAPER.fullmatch(p.name)) and p.is_file()]
    except OSError:
        return None
    return max(found)[1] if found else None


def paper_block(page: Any, d: Path, where: str) -> str:
    """The final paper, rendered (safe Markdown subset), with a link to its file."""
    from cooplab.evals.report import markdown_block

    paper = newest_paper(d)
    if paper is None:
        return '<p class="muted">No final paper was written.</p>'
    return markdown_block(page, paper, paper.relative_to(d).as_posix(), where)


def science_sections(page: Any, d: Path, sub: Callable[[str], str], where: str) -> str:
    """The science sections of a run's page: Scores, then Final paper."""
    return sub("Scores") + scores_block(page, d, where) + sub("Final paper") + paper_block(page, d, where)
