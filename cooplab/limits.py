"""Limits and one-line errors: the rules every number a user gives must follow, declared once.

Every number that comes from a user (a command-line option, a sweep config, ``--set``, a keyword
argument of :func:`cooplab.run`, a run's ``config.json`` read by ``cooplab resume``) is checked
against one :class:`Num` rule of :data:`RULES`: finite, in its domain, below a documented cap (so
that no value can exhaust memory), and of the right type. A violation is a :class:`ConfigError`
whose message is one line: ``--budget must be a finite number in [0, 1000000] (USD; leave --budget
out for no cap), got nan``.

This module is the base of the package: it imports nothing else of cooplab, so every layer (the
graphs, agents, tasks, evals, the engine and the command line) can use it. The command line adds
its Typer options on top (:mod:`cooplab.cli.options`).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, cast

if TYPE_CHECKING:
    from typing import LiteralString

#: seconds one model call may take in all by default (``--call-deadline``), its retries and the waits
#: between them included: a server that stalls ends a default run in about this long (a whole attempt
#: of the default call timeout, 300 s, then 180 s of the next). Here, not in the model layer, so that
#: ``cooplab run TASK --help`` shows it without loading the model layer.
DEFAULT_CALL_DEADLINE = 480.0


class ConfigError(Exception):
    """A setting outside its rule (user-facing, one line; the CLI exits 2 on it). Deliberately not
    a ValueError: Typer's (pydantic) option validation must let it through unchanged."""


def one_line(text: Any, limit: int = 400) -> str:
    """``text`` on one line (whitespace runs collapsed, lone surrogates replaced), cut to ``limit`` characters."""
    text = " ".join(clean_text(str(text)).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


#: UTF-16 surrogates: JSON may spell one alone (``"\\ud800"``), but no UTF-8 text can hold it
_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD, so that any UTF-8 writer (SQLite,
    Parquet, a checkpoint, a JSON line, the terminal) accepts it. Other text is returned as is."""
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def clean_strings(value: Any) -> Any:
    """``value`` (JSON data: dicts, lists, strings, numbers) with :func:`clean_text` applied to every
    string in it, dict keys included."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_strings(k): clean_strings(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(clean_strings(v) for v in value)
    return value


# --- caps (documented in README.md "Bad input") -----------------------------------------------
MAX_SEED = 2**63 - 1  #: seeds are stored as signed 64-bit integers (checkpoints, Parquet tables)
MAX_AGENTS = 100_000  #: agents per society (CPR N)
MAX_DINERS = 1_000  #: diners per society (punishment matrices are agents x agents)
MAX_ROUNDS = 10_000  #: CPR rounds T / diners iterations (every round is checkpointed)
MAX_REPLICATES = 100_000  #: replicate societies in one run
MAX_CELLS = 10_000_000  #: replicates x agents, and replicates x rounds, of one run (memory)
MAX_DINERS_CELLS = 100_000_000  #: replicates x diners^2 x iterations of one diners run (memory)
MAX_PARAM = 1e12  #: any real-valued society parameter (--set, diners --beta, --pk)
MAX_GROUP = 1_000  #: players per group of a behavioral game
MAX_GROUPS = 100  #: groups per game
MAX_SIMULATIONS = 100_000  #: simulations of one game run
MAX_TOKENS = 1_000_000  #: any token amount of a game (endowments, pools, thresholds)
MAX_FACTOR = 1e6  #: any multiplier, weight, cost or reward of a game
MAX_GC_THRESHOLD = 10**9 - 1  #: any of the garbage collector's three thresholds (COOPLAB_GC, a sweep job's "gc")


def gc_thresholds(values: Any) -> tuple[int, int, int] | None:
    """The garbage collector's three thresholds in ``values`` (whole numbers from 0 to
    :data:`MAX_GC_THRESHOLD`, as ints or as text of ASCII digits), or None when they are not that."""
    if not isinstance(values, (list, tuple)) or len(values) != 3:
        return None
    out: list[int] = []
    for v in values:
        if type(v) is str:
            v = v.strip()
            if not (v.isascii() and v.isdigit() and len(v) <= len(str(MAX_GC_THRESHOLD))):
                return None
            v = int(v)
        if type(v) is not int or not 0 <= v <= MAX_GC_THRESHOLD:
            return None
        out.append(v)
    return out[0], out[1], out[2]


MAX_JSON_DEPTH = (
    100  #: arrays and objects inside each other in any JSON read from a file (cooplab's own need fewer than 20)
)


# --- JSON from files --------------------------------------------------------------------------
def sha256_file(path: Any) -> str:
    """The SHA-256 of a file's bytes (hex), read in 1 MiB blocks (datasets, model files)."""
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def parse_json(
    text: str | bytes,
    where: str,
    *,
    error: Callable[[str], Exception] = ConfigError,
    parse_constant: Callable[[str], Any] | None = None,
) -> Any:
    """The value of the JSON ``text`` read from ``where`` (a file, or "FILE line N"), else ``error``
    (default :class:`ConfigError`) with one line naming ``where``: not JSON (and where it breaks),
    or nested deeper than :data:`MAX_JSON_DEPTH` levels. The depth cap keeps every later reader
    (checks, copies, the viewer's page) clear of Python's recursion limit, which a hostile file
    would otherwise reach inside the parser or after it. ``parse_constant`` as for
    :func:`json.loads` (``NaN``, ``Infinity``); a ValueError it raises is the message."""
    try:
        value = json.loads(text, parse_constant=parse_constant)
    except RecursionError:
        raise error(_too_deep(where)) from None
    except json.JSONDecodeError as exc:
        raise error(f"{where}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except (ValueError, TypeError) as exc:  # a refused constant; bytes that are not UTF-8
        raise error(f"{where}: not valid JSON ({one_line(exc, 120)})") from None
    if _brackets(text) > MAX_JSON_DEPTH and json_depth(value, MAX_JSON_DEPTH + 1) > MAX_JSON_DEPTH:
        raise error(_too_deep(where))
    return value


def _brackets(text: str | bytes) -> int:
    """How many ``[`` and ``{`` ``text`` holds: an upper bound of its nesting, counted at C speed."""
    return text.count("[") + text.count("{") if isinstance(text, str) else text.count(b"[") + text.count(b"{")


def _too_deep(where: str) -> str:
    return (
        f"{where}: JSON nested more than {MAX_JSON_DEPTH} levels deep (arrays or objects inside each other); "
        f"no cooplab file needs that many: check that it is the right file"
    )


def json_depth(value: Any, stop: int | None = None) -> int:
    """How many arrays and objects are nested in ``value`` (a scalar: 0), without recursion; the
    walk ends early once ``stop`` levels are found."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        node, level = todo.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else None
        if children is None:
            continue
        deepest = max(deepest, level)
        if stop is not None and deepest >= stop:
            break
        todo.extend((c, level + 1) for c in children if isinstance(c, (dict, list)))
    return deepest


@dataclass(frozen=True)
class Num:
    """A rule for one number: integer or real, inside [lo, hi] (an open end with lo_open/hi_open).

    A rule is also a pydantic constraint: ``budget: Annotated[float | None, RULES["budget"]]``
    checks the field by this rule wherever the model is built (a keyword, a flag, a file), and a
    violation is a pydantic error of type ``cap`` that :func:`explain` turns into the one-line
    message (``--budget must be a finite number in [0, 1000000] (...), got nan``). A field whose
    domain is narrower than a cap of :data:`RULES` takes it with :meth:`within`, so that the cap
    itself is written once."""

    kind: type  # int or float
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False
    hint: str = ""  # how to fix it / what the value means, shown in the message
    optional: bool = False  # None (JSON null) allowed
    name: str = ""  # its key in RULES (set there; kept by within())

    def describe(self) -> str:
        what = "an integer" if self.kind is int else "a finite number"
        lo, hi = _fmt(self.lo), _fmt(self.hi)
        if self.lo is not None and self.hi is not None:
            rng = f"in {'(' if self.lo_open else '['}{lo}, {hi}{')' if self.hi_open else ']'}"
            if self.kind is int:
                rng = f"in {lo}..{hi}"
        elif self.lo is not None:
            rng = f"{'>' if self.lo_open else '>='} {lo}"
        elif self.hi is not None:
            rng = f"{'<' if self.hi_open else '<='} {hi}"
        else:
            rng = ""
        return f"{what} {rng}".strip() + (f" ({self.hint})" if self.hint else "")

    def within(
        self,
        lo: float | None = None,
        hi: float | None = None,
        *,
        lo_open: bool | None = None,
        hi_open: bool | None = None,
        hint: str | None = None,
        optional: bool | None = None,
    ) -> "Num":
        """This cap narrowed to a field's own domain (never widened: a bound outside the cap is a
        programming error): ``RULES["param"].within(0, lo_open=True)`` is a positive real below the cap."""
        new = replace(
            self,
            lo=self.lo if lo is None else lo,
            hi=self.hi if hi is None else hi,
            lo_open=self.lo_open if lo_open is None else lo_open,
            hi_open=self.hi_open if hi_open is None else hi_open,
            hint=self.hint if hint is None else hint,
            optional=self.optional if optional is None else optional,
        )
        if (self.lo is not None and (new.lo is None or new.lo < self.lo)) or (
            self.hi is not None and (new.hi is None or new.hi > self.hi)
        ):
            raise ValueError(
                f"within() may only narrow the cap {self.name or self.describe()}: got [{new.lo}, {new.hi}]"
            )
        return new

    def value(self, value: Any) -> Any:
        """``value`` converted (an integral float is an integer's value; JSON writes 256.0 for 256) if
        it follows the rule; else :class:`OutOfRule`."""
        if value is None and self.optional:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise OutOfRule
        if isinstance(value, float) and not math.isfinite(value):
            raise OutOfRule
        if self.kind is int:
            if isinstance(value, float):
                if not value.is_integer():
                    raise OutOfRule
                value = int(value)
        else:
            try:
                value = float(value)
            except OverflowError:  # an integer too large for a float
                raise OutOfRule from None
        if self.lo is not None and (value < self.lo or (self.lo_open and value == self.lo)):
            raise OutOfRule
        if self.hi is not None and (value > self.hi or (self.hi_open and value == self.hi)):
            raise OutOfRule
        return value

    def check(self, name: str, value: Any, shown: str | None = None) -> Any:
        """``value`` (a Python value from JSON or already parsed) if it follows the rule; else ConfigError."""
        try:
            return self.value(value)
        except OutOfRule:
            raise ConfigError(
                f"{name} must be {self.describe()}, got {show(value) if shown is None else shown}"
            ) from None

    def parse(self, name: str, text: str) -> Any:
        """A command-line string -> a checked number."""
        t = str(text).strip()
        try:
            value: Any = int(t) if self.kind is int else float(t)
        except ValueError:
            raise ConfigError(f"{name} must be {self.describe()}, got {show(t)}") from None
        return self.check(
            name, value, shown=t if t.lower() in ("nan", "inf", "-inf", "+inf") else repr(t) if not t else t
        )

    # --- as a pydantic constraint (pydantic is imported only when a model using the rule is built) ---
    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        from pydantic_core import PydanticCustomError, core_schema

        def validate(value: Any) -> Any:
            try:
                return self.value(value)
            except OutOfRule:
                raise PydanticCustomError("cap", "must be {rule}", {"rule": self.describe()}) from None

        return core_schema.no_info_plain_validator_function(validate)

    def __get_pydantic_json_schema__(self, schema: Any, handler: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "integer" if self.kind is int else "number"}
        if self.lo is not None:
            out["exclusiveMinimum" if self.lo_open else "minimum"] = self.lo
        if self.hi is not None:
            out["exclusiveMaximum" if self.hi_open else "maximum"] = self.hi
        if self.hint:
            out["description"] = self.hint
        return {"anyOf": [out, {"type": "null"}]} if self.optional else out


class OutOfRule(Exception):
    """A value outside a :class:`Num` rule (turned into a ConfigError or a pydantic error by the caller)."""


#: a command of the command line quoted in a message ('cooplab params cpr'): said as it is
_COMMAND = re.compile(r"'cooplab [^']*'")
#: a command-line option in a message (--n-agents), not inside a word or a value (a--b, '--x')
_FLAG = re.compile(r"(?<![\w'\"-])--([a-z][a-z0-9]*(?:-[a-z0-9]+)*)(?![\w-])")
#: options whose Python keyword is not the option's name with underscores
_KEYWORD_OF = {"force": "force=True", "quiet": "quiet=True", "csv": "csv=True", "agent-model": "agent_model"}


def for_python(message: str) -> str:
    """A one-line message of the engine as a Python caller should read it: command-line options
    as the keywords of :func:`cooplab.run` (``--n-agents`` -> ``n_agents``, ``--force`` ->
    ``force=True``, ``--agent-model 2=local`` -> ``agent_models[2] ('local')``), and the advice to resume or to
    start again as the calls that do it (``'cooplab resume DIR'`` -> ``cooplab.resume('DIR')``).
    Every message is written once, in the command line's words (the CLI prints it as it is); the
    Python API raises it through this function. Other commands it quotes (``'cooplab params
    cpr'``) are left as commands."""

    def command(m: re.Match) -> str:
        text = m.group(0)[1:-1]
        again = re.fullmatch(r"cooplab run \.\.\. --out (.+) --force", text)
        if again:
            return f"cooplab.run(..., out={again.group(1)!r}, force=True)"
        resume = re.fullmatch(r"cooplab resume (.+)", text)
        if resume:
            return f"cooplab.resume({resume.group(1)!r})"
        return m.group(0)

    def flags(text: str) -> str:
        def agent_model(m: re.Match) -> str:
            key, spec, colon = m.group(1), m.group(2), m.group(3) or ""
            return f"agent_models[{key}]" + ("" if spec in (None, "...") else f" ({spec!r})") + colon

        text = re.sub(r"(?<![\w-])--agent-model (\d+|default)(?:=(\S+?))?(:?)(?=\s|$|[,;)])", agent_model, text)
        return _FLAG.sub(lambda m: _KEYWORD_OF.get(m.group(1), m.group(1).replace("-", "_")), text)

    parts, last = [], 0
    for m in _COMMAND.finditer(message):
        parts += [flags(message[last : m.start()]), command(m)]
        last = m.end()
    return "".join(parts + [flags(message[last:])])


def _fmt(x: float | None) -> str:
    if x is None:
        return ""
    if isinstance(x, int) or (float(x).is_integer() and abs(x) < 1e7):
        return str(int(x))
    return f"{x:g}".replace("e+", "e")


def show(value: Any) -> str:
    """A value as shown in a message (nan, inf, true, 'abc', [1, 2])."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # nan, inf, -inf
    if isinstance(value, str):
        return repr(value[:60] + ("..." if len(value) > 60 else ""))
    if isinstance(value, bool):
        return "true" if value else "false"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


#: The caps table: every bound a number may have, declared once. The keys are command-line option
#: names without the dashes (``--n-agents``: ``"n-agents"``) and, for settings no option sets, the
#: setting's own name. Each model field that holds a number takes its rule from here as a pydantic
#: constraint (``Annotated[int, RULES["rounds"]]``, or ``RULES["param"].within(0)`` for a narrower
#: domain); each command-line option parses with it (:func:`cooplab.cli.options.num_opt`); a test
#: walks every model and checks that no bound is written anywhere else.
RULES: dict[str, Num] = {
    name: replace(rule, name=name)
    for name, rule in {
        # --- every run ------------------------------------------------------------------------------
        "seed": Num(int, 0, MAX_SEED),
        "n-agents": Num(int, 2, MAX_AGENTS, hint="agents per society"),
        "mix-count": Num(int, 0, MAX_AGENTS, hint="agents of this model in a mixed society"),
        "rounds": Num(int, 1, MAX_ROUNDS),
        "replicates": Num(int, 1, MAX_REPLICATES),
        "figure-replicates": Num(int, 2, MAX_REPLICATES, hint="at least 2 for error bars"),
        # --- a society's parameters (CPR, diners) --------------------------------------------------
        "param": Num(float, -MAX_PARAM, MAX_PARAM),
        "share": Num(float, 0, 1, hint="a share or a probability"),
        "iterations": Num(int, 1, MAX_ROUNDS),
        "combination": Num(int, 1, 2, hint="the paper's initial combinations"),
        "beta": Num(float, 0, 1000, hint="selection strength of the Fermi rule"),
        # --- the behavioral games -------------------------------------------------------------------
        "group-size": Num(int, 2, MAX_GROUP, hint="players in each group"),
        "simulations": Num(int, 1, MAX_SIMULATIONS),
        "tokens": Num(int, 0, MAX_TOKENS, hint="tokens"),
        "factor": Num(float, 0, MAX_FACTOR),
        # --- science teams --------------------------------------------------------------------------
        "max-reentries": Num(int, 0, 5, hint="passes a team may be asked for again"),
        "max-steps": Num(int, 1, 100, hint="model calls per member in the work phase"),
        "loop-steps": Num(int, 1, 20, hint="model calls of a lead's loop"),
        "deliberation-rounds": Num(int, 0, 5),
        "code-timeout": Num(float, 0, 600, lo_open=True, hint="seconds"),
        "chars": Num(int, 200, 100_000, hint="characters"),
        "judge-samples": Num(int, 1, 20, hint="judge calls per run, averaged"),
        # --- LLM agents -----------------------------------------------------------------------------
        "temperature": Num(float, 0, 2),
        "max-tokens": Num(int, 1, 100_000),
        "max-concurrency": Num(int, 1, 1024),
        "model-processes": Num(int, 0, 64, hint="worker processes for the model calls; 0: the run's own process"),
        "call-timeout": Num(
            float,
            0,
            86_400,
            lo_open=True,
            hint="seconds one attempt of a model call may take in all, its whole answer read",
        ),
        "call-deadline": Num(
            float, 0, 86_400, lo_open=True, hint="seconds one model call may take in all, its retries included"
        ),
        "rps": Num(float, 0.001, 1_000_000, hint="requests per second; omit it for no limit", optional=True),
        "budget": Num(float, 0, 1_000_000, hint="USD; omit it for no cap", optional=True),
        "price-in": Num(
            float, 0, 1000, hint="USD per 1K input tokens; omit it for each model's own price", optional=True
        ),
        "price-out": Num(
            float, 0, 1000, hint="USD per 1K output tokens; omit it for each model's own price", optional=True
        ),
        "price": Num(float, 0, 1000, hint="USD per 1K tokens"),
        # --- the sandbox ----------------------------------------------------------------------------
        "sandbox-rate": Num(
            float, 0, 1000, hint="USD per second of sandbox time; 0: sandbox time is recorded but free"
        ),
        "sandbox-timeout": Num(float, 0, 86_400, lo_open=True, hint="seconds one run_code call may take"),
        # --- commands -------------------------------------------------------------------------------
        "parallel": Num(int, 1, 64, hint="cells run at once"),
        "samples": Num(int, 1, 100_000, hint="points of the calibration design"),
        "batch": Num(int, 1, 10_000, hint="samples per job"),
        "port": Num(int, 0, 65535),
        "max-fallback": Num(float, 0, 1, hint="a share of decisions, e.g. 0.2"),
    }.items()
}


# --- one formatter for every validation error ------------------------------------------------
def dotted(loc: Any) -> str:
    """A pydantic error location as a field path: ``("llm", "prices", "x", 0)`` -> ``llm.prices['x'][0]``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part == "[key]":
            out += " (a key)"
        elif out and not str(part).isidentifier():
            out += f"[{part!r}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def flags(names: Any = None, *, rest: Callable[[str], str] | None = None) -> Callable[[tuple], str]:
    """How the command line names a setting in a message: ``names[field]`` when given (CPR's ``N`` is
    ``--n-agents``), ``rest(field)`` for the others (``--set K``), else the field as an option
    (``max_tokens`` -> ``--max-tokens``). :func:`for_python` turns these back into keywords."""
    names = dict(names or {})

    def name(loc: tuple) -> str:
        if not loc:
            return ""
        head, tail = str(loc[0]), dotted(loc[1:])
        if head in names:
            label = names[head]
        elif rest is not None:
            label = rest(head)
        else:
            label = "--" + head.replace("_", "-")
        return label + (("" if tail.startswith("[") else ".") + tail if tail else "")

    name.bare, name.where = name, ""  # type: ignore[attr-defined]
    return name


def in_file(where: str, prefix: str = "") -> Callable[[tuple], str]:
    """How a file names a setting in a message: ``config.json: llm.budget`` (``where``: the file and
    what it is; ``prefix``: the block the model was read from, e.g. ``llm``)."""

    def bare(loc: tuple) -> str:
        return dotted(((prefix,) if prefix else ()) + tuple(loc))

    def name(loc: tuple) -> str:
        path = bare(loc)
        return f"{where}: {path}" if path else where

    name.bare, name.where = bare, where  # type: ignore[attr-defined]
    return name


def cross(fields: tuple[str, ...], text: str) -> Exception:
    """The error of a rule between settings (raised by a model's validator): ``text`` names each of
    ``fields`` as ``<field>`` (``"<replicates> x <N> must be at most ..."``) and :func:`explain`
    names them as the place does (``--replicates x --n-agents``, ``config.json: params.replicates x
    params.N``)."""
    from pydantic_core import PydanticCustomError

    # pydantic_core's stub asks for a LiteralString template; any text works (the placeholders are ours)
    return PydanticCustomError("cross", cast("LiteralString", text), {"fields": list(fields)})


def explain(exc: Any, name: Callable[[tuple], str] | None = None) -> str:
    """The one-line message of a pydantic ``ValidationError`` (its first error), the setting named by
    ``name(loc)`` (:func:`flags` for the command line, :func:`in_file` for a file; default the
    field path): ``--budget must be a finite number in [0, 1000000] (USD; omit it for no cap), got
    nan``, ``config.json: params.population must be altruistic, selfish or mixed, got 'x'``,
    ``config.json: llm: unknown field 'models'``. Every entry point raises its validation errors
    through this function, so a bad value reads the same whatever the model and the place."""
    name = name or dotted
    e = exc.errors(include_url=False)[0]
    loc: tuple[Any, ...] = tuple(e.get("loc") or ())
    kind, ctx = e.get("type", ""), e.get("ctx") or {}
    got = show(e.get("input"))
    msg = str(e.get("msg", "")).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if kind == "extra_forbidden":
        parent = name(loc[:-1])
        return f"{parent + ': ' if parent else ''}unknown field {str(loc[-1])!r}"
    if kind == "missing":
        parent = name(loc[:-1])
        return f"{parent + ' ' if parent else ''}lacks {loc[-1]}" if parent else f"{loc[-1]} is missing"
    if kind == "cross":
        bare, where = getattr(name, "bare", name), getattr(name, "where", "")
        text = re.sub(r"<(\w+)>", lambda m: bare(loc + (m.group(1),)) or m.group(1), msg)
        return f"{where}: {text}" if where else text
    label = name(loc)
    if kind == "cap":
        return f"{label} must be {ctx.get('rule')}, got {got}"
    if kind in ("literal_error", "enum"):
        expected = str(ctx.get("expected", "")).replace("'", "")
        return f"{label} must be {expected}, got {got}"
    if kind in ("bool_type", "bool_parsing"):
        return f"{label} must be true or false, got {got}"
    wanted = {
        "string_type": "a string",
        "int_type": "an integer",
        "int_parsing": "an integer",
        "float_type": "a number",
        "float_parsing": "a number",
        "dict_type": "a JSON object",
        "model_type": "a JSON object",
        "model_attributes_type": "a JSON object",
        "list_type": "a list",
        "tuple_type": "a list",
        "none_required": "null",
    }.get(kind)
    if wanted:
        return f"{label} must be {wanted}, got {got}"
    if kind in ("too_short", "too_long"):
        return f"{label}: {msg.replace('List', 'the list').replace('Tuple', 'the list')}"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal", "multiple_of"):
        return f"{label} must be {msg.removeprefix('Input should be ')}, got {got}"
    return f"{label}: {msg}" if label else msg


def validate(
    model: Any, raw: Any, name: Callable[[tuple], str] | None = None, *, context: Any = None, strict: bool | None = None
) -> Any:
    """``model.model_validate(raw)`` (a pydantic model class; ``strict=False`` for a file's JSON
    types), or a one-line :class:`ConfigError` (:func:`explain`, settings named by ``name``)."""
    from pydantic import ValidationError

    try:
        return model.model_validate(raw, context=context, strict=strict)
    except ValidationError as exc:
        raise ConfigError(explain(exc, name)) from None


def check(name: str, value: Any, rule: str | Num) -> Any:
    """Check one value from a file or a caller: ``check("sweep config x.json: trials", 3, "replicates")``."""
    r = RULES[rule] if isinstance(rule, str) else rule
    return r.check(name, value)


def check_size(
    replicates: int,
    n_agents: int,
    rounds: int,
    *,
    names: tuple[str, str, str] = ("--replicates", "--n-agents", "--rounds"),
    diners: bool = False,
) -> None:
    """Refuse runs whose state would not fit in memory (caps documented in README.md)."""
    r, n, t = names
    if diners:
        if replicates * n_agents * n_agents * rounds > MAX_DINERS_CELLS:
            raise ConfigError(
                f"{r} x diners^2 x {t} must be at most {MAX_DINERS_CELLS:,} (memory), got "
                f"{replicates} x {n_agents}^2 x {rounds}; use fewer replicates or iterations"
            )
        return
    if replicates * n_agents > MAX_CELLS:
        raise ConfigError(
            f"{r} x {n} must be at most {MAX_CELLS:,} (memory), got {replicates} x {n_agents}; use fewer replicates"
        )
    if replicates * rounds > MAX_CELLS:
        raise ConfigError(
            f"{r} x {t} must be at most {MAX_CELLS:,} (memory), got {replicates} x {rounds}; use fewer replicates or "
            "rounds"
        )


def check_agent_models(
    keys: Any, n_agents: int, name: Callable[[str], str] = lambda k: f"--agent-model {k}=..."
) -> None:
    """Per-agent model keys must be agents of the society (0..n_agents-1)."""
    for k in keys:
        if k == "default":
            continue
        if not str(k).isdigit() or not 0 <= int(k) < n_agents:
            raise ConfigError(
                f"{name(k)}: agent must be in 0..{n_agents - 1} (this society has {n_agents} agents; agents count from "
                f"0), got {k}"
            )


def parse_set(items: Any, fields: Any, task: str) -> dict[str, Any]:
    """``--set name=value`` items (or, from Python, a dict) -> a dict of values, parsed as JSON where
    possible (else kept as text). Every name must be one of ``fields``."""
    if items is None:
        return {}
    if isinstance(items, dict):
        pairs = [(str(k), v, False) for k, v in items.items()]
    elif isinstance(items, (list, tuple)) and all(isinstance(i, str) for i in items):
        pairs = []
        for item in items:
            if "=" not in item:
                raise ConfigError(f"--set expects name=value, got {item!r}")
            name, raw = (x.strip() for x in item.split("=", 1))
            pairs.append((name, raw, True))
    else:
        raise ConfigError(
            f"set must be a dict of parameter values (or a list of 'name=value' strings), got {show(items)}"
        )
    out: dict[str, Any] = {}
    for name, value, text in pairs:
        if name not in fields:
            raise ConfigError(f"unknown parameter {name!r} in --set; run 'cooplab params {task}' to list them")
        if text:
            try:
                value = parse_json(value, f"--set {name}")
            except ConfigError:
                pass  # not JSON (or absurdly nested): kept as text, for the parameter's own rule to take or refuse
        out[name] = value
    return out


def check_seeds(where: str, seeds: Any) -> list[int]:
    """A sweep's seed list: a non-empty list of distinct integers, each within the seed bounds;
    otherwise a one-line ConfigError naming ``where``."""
    if (
        not isinstance(seeds, list)
        or not seeds
        or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds)
    ):
        raise ConfigError(f"{where}: seeds must be a non-empty list of integers, got {show(seeds)}")
    for s in seeds:
        check(f"{where}: seeds", s, "seed")
    if len(set(seeds)) != len(seeds):
        raise ConfigError(f"{where}: seeds has duplicates: {seeds}")
    return seeds
