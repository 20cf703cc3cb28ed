/// What every later stage needs of an upstream answer's head, read once: by the head collector
/// when the final head is whole (from the offsets it noted while taking the lines), or from a
/// stored head. Stages read these instead of walking the fields again.
public struct ResponseFacts: Sendable, Equatable {
    /// The final answer's status (RFC 9110 §15).
    public var status: Int
    /// The first Content-Type value, as sent.
    public var contentType: String?
    /// The declared Content-Length when it is one run of digits (RFC 9110 §8.6); nil otherwise.
    public var contentLength: Int?
    /// The first Content-Encoding value, as sent.
    public var contentEncoding: String?
    /// The first Content-Disposition value, as sent.
    public var contentDisposition: String?
    /// The first ETag value, as sent.
    public var etag: String?

    /// Creates the facts from the values the head carried.
    public init(status: Int, contentType: String? = nil, contentLength: String? = nil, contentEncoding: String? = nil,
                contentDisposition: String? = nil, etag: String? = nil) {
        self.status = status
        self.contentType = contentType
        self.contentLength = contentLength.flatMap(Self.length)
        self.contentEncoding = contentEncoding
        self.contentDisposition = contentDisposition
        self.etag = etag
    }

    /// The facts of a head kept as a value (one walk, stopping at nothing: heads are short).
    public init(status: Int, headers: ResponseHeaders) {
        var type: String?, length: String?, coding: String?, disposition: String?, etag: String?
        headers.forEachField { f in
            switch f.token {
            case .contentType where type == nil: type = f.valueString
            case .contentLength where length == nil: length = f.valueString
            case .contentEncoding where coding == nil: coding = f.valueString
            case .contentDisposition where disposition == nil: disposition = f.valueString
            case .etag where etag == nil: etag = f.valueString
            default: break
            }
        }
        self.init(status: status, contentType: type, contentLength: length, contentEncoding: coding,
                  contentDisposition: disposition, etag: etag)
    }

    /// Whether the body is in a content coding (RFC 9110 §8.4): one is named, and it is not `identity`.
    public var isCoded: Bool {
        guard let c = contentEncoding else { return false }
        let name = c.utf8.drop(while: { $0 == 0x20 || $0 == 0x09 })
        return !name.isEmpty && String(decoding: name, as: UTF8.self).lowercased() != "identity"
    }

    /// Whether the media type is `text/event-stream` (WHATWG HTML §9.2): each event must pass as it arrives.
    public var isEventStream: Bool {
        guard let t = contentType else { return false }
        let type = t.utf8.drop(while: { $0 == 0x20 || $0 == 0x09 })
        return String(decoding: type, as: UTF8.self).lowercased().hasPrefix("text/event-stream")
    }

    /// A Content-Length value as a length: digits only (no sign, no list), as RFC 9110 §8.6 writes it.
    static func length(_ value: String) -> Int? {
        let u = value.utf8
        guard !u.isEmpty, u.count <= 18, u.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int(value)
    }
}
