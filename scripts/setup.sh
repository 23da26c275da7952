#!/usr/bin/env bash
# Idempotent set-up: a virtual environment in .venv with cooplab installed (editable) and the
# test extras. Works as root on a fresh machine that has only Python 3.11.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
if ! command -v "$PY" >/dev/null 2>&1; then
  echo "setup: $PY not found; install Python 3.11 or set PYTHON=/path/to/python3.11" >&2
  exit 2
fi
if [ ! -x .venv/bin/python ]; then
  if ! "$PY" -m venv .venv 2>/dev/null; then
    rm -rf .venv
    if command -v apt-get >/dev/null 2>&1; then
      echo "setup: python venv module missing; installing python3-venv" >&2
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
      "$PY" -m venv .venv
    else
      echo "setup: '$PY -m venv' failed; install the venv module for your Python" >&2
      exit 2
    fi
  fi
fi
stamp=.venv/.cooplab-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
  # the CPU build of PyTorch first (the norm-similarity embedder needs it); otherwise a
  # dependency could pull a multi-GB CUDA build
  if ! .venv/bin/python -c "import torch" 2>/dev/null; then
    .venv/bin/python -m pip install -q "torch==2.13.0" 2>&1 | grep -v "^WARNING: Location" || true
  fi
  .venv/bin/python -m pip install -q -e ".[dev]" 2>&1 | grep -v "^WARNING: Location" || true
  .venv/bin/python -c "import cooplab.tasks.cpr.society, langgraph, mesa, llama_cpp, statsmodels, sentence_transformers" || { echo "setup: installation failed" >&2; exit 1; }
  touch "$stamp"
fi
