// The AVX2 kernel: a 64-byte block is two 32-byte registers, each compare turned into bits by movemask.
// Only this file's functions carry the target features; the rest of the binary stays baseline x86-64.
#include "scan_common.h"

#if PEEL_SCAN_X86
#include <immintrin.h>

#define PEEL_TARGET __attribute__((target("avx2,bmi,popcnt,pclmul")))
#define K(name) name##_avx2

PEEL_TARGET PEEL_INLINE __m256i K(splat)(uint8_t c) {
    return _mm256_set1_epi8((char)c);
}

/// The 64 movemask bits of a compare done on both halves.
PEEL_TARGET PEEL_INLINE uint64_t K(bits)(__m256i low, __m256i high) {
    return (uint64_t)(uint32_t)_mm256_movemask_epi8(low) | (uint64_t)(uint32_t)_mm256_movemask_epi8(high) << 32;
}

/// Bytes at most `limit` (unsigned), as 0xFF lanes.
PEEL_TARGET PEEL_INLINE __m256i K(at_most)(__m256i v, uint8_t limit) {
    return _mm256_cmpeq_epi8(_mm256_min_epu8(v, K(splat)(limit)), v);
}

PEEL_TARGET PEEL_INLINE void K(masks)(const uint8_t *p, peel_masks *m) {
    __m256i a = _mm256_loadu_si256((const __m256i *)p);
    __m256i b = _mm256_loadu_si256((const __m256i *)(p + 32));
    // '{' and '[' differ only in bit 0x20, as do '}' and ']'.
    __m256i fa = _mm256_or_si256(a, K(splat)(0x20));
    __m256i fb = _mm256_or_si256(b, K(splat)(0x20));
#define EQ(x, c) _mm256_cmpeq_epi8((x), K(splat)(c))
    m->quote = K(bits)(EQ(a, '"'), EQ(b, '"'));
    m->backslash = K(bits)(EQ(a, '\\'), EQ(b, '\\'));
    m->open = K(bits)(EQ(fa, '{'), EQ(fb, '{'));
    m->close = K(bits)(EQ(fa, '}'), EQ(fb, '}'));
    m->separator = K(bits)(_mm256_or_si256(EQ(a, ':'), EQ(a, ',')), _mm256_or_si256(EQ(b, ':'), EQ(b, ',')));
    m->space = K(bits)(EQ(a, ' '), EQ(b, ' '));
#undef EQ
    m->control = K(bits)(K(at_most)(a, 0x1F), K(at_most)(b, 0x1F));
    m->high = K(bits)(a, b);
}

PEEL_TARGET PEEL_INLINE uint64_t K(eq)(const uint8_t *p, uint8_t c) {
    __m256i a = _mm256_loadu_si256((const __m256i *)p);
    __m256i b = _mm256_loadu_si256((const __m256i *)(p + 32));
    return K(bits)(_mm256_cmpeq_epi8(a, K(splat)(c)), _mm256_cmpeq_epi8(b, K(splat)(c)));
}

/// 0xFF lanes for the hex digits of v.
PEEL_TARGET PEEL_INLINE __m256i K(hex_lanes)(__m256i v) {
    __m256i digit = K(at_most)(_mm256_sub_epi8(v, K(splat)('0')), 9);
    __m256i letter = K(at_most)(_mm256_sub_epi8(_mm256_or_si256(v, K(splat)(0x20)), K(splat)('a')), 5);
    return _mm256_or_si256(digit, letter);
}

PEEL_TARGET PEEL_INLINE uint64_t K(hex)(const uint8_t *p) {
    return K(bits)(K(hex_lanes)(_mm256_loadu_si256((const __m256i *)p)),
                   K(hex_lanes)(_mm256_loadu_si256((const __m256i *)(p + 32))));
}

/// 0xFF lanes for the bytes allowed after a backslash (see the AVX-512 kernel for the tables).
PEEL_TARGET PEEL_INLINE __m256i K(escapable_lanes)(__m256i v) {
    const __m256i low_table = _mm256_setr_epi8(0, 0, 0x0D, 0, 0x08, 0x08, 0x04, 0, 0, 0, 0, 0, 0x02, 0, 0x04, 0x01, 0, 0,
                                               0x0D, 0, 0x08, 0x08, 0x04, 0, 0, 0, 0, 0, 0x02, 0, 0x04, 0x01);
    const __m256i high_table = _mm256_setr_epi8(0, 0, 0x01, 0, 0, 0x02, 0x04, 0x08, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0, 0,
                                                0x02, 0x04, 0x08, 0, 0, 0, 0, 0, 0, 0, 0);
    __m256i nibble = K(splat)(0x0F);
    __m256i low = _mm256_shuffle_epi8(low_table, _mm256_and_si256(v, nibble));
    __m256i high = _mm256_shuffle_epi8(high_table, _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble));
    return _mm256_xor_si256(_mm256_cmpeq_epi8(_mm256_and_si256(low, high), _mm256_setzero_si256()), K(splat)(0xFF));
}

PEEL_TARGET PEEL_INLINE uint64_t K(escapable)(const uint8_t *p) {
    return K(bits)(K(escapable_lanes)(_mm256_loadu_si256((const __m256i *)p)),
                   K(escapable_lanes)(_mm256_loadu_si256((const __m256i *)(p + 32))));
}

PEEL_TARGET PEEL_INLINE uint64_t K(rare_space)(const uint8_t *p) {
    __m256i a = _mm256_loadu_si256((const __m256i *)p);
    __m256i b = _mm256_loadu_si256((const __m256i *)(p + 32));
#define WS(x) \
    _mm256_or_si256(_mm256_or_si256(_mm256_cmpeq_epi8((x), K(splat)('\t')), _mm256_cmpeq_epi8((x), K(splat)('\n'))), \
                    _mm256_cmpeq_epi8((x), K(splat)('\r')))
    uint64_t bits = K(bits)(WS(a), WS(b));
#undef WS
    return bits;
}

PEEL_TARGET PEEL_INLINE uint64_t K(prefix_xor)(uint64_t bits) {
    // Carry-less multiplication by all ones: bit i of the product is the XOR of bits 0...i.
    __m128i product = _mm_clmulepi64_si128(_mm_set_epi64x(0, (long long)bits), _mm_set1_epi8((char)0xFF), 0);
    return (uint64_t)_mm_cvtsi128_si64(product);
}

PEEL_TARGET PEEL_INLINE void K(flatten)(uint64_t bits, uint16_t offset, uint16_t *out) {
    // Eight at a time without a test per position (the caller's buffer has room for the overshoot);
    // most blocks of compact JSON hold fewer than eight positions.
    int count = __builtin_popcountll(bits);
    for (int j = 0; j < 8; j++) {
        out[j] = (uint16_t)(offset + __builtin_ctzll(bits | (1ull << 63)));
        bits &= bits - 1;
    }
    if (count > 8) {
        for (int j = 8; j < count; j++) {
            out[j] = (uint16_t)(offset + __builtin_ctzll(bits));
            bits &= bits - 1;
        }
    }
}

#include "scan_utf8.h"

/// Nonzero lanes where the 32 bytes v, preceded by `before`, break RFC 3629.
PEEL_TARGET PEEL_INLINE __m256i K(utf8_errors)(__m256i before, __m256i v) {
    // Each lane's predecessor bytes: the other half brought beside it, then palignr within lanes.
    __m256i lanes = _mm256_permute2x128_si256(before, v, 0x21);
    __m256i prev1 = _mm256_alignr_epi8(v, lanes, 15);
    __m256i prev2 = _mm256_alignr_epi8(v, lanes, 14);
    __m256i prev3 = _mm256_alignr_epi8(v, lanes, 13);
    __m256i nibble = K(splat)(0x0F);
    const __m256i first_high = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)peel_utf8_first_high));
    const __m256i first_low = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)peel_utf8_first_low));
    const __m256i second_high = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)peel_utf8_second_high));
    __m256i errors = _mm256_and_si256(
        _mm256_and_si256(_mm256_shuffle_epi8(first_high, _mm256_and_si256(_mm256_srli_epi16(prev1, 4), nibble)),
                         _mm256_shuffle_epi8(first_low, _mm256_and_si256(prev1, nibble))),
        _mm256_shuffle_epi8(second_high, _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble)));
    // Two continuation bytes in a row are right exactly where a 3- or 4-byte sequence needs them:
    // saturating subtraction leaves the high bit set for E0 and up (two back) or F0 and up (three back).
    __m256i third = _mm256_subs_epu8(prev2, K(splat)(0xE0 - 0x80));
    __m256i fourth = _mm256_subs_epu8(prev3, K(splat)(0xF0 - 0x80));
    __m256i needs = _mm256_and_si256(_mm256_or_si256(third, fourth), K(splat)(0x80));
    return _mm256_xor_si256(errors, needs);
}

PEEL_TARGET static bool K(utf8_ok)(const uint8_t *previous, const uint8_t *p) {
    __m256i a = _mm256_loadu_si256((const __m256i *)p);
    __m256i b = _mm256_loadu_si256((const __m256i *)(p + 32));
    __m256i before = previous ? _mm256_loadu_si256((const __m256i *)(previous + 32)) : _mm256_setzero_si256();
    __m256i errors = _mm256_or_si256(K(utf8_errors)(before, a), K(utf8_errors)(a, b));
    return _mm256_testz_si256(errors, errors);
}

// Defines peel_scan_avx2.
#include "scan_kernel.h"

#endif
