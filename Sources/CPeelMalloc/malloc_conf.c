#include "CPeelMalloc.h"

// jemalloc reads this string at start, before MALLOC_CONF (which still overrides it).
// Measured with 100 concurrent 9 MB uploads (scripts/reliability.sh): with jemalloc's
// defaults (10 s decay, no background thread) purging only happens while allocating, so an idle
// process stayed at 84 MB after the spike; with a background thread and 1 s dirty decay (muzzy
// pages returned at once) it was back to 33 MB within 1 s, 31 MB after 5 s, at the same peak.
const char *malloc_conf = "background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0";
