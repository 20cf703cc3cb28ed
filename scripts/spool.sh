#!/usr/bin/env bash
# Big answers cost disk, not memory (issue 35): 20 MB enveloped answers from the demo upstream,
# eight at once from one address, all 200 and byte for byte the payload, with peak resident memory
# under 96 MiB and the default limits; a disk budget smaller than the answer and a file-size limit
# (ulimit -f: the write fails with EFBIG, as a full disk fails it with ENOSPC) answer 503 and never a
# wrong byte; no spool file ever has a name, so a killed Peel leaves nothing; a bad --spool-dir
# fails the start, and /readyz follows the directory. Loopback only; every wait is bounded.
set -uo pipefail
PEEL=${1:?usage: spool.sh PATH/TO/peel}
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib.sh"

UP=$(free_port)
"$PEEL" demo-upstream --listen 127.0.0.1:$UP >"$WORK/demo.log" 2>&1 & pids+=($!)
wait_listening $UP $!
BIG="/api/large?kb=20480"
SMALL="/api/large?kb=2048"
curl -fs "http://127.0.0.1:$UP$BIG" -o "$WORK/big.env" && curl -fs "http://127.0.0.1:$UP$SMALL" -o "$WORK/small.env" || { echo "spool: no demo upstream"; exit 1; }
# The payload Peel unwraps: the `data` member's bytes, verbatim (the demo writes it last).
payload() { python3 -c 'import sys; d=open(sys.argv[1],"rb").read(); i=d.index(b"\"data\":")+7; open(sys.argv[2],"wb").write(d[i:-1])' "$1" "$2"; }
payload "$WORK/big.env" "$WORK/big.data"; payload "$WORK/small.env" "$WORK/small.data"
# A 20 MB RuoYi TableDataInfo, and what the `ruoyi` dialect answers for it: the rest of the object.
TABLE="/system/api/table?kb=20480"
curl -fs "http://127.0.0.1:$UP/api/table?kb=20480" -o "$WORK/table.env" || { echo "spool: no table"; exit 1; }
python3 -c 'import json, sys; d = open(sys.argv[1], "rb").read(); i = d.index(b",\"code\":200"); open(sys.argv[2], "wb").write(d[:i] + b"}")' \
  "$WORK/table.env" "$WORK/table.data"

# start_peel NAME ARGS...: a gateway on fresh ports; sets GW, ADM and PEEL_PID.
ROUTES="$WORK/routes.json"
printf '{"routes": [{"prefix": "/system/", "upstream": "default", "dialect": "ruoyi"}, {"prefix": "/", "upstream": "default"}]}\n' >"$ROUTES"
start_peel() {
  local name=$1; shift
  GW=$(free_port); ADM=$(free_port)
  PEEL_CONFIG="$ROUTES" "$PEEL" --upstream "http://127.0.0.1:$UP" --listen 127.0.0.1:$GW --admin-listen 127.0.0.1:$ADM "$@" \
    >"$WORK/$name.log" 2>"$WORK/$name.err" & PEEL_PID=$!
  pids+=($PEEL_PID)
  wait_listening $GW $PEEL_PID
}
metric() { curl -fs "http://127.0.0.1:$ADM/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
hwm_kb() { awk '/^VmHWM/ { print $2 }' "/proc/$1/status"; }

# 1. Eight concurrent 20 MB answers to one address, default limits (the spool in its own folder here,
# so what it leaves can be looked at).
mkdir -p "$WORK/spool"
start_peel main --spool-dir "$WORK/spool"
# eight_at_once NAME PATH EXPECTED: eight concurrent GETs of PATH; sets codes (their statuses) and
# same (how many are byte for byte EXPECTED).
eight_at_once() {
  local cpids=() i
  for i in 1 2 3 4 5 6 7 8; do
    timeout 60 curl -s -o "$WORK/$1.out$i" -w '%{http_code}\n' "http://127.0.0.1:$GW$2" >"$WORK/$1.code$i" & cpids+=($!)
  done
  wait "${cpids[@]}"
  codes=$(cat "$WORK/$1".code? | tr '\n' ' ' | sed 's/ $//')
  same=0; for i in 1 2 3 4 5 6 7 8; do cmp -s "$WORK/$1.out$i" "$3" && same=$((same+1)); done
}
eight_at_once big "$BIG" "$WORK/big.data"
check "eight concurrent 20 MB answers, all 200" "200 200 200 200 200 200 200 200" "$codes"
check "each of them byte for byte the payload" 8 "$same"
check_le "peak resident memory (VmHWM, KiB) under 96 MiB" 98303 "$(hwm_kb $PEEL_PID)"
check "spooled bytes back to 0 once written" 0 "$(metric peel_spooled_bytes)"
check "spool files back to 0" 0 "$(metric peel_spooled_files)"
check "/status shows the spool" 1 "$(curl -fs "http://127.0.0.1:$ADM/status" | grep -c '"spooled":{"bytes":0,"files":0')"
check "HEAD of a spooled answer: GET's length" 20971582 \
  "$(curl -s -I "http://127.0.0.1:$GW$BIG" | tr -d '\r' | awk 'tolower($1) == "content-length:" { print $2 }')"
gz=$(curl -s --compressed -o "$WORK/gz.out" -w '%{http_code}' -H 'Accept-Encoding: gzip' "http://127.0.0.1:$GW$SMALL")
check "a compressed spooled answer decodes to the payload" "200 same" "$gz $(cmp -s "$WORK/gz.out" "$WORK/small.data" && echo same)"
# Compressed while it is sent from the file (chunked: its length is known only at its end), in
# gzip and in Brotli, each decoding to the payload; the RuoYi list's rest of the object too.
for coding in gzip br; do
  got=$(curl -s -D "$WORK/$coding.head" -o "$WORK/$coding.raw" -w '%{http_code}' -H "Accept-Encoding: $coding" "http://127.0.0.1:$GW$BIG")
  enc=$(tr -d '\r' <"$WORK/$coding.head" | awk 'tolower($1) == "content-encoding:" { print $2 }')
  te=$(tr -d '\r' <"$WORK/$coding.head" | awk 'tolower($1) == "transfer-encoding:" { print $2 }')
  curl -s --compressed -o "$WORK/$coding.out" -H "Accept-Encoding: $coding" "http://127.0.0.1:$GW$BIG"
  check "a 20 MB spooled answer in $coding: 200, $coding, chunked, smaller, decoding to the payload" "200 $coding chunked smaller same" \
    "$got $enc $te $([ "$(stat -c %s "$WORK/$coding.raw")" -lt 5000000 ] && echo smaller) $(cmp -s "$WORK/$coding.out" "$WORK/big.data" && echo same)"
done
curl -s -o "$WORK/table.gzraw" -H 'Accept-Encoding: gzip' "http://127.0.0.1:$GW$TABLE"
check "the RuoYi list's rest of the object, gzipped from the file, decodes to it" same \
  "$(python3 -c 'import gzip, sys; sys.stdout.buffer.write(gzip.decompress(open(sys.argv[1], "rb").read()))' "$WORK/table.gzraw" | cmp -s - "$WORK/table.data" && echo same)"
sleep 0.5
check "... and its access-log line counts the compressed bytes" "$(stat -c %s "$WORK/table.gzraw")" \
  "$(grep '"path":"/system/api/table"' "$WORK/main.log" | tail -1 | sed 's/.*"bytes":\([0-9]*\).*/\1/')"

hgz=$(curl -s -I -H 'Accept-Encoding: gzip' "http://127.0.0.1:$GW$BIG" | tr -d '\r' | tr 'A-Z' 'a-z')
check "HEAD of a spooled answer that GET sends gzipped: 200, gzip, chunked, nothing compressed for it" "200 gzip chunked" \
  "$(echo "$hgz" | awk '/^http/ { s = $2 } /^content-encoding:/ { e = $2 } /^transfer-encoding:/ { t = $2 } END { print s, e, t }')"

# 1a. Eight concurrent 20 MB RuoYi lists to one address: the rest of the object is sent from the
# spool file (its kept members' ranges), never built in memory, so all are served.
eight_at_once table "$TABLE" "$WORK/table.data"
check "eight concurrent 20 MB RuoYi lists, all 200" "200 200 200 200 200 200 200 200" "$codes"
check "each of them byte for byte the rest of the object" 8 "$same"
check_le "peak resident memory (VmHWM, KiB) still under 96 MiB" 98303 "$(hwm_kb $PEEL_PID)"
check "spooled bytes back to 0" 0 "$(metric peel_spooled_bytes)"

# 1a'. A memory budget with no room for a Brotli encoder (3 MiB at quality 3): the answer goes as
# it is, from its file, and still says it varies by Accept-Encoding (others get it compressed).
start_peel tight --spool-dir "$WORK/spool" --max-buffered 2097152 --max-body 1048576
tight=$(curl -s -D "$WORK/tight.head" -o "$WORK/tight.out" -w '%{http_code}' -H 'Accept-Encoding: br' "http://127.0.0.1:$GW$BIG")
check "no memory for the encoder: 200 as it is, byte for byte, Vary: Accept-Encoding, no Content-Encoding" "200 same vary none" \
  "$tight $(cmp -s "$WORK/tight.out" "$WORK/big.data" && echo same) $(grep -qi '^vary:.*accept-encoding' "$WORK/tight.head" && echo vary) $(grep -qi '^content-encoding' "$WORK/tight.head" && echo coded || echo none)"

# 1b. Fifty concurrent 9 MB uploads (PUT) from one address, default limits, on a fresh gateway:
# each body goes to a spool file as it arrives and upstream from it (curl's read callback), all
# 200, the upstream receiving every byte (length and FNV-1a checksum), peak memory under 96 MiB.
start_peel uploads --spool-dir "$WORK/spool"
head -c 9000000 /dev/urandom >"$WORK/upload.bin"
sum=$(python3 -c 'import sys
h = 0xcbf29ce484222325
for b in open(sys.argv[1], "rb").read(): h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
print("%016x" % h)' "$WORK/upload.bin")
cpids=()
for i in $(seq 1 50); do
  timeout 120 curl -s -X PUT --data-binary @"$WORK/upload.bin" -o "$WORK/up$i" -w '%{http_code}\n' \
    "http://127.0.0.1:$GW/api/echo?body=none" >"$WORK/upcode$i" & cpids+=($!)
done
wait "${cpids[@]}"
check "fifty concurrent 9 MB uploads from one address, all 200" 50 "$(cat "$WORK"/upcode* | grep -c '^200$')"
check "... each arriving whole at the upstream (length and checksum)" 50 \
  "$(grep -l "\"body_length\":9000000,\"body_fnv1a\":\"$sum\"" "$WORK"/up[0-9]* | wc -l)"
check_le "... peak resident memory (VmHWM, KiB) under 96 MiB" 98303 "$(hwm_kb $PEEL_PID)"
check "... spooled bytes back to 0" 0 "$(metric peel_spooled_bytes)"
# 1c. The same uploads sent chunked (no length known at the head): each goes to its file once its
# de-chunked bytes pass the threshold, and is sent upstream with the length counted there.
start_peel chunked --spool-dir "$WORK/spool"
cpids=()
for i in $(seq 1 50); do
  timeout 120 curl -s -X PUT -H 'Transfer-Encoding: chunked' --data-binary @"$WORK/upload.bin" -o "$WORK/ch$i" \
    -w '%{http_code}\n' "http://127.0.0.1:$GW/api/echo?body=none" >"$WORK/chcode$i" & cpids+=($!)
done
wait "${cpids[@]}"
check "fifty concurrent chunked 9 MB uploads from one address, all 200" 50 "$(cat "$WORK"/chcode* | grep -c '^200$')"
check "... each arriving whole at the upstream (length and checksum)" 50 \
  "$(grep -l "\"body_length\":9000000,\"body_fnv1a\":\"$sum\"" "$WORK"/ch[0-9]* | wc -l)"
check_le "... peak resident memory (VmHWM, KiB) under 96 MiB" 98303 "$(hwm_kb $PEEL_PID)"
check "... spooled bytes back to 0" 0 "$(metric peel_spooled_bytes)"
# A group whose first endpoint refuses connections: two PUTs, so one of them is tried there first
# and fails over; both reach the demo with every byte, read again from the start of the file.
DEAD=$(free_port)
printf '{"upstreams": {"app": {"endpoints": ["http://127.0.0.1:%s", "http://127.0.0.1:%s"]}},\n "routes": [{"prefix": "/", "upstream": "app"}]}\n' \
  "$DEAD" "$UP" >"$WORK/retry.json"
GW=$(free_port); ADM=$(free_port)
PEEL_CONFIG="$WORK/retry.json" "$PEEL" --listen 127.0.0.1:$GW --admin-listen 127.0.0.1:$ADM --spool-dir "$WORK/spool" \
  >"$WORK/retry.log" 2>"$WORK/retry.err" & PEEL_PID=$!
pids+=($PEEL_PID)
wait_listening $GW $PEEL_PID
retried=""
for i in 1 2; do
  retried+="$(curl -s -X PUT --data-binary @"$WORK/upload.bin" -o "$WORK/retry$i" -w '%{http_code}' "http://127.0.0.1:$GW/api/echo?body=none")"
  retried+="$(grep -c "\"body_length\":9000000,\"body_fnv1a\":\"$sum\"" "$WORK/retry$i") "
done
check "spooled PUTs through a group whose first endpoint is dead: each 200 with every byte" "2001 2001" "${retried% }"

# 2. A slow reader holds its answer in a spool file: the file has no name, so kill -9 leaves nothing.
curl -s --limit-rate 2M -o /dev/null "http://127.0.0.1:$GW$BIG" & pids+=($!)
for _ in $(seq 1 100); do [ "$(metric peel_spooled_files)" = 1 ] && break; sleep 0.05; done
check "a slow reader's answer is held in one spool file" 1 "$(metric peel_spooled_files)"
check "the spool folder shows no file while it is held" 0 "$(ls -A "$WORK/spool" | wc -l)"
kill -9 $PEEL_PID; wait $PEEL_PID 2>/dev/null
check "a killed Peel leaves no file" 0 "$(ls -A "$WORK/spool" | wc -l)"

# 3. A disk budget smaller than the answer: 503 server-busy, counted; smaller answers still whole.
# Two client addresses (named by a trusted proxy): one slow reader holds 20 MB of a 30 MiB budget,
# so the other's 20 MB answer passes the whole budget, not its own share.
start_peel budget --spool-dir "$WORK/spool" --max-spooled 30MiB --max-spooled-per-client 30MiB --trusted-proxies 127.0.0.1/32
curl -s --limit-rate 1M -H 'X-Forwarded-For: 192.0.2.1' -o /dev/null "http://127.0.0.1:$GW$BIG" & pids+=($!)
for _ in $(seq 1 100); do [ "$(metric peel_spooled_files)" = 1 ] && break; sleep 0.05; done
check "an answer past --max-spooled: 503" 503 \
  "$(curl -s -H 'X-Forwarded-For: 192.0.2.2' -o "$WORK/refused" -w '%{http_code}' "http://127.0.0.1:$GW$BIG")"
check "... as server-busy" 1 "$(grep -c 'server-busy' "$WORK/refused")"
check "... counted as max_spooled" 1 "$(metric 'peel_refusals_total{bound="max_spooled"}')"
start_peel share --spool-dir "$WORK/spool" --max-spooled 64MiB --max-spooled-per-client 8MiB
check "an answer past --max-spooled-per-client: 503" 503 "$(curl -s -o "$WORK/refused" -w '%{http_code}' "http://127.0.0.1:$GW$BIG")"
check "... counted as max_spooled_per_client" 1 "$(metric 'peel_refusals_total{bound="max_spooled_per_client"}')"
check "an answer within it: 200" 200 "$(curl -s -o "$WORK/small.out" -w '%{http_code}' "http://127.0.0.1:$GW$SMALL")"
check "... byte for byte" same "$(cmp -s "$WORK/small.out" "$WORK/small.data" && echo same)"

# 4. A write the file system refuses (a file-size limit of 8 MiB: EFBIG, as a full disk gives
# ENOSPC): that call alone gets 503, counted and logged; the next small one is whole.
GW=$(free_port); ADM=$(free_port)
(ulimit -f 8192; exec "$PEEL" --upstream "http://127.0.0.1:$UP" --listen 127.0.0.1:$GW --admin-listen 127.0.0.1:$ADM \
  --spool-dir "$WORK/spool") >"$WORK/fsize.log" 2>"$WORK/fsize.err" & PEEL_PID=$!
pids+=($PEEL_PID)
wait_listening $GW $PEEL_PID
check "a refused spool write: 503" 503 "$(curl -s -o "$WORK/refused2" -w '%{http_code}' "http://127.0.0.1:$GW$BIG")"
check "... as server-busy, no byte of the answer" 0 "$(grep -c '"id":' "$WORK/refused2")"
check "... counted as spool_write" 1 "$(metric 'peel_refusals_total{bound="spool_write"}')"
wait_log "$WORK/fsize.err" spool_write_failed 1
check "... and logged with the reason" 1 "$(grep spool_write_failed "$WORK/fsize.err" | grep -c "File too large")"
check "the next answer within the limit: 200, byte for byte" "200 same" \
  "$(curl -s -o "$WORK/small2.out" -w '%{http_code}' "http://127.0.0.1:$GW$SMALL") $(cmp -s "$WORK/small2.out" "$WORK/small.data" && echo same)"
check "Peel is still there" 0 "$(kill -0 $PEEL_PID; echo $?)"

# 5. A spool directory that is missing fails the start with one line naming it; one that goes
# away later turns /readyz 503 within 5 s, and 200 again once it is back.
"$PEEL" --upstream "http://127.0.0.1:$UP" --listen 127.0.0.1:$(free_port) --spool-dir "$WORK/absent" >/dev/null 2>"$WORK/absent.err"
check "a missing --spool-dir: exit 2" 2 "$?"
check "... one line naming --spool-dir and the path" "1 1" "$(wc -l <"$WORK/absent.err" | tr -d ' ') $(grep -c -- "--spool-dir: $WORK/absent" "$WORK/absent.err")"
mkdir -p "$WORK/spool2"
start_peel ready --spool-dir "$WORK/spool2"
ready() { curl -s -o "$WORK/readyz" -w '%{http_code}' "http://127.0.0.1:$ADM/readyz"; }
for _ in $(seq 1 100); do [ "$(ready)" = 200 ] && break; sleep 0.05; done
check "/readyz 200 with the spool writable" 200 "$(ready)"
mv "$WORK/spool2" "$WORK/spool2.gone"
for _ in $(seq 1 70); do [ "$(ready)" = 503 ] && break; sleep 0.1; done
check "/readyz 503 within 5 s of the spool directory going" 503 "$(ready)"
check "... naming the spool" 1 "$(grep -c spool_unwritable "$WORK/readyz")"
mv "$WORK/spool2.gone" "$WORK/spool2"
for _ in $(seq 1 70); do [ "$(ready)" = 200 ] && break; sleep 0.1; done
check "/readyz 200 again once it is back" 200 "$(ready)"

echo "spool: $pass passed, $fail failed"
[ "$fail" -eq 0 ] || { echo "--- peel stderr"; tail -n 5 "$WORK"/*.err; }
exit $(( fail > 0 ))
