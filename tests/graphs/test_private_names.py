"""A name that starts with an underscore stays inside the module that defines it.

Every module of cooplab is read with ``ast`` (the same module list and import resolution as the
layering test): ``from cooplab.x import _name`` (absolute or relative, at the top or inside a
function) and ``module._name`` on a cooplab module it imported are a private name crossing a module
boundary. A name another module needs is public in the module that defines it (or moves to the
module that uses it). Dunder names (``__version__``) are public by convention, and a private
*module* (``cooplab._version``) may be imported by name: the rule is about names inside modules.
Tests may reach into the module they test; only the source tree is checked.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.graphs.test_layering import FOLDERS, ROOT, from_module, modules, parse

#: private names that still cross a module, each with why (empty: none is left)
KNOWN_CROSSINGS: dict[str, str] = {}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def crossings(root: Path = None) -> list[str]:  # type: ignore[assignment]
    """Every use of another cooplab module's private name, as ``file:line module._name``."""
    root = root or ROOT
    mods = modules(root)
    bad = []
    for m, path in mods.items():
        package = m if path.name == "__init__.py" else m.rsplit(".", 1)[0]
        tree = parse(path)
        bound: dict[str, str] = {}  # local name -> the cooplab module it is bound to
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                mod = from_module(node, package)
                if mod.split(".")[0] != "cooplab":
                    continue
                for a in node.names:
                    if f"{mod}.{a.name}" in mods:  # a module, imported by name
                        bound[a.asname or a.name] = f"{mod}.{a.name}"
                    elif _private(a.name) and mod != m:
                        bad.append(f"{path.relative_to(root)}:{node.lineno} {mod}.{a.name}")
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name in mods and a.asname:
                        bound[a.asname] = a.name
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and _private(node.attr)):
                continue
            dotted, v = [], node.value
            while isinstance(v, ast.Attribute):
                dotted.append(v.attr)
                v = v.value
            if not isinstance(v, ast.Name):
                continue
            name = ".".join([v.id, *reversed(dotted)])
            target = bound.get(name) if not dotted else (name if name in mods else None)
            if target is not None and target != m:
                bad.append(f"{path.relative_to(root)}:{node.lineno} {target}.{node.attr}")
    return sorted(set(bad))


def test_no_module_uses_another_modules_private_names():
    found = [c for c in crossings() if c.split(" ", 1)[1] not in KNOWN_CROSSINGS]
    assert not found, (
        "private names used outside their module (make them public where they are defined):\n" + "\n".join(found)
    )


def test_a_planted_crossing_of_each_form_is_caught(tmp_path):
    for folder in FOLDERS:
        (tmp_path / folder).mkdir()
    files = {
        "graphs/__init__.py": "",
        "graphs/ledger.py": "_amount = 1\n__all__ = []\n",
        "graphs/_util.py": "x = 1\n",
        "agents/__init__.py": "",
        "agents/a.py": "from cooplab.graphs.ledger import _amount\n",
        "agents/b.py": "def f():\n    from cooplab.graphs import ledger as L\n    return L._amount\n",
        "agents/c.py": "import cooplab.graphs.ledger\nx = cooplab.graphs.ledger._amount\n",
        "agents/d.py": "from ..graphs.ledger import _amount as amount\n",
        "agents/ok.py": (
            "from cooplab.graphs.ledger import __all__\nfrom cooplab.graphs import _util\n"
            "from cooplab.limits import one_line as _one_line\nimport os\nos._exit\nclass K:\n    _x = 1\nK._x\n"
        ),
    }
    for rel, text in files.items():
        (tmp_path / rel).write_text(text)
    assert crossings(tmp_path) == [
        "agents/a.py:1 cooplab.graphs.ledger._amount",
        "agents/b.py:3 cooplab.graphs.ledger._amount",
        "agents/c.py:2 cooplab.graphs.ledger._amount",
        "agents/d.py:1 cooplab.graphs.ledger._amount",
    ]
