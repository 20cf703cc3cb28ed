#!/usr/bin/env bash
# Installs the system packages Peel builds and tests with, only when something is missing.
# Extra package names given as arguments are installed the same way (Benchmarks/run.sh uses it).
set -euo pipefail
need=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
for p in libevent-dev libcurl4-openssl-dev libjemalloc-dev zlib1g-dev libbrotli-dev libhiredis-dev libssl-dev pkg-config curl apache2-utils python3 openssl valgrind "$@"; do
  have_pkg "$p" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
