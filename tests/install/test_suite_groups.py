"""The suite's units of work (tests/conftest.py): two pytest-xdist workers may run two files at once,
so every file that starts Ray must be in the one "ray" group, and every file a group names must exist
(a renamed file would silently leave its group)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import SHARED_GROUPS, work_unit

TESTS = Path(__file__).resolve().parents[1]
#: what starts Ray in a test file: a private instance, a sweep or a bench on the Ray executor, `ray start`
STARTS_RAY = re.compile(r'ray\.init\(|executor="ray"|"--executor",\s*"ray"|bench_sweep\.py|\[RAY, "start"|import ray\b')
#: a file that hides Ray to test the missing-extra message starts nothing
HIDES_RAY = re.compile(r'hide\(monkeypatch, "ray"\)')


def test_every_file_of_a_group_exists():
    for group, files in SHARED_GROUPS.items():
        for f in files:
            assert (TESTS / f).is_file(), f"tests/conftest.py SHARED_GROUPS[{group!r}] names a missing file: {f}"


def test_every_file_that_starts_ray_is_in_the_ray_group():
    starts = set()
    for p in TESTS.rglob("test_*.py"):
        if p == Path(__file__).resolve():
            continue  # this file's own patterns
        text = p.read_text()
        if STARTS_RAY.search(text) and not HIDES_RAY.search(text):
            starts.add(p.relative_to(TESTS).as_posix())
    assert starts, "the pattern finds no file that starts Ray: it no longer matches how the tests do it"
    outside = starts - set(SHARED_GROUPS["ray"])
    assert not outside, f"files that start Ray outside the ray group (tests/conftest.py SHARED_GROUPS): {outside}"


def test_the_pattern_tells_a_ray_start_from_a_mention():
    assert STARTS_RAY.search('run(cfg, "--executor", "ray")') and STARTS_RAY.search("ray.init(address='local')")
    assert not STARTS_RAY.search("the Ray executor needs 'pip install cooplab[ray]'")


def test_a_test_runs_with_its_file_or_its_files_group():
    assert work_unit("tests/cpr/test_cpr_resume.py::test_x[a::b]") == "tests/cpr/test_cpr_resume.py"
    assert work_unit("tests/runner/test_sweep_executors.py::test_y") == "ray"
    assert work_unit("tests/science/test_bench.py::Test::test_z[1]") == "ray"
