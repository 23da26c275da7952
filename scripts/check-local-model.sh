#!/usr/bin/env bash
# One short generation of the embedded local model, in a child process
# (`python -m cooplab.agents.local_model --check`). Exit 0 and print one line of figures when it
# works; otherwise one line on stderr saying what failed and what to run, exit 1. Used by
# scripts/setup.sh after installing; `cooplab doctor` reports the same and more.
#   PYTHON  the interpreter of the environment to check (default .venv/bin/python)
set -uo pipefail
cd "$(dirname "$0")/.."
if out="$("${PYTHON:-.venv/bin/python}" -m cooplab.agents.local_model --check 2>&1)"; then
  echo "$out"
  exit 0
fi
echo "setup: ${out##*$'\n'}" >&2
exit 1
