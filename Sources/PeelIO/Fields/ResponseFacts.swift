/// What every later stage needs of an upstream answer's head, read once: by the head collector
/// when the final head is whole (from the offsets it noted while taking the lines), or from a
/// stored head. Stages read these instead of walking the fields again. A class, immutable: the
/// facts travel with the head through several stages, and a copy is one reference, not a copy of
/// each of its strings.
public final class ResponseFacts: Sendable, Equatable {
    /// The final answer's status (RFC 9110 §15).
    public let status: Int
    /// The first Content-Type value, as sent.
    public let contentType: String?
    /// The declared Content-Length when it is one run of digits (RFC 9110 §8.6); nil otherwise.
    public let contentLength: Int?
    /// The first Content-Encoding value, as sent.
    public let contentEncoding: String?
    /// The first Content-Disposition value, as sent.
    public let contentDisposition: String?
    /// Whether the body is in a content coding (RFC 9110 §8.4): one is named, and it is not `identity`.
    public let isCoded: Bool
    /// Whether the media type is `text/event-stream` (WHATWG HTML §9.2): each event must pass as it arrives.
    public let isEventStream: Bool

    /// Creates the facts from the values the head carried, its length already read.
    public init(status: Int, contentType: String? = nil, length: Int?, contentEncoding: String? = nil,
                contentDisposition: String? = nil) {
        self.status = status
        self.contentType = contentType
        contentLength = length
        self.contentEncoding = contentEncoding
        self.contentDisposition = contentDisposition
        isCoded = contentEncoding.map { c in
            Self.afterSpace(c) < c.utf8.count && !Self.equalsLowercased(c, "identity", prefixOnly: false)
        } ?? false
        isEventStream = contentType.map { Self.equalsLowercased($0, "text/event-stream", prefixOnly: true) } ?? false
    }

    /// How many SP and HTAB bytes `s` starts with.
    private static func afterSpace(_ s: String) -> Int {
        var n = 0
        for b in s.utf8 {
            guard b == 0x20 || b == 0x09 else { break }
            n += 1
        }
        return n
    }

    /// Whether `s`, after leading SP and HTAB, equals `lowercased` without ASCII case (or starts
    /// with it, `prefixOnly`); read in place, with no lowercased copy.
    static func equalsLowercased(_ s: String, _ lowercased: StaticString, prefixOnly: Bool) -> Bool {
        let count = lowercased.utf8CodeUnitCount
        let skip = afterSpace(s)
        let rest = s.utf8.count - skip
        guard prefixOnly ? rest >= count : rest == count else { return false }
        var k = 0
        for b in s.utf8.dropFirst(skip) {
            if k == count { break }
            guard (b &- 0x41 < 26 ? b | 0x20 : b) == lowercased.utf8Start[k] else { return false }
            k += 1
        }
        return true
    }

    /// Creates the facts from the values the head carried.
    public convenience init(status: Int, contentType: String? = nil, contentLength: String? = nil, contentEncoding: String? = nil,
                            contentDisposition: String? = nil) {
        self.init(status: status, contentType: contentType, length: contentLength.flatMap { Self.length(Array($0.utf8)) },
                  contentEncoding: contentEncoding, contentDisposition: contentDisposition)
    }

    /// The facts of a head kept as a value (one walk: heads are short).
    public convenience init(status: Int, headers: ResponseHeaders) {
        var type: String?, length: String?, coding: String?, disposition: String?
        headers.forEachField { f in
            switch f.token {
            case .contentType where type == nil: type = f.valueString
            case .contentLength where length == nil: length = f.valueString
            case .contentEncoding where coding == nil: coding = f.valueString
            case .contentDisposition where disposition == nil: disposition = f.valueString
            default: break
            }
        }
        self.init(status: status, contentType: type, contentLength: length, contentEncoding: coding, contentDisposition: disposition)
    }

    /// A Content-Length value as a length: digits only (no sign, no list), as RFC 9110 §8.6 writes
    /// it, at most 18 of them, with optional whitespace around.
    static func length<C: Collection>(_ value: C) -> Int? where C.Element == UInt8 {
        var n = 0
        var digits = 0
        var ended = false
        for b in value {
            if b == 0x20 || b == 0x09 {
                // OWS around the value (a folded line leaves a space before it).
                if digits > 0 { ended = true }
                continue
            }
            guard !ended, b &- 0x30 < 10, digits < 18 else { return nil }
            n = n * 10 + Int(b &- 0x30)
            digits += 1
        }
        return digits > 0 ? n : nil
    }

    public static func == (a: ResponseFacts, b: ResponseFacts) -> Bool {
        a.status == b.status && a.contentType == b.contentType && a.contentLength == b.contentLength
            && a.contentEncoding == b.contentEncoding && a.contentDisposition == b.contentDisposition
    }
}
