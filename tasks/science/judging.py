"""The LLM judge of a science run's report (Appendix L), on its own model service and ledger: the
judge never spends the team's budget, it has a budget of its own (``--judge-budget``; default the
same amount as the team's ``--budget``), and its calls are cached like the team's (a re-score
replays). What it spent is reported next to the team's cost (summary.json's ``judge``, scores.json)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from cooplab.graphs import rundir
from cooplab.graphs.aio import run_sync

JUDGE_MAX_TOKENS = 512  #: Appendix L: at most 512 output tokens, temperature 0
#: what the judge's ledger reports (in scores.json and summary.json)
LEDGER_FIELDS = ("calls", "cached_calls", "input_tokens", "output_tokens", "cost_usd_float")


class JudgeFailed(RuntimeError):
    """The judge could not score the report (its budget ran out, its model could not be reached);
    one line. ``ledger``: what it had spent by then."""

    def __init__(self, message: str, ledger: dict[str, Any]):
        super().__init__(message)
        self.ledger = ledger


def judge_budget(config: Mapping[str, Any], given: float | None = None) -> float | None:
    """The judge's budget in USD: ``given``, else the run's ``params.judge.budget``, else the
    team's ``llm.budget`` (None: no cap, as for the team)."""
    if given is not None:
        return float(given)
    judge = (config.get("params") or {}).get("judge") if isinstance(config.get("params"), Mapping) else None
    if isinstance(judge, Mapping) and judge.get("budget") is not None:
        return float(judge["budget"])
    team = (config.get("llm") or {}).get("budget")
    return None if team is None else float(team)


def judge_service(
    config: dict[str, Any],
    judge: str,
    *,
    base_url: str | None = None,
    cache: str | None = None,
    budget: float | None = None,
):
    """The judge's own model service: the run's model settings with the judge's model, temperature
    0, 512 output tokens and its own ledger capped at ``budget`` USD (None: no cap)."""
    from cooplab.agents.settings import LLMSettings, build_service

    llm = {k: v for k, v in (config.get("llm") or {}).items() if k in LLMSettings.model_fields}
    llm.update(model=judge, agent_models={}, budget=budget, temperature=0.0, max_tokens=JUDGE_MAX_TOKENS)
    if base_url is not None:
        llm["base_url"] = base_url
    if cache is not None:
        llm["cache"] = cache
    llm.setdefault("max_concurrency", 4)
    return build_service(LLMSettings.model_validate(llm, strict=False), seed=int(config.get("seed", 0)))


def _failure(judge: str, out: Path, exc: BaseException, budget: float | None, ledger: dict[str, Any]) -> JudgeFailed:
    """A judge's stop as one line: what happened, what it spent, how to score again."""
    from cooplab.agents.decisions import BudgetExhausted
    from cooplab.limits import one_line

    spent = f"${float(ledger.get('cost_usd_float') or 0):.6f} in {ledger.get('calls', 0)} calls"
    if isinstance(exc, BudgetExhausted):
        why = f"the judge's budget (${budget:g}) ran out ({spent}); score again with a larger --judge-budget"
    else:
        why = f"{one_line(exc, 300)} ({spent})"
    return JudgeFailed(f"the judge {judge} could not score {out}: {why}", ledger)


def judge_run(
    out: Path,
    judge: str,
    *,
    k: int = 3,
    base_url: str | None = None,
    cache: str | None = None,
    budget: float | None = None,
) -> dict[str, Any]:
    """Score ``out``'s final paper (or what exists) with ``judge`` k times under ``budget`` USD; add
    the result (with the judge's ledger) to scores.json, replacing an earlier score by the same
    judge, and return it. A judge stopped by its budget or an unreachable model raises
    :class:`JudgeFailed` (scores.json unchanged). Holds the run directory's lock while it writes."""
    from cooplab.agents.decisions import BudgetExhausted, ModelUnavailable
    from cooplab.evals.science_scoring import judge_report
    from cooplab.tasks.science import datasets as dsets

    out = Path(out)
    config = rundir.read_config(out)
    truth = rundir.read_json(out / "dataset" / dsets.TRUTH_FILE)
    papers = sorted((out / "artifacts").glob("final_paper.v*.md"), key=lambda p: int(p.stem.rsplit(".v", 1)[1]))
    if papers:
        report = papers[-1].read_text(encoding="utf-8")
    else:
        report = "\n\n".join(p.read_text(encoding="utf-8") for p in sorted((out / "artifacts").glob("*.md")))
    with rundir.locked(out):
        service = judge_service(config, judge, base_url=base_url, cache=cache, budget=budget)
        try:
            res = run_sync(
                lambda: judge_report(
                    service,
                    report,
                    truth,
                    k=k,
                    judge_name=judge,  # a notebook's loop too
                    task_description=dsets.TASK_DESCRIPTIONS.get(truth.get("task", ""), truth.get("description", "")),
                )
            )
        except (BudgetExhausted, ModelUnavailable) as exc:
            raise _failure(judge, out, exc, budget, _ledger(service)) from None
        finally:
            service.close()
        entry = res.as_dict()
        entry.pop("records", None)
        if truth.get("task") == "custom" and not truth.get(
            "accuracy_scored"
        ):  # your own data without truth: not scored
            entry["accuracy"] = None
            if isinstance(entry.get("std"), dict):
                entry["std"]["accuracy"] = None
        entry["ledger"] = _ledger(service)
        entry["budget_usd"] = budget
        scores = rundir.read_json(out / "scores.json") if (out / "scores.json").exists() else {}
        scores["judges"] = [j for j in scores.get("judges") or [] if j.get("judge") != judge] + [entry]
        rundir.write_json(out / "scores.json", scores)
    return entry


def _ledger(service: Any) -> dict[str, Any]:
    totals = service.ledger.totals()
    return {k: totals[k] for k in LEDGER_FIELDS}
