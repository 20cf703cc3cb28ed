#!/usr/bin/env bash
# Peel's own HTTP/1.1 server against real clients (Python requests, httpx, aiohttp, curl) and raw
# sockets: Expect, HEAD, refusals, half-close, pipelining, chunk extensions, descriptor exhaustion,
# a second instance, slow uploads and lingering close. Release binary, demo upstream, loopback only;
# every loop is bounded in count and time and the script stops by itself.
set -uo pipefail
PEEL=${1:?usage: http1.sh PATH/TO/peel}
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib.sh"
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
START=$(date +%s%N)

# The clients live in their own venv, kept between runs (HTTP1_VENV moves it).
VENV=${HTTP1_VENV:-$HERE/../.build/venv-http1}
if ! "$VENV/bin/python" -c 'import requests, httpx, aiohttp' 2>/dev/null; then
  echo "creating $VENV (requests, httpx, aiohttp)"
  rm -rf "$VENV"
  python3 -m venv "$VENV" && "$VENV/bin/pip" install -q --disable-pip-version-check requests httpx aiohttp \
    || { echo "http1: cannot create the client venv $VENV"; exit 1; }
fi
PY="$VENV/bin/python"

USER_DATA='{"id":42,"name":"Ada Lovelace","balance":1024.50,"tags":["admin","beta"],"active":true}'
ms() { awk -v s="$1" 'BEGIN{printf "%d", s * 1000}'; }
# A value from a "key value..." results file.
res() { awk -v k="$1" '$1==k{$1=""; sub(/^ /, ""); print}' "$2"; }
# Sum of peel_requests_total for one status on an admin port.
requests_total() { curl -s "http://127.0.0.1:$1/metrics" | awk -v s="status=\"$2\"" 'index($1, s){n+=$2} END{print n+0}'; }
rss_kb() { awk '/^VmRSS/{print $2}' "/proc/$1/status"; }
wait_ready() { for _ in $(seq 1 100); do curl -fs "http://127.0.0.1:$1/readyz" >/dev/null 2>&1 && return; sleep 0.05; done; }

# Raw-socket helpers shared by the Python snippets below.
cat >"$WORK/h1.py" <<'PY'
import socket, time
def connect(port, timeout=5):
    return socket.create_connection(("127.0.0.1", port), timeout=timeout)
class Reader:
    """Reads HTTP/1.1 answers off a socket; interim (1xx) answers are collected in `interim`."""
    def __init__(self, s):
        self.s, self.buf, self.interim = s, b"", []
    def fill(self):
        d = self.s.recv(65536)
        if not d: raise EOFError("closed")
        self.buf += d
    def response(self, head_only=False):
        while True:
            while b"\r\n\r\n" not in self.buf: self.fill()
            head, self.buf = self.buf.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            status = int(lines[0].split(" ")[1])
            headers = {}
            for l in lines[1:]:
                k, v = l.split(":", 1); headers[k.strip().lower()] = v.strip()
            if 100 <= status < 200:
                self.interim.append(lines[0]); continue
            n = 0 if head_only else int(headers.get("content-length", "0"))
            while len(self.buf) < n: self.fill()
            body, self.buf = self.buf[:n], self.buf[n:]
            return status, headers, body
    def closed_clean(self, timeout=3):
        """True when the peer closes (FIN or reset) within `timeout` with nothing more sent."""
        self.s.settimeout(timeout)
        try:
            while True:
                d = self.s.recv(65536)
                if not d: return self.buf == b""
                self.buf += d
        except socket.timeout: return False
        except ConnectionResetError: return self.buf == b""
    def quiet(self, seconds):
        """True when nothing more arrives for `seconds` (the connection stays open)."""
        self.s.settimeout(seconds)
        try: self.s.recv(65536); return False
        except socket.timeout: return True
PY
export PYTHONPATH="$WORK"

UP=$(free_port); GW=$(free_port); AD=$(free_port)
"$PEEL" demo-upstream --listen 127.0.0.1:$UP >"$WORK/upstream.log" 2>&1 & pids+=($!)
wait_listening $UP $!
"$PEEL" --upstream http://127.0.0.1:$UP --listen 127.0.0.1:$GW --admin-listen 127.0.0.1:$AD \
  --max-body 10485760 --body-timeout 2 --access-log json >"$WORK/peel.out" 2>"$WORK/peel.err" & PEEL_PID=$!
pids+=($PEEL_PID)
wait_listening $AD $PEEL_PID
wait_ready $AD
G=http://127.0.0.1:$GW

echo "== real clients"
"$PY" - "$GW" "$USER_DATA" >"$WORK/clients.txt" 2>&1 <<'PY'
import asyncio, json, socket, sys
port, expected = int(sys.argv[1]), sys.argv[2].encode()
base = f"http://127.0.0.1:{port}"
# Count TCP connects to Peel: a keep-alive sequence must use one.
connects = 0
_connect = socket.socket.connect
def counting(self, address, *rest):
    global connects
    if isinstance(address, tuple) and address[1] == port: connects += 1
    return _connect(self, address, *rest)
socket.socket.connect = counting
payload = {"name": "Ada", "n": [1, 2.50, "x\u00e9"], "ok": True}
def echoed(status, raw):
    d = json.loads(raw)
    return status == 200 and d["method"] == "POST" and json.loads(d["body"]) == payload
def report(name, get, post, statuses, bodies, n):
    print(f"{name}-get", get)
    print(f"{name}-post", post)
    print(f"{name}-keepalive", all(s == 200 for s in statuses) and all(b == expected for b in bodies) and len(bodies) == 20, n)

def run(name, fn):
    global connects
    try: fn()
    except Exception as e: print(f"{name}-error {e!r}")

def with_requests():
    global connects
    import requests
    with requests.Session() as s:
        r = s.get(base + "/api/user", timeout=5); get = r.status_code == 200 and r.content == expected
        r = s.post(base + "/api/echo", json=payload, timeout=5); post = echoed(r.status_code, r.content)
    with requests.Session() as s:
        connects = 0
        rs = [s.get(base + "/api/user", timeout=5) for _ in range(20)]
        report("requests", get, post, [r.status_code for r in rs], [r.content for r in rs], connects)

def with_httpx():
    global connects
    import httpx
    with httpx.Client(timeout=5) as c:
        r = c.get(base + "/api/user"); get = r.status_code == 200 and r.content == expected
        r = c.post(base + "/api/echo", json=payload); post = echoed(r.status_code, r.content)
    with httpx.Client(timeout=5) as c:
        connects = 0
        rs = [c.get(base + "/api/user") for _ in range(20)]
        report("httpx", get, post, [r.status_code for r in rs], [r.content for r in rs], connects)

def with_aiohttp():
    import aiohttp
    async def main():
        global connects
        t = aiohttp.ClientTimeout(total=5)
        async with aiohttp.ClientSession(timeout=t) as s:
            async with s.get(base + "/api/user") as r: get = r.status == 200 and await r.read() == expected
            async with s.post(base + "/api/echo", json=payload) as r: post = echoed(r.status, await r.read())
        async with aiohttp.ClientSession(timeout=t) as s:
            connects = 0
            statuses, bodies = [], []
            for _ in range(20):
                async with s.get(base + "/api/user") as r:
                    statuses.append(r.status); bodies.append(await r.read())
            report("aiohttp", get, post, statuses, bodies, connects)
    asyncio.run(main())

run("requests", with_requests)
run("httpx", with_httpx)
run("aiohttp", with_aiohttp)
PY
grep -- '-error' "$WORK/clients.txt"
for c in requests httpx aiohttp; do
  check "$c: GET /api/user byte-exact" "True" "$(res $c-get "$WORK/clients.txt")"
  check "$c: POST JSON to /api/echo arrives intact" "True" "$(res $c-post "$WORK/clients.txt")"
  check "$c: 20 keep-alive calls on one session, one connection" "True 1" "$(res $c-keepalive "$WORK/clients.txt")"
done
check "reason phrase of 422" "HTTP/1.1 422 Unprocessable Content" "$(curl -si $G/api/business-error | head -1 | tr -d '\r')"

echo "== HEAD"
"$PY" - "$GW" >"$WORK/head.txt" 2>&1 <<'PY'
import sys, h1
s = h1.connect(int(sys.argv[1])); r = h1.Reader(s)
s.sendall(b"HEAD /api/user HTTP/1.1\r\nHost: x\r\n\r\n")
status, headers, _ = r.response(head_only=True)
print("head", status, headers.get("content-length"), "body-bytes", len(r.buf), "quiet", r.quiet(0.3))
s.sendall(b"GET /api/user HTTP/1.1\r\nHost: x\r\n\r\n")
status, headers, body = r.response()
print("get", status, headers.get("content-length"), len(body))
PY
get_len=$(curl -s -o /dev/null -w '%{size_download}' $G/api/user)
check "HEAD answers GET's (unwrapped) Content-Length, no body" "200 $get_len body-bytes 0 quiet True" "$(res head "$WORK/head.txt")"
check "GET after HEAD on the same connection" "200 $get_len $get_len" "$(res get "$WORK/head.txt")"

echo "== Expect"
head -c 11534336 /dev/zero >"$WORK/11MB.bin"
before413=$(requests_total $AD 413)
read -r code t up < <(curl -s -o /dev/null -w '%{http_code} %{time_total} %{size_upload}\n' --max-time 10 -F "file=@$WORK/11MB.bin" $G/api/echo)
check "curl -F 11 MB file over --max-body: 413" "413" "$code"
check_le "curl -F 11 MB: answered in ms" 500 "$(ms "$t")"
check_le "curl -F 11 MB: bytes uploaded" 65536 "${up%.*}"
read -r code t up < <(curl -s -o /dev/null -w '%{http_code} %{time_total} %{size_upload}\n' --max-time 10 -H 'Expect: 100-continue' --data-binary "@$WORK/11MB.bin" $G/api/echo)
check "Expect: 100-continue, 11 MB over --max-body: 413" "413" "$code"
check_le "Expect: 100-continue, 11 MB: answered in ms" 500 "$(ms "$t")"
check_le "Expect: 100-continue, 11 MB: bytes uploaded" 65536 "${up%.*}"
check "small Expect: 100-continue upload: 200, body echoed" "200 small-body" \
  "$(curl -s -w ' %{http_code}' -H 'Expect: 100-continue' --data-binary 'small-body' $G/api/echo | python3 -c 'import json,sys;b,c=sys.stdin.read().rsplit(" ",1);print(c,json.loads(b)["body"])')"
check "Expect: foo gets 417" "417" "$(curl -s -o /dev/null -w '%{http_code}' -H 'Expect: foo' --data-binary 'x' $G/api/echo)"

echo "== refusals logged and counted"
check "head over 64 KiB: 431" "431" "$(curl -s -o /dev/null -w '%{http_code}' -H "X-Big: $(head -c 70000 /dev/zero | tr '\0' a)" $G/api/user)"
sleep 0.3
check "413 and 431 in the access log" "413 431" "$(python3 - "$WORK/peel.out" <<'PY'
import json, sys
seen = {json.loads(l)["status"] for l in open(sys.argv[1]) if l.strip()}
print(" ".join(str(s) for s in (413, 431) if s in seen))
PY
)"
check "413s counted in peel_requests_total" "2" "$(( $(requests_total $AD 413) - before413 ))"
check "431 counted in peel_requests_total" "1" "$(requests_total $AD 431)"

echo "== half-close"
before499=$(requests_total $AD 499)
"$PY" - "$GW" >"$WORK/half.txt" 2>&1 <<'PY'
import json, socket, sys, h1
port = int(sys.argv[1])
for name, target in (("echo", "/api/echo"), ("slow", "/api/slow?ms=300")):
    try:
        body = b'{"half":"close"}'
        s = h1.connect(port); r = h1.Reader(s)
        s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (target.encode(), len(body), body))
        s.shutdown(socket.SHUT_WR)
        status, headers, got = r.response()
        ok = json.loads(got)["body"] == body.decode() if name == "echo" else b'"slow":true' in got
        print(name, status, ok, r.closed_clean(), "interim", r.interim)
    except Exception as e:
        print(name, "error", repr(e))
PY
cat "$WORK/half.txt"
check "POST /api/echo then SHUT_WR: 200 answered, then closed" "200 True True" "$(res echo "$WORK/half.txt" | cut -d' ' -f1-3)"
check "POST to a 300 ms call then SHUT_WR: 200 answered, then closed" "200 True True" "$(res slow "$WORK/half.txt" | cut -d' ' -f1-3)"
sleep 0.2
check "half-closed calls are not counted as 499" "0" "$(( $(requests_total $AD 499) - before499 ))"

echo "== pipelining and refusals on a connection"
"$PY" - "$GW" "$USER_DATA" >"$WORK/pipe.txt" 2>&1 <<'PY'
import json, sys, time, h1
port, expected = int(sys.argv[1]), sys.argv[2].encode()
def problem(h, b):
    return h.get("content-type") == "application/problem+json" and json.loads(b)["status"] == 400
def case(name, fn):
    try: print(name, *fn())
    except Exception as e: print(name, "error", repr(e))
def split_head():
    s = h1.connect(port); r = h1.Reader(s); t0 = time.time()
    s.sendall(b"GET /api/slow?ms=500 HTTP/1.1\r\nHost: x\r\n\r\n")
    time.sleep(0.1); s.sendall(b"GET /api/user HTTP/1.1\r\nHo")
    time.sleep(0.1); s.sendall(b"st: x\r\nConnection: close\r\n\r\n")
    a = r.response(); b = r.response()
    return (a[0], b'"slow":true' in a[2], b[0], b[2] == expected, r.closed_clean(), time.time() - t0 < 2)
def pipelined_refusal():
    s = h1.connect(port); r = h1.Reader(s)
    s.sendall(b"GET /api/user HTTP/1.1\r\nHost: x\r\n\r\nGET /api/user HTTP/1.1\nHost: x\n\n")
    a = r.response(); b = r.response()
    return (a[0], a[2] == expected, b[0], problem(b[1], b[2]), r.closed_clean())
def refusal_after_keepalive():
    s = h1.connect(port); r = h1.Reader(s)
    s.sendall(b"GET /api/user HTTP/1.1\r\nHost: x\r\n\r\n")
    a = r.response()
    s.sendall(b"GET /api/user HTTP/1.1\r\nHost : x\r\n\r\n")
    b = r.response()
    return (a[0], b[0], b[1].get("content-type"), problem(b[1], b[2]))
def chunk_extension():
    s = h1.connect(port); r = h1.Reader(s)
    s.sendall(b"POST /api/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n"
              b"5;ext=1\r\nhello\r\n0\r\n\r\n")
    a = r.response()
    return (a[0], json.loads(a[2])["body"] if a[0] == 200 else a[2][:200])
def empty_lines():
    s = h1.connect(port); r = h1.Reader(s)
    s.sendall(b"\r\n\r\nGET /api/user HTTP/1.1\r\nHost: x\r\n\r\n")
    a = r.response()
    s.sendall(b"\r\n"); time.sleep(0.05); s.sendall(b"GET /api/user HTTP/1.1\r\nHost: x\r\n\r\n")
    b = r.response()
    return (a[0], a[2] == expected, b[0], b[2] == expected)
case("split", split_head)
case("refusal", pipelined_refusal)
case("keptalive", refusal_after_keepalive)
case("chunkext", chunk_extension)
case("emptylines", empty_lines)
PY
check "slow request, then a head split in two segments: both answered in order" "200 True 200 True True True" "$(res split "$WORK/pipe.txt")"
check "valid then invalid (bare LF) in one write: 200, 400 problem, close" "200 True 400 True True" "$(res refusal "$WORK/pipe.txt")"
check "malformed request after a good one: 400 problem+json" "200 400 application/problem+json True" "$(res keptalive "$WORK/pipe.txt")"
check "chunk extension 5;ext=1 accepted and echoed" "200 hello" "$(res chunkext "$WORK/pipe.txt")"
check "empty lines before the request line (one write, then separate segments)" "200 True 200 True" "$(res emptylines "$WORK/pipe.txt")"

echo "== lingering close"
"$PY" - "$GW" >"$WORK/linger.txt" 2>&1 <<'PY'
import socket, sys, time, h1
s = h1.connect(int(sys.argv[1])); r = h1.Reader(s)
t0 = time.time()
s.sendall(b"POST /api/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1099511627776\r\n\r\n" + b"x" * 65536)
status, _, _ = r.response()
answered = time.time() - t0
# Keep sending as a client that ignores the answer would: Peel reads and discards for a while,
# then closes; it never waits for the declared 1 TiB.
chunk, sent, ended, t1 = b"x" * 65536, 0, None, time.time()
s.settimeout(0.2)
while time.time() - t1 < 6:
    try: sent += s.send(chunk)
    except socket.timeout: continue
    except OSError: ended = time.time() - t1; break
print("answer", status, int(answered * 1000))
print("ended", "yes" if ended is not None else "no", int((ended or 99) * 1000))
PY
cat "$WORK/linger.txt"
read -r st t413 < <(res answer "$WORK/linger.txt"); read -r ended tend < <(res ended "$WORK/linger.txt")
check "Content-Length 2^40: 413" "413" "${st:-none}"
check_le "Content-Length 2^40: answered in ms" 1000 "${t413:-99999}"
check "Content-Length 2^40: connection closed while the client keeps sending" "yes" "${ended:-no}"
check_le "Content-Length 2^40: closed within ms" 4000 "${tend:-99999}"

echo "== slow uploads"
sleep 0.5
base_rss=$(rss_kb $PEEL_PID)
"$PY" - "$GW" "$PEEL_PID" >"$WORK/slowup.txt" 2>&1 <<'PY'
import selectors, socket, sys, time
port, pid = int(sys.argv[1]), sys.argv[2]
sel, states = selectors.DefaultSelector(), []
for i in range(20):
    # Twenty clients, one address each: one address's bodies are held to its share of the budget.
    s = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=("127.0.0.%d" % (20 + i), 0))
    s.sendall(b"POST /api/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 9437184\r\n\r\n")
    st = {"t": time.time(), "got": b"", "done": None}
    s.sendall(b"u" * 1048576)
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ, st)
    states.append(st)
time.sleep(0.5)
print("rss-stalled", [l for l in open(f"/proc/{pid}/status") if l.startswith("VmRSS")][0].split()[1])
deadline, pending = time.time() + 5, len(states)
while pending and time.time() < deadline:
    for key, _ in sel.select(0.2):
        st = key.data
        try: d = key.fileobj.recv(65536)
        except OSError: d = b""
        st["got"] += d
        if not d:
            st["done"] = time.time() - st["t"]; sel.unregister(key.fileobj); key.fileobj.close(); pending -= 1
ended = [st for st in states if st["done"] is not None]
answers = sorted({st["got"].split(b"\r\n", 1)[0].decode("latin-1") or "(closed)" for st in ended})
print("ended", len(ended))
print("answers", " | ".join(answers))
print("slowest-ms", int(max((st["done"] for st in ended), default=99) * 1000))
PY
sleep 0.5
cat "$WORK/slowup.txt"
check "20 stalled 9 MB uploads all end (--body-timeout 2)" "20" "$(res ended "$WORK/slowup.txt")"
check "stalled uploads get 408 (or a bare close)" "yes" "$(res answers "$WORK/slowup.txt" | python3 -c 'import sys;a=sys.stdin.read().strip().split(" | ");print("yes" if a and all(x in ("HTTP/1.1 408 Request Timeout","(closed)") for x in a) else "no: "+str(a))')"
check_le "stalled uploads end within ms of their head" 3000 "$(res slowest-ms "$WORK/slowup.txt")"
echo "   RSS: baseline $base_rss kB, stalled $(res rss-stalled "$WORK/slowup.txt") kB, after $(rss_kb $PEEL_PID) kB"
check_le "RSS after the stalled uploads (kB over baseline)" 65536 $(( $(rss_kb $PEEL_PID) - base_rss ))
check "still serving after the stalled uploads" "200" "$(curl -s -o /dev/null -w '%{http_code}' --max-time 3 $G/api/user)"

echo "== second instance"
rc=0; timeout 5 "$PEEL" --upstream http://127.0.0.1:$UP --listen 127.0.0.1:$GW --admin-listen off \
  >/dev/null 2>"$WORK/second.err" || rc=$?
check "second peel on the same --listen exits 2" "2" "$rc"
check "second peel says the address is in use" "yes" "$(grep -q 'in use' "$WORK/second.err" && echo yes || { head -c 300 "$WORK/second.err"; echo no; })"

echo "== descriptor exhaustion (ulimit -n 256, 1000 idle connections)"
GW2=$(free_port); AD2=$(free_port)
( ulimit -n 256; exec "$PEEL" --upstream http://127.0.0.1:$UP --listen 127.0.0.1:$GW2 --admin-listen 127.0.0.1:$AD2 \
    --access-log off --probe-interval 0.2 --fall 3 --rise 3 >"$WORK/fd.out" 2>"$WORK/fd.err" ) & FD_PID=$!
pids+=($FD_PID)
wait_listening $AD2 $FD_PID
wait_ready $AD2
"$PY" - "$GW2" "$AD2" "$FD_PID" >"$WORK/fd.txt" 2>&1 <<'PY'
import errno, json, socket, sys, time, urllib.request
port, admin, pid = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
def cpu():
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])   # utime + stime, in clock ticks
socks = []
for _ in range(1000):
    s = socket.socket(); s.setblocking(False)
    if s.connect_ex(("127.0.0.1", port)) not in (0, errno.EINPROGRESS): s.close(); continue
    socks.append(s)
time.sleep(0.2)
c0, t0 = cpu(), time.time()
time.sleep(3)
ticks = cpu() - c0
print("held", len(socks), "cpu-ms", int(ticks * 1000 / 100), "over-ms", int((time.time() - t0) * 1000))
for s in socks: s.close()
def get(url):
    for _ in range(20):
        try: return urllib.request.urlopen(url, timeout=2)
        except Exception as e: err = e; time.sleep(0.1)
    raise err
try: print("state", json.load(get(f"http://127.0.0.1:{admin}/status"))["reachability"]["state"])
except Exception as e: print("state", "error", repr(e))
try:
    m = get(f"http://127.0.0.1:{admin}/metrics").read().decode()
    print("to-unreachable", [l.split()[1] for l in m.splitlines() if l.startswith('peel_reachability_transitions_total{to="unreachable"}')])
except Exception as e: print("to-unreachable", "error", repr(e))
try: print("after", get(f"http://127.0.0.1:{port}/api/user").status)
except Exception as e: print("after", "error", repr(e))
PY
cat "$WORK/fd.txt"
check "1000 connections opened against the 256-descriptor Peel" "1000" "$(res held "$WORK/fd.txt" | cut -d' ' -f1)"
check_le "CPU while out of descriptors for 3 s (ms)" 500 "$(res held "$WORK/fd.txt" | awk '{print $3}')"
check_le "stderr while out of descriptors (bytes)" 102400 "$(stat -c %s "$WORK/fd.err")"
check "/status after the exhaustion: upstream reachable" "reachable" "$(res state "$WORK/fd.txt")"
check "no transition to unreachable during the exhaustion" "['0']" "$(res to-unreachable "$WORK/fd.txt")"
check "normal request after the connections close: 200" "200" "$(res after "$WORK/fd.txt")"

# Issue 19: a client speaking another protocol to the plain HTTP/1.1 port hears why.
rc=0; out=$(curl -sv --max-time 5 --http2-prior-knowledge "http://127.0.0.1:$GW/api/user" 2>&1) || rc=$?
# curl 7.88 says "recveived GOAWAY, error=13" (HTTP_1_1_REQUIRED) and exits 16 (HTTP/2 framing).
check "curl --http2-prior-knowledge gets an HTTP/2 GOAWAY (HTTP_1_1_REQUIRED), not an empty reply" "16 yes" \
  "$rc $(echo "$out" | grep -q 'GOAWAY, error=13' && echo yes || echo "no: $(echo "$out" | tail -3)")"
"$PY" - "$GW" >"$WORK/tls.txt" 2>&1 <<'PY'
import socket, ssl, sys
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
try:
    ctx.wrap_socket(s, server_hostname="localhost"); print("handshake completed")
except ssl.SSLError as e: print("closed", type(e).__name__)
except OSError as e: print("closed", type(e).__name__)
PY
check "a TLS ClientHello on the plain port is closed without an HTTP answer" "closed SSLEOFError" "$(cat "$WORK/tls.txt")"
wait_log "$WORK/peel.out" '"reason":"tls handshake on a plain-HTTP listener"' 1
wait_log "$WORK/peel.out" 'HTTP/2 connection preface' 1
check "the access log says tls handshake on a plain-HTTP listener" "1" \
  "$(grep -c '"reason":"tls handshake on a plain-HTTP listener"' "$WORK/peel.out")"
check "the access log names the HTTP/2 preface" "1" "$(grep -c '"method":"PRI".*HTTP/2 connection preface' "$WORK/peel.out")"

echo "http1: $pass passed, $fail failed ($(( ($(date +%s%N) - START) / 1000000 )) ms)"
[ "$fail" -eq 0 ]
