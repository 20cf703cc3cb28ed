#!/usr/bin/env bash
# WebSocket echo through Peel against nginx's WebSocket proxy (issue 38): see websocket_echo.py for
# what is measured and its knobs (ROUNDS, DURATION, WARMUP, TUNNELS, SIZE, TARGETS, RESULTS, NOTE).
# Installs nginx and a C compiler with libcrypto's headers (the echo backend and the load client are
# Benchmarks/websocket/wsecho.c), finds the Peel release binary unless PEEL names one.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

"$root/scripts/install-deps.sh" nginx wrk gcc libssl-dev

source "$root/Benchmarks/peel-binary.sh"
exec python3 "$root/Benchmarks/websocket_echo.py"
