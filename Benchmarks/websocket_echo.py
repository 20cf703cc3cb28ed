#!/usr/bin/env python3
"""WebSocket echo through Peel against nginx's WebSocket proxy (issue 38): TUNNELS tunnels, each
sending one SIZE-byte binary message and awaiting its echo before the next, for DURATION seconds a
round; messages per second for each target, in alternating order round by round, and Peel's ratio
to nginx's (the issue's bar: at least 0.8x).

Both proxies run one worker in front of the same backend, and the same client drives them:
Benchmarks/websocket/wsecho.c (built here with cc), an epoll echo server and load client in C, so
that neither end is what is measured. nginx is configured as its documentation proxies WebSockets
(proxy_http_version 1.1, Upgrade and Connection set from the request), with proxy_buffer_size 64k:
the same bytes read ahead per direction as a Peel tunnel's (nginx's default, one page, would
handicap it). "direct" is the client on the backend with no proxy: the ceiling of the rest.

Run through Benchmarks/run-websocket.sh (make bench-websocket), which installs nginx and finds the
Peel binary. Knobs (environment): PEEL, ROUNDS (3), DURATION (5 s), WARMUP (1 s), TUNNELS (100),
SIZE (16384), TARGETS ("direct nginx peel"), RESULTS (file to append to; "-" = don't), NOTE.
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402  (nginx's main config, ports, process stats, stop_all)

ROUNDS = int(os.environ.get("ROUNDS", "3"))
DURATION = float(os.environ.get("DURATION", "5"))
WARMUP = float(os.environ.get("WARMUP", "1"))
TUNNELS = int(os.environ.get("TUNNELS", "100"))
SIZE = int(os.environ.get("SIZE", "16384"))
TARGETS = os.environ.get("TARGETS", "direct nginx peel").split()
RESULTS = os.environ.get("RESULTS", os.path.join(HERE, "RESULTS.md"))
NOTE = os.environ.get("NOTE", "")

LABELS = {
    "direct": "direct (echo backend, no proxy)",
    "nginx": "nginx WebSocket proxy, 1 worker",
    "peel": "Peel --workers 1",
}

# nginx's documented WebSocket proxying (http://nginx.org/en/docs/http/websocket.html).
NGINX_WS = """
  map $http_upgrade $connection_upgrade {{ default upgrade; '' close; }}
  server {{
    listen 127.0.0.1:{port} reuseport backlog=4096;
    location / {{
      proxy_pass http://127.0.0.1:{be};
      proxy_http_version 1.1;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection $connection_upgrade;
      proxy_read_timeout 600s;
      proxy_buffer_size 64k;
      proxy_buffers 4 64k;
      proxy_busy_buffers_size 128k;
    }}
  }}
"""


def build_client(tmp):
    binary = os.path.join(tmp, "wsecho")
    subprocess.run(["cc", "-O2", "-o", binary, os.path.join(HERE, "websocket", "wsecho.c"), "-lcrypto"], check=True)
    return binary


def run_client(wsecho, port):
    """(messages per second, messages) for one round against `port`."""
    out = subprocess.run([wsecho, "client", str(port), "/echo", str(TUNNELS), str(SIZE), str(WARMUP), str(DURATION)],
                         capture_output=True, text=True, timeout=WARMUP + DURATION + 60)
    if out.returncode != 0:
        raise SystemExit("the load client failed against port %d: %s" % (port, out.stderr.strip()))
    messages, seconds = out.stdout.split()
    return int(messages) / float(seconds), int(messages)


def main():
    tmp = tempfile.mkdtemp(prefix="peel-wsbench-")
    os.chmod(tmp, 0o755)
    wsecho = build_client(tmp)
    be, p_nginx, p_peel = harness.free_ports(3)
    procs, ports = {}, {"direct": be}
    try:
        backend = subprocess.Popen([wsecho, "server", str(be)], stdout=subprocess.DEVNULL,
                                   stderr=open(os.path.join(tmp, "backend.log"), "w"))
        harness.children.append(backend)
        procs["direct"] = backend
        harness.wait_port(be, backend, "the echo backend")
        if "nginx" in TARGETS:
            procs["nginx"] = harness.start_nginx(tmp, "wsproxy", NGINX_WS.format(port=p_nginx, be=be))
            ports["nginx"] = p_nginx
            harness.wait_port(p_nginx, procs["nginx"], "nginx")
        if "peel" in TARGETS:
            procs["peel"] = harness.start_peel(tmp, "peel", p_peel, be, 1)
            ports["peel"] = p_peel
            harness.wait_port(p_peel, procs["peel"], "peel")
        targets = [t for t in TARGETS if t in ports]
        rates = {t: [] for t in targets}
        cpu = {t: [] for t in targets}
        for r in range(ROUNDS):
            order = targets if r % 2 == 0 else list(reversed(targets))
            for t in order:
                pids = harness.proc_pids(procs[t])
                before = sum(harness.cpu_seconds(pids))
                rate, messages = run_client(wsecho, ports[t])
                used = sum(harness.cpu_seconds(pids)) - before
                rates[t].append(rate)
                # CPU of the proxy (of the backend, for direct) per 1,000 echoed messages.
                cpu[t].append(used / messages * 1000 if messages else 0)
                harness.log("round %d %-6s %9.0f msg/s" % (r + 1, t, rate))
    finally:
        harness.stop_all()
        shutil.rmtree(tmp, ignore_errors=True)

    med = {t: statistics.median(v) for t, v in rates.items()}
    lines = ["", "### WebSocket echo: %d tunnels, %d-byte binary messages, one in flight per tunnel" % (TUNNELS, SIZE), "",
             "%s; %s; commit %s; %d rounds of %g s (after %g s warm-up), alternating order%s" % (
                 harness.machine(), harness.versions(), harness.git("rev-parse", "--short", "HEAD") or "?",
                 ROUNDS, DURATION, WARMUP, "; " + NOTE if NOTE else ""), "",
             "| target | messages/s (median) | min–max | CPU s per 1k messages (proxy) |", "|---|---|---|---|"]
    for t in rates:
        lines.append("| %s | %.0f | %.0f–%.0f | %.3f |" % (LABELS[t], med[t], min(rates[t]), max(rates[t]),
                                                            statistics.median(cpu[t])))
    if "peel" in med and "nginx" in med:
        ratio = med["peel"] / med["nginx"] if med["nginx"] else 0
        lines += ["", "Peel / nginx messages/s: %.2f× (bar: at least 0.80×)%s" % (ratio, "" if ratio >= 0.8 else " — BELOW")]
    text = "\n".join(lines) + "\n"
    print(text)
    if RESULTS != "-":
        with open(RESULTS, "a") as f:
            f.write(text)
        harness.log("appended to %s" % RESULTS)


if __name__ == "__main__":
    main()
