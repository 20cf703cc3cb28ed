# Shared by the end-to-end scripts: a scratch folder, processes killed on exit, checks that count.
WORK=$(mktemp -d)
LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# free_port never hands out a port twice in one run (scripts/ports.py): the run's registry, read by
# the Python helpers too.
export PEEL_TEST_PORTS="$WORK/ports"
export PYTHONDONTWRITEBYTECODE=1  # importing ports.py leaves no __pycache__ in scripts/
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
pass=0; fail=0
check() {  # check NAME EXPECTED ACTUAL
  if [ "$2" == "$3" ]; then pass=$((pass+1)); echo "ok   $1"
  else fail=$((fail+1)); echo "FAIL $1: expected [$2] got [$3]"; fi
}
check_le() {  # check_le NAME LIMIT ACTUAL
  if [ "$3" -le "$2" ]; then pass=$((pass+1)); echo "ok   $1 ($3 <= $2)"
  else fail=$((fail+1)); echo "FAIL $1: $3 > $2"; fi
}
# free_port: a loopback port free now and not handed out before in this run.
free_port() { python3 "$LIB_DIR/ports.py"; }
# wait_listening PORT [PID]: block until something accepts TCP connections on 127.0.0.1:PORT (10 s at
# most). A gateway's readiness does not follow its upstream, so a test that calls through the gateway
# right after starting both must wait for the upstream itself; a busy machine starts either one first.
# With PID, the listener must be that process's: a server that could not bind its port fails here,
# at once, rather than letting the checks talk to whoever holds the port.
wait_listening() {
  for _ in $(seq 1 200); do
    if [ -n "${2:-}" ]; then
      listens_on "$1" "$2" && return 0
      kill -0 "$2" 2>/dev/null || { fail=$((fail+1)); echo "FAIL process $2 exited before listening on port $1"; return 0; }
    else
      (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    fi
    sleep 0.05
  done
  fail=$((fail+1)); echo "FAIL nothing${2:+ of process $2} listens on port $1 after 10 s"
}
# listens_on PORT PID: true when process PID holds a listening socket on TCP port PORT.
# Without iproute2's `ss` (not on the image) only the connect is checked.
listens_on() {
  command -v ss >/dev/null || { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; return; }
  [[ "$(ss -Hltnp "sport = :$1" 2>/dev/null)" == *"pid=$2,"* ]]
}
# wait_log FILE TEXT COUNT: until FILE holds COUNT lines containing TEXT (5 s at most). Log lines are
# written after the answer or the signal, so a busy machine may not have them all at once; the check
# that follows says what was missing.
wait_log() { for _ in $(seq 1 100); do [ "$(grep -cF -- "$2" "$1" 2>/dev/null || true)" -ge "$3" ] && return 0; sleep 0.05; done; }
# start_tls_upstream PORT [PATH FILE]...: a local TLS server with a self-signed certificate
# ($WORK/cert.pem, trusted only where a CA bundle names it) answering every GET with one peel
# envelope, and each PATH with its FILE.
start_tls_upstream() {
  [ -f "$WORK/cert.pem" ] || openssl req -x509 -newkey rsa:2048 -nodes -keyout "$WORK/key.pem" -out "$WORK/cert.pem" -days 1 \
    -subj /CN=127.0.0.1 -addext "subjectAltName=IP:127.0.0.1" >/dev/null 2>&1
  python3 "$(dirname "${BASH_SOURCE[0]}")/tls_upstream.py" "$1" "$WORK/cert.pem" "$WORK/key.pem" "${@:2}" >"$WORK/tls-$1.log" 2>&1 &
  pids+=($!)
  wait_listening "$1"
}
