/// Turns the already-validated body of a JSON string into its UTF-8 bytes.
enum StringDecoder {
    /// Writes the unescaped bytes of base[start..<end] to `out` and returns how many; never more than end - start.
    static func decode(_ base: UnsafePointer<UInt8>, _ start: Int, _ end: Int, into out: UnsafeMutablePointer<UInt8>) -> Int {
        var i = start
        var o = 0
        while i < end {
            let c = base[i]
            guard c == UInt8(ascii: "\\") else {
                out[o] = c
                o += 1
                i += 1
                continue
            }
            let kind = base[i + 1]
            i += 2
            switch kind {
            case UInt8(ascii: "b"): out[o] = 0x08
            case UInt8(ascii: "f"): out[o] = 0x0C
            case UInt8(ascii: "n"): out[o] = 0x0A
            case UInt8(ascii: "r"): out[o] = 0x0D
            case UInt8(ascii: "t"): out[o] = 0x09
            case UInt8(ascii: "u"):
                // The scanner has already checked the hex digits. A high surrogate followed by a low
                // one is a pair; a lone half names no character (RFC 8259 §8.2) and becomes U+FFFD, as
                // WHATWG's and Python's decoders make it (3 bytes, fewer than its 6).
                var scalar = ScanCore.hex4(base, end, i) ?? 0xFFFD
                i += 4
                if scalar & 0xFC00 == 0xD800, end - i >= 6, base[i] == UInt8(ascii: "\\"), base[i + 1] == UInt8(ascii: "u"),
                    let low = ScanCore.hex4(base, end, i + 2), low & 0xFC00 == 0xDC00 {
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    i += 6
                } else if scalar & 0xF800 == 0xD800 {
                    scalar = 0xFFFD
                }
                o += encode(scalar, into: out + o)
                continue
            default: out[o] = kind  // \" \\ \/
            }
            o += 1
        }
        return o
    }

    /// Writes one Unicode scalar as UTF-8 and returns its length.
    private static func encode(_ scalar: UInt32, into out: UnsafeMutablePointer<UInt8>) -> Int {
        switch scalar {
        case 0..<0x80:
            out[0] = UInt8(scalar)
            return 1
        case 0x80..<0x800:
            out[0] = UInt8(0xC0 | scalar >> 6)
            out[1] = UInt8(0x80 | scalar & 0x3F)
            return 2
        case 0x800..<0x10000:
            out[0] = UInt8(0xE0 | scalar >> 12)
            out[1] = UInt8(0x80 | scalar >> 6 & 0x3F)
            out[2] = UInt8(0x80 | scalar & 0x3F)
            return 3
        default:
            out[0] = UInt8(0xF0 | scalar >> 18)
            out[1] = UInt8(0x80 | scalar >> 12 & 0x3F)
            out[2] = UInt8(0x80 | scalar >> 6 & 0x3F)
            out[3] = UInt8(0x80 | scalar & 0x3F)
            return 4
        }
    }
}
