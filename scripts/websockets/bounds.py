"""Tunnel bounds and endings through Peel for scripts/websockets.sh, one scenario per call. Prints
`eq NAME EXPECTED ACTUAL` or `le NAME LIMIT ACTUAL` lines, tab-separated. Usage:
  bounds.py killed GW BACKEND_PID         an upstream killed mid-tunnel
  bounds.py flood GW ADMIN PEEL_PID N     N clients stop reading while the backend floods them
  bounds.py many GW ADMIN N               N tunnels open at once
  bounds.py limits GW ADMIN               max_tunnels_per_client 2 and max_tunnels 3 (Peel started so)
  bounds.py drain GW ADMIN PEEL_PID T     SIGTERM with tunnels open and one whose backend never answers the
                                          upgrade (Peel's drain_delay 1, shutdown_timeout T)
  bounds.py wss GW                        a wss:// backend (Peel trusts its certificate through --ca-file)
  bounds.py untrusted GW                  a wss:// backend whose certificate Peel does not trust
"""
import asyncio
import json
import os
import re
import signal
import socket
import sys
import time
import urllib.request

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus


def eq(name, expected, actual):
    print(f"eq\t{name}\t{expected}\t{actual}", flush=True)


def le(name, limit, actual):
    print(f"le\t{name}\t{int(limit)}\t{int(actual)}", flush=True)


def admin(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
        return r.read().decode()


def metric(port, name):
    """The value of one series of Peel's /metrics (`name` with its labels), or None."""
    for line in admin(port, "/metrics").splitlines():
        if line.startswith(name + " "):
            return int(float(line.split()[-1]))
    return None


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1))


async def wait_metric(port, name, value, seconds=5):
    """Polls `name` until it is `value` (or `seconds` pass); returns the last value read."""
    deadline = time.monotonic() + seconds
    got = None
    while time.monotonic() < deadline:
        got = metric(port, name)
        if got == value:
            break
        await asyncio.sleep(0.05)
    return got


async def killed(gw, backend_pid):
    async with connect(f"ws://127.0.0.1:{gw}/echo/killed", open_timeout=10) as ws:
        await ws.send("before the kill")
        eq("the tunnel echoes before its upstream is killed", "before the kill", await asyncio.wait_for(ws.recv(), 10))
        os.kill(backend_pid, signal.SIGKILL)
        started = time.monotonic()
        try:
            await asyncio.wait_for(ws.recv(), 10)
            eq("the client's socket closes when its upstream is killed", "closed", "a message")
        except ConnectionClosed as e:
            eq("the client's socket closes when its upstream is killed", "closed", "closed")
            # No close frame came: the upstream's TCP end went away (RFC 6455 §7.1.5, code 1006).
            eq("it closes without a close frame", "None", str(e.rcvd))
        except asyncio.TimeoutError:
            eq("the client's socket closes when its upstream is killed", "closed", "open after 10 s")
        le("ms from the kill to the client's close", 1000, (time.monotonic() - started) * 1000)


def raw_upgrade(gw, path):
    """A client socket that sent an upgrade and read its 101, and reads no further."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(10)
    s.connect(("127.0.0.1", gw))
    s.sendall((f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{gw}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
               "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    return s, head.split(b" ", 2)[1].decode()


def upgrade_answer(gw, path):
    """The status line and the rest of what Peel sends an upgrade before it closes; "closed" when it sends nothing."""
    s = socket.socket()
    s.settimeout(15)
    s.connect(("127.0.0.1", gw))
    s.sendall((f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{gw}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
               "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n").encode())
    got = b""
    try:
        while chunk := s.recv(65536):
            got += chunk
    except OSError:
        pass
    s.close()
    if not got:
        return "closed", ""
    return got.split(b" ", 2)[1].decode(), got.decode(errors="replace")


async def flood(gw, adm, peel_pid, n):
    before_open = metric(adm, "peel_tunnels_open")
    base = rss_kib(peel_pid)
    relayed_base = metric(adm, 'peel_tunnel_bytes_total{from="upstream"}')
    socks, statuses = [], []
    for _ in range(n):
        s, status = raw_upgrade(gw, "/flood")
        socks.append(s)
        statuses.append(status)
    eq(f"{n} clients that will read nothing get their 101", n, statuses.count("101"))
    peak = base
    for _ in range(30):
        await asyncio.sleep(0.1)
        peak = max(peak, rss_kib(peel_pid))
    relayed = metric(adm, 'peel_tunnel_bytes_total{from="upstream"}') - relayed_base
    # Each tunnel reads at most 64 KiB ahead of its client; the rest waits in the kernel's socket
    # buffers (not Peel's memory) and then in the backend. Unpaused, 3 s of flooding is gigabytes.
    le(f"Peel's VmRSS growth in KiB, {n} tunnels flooded for 3 s", 12288, peak - base)
    le(f"bytes the flood got through Peel to {n} clients that read nothing (socket buffers and 64 KiB each)",
       n * (8 << 20), relayed)
    le("and it did flow (over 64 KiB a tunnel)", relayed, n * 65536)
    eq("the flooded tunnels are open", before_open + n, metric(adm, "peel_tunnels_open"))
    for s in socks:
        s.close()
    eq("the flooded tunnels close with their clients", before_open, await wait_metric(adm, "peel_tunnels_open", before_open))


async def many(gw, adm, n):
    started = time.monotonic()
    gate = asyncio.Semaphore(100)

    async def one(i):
        async with gate:
            return await connect(f"ws://127.0.0.1:{gw}/echo", open_timeout=30)

    sockets = await asyncio.gather(*(one(i) for i in range(n)), return_exceptions=True)
    opened = [s for s in sockets if not isinstance(s, BaseException)]
    eq(f"{n} tunnels open at once", n, len(opened))
    eq("peel_tunnels_open counts them", n, metric(adm, "peel_tunnels_open"))
    eq("/status counts them", n, json.loads(admin(adm, "/status"))["tunnels"]["open"])

    async def echo(i, ws):
        await ws.send(f"tunnel {i}")
        return await asyncio.wait_for(ws.recv(), 30) == f"tunnel {i}"

    answers = await asyncio.gather(*(echo(i, ws) for i, ws in enumerate(opened)), return_exceptions=True)
    eq("each of them echoes its own message", len(opened), sum(1 for a in answers if a is True))
    await asyncio.gather(*(ws.close() for ws in opened), return_exceptions=True)
    eq("all closed, peel_tunnels_open is back to 0", 0, await wait_metric(adm, "peel_tunnels_open", 0))
    le(f"ms to open, echo on and close {n} tunnels", 30000, (time.monotonic() - started) * 1000)


async def refused(gw, source):
    """The status an upgrade from `source` gets, and its problem's content type."""
    try:
        ws = await connect(f"ws://127.0.0.1:{gw}/echo", open_timeout=10, local_addr=(source, 0))
        return ws, "101", ""
    except InvalidStatus as e:
        return None, str(e.response.status_code), e.response.headers.get("Content-Type", "")


async def limits(gw, adm):
    a1, s1, _ = await refused(gw, "127.0.0.1")
    a2, s2, _ = await refused(gw, "127.0.0.1")
    eq("two tunnels from one client address open", "101 101", f"{s1} {s2}")
    _, s3, t3 = await refused(gw, "127.0.0.1")
    eq("a third from that address is refused (max_tunnels_per_client 2)", "429", s3)
    eq("as a problem document", "application/problem+json", t3)
    b1, s4, _ = await refused(gw, "127.0.0.2")
    eq("another address still gets one", "101", s4)
    _, s5, t5 = await refused(gw, "127.0.0.3")
    eq("past max_tunnels 3 any address is refused", "503", s5)
    eq("as a problem document too", "application/problem+json", t5)
    eq("counted: max_tunnels_per_client", 1, metric(adm, 'peel_refusals_total{bound="max_tunnels_per_client"}'))
    eq("counted: max_tunnels", 1, metric(adm, 'peel_refusals_total{bound="max_tunnels"}'))
    await a1.close()
    await wait_metric(adm, "peel_tunnels_open", 2)
    a3, s6, _ = await refused(gw, "127.0.0.1")
    eq("a closed tunnel gives its place back", "101", s6)
    for ws in (a2, b1, a3):
        if ws:
            await ws.close()


async def drain(gw, adm, peel_pid, timeout):
    open_ws = [await connect(f"ws://127.0.0.1:{gw}/echo", open_timeout=10) for _ in range(2)]
    # An upgrade whose backend never answers (Peel's timeout, 30 s, is past shutdown_timeout).
    stalled = asyncio.ensure_future(asyncio.to_thread(upgrade_answer, gw, "/stall"))
    await asyncio.sleep(0.3)
    os.kill(peel_pid, signal.SIGTERM)
    term = time.monotonic()
    await asyncio.sleep(0.3)
    _, status, _ = await refused(gw, "127.0.0.1")
    eq("an upgrade during the drain is refused", "503", status)
    eq("counted: tunnel_draining", 1, metric(adm, 'peel_refusals_total{bound="tunnel_draining"}'))
    await open_ws[0].send("still here")
    eq("open tunnels keep working during the drain", "still here", await asyncio.wait_for(open_ws[0].recv(), 5))

    async def closed(ws):
        try:
            await asyncio.wait_for(ws.recv(), 15)
            return None
        except ConnectionClosed:
            return time.monotonic() - term
        except asyncio.TimeoutError:
            return None

    times = await asyncio.gather(*(closed(ws) for ws in open_ws))
    status, text = await stalled
    eq("an upgrade still dialing at shutdown_timeout gets the drain's answer", "503", status)
    eq("with the drain's problem kind", "True", str("server-busy" in text))
    eq("open tunnels are closed at shutdown_timeout", "2", str(sum(1 for t in times if t is not None)))
    if all(t is not None for t in times):
        # drain_delay (1 s) then shutdown_timeout: the calls' deadline, and the tunnels'.
        le("ms from SIGTERM to the tunnels' close, at least drain_delay + shutdown_timeout", max(times) * 1000,
           (1 + timeout) * 1000)
        le("and at most 2 s past it", (1 + timeout + 2) * 1000, max(times) * 1000)


async def wss(gw):
    async with connect(f"ws://127.0.0.1:{gw}/echo", max_size=None, open_timeout=10) as ws:
        await ws.send("through TLS")
        eq("a wss:// backend: a text frame comes back", "through TLS", await asyncio.wait_for(ws.recv(), 10))
        blob = os.urandom(1 << 20)
        await ws.send(blob)
        eq("a wss:// backend: a 1 MB binary message comes back whole", "True", str(await asyncio.wait_for(ws.recv(), 20) == blob))
        await ws.close(1000, "done")
        eq("a wss:// backend: the client's close handshake completes", "1000", str(ws.close_code))
    async with connect(f"ws://127.0.0.1:{gw}/bye", open_timeout=10) as ws:
        await ws.send("last")
        try:
            await asyncio.wait_for(ws.recv(), 10)
            eq("a wss:// backend: its close code reaches the client", "4001", "a message")
        except ConnectionClosed as e:
            eq("a wss:// backend: its close code reaches the client", "4001", str(e.rcvd.code if e.rcvd else None))


async def untrusted(gw):
    try:
        async with connect(f"ws://127.0.0.1:{gw}/echo", open_timeout=10):
            eq("a wss:// backend Peel does not trust is refused", "502", "101")
    except InvalidStatus as e:
        eq("a wss:// backend Peel does not trust is refused", "502", str(e.response.status_code))
        eq("with a problem document", "application/problem+json", e.response.headers.get("Content-Type", ""))


def main():
    what, gw = sys.argv[1], int(sys.argv[2])
    args = [int(a) for a in sys.argv[3:]]
    scenario = {"killed": killed, "flood": flood, "many": many, "limits": limits, "drain": drain, "wss": wss,
                "untrusted": untrusted}[what]
    asyncio.run(scenario(gw, *args))


main()
