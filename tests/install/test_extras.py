"""Each extra's absence is one line naming it (exit 2), never an ImportError traceback: the packages
are hidden the way Python's import honours (``sys.modules[name] = None``) and the modules that import
them are forgotten, so the check runs as in a fresh process on a core install."""

from __future__ import annotations

import json
import sys

import pytest

from cooplab.cli import main
from cooplab.extras import EXTRAS, MissingExtra, installed, require

SCRIPTED = "examples/scripted/cautious.json"


def hide(monkeypatch, *packages: str, forget: tuple[str, ...] = ()) -> None:
    for name in packages:
        for mod in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            monkeypatch.delitem(sys.modules, mod)
        monkeypatch.setitem(sys.modules, name, None)
    for mod in forget:  # forgotten as if never imported: out of sys.modules and off its parent package
        monkeypatch.delitem(sys.modules, mod, raising=False)
        parent, _, child = mod.rpartition(".")
        if parent in sys.modules:
            monkeypatch.delattr(sys.modules[parent], child, raising=False)


def one_line_error(capsys, args) -> str:
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cooplab: error: ") and "Traceback" not in err, err
    return lines[0]


def test_every_extra_of_the_package_is_checked_here():
    import tomllib
    from pathlib import Path

    extras = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert set(extras) == set(EXTRAS) | {"all"}
    assert all(installed(m) for mods in EXTRAS.values() for m in mods)  # the test environment has everything


def test_setup_sh_installs_every_extra_of_all():
    """scripts/setup.sh (what test.sh and CI run) spells out 'all'; it must be pyproject's 'all'."""
    import re
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    extras = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    in_all = re.search(r"cooplab\[([^\]]+)\]", extras["all"][0])
    assert in_all, f"pyproject's 'all' extra names no cooplab[...]: {extras['all']}"
    listed = set(in_all.group(1).split(","))
    in_setup = re.search(r"\*,all,\*\) EXTRAS=([a-z,]+) ;;", (root / "scripts" / "setup.sh").read_text())
    assert in_setup, "scripts/setup.sh has no '*,all,*) EXTRAS=...' case"
    setup = in_setup.group(1)
    assert set(setup.split(",")) == listed == set(EXTRAS)


def test_the_local_model_without_the_local_extra(monkeypatch, capsys, tmp_path):
    hidden = "llama_cpp"
    hide(monkeypatch, hidden)
    line = one_line_error(
        capsys,
        [
            "run",
            "cpr",
            "--agents",
            "llm",
            "--model",
            "local",
            "--n-agents",
            "2",
            "--rounds",
            "1",
            "--out",
            str(tmp_path / "r"),
            "-q",
        ],
    )
    assert "the local model needs 'pip install cooplab[local]'" in line and hidden in line
    assert not (tmp_path / "r").exists()  # refused before anything was written
    with pytest.raises(MissingExtra, match=r"cooplab\[local\]"):  # the Python API says the same
        from cooplab.agents.models import ModelSpec, make_chat_model

        make_chat_model(ModelSpec("local", "x", None, 0.7, 8))


@pytest.mark.parametrize("hidden", ["scipy", "statsmodels"])
def test_analyze_without_the_analysis_extra(monkeypatch, capsys, tmp_path, hidden):
    code = main(["run", "cpr", "--replicates", "3", "--rounds", "3", "--out", str(tmp_path / "r"), "-q", "--json"])
    assert code == 0
    capsys.readouterr()
    hide(monkeypatch, hidden, forget=("cooplab.evals.stats", "cooplab.tasks.cpr.analysis"))
    line = one_line_error(capsys, ["analyze", "cpr", str(tmp_path / "r"), "--out", str(tmp_path / "a")])
    assert "needs 'pip install cooplab[analysis]'" in line and hidden in line


def test_the_ray_executor_without_the_ray_extra(monkeypatch, capsys, tmp_path):
    cfg = tmp_path / "s.json"
    cfg.write_text(
        json.dumps({"task": "diners", "out": str(tmp_path / "s"), "fixed": {"iterations": 2, "replicates": 2}})
    )
    hide(monkeypatch, "ray")
    line = one_line_error(capsys, ["sweep", str(cfg), "--executor", "ray"])
    assert "the Ray executor (--executor ray) needs 'pip install cooplab[ray]'" in line
    assert main(["sweep", str(cfg), "-q"]) == 0  # the local executor needs no Ray


def test_otlp_export_without_the_viewer_extra(monkeypatch, capsys, tmp_path):
    assert (
        main(
            [
                "run",
                "cpr",
                "--agents",
                "llm",
                "--model",
                f"scripted:{SCRIPTED}",
                "--n-agents",
                "2",
                "--rounds",
                "1",
                "--cache",
                "off",
                "--out",
                str(tmp_path / "r"),
                "-q",
            ]
        )
        == 0
    )
    capsys.readouterr()
    hide(monkeypatch, "opentelemetry.sdk", "opentelemetry.exporter", forget=("cooplab.evals.otlp_export",))
    line = one_line_error(capsys, ["traces", "export", str(tmp_path / "r"), "--otlp", "http://127.0.0.1:9"])
    assert "needs 'pip install cooplab[viewer]'" in line


def test_validation_figures_without_the_analysis_extra(monkeypatch, capsys, tmp_path):
    hide(monkeypatch, "scipy", forget=("cooplab.tasks.cpr.validation",))
    line = one_line_error(capsys, ["figures", "cpr-abm", "--out", str(tmp_path / "f"), "--replicates", "2"])
    assert "the ABM figures" in line and "cooplab[analysis]" in line


@pytest.mark.parametrize("hidden", ["safetensors", "tokenizers"])
def test_norm_similarity_without_the_embedding_model(monkeypatch, hidden):
    from cooplab.tasks.cpr import norms

    hide(monkeypatch, hidden)
    norms._model.cache_clear()
    try:
        with pytest.raises(MissingExtra, match=r"norm similarity .* cooplab\[analysis\]"):
            norms.embed(["a norm"])
    finally:
        norms._model.cache_clear()


def test_require_names_every_missing_package_and_refuses_unknown_extras(monkeypatch):
    hide(monkeypatch, "scipy", "tokenizers")
    with pytest.raises(MissingExtra, match=r"missing: scipy, tokenizers"):
        require("analysis", "the analyses")
    with pytest.raises(ValueError, match="unknown extra"):
        require("gpu", "x")


def test_the_core_runs_a_scripted_llm_society_and_diners_with_every_extra_hidden(monkeypatch, capsys, tmp_path):
    hide(
        monkeypatch,
        "llama_cpp",
        "scipy",
        "statsmodels",
        "safetensors",
        "tokenizers",
        "mesa",
        forget=("cooplab.evals.stats", "cooplab.tasks.cpr.analysis", "cooplab.tasks.cpr.validation"),
    )
    assert (
        main(
            [
                "run",
                "cpr",
                "--agents",
                "llm",
                "--model",
                f"scripted:{SCRIPTED}",
                "--n-agents",
                "3",
                "--rounds",
                "3",
                "--cache",
                "off",
                "--out",
                str(tmp_path / "c"),
                "-q",
                "--json",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["status"] == "completed"
    assert (
        main(["run", "diners", "--iterations", "2", "--replicates", "3", "--out", str(tmp_path / "d"), "-q", "--json"])
        == 0
    )
    assert main(["params", "diners", "--json"]) == 0
