#!/usr/bin/env bash
# Make the Docker sandbox backend usable on this machine (idempotent, non-interactive, run as root).
#   1. apt-get install docker.io and debootstrap if missing
#   2. start dockerd in the background if no daemon answers (log: $COOPLAB_DOCKERD_LOG)
#   3. build the sandbox image (debootstrap + docker import, ~2-3 min) if it is missing
# Nothing is pulled from a container registry.
#
# Env: PYTHON (default .venv/bin/python, else python3), COOPLAB_SANDBOX_IMAGE (default cooplab-sandbox:1),
#      COOPLAB_DOCKERD_LOG (default /var/log/cooplab-dockerd.log), COOPLAB_DOCKERD_WAIT (default 60 s).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

cd "$(dirname "$0")/.."
LOG="${COOPLAB_DOCKERD_LOG:-/var/log/cooplab-dockerd.log}"
WAIT="${COOPLAB_DOCKERD_WAIT:-60}"
IMAGE="${COOPLAB_SANDBOX_IMAGE:-cooplab-sandbox:1}"
if [ -z "${PYTHON:-}" ]; then
  if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi

say() { echo "ensure-docker: $*" >&2; }

if [ "$(id -u)" -ne 0 ]; then
  say "must run as root"; exit 1
fi

need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
if [ ${#need[@]} -gt 0 ]; then
  say "installing ${need[*]}"
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

daemon_up() { timeout 10 docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

if ! daemon_up; then
  say "starting dockerd (log: $LOG)"
  mkdir -p "$(dirname "$LOG")"
  # a stale pid file from a dead daemon blocks a new one
  if [ -f /var/run/docker.pid ] && ! kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; then
    rm -f /var/run/docker.pid
  fi
  if command -v setsid >/dev/null 2>&1; then
    setsid nohup dockerd >>"$LOG" 2>&1 </dev/null &
  else
    nohup dockerd >>"$LOG" 2>&1 </dev/null &
  fi
  for _ in $(seq 1 "$WAIT"); do
    daemon_up && break
    sleep 1
  done
  if ! daemon_up; then
    say "dockerd did not answer within ${WAIT}s; last log lines:"
    tail -n 20 "$LOG" >&2 || true
    exit 1
  fi
fi
say "daemon answers (Docker $(docker version --format '{{.Server.Version}}'))"

if docker image inspect "$IMAGE" >/dev/null 2>&1; then
  say "image $IMAGE present"
else
  say "building image $IMAGE (debootstrap + docker import)"
  "$PYTHON" -m cooplab.cli sandbox build --image "$IMAGE"
fi
say "ready"
