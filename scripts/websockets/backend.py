"""A WebSocket backend for scripts/websockets.sh: echoes every message on /echo, closes with code
4001 after one message on /bye, sends 64 KiB binary messages for as long as it is let on /flood,
refuses the upgrade with a 403 JSON body on /refuse, and answers no upgrade on /stall for a minute. Usage: backend.py PORT [CERT KEY] (with a
certificate and key it serves wss://)."""
import asyncio
import http
import ssl
import sys

from websockets.asyncio.server import serve
from websockets.http11 import Response
from websockets.datastructures import Headers


async def handler(ws):
    path = ws.request.path
    if path.startswith("/bye"):
        await ws.recv()
        await ws.close(4001, "bye from the backend")
        return
    if path.startswith("/flood"):
        chunk = b"f" * 65536
        while True:
            await ws.send(chunk)
    async for message in ws:
        await ws.send(message)


async def process_request(connection, request):
    if request.path.startswith("/stall"):
        await asyncio.sleep(60)
    if request.path.startswith("/refuse"):
        body = b'{"code":403,"message":"sockets are closed today"}'
        return Response(403, "Forbidden", Headers([("Content-Type", "application/json"),
                                                   ("Content-Length", str(len(body)))]), body)
    return None


async def main(port, tls):
    async with serve(handler, "127.0.0.1", port, process_request=process_request, max_size=None, ssl=tls):
        await asyncio.get_running_loop().create_future()


context = None
if len(sys.argv) > 3:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(sys.argv[2], sys.argv[3])
asyncio.run(main(int(sys.argv[1]), context))
