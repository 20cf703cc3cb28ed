// The token scanners. Each takes i at its token and leaves i just past it; all reads are bounds-checked
// against n by hand because UnsafePointer does not check.
extension ScanCore {
    /// The first index at or after i that is not JSON whitespace.
    @inline(__always)
    static func skipWhitespace(_ base: UnsafePointer<UInt8>, _ n: Int, _ i: Int) -> Int {
        var i = i
        while i < n {
            let c = base[i]
            // Bits 9, 10, 13 and 32 mark the four whitespace bytes of RFC 8259 §2.
            guard c <= 0x20, (0x1_0000_2600 as UInt64) & (UInt64(1) << UInt64(c)) != 0 else { break }
            i &+= 1
        }
        return i
    }

    /// The first index at or after i that is not whitespace, with its byte (0 at the end of the buffer).
    @inline(__always)
    static func token(_ base: UnsafePointer<UInt8>, _ n: Int, _ i: Int) -> (Int, UInt8) {
        // Compact JSON has no whitespace between tokens, so test the first byte before looping.
        if i < n {
            let c = base[i]
            if c > 0x20 { return (i, c) }
        }
        let j = skipWhitespace(base, n, i)
        return (j, j < n ? base[j] : 0)
    }

    /// Matches the 4 bytes at i against `word` (big-endian ASCII) and steps `length` bytes.
    @inline(__always)
    static func literal(_ base: UnsafePointer<UInt8>, _ n: Int, _ i: inout Int, _ word: UInt32, _ length: Int) -> Bool {
        guard n &- i >= 4 else { return false }
        let raw = UnsafeRawPointer(base + i).loadUnaligned(as: UInt32.self)
        guard UInt32(bigEndian: raw) == word else { return false }
        i &+= length
        return true
    }

    /// Steps over `true`, `false` or `null` at i, whose first byte is c; false for anything else.
    @inline(__always)
    static func scanLiteral(_ base: UnsafePointer<UInt8>, _ n: Int, _ i: inout Int, _ c: UInt8) -> Bool {
        if c == UInt8(ascii: "t") { return literal(base, n, &i, 0x7472_7565, 4) }  // "true"
        if c == UInt8(ascii: "f") {
            guard n &- i >= 5, base[i &+ 4] == UInt8(ascii: "e") else { return false }
            return literal(base, n, &i, 0x6661_6C73, 5)  // "fals" + the 'e' above
        }
        if c == UInt8(ascii: "n") { return literal(base, n, &i, 0x6E75_6C6C, 4) }  // "null"
        return false
    }

    /// Scans `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?` (RFC 8259 §6); `first` is base[i].
    @inline(__always)
    static func scanNumber(_ base: UnsafePointer<UInt8>, _ n: Int, _ i: inout Int, _ first: UInt8) -> Bool {
        var c = first
        if c == UInt8(ascii: "-") {
            i &+= 1
            guard i < n else { return false }
            c = base[i]
        }
        if c == UInt8(ascii: "0") {
            // A leading zero is the whole integer part; "01" then fails as garbage after a value.
            i &+= 1
        } else if c &- UInt8(ascii: "1") < 9 {
            i &+= 1
            skipDigits(base, n, &i)
        } else {
            return false
        }
        guard i < n else { return true }
        c = base[i]
        if c == UInt8(ascii: ".") {
            i &+= 1
            guard i < n, base[i] &- UInt8(ascii: "0") < 10 else { return false }
            skipDigits(base, n, &i)
            guard i < n else { return true }
            c = base[i]
        }
        if c | 0x20 == UInt8(ascii: "e") {
            i &+= 1
            if i < n && (base[i] == UInt8(ascii: "+") || base[i] == UInt8(ascii: "-")) { i &+= 1 }
            guard i < n, base[i] &- UInt8(ascii: "0") < 10 else { return false }
            skipDigits(base, n, &i)
        }
        return true
    }

    /// Steps over a run of ASCII digits (a word-at-a-time version measured slower: runs are short).
    @inline(__always)
    private static func skipDigits(_ base: UnsafePointer<UInt8>, _ n: Int, _ i: inout Int) {
        while i < n && base[i] &- UInt8(ascii: "0") < 10 { i &+= 1 }
    }

    /// The index just past the closing quote of a string whose body starts at i, or -1 when malformed (RFC 8259 §7, §8.1).
    @inline(__always)
    static func scanString(_ base: UnsafePointer<UInt8>, _ n: Int, _ i: Int) -> Int {
        // Plain ASCII runs are walked 16 bytes at a time right here; only escapes, non-ASCII bytes
        // and the buffer's last bytes go to the outlined loop. Indexes go in and out by value so
        // the caller's index can stay in a register.
        var j = i
        while n &- j >= 16 {
            let offset = firstSpecial(base, j)
            if offset < 16 {
                j &+= offset
                if base[j] == UInt8(ascii: "\"") { return j &+ 1 }
                return scanStringSlow(base, n, j)
            }
            j &+= 16
        }
        return scanStringSlow(base, n, j)
    }

    /// Offset of the first of the 16 bytes at i that is `"`, `\`, a control or a non-ASCII byte; 16 when none is.
    @inline(__always)
    static func firstSpecial(_ base: UnsafePointer<UInt8>, _ i: Int) -> Int {
        let v = UnsafeRawPointer(base + i).loadUnaligned(as: SIMD16<UInt8>.self)
        // Bytes outside 0x20...0x7F land above 0x5F after subtracting 0x20 (unsigned wrap).
        let quote = SIMD16<UInt8>(repeating: 0x22)
        let backslash = SIMD16<UInt8>(repeating: 0x5C)
        let space = SIMD16<UInt8>(repeating: 0x20)
        let printableSpan = SIMD16<UInt8>(repeating: 0x5F)
        let special = (v .== quote) .| (v .== backslash) .| ((v &- space) .> printableSpan)
        // Each mask lane is 0x00 or 0xFF, so trailing zero bits / 8 is the first flagged byte; this
        // stands in for a movemask, which Swift's SIMD types do not offer.
        let halves = unsafeBitCast(special, to: SIMD2<UInt64>.self)
        let low = UInt64(littleEndian: halves[0])
        let high = UInt64(littleEndian: halves[1])
        if low != 0 { return low.trailingZeroBitCount >> 3 }
        return 8 &+ high.trailingZeroBitCount >> 3  // 8 + 64 / 8 == 16 when high is zero too
    }

    /// The general string loop: escapes, multi-byte UTF-8, and the buffer's last bytes.
    @inline(never)
    static func scanStringSlow(_ base: UnsafePointer<UInt8>, _ n: Int, _ start: Int) -> Int {
        var i = start
        while i < n {
            let c = base[i]
            if c == UInt8(ascii: "\"") {
                return i &+ 1
            } else if c == UInt8(ascii: "\\") {
                guard scanEscape(base, n, &i) else { return -1 }
            } else if c >= 0x80 {
                // Checked before the ASCII skip so runs of CJK text go character to character.
                guard scanMultibyte(base, n, &i) else { return -1 }
            } else if c < 0x20 {
                // Control characters must be escaped inside strings (RFC 8259 §7).
                return -1
            } else {
                i = skipPlainASCII(base, n, i &+ 1)
            }
        }
        return -1
    }

    /// Eight bytes at i as a little-endian word; the caller guarantees i + 8 <= n.
    @inline(__always)
    static func loadWord(_ base: UnsafePointer<UInt8>, _ i: Int) -> UInt64 {
        UInt64(littleEndian: UnsafeRawPointer(base + i).loadUnaligned(as: UInt64.self))
    }

    /// High bit set in each byte lane that may hold `"`, `\`, a control byte or a non-ASCII byte.
    @inline(__always)
    static func specialBytes(_ word: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let quotes = word ^ (ones &* 0x22)
        let backslashes = word ^ (ones &* 0x5C)
        // Classic "has zero/less-than byte" tricks: the lowest flagged lane is always exact, false
        // positives only appear above a true one, so the first stop is right.
        let special =
            ((quotes &- ones) & ~quotes)
            | ((backslashes &- ones) & ~backslashes)
            | ((word &- ones &* 0x20) & ~word)
            | word
        return special & 0x8080_8080_8080_8080
    }

    /// The first index at or after i holding `"`, `\`, a control byte or a non-ASCII byte (n when none).
    @inline(__always)
    static func skipPlainASCII(_ base: UnsafePointer<UInt8>, _ n: Int, _ i: Int) -> Int {
        var i = i
        while n &- i >= 16 {
            let offset = firstSpecial(base, i)
            i &+= offset
            if offset < 16 { return i }
        }
        if n &- i >= 8 {
            let flags = specialBytes(loadWord(base, i))
            if flags != 0 { return i &+ flags.trailingZeroBitCount >> 3 }
            i &+= 8
        }
        while i < n {
            let c = base[i]
            if c == UInt8(ascii: "\"") || c == UInt8(ascii: "\\") || c &- 0x20 >= 0x60 { return i }
            i &+= 1
        }
        return i
    }

    /// Scans one escape at i (the backslash). Every `\u` with four hex digits is grammar (RFC 8259
    /// §7), surrogates paired or lone (§8.2 leaves their meaning to the receiver, and Peel passes
    /// strings without judging what they name).
    @inline(__always)
    static func scanEscape(_ base: UnsafePointer<UInt8>, _ n: Int, _ i: inout Int) -> Bool {
        guard n &- i >= 2 else { return false }
        switch base[i + 1] {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"),
            UInt8(ascii: "f"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
            i += 2
            return true
        case UInt8(ascii: "u"):
            // Four hex digits checked at once.
            guard n &- i >= 6, isHex4(UnsafeRawPointer(base + i + 2).loadUnaligned(as: UInt32.self)) else {
                return false
            }
            i += 6
            return true
        default:
            return false
        }
    }

    /// Whether all four bytes of `word` are ASCII hex digits, in any byte order.
    @inline(__always)
    static func isHex4(_ word: UInt32) -> Bool {
        let ones: UInt32 = 0x0101_0101
        let high: UInt32 = 0x8080_8080
        // For bytes below 0x80, `b + (0x80 - lo)` sets the lane's high bit when b >= lo and
        // `b + (0x7F - hi)` leaves it clear when b <= hi; no lane carries into the next. Digits are
        // tested on the bytes as they are (so 0x10...0x19 cannot pass as digits after folding), letters
        // after folding to lower case.
        let lower = word | 0x2020_2020
        let digit = (word &+ ones &* 0x50) & ~(word &+ ones &* 0x46)
        let letter = (lower &+ ones &* 0x1F) & ~(lower &+ ones &* 0x19)
        return word & high == 0 && (digit | letter) & high == high
    }

    /// The value of 4 hex digits at i, or nil.
    @inline(__always)
    static func hex4(_ base: UnsafePointer<UInt8>, _ n: Int, _ i: Int) -> UInt32? {
        guard n &- i >= 4 else { return nil }
        var value: UInt32 = 0
        for k in 0..<4 {
            guard let digit = hexDigit(base[i + k]) else { return nil }
            value = value << 4 | digit
        }
        return value
    }

    /// The value of one hex digit, or nil.
    @inline(__always)
    static func hexDigit(_ c: UInt8) -> UInt32? {
        let decimal = c &- UInt8(ascii: "0")
        if decimal < 10 { return UInt32(decimal) }
        let letter = (c | 0x20) &- UInt8(ascii: "a")
        if letter < 6 { return UInt32(letter) + 10 }
        return nil
    }

    /// Validates one multi-byte UTF-8 sequence at i (RFC 3629 §4): no overlongs, no surrogates, nothing past U+10FFFF.
    @inline(__always)
    static func scanMultibyte(_ base: UnsafePointer<UInt8>, _ n: Int, _ i: inout Int) -> Bool {
        let lead = base[i]
        let remaining = n - i
        if lead < 0xC2 {
            // 0x80...0xBF is a stray continuation byte; 0xC0 and 0xC1 only start overlongs.
            return false
        } else if lead < 0xE0 {
            guard remaining >= 2, isContinuation(base[i + 1]) else { return false }
            i += 2
        } else if lead < 0xF0 {
            guard remaining >= 3 else { return false }
            let second = base[i + 1]
            let low: UInt8 = lead == 0xE0 ? 0xA0 : 0x80
            let high: UInt8 = lead == 0xED ? 0x9F : 0xBF
            guard second >= low, second <= high, isContinuation(base[i + 2]) else { return false }
            i += 3
        } else if lead < 0xF5 {
            guard remaining >= 4 else { return false }
            let second = base[i + 1]
            let low: UInt8 = lead == 0xF0 ? 0x90 : 0x80
            let high: UInt8 = lead == 0xF4 ? 0x8F : 0xBF
            guard second >= low, second <= high, isContinuation(base[i + 2]), isContinuation(base[i + 3]) else {
                return false
            }
            i += 4
        } else {
            return false
        }
        return true
    }

    /// Whether c is 0x80...0xBF.
    @inline(__always)
    private static func isContinuation(_ c: UInt8) -> Bool {
        c & 0xC0 == 0x80
    }
}
