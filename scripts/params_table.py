"""Write tasks/cpr/params_table.json: what ``cooplab params cpr`` prints, with and without ``--json``.

The console script prints that file for these two exact commands without loading Typer or pydantic
(cooplab/_entry.py). Run this after changing the CPR parameters, their meanings or their sources;
tests/cli/test_startup.py fails while the file and the parameters disagree.

    .venv/bin/python scripts/params_table.py
"""

from __future__ import annotations

import json
from pathlib import Path

import cooplab.tasks.cpr as cpr
from cooplab.cli.cpr import params_output


def table() -> dict[str, str]:
    return {"text": params_output(None, False), "json": params_output(None, True)}


def main() -> None:
    path = Path(cpr.__file__).parent / cpr.TABLE_FILE
    path.write_text(json.dumps(table(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
