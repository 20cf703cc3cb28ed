#!/usr/bin/env bash
# Peel in front of real upstream frameworks from PyPI, in this script's own venv. FastAPI + uvicorn
# under a base path, checked with requests, httpx and aiohttp: CORS with and without
# --cors-origins (a subdomain wildcard, exposed fields), kept fields on problems, redirects, cookies,
# downloads (declared lengths kept, many slow ones at once on reused connections), codings that
# follow the client (a GZip-middleware sub-app), reasons in the log and the problem, gzip and br answers, a
# 200 MiB streamed download (RSS sampled, first byte early), server-sent events, the access log.
# Flask under gunicorn sync workers: busy is not offline, a dying worker takes nobody offline.
# Loopback only; every wait is bounded.
set -uo pipefail
PEEL=${1:?usage: proxy.sh PATH/TO/peel}
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib.sh"

VENV=${PROXY_VENV:-$HERE/../.build/venv-proxy}
if ! "$VENV/bin/python" -c 'import fastapi, uvicorn, requests, httpx, aiohttp, brotli, flask, gunicorn' 2>/dev/null; then
  echo "creating $VENV (fastapi, uvicorn, requests, httpx, aiohttp, brotli, flask, gunicorn)"
  rm -rf "$VENV"
  python3 -m venv "$VENV" && "$VENV/bin/pip" install -q --disable-pip-version-check fastapi uvicorn requests httpx aiohttp brotli flask gunicorn \
    || { echo "proxy: cannot create the venv $VENV"; exit 1; }
fi
PY="$VENV/bin/python"
wait_ready() { for _ in $(seq 1 200); do curl -fs "$1" >/dev/null 2>&1 && return 0; sleep 0.05; done; echo "not ready: $1"; return 1; }

UP=$(free_port); GW=$(free_port); CGW=$(free_port)
(cd "$HERE/proxy" && exec "$PY" -m uvicorn app:app --host 127.0.0.1 --port "$UP" --no-access-log) >"$WORK/upstream.log" 2>&1 & UP_PID=$!
pids+=($UP_PID)
wait_ready "http://127.0.0.1:$UP/api/v1/user" || exit 1
common=(--upstream "http://127.0.0.1:$UP/api/v1" --admin-listen off --workers 1 --probe-path /user)
# The main gateway plays one behind a trusted proxy on loopback; the CORS one trusts no one (the default).
"$PEEL" "${common[@]}" --listen 127.0.0.1:$GW --trusted-proxies 127.0.0.1/32 >"$WORK/access.log" 2>"$WORK/peel.err" & PEEL_PID=$!
pids+=($PEEL_PID)
wait_listening $GW $PEEL_PID
"$PEEL" "${common[@]}" --listen 127.0.0.1:$CGW --cors-origins 'http://app.example,http://*.apps.example' \
  --cors-expose-headers Content-Disposition --access-log off 2>"$WORK/peel-cors.err" & pids+=($!)
wait_listening $CGW $!
wait_ready "http://127.0.0.1:$GW/user" && wait_ready "http://127.0.0.1:$CGW/user" || exit 1

timeout 120 "$PY" "$HERE/proxy/check.py" "$UP" "$GW" "$CGW" "$WORK/access.log" "$PEEL_PID"
failed=$?

# Issue 17: Flask under gunicorn with two sync workers (its default worker class), busy and dying.
BUP=$(free_port); BGW=$(free_port)
(cd "$HERE/proxy" && exec "$VENV/bin/gunicorn" -w 2 -k sync -b 127.0.0.1:$BUP --timeout 30 busy_app:app) >"$WORK/gunicorn.log" 2>&1 &
pids+=($!)
wait_ready "http://127.0.0.1:$BUP/api/health" || exit 1
"$PEEL" --upstream "http://127.0.0.1:$BUP/api" --listen 127.0.0.1:$BGW --admin-listen off --workers 1 --probe-path /health \
  --probe-interval 0.3 --probe-timeout 0.3 --fall 2 --timeout 15 --access-log off 2>"$WORK/peel-busy.err" & pids+=($!)
wait_listening $BGW $!
wait_ready "http://127.0.0.1:$BGW/user" || exit 1
timeout 90 "$PY" "$HERE/proxy/busy_check.py" "$BGW"
failed=$(( failed + $? ))
# A failure run names an upstream that left early (its log says how: a traceback, or a signal's shutdown).
kill -0 "$UP_PID" 2>/dev/null || echo "proxy: the upstream (uvicorn, pid $UP_PID) exited before the checks ended"
# A server that could not take its port (wait_listening) counts too.
failed=$(( failed + fail ))
echo "proxy: $failed failed"
[ "$failed" -eq 0 ] || { echo "--- peel stderr"; tail -5 "$WORK/peel.err"; echo "--- upstream"; tail -20 "$WORK/upstream.log"; }
exit $(( failed > 0 ))
