"""Secret scrubbing: replace secrets in a JSON-safe value by ``"***"``.

A value is a secret when it sits under a secret-looking key (``api_key``, ``authorization``,
``password``, a key ending in the whole word ``token``, ...), when a string equals the value
of a secret environment variable (a name holding KEY, TOKEN, SECRET or PASSWORD), or, for
longer such values, wherever they occur inside a string. Token *counts* (``input_tokens``,
``max_tokens``) are not secrets and survive. The policy is in docs/traces.md ("Secrets
policy"); this module has no dependency on the rest of the package.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

REDACTED = "***"

# Keys whose (string) values are secrets. "token" only as a whole word at the end, so that
# token *counts* (input_tokens, max_tokens, total_tokens) survive.
_SECRET_KEY_RE = re.compile(
    r"(api[_\-]?key|apikey|authorization|secret|passw(or)?d|passphrase|credential|cookie"
    r"|private[_\-]?key|access[_\-]?key|session[_\-]?key|(^|[_\-\s.])token$|^token$)",
    re.IGNORECASE,
)
# Environment variables whose values are secrets.
_SECRET_ENV_RE = re.compile(r"KEY|TOKEN|SECRET|PASSWORD", re.IGNORECASE)
# Environment values of at least _MIN_EXACT_SECRET characters are redacted where a whole
# string equals them, and of at least _MIN_SUBSTRING_SECRET also inside longer strings.
# Shorter values and flag-like values (TOKENIZERS_PARALLELISM=false) are not secrets.
_MIN_EXACT_SECRET = 4
_MIN_SUBSTRING_SECRET = 8
_NOT_SECRET_VALUES = {"true", "false", "yes", "no", "on", "off", "none", "null", "auto", "default"}


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of environment variables whose names contain KEY/TOKEN/SECRET/PASSWORD,
    longest first (so a secret containing another is replaced whole)."""
    env = os.environ if environ is None else environ
    vals = {
        v
        for k, v in env.items()
        if _SECRET_ENV_RE.search(k)
        and len(v.strip()) >= _MIN_EXACT_SECRET
        and v.strip().lower() not in _NOT_SECRET_VALUES
        and not _is_number(v)
    }
    return sorted(vals, key=len, reverse=True)


def _is_number(v: str) -> bool:
    try:
        float(v)
        return True
    except ValueError:
        return False


_KEY_VERDICTS: dict[str, bool] = {}  #: key -> is it secret-looking (records repeat a few dozen keys)


def is_secret_key(key: str) -> bool:
    verdict = _KEY_VERDICTS.get(key) if type(key) is str else None
    if verdict is None:
        verdict = bool(_SECRET_KEY_RE.search(str(key)))
        if type(key) is str and len(_KEY_VERDICTS) < 10_000:
            _KEY_VERDICTS[key] = verdict
    return verdict


def scrub(obj: Any, secrets: Iterable[str] | None = None) -> Any:
    """Replace secrets in a JSON-safe value: values of secret-looking keys, strings equal to a
    secret environment value, and occurrences of longer secret values inside strings."""
    exact, long = prepared_secrets(secrets)
    return scrub_prepared(obj, exact, long)


# the last list of secrets prepared for scrubbing (a tracer passes the same list for every record of a trace)
_PREPARED: list[Any] = [None, None, None]


def prepared_secrets(secrets: Iterable[str] | None) -> tuple[frozenset[str], tuple[str, ...]]:
    """(the secrets, those also looked for inside strings) of ``secrets`` (default: the environment's);
    the same list object as the last call's is not prepared again."""
    if secrets is not None and _PREPARED[0] is secrets and isinstance(secrets, (list, tuple)):
        return _PREPARED[1], _PREPARED[2]
    vals = list(secret_values() if secrets is None else secrets)
    exact = frozenset(vals)
    long = tuple(v for v in vals if len(v) >= _MIN_SUBSTRING_SECRET)
    if isinstance(secrets, (list, tuple)):
        _PREPARED[:] = [secrets, exact, long]
    return exact, long


def redactable(key: str, value: Any) -> bool:
    """Whether ``value``, under a secret-looking ``key``, is replaced: text always, numbers unless
    the key names a token count."""
    if isinstance(value, str):
        return True
    # numbers under a *token* key are counts (max_token); under password/secret/key, secrets
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return not key.lower().endswith("token")
    return False


# Values the converter shares between records (converted messages, see convert's memo) are
# scrubbed once per set of secrets: id -> [the value, the secrets it was scrubbed for, the result,
# the result's JSON text or None]. The entry holds the value itself, so its id cannot be reused while
# it is remembered. _SCRUBBED finds an entry by its result's id: the JSON writer of the tracer
# (:func:`shared_json`) serializes a shared message once, not once per record that holds it.
_SHARED: dict[int, list[Any]] = {}
_SCRUBBED: dict[int, list[Any]] = {}
SHARED_SIZE = 4096


def share(value: Any) -> None:
    """Remember ``value`` (a JSON-safe value that is never changed and is reused in many records)
    so that :func:`scrub` scrubs it once per set of secrets."""
    if len(_SHARED) >= SHARED_SIZE:
        old = _SHARED.pop(next(iter(_SHARED)))
        _forget_result(old)
    _SHARED[id(value)] = [value, None, None, None]


def _forget_result(entry: list[Any]) -> None:
    if entry[2] is not None and _SCRUBBED.get(id(entry[2])) is entry:
        del _SCRUBBED[id(entry[2])]


def shared_json(obj: Any, dumps: Any) -> str | None:
    """The JSON text of ``obj`` when it is the scrubbed copy of a shared value (``dumps(obj)``,
    made once and remembered), else None. The caller splices the text into its own line."""
    entry = _SCRUBBED.get(id(obj))
    if entry is None or entry[2] is not obj:
        return None
    if entry[3] is None:
        entry[3] = dumps(obj)
    return entry[3]


def scrub_prepared(obj: Any, exact: frozenset[str], long: tuple[str, ...]) -> Any:
    """:func:`scrub` with the secrets already prepared (:func:`prepared_secrets`)."""
    if type(obj) is dict and _SHARED:
        entry = _SHARED.get(id(obj))
        if entry is not None and entry[0] is obj:
            key = entry[1]
            if key is None or (key[0] is not exact or key[1] is not long) and key != (exact, long):
                _forget_result(entry)
                entry[1], entry[2], entry[3] = (exact, long), _scrub_value(obj, exact, long), None
                if type(entry[2]) is dict:
                    _SCRUBBED[id(entry[2])] = entry
            return entry[2]
    return _scrub_value(obj, exact, long)


def scrub_text(text: str, exact: frozenset[str], long: tuple[str, ...]) -> str:
    """A string scrubbed with prepared secrets: all of it when it is a secret, else each longer
    secret inside it."""
    if text in exact:
        return REDACTED
    for v in long:
        if v in text:
            text = text.replace(v, REDACTED)
    return text


def _scrub_value(obj: Any, exact: frozenset[str], long: tuple[str, ...]) -> Any:
    if isinstance(obj, str):
        return scrub_text(obj, exact, long)
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if isinstance(k, str) and is_secret_key(k) and redactable(k, v):
                out[k] = REDACTED
            else:
                out[scrub_prepared(k, exact, long) if isinstance(k, str) else k] = scrub_prepared(v, exact, long)
        return out
    if isinstance(obj, list):
        return [scrub_prepared(v, exact, long) for v in obj]
    return obj
