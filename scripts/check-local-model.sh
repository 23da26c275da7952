#!/usr/bin/env bash
# One short generation of the embedded local model, in a child process. Exit 0 and print one
# line of figures when it works; otherwise one line on stderr saying what failed and what to run,
# exit 1. Used by scripts/setup.sh after installing; `cooplab doctor` reports the same and more.
#   PYTHON  the interpreter of the environment to check (default .venv/bin/python)
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
err="$(mktemp)"
out="$("$PY" -m cooplab.agents.llama_worker --check 2>"$err")"
rc=$?
last="$(tail -n 1 "$err" 2>/dev/null)"
rm -f "$err"
case $rc in
  0) echo "local model: ok ($("$PY" -c '
import json, sys
d = json.loads(sys.argv[1].splitlines()[-1])
print("%s tokens in %s s, build: %s" % (d["completion_tokens"], d["generation_s"], d["system_info"]))' "$out" 2>/dev/null || echo "$out"))"; exit 0 ;;
  3) why="the llama.cpp build is tuned to one CPU ($("$PY" -c 'import json,sys; print(", ".join(json.loads(sys.argv[1].splitlines()[-1])["non_portable"]))' "$out" 2>/dev/null)); rebuild it portable: bash scripts/setup.sh --rebuild-llama" ;;
  132) why="it died with SIGILL: the build uses an instruction this CPU lacks; rebuild it: bash scripts/setup.sh --rebuild-llama" ;;
  134) why="it aborted (SIGABRT) in llama.cpp on this CPU: ${last:-no message}; '.venv/bin/cooplab doctor' shows the CPU features and the build" ;;
  139) why="it crashed (SIGSEGV) in llama.cpp on this CPU; '.venv/bin/cooplab doctor' shows the CPU features and the build" ;;
  *) why="exit $rc: ${last:-no message}" ;;
esac
echo "setup: the local model failed its test generation: $why" >&2
exit 1
