#!/usr/bin/env bash
# Routes and upstream groups end to end (issue 27): the built binary with real upstream processes
# (three demo upstreams for one group, a RuoYi-shaped Python server for another), driven by curl
# and ab. One endpoint is killed under load and comes back; a reload adds a route and removes an
# endpoint under load.
set -euo pipefail
PEEL=${1:?usage: routes.sh PATH/TO/peel}
source "$(dirname "$0")/lib.sh"

# Logs are opened for appending, so truncating one (: >) starts it over cleanly.
# A small upstream in Python: RuoYi's AjaxResult for every path (`{"msg":…,"code":200,"data":…}`: a
# HashMap, which Jackson writes msg first),
# or, with DELAY set, the peel envelope after DELAY seconds (a slow endpoint).
cat >"$WORK/upstream.py" <<'PY'
import json, os, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
delay = float(os.environ.get("DELAY", "0"))
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        if delay:
            time.sleep(delay)
            body = {"code": 0, "message": "ok", "data": {"slow": True}}
        else:
            body = {"msg": "操作成功", "code": 200, "data": {"userId": 1, "userName": "admin", "path": self.path}}
        raw = json.dumps(body, ensure_ascii=False).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json;charset=UTF-8")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)
ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY

start_demo() {  # start_demo PORT: a demo upstream on PORT; prints its pid
  "$PEEL" demo-upstream --listen "127.0.0.1:$1" >>"$WORK/upstreams.log" 2>&1 &
  echo $!
}
wait_port() { for _ in $(seq 1 100); do curl -fs -o /dev/null "http://127.0.0.1:$1/__demo/health" && return 0; sleep 0.05; done; }
endpoint_state() {  # endpoint_state ADMIN_PORT GROUP INDEX
  curl -s "http://127.0.0.1:$1/status" | python3 -c "import json,sys;print(json.load(sys.stdin)['upstreams']['$2']['endpoints'][$3]['state'])"
}

A1=$(free_port); A2=$(free_port); A3=$(free_port); RY=$(free_port); SLOW=$(free_port)
P1=$(start_demo $A1); P2=$(start_demo $A2); P3=$(start_demo $A3); pids+=($P1 $P2 $P3)
python3 "$WORK/upstream.py" $RY >/dev/null 2>&1 & pids+=($!)
DELAY=0.05 python3 "$WORK/upstream.py" $SLOW >/dev/null 2>&1 & pids+=($!)
for p in $A1 $A2 $A3; do wait_port $p; done
for _ in $(seq 1 100); do curl -fs -o /dev/null "http://127.0.0.1:$RY/" && curl -fs -o /dev/null "http://127.0.0.1:$SLOW/" && break; sleep 0.05; done

write_config() {  # write_config FILE APP_ENDPOINTS EXTRA_ROUTES
  cat >"$1" <<JSON
{"upstreams": {
   "app": {"endpoints": [$2],
           "probe": {"path": "/__demo/health", "interval": 0.2, "fall": 2, "rise": 1},
           "eject": {"after": 1, "base": 0.5, "max": 2, "max_share": 0.5}},
   "ruoyi": {"endpoints": ["http://127.0.0.1:$RY"], "probe": {"path": "/", "interval": 0.2}},
   "mixed": {"endpoints": ["http://127.0.0.1:$A1", "http://127.0.0.1:$SLOW"], "balance": "least_request",
             "probe": {"path": "/", "interval": 1}}},
 "routes": [
   {"prefix": "/", "upstream": "app"},
   {"name": "admin", "prefix": "/ry/", "upstream": "ruoyi", "strip_prefix": true, "dialect": "ruoyi"},
   {"prefix": "/mixed/", "upstream": "mixed"}$3]}
JSON
}
CONF="$WORK/peel.json"
write_config "$CONF" "\"http://127.0.0.1:$A1\", \"http://127.0.0.1:$A2\", \"http://127.0.0.1:$A3\"" ""
check "check-config reads both sections" "app ruoyi mixed 3" "$(PEEL_CONFIG=$CONF "$PEEL" check-config | python3 -c 'import json,sys;c=json.load(sys.stdin);print(" ".join(c["upstreams"]), len(c["routes"]))')"

GW=$(free_port); AD=$(free_port)
PEEL_CONFIG=$CONF "$PEEL" --listen 127.0.0.1:$GW --admin-listen 127.0.0.1:$AD --access-log json \
  >>"$WORK/peel.out" 2>>"$WORK/peel.err" & PEEL_PID=$!
pids+=($PEEL_PID)
wait_listening $AD $PEEL_PID
for _ in $(seq 1 100); do curl -fs "http://127.0.0.1:$AD/readyz" >/dev/null 2>&1 && break; sleep 0.05; done
G=http://127.0.0.1:$GW

# Each route's dialect: the demo's peel envelope, RuoYi's AjaxResult with the prefix stripped.
check "app route: the demo's data unwrapped" '{"id":42,"name":"Ada Lovelace","balance":1024.50,"tags":["admin","beta"],"active":true}' "$(curl -s $G/api/user)"
check "ruoyi route: RuoYi's data unwrapped, prefix stripped" '{"userId": 1, "userName": "admin", "path": "/system/user/1?x=1"}' "$(curl -s "$G/ry/system/user/1?x=1")"
check "reachability lists every group" "app mixed ruoyi" "$(curl -s $G/_peel/reachability | python3 -c 'import json,sys;print(" ".join(sorted(json.load(sys.stdin)["upstreams"])))')"
check "routes only: /status names no upstream" "None" "$(curl -s "http://127.0.0.1:$AD/status" | python3 -c 'import json,sys;print(json.load(sys.stdin)["upstream"])')"

# Balancing: equal weights, 3000 calls, no endpoint above 1.2x its share (from the access log).
: >"$WORK/peel.out"
ab -q -k -c 50 -n 3000 "$G/api/user" >"$WORK/ab-balance.txt" 2>&1 || true
check "balance: ab failed" "0" "$(awk '/^Failed requests/{print $3}' "$WORK/ab-balance.txt")"
wait_log "$WORK/peel.out" '"/api/user"' 3000
max_share=$(python3 - "$WORK/peel.out" <<'PY'
import collections, json, sys
c = collections.Counter(json.loads(l).get("endpoint") for l in open(sys.argv[1]) if '"/api/user"' in l)
print(max(c.values()) if len(c) == 3 and sum(c.values()) == 3000 else f"bad {dict(c)}")
PY
)
check_le "balance: the busiest endpoint's calls (share 1000)" 1200 "$max_share"

# least_request: the endpoint that answers in 50 ms gets fewer calls than the quick one.
: >"$WORK/peel.out"
ab -q -k -c 20 -n 1000 "$G/mixed/api/user" >"$WORK/ab-mixed.txt" 2>&1 || true
wait_log "$WORK/peel.out" '"/mixed/api/user"' 1000
check "least_request: the slow endpoint gets fewer calls" "yes" "$(python3 - "$WORK/peel.out" "$SLOW" <<'PY'
import collections, json, sys
c = collections.Counter(json.loads(l).get("endpoint") for l in open(sys.argv[1]) if '"/mixed/api/user"' in l)
slow = c.get("http://127.0.0.1:" + sys.argv[2], 0)
print("yes" if sum(c.values()) == 1000 and slow < 1000 - slow else f"no {dict(c)}")
PY
)"

# Kill one endpoint (SIGKILL: a crash, no drain) under ab -k -c 50: no failed GET, the dead one
# out of the pool within 1 s, the other groups never change state.
: >"$WORK/peel.out"
ab -q -k -c 50 -t 4 -n 10000000 "$G/api/user" >"$WORK/ab-kill.txt" 2>&1 & AB=$!
sleep 1
events_before=$(wc -l <"$WORK/peel.err")
kill -9 $P3; killed_at=$(date +%s.%N)
wait $AB || true
# When it left the pool, from the event log's own clock (polling /status under this load would
# measure the poll).
ejected_after=$(python3 - "$WORK/peel.err" "$A3" "$killed_at" <<'PY'
import datetime, json, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    if d.get("event") == "endpoint" and d["endpoint"].endswith(":" + sys.argv[2]) and d["in_pool"] is False:
        at = datetime.datetime.strptime(d["time"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc).timestamp()
        if at >= float(sys.argv[3]) - 0.01:
            print(round(at - float(sys.argv[3]), 3)); break
PY
)
check "kill under load: complete > 1000" "yes" "$(awk '/^Complete requests/{print ($3>1000)?"yes":"no"}' "$WORK/ab-kill.txt")"
check "kill under load: failed requests" "0" "$(awk '/^Failed requests/{print $3}' "$WORK/ab-kill.txt")"
check "kill under load: non-2xx" "0" "$(awk '/^Non-2xx responses/{n=$3} END{print n+0}' "$WORK/ab-kill.txt")"
check "dead endpoint out of the pool within 1 s (${ejected_after:-never} s)" "yes" "$(python3 -c "print('yes' if '$ejected_after' and float('$ejected_after') <= 1 else 'no')")"
check "calls moved: some took 2 attempts" "yes" "$(grep -q '"attempts":2' "$WORK/peel.out" && echo yes || echo no)"
check "the other groups never changed state" "no" "$(tail -n +$((events_before + 1)) "$WORK/peel.err" | grep '"event":"reachability"' | grep -q '"group":"ruoyi"\|"group":"mixed"' && echo yes || echo no)"
check "app group still reachable" "reachable" "$(curl -s $G/_peel/reachability | python3 -c 'import json,sys;print(json.load(sys.stdin)["upstreams"]["app"]["state"])')"

# A POST whose connection could not be made goes to another endpoint: with the dead one kept in
# the pool (a gateway with ejection off and probes far apart), every POST still succeeds. The dead
# one is listed first, where the first worker's round robin starts: the first POST tries it.
GW2=$(free_port)
cat >"$WORK/post.json" <<JSON
{"upstreams": {"app": {"endpoints": ["http://127.0.0.1:$A3", "http://127.0.0.1:$A1"], "probe": {"interval": 3600},
                       "eject": {"after": 1000}},
               "live": {"endpoints": ["http://127.0.0.1:$A1", "http://127.0.0.1:$A2"], "probe": {"interval": 3600}}},
 "routes": [{"prefix": "/", "upstream": "app"}, {"prefix": "/live/", "upstream": "live"}]}
JSON
PEEL_CONFIG="$WORK/post.json" "$PEEL" --listen 127.0.0.1:$GW2 --workers 1 --admin-listen off --access-log json \
  >>"$WORK/post.out" 2>/dev/null & pids+=($!)
wait_listening $GW2 $!
for _ in $(seq 1 100); do curl -fs -o /dev/null "http://127.0.0.1:$GW2/api/user" && break; sleep 0.05; done
: >"$WORK/post.out"
codes=""; for i in 1 2 3 4 5 6; do codes+=$(curl -s -o /dev/null -w '%{http_code} ' -d "n=$i" "http://127.0.0.1:$GW2/api/echo"); done
check "POSTs that could not connect moved on" "200 200 200 200 200 200 " "$codes"
wait_log "$WORK/post.out" '"method":"POST"' 6
check "some POST took 2 attempts" "yes" "$(grep '"method":"POST"' "$WORK/post.out" | grep -q '"attempts":2' && echo yes || echo no)"
# A POST that went out and was lost (both live endpoints reset after reading it) is not sent
# again; a GET moves to the other endpoint. (The demo serves /fault/ under any prefix.)
: >"$WORK/post.out"
check "a POST lost after sending: 502" "502" "$(curl -s -o /dev/null -w '%{http_code}' -d x "http://127.0.0.1:$GW2/live/fault/reset")"
check "a GET lost after sending: 502 after both" "502" "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$GW2/live/fault/reset")"
wait_log "$WORK/post.out" 'fault/reset' 2
check "the GET made two attempts, the POST one" "GET 2 POST 1" "$(python3 -c "import json;print(' '.join(sorted(f\"{d['method']} {d['attempts']}\" for d in map(json.loads, open('$WORK/post.out')) if 'fault/reset' in d['path'])))")"

# The dead endpoint comes back: probes pass, it is re-admitted, and calls reach it again.
P3=$(start_demo $A3); pids+=($P3); wait_port $A3
back=no
for _ in $(seq 1 100); do [ "$(endpoint_state $AD app 2)" == "reachable" ] && { back=yes; break; }; sleep 0.05; done
check "re-admitted after it came back" "yes" "$back"
: >"$WORK/peel.out"
ab -q -k -c 10 -n 300 "$G/api/user" >/dev/null 2>&1 || true
wait_log "$WORK/peel.out" '"/api/user"' 300
check "it takes calls again" "yes" "$(grep -q "\"endpoint\":\"http://127.0.0.1:$A3\"" "$WORK/peel.out" && echo yes || echo no)"

# Reload under load: a route is added and an endpoint removed; no call fails.
ab -q -k -c 50 -t 4 -n 10000000 "$G/api/user" >"$WORK/ab-reload.txt" 2>&1 & AB=$!
sleep 1
write_config "$CONF" "\"http://127.0.0.1:$A1\", \"http://127.0.0.1:$A3\"" ', {"prefix": "/extra/", "upstream": "ruoyi", "strip_prefix": true, "dialect": "ruoyi"}'
to_removed() { ss -Htnp state established "( dport = :$A2 )" | grep -c "pid=$PEEL_PID," || true; }
check "before the reload, Peel holds connections to the endpoint it removes" "yes" "$([ "$(to_removed)" -gt 0 ] && echo yes || echo no)"
kill -HUP $PEEL_PID
# Peel's connections to the removed endpoint close within a second of the reload, while the load
# goes on: idle ones at once, those of calls in flight once they finish.
for _ in $(seq 1 20); do grep -q '"event":"reloaded"' "$WORK/peel.err" && break; sleep 0.05; done
sleep 1
check "reload: Peel's connections to the removed endpoint, 1 s later" "0" "$(to_removed)"
wait $AB || true
check "reload under load: failed requests" "0" "$(awk '/^Failed requests/{print $3}' "$WORK/ab-reload.txt")"
check "reload under load: non-2xx" "0" "$(awk '/^Non-2xx responses/{n=$3} END{print n+0}' "$WORK/ab-reload.txt")"
check "reload: logged, nothing needs a restart" "yes" "$(grep '"event":"reloaded"' "$WORK/peel.err" | grep -q '"needs_restart":\[\]' && echo yes || echo no)"
check "reload: the new route answers" '{"userId": 1, "userName": "admin", "path": "/a"}' "$(curl -s $G/extra/a)"
check "reload: the removed endpoint is gone" "2" "$(curl -s "http://127.0.0.1:$AD/status" | python3 -c 'import json,sys;print(len(json.load(sys.stdin)["upstreams"]["app"]["endpoints"]))')"

# A reload that removes a group and renames a route: the stream says the group is removed, and
# the series of both leave /metrics.
GW5=$(free_port); AD5=$(free_port)
cat >"$WORK/drop.json" <<JSON
{"upstreams": {"app": {"endpoints": ["http://127.0.0.1:$A1"]}, "gone": {"endpoints": ["http://127.0.0.1:$A2"]}},
 "routes": [{"name": "old", "prefix": "/", "upstream": "app"}, {"prefix": "/gone/", "upstream": "gone"}]}
JSON
PEEL_CONFIG="$WORK/drop.json" "$PEEL" --listen 127.0.0.1:$GW5 --admin-listen 127.0.0.1:$AD5 --access-log off \
  2>"$WORK/drop.err" & DROP_PID=$!; pids+=($DROP_PID)
wait_listening $AD5 $DROP_PID
for _ in $(seq 1 100); do curl -fs -o /dev/null "http://127.0.0.1:$GW5/gone/api/user" && break; sleep 0.05; done
curl -s -o /dev/null "http://127.0.0.1:$GW5/api/user"
curl -sN -H 'Accept: text/event-stream' "http://127.0.0.1:$GW5/_peel/reachability" >"$WORK/drop-sse.txt" & pids+=($!)
for _ in $(seq 1 100); do grep -q '"upstream":"gone"' "$WORK/drop-sse.txt" && break; sleep 0.02; done
cat >"$WORK/drop.json" <<JSON
{"upstreams": {"app": {"endpoints": ["http://127.0.0.1:$A1"]}}, "routes": [{"name": "new", "prefix": "/", "upstream": "app"}]}
JSON
kill -HUP $DROP_PID
for _ in $(seq 1 100); do grep -q '"state":"removed"' "$WORK/drop-sse.txt" && break; sleep 0.02; done
check "reload: the stream says the dropped group is removed" "yes" "$(grep -q '"upstream":"gone","state":"removed"' "$WORK/drop-sse.txt" && echo yes || echo no)"
check "reload: the dropped group and renamed route leave /metrics" "0 0 5" "$(curl -s "http://127.0.0.1:$AD5/metrics" | python3 -c '
import sys; m = sys.stdin.read().splitlines()
print(sum("upstream=\"gone\"" in l for l in m), sum("route=\"old\"" in l for l in m), sum(l.startswith("peel_route_requests_total{route=\"new\"") for l in m))')"

# No route applies: 404 no-route, -110.
ROUTELESS="$WORK/narrow.json"
cat >"$ROUTELESS" <<JSON
{"upstreams": {"app": {"endpoints": ["http://127.0.0.1:$A1"]}}, "routes": [{"prefix": "/api/", "upstream": "app"}]}
JSON
GW3=$(free_port)
PEEL_CONFIG=$ROUTELESS "$PEEL" --listen 127.0.0.1:$GW3 --admin-listen off --access-log json >"$WORK/narrow.out" 2>/dev/null & pids+=($!)
wait_listening $GW3 $!
for _ in $(seq 1 100); do curl -fs -o /dev/null "http://127.0.0.1:$GW3/api/user" && break; sleep 0.05; done
check "no route: 404 no-route -110" "404 no-route -110" "$(curl -s -w ' %{http_code}' "http://127.0.0.1:$GW3/other" | python3 -c 'import json,sys;t=sys.stdin.read();b,s=t.rsplit(" ",1);d=json.loads(b);print(s,d["kind"],d["code"])')"
wait_log "$WORK/narrow.out" '"/other"' 1
check "no route: logged with route null" "None None 0" "$(python3 -c "import json;l=[json.loads(x) for x in open('$WORK/narrow.out') if '\"/other\"' in x][0];print(l['route'],l['upstream'],l['attempts'])")"

# A group's own CA bundle: one TLS server with a self-signed certificate behind two groups, one
# trusting it through its ca_file, one not; one worker, so its pooled handles go back and forth.
TLS=$(free_port); GW4=$(free_port)
start_tls_upstream $TLS
cat >"$WORK/tls.json" <<JSON
{"upstreams": {"trusted": {"endpoints": ["https://127.0.0.1:$TLS"], "ca_file": "$WORK/cert.pem", "probe": {"interval": 0.5}},
               "plain": {"endpoints": ["https://127.0.0.1:$TLS"], "probe": {"interval": 3600, "fall": 100}, "eject": {"after": 100}}},
 "routes": [{"prefix": "/t/", "upstream": "trusted"}, {"prefix": "/p/", "upstream": "plain"}]}
JSON
PEEL_CONFIG="$WORK/tls.json" "$PEEL" --listen 127.0.0.1:$GW4 --workers 1 --admin-listen off --access-log off 2>/dev/null & pids+=($!)
wait_listening $GW4 $!
for _ in $(seq 1 100); do [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$GW4/t/x")" == "200" ] && break; sleep 0.05; done
tls_kinds=""
for p in t p t p t; do
  tls_kinds+="$(curl -s "http://127.0.0.1:$GW4/$p/x" | python3 -c 'import json,sys;d=json.load(sys.stdin);print(d.get("kind","ok") if isinstance(d,dict) and "kind" in d else "ok")') "
done
check "a group's ca_file: trusted there, not in the other group" "ok upstream-unreachable ok upstream-unreachable ok " "$tls_kinds"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
