"""The layers point one way, and no import cycle crosses a package.

    cooplab.cli (the command line: Typer apps;             may import everything below
                 cooplab._entry, the console script)
      -> cooplab.runs (the engine) and cooplab (the API)   never the command line
         cooplab.world (the world authors' face: a lazy      nothing imports it; it names only
                        facade of the names a task uses)   what lies below the command line
        -> cooplab.tasks (the worlds)                      never the engine
          -> cooplab.evals, cooplab.agents                 never a task
            -> cooplab.graphs, cooplab.sandbox             the bottom: graphs never agents, sandbox nothing of ours
              -> base: cooplab.limits, cooplab.extras, cooplab._version (import nothing of ours but each other)

Every import statement of every module (top level or inside a function, absolute or relative,
``import x`` and ``from x import y``) is read with ``ast`` and resolved to the exact module it
names; a module may import its own package and the packages its rule allows, and nothing outside
the command line may import Typer. Then the modules' import graph (what runs when a module is
imported or a function of it is called, packages' ``__init__`` included; type-only imports left
out) is searched for strongly connected components: a cycle whose files lie in two packages fails,
and so does a cycle inside a package unless :data:`KNOWN_CYCLES` names it with its reason (none in
``cooplab.agents``). The engine and the evals reach a world (a folder of ``tasks/``: cpr, diners, games,
science ...) only through the task registry and ``Task`` hooks: none of their modules imports a world's
module, or names one in a string (``importlib``), except the registry's table of built-in tasks. A lazy facade
(``cooplab.agents.models``) is for users: the tree imports each
name from the module that defines it. ``scripts/import_graph.py`` prints a package's graph.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: source folder -> the import package it installs as
FOLDERS = {
    "cooplab": "cooplab",
    "graphs": "cooplab.graphs",
    "agents": "cooplab.agents",
    "sandbox": "cooplab.sandbox",
    "evals": "cooplab.evals",
    "tasks": "cooplab.tasks",
}
BASE = ("cooplab.limits", "cooplab.extras", "cooplab._version")
#: the console script (pyproject's ``cooplab = "cooplab._entry:entry"``): it answers ``--version``, then
#: hands over to the command line, so it sits at the top with it
ENTRY = "cooplab._entry"
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
    "world": {
        "base",
        "graphs",
        "agents",
        "sandbox",
        "engine",
    },  # cooplab.world: for plug-ins, nothing of ours imports it
}
WORLD = "cooplab.world"
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
    if module == "cooplab.cli" or module.startswith("cooplab.cli.") or module == ENTRY:
        return "cli"  # cooplab._entry: the console script, above the command line it starts
    if module == WORLD:
        return "world"
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


def parse(path: Path) -> ast.Module:
    """The syntax tree of a source file, parsed once per version of the file (the rules below walk
    every file several times)."""
    st = path.stat()
    return _parse(str(path), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=4096)
def _parse(path: str, mtime_ns: int, size: int) -> ast.Module:
    return ast.parse(Path(path).read_text(encoding="utf-8"), filename=path)


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """The ids of the nodes inside ``if TYPE_CHECKING:`` blocks (``typing.TYPE_CHECKING`` too): imports
    for type annotations only, which never run."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and (
            isinstance(node.test, ast.Name)
            and node.test.id == "TYPE_CHECKING"
            or isinstance(node.test, ast.Attribute)
            and node.test.attr == "TYPE_CHECKING"
        ):
            out |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return out


def from_module(node: ast.ImportFrom, package: str) -> str:
    """The module a ``from ... import`` statement in ``package`` names, relative imports resolved."""
    if not node.level:
        return node.module or ""
    parts = package.split(".")
    base = ".".join(parts[: len(parts) - (node.level - 1)])
    return f"{base}.{node.module}" if node.module else base


def imports_of(path: Path, module: str, *, runtime_only: bool = False) -> list[tuple[int, str]]:
    """(line, imported name) for every import in ``path``; relative imports resolved against ``module``.
    ``from a.b import c`` yields ``a.b`` and ``a.b.c`` (c may be a module). ``runtime_only``: leave
    out the imports under ``if TYPE_CHECKING:``."""
    tree = parse(path)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    skip = _type_checking_nodes(tree) if runtime_only else set()
    out = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mod = from_module(node, package)
            out.append((node.lineno, mod))  # "from a import b" runs a/__init__.py: an import of a
            out += [(node.lineno, f"{mod}.{a.name}") for a in node.names if a.name != "*"]
    return out


def edges(mods: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the source modules it imports when it runs: a name resolves to the longest module it
    names, and the packages above that module count too (importing ``a.b.c`` runs ``a/__init__.py``
    and ``a/b/__init__.py`` first), except the packages above the importer itself, which ran before
    it (``from . import sibling`` adds only the sibling; ``from . import NAME`` of a name that is not
    a module depends on the package's own code and counts). Imports for type annotations only
    (``if TYPE_CHECKING:``) never run and make no edge, as import-linter's
    ``exclude_type_checking_imports``."""
    out: dict[str, set[str]] = {}
    for m, path in mods.items():
        for _, name in imports_of(path, m, runtime_only=True):
            if name in mods:
                target, exact = name, True
            elif name.rsplit(".", 1)[0] in mods:
                target, exact = name.rsplit(".", 1)[0], False  # a name defined in that module
            else:
                continue
            parts = target.split(".")
            for t in [target] + [".".join(parts[:i]) for i in range(1, len(parts))]:
                ran_before = m.startswith(t + ".") and (t != target or exact)
                if t in mods and t != m and not ran_before:
                    out.setdefault(m, set()).add(t)
    return out


def violations(root: Path = None) -> list[str]:  # type: ignore[assignment]
    """Every import that breaks a layer rule, as ``file:line imports name (rule)``."""
    root = root or ROOT
    mods = modules(root)
    bad = []
    for m, path in mods.items():
        mine = package_of(m)
        assert mine is not None, f"{m} is not a cooplab module"
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


def components(root: Path = None) -> list[list[str]]:  # type: ignore[assignment]
    """Every import cycle: the strongly connected components (Tarjan) of the module graph with two
    modules or more, each sorted."""
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
            if len(comp) > 1:
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


def cycles(root: Path = None) -> list[list[str]]:  # type: ignore[assignment]
    """The import cycles whose files lie in two packages."""
    return [c for c in components(root) if len({package_of(x) for x in c}) > 1]


def cycles_inside_packages(root: Path = None) -> list[list[str]]:  # type: ignore[assignment]
    """The import cycles whose files all lie in one package."""
    return [c for c in components(root) if len({package_of(x) for x in c}) == 1]


#: the import cycles left inside a package, each with why it is there; a cycle must lie within one of
#: these sets of modules (one that shrinks or goes away passes). None may be added in cooplab.agents.
KNOWN_CYCLES: dict[frozenset[str], str] = {
    frozenset(
        {"cooplab.evals.report", "cooplab.evals.report_science"}
    ): "`cooplab report` calls the science sections by name and they use its number formatting "
    "(issue 39 step 4 renders the report from the explorer's templates, each world's sections from Task hooks)",
    frozenset(
        {"cooplab.tasks.science.owndata", "cooplab.tasks.science.task"}
    ): "the science task reads a team's own data (owndata), and owndata's custom_config builds a run's config "
    "from the task",
    frozenset(
        {"cooplab.runs.fork", "cooplab.runs.runner"}
    ): "the runner replays a fork's first K rounds without paying for them (fork.prefix_rounds, read from the fork "
    "record in config.json), and fork() continues the new run through the runner (runner.execute, inside the "
    "function); moving the fork record's readers into a leaf module would open it",
    frozenset(
        {"cooplab.tasks.games.profiles", "cooplab.tasks.games.task"}
    ): "a game profile is a grid sweep of the game task: the task's analyze_sweep writes profile.json for a folder "
    "whose manifest says profile (profiles.analyze), and a profile request is checked with the task's own prompt "
    "variants and models (both imports inside the functions)",
    frozenset(
        {"cooplab.cli", "cooplab.cli.diners", "cooplab.cli.games", "cooplab.cli.science", "cooplab.cli.tasks"}
    ): "the command line registers each world's commands, and their shared helpers (cli/tasks.py) read the app back "
    "to turn a sweep's options into keywords (run_keywords)",
}


def unexplained_cycles(root: Path = None) -> list[list[str]]:  # type: ignore[assignment]
    """The cycles inside a package that no :data:`KNOWN_CYCLES` entry explains (every cycle in
    ``cooplab.agents`` is one)."""
    return [
        c
        for c in cycles_inside_packages(root)
        if package_of(c[0]) == "agents" or not any(set(c) <= known for known in KNOWN_CYCLES)
    ]


#: the one module of the engine and the evals that may name a world: the registry's table of built-in tasks
REGISTRY = "cooplab.runs.registry"
#: a string naming a world's module (``cooplab.tasks.cpr.task:TASK``): checked against the worlds found
_MODULE_STRING = re.compile(
    r"^cooplab\.tasks\.([A-Za-z_][A-Za-z0-9_]*)(\.[A-Za-z_][A-Za-z0-9_]*)*(:[A-Za-z_][A-Za-z0-9_]*)?$"
)


def worlds(root: Path = None) -> set[str]:  # type: ignore[assignment]
    """The worlds: the packages directly inside ``tasks/`` (cpr, diners, games, science ...)."""
    root = root or ROOT
    return {p.name for p in (root / "tasks").iterdir() if p.is_dir() and (p / "__init__.py").exists()}


def world_of(module: str, known: set[str]) -> str | None:
    """The world a module name lies in (``cooplab.tasks.cpr.params`` -> cpr), or None."""
    parts = module.split(".")
    return parts[2] if len(parts) >= 3 and parts[:2] == ["cooplab", "tasks"] and parts[2] in known else None


def world_imports(root: Path = None) -> list[str]:  # type: ignore[assignment]
    """Every import of a world's module by a module of the engine (``cooplab/runs``) or the evals, and
    every string there that names one (an ``importlib`` way around the rule), except in the registry."""
    root = root or ROOT
    known = worlds(root)
    bad = []
    for m, path in modules(root).items():
        if package_of(m) not in ("engine", "evals"):
            continue
        for line, name in imports_of(path, m):
            w = world_of(name, known)
            if w is not None:
                bad.append(
                    f"{path.relative_to(root)}:{line} imports {name} (a module of the world {w}; "
                    "reach it through the task registry and Task hooks)"
                )
        if m == REGISTRY:
            continue
        for node in ast.walk(parse(path)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                hit = _MODULE_STRING.match(node.value)
                if hit and hit.group(1) in known:
                    bad.append(
                        f"{path.relative_to(root)}:{node.lineno} names {node.value} (a module of the world "
                        f"{hit.group(1)}; only the registry names the built-in tasks)"
                    )
    return sorted(set(bad))


def _bound_at_top(tree: ast.Module) -> set[str]:
    """The names a module binds when it runs: assignments, definitions and imports at its top level."""
    out: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                out |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
    return out


def facade_imports(root: Path = None) -> list[str]:  # type: ignore[assignment]
    """Imports of a name a lazy facade loads on first use (a module or a package's ``__init__`` that
    defines ``__getattr__``, such as ``cooplab.agents.models`` and ``cooplab.world``), from modules of
    the source tree: they must import it from the module that defines it, so the import graph above
    is exact."""
    root = root or ROOT
    mods = modules(root)
    facades = {}
    for m, path in mods.items():
        tree = parse(path)
        lazy = any(isinstance(n, ast.FunctionDef) and n.name == "__getattr__" for n in tree.body)
        if lazy:
            facades[m] = _bound_at_top(tree)
    bad = []
    for m, path in mods.items():
        package = m if path.name == "__init__.py" else m.rsplit(".", 1)[0]
        for node in ast.walk(parse(path)):
            if not isinstance(node, ast.ImportFrom):
                continue
            mod = from_module(node, package)
            if mod not in facades or mod == m:
                continue
            for a in node.names:
                if f"{mod}.{a.name}" not in mods and a.name not in facades[mod]:
                    bad.append(
                        f"{path.relative_to(root)}:{node.lineno} takes {a.name} from the facade {mod}; "
                        "import it from the module that defines it"
                    )
    return bad


def test_every_layer_imports_only_what_is_below_it():
    mods = modules()
    assert {package_of(m) for m in mods} >= {
        "base",
        "graphs",
        "agents",
        "sandbox",
        "evals",
        "tasks",
        "engine",
        "cli",
        "api",
    }
    bad = violations()
    assert not bad, "\n".join(bad)


def test_the_engine_and_the_evals_reach_worlds_only_through_the_registry():
    assert {"cpr", "diners", "games", "science"} <= worlds()
    bad = world_imports()
    assert not bad, "\n".join(bad)


def test_a_planted_world_import_is_caught(tmp_path):
    """Each way into a world from the engine or the evals is caught (plain, from, relative, inside a
    function, a world's package, a string for importlib); the registry's table, a world importing
    itself, a task module outside the worlds and the command line are not."""
    root = _tree(
        tmp_path,
        {
            "tasks/__init__.py": "",
            "tasks/cpr/__init__.py": "",
            "tasks/games/__init__.py": "",
            "tasks/registry.py": "",
            "cooplab/runs/a.py": "import cooplab.tasks.cpr.params\n",
            "cooplab/runs/b.py": "def f():\n    from cooplab.tasks.games.task import TASK\n",
            "cooplab/runs/c.py": "from cooplab.tasks import cpr\n",
            "cooplab/runs/d.py": "import importlib\nM = importlib.import_module('cooplab.tasks.games.figures')\n",
            "evals/e.py": "from ..tasks.cpr import metrics\n",
            "evals/ok.py": "from cooplab.tasks import registry\nDOC = 'see cooplab.tasks.cpr.params for the bounds'\n",
            "cooplab/runs/registry.py": "BUILTIN = {'cpr': 'cooplab.tasks.cpr.task:TASK'}\n",
            "tasks/cpr/x.py": "from cooplab.tasks.cpr import params\n",
            "cooplab/cli/ok.py": "from cooplab.tasks.cpr import params\n",
        },
    )
    got = world_imports(root)
    expect = [
        "cooplab/runs/a.py:1 imports cooplab.tasks.cpr.params",
        "cooplab/runs/b.py:2 imports cooplab.tasks.games.task",
        "cooplab/runs/c.py:1 imports cooplab.tasks.cpr",
        "cooplab/runs/d.py:2 names cooplab.tasks.games.figures",
        "evals/e.py:1 imports cooplab.tasks.cpr",
    ]
    for e in expect:
        assert any(g.startswith(e + " ") for g in got), f"not caught: {e}\ngot:\n" + "\n".join(got)
    assert not [
        g for g in got if g.startswith(("evals/ok.py", "cooplab/runs/registry.py", "tasks/", "cooplab/cli/"))
    ], got


def test_no_import_cycle_crosses_a_package():
    found = cycles()
    assert not found, "\n".join(" -> ".join(c) for c in found)


def test_no_import_cycle_inside_a_package():
    """No cycle inside cooplab.agents; elsewhere only the cycles named in KNOWN_CYCLES, with their reasons."""
    found = unexplained_cycles()
    assert not found, "\n".join(" -> ".join(c) for c in found)


def test_the_tree_imports_names_from_their_modules_not_from_a_facade():
    bad = facade_imports()
    assert not bad, "\n".join(bad)


def test_the_models_facade_loads_its_names_on_first_use():
    """Importing one module of cooplab.agents.models loads none of the others (the package's __init__
    imports nothing); each public name comes from the module that defines it."""
    import subprocess
    import sys

    code = (
        "import sys, cooplab.agents.models.errors as e; "
        "print(sorted(m for m in sys.modules if m.startswith('cooplab.agents')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['cooplab.agents', 'cooplab.agents.models', 'cooplab.agents.models.errors']", out
    import importlib

    from cooplab.agents import models

    for name in models.__all__:
        where = models._EXPORTS[name]
        assert getattr(models, name) is getattr(importlib.import_module(f"cooplab.agents.models.{where}"), name), name


def test_the_models_facade_shows_type_checkers_every_name_it_loads_lazily():
    """Type checkers cannot follow the facade's ``__getattr__`` (every name imported from
    cooplab.agents.models would be Any to them), so its ``if TYPE_CHECKING:`` block re-exports
    (``X as X``) exactly the names of ``_EXPORTS``, each from the module that defines it."""
    from cooplab.agents import models

    tree = ast.parse((ROOT / "agents" / "models" / "__init__.py").read_text(encoding="utf-8"))
    inside = _type_checking_nodes(tree)
    shown = {
        alias.asname: (node.module, alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and id(node) in inside and node.level == 1
        for alias in node.names
    }
    assert shown == {name: (module, name) for name, module in models._EXPORTS.items()}


def test_the_world_face_names_only_what_its_layer_may_import():
    """cooplab.world loads its names by module name (no import statement the rules above read): each
    of those modules must lie in a layer the world face may import, and define the name."""
    import importlib

    from cooplab import world

    assert package_of(WORLD) == "world"
    for module, names in [*world._FROM.items(), *((m, ()) for m in world._MODULES.values())]:
        assert package_of(module) in ALLOWED["world"], f"cooplab.world may not name {module} ({package_of(module)})"
        for name in names:
            assert hasattr(importlib.import_module(module), name), f"{module} defines no {name}"


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
    root = _tree(
        tmp_path,
        {
            "graphs/bad.py": "import cooplab.agents.models\nfrom ..tasks import registry\n",
            "sandbox/bad.py": "def f():\n    from cooplab.graphs import rundir\n",
            "agents/bad.py": "from cooplab.evals import stats\n",
            "evals/bad.py": "from cooplab.tasks.games import params\n",
            "tasks/cpr/bad.py": "from cooplab.runs import runner\nimport typer\n",
            "cooplab/runs/bad.py": "from cooplab.cli import options\n",
            "cooplab/limits.py": "from cooplab.graphs import rundir\n",
            "cooplab/__init__.py": "from cooplab.cli import main\n",
            "tasks/ok.py": "from cooplab.graphs import rundir\nfrom cooplab.limits import ConfigError\nfrom . import "
            "cpr\n",
            "cooplab/cli/ok.py": "import typer\nfrom cooplab.runs import runner\n",
        },
    )
    got = violations(root)
    expect = [
        "graphs/bad.py:1 imports cooplab.agents.models (graphs may not import agents)",
        "graphs/bad.py:2 imports cooplab.tasks (graphs may not import tasks)",
        "sandbox/bad.py:2 imports cooplab.graphs (sandbox may not import graphs)",
        "agents/bad.py:1 imports cooplab.evals (agents may not import evals)",
        "evals/bad.py:1 imports cooplab.tasks.games (evals may not import tasks)",
        "tasks/cpr/bad.py:1 imports cooplab.runs (tasks may not import engine)",
        "tasks/cpr/bad.py:2 imports typer (only the command line may import typer)",
        "cooplab/runs/bad.py:1 imports cooplab.cli (engine may not import cli)",
        "cooplab/limits.py:1 imports cooplab.graphs (base may not import graphs)",
        "cooplab/__init__.py:1 imports cooplab.cli.main (api may not import cli)",
    ]
    for e in expect:
        assert e in got, f"not caught: {e}\ngot:\n" + "\n".join(got)
    assert not [g for g in got if g.startswith(("tasks/ok.py", "cooplab/cli/ok.py"))], got


def test_a_planted_cycle_across_packages_is_caught(tmp_path):
    """A two-package cycle hidden inside functions is found; a cycle inside one package is allowed."""
    root = _tree(
        tmp_path,
        {
            "agents/__init__.py": "",
            "graphs/__init__.py": "",
            "agents/a.py": "def f():\n    from cooplab.graphs import g\n",
            "graphs/g.py": "def f():\n    from cooplab.agents import a\n",
            "graphs/x.py": "from . import y\n",
            "graphs/y.py": "from . import x\n",
        },
    )
    assert cycles(root) == [["cooplab.agents.a", "cooplab.graphs.g"]]


def test_a_planted_cycle_inside_agents_is_caught_and_type_only_imports_are_not(tmp_path):
    """Inside agents/: a cycle through a package's __init__ (importing m.e runs m/__init__.py, which
    imports m.f, which imports p, which imports m.e) is caught; ``from . import sibling`` makes no edge
    to its own package; an import under ``if TYPE_CHECKING:`` makes no cycle."""
    root = _tree(
        tmp_path,
        {
            "agents/__init__.py": "",
            "agents/m/__init__.py": "from .f import make\n",
            "agents/m/f.py": "from . import e\nfrom cooplab.agents.p import P\n",
            "agents/m/e.py": "",
            "agents/p.py": "def f():\n    from cooplab.agents.m.e import E\n",
            "agents/x.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from cooplab.agents.y import Y\n",
            "agents/y.py": "from cooplab.agents.x import X\n",
        },
    )
    assert unexplained_cycles(root) == [["cooplab.agents.m", "cooplab.agents.m.f", "cooplab.agents.p"]]
    assert cycles(root) == []


def test_a_known_cycle_may_shrink_but_not_grow(tmp_path):
    """A cycle within a KNOWN_CYCLES set passes; one module more fails."""
    root = _tree(
        tmp_path,
        {
            "evals/__init__.py": "",
            "evals/report.py": "def f():\n    from cooplab.evals.report_science import s\n",
            "evals/report_science.py": "from cooplab.evals.report import fmt\n",
        },
    )
    assert unexplained_cycles(root) == []
    (root / "evals" / "report_science.py").write_text(
        "from cooplab.evals.report import fmt\nfrom cooplab.evals import extra\n"
    )
    (root / "evals" / "extra.py").write_text("from cooplab.evals import report\n")
    assert unexplained_cycles(root) == [["cooplab.evals.extra", "cooplab.evals.report", "cooplab.evals.report_science"]]


def test_a_planted_import_from_a_facade_is_caught(tmp_path):
    root = _tree(
        tmp_path,
        {
            "agents/__init__.py": "",
            "agents/m/__init__.py": "VERSION = 1\ndef __getattr__(name):\n    raise AttributeError(name)\n",
            "agents/m/spec.py": "",
            "agents/u.py": "from cooplab.agents.m import Spec\nfrom cooplab.agents.m import spec, VERSION\n",
        },
    )
    assert facade_imports(root) == [
        "agents/u.py:1 takes Spec from the facade cooplab.agents.m; import it from the module that defines it"
    ]


def test_the_checker_names_exact_modules():
    """A prefix is not a package: cooplab.cli_x is not the command line, cooplab.runsx not the engine."""
    assert package_of("cooplab.cli.options") == "cli"
    assert package_of("cooplab.cli_options") == "api"
    assert package_of("cooplab.runsx") == "api"
    assert package_of("cooplab.limits") == "base"
    assert package_of("cooplab.tasks.registry") == "tasks"
    assert package_of("cooplab._entry") == "cli"  # the console script, above the command line it starts


def test_tasks_do_not_reach_into_each_other():
    """A task module may import the layers below and itself, never another task."""
    bad = []
    tasks = [p.name for p in (ROOT / "tasks").iterdir() if p.is_dir() and (p / "__init__.py").exists()]
    for t in tasks:
        for path in sorted((ROOT / "tasks" / t).rglob("*.py")):
            mod = ".".join(["cooplab.tasks", t, *path.relative_to(ROOT / "tasks" / t).with_suffix("").parts])
            for line, name in imports_of(path, mod):
                other = [
                    o
                    for o in tasks
                    if o != t and (name == f"cooplab.tasks.{o}" or name.startswith(f"cooplab.tasks.{o}."))
                ]
                if other:
                    bad.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    assert len(tasks) >= 2 and not bad, "\n".join(bad)


def test_the_evals_know_the_games_of_the_games_task():
    """evals.bayes keeps its own copy of the game and prompt names (it may not import a task): they must agree."""
    from cooplab.evals import bayes
    from cooplab.tasks.games import params

    assert bayes.GAMES == params.GAMES and bayes.PROMPTS == params.PROMPTS
    assert set(bayes.GAME_TITLES) == set(params.GAMES)
