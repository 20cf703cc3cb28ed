#!/usr/bin/env bash
# A real browser against Peel: headless Chromium (Debian's `chromium`, installed by install-deps.sh
# when missing) driven over its DevTools protocol by scripts/browser/drive.py (websockets from PyPI,
# in the proxy venv). A page from one origin (a static server on 127.0.0.1) fetches from Peel on
# another port and reads X-Request-Id, the upstream's exposed fields and, once the upstream is
# killed, Age and Cache-Status on a stale answer; and a WebSocket to the upstream app, through Peel,
# echoes a text message. Loopback only; every wait is bounded.
set -uo pipefail
PEEL=${1:?usage: browser.sh PATH/TO/peel}
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib.sh"
START=$(date +%s%N)
"$HERE/install-deps.sh" chromium || { echo "browser: cannot install chromium"; exit 1; }
CHROMIUM=$(command -v chromium || command -v chromium-browser) || { echo "browser: no chromium"; exit 1; }

VENV=${PROXY_VENV:-$HERE/../.build/venv-proxy}
if ! "$VENV/bin/python" -c 'import fastapi, uvicorn, websockets' 2>/dev/null; then
  echo "preparing $VENV (fastapi, uvicorn, websockets)"
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV" || { echo "browser: cannot create $VENV"; exit 1; }
  "$VENV/bin/pip" install -q --disable-pip-version-check fastapi uvicorn websockets || { echo "browser: pip failed"; exit 1; }
fi
PY="$VENV/bin/python"
wait_ready() { for _ in $(seq 1 200); do curl -fs "$1" >/dev/null 2>&1 && return 0; sleep 0.05; done; echo "not ready: $1"; return 1; }

UP=$(free_port); GW=$(free_port); PAGE=$(free_port); DT=$(free_port)
(cd "$HERE/proxy" && exec "$PY" -m uvicorn app:app --host 127.0.0.1 --port "$UP" --no-access-log) >"$WORK/upstream.log" 2>&1 & UP_PID=$!
pids+=($UP_PID)
mkdir -p "$WORK/site" && echo '<!doctype html><title>app</title><p>an app on its own origin</p>' >"$WORK/site/index.html"
"$PY" -m http.server --bind 127.0.0.1 --directory "$WORK/site" "$PAGE" >"$WORK/site.log" 2>&1 & pids+=($!)
wait_ready "http://127.0.0.1:$UP/api/v1/user" && wait_ready "http://127.0.0.1:$PAGE/" || exit 1
"$PEEL" --upstream "http://127.0.0.1:$UP/api/v1" --listen 127.0.0.1:$GW --admin-listen off --workers 1 \
  --probe-path /user --probe-interval 0.2 --probe-timeout 0.2 --fall 1 --offline-cache 1MiB \
  --cors-origins "http://127.0.0.1:$PAGE" >"$WORK/access.log" 2>"$WORK/peel.err" & pids+=($!)
wait_listening $GW $!
wait_ready "http://127.0.0.1:$GW/user" || exit 1
"$CHROMIUM" --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run --no-default-browser-check \
  --remote-debugging-address=127.0.0.1 --remote-debugging-port="$DT" --user-data-dir="$WORK/profile" \
  --proxy-server='direct://' --proxy-bypass-list='*' about:blank >"$WORK/chromium.log" 2>&1 & pids+=($!)

timeout 60 "$PY" "$HERE/browser/drive.py" "$DT" "http://127.0.0.1:$PAGE/" "http://127.0.0.1:$GW" "$UP_PID"
failed=$(( $? + fail ))  # fail: a server that could not take its port (wait_listening)
# The refused upgrade is Peel's 403, not the backend's: one access-log line for it.
if [ "$(grep '"path":"/ws/echo"' "$WORK/access.log" | grep -c '"status":403')" != 1 ]; then
  failed=$((failed + 1)); echo "FAIL the refused WebSocket is one 403 in Peel's access log"
else echo "ok   the refused WebSocket is one 403 in Peel's access log"; fi
echo "browser: $failed failed ($(( ($(date +%s%N) - START) / 1000000 )) ms)"
[ "$failed" -eq 0 ] || { echo "--- peel stderr"; tail -5 "$WORK/peel.err"; echo "--- chromium"; tail -5 "$WORK/chromium.log"; }
exit $(( failed > 0 ))
