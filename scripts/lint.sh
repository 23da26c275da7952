#!/usr/bin/env bash
# The lint and type check .ci/run runs beside the tests: ruff (pyflakes, pycodestyle, bugbear, isort;
# [tool.ruff] in pyproject.toml), ruff's formatter in check mode, and pyright in basic mode with no error
# allowed (scripts/typecheck.py). Needs the dev extra (bash scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/python scripts/typecheck.py
