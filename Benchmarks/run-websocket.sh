#!/usr/bin/env bash
# WebSocket echo through Peel against nginx's WebSocket proxy (issue 38): see websocket_echo.py for
# what is measured and its knobs (ROUNDS, DURATION, WARMUP, TUNNELS, SIZE, TARGETS, RESULTS, NOTE).
# Installs nginx and a C compiler with libcrypto's headers (the echo backend and the load client are
# Benchmarks/websocket/wsecho.c), finds the Peel release binary unless PEEL names one.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

"$root/scripts/install-deps.sh" nginx wrk gcc libssl-dev

if [ -z "${PEEL:-}" ]; then
  [ -d /opt/swift/usr/bin ] && PATH="/opt/swift/usr/bin:$PATH"
  flags=(-c release -Xswiftc -warnings-as-errors)
  bin=$(cd "$root" && swift build "${flags[@]}" --show-bin-path)
  [ -x "$bin/peel" ] || (cd "$root" && swift build "${flags[@]}")
  PEEL="$bin/peel"
fi
export PEEL
exec python3 "$root/Benchmarks/websocket_echo.py"
