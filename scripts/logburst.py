"""A log reader that reads in bursts (issue 28): Peel's stdout is a pipe that this script empties only
every 250 ms, reading until the pipe is empty, while calls with 8 KB paths make 8 KB access-log
lines at 1,000 a second for 5 s (2 MB between two reads). Prints how many of those lines arrived, of how many calls.

usage: logburst.py PEEL UPSTREAM_URL [peel options...]
"""
import fcntl, multiprocessing, os, socket, subprocess, sys, time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ports import free_port  # noqa: E402  (never a port this run handed out before)

peel, upstream, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
RATE, SECONDS, CONNECTIONS, TICK = 1000, 5, 4, 0.04
MARK = b"burst" + b"c" * 7990  # a path of about 8 KB: each access-log line is over 8 KB

port = free_port()
# The calls go to Peel's own reachability path, moved to the long path: Peel answers them itself,
# so the machine's cores go to Peel's logging and the reader, not to an upstream.
p = subprocess.Popen([peel, "--upstream", upstream, "--listen", f"127.0.0.1:{port}", "--admin-listen", "off",
                      "--workers", "2", "--reachability-path", "/" + MARK.decode(), *extra], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
fd = p.stdout.fileno()
fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)

lines = 0
tail = b""
def drain():
    """Reads until the pipe is empty; counts the burst's lines."""
    global lines, tail
    while True:
        try:
            data = os.read(fd, 1 << 16)
        except BlockingIOError:
            return
        if not data:
            return
        data = tail + data
        *whole, tail = data.split(b"\n")
        lines += sum(1 for l in whole if MARK in l)

for _ in range(200):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close(); break
    except OSError:
        time.sleep(0.05)

def load(answered):
    """RATE / CONNECTIONS calls a second on one keep-alive connection, pipelined a tick at a time; a
    process of its own, so that the reader's wake-ups are not held up by the load's work."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    request = b"GET /" + MARK + b" HTTP/1.1\r\nHost: x\r\n\r\n"
    per_tick = int(RATE / CONNECTIONS * TICK)
    start = time.monotonic()
    buf = b""
    for tick in range(int(SECONDS / TICK)):
        time.sleep(max(0, start + tick * TICK - time.monotonic()))
        s.sendall(request * per_tick)
        got = 0
        while got < per_tick:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                buf += s.recv(1 << 16); continue
            head = buf[:end].lower()
            length = int(head.split(b"content-length:")[1].split(b"\r\n")[0]) if b"content-length:" in head else 0
            while len(buf) < end + 4 + length:
                buf += s.recv(1 << 16)
            buf = buf[end + 4 + length:]
            got += 1
        with answered.get_lock(): answered.value += got
    s.close()

answered = multiprocessing.Value("i", 0)
loaders = [multiprocessing.Process(target=load, args=(answered,)) for _ in range(CONNECTIONS)]
started = time.monotonic()
for l in loaders: l.start()
gap, woke = 0.0, time.monotonic()
while any(l.is_alive() for l in loaders):
    time.sleep(0.25)
    now = time.monotonic(); gap = max(gap, now - woke); woke = now
    drain()
took = time.monotonic() - started
deadline = time.monotonic() + 3
while time.monotonic() < deadline and lines < answered.value:
    time.sleep(0.25)
    drain()
p.terminate(); p.wait()
calls = answered.value
print("calls", calls)
print("lines", lines)
print("seconds", round(took, 2))
print("longest_sleep_ms", int(gap * 1000))
print("kept_permille", lines * 1000 // max(1, calls))
