/// Media-type comparison for passthrough rules (RFC 9110 §8.3.1, §12.5.1).
enum MediaType {
    /// Whether a Content-Type value falls in a media range like `image/*`, `*/*` or `application/pdf`.
    static func matches(_ contentType: String, pattern: String) -> Bool {
        var contentType = contentType
        var pattern = pattern
        return contentType.withUTF8 { value in
            pattern.withUTF8 { range in matches(value, range) }
        }
    }

    /// Byte-level form of `matches`; parameters after `;` and surrounding spaces are ignored.
    private static func matches(_ value: UnsafeBufferPointer<UInt8>, _ range: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let (valueType, valueSubtype) = split(value), let (rangeType, rangeSubtype) = split(range) else {
            return false
        }
        if isStar(range, rangeType) {
            // Only `*/*` may wildcard the type (RFC 9110 §12.5.1); `*/json` is malformed and never matches.
            return isStar(range, rangeSubtype)
        }
        guard equalFolded(value, valueType, range, rangeType) else { return false }
        return isStar(range, rangeSubtype) || equalFolded(value, valueSubtype, range, rangeSubtype)
    }

    /// The type and subtype bounds of `type/subtype [; params]`; nil when either is empty.
    private static func split(_ b: UnsafeBufferPointer<UInt8>) -> (Range<Int>, Range<Int>)? {
        var end = 0
        while end < b.count && b[end] != UInt8(ascii: ";") { end += 1 }
        var lo = 0
        var hi = end
        while lo < hi && (b[lo] == 0x20 || b[lo] == 0x09) { lo += 1 }
        while hi > lo && (b[hi - 1] == 0x20 || b[hi - 1] == 0x09) { hi -= 1 }
        var slash = lo
        while slash < hi && b[slash] != UInt8(ascii: "/") { slash += 1 }
        guard slash > lo, slash + 1 < hi else { return nil }
        return (lo..<slash, (slash + 1)..<hi)
    }

    /// Whether the bytes in `part` are exactly `*`.
    private static func isStar(_ b: UnsafeBufferPointer<UInt8>, _ part: Range<Int>) -> Bool {
        part.count == 1 && b[part.lowerBound] == UInt8(ascii: "*")
    }

    /// ASCII case-insensitive equality; media types are case-insensitive tokens (RFC 9110 §8.3.1).
    private static func equalFolded(_ a: UnsafeBufferPointer<UInt8>, _ ar: Range<Int>, _ b: UnsafeBufferPointer<UInt8>, _ br: Range<Int>) -> Bool {
        guard ar.count == br.count else { return false }
        for k in 0..<ar.count where fold(a[ar.lowerBound + k]) != fold(b[br.lowerBound + k]) {
            return false
        }
        return true
    }

    /// The ASCII lowercase of c.
    @inline(__always)
    private static func fold(_ c: UInt8) -> UInt8 {
        c &- UInt8(ascii: "A") < 26 ? c | 0x20 : c
    }
}
