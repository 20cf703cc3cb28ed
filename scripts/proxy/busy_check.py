"""Issue 17 against Flask under gunicorn sync workers (scripts/proxy/busy_app.py): a busy upstream is
never called offline, and calls whose worker dies never take Peel offline for others.
usage: busy_check.py PEEL_PORT
Prints one `ok`/`FAIL` line per check; the exit status is the number of failures."""
import os
import sys
import threading
import time

import requests

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from checks import check, failures  # noqa: E402

G = f"http://127.0.0.1:{int(sys.argv[1])}"


def state():
    try:
        return requests.get(G + "/_peel/reachability", timeout=5).json().get("state")
    except Exception as e:  # noqa: BLE001 - a failed read is a finding, not a crash
        return f"error: {e}"


check("reachable at the start", "reachable", state())

# Busy: both sync workers held by 4 s calls; the probes (every 0.3 s, 0.3 s timeout) queue behind
# them for 4 s, and so do twelve more calls. Before issue 17 the probes' timeouts made Peel offline
# and the queued calls got an instant 503.
results, lock = [], threading.Lock()


def call(path):
    try:
        r = requests.get(G + path, timeout=20)
        kind = r.json().get("kind") if r.status_code != 200 else None
        out = (r.status_code, kind)
    except Exception as e:  # noqa: BLE001
        out = ("error", str(e))
    with lock:
        results.append(out)


threads = [threading.Thread(target=call, args=("/slow?s=4",)) for _ in range(2)]
for t in threads:
    t.start()
time.sleep(0.3)
threads += [threading.Thread(target=call, args=("/slow?s=0",)) for _ in range(12)]
for t in threads[2:]:
    t.start()
states = set()
deadline = time.time() + 4.5
while time.time() < deadline:
    states.add(state())
    time.sleep(0.1)
for t in threads:
    t.join(30)
check("busy upstream: every call answered 200 (none offline)", [(200, None)] * 14, sorted(results, key=str))
check("busy upstream: the state never left reachable", {"reachable"}, states)

# A path whose worker dies: ten calls, each 502 upstream-unreachable, and Peel stays reachable for
# everyone else (three such calls used to take it offline for 20 s).
died = []
for _ in range(10):
    r = requests.get(G + "/die", timeout=10)
    died.append((r.status_code, r.json().get("kind")))
    requests.get(G + "/user", timeout=10)
check("a dying worker: each call is 502 upstream-unreachable", [(502, "upstream-unreachable")] * 10, died)
check("a dying worker: still reachable", "reachable", state())
others = [requests.get(G + "/user", timeout=10).status_code for _ in range(5)]
check("a dying worker: other endpoints answered", [200] * 5, others)
sys.exit(failures())
