/// Just enough JSON writing for the demo's hand-built bodies (RFC 8259 §7 string escaping).
enum JSONText {
    /// `text` as a JSON string literal; non-ASCII stays as UTF-8, control characters are escaped.
    static func string(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\u{08}": out += "\\b"
            case "\u{0C}": out += "\\f"
            default:
                if scalar.value < 0x20 {
                    out += "\\u00" + hex(UInt64(scalar.value), width: 2)
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }

    /// The envelope `{"code":…,"message":…,"data":…}`; `data` is raw JSON, nil leaves the member out.
    static func envelope(code: Int, message: String, data: String?) -> String {
        var out = "{\"code\":\(code),\"message\":\(string(message))"
        if let data { out += ",\"data\":\(data)" }
        return out + "}"
    }

    /// Lowercase hex, zero-padded to `width` digits.
    static func hex(_ value: UInt64, width: Int) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }
}

/// Checksums the echo endpoint and the encoders need.
enum Checksum {
    /// 64-bit FNV-1a, the echo endpoint's cheap body fingerprint.
    static func fnv1a64(_ bytes: some Sequence<UInt8>) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in bytes {
            hash ^= UInt64(b)
            hash = hash &* 0x0000_0100_0000_01B3
        }
        return hash
    }

    /// CRC-32 (ISO-HDLC, reflected 0xEDB88320) as gzip (RFC 1952 §8) and PNG use it.
    static func crc32(_ bytes: some Sequence<UInt8>, seed: UInt32 = 0) -> UInt32 {
        var crc = ~seed
        for b in bytes { crc = crcTable[Int((crc ^ UInt32(b)) & 0xFF)] ^ (crc >> 8) }
        return ~crc
    }

    /// Adler-32 for the zlib trailer (RFC 1950 §8).
    static func adler32(_ bytes: some Sequence<UInt8>) -> UInt32 {
        var a: UInt32 = 1
        var b: UInt32 = 0
        for byte in bytes {
            a = (a + UInt32(byte)) % 65_521
            b = (b + a) % 65_521
        }
        return b << 16 | a
    }

    private static let crcTable: [UInt32] = (0..<256).map { n in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }
}
