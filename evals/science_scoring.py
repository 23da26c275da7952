"""Scoring a science team's final report against its task's ground truth (§4.1.2, Appendix L).

Three dimensions, each in [0, 1]:

* **completeness**: the share of the seven required sections (:data:`SECTIONS`) present with
  substantive content;
* **quality**: task-agnostic signs of rigor: specific numbers, standard methods, statistical
  tests, cross-references to the other teams' work;
* **accuracy**: the task's known facts (``ground_truth.json``) stated correctly.

Two scorers:

* :func:`heuristic_score`: deterministic rules, summarized here and documented in full where
  they are implemented; the module constants (windows, thresholds, saturation points,
  vocabularies) are the knobs.

  - *Text* (:func:`clean_text`): bytes decoded leniently, the first :data:`MAX_CHARS`
    characters read, Unicode normalized. Markdown structure (:func:`logical_lines`): wrapped
    lines of a paragraph form one paragraph; list items, table rows, headings and code lines
    stand alone; sentences are cut at ``.!?`` (not after common abbreviations or in decimals).
  - *Sections* (:func:`parse_heading`, :func:`heading_blocks`): Markdown, bold, underlined, numbered,
    HTML, LaTeX, plain and inline ("Methods: ...") headings, matched against synonyms
    ("Dataset Description", "Materials and Methods", "Discussion and Conclusion", ...).
    *Substantive* (:func:`is_substantive`): at least :data:`MIN_SENTENCES` sentences,
    :data:`MIN_WORDS` words and :data:`MIN_DISTINCT_WORDS` distinct words once placeholder
    sentences (TBD, "to be completed", lorem ipsum, ...) are dropped, and not a copy of an
    earlier section's body. Completeness = substantive sections / 7.
  - *Quality* (:func:`quality_parts`): the mean of four parts, each a count of distinct items
    over a saturation point: numbers stated (:data:`NUMBERS_FULL`), standard methods named
    (:data:`METHOD_TERMS`, :data:`METHODS_FULL`), statistical tests and inference
    (:data:`TEST_TERMS`, :data:`TESTS_FULL`), references to other teams and their artifacts
    (:data:`CROSS_REF_TERMS`, :data:`CROSS_REFS_FULL`).
  - *Accuracy* (:func:`score_facts`): the mean of the facts' scores. Facts are only looked for
    in text that may state findings: not in the introduction or the methods (:func:`_units`).
    A fact is found only when the report commits to one value, label, set or direction: a
    statement offering several candidates ("3, 4 or 5", "between 100 and 140", "kriging or the
    random forest") or a guess ("may", "could", "one of") counts against it, as do statements
    committing to something else. A *number* is found if numbers within its tolerance stand
    next to a context phrase (:func:`_score_number`); a *set* scores right items minus wrong
    ones over the truth's (:func:`_score_set`); a *claim* counts the sentences asserting and
    denying it, with negations and comparatives ("higher than") read, and a single denial
    defeats it (:func:`_score_claim`); a *label* is found if it is named next to its context
    (:func:`_score_label`). Each fact is ``found``, ``contradicted`` or ``missing``
    (:class:`FactResult`).

* :func:`judge_report`: an LLM judge with the Appendix L rubric and response format, asked
  through the decision layer (:mod:`cooplab.agents.decisions`): the answer is validated
  (:class:`JudgeVerdict`), a validation error is fed back and the judge asked again up to
  ``max_attempts`` times, and a sample that never validates is recorded as a fallback and left
  out of the means. ``k`` samples per report give a mean and a spread; :func:`judge_agreement`
  and :func:`compare_judges` compare two judges (or a judge and the heuristic) over many
  reports.

Ground truth format (one JSON object per task and seed)::

    {"task": "ecology", "seed": 0, "description": "...", "equations": "...",
     "facts": [{"id": ..., "kind": "number" | "set" | "claim" | "label", "value": ...,
                "context": [phrases], "statement": "one sentence a correct report contains",
                # optional: "tolerance" (number); "universe" (set: all candidate items);
                # "negative_context" (set, claim: phrases naming the opposite); "aliases" and
                # "alternatives" (label)
               }, ...],
     "details": {...}}

:func:`truth_problems` checks a ground truth against these rules: every fact's own
``statement``, alone and among the others, must be found by the heuristic scorer (a
generator's self-test).

Where the code lives (:mod:`cooplab.evals.scoring`, one concern per module): section parsing in
:mod:`~cooplab.evals.scoring.sections`, numbers, terms and phrases in
:mod:`~cooplab.evals.scoring.extraction`, the fact scorers and the heuristic score in
:mod:`~cooplab.evals.scoring.facts`, the LLM judge (its prompt in ``scoring/prompts/``) in
:mod:`~cooplab.evals.scoring.judge`, and agreement statistics in
:mod:`~cooplab.evals.scoring.agreement`. This module is the entry point: it re-exports the names
the rest of the project uses, so callers import from here.
"""

from cooplab.evals.scoring.agreement import compare_judges, judge_agreement
from cooplab.evals.scoring.extraction import METHOD_TERMS, extract_numbers, find_terms, quality_parts
from cooplab.evals.scoring.facts import HeuristicScore, heuristic_score, truth_facts, truth_problems
from cooplab.evals.scoring.judge import (
    JUDGE_COLUMNS,
    JUDGE_SYSTEM,
    JUDGE_USER_TEMPLATE,
    JudgeVerdict,
    ground_truth_text,
    judge_entry,
    judge_messages,
    judge_prompt,
    judge_report,
    judge_spec,
    to_unit,
)
from cooplab.evals.scoring.sections import SECTIONS, clean_text, is_substantive, split_sections

__all__ = [
    "JUDGE_COLUMNS",
    "JUDGE_SYSTEM",
    "JUDGE_USER_TEMPLATE",
    "METHOD_TERMS",
    "SECTIONS",
    "HeuristicScore",
    "JudgeVerdict",
    "clean_text",
    "compare_judges",
    "extract_numbers",
    "find_terms",
    "ground_truth_text",
    "heuristic_score",
    "is_substantive",
    "judge_agreement",
    "judge_entry",
    "judge_messages",
    "judge_prompt",
    "judge_report",
    "judge_spec",
    "quality_parts",
    "split_sections",
    "to_unit",
    "truth_facts",
    "truth_problems",
]
