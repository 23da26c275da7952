"""Every file path (``graphs/runfiles.py``) and every dotted name (``cooplab.runs.api.run``) that the
library's docstrings, messages and comments, the README and docs/ mention must exist: a module or
an attribute of one, a file of the repository. A rename that leaves a stale pointer behind fails here.

Names that look like module paths but are not (OpenTelemetry attribute keys, Docker labels, a lock
file) and files of other projects are listed below with what they are."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ("cooplab", "agents", "graphs", "sandbox", "tasks", "evals")
PATH_RE = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.py)\b")
NAME_RE = re.compile(r"\bcooplab(?:\.[A-Za-z_]\w*)+")

#: dotted names under ``cooplab.`` that name no module: what each one is
NOT_MODULES = {
    # span attributes of the OTLP export (evals/otlp_export.py, docs/traces.md)
    **dict.fromkeys(
        [
            "cooplab.run_dir",
            "cooplab.task",
            "cooplab.cached",
            "cooplab.reported_tokens",
            "cooplab.reported_tokens.prompt",
            "cooplab.charged_tokens",
            "cooplab.charged_tokens.prompt",
            "cooplab.charged_tokens.completion",
            "cooplab.original_tokens",
            "cooplab.original_tokens.prompt",
            "cooplab.original_latency_s",
        ],
        "an OTLP span attribute",
    ),
    # labels the sandbox puts on its images and containers (sandbox/image.py, sandbox/docker_backend.py)
    **dict.fromkeys(
        ["cooplab.sandbox.version", "cooplab.sandbox.host", "cooplab.sandbox.pid", "cooplab.sandbox.pid_start"],
        "a Docker label",
    ),
    "cooplab.lock": "the lock file of a run directory (graphs/rundir.py)",
}
#: files named that belong to other projects
ELSEWHERE = {
    "convert_hf_to_gguf.py": "llama.cpp's converter",
    "langgraph/checkpoint/serde/jsonplus.py": "LangGraph's serializer",
    "tests/test_examples.py": "Mesa's walk over its examples (docs/write-your-own-task.md)",
    "tiktoken_ext/openai_public.py": "tiktoken's table of OpenAI's encodings and their SHA-256 (agents/model_files.py)",
}


def _texts() -> list[tuple[str, int, str]]:
    """(file, line, text) of every string constant and comment of the library, and every line of the docs."""
    out: list[tuple[str, int, str]] = []
    for top in LIBRARY:
        for f in sorted((ROOT / top).rglob("*.py")):
            if "__pycache__" in f.parts:
                continue
            rel = str(f.relative_to(ROOT))
            src = f.read_text()
            for node in ast.walk(ast.parse(src)):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    out.append((rel, node.lineno, node.value))
            for i, line in enumerate(src.splitlines(), 1):
                if "#" in line:
                    out.append((rel, i, line.split("#", 1)[1]))
    for f in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        rel = str(f.relative_to(ROOT))
        out += [(rel, i, line) for i, line in enumerate(f.read_text().splitlines(), 1)]
    return out


def _files() -> tuple[set[str], set[str]]:
    paths = {
        str(p.relative_to(ROOT))
        for p in ROOT.rglob("*.py")
        if not ({".venv", "build", "__pycache__", ".venv-phoenix"} & set(p.relative_to(ROOT).parts))
    }
    return paths, {Path(p).name for p in paths}


def _file_exists(name: str, paths: set[str], names: set[str]) -> bool:
    if name in ELSEWHERE:
        return True
    if "/" not in name:
        return name in names
    return name in paths or any(p.endswith("/" + name) for p in paths)


def _resolves(dotted: str) -> bool:
    """A module, or attributes of the longest module prefix of ``dotted``."""
    parts = dotted.split(".")
    for k in range(len(parts), 0, -1):
        module = ".".join(parts[:k])
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if found:
            obj = importlib.import_module(module)
            for attr in parts[k:]:
                if not hasattr(obj, attr):
                    return False
                obj = getattr(obj, attr)
            return True
    return False


@pytest.fixture(scope="module")
def texts() -> list[tuple[str, int, str]]:
    return _texts()


def test_every_file_path_named_exists(texts):
    paths, names = _files()
    stale = [
        f"{where}:{line}: {m.group(1)}"
        for where, line, text in texts
        for m in PATH_RE.finditer(text)
        if not _file_exists(m.group(1), paths, names)
    ]
    assert not stale, "files named that do not exist:\n" + "\n".join(stale)


def test_every_cooplab_name_resolves(texts):
    seen: dict[str, bool] = {}
    stale = []
    for where, line, text in texts:
        for m in NAME_RE.finditer(text):
            name = m.group(0)
            if name in NOT_MODULES:
                continue
            if name not in seen:
                seen[name] = _resolves(name)
            if not seen[name]:
                stale.append(f"{where}:{line}: {name}")
    assert not stale, "names that resolve to no module or attribute:\n" + "\n".join(stale)


def test_the_check_finds_a_stale_name_and_path():
    """The two checks fail on what they exist to catch (a renamed module, a moved file)."""
    paths, names = _files()
    assert not _resolves("cooplab.runs.no_such_module")
    assert not _resolves("cooplab.runs.api.no_such_function")
    assert _resolves("cooplab.runs.api.run") and _resolves("cooplab.graphs.runfiles")
    assert not _file_exists("cooplab/graphs/runfiles.py", paths, names)  # the installed name, not a file here
    assert _file_exists("graphs/runfiles.py", paths, names) and _file_exists("runfiles.py", paths, names)
    assert [m.group(1) for m in PATH_RE.finditer("see (graphs/runfiles.py) and x.py.")] == [
        "graphs/runfiles.py",
        "x.py",
    ]
