// The envelope scanner's wide kernels: strict RFC 8259 validation of one buffer with
// AVX2 or AVX-512BW, chosen at run time. Pure computation: no I/O, no allocation, no global state
// beyond the cached CPU check; every byte read is inside [base, base + n).
#ifndef CPEELSCAN_H
#define CPEELSCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/// Kernel bits for peel_scan_kernels() and peel_scan().
enum {
    PEEL_SCAN_AVX2 = 1,
    PEEL_SCAN_AVX512 = 2,
};

/// The kernels this CPU and OS can run (PEEL_SCAN_* bits); 0 off x86-64. Checked once, then cached.
unsigned peel_scan_kernels(void);

/// Called once per member of the top-level object with offsets into the buffer: the name's bytes
/// between its quotes, and the raw value; returning false fails the scan.
typedef bool (*peel_scan_member_fn)(void *context, size_t name_start, size_t name_end, size_t value_start,
                                    size_t value_end);

/// Whether base[start..<n] (start is past a BOM) is one JSON text nested at most max_depth levels.
/// `stack` holds min(max_depth, n) / 64 + 1 zeroed words; with `member`, the top-level value must be
/// an object (the caller checks its first byte) and each of its members is reported. `kernel` must be
/// one bit from peel_scan_kernels(); any other value returns false.
bool peel_scan(unsigned kernel, const uint8_t *base, size_t n, size_t start, size_t max_depth, uint64_t *stack,
               peel_scan_member_fn member, void *context);

#endif
