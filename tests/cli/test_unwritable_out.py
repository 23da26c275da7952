"""Output into a folder that cannot take it (issue 29, item 21): ``cooplab report DIR --out`` into a
read-only folder or onto a full disk, and a run whose disk fills up. One line naming the path and
the system's reason; exit 2 for a read-only folder (the --out given), 1 for a full disk (the work
failed); never a claim that a file was written when it was not, and no temporary file left behind.

The file systems are real: a tmpfs mounted read-only, and a tiny tmpfs filled up, each in a mount
namespace of its own (``unshare``), so that nothing is mounted outside the test's processes.
"""

from __future__ import annotations

import errno
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from cooplab.cli import main
from cooplab.evals import report as report_mod

COOPLAB = str(Path(sys.executable).parent / "cooplab")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("run") / "rule"
    assert main(["run", "cpr", "--n-agents", "3", "--rounds", "2", "--out", str(out), "-q"]) == 0
    return out


def in_namespace(tmp_path: Path, mount: str, command: list[str]) -> tuple[int, str, str, list[str]]:
    """Run ``command`` in a new mount namespace after the shell lines ``mount`` (which set up
    ``tmp_path/mnt``); (its exit code, stdout, stderr, the names in tmp_path/mnt afterwards)."""
    mnt = tmp_path / "mnt"
    mnt.mkdir(exist_ok=True)
    io = {k: tmp_path / f"{k}.txt" for k in ("out", "err", "rc", "ls")}
    script = (
        f"set -e\n{mount}\nset +e\n{shlex.join(command)} >{io['out']} 2>{io['err']}\necho $? >{io['rc']}\n"
        f"ls -A {mnt} >{io['ls']}\n"
    )
    unshare = ["unshare", "--mount"] if os.geteuid() == 0 else ["unshare", "--map-root-user", "--mount"]
    setup = subprocess.run(
        [*unshare, "sh", "-c", script.replace("MNT", shlex.quote(str(mnt)))],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert setup.returncode == 0 and io["rc"].exists(), setup.stderr
    return (int(io["rc"].read_text()), io["out"].read_text(), io["err"].read_text(), io["ls"].read_text().split())


READ_ONLY = "mount -t tmpfs -o size=1m,ro tmpfs MNT"
FULL = "mount -t tmpfs -o size=64k tmpfs MNT\nhead -c 65536 /dev/zero > MNT/fill || true"


@pytest.mark.parametrize("out", ["r.html", "sub/r.html"])
def test_report_into_a_read_only_folder_is_one_line_exit_2(run_dir, tmp_path, out):
    target = tmp_path / "mnt" / out
    code, stdout, err, left = in_namespace(
        tmp_path, READ_ONLY, [COOPLAB, "report", str(run_dir), "--out", str(target), "--json"]
    )
    assert code == 2 and stdout == "", (code, stdout, err)
    assert err.count("\n") == 1 and err.startswith("cooplab: error: ") and "Read-only file system" in err, err
    assert str(target if out == "r.html" else target.parent) in err and "internal error" not in err
    assert left == []


def test_report_onto_a_full_disk_is_one_line_exit_1_and_writes_nothing(run_dir, tmp_path):
    target = tmp_path / "mnt" / "r.html"
    code, stdout, err, left = in_namespace(
        tmp_path, FULL, [COOPLAB, "report", str(run_dir), "--out", str(target), "--json"]
    )
    assert code == 1 and stdout == "", (code, stdout, err)  # no path, no JSON: nothing claims the page exists
    assert err == f"cooplab: error: cannot write {target}: No space left on device; nothing was written\n"
    assert left == ["fill"]  # neither the page nor its temporary file


def test_a_run_on_a_full_disk_never_names_a_summary_it_did_not_write(tmp_path):
    out = tmp_path / "mnt" / "run"
    code, stdout, err, left = in_namespace(
        tmp_path,
        FULL.replace("64k", "256k").replace("65536", "131072"),
        [COOPLAB, "run", "cpr", "--n-agents", "3", "--rounds", "2", "--out", str(out), "-q"],
    )
    assert code == 1 and err.count("\n") == 1 and "internal error" not in err, (code, err)
    # the namespace is gone with its tmpfs: what the run wrote is judged from the message and the listing
    assert (
        "summary.json could not be written (No space left on device)" in err and "summary.json has status" not in err
    ), err
    assert left == ["fill", "run"]


def test_a_failing_summary_write_is_reported_as_not_written(tmp_path, capsys, monkeypatch):
    """The runner's safety net, forced: the run fails, and so does every write of summary.json."""
    from cooplab.graphs import runfiles
    from cooplab.runs import runner, store

    real = store.write_json

    def write_json(path, obj):
        if Path(path).name == "summary.json":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(path, obj)

    def broken(*a, **k):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(store, "write_json", write_json)
    monkeypatch.setattr(runfiles, "write_json", write_json)  # summary.json is written through its schema
    monkeypatch.setattr(runner, "_execute_rule", broken)
    code = main(["run", "cpr", "--n-agents", "3", "--rounds", "2", "--out", str(tmp_path / "run"), "-q"])
    err = capsys.readouterr().err
    assert (
        code == 1 and "summary.json could not be written (No space left on device)" in err and "has status" not in err
    )
    assert not (tmp_path / "run" / "summary.json").exists() and not list((tmp_path / "run").glob("*.tmp"))


@pytest.mark.parametrize(
    "err_no,code", [(errno.EROFS, 2), (errno.EACCES, 2), (errno.ENOSPC, 1), (errno.EIO, 1), (errno.EDQUOT, 1)]
)
def test_report_write_errors_by_kind(run_dir, tmp_path, capsys, monkeypatch, err_no, code):
    """The page's write fails after the folder took the temporary file (a disk that fills up, an
    I/O error, a folder made read-only meanwhile): the exit code follows the kind of failure."""

    def failing(path, data, tmp=None):
        raise OSError(err_no, os.strerror(err_no))

    monkeypatch.setattr(report_mod.rundir, "write_atomic", failing)
    target = tmp_path / "r.html"
    assert main(["report", str(run_dir), "--out", str(target)]) == code
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and str(target) in err and os.strerror(err_no) in err
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # the temporary file claimed first is gone too


def test_write_atomic_leaves_the_old_file_and_no_temporary_on_failure(tmp_path, monkeypatch):
    from cooplab.graphs import rundir

    p = tmp_path / "summary.json"
    rundir.write_json(p, {"a": 1})

    def no_space(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(rundir.os, "fsync", no_space)
    with pytest.raises(OSError, match="No space left"):
        rundir.write_json(p, {"a": 2})
    assert json.loads(p.read_text()) == {"a": 1} and sorted(x.name for x in tmp_path.iterdir()) == ["summary.json"]
