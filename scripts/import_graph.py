"""Print the import graph of one cooplab package and the import cycles inside it.

    .venv/bin/python scripts/import_graph.py agents      # the edges inside cooplab.agents, then its cycles
    .venv/bin/python scripts/import_graph.py --all       # every import cycle inside a package

The modules are read with ``ast`` by the layering test's own resolver (``tests/graphs/test_layering.py``),
so what this prints is what that test checks. An edge is marked ``(lazy)`` when every import making
it sits inside a function (it runs on a call, not when the module is imported).
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("layering", ROOT / "tests" / "graphs" / "test_layering.py")
assert _spec is not None and _spec.loader is not None, "tests/graphs/test_layering.py is missing"
layering = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(layering)


def eager_lines(path: Path) -> set[int]:
    """The lines of the import statements that run when the module is imported (outside any function)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    inner = {
        id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in ast.walk(f)
    }
    return {n.lineno for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) and id(n) not in inner}


def main(argv: list[str]) -> int:
    if argv == ["--all"]:
        found = layering.cycles_inside_packages()
        for c in found:
            print(" -> ".join(c))
        print(f"{len(found)} cycle(s) inside a package")
        return 0
    pkg = f"cooplab.{argv[0] if argv else 'agents'}"
    mods = layering.modules()
    graph = layering.edges(mods)
    inside = sorted(m for m in mods if m == pkg or m.startswith(pkg + "."))
    for m in inside:
        eager = eager_lines(mods[m])
        named = layering.imports_of(mods[m], m, runtime_only=True)
        for t in sorted(graph.get(m, ())):
            if t not in inside:
                continue
            lines = {line for line, name in named if name == t or name.startswith(t + ".")}
            lazy = "" if lines & eager or not lines else " (lazy)"
            print(f"{m[len(pkg) + 1 :] or '__init__'} -> {t[len(pkg) + 1 :] or '__init__'}{lazy}")
    for c in layering.cycles_inside_packages():
        if all(x == pkg or x.startswith(pkg + ".") for x in c):
            print("CYCLE:", " -> ".join(c))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
