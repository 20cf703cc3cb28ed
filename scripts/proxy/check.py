"""Checks Peel in front of the FastAPI app (scripts/proxy/app.py) with real clients.
usage: check.py UPSTREAM_PORT PEEL_PORT CORS_PEEL_PORT ACCESS_LOG PEEL_PID
Prints one `ok`/`FAIL` line per check; the exit status is the number of failures."""
import asyncio
import json
import os
import sys
import time

import aiohttp
import httpx
import requests

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from checks import check, failures  # noqa: E402

UP, GW, CGW, LOG, PID = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
G, C = f"http://127.0.0.1:{GW}", f"http://127.0.0.1:{CGW}"
APP = "http://app.example"


def preflight(base, origin=APP):
    return httpx.options(base + "/user", headers={"Origin": origin, "Access-Control-Request-Method": "PUT",
                                                  "Access-Control-Request-Headers": "authorization, content-type"})


def options_hits():
    return requests.get(f"http://127.0.0.1:{UP}/api/v1/hits").json()["data"]["options"]


# CORS left to the upstream (no --cors-origins): its preflight answer passes unjudged.
r = preflight(G)
check("preflight without --cors-origins: the upstream's answer passes (was 502)", 200, r.status_code)
check("preflight without --cors-origins: the upstream's Allow-Origin", APP, r.headers.get("access-control-allow-origin"))
check("preflight without --cors-origins: the upstream's Allow-Methods kept", True, "PUT" in r.headers.get("access-control-allow-methods", ""))
r = requests.get(G + "/business", headers={"Origin": APP})
check("business error is 422", 422, r.status_code)
check("422 problem keeps the upstream's Access-Control-Allow-Origin", APP, r.headers.get("access-control-allow-origin"))

# CORS managed by Peel (--cors-origins http://app.example).
before = options_hits()
r = preflight(C)
check("managed preflight is answered 204 by Peel", 204, r.status_code)
check("managed preflight: Allow-Origin", APP, r.headers.get("access-control-allow-origin"))
check("managed preflight: Allow-Methods is what was requested", "PUT", r.headers.get("access-control-allow-methods"))
check("managed preflight: Allow-Headers is what was requested", "authorization, content-type", r.headers.get("access-control-allow-headers"))
check("managed preflight: Max-Age", "600", r.headers.get("access-control-max-age"))
check("managed preflight never reaches the upstream", before, options_hits())
r = preflight(C, "http://evil.example")
check("preflight from another origin gets no Allow-Origin", None, r.headers.get("access-control-allow-origin"))
for path, status in [("/user", 200), ("/business", 422), ("/expired", 401)]:
    r = requests.get(C + path, headers={"Origin": APP})
    check(f"managed {path} is {status}", status, r.status_code)
    check(f"managed {path} carries Allow-Origin", APP, r.headers.get("access-control-allow-origin"))
    check(f"managed {path} varies by Origin", True, "Origin" in r.headers.get("vary", ""))
    # Peel's own fields, then --cors-expose-headers (the upstream's own list is merged: see /expose).
    check(f"managed {path} exposes Peel's fields and the configured ones",
          "X-Request-Id, Retry-After, Age, Cache-Status, Content-Disposition", r.headers.get("access-control-expose-headers"))
r = requests.get(C + "/user", headers={"Origin": "http://evil.example"})
check("another origin gets no Allow-Origin on success", None, r.headers.get("access-control-allow-origin"))
check("another origin gets no CORS fields at all", [], [k for k in r.headers if k.lower().startswith("access-control-")])
# A subdomain wildcard (http://*.apps.example) and its lookalikes.
for origin, allowed in [("http://a.apps.example", True), ("http://a.b.apps.example", True), ("http://apps.example", False),
                        ("http://apps.example.evil.net", False), ("http://badapps.example", False), ("https://a.apps.example", False)]:
    r = requests.get(C + "/user", headers={"Origin": origin})
    check(f"wildcard origin: {origin} {'allowed' if allowed else 'refused'}", origin if allowed else None,
          r.headers.get("access-control-allow-origin"))
# Express's expose list for pagination reaches the browser through Peel's own list.
r = requests.get(C + "/expose", headers={"Origin": "http://a.apps.example"})
check("the upstream's Access-Control-Expose-Headers (X-Total-Count, Link) is merged into Peel's",
      "X-Request-Id, Retry-After, Age, Cache-Status, Content-Disposition, X-Total-Count, Link",
      r.headers.get("access-control-expose-headers"))
check("its pagination fields pass", ("2", True), (r.headers.get("x-total-count"), "rel=\"next\"" in r.headers.get("link", "")))
r = requests.get(C + "/%2e%2e/%2e%2e/etc", headers={"Origin": APP})
check("a refusal (dot-segments) is 400", 400, r.status_code)
check("a refusal carries Allow-Origin", APP, r.headers.get("access-control-allow-origin"))

import socket
s = socket.create_connection(("127.0.0.1", CGW), timeout=5)
s.sendall(b"POST /user HTTP/1.1\r\nHost: x\r\nOrigin: http://app.example\r\nContent-Length: 20000000\r\n\r\n")
head = b""
while b"\r\n\r\n" not in head:
    d = s.recv(4096)
    if not d:
        break
    head += d
s.close()
lines = head.decode("latin-1").split("\r\n")
fields = {l.split(":", 1)[0].lower(): l.split(":", 1)[1].strip() for l in lines[1:] if ":" in l}
check("the server's own refusal (413, declared body over max_body) carries Allow-Origin",
      ("413", APP), (lines[0].split(" ")[1] if lines[0] else "", fields.get("access-control-allow-origin")))

# Kept fields on problem documents.
r = requests.get(G + "/limited")
check("429 keeps its status", 429, r.status_code)
check("429 keeps the upstream's Retry-After", "7", r.headers.get("retry-after"))
check("429 is a problem document", "application/problem+json", r.headers.get("content-type"))
r = requests.get(G + "/expired")
check("token expired is 401 auth-expired", (401, "auth-expired"), (r.status_code, r.json().get("kind")))
check("token expired carries a Bearer invalid_token challenge (RFC 6750)", 'Bearer error="invalid_token"', r.headers.get("www-authenticate"))
check("token expired keeps Set-Cookie, rewritten to Peel's paths", "sid=\"\"; Max-Age=0; Path=/; SameSite=lax", r.headers.get("set-cookie"))
r = requests.get(G + "/expired-challenge")
check("the upstream's own challenge is kept", 'Bearer realm="api", error="invalid_token"', r.headers.get("www-authenticate"))

# Redirects.
r = requests.get(G + "/redirect-absolute", allow_redirects=False)
check("absolute 302 names Peel", (302, f"{G}/user"), (r.status_code, r.headers.get("location")))
check("an empty 302 is not labelled application/json", False, "json" in r.headers.get("content-type", ""))
r = requests.get(G + "/redirect-absolute", headers={"X-Forwarded-Proto": "https", "X-Forwarded-Host": "api.example.com"},
                 allow_redirects=False)
check("absolute 302 names Peel's forwarded address (from a trusted proxy)", "https://api.example.com/user", r.headers.get("location"))
r = requests.get(C + "/redirect-absolute", headers={"X-Forwarded-Proto": "https", "X-Forwarded-Host": "evil.example"},
                 allow_redirects=False)
check("a client outside --trusted-proxies cannot steer the rewritten 302", f"{C}/user", r.headers.get("location"))
r = requests.get(G + "/redirect-relative", allow_redirects=False)
check("relative 302 loses the base path", "/user", r.headers.get("location"))
for name in ["absolute", "relative"]:
    r = httpx.get(G + f"/redirect-{name}", follow_redirects=True)
    check(f"httpx follows the {name} 302 to the unwrapped user", {"id": 42, "name": "Ada"}, r.json())

# Cookies under the base path: a session login works through Peel.
s = requests.Session()
r = s.post(G + "/login")
check("login Set-Cookie: Path loses the base path, Domain dropped", "sid=s3cret; HttpOnly; Path=/; SameSite=lax", r.headers.get("set-cookie"))
check("the session cookie is sent back on Peel's paths", {"sid": "s3cret"}, s.get(G + "/me").json())

# Downloads.
async def download():
    async with aiohttp.ClientSession() as session:
        async with session.get(G + "/report.csv") as resp:
            return resp.status, resp.headers.get("Content-Type"), resp.headers.get("Content-Disposition"), await resp.text()
status, ctype, disposition, text = asyncio.run(download())
check("CSV download is 200 (was 502)", 200, status)
check("CSV keeps its type and disposition", ("text/csv; charset=utf-8", 'attachment; filename="report.csv"'), (ctype, disposition))
check("CSV arrives whole", 1001, text.count("\n"))

# Compression to clients, negotiated by Accept-Encoding.
raw = requests.get(G + "/big", headers={"Accept-Encoding": "identity"})
check("identity: no Content-Encoding, but Vary: Accept-Encoding", (None, True),
      (raw.headers.get("content-encoding"), "Accept-Encoding" in raw.headers.get("vary", "")))
plain = raw.content
for header, coding in [("gzip, deflate, br", "gzip"), ("gzip;q=0.5, br", "br"), ("br;q=0, gzip", "gzip")]:
    r = requests.get(G + "/big", headers={"Accept-Encoding": header})  # requests decodes gzip and (with brotli) br
    wire = int(r.headers.get("content-length", "0"))
    check(f"Accept-Encoding {header!r} gets {coding}", coding, r.headers.get("content-encoding"))
    check(f"{coding} round trip is the unwrapped data byte for byte", plain, r.content)
    check(f"{coding} is smaller than a fifth", True, wire * 5 < len(plain))
async def aio_gzip():
    async with aiohttp.ClientSession() as session:
        async with session.get(G + "/big", headers={"Accept-Encoding": "gzip"}) as resp:
            return resp.headers.get("Content-Encoding"), await resp.read()
check("aiohttp gzip round trip", ("gzip", plain), asyncio.run(aio_gzip()))
r = httpx.get(G + "/small", headers={"Accept-Encoding": "gzip"})
check("answers under 1 KiB are not compressed", None, r.headers.get("content-encoding"))
r = requests.get(G + "/report.csv", headers={"Accept-Encoding": "gzip"})
check("a CSV download is compressed too, and arrives whole", ("gzip", 1001), (r.headers.get("content-encoding"), r.text.count("\n")))

# Codings follow the client (issue 19): a GZip-middleware upstream, identity and gzip clients.
r = requests.get(G + "/gz/report.pdf", headers={"Accept-Encoding": "identity"}, stream=True)
raw = r.raw.read(decode_content=False)
check("identity client: the PDF comes uncompressed, with its length", (None, str(len(raw)), b"%PDF"),
      (r.headers.get("content-encoding"), r.headers.get("content-length"), raw[:4]))
pdf = raw
r = requests.get(G + "/gz/report.pdf", headers={"Accept-Encoding": "gzip"}, stream=True)
raw = r.raw.read(decode_content=False)
import gzip as gz
check("gzip client: the upstream's gzip passes as it came, with its length", ("gzip", str(len(raw)), True),
      (r.headers.get("content-encoding"), r.headers.get("content-length"), len(raw) < len(pdf) // 5))
check("... and it is the PDF", pdf, gz.decompress(raw))
r = requests.get(G + "/gz/user", headers={"Accept-Encoding": "gzip"})
check("a gzip-compressed envelope is still decoded and unwrapped", (200, 42), (r.status_code, r.json().get("id")))
r = requests.get(G + "/gz/user", headers={"Accept-Encoding": "identity"})
check("... and for an identity client", (200, None, 42), (r.status_code, r.headers.get("content-encoding"), r.json().get("id")))

# Every refusal says why (issue 19): the problem's reason; the log's reason and excerpt are checked below.
for path, reason in [("/html", "not JSON at byte 0 (0x3c '<')"), ("/ndjson", "trailing data at byte 20"),
                     ("/csrf", "upstream 403 text/html")]:
    r = requests.get(G + path)
    check(f"{path}: the problem says why", reason, r.json().get("reason"))
check("the upstream's CSRF page is not sent to the client", False, "CSRF" in requests.get(G + "/csrf").text)

# Streaming passthrough with back-pressure.
def rss_kb():
    with open(f"/proc/{PID}/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS"))
MiB = 1 << 20
base = peak = rss_kb()
t0 = time.monotonic()
first = None
total = 0
slept = False
with requests.get(G + "/download", stream=True, timeout=60) as r:
    status = r.status_code
    for chunk in r.iter_content(1 << 16):
        if first is None:
            first = time.monotonic() - t0
        total += len(chunk)
        if total % (8 * MiB) < (1 << 16):
            peak = max(peak, rss_kb())
        if not slept and total >= 20 * MiB:
            # A slow client: the upstream transfer must pause, not pile up in Peel.
            time.sleep(1.5)
            peak = max(peak, rss_kb())
            slept = True
elapsed = time.monotonic() - t0
check("200 MiB download (over max_upstream_body) is 200", 200, status)
check("200 MiB download arrives whole", 200 * MiB, total)
check("its first byte arrives early (< 1 s)", True, first is not None and first < 1.0)
grew = (peak - base) // 1024
check(f"Peel's RSS stays bounded during it (grew {grew} MiB, limit 32)", True, grew <= 32)
print(f"     download: first byte {first:.3f} s, 200 MiB in {elapsed:.1f} s, RSS {base // 1024} -> {peak // 1024} MiB")
# A declared length over stream_threshold keeps it (issue 19), streamed with the same bounded memory.
base = peak = rss_kb()
with requests.get(G + "/download-sized?mb=64", stream=True, timeout=60) as r:
    declared = r.headers.get("content-length"), r.headers.get("transfer-encoding")
    got = 0
    for chunk in r.iter_content(1 << 16):
        got += len(chunk)
        if got % (8 * MiB) < (1 << 16):
            peak = max(peak, rss_kb())
        if got == 16 * MiB:
            time.sleep(1.0)
            peak = max(peak, rss_kb())
check("64 MiB declared download keeps its Content-Length, not chunked", (str(64 * MiB), None), declared)
check("64 MiB declared download arrives whole", 64 * MiB, got)
grew = (peak - base) // 1024
check(f"Peel's RSS stays bounded during it (grew {grew} MiB, limit 32)", True, grew <= 32)
r = requests.head(G + "/download-sized?mb=64", timeout=10)
check("HEAD of a declared download gets its length and no body", (200, str(64 * MiB), b""),
      (r.status_code, r.headers.get("content-length"), r.content))

# Many slow downloads at once on reused upstream connections, several rounds: none may be cut
# (issue 19: about one run in five lost one at 5-13 MB to Peel's own idle-connection guard).
import threading


def slow_download(results, i):
    try:
        s = socket.create_connection(("127.0.0.1", GW), timeout=30)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
        s.sendall(b"GET /download-sized?mb=12 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while b"\r\n\r\n" not in data:
            d = s.recv(65536)
            if not d:
                break
            data += d
        head, _, rest = data.partition(b"\r\n\r\n")
        total = len(rest)
        while True:
            d = s.recv(65536)
            if not d:
                break
            total += len(d)
            time.sleep(0.003)
        results[i] = total
    except OSError as e:
        results[i] = repr(e)
cut = []
for round_ in range(4):
    requests.get(G + "/small")  # keeps a pooled connection warm between rounds
    results = [None] * 10
    threads = [threading.Thread(target=slow_download, args=(results, i)) for i in range(10)]
    [t.start() for t in threads]
    [t.join(60) for t in threads]
    cut += [r for r in results if r != 12 * MiB]
check("40 slow 12 MiB downloads, 10 at a time on reused connections, all whole", [], cut)

r = requests.head(G + "/download", timeout=10)
check("HEAD of the download answers at once without a body", (200, b""), (r.status_code, r.content))

try:
    r = requests.get(G + "/download-broken", timeout=10)
    cut = f"whole ({len(r.content)} bytes)"
except requests.exceptions.ChunkedEncodingError:
    cut = "cut short"
check("an upstream dying mid-stream leaves the client an answer it can tell is cut short", "cut short", cut)
s = socket.create_connection(("127.0.0.1", GW), timeout=5)
s.sendall(b"GET /download HTTP/1.1\r\nHost: x\r\n\r\n")
got = 0
while got < 2 * MiB:
    got += len(s.recv(1 << 16))
s.close()
time.sleep(0.3)
check("after a client leaves mid-download Peel still answers", 200, requests.get(G + "/user").status_code)

times = []
t0 = time.monotonic()
with httpx.stream("GET", G + "/events", timeout=10) as r:
    check("server-sent events pass (text/event-stream)", (200, True), (r.status_code, r.headers.get("content-type", "").startswith("text/event-stream")))
    for line in r.iter_lines():
        if line.startswith("data:"):
            times.append(time.monotonic() - t0)
check("three events arrive", 3, len(times))
check("events arrive one by one, as sent (0.4 s apart)", True,
      len(times) == 3 and times[1] - times[0] > 0.25 and times[2] - times[1] > 0.25)

# Behind a trusted proxy the client is the last untrusted hop of X-Forwarded-For (issue 18).
requests.get(G + "/user/behind-proxy", headers={"X-Forwarded-For": "198.51.100.9, 203.0.113.9"})

# Access log: upstream_code as sent (0 included), Peel's own code apart.
time.sleep(0.4)  # the access log is flushed every 100 ms
lines = {}
with open(LOG) as f:
    for line in f:
        e = json.loads(line)
        lines.setdefault(e["path"], e)
pick = lambda p: (lines.get(p, {}).get("upstream_code", "absent"), lines.get(p, {}).get("code", "absent"))
check("access log /user: upstream_code 0, no Peel code", (0, None), pick("/user"))
check("access log: the client behind a trusted proxy is the last untrusted hop", "203.0.113.9",
      lines.get("/user/behind-proxy", {}).get("client"))
check("access log: a direct client is its peer", "127.0.0.1", lines.get("/user", {}).get("client"))
check("access log /business: upstream_code 1001", (1001, 1001), pick("/business"))
check("access log /report.csv: no envelope", (None, None), pick("/report.csv"))
kinds = {}
with open(LOG) as f:
    for line in f:
        e = json.loads(line)
        kinds.setdefault(e["path"], set()).add((e["status"], e["kind"]))
check("access log: the streamed download, and the client that left it", {(200, "passthrough"), (499, "client-closed")},
      kinds.get("/download"))
check("access log: the download the upstream cut", {(200, "passthrough-cut")}, kinds.get("/download-broken"))
reasons = {}
with open(LOG) as f:
    for line in f:
        e = json.loads(line)
        reasons.setdefault(e["path"], (e.get("reason"), e.get("excerpt")))
check("access log /html: reason and excerpt", ("not JSON at byte 0 (0x3c '<')", "<html>oops</html>"), reasons.get("/html"))
check("access log /csrf: reason, and an excerpt with its newline escaped", ("upstream 403 text/html", True),
      (reasons.get("/csrf", (None,))[0], "</h1>\\x0a<p>CSRF" in (reasons.get("/csrf", (None, ""))[1] or "")))
check("access log /download-broken: the cut says how", True, "remaining" in (reasons.get("/download-broken", ("",))[0] or ""))
sys.exit(failures())
