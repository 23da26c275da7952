#!/usr/bin/env bash
# The whole test suite: set up, then run every test. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/setup.sh
if [ -f scripts/ensure-docker.sh ]; then
  bash scripts/ensure-docker.sh
fi
exec .venv/bin/python -m pytest "$@"
