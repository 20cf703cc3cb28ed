"""A Flask envelope API run under gunicorn with sync workers (gunicorn's default), the upstream of
issue 17's reports: two workers, each held by a slow call, queue everything behind them, and a
worker that dies mid-request closes its connection without a status line.
Run by scripts/proxy.sh on 127.0.0.1 only."""
import os
import time

from flask import Flask, jsonify, request

app = Flask(__name__)


def envelope(data):
    return jsonify({"code": 0, "message": "ok", "data": data})


@app.get("/api/health")
def health():
    return envelope("up")


@app.get("/api/user")
def user():
    return envelope({"id": 7, "pid": os.getpid()})


@app.get("/api/slow")
def slow():
    time.sleep(float(request.args.get("s", "1")))
    return envelope({"slept": request.args.get("s", "1")})


@app.get("/api/die")
def die():
    # What a worker killed by gunicorn's timeout looks like from outside: the connection closes
    # with no status line. The master starts a new worker.
    os._exit(1)
