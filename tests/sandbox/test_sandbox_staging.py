"""The sandbox cannot see where the dataset lives on the host (issue 29, item 2):
the container's mount table shows a neutral staging path, not the user's
directory layout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import TypedDict

import pytest

from cooplab.sandbox import SandboxConfig, SandboxSession, docker_backend


class Limits(TypedDict):
    """The SandboxConfig limits these tests shorten."""

    timeout: float
    interrupt_grace: float


FAST = Limits(timeout=10.0, interrupt_grace=1.0)
MARK = "alice-grant-proposal-7f3e9"  # a directory name that must not reach the sandbox


@pytest.fixture
def private_dataset(tmp_path):
    d = tmp_path / MARK / "confidential"
    d.mkdir(parents=True)
    p = d / "cells.csv"
    p.write_text("a,b\n1,2\n3,4\n")
    os.chmod(p, 0o644)
    return p


@pytest.mark.docker
@pytest.mark.parametrize("how", ["link", "copy"])
def test_mount_table_does_not_show_the_dataset_s_host_path(docker_ready, private_dataset, monkeypatch, how):
    if how == "copy":  # as across file systems, where a hard link is impossible

        def no_link(src, dst, *a, **k):
            raise OSError(18, "Invalid cross-device link")

        monkeypatch.setattr(os, "link", no_link)
    with SandboxSession(SandboxConfig(dataset=private_dataset, **FAST), backend="docker") as s:
        r = s.run_code(
            "(open('/proc/self/mountinfo').read() + open('/proc/self/mounts').read(),"
            " df.shape, open('/data/cells.csv').read())"
        )
        assert r.status == "ok" and r.result is not None, r
        tables, shape, text = eval(r.result)
    assert shape == (2, 2) and text == private_dataset.read_text()
    assert "/data/cells.csv" in tables  # the mount is there...
    for part in (MARK, "confidential", str(private_dataset.parent), str(private_dataset.parents[2])):
        assert part not in tables, part  # ...but not where it comes from


def test_staging_is_shared_per_file_version_and_swept_when_its_owner_is_gone(private_dataset, tmp_path):
    first = docker_backend.staged_dataset(private_dataset)
    assert first.name == "cells.csv" and MARK not in str(first)
    assert first.read_text() == private_dataset.read_text()
    assert docker_backend.staged_dataset(private_dataset) == first  # reused by later sandboxes
    assert (first.parents[1].stat().st_mode & 0o777) == 0o700  # no other local user can reach it
    private_dataset.write_text("a,b\n5,6\n")  # a new version gets its own staged file
    second = docker_backend.staged_dataset(private_dataset)
    assert second.read_text() == "a,b\n5,6\n"
    # a staging directory whose owner was killed is removed by the next process that stages
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    ).stdout.strip()
    stale = tmp_path / (docker_backend.STAGING_PREFIX + "stale")
    (stale / "x").mkdir(parents=True)
    (stale / "x" / "cells.csv").write_text("old")
    owner = dict(docker_backend.OWNER, **{"cooplab.sandbox.pid": dead})
    (stale / docker_backend.STAGING_OWNER).write_text(json.dumps(owner))
    live = tmp_path / (docker_backend.STAGING_PREFIX + "live")
    live.mkdir()
    (live / docker_backend.STAGING_OWNER).write_text(json.dumps(docker_backend.OWNER))
    assert docker_backend.sweep_staging(tmp_path) == [stale]
    assert not stale.exists() and live.exists()
