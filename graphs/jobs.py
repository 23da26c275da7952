"""What a world's many-run job (a calibration, a bench, a profile) needs from the engine, as interfaces:
the engine's :data:`cooplab.runs.engine.ENGINE` is both and is passed in by the caller (the command line,
or a user's script: ``from cooplab.runs.engine import ENGINE``), so the worlds, below the engine, never
import it.

``job`` describes one cell (a run directory and its config, or a function job ``fn``); ``run_jobs``
runs them (``local`` threads or Ray), skipping finished ones; ``write_manifest`` records the folder
(``manifest.json``, :class:`cooplab.graphs.runfiles.Manifest`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol

if TYPE_CHECKING:
    from cooplab.graphs.runfiles import ManifestKind


class Jobs(Protocol):
    """The job executor (:data:`cooplab.runs.engine.ENGINE`, or the module :mod:`cooplab.runs.sweeps`)."""

    def job(
        self,
        dir: Path | str,
        task: str,
        config: dict[str, Any],
        *,
        labels: dict[str, Any] | None = None,  # noqa: A002
        done: tuple[str, ...] = ...,
        fn: str | None = None,
    ) -> dict[str, Any]: ...

    def run_jobs(
        self,
        jobs: list[dict[str, Any]],
        *,
        parallel: int,
        noun: str,
        executor: str = ...,
        address: str | None = None,
        log: Callable[[str], None] = ...,
        quiet: bool = ...,
        budget: Any = None,
    ) -> dict[str, Any]: ...

    def write_manifest(
        self,
        folder: Path,
        kind: ManifestKind,
        task: str | None,
        jobs: list[dict[str, Any]],
        res: dict[str, Any] | None = None,
        *,
        outputs: dict[str, str] | None = None,
        counts: dict[str, int] | None = None,
    ) -> Any: ...


class Runs(Jobs, Protocol):
    """The job executor and single runs (:data:`cooplab.runs.engine.ENGINE`): ``start`` a task's run in
    an empty or new directory, ``resume`` one from its checkpoints, ``check_models`` of a run's config
    (raw JSON) before anything runs; a run that stops early raises ``RunStopped`` (Ctrl-C, a model
    that cannot be reached) or ``RunFailed``; ``run_grid`` runs a grid sweep (:mod:`cooplab.runs.grid`,
    the one runner of many runs: a game profile is one) and ``cell_names`` names its cells."""

    @property
    def RunStopped(self) -> type[BaseException]: ...  # noqa: N802 - the exception class's name

    @property
    def RunFailed(self) -> type[BaseException]: ...  # noqa: N802 - the exception class's name

    def start(self, task: Any, out: Path, config: dict[str, Any], *, quiet: bool = ...) -> Any: ...

    def resume(self, out: Path, *, quiet: bool = ..., warn: Callable[[str], None] | None = None) -> Any: ...

    def check_models(self, task: Any, config: dict[str, Any], flag: str) -> None: ...

    def run_grid(
        self,
        sweep: dict[str, Any],
        *,
        where: str = ...,
        config_of: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        kind: ManifestKind = ...,
        outputs: dict[str, str] | None = None,
        in_turn: bool = ...,
        executor: str = ...,
        log: Callable[[str], None] = ...,
        quiet: bool = ...,
        warn: Callable[[str], None] | None = None,
        announce: Callable[[dict[str, Any], str], None] | None = None,
    ) -> dict[str, Any]: ...

    def cell_names(self, sweep: dict[str, Any], where: str = ...) -> dict[str, dict[str, Any]]: ...
