#!/usr/bin/env bash
# WebSockets through Peel (issue 38): Python's websockets (PyPI) as the backend and as the client,
# in a venv under .build. Text and binary frames, a 4 MB message, ping/pong, both close handshakes,
# a refused upgrade judged like any answer, the tunnel's access-log line, /metrics and /status.
# Loopback only; every wait is bounded.
set -uo pipefail
PEEL=${1:?usage: websockets.sh PATH/TO/peel}
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib.sh"
START=$(date +%s%N)

VENV=${WEBSOCKETS_VENV:-$HERE/../.build/venv-websockets}
if ! "$VENV/bin/python" -c 'import websockets.asyncio.server' 2>/dev/null; then
  echo "preparing $VENV (websockets)"
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV" || { echo "websockets: cannot create $VENV"; exit 1; }
  "$VENV/bin/pip" install -q --disable-pip-version-check 'websockets>=13' || { echo "websockets: pip failed"; exit 1; }
fi
PY="$VENV/bin/python"
"$PY" -c 'import importlib.metadata as m; print("versions: websockets", m.version("websockets"))'

BE=$(free_port); GW=$(free_port); ADMIN=$(free_port)
"$PY" "$HERE/websockets/backend.py" "$BE" >"$WORK/backend.log" 2>&1 & pids+=($!)
wait_listening "$BE" "$!"
"$PEEL" --upstream "http://127.0.0.1:$BE" --listen "127.0.0.1:$GW" --admin-listen "127.0.0.1:$ADMIN" --workers 1 \
  --access-log json --probe-path /echo --max-tunnels-per-client 1000 >"$WORK/access.log" 2>"$WORK/peel.err" & PEEL_PID=$!
pids+=($PEEL_PID)
wait_listening "$GW" "$PEEL_PID"

while IFS=$'\t' read -r name expected actual; do
  check "$name" "$expected" "$actual"
done < <(timeout 90 "$PY" "$HERE/websockets/check.py" "$GW"; printf 'the checker ends on its own\t0\t%s\n' "$?")

sleep 0.3
line=$(grep '"kind":"tunnel"' "$WORK/access.log" | grep '"path":"/echo"' | head -1)
check "a tunnel is one access-log line at its close" "101" "$(sed -n 's/.*"status":\([0-9]*\).*/\1/p' <<<"$line")"
# RFC 6455 §7.1.1: after the close handshake the server closes the TCP connection first.
check "the line says who closed it" "upstream" "$(sed -n 's/.*"closed_by":"\([a-z]*\)".*/\1/p' <<<"$line")"
check_le "the line counts the client's bytes (over 4 MB)" "$(sed -n 's/.*"bytes_in":\([0-9]*\).*/\1/p' <<<"$line")" 4194304

# metric ADMIN_PORT SERIES: one series' value from /metrics (SERIES with its labels, as printed).
metric() { curl -fs "http://127.0.0.1:$1/metrics" | awk -v n="$2" '$1 == n { print $2 }'; }
check "peel_tunnels_open is 0 once they closed" 0 "$(metric "$ADMIN" peel_tunnels_open)"
check_le "peel_tunnel_bytes_total counts the client's bytes (over 4 MB)" "$(metric "$ADMIN" 'peel_tunnel_bytes_total{from="client"}')" 4194304
check_le "and the upstream's" "$(metric "$ADMIN" 'peel_tunnel_bytes_total{from="upstream"}')" 4194304
for bound in max_tunnels max_tunnels_per_client tunnel_draining; do
  check "peel_refusals_total has $bound" 0 "$(metric "$ADMIN" "peel_refusals_total{bound=\"$bound\"}")"
done
check "/status shows the tunnels" 1 \
  "$(curl -fs "http://127.0.0.1:$ADMIN/status" | grep -c '"tunnels":{"open":0,"limit":10000,"per_client_limit":1000}')"

echo "$pass passed, $fail failed ($(( ($(date +%s%N) - START) / 1000000 )) ms)"
exit $(( fail > 0 ))
