"""scripts/typecheck.py holds pyright to a baseline that only goes down: a file with more errors than
its count fails the check and is named with its findings; fewer passes and says the baseline can be
lowered; --update writes the counts. pyright itself is not run here (CI runs it in scripts/lint.sh):
its findings are given."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def typecheck(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("typecheck_under_test", ROOT / "scripts" / "typecheck.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(mod, "BASELINE", tmp_path / "baseline.json")
    return mod


def finding(file: str, line: int = 1) -> dict:
    return {"file": file, "line": line, "rule": "reportArgumentType", "message": "m"}


def test_a_file_over_its_count_fails_and_is_named(typecheck, monkeypatch, capsys):
    typecheck.BASELINE.write_text(json.dumps({"agents/a.py": 1, "evals/b.py": 2}))
    monkeypatch.setattr(
        typecheck, "run_pyright", lambda under=None: [finding("agents/a.py", 3), finding("agents/a.py", 9)]
    )
    assert typecheck.main([]) == 1
    out = capsys.readouterr().out
    assert "agents/a.py: 2 pyright errors, the baseline allows 1" in out and "agents/a.py:9" in out
    assert "evals/b.py" not in out


def test_a_new_file_with_an_error_fails(typecheck, monkeypatch, capsys):
    typecheck.BASELINE.write_text(json.dumps({}))
    monkeypatch.setattr(typecheck, "run_pyright", lambda under=None: [finding("tasks/new.py")])
    assert typecheck.main([]) == 1
    assert "tasks/new.py: 1 pyright errors, the baseline allows 0" in capsys.readouterr().out


def test_fewer_errors_pass_and_update_lowers_the_baseline(typecheck, monkeypatch, capsys):
    typecheck.BASELINE.write_text(json.dumps({"agents/a.py": 3}))
    monkeypatch.setattr(typecheck, "run_pyright", lambda under=None: [finding("agents/a.py")])
    assert typecheck.main([]) == 0
    assert "lower than the baseline" in capsys.readouterr().out
    assert typecheck.main(["--update"]) == 0
    assert json.loads(typecheck.BASELINE.read_text()) == {"agents/a.py": 1}


def test_folders_map_to_their_installed_place(typecheck):
    assert typecheck._installed("agents/models") == "cooplab/agents/models"
    assert typecheck._installed("cooplab/runs") == "cooplab/runs"
    assert typecheck._installed("tests") == "tests"


def test_the_committed_baseline_names_repository_files():
    """Every file of the baseline exists here (no copied build/ path, no machine's absolute path)."""
    base = json.loads((ROOT / "scripts" / "pyright-baseline.json").read_text())
    assert base and all(isinstance(n, int) and n > 0 for n in base.values())
    assert [f for f in base if not (ROOT / f).is_file()] == []
