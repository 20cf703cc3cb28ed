#include "CPeelMalloc.h"

// jemalloc reads this string at start, before MALLOC_CONF (which still overrides it).
// Measured with 100 concurrent 9 MB uploads (scripts/reliability.sh): with jemalloc's
// defaults (10 s decay, no background thread) purging only happens while allocating, so an idle
// process stayed at 84 MB after the spike; with a background thread and 1 s dirty decay (muzzy
// pages returned at once) it was back to 33 MB within 1 s, 31 MB after 5 s, at the same peak.
//
// The thread cache keeps at least 64 of each small size: the default (20 for the 4 KiB request
// buffer) overflows under 50 concurrent calls, and each call then went to the arena. Callgrind
// /small: 2.2k fewer instructions per call; idle RSS after a load +0.2 MB. Extending the
// cache to libcurl's 320 KiB per-transfer buffer (tcache_max) saved 2.3k more but held 8.6 MB that
// never went back at idle, so it is not set (Benchmarks/RESULTS.md, issue 37).
const char *malloc_conf = "background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0,"
                          "tcache_nslots_small_min:64";
