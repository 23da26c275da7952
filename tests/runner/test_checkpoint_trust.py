"""A crafted checkpoints.sqlite never runs code (issue 37, point 1).

LangGraph's default serializer rebuilds a stored extension ``(module, name, args)`` by importing
``module`` and calling ``name``. Real run folders get objects planted in their real checkpoint
blobs (tests/helpers/planted.py): a shell command, a harmless-looking builtin, a cooplab function,
a path, an object array. Every place that reads a checkpoint (the explorer's page, ``cooplab
resume``, ``cooplab.resume``, a sweep re-running an interrupted cell, the serializer under the
whole-file check) refuses them in one line naming the run and the type, and no marker file is
ever created. Legitimate runs of every task still checkpoint and resume (their own resume tests).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import httpx
import pytest

import cooplab
from cooplab.graphs.checkpoint_serde import CheckpointRefused, CheckpointSerializer, scan
from tests.helpers.cli import fail_line
from tests.helpers.planted import payloads, plant

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "scripted" / "cautious.json"


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    """Clean runs to copy: a rule CPR run, an LLM CPR run (scripted) and a sweep of two cells."""
    base = tmp_path_factory.mktemp("made")
    cooplab.run(task="cpr", n_agents=3, rounds=3, replicates=2, seed=1, out=base / "rule", quiet=True)
    cooplab.run(
        task="cpr",
        agents="llm",
        model=f"scripted:{SCRIPT}",
        n_agents=3,
        rounds=2,
        seed=1,
        out=base / "llm",
        quiet=True,
        cache="off",
    )
    cooplab.sweep(
        "cpr", out=base / "sweep", grid={"rounds": [2, 3]}, seeds=[0], analysis=False, n_agents=3, replicates=2
    )
    return base


def copy(made: Path, name: str, dest: Path) -> Path:
    shutil.copytree(made / name, dest, ignore=shutil.ignore_patterns(".cooplab.lock"))
    return dest


def no_markers(marker: Path) -> None:
    assert not list(marker.parent.glob(marker.name + "*")), "a planted object was built"


def state_of(run: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(run.iterdir()) if p.is_file() and p.name != ".cooplab.lock"}


PAYLOADS = list(payloads(Path("unused")))


@pytest.mark.parametrize("name", PAYLOADS)
def test_cooplab_resume_refuses_a_planted_object_in_one_line_and_runs_nothing(made, tmp_path, capsys, name):
    marker = tmp_path / "MARKER"
    run = copy(made, "rule", tmp_path / "run")
    value, shown = payloads(marker)[name]
    assert plant(run / "checkpoints.sqlite", value) > 0
    before = state_of(run)
    line = fail_line(capsys, ["resume", str(run), "-q"])
    assert (
        str(run) in line
        and shown in line
        and "cannot be trusted" in line
        and "nothing named in it was imported or run" in line
    )
    no_markers(marker)
    assert state_of(run) == before  # nothing changed


@pytest.mark.parametrize("where", ["first", "write"])
def test_an_object_anywhere_in_the_file_is_refused_before_any_checkpoint_is_read(made, tmp_path, capsys, where):
    """The oldest checkpoint (never part of the resumed state) and a pending write: the whole file is checked."""
    marker = tmp_path / "MARKER"
    run = copy(made, "llm", tmp_path / "run")
    value, shown = payloads(marker)["os.system"]
    assert plant(run / "checkpoints.sqlite", value, where=where) == 1
    line = fail_line(capsys, ["resume", str(run), "-q"])
    assert shown in line
    no_markers(marker)


def test_the_python_api_raises_one_line_and_runs_nothing(made, tmp_path):
    marker = tmp_path / "MARKER"
    run = copy(made, "llm", tmp_path / "run")
    plant(run / "checkpoints.sqlite", payloads(marker)["builtins.exec"][0])
    from cooplab.graphs.rundir import RunDirError

    with pytest.raises(RunDirError) as info:
        cooplab.resume(run, quiet=True)
    assert "\n" not in str(info.value) and "builtins.exec" in str(info.value) and str(run) in str(info.value)
    no_markers(marker)


@pytest.mark.parametrize("name", ["rule", "llm"])
def test_the_savers_themselves_refuse_when_the_file_check_is_skipped(made, tmp_path, capsys, monkeypatch, name):
    """Defence in depth: with the whole-file check switched off, the run's own checkpointer (sync
    SqliteSaver for rule runs, AsyncSqliteSaver for LLM runs) still refuses, in one line."""
    from cooplab.graphs import checkpoint_serde

    monkeypatch.setattr(checkpoint_serde, "scan", lambda *a, **k: None)
    marker = tmp_path / "MARKER"
    run = copy(made, name, tmp_path / "run")
    plant(run / "checkpoints.sqlite", payloads(marker)["cooplab.write_json"][0])
    line = fail_line(capsys, ["resume", str(run), "-q"])
    assert "cooplab.graphs.rundir.write_json" in line and str(run) in line
    no_markers(marker)
    assert not (run / "error.log").exists()


def test_a_sweep_rerunning_an_interrupted_cell_refuses_it_and_goes_on(made, tmp_path):
    marker = tmp_path / "MARKER"
    sweep = copy(made, "sweep", tmp_path / "sweep")
    cells = sorted((sweep / "cells").iterdir())
    victim = cells[0]
    (victim / "summary.json").unlink()  # interrupted: the sweep resumes it when run again
    plant(victim / "checkpoints.sqlite", payloads(marker)["os.system"][0])
    table = cooplab.sweep(
        "cpr", out=sweep, grid={"rounds": [2, 3]}, seeds=[0], analysis=False, n_agents=3, replicates=2
    )
    no_markers(marker)
    rows = {r["cell"]: r for r in table.to_dict("records")}
    assert rows[victim.name]["status"] == "failed" and "\n" not in rows[victim.name]["error"]
    assert "os.system" in rows[victim.name]["error"] and "cannot be trusted" in rows[victim.name]["error"]
    assert rows[cells[1].name]["status"] == "completed"  # the other cell is untouched
    assert not (victim / "summary.json").exists()


def test_the_explorer_page_shows_one_line_and_runs_nothing(made, tmp_path):
    from cooplab.cli.view import task_for
    from cooplab.evals.explorer.app import serve, stop

    marker = tmp_path / "MARKER"
    root = tmp_path / "runs"
    run = copy(made, "llm", root / "planted")
    plant(run / "checkpoints.sqlite", payloads(marker)["os.system"][0])
    plant(run / "checkpoints.sqlite", payloads(marker)["builtins.exec"][0], where="write")
    server, url = serve([root], task_for=task_for)
    try:
        res = httpx.get(
            url + "run", params={"id": "0/planted"}, headers={"Host": httpx.URL(url).netloc.decode()}, timeout=60
        )
    finally:
        stop(server)
    assert res.status_code == 200
    no_markers(marker)
    page = res.text
    line = "planted/checkpoints.sqlite is not shown: it holds a value of type os.system"
    assert line in page and "nothing named in it was imported or run" in page
    start = page.index(line)
    assert "\n" not in page[start : page.index("<", start)]  # one line
    assert (run / "checkpoints.sqlite").stat().st_size and not (
        run / "checkpoints.sqlite-wal"
    ).exists()  # opened read-only


# --- the serializer ------------------------------------------------------------------------------
def test_every_task_s_real_checkpoints_pass_the_whole_file_check(made):
    for name in ("rule", "llm", "sweep/cells/" + sorted(p.name for p in (made / "sweep" / "cells").iterdir())[0]):
        scan(made / name / "checkpoints.sqlite")


def test_the_serializer_round_trips_what_cooplab_stores_and_refuses_the_rest(tmp_path):
    from decimal import Decimal

    import numpy as np
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
    from langgraph.types import Send

    serde = CheckpointSerializer()
    values = {
        "a": np.arange(6, dtype=np.int8).reshape(2, 3),
        "f": np.ones((2, 2), order="F"),
        "b": np.array([True, False]),
        "m": [
            SystemMessage("s"),
            HumanMessage("h"),
            AIMessage("a", tool_calls=[{"name": "t", "args": {}, "id": "1"}]),
            ToolMessage("r", tool_call_id="1"),
        ],
        "send": Send("node", {"x": 1}),
        "set": {1, 2},
        "d": Decimal("0.1"),
    }
    back = serde.loads_typed(serde.dumps_typed(values))
    assert (
        np.array_equal(back["a"], values["a"]) and back["a"].dtype == np.int8 and np.array_equal(back["f"], values["f"])
    )
    assert (
        back["m"] == values["m"]
        and back["send"] == values["send"]
        and back["set"] == {1, 2}
        and back["d"] == Decimal("0.1")
    )
    for value, shown in payloads(tmp_path / "M").values():
        import ormsgpack

        with pytest.raises(CheckpointRefused, match=shown.replace("|", r"\|")):
            serde.loads_typed(("msgpack", ormsgpack.packb({"x": [1, {"y": value}]})))
    for kind in ("pickle", "json"):
        with pytest.raises(CheckpointRefused, match=kind):
            serde.loads_typed((kind, b"{}"))
    no_markers(tmp_path / "M")


def test_a_third_party_task_declares_its_own_types():
    import dataclasses

    @dataclasses.dataclass
    class Offer:
        amount: int

    Offer.__module__, Offer.__qualname__ = "thirdparty", "Offer"
    Offer.__name__ = "Offer"
    plain = CheckpointSerializer()
    blob = plain.dumps_typed({"o": Offer(3)})
    with pytest.raises(CheckpointRefused, match="thirdparty.Offer"):
        plain.loads_typed(blob)
    assert CheckpointSerializer([Offer]).loads_typed(blob) == {"o": Offer(3)}
