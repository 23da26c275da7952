"""What the OTLP export (:mod:`cooplab.evals.otlp_export`) and the Phoenix prices
(:mod:`cooplab.evals.phoenix_prices`) share: the OTLP traces path, the one-line config error, and
how a text is made valid UTF-8 and cut. A leaf, so that the export can register prices and the
price module can use these without an import cycle between the two."""

from __future__ import annotations

OTLP_TRACES_PATH = "/v1/traces"


class OtlpConfigError(ValueError):
    """A bad URL, project name or traces file (a user mistake, one line)."""


def clean_str(s: str) -> str:
    """``s`` as valid UTF-8 (lone surrogates from ``\\ud800`` escapes become ``?``)."""
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "replace").decode("utf-8")


def cut_text(s: str, n: int) -> str:
    """``s`` (valid UTF-8) cut to ``n`` characters, saying how many more there were."""
    s = clean_str(s)
    return s if len(s) <= n else s[:n] + f"...[{len(s) - n} more chars]"
