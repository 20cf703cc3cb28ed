"""The memory budget against clients that hold it without paying for it (issue 28), on a real Peel
with the default max_body (10 MiB) and max_buffered (256 MiB, so 32 MiB per client):

1. 26 connections from one address send a head declaring nearly max_body (half with
   `Expect: 100-continue`) and never a body byte; meanwhile another address uploads 1 MB and asks
   for a 512 KiB judged answer.
2. One address opens 200 connections that each declare 1 MiB and send 512 KiB of it; meanwhile
   another address uploads 9 MB. Then the attacker stops sending, and the time until its bytes are
   given back (body_timeout) is measured.
3. One address opens 30 connections, one after another, that each ask for a 10 MiB judged answer
   and never read it (a small receive buffer, so its socket takes little of it); then another
   address asks for a 10 MiB judged answer. Unread answers stay held for client_timeout (60 s)
   without progress; the time until they are given back once the readers leave is measured.

Prints one `name value` line per measurement; reliability.sh checks them.
usage: budgetattack.py PEEL UPSTREAM_URL BODY_TIMEOUT
"""
import os, socket, subprocess, sys, time, urllib.request

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ports import free_port  # noqa: E402  (never a port this run handed out before)

peel, upstream, body_timeout = sys.argv[1], sys.argv[2], sys.argv[3]

port, admin = free_port(), free_port()
p = subprocess.Popen([peel, "--upstream", upstream, "--listen", f"127.0.0.1:{port}", "--admin-listen", f"127.0.0.1:{admin}",
                      "--access-log", "off", "--workers", "2", "--body-timeout", body_timeout,
                      # The memory budget is what is attacked here: answers stay in memory (no spool).
                      "--spool-threshold", "0"],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

def metric(name):
    text = urllib.request.urlopen(f"http://127.0.0.1:{admin}/metrics", timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return int(float(line.split()[-1]))
    return None

def connect(source, rcvbuf=None):
    s = socket.socket()
    if rcvbuf: s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.bind((source, 0))
    s.settimeout(10)
    s.connect(("127.0.0.1", port))
    return s

def status_of(s):
    data = b""
    while b"\r\n" not in data:
        d = s.recv(4096)
        if not d: return None
        data += d
    return int(data.split(b" ")[1])

def call(source, method, path, body=b""):
    """One call with Connection: close; its status."""
    s = connect(source)
    s.sendall(f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
    status = status_of(s)
    s.close()
    return status

for _ in range(200):
    try:
        if metric("peel_buffered_bytes") is not None: break
    except OSError:
        time.sleep(0.05)

# 1. Heads only.
heads = []
for i in range(26):
    s = connect("127.0.0.1")
    expect = b"Expect: 100-continue\r\n" if i % 2 else b""
    s.sendall(b"POST /api/user HTTP/1.1\r\nHost: x\r\nContent-Length: 10485000\r\n" + expect + b"\r\n")
    heads.append(s)
time.sleep(0.5)
print("heads_buffered_bytes", metric("peel_buffered_bytes"))
print("heads_victim_upload_status", call("127.0.0.2", "POST", "/api/echo", b"u" * 1_000_000))
print("heads_victim_judged_status", call("127.0.0.2", "GET", "/api/large?kb=512"))
for s in heads: s.close()
time.sleep(0.3)

# 2. 200 partial bodies from one address.
share = metric("peel_buffered_per_client_limit_bytes")
print("share_bytes", share)
attack, refused = [], 0
peak = 0
chunk = b"a" * 65536
for i in range(200):
    s = connect("127.0.0.3")
    try:
        s.sendall(b"POST /api/user HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n\r\n")
        for _ in range(8):  # 512 KiB
            s.sendall(chunk)
    except OSError:
        pass
    attack.append(s)
    if i % 20 == 19: peak = max(peak, metric("peel_buffered_bytes"))
last_byte = time.monotonic()
time.sleep(0.5)
peak = max(peak, metric("peel_buffered_bytes"))
for s in attack:
    s.setblocking(False)
    try:
        head = s.recv(4096)
        if head.startswith(b"HTTP/1.1 503"): refused += 1
    except BlockingIOError:
        pass
    except OSError:
        refused += 1
print("attack_refused", refused)
print("attack_peak_buffered_bytes", peak)
print("attack_refusals_metric", metric('peel_refusals_total{bound="max_buffered_per_client"}'))
print("attack_victim_upload_status", call("127.0.0.4", "POST", "/api/echo", b"v" * 9_000_000))
# The attacker sends nothing more: its bytes stay pinned until body_timeout after each head.
while metric("peel_buffered_bytes") > 0 and time.monotonic() - last_byte < 3 * float(body_timeout) + 5:
    time.sleep(0.1)
print("attack_pinned_seconds", round(time.monotonic() - last_byte, 1))
print("attack_buffered_after", metric("peel_buffered_bytes"))
for s in attack: s.close()
time.sleep(0.3)

# 3. 30 slow readers from one address, one at a time: each answer is held unread, or refused,
# before the next call starts.
readers, peak = [], 0
def upstream_refusals():
    return sum(metric(f'peel_refusals_total{{bound="{b}"}}') or 0 for b in ("max_buffered_upstream", "max_buffered_per_client_upstream"))
for i in range(30):
    held, refusals = metric("peel_buffered_bytes"), upstream_refusals()
    s = connect("127.0.0.5", rcvbuf=4096)
    s.sendall(b"GET /api/large?kb=10240 HTTP/1.1\r\nHost: x\r\n\r\n")
    readers.append(s)
    started = time.monotonic()
    while time.monotonic() - started < 15:
        now = metric("peel_buffered_bytes")
        peak = max(peak, now)
        if now >= held + 10 * 1048576 or upstream_refusals() > refusals: break
        time.sleep(0.02)
last_call = time.monotonic()
peak = max(peak, metric("peel_buffered_bytes"))
print("readers_peak_buffered_bytes", peak)
# The share, plus the first 64 KiB of each call in flight (counted against the whole budget alone).
print("readers_bound_bytes", share + 30 * 65536)
print("readers_refusals_metric", metric('peel_refusals_total{bound="max_buffered_per_client_upstream"}'))
print("readers_victim_judged_status", call("127.0.0.6", "GET", "/api/large?kb=10240"))
print("readers_upstream_up", metric("peel_upstream_up"))
print("readers_held_meanwhile", metric("peel_buffered_bytes"))
for s in readers: s.close()
left = time.monotonic()
while metric("peel_buffered_bytes") > 0 and time.monotonic() - left < 5:
    time.sleep(0.05)
print("readers_released_seconds", round(time.monotonic() - left, 2))
print("readers_buffered_after", metric("peel_buffered_bytes"))
p.terminate(); p.wait()
