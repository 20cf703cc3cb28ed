#!/usr/bin/env python3
"""20 MB envelopes through Peel against nginx proxy_pass (issue 35).

Two bodies of about 20 MB from a static nginx upstream: the default dialect's envelope
(`{"code":0,"message":"success","data":[...]}`) and a RuoYi `TableDataInfo` list
(`{"total":N,"rows":[...],"code":200,"msg":"查询成功"}`, answered as `{"total":N,"rows":[...]}`).
Targets, measured in the same rounds in rotating order: nginx `proxy_pass` with its default temp
files (it unwraps nothing), Peel (PEEL), and optionally a previous build (PEEL_B). Each round fetches
each body REQUESTS times in a row on one keep-alive connection with curl, which reports each
transfer's time; then CONCURRENT clients fetch it at once (wall time of the batch). Every target's
answer is checked byte for byte first. Peak resident memory of each Peel is read from VmHWM.

Run through `make bench-big` (or Benchmarks/run.sh's environment): PEEL, PEEL_B, PEEL_B_LABEL,
ROUNDS (5), REQUESTS (10), CONCURRENT (8), RESULTS (file to append to; "-" = don't), NOTE;
CEILING=1 adds three variants of this build that bound what spooling can gain: `peelMem` (spooling
off, the whole answer in memory), `peelShm` (the spool on /dev/shm, no disk file system) and
`peelPass` (`--passthrough-paths /`: nothing judged, the answer streamed as it arrives).
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402  (the nginx configs, process and port helpers)

ROUNDS = int(os.environ.get("ROUNDS", "5"))
REQUESTS = int(os.environ.get("REQUESTS", "10"))
CONCURRENT = int(os.environ.get("CONCURRENT", "8"))
PEEL_B = os.environ.get("PEEL_B", "")
PEEL_B_LABEL = os.environ.get("PEEL_B_LABEL", "previous build")
CEILING = os.environ.get("CEILING", "") == "1"
RESULTS = harness.RESULTS
NOTE = os.environ.get("NOTE", "")
TARGET_BYTES = 20 * 1024 * 1024

UPSTREAM = """
  server {{
    listen 127.0.0.1:{port} reuseport backlog=4096;
    root {www};
    default_type application/json;
    location = /envelope {{ try_files /envelope.json =404; }}
    location = /system/user/list {{ try_files /ruoyi.json =404; }}
  }}
"""

# nginx as it ships: answers past its memory buffers go to proxy_temp_path files.
PROXY = """
  upstream backend {{ server 127.0.0.1:{up}; keepalive 16; }}
  proxy_http_version 1.1;
  proxy_set_header Connection "";
  server {{
    listen 127.0.0.1:{port} reuseport backlog=4096;
    location / {{ proxy_pass http://backend; }}
  }}
"""


def make_bodies(www):
    """The two envelopes on disk, and the bytes each target must answer for them."""
    rows = []
    size = 0
    i = 0
    while size < TARGET_BYTES:
        row = ('{"userId":%d,"deptId":%d,"userName":"user%06d","nickName":"用户%d","email":"u%d@example.com",'
               '"phonenumber":"1380000%04d","sex":"%d","status":"0","balance":%d.%02d,"remark":"第%d行 \\"quoted\\"",'
               '"createTime":"2026-11-%02d 10:%02d:%02d"}') % (
            i, 100 + i % 7, i, i, i, i % 10000, i % 2, i * 3 % 10000, i % 100, i, 1 + i % 28, i % 60, (i * 7) % 60)
        rows.append(row)
        size += len(row.encode()) + 1
        i += 1
    data = "[" + ",".join(rows) + "]"
    envelope = '{"code":0,"message":"success","data":' + data + "}"
    ruoyi = '{"total":%d,"rows":%s,"code":200,"msg":"查询成功"}' % (len(rows), data)
    for name, text in (("envelope", envelope), ("ruoyi", ruoyi)):
        with open(os.path.join(www, name + ".json"), "w") as f:
            f.write(text)
    return {
        "/envelope": (envelope.encode(), data.encode()),
        "/system/user/list": (ruoyi.encode(), ('{"total":%d,"rows":%s}' % (len(rows), data)).encode()),
    }


def fetch_times(port, path, n):
    """Seconds each of `n` GETs of `path` took, one after another on one connection."""
    url = "http://127.0.0.1:%d%s" % (port, path)
    # One -o per URL: curl writes the second URL on to stdout otherwise.
    out = subprocess.run(["curl", "-s", "-w", "%{http_code} %{time_total}\\n"] + ["-o", "/dev/null", url] * n,
                         capture_output=True, text=True, timeout=300).stdout.split("\n")
    times = []
    for line in out:
        if not line:
            continue
        code, t = line.split()
        if code != "200":
            raise SystemExit("bigbody: %s answered %s" % (url, code))
        times.append(float(t))
    return times


def concurrent_wall(port, path, n):
    """Wall seconds for `n` clients fetching `path` at once (each its own connection), and how many got 200."""
    url = "http://127.0.0.1:%d%s" % (port, path)
    start = time.monotonic()
    procs = [subprocess.Popen(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", url], stdout=subprocess.PIPE, text=True)
             for _ in range(n)]
    codes = [p.communicate(timeout=300)[0] for p in procs]
    wall = time.monotonic() - start
    return wall, sum(1 for c in codes if c == "200")


def verify(name, port, bodies):
    for path, (envelope, payload) in bodies.items():
        got = subprocess.run(["curl", "-s", "http://127.0.0.1:%d%s" % (port, path)], capture_output=True, timeout=120).stdout
        want = envelope if name in ("nginx", "peelPass") else payload
        if got != want:
            raise SystemExit("bigbody: %s answered %d bytes for %s, not the %d expected" % (name, len(got), path, len(want)))


def main():
    tmp = tempfile.mkdtemp(prefix="peel-bigbody-")
    www = os.path.join(tmp, "www")
    os.makedirs(www)
    os.chmod(tmp, 0o755)
    os.chmod(www, 0o755)
    bodies = make_bodies(www)
    up, ngx, peel, peel_b, mem, shm, passing = harness.free_ports(7)
    p = harness.start_nginx(tmp, "upstream", UPSTREAM.format(port=up, www=www))
    harness.wait_port(up, p, "upstream nginx")
    p = harness.start_nginx(tmp, "nginx", PROXY.format(up=up, port=ngx))
    harness.wait_port(ngx, p, "nginx proxy_pass")
    config = os.path.join(tmp, "peel.json")
    with open(config, "w") as f:
        f.write('{"routes": [{"prefix": "/system/", "upstream": "default", "dialect": "ruoyi"},'
                ' {"prefix": "/", "upstream": "default"}]}')
    targets = {"nginx": (ngx, p)}
    os.environ["PEEL_CONFIG"] = config
    p = harness.start_peel(tmp, "peel", peel, up, 0)
    harness.wait_port(peel, p, "peel")
    targets["peel"] = (peel, p)
    if PEEL_B:
        p = harness.start_peel(tmp, "peelB", peel_b, up, 0, binary=PEEL_B)
        harness.wait_port(peel_b, p, "peel B")
        targets["peelB"] = (peel_b, p)
    if CEILING:
        for name, port, args in (("peelMem", mem, ("--spool-threshold", "0", "--max-buffered-per-client", "256MiB")),
                                 ("peelShm", shm, ("--spool-dir", "/dev/shm")),
                                 ("peelPass", passing, ("--passthrough-paths", "/"))):
            p = harness.start_peel(tmp, name, port, up, 0, extra_args=args)
            harness.wait_port(port, p, name)
            targets[name] = (port, p)
    for name, (port, _) in targets.items():
        verify(name, port, bodies)
    harness.log("bigbody: every target answers the right bytes; %d rounds of %d sequential and %d concurrent GETs"
                % (ROUNDS, REQUESTS, CONCURRENT))
    seq = {(t, b): [] for t in targets for b in bodies}
    conc = {(t, b): [] for t in targets for b in bodies}
    served = {(t, b): 0 for t in targets for b in bodies}
    cpu = {(t, b): 0.0 for t in targets for b in bodies}
    names = list(targets)
    for r in range(ROUNDS):
        order = names[r % len(names):] + names[:r % len(names)]
        for t in order:
            for b in bodies:
                pids = harness.proc_pids(targets[t][1])
                before = sum(harness.cpu_seconds(pids))
                seq[(t, b)] += fetch_times(targets[t][0], b, REQUESTS)
                cpu[(t, b)] += sum(harness.cpu_seconds(pids)) - before
                wall, ok = concurrent_wall(targets[t][0], b, CONCURRENT)
                conc[(t, b)].append(wall)
                served[(t, b)] += ok
        harness.log("round %d done" % (r + 1))
    hwm = {t: harness.peak_rss_mb(harness.proc_pids(proc)) for t, (_, proc) in targets.items() if t != "nginx"}

    labels = {"nginx": "nginx proxy_pass (answers the envelope)", "peel": "Peel (this build)",
              "peelB": "Peel B (%s)" % PEEL_B_LABEL, "peelMem": "ceiling: this build, spooling off",
              "peelShm": "ceiling: this build, spool on /dev/shm", "peelPass": "ceiling: this build, passed through unjudged"}
    short = {"/envelope": "default envelope", "/system/user/list": "RuoYi list"}
    lines = ["", "### 20 MB envelopes, %s" % time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "",
             "%s; git %s; %d rounds rotating, each %d GETs in a row on one connection (median ms per GET) and %d at once "
             "(median wall ms per batch, whatever the status; a 503 is quick); CPU of the target's processes (nginx: the proxy, not the upstream) per sequential GET. Bodies: %s %d bytes, %s %d bytes.%s" % (
                 harness.machine(), harness.git("rev-parse", "--short", "HEAD"), ROUNDS, REQUESTS, CONCURRENT,
                 short["/envelope"], len(bodies["/envelope"][0]), short["/system/user/list"], len(bodies["/system/user/list"][0]),
                 (" " + NOTE) if NOTE else ""), "",
             "| target | body | ms per GET (median) | p90 | x nginx | CPU ms per GET | %d at once, ms | x nginx | of them 200 | peak RSS MB |" % CONCURRENT,
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for t in targets:
        for b in bodies:
            med = statistics.median(seq[(t, b)]) * 1000
            p90 = sorted(seq[(t, b)])[int(0.9 * (len(seq[(t, b)]) - 1))] * 1000
            base = statistics.median(seq[("nginx", b)]) * 1000
            cmed = statistics.median(conc[(t, b)]) * 1000
            cbase = statistics.median(conc[("nginx", b)]) * 1000
            lines.append("| %s | %s | %.1f | %.1f | %.2fx | %.1f | %.1f | %.2fx | %d/%d | %s |" % (
                labels[t], short[b], med, p90, med / base, cpu[(t, b)] * 1000 / len(seq[(t, b)]), cmed, cmed / cbase,
                served[(t, b)], CONCURRENT * ROUNDS,
                ("%.1f" % hwm[t]) if t in hwm else "-"))
    if PEEL_B:
        for b in bodies:
            lines.append("")
            lines.append("%s: Peel B / Peel = %.2fx per GET, %.2fx for %d at once." % (
                short[b], statistics.median(seq[("peelB", b)]) / statistics.median(seq[("peel", b)]),
                statistics.median(conc[("peelB", b)]) / statistics.median(conc[("peel", b)]), CONCURRENT))
    text = "\n".join(lines) + "\n"
    print(text)
    if RESULTS != "-":
        with open(RESULTS, "a") as f:
            f.write(text)


if __name__ == "__main__":
    try:
        main()
    finally:
        harness.stop_all()
