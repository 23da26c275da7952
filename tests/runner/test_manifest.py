"""manifest.json of a folder of many runs (cooplab.graphs.runfiles.Manifest): written from a
sweep's jobs with each cell's status, read back, inferred for folders made before manifests, and
a damaged one is one line naming the file and the field."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cooplab.evals import report
from cooplab.graphs import runfiles
from cooplab.graphs.rundir import RunDirError
from cooplab.runs import sweeps

SUMMARIES = Path(__file__).parent / "data" / "summaries"


def cell(folder: Path, sub: str, name: str, summary: str | None = "cpr-rule") -> Path:
    d = folder / sub / name
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps({"task": "cpr"}))
    if summary:
        shutil.copy(SUMMARIES / f"{summary}.json", d / "summary.json")
    return d


def test_a_sweep_folder_s_manifest_has_each_cell_its_labels_and_status(tmp_path):
    a, b, c = (
        cell(tmp_path, "cells", n, s) for n, s in (("a__s0", "cpr-rule"), ("b__s0", None), ("c__s0", "cpr-failed"))
    )
    (c / "summary.json").write_text(json.dumps({**json.loads((c / "summary.json").read_text()), "seed": "x"}))
    (tmp_path / "table.csv").write_text("cell\n")
    jobs = [
        sweeps.job(d, "cpr", {}, labels={"population": p, "seed": 0})
        for d, p in ((a, "mixed"), (b, "selfish"), (c, "mixed"))
    ]
    m = sweeps.write_manifest(
        tmp_path,
        "sweep",
        "cpr",
        jobs,
        {"failed": [{"cell": "b__s0", "error": "RuntimeError: boom"}]},
        outputs={"table": "table.csv", "analysis": "analysis"},
    )
    back = runfiles.read_manifest(tmp_path)
    assert (
        back == m and back.kind == "sweep" and back.outputs == {"table": "table.csv"} and back.created and back.updated
    )
    got = {x.name: (x.dir, x.labels, x.status, x.error) for x in back.cells}
    assert got["a__s0"] == ("cells/a__s0", {"population": "mixed", "seed": 0}, "completed", None)
    assert got["b__s0"] == ("cells/b__s0", {"population": "selfish", "seed": 0}, None, "RuntimeError: boom")
    assert (
        got["c__s0"][2] is None
        and got["c__s0"][3] == f'{c / "summary.json"}: seed: Input should be a valid integer (got "x")'
    )
    assert runfiles.manifest_of(tmp_path) == back
    assert [p.name for _, p in back.runs(tmp_path)] == ["a__s0", "b__s0", "c__s0"]


@pytest.mark.parametrize(
    "layout, files, kind, task",
    [
        ("cells", [], "sweep", None),
        ("runs", [], "sweep", None),
        ("games", ["profile.json"], "profile", "game"),
        ("items", ["bench.json"], "bench", "science"),
    ],
)
def test_folders_made_before_manifests_are_inferred(tmp_path, layout, files, kind, task):
    cell(tmp_path, layout, "one")
    cell(tmp_path, layout, "two", None)
    (tmp_path / layout / "not-a-run").mkdir()
    for f in files:
        (tmp_path / f).write_text("{}")
    m = runfiles.manifest_of(tmp_path)
    assert m is not None
    assert (m.kind, m.task, m.inferred) == (kind, task, True)
    assert [(c.name, c.dir) for c in m.cells] == [("one", f"{layout}/one"), ("two", f"{layout}/two")]
    assert runfiles.manifest_of(tmp_path / layout / "one") is None  # a run directory is not a folder of many


@pytest.mark.parametrize(
    "change, says",
    [
        (lambda m: m.update(kind="zoo"), "kind: Input should be 'sweep', 'profile', 'bench' or 'calibration'"),
        (lambda m: m["cells"][0].update(dir="../../etc"), "cells.0.dir: must be a path inside the folder"),
        (lambda m: m["cells"][0].update(dir="/etc"), "cells.0.dir: must be a path inside the folder"),
        (lambda m: m["cells"][0].update(status="great"), "cells.0.status"),
        (lambda m: m["cells"][0].update(labels={"x": float("nan")}), "cells.0.labels.x"),
        (lambda m: m["cells"].append(dict(m["cells"][0])), "two cells are named"),
        (lambda m: m.update(version=7), "version 7 is not one this cooplab reads"),
        (lambda m: m.update(cells="x"), "cells: Input should be a valid list"),
        (lambda m: m["counts"].update(samples=-1), "counts.samples"),
    ],
)
def test_a_damaged_manifest_is_one_line(tmp_path, change, says):
    d = cell(tmp_path, "cells", "a")
    sweeps.write_manifest(tmp_path, "sweep", "cpr", [sweeps.job(d, "cpr", {})], counts={"samples": 1})
    raw = json.loads((tmp_path / "manifest.json").read_text())
    change(raw)
    (tmp_path / "manifest.json").write_text(json.dumps(raw))
    with pytest.raises(RunDirError) as got:
        runfiles.read_manifest(tmp_path)
    line = str(got.value)
    assert "\n" not in line and line.startswith(f"{tmp_path / 'manifest.json'}: ") and says in line, line
    with pytest.raises(report.ReportError) as rep:  # cooplab report says the same line, before any work
        report.detect(tmp_path)
    assert str(rep.value) == line
