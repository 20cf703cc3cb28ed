// Scalar helpers and the block state shared by the kernels; every function is static inline, so
// each kernel's copy is compiled with that kernel's target features.
#ifndef CPEELSCAN_COMMON_H
#define CPEELSCAN_COMMON_H

#include "CPeelScan.h"

#include <string.h>

// The kernels exist on x86-64 only; PEEL_SCAN_NO_X86 builds the portable side there too, so a
// plain compile checks what other architectures get (peel_scan_kernels() == 0).
#if defined(__x86_64__) && !defined(PEEL_SCAN_NO_X86)
#define PEEL_SCAN_X86 1
#endif

#define PEEL_INLINE static inline __attribute__((always_inline))

/// Blocks classified per refill of the position buffer (1 KiB of body).
#define PEEL_CHUNK 16

/// The bitmaps of one 64-byte block, bit i for byte i; `separator` is `,` and `:`.
typedef struct {
    uint64_t quote, backslash, open, close, separator, space, control, high;
} peel_masks;

/// Stage 1's state across 64-byte blocks.
typedef struct {
    const uint8_t *base;
    size_t n;
    /// Start of the next block to classify.
    size_t block;
    /// Start of the block classified last.
    size_t start;
    /// The previous full block, for UTF-8 sequences that straddle the edge; NULL before the first.
    const uint8_t *previous;
    /// All ones when the previous block ended inside a string.
    uint64_t in_string;
    /// 1 when the previous block ended in a backslash that escapes the next byte.
    uint64_t escape_carry;
    /// 1 when the previous block ended inside a scalar (number or literal) run.
    uint64_t run_carry;
    /// 1 when the previous block's last byte ended a token.
    uint64_t end_carry;
    /// Bytes of this block that must be hex digits of a `\u` escape begun in the previous block.
    uint64_t hex_carry;
    /// Whether the previous block held a non-ASCII byte (a sequence may continue here).
    bool utf8_pending;
    /// Set when every block is classified, or stage 1 found the body invalid.
    bool finished;
    /// Set when stage 1 found the body invalid.
    bool failed;
    /// The last partial block, padded with spaces.
    uint8_t tail[64];
} peel_stage1;

/// Bits of the bytes a backslash escapes, given a block's backslash bits; `carry` is 1 when the
/// previous block ended in an unfinished escape, and is updated (simdjson's odd-run subtraction).
PEEL_INLINE uint64_t peel_escaped(uint64_t backslash, uint64_t *carry) {
    if (backslash == 0) {
        uint64_t escaped = *carry;
        *carry = 0;
        return escaped;
    }
    const uint64_t odd = 0xAAAAAAAAAAAAAAAAull;
    uint64_t potential = backslash & ~*carry;
    uint64_t code = (((potential << 1) | odd) - potential) ^ odd;
    uint64_t escaped = code ^ (backslash | *carry);
    *carry = (code & backslash) >> 63;
    return escaped;
}

/// Whether c is JSON whitespace (RFC 8259 §2).
PEEL_INLINE bool peel_is_space(uint8_t c) {
    return c <= 0x20 && ((0x100002600ull >> c) & 1);
}

/// The first index at or after i that is not whitespace.
PEEL_INLINE size_t peel_skip_space(const uint8_t *base, size_t n, size_t i) {
    while (i < n && peel_is_space(base[i])) i++;
    return i;
}

/// Steps over a run of ASCII digits.
PEEL_INLINE size_t peel_digits(const uint8_t *base, size_t n, size_t i) {
    while (i < n && (uint8_t)(base[i] - '0') < 10) i++;
    return i;
}

/// The end of `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?` at i (RFC 8259 §6), or 0 when
/// malformed (a number never ends at 0); `c` is base[i].
PEEL_INLINE size_t peel_number(const uint8_t *base, size_t n, size_t i, uint8_t c) {
    if (c == '-') {
        i++;
        if (i >= n) return 0;
        c = base[i];
    }
    if (c == '0') {
        // A leading zero is the whole integer part; "01" then fails as garbage after a value.
        i++;
    } else if ((uint8_t)(c - '1') < 9) {
        i = peel_digits(base, n, i + 1);
    } else {
        return 0;
    }
    if (i >= n) return i;
    c = base[i];
    if (c == '.') {
        i++;
        if (i >= n || (uint8_t)(base[i] - '0') >= 10) return 0;
        i = peel_digits(base, n, i + 1);
        if (i >= n) return i;
        c = base[i];
    }
    if ((c | 0x20) == 'e') {
        i++;
        if (i < n && (base[i] == '+' || base[i] == '-')) i++;
        if (i >= n || (uint8_t)(base[i] - '0') >= 10) return 0;
        i = peel_digits(base, n, i + 1);
    }
    return i;
}

#if PEEL_SCAN_X86
#include <emmintrin.h>
#endif

/// peel_number without a loop per digit: digit runs are measured with one count of trailing bits
/// over the next 16 bytes, so numbers of varying length do not each mispredict a loop exit.
PEEL_INLINE size_t peel_number_fast(const uint8_t *base, size_t n, size_t i, uint8_t c) {
#if PEEL_SCAN_X86
    if (n - i < 16) return peel_number(base, n, i, c);
    __m128i v = _mm_sub_epi8(_mm_loadu_si128((const __m128i *)(base + i)), _mm_set1_epi8('0'));
    uint32_t digits = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(9)), v));
    // Bit 16 stops every count at the window's end.
    uint32_t stops = ~digits | 0x10000u;
    uint32_t j = c == '-';
    c = base[i + j];
    if (c == '0') {
        j++;
    } else if ((uint8_t)(c - '1') < 9) {
        j += (uint32_t)__builtin_ctz(stops >> j);
        if (j >= 16) goto long_number;
    } else {
        return 0;
    }
    if (base[i + j] == '.') {
        j++;
        if (j >= 16) goto long_number;
        if (!((digits >> j) & 1)) return 0;
        j += (uint32_t)__builtin_ctz(stops >> j);
        if (j >= 16) goto long_number;
    }
    if ((base[i + j] | 0x20) == 'e') {
        j++;
        if (j < 16 && (base[i + j] == '+' || base[i + j] == '-')) j++;
        if (j >= 16) goto long_number;
        if (!((digits >> j) & 1)) return 0;
        j += (uint32_t)__builtin_ctz(stops >> j);
        if (j >= 16) goto long_number;
    }
    return i + j;
long_number:
    // A digit run reached the window's end: the byte loop has the whole number.
    return peel_number(base, n, i, base[i]);
#else
    return peel_number(base, n, i, c);
#endif
}

/// The end of `true`, `false` or `null` at i, whose first byte is c; 0 for anything else.
PEEL_INLINE size_t peel_literal(const uint8_t *base, size_t n, size_t i, uint8_t c) {
    if (n - i < 4) return 0;
    uint32_t word;
    memcpy(&word, base + i, 4);
    // Little-endian words of "true", "fals" and "null".
    if (c == 't') return word == 0x65757274u ? i + 4 : 0;
    if (c == 'n') return word == 0x6C6C756Eu ? i + 4 : 0;
    if (c == 'f') return n - i >= 5 && word == 0x736C6166u && base[i + 4] == 'e' ? i + 5 : 0;
    return 0;
}

/// The index just past the closing quote of a string whose body starts at i, or 0 when it is not
/// closed before n. Stage 2 may ask before stage 1 has reached the end of the body and found an
/// unclosed string there, so this stays within n on its own.
PEEL_INLINE size_t peel_string_end(const uint8_t *base, size_t n, size_t i) {
    while (i < n && base[i] != '"') i += base[i] == '\\' ? 2 : 1;
    return i < n ? i + 1 : 0;
}

#endif
