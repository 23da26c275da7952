"""RESULTS.md sections are replaced by their whole heading: a title ending in ')' is found again, and
a title that starts another section's heading does not take that section's place."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _results():
    spec = importlib.util.spec_from_file_location("bench_results_under_test", ROOT / "benchmarks" / "_results.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_section_is_replaced_by_its_whole_heading(tmp_path):
    r = _results()
    path = tmp_path / "RESULTS.md"
    path.write_text("# Benchmark results\n\n## CPR ABM speed (issue 41)\n\nspeed v1\n\n## CPR ABM\n\nabm v1\n")
    r.write_section("CPR ABM speed (issue 41)", "## CPR ABM speed (issue 41)\n\nspeed v2\n", path)
    r.write_section("CPR ABM", "## CPR ABM\n\nabm v2\n", path)
    text = path.read_text()
    assert text.count("## CPR ABM speed (issue 41)") == 1 and text.count("## CPR ABM\n") == 1
    assert "speed v2" in text and "abm v2" in text and "v1" not in text
