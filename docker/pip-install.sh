#!/bin/sh
# pip install "$@" into the image's venv; with PIP_CERT_PEM set (a build argument), pip trusts
# those CA certificates besides Debian's for this one command, and the bundle is deleted after.
set -eu
if [ -n "${PIP_CERT_PEM:-}" ]; then
  bundle=$(mktemp)
  cat /etc/ssl/certs/ca-certificates.crt > "$bundle"
  printf '%s\n' "$PIP_CERT_PEM" >> "$bundle"
  PIP_CERT="$bundle" pip install -q "$@" || { rm -f "$bundle"; exit 1; }
  rm -f "$bundle"
else
  pip install -q "$@"
fi
