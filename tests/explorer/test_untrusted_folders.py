"""A shared run folder is data, never trusted (issue 37, points 7 and 10): a folder whose name is not
UTF-8 is listed and opens, a file that is a symbolic link leaving its run folder is never read, a
Parquet table whose footer (or decoded text) asks for more memory than allowed is refused in one line
naming the file, and a path or model name that is not UTF-8 is handled or refused before any work."""

from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path
from urllib.parse import urlencode

import httpx
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import cooplab
from cooplab.evals.explorer.app import serve, stop
from cooplab.evals.report import write_report
from cooplab.graphs import rundir
from cooplab.runs.registry import find  # the explorer's task lookup, as the command line passes it
from tests.explorer.conftest import SCRIPTED
from tests.helpers.cli import fail_line
from tests.helpers.summaries import write_summary

SECRET = "the reader's own secret 7c1f"


def bytes_path(parent: Path, name: bytes) -> Path:
    """A path under ``parent`` whose last name is these bytes (not UTF-8), as Python names it."""
    return Path(os.fsdecode(os.path.join(os.fsencode(parent), name)))


def small_run(out: Path, task: str = "cpr") -> Path:
    out.mkdir(parents=True)
    (out / "config.json").write_text(
        json.dumps({"version": 2, "task": task, "agents": "rule", "seed": 0, "params": {}})
    )
    write_summary(out, task, rounds_completed=2)
    pd.DataFrame(
        {
            "condition": [0, 0],
            "replicate": [0, 0],
            "round": [1, 2],
            "R": [900.0, 800.0],
            "R_plus": [850.0, 700.0],
            "H": [50.0, 100.0],
        }
    ).to_parquet(open(out / "rounds.parquet", "wb"), index=False)
    return out


def bomb(path: Path, rows: int = 2000, text_bytes: int = 1 << 20) -> Path:
    """A Parquet file of ``rows`` rows whose text column is one ``text_bytes`` string, stored once in
    the dictionary: about ``text_bytes`` on disk, ``rows * text_bytes`` in memory once read."""
    col = pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows, dtype="int32")), pa.array(["x" * text_bytes]))
    pq.write_table(pa.table({"round": pa.array(range(rows)), "note": col}), path, store_schema=False)
    return path


def get(url: str, path: str, **q) -> httpx.Response:
    return httpx.get(url + path + ("?" + urlencode(q) if q else ""))


def test_a_folder_name_that_is_not_utf8_is_listed_and_opens(tmp_path):
    root = tmp_path / "runs"
    small_run(root / "fine")
    small_run(bytes_path(root, b"caf\xe9 \xff run"))
    server, url = serve([root], task_for=find)
    try:
        listing = get(url, "")
        assert listing.status_code == 200 and "fine" in listing.text
        assert "caf\\xe9 \\xff run" in listing.text  # its undecodable bytes written as \xNN
        hrefs = [html.unescape(h) for h in re.findall(r'href="(/run\?[^"]+)"', listing.text)]
        assert len(hrefs) == 2
        for h in hrefs:
            r = httpx.get(url + h.lstrip("/"))
            assert r.status_code == 200 and "could not be read" not in r.text and '<section id="lake">' in r.text, (
                r.text[-1500:]
            )
        assert get(url, "compare", a="0/fine", b="0/caf\\xe9 \\xff run").status_code == 200
    finally:
        stop(server)


def test_links_leaving_the_run_folder_are_never_read(tmp_path):
    outside = tmp_path / "home"
    outside.mkdir()
    (outside / "private.json").write_text(json.dumps({"task": "cpr", "status": SECRET}))
    pd.DataFrame(
        {"condition": [0], "replicate": [0], "round": [1], "R": [1.0], "R_plus": [1.0], "H": [1.0], "secret": [SECRET]}
    ).to_parquet(outside / "private.parquet")
    (outside / "private.jsonl").write_text(
        json.dumps(
            {
                "run_type": "llm",
                "name": "m",
                "inputs": {"messages": [[{"kwargs": {"type": "human", "content": SECRET}}]]},
                "outputs": {"generations": [[{"text": SECRET}]]},
            }
        )
        + "\n"
    )
    (outside / "pics").mkdir()
    (outside / "pics" / "private.svg").write_text(
        f'<svg xmlns="http://www.w3.org/2000/svg"><text>{SECRET}</text></svg>'
    )
    run = small_run(tmp_path / "runs" / "shared")
    (run / "summary.json").unlink()
    (run / "summary.json").symlink_to(outside / "private.json")
    (run / "rounds.parquet").unlink()
    (run / "rounds.parquet").symlink_to(outside / "private.parquet")
    (run / "agents.parquet").symlink_to("../../home/private.parquet")  # relative, through ..
    (run / "traces.jsonl").symlink_to(outside / "private.jsonl")
    (run / "figures").symlink_to(outside / "pics")
    (run / "checkpoints.sqlite").symlink_to(outside / "private.json")
    inner = run / "data.parquet"
    pd.DataFrame({"x": [1, 2]}).to_parquet(inner)
    (run / "same.parquet").symlink_to(inner)  # a link that stays inside the run folder is the run's file
    with pytest.raises(rundir.RunDirError, match="leads outside its run directory"):
        rundir.read_table(run, "rounds")
    assert rundir.read_table(run, "same")["x"].tolist() == [1, 2]
    server, url = serve([tmp_path / "runs"], task_for=find)
    try:
        for path, q in (
            ("", {}),
            ("run", {"id": "0/shared"}),
            ("traces", {"id": "0/shared"}),
            ("run", {"id": "0/shared", "round": "1"}),
        ):
            r = get(url, path, **q)
            assert r.status_code == 200 and SECRET not in r.text and "c2VjcmV0" not in r.text, (path, q)
        page = get(url, "run", id="0/shared").text
        assert (
            page.count("leads outside its run directory") >= 3
            and "checkpoints.sqlite leads outside the run folder" in page
        )
        assert "figures" not in re.findall(r'<nav class="toc">(.*?)</nav>', page)[0].lower()
    finally:
        stop(server)


def test_a_table_asking_for_gigabytes_is_refused_by_its_footer_in_one_line(tmp_path, monkeypatch):
    run = small_run(tmp_path / "runs" / "bomb")
    bomb(run / "decisions.parquet")  # about 1 MB on disk, 2 GB once read
    assert (run / "decisions.parquet").stat().st_size < 2 << 20
    with pytest.raises(rundir.RunDirError) as err:
        rundir.read_table(run, "decisions")
    line = str(err.value)
    assert "\n" not in line and str(run / "decisions.parquet") in line and "is not read" in line
    server, url = serve([tmp_path / "runs"], task_for=find)
    try:
        page = get(url, "run", id="0/bomb")
        assert page.status_code == 200 and "table decisions is not shown" in page.text and "xxxxxxxxxx" not in page.text
    finally:
        stop(server)
    info = write_report(
        run, tmp_path / "report.html", task_for=find
    )  # its first rows only, each cell cut: a page, not gigabytes
    assert info["bytes"] < 1 << 20 and "2,000 rows" in (tmp_path / "report.html").read_text()
    # the footer's rows x columns alone: refused before any value is read
    monkeypatch.setattr(rundir, "MAX_TABLE_CELLS", 10)
    with pytest.raises(rundir.RunDirError, match=r"holds 2 rows x 6 columns by its footer, over the 10 cells"):
        rundir.read_table(run, "rounds")


def test_a_run_in_a_folder_whose_name_is_not_utf8_completes_and_reports(tmp_path, capsys):
    out = bytes_path(tmp_path, b"r\xe9sultats")
    res = cooplab.run(task="cpr", agents="rule", rounds=2, n_agents=3, replicates=2, seed=0, out=out, quiet=True)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "completed" and "figure_error" not in summary, summary.get("figure_error")
    assert len(rundir.read_table(out, "rounds")) == 2 * 2 and res is not None
    page = bytes_path(tmp_path, b"rapport-\xe9.html")
    assert write_report(out, page, task_for=find)["problems"] == [] and page.is_file()
    # the command line refuses such a name in one line, before any work (it would print it after the work)
    later = bytes_path(tmp_path, b"autre-\xe9")
    line = fail_line(capsys, ["run", "cpr", "--rounds", "2", "--out", str(later)])
    assert "autre-\\xe9' is not UTF-8" in line and not later.exists()
    assert "is not UTF-8" in fail_line(capsys, ["report", str(out)])


def test_a_model_name_that_is_not_utf8_is_one_line_before_any_work(tmp_path, capsys):
    script = bytes_path(tmp_path, b"m\xe9.json")
    script.write_bytes((SCRIPTED / "cautious.json").read_bytes())
    out = tmp_path / "never"
    line = fail_line(
        capsys, ["run", "cpr", "--agents", "llm", "--model", f"scripted:{script}", "--rounds", "2", "--out", str(out)]
    )
    assert "is not UTF-8" in line and "m\\xe9.json" in line
    assert not out.exists()


def test_tables_read_without_pyarrow_keep_the_bounds(tmp_path, monkeypatch):
    """The light core has fastparquet and no pyarrow: tables still read, and a footer over the bound
    is refused in one line before any value is decoded."""
    import sys

    import pandas as pd

    df = pd.DataFrame({"agent": ["0", "1", "2"], "harvest": [1.5, 2.0, 0.25], "text": ["a", "bb", "ccc"]})
    df.to_parquet(tmp_path / "decisions.parquet", engine="fastparquet", index=False)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)  # import pyarrow.parquet -> ImportError
    back = rundir.read_table(tmp_path, "decisions")
    assert back["harvest"].tolist() == [1.5, 2.0, 0.25] and back["text"].tolist() == ["a", "bb", "ccc"]
    monkeypatch.setattr(rundir, "MAX_TABLE_CELLS", 5)
    with pytest.raises(rundir.RunDirError) as err:
        rundir.read_table(tmp_path, "decisions")
    assert "3 rows x 3 columns" in str(err.value) and "\n" not in str(err.value)
