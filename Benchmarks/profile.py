#!/usr/bin/env python3
"""Per-request cost of Peel, measured without wall-clock noise (issue 7).

    PEEL=path/to/peel python3 Benchmarks/profile.py callgrind [PATH] [N]   instructions per request
    PEEL=path/to/peel python3 Benchmarks/profile.py strace [PATH] [N]      syscalls per request
    PEEL=path/to/peel python3 Benchmarks/profile.py perf [PATH] [SECONDS]  perf record (cpu-clock)

Starts the benchmark's nginx upstream and one Peel worker (access log and admin off), warms up,
then counts only the N requests sent by `ab -k -c50` (callgrind is zeroed after the warm-up).
PEEL_ENV adds KEY=VALUE pairs to Peel's environment (e.g. LD_PRELOAD=...); OUT names the output dir.
"""
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


def ab(port, path, n, c=50):
    out = subprocess.run(["ab", "-q", "-k", "-n", str(n), "-c", str(c), "http://127.0.0.1:%d/%s" % (port, path)],
                         capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith(("Complete requests", "Failed requests", "Non-2xx")):
            print("  " + line.strip(), file=sys.stderr)


def main():
    mode = sys.argv[1]
    path = sys.argv[2] if len(sys.argv) > 2 else "small"
    n = int(sys.argv[3]) if len(sys.argv) > 3 else {"callgrind": 5000, "strace": 20000, "perf": 10}[mode]
    out = os.environ.get("OUT") or tempfile.mkdtemp(prefix="peel-profile-")
    os.makedirs(out, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="peel-profile-run-")
    os.chmod(tmp, 0o755)
    www = os.path.join(tmp, "www")
    os.makedirs(www)
    os.chmod(www, 0o755)
    harness.make_bodies(www)
    for f in os.listdir(www):
        os.chmod(os.path.join(www, f), 0o644)
    up, port = harness.free_ports(2)
    try:
        nginx = harness.start_nginx(tmp, "upstream", harness.UPSTREAM_HTTP.format(port=up, www=www))
        harness.wait_port(up, nginx, "upstream")
        env = dict(os.environ)
        for kv in harness.PEEL_ENV.split():
            k, _, v = kv.partition("=")
            env[k] = v
        peel = [harness.PEEL, "--upstream", "http://127.0.0.1:%d" % up, "--listen", "127.0.0.1:%d" % port,
                "--admin-listen", "off", "--access-log", "off", "--workers", "1", "--probe-interval", "3600"]
        if mode == "callgrind":
            cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=%s/callgrind.out.%%p" % out] + peel
        elif mode == "strace":
            cmd = ["strace", "-f", "-c", "-o", os.path.join(out, "strace.txt")] + peel
        else:
            cmd = peel
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=open(os.path.join(out, "stderr.log"), "w"))
        harness.children.append(p)
        harness.wait_port(port, p, "peel")
        ab(port, path, 1000 if mode != "perf" else 20000)
        if mode == "callgrind":
            subprocess.run(["callgrind_control", "-z", str(p.pid)], capture_output=True)
            t = time.time()
            ab(port, path, n)
            print("  %.1f s under callgrind" % (time.time() - t), file=sys.stderr)
            subprocess.run(["callgrind_control", "-d", str(p.pid)], capture_output=True)
            time.sleep(1)
            dumps = sorted(f for f in os.listdir(out) if f.startswith("callgrind.out.") and "." in f[14:])
            dump = os.path.join(out, dumps[-1])
            total = subprocess.run(["callgrind_annotate", "--inclusive=no", dump], capture_output=True,
                                   text=True).stdout
            for line in total.splitlines():
                if "PROGRAM TOTALS" in line:
                    ir = int(line.split()[0].replace(",", ""))
                    print("%s /%s: %d instructions per request (%d requests); dump %s" % (mode, path, ir // n, n, dump))
        elif mode == "strace":
            ab(port, path, n)
            # Stop the traced Peel, not strace, so strace writes its summary and exits by itself.
            for pid in harness.proc_pids(p)[1:]:
                os.kill(pid, 15)
            p.wait(timeout=30)
        else:
            rec = subprocess.Popen(["perf", "record", "-e", "cpu-clock", "-F", "4999", "-g", "-p", str(p.pid),
                                    "-o", os.path.join(out, "perf.data")], stderr=subprocess.DEVNULL)
            subprocess.run(["wrk", "-t1", "-c50", "-d%ds" % n, "http://127.0.0.1:%d/%s" % (port, path)],
                           capture_output=True)
            rec.send_signal(2)
            rec.wait()
            print("perf data: %s/perf.data" % out)
    finally:
        harness.stop_all()
    if mode == "strace":
        time.sleep(0.5)
        text = open(os.path.join(out, "strace.txt")).read()
        total = [l for l in text.splitlines() if l.strip().endswith("total")]
        print(text)
        if total:
            calls = int(total[0].split()[3])
            print("strace /%s: %.2f syscalls per request (%d requests + 1000 warm-up)" % (path, calls / (n + 1000), n))


if __name__ == "__main__":
    main()
