"""The layers point one way, and no import cycle crosses a package.

    cooplab.cli (the command line: Typer apps)             may import everything below
      -> cooplab.runs (the engine) and cooplab (the API)   never the command line
        -> cooplab.tasks (the worlds)                      never the engine
          -> cooplab.evals, cooplab.agents                 never a task
            -> cooplab.graphs, cooplab.sandbox             the bottom: graphs never agents, sandbox nothing of ours
              -> base: cooplab.limits, cooplab.extras, cooplab._version (import nothing of ours but each other)

Every import statement of every module (top level or inside a function, absolute or relative,
``import x`` and ``from x import y``) is read with ``ast`` and resolved to the exact module it
names; a module may import its own package and the packages its rule allows, and nothing outside
the command line may import Typer. Then the modules' import graph is searched for strongly
connected components: a cycle whose files lie in two packages fails the test.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: source folder -> the import package it installs as
FOLDERS = {"cooplab": "cooplab", "graphs": "cooplab.graphs", "agents": "cooplab.agents", "sandbox": "cooplab.sandbox",
           "evals": "cooplab.evals", "tasks": "cooplab.tasks"}
BASE = ("cooplab.limits", "cooplab.extras", "cooplab._version")
#: package -> the packages (besides itself) its modules may import
ALLOWED = {
    "base": set(),
    "graphs": {"base"},
    "sandbox": {"base"},
    "agents": {"base", "graphs", "sandbox"},
    "evals": {"base", "graphs", "agents"},
    "tasks": {"base", "graphs", "agents", "sandbox", "evals"},
    "engine": {"base", "graphs", "agents", "sandbox", "evals", "tasks"},
    "api": {"base", "engine"},
    "cli": {"base", "graphs", "agents", "sandbox", "evals", "tasks", "engine", "api"},
}
THIRD_PARTY_ONLY_IN_CLI = ("typer", "click")


def package_of(module: str) -> str | None:
    """The layer a ``cooplab`` module belongs to (None for a module outside cooplab)."""
    if module in BASE or any(module.startswith(b + ".") for b in BASE):
        return "base"
    for name in ("graphs", "agents", "sandbox", "evals", "tasks"):
        if module == f"cooplab.{name}" or module.startswith(f"cooplab.{name}."):
            return name
    if module == "cooplab.runs" or module.startswith("cooplab.runs."):
        return "engine"
    if module == "cooplab.cli" or module.startswith("cooplab.cli.") or module == "cooplab._entry":
        return "cli"  # cooplab._entry: the console script, above the command line it starts
    if module == "cooplab":
        return "api"
    if module.startswith("cooplab."):
        return "api"  # a new module at the root of the namespace: treated as the API until it is given a layer
    return None


def modules(root: Path = None) -> dict[str, Path]:  # type: ignore[assignment]
    """Every source module: exact dotted name -> file."""
    root = root or ROOT
    out = {}
    for folder, pkg in FOLDERS.items():
        for path in sorted((root / folder).rglob("*.py")):
            parts = list(path.relative_to(root / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([pkg, *parts])] = path
    return out


def imports_of(path: Path, module: str) -> list[tuple[int, str]]:
    """(line, imported name) for every import in ``path``; relative imports resolved against ``module``.
    ``from a.b import c`` yields ``a.b`` and ``a.b.c`` (c may be a module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - (node.level - 1)])
                mod = f"{base}.{node.module}" if node.module else base
            else:
                mod = node.module or ""
            out.append((node.lineno, mod))  # "from a import b" runs a/__init__.py: an import of a
            out += [(node.lineno, f"{mod}.{a.name}") for a in node.names if a.name != "*"]
    return out


def edges(mods: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the source modules it imports (a name resolves to the longest module it names)."""
    out: dict[str, set[str]] = {}
    for m, path in mods.items():
        for _, name in imports_of(path, m):
            target = name if name in mods else name.rsplit(".", 1)[0] if name.rsplit(".", 1)[0] in mods else None
            if target and target != m:
                out.setdefault(m, set()).add(target)
    return out


def violations(root: Path = None) -> list[str]:  # type: ignore[assignment]
    """Every import that breaks a layer rule, as ``file:line imports name (rule)``."""
    root = root or ROOT
    mods = modules(root)
    bad = []
    for m, path in mods.items():
        mine = package_of(m)
        for line, name in imports_of(path, m):
            where = f"{path.relative_to(root)}:{line} imports {name}"
            if mine != "cli" and name.split(".")[0] in THIRD_PARTY_ONLY_IN_CLI:
                bad.append(f"{where} (only the command line may import {name.split('.')[0]})")
                continue
            theirs = package_of(name)
            if theirs is None or theirs == mine:
                continue
            if theirs not in ALLOWED[mine]:
                bad.append(f"{where} ({mine} may not import {theirs})")
    return sorted(set(bad))


def cycles(root: Path = None) -> list[list[str]]:  # type: ignore[assignment]
    """Strongly connected components (Tarjan) of the module graph that span two packages."""
    mods = modules(root or ROOT)
    graph = edges(mods)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:  # iterative enough: the graph is a few hundred modules deep at most
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len({package_of(x) for x in comp}) > 1:
                found.append(sorted(comp))

    import sys

    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 10_000))
    try:
        for v in sorted(mods):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(old)
    return found


def test_every_layer_imports_only_what_is_below_it():
    mods = modules()
    assert {package_of(m) for m in mods} >= {"base", "graphs", "agents", "sandbox", "evals", "tasks", "engine", "cli", "api"}
    bad = violations()
    assert not bad, "\n".join(bad)


def test_no_import_cycle_crosses_a_package():
    found = cycles()
    assert not found, "\n".join(" -> ".join(c) for c in found)


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for folder in FOLDERS:
        (tmp_path / folder).mkdir(exist_ok=True)
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp_path


def test_a_planted_violation_of_each_rule_is_caught(tmp_path):
    """One planted import per rule, in each form (plain, from, relative, inside a function)."""
    root = _tree(tmp_path, {
        "graphs/bad.py": "import cooplab.agents.models\nfrom ..tasks import registry\n",
        "sandbox/bad.py": "def f():\n    from cooplab.graphs import rundir\n",
        "agents/bad.py": "from cooplab.evals import stats\n",
        "evals/bad.py": "from cooplab.tasks.games import params\n",
        "tasks/cpr/bad.py": "from cooplab.runs import runner\nimport typer\n",
        "cooplab/runs/bad.py": "from cooplab.cli import options\n",
        "cooplab/limits.py": "from cooplab.graphs import rundir\n",
        "cooplab/__init__.py": "from cooplab.cli import main\n",
        "tasks/ok.py": "from cooplab.graphs import rundir\nfrom cooplab.limits import ConfigError\nfrom . import cpr\n",
        "cooplab/cli/ok.py": "import typer\nfrom cooplab.runs import runner\n",
    })
    got = violations(root)
    expect = ["graphs/bad.py:1 imports cooplab.agents.models (graphs may not import agents)",
              "graphs/bad.py:2 imports cooplab.tasks (graphs may not import tasks)",
              "sandbox/bad.py:2 imports cooplab.graphs (sandbox may not import graphs)",
              "agents/bad.py:1 imports cooplab.evals (agents may not import evals)",
              "evals/bad.py:1 imports cooplab.tasks.games (evals may not import tasks)",
              "tasks/cpr/bad.py:1 imports cooplab.runs (tasks may not import engine)",
              "tasks/cpr/bad.py:2 imports typer (only the command line may import typer)",
              "cooplab/runs/bad.py:1 imports cooplab.cli (engine may not import cli)",
              "cooplab/limits.py:1 imports cooplab.graphs (base may not import graphs)",
              "cooplab/__init__.py:1 imports cooplab.cli.main (api may not import cli)"]
    for e in expect:
        assert e in got, f"not caught: {e}\ngot:\n" + "\n".join(got)
    assert not [g for g in got if g.startswith(("tasks/ok.py", "cooplab/cli/ok.py"))], got


def test_a_planted_cycle_across_packages_is_caught(tmp_path):
    """A two-package cycle hidden inside functions is found; a cycle inside one package is allowed."""
    root = _tree(tmp_path, {
        "agents/__init__.py": "", "graphs/__init__.py": "",
        "agents/a.py": "def f():\n    from cooplab.graphs import g\n",
        "graphs/g.py": "def f():\n    from cooplab.agents import a\n",
        "graphs/x.py": "from . import y\n", "graphs/y.py": "from . import x\n",
    })
    assert cycles(root) == [["cooplab.agents.a", "cooplab.graphs.g"]]


def test_the_checker_names_exact_modules():
    """A prefix is not a package: cooplab.cli_x is not the command line, cooplab.runsx not the engine."""
    assert package_of("cooplab.cli.options") == "cli"
    assert package_of("cooplab.cli_options") == "api"
    assert package_of("cooplab.runsx") == "api"
    assert package_of("cooplab.limits") == "base"
    assert package_of("cooplab.tasks.registry") == "tasks"


def test_tasks_do_not_reach_into_each_other():
    """A task module may import the layers below and itself, never another task."""
    bad = []
    tasks = [p.name for p in (ROOT / "tasks").iterdir() if p.is_dir() and (p / "__init__.py").exists()]
    for t in tasks:
        for path in sorted((ROOT / "tasks" / t).rglob("*.py")):
            mod = ".".join(["cooplab.tasks", t, *path.relative_to(ROOT / "tasks" / t).with_suffix("").parts])
            for line, name in imports_of(path, mod):
                other = [o for o in tasks if o != t and (name == f"cooplab.tasks.{o}" or name.startswith(f"cooplab.tasks.{o}."))]
                if other:
                    bad.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    assert len(tasks) >= 2 and not bad, "\n".join(bad)


def test_the_evals_know_the_games_of_the_games_task():
    """evals.bayes keeps its own copy of the game and prompt names (it may not import a task): they must agree."""
    from cooplab.evals import bayes
    from cooplab.tasks.games import params

    assert bayes.GAMES == params.GAMES and bayes.PROMPTS == params.PROMPTS
    assert set(bayes.GAME_TITLES) == set(params.GAMES)
