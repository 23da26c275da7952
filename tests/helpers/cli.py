"""Running the CLI in-process in tests."""

from __future__ import annotations

from cooplab.cli import main


def fail_line(capsys, argv: list[str]) -> str:
    """Run ``cooplab ARGV`` and return its error: exactly one ``cooplab: error:`` line, exit 2, no traceback."""
    code = main(argv)
    _, err = capsys.readouterr()
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("cooplab: error:"), (code, err)
    assert "Traceback" not in err
    return lines[0]
