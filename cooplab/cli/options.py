"""The command line's shared options: Typer declarations of every option that several commands
have, and the one error exit.

The rules behind the numbers live in :mod:`cooplab.limits` (no Typer there); this module only
declares the options (``model: ModelOpt = "local"``; the default stays in the command's
signature) and checks each number by its rule while the command line is parsed (:func:`num_opt`).
The rules and caps are re-exported here, so a CLI module needs one import.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Callable, NoReturn, Optional

import typer

from cooplab.limits import (  # noqa: F401 - for CLI modules
    MAX_AGENTS,
    MAX_CELLS,
    MAX_DINERS,
    MAX_DINERS_CELLS,
    MAX_PARAM,
    MAX_REPLICATES,
    MAX_ROUNDS,
    MAX_SEED,
    RULES,
    ConfigError,
    Num,
    check,
    check_agent_models,
    check_size,
    one_line,
    show,
)

if TYPE_CHECKING:
    from cooplab.agents.settings import LLMSettings


def fail(msg: str, code: int = 2) -> NoReturn:
    """The one error exit of every ``cooplab`` command: ``cooplab: error: <msg>`` on stderr (one
    line) and exit ``code``: 2 for a user mistake (the default), 1 for a failure of the work
    itself (e.g. a sandbox command that failed). Never returns."""
    if code == 2:
        raise ConfigError(msg)
    typer.echo(f"cooplab: error: {one_line(msg)}", err=True)
    raise typer.Exit(code)


def given(*names: str) -> list[str]:
    """The options among ``names`` (parameter names) that the user typed on the command line of
    the command being run, as flags (``--model``), in ``names``' order; [] outside a command."""
    try:
        from typer._click.globals import get_current_context
    except ImportError:  # pragma: no cover - Typer releases that use Click itself
        from click import get_current_context
    ctx = get_current_context(silent=True)
    if ctx is None:
        return []
    flags = {p.name: (p.opts[0] if getattr(p, "opts", None) else p.name) for p in ctx.command.params}
    out = []
    for name in names:
        source = ctx.get_parameter_source(name) if name in flags else None
        if getattr(source, "name", None) == "COMMANDLINE":  # by name: Typer may bring its own copy of Click's enum
            out.append(flags[name])
    return out


def num_opt(option: str, help: str, rule: str | None = None, **kw: Any) -> Any:
    """``typer.Option(option, ...)`` whose value follows ``RULES[rule]`` (default: the option's name),
    checked while the command line is parsed. The ConfigError it raises is not a ValueError, so it
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


# --- LLM agents (checked and assembled by cooplab.agents.settings.LLMSettings.from_options) ---------------
#: the hosted providers' spec prefixes, in the order of :data:`cooplab.agents.providers.PROVIDERS`
#: (named here so that ``--help`` does not load the model layer; a test checks the two agree)
HOSTED_PROVIDERS = ("openai", "anthropic", "google_genai", "ollama")


def model_kinds() -> str:
    """Every kind of model spec, for ``--model``'s help."""
    hosted = ", ".join(f"{k}:NAME" for k in HOSTED_PROVIDERS)
    return (
        f"local (SmolLM2-135M via llama.cpp), local:PATH.gguf (any GGUF chat model file), {hosted} (a hosted provider; "
        "--base-url for another server speaking its API), scripted:FILE (fixed answers)"
    )


def llm_settings(values: Mapping[str, Any]) -> "LLMSettings":
    """A command's LLM settings, built the same way by every command from its values of the shared
    LLM options below (by parameter name: ``model``, ``agent_model``, ``base_url``, ``temperature``,
    ``max_tokens``, ...; :meth:`~cooplab.agents.settings.LLMSettings.from_options`); a setting the
    command has no option for keeps its default, a bad value is a one-line ConfigError naming the
    option. Not yet resolved: :meth:`~cooplab.agents.settings.LLMSettings.resolve` does that (the
    run resolves it with the number of agents)."""
    from cooplab.agents.settings import LLMSettings

    return LLMSettings.from_options(values)


ModelOpt = Annotated[str, typer.Option("--model", help=f"LLM agents' model: {model_kinds()}.")]
ModelMixOpt = Annotated[
    Optional[list[str]],
    typer.Option(
        "--model-mix",
        help="A mixed society, repeatable: --model-mix SPEC=COUNT per model, the counts adding up to the population "
        "(e.g. --model-mix scripted:a.json=2 --model-mix local=2); which agent gets which model is drawn with "
        "--seed and recorded in config.json (docs/mixed-societies.md).",
    ),
]
AgentModelOpt = Annotated[
    Optional[list[str]],
    typer.Option(
        "--agent-model", help="Per-agent model, repeatable: --agent-model 2=openai:gpt-4o-mini (agents count from 0)."
    ),
]
BaseUrlOpt = Annotated[
    Optional[str],
    typer.Option(
        "--base-url",
        help="Another server speaking the model provider's API: an OpenAI-compatible one for openai:NAME (vLLM, "
        "llama_cpp.server, ...), an Anthropic, Gemini or Ollama one for anthropic:, google_genai:, ollama:.",
    ),
]
TemperatureOpt = Annotated[float, num_opt("--temperature", "Sampling temperature of LLM agents, in [0, 2].")]
MaxTokensOpt = Annotated[int, num_opt("--max-tokens", "Output token cap per LLM call (1..100000).")]
MaxConcurrencyOpt = Annotated[int, num_opt("--max-concurrency", "Concurrent model calls at most (1..1024).")]
ModelProcessesOpt = Annotated[
    int,
    num_opt(
        "--model-processes",
        "Worker processes that make the LLM agents' model calls, 0..64 (0: this process). Worth it when a hosted "
        "model's client, not the server, limits a large society; results are the same (docs/scale.md).",
    ),
]
CallTimeoutOpt = Annotated[
    float,
    num_opt(
        "--call-timeout",
        "Seconds one attempt of a call to a model server may take in all, its whole answer read, in (0, 86400]; past "
        "it the call is retried (within --call-deadline), then the run stops.",
    ),
]
CallDeadlineOpt = Annotated[
    float,
    num_opt(
        "--call-deadline",
        "Seconds one call to a model server may take in all, its retries and the waits between them included, in (0, "
        "86400]; past it the run stops (resumable), naming the server. Raise it, with --call-timeout, for slow "
        "reasoning models.",
    ),
]
RpsOpt = Annotated[Optional[float], num_opt("--rps", "Requests per second at most, in (0, 1e6] (default: unlimited).")]
BudgetOpt = Annotated[
    Optional[float],
    num_opt("--budget", "Budget cap in USD, in [0, 1e6]; the run ends with status budget_exhausted when it is spent."),
]
BudgetRaiseOpt = Annotated[
    Optional[float],
    num_opt(
        "--budget",
        "A higher budget cap in USD for an LLM run, in [0, 1e6] and above its own "
        "(recorded in config.json); a run that ended budget_exhausted continues only with it.",
    ),
]
PriceInOpt = Annotated[
    Optional[float],
    num_opt(
        "--price-in",
        "USD per 1K input tokens of every model, in [0, 1000] (default: each model's list price as of the date in "
        "agents/prices.py; nominal 0.0005 for local and self-hosted models).",
    ),
]
PriceOutOpt = Annotated[
    Optional[float],
    num_opt(
        "--price-out",
        "USD per 1K output tokens of every model, in [0, 1000] (default: each model's list price; nominal 0.003 for "
        "local and self-hosted models).",
    ),
]
SandboxRateOpt = Annotated[
    float,
    num_opt(
        "--sandbox-rate",
        "USD per second of sandbox time charged to the run's ledger, in [0, 1000] (default 0: recorded, free).",
    ),
]
SandboxTimeoutOpt = Annotated[
    float,
    num_opt("--sandbox-timeout", "Seconds one run_code call may take, in (0, 86400]; the sandbox is killed past it."),
]
CacheOpt = Annotated[
    Optional[str],
    typer.Option(
        "--cache",
        help="Response cache file (default ~/.cache/cooplab/llm-cache.sqlite or $COOPLAB_CACHE); 'off' disables it.",
    ),
]
PromptVariantOpt = Annotated[
    str,
    typer.Option(
        "--prompt-variant",
        help="Which wording of the task's prompts LLM agents get: original (the default), or a folder under the task's "
        "prompts/variants/ (a rewording, a format, personas; docs/robustness.md). Recorded in config.json.",
    ),
]
