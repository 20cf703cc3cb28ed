#!/usr/bin/env bash
# Peel against the gateways people would use instead, side by side on loopback (issue 7).
# Starts an nginx upstream, nginx proxy_pass, nginx+Lua unwrap and the Peel release binary on free
# ports with private configs in a temp dir, verifies each answers the right bytes, runs interleaved
# wrk rounds plus one ab run per target, prints a markdown table and appends it to RESULTS.md.
#
# Knobs (environment): PEEL (binary; default: the release build), ROUNDS (3), DURATION (5 s per
# round), CONNECTIONS (50), PATHS ("small big"), TARGETS ("direct nginx lua peel1 peel2"),
# AB_N (20000), AB_SECONDS (30, cap per ab run), RESULTS (file to append to; "-" = don't), NOTE,
# COMPRESS (gzip: clients ask for gzip and nginx has `gzip on`, the compressed /big run of issue 12);
# STORE=redis adds the target "peelS" (the offline cache on a local redis-server, issue 21);
# an A/B target "peelB" takes PEEL_B, PEEL_B_ENV, PEEL_B_LABEL and PEEL_B_WORKERS (1; 0 = default).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

# policy-rc.d-free containers may try to start the system nginx; it is not used and is left alone.
"$(dirname "$0")/../scripts/install-deps.sh" nginx libnginx-mod-http-lua lua-cjson wrk redis-server

source "$root/Benchmarks/peel-binary.sh"
exec python3 "$root/Benchmarks/harness.py"
