"""The command line answers without loading what it does not need (issue 41.6).

``cooplab --help``, ``--version``, ``run cpr --help`` and ``params cpr`` run in a fresh interpreter,
as the console script runs them, and the modules they imported are read at exit: none of the heavy
packages (the data stack, the LLM stack, Ray, JAX, llama.cpp), and no command module but the one
asked for. How long they take is measured in benchmarks/bench_startup.py, never here.

The lazy listing's summaries and the built-in tasks' facts are copies made so that nothing has to
be imported to show them: the tests below compare each copy with what it copies.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from typing import cast

import pytest

from cooplab.cli import ANALYZE, CALIBRATE, COMMANDS, FIGURES
from cooplab.cli.lazy import load

try:
    from typer._click.utils import make_default_short_help
except ImportError:  # pragma: no cover - a typer without its own copy of click
    import click.utils

    # click 8.2+ serves it through a module __getattr__ (typed object); it is the same function
    make_default_short_help = cast("Callable[[str, int], str]", click.utils.make_default_short_help)

#: packages that answering --help, --version or a parameter table has no use for
HEAVY = {
    "pandas",
    "numpy",
    "matplotlib",
    "scipy",
    "statsmodels",
    "langchain",
    "langchain_core",
    "langchain_openai",
    "langchain_anthropic",
    "langchain_google_genai",
    "langchain_ollama",
    "langgraph",
    "langgraph_sdk",
    "langsmith",
    "openai",
    "ray",
    "jax",
    "numpyro",
    "llama_cpp",
    "httpx",
    "docker",
    "tqdm",
    "fastparquet",
    "pyarrow",
    "starlette",
    "uvicorn",
    "jinja2",
    "opentelemetry",
}
#: the modules of the command line every command loads: the tables, the task groups and the shared options
FRONT = {"cooplab.cli", "cooplab.cli.lazy", "cooplab.cli.tasks", "cooplab.cli.options"}

PROBE = """
import atexit, json, sys
atexit.register(lambda: sys.stderr.write("\\nMODULES " + json.dumps(sorted(sys.modules)) + "\\n"))
sys.argv[0] = "cooplab"
from cooplab._entry import entry
entry()
"""


def imported(args: list[str]) -> tuple[str, set[str]]:
    """Run ``cooplab ARGS`` in a fresh interpreter; its stdout and the modules it had imported at exit."""
    p = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=300, cwd=tempfile.gettempdir()
    )
    assert p.returncode == 0, p.stderr[-2000:]
    line = next(ln for ln in p.stderr.splitlines() if ln.startswith("MODULES "))
    return p.stdout, set(json.loads(line[len("MODULES ") :]))


@pytest.mark.parametrize(
    "args, commands, allowed",
    [
        (["--help"], set(), set()),
        (["--version"], set(), set()),
        (["run", "cpr", "--help"], {"cooplab.cli.cpr"}, set()),
        (["params", "cpr"], set(), set()),  # printed from the stored copy of the table
        (["params", "cpr", "--json"], set(), set()),
    ],
)
def test_an_answer_loads_no_heavy_package_and_no_other_command(args, commands, allowed):
    out, modules = imported(args)
    assert out.strip(), "no output"
    tops = {m.split(".")[0] for m in modules}
    assert not (tops & HEAVY), f"cooplab {' '.join(args)} imported {sorted(tops & HEAVY)}"
    if "pydantic" not in allowed:
        assert "pydantic" not in tops, f"cooplab {' '.join(args)} imported pydantic"
    cli = {m for m in modules if m.startswith("cooplab.cli.") or m == "cooplab.cli"}
    assert cli <= FRONT | commands, (
        f"cooplab {' '.join(args)} imported the commands of {sorted(cli - FRONT - commands)}"
    )
    if commands or args == ["--help"]:  # --version and the stored tables: answered before the command line loads
        assert cli >= {"cooplab.cli", "cooplab.cli.lazy"} | commands
    else:
        assert not cli and "typer" not in tops, f"cooplab {' '.join(args)} loaded the command line"
    assert not any(m.startswith("cooplab.tasks.cpr.") and m != "cooplab.tasks.cpr.params" for m in modules), (
        "the CPR society was loaded"
    )


@pytest.mark.parametrize(
    "table", [COMMANDS, FIGURES, CALIBRATE, ANALYZE], ids=["cooplab", "figures", "calibrate", "analyze"]
)
def test_the_listing_says_what_the_loaded_commands_say(table):
    """Every summary of a lazy table is what Click lists for the command once it is loaded, at any width."""
    for name, entry in table.items():
        cmd = load(name, entry)
        for limit in (30, 45, 60, 10_000):
            assert make_default_short_help(entry.summary, limit) == cmd.get_short_help_str(limit), (name, limit)


def test_the_facts_of_every_built_in_task_are_the_tasks_own():
    import importlib

    from cooplab.cli.tasks import BUILTIN
    from cooplab.runs import registry

    assert set(BUILTIN) == set(registry.BUILTIN)
    for name, module in BUILTIN.items():
        facts, task = importlib.import_module(module).FACTS, registry.get(name)
        assert facts.name == name
        assert (facts.agent_kinds, facts.uses_sandbox, facts.default_max_tokens) == (
            tuple(task.agent_kinds),
            task.uses_sandbox,
            task.default_max_tokens,
        ), name


def test_the_hosted_providers_named_in_help_are_the_providers_table():
    from cooplab.agents.providers import PROVIDERS
    from cooplab.cli.options import HOSTED_PROVIDERS

    assert HOSTED_PROVIDERS == tuple(PROVIDERS)


def test_the_front_module_defines_no_command_of_a_world():
    """``cooplab.cli`` holds the tables, the groups and ``main``: every command a table names lives in
    its own module (a world's in :mod:`cooplab.cli.cpr`, :mod:`~cooplab.cli.diners`, ...), and what
    a table points at in ``cooplab.cli`` itself is a group made of other tables (issue 39.3)."""
    import inspect

    import typer

    import cooplab.cli as front

    own = {n for n, f in inspect.getmembers(front, inspect.isfunction) if f.__module__ == front.__name__}
    extra = own - {"main", "entry", "_root", "_version", "_not_utf8", "_save_traceback"}
    assert not extra, (
        f"cooplab/cli/__init__.py defines {sorted(extra)}: a command goes in its own module, named in a lazy table"
    )
    for table in (COMMANDS, FIGURES, CALIBRATE, ANALYZE):
        for name, entry in table.items():
            module, _, attr = entry.target.partition(":")
            if module == front.__name__:
                assert isinstance(getattr(front, attr), typer.Typer), f"{name}: {entry.target} is not a group"


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_the_stored_parameter_table_is_what_the_command_prints(as_json):
    """tasks/cpr/params_table.json against the command it copies; when this fails, run
    ``.venv/bin/python scripts/params_table.py`` after changing the CPR parameters."""
    import cooplab._entry as entry
    from cooplab.cli.cpr import params_output

    args = ["params", "cpr", *(["--json"] if as_json else [])]
    assert entry.stored_output(args) == params_output(None, as_json), "run scripts/params_table.py"
    # and the console script prints it byte for byte as the command line does
    fast = subprocess.run(
        [sys.executable, "-c", "from cooplab._entry import entry; entry()", *args], capture_output=True, timeout=300
    )
    full = subprocess.run(
        [sys.executable, "-c", "from cooplab.cli import entry; entry()", *args], capture_output=True, timeout=300
    )
    assert fast.returncode == full.returncode == 0 and fast.stdout == full.stdout, fast.stderr + full.stderr


def test_an_unreadable_stored_table_leaves_the_answer_to_the_command_line(tmp_path, monkeypatch):
    import cooplab._entry as entry
    import cooplab.tasks.cpr as cpr

    assert entry.stored_output(["params", "cpr", "--preset", "v1"]) is None  # not a stored command
    assert entry.stored_output(["params", "games"]) is None
    for content in (None, "not json", "[1, 2]", '{"text": 3}', '{"text": ""}'):
        path = tmp_path / f"t{hash(content)}.json"
        if content is not None:
            path.write_text(content)
        monkeypatch.setattr(cpr, "TABLE_FILE", str(path))  # an absolute path wins over the folder in os.path.join
        assert entry.stored_output(["params", "cpr"]) is None, content
