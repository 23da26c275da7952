#!/usr/bin/env bash
# The whole test suite: set up, then run every test. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/setup.sh
bash scripts/ensure-docker.sh     # Docker engine + the sandbox image (built offline)
bash scripts/ensure-chromium.sh   # headless Chromium for the explorer's and the report's page tests
bash scripts/ensure-phoenix.sh    # Arize Phoenix in its own venv (.venv-phoenix), for the OTLP export test
# Two pytest-xdist workers, one per core: run one after another, the tests leave a core idle about
# half of the time (waiting on subprocesses, Docker and servers). A test file runs whole on one worker,
# in order, so a module's fixtures are built once; the files that start Ray run as one unit
# (tests/conftest.py). COOPLAB_TEST_WORKERS=0 runs everything in this one process.
exec .venv/bin/python -m pytest -n "${COOPLAB_TEST_WORKERS:-2}" --dist loadfile "$@"
