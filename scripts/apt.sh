# Sourced by the setup scripts: install the Debian packages of a list that are missing, once.
# apt_install_missing LABEL PACKAGE...   (LABEL prefixes the message, e.g. "bootstrap");
# sets APT_INSTALLED=1 when it installed something, 0 when nothing was missing.
apt_install_missing() {
  local label=$1 missing=()
  shift
  APT_INSTALLED=0
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "$label: installing Debian packages: ${missing[*]}" >&2
  # another apt (an unattended upgrade, a build beside us) may hold dpkg's lock: wait for it
  local wait=(-o DPkg::Lock::Timeout=900)
  apt-get "${wait[@]}" update -qq
  DEBIAN_FRONTEND=noninteractive apt-get "${wait[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  APT_INSTALLED=1
}
