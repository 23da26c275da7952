"""Values of a run's files as short text and bounded numbers: what every page of the explorer
(``cooplab view``, ``cooplab report``) and the analyses use to show a value read from a file.

* :func:`fmt`  any value as short plain text (NaN and infinities named, 4 significant digits);
* :func:`num`  a finite float from a number or decimal text, bounded (never raises, never reads or
  changes the process's decimal context);
* :func:`exact_sum`  an exact decimal sum of such values;
* :func:`cut`, :func:`dig`, :func:`slug`, :func:`human_bytes`.

Identifiers (call, run, agent and thread ids, hashes) are text: they are never passed to :func:`num`,
whatever they look like ("5e41512851534475" is a call id, not 5 x 10^41512851534475).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from decimal import Context, Decimal, InvalidOperation, localcontext
from typing import Any

#: characters of one value shown by default
MAX_TEXT_CHARS = 400
#: a number written as text longer than this is not read as a number (ids, hashes and prose stay text)
MAX_NUMBER_CHARS = 64
#: decimal exponents beyond +-this are not read as numbers ("5e41512851534475" is a call id, not 10^41512851534475)
MAX_EXPONENT = 300
#: the decimal context of every sum here: its own (the user's global context is never read or changed),
#: no trap (an overflow is an infinity the caller checks, never an exception)
EXACT = Context(prec=60, Emax=999_999, Emin=-999_999, traps=[])


def cut(text: str, limit: int = MAX_TEXT_CHARS) -> str:
    """``text`` cut to ``limit`` characters (the last one an ellipsis when cut)."""
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def fmt(v: Any, limit: int = MAX_TEXT_CHARS) -> str:
    """A value as short plain text: NaN and infinities named, fractions to 4 significant digits
    (0.8333, 12.35; 1,000 to 10^9 as whole numbers), huge and tiny numbers in scientific notation,
    long strings and nested values cut. Text is shown as it is (an id that looks like a number stays
    the id)."""
    if v is None:
        return "\u2014"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        if abs(v) < 10**15:
            return str(v)
        try:
            return f"{float(v):.4e}"
        except OverflowError:
            return f"{'-' if v < 0 else ''}~10^{int(v.bit_length() * 0.30103)}"
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "\u221e" if v > 0 else "-\u221e"
        if v == 0:
            return "0"
        if abs(v) >= 1e9 or abs(v) < 1e-4:
            return f"{v:.4g}"
        if abs(v) >= 1000:  # 4 significant digits or more: rounded to a whole number, never 1.235e+05
            return f"{v:.0f}"
        return f"{v:.4g}"
    if isinstance(v, Decimal):
        f = _bounded(v)
        return fmt(f, limit) if f is not None else cut(str(v), limit)
    if isinstance(v, str):
        return cut(v, limit)
    if isinstance(v, (list, tuple, dict)):
        try:
            text = json.dumps(v, default=str, allow_nan=True, ensure_ascii=False)
        except (ValueError, TypeError, RecursionError):
            text = repr(v)
        return cut(text, limit)
    try:  # numpy scalars, pandas timestamps, ...
        import numpy as np

        if isinstance(v, np.generic):
            return fmt(v.item(), limit)
    except ImportError:  # pragma: no cover
        pass
    return cut(str(v), limit)


def num(v: Any) -> float | None:
    """A finite number from an int, float, Decimal or decimal string; None for anything else.

    Bounded: text longer than :data:`MAX_NUMBER_CHARS` or with an exponent beyond
    :data:`MAX_EXPONENT`, NaN and infinities are None; no decimal signal can escape, whatever the
    global decimal context says. Identifiers (call, run, agent and thread ids) are never passed
    here: they are text, whatever they look like."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        try:
            f = float(v)
        except OverflowError:
            return None
        return f if math.isfinite(f) else None
    if isinstance(v, str):
        s = v.strip()
        if not s or len(s) > MAX_NUMBER_CHARS:
            return None
        with localcontext(EXACT):
            try:
                d = Decimal(s)
            except (InvalidOperation, ValueError, ArithmeticError):
                return None
        return _bounded(d)
    if isinstance(v, Decimal):
        return _bounded(v)
    try:
        import numpy as np

        if isinstance(v, np.generic):
            return num(v.item())
    except ImportError:  # pragma: no cover
        pass
    return None


def _bounded(d: Decimal) -> float | None:
    """A finite Decimal within the exponent bound as a float (no context used), else None."""
    if not d.is_finite():
        return None
    if d.is_zero():
        return 0.0
    if not -MAX_EXPONENT <= d.adjusted() <= MAX_EXPONENT:
        return None
    return float(d)


def exact_sum(values: Iterable[Any]) -> Decimal | None:
    """The exact sum of the values that are numbers (:func:`num`), in :data:`EXACT` (None when it is
    not finite)."""
    with localcontext(EXACT):
        total = Decimal(0)
        for v in values:
            if num(v) is not None:
                total += Decimal(str(v).strip()) if not isinstance(v, Decimal) else v
        return total if total.is_finite() else None


def dig(d: Any, dotted: str) -> Any:
    """``d["a"]["b"]`` for ``"a.b"``; None where a level is missing or not a dict."""
    for k in dotted.split("."):
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def slug(text: str) -> str:
    """Text as an anchor: lower-case letters, digits and dashes (80 at most; "x" when none is left)."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:80] or "x"


def human_bytes(n: float) -> str:
    """A byte count as people read it ("812 B", "1.5 MB")."""
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"  # pragma: no cover
