// The SSE2 two-stage scanner (x86-64): stage 1 classifies 64-byte blocks into bitmaps whose
// set bits are the structural bytes and value starts; stage 2 takes those positions straight from
// the bitmaps, one block at a time, with the same container and envelope bookkeeping as the token
// scanner. Positions no longer depend on each other, so the CPU can run ahead instead of waiting
// token by token.
// The token scanner (ScanCore.scan) stays the portable path and the path for short bodies; the
// AVX2 and AVX-512 kernels (CPeelScan, ScanCore+Kernels.swift) are the same design in C.
#if arch(x86_64)
    import _Builtin_intrinsics.intel
#endif

extension ScanCore {
    /// Shorter bodies go to the token scanner: the block scanners' set-up does not pay off there.
    static let blockThreshold = 512

    /// Bits of the bytes a backslash escapes, given the backslash bits of a block; `carry` is 1 when
    /// the previous block ended in an unfinished escape, and is updated for the next block.
    /// Pure integer code (simdjson's odd-run trick), so it is tested on every architecture.
    @inline(__always)
    static func escapedBits(_ backslash: UInt64, _ carry: inout UInt64) -> UInt64 {
        if backslash == 0 {
            let escaped = carry
            carry = 0
            return escaped
        }
        let odd: UInt64 = 0xAAAA_AAAA_AAAA_AAAA
        // A backslash escaped from the previous block starts nothing.
        let potential = backslash & ~carry
        // Subtraction turns even-aligned runs to ones and odd-aligned runs to zeros; the xor with
        // the odd bits then leaves every escape's first backslash and its escaped byte set.
        let code = (((potential << 1) | odd) &- potential) ^ odd
        let escaped = code ^ (backslash | carry)
        carry = (code & backslash) >> 63
        return escaped
    }

    /// XOR of every bit at or below each position: ones from an opening quote up to its closing one.
    @inline(__always)
    static func prefixXor(_ bits: UInt64) -> UInt64 {
        var x = bits
        x ^= x << 1
        x ^= x << 2
        x ^= x << 4
        x ^= x << 8
        x ^= x << 16
        x ^= x << 32
        return x
    }
}

#if arch(x86_64)
    extension ScanCore {
        /// Stage 1's state across blocks; stage 2 keeps the current block's bits in registers.
        struct BlockState {
            let base: UnsafePointer<UInt8>
            let n: Int
            /// 64 bytes for the last partial block, padded with spaces.
            let tail: UnsafeMutablePointer<UInt8>
            /// Start of the next block to classify.
            var block: Int
            /// Start of the block advance() classified last.
            var start = 0
            /// All ones when the previous block ended inside a string.
            var inString: UInt64 = 0
            /// 1 when the previous block ended in a backslash that escapes the next byte.
            var escapeCarry: UInt64 = 0
            /// 1 when the previous block ended in a byte that continues a scalar.
            var scalarCarry: UInt64 = 0
            /// Multi-byte UTF-8 sequences are validated up to here.
            var utf8Next = 0
            /// Set when every block is classified, or stage 1 found the body invalid.
            var finished = false
            /// Set when stage 1 found the body invalid.
            var failed = false

            init(_ base: UnsafePointer<UInt8>, _ n: Int, _ start: Int, _ tail: UnsafeMutablePointer<UInt8>) {
                self.base = base
                self.n = n
                self.block = start
                self.tail = tail
            }

            /// Classifies the next block and returns its structural bits (positions from `start`);
            /// 0 with `finished` set at the end of the body or when it is invalid.
            @inline(never)
            mutating func advance() -> UInt64 {
                if n &- block >= 64 {
                    start = block
                    block &+= 64
                    return classify(base + start)
                }
                if block < n {
                    tail.initialize(repeating: 0x20, count: 64)
                    tail.update(from: base + block, count: n &- block)
                    start = block
                    block = n
                    return classify(UnsafePointer(tail))
                }
                // An open string or a dangling escape at the end.
                if inString != 0 || escapeCarry != 0 { failed = true }
                finished = true
                return 0
            }

            /// Marks the body invalid.
            @inline(__always)
            mutating func fail() -> UInt64 {
                failed = true
                finished = true
                return 0
            }

            /// The structural bits of the 64 bytes at p, which stand for the body's bytes from `start`.
            @inline(__always)
            mutating func classify(_ p: UnsafePointer<UInt8>) -> UInt64 {
                let m = ScanCore.masks(UnsafeRawPointer(p))
                var quote = m.quote
                if m.backslash != 0 || escapeCarry != 0 {
                    let escaped = ScanCore.escapedBits(m.backslash, &escapeCarry)
                    if escaped != 0 {
                        guard checkEscapes(escaped) else { return fail() }
                        quote &= ~escaped
                    }
                }
                let strings = ScanCore.prefixXor(quote) ^ inString
                inString = UInt64(bitPattern: Int64(bitPattern: strings) >> 63)
                var separators = m.opOrSpace
                if m.rare {
                    let r = ScanCore.rareMasks(UnsafeRawPointer(p))
                    // Control bytes must be escaped inside strings (RFC 8259 §7).
                    if r.control & strings != 0 { return fail() }
                    separators |= r.whitespace
                    if r.high != 0 {
                        guard checkUTF8(r.high) else { return fail() }
                    }
                }
                let scalar = ~separators
                let plain = scalar & ~quote
                let follows = (plain << 1) | scalarCarry
                scalarCarry = plain >> 63
                // Opening quotes and the first byte of every other run of non-separators, outside
                // strings; a closing quote is part of its string (strings ^ quote).
                return (m.op | (scalar & ~follows)) & ~(strings ^ quote)
            }

            /// Checks the escape in front of every escaped byte (RFC 8259 §7).
            @inline(__always)
            mutating func checkEscapes(_ escaped: UInt64) -> Bool {
                var bits = escaped
                repeat {
                    let e = start &+ bits.trailingZeroBitCount
                    bits &= bits &- 1
                    // An escape at the very end has no escaped byte (the tail block's padding is not one).
                    guard e < n else { return false }
                    let c = base[e]
                    if c == UInt8(ascii: "u") {
                        // Four hex digits; surrogates, paired or lone, are grammar like any other (RFC 8259 §8.2).
                        guard n &- e >= 5, ScanCore.isHex4(UnsafeRawPointer(base + (e &+ 1)).loadUnaligned(as: UInt32.self)) else {
                            return false
                        }
                    } else {
                        // " / \ b f n r t, as bits of c - 0x20 over two words.
                        let k = c &- 0x20
                        guard k < 0x60 else { return false }
                        let word: UInt64 = k < 64 ? 0x1000_0000_0000_8004 : 0x0000_0000_0014_4044
                        guard (word >> UInt64(k & 63)) & 1 != 0 else { return false }
                    }
                } while bits != 0
                return true
            }

            /// Validates every multi-byte UTF-8 sequence starting in the block (RFC 3629 §4).
            @inline(never)
            mutating func checkUTF8(_ high: UInt64) -> Bool {
                var bits = high
                while bits != 0 {
                    var i = start &+ bits.trailingZeroBitCount
                    bits &= bits &- 1
                    if i < utf8Next { continue }
                    guard ScanCore.scanMultibyte(base, n, &i) else { return false }
                    utf8Next = i
                }
                return true
            }
        }

        /// The bitmaps every block needs: quotes, backslashes, `{}[]:,`, those or a space, and
        /// whether any byte is a control or non-ASCII byte (then rareMasks has the details).
        @inline(__always)
        static func masks(_ p: UnsafeRawPointer) -> (quote: UInt64, backslash: UInt64, op: UInt64, opOrSpace: UInt64, rare: Bool) {
            let quoteByte = _mm_set1_epi8(0x22)
            let backslashByte = _mm_set1_epi8(0x5C)
            let spaceByte = _mm_set1_epi8(0x20)
            let openByte = _mm_set1_epi8(0x7B)  // '{', and '[' with bit 0x20 set
            let closeByte = _mm_set1_epi8(0x7D)  // '}', and ']' with bit 0x20 set
            let colonByte = _mm_set1_epi8(0x3A)
            let commaByte = _mm_set1_epi8(0x2C)
            var quote: UInt64 = 0
            var backslash: UInt64 = 0
            var op: UInt64 = 0
            var opOrSpace: UInt64 = 0
            var low = _mm_setzero_si128()
            for k in 0..<4 {
                let v = _mm_loadu_si128((p + 16 &* k).assumingMemoryBound(to: __m128i.self))
                let folded = _mm_or_si128(v, spaceByte)
                let ops = _mm_or_si128(
                    _mm_or_si128(_mm_cmpeq_epi8(folded, openByte), _mm_cmpeq_epi8(folded, closeByte)),
                    _mm_or_si128(_mm_cmpeq_epi8(v, colonByte), _mm_cmpeq_epi8(v, commaByte)))
                let shift = UInt64(16 &* k)
                quote |= UInt64(UInt16(truncatingIfNeeded: _mm_movemask_epi8(_mm_cmpeq_epi8(v, quoteByte)))) << shift
                backslash |= UInt64(UInt16(truncatingIfNeeded: _mm_movemask_epi8(_mm_cmpeq_epi8(v, backslashByte)))) << shift
                op |= UInt64(UInt16(truncatingIfNeeded: _mm_movemask_epi8(ops))) << shift
                opOrSpace |=
                    UInt64(UInt16(truncatingIfNeeded: _mm_movemask_epi8(_mm_or_si128(ops, _mm_cmpeq_epi8(v, spaceByte)))))
                    << shift
                // Signed compare: below 0x20 or 0x80 and up.
                low = _mm_or_si128(low, _mm_cmplt_epi8(v, spaceByte))
            }
            return (quote, backslash, op, opOrSpace, _mm_movemask_epi8(low) != 0)
        }

        /// Non-ASCII bytes, control bytes, and tab, line feed and carriage return of the 64 bytes at p.
        @inline(never)
        static func rareMasks(_ p: UnsafeRawPointer) -> (high: UInt64, control: UInt64, whitespace: UInt64) {
            let spaceByte = _mm_set1_epi8(0x20)
            let tab = _mm_set1_epi8(0x09)
            let lineFeed = _mm_set1_epi8(0x0A)
            let carriageReturn = _mm_set1_epi8(0x0D)
            var high: UInt64 = 0
            var control: UInt64 = 0
            var whitespace: UInt64 = 0
            for k in 0..<4 {
                let v = _mm_loadu_si128((p + 16 &* k).assumingMemoryBound(to: __m128i.self))
                let shift = UInt64(16 &* k)
                let h = UInt64(UInt16(truncatingIfNeeded: _mm_movemask_epi8(v)))
                let lowOrHigh = UInt64(UInt16(truncatingIfNeeded: _mm_movemask_epi8(_mm_cmplt_epi8(v, spaceByte))))
                let ws = _mm_or_si128(
                    _mm_cmpeq_epi8(v, tab), _mm_or_si128(_mm_cmpeq_epi8(v, lineFeed), _mm_cmpeq_epi8(v, carriageReturn)))
                high |= h << shift
                control |= (lowOrHigh & ~h) << shift
                whitespace |= UInt64(UInt16(truncatingIfNeeded: _mm_movemask_epi8(ws))) << shift
            }
            return (high, control, whitespace)
        }
        /// run()'s block path: the same stack and envelope bookkeeping around stage 2.
        static func runBlocks(
            _ base: UnsafePointer<UInt8>, _ n: Int, _ depthLimit: Int, _ words: Int, _ names: EnvelopeNames?,
            _ members: inout EnvelopeMembers
        ) -> Bool {
            // Stage 1 starts after the BOM, if any; leading whitespace yields no positions.
            let start = n >= 3 && base[0] == 0xEF && base[1] == 0xBB && base[2] == 0xBF ? 3 : 0
            return withUnsafeTemporaryAllocation(of: UInt64.self, capacity: words &+ 8) { storage in
                let stack = storage.baseAddress!
                stack.initialize(repeating: 0, count: words)
                let tail = UnsafeMutableRawPointer(stack + words).bindMemory(to: UInt8.self, capacity: 64)
                var state = BlockState(base, n, start, tail)
                guard let names else { return walk(&state, depthLimit, stack, nil) }
                var top = TopLevel(names: names)
                let ok = withUnsafeMutablePointer(to: &top) { walk(&state, depthLimit, stack, $0) }
                members = top.members
                return ok
            }
        }

        /// The next structural position and its byte: the lowest of `bits` (positions from `start`),
        /// classifying further blocks when those run out; (n, 0) at the end of the body or once stage 1
        /// failed (NUL never starts or separates anything, so every check that follows fails on it).
        @inline(__always)
        static func next(_ s: inout BlockState, _ base: UnsafePointer<UInt8>, _ bits: inout UInt64, _ start: inout Int)
            -> (Int, UInt8)
        {
            while bits == 0 {
                if s.finished { return (s.n, 0) }
                bits = s.advance()
                start = s.start
            }
            let p = start &+ bits.trailingZeroBitCount
            bits &= bits &- 1
            return (p, base[p])
        }

        /// Whether a scalar that ended at `end` is followed by nothing but whitespace up to the next position q.
        @inline(__always)
        static func separated(_ base: UnsafePointer<UInt8>, _ n: Int, _ end: Int, _ q: Int) -> Bool {
            end == q || skipWhitespace(base, n, end) == q
        }

        /// Reads an object member's `"name":` from the name's opening quote at p (byte c) and leaves
        /// p and c at the value; with `top`, the name is matched against the envelope's.
        @inline(__always)
        static func member(
            _ s: inout BlockState, _ base: UnsafePointer<UInt8>, _ bits: inout UInt64, _ start: inout Int, _ p: inout Int,
            _ c: inout UInt8, _ top: UnsafeMutablePointer<TopLevel>?
        ) -> Bool {
            guard c == UInt8(ascii: "\"") else { return false }
            if let top {
                let end = scanString(base, s.n, p &+ 1)
                guard end >= 0 else { return false }
                top.pointee.begin(base, p &+ 1, end &- 1)
                (p, c) = next(&s, base, &bits, &start)
                guard c == UInt8(ascii: ":") else { return false }
                (p, c) = next(&s, base, &bits, &start)
                top.pointee.fieldStart = p
            } else {
                (p, c) = next(&s, base, &bits, &start)
                guard c == UInt8(ascii: ":") else { return false }
                (p, c) = next(&s, base, &bits, &start)
            }
            return true
        }

        /// Stage 2: the grammar over the structural positions; strings are already checked by
        /// stage 1, except that top-level names and string values are read again for the envelope.
        private static func walk(
            _ s: inout BlockState, _ maxDepth: Int, _ stack: UnsafeMutablePointer<UInt64>, _ top: UnsafeMutablePointer<TopLevel>?
        ) -> Bool {
            let base = s.base
            let n = s.n
            var bits: UInt64 = 0
            var start = 0
            var (p, c) = next(&s, base, &bits, &start)
            guard p < n else { return false }
            var depth = 0
            var inObject = false
            // The depth whose members are envelope members: 1 with names, none without.
            let envelopeDepth = top == nil ? -1 : 1

            nextValue: while true {
                // Just past the value; -1 for a string, whose closing quote is not indexed.
                var end = -1
                var q: Int
                if c == UInt8(ascii: "\"") {
                    (q, c) = next(&s, base, &bits, &start)
                } else if c &- UInt8(ascii: "0") < 10 || c == UInt8(ascii: "-") {
                    var i = p
                    guard scanNumber(base, n, &i, c) else { return false }
                    end = i
                    (q, c) = next(&s, base, &bits, &start)
                    guard separated(base, n, end, q) else { return false }
                } else if c | 0x20 == UInt8(ascii: "{") {
                    depth &+= 1
                    if depth > maxDepth { return false }
                    inObject = c == UInt8(ascii: "{")
                    setKind(stack, depth, object: inObject)
                    let opener = c
                    (q, c) = next(&s, base, &bits, &start)
                    if c != opener &+ 2 {
                        // Not closed at once ('}' and ']' are two above their openers): read the first member.
                        p = q
                        if inObject {
                            guard member(&s, base, &bits, &start, &p, &c, depth == envelopeDepth ? top : nil) else { return false }
                        }
                        continue nextValue
                    }
                    end = q &+ 1
                    depth &-= 1
                    inObject = isObject(stack, depth)
                    (q, c) = next(&s, base, &bits, &start)
                } else {
                    var i = p
                    guard scanLiteral(base, n, &i, c) else { return false }
                    end = i
                    (q, c) = next(&s, base, &bits, &start)
                    guard separated(base, n, end, q) else { return false }
                }

                // A value just ended; q is the next position and c its byte. Close containers until one wants another value.
                while true {
                    if depth <= 1 {
                        if depth == 0 { return q == n && !s.failed }
                        if let top, top.pointee.field != 0 {
                            if end < 0 {
                                end = scanString(base, n, top.pointee.fieldStart &+ 1)
                                guard end >= 0 else { return false }
                            }
                            guard top.pointee.end(end) else { return false }
                        }
                    }
                    if c == UInt8(ascii: ",") {
                        (p, c) = next(&s, base, &bits, &start)
                        if inObject {
                            guard member(&s, base, &bits, &start, &p, &c, depth == envelopeDepth ? top : nil) else { return false }
                        }
                        continue nextValue
                    }
                    guard c == (inObject ? UInt8(ascii: "}") : UInt8(ascii: "]")) else { return false }
                    end = q &+ 1
                    depth &-= 1
                    inObject = isObject(stack, depth)
                    (q, c) = next(&s, base, &bits, &start)
                }
            }
        }
    }

#else
    extension ScanCore {
        /// Never called: scanner() picks no block scanner without SSE2.
        static func runBlocks(
            _ base: UnsafePointer<UInt8>, _ n: Int, _ depthLimit: Int, _ words: Int, _ names: EnvelopeNames?,
            _ members: inout EnvelopeMembers
        ) -> Bool {
            false
        }
    }
#endif
