"""The LLM judge (the rubric and response format of Appendix L, in our own words).

The judge's prompt (system prompt, user template with the rubric, and the reply instructions)
is kept as text files in ``prompts/`` next to this module and read once at import
(:func:`_prompt`). :func:`judge_prompt` and :func:`judge_messages` fill it for one report, which
is untrusted data: it goes last, between two marker lines carrying a code derived from its own
text (:func:`report_markers`), and the system prompt tells the judge to follow nothing inside;
:class:`JudgeVerdict` is the strict response format, :func:`judge_spec` the decision asked of
the model, and :func:`judge_report` samples the judge k times and summarizes the answers in a
:class:`JudgeResult`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from pydantic import BaseModel, ConfigDict, Field

from cooplab.agents.decisions import DecisionRecord, DecisionSpec, LLMService, decide
from cooplab.evals.scoring.facts import truth_facts
from cooplab.evals.scoring.sections import MAX_CHARS, SECTIONS, clean_text


def _prompt(name: str) -> str:
    """The text of ``prompts/NAME.txt``, read as UTF-8 with the file's final newline dropped
    (the files end with one so editors leave them alone; the prompt itself does not)."""
    text = resources.files("cooplab.evals.scoring").joinpath("prompts", f"{name}.txt").read_text(encoding="utf-8")
    return text.removesuffix("\n")


# =============================================================================================
# the LLM judge (Appendix L)
# =============================================================================================
# The rubric's criteria, scales and response format are those of Appendix L, worded our own way.
JUDGE_SYSTEM = _prompt("judge_system")
JUDGE_USER_TEMPLATE = _prompt("judge_user")

#: the judge reads at most this many characters of a report (about 25k tokens); a longer report
#: is cut with a visible marker so the prompt fits the judge's context.
JUDGE_MAX_REPORT_CHARS = 100_000
#: Appendix L: a maximum of 512 output tokens.
JUDGE_MAX_TOKENS = 512
JUDGE_PHASE = "judge"
_PLACEHOLDER_FIELDS = ("task", "task_description", "ground_truth_text", "report_open", "report_close", "report_text")
_FIELD_RE = re.compile(r"\{(" + "|".join(_PLACEHOLDER_FIELDS) + r")\}")


def _value_text(v: Any, limit: int = 300) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)) and all(isinstance(x, (str, int, float)) and not isinstance(x, bool) for x in v):
        s = ", ".join(str(x) for x in v)
    elif isinstance(v, (dict, list, tuple)):
        s = json.dumps(v, default=str, separators=(", ", ": "))
    else:
        s = str(v)
    return s if len(s) <= limit else s[: limit - 3] + "..."


def ground_truth_text(truth: dict[str, Any], max_chars: int = 4000) -> str:
    """The ground truth as the judge reads it: the facts' statements (what a correct report
    says), then each fact's key value (with its tolerance), the generating equations if any, and
    the scalar or short entries of ``details`` (nested one level, long values cut), at most
    ``max_chars`` characters in all."""
    facts = truth_facts(truth)
    lines = ["Findings a correct report states:"]
    lines += [f"- {f['statement']}" for f in facts]
    lines += ["", "Key values:"]
    for f in facts:
        v = _value_text(f["value"])
        tol = f.get("tolerance")
        lines.append(f"- {f['id']} = {v}" + (f" (+/- {tol})" if f["kind"] == "number" and tol else ""))
    if truth.get("equations"):
        lines += ["", f"Generating model: {_value_text(truth['equations'], 800)}"]
    details = truth.get("details")
    if isinstance(details, dict) and details:
        lines += ["", "Other parameters:"]
        n = 0
        for k, v in details.items():
            if n >= 40:
                break
            if isinstance(v, dict):
                for k2, v2 in v.items():
                    if n >= 40:
                        break
                    lines.append(f"- {k}.{k2} = {_value_text(v2, 200)}")
                    n += 1
            else:
                lines.append(f"- {k} = {_value_text(v, 200)}")
                n += 1
    text = "\n".join(lines)
    return text if len(text) <= max_chars else text[: max_chars - 18] + "\n[... cut ...]"


#: runs of three or more angle brackets in a report are replaced by look-alike characters, so a
#: report cannot even imitate the shape of the marker lines around it.
_MARKER_LIKE_RE = re.compile(r"<{3,}|>{3,}")


def _defang(text: str) -> str:
    return _MARKER_LIKE_RE.sub(lambda m: ("\u2039" if m.group(0)[0] == "<" else "\u203a") * len(m.group(0)), text)


def report_markers(report_text: str) -> tuple[str, str]:
    """The two lines that enclose a report in the judge's prompt. Their code is the start of the
    SHA-256 of the (already escaped) report text: the same report always gets the same markers
    (cached judge calls replay), and no report can contain its own markers, since it would have
    to contain a digest of itself."""
    code = hashlib.sha256(report_text.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"<<<REPORT {code} BEGINS>>>", f"<<<REPORT {code} ENDS>>>"


def judge_prompt(
    report: Any,
    truth: dict[str, Any],
    *,
    task_description: str | None = None,
    max_report_chars: int = JUDGE_MAX_REPORT_CHARS,
) -> str:
    """The user message: :data:`JUDGE_USER_TEMPLATE` with its fields filled in one pass (a
    report quoting ``{task}`` is left as it is). The report is cleaned (:func:`clean_text`), cut
    at ``max_report_chars`` with a marker saying how much was left out, stripped of marker-like
    runs of angle brackets, and placed last, between the lines of :func:`report_markers`."""
    text, _ = clean_text(report, max_chars=MAX_CHARS)
    if len(text) > max_report_chars:
        text = (
            text[:max_report_chars]
            + f"\n\n[... the report continues for {len(text) - max_report_chars} more characters ...]"
        )
    text = _defang(text) if text.strip() else "(the report is empty)"
    opening, closing = report_markers(text)
    values = {
        "task": str(truth.get("task", "")),
        "task_description": str(task_description if task_description is not None else truth.get("description", "")),
        "ground_truth_text": ground_truth_text(truth),
        "report_open": opening,
        "report_close": closing,
        "report_text": text,
    }
    return _FIELD_RE.sub(lambda m: values[m.group(1)], JUDGE_USER_TEMPLATE)


def judge_messages(report: Any, truth: dict[str, Any], **kw: Any) -> list[BaseMessage]:
    """The judge's conversation: the Appendix L system prompt and the filled user template."""
    return [SystemMessage(content=JUDGE_SYSTEM), HumanMessage(content=judge_prompt(report, truth, **kw))]


class JudgeSections(BaseModel):
    """Which sections the judge saw with substantive content."""

    model_config = ConfigDict(extra="forbid", strict=True)
    abstract: bool
    introduction: bool
    dataset: bool
    methods: bool
    results: bool
    evaluation: bool
    conclusion: bool


Rating = Field(ge=1, le=5, description="an integer from 1 to 5")
Rationale = Field(min_length=1, max_length=2000, description="one sentence")


class JudgeVerdict(BaseModel):
    """The Appendix L response format. Strict: ratings are JSON integers 1-5 (not "5", 4.0 or
    true), rationales strings, all seven section flags booleans; every key required and no
    other key allowed."""

    model_config = ConfigDict(extra="forbid", strict=True)
    completeness: int = Rating
    completeness_rationale: str = Rationale
    sections: JudgeSections
    quality: int = Rating
    quality_rationale: str = Rationale
    accuracy: int = Rating
    accuracy_rationale: str = Rationale

    def unit_scores(self) -> dict[str, float]:
        """The three ratings mapped to [0, 1] (:func:`to_unit`)."""
        return {d: to_unit(getattr(self, d)) for d in ("completeness", "quality", "accuracy")}


def to_unit(score: int) -> float:
    """A 1-5 rating on [0, 1]: (s - 1) / 4. Raises ValueError outside 1..5 or for a non-integer."""
    if isinstance(score, bool) or not isinstance(score, (int, np.integer)) or not 1 <= int(score) <= 5:
        raise ValueError(f"a judge rating is an integer from 1 to 5, got {score!r}")
    return (int(score) - 1) / 4.0


_LENGTH_KEYS = ("minLength", "maxLength")


def grammar_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema a grammar-constrained decoder (the local llama.cpp model) gets: ``$ref``s to
    ``$defs`` replaced by the definitions (decoders do not follow references), and no string
    length bounds. llama.cpp writes ``maxLength: N`` as N nested optional repetitions; for the
    rationales' 2000 that grammar crashed the model process (SIGSEGV) on every call, and even a
    few hundred makes decoding many times slower. Lengths are still checked: every answer is
    validated against :class:`JudgeVerdict` itself."""
    defs = schema.get("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node and node["$ref"].startswith("#/$defs/"):
                return walk(defs[node["$ref"].split("/")[-1]])
            return {k: walk(v) for k, v in node.items() if k != "$defs" and k not in _LENGTH_KEYS}
        if isinstance(node, list):
            return [walk(x) for x in node]
        return node

    return walk(schema)


_JUDGE_INSTRUCTIONS = _prompt("judge_instructions")


def judge_spec(
    *, max_attempts: int = 3, max_tokens: int = JUDGE_MAX_TOKENS, phase: str = JUDGE_PHASE
) -> DecisionSpec[JudgeVerdict]:
    """The judge's decision: schema :class:`JudgeVerdict`, an invalid answer's error fed back
    and the judge asked again up to ``max_attempts`` times, output capped at ``max_tokens``, and
    no fallback value: a sample that never validates is recorded (``fallback_used``) and left
    out of the means, never replaced by an invented rating. Grammar-constrained decoders get
    :func:`grammar_schema`."""
    return DecisionSpec(
        phase=phase,
        schema=JudgeVerdict,
        fallback=None,
        max_attempts=max_attempts,
        max_tokens=max_tokens,
        instructions=_JUDGE_INSTRUCTIONS,
        constrain=lambda schema, ctx: grammar_schema(schema),
    )


DIMENSIONS: tuple[str, ...] = ("completeness", "quality", "accuracy")


@dataclass
class JudgeResult:
    """A judge's k samples on one report. ``completeness``/``quality``/``accuracy``: the mean of
    the valid samples on [0, 1] (None if none was valid); ``std``: their population standard
    deviation (ddof = 0: the spread of these k answers; 0 for one); ``sections``: the share of
    valid samples that saw each section; ``verdicts``: the k parsed answers (None for a sample
    that fell back); ``records``: the k decision records; ``n_fallback``: samples that never
    gave a valid answer."""

    judge: str
    k: int
    completeness: float | None
    quality: float | None
    accuracy: float | None
    std: dict[str, float | None]
    sections: dict[str, float | None]
    verdicts: list[JudgeVerdict | None]
    records: list[DecisionRecord]
    n_fallback: int

    def scores(self) -> dict[str, float | None]:
        return {d: getattr(self, d) for d in DIMENSIONS}

    def as_dict(self) -> dict[str, Any]:
        return {
            "judge": self.judge,
            "k": self.k,
            **self.scores(),
            "std": dict(self.std),
            "sections": dict(self.sections),
            "verdicts": [v.model_dump() if v is not None else None for v in self.verdicts],
            "records": [r.as_dict() for r in self.records],
            "n_fallback": self.n_fallback,
        }


#: the columns of a judge's scores in a science sweep's scores.csv (beside the heuristic's)
JUDGE_COLUMNS = {"completeness": "judge_completeness", "quality": "judge_quality", "accuracy": "judge_accuracy"}


def judge_entry(scores: Any, judge: str | None = None) -> dict[str, Any] | None:
    """A run's judge scores from its scores.json (``scores``): the entry of the judge ``judge``
    (None: the last judge that scored the run), or None when no such judge has scored it."""
    entries = [j for j in (scores.get("judges") or [] if isinstance(scores, dict) else []) if isinstance(j, dict)]
    if judge is not None:
        entries = [j for j in entries if j.get("judge") == judge]
    return entries[-1] if entries else None


async def judge_report(
    service: LLMService,
    report: Any,
    truth: dict[str, Any],
    *,
    k: int = 3,
    judge_name: str | None = None,
    agent: int = 0,
    society: int = 0,
    spec: DecisionSpec[JudgeVerdict] | None = None,
    task_description: str | None = None,
    max_report_chars: int = JUDGE_MAX_REPORT_CHARS,
    config: RunnableConfig | None = None,
) -> JudgeResult:
    """Ask the judge (the service's model for ``agent``: its ``"default"`` model unless the
    service maps ``str(agent)`` to another) to rate ``report`` ``k`` times, concurrently.

    Sample ``i`` is the decision of round ``i``: the round is part of the decision layer's cache
    key (with the model identity, messages, agent, phase, seed and attempt), so the k samples
    are k distinct calls with distinct sampling seeds, and rerunning replays each from the cache.
    Every call is charged to ``service.ledger`` (give the judge its own service and ledger so it
    never spends a team's budget). All samples run to completion, then the first failure (e.g.
    ``ModelUnavailable``, ``BudgetExhausted``) is raised."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    spec = spec or judge_spec()
    messages = judge_messages(report, truth, task_description=task_description, max_report_chars=max_report_chars)

    async def one(i: int):
        return await decide(service, spec, messages, society=society, agent=agent, round=i, ctx={}, config=config)

    results = await asyncio.gather(*(one(i) for i in range(k)), return_exceptions=True)
    failures = [r for r in results if isinstance(r, BaseException)]
    if failures:
        raise failures[0]
    done = [r for r in results if not isinstance(r, BaseException)]  # every one, since none failed
    verdicts: list[JudgeVerdict | None] = [v for v, _ in done]
    records = [rec for _, rec in done]
    valid = [v for v in verdicts if v is not None]
    means: dict[str, float | None] = {}
    stds: dict[str, float | None] = {}
    for d in DIMENSIONS:
        xs = np.array([to_unit(getattr(v, d)) for v in valid], dtype=float)
        means[d] = round(float(xs.mean()), 6) if xs.size else None
        stds[d] = round(float(xs.std(ddof=0)), 6) if xs.size else None
    sections = {
        s: (round(sum(getattr(v.sections, s) for v in valid) / len(valid), 6) if valid else None) for s in SECTIONS
    }
    name = judge_name or service.model_for(agent)[0].id
    return JudgeResult(
        judge=name,
        k=k,
        completeness=means["completeness"],
        quality=means["quality"],
        accuracy=means["accuracy"],
        std=stds,
        sections=sections,
        verdicts=verdicts,
        records=records,
        n_fallback=sum(1 for r in records if r.fallback_used),
    )


__all__ = [
    "DIMENSIONS",
    "JUDGE_COLUMNS",
    "JUDGE_MAX_REPORT_CHARS",
    "JUDGE_MAX_TOKENS",
    "JUDGE_PHASE",
    "JUDGE_SYSTEM",
    "JUDGE_USER_TEMPLATE",
    "JudgeResult",
    "JudgeSections",
    "JudgeVerdict",
    "grammar_schema",
    "ground_truth_text",
    "judge_entry",
    "judge_messages",
    "judge_prompt",
    "judge_report",
    "judge_spec",
    "report_markers",
    "to_unit",
]
