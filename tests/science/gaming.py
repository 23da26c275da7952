"""Data-blind reports that try to game the heuristic scorer (issue 29, item 15).

Each generator writes a complete seven-section report (completeness 1) without looking at the
data: it only knows each fact's kind and context phrases, and states every fact in a way that
commits to nothing: several candidate values, a range, "either X or Y", every label, both
directions of a claim. To be the gamer's best case, the candidates always include the true value
(or set, or direction); a report that commits to nothing must still score low.
"""

from __future__ import annotations

from typing import Any, Callable

SECTIONS = ("Abstract", "Introduction", "Dataset Description", "Methods", "Results", "Evaluation", "Conclusion")

FILLER = {
    "Abstract": "We studied the dataset with a careful pipeline built by the data, model and evaluation teams. The "
    "analysis "
    "covers the main structure of the data and the questions of the task, and the findings are given below.",
    "Introduction": "Datasets like this one are common in applied science and deserve a careful look. We set out to "
    "describe "
    "the data, to fit reasonable models and to evaluate them against simple baselines before drawing conclusions.",
    "Dataset Description": "The data team's dataset_description artifact lists every column with its type and range. "
    "The table "
    "has no missing values that matter, and the columns were standardised before modelling.",
    "Methods": "Following the model team's model_architecture artifact we used linear regression, a random forest and "
    "cross-validation with five folds. Statistical tests (t-tests with p-values and bootstrap confidence "
    "intervals) checked every effect.",
    "Evaluation": "The evaluation team's evaluation_report compares every model with a baseline under "
    "cross-validation. The "
    "errors are stable across folds, and the bootstrap intervals are narrow enough for the conclusions drawn.",
    "Conclusion": "The analysis gives a consistent picture of the data. Further data would sharpen the estimates, and "
    "the "
    "models should be refitted when new observations arrive.",
}


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.4g}"


def number_candidates(fact: dict[str, Any], n: int = 5) -> list[str]:
    """n values around the truth, the truth among them, the others outside its tolerance."""
    v, tol = float(fact["value"]), float(fact.get("tolerance") or 0)
    step = max(3 * tol, 0.2 * abs(v), 1.0 if v.is_integer() and tol >= 0 else 0.0) or 1.0
    if not v.is_integer() or tol < 1:
        step = max(step, 3 * tol + 1e-9)
    vals = [v + k * step for k in range(-(n // 2), n - n // 2)]
    if v.is_integer() and step >= 1:
        vals = [round(x) for x in vals]
    return [_fmt(x) for x in vals if x >= 0 or v < 0]


def label_candidates(fact: dict[str, Any]) -> list[str]:
    alts = [a for a in fact.get("alternatives") or [] if a != fact["value"]] or [f"{fact['value']}_b", "another one"]
    return [alts[0], fact["value"], *alts[1:]]


def set_candidates(fact: dict[str, Any]) -> list[str]:
    """The truth items and as many others (from the universe, or made-up family members)."""
    truth = list(fact["value"])
    others = [u for u in fact.get("universe") or [] if u not in truth]
    if not others:
        base = truth[0]
        others = (
            [f"{base}{k}" for k in range(1, len(truth) + 1)]
            if "->" in base
            else [
                base[:-1] + str((int(base[-1]) + k) % 10) if base[-1].isdigit() else f"{base}_{k}"
                for k in range(1, len(truth) + 1)
            ]
        )
        others = [o for o in others if o not in truth]
    return truth + others[: max(1, len(truth))]


def _ctx(fact: dict[str, Any]) -> str:
    return fact["context"][0]


def _or(xs: list[str]) -> str:
    return ", ".join(xs[:-1]) + " or " + xs[-1] if len(xs) > 1 else xs[0]


def _claim_pair(fact: dict[str, Any]) -> tuple[str, str]:
    """The fact's statement and a sentence asserting the opposite (direction or presence)."""
    stmt = fact["statement"].rstrip(".")
    if fact.get("negative_context"):
        return stmt + ".", f"On the contrary, the effect shows the {fact['negative_context'][0]} throughout."
    flips = [
        (" higher ", " lower "),
        (" lower ", " higher "),
        (" reverses ", " keeps its sign "),
        (" are ", " are not "),
        (" is ", " is not "),
        (" show ", " do not show "),
    ]
    for a, b in flips:
        if a in stmt:
            return stmt + ".", stmt.replace(a, b, 1) + "."
    return stmt + ".", f"There is no evidence that {stmt[0].lower() + stmt[1:]}."


# --- the shapes: one sentence (or a few) per fact ---------------------------------------------------------
def candidates(fact: dict[str, Any]) -> str:
    k, c = fact["kind"], _ctx(fact)
    if k == "number":
        return f"The {c} count is {_or(number_candidates(fact))}."
    if k == "label":
        return f"The {c} is {_or(label_candidates(fact))}."
    if k == "set":
        return f"The {c} items could be {_or(set_candidates(fact))}."
    a, b = _claim_pair(fact)
    return f"Possibly {a[0].lower() + a[1:-1]}, or possibly {b[0].lower() + b[1:]}"


def ranges(fact: dict[str, Any]) -> str:
    k, c = fact["kind"], _ctx(fact)
    if k == "number":
        xs = number_candidates(fact)
        return f"The {c} lies between {xs[0]} and {xs[-1]}, somewhere in {xs[0]}-{xs[-1]}."
    if k == "label":
        return f"The {c} is one of {', '.join(label_candidates(fact))}."
    if k == "set":
        return f"The {c} set includes some of {', '.join(set_candidates(fact))}."
    a, b = _claim_pair(fact)
    return f"It may be that {a[0].lower() + a[1:-1]}; it may also be that {b[0].lower() + b[1:]}"


def either_or(fact: dict[str, Any]) -> str:
    k, c = fact["kind"], _ctx(fact)
    if k == "number":
        xs = number_candidates(fact, 3)
        return f"The {c} count is either {xs[1]} or {xs[2]}, and either {xs[0]} or {xs[1]} {c}."
    if k == "label":
        xs = label_candidates(fact)
        return f"The {c} is either {xs[0]} or {xs[1]}."
    if k == "set":
        xs = set_candidates(fact)
        half = len(xs) // 2
        return f"The {c} items are either {' and '.join(xs[:half])} or {' and '.join(xs[half:])}."
    a, b = _claim_pair(fact)
    return f"Either {a[0].lower() + a[1:-1]}, or {b[0].lower() + b[1:]}"


def every_label(fact: dict[str, Any]) -> str:
    k, c = fact["kind"], _ctx(fact)
    if k == "number":
        return " ".join(f"{x} {c}." for x in number_candidates(fact)) + f" {c}: {', '.join(number_candidates(fact))}."
    if k == "label":
        xs = label_candidates(fact)
        return f"The {c} are {', '.join(xs[:-1])} and {xs[-1]}. " + " ".join(f"The {c} is {x}." for x in xs)
    if k == "set":
        xs = set_candidates(fact)
        return " ".join(f"The {c} items are {' and '.join(xs[i : i + 2])}." for i in range(0, len(xs), 2))
    a, b = _claim_pair(fact)
    return f"{a} {b}"


def both_ways(fact: dict[str, Any]) -> str:
    k, c = fact["kind"], _ctx(fact)
    if k == "number":
        return " ".join(f"The {c} count is {x}." for x in number_candidates(fact, 3))
    if k == "label":
        return " ".join(f"The {c} is {x}." for x in label_candidates(fact)[:2])
    if k == "set":
        xs = set_candidates(fact)
        return (
            f"The {c} items are {' and '.join(xs[: len(xs) // 2])}. The {c} items are "
            f"{' and '.join(xs[len(xs) // 2 :])}."
        )
    a, b = _claim_pair(fact)
    return f"{a} {b} {a}"


def truth_first(fact: dict[str, Any]) -> str:
    """Candidate lists that start with the true value (a list cut at its first comma must not
    credit the first candidate)."""
    k, c = fact["kind"], _ctx(fact)
    if k == "number":
        xs = number_candidates(fact)
        mid = len(xs) // 2
        return f"The {c} count is {xs[mid]}, {', '.join(xs[:mid] + xs[mid + 1 :])}."
    if k == "label":
        xs = label_candidates(fact)
        return f"The {c} is {xs[1]}, {xs[0]}, or {', '.join(xs[2:]) or 'none'}."
    if k == "set":
        xs = set_candidates(fact)
        n = len(fact["value"])
        return f"The {c} items are {', '.join(xs[:n])}; or rather {', '.join(xs[n:])}."
    a, b = _claim_pair(fact)
    return f"{a} Or maybe {b[0].lower() + b[1:]}"


def asides(fact: dict[str, Any]) -> str:
    """The true value stated, with the other candidates offered in brackets."""
    k, c = fact["kind"], _ctx(fact)
    if k == "number":
        xs = number_candidates(fact)
        mid = len(xs) // 2
        return f"The {c} count is {xs[mid]} (or perhaps {xs[mid - 1]} or {xs[mid + 1]})."
    if k == "label":
        xs = label_candidates(fact)
        return f"The {c} is {xs[1]} (or {xs[0]})."
    if k == "set":
        xs = set_candidates(fact)
        n = len(fact["value"])
        return f"The {c} items are {' and '.join(xs[:n])} (or possibly {' and '.join(xs[n:])})."
    a, b = _claim_pair(fact)
    return f"{a[:-1]} (or perhaps the reverse: {b[0].lower() + b[1:-1]})."


SHAPES: dict[str, Callable[[dict[str, Any]], str]] = {
    "candidate lists": candidates,
    "ranges": ranges,
    "either or": either_or,
    "every label": every_label,
    "both ways": both_ways,
    "truth first": truth_first,
    "asides": asides,
}


def gaming_report(truth: dict[str, Any], shape: str) -> str:
    """A seven-section report whose Results and Conclusion state every fact of ``truth`` in the
    given shape (see :data:`SHAPES`)."""
    say = SHAPES[shape]
    findings = " ".join(say(f) for f in truth["facts"])
    body = {**FILLER, "Results": findings + " " + FILLER["Evaluation"]}
    body["Conclusion"] = FILLER["Conclusion"] + " " + findings
    return "# Report\n\n" + "\n\n".join(f"## {name}\n\n{body[name]}" for name in SECTIONS) + "\n"
