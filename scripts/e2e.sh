#!/usr/bin/env bash
# End-to-end: the built binary, driven by real curl and ab against the built-in demo upstream.
set -euo pipefail
PEEL=${1:?usage: e2e.sh PATH/TO/peel}
source "$(dirname "$0")/lib.sh"

# Command line: bad configuration exits 2 with one line naming the option; check-config prints JSON.
rc=0; out=$("$PEEL" --upstream http://127.0.0.1:1 --timeout soon 2>&1) || rc=$?
check "bad option exits 2" "2" "$rc"
check "bad option names the option in one line" "1 --timeout" "$(echo "$out" | wc -l) $(echo "$out" | grep -o -- '--timeout' | head -1)"
check "missing upstream is named" "yes" "$( { "$PEEL" 2>&1 || true; } | grep -q -- '--upstream' && echo yes || echo no)"
check "check-config prints the effective configuration" "12.5" "$(PEEL_UPSTREAM=http://u.example "$PEEL" check-config --timeout 12.5 | python3 -c 'import json,sys;print(json.load(sys.stdin)["timeout"])')"
# Issue 18: values that would silently mean "forever" or "always" exit 2 with one line naming the option.
for bad in "--timeout 0.0009" "--connect-timeout 0.0009" "--probe-timeout 0.0009" "--client-timeout 0.0001" \
           "--probe-interval 0.0001" "--probe-path /health check" "--probe-path /a%zz"; do
  opt=${bad%% *}; val=${bad#* }
  rc=0; out=$("$PEEL" check-config --upstream http://127.0.0.1:1 "$opt" "$val" 2>&1) || rc=$?
  check "$opt $val: exit 2, one line naming it" "2 1 $opt" "$rc $(echo "$out" | wc -l) $(echo "$out" | grep -o -- "$opt" | head -1)"
done
check "check-config output parses with control characters in values" "urn:a\u0001b" "$(PEEL_UPSTREAM=http://u.example "$PEEL" check-config --problem-type-base "$(printf 'urn:a\001b')" | python3 -c 'import json,sys;print(json.dumps(json.load(sys.stdin)["problem_type_base"])[1:-1])')"
check "--version" "yes" "$("$PEEL" --version | grep -q '^peel [0-9]' && echo yes || echo no)"

UP=$(free_port); GW=$(free_port); AD=$(free_port)
"$PEEL" demo-upstream --listen 127.0.0.1:$UP >"$WORK/upstream.log" 2>&1 & pids+=($!)
wait_listening $UP $!
"$PEEL" --upstream http://127.0.0.1:$UP --listen 127.0.0.1:$GW --admin-listen 127.0.0.1:$AD \
  --probe-interval 0.2 --fall 2 --rise 1 >"$WORK/peel.out" 2>"$WORK/peel.err" & PEEL_PID=$!
pids+=($PEEL_PID)
wait_listening $AD $PEEL_PID
for _ in $(seq 1 100); do curl -fs "http://127.0.0.1:$AD/readyz" >/dev/null 2>&1 && break; sleep 0.05; done

G=http://127.0.0.1:$GW
check "success unwraps data byte-exact" '{"id":42,"name":"Ada Lovelace","balance":1024.50,"tags":["admin","beta"],"active":true}' "$(curl -s $G/api/user)"
check "success content type" "application/json" "$(curl -s -o /dev/null -w '%{content_type}' $G/api/user)"
check "business error is 422" "422" "$(curl -s -o /dev/null -w '%{http_code}' $G/api/business-error)"
check "token expired is 401" "401" "$(curl -s -o /dev/null -w '%{http_code}' $G/api/token-expired)"
check "problem content type" "application/problem+json" "$(curl -s -o /dev/null -w '%{content_type}' $G/api/html)"
check "html body is bad-upstream-format" "bad-upstream-format" "$(curl -s $G/api/html | python3 -c 'import json,sys;print(json.load(sys.stdin)["kind"])')"
check "X-Request-Id echoed" "e2e-id-1" "$(curl -s -D - -o /dev/null -H 'X-Request-Id: e2e-id-1' $G/api/user | tr -d '\r' | awk -F': ' 'tolower($1)=="x-request-id"{print $2}')"
check "POST form body forwarded" "a=1&b=2" "$(curl -s -d 'a=1&b=2' $G/api/echo | python3 -c 'import json,sys;print(json.load(sys.stdin)["body"])')"
check "CONNECT refused" "400" "$(curl -s -o /dev/null -w '%{http_code}' -X CONNECT $G/api/user)"
check "dot-segments above base refused" "400" "$(curl -s -o /dev/null -w '%{http_code}' --path-as-is $G/../etc/passwd)"
check "healthcheck" "0" "$("$PEEL" healthcheck --admin-listen 127.0.0.1:$AD; echo $?)"

ab -q -k -c 50 -n 20000 "$G/api/user" >"$WORK/ab-k.txt" 2>&1 || true
check "ab -k -c 50 -n 20000: complete" "20000" "$(awk '/^Complete requests/{print $3}' "$WORK/ab-k.txt")"
check "ab -k -c 50 -n 20000: failed" "0" "$(awk '/^Failed requests/{print $3}' "$WORK/ab-k.txt")"
ab -q -c 20 -n 2000 "$G/api/user" >"$WORK/ab.txt" 2>&1 || true
check "ab -c 20 -n 2000 (no keep-alive): failed" "0" "$(awk '/^Failed requests/{print $3}' "$WORK/ab.txt")"

# Issue 13: slow is not offline. Every answer, probes included, takes 1.5 s against a 1 s probe
# timeout, under 10 concurrent clients for 12 s: the live answers prove the upstream is there.
GWS=$(free_port)
"$PEEL" --upstream http://127.0.0.1:$UP --listen 127.0.0.1:$GWS --admin-listen off --access-log off \
  --probe-path '/api/slow?ms=1500' --probe-timeout 1 --probe-interval 2 --fall 3 >/dev/null 2>"$WORK/slow.err" & pids+=($!)
wait_listening $GWS $!
for _ in $(seq 1 100); do curl -fs -o /dev/null "http://127.0.0.1:$GWS/api/user" && break; sleep 0.05; done
ab -q -c 10 -t 12 -n 1000000 "http://127.0.0.1:$GWS/api/slow?ms=1500" >"$WORK/ab-slow.txt" 2>&1 || true
check "slow upstream under load: no offline answers" "0" "$(awk '/^Non-2xx responses/{n=$3} END{print n+0}' "$WORK/ab-slow.txt")"
check_le "slow upstream under load: answers (at least 50)" "$(awk '/^Complete requests/{print $3}' "$WORK/ab-slow.txt")" 50
check "slow upstream under load: never unreachable" "no" "$(grep -q '"to":"unreachable"' "$WORK/slow.err" && echo yes || echo no)"

# Issue 13: the upstream dies and comes back. Stale answers for stored GETs, the offline problem
# for everything else, an SSE transition within 1 s of detection, fresh answers after revival.
UPO=$(free_port); GWO=$(free_port); ADO=$(free_port)
"$PEEL" demo-upstream --listen 127.0.0.1:$UPO >/dev/null 2>&1 & UPO_PID=$!; pids+=($UPO_PID)
wait_listening $UPO $UPO_PID
# The cache size comes from a config file, so that SIGHUP can turn it off (issue 17).
echo '{"offline_cache": "1MiB"}' >"$WORK/cache.json"
"$PEEL" --upstream http://127.0.0.1:$UPO --listen 127.0.0.1:$GWO --admin-listen 127.0.0.1:$ADO --access-log off \
  --probe-interval 0.2 --probe-timeout 0.2 --connect-timeout 0.2 --fall 2 --rise 1 --config "$WORK/cache.json" \
  >/dev/null 2>"$WORK/off.err" & OFF_PID=$!; pids+=($OFF_PID)
wait_listening $ADO $OFF_PID
GO=http://127.0.0.1:$GWO
for _ in $(seq 1 100); do curl -fs -o /dev/null "$GO/api/user" && break; sleep 0.05; done
fresh=$(curl -s -H 'Authorization: Bearer alice' "$GO/api/user")
curl -sN -H 'Accept: text/event-stream' "$GO/_peel/reachability" >"$WORK/sse.txt" & pids+=($!)
for _ in $(seq 1 100); do grep -q '"state":"reachable"' "$WORK/sse.txt" && break; sleep 0.02; done
check "event stream: the current state at once" "yes" "$(grep -q '"state":"reachable"' "$WORK/sse.txt" && echo yes || echo no)"
# One shape for apps, with --upstream alone too: the group `default` in the document and the events.
check "event stream: each event names its group" "yes" "$(grep -q '"upstream":"default","state":"reachable"' "$WORK/sse.txt" && echo yes || echo no)"
check "reachability document lists the group default" "default reachable" "$(curl -s "$GO/_peel/reachability" | python3 -c 'import json,sys;d=json.load(sys.stdin)["upstreams"];print(" ".join(k+" "+v["state"] for k,v in d.items()))')"
# A stream's place is freed when its client closes: 10 reconnects in a row (8 places per client,
# one held above) are never refused.
codes=""; for _ in $(seq 1 10); do codes+="$(curl -s -o /dev/null -w '%{http_code}' -m 0.3 -N -H 'Accept: text/event-stream' "$GO/_peel/reachability" || true) "; done
check "event stream: 10 reconnects in a row all get 200" "200 200 200 200 200 200 200 200 200 200 " "$codes"
kill $UPO_PID; wait $UPO_PID 2>/dev/null || true
for _ in $(seq 1 150); do curl -s "http://127.0.0.1:$ADO/status" | grep -q '"state":"unreachable"' && break; sleep 0.02; done
sse_in_time=no
for _ in $(seq 1 50); do grep -q '"state":"unreachable"' "$WORK/sse.txt" && { sse_in_time=yes; break; }; sleep 0.02; done
check "event stream: the transition within 1 s of detection" "yes" "$sse_in_time"
check "transition event names its reason" "yes" "$(grep -q '"to":"unreachable","reason":"[a-z]' "$WORK/off.err" && echo yes || echo no)"
check "offline: a stored GET gets its stale answer" "$fresh" "$(curl -s -H 'Authorization: Bearer alice' "$GO/api/user")"
check "offline: the stale answer says so (RFC 9211)" "Peel; hit; detail=offline" "$(curl -s -D - -o /dev/null -H 'Authorization: Bearer alice' "$GO/api/user" | tr -d '\r' | awk -F': ' 'tolower($1)=="cache-status"{print $2}')"
check "offline: another user's GET gets the offline problem" "503 offline" "$(curl -s -w ' %{http_code}' -H 'Authorization: Bearer bob' "$GO/api/user" | python3 -c 'import json,sys;t=sys.stdin.read();b,c=t.rsplit(" ",1);print(c,json.loads(b)["kind"])')"
check "offline: a POST gets the offline problem" "503" "$(curl -s -o /dev/null -w '%{http_code}' -d x=1 -H 'Authorization: Bearer alice' "$GO/api/user")"
check "offline: the public reason names no address" "no" "$(curl -s "$GO/_peel/reachability" | grep -q '127.0.0.1' && echo yes || echo no)"
# An operator turning the cache off after a privacy incident: SIGHUP drops every entry at once.
echo '{"offline_cache": 0}' >"$WORK/cache.json"
kill -HUP $OFF_PID
for _ in $(seq 1 50); do grep -q '"event":"reloaded"' "$WORK/off.err" && break; sleep 0.02; done
check "SIGHUP with offline_cache 0: nothing needs a restart" "1" "$(grep '"event":"reloaded"' "$WORK/off.err" | grep -c '"needs_restart":\[\]')"
check "SIGHUP with offline_cache 0: the stored answer is gone" "503" "$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer alice' "$GO/api/user")"
"$PEEL" demo-upstream --listen 127.0.0.1:$UPO >/dev/null 2>&1 & pids+=($!)
wait_listening $UPO $!
for _ in $(seq 1 150); do grep -q '"state":"reachable".*' <(tail -n 3 "$WORK/sse.txt") && break; sleep 0.02; done
for _ in $(seq 1 150); do curl -s "http://127.0.0.1:$ADO/status" | grep -q '"state":"reachable"' && break; sleep 0.02; done
check "revived: fresh answers again" "200 none" "$(curl -s -D "$WORK/h.txt" -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer alice' "$GO/api/user") $(grep -qi '^cache-status' "$WORK/h.txt" && echo stale || echo none)"
check "event stream: the way back" "yes" "$(tail -n 3 "$WORK/sse.txt" | grep -q '"state":"reachable"' && echo yes || echo no)"

# https upstream: a local TLS server with a self-signed certificate, trusted only through --ca-file.
TLS=$(free_port); GW2=$(free_port); GW3=$(free_port)
start_tls_upstream $TLS
"$PEEL" --upstream https://127.0.0.1:$TLS --ca-file "$WORK/cert.pem" --listen 127.0.0.1:$GW2 --admin-listen off --access-log off 2>/dev/null & pids+=($!)
wait_listening $GW2 $!
"$PEEL" --upstream https://127.0.0.1:$TLS --listen 127.0.0.1:$GW3 --admin-listen off --access-log off --fall 100 2>/dev/null & pids+=($!)
wait_listening $GW3 $!
for _ in $(seq 1 100); do [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$GW2/")" == "200" ] && break; sleep 0.05; done
check "https upstream trusted through --ca-file" '{"tls":true,"n":1.10}' "$(curl -s http://127.0.0.1:$GW2/v)"
check "https upstream with an untrusted certificate is unreachable" "upstream-unreachable" "$(curl -s http://127.0.0.1:$GW3/v | python3 -c 'import json,sys;print(json.load(sys.stdin)["kind"])')"

# Access log: one JSON line per request with the documented fields.
sleep 0.3
check "access log lines are JSON with every field" "ok" "$(python3 - "$WORK/peel.out" <<'PY'
import json, sys
need = {"time","request_id","method","path","status","kind","upstream_status","upstream_code","duration_ms","bytes","client"}
lines = [l for l in open(sys.argv[1]) if l.strip()]
bad = [l for l in lines if not need <= set(json.loads(l))]
print("ok" if len(lines) > 20000 and not bad else f"{len(lines)} lines, {len(bad)} bad")
PY
)"

# Issue 18: a streamed answer whose upstream goes silent is cut after --upstream-idle-timeout
# (no last chunk: curl reports a partial transfer), and its access-log line says why.
GW10=$(free_port)
"$PEEL" --upstream http://127.0.0.1:$UP --listen 127.0.0.1:$GW10 --admin-listen off --upstream-idle-timeout 0.5 \
  >"$WORK/idle.out" 2>/dev/null & IDLE_PID=$!; pids+=($IDLE_PID)
wait_listening $GW10 $IDLE_PID
for _ in $(seq 1 100); do curl -fs "http://127.0.0.1:$GW10/api/user" >/dev/null 2>&1 && break; sleep 0.05; done
start=$(date +%s%N)
rc=0; body=$(curl -s --max-time 10 "http://127.0.0.1:$GW10/fault/stall-mid-stream") || rc=$?
took_ms=$(( ($(date +%s%N) - start) / 1000000 ))
check "stalled upstream stream: cut short after the first chunk (curl exit 18)" "18 hello" "$rc $body"
check "stalled upstream stream: cut after the idle timeout, not before" "yes" "$([ "$took_ms" -ge 450 ] && [ "$took_ms" -le 3000 ] && echo yes || echo "no ($took_ms ms)")"
wait_log "$WORK/idle.out" '"path":"/fault/stall-mid-stream"' 1
check "stalled upstream stream: the access log says why" "passthrough-cut upstream_idle" "$(python3 -c '
import json, sys
for l in open(sys.argv[1]):
    e = json.loads(l)
    if e["path"] == "/fault/stall-mid-stream": print(e["kind"], e.get("cut"))' "$WORK/idle.out")"
kill $IDLE_PID

# Signals: SIGUSR1 and SIGUSR2 are logged and ignored; SIGHUP re-reads the config file and applies
# it to new requests (under load, without a failed request), and an invalid one keeps the running
# configuration; each signal is a JSON event on stderr.
GW4=$(free_port)
echo '{"business_status": 409}' >"$WORK/hup.json"
"$PEEL" --upstream http://127.0.0.1:$UP --listen 127.0.0.1:$GW4 --admin-listen off --access-log off \
  --config "$WORK/hup.json" 2>"$WORK/hup.err" & HUP_PID=$!
pids+=($HUP_PID)
wait_listening $GW4 $HUP_PID
G4=http://127.0.0.1:$GW4
for _ in $(seq 1 100); do [ "$(curl -s -o /dev/null -w '%{http_code}' $G4/api/user)" == "200" ] && break; sleep 0.05; done
check "business status from the config file" "409" "$(curl -s -o /dev/null -w '%{http_code}' $G4/api/business-error)"
kill -USR1 $HUP_PID; kill -USR2 $HUP_PID; wait_log "$WORK/hup.err" '"action":"ignored"' 2
check "SIGUSR1 and SIGUSR2 leave the process serving" "200" "$(curl -s -o /dev/null -w '%{http_code}' $G4/api/user)"
check "SIGUSR1 and SIGUSR2 logged as ignored" "2" "$(grep -c '"event":"signal","signal":"SIGUSR[12]","action":"ignored"' "$WORK/hup.err")"
echo '{"business_status": 418}' >"$WORK/hup.json"
kill -HUP $HUP_PID; wait_log "$WORK/hup.err" '"event":"reloaded"' 1
check "SIGHUP applies the re-read config file" "418" "$(curl -s -o /dev/null -w '%{http_code}' $G4/api/business-error)"
check "SIGHUP logged, then the reload" "2" "$(grep -c '"signal":"SIGHUP","action":"reload"\|"event":"reloaded"' "$WORK/hup.err")"
echo '{"business_status": "many"}' >"$WORK/hup.json"
kill -HUP $HUP_PID; wait_log "$WORK/hup.err" '"event":"reload_failed"' 1
check "an invalid config on SIGHUP keeps the running one" "418" "$(curl -s -o /dev/null -w '%{http_code}' $G4/api/business-error)"
check "the refused reload is logged with the option" "1" "$(grep '"event":"reload_failed"' "$WORK/hup.err" | grep -c business_status)"
echo '{"business_status": 422}' >"$WORK/hup.json"
ab -q -k -c 20 -n 20000 "$G4/api/user" >"$WORK/ab-hup.txt" 2>&1 & AB_PID=$!
for _ in 1 2 3 4 5; do sleep 0.2; kill -HUP $HUP_PID; done
wait $AB_PID || true
check "ab -k during 5 SIGHUP reloads: complete" "20000" "$(awk '/^Complete requests/{print $3}' "$WORK/ab-hup.txt")"
check "ab -k during 5 SIGHUP reloads: failed" "0" "$(awk '/^Failed requests/{print $3}' "$WORK/ab-hup.txt")"
kill -TERM $HUP_PID; rc=0; wait $HUP_PID || rc=$?
check "SIGTERM after reloads exits 0" "0" "$rc"

# SIGTERM during a slow call: the call completes, then the process exits 0.
curl -s -o "$WORK/slow.body" -w '%{http_code}' "$G/api/slow?ms=1500" >"$WORK/slow.code" & CURL_PID=$!
# SIGTERM once the call is in flight (a curl started late would find the listener closed).
seen=no
for _ in $(seq 1 100); do curl -s "http://127.0.0.1:$AD/metrics" | grep -qx 'peel_inflight_requests 1' && { seen=yes; break; }; sleep 0.02; done
check "slow call in flight before SIGTERM" "yes" "$seen"
kill -TERM $PEEL_PID
wait $CURL_PID || true
check "slow call in flight at SIGTERM completes" "200" "$(cat "$WORK/slow.code")"
wait $PEEL_PID; rc=$?
check "SIGTERM exits 0" "0" "$rc"
check "shutdown events logged" "yes" "$(grep -q '"event":"stopped","clean":true' "$WORK/peel.err" && echo yes || echo no)"

# Issue 25: every dialect preset, live, against one upstream serving every preset's samples.
rc=0; python3 "$(dirname "$0")/dialect_e2e.py" "$PEEL" >"$WORK/dialects.txt" 2>&1 || rc=$?
grep -E '^(FAIL|ok)' "$WORK/dialects.txt" | grep -c '^ok' >"$WORK/dialects.ok" || true
check "dialects: every preset's samples answered as listed ($(cat "$WORK/dialects.ok") checks)" "0" "$rc"
[ "$rc" -eq 0 ] || grep -E '^FAIL|Error|Traceback' "$WORK/dialects.txt" | head -20

echo "e2e: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
