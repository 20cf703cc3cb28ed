// The AVX-512BW kernel: one 64-byte block per register, compares straight into mask registers.
// Only this file's functions carry the target features; the rest of the binary stays baseline x86-64.
#include "scan_common.h"

#if PEEL_SCAN_X86
#include <immintrin.h>

#define PEEL_TARGET __attribute__((target("avx512f,avx512bw,avx512vbmi2,bmi,popcnt,pclmul")))
#define K(name) name##_avx512

PEEL_TARGET PEEL_INLINE __m512i K(splat)(uint8_t c) {
    return _mm512_set1_epi8((char)c);
}

PEEL_TARGET PEEL_INLINE void K(masks)(const uint8_t *p, peel_masks *m) {
    __m512i v = _mm512_loadu_si512((const void *)p);
    // '{' and '[' differ only in bit 0x20, as do '}' and ']'.
    __m512i folded = _mm512_or_si512(v, K(splat)(0x20));
    m->quote = _mm512_cmpeq_epi8_mask(v, K(splat)('"'));
    m->backslash = _mm512_cmpeq_epi8_mask(v, K(splat)('\\'));
    m->open = _mm512_cmpeq_epi8_mask(folded, K(splat)('{'));
    m->close = _mm512_cmpeq_epi8_mask(folded, K(splat)('}'));
    m->separator = _mm512_cmpeq_epi8_mask(v, K(splat)(':')) | _mm512_cmpeq_epi8_mask(v, K(splat)(','));
    m->space = _mm512_cmpeq_epi8_mask(v, K(splat)(' '));
    m->control = _mm512_cmplt_epu8_mask(v, K(splat)(0x20));
    m->high = _mm512_movepi8_mask(v);
}

PEEL_TARGET PEEL_INLINE uint64_t K(eq)(const uint8_t *p, uint8_t c) {
    return _mm512_cmpeq_epi8_mask(_mm512_loadu_si512((const void *)p), K(splat)(c));
}

PEEL_TARGET PEEL_INLINE uint64_t K(hex)(const uint8_t *p) {
    __m512i v = _mm512_loadu_si512((const void *)p);
    __m512i lower = _mm512_or_si512(v, K(splat)(0x20));
    return _mm512_cmplt_epu8_mask(_mm512_sub_epi8(v, K(splat)('0')), K(splat)(10)) |
           _mm512_cmplt_epu8_mask(_mm512_sub_epi8(lower, K(splat)('a')), K(splat)(6));
}

PEEL_TARGET PEEL_INLINE uint64_t K(escapable)(const uint8_t *p) {
    // One bit per high nibble (2, 5, 6, 7), set in the low-nibble table for the bytes allowed after
    // a backslash in that column: " / (0x2_), \ (0x5_), b f n (0x6_), r t u (0x7_).
    const __m512i low_table = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 0, 0x0D, 0, 0x08, 0x08, 0x04, 0, 0, 0, 0, 0, 0x02, 0,
                                                                   0x04, 0x01));
    const __m512i high_table =
        _mm512_broadcast_i32x4(_mm_setr_epi8(0, 0, 0x01, 0, 0, 0x02, 0x04, 0x08, 0, 0, 0, 0, 0, 0, 0, 0));
    __m512i v = _mm512_loadu_si512((const void *)p);
    __m512i nibble = K(splat)(0x0F);
    __m512i low = _mm512_shuffle_epi8(low_table, _mm512_and_si512(v, nibble));
    __m512i high = _mm512_shuffle_epi8(high_table, _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble));
    return _mm512_test_epi8_mask(low, high);
}

PEEL_TARGET PEEL_INLINE uint64_t K(rare_space)(const uint8_t *p) {
    __m512i v = _mm512_loadu_si512((const void *)p);
    return _mm512_cmpeq_epi8_mask(v, K(splat)('\t')) | _mm512_cmpeq_epi8_mask(v, K(splat)('\n')) |
           _mm512_cmpeq_epi8_mask(v, K(splat)('\r'));
}

PEEL_TARGET PEEL_INLINE uint64_t K(prefix_xor)(uint64_t bits) {
    // Carry-less multiplication by all ones: bit i of the product is the XOR of bits 0...i.
    __m128i product = _mm_clmulepi64_si128(_mm_set_epi64x(0, (long long)bits), _mm_set1_epi8((char)0xFF), 0);
    return (uint64_t)_mm_cvtsi128_si64(product);
}

PEEL_TARGET PEEL_INLINE void K(flatten)(uint64_t bits, uint16_t offset, uint16_t *out) {
    // VBMI2 packs the selected byte indexes together without a loop (and without a branch that
    // mispredicts whenever the count per block changes), then they are widened and offset.
    const __m512i indexes = _mm512_set_epi8(63, 62, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49, 48, 47, 46, 45, 44,
                                            43, 42, 41, 40, 39, 38, 37, 36, 35, 34, 33, 32, 31, 30, 29, 28, 27, 26, 25, 24,
                                            23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    __m512i packed = _mm512_maskz_compress_epi8(bits, indexes);
    __m512i add = _mm512_set1_epi16((short)offset);
    _mm512_storeu_si512((void *)out, _mm512_add_epi16(_mm512_cvtepu8_epi16(_mm512_castsi512_si256(packed)), add));
    if (bits >> 32 && __builtin_popcountll(bits) > 32) {
        _mm512_storeu_si512((void *)(out + 32),
                            _mm512_add_epi16(_mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(packed, 1)), add));
    }
}

#include "scan_utf8.h"

PEEL_TARGET static bool K(utf8_ok)(const uint8_t *previous, const uint8_t *p) {
    __m512i v = _mm512_loadu_si512((const void *)p);
    __m512i before = previous ? _mm512_loadu_si512((const void *)previous) : _mm512_setzero_si512();
    // The block moved up one, two and three bytes, the previous block's last bytes shifted in:
    // valignq brings each 16-byte lane's predecessor beside it, then palignr works within lanes.
    __m512i lanes = _mm512_alignr_epi64(v, before, 6);
    __m512i prev1 = _mm512_alignr_epi8(v, lanes, 15);
    __m512i prev2 = _mm512_alignr_epi8(v, lanes, 14);
    __m512i prev3 = _mm512_alignr_epi8(v, lanes, 13);
    __m512i nibble = K(splat)(0x0F);
    const __m512i first_high = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)peel_utf8_first_high));
    const __m512i first_low = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)peel_utf8_first_low));
    const __m512i second_high = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)peel_utf8_second_high));
    __m512i errors = _mm512_and_si512(
        _mm512_and_si512(_mm512_shuffle_epi8(first_high, _mm512_and_si512(_mm512_srli_epi16(prev1, 4), nibble)),
                         _mm512_shuffle_epi8(first_low, _mm512_and_si512(prev1, nibble))),
        _mm512_shuffle_epi8(second_high, _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble)));
    // Two continuation bytes in a row are right exactly where a 3- or 4-byte sequence needs them.
    uint64_t needs_continuation = _mm512_cmpge_epu8_mask(prev2, K(splat)(0xE0)) | _mm512_cmpge_epu8_mask(prev3, K(splat)(0xF0));
    uint64_t two_continuations = _mm512_movepi8_mask(errors);
    uint64_t other = _mm512_test_epi8_mask(errors, K(splat)(0x7F));
    return (other | (two_continuations ^ needs_continuation)) == 0;
}

// Defines peel_scan_avx512.
#include "scan_kernel.h"

#endif
