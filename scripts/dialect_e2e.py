#!/usr/bin/env python3
"""End to end for envelope dialects (issue 25): one fake upstream serves every preset's sample
envelopes, and Peel is started with each preset in turn. Each answer Peel gives over HTTP must be
what `peel dialects` lists for that sample (status, body byte for byte; problems with their
request id), and a few answers are also checked against the shape the issue names, by hand.

usage: dialect_e2e.py PATH/TO/peel"""
import http.client
import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, failures  # noqa: E402
from ports import free_port  # noqa: E402

PEEL = sys.argv[1]


def listing():
    """Parses `peel dialects` into {preset: [(label, status, body, expected_status, expected_body)]}."""
    out = subprocess.run([PEEL, "dialects"], check=True, capture_output=True, text=True).stdout
    presets, current, sample = {}, None, None
    for line in out.split("\n"):
        if line and not line.startswith(" "):
            current = line.split(":", 1)[0]
            presets[current] = []
        elif line.startswith("    -> "):
            status, _, body = line[len("    -> "):].partition(" ")
            presets[current].append(sample + (int(status), body))
        elif line.startswith("  ") and not line.startswith("  {"):
            label, _, rest = line[2:].partition(": ")
            status, _, body = rest.partition(" ")
            sample = (label, int(status), body)
    return presets


PRESETS = listing()
ROUTES = {}
for name, samples in PRESETS.items():
    for k, (label, status, body, _, _) in enumerate(samples):
        ROUTES[f"/{name}/{k}"] = (status, body.encode())


class Upstream(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        status, body = ROUTES.get(self.path.split("?")[0], (404, b'{"nope":true}'))
        self.send_response(status)
        # Many envelope backends send JSON as text/html; Peel judges by the body.
        self.send_header("Content-Type", "text/html;charset=utf-8" if status == 200 else "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def request(port, method, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    c.request(method, path, headers={"X-Request-Id": "example"})
    r = c.getresponse()
    body = r.read()
    headers = {k.lower(): v for k, v in r.getheaders()}
    c.close()
    return r.status, headers, body


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
threading.Thread(target=server.serve_forever, daemon=True).start()
up = server.server_address[1]
log_lines = []

for preset, samples in PRESETS.items():
    port = free_port()
    p = subprocess.Popen([PEEL, "--upstream", f"http://127.0.0.1:{up}", "--listen", f"127.0.0.1:{port}",
                          "--admin-listen", "off", "--dialect", preset, "--workers", "1"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.025)
        for k, (label, _, _, want_status, want_body) in enumerate(samples):
            status, headers, body = request(port, "GET", f"/{preset}/{k}")
            check(f"{preset} {label}: status", want_status, status)
            check(f"{preset} {label}: body as `peel dialects` lists it", want_body, body.decode())
            want_type = "application/problem+json" if want_status >= 400 else "application/json"
            check(f"{preset} {label}: content type", want_type, headers.get("content-type", "").split(";")[0])
            if want_status < 300:
                # HEAD answers what GET would: same status, the unwrapped length, no body.
                hs, hh, hb = request(port, "HEAD", f"/{preset}/{k}")
                check(f"{preset} {label}: HEAD length", (want_status, str(len(body)), b""),
                      (hs, hh.get("content-length"), hb))
    finally:
        p.terminate()
        out, _ = p.communicate(timeout=10)
        log_lines += [json.loads(line) for line in out.splitlines() if line.startswith("{")]

# The shapes the issue names, checked by hand rather than against the listing.
ruoyi = [s for s in PRESETS["ruoyi"]]
check("ruoyi login: the token is the answer", '{"token":"eyJhbGciOiJIUzUxMiJ9.e30.c2ln"}', ruoyi[0][4])
check("ruoyi paged list: rows and total", '{"total":2,"rows":[{"userId":1,"userName":"admin"},{"userId":2,"userName":"ry"}]}',
      ruoyi[1][4])
alibaba_auth = json.loads(PRESETS["alibaba"][2][4])
check("alibaba: the string code is kept as a string", ("auth-expired", "A0230"), (alibaba_auth["kind"], alibaba_auth["code"]))
alipay_fail = json.loads(PRESETS["alipay"][1][4])
check("alipay: sub_msg is the detail, sub_code in upstream", ("交易不存在", {"sub_code": "ACQ.TRADE_NOT_EXIST", "sub_msg": "交易不存在"}),
      (alipay_fail["detail"], alipay_fail.get("upstream")))
antd_fail = json.loads(PRESETS["antd"][1][4])
check("antd: showType reaches the app", {"showType": 2}, antd_fail.get("upstream"))
codes = {(line["path"], json.dumps(line["upstream_code"])) for line in log_lines if line.get("method") == "GET"}
check("access log: upstream_code as the upstream sent it", True, ("/alibaba/2", '"A0230"') in codes and ("/ruoyi/2", "500") in codes)

server.shutdown()
print(f"dialects: {len(PRESETS)} presets")
sys.exit(failures())
