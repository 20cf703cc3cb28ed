/// Media-type comparison for passthrough rules (RFC 9110 §8.3.1, §12.5.1).
enum MediaType {
    /// Whether a Content-Disposition value's type is `attachment` (RFC 6266 §4.1, case-insensitive).
    static func isAttachment(_ contentDisposition: String) -> Bool {
        var type = Substring(contentDisposition.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
        while type.first == " " || type.first == "\t" { type = type.dropFirst() }
        while type.last == " " || type.last == "\t" { type = type.dropLast() }
        return type.lowercased() == "attachment"
    }

    /// The type and subtype bounds of `type/subtype [; params]`; nil when either is empty.
    static func split(_ b: UnsafeBufferPointer<UInt8>) -> (Range<Int>, Range<Int>)? {
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

    /// The ASCII lowercase of c.
    @inline(__always)
    static func fold(_ c: UInt8) -> UInt8 {
        c &- UInt8(ascii: "A") < 26 ? c | 0x20 : c
    }
}

/// Media ranges (`image/*`, `*/*`, `application/pdf`; RFC 9110 §12.5.1), read once when they are
/// configured: each call's Content-Type is then split once and compared byte by byte, where parsing
/// every range on every call cost about 1.3k instructions a /small request (callgrind).
struct MediaRanges: Sendable {
    /// The ranges as configured.
    let patterns: [String]
    /// Each well-formed range, lowercased; nil stands for `*`. `*/png` (only `*/*` may wildcard the
    /// type) and ranges with an empty type or subtype never match and are left out.
    private let ranges: [(type: [UInt8]?, subtype: [UInt8]?)]

    init(_ patterns: [String]) {
        self.patterns = patterns
        var ranges: [(type: [UInt8]?, subtype: [UInt8]?)] = []
        for p in patterns {
            let bytes = Array(p.utf8)
            bytes.withUnsafeBufferPointer { b in
                guard let (type, subtype) = MediaType.split(b) else { return }
                let t = b[type].map(MediaType.fold)
                let s = b[subtype].map(MediaType.fold)
                if t == [0x2A] {
                    if s == [0x2A] { ranges.append((nil, nil)) }
                    return
                }
                ranges.append((t, s == [0x2A] ? nil : s))
            }
        }
        self.ranges = ranges
    }

    /// Whether a Content-Type value (parameters ignored, case-insensitive) falls in any range.
    func matches(_ contentType: String) -> Bool {
        guard !ranges.isEmpty else { return false }
        return withUTF8Bytes(contentType) { value in
            guard let (type, subtype) = MediaType.split(value) else { return false }
            for r in ranges {
                if let t = r.type, !Self.equal(value, type, t) { continue }
                if let s = r.subtype, !Self.equal(value, subtype, s) { continue }
                return true
            }
            return false
        }
    }

    /// Whether `value[part]`, case-folded, is `lowered`.
    private static func equal(_ value: UnsafeBufferPointer<UInt8>, _ part: Range<Int>, _ lowered: [UInt8]) -> Bool {
        guard part.count == lowered.count else { return false }
        var k = 0
        while k < lowered.count {
            if MediaType.fold(value[part.lowerBound + k]) != lowered[k] { return false }
            k += 1
        }
        return true
    }
}

extension MediaType {
    /// Whether a Content-Type names an RFC 9457 problem document (`application/problem+json`, any
    /// parameters, any case).
    static func isProblem(_ contentType: String) -> Bool {
        let media = contentType.split(separator: ";", maxSplits: 1).first ?? ""
        return media.trimmingSpaces.lowercased() == "application/problem+json"
    }
}

extension Substring {
    /// Without the spaces and tabs around it (RFC 9110 §5.6.3's OWS).
    var trimmingSpaces: Substring {
        var s = self
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" { s.removeLast() }
        return s
    }
}
