#!/usr/bin/env bash
# The whole test suite: set up, then run every test. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/setup.sh
bash scripts/ensure-docker.sh     # Docker engine + the sandbox image (built offline)
bash scripts/ensure-chromium.sh   # headless Chromium for the explorer's and the report's page tests
bash scripts/ensure-phoenix.sh    # Arize Phoenix in its own venv (.venv-phoenix), for the OTLP export test
exec .venv/bin/python -m pytest "$@"
