"""A task plug-in that ends the process at import (issue 29, item 20).

A real installed entry point: a tiny ``*.dist-info`` (METADATA, entry_points.txt) and its module
in a temporary directory on the PYTHONPATH of a ``cooplab`` subprocess, so that
importlib.metadata finds it exactly as it finds a pip-installed plug-in. Its module (or its task
class) calls ``sys.exit`` and notes each import in a file. Plug-ins are imported only when their
task is named or the task commands are listed; what they raise (SystemExit included) is one
line naming the entry point; every other command works as if the plug-in were not there.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

COOPLAB = str(Path(sys.executable).parent / "cooplab")

BODIES = {
    "sys.exit at import": "sys.exit(3)\n",
    "SystemExit with a message": "raise SystemExit('plug-in gave up')\n",
    "sys.exit in the task class": "class TASK:\n    def __init__(self):\n        sys.exit(4)\n",
}
WHY = {
    "sys.exit at import": "SystemExit: 3",
    "SystemExit with a message": "SystemExit: plug-in gave up",
    "sys.exit in the task class": "SystemExit: 4",
}


def install(tmp_path: Path, case: str) -> tuple[dict[str, str], Path, str]:
    """(the environment of a cooplab that has the plug-in of ``case`` installed, the file each import
    of its module appends a line to, the case)."""
    site = tmp_path / "site"
    dist = site / "cooplab_exiter-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: cooplab-exiter\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[cooplab.tasks]\nexiter = cooplab_exiter:TASK\n")
    imports = tmp_path / "imports.log"
    (site / "cooplab_exiter.py").write_text(
        f"import sys\nwith open({str(imports)!r}, 'a') as fh:\n    fh.write('imported\\n')\n" + BODIES[case]
    )
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path, "COOPLAB_CACHE": str(tmp_path / "cache.sqlite")}
    return env, imports, case


@pytest.fixture(params=list(BODIES))
def plugin(request, tmp_path) -> tuple[dict[str, str], Path, str]:
    return install(tmp_path, request.param)


def cli(env: dict[str, str], *args: object) -> subprocess.CompletedProcess:
    return subprocess.run([COOPLAB, *map(str, args)], env=env, capture_output=True, text=True, timeout=300)


def imported(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_commands_that_do_not_need_the_plugin_never_import_it(tmp_path):
    env, log, _ = install(tmp_path, "sys.exit at import")
    for args in (
        ["--help"],
        ["report", "--help"],
        ["params", "cpr", "--json"],
        ["graph", "cpr"],
        ["run", "cpr", "--n-agents", 3, "--rounds", 1, "--out", tmp_path / "run", "-q", "--json"],
    ):
        res = cli(env, *args)
        assert res.returncode == 0 and res.stderr == "", (args, res.returncode, res.stderr)
    assert (tmp_path / "run" / "summary.json").is_file()
    assert imported(log) == 0


def test_naming_the_task_is_one_line_naming_the_entry_point(plugin, tmp_path):
    env, log, case = plugin
    for args in (
        ["run", "exiter", "--set", "rounds=2", "--out", tmp_path / "x"],
        ["params", "exiter"],
        ["graph", "exiter", "--help"],
    ):
        res = cli(env, *args)
        assert res.returncode == 2, (args, res.returncode, res.stderr)
        assert res.stderr == f"cooplab: error: task 'exiter' (cooplab_exiter:TASK) failed to load: {WHY[case]}\n", (
            res.stderr
        )
    assert not (tmp_path / "x").exists()
    assert imported(log) == 3  # once per command, never at start-up


def test_listing_warns_once_and_lists_everything(plugin):
    env, log, case = plugin
    res = cli(env, "run", "--help")
    assert res.returncode == 0, res.stderr
    assert (
        res.stderr
        == f"cooplab: warning: task 'exiter' (cooplab_exiter:TASK) failed to load: {WHY[case]}; its commands only say "
        "so\n"
    )
    listed = res.stdout.split("Commands:", 1)[1]
    assert all(name in listed for name in ("cpr", "diners", "game", "science", "exiter"))
    assert imported(log) == 1
    doctor = cli(env, "doctor", "--json")
    assert "task 'exiter' (cooplab_exiter:TASK) failed to load" in doctor.stdout


def test_from_python_the_failure_is_an_error_and_the_module_is_imported_once(plugin):
    env, log, case = plugin
    code = (
        "import cooplab\nfrom cooplab.runs import registry\nfrom cooplab.limits import ConfigError\n"
        "for _ in range(2):\n"
        "    try:\n        registry.get('exiter')\n    except registry.UnknownTask as exc:\n        print(exc)\n"
        "try:\n    cooplab.run(task='exiter', out='never')\nexcept ConfigError as exc:\n    print('ConfigError:', "
        "exc)\n"
        "print(registry.get('cpr').name)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[:2] == [f"task 'exiter' (cooplab_exiter:TASK) failed to load: {WHY[case]}"] * 2
    assert lines[2].startswith("ConfigError: ") and "cooplab_exiter:TASK" in lines[2] and lines[3] == "cpr"
    assert imported(log) == 1
