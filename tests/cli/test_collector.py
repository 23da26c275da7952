"""The console script sets the cyclic garbage collector of its own process (``cooplab._entry``,
``COOPLAB_GC``); Python's library leaves the user's collector alone (tests/evals/test_user_state_untouched.py)."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import tempfile

import pytest

from cooplab._entry import GC_THRESHOLDS, tune_collector

PROBE = """
import atexit, gc, json, runpy, sys
atexit.register(lambda: sys.stderr.write("\\nTHRESHOLDS " + json.dumps(gc.get_threshold()) + "\\n"))
sys.argv[0] = "cooplab"
if "{module}" == "cooplab.cli":  # python -m cooplab.cli
    runpy.run_module("cooplab.cli", run_name="__main__")
else:  # the console script
    from cooplab._entry import entry
    entry()
"""


def thresholds_of(args: list[str], env_value: str | None, module: str = "cooplab._entry") -> tuple[int, str, list]:
    env = {k: v for k, v in os.environ.items() if k != "COOPLAB_GC"}
    if env_value is not None:
        env["COOPLAB_GC"] = env_value
    p = subprocess.run(
        [sys.executable, "-c", PROBE.format(module=module), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tempfile.gettempdir(),
        env=env,
    )
    line = next(ln for ln in p.stderr.splitlines() if ln.startswith("THRESHOLDS "))
    rest = "\n".join(ln for ln in p.stderr.splitlines() if ln.strip() and not ln.startswith("THRESHOLDS "))
    return p.returncode, p.stdout + rest, json.loads(line[len("THRESHOLDS ") :])


@pytest.fixture
def own_thresholds():
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*saved)


def test_python_s_thresholds_are_not_cooplab_s():
    assert GC_THRESHOLDS != (700, 10, 10) and GC_THRESHOLDS[0] > 700


@pytest.mark.parametrize(
    "value, expected",
    [
        (None, GC_THRESHOLDS),
        ("", GC_THRESHOLDS),
        (" ", GC_THRESHOLDS),
        ("python", (700, 10, 10)),
        ("Python ", (700, 10, 10)),
        ("1000, 5, 5", (1000, 5, 5)),
        ("0,10,10", (0, 10, 10)),
    ],
)
def test_the_setting_sets_the_thresholds(own_thresholds, value, expected):
    assert tune_collector(value) is None
    assert gc.get_threshold() == expected


@pytest.mark.parametrize(
    "value",
    ["1,2", "1,2,3,4", "a,b,c", "-1,2,3", "1e3,1,1", "1.5,1,1", "\u0663,1,1", "9999999999,1,1", "off", "x" * 500],
)
def test_a_bad_setting_is_one_line_and_changes_nothing(own_thresholds, value):
    err = tune_collector(value)
    assert err is not None and "\n" not in err and "COOPLAB_GC" in err and "python" in err and len(err) < 300
    assert gc.get_threshold() == (700, 10, 10)


@pytest.mark.parametrize("module", ["cooplab._entry", "cooplab.cli"])
def test_the_console_script_sets_its_own_collector(module):
    code, out, got = thresholds_of(["--version"], None, module)
    assert code == 0 and "cooplab" in out
    assert tuple(got) == GC_THRESHOLDS
    code, _, got = thresholds_of(["--version"], "python", module)
    assert code == 0 and tuple(got) == (700, 10, 10)
    code, _, got = thresholds_of(["--version"], "2000,11,12", module)
    assert code == 0 and tuple(got) == (2000, 11, 12)


def test_a_bad_setting_stops_the_console_script_before_any_work(tmp_path):
    out = tmp_path / "run"
    code, text, got = thresholds_of(["run", "cpr", "--replicates", "1", "--rounds", "2", "--out", str(out)], "fast")
    assert code == 2 and text.startswith("cooplab: error: COOPLAB_GC='fast'") and len(text.splitlines()) == 1
    assert tuple(got) == (700, 10, 10) and not out.exists()


def test_a_sweep_job_s_collector_is_set_only_from_three_whole_numbers_in_range():
    """A Ray worker takes a job's ``gc`` (cooplab.runs.sweeps) by the rule COOPLAB_GC follows
    (cooplab.limits.gc_thresholds); a job is data, so anything else leaves the worker's collector alone."""
    from cooplab.runs.sweeps import _collector_of

    before = gc.get_threshold()
    try:
        for hostile in (["50000", "20", "20"], [True, 1, 1], [10**9, 1, 1], [-1, 1, 1], [1, 2], [1.0, 2, 3], None, {}):
            gc.set_threshold(*before)
            _collector_of(hostile)
            assert gc.get_threshold() == before, hostile
        _collector_of([1234, 5, 6])
        assert gc.get_threshold() == (1234, 5, 6)
    finally:
        gc.set_threshold(*before)
