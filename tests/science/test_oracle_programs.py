"""The oracle's analysis programs are real modules (``cooplab.tasks.science.oracle_programs``).

Importing a program runs nothing; its ``analyze(df)`` gives exactly the result the sandbox
program prints; and ``ORACLE_CODE[task]``, the text sent to the sandbox, is the module's file,
compiles, and imports nothing but json, math, numpy and pandas (never cooplab).
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import importlib
import importlib.util
import io
import json
from pathlib import Path

import pandas as pd
import pytest

from cooplab.tasks.science import datasets as D
from cooplab.tasks.science import oracle_programs
from cooplab.tasks.science.oracle import (
    DETAIL_PREFIX,
    ORACLE_CODE,
    RESULT_PREFIX,
    parse_oracle_output,
    program_source,
    run_oracle_locally,
)

SEED = 3  # small datasets, one fixed seed: the whole file runs in a few seconds
SANDBOX_IMPORTS = {"json", "math", "numpy", "pandas"}
PROGRAM_DIR = Path(oracle_programs.__file__).parent


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """task -> path of a small generated ``data.csv`` (seed ``SEED``)."""
    root = tmp_path_factory.mktemp("oracle_programs")
    return {task: D.generate(task, SEED, root / task, size="small").data_path for task in D.TASKS}


def fresh_module(task: str):
    """Execute ``oracle_programs/<task>.py`` as a new module object (not the cached import)."""
    spec = importlib.util.spec_from_file_location(f"_fresh_oracle_{task}", PROGRAM_DIR / f"{task}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_one_program_per_task():
    assert tuple(oracle_programs.PROGRAMS) == tuple(D.TASKS) == tuple(ORACLE_CODE)
    assert sorted(p.stem for p in PROGRAM_DIR.glob("*.py") if p.stem != "__init__") == sorted(D.TASKS)


@pytest.mark.parametrize("task", D.TASKS)
def test_importing_a_program_runs_nothing(task, capsys):
    mod = importlib.import_module(f"cooplab.tasks.science.oracle_programs.{task}")
    assert callable(mod.analyze)
    fresh = fresh_module(task)  # a real first execution of the module body, even if cached above
    assert callable(fresh.analyze)
    assert not hasattr(fresh, "df") and not hasattr(fresh, "result")
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("task", D.TASKS)
def test_analyze_in_process_equals_the_sandbox_program(task, small):
    mod = importlib.import_module(f"cooplab.tasks.science.oracle_programs.{task}")
    df = pd.read_csv(small[task])
    direct = mod.analyze(df)
    printed = run_oracle_locally(task, small[task])
    assert direct == printed
    # same keys, same float digits (the detail keys are printed on their own line, after the finding)
    assert json.dumps(direct, sort_keys=True) == json.dumps(printed, sort_keys=True)
    assert mod.analyze(df) == direct  # no state kept between calls (e.g. a module-level RNG)


@pytest.mark.parametrize("task", D.TASKS)
def test_oracle_code_is_the_module_file_and_sandbox_safe(task):
    code = ORACLE_CODE[task]
    assert code == program_source(task) == (PROGRAM_DIR / f"{task}.py").read_text(encoding="utf-8")
    tree = ast.parse(code)
    compile(code, f"<oracle:{task}>", "exec")
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add("." * node.level + (node.module or ""))
    assert {name.split(".")[0] for name in imported} <= SANDBOX_IMPORTS, imported
    assert "cooplab" not in code
    # the printed lines keep their format: the finding (the prefix plus the JSON), then the detail
    assert [ln.strip() for ln in code.splitlines()[-2:]] == [
        f'print("{RESULT_PREFIX}" + json.dumps(result))',
        f'print("{DETAIL_PREFIX}" + json.dumps(detail))',
    ]


@pytest.mark.parametrize("task", D.TASKS)
def test_oracle_code_runs_like_the_sandbox_without_cooplab(task, small):
    """The text runs in a namespace like the sandbox runner's (``__main__``, ``df`` preloaded,
    nothing else) with every cooplab import refused, and prints the same result."""
    real_import = builtins.__import__

    def guarded_import(name, *args, **kwargs):
        if name == "cooplab" or name.startswith("cooplab."):
            raise ImportError(f"{name} is not available in the sandbox")
        return real_import(name, *args, **kwargs)

    sandbox_builtins = dict(vars(builtins), __import__=guarded_import)
    ns = {"__name__": "__main__", "__builtins__": sandbox_builtins, "df": pd.read_csv(small[task])}
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(compile(ORACLE_CODE[task], "<cell-1>", "exec"), ns)
    lines = [ln for ln in buf.getvalue().splitlines() if ln.startswith(RESULT_PREFIX)]
    assert len(lines) == 1
    assert parse_oracle_output(buf.getvalue()) == run_oracle_locally(task, small[task])
