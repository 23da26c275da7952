"""A task outside cooplab needs one import: ``cooplab.world``.

The example plug-in (``examples/ultimatum``) imports nothing else of cooplab (read with ``ast``:
top-level and inside functions, ``import`` and ``from``), and only names the face exports;
``import cooplab.world`` loads no other module of cooplab and none of the heavy libraries; each
exported name is the object of the module that defines it; and docs/write-your-own-task.md
teaches every one of them (``explore``: docs/explorer.md).
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "examples" / "ultimatum"
FACE = "cooplab.world"


def internal_imports(folder: Path) -> list[str]:
    """Every import of cooplab other than the world face in the ``.py`` files below ``folder``, as
    ``file:line name``; names taken from the face that it does not export count too."""
    from cooplab import world

    bad = []
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
                if node.module == FACE:
                    names += [f"{FACE}.{a.name}" for a in node.names if a.name not in world.__all__]
                elif node.module == "cooplab":
                    names += [f"cooplab.{a.name}" for a in node.names if a.name != "world"]
                    names.remove("cooplab")
            else:
                continue
            for name in names:
                if (name == "cooplab" or name.startswith("cooplab.")) and name != FACE:
                    bad.append(f"{path.relative_to(folder)}:{node.lineno} {name}")
    return bad


def test_the_example_plugin_imports_only_the_world_face():
    assert not internal_imports(PLUGIN), "\n".join(internal_imports(PLUGIN))
    uses = [
        n
        for p in PLUGIN.rglob("*.py")
        for n in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
        if isinstance(n, ast.ImportFrom) and n.module == FACE
    ]
    assert len(uses) >= 2  # the task module and its LLM players


def test_a_planted_internal_import_is_caught(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text(
        "from cooplab.world import Task, phase_rng\nimport cooplab.world\nfrom cooplab import world\nimport numpy\n"
        "from cooplab.graphs.task import Task\nimport cooplab.agents.batch\nfrom cooplab import run\n"
        "def f():\n    from cooplab.world import _WHERE\n    from cooplab.graphs import rundir\n"
    )
    assert internal_imports(tmp_path) == [
        "pkg/a.py:5 cooplab.graphs.task",
        "pkg/a.py:6 cooplab.agents.batch",
        "pkg/a.py:7 cooplab.run",
        "pkg/a.py:9 cooplab.world._WHERE",
        "pkg/a.py:10 cooplab.graphs",
    ]


def test_importing_the_world_face_loads_nothing_else():
    code = "import sys; before = set(sys.modules); import cooplab.world; print(*sorted(set(sys.modules) - before))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout.split()
    assert [m for m in out if m.split(".")[0] == "cooplab"] == ["cooplab", "cooplab._version", "cooplab.world"], out
    assert [m for m in out if m.split(".")[0] not in sys.stdlib_module_names | {"cooplab"}] == [], out  # no third party


def test_every_name_of_the_face_is_its_modules_own_and_taught():
    from cooplab import world

    assert world.__all__ == sorted(world.__all__) and len(world.__all__) == len(set(world.__all__))
    for name in world.__all__:
        if name in world._MODULES:
            assert getattr(world, name) is importlib.import_module(world._MODULES[name])
        else:
            assert getattr(world, name) is getattr(importlib.import_module(world._WHERE[name]), name), name
    assert "explore" in dir(world) and not hasattr(world, "importlib")
    docs = (ROOT / "docs" / "write-your-own-task.md").read_text(encoding="utf-8")
    untaught = [n for n in world.__all__ if f"`{n}`" not in docs and f"`{n}(" not in docs and n not in world._MODULES]
    assert not untaught, f"docs/write-your-own-task.md never names {untaught}"
    assert "from cooplab.world import explore" in (ROOT / "docs" / "explorer.md").read_text(encoding="utf-8")
