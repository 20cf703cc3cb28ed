#!/usr/bin/env bash
# Memory and thread safety:
#  1. the whole test suite under AddressSanitizer and ThreadSanitizer (own scratch paths, so the
#     normal build stays warm); any report fails the run. LeakSanitizer is off there: XCTest itself
#     leaks per test case, which would drown real reports.
#  2. leaks are judged on the real binary instead: the release build under valgrind memcheck with
#     keep-alive and fresh-connection traffic, faults and a SIGTERM; no invalid access, and no more
#     than 1 KiB definitely lost (the Swift runtime's weak-reference side tables for objects alive at
#     exit account for a few dozen bytes).
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
for san in address thread; do
  echo "== swift test --sanitize=$san"
  log=$(mktemp)
  ASAN_OPTIONS=detect_leaks=0 swift test --sanitize=$san --scratch-path ".build-$san" >"$log" 2>&1
  grep -E "Executed [0-9]+ tests" "$log" | tail -1
  if grep -qE "ERROR: AddressSanitizer|WARNING: ThreadSanitizer" "$log"; then
    echo "sanitize: $san reported a problem"
    grep -A40 -m2 -E "ERROR: AddressSanitizer|WARNING: ThreadSanitizer" "$log" | head -120
    status=1
  fi
  if ! grep -qE "Executed [0-9]+ tests, with 0 failures" "$log"; then
    echo "sanitize: tests failed under $san"
    grep -E "error:" "$log" | head -20
    status=1
  fi
  rm -f "$log"
done

echo "== valgrind memcheck on the release binary"
command -v valgrind >/dev/null || { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind >/dev/null; }
swift build -c release -Xswiftc -warnings-as-errors >/dev/null
PEEL=$(swift build -c release --show-bin-path)/peel
WORK=$(mktemp -d)
export PEEL_TEST_PORTS="$WORK/ports"  # never one port twice in this run (scripts/ports.py)
free_port() { python3 scripts/ports.py; }  # the working directory is the repository
UP=$(free_port); GW=$(free_port)
"$PEEL" demo-upstream --listen 127.0.0.1:$UP >/dev/null 2>&1 & UPID=$!
valgrind --leak-check=full --show-leak-kinds=definite '--soname-synonyms=somalloc=*jemalloc*' --log-file="$WORK/vg.txt" \
  "$PEEL" --upstream http://127.0.0.1:$UP --listen 127.0.0.1:$GW --admin-listen off --access-log off --workers 2 --timeout 1 \
  >/dev/null 2>&1 & VPID=$!
for _ in $(seq 1 200); do curl -s -o /dev/null "http://127.0.0.1:$GW/api/user" && break; sleep 0.1; done
ab -q -k -c 20 -n 3000 "http://127.0.0.1:$GW/api/user" >/dev/null 2>&1
ab -q -c 10 -n 500 "http://127.0.0.1:$GW/api/items" >/dev/null 2>&1
for p in /api/html /api/business-error /fault/reset /fault/close-mid-body /fault/bad-chunking /fault/stall /api/gzip /api/large?kb=512; do
  curl -s -o /dev/null --max-time 3 "http://127.0.0.1:$GW$p"
done
curl -s -o /dev/null --max-time 0.2 "http://127.0.0.1:$GW/api/slow?ms=1000"
head -c 300000 /dev/urandom | curl -s -o /dev/null --data-binary @- "http://127.0.0.1:$GW/api/echo"
kill -TERM $VPID; wait $VPID; kill $UPID; wait $UPID 2>/dev/null
lost=$(awk '/definitely lost:/{gsub(",","",$4); print $4}' "$WORK/vg.txt")
invalid=$(grep -cE "Invalid (read|write|free)|uninitialised|Mismatched free" "$WORK/vg.txt")
echo "definitely lost: ${lost:-?} bytes; invalid accesses: $invalid"
if [ "$invalid" != "0" ] || [ -z "$lost" ] || [ "$lost" -gt 1024 ]; then
  echo "sanitize: valgrind found a problem"; grep -B2 -A25 -E "Invalid|definitely lost in" "$WORK/vg.txt" | head -120
  status=1
fi
rm -rf "$WORK"
[ $status -eq 0 ] && echo "sanitize: clean"
exit $status
