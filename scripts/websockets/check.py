"""Checks WebSockets through Peel with Python's websockets client: prints NAME<TAB>EXPECTED<TAB>ACTUAL
lines for scripts/websockets.sh. Usage: check.py GATEWAY_PORT"""
import asyncio
import os
import sys

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

GW = int(sys.argv[1])
URL = f"ws://127.0.0.1:{GW}"


def out(name, expected, actual):
    print(f"{name}\t{expected}\t{actual}", flush=True)


async def main():
    async with connect(URL + "/echo", max_size=None, open_timeout=10) as ws:
        await ws.send("hello through peel")
        out("a text frame comes back", "hello through peel", await asyncio.wait_for(ws.recv(), 10))
        blob = bytes(range(256)) * 4
        await ws.send(blob)
        got = await asyncio.wait_for(ws.recv(), 10)
        out("a binary frame comes back byte for byte", "True", str(got == blob))
        big = os.urandom(4 << 20)
        await ws.send(big)
        got = await asyncio.wait_for(ws.recv(), 30)
        out("a 4 MB message comes back whole", "True", str(got == big))
        pong = await ws.ping(b"are you there")
        latency = await asyncio.wait_for(pong, 10)
        out("ping gets its pong", "True", str(latency >= 0))
        await ws.close(1000, "done")
        out("the client's close handshake completes", "1000", str(ws.close_code))

    async with connect(URL + "/bye", open_timeout=10) as ws:
        await ws.send("last")
        try:
            await asyncio.wait_for(ws.recv(), 10)
            out("the backend's close code reaches the client", "4001", "a message")
        except ConnectionClosed as e:
            out("the backend's close code reaches the client", "4001", str(e.rcvd.code if e.rcvd else None))

    try:
        async with connect(URL + "/refuse", open_timeout=10):
            out("a refused upgrade is answered with the backend's status", "403", "101")
    except InvalidStatus as e:
        out("a refused upgrade is answered with the backend's status", "403", str(e.response.status_code))
        out("the refusal is a problem document", "application/problem+json",
            e.response.headers.get("Content-Type", ""))
        out("the refusal keeps the backend's words", "True", str(b"sockets are closed today" in e.response.body))


asyncio.run(main())
