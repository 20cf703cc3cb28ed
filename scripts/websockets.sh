#!/usr/bin/env bash
# WebSockets through Peel (issue 38): Python's websockets (PyPI) as the backend and as the client,
# in a venv under .build. Text and binary frames, a 4 MB message, ping/pong, both close handshakes,
# a refused upgrade judged like any answer, the tunnel's access-log line, /metrics and /status; then
# the bounds and endings (scripts/websockets/bounds.py): clients that stop reading while the backend
# floods (Peel's VmRSS), 1,000 tunnels at once, max_tunnels_per_client (429) and max_tunnels (503),
# an upstream killed mid-tunnel, a wss:// backend (trusted through --ca-file, and not), SIGTERM with
# tunnels open and one still dialing. Loopback only; every wait is bounded.
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

# bounds SCENARIO ARGS...: bounds.py's `eq`/`le` lines become checks.
bounds() {
  while IFS=$'\t' read -r kind name a b; do
    if [ "$kind" == le ]; then check_le "$name" "$a" "$b"; else check "$name" "$a" "$b"; fi
  done < <(timeout 120 "$PY" "$HERE/websockets/bounds.py" "$@"; printf 'eq\tbounds.py %s ends on its own\t0\t%s\n' "$1" "$?")
}
bounds flood "$GW" "$ADMIN" "$PEEL_PID" 10
bounds many "$GW" "$ADMIN" 1000

# A small Peel in front of a second backend: the tunnel limits, then that backend killed mid-tunnel.
BE2=$(free_port); GW2=$(free_port); ADMIN2=$(free_port)
# Started from a subshell, so that the kill below is not reported as one of this script's jobs.
BE2_PID=$("$PY" "$HERE/websockets/backend.py" "$BE2" >"$WORK/backend2.log" 2>&1 </dev/null & echo $!); pids+=($BE2_PID)
wait_listening "$BE2" "$BE2_PID"
"$PEEL" --upstream "http://127.0.0.1:$BE2" --listen "127.0.0.1:$GW2" --admin-listen "127.0.0.1:$ADMIN2" --workers 2 \
  --probe-path /echo --max-tunnels 3 --max-tunnels-per-client 2 >"$WORK/access2.log" 2>"$WORK/peel2.err" & PEEL2=$!
pids+=($PEEL2)
wait_listening "$GW2" "$PEEL2"
bounds limits "$GW2" "$ADMIN2"
bounds killed "$GW2" "$BE2_PID"
wait_log "$WORK/access2.log" '"path":"/echo/killed"' 1
check "the killed upstream's tunnel is logged closed by the upstream" 1 \
  "$(grep '"kind":"tunnel"' "$WORK/access2.log" | grep '"path":"/echo/killed"' | grep -c '"closed_by":"upstream"')"

# A wss:// backend: its self-signed certificate trusted through --ca-file; without it, refused.
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$WORK/key.pem" -out "$WORK/cert.pem" -days 1 \
  -subj /CN=127.0.0.1 -addext "subjectAltName=IP:127.0.0.1" >/dev/null 2>&1
BE4=$(free_port); GW4=$(free_port); GW5=$(free_port); ADMIN5=$(free_port)
"$PY" "$HERE/websockets/backend.py" "$BE4" "$WORK/cert.pem" "$WORK/key.pem" >"$WORK/backend4.log" 2>&1 & pids+=($!)
wait_listening "$BE4" "$!"
"$PEEL" --upstream "https://127.0.0.1:$BE4" --listen "127.0.0.1:$GW4" --admin-listen off --workers 1 --probe-path /echo \
  --ca-file "$WORK/cert.pem" >"$WORK/access4.log" 2>"$WORK/peel4.err" & pids+=($!)
wait_listening "$GW4" "$!"
bounds wss "$GW4"
wait_log "$WORK/access4.log" '"path":"/bye"' 1
check "the wss:// tunnel's line says the backend closed it" 1 \
  "$(grep '"path":"/bye"' "$WORK/access4.log" | grep -c '"closed_by":"upstream"')"
"$PEEL" --upstream "https://127.0.0.1:$BE4" --listen "127.0.0.1:$GW5" --admin-listen "127.0.0.1:$ADMIN5" --workers 1 --probe-path /echo \
  --probe-interval 60 >"$WORK/access5.log" 2>"$WORK/peel5.err" & pids+=($!)
wait_listening "$GW5" "$!"
bounds untrusted "$GW5"
# The first probe failed the same way (it is not counted here); the upgrade's dial is the one.
check "counted as a TLS failure" 1 "$(metric "$ADMIN5" 'peel_upstream_errors_total{reason="tls"}')"

# SIGTERM with tunnels open: drain_delay 1 s, shutdown_timeout 2 s.
GW3=$(free_port); ADMIN3=$(free_port)
"$PEEL" --upstream "http://127.0.0.1:$BE" --listen "127.0.0.1:$GW3" --admin-listen "127.0.0.1:$ADMIN3" --workers 2 \
  --probe-path /echo --drain-delay 1 --shutdown-timeout 2 >"$WORK/access3.log" 2>"$WORK/peel3.err" & PEEL3=$!
pids+=($PEEL3)
wait_listening "$GW3" "$PEEL3"
bounds drain "$GW3" "$ADMIN3" "$PEEL3" 2
for _ in $(seq 1 100); do kill -0 "$PEEL3" 2>/dev/null || break; sleep 0.05; done
check "Peel exits after the drain" gone "$(kill -0 "$PEEL3" 2>/dev/null && echo running || echo gone)"
wait "$PEEL3" 2>/dev/null; code=$?
check "with status 0" 0 "$code"
check "both tunnels are logged closed by the shutdown" 2 \
  "$(grep '"kind":"tunnel"' "$WORK/access3.log" | grep -c '"closed_by":"shutdown"')"

echo "$pass passed, $fail failed ($(( ($(date +%s%N) - START) / 1000000 )) ms)"
exit $(( fail > 0 ))
