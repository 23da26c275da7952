"""Pulling countable things out of report text.

Numbers with their percent marks (:class:`Number`, :func:`extract_numbers`); the methods,
statistical tests and cross-references a report names (:func:`find_terms` over
:data:`METHOD_TERMS`, :data:`TEST_TERMS`, :data:`CROSS_REF_TERMS`); the numbers a report states
and the four parts of the quality score built from them (:func:`result_numbers`,
:func:`quality_parts`); and a fact's context phrase (:func:`context_re`) or a named item
(:func:`phrase_re`) as a pattern.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from cooplab.evals.scoring.sections import ALPHA_WORD_RE, TOKEN_RE, parse_heading

#: quality saturation points: this many distinct numbers, named methods, statistical tests and
#: cross-references each give a full part score (linear below).
NUMBERS_FULL = 10
METHODS_FULL = 3
TESTS_FULL = 2
CROSS_REFS_FULL = 2


# =============================================================================================
# numbers
# =============================================================================================
_NUMBER_RE = re.compile(
    r"(?:(?<![\w.)\]%])(?P<sign>[-+]))?(?<![\w.])"
    r"(?:(?P<int>\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?P<frac>\.\d+)?|(?P<frac0>\.\d+))"
    r"(?:[eE](?P<exp>[-+]?\d{1,3})(?![\w]))?"
    r"(?:\s?[x×*]\s?10\s?(?:\^|\*\*)\s?\(?(?P<exp2>[-+]?\d{1,3})\)?)?"
    r"(?P<pct>\s?%)?"
)
_NUMBER_WORDS = {
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
}
_NUMBER_WORD_RE = re.compile(r"(?<![\w-])(" + "|".join(_NUMBER_WORDS) + r")(?![\w-])", re.IGNORECASE)


@dataclass(frozen=True)
class Number:
    """A number read from text: its value, whether it was a percentage, and its text."""

    value: float
    percent: bool
    text: str
    start: int


def extract_numbers(text: str, words: bool = True) -> list[Number]:
    """The numbers in ``text``, in order. Read: integers, decimals (``0.5``, ``.05``), thousands
    separators (``1,234.5``), signs (``-3.2``, but the ``-`` of a range ``110-130`` is not a
    sign), exponents (``1e-3``, ``2.5E+04``, ``3 x 10^-4``), percentages (``12%``, marked as such),
    numbers after ``=`` (``t=120``) and the number words two..twenty, thirty, forty, fifty (not
    "one": too often not a count). Not read: digits glued to letters or an underscore (``BM03``,
    ``sensor_03``, ``R2``) and non-finite values."""
    out: list[Number] = []
    for m in _NUMBER_RE.finditer(text):
        try:
            if m.group("int") is not None:
                base = m.group("int").replace(",", "") + (m.group("frac") or "")
            else:
                base = "0" + m.group("frac0")
            exp = m.group("exp") or m.group("exp2")
            v = float(base) * (10.0 ** int(exp) if exp else 1.0)
        except (OverflowError, ValueError):
            continue
        if m.group("sign") == "-":
            v = -v
        if math.isfinite(v):
            out.append(Number(v, bool(m.group("pct")), m.group(0).strip(), m.start()))
    if words:
        for m in _NUMBER_WORD_RE.finditer(text):
            out.append(Number(float(_NUMBER_WORDS[m.group(1).lower()]), False, m.group(1), m.start()))
        out.sort(key=lambda n: n.start)
    return out


# =============================================================================================
# quality
# =============================================================================================
# (name, pattern): matched case-insensitively as whole words, specific entries first: where two
# entries match at the same place the earlier one wins (see find_terms), so a generic entry
# ("regression") does not count again inside a specific one ("logistic regression").
METHOD_TERMS: list[tuple[str, str]] = [
    ("logistic regression", r"logistic regression"),
    ("linear regression", r"(?:ordinary least squares|ols|linear|multiple|multivariate) regression|least squares"),
    ("regularized regression", r"ridge(?: regression)?|lasso|elastic[- ]?net"),
    (
        "poisson/glm",
        r"poisson regression|generali[sz]ed linear models?|\bglms?\b|generali[sz]ed additive models?|\bgams?\b",
    ),
    ("mixed effects", r"mixed[- ]effects?(?: models?)?|hierarchical (?:bayesian )?models?"),
    ("geographically weighted regression", r"geographically weighted regression|\bgwr\b"),
    ("random forest", r"random forests?"),
    ("gradient boosting", r"gradient[- ]boost(?:ing|ed)(?: trees| machines?)?|xgboost|lightgbm|catboost"),
    ("decision tree", r"decision trees?|\bcart\b"),
    ("support vector machine", r"support vector (?:machines?|regression)|\bsvm\b|\bsvr\b"),
    ("k-nearest neighbours", r"k[- ]?nearest neighbou?rs?|\bk-?nn\b"),
    ("neural network", r"neural networks?|\bmlp\b|multi-?layer perceptron|\blstm\b|autoencoders?"),
    ("k-means", r"k[- ]?means"),
    ("hierarchical clustering", r"hierarchical clustering|agglomerative clustering|ward'?s (?:method|linkage)"),
    ("dbscan", r"\bdbscan\b|\bhdbscan\b"),
    ("gaussian mixture", r"gaussian mixture(?: models?)?|\bgmm\b"),
    ("pca", r"principal components?(?: analysis)?|\bpca\b"),
    ("embedding", r"\bt-?sne\b|\bumap\b"),
    (
        "cross-validation",
        r"cross[- ]?validat(?:ion|ed)|\bk[- ]?fold\b|leave[- ]one[- ]out|\bloocv\b|spatial(?:ly)? blocked",
    ),
    ("grid search", r"grid[- ]search|hyperparameter (?:tuning|search|optimi[sz]ation)"),
    (
        "arima",
        r"\b(?:s?arima|sarimax)\b|autoregressive(?: integrated)?(?: moving average)?|\bvar model|vector autoregression",
    ),
    ("exponential smoothing", r"exponential smoothing|holt[- ]winters"),
    ("isolation forest", r"isolation forests?"),
    ("local outlier factor", r"local outlier factor|\blof\b"),
    ("one-class svm", r"one[- ]class svm"),
    ("z-score", r"z[- ]?scores?|standard scores?"),
    ("rolling statistics", r"rolling (?:mean|median|window|average|statistics)|moving (?:average|window)|\bewma\b"),
    ("iqr rule", r"\biqr\b|interquartile range"),
    ("mahalanobis distance", r"mahalanobis"),
    (
        "change-point detection",
        r"change[- ]?point (?:detection|analysis)|\bpelt\b|binary segmentation|\bcusum\b|\bbocpd\b",
    ),
    ("population models", r"ricker(?: model)?|lotka[- ]volterra|gompertz|logistic growth|beverton[- ]holt"),
    (
        "kriging",
        r"(?:ordinary |universal |regression )?kriging|gaussian process(?: regression)?|variograms?|semivariograms?",
    ),
    ("inverse distance weighting", r"inverse distance weight(?:ing|ed)|\bidw\b"),
    ("survival analysis", r"cox (?:proportional hazards|regression|model)|kaplan[- ]meier|survival analysis"),
    ("feature importance", r"shap(?: values)?|permutation importance|feature importances?"),
    ("causal/uplift", r"causal forests?|uplift model(?:l?ing)?|t-learner|s-learner|x-learner|interaction terms?"),
    ("regression", r"regression"),
    ("clustering", r"clustering"),
]
TEST_TERMS: list[tuple[str, str]] = [
    ("t-test", r"\bt[- ]?tests?\b|student'?s t|welch'?s?(?: t)?(?:[- ]test)?"),
    ("p-value", r"\bp[- ]?values?\b|(?<![\w.])p\s*(?:<=|>=|[<>=])\s*(?:0?\.\d|\d)"),
    ("confidence interval", r"confidence intervals?|credible intervals?|\b\d{2}(?:\.\d)?\s*%\s*c[ri]\b|\bci\b"),
    ("chi-square", r"chi[- ]?squared?|χ\s*2|\bchi2\b"),
    ("anova", r"\banova\b|analysis of variance|\bf[- ]tests?\b"),
    ("permutation test", r"permutation tests?"),
    ("bootstrap", r"bootstrap(?:ped|ping|s)?"),
    ("wilcoxon", r"wilcoxon"),
    ("mann-whitney", r"mann[- ]whitney"),
    ("kruskal-wallis", r"kruskal[- ]wallis"),
    ("kolmogorov-smirnov", r"kolmogorov[- ]smirnov|\bks[- ]test\b"),
    ("shapiro-wilk", r"shapiro[- ]wilk"),
    ("fisher exact", r"fisher'?s exact"),
    ("granger causality", r"granger(?:[- ]caus\w*)?"),
    ("dickey-fuller", r"dickey[- ]fuller|\badf test\b|\bkpss\b"),
    ("moran's i", r"moran'?s i\b|\bmoran\b|geary'?s c"),
    ("change-point test", r"pettitt(?:'s)? test|chow test"),
    ("likelihood ratio", r"likelihood[- ]ratio(?: tests?)?|\baic\b|\bbic\b"),
    ("diebold-mariano", r"diebold[- ]mariano"),
    ("mcnemar", r"mcnemar"),
    ("correlation test", r"pearson(?:'s)?(?: r| correlation)?|spearman(?:'s)?(?: rho| correlation)?|kendall'?s? tau"),
    ("multiple testing", r"bonferroni|benjamini[- ]hochberg|false discovery rate|\bfdr\b|holm"),
    (
        "significance",
        r"statistically significant|significance level|significant at|null hypothesis|hypothesis test(?:ing|s)?",
    ),
    ("effect size", r"effect sizes?|cohen'?s d\b|odds ratios?|hazard ratios?"),
    ("standard error", r"standard errors?|\bs\.e\.m?\b|\bsem\b"),
    ("z-test", r"\bz[- ]tests?\b"),
]
CROSS_REF_TERMS: list[tuple[str, str]] = [
    ("data team", r"data (?:team|lead|engineers?|analysts?|domain expert)s?"),
    ("model team", r"(?:model(?:l?ing)?|ml) (?:team|engineers?)|experimentalists?"),
    ("evaluation team", r"eval(?:uation)? (?:team|lead)|error analysts?"),
    ("writing team", r"writing team|lead author|results writer"),
    ("dataset_description", r"dataset_description|dataset description (?:artifact|report|document)"),
    ("model_architecture", r"model_architecture|model architecture (?:artifact|report|document)"),
    ("evaluation_report", r"evaluation_report|evaluation report (?:artifact|document)"),
    ("experiment_results", r"experiment_results|experiment results (?:artifact|document)"),
    ("upstream", r"upstream|(?:previous|other|earlier) teams?|(?:the|each) teams?'|teams' (?:work|outputs|artifacts)"),
    ("artifact", r"artifacts?|artefacts?"),
]


@lru_cache(maxsize=64)
def _vocab_re(vocabulary: tuple[tuple[str, str], ...]) -> re.Pattern:
    """One pattern for a whole vocabulary: its entries as alternatives in order (group i is
    entry i), whole words, for lower-cased text."""
    alts = "|".join(f"(?P<g{i}>{pattern})" for i, (_, pattern) in enumerate(vocabulary))
    return re.compile(rf"(?<![^\W_])(?=[^\W_])(?:{alts})(?![^\W_])")


def find_terms(text: str, vocabulary: Sequence[tuple[str, str]]) -> list[str]:
    """The distinct vocabulary entries named in ``text`` (whole words, case-insensitive), in
    vocabulary order. One left-to-right scan; where several entries match at the same place
    the earlier entry (the more specific one) wins and its text is consumed, so a generic entry
    ("regression") never re-counts the text of a specific one ("logistic regression")."""
    vocab = tuple((str(n), str(p)) for n, p in vocabulary)
    if not vocab:
        return []
    hit: set[int] = set()
    for m in _vocab_re(vocab).finditer(text.lower()):
        hit.add(int(m.lastgroup[1:]))
    return [vocab[i][0] for i in sorted(hit)]


_ENUM_RE = re.compile(r"^\s*(?:\d{1,2}[.)]|\(\d{1,2}\))\s")
_REF_BEFORE_RE = re.compile(
    r"(?:table|figure|fig\.?|section|appendix|eq\.?|equation|step|phase|team)\s*$", re.IGNORECASE
)


def result_numbers(text: str) -> list[str]:
    """The distinct numbers a report states (as normalized values), for the quality score. Not
    counted: heading lines; list enumerators (``1.``, ``2)``); numbers right after Table,
    Figure, Section, Appendix, Eq., Step, Phase or Team; number words; numbers on a line without
    a word of two letters or more unless the line is a table row."""
    values: list[str] = []
    seen: set[str] = set()
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if not line.strip() or parse_heading(line, lines[i + 1] if i + 1 < len(lines) else None) is not None:
            continue
        if not (line.lstrip().startswith("|") or ALPHA_WORD_RE.search(line)):
            continue
        enum = _ENUM_RE.match(line)
        for n in extract_numbers(line, words=False):
            if enum and n.start < enum.end():
                continue
            if _REF_BEFORE_RE.search(line[max(0, n.start - 16) : n.start]):
                continue
            key = f"{n.value:.6g}" + ("%" if n.percent else "")
            if key not in seen:
                seen.add(key)
                values.append(key)
    return values


def quality_parts(text: str) -> tuple[dict[str, float], dict[str, list[str]]]:
    """The four parts of the quality score and the terms behind each. ``numbers``: distinct
    numbers stated (:func:`result_numbers`) / :data:`NUMBERS_FULL`; ``methods``: distinct
    standard methods named (:data:`METHOD_TERMS`) / :data:`METHODS_FULL`; ``tests``: distinct
    statistical tests or inference terms (:data:`TEST_TERMS`: tests, p-values, confidence
    intervals, ...) / :data:`TESTS_FULL`; ``cross_refs``: distinct references to other teams and
    their artifacts (:data:`CROSS_REF_TERMS`) / :data:`CROSS_REFS_FULL`; each capped at 1."""
    terms = {
        "numbers": result_numbers(text),
        "methods": find_terms(text, METHOD_TERMS),
        "tests": find_terms(text, TEST_TERMS),
        "cross_refs": find_terms(text, CROSS_REF_TERMS),
    }
    full = {"numbers": NUMBERS_FULL, "methods": METHODS_FULL, "tests": TESTS_FULL, "cross_refs": CROSS_REFS_FULL}
    parts = {k: min(1.0, len(v) / full[k]) for k, v in terms.items()}
    return parts, terms


# =============================================================================================
# context phrases
# =============================================================================================
@lru_cache(maxsize=4096)
def phrase_re(phrase: str) -> re.Pattern | None:
    """A context phrase as a pattern: its words (split at spaces, hyphens, underscores and
    punctuation) in order with any of those (or nothing) between them, case-insensitive. The
    first word starts a word (an underscore counts as a boundary: "species" matches
    ``n_species``); the last word is a prefix: any letters may follow, so a stem works
    ("anomal" matches "anomalies", "anomalous"; "interaction" matches "interactions"), and a
    last word ending in consonant + "y" drops the "y" ("anomaly" matches "anomalies"); digits
    may not follow. Never right after "non-"/"non " ("spatial cv" does not match "non-spatial
    CV")."""
    words = TOKEN_RE.findall(str(phrase).lower())
    if not words:
        return None
    parts = [re.escape(w) for w in words[:-1]]
    last = words[-1]
    if len(last) > 3 and last.endswith("y") and last[-2] not in "aeiouy":
        last = last[:-1]
    parts.append(re.escape(last) + r"[^\W\d_]*")
    body = r"[\s\-_/]*".join(parts)
    return re.compile(rf"(?<![^\W_])(?<!non-)(?<!non )(?:{body})(?![^\W_])", re.IGNORECASE)


#: words that may stand between two words of a context phrase ("the mean of the yield" names
#: "mean yield"): articles, a few prepositions and possessives, "value(s)"; never and / or /
#: not / no / with / to / from, which can turn the phrase into another ("spatial and random CV")
_GAP_WORDS = (
    "of",
    "the",
    "a",
    "an",
    "in",
    "for",
    "per",
    "on",
    "at",
    "by",
    "its",
    "their",
    "this",
    "that",
    "these",
    "those",
    "value",
    "values",
    "across",
    "over",
)
#: a phrase word after which no gap is allowed: quantifiers and negations ("most of the
#: important covariates" does not name "most important")
_NO_GAP_AFTER = frozenset(
    {"most", "least", "some", "all", "any", "each", "every", "many", "few", "no", "not", "none", "top", "same", "non"}
)
_JOIN = r"[\s\-_/]*"
_GAP_JOIN = r"(?:[\s\-_/]+(?:(?:" + "|".join(_GAP_WORDS) + r")[\s\-_/]+){1,3}|[\s\-_/]*)"


def _stem(word: str) -> str:
    """``word`` as a prefix of its inflections: a final consonant + "y" loses the "y"
    ("anomaly" -> "anomal", matching "anomalies"). Nothing else is cut: a plural in a phrase
    stays plural ("patients" does not name "each patient", whose number is no patient count)."""
    if len(word) > 3 and word.endswith("y") and word[-2] not in "aeiouy":
        return word[:-1]
    return word


@lru_cache(maxsize=4096)
def context_re(phrase: str) -> re.Pattern | None:
    """A fact's context phrase as a pattern, looser than :func:`phrase_re` (which names items):

    * every word is matched as the prefix of its inflections (:func:`_stem`): "means of yields"
      names "mean yield", "points anomalous" names "point anomaly"; a word of three letters or
      fewer that is not the last is matched exactly;
    * one to three of the words :data:`_GAP_WORDS` may stand between two words of the phrase
      ("the mean of yield_t" names "mean yield"), but not after a quantifier or negation
      (:data:`_NO_GAP_AFTER`) and never "and", "or", "not", "with" ...;
    * a word is a column-name token: an underscore, a hyphen or a slash is a boundary around it
      ("yield_t", "log_yield" name "yield") and digits may follow it ("yield2");
    * never right after "non-" / "non " ("spatial cv" does not name "non-spatial CV")."""
    words = TOKEN_RE.findall(str(phrase).lower())
    if not words:
        return None
    parts = []
    for i, w in enumerate(words):
        stem = _stem(w)
        last = i == len(words) - 1
        parts.append(re.escape(stem) + (r"[^\W\d_]*" if last or len(stem) > 3 else ""))
    body = parts[0]
    for i in range(1, len(words)):
        body += (_JOIN if words[i - 1] in _NO_GAP_AFTER else _GAP_JOIN) + parts[i]
    return re.compile(rf"(?<![^\W_])(?<!non-)(?<!non )(?:{body})\d*(?![^\W_])", re.IGNORECASE)


__all__ = [
    "CROSS_REFS_FULL",
    "CROSS_REF_TERMS",
    "METHODS_FULL",
    "METHOD_TERMS",
    "NUMBERS_FULL",
    "TESTS_FULL",
    "TEST_TERMS",
    "Number",
    "context_re",
    "extract_numbers",
    "find_terms",
    "phrase_re",
    "quality_parts",
    "result_numbers",
]
