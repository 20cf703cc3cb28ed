#!/usr/bin/env bash
# Soak (make soak, not in CI): mixed traffic through Peel for SOAK_SECONDS (default 600) while the
# demo upstream is killed and restarted every SOAK_FLAP seconds (default 30). Reports calls served,
# offline answers, errors by kind and RSS over time. Loopback only; stops by itself.
set -uo pipefail
PEEL=${1:?usage: soak.sh PATH/TO/peel}
SECONDS_TOTAL=${SOAK_SECONDS:-600}
FLAP=${SOAK_FLAP:-30}
WORK=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}" ${UP_PID:-}; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
# Never one port twice in this run (scripts/ports.py keeps the run's registry).
export PEEL_TEST_PORTS="$WORK/ports"
free_port() { python3 "$(dirname "$0")/ports.py"; }
UP=$(free_port); GW=$(free_port); AD=$(free_port)
start_upstream() { "$PEEL" demo-upstream --listen 127.0.0.1:$UP >>"$WORK/upstream.log" 2>&1 & UP_PID=$!; }
start_upstream
"$PEEL" --upstream http://127.0.0.1:$UP --listen 127.0.0.1:$GW --admin-listen 127.0.0.1:$AD --access-log off \
  --probe-interval 0.5 --fall 2 --rise 1 --timeout 2 >"$WORK/peel.out" 2>"$WORK/peel.err" & PEEL_PID=$!
pids+=($PEEL_PID)
sleep 1
python3 - "$GW" "$SECONDS_TOTAL" >"$WORK/traffic.txt" 2>&1 <<'PY' & TRAFFIC=$!
import collections, http.client, json, random, sys, threading, time
port, total = int(sys.argv[1]), float(sys.argv[2])
paths = ["/api/user"] * 6 + ["/api/items", "/api/business-error", "/api/token-expired", "/api/html", "/api/slow?ms=50",
         "/api/large?kb=64", "/api/echo", "/api/status/404", "/fault/5xx"]
counts = collections.Counter(); lock = threading.Lock(); end = time.time() + total
def worker():
    conn = None
    while time.time() < end:
        try:
            if conn is None: conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            p = random.choice(paths)
            if p == "/api/echo": conn.request("POST", p, body=b"x" * random.randint(0, 4096))
            else: conn.request("GET", p)
            r = conn.getresponse(); body = r.read()
            kind = "ok"
            if r.headers.get("Content-Type") == "application/problem+json": kind = json.loads(body)["kind"]
            with lock: counts[kind] += 1
        except Exception as e:
            with lock: counts["client-error:" + type(e).__name__] += 1
            conn = None; time.sleep(0.05)
threads = [threading.Thread(target=worker) for _ in range(16)]
for t in threads: t.start()
for t in threads: t.join()
for k, v in sorted(counts.items()): print(f"{k} {v}")

PY
started=$(date +%s); last_flap=$started
echo "time_s rss_kb upstream" >"$WORK/rss.txt"
while kill -0 $TRAFFIC 2>/dev/null; do
  now=$(date +%s)
  if [ $((now - last_flap)) -ge "$FLAP" ]; then
    if kill -0 "$UP_PID" 2>/dev/null; then kill "$UP_PID"; wait "$UP_PID" 2>/dev/null; state=down; else start_upstream; state=up; fi
    last_flap=$now
  fi
  echo "$((now - started)) $(awk '/^VmRSS/{print $2}' /proc/$PEEL_PID/status) ${state:-up}" >>"$WORK/rss.txt"
  [ $((now - started)) -gt $((SECONDS_TOTAL + 30)) ] && break
  sleep 5
done
wait $TRAFFIC
echo "== answers by kind over ${SECONDS_TOTAL}s (upstream flapping every ${FLAP}s)"
cat "$WORK/traffic.txt"
echo "== RSS over time"
cat "$WORK/rss.txt"
echo "== reachability transitions"
grep -c '"event":"reachability"' "$WORK/peel.err"
kill -0 $PEEL_PID && echo "peel still running: yes"
