#!/usr/bin/env bash
# Ensure a headless-capable Chromium is available (Debian package `chromium`).
# Idempotent: does nothing when `chromium` is already on PATH.
# Needs root (or passwordless sudo) to install; used by the trace-viewer tests.
set -euo pipefail

if command -v chromium >/dev/null 2>&1; then
    echo "chromium present: $(command -v chromium)"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo -n"
    else
        echo "ensure-chromium: not root and no sudo; install the Debian package 'chromium' manually" >&2
        exit 1
    fi
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null

if ! command -v chromium >/dev/null 2>&1; then
    echo "ensure-chromium: chromium still not on PATH after install" >&2
    exit 1
fi
echo "chromium installed: $(command -v chromium)"
