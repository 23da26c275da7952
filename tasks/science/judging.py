"""The LLM judge of a science run's report (Appendix L), on its own model service and ledger: the
judge never spends the team's budget, and its calls are cached like the team's (a re-score replays)."""

from __future__ import annotations

import asyncio
import concurrent.futures
from pathlib import Path
from typing import Any

from cooplab.agents.calls import ModelUnavailable
from cooplab.graphs import rundir
from cooplab.limits import one_line

JUDGE_MAX_TOKENS = 512  #: Appendix L: at most 512 output tokens, temperature 0


class JudgeFailed(RuntimeError):
    """The judge model could not score a run (unreachable, crashed past its retries, refused the
    request); the message is one line naming the run and the model. Nothing is written to the
    run's scores.json."""


def judge_service(config: dict[str, Any], judge: str, *, base_url: str | None = None, cache: str | None = None):
    from cooplab.agents.settings import build_service

    from cooplab.agents.settings import LLMSettings

    llm = {k: v for k, v in (config.get("llm") or {}).items() if k in LLMSettings.model_fields}
    llm.update(model=judge, agent_models={}, budget=None, temperature=0.0, max_tokens=JUDGE_MAX_TOKENS)
    if base_url is not None:
        llm["base_url"] = base_url
    if cache is not None:
        llm["cache"] = cache
    llm.setdefault("max_concurrency", 4)
    return build_service({"llm": LLMSettings.model_validate(llm, strict=False), "seed": int(config.get("seed", 0))})


def _run(coro):
    """Run a coroutine to completion also from inside a running event loop (the runner's)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as ex:
        return ex.submit(asyncio.run, coro).result()


def judge_run(out: Path, judge: str, *, k: int = 3, base_url: str | None = None, cache: str | None = None) -> dict[str, Any]:
    """Score ``out``'s final paper (or what exists) with ``judge`` k times; add the result to
    scores.json (replacing an earlier score by the same judge) and return it."""
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
    service = judge_service(config, judge, base_url=base_url, cache=cache)
    try:
        res = _run(judge_report(service, report, truth, k=k, judge_name=judge,
                                task_description=dsets.TASK_DESCRIPTIONS.get(truth.get("task", ""), truth.get("description", ""))))
        totals = service.ledger.totals()
    except ModelUnavailable as exc:
        raise JudgeFailed(one_line(f"the judge {judge} could not score {out}: {exc}", 600)) from None
    finally:
        service.cache.close()
    entry = res.as_dict()
    entry.pop("records", None)
    if truth.get("task") == "custom" and not truth.get("accuracy_scored"):  # your own data without truth: not scored
        entry["accuracy"] = None
        if isinstance(entry.get("std"), dict):
            entry["std"]["accuracy"] = None
    entry["ledger"] = {k2: totals[k2] for k2 in ("calls", "cached_calls", "input_tokens", "output_tokens", "cost_usd_float")}
    scores = rundir.read_json(out / "scores.json") if (out / "scores.json").exists() else {}
    scores["judges"] = [j for j in scores.get("judges") or [] if j.get("judge") != judge] + [entry]
    rundir.write_json(out / "scores.json", scores)
    return entry
