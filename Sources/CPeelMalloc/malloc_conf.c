#include "CPeelMalloc.h"

// jemalloc reads this string at start, before MALLOC_CONF (which still overrides it).
// Measured with 100 concurrent 9 MB uploads (scripts/reliability.sh): with jemalloc's
// defaults (10 s decay, no background thread) purging only happens while allocating, so an idle
// process stayed at 84 MB after the spike; with a background thread and 1 s dirty decay (muzzy
// pages returned at once) it was back to 33 MB within 1 s, 31 MB after 5 s, at the same peak.
//
// The thread cache reaches libcurl's per-transfer download buffer (CURLOPT_BUFFERSIZE 256 KiB plus
// one byte: the 320 KiB size class, UpstreamOptions.bufferSize) and holds at least 64 of each small
// size, where the default (20 for the 4 KiB request buffer) overflows under 50 concurrent calls.
// Both were taken per call from the arena: callgrind /small 16.0k -> 12.4k instructions in jemalloc
// per call (Benchmarks/RESULTS.md, session 14).
const char *malloc_conf = "background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0,"
                          "tcache_max:327680,tcache_nslots_small_min:64";
