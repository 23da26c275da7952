"""CLI options shared by every ``cooplab`` command, and the rules for every number a user gives,
declared once.

Used as ``model: ModelOpt = "local"``; the default stays in the command's signature.

Every number that comes from a user (a command-line option, a sweep config, ``--set``, a run's
``config.json`` read by ``cooplab resume``) is checked against one :class:`Num` rule of
:data:`RULES`: finite, in its domain, below a documented cap (so that no value can exhaust
memory), and of the right type. A violation is an :class:`OptionError` whose message is one
line: ``--budget must be a finite number in [0, 1000000] (USD; leave --budget out for no cap), got nan``.
On the command line the rules are enforced while the arguments are parsed (:func:`num_opt`);
the file readers call :func:`check` / :func:`check_llm` / :func:`check_size` with the field's name.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Callable, Optional

import typer

class OptionError(Exception):
    """A number or field outside its rule (user-facing, one line, exit 2). Deliberately not a
    ValueError: Typer's (pydantic) option validation must let it through unchanged."""


def one_line(text: Any, limit: int = 400) -> str:
    """``text`` on one line (whitespace runs collapsed), cut to ``limit`` characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def fail(msg: str, code: int = 2) -> None:
    """The one error exit of every ``cooplab`` command: ``cooplab: error: <msg>`` on stderr (one
    line) and exit ``code``: 2 for a user mistake (the default), 1 for a failure of the work
    itself (e.g. a sandbox command that failed). Never returns."""
    if code == 2:
        raise OptionError(msg)
    typer.echo(f"cooplab: error: {one_line(msg)}", err=True)
    raise typer.Exit(code)


# --- caps (documented in README.md "Bad input") -----------------------------------------------
MAX_SEED = 2**63 - 1  #: seeds are stored as signed 64-bit integers (checkpoints, Parquet tables)
MAX_AGENTS = 100_000  #: agents per society (CPR N)
MAX_DINERS = 1_000  #: diners per society (punishment matrices are agents x agents)
MAX_ROUNDS = 10_000  #: CPR rounds T / diners iterations (every round is checkpointed)
MAX_REPLICATES = 100_000  #: replicate societies in one run
MAX_CELLS = 10_000_000  #: replicates x agents, and replicates x rounds, of one run (memory)
MAX_DINERS_CELLS = 100_000_000  #: replicates x diners^2 x iterations of one diners run (memory)
MAX_PARAM = 1e12  #: any real-valued society parameter (--set, diners --beta, --pk)


@dataclass(frozen=True)
class Num:
    """A rule for one number: integer or real, inside [lo, hi] (an open end with lo_open/hi_open)."""

    kind: type  # int or float
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False
    hint: str = ""  # how to fix it / what the value means, shown in the message
    optional: bool = False  # None (JSON null) allowed

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

    def check(self, name: str, value: Any, shown: str | None = None) -> Any:
        """``value`` (a Python value from JSON or already parsed) if it follows the rule; else OptionError."""
        if value is None and self.optional:
            return None
        got = show(value) if shown is None else shown
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise OptionError(f"{name} must be {self.describe()}, got {got}")
        if isinstance(value, float) and not math.isfinite(value):
            raise OptionError(f"{name} must be {self.describe()}, got {got}")
        if self.kind is int:
            if isinstance(value, float):
                if not value.is_integer():
                    raise OptionError(f"{name} must be {self.describe()}, got {got}")
                value = int(value)
        else:
            try:
                value = float(value)
            except OverflowError:  # an integer too large for a float
                raise OptionError(f"{name} must be {self.describe()}, got {got}") from None
        if self.lo is not None and (value < self.lo or (self.lo_open and value == self.lo)):
            raise OptionError(f"{name} must be {self.describe()}, got {got}")
        if self.hi is not None and (value > self.hi or (self.hi_open and value == self.hi)):
            raise OptionError(f"{name} must be {self.describe()}, got {got}")
        return value

    def parse(self, name: str, text: str) -> Any:
        """A command-line string -> a checked number."""
        t = str(text).strip()
        try:
            value: Any = int(t) if self.kind is int else float(t)
        except ValueError:
            raise OptionError(f"{name} must be {self.describe()}, got {show(t)}") from None
        return self.check(name, value, shown=t if t.lower() in ("nan", "inf", "-inf", "+inf") else repr(t) if not t else t)


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


#: Every numeric option and config field. Keys are the option names without dashes.
RULES: dict[str, Num] = {
    "seed": Num(int, 0, MAX_SEED),
    "n-agents": Num(int, 2, MAX_AGENTS, hint="agents per society"),
    "rounds": Num(int, 1, MAX_ROUNDS),
    "replicates": Num(int, 1, MAX_REPLICATES),
    "figure-replicates": Num(int, 2, MAX_REPLICATES, hint="at least 2 for error bars"),
    "iterations": Num(int, 1, MAX_ROUNDS),
    "combination": Num(int, 1, 2, hint="the paper's initial combinations"),
    "beta": Num(float, 0, 1000, hint="selection strength of the Fermi rule"),
    "temperature": Num(float, 0, 2),
    "max-tokens": Num(int, 1, 100_000),
    "max-concurrency": Num(int, 1, 1024),
    "rps": Num(float, 0.001, 1_000_000, hint="requests per second; omit it for no limit", optional=True),
    "budget": Num(float, 0, 1_000_000, hint="USD; omit it for no cap", optional=True),
    "price-in": Num(float, 0, 1000, hint="USD per 1K input tokens"),
    "sandbox-rate": Num(float, 0, 1000, hint="USD per second of sandbox time; 0: sandbox time is recorded but free"),
    "sandbox-timeout": Num(float, 0, 86_400, lo_open=True, hint="seconds one run_code call may take"),
    "price-out": Num(float, 0, 1000, hint="USD per 1K output tokens"),
    "parallel": Num(int, 1, 64, hint="cells run at once"),
    "samples": Num(int, 1, 100_000, hint="points of the calibration design"),
    "batch": Num(int, 1, 10_000, hint="samples per job"),
    "port": Num(int, 0, 65535),
}


def check(name: str, value: Any, rule: str | Num) -> Any:
    """Check one value from a file or a caller: ``check("sweep config x.json: trials", 3, "replicates")``."""
    r = RULES[rule] if isinstance(rule, str) else rule
    return r.check(name, value)


def num_opt(option: str, help: str, rule: str | None = None, **kw: Any) -> Any:
    """``typer.Option(option, ...)`` whose value follows ``RULES[rule]`` (default: the option's name),
    checked while the command line is parsed. The OptionError it raises is not a ValueError, so it
    passes Typer's validation untouched and ``cooplab.cli.main`` prints it as one line, exit 2."""
    r = RULES[rule or option.lstrip("-")]

    def parse(value: Any) -> Any:
        return r.parse(option, value) if isinstance(value, str) else r.check(option, value)

    kw.setdefault("metavar", "INTEGER" if r.kind is int else "FLOAT")
    return typer.Option(option, help=help, parser=parse, **kw)


OutOpt = Annotated[Path, typer.Option("--out", help="Run directory to write (created if missing).")]
SeedOpt = Annotated[int, num_opt("--seed", f"Seed of every random draw, 0..{MAX_SEED} (recorded in config.json).")]
CsvOpt = Annotated[bool, typer.Option("--csv", help="Write tables as CSV instead of Parquet.")]
ForceOpt = Annotated[bool, typer.Option("--force", help="Overwrite an existing run directory.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print summary.json to stdout.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")]


def stderr_log(quiet: bool) -> Callable[[str], None]:
    """The progress-line sink of a long command: one line each to stderr, or nothing under -q/--json."""
    return (lambda s: None) if quiet else (lambda s: typer.echo(s, err=True))

# --- LLM agents (checked and assembled by cooplab.cli._llm_options) --------------------------
ModelOpt = Annotated[str, typer.Option("--model", help="LLM agents' model: local (SmolLM2-135M via llama.cpp), openai:NAME, scripted:FILE.")]
AgentModelOpt = Annotated[Optional[list[str]], typer.Option("--agent-model", help="Per-agent model, repeatable: --agent-model 2=openai:gpt-4o-mini (agents count from 0).")]
BaseUrlOpt = Annotated[Optional[str], typer.Option("--base-url", help="OpenAI-compatible server URL for openai:NAME (vLLM, llama_cpp.server, ...).")]
TemperatureOpt = Annotated[float, num_opt("--temperature", "Sampling temperature of LLM agents, in [0, 2].")]
MaxTokensOpt = Annotated[int, num_opt("--max-tokens", "Output token cap per LLM call (1..100000).")]
MaxConcurrencyOpt = Annotated[int, num_opt("--max-concurrency", "Concurrent model calls at most (1..1024).")]
RpsOpt = Annotated[Optional[float], num_opt("--rps", "Requests per second at most, in (0, 1e6] (default: unlimited).")]
BudgetOpt = Annotated[Optional[float], num_opt("--budget", "Budget cap in USD, in [0, 1e6]; the run ends with status budget_exhausted when it is spent.")]
PriceInOpt = Annotated[float, num_opt("--price-in", "USD per 1K input tokens, in [0, 1000].")]
PriceOutOpt = Annotated[float, num_opt("--price-out", "USD per 1K output tokens, in [0, 1000].")]
SandboxRateOpt = Annotated[float, num_opt("--sandbox-rate", "USD per second of sandbox time charged to the run's ledger, in [0, 1000] (default 0: recorded, free).")]
SandboxTimeoutOpt = Annotated[float, num_opt("--sandbox-timeout", "Seconds one run_code call may take, in (0, 86400]; the sandbox is killed past it.")]
CacheOpt = Annotated[Optional[str], typer.Option("--cache", help="Response cache file (default ~/.cache/cooplab/llm-cache.sqlite or $COOPLAB_CACHE); 'off' disables it.")]


# --- LLM settings from a file (sweep config "llm", a run's config.json "llm") ----------------
#: field of the settings -> the rule it follows
LLM_FIELDS: dict[str, str] = {
    "temperature": "temperature", "max_tokens": "max-tokens", "max_concurrency": "max-concurrency", "rps": "rps",
    "budget": "budget", "price_in": "price-in", "price_out": "price-out",
    "price_in_per_1k": "price-in", "price_out_per_1k": "price-out", "sandbox_usd_per_second": "sandbox-rate",
}


def check_llm(llm: Any, where: str, allowed: set[str]) -> dict[str, Any]:
    """Check the LLM settings of a file: a JSON object whose keys are in ``allowed``, numbers by
    their rules, strings where strings belong. ``where``: "sweep config x.json: llm"."""
    if not isinstance(llm, dict):
        raise OptionError(f"{where} must be a JSON object, got {show(llm)}")
    for key, value in llm.items():
        if key not in allowed:
            raise OptionError(f"{where}: unknown field {key!r}; use {', '.join(sorted(allowed))}")
        if key in LLM_FIELDS:
            check(f"{where}.{key}", value, LLM_FIELDS[key])
        elif key in ("base_url", "cache") and value is not None and not isinstance(value, str):
            raise OptionError(f"{where}.{key} must be a string or null, got {show(value)}")
        elif key == "models":
            if not isinstance(value, dict) or "default" not in value or not all(isinstance(v, str) for v in value.values()):
                raise OptionError(f"{where}.models must map 'default' and agent numbers to model specs, got {show(value)}")
    return llm


def check_size(replicates: int, n_agents: int, rounds: int, *, names: tuple[str, str, str] = ("--replicates", "--n-agents", "--rounds"),
               diners: bool = False) -> None:
    """Refuse runs whose state would not fit in memory (caps documented in README.md)."""
    r, n, t = names
    if diners:
        if replicates * n_agents * n_agents * rounds > MAX_DINERS_CELLS:
            raise OptionError(f"{r} x diners^2 x {t} must be at most {MAX_DINERS_CELLS:,} (memory), got "
                              f"{replicates} x {n_agents}^2 x {rounds}; use fewer replicates or iterations")
        return
    if replicates * n_agents > MAX_CELLS:
        raise OptionError(f"{r} x {n} must be at most {MAX_CELLS:,} (memory), got {replicates} x {n_agents}; use fewer replicates")
    if replicates * rounds > MAX_CELLS:
        raise OptionError(f"{r} x {t} must be at most {MAX_CELLS:,} (memory), got {replicates} x {rounds}; use fewer replicates or rounds")


def check_agent_models(keys: Any, n_agents: int, name: Callable[[str], str] = lambda k: f"--agent-model {k}=...") -> None:
    """Per-agent model keys must be agents of the society (0..n_agents-1)."""
    for k in keys:
        if k == "default":
            continue
        if not str(k).isdigit() or not 0 <= int(k) < n_agents:
            raise OptionError(f"{name(k)}: agent must be in 0..{n_agents - 1} (this society has {n_agents} agents; agents count from 0), got {k}")


# --- files named on the command line -----------------------------------------------------------
MAX_SCRIPT_DELAY = 3600.0


def check_scripted_file(path: str | Path) -> None:
    """A ``scripted:FILE`` model file: valid JSON, non-empty answers, every field of the right type."""
    import json

    p = Path(path)
    where = f"scripted model file {p}"
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise OptionError(f"cannot read {where}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OptionError(f"{where} is not valid JSON: {exc.msg} at line {exc.lineno}") from None
    if isinstance(data, list):
        data = {"answers": data}
    if not isinstance(data, dict):
        raise OptionError(f"{where} must hold a JSON object with 'answers' or 'by_phase' (or a list of answers), got {show(data)}")
    answers, by_phase = data.get("answers", []), data.get("by_phase", {})
    if not isinstance(answers, list):
        raise OptionError(f"{where}: 'answers' must be a list of answers, got {show(answers)}")
    if not isinstance(by_phase, dict) or not all(isinstance(v, list) for v in by_phase.values()):
        raise OptionError(f"{where}: 'by_phase' must map phase names to lists of answers, got {show(by_phase)}")
    if not answers and not any(by_phase.values()):
        raise OptionError(f"{where} needs a non-empty 'answers' list or 'by_phase' mapping")
    for seq_name, seq in [("answers", answers)] + [(f"by_phase.{k}", v) for k, v in by_phase.items()]:
        for i, a in enumerate(seq):
            at = f"{where}: {seq_name}[{i}]"
            if isinstance(a, str):
                continue
            if not isinstance(a, dict):
                raise OptionError(f"{at} must be a string or an object with 'text', 'delay' or 'error', got {show(a)}")
            if "text" in a and not isinstance(a["text"], str):
                raise OptionError(f"{at}.text must be a string, got {show(a['text'])}")
            if "error" in a and not isinstance(a["error"], str):
                raise OptionError(f"{at}.error must be a string (timeout, connection, 429, 500), got {show(a['error'])}")
            if "delay" in a:
                Num(float, 0, MAX_SCRIPT_DELAY, hint="seconds").check(f"{at}.delay", a["delay"])
    if "latency" in data:
        Num(float, 0, MAX_SCRIPT_DELAY, hint="seconds added to every call").check(f"{where}: latency", data["latency"])
    if "cycle" in data and not isinstance(data["cycle"], bool):
        raise OptionError(f"{where}: 'cycle' must be true or false, got {show(data['cycle'])}")
    if data.get("select", "order") not in ("order", "prompt_hash"):
        raise OptionError(f"{where}: 'select' must be 'order' or 'prompt_hash', got {show(data.get('select'))}")


def check_model(text: Any, base_url: Any = None, name: str = "--model") -> None:
    """A model spec that parses, and for ``scripted:FILE`` a file that loads."""
    from cooplab.agents.models import ModelSpecError, parse_model_spec

    if not isinstance(text, str):
        raise OptionError(f"{name} must be a model spec string (local, openai:NAME, scripted:FILE), got {show(text)}")
    if base_url is not None and not isinstance(base_url, str):
        raise OptionError(f"base_url must be a URL string or null, got {show(base_url)}")
    try:
        spec = parse_model_spec(text, base_url=base_url)
    except ModelSpecError as exc:
        raise OptionError(str(exc)) from None
    if spec.kind == "scripted":
        check_scripted_file(spec.name)
    elif spec.kind == "local":
        from cooplab.extras import require

        require("local", "the local model")


def check_cache(path: str | Path, name: str = "--cache") -> None:
    """A response cache path: a new file in a writable directory, or an existing cooplab cache.
    Nothing is created or changed when the check fails."""
    import sqlite3

    p = Path(path).expanduser()
    fix = f"point {name} at a new file in a writable directory, or use {name} off"
    if p.is_dir():
        raise OptionError(f"{name} {p} is a directory, not a file; {fix}")
    if p.exists():
        try:
            with open(p, "rb") as fh:
                head = fh.read(16)
        except OSError as exc:
            raise OptionError(f"{name} {p} cannot be read ({exc.strerror or exc}); {fix}") from None
        if head and head != b"SQLite format 3\x00":
            raise OptionError(f"{name} {p} is not an SQLite database; {fix}")
        if head:
            try:
                from cooplab.runstore import readonly_uri

                db = sqlite3.connect(readonly_uri(p), uri=True)
                try:
                    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
                finally:
                    db.close()
            except sqlite3.Error as exc:
                raise OptionError(f"{name} {p} is not a readable SQLite database ({exc}); {fix}") from None
            if tables and "responses" not in tables:
                raise OptionError(f"{name} {p} is an SQLite database but not a cooplab response cache (tables: "
                                  f"{', '.join(sorted(tables)[:5])}); {fix}")
        if not os_access(p):
            raise OptionError(f"{name} {p} is not writable; {fix}")
        return
    # a new file: create it now (as the run would), undoing every directory made if that fails
    made: list[Path] = []
    d = p.parent
    while not d.exists() and d != d.parent:
        made.append(d)
        d = d.parent
    try:
        from cooplab.agents.cache import ResponseCache

        ResponseCache(p).close()
    except (OSError, sqlite3.Error) as exc:
        for q in (p, Path(str(p) + "-wal"), Path(str(p) + "-shm")):
            try:
                q.unlink()
            except OSError:
                pass
        for q in made:  # deepest first
            try:
                q.rmdir()
            except OSError:
                pass
        reason = getattr(exc, "strerror", None) or str(exc)
        raise OptionError(f"{name} {p}: cannot create it ({reason}); {fix}") from None


def os_access(p: Path) -> bool:
    import os

    return os.access(p, os.W_OK)
