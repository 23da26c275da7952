"""The synchronous API where an event loop already runs (a Jupyter kernel, an ``async def`` script):
``cooplab.run`` / ``resume`` / ``sweep`` and the science judge work there for every task, leave
no coroutine unawaited, stop at a checkpoint on Ctrl-C; a run that fails before its first
checkpoint says to start again (never to resume); errors raised in Python name keywords, the
command line flags (issue 38, item 1)."""

from __future__ import annotations

import asyncio
import gc
import importlib
import json
import signal
import sys
import threading
import warnings
from pathlib import Path

import pytest

import cooplab
from cooplab.graphs.aio import run_sync
from cooplab.graphs.society import insert_phase
from cooplab.runs.store import RunDirError
from cooplab.tasks.cpr.task import CPRTask

ROOT = Path(__file__).resolve().parents[2]
CAUTIOUS = ROOT / "examples" / "scripted" / "cautious.json"


def in_a_loop(fn):
    """``fn()`` called from inside a running event loop (as a notebook cell runs), with every
    warning recorded; (its result, the warnings)."""

    async def cell():
        return fn()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = asyncio.run(cell())
        gc.collect()  # an unawaited coroutine warns when it is collected
    return result, [str(w.message) for w in caught]


def never_awaited(messages: list[str]) -> list[str]:
    return [m for m in messages if "never awaited" in m]


def script(path: Path, by_phase: dict) -> Path:
    path.write_text(
        json.dumps({"select": "prompt_hash", "by_phase": {k: [json.dumps(a) for a in v] for k, v in by_phase.items()}})
    )
    return path


def ultimatum():
    sys.path.insert(0, str(ROOT / "examples" / "ultimatum"))
    try:
        TASK = importlib.import_module("cooplab_ultimatum").TASK  # examples/ultimatum, on sys.path just now
    finally:
        sys.path.remove(str(ROOT / "examples" / "ultimatum"))
    return cooplab.register_task(TASK, replace=True)


def configs(tmp_path: Path) -> dict[str, dict]:
    """One small LLM run of every task (the example plug-in's included) as keywords of cooplab.run."""
    diners = script(
        tmp_path / "diners.json",
        {"order": [{"meal": "budget"}], "punish": [{"punish": []}], "metanorm": [{"punish": []}]},
    )
    game = script(tmp_path / "game.json", {"extract": [{"extract": 5}]})
    return {
        "cpr": dict(task="cpr", agents="llm", model=f"scripted:{CAUTIOUS}", n_agents=3, rounds=2),
        "diners": dict(task="diners", agents="llm", model=f"scripted:{diners}", combination=1, iterations=1),
        "game": dict(task="game", game="cpr", players="llm", model=f"scripted:{game}", simulations=1),
        "science": dict(
            config=cooplab.RunConfig(
                task="science",
                agents="llm",
                options={"task": "anomaly", "team": "oracle"},
                sandbox=cooplab.SandboxSettings(backend="local"),
            )
        ),
        "ultimatum": dict(
            task="ultimatum",
            agents="llm",
            model=f"scripted:{ROOT / 'examples' / 'ultimatum' / 'scripted.json'}",
            set={"rounds": 2, "replicates": 1},
        ),
    }


def judge_file(tmp_path: Path) -> Path:
    from cooplab.evals.scoring.sections import SECTIONS

    verdict = {
        "completeness": 5,
        "completeness_rationale": "All there.",
        "sections": {s: True for s in SECTIONS},
        "quality": 4,
        "quality_rationale": "Tests are reported.",
        "accuracy": 3,
        "accuracy_rationale": "Most facts match.",
    }
    return script(tmp_path / "judge.json", {"judge": [verdict]})


@pytest.mark.parametrize("name", ["cpr", "diners", "game", "science", "ultimatum"])
def test_run_and_resume_of_every_task_work_inside_a_running_event_loop(tmp_path, name):
    from cooplab.tasks.science.judging import judge_run

    if name == "ultimatum":
        ultimatum()
    kw = configs(tmp_path)[name]
    config = kw.pop("config", None)
    out = tmp_path / "run"

    def cell():
        run = (
            cooplab.run(config, out=out, cache="off", quiet=True, **kw)
            if config is None
            else cooplab.run(config, out=out, quiet=True)
        )
        (out / "summary.json").unlink()  # as if it had been interrupted before its end
        again = cooplab.resume(out, quiet=True)
        scored = (
            judge_run(out, f"scripted:{judge_file(tmp_path)}", k=1) if name == "science" else None
        )  # the judge's own loop
        return run, again, scored

    (run, again, scored), messages = in_a_loop(cell)
    assert run.status == "completed", run.summary.get("message")
    assert again.status == "completed" and again.summary["ledger"]["calls"] == run.summary["ledger"]["calls"] > 0
    assert not (out / "error.log").exists()
    assert not never_awaited(messages), messages
    if name == "science":
        assert scored is not None
        assert scored["completeness"] == 1.0 and scored["ledger"]["calls"] == 1


def test_a_sweep_works_inside_a_running_event_loop(tmp_path):
    def cell():
        return cooplab.sweep(
            "cpr",
            out=tmp_path / "sw",
            grid={"rounds": [1, 2]},
            seeds=[0],
            analysis=False,
            agents="llm",
            model=f"scripted:{CAUTIOUS}",
            n_agents=2,
            cache="off",
        )

    rows, messages = in_a_loop(cell)
    assert list(rows["status"]) == ["completed", "completed"]
    assert not never_awaited(messages), messages


def test_async_twins_run_resume_and_sweep(tmp_path):
    kw = dict(task="cpr", agents="llm", model=f"scripted:{CAUTIOUS}", n_agents=2, rounds=1, cache="off", quiet=True)

    async def main():
        run = await cooplab.arun(out=tmp_path / "a", **kw)
        again = await cooplab.aresume(tmp_path / "a", quiet=True)
        rows = await cooplab.asweep(
            "cpr",
            out=tmp_path / "sw",
            grid={"n_agents": [2]},
            seeds=[0],
            analysis=False,
            **{k: v for k, v in kw.items() if k not in ("task", "quiet", "n_agents")},
        )
        return run, again, rows

    run, again, rows = asyncio.run(main())
    assert run.status == again.status == "completed" and list(rows["status"]) == ["completed"]


# --- Ctrl-C --------------------------------------------------------------------------------------
@pytest.fixture(autouse=True)
def ctrl_c_raises():
    """Ctrl-C raises KeyboardInterrupt in these tests, as in a kernel, also when the test runner was
    started in the background (a shell starts background jobs with SIGINT ignored)."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def interrupt_main_when(ready: threading.Event) -> threading.Thread:
    """A thread that sends SIGINT to the main thread once ``ready`` is set (as Jupyter's "interrupt
    the kernel" does)."""
    main = threading.main_thread().ident
    assert main is not None  # the main thread has started

    def go():
        if ready.wait(timeout=300):
            signal.pthread_kill(main, signal.SIGINT)

    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t


def test_ctrl_c_while_waiting_cancels_the_coroutine_on_its_loop_and_raises_in_the_caller():
    started, cancelled = threading.Event(), threading.Event()

    async def forever():
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def cell():
        return run_sync(forever)

    interrupt_main_when(started)
    loop = (
        asyncio.new_event_loop()
    )  # like ipykernel's: no Ctrl-C handler of asyncio's own, so KeyboardInterrupt is raised
    try:
        with pytest.raises(KeyboardInterrupt):
            loop.run_until_complete(cell())
    finally:
        loop.close()
    assert cancelled.is_set()


class Gated(CPRTask):
    """CPR whose round 2 waits (after the harvest) until cancelled, while the gate is closed."""

    name = "cpr-gated-test"
    reached = threading.Event()
    closed = True

    def phases(self, config):
        async def gate(state):
            if Gated.closed and int(state["round"]) == 2:
                Gated.reached.set()
                await asyncio.Event().wait()
            return {}

        return insert_phase(super().phases(config), "gate", gate, after="harvest")


def test_ctrl_c_under_asyncio_run_stops_a_run_at_its_checkpoint_and_resume_finishes_it(tmp_path):
    cooplab.register_task(Gated, replace=True)
    out = tmp_path / "run"
    kw = dict(
        task="cpr-gated-test", agents="llm", model=f"scripted:{CAUTIOUS}", n_agents=2, rounds=3, cache="off", quiet=True
    )
    interrupt_main_when(Gated.reached)
    with pytest.raises(
        KeyboardInterrupt
    ):  # asyncio.run's handler cancels the cell's task; the run is cancelled on its loop
        in_a_loop(lambda: cooplab.run(out=out, **kw))
    assert not (out / "summary.json").exists() and not (out / "error.log").exists()
    Gated.closed = False
    again, messages = in_a_loop(lambda: cooplab.resume(out, quiet=True))
    assert again.status == "completed" and again.rounds["round"].max() == 3
    assert not never_awaited(messages)


# --- what a failure says -------------------------------------------------------------------------
class Broken(CPRTask):
    """CPR whose run fails before its first checkpoint."""

    name = "cpr-broken-test"

    def prepare_run(self, config, out):
        raise RuntimeError("the disk is full")


def test_a_failure_before_the_first_checkpoint_says_to_start_again_in_the_callers_words(tmp_path):
    from cooplab.runs.runner import RunFailed

    cooplab.register_task(Broken, replace=True)
    kw = dict(
        task="cpr-broken-test",
        agents="llm",
        model=f"scripted:{CAUTIOUS}",
        n_agents=2,
        rounds=2,
        cache="off",
        quiet=True,
    )
    with pytest.raises(RunFailed) as err:
        in_a_loop(lambda: cooplab.run(out=tmp_path / "py", **kw))
    text = str(err.value)
    assert "the disk is full" in text and f"cooplab.run(..., out={str(tmp_path / 'py')!r}, force=True)" in text, text
    assert (
        "nothing to resume" in text
        and "cooplab.resume" not in text
        and "cooplab resume" not in text
        and "--" not in text
    )
    assert json.loads((tmp_path / "py" / "summary.json").read_text())["status"] == "failed"
    with pytest.raises(RunDirError, match="nothing to resume"):
        cooplab.resume(tmp_path / "py")
    # the engine below the API (what the command line prints) says it in the command line's words
    from cooplab.runs import api

    with pytest.raises(RunFailed) as err:
        api.run.in_cli_words(out=tmp_path / "cli", **kw)
    assert f"'cooplab run ... --out {tmp_path / 'cli'} --force'" in str(err.value) and "cooplab resume" not in str(
        err.value
    )


@pytest.mark.parametrize(
    "kw, said, not_said",
    [
        ({"seed": -1}, "seed must be an integer in 0..", "--seed"),
        ({"n_agents": 1}, "n_agents must be an integer in 2..100000", "--n-agents"),
        ({"replicates": 100_000, "n_agents": 1000}, "replicates x n_agents must be at most", "--replicates"),
        ({"set": {"nope": 1}}, "unknown parameter 'nope' in set", "--set"),
        ({"agent_models": {7: "local"}, "n_agents": 3}, "agent_models[7]", "--agent-model"),
        ({"price_in": -1}, "price_in must be a finite number", "--price-in"),
    ],
)
def test_errors_raised_in_python_name_keywords_not_flags(tmp_path, kw, said, not_said):
    with pytest.raises(cooplab.ConfigError) as err:
        cooplab.run(task="cpr", agents="llm", model=f"scripted:{CAUTIOUS}", out=tmp_path / "r", **kw)
    assert said in str(err.value) and not_said not in str(err.value), str(err.value)


def test_a_run_directory_in_use_names_force_and_resume_as_python_calls(tmp_path):
    cooplab.run(task="diners", out=tmp_path / "d", replicates=2, iterations=1, quiet=True)
    with pytest.raises(RunDirError) as err:
        cooplab.run(task="diners", out=tmp_path / "d", replicates=2, iterations=1, quiet=True)
    assert str(err.value) == (
        f"{tmp_path / 'd'} already holds a run; pass force=True to overwrite it or "
        f"cooplab.resume({str(tmp_path / 'd')!r}) to continue it"
    )
