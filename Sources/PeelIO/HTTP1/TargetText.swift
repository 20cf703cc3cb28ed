/// A request target's bytes as the String every later stage reads. RFC 9112 §3.2 allows only
/// ASCII in a target; raw UTF-8 is kept as sent, and every byte that is not part of a well-formed
/// UTF-8 sequence (RFC 3629 §4, overlong forms and surrogates included) is percent-encoded on its
/// own (`\xff` → `%ff`, RFC 3986 §2.1), so distinct targets stay distinct and an upstream that
/// decodes escapes reads the octets the client sent. Nothing is replaced: `String(decoding:)`
/// turned both `/pay/\xff` and `/pay/\xfe` into `/pay/%ef%bf%bd`. Lowercase hex, as
/// `LineScratch.target` encodes a path's raw UTF-8 on the way out: every byte above 0x7F in a
/// path reaches the upstream as the same escape, well-formed or not.
enum TargetText {
    /// The target in `bytes` as a String.
    static func string(_ bytes: UnsafeRawBufferPointer) -> String {
        // An ASCII target (nearly every one) is its bytes: one scan, no copy beyond the String's.
        var i = 0
        while i < bytes.count && bytes[i] < 0x80 { i += 1 }
        if i == bytes.count { return String(decoding: bytes, as: UTF8.self) }
        return escapingMalformed(bytes)
    }

    /// `bytes` with each byte outside a well-formed UTF-8 sequence percent-encoded.
    static func escapingMalformed(_ bytes: UnsafeRawBufferPointer) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count + 8)
        var i = 0
        while i < bytes.count {
            let b = bytes[i]
            if b < 0x80 {
                out.append(b)
                i += 1
                continue
            }
            let n = wellFormedLength(bytes, at: i)
            if n > 0 {
                out.append(contentsOf: bytes[i..<(i + n)])
                i += n
            } else {
                out.append(UInt8(ascii: "%"))
                out.append(hexDigit(b >> 4))
                out.append(hexDigit(b & 0x0F))
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The length of the well-formed UTF-8 sequence starting at `i` (RFC 3629 §4, the Unicode
    /// Standard's table 3-7), or 0 when the byte there starts none.
    private static func wellFormedLength(_ b: UnsafeRawBufferPointer, at i: Int) -> Int {
        let lead = b[i]
        // The second byte's range is the lead's own: it is what rules out overlong forms (E0, F0),
        // surrogates (ED) and code points past U+10FFFF (F4).
        let n: Int
        var low: UInt8 = 0x80, high: UInt8 = 0xBF
        switch lead {
        case 0xC2...0xDF: n = 2
        case 0xE0: n = 3; low = 0xA0
        case 0xE1...0xEC, 0xEE, 0xEF: n = 3
        case 0xED: n = 3; high = 0x9F
        case 0xF0: n = 4; low = 0x90
        case 0xF1...0xF3: n = 4
        case 0xF4: n = 4; high = 0x8F
        default: return 0
        }
        guard i + n <= b.count, (low...high).contains(b[i + 1]) else { return 0 }
        for k in 2..<n where b[i + k] & 0xC0 != 0x80 { return 0 }
        return n
    }

    private static func hexDigit(_ v: UInt8) -> UInt8 { v < 10 ? 0x30 + v : 0x57 + v }
}
