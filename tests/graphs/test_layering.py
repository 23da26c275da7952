"""The layers point one way: graphs < agents < tasks < the CLI, with sandbox and evals beside.

Every import statement of every module (top level or inside a function, absolute or relative)
is read with ``ast``; a lower package importing a higher one fails the test with the file,
line and import.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: source folder -> its package, and the packages it must never import
PACKAGES = {"graphs": "cooplab.graphs", "agents": "cooplab.agents", "sandbox": "cooplab.sandbox", "evals": "cooplab.evals",
            "tasks": "cooplab.tasks"}
TOP = ("cooplab.cli", "cooplab.cli_tasks", "cooplab.runner", "cooplab.doctor")
FORBIDDEN = {
    "graphs": ("cooplab.agents", "cooplab.tasks", "cooplab.sandbox", "cooplab.evals", *TOP),
    "agents": ("cooplab.tasks", "cooplab.evals", *TOP),
    "sandbox": ("cooplab.graphs", "cooplab.agents", "cooplab.tasks", "cooplab.evals", "cooplab.runner"),  # sandbox/cli.py is a CLI module
    "evals": ("cooplab.tasks", "cooplab.runner"),
}


def imports_of(path: Path, package: str) -> list[tuple[int, str]]:
    """(line, imported module) for every import in ``path``, relative ones resolved against ``package``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    rel = path.relative_to(ROOT)
    here = [package, *rel.parts[1:-1]]  # the module's package
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(here)
                parts = base.split(".")
                base = ".".join(parts[: len(parts) - (node.level - 1)]) if node.level > 1 else base
                mod = f"{base}.{node.module}" if node.module else base
            else:
                mod = node.module or ""
            out.append((node.lineno, mod))
            out += [(node.lineno, f"{mod}.{a.name}") for a in node.names if mod == "cooplab"]
    return out


def violations(folder: str) -> list[str]:
    bad = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        for line, mod in imports_of(path, PACKAGES[folder]):
            if any(mod == f or mod.startswith(f + ".") for f in FORBIDDEN[folder]):
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {mod}")
    return bad


def test_lower_layers_never_import_higher_ones():
    found = {folder: violations(folder) for folder in FORBIDDEN}
    assert all(folder_files for folder_files in ((ROOT / f).rglob("*.py") for f in FORBIDDEN))
    assert not any(found.values()), "\n".join(v for vs in found.values() for v in vs)


def test_the_checker_catches_every_form_of_import(tmp_path):
    """The checker is not vacuous: plain, from-, relative and function-local imports of a higher layer are found."""
    fake = tmp_path / "graphs"
    fake.mkdir()
    (fake / "bad.py").write_text(
        "import cooplab.tasks.cpr\n"
        "from cooplab.agents import decisions\n"
        "from ..tasks import registry\n"
        "def f():\n    from cooplab import runner\n"
        "import numpy\nfrom cooplab.graphs import rng\n"
    )
    globals()["ROOT"] = tmp_path
    try:
        bad = violations("graphs")
    finally:
        globals()["ROOT"] = Path(__file__).resolve().parents[2]
    assert [b.split(" imports ")[1] for b in bad] == ["cooplab.tasks.cpr", "cooplab.agents", "cooplab.tasks", "cooplab.runner"]


def test_tasks_do_not_reach_into_each_other():
    """A task module may import the layers below and itself, never another task."""
    bad = []
    tasks = [p.name for p in (ROOT / "tasks").iterdir() if p.is_dir() and (p / "__init__.py").exists()]
    for t in tasks:
        for path in sorted((ROOT / "tasks" / t).rglob("*.py")):
            for line, mod in imports_of(path, f"cooplab.tasks.{t}"):
                other = [o for o in tasks if o != t and (mod == f"cooplab.tasks.{o}" or mod.startswith(f"cooplab.tasks.{o}."))]
                if other:
                    bad.append(f"{path.relative_to(ROOT)}:{line} imports {mod}")
    assert len(tasks) >= 2 and not bad, "\n".join(bad)
