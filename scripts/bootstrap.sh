#!/usr/bin/env bash
# Installs everything aifabric needs on a Debian 12 machine, idempotently:
# Debian packages, kernel header links for bcc, the venv (from Debian's
# /usr/bin/python3 with --system-site-packages, so Mininet and bcc are seen)
# and the project itself in it. Safe to run again: it only does what is missing.
set -euo pipefail

cd "$(dirname "$0")/.."
source scripts/apt.sh
VENV=${VENV:-.venv}

APT_PACKAGES=(
  mininet python3-bpfcc bpfcc-tools linux-headers-amd64
  iproute2 iputils-ping tcpdump iperf3 ethtool procps psmisc
  python3-venv python3-dev python3-pip prometheus
  python3-crcmod  # C CRCs for softswitch's hashes (checked against its Python ones; optional)
  gcc             # softswitch's compiled packet path (with python3-dev and Cython; optional)
  nftables        # closes BMv2's Thrift ports to other machines (emulation/control_ports.py)
  chromium chromium-driver   # the live page in a real browser, driven by selenium (tests/fabric/test_web_page.py)
  openmpi-bin libopenmpi-dev  # Open MPI beside our collectives (bench collectives --with-mpi); -dev: mpi4py can build
)

need_root() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "bootstrap: must run as root (network namespaces, raw sockets, eBPF)" >&2
    exit 1
  fi
}

install_debian_packages() {
  apt_install_missing bootstrap "${APT_PACKAGES[@]}"
  [ "$APT_INSTALLED" = 1 ] || return 0
  # Debian's prometheus package starts a system service; the tests start their own.
  if systemctl is-active --quiet prometheus 2>/dev/null; then systemctl stop prometheus || true; fi
}

# bcc compiles its C programs against the running kernel's headers. Debian
# packages headers for its own kernel only; when the running kernel has none,
# link the packaged ones in (the BPF and TC uapi bcc uses is stable across 6.x).
link_kernel_headers() {
  local mod=/lib/modules/$(uname -r)
  [ -e "$mod/build/Makefile" ] && [ -e "$mod/source/include/linux/kconfig.h" ] && return 0
  local hdr common
  hdr=$(ls -d /usr/src/linux-headers-*-amd64 2>/dev/null | sort -V | tail -n 1)
  common=$(ls -d /usr/src/linux-headers-*-common 2>/dev/null | sort -V | tail -n 1)
  if [ -z "$hdr" ]; then
    echo "bootstrap: no linux-headers-*-amd64 under /usr/src; bcc programs will not compile" >&2
    return 0
  fi
  mkdir -p "$mod"
  ln -sfn "$hdr" "$mod/build"
  ln -sfn "${common:-$hdr}" "$mod/source"
  echo "bootstrap: linked $mod/build -> $hdr"
}

# Switch P4Runtime servers listen on 50000 + device id, inside Linux's ephemeral port range:
# keep the kernel from lending those ports to outgoing connections (a switch could not bind).
reserve_switch_ports() {
  local want=50000-50999 cur
  cur=$(sysctl -n net.ipv4.ip_local_reserved_ports 2>/dev/null || true)
  case ",$cur," in *",$want,"*) return 0 ;; esac
  sysctl -qw net.ipv4.ip_local_reserved_ports="${cur:+$cur,}$want" \
    || echo "bootstrap: could not reserve ports $want for the switches" >&2
}

make_venv() {
  if [ ! -x "$VENV/bin/python" ]; then
    echo "bootstrap: creating $VENV from /usr/bin/python3 (--system-site-packages)"
    /usr/bin/python3 -m venv --system-site-packages "$VENV"
  fi
  # Reinstall only when the project's requirements changed.
  local stamp="$VENV/.aifabric-installed"
  if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    echo "bootstrap: installing aifabric and its Python dependencies into $VENV"
    "$VENV/bin/pip" install -q --upgrade pip
    "$VENV/bin/pip" install -q -e '.[test,mpi]'
    # The reference P4Runtime client of the tests; its pins (protobuf < 3.21) would hold the
    # whole environment on pure-Python protobuf (pyproject.toml says why that matters)
    "$VENV/bin/pip" install -q --no-deps 'p4runtime-shell==0.0.6'
    touch "$stamp"
  fi
  # P4Runtime's modules generated for the installed protobuf (again after any reinstall of p4runtime)
  "$VENV/bin/python" scripts/p4runtime_modules.py
}

# The live page's browser libraries (controller/web/package.json, pinned by its package-lock.json)
# into controller/web/node_modules, which the page server serves; again only when the lock changed.
install_web_libraries() {
  local dir=controller/web stamp=controller/web/node_modules/.aifabric-installed
  if [ -f "$stamp" ] && [ ! "$dir/package-lock.json" -nt "$stamp" ]; then return 0; fi
  # Debian's npm only where no npm is on PATH: Node.js from elsewhere (NodeSource's nodejs, which
  # carries npm) conflicts with Debian's npm package, and apt then refuses the whole list
  if ! command -v npm >/dev/null; then apt_install_missing bootstrap npm; fi
  echo "bootstrap: installing the live page's libraries with npm into $dir/node_modules"
  npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error
  touch "$stamp"
}

need_root
install_debian_packages
# Docker engine, docker-compose and debootstrap for the compose stack (tests/fabric/test_docker_stack.py)
bash scripts/docker_engine.sh install
link_kernel_headers
reserve_switch_ports
make_venv
install_web_libraries
