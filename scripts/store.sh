#!/usr/bin/env bash
# The shared offline store (issue 21) end to end: Debian's redis-server on a free port and a unix
# socket (started and stopped here), the demo upstream, and two Peel processes on one store.
# The last line is "N passed, N failed"; the exit status is non-zero on any failure.
set -euo pipefail
PEEL=${1:?usage: store.sh PATH/TO/peel}
source "$(dirname "$0")/lib.sh"
"$(dirname "$0")/install-deps.sh" redis-server redis-tools
trap 'cleanup; echo "$pass passed, $fail failed"; [ "$fail" -eq 0 ]' EXIT

H='Host: api.example'
ALICE='Authorization: Bearer alice-token-7f3c9e'
ALICE_COOKIE='Cookie: session=cookie-secret-51d2'
BOB='Authorization: Bearer bob-token-0a8b'
TARGET='/api/user?account=path-secret-93ab'
head -c 32 /dev/urandom | base64 >"$WORK/secret"
printf 'short\n' >"$WORK/short-secret"

# A RESP client that is binary-safe both ways (redis-cli is for --scan), and a loader that records
# every call's status and duration.
cat >"$WORK/resp.py" <<'PYEOF'
import socket, sys
def cmd(port, *args):
    s = socket.create_connection(("127.0.0.1", int(port)), timeout=10)
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    s.sendall(out)
    f = s.makefile("rb")
    line = f.readline()
    if line[:1] == b"$":
        n = int(line[1:])
        data = b"" if n < 0 else f.read(n + 2)[:-2]
        return data
    line = line.strip()
    return line[1:] if line[:1] == b"+" else line
if __name__ == "__main__":
    port, op = sys.argv[1], sys.argv[2]
    if op == "get":
        sys.stdout.buffer.write(cmd(port, "GET", sys.argv[3]))
    elif op == "set-file":
        print(cmd(port, "SET", sys.argv[3], open(sys.argv[4], "rb").read()).decode())
    elif op == "set-bytes":
        print(cmd(port, "SET", sys.argv[3], sys.argv[4].encode()).decode())
    elif op == "set-big":
        print(cmd(port, "SET", sys.argv[3], b"P" * int(sys.argv[4])).decode())
    elif op == "flip-version":
        v = bytearray(open(sys.argv[3], "rb").read()); v[6] = 99
        print(cmd(port, "SET", sys.argv[4], bytes(v)).decode())
    else:
        print(cmd(port, *sys.argv[2:]).decode())
PYEOF
cat >"$WORK/load.py" <<'PYEOF'
# load.py PORT SECONDS THREADS HEADER... : keep-alive GETs of the target; prints
# "calls=N errors=N max_ms=X statuses=200:n,503:n".
import http.client, sys, threading, time, collections
port, seconds, threads = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
target = sys.argv[4]
headers = dict(h.split(": ", 1) for h in sys.argv[5:])
lock = threading.Lock()
statuses, errors, worst, calls, durations = collections.Counter(), [0], [0.0], [0], []
def run():
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    end = time.time() + seconds
    while time.time() < end:
        t = time.monotonic()
        try:
            conn.request("GET", target, headers=headers)
            r = conn.getresponse(); r.read()
            d = time.monotonic() - t
            with lock:
                statuses[r.status] += 1; calls[0] += 1; worst[0] = max(worst[0], d); durations.append(d)
            if r.getheader("connection", "").lower() == "close":
                conn.close(); conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        except Exception:
            with lock:
                errors[0] += 1; calls[0] += 1
            conn.close(); conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
ts = [threading.Thread(target=run) for _ in range(threads)]
for t in ts: t.start()
for t in ts: t.join()
print("calls=%d errors=%d max_ms=%.0f statuses=%s" % (calls[0], errors[0], worst[0] * 1000,
      ",".join("%d:%d" % kv for kv in sorted(statuses.items()))))
durations.sort()
print("p99_ms=%.0f" % (durations[int(len(durations) * 0.99)] * 1000 if durations else -1))
PYEOF
resp() { python3 "$WORK/resp.py" "$RP" "$@"; }

# Configuration: a Redis store needs the secret; bad values exit 2 with one line naming the option.
rc=0; out=$("$PEEL" --upstream http://127.0.0.1:1 --offline-cache 1MiB --offline-store redis://127.0.0.1:1 2>&1) || rc=$?
check "a Redis store without --offline-store-secret-file: exit 2" "2" "$rc"
check "... in one line naming the option" "1 yes" "$(echo "$out" | wc -l) $(echo "$out" | grep -q -- '--offline-store-secret-file' && echo yes)"
rc=0; out=$("$PEEL" --upstream http://127.0.0.1:1 --offline-store redis://127.0.0.1:1 --offline-store-secret-file "$WORK/short-secret" 2>&1) || rc=$?
check "a secret under 16 bytes: exit 2 naming the option" "2 yes" "$rc $(echo "$out" | grep -q -- '--offline-store-secret-file' && echo yes)"
rc=0; out=$("$PEEL" --upstream http://127.0.0.1:1 --offline-store http://127.0.0.1:6379 2>&1) || rc=$?
check "an --offline-store that is not memory, redis:// or unix://: exit 2" "2 yes" "$rc $(echo "$out" | grep -q -- '--offline-store' && echo yes)"
check "check-config shows the store, never the secret" "redis://127.0.0.1:6379/2 no" \
  "$("$PEEL" check-config --upstream http://u.example --offline-store redis://127.0.0.1/2 --offline-store-secret-file "$WORK/secret" |
     python3 -c 'import json,sys;t=sys.stdin.read();d=json.loads(t);print(d["offline_store"], "yes" if open(sys.argv[1]).read().strip() in t else "no")' "$WORK/secret")"

RP=$(free_port); SOCK="$WORK/redis.sock"
start_redis() {
  redis-server --port "$RP" --bind 127.0.0.1 --unixsocket "$SOCK" --save '' --appendonly no --dir "$WORK" \
    >>"$WORK/redis.log" 2>&1 & REDIS_PID=$!; pids+=($REDIS_PID)
  for _ in $(seq 1 100); do [ "$(resp PING 2>/dev/null)" == "PONG" ] && return; sleep 0.05; done
  echo "redis-server did not start"; tail -5 "$WORK/redis.log"; exit 1
}
start_redis

UP=$(free_port)
start_upstream() { "$PEEL" demo-upstream --listen 127.0.0.1:$UP >/dev/null 2>&1 & UP_PID=$!; pids+=($UP_PID); wait_listening $UP $UP_PID; }
start_upstream
common=(--upstream http://127.0.0.1:$UP --access-log off --workers 2 --probe-interval 0.2 --probe-timeout 0.2
        --connect-timeout 0.2 --fall 2 --rise 1 --offline-cache 1MiB --offline-store-secret-file "$WORK/secret")
GA=$(free_port); AA=$(free_port); GB=$(free_port); AB=$(free_port); GC=$(free_port); AC=$(free_port)
"$PEEL" "${common[@]}" --listen 127.0.0.1:$GA --admin-listen 127.0.0.1:$AA --offline-store "redis://127.0.0.1:$RP/0" \
  >/dev/null 2>"$WORK/a.err" & A_PID=$!; pids+=($A_PID)
wait_listening $AA $A_PID
"$PEEL" "${common[@]}" --listen 127.0.0.1:$GB --admin-listen 127.0.0.1:$AB --offline-store "unix://$SOCK" \
  >/dev/null 2>"$WORK/b.err" & B_PID=$!; pids+=($B_PID)
wait_listening $AB $B_PID
# C: a host name (resolved off the loop) and another database (SELECT 1).
"$PEEL" "${common[@]}" --listen 127.0.0.1:$GC --admin-listen 127.0.0.1:$AC --offline-store "redis://localhost:$RP/1" \
  >/dev/null 2>"$WORK/c.err" & C_PID=$!; pids+=($C_PID)
wait_listening $AC $C_PID
status() { curl -s "http://127.0.0.1:$1/status" | python3 -c "import json,sys;d=json.load(sys.stdin);print($2)"; }
metric() { curl -s "http://127.0.0.1:$1/metrics" | awk -v m="$2" '$1==m{print $2}'; }
wait_for() { # wait_for ADMIN PYTHON-EXPR VALUE [TRIES]
  for _ in $(seq 1 "${4:-150}"); do [ "$(status "$1" "$2" 2>/dev/null)" == "$3" ] && return 0; sleep 0.05; done; return 1
}
wait_for $AA 'd["reachability"]["state"]' reachable || true; wait_for $AB 'd["reachability"]["state"]' reachable || true
check "A: every worker connected to Redis over TCP" "connected 2" "$(status $AA 'd["offline_store"]["state"], d["offline_store"]["connected_workers"]')"
check "B: every worker connected to Redis over the unix socket" "connected 2" "$(status $AB 'd["offline_store"]["state"], d["offline_store"]["connected_workers"]')"
wait_for $AC 'd["offline_store"]["state"]' connected || true
check "C: connected by host name to database 1" "connected redis://localhost:$RP/1" "$(status $AC 'd["offline_store"]["state"], d["offline_store"]["url"]')"

get() { # get GATEWAY-PORT HEADER... → "status|age|cache-status|body"
  local port=$1; shift; local args=()
  for h in "$@"; do args+=(-H "$h"); done
  curl -s -D "$WORK/h" -o "$WORK/b" --max-time 5 "${args[@]}" "http://127.0.0.1:$port$TARGET" >/dev/null || true
  local st age cs
  st=$(awk 'NR==1{print $2}' "$WORK/h"); age=$(tr -d '\r' <"$WORK/h" | awk -F': ' 'tolower($1)=="age"{print $2}')
  cs=$(tr -d '\r' <"$WORK/h" | awk -F': ' 'tolower($1)=="cache-status"{print $2}')
  echo "$st|$age|$cs|$(cat "$WORK/b")"
}

# Two replicas, one store: answered through A, served through B once the upstream is gone.
fresh=$(get $GA "$H" "$ALICE" "$ALICE_COOKIE")
check "alice through A: 200, fresh" "200||" "$(echo "$fresh" | cut -d'|' -f1-3)"
body=$(echo "$fresh" | cut -d'|' -f4-)
# Entries, not the per-target index sets beside them (peel:oc:1:r:…, for RFC 9111 §4.4 invalidation).
entries() { redis-cli -p "$RP" --scan | grep -Ec '^peel:oc:1:[0-9a-f]{64}$' || true; }
for _ in $(seq 1 50); do [ "$(entries)" == "1" ] && break; sleep 0.05; done
check "the answer reached Redis: one key" "1" "$(entries)"
KEY=$(redis-cli -p "$RP" --scan | grep -E '^peel:oc:1:[0-9a-f]{64}$' | head -1)  # the only entry yet
resp get "$KEY" >"$WORK/value"
ttl=$(resp PTTL "$KEY" | tr -d ':')
check_le "its TTL is at most --offline-cache-max-age (86400 s)" 86400000 "$ttl"
check "... and not far below it (the demo's answer has no freshness rules)" "yes" "$([ "$ttl" -gt 86000000 ] && echo yes || echo no)"
# An answer with a validator and Set-Cookie (private, max-age=60: one user's, kept per user).
curl -s -o /dev/null -H "$H" -H "$ALICE" "http://127.0.0.1:$GA/api/with-headers"
for _ in $(seq 1 50); do [ "$(entries)" == "2" ] && break; sleep 0.05; done
check "a second answer reached Redis" "2" "$(entries)"
: >"$WORK/values-1"
for k in $(redis-cli -p "$RP" --scan | grep -E '^peel:oc:1:[0-9a-f]{64}$'); do resp get "$k" >>"$WORK/values-1"; done
check "its value keeps the upstream's fields but never Set-Cookie" "yes no" \
  "$(grep -aq 'X-Upstream' "$WORK/values-1" && echo yes || echo no) $(grep -aqiE 'set-cookie|a=1; Path' "$WORK/values-1" && echo yes || echo no)"
kill $UP_PID; wait $UP_PID 2>/dev/null || true
wait_for $AB 'd["reachability"]["state"]' unreachable || true; wait_for $AA 'd["reachability"]["state"]' unreachable || true
sleep 1.1
stale=$(get $GB "$H" "$ALICE" "$ALICE_COOKIE")
check "alice through B while offline: the stale answer, with Cache-Status" "200|Peel; hit; detail=offline|$body" \
  "$(echo "$stale" | cut -d'|' -f1,3-)"
age=$(echo "$stale" | cut -d'|' -f2)
check "... and an Age counted from when A stored it (>= 1 s)" "yes" "$([ -n "$age" ] && [ "$age" -ge 1 ] && [ "$age" -le 30 ] && echo yes || echo "no: [$age]")"
check "bob through B: the offline problem" "503" "$(get $GB "$H" "$BOB" | cut -d'|' -f1)"
check "alice's HEAD through B: 200 from the stored GET, no body" "200 0 Peel; hit; detail=offline" \
  "$(curl -s -I -o "$WORK/hh" -w '%{http_code} %{size_download}' -H "$H" -H "$ALICE" -H "$ALICE_COOKIE" "http://127.0.0.1:$GB$TARGET") $(tr -d '\r' <"$WORK/hh" | awk -F': ' 'tolower($1)=="cache-status"{print $2}')"
check "alice's conditional GET through B with the stored ETag: 304 with it" "304 \"v44\" Peel; hit; detail=offline" \
  "$(curl -s -D "$WORK/ch" -o /dev/null -w '%{http_code}' -H "$H" -H "$ALICE" -H 'If-None-Match: "v44"' "http://127.0.0.1:$GB/api/with-headers") $(tr -d '\r' <"$WORK/ch" | awk -F': ' 'tolower($1)=="etag"{e=$2} tolower($1)=="cache-status"{c=$2} END{print e, c}')"
check "... and with another ETag: the stored body" "200 {\"id\":44}" \
  "$(curl -s -w ' %{http_code}' -H "$H" -H "$ALICE" -H 'If-None-Match: "v1"' "http://127.0.0.1:$GB/api/with-headers" | awk '{print $NF, $1}')"
check "alice without her cookie through B: the offline problem (the key holds every key field)" "503" "$(get $GB "$H" "$ALICE" | cut -d'|' -f1)"
check "alice under another Host through B: the offline problem" "503" "$(get $GB 'Host: other.example' "$ALICE" "$ALICE_COOKIE" | cut -d'|' -f1)"
wait_for $AC 'd["reachability"]["state"]' unreachable || true
check "alice through C, on database 1: the offline problem (databases do not share)" "503" "$(get $GC "$H" "$ALICE" "$ALICE_COOKIE" | cut -d'|' -f1)"
kill $C_PID; wait $C_PID 2>/dev/null || true
check "B counts the hit" "yes" "$([ "$(metric $AB 'peel_offline_store_reads_total{result="hit"}')" -ge 1 ] && echo yes || echo no)"

# Values planted by hand over alice's entry: never served, counted by reason.
rejected() { metric $AB "peel_offline_store_rejected_total{reason=\"$1\"}"; }
resp set-bytes "$KEY" 'not a peel value' >/dev/null
check "a garbage value: not served" "503" "$(get $GB "$H" "$ALICE" "$ALICE_COOKIE" | cut -d'|' -f1)"
check "... counted as garbage" "1" "$(rejected garbage)"
resp flip-version "$WORK/value" "$KEY" >/dev/null
check "a value of another format version: not served" "503" "$(get $GB "$H" "$ALICE" "$ALICE_COOKIE" | cut -d'|' -f1)"
check "... counted as version" "1" "$(rejected version)"
resp set-big "$KEY" 100000000 >/dev/null
t0=$(date +%s%N)
check "a 100 MB value: not served" "503" "$(get $GB "$H" "$ALICE" "$ALICE_COOKIE" | cut -d'|' -f1)"
check_le "... answered within the read bound, not after reading 100 MB (ms)" 200 $(( ($(date +%s%N) - t0) / 1000000 ))
check "... counted as too_large" "1" "$(rejected too_large)"
check "B still runs" "yes" "$(kill -0 $B_PID 2>/dev/null && echo yes || echo no)"
resp set-file "$KEY" "$WORK/value" >/dev/null
check "the value Peel wrote, put back: served again" "200" "$(get $GB "$H" "$ALICE" "$ALICE_COOKIE" | cut -d'|' -f1)"

# Redis killed under load while offline: every call is answered (stale, then the offline problem),
# none waits past the read bound.
python3 "$WORK/load.py" $GB 2.5 4 "$TARGET" "$H" "$ALICE" "$ALICE_COOKIE" >"$WORK/load1.txt" & LOADER=$!
sleep 1; kill -9 $REDIS_PID; wait $REDIS_PID 2>/dev/null || true; wait $LOADER
read -r calls errors maxms statuses < <(sed 's/[a-z_]*=//g' "$WORK/load1.txt")
log1=$(head -1 "$WORK/load1.txt")
check "offline, Redis killed under load: no call failed [$log1]" "0" "$errors"
check "... only stale answers and offline problems" "yes" "$(echo "$statuses" | grep -Eq '^200:[0-9]+,503:[0-9]+$' && echo yes || echo "no: $statuses")"
check_le "... no call waited past the read bound (50 ms) plus scheduling slack (ms)" 400 "$maxms"
check "B: the store is down, and says why" "down yes" "$(status $AB 'd["offline_store"]["state"], "yes" if d["offline_store"]["last_error"] else "no"')"
check "B: peel_offline_store_connected is 0" "0" "$(metric $AB peel_offline_store_connected)"

# Redis back, empty: misses, no crash.
start_redis
wait_for $AB 'd["offline_store"]["state"]' connected 200 || true
check "B reconnects to the restarted Redis (backoff)" "connected" "$(status $AB 'd["offline_store"]["state"]')"
wait_for $AA 'd["offline_store"]["state"]' connected 200 || true
misses=$(metric $AB 'peel_offline_store_reads_total{result="miss"}')
check "an empty Redis: alice gets the offline problem" "503" "$(get $GB "$H" "$ALICE" "$ALICE_COOKIE" | cut -d'|' -f1)"
check "... counted as a miss" "$((misses + 1))" "$(metric $AB 'peel_offline_store_reads_total{result="miss"}')"
check "A and B still run" "yes yes" "$(kill -0 $A_PID && echo yes) $(kill -0 $B_PID && echo yes)"

# Redis killed under load while the upstream answers: nothing fails, nothing waits on it.
start_upstream
wait_for $AA 'd["reachability"]["state"]' reachable || true; wait_for $AB 'd["reachability"]["state"]' reachable || true
python3 "$WORK/load.py" $GA 2.5 4 "$TARGET" "$H" "$ALICE" "$ALICE_COOKIE" >"$WORK/load2.txt" & LOADER=$!
sleep 1; kill -9 $REDIS_PID; wait $REDIS_PID 2>/dev/null || true; wait $LOADER
read -r calls errors maxms statuses < <(sed 's/[a-z_]*=//g' "$WORK/load2.txt")
check "reachable, Redis killed under load: every call 200 [$(head -1 "$WORK/load2.txt")]" "0 200:$calls" "$errors $statuses"
check_le "... none slowed past 400 ms" 400 "$maxms"
check "A counts the lost connection" "yes" "$([ "$(metric $AA peel_offline_store_connect_failures_total)" -ge 1 ] && echo yes || echo no)"

# Back again: entries flow again. A Redis that refuses writes (maxmemory, noeviction) first.
start_redis
wait_for $AA 'd["offline_store"]["state"]' connected 200 || true
wait_for $AB 'd["offline_store"]["state"]' connected 200 || true
check "A reconnects" "connected" "$(status $AA 'd["offline_store"]["state"]')"
resp CONFIG SET maxmemory-policy noeviction >/dev/null; resp CONFIG SET maxmemory 1 >/dev/null
refused=$(metric $AA 'peel_offline_store_writes_total{result="refused"}')
check "Redis full (OOM on every write): alice's call is still 200" "200" "$(get $GA "$H" "$ALICE" "$ALICE_COOKIE" | cut -d'|' -f1)"
for _ in $(seq 1 40); do [ "$(metric $AA 'peel_offline_store_writes_total{result="refused"}')" -gt "$refused" ] && break; sleep 0.05; done
check "... and the refused write is counted" "yes" "$([ "$(metric $AA 'peel_offline_store_writes_total{result="refused"}')" -gt "$refused" ] && echo yes || echo no)"
check "... nothing was stored" "0" "$(entries)"
resp CONFIG SET maxmemory 0 >/dev/null
sleep 1.1  # the same answer is rewritten at most once a second per worker
for _ in 1 2 3 4; do get $GA "$H" "$ALICE" "$ALICE_COOKIE" >/dev/null; done
for _ in $(seq 1 50); do [ "$(entries)" == "1" ] && break; sleep 0.05; done
check "alice through A again: stored again" "1" "$(entries)"
# RFC 9111 §4.4 across replicas: another user's POST to the target leaves alice's entry (no client
# changes what another gets); alice's own POST through B drops the entry A wrote for her.
curl -s -o /dev/null --max-time 5 -X POST -d x=1 -H "$H" -H 'Authorization: Bearer bob' "http://127.0.0.1:$GB$TARGET" || true
sleep 0.3
check "bob's POST through B leaves alice's entry" "1" "$(entries)"
curl -s -o /dev/null --max-time 5 -X POST -d x=1 -H "$H" -H "$ALICE" -H "$ALICE_COOKIE" "http://127.0.0.1:$GB$TARGET" || true
for _ in $(seq 1 50); do [ "$(entries)" == "0" ] && break; sleep 0.05; done
check "alice's POST through B drops the entry A wrote for her" "0" "$(entries)"
sleep 1.1  # the same answer is rewritten at most once a second per worker
for _ in 1 2 3 4; do get $GA "$H" "$ALICE" "$ALICE_COOKIE" >/dev/null; done
for _ in $(seq 1 50); do [ "$(entries)" == "1" ] && break; sleep 0.05; done
check "... and alice's next GET stores it again" "1" "$(entries)"
kill $UP_PID; wait $UP_PID 2>/dev/null || true
wait_for $AB 'd["reachability"]["state"]' unreachable || true
check "... and served through B while offline" "200|Peel; hit; detail=offline|$body" "$(get $GB "$H" "$ALICE" "$ALICE_COOKIE" | cut -d'|' -f1,3-)"

# A client that hangs up while B waits for the store: Redis stopped (SIGSTOP) so no reply comes.
closed=$(metric $AB 'peel_requests_total{kind="client-closed",status="499"}'); closed=${closed:-0}
kill -STOP $REDIS_PID
curl -s --max-time 0.01 -o /dev/null -H "$H" -H "$ALICE" -H "$ALICE_COOKIE" "http://127.0.0.1:$GB$TARGET" || true
t0=$(date +%s%N)
check "a stopped Redis: the call gets the offline problem" "503" "$(get $GB "$H" "$ALICE" "$ALICE_COOKIE" | cut -d'|' -f1)"
waited=$(( ($(date +%s%N) - t0) / 1000000 ))
check "... after waiting the read bound (50 ms), not much longer (ms: $waited)" "yes" "$([ "$waited" -ge 45 ] && [ "$waited" -le 400 ] && echo yes || echo no)"
check "... counted as timeouts" "yes" "$([ "$(metric $AB 'peel_offline_store_reads_total{result="timeout"}')" -ge 1 ] && echo yes || echo no)"
# A Redis that stopped answering keeps its socket open: B must notice within the stall bound (2 s).
failures=$(metric $AB 'peel_offline_store_connect_failures_total'); failures=${failures:-0}
for _ in $(seq 1 60); do [ "$(metric $AB 'peel_offline_store_connect_failures_total')" -gt "$failures" ] && break; sleep 0.1; done
check "a stopped Redis: B drops the silent connection within the stall bound" "yes" \
  "$([ "$(metric $AB 'peel_offline_store_connect_failures_total')" -gt "$failures" ] && echo yes || echo no)"
kill -CONT $REDIS_PID
wait_for $AB 'd["offline_store"]["state"]' connected 200 || true
check "... and reconnects once Redis answers again" "connected" "$(status $AB 'd["offline_store"]["state"]')"
sleep 0.2
check "B runs after the hang-up during the wait" "yes" "$(kill -0 $B_PID && echo yes)"
check "B: the call that hung up during the wait is logged 499" "$((closed + 1))" "$(metric $AB 'peel_requests_total{kind="client-closed",status="499"}')"

# What is in Redis after the run: no token, cookie or path in clear, in keys or values.
redis-cli -p "$RP" --scan >"$WORK/keys.txt"
check "redis-cli --scan: every key is peel:oc:1: (r: for an index set) and a 64-digit HMAC" "yes" \
  "$(grep -Evq '^peel:oc:1:(r:)?[0-9a-f]{64}$' "$WORK/keys.txt" && echo no || echo yes)"
: >"$WORK/all-values"
while read -r k; do
  case "$k" in peel:oc:1:r:*) redis-cli -p "$RP" smembers "$k" >>"$WORK/all-values" ;; *) resp get "$k" >>"$WORK/all-values" ;; esac
done <"$WORK/keys.txt"
for secret in alice-token-7f3c9e cookie-secret-51d2 path-secret-93ab /api/user; do
  check "no '$secret' in any key" "0" "$(grep -c -- "$secret" "$WORK/keys.txt" || true)"
  check "no '$secret' in any value" "0" "$(grep -ac -- "$secret" "$WORK/all-values" || true)"
done
check "the values hold the answer (the check above could see a secret if one were there)" "yes" \
  "$(grep -aq 'Ada Lovelace' "$WORK/all-values" && echo yes || echo no)"

# Stores that misbehave on purpose (issue 28): a fake that accepts every connection and closes it
# at once (a Redis at maxclients, a port-forward with nothing behind it), and one that answers
# anything with a 100 MB bulk reply. Each counts the connections it took.
cat >"$WORK/fake-store.py" <<'PYEOF'
# fake-store.py PORT close|huge COUNT-FILE
import socket, sys, threading
port, mode, count_file = int(sys.argv[1]), sys.argv[2], sys.argv[3]
lock, n = threading.Lock(), [0]
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", port)); srv.listen(128)
open(count_file, "w").write("0")  # listening: the count starts
def huge(c):
    try:
        c.recv(65536)
        c.sendall(b"$100000000\r\n")
        chunk = b"x" * (1 << 20)
        for _ in range(100):
            c.sendall(chunk)
        c.sendall(b"\r\n")
        while c.recv(65536): pass
    except OSError:
        pass
    c.close()
while True:
    c, _ = srv.accept()
    with lock:
        n[0] += 1
        open(count_file, "w").write(str(n[0]))
    if mode == "close":
        c.close()
    else:
        threading.Thread(target=huge, args=(c,), daemon=True).start()
PYEOF
start_upstream
FP=$(free_port); FA=$(free_port); FG=$(free_port)
python3 "$WORK/fake-store.py" "$FP" close "$WORK/closes" & FAKE_PID=$!; pids+=($FAKE_PID)
for _ in $(seq 1 100); do [ -s "$WORK/closes" ] && break; sleep 0.05; done
"$PEEL" "${common[@]}" --listen 127.0.0.1:$FG --admin-listen 127.0.0.1:$FA --offline-store "redis://127.0.0.1:$FP/0" \
  >/dev/null 2>"$WORK/f.err" & F_PID=$!; pids+=($F_PID)
wait_listening $FA $F_PID
sleep 5
taken=$(cat "$WORK/closes" 2>/dev/null || echo 0)
kill $F_PID; wait $F_PID 2>/dev/null || true
kill $FAKE_PID; wait $FAKE_PID 2>/dev/null || true
check_le "a store that accepts and closes: connections in 5 s, 2 workers (backoff from 0.1 s doubling to 5 s)" 40 "$taken"
check "... it is never taken for connected" "0" "$(grep -c '"event":"offline_store_connected"' "$WORK/f.err" || true)"
check "... one offline_store_down line per worker for the whole outage" "2" "$(grep -c '"event":"offline_store_down"' "$WORK/f.err" || true)"

# A 100 MB reply: refused as it arrives, never buffered whole; calls meanwhile are not held up.
FP=$(free_port); FA=$(free_port); FG=$(free_port)
python3 "$WORK/fake-store.py" "$FP" huge "$WORK/huges" & FAKE_PID=$!; pids+=($FAKE_PID)
for _ in $(seq 1 100); do [ -s "$WORK/huges" ] && break; sleep 0.05; done
"$PEEL" "${common[@]}" --listen 127.0.0.1:$FG --admin-listen 127.0.0.1:$FA --offline-store "redis://127.0.0.1:$FP/0" \
  >/dev/null 2>"$WORK/h.err" & F_PID=$!; pids+=($F_PID)
wait_listening $FA $F_PID
wait_for $FA 'd["reachability"]["state"]' reachable || true
python3 "$WORK/load.py" $FG 5 4 "$TARGET" "$H" "$ALICE" >"$WORK/load3.txt"
p99=$(sed -n 's/^p99_ms=//p' "$WORK/load3.txt")
hwm=$(awk '/^VmHWM/{print int($2/1024)}' /proc/$F_PID/status)
huges=$(cat "$WORK/huges" 2>/dev/null || echo 0)
read -r calls errors maxms statuses < <(head -1 "$WORK/load3.txt" | sed 's/[a-z_]*=//g')
check "a store answering 100 MB: every call 200 [$(head -1 "$WORK/load3.txt"), p99 ${p99} ms, peak RSS ${hwm} MB, ${huges} connections]" \
  "0 200:$calls" "$errors $statuses"
check "... the fake store was asked, and answered with its 100 MB" "yes" "$([ "$huges" -ge 2 ] && echo yes || echo no)"
check_le "... calls meanwhile at p99 (ms)" 200 "$p99"
check_le "... peak RSS (MB)" 150 "$hwm"
check "... the reply was refused for its size, in the log" "yes" "$(grep -q 'a reply over' "$WORK/h.err" && echo yes || echo no)"
kill $F_PID; wait $F_PID 2>/dev/null || true
kill $FAKE_PID; wait $FAKE_PID 2>/dev/null || true

# A Redis with requirepass: no password and a wrong one are auth_failed (not "connected", not
# refused writes); the right one works; the password is shown nowhere.
PW="pw-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
AP=$(free_port)
redis-server --port "$AP" --bind 127.0.0.1 --requirepass "$PW" --save '' --appendonly no --dir "$WORK" >>"$WORK/redis-auth.log" 2>&1 & AUTH_PID=$!; pids+=($AUTH_PID)
for _ in $(seq 1 100); do redis-cli -p "$AP" -a "$PW" --no-auth-warning PING 2>/dev/null | grep -q PONG && break; sleep 0.05; done
printf '%s\n' "$PW" >"$WORK/pw"; printf 'wrong-password\n' >"$WORK/wrong-pw"
redis-cli -p "$AP" -a "$PW" --no-auth-warning ACL SETUSER peel on ">$PW-acl" '~peel:*' '+@all' >/dev/null
printf 'peel\n%s-acl\n' "$PW" >"$WORK/acl-pw"
run_auth() { # run_auth NAME [PASSWORD-FILE]: a Peel on the requirepass Redis; leaves A_ADMIN, A_GW, A_PID
  A_ADMIN=$(free_port); A_GW=$(free_port)
  local extra=(); [ -n "${2:-}" ] && extra=(--offline-store-password-file "$2")
  "$PEEL" "${common[@]}" --listen 127.0.0.1:$A_GW --admin-listen 127.0.0.1:$A_ADMIN --offline-store "redis://127.0.0.1:$AP/0" \
    "${extra[@]}" >/dev/null 2>"$WORK/auth-$1.err" & A_PID=$!; pids+=($A_PID)
  wait_listening $A_ADMIN $A_PID
  wait_for $A_ADMIN 'd["reachability"]["state"]' reachable || true
}
for case in none wrong; do
  file=""; [ "$case" == wrong ] && file="$WORK/wrong-pw"
  run_auth $case $file
  wait_for $A_ADMIN 'd["offline_store"]["state"]' auth_failed 100 || true
  check "requirepass, $case password: /status says auth_failed" "auth_failed 0" \
    "$(status $A_ADMIN 'd["offline_store"]["state"], d["offline_store"]["connected_workers"]')"
  get $A_GW "$H" "$ALICE" >/dev/null; sleep 0.3
  check "... counted as auth failures, never as refused writes" "yes 0" \
    "$([ "$(metric $A_ADMIN peel_offline_store_auth_failures_total)" -ge 1 ] && echo yes || echo no) $(metric $A_ADMIN 'peel_offline_store_writes_total{result="refused"}')"
  check "... the log line says auth_failed" "yes" "$(grep '"event":"offline_store_down"' "$WORK/auth-$case.err" | grep -q '"state":"auth_failed"' && echo yes || echo no)"
  kill $A_PID; wait $A_PID 2>/dev/null || true
done
for case in right acl; do
  file="$WORK/pw"; [ "$case" == acl ] && file="$WORK/acl-pw"
  run_auth $case "$file"
  wait_for $A_ADMIN 'd["offline_store"]["state"]' connected 100 || true
  check "requirepass, the $case password file: connected" "connected 2" \
    "$(status $A_ADMIN 'd["offline_store"]["state"], d["offline_store"]["connected_workers"]')"
  before=$(redis-cli -p "$AP" -a "$PW" --no-auth-warning DBSIZE)
  curl -s -o /dev/null -H "$H" -H "Authorization: Bearer $case" "http://127.0.0.1:$A_GW$TARGET"
  for _ in $(seq 1 50); do [ "$(redis-cli -p "$AP" -a "$PW" --no-auth-warning DBSIZE)" -gt "$before" ] && break; sleep 0.05; done
  check "... and the answer is written" "yes" "$([ "$(redis-cli -p "$AP" -a "$PW" --no-auth-warning DBSIZE)" -gt "$before" ] && echo yes || echo no)"
  curl -s "http://127.0.0.1:$A_ADMIN/status" >"$WORK/auth-status"; curl -s "http://127.0.0.1:$A_ADMIN/metrics" >"$WORK/auth-metrics"
  "$PEEL" check-config "${common[@]}" --offline-store "redis://127.0.0.1:$AP/0" --offline-store-password-file "$file" >"$WORK/auth-config"
  kill $A_PID; wait $A_PID 2>/dev/null || true
  check "... the password is in none of /status, /metrics, the log, check-config" "0" \
    "$(cat "$WORK/auth-status" "$WORK/auth-metrics" "$WORK/auth-$case.err" "$WORK/auth-config" | grep -c -- "$PW" || true)"
  check "... check-config names the file" "yes" "$(grep -q -- "$file" "$WORK/auth-config" && echo yes || echo no)"
done
rc=0; out=$("$PEEL" --upstream http://127.0.0.1:1 --offline-cache 1MiB --offline-store "redis://:$PW@127.0.0.1:$AP" \
  --offline-store-secret-file "$WORK/secret" 2>&1) || rc=$?
check "a password in the store URL: exit 2, naming --offline-store-password-file, not echoing the password" "2 yes 0" \
  "$rc $(echo "$out" | grep -q -- '--offline-store-password-file' && echo yes || echo no) $(echo "$out" | grep -c -- "$PW" || true)"

# What a client's request may not do to a shared entry, on both stores (RFC 9111 §4, §4.3.4): a
# no-store request, an If-Match answered 412 and a 304 for another Vary value leave the public
# entry every other client is served while offline. The upstream: one public endpoint, 412 for any
# If-Match, 304 for a matching If-None-Match, Vary: X-Lang.
cat >"$WORK/shared-upstream.py" <<'PYEOF'
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        head = [("Cache-Control", "public, max-age=60"), ("ETag", '"v1"'), ("Vary", "X-Lang")]
        if self.headers.get("If-Match"):
            status, body = 412, b'{"code":412,"message":"precondition failed"}'
        elif self.headers.get("If-None-Match") == '"v1"':
            status, body = 304, b""
        else:
            status, body = 200, b'{"code":0,"data":{"shared":"v1"}}'
        self.send_response(status)
        for k, v in head: self.send_header(k, v)
        if status != 304:
            self.send_header("Content-Type", "application/json"); self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PYEOF
SU=$(free_port)
python3 "$WORK/shared-upstream.py" "$SU" & SU_PID=$!; pids+=($SU_PID)
for _ in $(seq 1 50); do curl -s -o /dev/null "http://127.0.0.1:$SU/" && break; sleep 0.05; done
shared_run() { # shared_run NAME STORE-ARGS...: one Peel in front of the shared upstream; leaves S_GW, S_ADMIN, S_PID
  local name=$1; shift
  S_GW=$(free_port); S_ADMIN=$(free_port)
  "$PEEL" --upstream "http://127.0.0.1:$SU" --access-log off --workers 2 --probe-interval 0.2 --probe-timeout 0.2 \
    --connect-timeout 0.2 --fall 2 --rise 1 --offline-cache 1MiB --offline-store-secret-file "$WORK/secret" \
    --listen 127.0.0.1:$S_GW --admin-listen 127.0.0.1:$S_ADMIN "$@" >/dev/null 2>"$WORK/shared-$name.err" & S_PID=$!; pids+=($S_PID)
  wait_listening $S_ADMIN $S_PID
  wait_for $S_ADMIN 'd["reachability"]["state"]' reachable || true
}
sget() { # sget PATH HEADER... → status
  local p=$1; shift; local args=()
  for h in "$@"; do args+=(-H "$h"); done
  curl -s -o /dev/null -w '%{http_code}' --max-time 5 "${args[@]}" -H "$H" "http://127.0.0.1:$S_GW$p"
}
for store in memory redis; do
  args=(--offline-store memory); [ $store == redis ] && args=(--offline-store "redis://127.0.0.1:$RP/3")
  [ $store == redis ] && redis-cli -p "$RP" -n 3 FLUSHDB >/dev/null
  shared_run $store "${args[@]}"
  [ $store == redis ] && { wait_for $S_ADMIN 'd["offline_store"]["state"]' connected || true; }
  settle() { sleep 0.3; }
  check "$store: the public answers (anonymous) are 200" "200 200 200" "$(sget /a 'X-Lang: en') $(sget /b 'X-Lang: en') $(sget /c 'X-Lang: en')"
  settle
  check "$store: /a again with Cache-Control: no-store is 200" "200" "$(sget /a 'X-Lang: en' 'Cache-Control: no-store')"
  check "$store: /b with If-Match: the upstream answers 412" "412" "$(sget /b 'X-Lang: en' 'If-Match: "nope"')"
  check "$store: /c for another Vary value, conditional: 304" "304" "$(sget /c 'X-Lang: fr' 'If-None-Match: "v1"')"
  settle
  kill $SU_PID; wait $SU_PID 2>/dev/null || true
  wait_for $S_ADMIN 'd["reachability"]["state"]' unreachable || true
  check "$store: offline, every other client still gets all three shared entries" "200 200 200" \
    "$(sget /a 'X-Lang: en') $(sget /b 'X-Lang: en') $(sget /c 'X-Lang: en')"
  kill $S_PID; wait $S_PID 2>/dev/null || true
  python3 "$WORK/shared-upstream.py" "$SU" & SU_PID=$!; pids+=($SU_PID)
  for _ in $(seq 1 50); do curl -s -o /dev/null "http://127.0.0.1:$SU/" && break; sleep 0.05; done
done
