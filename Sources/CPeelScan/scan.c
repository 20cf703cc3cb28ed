// Run-time kernel choice: the CPU is asked once, and the answer cached.
#include "scan_common.h"

#if PEEL_SCAN_X86
bool peel_scan_avx2(const uint8_t *base, size_t n, size_t start, size_t max_depth, uint64_t *stack,
                    peel_scan_member_fn member, void *context);
bool peel_scan_avx512(const uint8_t *base, size_t n, size_t start, size_t max_depth, uint64_t *stack,
                      peel_scan_member_fn member, void *context);

/// What the CPU and OS support, as PEEL_SCAN_* bits; __builtin_cpu_supports also checks that the
/// OS saves the wider registers (XCR0).
static unsigned peel_detect(void) {
    __builtin_cpu_init();
    unsigned kernels = 0;
    bool base = __builtin_cpu_supports("popcnt") && __builtin_cpu_supports("bmi") && __builtin_cpu_supports("pclmul");
    if (base && __builtin_cpu_supports("avx2")) kernels |= PEEL_SCAN_AVX2;
    if (base && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vbmi2")) kernels |= PEEL_SCAN_AVX512;
    return kernels;
}
#endif

unsigned peel_scan_kernels(void) {
#if PEEL_SCAN_X86
    // 0 means "not asked yet"; bit 31 marks an answer, so a CPU with no wide kernel is asked once too.
    static unsigned cached = 0;
    unsigned known = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (known == 0) {
        known = peel_detect() | 0x80000000u;
        __atomic_store_n(&cached, known, __ATOMIC_RELAXED);
    }
    return known & ~0x80000000u;
#else
    return 0;
#endif
}

bool peel_scan(unsigned kernel, const uint8_t *base, size_t n, size_t start, size_t max_depth, uint64_t *stack,
               peel_scan_member_fn member, void *context) {
#if PEEL_SCAN_X86
    // A kernel the CPU lacks would die on an illegal instruction: refuse it instead.
    if ((peel_scan_kernels() & kernel) != kernel || start >= n) return false;
    if (kernel == PEEL_SCAN_AVX512) return peel_scan_avx512(base, n, start, max_depth, stack, member, context);
    if (kernel == PEEL_SCAN_AVX2) return peel_scan_avx2(base, n, start, max_depth, stack, member, context);
#else
    (void)kernel, (void)base, (void)n, (void)start, (void)max_depth, (void)stack, (void)member, (void)context;
#endif
    return false;
}
