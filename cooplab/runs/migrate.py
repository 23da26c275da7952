"""Earlier on-disk formats, read and converted in one place: ``cooplab migrate PATH`` and
:func:`cooplab.migrate` bring a run folder (or a folder of many runs, or a folder holding them) up
to the current format (:data:`cooplab.graphs.formats.FORMAT`) in place, and sweep files of the
formats before the grid format are converted on read.

**Run folders.** Every file an earlier version wrote is converted by the converter registered for
it (:data:`cooplab.graphs.formats.CONVERTERS`): ``config.json`` and ``summary.json`` of version 1
to version 2, a folder of many runs made before manifests gets its ``manifest.json``, and a game
profile written before profiles were grid sweeps has its ``games/GAME`` runs moved into ``cells/``
(its manifest and profile.json then name them; the originals of both kept as ``*.v1.bak``), and a
science bench written before benches were grid sweeps its ``items/ID`` runs (its manifest and
results.parquet then name them, the originals kept likewise). Nothing
is written before every file of the folder has been read and converted: a damaged or unknown file
(not JSON, a version this cooplab does not know, a summary its schema refuses) is one line and
nothing changes. Each file is then written atomically (a temporary file renamed over it) after its
original bytes are kept beside it as ``NAME.vN.bak`` (``N``: the version it had). A folder already
current is left as it is. The readers convert the same files on read, so a folder not migrated
still reads; ``cooplab migrate`` only makes the conversion permanent.

**Sweep files** (:func:`sweep_converter`, :func:`convert_sweep`): the ``args`` format (a task's
command-line options times seeds; this module) and each world's own earlier format, which stays
in the world's folder and is found through the task registry and the
:meth:`~cooplab.graphs.task.Task.earlier_sweep` hook. :func:`cooplab.runs.grid.load_file` reads them
with a one-line notice; their paths stay relative to the current directory, as they were.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cooplab.graphs import formats, rundir, runfiles
from cooplab.graphs.formats import FORMAT, Converter, read_earlier
from cooplab.graphs.rundir import RunDirError, jsonable, read_json, write_atomic
from cooplab.limits import ConfigError, check, check_seeds, one_line

__all__ = ["FORMAT", "Converter", "Change", "Migration", "migrate", "sweep_converter", "convert_sweep"]

#: the files of a run folder a converter reads
RUN_FILES = ("config.json", "summary.json")
#: the converters whose files sit in a run folder (written while the folder is locked)
_IN_RUN = ("config.json", "summary.json", "table")
#: folders never entered (a run's own stores, caches, version control)
_SKIP_DIRS = {".git", "__pycache__", "node_modules", ".venv", "checkpoints"}
#: at most this many folders are looked at under PATH (a typo such as '/' is refused, not walked)
MAX_FOLDERS = 200_000


@dataclass(frozen=True)
class Change:
    """One file converted (or to convert, on a dry run): its path, the converter, and where its
    original bytes were kept (None on a dry run, or for a new file such as a manifest)."""

    path: Path
    converter: Converter
    #: the version the file had (0: it did not exist, as a manifest of a folder made before them)
    version: int
    backup: Path | None = None
    #: the new file's JSON object (not in the report)
    content: Any = field(default=None, compare=False, repr=False)

    def as_json(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "file": self.converter.file,
            "reads": self.converter.reads,
            "writes": self.converter.writes,
            "backup": None if self.backup is None else str(self.backup),
        }


@dataclass
class Migration:
    """What ``cooplab migrate PATH`` did (or would do, ``dry_run``): the files converted, the run
    directories looked at, and the format they are now in."""

    path: Path
    dry_run: bool
    changes: list[Change]
    runs: int
    format: str = FORMAT

    @property
    def current(self) -> bool:
        """True when nothing had to change (the folder was already in the current format)."""
        return not self.changes

    def message(self) -> str:
        """One line for the person who asked."""
        where = self.path
        if self.current:
            return (
                f"{where} is already in cooplab's on-disk format {self.format} ({self.runs} run folders); nothing to do"
            )
        files = f"{len(self.changes)} file{'s' if len(self.changes) != 1 else ''}"
        if self.dry_run:
            return f"{where}: {files} would be converted to format {self.format} (dry run, nothing written)"
        return (
            f"{where}: {files} converted to format {self.format}; the originals are kept beside them as *.bak "
            f"(e.g. {next((c.backup for c in self.changes if c.backup is not None), '-')})"
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "format": self.format,
            "dry_run": self.dry_run,
            "current": self.current,
            "runs": self.runs,
            "changes": [c.as_json() for c in self.changes],
            "message": self.message(),
        }


# --- run folders -------------------------------------------------------------------------------------
def _results_of(raw: Any) -> Any:
    """The results model of the task a summary names (None: unknown; read as any JSON)."""
    from cooplab.runs import registry

    return runfiles.results_for(registry.get)(raw.get("task") if isinstance(raw, dict) else None)


def _read(path: Path) -> Any:
    if path.is_symlink() or not path.is_file():
        raise RunDirError(f"{path} is a link or not a regular file; cooplab migrate changes only regular files")
    try:
        return read_json(path)
    except OSError as exc:
        raise RunDirError(f"{path} cannot be read ({exc.strerror or exc})") from None


def _version(raw: Any, path: Path, current: int) -> int:
    """The version a run file says it is (1 without one); one line for anything else."""
    if not isinstance(raw, dict):
        raise RunDirError(f"{path}: must be a JSON object, got {type(raw).__name__}; is it a cooplab run folder?")
    v = raw.get("version", 1)
    if isinstance(v, bool) or not isinstance(v, int) or v not in range(1, current + 1):
        shown = one_line(repr(v), 60)
        raise RunDirError(
            f"{path}: version {shown} is not one this cooplab knows (1 to {current}); a newer cooplab wrote it, "
            "or the file is damaged: upgrade cooplab, or restore the file"
        )
    return v


def _plan_config(path: Path) -> Change | None:
    raw = _read(path)
    if _version(raw, path, formats.CONFIG_VERSION) == formats.CONFIG_VERSION:
        return None
    conv = formats.CONVERTERS["config.json"]
    return Change(path, conv, 1, content=jsonable(conv.convert(raw)))


def _plan_summary(path: Path) -> Change | None:
    raw = _read(path)
    version = _version(raw, path, formats.SUMMARY_VERSION)
    results = _results_of(raw)
    summary = runfiles.parse_summary(raw, str(path), results)  # damage: one line, before anything is written
    if version == formats.SUMMARY_VERSION:
        return None
    return Change(path, formats.CONVERTERS["summary.json"], version, content=summary.as_json())


def _plan_tables(d: Path) -> list[Change]:
    """The decisions, ledger and tool-loops tables of run folder ``d`` written before the agent key
    and the money columns, each with its table in today's shape."""
    from cooplab.graphs.tables import MONEY_TABLES, is_earlier

    out = []
    for stem in MONEY_TABLES:
        for ext in ("parquet", "csv"):
            path = d / f"{stem}.{ext}"
            if not (path.exists() or path.is_symlink()):
                continue
            if path.is_symlink() or not path.is_file():
                raise RunDirError(f"{path} is a link or not a regular file; cooplab migrate changes only regular files")
            df = (
                rundir.read_table(d, stem, as_written=True)
                if ext == "parquet" or not (d / f"{stem}.parquet").exists()
                else None
            )
            if df is not None and is_earlier(stem, [str(c) for c in df.columns]):
                out.append(Change(path, formats.CONVERTERS["table"], 1, content=formats.upgrade_table(stem, df)))
    return out


def _plan_manifest(folder: Path) -> Change | None:
    path = folder / runfiles.MANIFEST_FILE
    if path.exists() or path.is_symlink():
        runfiles.read_manifest(folder)  # damage: one line
        return None
    m = runfiles.manifest_of(folder)
    if m is None or not _unambiguous(folder, m):
        return None
    content = m.model_dump(mode="json", exclude={"inferred"})
    return Change(path, formats.CONVERTERS["manifest.json"], 0, content=content)


def _plan_profile(folder: Path) -> Change | None:
    """A game profile in the layout before profiles were grid sweeps (``games/GAME`` run folders,
    ``profile-config.json``, no ``cells/``): its runs to move into ``cells/`` (formats.profile_cells),
    checked first (every target free, every source a run folder); None for anything else."""
    cfg = folder / "profile-config.json"
    if not (folder / "games").is_dir() or (folder / "cells").exists() or not cfg.is_file():
        return None
    req = _read(cfg)
    if not isinstance(req, dict):
        raise RunDirError(f"{cfg}: must be a JSON object, got {type(req).__name__}; is it a cooplab profile?")
    try:
        moves = formats.profile_cells(req.get("games"), req.get("seed"))
    except ValueError as exc:
        raise RunDirError(f"{cfg}: {one_line(str(exc), 200)}") from None
    moves = {a: b for a, b in moves.items() if (folder / a).is_dir()}
    for a in moves:
        if (folder / a).is_symlink():
            raise RunDirError(f"{folder / a} is a link; cooplab migrate moves only regular folders")
    return Change(folder / "games", formats.CONVERTERS["games/"], 1, content=moves) if moves else None


def _move_into_cells(change: Change) -> Path:
    """Move the runs a change names (``games/G`` or ``items/ID`` -> ``cells/NAME``) into ``cells/``,
    each locked while it moves, and drop their old folder if nothing else is in it; returns the
    many-run folder."""
    folder = change.path.parent
    (folder / "cells").mkdir(exist_ok=True)
    for a, b in change.content.items():
        with rundir.locked(folder / a):
            pass  # free: no cooplab writes it
        os.replace(folder / a, folder / b)
    try:
        change.path.rmdir()  # nothing else was in it
    except OSError:
        pass
    return folder


def _apply_profile(change: Change) -> Change:
    """Move a profile's game runs into ``cells/``, then write its manifest and its profile.json
    naming them (the originals of both kept as ``NAME.v1.bak``); each run folder is locked while it moves."""
    folder = _move_into_cells(change)
    backup = None
    prof = folder / "profile.json"
    if prof.is_file():
        raw = read_json(prof)
        if isinstance(raw, dict) and isinstance(raw.get("games"), dict):
            backup = _backup_of(prof, 1)
            write_atomic(backup, prof.read_bytes())
            for g, e in raw["games"].items():
                new = change.content.get(f"games/{g}")
                if isinstance(e, dict) and new is not None and e.get("run_dir") is not None:
                    e["run_dir"] = new
            write_atomic(prof, (json.dumps(raw, indent=2) + "\n").encode())
    mpath = folder / runfiles.MANIFEST_FILE
    old = runfiles.read_manifest(folder) if mpath.is_file() else None
    if old is not None:
        write_atomic(_backup_of(mpath, 1), mpath.read_bytes())
    cells = [
        runfiles.ManifestCell(
            name=Path(b).name,
            dir=b,
            labels={"game": a.split("/", 1)[1]},
            status=_status(folder / b),
        )
        for a, b in change.content.items()
    ]
    outputs = {k: v for k, v in formats.PROFILE_OUTPUTS.items() if (folder / v).exists()}
    runfiles.write_manifest(folder, runfiles.Manifest(kind="profile", task="game", cells=cells, outputs=outputs))
    return Change(change.path, change.converter, change.version, backup, change.content)


def _plan_bench(folder: Path) -> Change | None:
    """A science bench in the layout before benches were grid sweeps (``items/ID`` run folders,
    ``bench.json``, no ``cells/``): its runs to move into ``cells/`` (formats.bench_cells), checked
    first (every id usable, no two on one cell, no link); None for anything else."""
    cfg = folder / "bench.json"
    items = folder / "items"
    if not items.is_dir() or items.is_symlink() or (folder / "cells").exists() or not cfg.is_file():
        return None
    settings = _read(cfg)
    if not isinstance(settings, dict):
        raise RunDirError(f"{cfg}: must be a JSON object, got {type(settings).__name__}; is it a cooplab bench?")
    ids = sorted(  # the item runs (anything else in items/ stays there)
        d.name for d in items.iterdir() if d.is_symlink() or (d.is_dir() and any((d / f).is_file() for f in RUN_FILES))
    )
    for i in ids:
        if (items / i).is_symlink():
            raise RunDirError(f"{items / i} is a link; cooplab migrate moves only regular folders")
    try:
        moves = formats.bench_cells(ids, settings.get("seed"))
    except ValueError as exc:
        raise RunDirError(f"{folder}: {one_line(str(exc), 200)}") from None
    return Change(items, formats.CONVERTERS["items/"], 1, content=moves) if moves else None


def _apply_bench(change: Change) -> Change:
    """Move a bench's item runs into ``cells/``, then write its manifest (cells labelled by item and
    seed) and its results.parquet naming them (the originals of both kept as ``NAME.v1.bak``); each
    run folder is locked while it moves."""
    import pandas as pd

    folder = _move_into_cells(change)
    backup = None
    res = folder / "results.parquet"
    if res.is_file():
        df = pd.read_parquet(res)
        if "run_dir" in df.columns:
            backup = _backup_of(res, 1)
            write_atomic(backup, res.read_bytes())

            def moved(v: Any) -> Any:
                for a, b in change.content.items():
                    if isinstance(v, str) and (v == a or Path(v).as_posix().endswith("/" + a)):
                        return Path(v).as_posix()[: -len(a)] + b
                return v

            df["run_dir"] = df["run_dir"].map(moved)
            tmp = folder / ".results.parquet.migrate"
            df.to_parquet(tmp, index=False)
            os.replace(tmp, res)
    mpath = folder / runfiles.MANIFEST_FILE
    if mpath.is_file():
        runfiles.read_manifest(folder)  # damage: one line, before it is replaced
        write_atomic(_backup_of(mpath, 1), mpath.read_bytes())
    seed = read_json(folder / "bench.json").get("seed")
    cells = [
        runfiles.ManifestCell(
            name=Path(b).name,
            dir=b,
            labels={"item": a.split("/", 1)[1], "seed": seed},
            status=_status(folder / b),
        )
        for a, b in change.content.items()
    ]
    outputs = {k: v for k, v in formats.BENCH_OUTPUTS.items() if (folder / v).exists()}
    runfiles.write_manifest(folder, runfiles.Manifest(kind="bench", task="science", cells=cells, outputs=outputs))
    return Change(change.path, change.converter, change.version, backup, change.content)


def _status(d: Path) -> Any:
    """A moved run's status for the manifest (None when it has no readable summary)."""
    from cooplab.runs.sweeps import cell_status

    try:
        return cell_status(d)
    except RunDirError:
        return None


def _unambiguous(folder: Path, m: runfiles.Manifest) -> bool:
    """Whether a layout before manifests is surely a folder of many runs (a profile, a bench, a
    calibration, or a grid sweep's cells/ with its table.csv): a folder that merely holds runs in
    ``runs/`` (a project's own) gets no manifest; the readers still infer its layout."""
    return m.kind != "sweep" or ((folder / "cells").is_dir() and (folder / "table.csv").is_file())


def _folders(root: Path) -> Iterator[Path]:
    """``root`` and every folder below it (links not followed; a run's checkpoints and version
    control left out), in a stable order."""
    seen = 0
    for here, dirs, _files in os.walk(root, followlinks=False):
        seen += 1
        if seen > MAX_FOLDERS:
            raise RunDirError(f"{root} holds more than {MAX_FOLDERS:,} folders; give a run folder or a folder of runs")
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not (Path(here) / d).is_symlink())
        yield Path(here)


def _is_run(d: Path) -> bool:
    return any((d / f).is_file() for f in RUN_FILES) and not runfiles.is_many_runs(d)


def plan(path: str | Path) -> tuple[list[Change], int]:
    """The files under ``path`` that a migration converts, each with its new content, and how many
    run folders were looked at; a one-line RunDirError for a damaged or unknown file, a missing
    path or one that holds no run folder. Nothing is written."""
    root = Path(path)
    if not root.exists():
        raise RunDirError(f"{root} does not exist; give a run folder or a folder of runs")
    if not root.is_dir():
        raise RunDirError(
            f"{root} is not a folder; give a run folder or a folder of runs (sweep files convert on read)"
        )
    changes: list[Change] = []
    runs = many = 0
    for d in _folders(root):
        if _is_run(d):
            runs += 1
            for name, step in (("config.json", _plan_config), ("summary.json", _plan_summary)):
                if (d / name).exists() or (d / name).is_symlink():
                    c = step(d / name)
                    if c is not None:
                        changes.append(c)
            changes.extend(_plan_tables(d))
        layout = _plan_profile(d) or _plan_bench(d)
        c = _plan_manifest(d) if layout is None else None  # a profile or bench moved into cells/ gets its manifest then
        if c is not None or layout is not None or (d / runfiles.MANIFEST_FILE).is_file():
            many += 1
        if c is not None:
            changes.append(c)
        if layout is not None:
            changes.append(layout)
    if runs == 0 and many == 0:
        raise RunDirError(
            f"{root} holds no cooplab run folder (config.json, summary.json or manifest.json); nothing to migrate"
        )
    return changes, runs


def _backup_of(path: Path, version: int) -> Path:
    """Where ``path``'s original bytes go: ``NAME.vN.bak`` beside it (``.1``, ``.2`` ... when taken)."""
    base = path.with_name(f"{path.name}.v{version}.bak")
    n, out = 0, base
    while out.exists() or out.is_symlink():
        n += 1
        out = base.with_name(f"{base.name}.{n}")
    return out


def _apply(change: Change) -> Change:
    if change.converter.file == runfiles.MANIFEST_FILE:  # a new file: validated, with its times
        runfiles.write_manifest(change.path.parent, runfiles.Manifest.model_validate(change.content))
        return change
    backup = None
    if change.version:  # an earlier file: its original bytes first, then the new file over it
        backup = _backup_of(change.path, change.version)
        write_atomic(backup, change.path.read_bytes())
    if change.converter.file == "table":  # written whole beside it, then renamed over it
        tmp = change.path.parent / f".{change.path.name}.migrate"
        tmp.mkdir(exist_ok=True)
        try:
            stem, ext = change.path.name.rsplit(".", 1)
            written = rundir.write_table(change.content, tmp, stem, csv=ext == "csv")
            os.replace(written, change.path)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    else:
        write_atomic(change.path, (json.dumps(change.content, indent=2) + "\n").encode())
    return Change(change.path, change.converter, change.version, backup, change.content)


def migrate(path: str | Path, *, dry_run: bool = False) -> Migration:
    """Bring the run folder (or folder of many runs, or folder holding runs) ``path`` to the current
    on-disk format in place (``dry_run``: only say what would change). Every file is read and
    converted first; a damaged or unknown one is a one-line :class:`~cooplab.graphs.rundir.RunDirError`
    and nothing is written. Each converted file is then written atomically, its original bytes kept
    beside it (``config.json.v1.bak``), while its run folder is locked as a run holds it (a folder
    in use by a running cooplab is refused, one line, before anything is written). A folder already
    current is left alone; running it twice is the same as once."""
    changes, runs = plan(path)
    if not dry_run and changes:
        runs_changed = sorted({c.path.parent for c in changes if c.converter.file in _IN_RUN})
        for d in runs_changed:  # every run folder free before the first write
            with rundir.locked(d):
                pass
        done = [_apply(c) for c in changes if c.converter.file not in (*_IN_RUN, "games/", "items/")]
        for d in runs_changed:
            with rundir.locked(d):
                done.extend(_apply(c) for c in changes if c.path.parent == d and c.converter.file in _IN_RUN)
        done.extend(_apply_profile(c) for c in changes if c.converter.file == "games/")  # the runs move last
        done.extend(_apply_bench(c) for c in changes if c.converter.file == "items/")
        changes = done
    return Migration(Path(path), dry_run, changes, runs)


def needs_migration(path: str | Path) -> bool:
    """Whether any file under ``path`` is in an earlier format (one-line RunDirError when damaged)."""
    return bool(plan(path)[0])


# --- sweep files ------------------------------------------------------------------------------------
#: options a cell sets itself (a config must not give them in "args" or "grid")
_OWN = {"--out", "--seed", "--json", "-q", "--quiet", "--force", "--help", "--csv"}


class TaskSweep(BaseModel):
    """An earlier sweep file of a task's command-line options."""

    model_config = ConfigDict(extra="forbid")
    task: str
    out: str
    args: list[str] = []
    grid: dict[str, list[Any]] = {}
    seeds: list[int] = Field(default_factory=lambda: [0])
    parallel: int = Field(2, ge=1, le=64)


def _check_args_raw(raw: dict[str, Any], where: str) -> None:
    """Types before pydantic (which would turn true into 1 and "3" into 3)."""
    for key in ("task", "out"):
        if key in raw and (not isinstance(raw[key], str) or not raw[key].strip()):
            raise ConfigError(f"{where}: {key} must be a non-empty string, got {raw[key]!r}")
    if "args" in raw and (not isinstance(raw["args"], list) or not all(isinstance(a, str) for a in raw["args"])):
        raise ConfigError(
            f"{where}: args must be a list of strings (options of 'cooplab run TASK'), got {raw['args']!r}"
        )
    grid = raw.get("grid", {})
    if not isinstance(grid, dict):
        raise ConfigError(f'{where}: grid must be an object {{"--option": [values, ...]}}, got {grid!r}')
    for opt, values in grid.items():
        if not opt.startswith("-") or (" " in opt.strip() and not (opt.startswith("--set ") and len(opt.split()) == 2)):
            raise ConfigError(
                f'{where}: grid keys are options of \'cooplab run TASK\' such as "--pk", or "--set NAME"; got {opt!r}'
            )
        if not isinstance(values, list) or not values:
            raise ConfigError(f"{where}: grid {opt} must be a non-empty list of values, got {values!r}")
        for v in values:
            if (
                isinstance(v, bool)
                or not isinstance(v, str | int | float)
                or (isinstance(v, float) and not math.isfinite(v))
            ):
                raise ConfigError(f"{where}: grid {opt}: every value must be a string or a finite number, got {v!r}")
    check_seeds(where, raw.get("seeds", [0]))
    if "parallel" in raw:
        check(f"{where}: parallel", raw["parallel"], "parallel")
    given = [a.split("=", 1)[0] for a in raw.get("args", []) if isinstance(a, str)] + list(grid)
    own = sorted(set(given) & _OWN)
    if own:
        raise ConfigError(
            f"{where}: {', '.join(own)} is set by the sweep for each cell; remove it from args/grid "
            '(use "seeds" and "out")'
        )


def load_args(raw: Any, where: str) -> TaskSweep:
    """A sweep file of the args format, checked (the task and the number of cells are checked on
    the converted grid, :func:`cooplab.runs.grid.load`)."""
    return read_earlier(TaskSweep, raw, where, see="docs/scale.md", check=_check_args_raw)


def _from_args(
    cfg: TaskSweep, where: str, convert_args: Callable[[str, list[str]], dict[str, Any]] | None
) -> dict[str, Any]:
    if convert_args is None:
        raise ConfigError(
            f'{where} names the options of \'cooplab run {cfg.task}\' ("args", "--option" grid keys): run it with '
            f'\'cooplab sweep\', or write the keywords: {{"task", "out", "fixed", "grid", "seeds"}} '
            "(docs/scale.md)"
        )
    fixed = convert_args(cfg.task, list(cfg.args))
    grid: dict[str, list[Any]] = {}
    for option, values in cfg.grid.items():
        if option.startswith("--set "):
            grid["set." + option.split(None, 1)[1]] = list(values)
            continue
        keys: list[str] = []
        converted = []
        for v in values:
            kw = convert_args(cfg.task, [option, v if isinstance(v, str) else str(v)])
            keys = list(kw)
            converted.append(kw[keys[0]] if keys else v)
        if len(keys) != 1:
            raise ConfigError(f"{where}: grid {option} is not one option of 'cooplab run {cfg.task}'")
        grid[keys[0]] = converted
    return formats.grid_sweep(cfg.task, cfg.out, fixed, grid, list(cfg.seeds), cfg.parallel)


#: the args format's converter (``convert(raw, where, convert_args=...)``)
ARGS_CONVERTER = Converter(
    "sweep file",
    "command-line options",
    "grid sweep",
    lambda raw, where, convert_args=None: _from_args(load_args(raw, where), where, convert_args),
)


def sweep_converter(raw: Any) -> Converter | None:
    """The converter of a sweep file's object when it is in an earlier format (None: the grid
    format): the args format, or a task's own (the task the file names is asked through its
    ``earlier_sweep`` hook, or every installed task when it names none)."""
    if not isinstance(raw, dict) or "fixed" in raw or "analysis" in raw:
        return None
    grid = raw.get("grid")
    if "task" in raw and ("args" in raw or (isinstance(grid, dict) and any(k.startswith("-") for k in grid))):
        return ARGS_CONVERTER
    from cooplab.runs import registry

    named = raw.get("task")
    for name in [named] if isinstance(named, str) else registry.names():
        task = registry.find(name)
        found = task.earlier_sweep(raw) if task is not None else None
        if isinstance(found, tuple):  # a plug-in written when the hook returned (name, convert)
            found = Converter("sweep file", found[0], "grid sweep", found[1], owner=name)
        if found is not None:
            return found
    return None


def convert_sweep(
    conv: Converter,
    raw: dict[str, Any],
    where: str,
    *,
    convert_args: Callable[[str, list[str]], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A sweep file of an earlier format as the grid format's JSON object (checked as before;
    one-line ConfigError)."""
    if conv == ARGS_CONVERTER:
        return conv.convert(raw, where, convert_args=convert_args)
    return conv.convert(raw, where)
