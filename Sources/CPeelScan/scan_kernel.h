// The two-stage scan, written once and compiled per kernel: scan_avx2.c and scan_avx512.c define
// PEEL_TARGET, K(name) and the block primitives below, then include this file.
//
// Stage 1 classifies 64-byte blocks into bitmaps (strings by prefix-xor of the unescaped quotes;
// escapes, control bytes and UTF-8 checked there) and flattens the positions stage 2 needs into a
// buffer, a chunk of blocks at a time. Stage 2 walks those positions with a container stack.
//
// Positions are the structural bytes outside strings and the first byte of every value, except a
// comma or colon squeezed between a token's last byte and the next token's first (`"a":1,"b"`):
// those are left out, and stage 2 finds them one byte before the token that follows. Compact JSON
// thus costs one position per value and container edge instead of two or three.
//
// Primitives each kernel provides, over the 64 bytes at p:
//   void     K(masks)(const uint8_t *p, peel_masks *m)   the bitmaps every block needs
//   uint64_t K(eq)(const uint8_t *p, uint8_t c)           bytes equal to c
//   uint64_t K(escapable)(const uint8_t *p)               " / \ b f n r t u
//   uint64_t K(hex)(const uint8_t *p)                     0-9 a-f A-F
//   uint64_t K(rare_space)(const uint8_t *p)              tab, line feed, carriage return
//   bool     K(utf8_ok)(const uint8_t *previous, const uint8_t *p)   RFC 3629 over the block
//   uint64_t K(prefix_xor)(uint64_t bits)
//   void     K(flatten)(uint64_t bits, uint16_t offset, uint16_t *out)   offset + each bit's index,
//            in order; may write up to 64 entries past the last

/// Marks the body invalid; classify() then returns no positions.
PEEL_TARGET PEEL_INLINE uint64_t K(fail)(peel_stage1 *s) {
    s->failed = true;
    s->finished = true;
    return 0;
}

/// Checks every escape of the block (RFC 8259 §7): the escaped byte and the four hex digits of
/// `\u`; false when one is malformed. Surrogate escapes, paired or lone, are grammar like any
/// other `\u` (RFC 8259 §7 and §8.2): the strings are passed, never decoded to be judged.
PEEL_TARGET static bool K(escapes)(peel_stage1 *s, const uint8_t *p, uint64_t escaped) {
    uint64_t u = 0;
    if (escaped) {
        u = escaped & K(eq)(p, 'u');
        if (escaped & ~K(escapable)(p)) return false;
    }
    uint64_t need = (u << 1) | (u << 2) | (u << 3) | (u << 4) | s->hex_carry;
    if (need & ~K(hex)(p)) return false;
    s->hex_carry = (u >> 63) | (u >> 62) | (u >> 61) | (u >> 60);
    return true;
}

/// The position bits of the 64 bytes at p, which stand for the body's bytes from s->start.
PEEL_TARGET PEEL_INLINE uint64_t K(classify)(peel_stage1 *s, const uint8_t *p) {
    peel_masks m;
    K(masks)(p, &m);
    uint64_t quote = m.quote;
    if (m.backslash | s->escape_carry | s->hex_carry) {
        uint64_t escaped = peel_escaped(m.backslash, &s->escape_carry);
        quote &= ~escaped;
        if (!K(escapes)(s, p, escaped)) return K(fail)(s);
    }
    uint64_t strings = K(prefix_xor)(quote) ^ s->in_string;
    s->in_string = (uint64_t)((int64_t)strings >> 63);
    uint64_t space = m.space;
    if (m.control | m.high | s->utf8_pending) {
        // Control bytes must be escaped inside strings (RFC 8259 §7); outside they are scalar bytes
        // that no number or literal accepts, except JSON's own whitespace.
        if (m.control & strings) return K(fail)(s);
        if (m.control) space |= K(rare_space)(p);
        if ((m.high | s->utf8_pending) && !K(utf8_ok)(s->previous, p)) return K(fail)(s);
        s->utf8_pending = m.high != 0;
    }
    uint64_t outside = ~strings;
    uint64_t open = m.open & outside;
    uint64_t close = m.close & outside;
    uint64_t separators = m.separator & outside;
    // Bytes of numbers and literals (and of anything else outside strings, which stage 2 refuses).
    uint64_t run = ~(open | close | separators | space | quote | strings);
    uint64_t run_start = run & ~((run << 1) | s->run_carry);
    s->run_carry = run >> 63;
    uint64_t string_open = quote & strings;
    uint64_t ends = (quote & outside) | run | close;
    uint64_t starts = string_open | run_start | open;
    uint64_t after_end = (ends << 1) | s->end_carry;
    s->end_carry = ends >> 63;
    // Bit 63 never qualifies: its next byte is in the next block.
    uint64_t squeezed = separators & after_end & (starts >> 1);
    return open | close | (separators & ~squeezed) | string_open | run_start;
}

/// Classifies the next block; 0 with `finished` at the end of the body or once it is invalid.
PEEL_TARGET PEEL_INLINE uint64_t K(advance)(peel_stage1 *s) {
    if (s->n - s->block >= 64) {
        const uint8_t *p = s->base + s->block;
        s->start = s->block;
        s->block += 64;
        uint64_t bits = K(classify)(s, p);
        s->previous = p;
        return bits;
    }
    if (s->block < s->n) {
        memset(s->tail, 0x20, 64);
        memcpy(s->tail, s->base + s->block, s->n - s->block);
        s->start = s->block;
        s->block = s->n;
        return K(classify)(s, s->tail);
    }
    // An open string, a dangling escape or a `\u` cut short at the end. A UTF-8 sequence cut short
    // at the end needs no check: it is inside an unclosed string or outside strings, invalid either way.
    if (s->in_string || s->escape_carry || s->hex_carry) s->failed = true;
    s->finished = true;
    return 0;
}

/// Classifies up to PEEL_CHUNK blocks into `positions` (offsets from *chunk); returns how many,
/// 0 only at the end of the body or once it is invalid (blocks inside one long string hold none).
PEEL_TARGET __attribute__((noinline)) static size_t K(fill)(peel_stage1 *s, uint16_t *positions, size_t *chunk) {
    size_t count = 0;
    *chunk = s->block;
    for (int b = 0; b < PEEL_CHUNK && !s->finished;) {
        uint64_t bits = K(advance)(s);
        if (count == 0 && bits == 0) {
            // Nothing yet: the chunk starts again after this block, so offsets stay below 2^16.
            *chunk = s->block;
            continue;
        }
        K(flatten)(bits, (uint16_t)(s->start - *chunk), positions + count);
        count += (size_t)__builtin_popcountll(bits);
        b++;
    }
    return count;
}

/// Stage 2: the grammar over the positions, with the same depth stack and top-level member
/// reports as the token scanner.
PEEL_TARGET PEEL_INLINE bool K(walk)(const uint8_t *base, size_t n, size_t start, size_t max_depth, uint64_t *stack,
                                     peel_scan_member_fn member, void *context, const bool members) {
    peel_stage1 s;
    memset(&s, 0, offsetof(peel_stage1, tail));
    s.base = base;
    s.n = n;
    s.block = start;
    uint16_t positions[PEEL_CHUNK * 64 + 64];
    size_t k = 0, count = 0, chunk = 0;
    size_t p = 0;
    uint8_t c = 0;
    size_t depth = 0;
    // Whether the innermost open container is an object.
    bool object = false;
    // Where the value that just ended stops; SIZE_MAX for a string, whose closing quote is not a position.
    size_t end = 0;
    // The top-level member being read, when members are reported; members sit at depth 1, and
    // without a callback no depth is ever reported (one compare on the hot path instead of two).
    size_t name_start = 0, name_end = 0, value_start = 0;
    const size_t report = members ? 1 : SIZE_MAX;

// The next position and its byte; (n, 0) at the end of the body or once stage 1 failed (NUL never
// starts or separates anything, so every check that follows fails on it).
#define NEXT()                                                   \
    do {                                                         \
        if (__builtin_expect(k == count, 0)) {                   \
            count = s.finished ? 0 : K(fill)(&s, positions, &chunk); \
            k = 0;                                               \
            if (count == 0) {                                    \
                p = n;                                           \
                c = 0;                                           \
                break;                                           \
            }                                                    \
        }                                                        \
        p = chunk + positions[k++];                              \
        c = base[p];                                             \
    } while (0)
#define BIT(d) (1ull << (((d) - 1) & 63))
#define WORD(d) stack[((d) - 1) >> 6]

    NEXT();
    if (p >= n) return false;

value:
    if (c == '"') {
        NEXT();
        end = SIZE_MAX;
        // A squeezed comma right before the next position, which is then a value or name.
        if (base[p - 1] == ',') goto squeezed_comma;
        goto after_value;
    }
    if ((uint8_t)(c - '0') < 10 || c == '-') {
        end = peel_number_fast(base, n, p, c);
        if (end == 0) return false;
        goto after_scalar;
    }
    if ((c | 0x20) == '{') {
        // '{' is 0x7B and '[' is 0x5B: they differ only in bit 0x20, and closers are two above.
        if (++depth > max_depth) return false;
        object = c == '{';
        if (object) {
            WORD(depth) |= BIT(depth);
        } else {
            WORD(depth) &= ~BIT(depth);
        }
        uint8_t closer = (uint8_t)(c + 2);
        NEXT();
        if (c == closer) {
            end = p + 1;
            depth--;
            object = depth > 0 && (WORD(depth) & BIT(depth)) != 0;
            NEXT();
            if (base[p - 1] == ',') goto squeezed_comma;
            goto after_value;
        }
        if (object) goto key;
        goto value;
    }
    end = peel_literal(base, n, p, c);
    if (end == 0) return false;

after_scalar:
    NEXT();
    if (end != p) {
        // Only whitespace, or one squeezed comma, may separate a number or literal from what follows.
        if (base[end] == ',' && end + 1 == p) goto squeezed_comma;
        if (peel_skip_space(base, n, end) != p) return false;
    }

after_value:
    // A value just ended at `end`; p is the next position and c its byte.
    if (members && depth == report) {
        if (end == SIZE_MAX && (end = peel_string_end(base, n, value_start + 1)) == 0) return false;
        if (!member(context, name_start, name_end, value_start, end)) return false;
    }
    if (c == ',') {
        if (depth == 0) return false;
        NEXT();
        if (object) goto key;
        goto value;
    }
    if (c == (object ? '}' : ']') && depth > 0) {
        end = p + 1;
        depth--;
        object = depth > 0 && (WORD(depth) & BIT(depth)) != 0;
        NEXT();
        if (base[p - 1] == ',') goto squeezed_comma;
        goto after_value;
    }
    return depth == 0 && p == n && !s.failed;

squeezed_comma:
    // A comma left out of the positions sits at p - 1, right after the value that ended.
    if (members && depth == report) {
        if (end == SIZE_MAX && (end = peel_string_end(base, n, value_start + 1)) == 0) return false;
        if (!member(context, name_start, name_end, value_start, end)) return false;
    }
    if (depth == 0) return false;
    if (!object) goto value;

key:
    // An object member's name at p, then its colon: the next position, or squeezed in front of the value.
    if (c != '"') return false;
    {
        size_t quote = p;
        NEXT();
        if (c == ':') {
            NEXT();
        } else if (base[p - 1] != ':') {
            return false;
        }
        if (members && depth == report) {
            name_start = quote + 1;
            name_end = peel_string_end(base, n, quote + 1);
            if (name_end-- == 0) return false;
            value_start = p;
        }
    }
    goto value;
#undef NEXT
#undef BIT
#undef WORD
}

/// Two copies of the walk: validation alone keeps fewer values live than with member reports.
PEEL_TARGET bool K(peel_scan)(const uint8_t *base, size_t n, size_t start, size_t max_depth, uint64_t *stack,
                              peel_scan_member_fn member, void *context) {
    if (member) return K(walk)(base, n, start, max_depth, stack, member, context, true);
    return K(walk)(base, n, start, max_depth, stack, NULL, NULL, false);
}
