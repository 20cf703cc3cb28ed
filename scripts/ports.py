"""Loopback ports for the end-to-end scripts, never the same one twice in a run.

Binding port 0 and closing the socket finds a port that is free now; a second such call before the
first port is taken by its server can return it again (a run of `make test` hands out about a
hundred, so one run in a few got a duplicate). Every port handed out is written to the run's
registry, the file PEEL_TEST_PORTS names (lib.sh sets it in the run's scratch folder), and a port
already in it is never handed out again. Without PEEL_TEST_PORTS the registry is this process's.

As a script: prints one port. As a module: `free_port()`.
"""
import fcntl
import os
import socket

_handed = set()


def _bind_any():
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
    finally:
        s.close()


def free_port():
    """A port free now and not handed out before in this run."""
    path = os.environ.get("PEEL_TEST_PORTS")
    f = open(path, "a+") if path else None
    try:
        if f:
            fcntl.flock(f, fcntl.LOCK_EX)  # scripts may ask from parallel jobs; released on close
            f.seek(0)
            taken = {int(p) for p in f.read().split()}
        else:
            taken = _handed
        for _ in range(1000):
            port = _bind_any()
            if port not in taken:
                break
        else:
            raise RuntimeError("no loopback port left that this run has not handed out")
        _handed.add(port)
        if f:
            f.write(f"{port}\n")
            f.flush()
        return port
    finally:
        if f:
            f.close()


if __name__ == "__main__":
    print(free_port())
