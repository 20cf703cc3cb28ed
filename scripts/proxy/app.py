"""A FastAPI envelope API under /api/v1, the kind of upstream app teams put Peel in front of.
Run by scripts/proxy.sh with uvicorn on 127.0.0.1 only."""
import asyncio

from fastapi import APIRouter, FastAPI, Request, WebSocket, WebSocketDisconnect
from fastapi.middleware.cors import CORSMiddleware
from fastapi.middleware.gzip import GZipMiddleware
from fastapi.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response, StreamingResponse

app = FastAPI()
# The upstream's own CORS rules: what passes through when Peel does not manage CORS.
# (No expose_headers here: Starlette would write its list over /expose's own on every answer.)
app.add_middleware(CORSMiddleware, allow_origins=["http://app.example"], allow_methods=["*"], allow_headers=["*"])
api = APIRouter(prefix="/api/v1")
hits = {"options": 0}


def envelope(data=None, code=0, message="ok", status=200, headers=None):
    body = {"code": code, "message": message}
    if data is not None:
        body["data"] = data
    return JSONResponse(body, status_code=status, headers=headers)


@app.middleware("http")
async def count_options(request: Request, call_next):
    if request.method == "OPTIONS":
        hits["options"] += 1
    return await call_next(request)


@api.get("/user")
def user():
    return envelope({"id": 42, "name": "Ada"})


@api.get("/hits")
def get_hits():
    return envelope(hits)


@api.get("/business")
def business():
    return envelope(code=1001, message="insufficient balance")


@api.get("/html")
def html():
    return PlainTextResponse("<html>oops</html>", media_type="text/html")


@api.get("/limited")
def limited():
    return envelope(code=429, message="slow down", status=429, headers={"Retry-After": "7"})


@api.get("/expired")
def expired():
    r = envelope(code=7, message="token expired")
    r.set_cookie("sid", "", max_age=0, path="/api/v1", domain="127.0.0.1")
    return r


@api.get("/expired-challenge")
def expired_challenge():
    return envelope(code=7, message="token expired", status=401,
                    headers={"WWW-Authenticate": 'Bearer realm="api", error="invalid_token"'})


@api.get("/redirect-absolute")
def redirect_absolute(request: Request):
    # An absolute URL naming the upstream itself, as frameworks build from their own base URL.
    return RedirectResponse(str(request.base_url) + "api/v1/user", status_code=302)


@api.get("/redirect-relative")
def redirect_relative():
    return RedirectResponse("/api/v1/user", status_code=302)


@api.post("/login")
def login():
    r = envelope({"ok": True})
    r.set_cookie("sid", "s3cret", path="/api/v1", domain="127.0.0.1", httponly=True)
    return r


@api.get("/me")
def me(request: Request):
    sid = request.cookies.get("sid")
    if sid is None:
        return envelope(code=7, message="not signed in")
    return envelope({"sid": sid})


@api.get("/report.csv")
def report():
    rows = "id,name\n" + "".join(f"{i},row {i}\n" for i in range(1000))
    return Response(rows, media_type="text/csv",
                    headers={"Content-Disposition": 'attachment; filename="report.csv"'})


@api.get("/big")
def big():
    # About 60 KiB of JSON data: compressible.
    return envelope([{"id": i, "name": f"item {i}", "tags": ["a", "b"]} for i in range(1500)])


@api.get("/small")
def small():
    return envelope({"ok": True})


@api.get("/download")
def download():
    # 200 MiB of unknown length (chunked): over max_upstream_body, so only streaming can carry it.
    chunk = b"x" * (1 << 20)
    return StreamingResponse((chunk for _ in range(200)), media_type="application/octet-stream",
                             headers={"Content-Disposition": 'attachment; filename="big.bin"'})


@api.get("/download-sized")
def download_sized(mb: int = 20):
    # A declared length over stream_threshold, sent in 1 MiB pieces: streamed through Peel, which
    # must keep the length (issue 19) and never cut it while the client reads, however slowly.
    chunk = b"z" * (1 << 20)
    return StreamingResponse((chunk for _ in range(mb)), media_type="application/octet-stream",
                             headers={"Content-Length": str(mb << 20)})


@api.get("/download-broken")
def download_broken():
    # 8 MiB declared, 4 MiB sent, then the connection closes: a body cut short (RFC 9112 §8).
    def gen():
        yield b"y" * (4 << 20)
        raise RuntimeError("the upstream dies mid-body")
    return StreamingResponse(gen(), media_type="application/octet-stream", headers={"Content-Length": str(8 << 20)})


@api.get("/events")
async def events():
    async def gen():
        for i in range(3):
            yield f"data: {i}\n\n"
            await asyncio.sleep(0.4)
    return StreamingResponse(gen(), media_type="text/event-stream")


@api.get("/csrf")
def csrf():
    # Django's CSRF failure page: a 403 in HTML, no envelope.
    return PlainTextResponse("<html><body><h1>Forbidden (403)</h1>\n<p>CSRF verification failed.</p></body></html>",
                             status_code=403, media_type="text/html")


@api.get("/ndjson")
def ndjson():
    # A StreamingHttpResponse of JSON lines: valid JSON, then more.
    return PlainTextResponse('{"code":0,"data":1}\n{"code":0,"data":2}\n', media_type="application/json")


@api.get("/expose")
def expose():
    # Express's `res.set('Access-Control-Expose-Headers', 'X-Total-Count, Link')` for pagination.
    return envelope([1, 2], headers={"X-Total-Count": "2", "Link": '</items?page=2>; rel="next"',
                                     "Access-Control-Expose-Headers": "X-Total-Count, Link"})


@api.websocket("/ws/echo")
async def ws_echo(ws: WebSocket):
    """The app's live channel: echoes text messages (scripts/browser.sh, through Peel's tunnel)."""
    await ws.accept()
    try:
        while True:
            await ws.send_text(await ws.receive_text())
    except WebSocketDisconnect:
        pass


app.include_router(api)

# Django's GZipMiddleware in FastAPI's form: a sub-app that compresses whatever the client accepts.
gz = FastAPI()
gz.add_middleware(GZipMiddleware, minimum_size=500)
PDF = b"%PDF-1.4\n" + b"".join(b"%d 0 obj << /Length 44 >> stream BT /F1 12 Tf 72 712 Td (row %d) Tj ET endstream\n" % (i, i)
                               for i in range(3000))


@gz.get("/report.pdf")
def report_pdf():
    # About 300 KB with its length; gzip-compressed (with the compressed length) for gzip clients.
    return Response(PDF, media_type="application/pdf", headers={"Content-Disposition": 'attachment; filename="r.pdf"'})


@gz.get("/user")
def gz_user():
    return envelope({"id": 42, "name": "Ada", "bio": "x" * 2000})


app.mount("/api/v1/gz", gz)
