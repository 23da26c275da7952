#!/usr/bin/env bash
# Ensure an Arize Phoenix server in its own virtual environment, .venv-phoenix/ in the project
# root (the `arize-phoenix` package does not resolve together with constraints.txt, so it is
# kept apart from the project's .venv and installed without the project's constraints).
# Used by tests/tracing/test_otlp.py (the OTLP export against a real Phoenix) and docs/traces.md.
#
# Idempotent and fast when done (~0.1 s): a stamp file records the installed version; the script
# then only checks the stamp, the `phoenix` command and the installed package's version. A first
# install takes a few minutes and about 850 MB. Prints the venv's path.
#   bash scripts/ensure-phoenix.sh            # install or check
#   PHOENIX_VERSION=... bash scripts/ensure-phoenix.sh   # another version (reinstalls)
set -euo pipefail

PHOENIX_VERSION="${PHOENIX_VERSION:-20.26.1}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv-phoenix"
STAMP="$VENV/.cooplab-phoenix-version"
PY="${PYTHON:-python3}"

installed_version() {
    "$VENV/bin/python" -c "import importlib.metadata as m; print(m.version('arize-phoenix'))" 2>/dev/null || true
}

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$PHOENIX_VERSION" ] && [ -x "$VENV/bin/phoenix" ] \
    && [ "$(installed_version)" = "$PHOENIX_VERSION" ]; then
    echo "phoenix $PHOENIX_VERSION present: $VENV"
    exit 0
fi

start=$(date +%s)
if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
rm -f "$STAMP"
# --isolated would drop the machine's own pip settings (its index mirrors); instead keep them and
# give no -c: the project's constraints.txt is deliberately not used here.
LOG="$VENV/pip-install.log"
if ! "$VENV/bin/python" -m pip install -q --disable-pip-version-check "arize-phoenix==$PHOENIX_VERSION" >"$LOG" 2>&1; then
    echo "ensure-phoenix: pip install arize-phoenix==$PHOENIX_VERSION failed; the end of $LOG:" >&2
    grep -v "^WARNING: Location" "$LOG" | tail -20 >&2
    exit 1
fi
"$VENV/bin/python" -c "import phoenix.server.main" >/dev/null  # the server imports (checked once, after install)
echo "$PHOENIX_VERSION" > "$STAMP"
echo "phoenix $PHOENIX_VERSION installed in $(( $(date +%s) - start ))s: $VENV ($(du -sh "$VENV" | cut -f1))"
