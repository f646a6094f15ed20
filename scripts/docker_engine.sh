#!/usr/bin/env bash
# The Docker engine the compose stack (docker-compose.yml, docker/) runs on, idempotently:
#
#   scripts/docker_engine.sh install      Debian's docker.io, docker-compose and debootstrap
#   scripts/docker_engine.sh start        dockerd in the background (there is no systemd), waits
#                                         until it answers
#   scripts/docker_engine.sh base-image   debian:bookworm made locally with debootstrap when the
#                                         engine has no such image (no registry is reachable)
#   scripts/docker_engine.sh ready        all three
#
# Each step only does what is missing; where an engine already runs (systemd, Docker Desktop),
# `start` leaves it alone.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/apt.sh"

BASE_IMAGE=${AIFABRIC_BASE_IMAGE:-debian:bookworm}
DEBIAN_MIRROR=${AIFABRIC_DEBIAN_MIRROR:-http://deb.debian.org/debian}
DOCKERD_LOG=${AIFABRIC_DOCKERD_LOG:-/var/log/aifabric-dockerd.log}
START_TIMEOUT_S=60
PACKAGES=(docker.io docker-compose debootstrap)

say() { echo "docker_engine: $*" >&2; }

install_packages() {
  apt_install_missing docker_engine "${PACKAGES[@]}"
}

engine_answers() { docker info >/dev/null 2>&1; }

start_engine() {
  engine_answers && return 0
  if ! command -v dockerd >/dev/null; then
    say "dockerd is not installed (run: $0 install)"
    return 1
  fi
  if ! pgrep -x dockerd >/dev/null; then
    say "starting dockerd (log: $DOCKERD_LOG)"
    setsid nohup dockerd >>"$DOCKERD_LOG" 2>&1 </dev/null &
  fi
  local waited=0
  until engine_answers; do
    if [ "$waited" -ge "$START_TIMEOUT_S" ]; then
      say "dockerd did not answer within ${START_TIMEOUT_S} s; its log ($DOCKERD_LOG) ends:"
      tail -n 20 "$DOCKERD_LOG" >&2 || true
      return 1
    fi
    sleep 1
    waited=$((waited + 1))
  done
}

base_image() {
  docker image inspect "$BASE_IMAGE" >/dev/null 2>&1 && return 0
  if ! command -v debootstrap >/dev/null; then
    say "no $BASE_IMAGE image and no debootstrap to make one (run: $0 install)"
    return 1
  fi
  local dir
  dir=$(mktemp -d /tmp/aifabric-bookworm.XXXXXX)
  trap 'rm -rf "$dir"' RETURN
  say "making $BASE_IMAGE with debootstrap (about a minute)"
  debootstrap --variant=minbase bookworm "$dir" "$DEBIAN_MIRROR" >/dev/null
  rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
  tar -C "$dir" -c . | docker import - "$BASE_IMAGE" >/dev/null
}

case "${1:-ready}" in
  install) install_packages ;;
  start) start_engine ;;
  base-image) base_image ;;
  ready) install_packages; start_engine; base_image ;;
  *) say "unknown step '$1' (install, start, base-image, ready)"; exit 2 ;;
esac
