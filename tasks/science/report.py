"""A science run's ``report.html``: the budget spent per team over the run (``figures/budget.png``)
and the run's one file, the same that ``cooplab report`` writes (evals/report.py): the explorer's
pages of the run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cooplab.graphs import rundir


def _budget_key(lg: Any, budget: Any) -> str | None:
    """The key of what the budget figure shows (:func:`~cooplab.evals.figcache.figure_key`): each
    charge's team and cost in order, the budget line, the drawing code and the library versions. A
    rerun answered from the cache charges the same calls at the same costs, so it has the same key."""
    from cooplab.evals import canvas
    from cooplab.evals.figcache import figure_key

    return figure_key(
        "science budget figure", (__file__, canvas.__file__), {"budget": budget}, (lg[["team", "cost_usd"]],)
    )


def budget_figure(out: Path, path: Path, cache: Any = None) -> Path | None:
    """Cumulative cost per team over the run's charges (in the order they were made). With
    ``cache`` (the run's response cache), a figure drawn before from the same charges is copied
    from it instead of drawn (:mod:`cooplab.evals.figcache`)."""
    try:
        lg = rundir.read_table(out, "ledger")
    except (FileNotFoundError, OSError, ValueError):
        return None
    if lg.empty or not {"team", "cost_usd"} <= set(lg.columns):
        return None
    from cooplab.evals.figcache import draw_or_copy

    lg = lg.reset_index(drop=True)
    lg["team"] = lg["team"].fillna("?")
    cfg = rundir.read_json(out / "config.json")
    budget = (cfg.get("llm") or {}).get("budget")
    key = _budget_key(lg, budget) if cache is not None else None

    def draw(p: Path) -> None:
        from cooplab.evals.canvas import subplots

        fig, ax = subplots(figsize=(7, 3.2))
        for team, g in lg.groupby("team", sort=False):
            ax.step(g.index, g["cost_usd"].cumsum(), where="post", label=str(team))
        ax.plot(lg.index, lg["cost_usd"].cumsum(), color="0.3", ls=":", label="all teams")
        if budget:
            ax.axhline(float(budget), color="tab:red", ls="--", lw=1, label="budget")
        ax.set_xlabel("charge (model call or sandbox call), in order")
        ax.set_ylabel("USD spent")
        # the curves rise to the right, so the upper left corner is free: a fixed place and fixed margins
        # spare matplotlib a search for the legend's place and a layout pass (a third of the figure's cost)
        ax.legend(fontsize=8, loc="upper left")
        ax.set_title("Budget spent per team over the run", fontsize=10)
        fig.subplots_adjust(left=0.11, right=0.98, bottom=0.15, top=0.9)
        p.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(p, dpi=110)

    return draw_or_copy(path, key, cache, draw)


def write_report(out: Path, task: Any = None, cache: Any = None) -> Path:
    """The run's one file, ``out/report.html``: the budget figure, then the file ``cooplab report``
    writes for any run (evals/report.py): the explorer's pages of the run, which for a science run
    (``task``: the science task, whose ``explore`` hook makes its page) hold the scores with every
    fact's evidence, the judges, the final paper, the timeline, the code calls, the budget, the
    figures and the tables. ``cooplab report DIR`` rewrites this same file."""
    from cooplab.evals.report import write_report as write_page

    out = Path(out)
    budget_figure(out, out / "figures" / "budget.png", cache=cache)
    task_for = (lambda name: task if name == getattr(task, "name", None) else None) if task is not None else None
    return Path(write_page(out, out / "report.html", task_for=task_for)["path"])
