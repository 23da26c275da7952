"""The ``cooplab`` command line (Typer). ``--help`` works on every command; user mistakes
print one line ``cooplab: error: ...`` and exit with code 2, never a traceback.

Start-up is kept short: the groups below list their commands from a table (:mod:`cooplab.cli.lazy`)
and a command's module is imported only when that command runs or shows its ``--help``: the
commands of a world live in its own module (:mod:`cooplab.cli.cpr`, :mod:`~cooplab.cli.diners`,
:mod:`~cooplab.cli.games`, :mod:`~cooplab.cli.science`), those on any task's runs in
:mod:`cooplab.cli.runs`, the tools in theirs. ``cooplab --version`` is answered before this module
is imported (:mod:`cooplab._entry`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from cooplab.cli.lazy import Lazy, lazy_group
from cooplab.cli.tasks import task_group
from cooplab.limits import ConfigError, one_line

try:  # Typer >= 0.20 vendors Click; older releases depend on it
    from typer._click import exceptions as _cx
except ImportError:  # pragma: no cover
    from click import exceptions as _cx

_HELP = "cooplab: societies of LLM agents and teams of LLM scientists as LangGraph state graphs."

#: every top-level command, in the order ``cooplab --help`` lists them
COMMANDS = {
    "resume": Lazy(
        "cooplab.cli.runs:resume_cmd",
        "Continue an interrupted run of any task from its last checkpoint (no round lost or repeated).",
    ),
    "fork": Lazy(
        "cooplab.cli.fork:fork_cmd",
        "Start a new run from a run's state at the end of round K with some settings changed (a counterfactual fork).",
    ),
    "compare": Lazy(
        "cooplab.cli.fork:compare_cmd",
        "Show two runs from their common round on: outcome curves, the first round where "
        "they differ, and the difference in every outcome.",
    ),
    "sweep": Lazy(
        "cooplab.cli.runs:sweep_cmd",
        "Run every cell of a sweep on an executor (skipping finished cells, resuming interrupted ones, "
        "a failed cell recorded while the others go on), then write OUT/table.csv (one row per cell) and the task's "
        "analysis.",
    ),
    "plan": Lazy(
        "cooplab.cli.plan:plan_cmd",
        "Predict a run's or sweep's model calls, tokens and cost per cell and in total from a short "
        "pilot on a free model, and the seeds per cell that find a given difference in an outcome (docs/plan.md).",
    ),
    "robustness": Lazy(
        "cooplab.cli.robustness:robustness_cmd",
        "Report how every outcome of a sweep over prompt variants spreads across "
        "the variants (per model: mean, range, s.d.), each variant's share of answers that failed to parse or fell "
        "back, "
        "and which condition effects are fragile (change sign or lose significance across variants).",
    ),
    "report": Lazy(
        "cooplab.cli.runs:report_cmd",
        "Write the explorer's pages of a run, sweep, profile or folder of results to one "
        "self-contained HTML file (offline, no server).",
    ),
    "profile": Lazy(
        "cooplab.cli.games:profile_command",
        "Play all six games with one model and write its cooperative profile "
        "(profile.json, the decisions and ledger, figures/profile.png).",
    ),
    "migrate": Lazy(
        "cooplab.cli.migrate:migrate_cmd",
        "Bring a run folder (or a folder of many runs) written in an earlier on-disk format up to the current "
        "one, in place, keeping the original files beside the new ones.",
    ),
    "doctor": Lazy(
        "cooplab.cli.doctor:doctor_cmd",
        "Check this machine: CPU features, the llama.cpp build and a test generation (in a "
        "child process), the Docker daemon and sandbox image, and Chromium.",
    ),
    "view": Lazy(
        "cooplab.cli.view:view_cmd",
        "Explore runs in a local web app: the list of runs (sortable, filterable), a society's "
        "rounds, agents, punishments, norms, beliefs and conversations, and two runs side by side.",
    ),
    "run": Lazy("cooplab.cli:run_app", "Run a society and write a run directory."),
    "params": Lazy("cooplab.cli:params_app", "List a task's parameters, defaults and meanings."),
    "graph": Lazy("cooplab.cli:graph_app", "Print a society's graph as Mermaid text."),
    "figures": Lazy("cooplab.cli:figures_app", "Reproduce a paper's figures."),
    "bench": Lazy(
        "cooplab.cli.science:bench_app",
        "Benchmarks: science teams on suites of closed-form data-analysis questions (docs/science.md).",
    ),
    "calibrate": Lazy(
        "cooplab.cli:calibrate_app", "Map where in the space of the free (chosen) parameters a paper's claims hold."
    ),
    "analyze": Lazy("cooplab.cli:analyze_app", "Analyze a set of runs: statistics and the paper's figures."),
    "science": Lazy("cooplab.cli.science:science_app", "Score science runs with LLM judges and compare judges."),
    "traces": Lazy("cooplab.cli.traces:traces_app", "Export or view a run's traces (LangSmith run format)."),
    "sandbox": Lazy("cooplab.cli.sandbox:app", "The sandboxed Python executor."),
    "models": Lazy(
        "cooplab.cli.models:app",
        "The model files cooplab computes with: fetch them (SHA-256 checked) and list where they come from.",
    ),
}
FIGURES = {
    "cpr-abm": Lazy("cooplab.cli.cpr:figures_cpr_abm", "Reproduce the paper's ABM validation: Fig."),
    "diners": Lazy("cooplab.cli.diners:figures_diners", "Figs."),
    "profile": Lazy(
        "cooplab.cli.games:profile_figure_command",
        "Draw several cooperative profiles side by side (the paper's Figure 2).",
    ),
}
CALIBRATE = {
    "cpr": Lazy(
        "cooplab.cli.cpr:calibrate_cpr",
        "Evaluate the paper's five ABM claims (the experiments of 'cooplab figures cpr-abm') at every "
        "sample of a Latin hypercube over the chosen parameters (docs/calibrate.md); report where each claim holds, "
        "alone and "
        "jointly, and which parameters matter.",
    ),
    "diners": Lazy("cooplab.cli.diners:calibrate_diners", "Evaluate the paper's six strategy leaders (Figs."),
}
ANALYZE = {
    "cpr": Lazy(
        "cooplab.cli.cpr:analyze_cpr",
        "ANOVA (model x population, type II, eta^2), Tukey HSD with letters, Welch t-tests for the "
        "ablations, and the analogs of the paper's Figs.",
    ),
    "efficiency": Lazy(
        "cooplab.cli.runs:analyze_efficiency",
        "What a model's game profile costs against one of its science runs (tokens, "
        "USD, time; from the ledgers), beside the paper's Table 10 where the model is one of its 35.",
    ),
    "profiles": Lazy(
        "cooplab.cli.bayes:profiles_command",
        "Bayesian regression of Pareto proximity on model size, thinking, CoT, ToM, "
        "group size, games and family (paper Table 1); with alternate-prompt profiles also the prompt-invariance "
        "regression "
        "(Appendix E, Table 5); and the profiles side by side (profiles.png, the paper's Figure 2: with --model-info "
        "colour "
        "by family, shape by model, size by parameters).",
    ),
    "science": Lazy(
        "cooplab.cli.bayes:science_command",
        "Measurement-error model: latent game dispositions predicting completeness, "
        "quality and accuracy (paper Table 2).",
    ),
}

app = typer.Typer(
    help=_HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    cls=lazy_group("cooplab", COMMANDS),
)
run_app = typer.Typer(help=COMMANDS["run"].summary, no_args_is_help=True, rich_markup_mode=None, cls=task_group("run"))
params_app = typer.Typer(
    help=COMMANDS["params"].summary, no_args_is_help=True, rich_markup_mode=None, cls=task_group("params")
)
graph_app = typer.Typer(
    help=COMMANDS["graph"].summary, no_args_is_help=True, rich_markup_mode=None, cls=task_group("graph")
)
figures_app = typer.Typer(
    help=COMMANDS["figures"].summary, no_args_is_help=True, rich_markup_mode=None, cls=lazy_group("figures", FIGURES)
)
calibrate_app = typer.Typer(
    help=COMMANDS["calibrate"].summary,
    no_args_is_help=True,
    rich_markup_mode=None,
    cls=lazy_group("calibrate", CALIBRATE),
)
analyze_app = typer.Typer(
    help=COMMANDS["analyze"].summary, no_args_is_help=True, rich_markup_mode=None, cls=lazy_group("analyze", ANALYZE)
)


def _version(value: bool) -> None:
    if value:
        from cooplab._version import __version__

        typer.echo(f"cooplab {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", is_eager=True, callback=_version, help="Print cooplab's version and exit."
    ),
) -> None:
    """cooplab: societies of LLM agents and teams of LLM scientists as LangGraph state graphs."""


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the app, turning user mistakes into one line and exit code 2."""
    bad = _not_utf8(sys.argv[1:] if argv is None else argv)
    if bad is not None:  # a path or name in another encoding: one line now, never a failure after the work
        typer.echo(
            f"cooplab: error: '{bad}' is not UTF-8 text (a file or folder name in another encoding?); "
            "cooplab's command line takes UTF-8 paths and names: rename it (Python's cooplab.run accepts any path)",
            err=True,
        )
        return 2
    try:
        rv = app(args=argv, prog_name="cooplab", standalone_mode=False)
        if isinstance(rv, int):  # a typer.Exit(code) comes back as the return value
            return rv
    except ConfigError as exc:
        typer.echo(f"cooplab: error: {one_line(str(exc))}", err=True)
        return 2
    except _cx.NoArgsIsHelpError as exc:
        exc.show()
        return 0
    except _cx.UsageError as exc:
        ctx = getattr(exc, "ctx", None)
        hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
        typer.echo(f"cooplab: error: {one_line(exc.format_message().replace('Value error, ', ''))}{hint}", err=True)
        return 2
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("cooplab: aborted", err=True)
        return 130
    except typer.Exit as exc:
        return exc.exit_code
    except _cx.ClickException as exc:
        typer.echo(f"cooplab: error: {exc.format_message()}", err=True)
        return exc.exit_code
    except Exception as exc:  # noqa: BLE001 - the safety net: never a raw traceback on the terminal
        log = _save_traceback(exc)
        where = f"the traceback is in {log}" if log else "the traceback could not be saved"
        typer.echo(
            f"cooplab: internal error: {one_line(f'{type(exc).__name__}: {exc}')} ({where}; please report it)", err=True
        )
        return 1
    return 0


def _not_utf8(args: list[str]) -> Optional[str]:
    """The first argument UTF-8 cannot hold (bytes of another encoding, kept by Python as lone
    surrogates), shown with those bytes as ``\\xNN``; None when every one is UTF-8."""
    for a in args:
        try:
            str(a).encode("utf-8")
        except UnicodeEncodeError:
            try:
                return str(a).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            except UnicodeEncodeError:
                return str(a).encode("utf-8", "backslashreplace").decode("utf-8")
    return None


def _save_traceback(exc: BaseException) -> Optional[Path]:
    """Write ``exc``'s traceback to a file under the cooplab cache directory (or the temp directory)."""
    import datetime as dt
    import os
    import tempfile
    import traceback

    text = "".join(traceback.format_exception(exc))
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "cooplab" / "errors"
    for d in (base, Path(tempfile.gettempdir())):
        try:
            d.mkdir(parents=True, exist_ok=True)
            path = d / f"cooplab-error-{stamp}-{os.getpid()}.log"
            # a path or value that is not UTF-8 (a folder named in another encoding) is written escaped, never a second
            # error
            path.write_text(f"cooplab {' '.join(sys.argv[1:])}\n\n{text}", encoding="utf-8", errors="backslashreplace")
            return path
        except OSError:
            continue
    return None


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
