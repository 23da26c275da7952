"""The life cycle of a run directory: making it, checking it before a resume, recording the
environment it was made in, saving errors. The file helpers it uses are :mod:`cooplab.graphs.rundir`."""

from __future__ import annotations

import os
import platform
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from cooplab.graphs import runfiles
from cooplab.graphs.rundir import (  # noqa: F401 - the engine's file helpers  # noqa: F401  # noqa: F401 - one writer per run directory
    LOCK_FILE,
    TRACES_FILE,
    RunDirBusy,
    RunDirError,
    code_version,
    ensure_writable,  # noqa: F401 - the engine's, below the tasks so calibrations use it too
    frame,
    git_commit,
    jsonable,
    locked,
    machine,
    now,
    read_json,
    read_table,
    readonly_uri,
    write_json,
    write_table,
)
from cooplab.graphs.runfiles import RunSummary, SchemaError  # noqa: F401 - the engine's summary model
from cooplab.limits import ConfigError, one_line, parse_json


def read_summary(out: Path) -> RunSummary:
    """A run's summary.json, its task's results validated with the task's ``Results`` (a task that
    is not installed: any JSON); a one-line :class:`RunDirError` when it is missing or damaged."""
    from cooplab.runs import registry

    return runfiles.read_summary(out, lookup=registry.get)


def prepare_out(out: Path, *, force: bool = False) -> Path:
    """Create ``out`` (and parents) and check it is writable; refuse to clobber a finished run."""
    out = ensure_writable(out)
    if (out / "config.json").exists() and not force:
        raise RunDirError(
            f"{out} already holds a run; pass --force to overwrite it or 'cooplab resume {out}' to continue it"
        )
    if force:
        for name in (
            "checkpoints.sqlite",
            "checkpoints.sqlite-wal",
            "checkpoints.sqlite-shm",
            "summary.json",
            TRACES_FILE,
            ERROR_LOG,
        ):
            (out / name).unlink(missing_ok=True)
    return out


ERROR_LOG = "error.log"
RESTART = "start it again with 'cooplab run ... --out {out} --force'"


def read_run_config(out: Path) -> dict[str, Any]:
    """A run directory's config.json, or a one-line RunDirError (missing, unreadable, not JSON,
    not an object). Reads only; never changes the directory."""
    out = Path(out)
    if not out.exists():
        raise RunDirError(f"{out} does not exist")
    if not out.is_dir():
        raise RunDirError(f"{out} is not a directory; give a run directory written by 'cooplab run'")
    path = out / "config.json"
    if not path.exists():
        raise RunDirError(f"{out} is not a cooplab run directory (no config.json)")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RunDirError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        config = parse_json(text, str(path))
    except ConfigError as exc:
        raise RunDirError(f"{exc}; restore it, or {RESTART.format(out=out)}") from None
    if not isinstance(config, dict):
        raise RunDirError(f"{path} is damaged (not a JSON object); restore it, or {RESTART.format(out=out)}")
    return config


def refused_checkpoint(out: Path, exc: Exception) -> RunDirError:
    """The one line of a run whose checkpoints hold a value cooplab never stores
    (:class:`~cooplab.graphs.checkpoint_serde.CheckpointRefused`): the run, the refused type, and
    that nothing of it ran."""
    return RunDirError(
        f"{out}/checkpoints.sqlite cannot be trusted: {exc}; the run cannot resume: {RESTART.format(out=out)}"
    )


def check_checkpoints(out: Path, serde: Any = None) -> None:
    """Refuse (one line) a run directory whose checkpoints.sqlite is missing, not SQLite, truncated,
    without checkpoints, or holding a value cooplab never stores (every stored value is checked
    with ``serde``, a :class:`~cooplab.graphs.checkpoint_serde.CheckpointSerializer`, before any is
    loaded). Opens the file read-only; never changes it."""
    import sqlite3

    from cooplab.graphs import checkpoint_serde

    out = Path(out)
    path = out / "checkpoints.sqlite"
    again = RESTART.format(out=out)
    if not path.is_file():
        raise RunDirError(f"{out} has no checkpoints.sqlite, so there is nothing to resume; {again}")
    try:
        with open(path, "rb") as fh:
            head = fh.read(16)
    except OSError as exc:
        raise RunDirError(f"cannot read {path}: {exc.strerror or exc}") from None
    if head != b"SQLite format 3\x00":
        raise RunDirError(f"{path} is damaged (not an SQLite database); the run cannot resume: {again}")
    try:
        db = sqlite3.connect(readonly_uri(path), uri=True)
        try:
            ok = db.execute("PRAGMA quick_check").fetchone()
            if not ok or ok[0] != "ok":
                raise sqlite3.DatabaseError(str(ok[0] if ok else "quick_check failed"))
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            n = db.execute("SELECT count(*) FROM checkpoints").fetchone()[0] if "checkpoints" in tables else 0
        finally:
            db.close()
    except sqlite3.Error as exc:
        raise RunDirError(f"{path} is damaged ({exc}); the run cannot resume: {again}") from None
    if not n:
        raise RunDirError(f"{path} holds no checkpoint, so there is nothing to resume; {again}")
    try:
        checkpoint_serde.scan(readonly_uri(path), serde, uri=True)
    except checkpoint_serde.CheckpointRefused as exc:
        raise refused_checkpoint(out, exc) from None
    except (sqlite3.Error, ValueError) as exc:
        raise RunDirError(f"{path} is damaged ({one_line(str(exc), 200)}); the run cannot resume: {again}") from None


_Checked = TypeVar("_Checked")


def config_for_resume(
    out: Path, task: str, check_config: Callable[[Path, dict[str, Any]], _Checked], serde: Any = None
) -> _Checked:
    """A run directory's config.json, ready to resume a ``task`` run: the task matches, every value
    passes ``check_config(out, config)`` (which returns it in the current shape) and checkpoints.sqlite is sound
    (one-line RunDirErrors;
    nothing is changed)."""
    from cooplab.agents.instances import ModelObjectMissing
    from cooplab.agents.models.errors import MissingAPIKey
    from cooplab.extras import MissingExtra

    raw = read_run_config(out)
    if raw.get("task") != task:
        raise RunDirError(f"{out} holds a {raw.get('task')!r} run; only {task} runs resume here")
    try:
        config = check_config(out, raw)
    except MissingAPIKey as exc:  # the file is fine: the environment lacks the key
        raise RunDirError(f"{exc}; set it and resume again") from None
    except ModelObjectMissing as exc:  # the file is fine: this process was not handed the object
        raise RunDirError(str(exc)) from None
    except MissingExtra as exc:  # the file is fine: the environment lacks a provider's package
        raise RunDirError(f"{exc}; install it and resume again") from None
    except ConfigError as exc:
        raise RunDirError(f"{exc}; fix the file, or {RESTART.format(out=out)}") from None
    check_checkpoints(out, serde)
    return config


def save_error(out: Path, exc: BaseException) -> Path | None:
    """Write ``exc``'s traceback to ``out/error.log`` (appending); its path, or None if that failed."""
    import traceback

    path = Path(out) / ERROR_LOG
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(f"--- {now()} {type(exc).__name__}: {exc}\n")
            fh.write("".join(traceback.format_exception(exc)) + "\n")
        return path
    except OSError:
        return None


# --- the environment a run was made in ------------------------------------------------------
#: the distributions whose versions decide a run's results (recorded in config.json's "environment")
DECIDING_PACKAGES = (
    "cooplab",
    "langgraph",
    "langchain-core",
    "langchain-openai",
    "numpy",
    "pandas",
    "llama-cpp-python",
)


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def environment(config: dict[str, Any]) -> dict[str, Any]:
    """What decides a run's results besides its config: the git commit (from a checkout), the
    versions of :data:`DECIDING_PACKAGES`, the local model's file, SHA-256 and origin (when a local
    model is used) and the sandbox image id (when the run uses the sandbox)."""
    env: dict[str, Any] = {
        "python": platform.python_version(),
        "machine": machine(),
        "git": git_commit(),
        "packages": {d: _version(d) for d in DECIDING_PACKAGES},
    }
    llm = config.get("llm") or {}
    models = [llm.get("model"), *(llm.get("agent_models") or {}).values(), *(llm.get("model_from") or {}).values()]
    if any(isinstance(m, str) and m.strip().lower() == "local" for m in models):
        try:
            from cooplab.agents.model_files import record
            from cooplab.agents.models.local import local_model_path

            local_model_path()  # the file on disk is the pinned one (its SHA-256 checked)
            env["local_model"] = record("smollm2")  # file, sha256, origin, how it came
        except Exception as exc:  # noqa: BLE001 - recorded, never fatal here (the run itself says what is wrong)
            env["local_model"] = {"error": f"{type(exc).__name__}: {exc}"}
    files = {m: m[6:] for m in models if isinstance(m, str) and m.startswith("local:")}
    if files:  # local:PATH models: each file's content, so a rerun can tell it has the same model
        from cooplab.agents.models.local import gguf_sha256

        env["local_files"] = {}
        for spec, path in sorted(files.items()):
            try:
                real = str(Path(path).expanduser().resolve(strict=True))
                env["local_files"][spec] = {"file": real, "bytes": os.path.getsize(real), "sha256": gguf_sha256(real)}
            except Exception as exc:  # noqa: BLE001 - recorded, never fatal here
                env["local_files"][spec] = {"error": f"{type(exc).__name__}: {exc}"}
    objects = sorted({m for m in models if isinstance(m, str) and m.startswith("instance:")})
    if objects:  # chat model objects from Python: their class, so a reader knows what answered
        from cooplab.agents.instances import describe

        env["model_objects"] = {spec: describe(spec) for spec in objects}
    if config.get("sandbox"):
        try:
            from cooplab.sandbox import SandboxConfig, docker_backend

            env["sandbox_image"] = {"name": SandboxConfig().image, "id": docker_backend.image_id(SandboxConfig().image)}
        except Exception as exc:  # noqa: BLE001
            env["sandbox_image"] = {"error": f"{type(exc).__name__}: {exc}"}
    return env


def environment_changes(recorded: Any, now: dict[str, Any]) -> list[str]:
    """What differs between a run's recorded environment and this one, as short phrases
    ("langgraph 1.2.21 -> 1.2.22"); nothing for a missing or malformed record."""
    if not isinstance(recorded, dict):
        return []
    out = []
    old_p, new_p = recorded.get("packages"), now.get("packages") or {}
    if isinstance(old_p, dict):
        out += [
            f"{d} {old_p.get(d)} -> {new_p.get(d)}"
            for d in DECIDING_PACKAGES
            if d in old_p and old_p.get(d) != new_p.get(d)
        ]
    old_g, new_g = recorded.get("git"), now.get("git")
    if isinstance(old_g, dict) and isinstance(new_g, dict) and old_g.get("commit") != new_g.get("commit"):
        out.append(f"git commit {str(old_g.get('commit'))[:12]} -> {str(new_g.get('commit'))[:12]}")
    for key, label in (("local_model", "local model sha256"), ("sandbox_image", "sandbox image id")):
        old, new = recorded.get(key), now.get(key)
        field = "sha256" if key == "local_model" else "id"
        if isinstance(old, dict) and isinstance(new, dict) and old.get(field) and old.get(field) != new.get(field):
            out.append(f"{label} {str(old.get(field))[:12]} -> {str(new.get(field))[:12]}")
    return out
