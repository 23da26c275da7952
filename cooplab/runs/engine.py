"""The engine as a world's many-run command sees it (:class:`cooplab.graphs.jobs.Runs`): the job
executor of :mod:`cooplab.runs.sweeps` and single runs of :mod:`cooplab.runs.runner`. The worlds lie
below the engine and never import it; whoever starts a calibration, a bench or a profile (the command
line, a user's script) passes :data:`ENGINE` in::

    from cooplab.runs.engine import ENGINE
    from cooplab.tasks.games import profiles
    req = profiles.request(players="nash", simulations=4, engine=ENGINE)
    profiles.run_profile(profiles.prepare(out, req), req, engine=ENGINE)
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from cooplab.runs import sweeps

if TYPE_CHECKING:
    from cooplab.graphs.runfiles import ManifestKind


class Engine:
    """:class:`cooplab.graphs.jobs.Runs` over the engine's modules (loaded on first use: the runner
    brings LangGraph)."""

    job = staticmethod(sweeps.job)
    run_jobs = staticmethod(sweeps.run_jobs)
    write_manifest = staticmethod(sweeps.write_manifest)

    @property
    def RunStopped(self) -> type[BaseException]:  # noqa: N802 - the exception class's name
        from cooplab.runs.runner import RunStopped

        return RunStopped

    @property
    def RunFailed(self) -> type[BaseException]:  # noqa: N802 - the exception class's name
        from cooplab.runs.runner import RunFailed

        return RunFailed

    def start(self, task: Any, out: Path, config: dict[str, Any], *, quiet: bool = False) -> Any:
        """A new run of ``task`` in ``out`` (created; a finished run there is refused) with the raw ``config``."""
        from cooplab.runs import runner, store

        store.prepare_out(Path(out))
        return runner.start(task, Path(out), config, quiet=quiet)

    def resume(self, out: Path, *, quiet: bool = False, warn: Callable[[str], None] | None = None) -> Any:
        """Continue the run in ``out`` from its last checkpoint."""
        from cooplab.runs import runner

        return runner.resume(Path(out), quiet=quiet, warn=warn)

    def run_grid(
        self,
        sweep: dict[str, Any],
        *,
        where: str = "sweep",
        config_of: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        kind: ManifestKind = "sweep",
        outputs: dict[str, str] | None = None,
        in_turn: bool = False,
        executor: str = "local",
        log: Callable[[str], None] = lambda s: None,
        quiet: bool = True,
        warn: Callable[[str], None] | None = None,
        announce: Callable[[dict[str, Any], str], None] | None = None,
    ) -> dict[str, Any]:
        """Run a grid sweep given as its JSON object (:mod:`cooplab.runs.grid`: checked, one-line
        ConfigError naming ``where``) and return its result; ``config_of(labels)`` builds a cell's
        config.json object, ``kind``, ``outputs``, ``in_turn``, ``executor``, ``warn``, ``announce`` as
        :func:`cooplab.runs.grid.run` takes them."""
        from cooplab.runs import grid

        sw = grid.load(sweep, where)
        todo = grid.jobs(sw, where, config_of=config_of)
        return grid.run(
            sw,
            todo,
            executor=executor,
            log=log,
            quiet=quiet,
            kind=kind,
            outputs=outputs,
            in_turn=in_turn,
            warn=warn,
            announce=announce,
        )

    def cell_names(self, sweep: dict[str, Any], where: str = "sweep") -> dict[str, dict[str, Any]]:
        """The cells of a grid sweep given as its JSON object: name -> labels (nothing runs)."""
        from cooplab.runs import grid

        return {c["name"]: c["labels"] for c in grid.cells(grid.load(sweep, where))}

    def check_models(self, task: Any, config: dict[str, Any], flag: str) -> None:
        """The models of an LLM run's raw ``config`` (``seed``, ``params``, ``llm``), checked before
        anything runs (scripted models answer every phase; other models reachable); a one-line
        ConfigError naming ``flag``."""
        from cooplab.agents.settings import LLMSettings
        from cooplab.limits import flags
        from cooplab.runs.config import RunConfig, check_run_models, task_params

        rc = RunConfig(
            task=task.name,
            agents="llm",
            seed=config["seed"],
            params=task_params(task, config["params"], "llm", flags()),
            llm=LLMSettings.model_validate(config["llm"]),
        )
        check_run_models(task, rc, lambda who, field: flag)


#: the engine, for :class:`cooplab.graphs.jobs.Runs` and :class:`~cooplab.graphs.jobs.Jobs` parameters
ENGINE = Engine()
