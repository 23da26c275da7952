"""scripts/typecheck.py allows no pyright error: any finding fails the check and is named by its
repository path; --under checks some folders only; --list prints the findings and passes. The rule
itself runs pyright once on a tiny planted tree (one bad file), never on the repository (CI runs that
in scripts/lint.sh)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def typecheck():
    spec = importlib.util.spec_from_file_location("typecheck_under_test", ROOT / "scripts" / "typecheck.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def finding(file: str, line: int = 1) -> dict:
    return {"file": file, "line": line, "rule": "reportArgumentType", "message": "m"}


def test_any_error_fails_and_is_named(typecheck, monkeypatch, capsys):
    monkeypatch.setattr(typecheck, "run_pyright", lambda under=None: [finding("agents/a.py", 9), finding("evals/b.py")])
    assert typecheck.main([]) == 1
    out = capsys.readouterr().out
    assert "agents/a.py:9: reportArgumentType: m" in out and "evals/b.py:1" in out
    assert "typecheck: 2 pyright errors in 2 files; the tree must have none" in out


def test_no_error_passes_and_under_checks_only_its_folders(typecheck, monkeypatch, capsys):
    asked = []
    monkeypatch.setattr(typecheck, "run_pyright", lambda under=None: asked.append(under) or [])
    assert typecheck.main([]) == 0
    assert typecheck.main(["--under", "agents", "tests/agents"]) == 0
    assert asked == [None, ["agents", "tests/agents"]]
    assert capsys.readouterr().out.splitlines() == [
        "typecheck: no pyright errors",
        "typecheck: no pyright errors under agents tests/agents",
    ]


def test_list_prints_the_findings_and_passes(typecheck, monkeypatch, capsys):
    monkeypatch.setattr(typecheck, "run_pyright", lambda under=None: [finding("tasks/x.py", 2), finding("evals/b.py")])
    assert typecheck.main(["--list", "tasks/x.py"]) == 0
    assert capsys.readouterr().out == "tasks/x.py:2: reportArgumentType: m\n"


def test_folders_map_to_their_installed_place(typecheck):
    assert typecheck._installed("agents/models") == "cooplab/agents/models"
    assert typecheck._installed("cooplab/runs") == "cooplab/runs"
    assert typecheck._installed("tests") == "tests"


def test_pyright_finds_the_error_of_a_planted_file(typecheck, tmp_path, monkeypatch, capsys):
    """The real pyright, on a tree of two small files in the repository's pyright settings: the
    wrong one fails the check, named by its path in that tree (not the copy's)."""
    tree = tmp_path / "tree"
    (tree / "scripts").mkdir(parents=True)
    (tree / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    (tree / "scripts" / "ok.py").write_text("def double(x: int) -> int:\n    return 2 * x\n")
    (tree / "scripts" / "bad.py").write_text('from ok import double\n\nhalf: int = double("two")\n')
    monkeypatch.setattr(typecheck, "ROOT", tree)
    monkeypatch.setattr(typecheck, "OUT", tree / "build" / "typecheck")
    monkeypatch.setattr(typecheck, "VENV", ROOT / ".venv")
    assert typecheck.main(["--under", "scripts"]) == 1
    out = capsys.readouterr().out
    assert "scripts/bad.py:3: reportArgumentType:" in out and "scripts/ok.py" not in out, out
    assert "typecheck: 1 pyright errors in 1 files under scripts" in out
