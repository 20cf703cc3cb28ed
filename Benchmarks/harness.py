#!/usr/bin/env python3
"""Side-by-side benchmark of Peel against nginx proxy_pass and nginx+Lua unwrap (issue 7).

Run through Benchmarks/run.sh, which installs the tools and finds the Peel binary. Everything runs
on loopback, on free ports, from a private temp dir; every process started here is stopped here.
"""
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEEL = os.environ["PEEL"]
ROUNDS = int(os.environ.get("ROUNDS", "3"))
DURATION = int(os.environ.get("DURATION", "5"))
CONNECTIONS = int(os.environ.get("CONNECTIONS", "50"))
PATHS = os.environ.get("PATHS", "small big").split()
TARGETS = os.environ.get("TARGETS", "direct nginx lua peel1 peel2").split()
AB_N = int(os.environ.get("AB_N", "20000"))
AB_SECONDS = int(os.environ.get("AB_SECONDS", "30"))
RESULTS = os.environ.get("RESULTS", os.path.join(ROOT, "Benchmarks", "RESULTS.md"))
NOTE = os.environ.get("NOTE", "")
# COMPRESS=gzip: clients send Accept-Encoding: gzip, and nginx has `gzip on` at Peel's level (3) and
# threshold (1 KiB), so both compress /big (issue 12); /small stays under the threshold.
COMPRESS = os.environ.get("COMPRESS", "")
CLIENT_HEADERS = ["-H", "Accept-Encoding: %s" % COMPRESS] if COMPRESS else []
NGINX_GZIP = ("  gzip on; gzip_types application/json; gzip_min_length 1024; gzip_comp_level 3; gzip_proxied any;\n"
              "  gzip_http_version 1.0;  # ab speaks HTTP/1.0; Peel compresses for it too\n"
              if COMPRESS == "gzip" else "")
if COMPRESS:
    NOTE = (NOTE + "; " if NOTE else "") + "clients send Accept-Encoding: %s (nginx gzip on, level 3)" % COMPRESS
PEEL_ENV = os.environ.get("PEEL_ENV", "")  # extra KEY=VALUE pairs for Peel, e.g. LD_PRELOAD=...
# STORE=redis (issue 21): a redis-server on a free port and a target "peelS", Peel with 2 workers and
# the offline cache on that store, measured in the same rounds as peel2 (no store). Every client
# sends one Authorization, so each /small answer is a per-user entry the store is offered.
STORE = os.environ.get("STORE", "")
if STORE:
    CLIENT_HEADERS += ["-H", "Authorization: Bearer bench-user"]
    NOTE = (NOTE + "; " if NOTE else "") + ("clients send Authorization; peelS: the offline cache on a local "
                                            "redis-server (--offline-store), peel2: no offline cache")
# An A/B target "peelB" (--workers 1 unless PEEL_B_WORKERS says otherwise): another binary and/or environment, measured in the same rounds.
PEEL_B = os.environ.get("PEEL_B", PEEL)
PEEL_B_ENV = os.environ.get("PEEL_B_ENV", "")
PEEL_B_LABEL = os.environ.get("PEEL_B_LABEL", "variant B")
PEEL_B_WORKERS = int(os.environ.get("PEEL_B_WORKERS", "1"))
PEEL_B_EXPECT = os.environ.get("PEEL_B_EXPECT", "data")  # "envelope": peelB passes bodies through  # 0 = Peel's default (one per core)
CLK_TCK = os.sysconf("SC_CLK_TCK")

LABELS = {
    "direct": "direct (upstream nginx)",
    "nginx": "nginx proxy_pass",
    "lua": "nginx+Lua unwrap",
    "peel1": "Peel --workers 1",
    "peel2": "Peel (2 workers)",
    "peelS": "Peel (2 workers) with the Redis offline store",
    "peelB": "Peel B %s (%s)" % ("--workers %d" % PEEL_B_WORKERS if PEEL_B_WORKERS else "(default workers)", PEEL_B_LABEL),
}

children = []


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def free_ports(n):
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


# ---------------------------------------------------------------- bodies


def make_bodies(www):
    # /small: about 180 bytes; strings, the decimal 1024.50 (must survive byte-exact), an array, a boolean.
    small_data = ('{"user_id":"u_8f3a2c","name":"Ada Lovelace","balance":1024.50,"currency":"CNY",'
                  '"roles":["admin","beta"],"verified":true,"city":"London"}')
    items = []
    for i in range(900):
        items.append('{"id":%d,"sku":"SKU-%06d","title":"Item %d \\u00e9t\\u00e9","price":%d.%02d,'
                     '"qty":%d,"tags":["a","b"],"active":%s}'
                     % (i + 1, i * 7919 % 1000000, i + 1, 10 + i % 90, i % 100, i % 13,
                        "true" if i % 2 else "false"))
    big_data = "[" + ",".join(items) + "]"
    bodies = {}
    for name, data in (("small", small_data), ("big", big_data)):
        env = '{"code":0,"message":"success","data":' + data + "}"
        with open(os.path.join(www, name + ".json"), "w") as f:
            f.write(env)
        bodies[name] = (env.encode(), data.encode())
    return bodies


# ---------------------------------------------------------------- nginx configs

NGINX_MAIN = """
worker_processes 1;
daemon off;
master_process on;
pid {d}/nginx.pid;
lock_file {d}/nginx.lock;
error_log {d}/error.log warn;
{modules}
events {{ worker_connections 4096; multi_accept on; }}
http {{
  access_log off;
  client_body_temp_path {d}/body;
  proxy_temp_path {d}/proxy;
  fastcgi_temp_path {d}/fastcgi;
  uwsgi_temp_path {d}/uwsgi;
  scgi_temp_path {d}/scgi;
  keepalive_requests 1000000;
  keepalive_timeout 75s;
  sendfile on;
  tcp_nopush on;
  tcp_nodelay on;
{http}
}}
"""

UPSTREAM_HTTP = """
  server {{
    listen 127.0.0.1:{port} reuseport backlog=4096;
    root {www};
    default_type application/json;
    open_file_cache max=16 inactive=60s;
    open_file_cache_valid 60s;
    location = /small {{ try_files /small.json =404; }}
    location = /big {{ try_files /big.json =404; }}
    location = / {{ return 200 "ok\\n"; }}
  }}
"""

# proxy_buffers big enough that /big stays in memory, as Peel keeps it: no temp file on either side.
POOL = """
  upstream backend {{ server 127.0.0.1:{up}; keepalive 128; keepalive_requests 1000000; }}
  proxy_http_version 1.1;
  proxy_set_header Connection "";
  proxy_buffer_size 16k;
  proxy_buffers 16 16k;
  proxy_busy_buffers_size 32k;
"""

PROXY_HTTP = POOL + NGINX_GZIP.replace("{", "{{").replace("}", "}}") + """
  server {{
    listen 127.0.0.1:{port} reuseport backlog=4096;
    location / {{ proxy_pass http://backend; }}
  }}
"""

# The OpenResty way: subrequest to an internal proxied location, decode, check code, re-encode data.
LUA_HTTP = POOL + NGINX_GZIP.replace("{", "{{").replace("}", "}}") + """
  lua_package_path "/usr/share/lua/5.1/?.lua;;";
  server {{
    listen 127.0.0.1:{port} reuseport backlog=4096;
    location /_up/ {{
      internal;
      rewrite ^/_up(/.*)$ $1 break;
      proxy_pass http://backend;
    }}
    location / {{
      default_type application/json;
      content_by_lua_block {{
        local cjson = require "cjson.safe"
        local res = ngx.location.capture("/_up" .. ngx.var.uri, {{ args = ngx.var.args }})
        if res.status ~= 200 then
          ngx.status = 502
          ngx.print('{{"code":-104}}')
          return
        end
        local env = cjson.decode(res.body)
        if type(env) ~= "table" or env.code ~= 0 then
          ngx.status = 502
          ngx.print('{{"code":-100}}')
          return
        end
        ngx.print(cjson.encode(env.data))
      }}
    }}
  }}
"""

LUA_MODULES = """
load_module /usr/lib/nginx/modules/ndk_http_module.so;
load_module /usr/lib/nginx/modules/ngx_http_lua_module.so;
"""


def start_nginx(tmp, name, http, modules=""):
    d = os.path.join(tmp, name)
    os.makedirs(d)
    os.chmod(d, 0o755)
    conf = os.path.join(d, "nginx.conf")
    with open(conf, "w") as f:
        f.write(NGINX_MAIN.format(d=d, modules=modules, http=http))
    p = subprocess.Popen(["nginx", "-p", d + "/", "-c", conf, "-e", os.path.join(d, "error.log")],
                         stdout=subprocess.DEVNULL, stderr=open(os.path.join(d, "stderr.log"), "w"))
    children.append(p)
    return p


def start_redis(tmp, port):
    p = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                          "--dir", tmp, "--maxmemory", "256mb", "--maxmemory-policy", "allkeys-lru"],
                         stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "redis.log"), "w"))
    children.append(p)
    return p


def start_peel(tmp, name, port, up, workers, binary=PEEL, extra_env=PEEL_ENV, extra_args=()):
    env = dict(os.environ)
    for kv in extra_env.split():
        k, _, v = kv.partition("=")
        env[k] = v
    args = [binary, "--upstream", "http://127.0.0.1:%d" % up, "--listen", "127.0.0.1:%d" % port,
            "--admin-listen", "off", "--access-log", "off"]
    if workers:
        args += ["--workers", str(workers)]
    args += list(extra_args)
    p = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL,
                         stderr=open(os.path.join(tmp, name + ".stderr.log"), "w"))
    children.append(p)
    return p


def stop_all():
    for p in reversed(children):
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.time() + 5
    for p in children:
        try:
            p.wait(timeout=max(0.1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def wait_port(port, proc, what):
    for _ in range(200):
        if proc.poll() is not None:
            raise SystemExit("%s exited with %s before listening" % (what, proc.returncode))
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit("%s did not listen on %d" % (what, port))


# ---------------------------------------------------------------- process stats


def proc_pids(proc):
    """The process and its direct children (nginx workers)."""
    pids = [proc.pid]
    try:
        with open("/proc/%d/task/%d/children" % (proc.pid, proc.pid)) as f:
            pids += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return pids


def cpu_seconds(pids):
    """(user, system) CPU seconds of the processes, all threads included."""
    user = system = 0
    for pid in pids:
        try:
            with open("/proc/%d/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            user += int(fields[11])  # utime (field 14)
            system += int(fields[12])  # stime (field 15)
        except OSError:
            pass
    return user / CLK_TCK, system / CLK_TCK


def peak_rss_mb(pids):
    """Largest VmHWM among the processes (for nginx: the worker; the master is idle and shares pages)."""
    best = 0
    for pid in pids:
        try:
            with open("/proc/%d/status" % pid) as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        best = max(best, int(line.split()[1]))
        except OSError:
            pass
    return best / 1024


# ---------------------------------------------------------------- load generators

UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def to_ms(text):
    m = re.match(r"([\d.]+)(us|ms|s)$", text)
    return float(m.group(1)) * UNITS[m.group(2)]


def run_wrk(url, seconds):
    out = subprocess.run(["wrk", "-t1", "-c%d" % CONNECTIONS, "-d%ds" % seconds, "--latency"] + CLIENT_HEADERS + [url],
                         capture_output=True, text=True, timeout=seconds + 60).stdout
    r = {"rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),
         "requests": int(re.search(r"(\d+) requests in", out).group(1)),
         "p50": to_ms(re.search(r"\s50%\s+(\S+)", out).group(1)),
         "p99": to_ms(re.search(r"\s99%\s+(\S+)", out).group(1)),
         "errors": 0}
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if m:
        r["errors"] += int(m.group(1))
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if m:
        r["errors"] += sum(int(x) for x in m.groups())
    return r


def run_ab(url):
    out = subprocess.run(["ab", "-q", "-k", "-t", str(AB_SECONDS), "-n", str(AB_N), "-c", str(CONNECTIONS)] + CLIENT_HEADERS + [url],
                         capture_output=True, text=True, timeout=AB_SECONDS + 60).stdout
    done = re.search(r"Complete requests:\s+(\d+)", out)
    rps = re.search(r"Requests per second:\s+([\d.]+)", out)
    failed = re.search(r"Failed requests:\s+(\d+)", out)
    non2xx = re.search(r"Non-2xx responses:\s+(\d+)", out)
    return {"rps": float(rps.group(1)) if rps else 0.0,
            "done": int(done.group(1)) if done else 0,
            "failed": (int(failed.group(1)) if failed else -1) + (int(non2xx.group(1)) if non2xx else 0)}


# ---------------------------------------------------------------- verification


def fetch(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.status, dict(r.headers), r.read()


STORE_WRITES = ""  # peelS's write counters at the end of the run
EXACT = {}  # (target, path) -> whether the body was the data member byte for byte


def verify(name, port, bodies):
    for path in PATHS:
        env, data = bodies[path]
        status, headers, body = fetch("http://127.0.0.1:%d/%s" % (port, path))
        if status != 200:
            raise SystemExit("%s /%s answered %d" % (name, path, status))
        if name in ("direct", "nginx"):
            ok = body == env
        elif name == "lua":
            # cjson re-serialises: 1024.50 becomes 1024.5 and escapes change, so only the value is compared.
            ok = json.loads(body) == json.loads(data)
        elif name == "peelB" and PEEL_B_EXPECT == "envelope":
            # A ceiling run: peelB passes the envelope through (e.g. PEEL_PASSTHROUGH_PATHS), no scan.
            ok = body == env
        else:  # peel1, peel2, peelS, peelB
            # Peel's contract: the data member's bytes, byte for byte (1024.50 stays 1024.50).
            ok = body == data and headers.get("Content-Type") == "application/json" and "X-Request-Id" in headers
            if path == "small" and b"1024.50" not in body:
                ok = False
        if not ok:
            raise SystemExit("%s /%s answered the wrong bytes: %r" % (name, path, body[:200]))
        EXACT[(name, path)] = body == data
    log("verified %s" % name)


# ---------------------------------------------------------------- main


def machine():
    model = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return "nproc %d, %s, kernel %s" % (os.cpu_count(), model, os.uname().release)


def git(*args):
    try:
        return subprocess.run(["git", "-C", ROOT] + list(args), capture_output=True, text=True).stdout.strip()
    except OSError:
        return "?"


def versions():
    ng = subprocess.run(["nginx", "-v"], capture_output=True, text=True).stderr.strip().replace("nginx version: ", "")
    curl = subprocess.run(["curl", "--version"], capture_output=True, text=True).stdout.split()[1]
    wrk = subprocess.run(["wrk", "-v"], capture_output=True, text=True)
    wrk_words = (wrk.stdout + wrk.stderr).split()
    return "%s, libcurl %s, wrk %s" % (ng, curl, wrk_words[1] if len(wrk_words) > 1 else "?")


def fmt_ratio(a, b):
    return "%.2f×" % (a / b) if b else "—"


def main():
    tmp = tempfile.mkdtemp(prefix="peel-bench-")
    os.chmod(tmp, 0o755)  # nginx workers drop to an unprivileged user and must read the bodies
    www = os.path.join(tmp, "www")
    os.makedirs(www)
    os.chmod(www, 0o755)
    bodies = make_bodies(www)
    for n in os.listdir(www):
        os.chmod(os.path.join(www, n), 0o644)
    global STORE_WRITES
    up, p_nginx, p_lua, p_peel1, p_peel2, p_peelb, p_peels, p_redis, p_admin = free_ports(9)
    procs, ports = {}, {}
    try:
        procs["direct"] = start_nginx(tmp, "upstream", UPSTREAM_HTTP.format(port=up, www=www))
        ports["direct"] = up
        wait_port(up, procs["direct"], "upstream nginx")
        if "nginx" in TARGETS:
            procs["nginx"] = start_nginx(tmp, "proxy", PROXY_HTTP.format(port=p_nginx, up=up))
            ports["nginx"] = p_nginx
        if "lua" in TARGETS:
            procs["lua"] = start_nginx(tmp, "lua", LUA_HTTP.format(port=p_lua, up=up), LUA_MODULES)
            ports["lua"] = p_lua
        if "peel1" in TARGETS:
            procs["peel1"] = start_peel(tmp, "peel1", p_peel1, up, 1)
            ports["peel1"] = p_peel1
        if "peel2" in TARGETS:
            procs["peel2"] = start_peel(tmp, "peel2", p_peel2, up, 0)
            ports["peel2"] = p_peel2
        if "peelS" in TARGETS:
            if not STORE:
                raise SystemExit("target peelS needs STORE=redis")
            procs["redis"] = start_redis(tmp, p_redis)
            wait_port(p_redis, procs["redis"], "redis-server")
            secret = os.path.join(tmp, "offline-store.secret")
            with open(secret, "w") as f:
                f.write("bench secret, 32 bytes or so....\n")
            procs["peelS"] = start_peel(tmp, "peelS", p_peels, up, 0, extra_args=[
                "--offline-cache", "64MiB", "--offline-store", "redis://127.0.0.1:%d/0" % p_redis,
                "--offline-store-secret-file", secret, "--admin-listen", "127.0.0.1:%d" % p_admin])
            ports["peelS"] = p_peels
        if "peelB" in TARGETS:
            procs["peelB"] = start_peel(tmp, "peelB", p_peelb, up, PEEL_B_WORKERS, PEEL_B, PEEL_B_ENV)
            ports["peelB"] = p_peelb
        targets = [t for t in TARGETS if t in procs]
        for t in targets:
            wait_port(ports[t], procs[t], t)
        time.sleep(0.5)
        for t in targets:
            verify(t, ports[t], bodies)

        load_start = os.getloadavg()
        log("load average at start: %.2f %.2f %.2f" % load_start)
        # Warm-up: fill every keep-alive pool and page in the code before anything is counted.
        for path in PATHS:
            for t in targets:
                run_wrk("http://127.0.0.1:%d/%s" % (ports[t], path), 1)

        samples = {(t, p): [] for t in targets for p in PATHS}
        for r in range(ROUNDS):
            order = targets[r % len(targets):] + targets[:r % len(targets)]  # rotate: no fixed position
            for path in PATHS:
                for t in order:
                    pids = proc_pids(procs[t])
                    c0 = cpu_seconds(pids)
                    res = run_wrk("http://127.0.0.1:%d/%s" % (ports[t], path), DURATION)
                    c1 = cpu_seconds(pids)
                    n = max(1, res["requests"])
                    res["user_us"] = (c1[0] - c0[0]) * 1e6 / n
                    res["sys_us"] = (c1[1] - c0[1]) * 1e6 / n
                    res["cpu_us"] = res["user_us"] + res["sys_us"]
                    samples[(t, path)].append(res)
                    log("round %d %-6s /%-5s %9.0f req/s  p50 %.2f ms  p99 %.2f ms  %.1f µs/req  errors %d"
                        % (r + 1, t, path, res["rps"], res["p50"], res["p99"], res["cpu_us"], res["errors"]))

        ab = {}
        for path in PATHS:
            for t in targets:
                ab[(t, path)] = run_ab("http://127.0.0.1:%d/%s" % (ports[t], path))
                log("ab %-6s /%-5s %9.0f req/s  failed %d" % (t, path, ab[(t, path)]["rps"], ab[(t, path)]["failed"]))
        load_end = os.getloadavg()
        rss = {t: peak_rss_mb(proc_pids(procs[t])) for t in targets}
        if "peelS" in targets:
            _, _, text = fetch("http://127.0.0.1:%d/metrics" % p_admin)
            STORE_WRITES = ", ".join(l.replace("peel_offline_store_", "") for l in text.decode().splitlines()
                                     if l.startswith(("peel_offline_store_writes", "peel_offline_store_connected")))
        for t in targets:
            if procs[t].poll() is not None:
                raise SystemExit("%s died during the run (exit %s)" % (t, procs[t].returncode))
    finally:
        stop_all()
        if not os.environ.get("KEEP_TMP"):
            shutil.rmtree(tmp, ignore_errors=True)

    med = {}
    for key, rs in samples.items():
        med[key] = {k: statistics.median(r[k] for r in rs) for k in ("rps", "p50", "p99", "cpu_us", "user_us", "sys_us")}
        med[key]["errors"] = sum(r["errors"] for r in rs)

    commit = git("rev-parse", "--short", "HEAD") + (" (dirty tree)" if git("status", "--porcelain", "--untracked-files=no") else "")
    lines = []
    lines.append("## %s — commit %s" % (time.strftime("%Y-%m-%d %H:%M:%S %Z"), commit))
    lines.append("")
    lines.append("Machine: %s; %s. wrk -t1 -c%d, %d interleaved rounds × %d s per target and path; "
                 "load average %.2f at start, %.2f at end."
                 % (machine(), versions(), CONNECTIONS, ROUNDS, DURATION, load_start[0], load_end[0]))
    if NOTE:
        lines.append("Note: " + NOTE)
    exact = ["%s /%s: %s" % (LABELS[t], p, "byte-exact" if EXACT[(t, p)] else "same value, not the same bytes")
             for t in targets if t not in ("direct", "nginx") for p in PATHS if (t, p) in EXACT]
    if exact:
        lines.append("Unwrapped bodies checked before measuring against the `data` member: " + "; ".join(exact) + ".")
    lines.append("")
    lines.append("| target | path | req/s (median) | p50 ms | p99 ms | CPU µs/req (user+sys) | peak RSS MB | wrk errors | ab -k req/s | ab failed |")
    lines.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for path in PATHS:
        for t in targets:
            m, a = med[(t, path)], ab[(t, path)]
            lines.append("| %s | /%s | %.0f | %.2f | %.2f | %.1f (%.0f+%.0f) | %.1f | %d | %.0f | %d%s |"
                         % (LABELS[t], path, m["rps"], m["p50"], m["p99"], m["cpu_us"], m["user_us"], m["sys_us"],
                            rss[t], m["errors"],
                            a["rps"], a["failed"], "" if a["done"] >= AB_N else " (%d done)" % a["done"]))
    lines.append("")
    peels = [t for t in ("peel1", "peel2", "peelS", "peelB") if t in targets]
    if peels:
        lines.append("| ratio | path | req/s vs nginx | req/s vs Lua | req/s vs direct | p99 vs nginx | CPU/req vs nginx |")
        lines.append("|---|---|---:|---:|---:|---:|---:|")
        for t in peels:
            for path in PATHS:
                m = med[(t, path)]
                n = med.get(("nginx", path))
                l = med.get(("lua", path))
                d = med.get(("direct", path))
                lines.append("| %s | /%s | %s | %s | %s | %s | %s |"
                             % (LABELS[t], path,
                                fmt_ratio(m["rps"], n["rps"]) if n else "—",
                                fmt_ratio(m["rps"], l["rps"]) if l else "—",
                                fmt_ratio(m["rps"], d["rps"]) if d else "—",
                                fmt_ratio(m["p99"], n["p99"]) if n else "—",
                                fmt_ratio(m["cpu_us"], n["cpu_us"]) if n else "—"))
        lines.append("")
    if "peelS" in targets and "peel2" in targets:
        for path in PATHS:
            lines.append("Store on / off, /%s: %s req/s (wrk medians %.0f / %.0f; ab %.0f / %.0f); %s CPU µs/req."
                         % (path, fmt_ratio(med[("peelS", path)]["rps"], med[("peel2", path)]["rps"]),
                            med[("peelS", path)]["rps"], med[("peel2", path)]["rps"],
                            ab[("peelS", path)]["rps"], ab[("peel2", path)]["rps"],
                            fmt_ratio(med[("peelS", path)]["cpu_us"], med[("peel2", path)]["cpu_us"])))
        lines.append("Store writes: %s" % STORE_WRITES)
        lines.append("")
    text = "\n".join(lines)
    print(text)
    if RESULTS != "-":
        with open(RESULTS, "a") as f:
            f.write("\n" + text + "\n")
        log("appended to %s" % RESULTS)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
