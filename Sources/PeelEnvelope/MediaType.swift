/// Media-type comparison for passthrough rules (RFC 9110 §8.3.1, §12.5.1).
enum MediaType {
    /// Whether a Content-Disposition value's type is `attachment` (RFC 6266 §4.1, case-insensitive).
    static func isAttachment(_ contentDisposition: String) -> Bool {
        var type = Substring(contentDisposition.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
        while type.first == " " || type.first == "\t" { type = type.dropFirst() }
        while type.last == " " || type.last == "\t" { type = type.dropLast() }
        return type.lowercased() == "attachment"
    }

    /// Whether a Content-Type value falls in any of the media ranges (`image/*`, `*/*`, `application/pdf`).
    static func matchesAny(_ contentType: String, _ patterns: [String]) -> Bool {
        guard !patterns.isEmpty else { return false }
        return withUTF8Bytes(contentType) { value in
            // The value is parsed once; each pattern is then one case-folded byte comparison.
            guard let (type, subtype) = split(value) else { return false }
            for pattern in patterns where withUTF8Bytes(pattern, { matches(value, type, subtype, $0) }) {
                return true
            }
            return false
        }
    }

    /// Whether a value whose type and subtype bounds are known falls in one media range.
    private static func matches(
        _ value: UnsafeBufferPointer<UInt8>, _ type: Range<Int>, _ subtype: Range<Int>, _ range: UnsafeBufferPointer<UInt8>
    ) -> Bool {
        // Most patterns differ from the value in their first letter; skip parsing those.
        var first = 0
        while first < range.count && (range[first] == 0x20 || range[first] == 0x09) { first += 1 }
        guard first < range.count,
            range[first] == UInt8(ascii: "*") || fold(range[first]) == fold(value[type.lowerBound])
        else { return false }
        guard let (rangeType, rangeSubtype) = split(range) else { return false }
        if isStar(range, rangeType) {
            // Only `*/*` may wildcard the type (RFC 9110 §12.5.1); `*/json` is malformed and never matches.
            return isStar(range, rangeSubtype)
        }
        guard equalFolded(value, type, range, rangeType) else { return false }
        return isStar(range, rangeSubtype) || equalFolded(value, subtype, range, rangeSubtype)
    }

    /// The type and subtype bounds of `type/subtype [; params]`; nil when either is empty.
    private static func split(_ b: UnsafeBufferPointer<UInt8>) -> (Range<Int>, Range<Int>)? {
        var lo = 0
        while lo < b.count && (b[lo] == 0x20 || b[lo] == 0x09) { lo += 1 }
        var slash = lo
        while slash < b.count && b[slash] != UInt8(ascii: "/") && b[slash] != UInt8(ascii: ";") { slash += 1 }
        guard slash > lo, slash < b.count, b[slash] == UInt8(ascii: "/") else { return nil }
        var hi = slash + 1
        while hi < b.count && b[hi] != UInt8(ascii: ";") { hi += 1 }
        while hi > slash + 1 && (b[hi - 1] == 0x20 || b[hi - 1] == 0x09) { hi -= 1 }
        guard hi > slash + 1 else { return nil }
        return (lo..<slash, (slash + 1)..<hi)
    }

    /// Whether the bytes in `part` are exactly `*`.
    private static func isStar(_ b: UnsafeBufferPointer<UInt8>, _ part: Range<Int>) -> Bool {
        part.count == 1 && b[part.lowerBound] == UInt8(ascii: "*")
    }

    /// ASCII case-insensitive equality; media types are case-insensitive tokens (RFC 9110 §8.3.1).
    private static func equalFolded(
        _ a: UnsafeBufferPointer<UInt8>, _ ar: Range<Int>, _ b: UnsafeBufferPointer<UInt8>, _ br: Range<Int>
    ) -> Bool {
        guard ar.count == br.count else { return false }
        var k = 0
        while k < ar.count {
            if fold(a[ar.lowerBound + k]) != fold(b[br.lowerBound + k]) { return false }
            k += 1
        }
        return true
    }

    /// The ASCII lowercase of c.
    @inline(__always)
    private static func fold(_ c: UInt8) -> UInt8 {
        c &- UInt8(ascii: "A") < 26 ? c | 0x20 : c
    }
}
