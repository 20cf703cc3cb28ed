"""Drives headless Chromium over its DevTools protocol (websockets from PyPI): a page served from
one origin fetches from Peel on another and reads what CORS lets it read.
usage: drive.py DEVTOOLS_PORT PAGE_URL PEEL_URL UPSTREAM_PID
Prints one `ok`/`FAIL` line per check; the exit status is the number of failures."""
import json
import os
import signal
import sys
import time
import urllib.parse
import urllib.request

from websockets.sync.client import connect

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from checks import check, failures  # noqa: E402

DEVTOOLS, PAGE, PEEL, UP_PID = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])


def target():
    for _ in range(100):
        try:
            pages = json.load(urllib.request.urlopen(f"http://127.0.0.1:{DEVTOOLS}/json/list", timeout=2))
            page = next(p for p in pages if p.get("type") == "page")
            return page["webSocketDebuggerUrl"]
        except Exception:
            time.sleep(0.1)
    raise SystemExit("browser: no DevTools page target")


class Tab:
    def __init__(self, ws):
        self.ws = ws
        self.next = 0

    def call(self, method, **params):
        self.next += 1
        self.ws.send(json.dumps({"id": self.next, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv(timeout=20))
            if msg.get("id") == self.next:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg["result"]

    def js(self, expression):
        r = self.call("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in r:
            return {"error": r["exceptionDetails"].get("exception", {}).get("description", "exception")}
        return r["result"].get("value")


# What a page script sees of one cross-origin fetch: status and the fields it asks for.
FETCH = """(async () => {
  try {
    const r = await fetch(%s, %s);
    const read = n => r.headers.get(n);
    return {status: r.status, origin: location.origin, requestId: read("X-Request-Id"), age: read("Age"),
            cacheStatus: read("Cache-Status"), total: read("X-Total-Count"), link: read("Link"),
            server: read("server"), body: await r.text()};
  } catch (e) { return {error: String(e)}; }
})()"""

# What a page script sees of a WebSocket to `url`: the echo of one text message, then the close.
SOCKET = """new Promise(resolve => {
  const seen = {};
  const ws = new WebSocket(%s);
  const give_up = setTimeout(() => resolve({...seen, error: "no close in 10 s"}), 10000);
  ws.onopen = () => { seen.opened = true; ws.send("hello from the page \u00e9"); };
  ws.onmessage = e => { seen.echo = e.data; ws.close(1000, "done"); };
  ws.onerror = () => { seen.error = true; };
  ws.onclose = e => { clearTimeout(give_up); resolve({...seen, code: e.code, clean: e.wasClean}); };
})"""

session = connect(target(), max_size=None, open_timeout=10)
tab = Tab(session.__enter__())
tab.call("Page.enable")


def navigate(url):
    tab.call("Page.navigate", url=url)
    for _ in range(100):
        if tab.js("document.readyState") == "complete" and tab.js("location.href") == url:
            break
        time.sleep(0.05)


navigate(PAGE)
page_origin = "{0.scheme}://{0.netloc}".format(urllib.parse.urlsplit(PAGE))
check("the page loads from its own origin, not Peel's", (page_origin, True), (tab.js("location.origin"), page_origin != PEEL))

# What an app's page sends: its user's token (a key field of Peel's offline cache, so the answer is
# stored for this user), and no-store for the fresh answer (which adds Cache-Control: no-cache).
USER = {"Authorization": "Bearer page-user"}
fresh = tab.js(FETCH % (json.dumps(PEEL + "/user"), json.dumps({"cache": "no-store", "headers": USER})))
check("a cross-origin fetch of a fresh answer succeeds", 200, fresh.get("status"))
check("the page reads X-Request-Id (exposed by Peel)", True, bool(fresh.get("requestId")))
check("a field nobody exposed stays hidden from the page (the browser enforces CORS)", None, fresh.get("server"))
expose = tab.js(FETCH % (json.dumps(PEEL + "/expose"), json.dumps({"cache": "no-store"})))
check("the page reads the upstream's own exposed fields (X-Total-Count, Link)", ("2", True),
      (expose.get("total"), "rel=\"next\"" in (expose.get("link") or "")))

# The app's WebSocket through Peel (issue 38): the page's origin is in --cors-origins.
ws_url = PEEL.replace("http://", "ws://", 1) + "/ws/echo"
sock = tab.js(SOCKET % json.dumps(ws_url))
check("the page's WebSocket opens through Peel", True, sock.get("opened"))
check("a text message comes back through the tunnel", "hello from the page \u00e9", sock.get("echo"))
check("the page's close handshake completes", (1000, True), (sock.get("code"), sock.get("clean")))
# The same page served from an origin --cors-origins does not name (localhost, not 127.0.0.1): Peel
# refuses the upgrade (403, cross-site WebSocket hijacking) and the browser reports a failed socket.
other = PAGE.replace("127.0.0.1", "localhost", 1)
navigate(other)
check("the other page's origin is not the allowed one", other.rstrip("/"), tab.js("location.origin"))
refused_sock = tab.js(SOCKET % json.dumps(ws_url))
check("a WebSocket from an origin Peel does not allow never opens", (None, None, 1006),
      (refused_sock.get("opened"), refused_sock.get("echo"), refused_sock.get("code")))
navigate(PAGE)

# The upstream goes away: Peel serves the stored answer, and the page can tell it is stale.
os.kill(UP_PID, signal.SIGTERM)
state = None
for _ in range(100):
    try:
        state = json.load(urllib.request.urlopen(PEEL + "/_peel/reachability", timeout=2))["state"]
    except Exception as e:
        state = repr(e)
    if state == "unreachable":
        break
    time.sleep(0.1)
check("Peel sees the upstream gone", "unreachable", state)
time.sleep(1.1)  # Age counts whole seconds
# Issue 17: a request that asks for a fresh answer (no-store, no-cache) gets no stale one, so the page
# asks the ordinary way; the fresh answer had no freshness, so the browser's own cache goes to Peel.
refused = tab.js(FETCH % (json.dumps(PEEL + "/user"), json.dumps({"cache": "no-store", "headers": USER})))
check("a fetch that asks for a fresh answer gets the offline problem, not a stale one", 503, refused.get("status"))
stale = tab.js(FETCH % (json.dumps(PEEL + "/user"), json.dumps({"cache": "default", "headers": USER})))
check("the stale answer reaches the page", (200, fresh.get("body")), (stale.get("status"), stale.get("body")))
check("the page reads Cache-Status on the stale answer", "Peel; hit; detail=offline", stale.get("cacheStatus"))
check("the page reads Age on the stale answer", True, (stale.get("age") or "").isdigit() and int(stale["age"]) >= 1)
check("and X-Request-Id", True, bool(stale.get("requestId")) and stale.get("requestId") != fresh.get("requestId"))
session.__exit__(None, None, None)
sys.exit(failures())
