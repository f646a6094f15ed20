#!/bin/sh
# The fabric service (aifabric.containers.fabric_service): a topology in Mininet with its switches up and no
# controller of its own, the telemetry network for INT, and the fabric description written where
# the controller service reads it. `docker stop` (SIGTERM) tears it down.
#
#   AIFABRIC_TARGET        softswitch (default) or bmv2
#   AIFABRIC_TOPOLOGY      the topology's arguments (default: --topo fattree --k 4)
#   AIFABRIC_DESCRIPTION   where the description goes (default /run/aifabric/fabric.json)
set -eu
# Without --privileged (docker/compose.unprivileged.yml) /proc/sys is read-only; the hosts'
# and switches' sysctls need it writable. Already so when privileged.
[ -w /proc/sys/net ] || mount -o remount,rw /proc/sys 2>/dev/null || true
# shellcheck disable=SC2086  # the topology arguments are words on purpose
exec python3 -m aifabric.containers.fabric_service ${AIFABRIC_TOPOLOGY:---topo fattree --k 4} \
  --target "${AIFABRIC_TARGET:-softswitch}" --describe "${AIFABRIC_DESCRIPTION:-/run/aifabric/fabric.json}" "$@"
