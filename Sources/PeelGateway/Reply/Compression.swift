import PeelIO

/// Which answers are compressed, and with which coding: pure, so tests reach it without sockets.
struct CompressionPolicy: Sendable {
    /// Codings Peel offers, in its order of preference when the client's q-values tie; empty is off.
    let offered: [ContentCoding]
    /// Smallest body worth compressing, in bytes: below it the coding's overhead outweighs the gain.
    let minSize: Int

    /// The coding to answer with for what the client accepts (RFC 9110 §12.5.3), or nil for
    /// identity: the offered coding with the highest q above 0, ties going to the earlier in
    /// `offered`. Codings the client did not list are acceptable only through `*`. Identity stays
    /// acceptable unless refused, and wins only when the client ranks it explicitly above every
    /// offered coding.
    static func negotiate(_ accepted: AcceptedCodings?, offered: [ContentCoding]) -> ContentCoding? {
        guard let accepted, !offered.isEmpty else { return nil }
        var best: (coding: ContentCoding, q: Double)? = nil
        for coding in offered {
            let q = accepted.q(coding.rawValue)
            if q > 0 && q > (best?.q ?? 0) { best = (coding, q) }
        }
        guard let best else { return nil }
        if let identity = accepted.explicit["identity"], identity > best.q { return nil }
        return best.coding
    }

    /// The Accept-Encoding Peel sends upstream for a client's: the client's own codings, limited to
    /// those Peel can decode (`decodable`, in that order when q-values tie), highest q first. A
    /// client that sent none, or accepts none of them, gets `identity`: the upstream is asked for no
    /// coding rather than one compressed behind the client's back.
    static func upstreamAcceptEncoding(_ accepted: AcceptedCodings?, decodable: [String]) -> String {
        guard let accepted else { return "identity" }
        var picked: [(name: String, q: Double)] = []
        for coding in decodable {
            let q = accepted.q(coding)
            if q > 0 { picked.append((coding, q)) }
        }
        if picked.isEmpty { return "identity" }
        // A stable sort: ties keep `decodable`'s order.
        let ordered = picked.enumerated().sorted { a, b in a.element.q != b.element.q ? a.element.q > b.element.q : a.offset < b.offset }
        return ordered.map(\.element.name).joined(separator: ", ")
    }

    /// Whether the client takes an answer in `contentEncoding` (the upstream's field value, codings
    /// in the order applied) as it is: every coding named is acceptable to it (q above 0).
    static func accepts(_ accepted: AcceptedCodings?, contentEncoding: String) -> Bool {
        guard let accepted else { return false }
        var any = false
        for element in contentEncoding.split(separator: ",") {
            var name = trimOWS(element).lowercased()
            if name == "x-gzip" { name = "gzip" }
            if name.isEmpty || name == "identity" { continue }
            guard accepted.q(name) > 0 else { return false }
            any = true
        }
        return any
    }

    /// Whether a media type is text that compresses well: JSON (also `+json`, such as
    /// problem+json), `text/*`, JavaScript and XML (also `+xml`, such as SVG). Event streams are left alone: each event must
    /// reach the client as it is written.
    static func isCompressible(_ contentType: String?) -> Bool {
        guard let contentType else { return false }
        let type = trimOWS(contentType.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false).first ?? "").lowercased()
        if type == "text/event-stream" { return false }
        if type.hasPrefix("text/") || type.hasSuffix("+json") || type.hasSuffix("+xml") { return true }
        return type == "application/json" || type == "application/javascript" || type == "application/xml"
    }

    /// Whether an answer is a candidate for compression at all (whatever the client accepts):
    /// candidates vary by Accept-Encoding. 206 answers are ranges of the identity coding (RFC 9110 §14.2).
    func isCandidate(status: Int, contentType: String?, count: Int) -> Bool {
        !offered.isEmpty && count >= minSize && status >= 200 && status != 204 && status != 206 && status != 304
            && Self.isCompressible(contentType)
    }
}

/// A client's Accept-Encoding (RFC 9110 §12.5.3), parsed once per call: the codings it names with
/// their q-values, lowercased, `x-gzip` read as gzip (§8.4.1.3), and the q of `*`; elements with a
/// bad qvalue are ignored. Negotiating the reply's coding, asking the upstream for codings and
/// deciding whether a coded answer passes as it is all read this value.
struct AcceptedCodings: Sendable, ExpressibleByStringLiteral {
    /// The named codings' q-values.
    let explicit: [String: Double]
    /// The q of `*`, when named.
    let star: Double?

    init(_ value: String) {
        var explicit: [String: Double] = [:]
        var star: Double? = nil
        for element in value.split(separator: ",") {
            let parts = element.split(separator: ";")
            guard let first = parts.first else { continue }
            var name = trimOWS(first).lowercased()
            if name.isEmpty { continue }
            if name == "x-gzip" { name = "gzip" }
            var q = 1.0
            var valid = true
            for parameter in parts.dropFirst() {
                let p = trimOWS(parameter)
                guard p.lowercased().hasPrefix("q=") else { continue }
                // qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] ) (RFC 9110 §12.4.2)
                if let v = Double(p.dropFirst(2)), v >= 0, v <= 1, p.count <= 7 { q = v } else { valid = false }
            }
            guard valid else { continue }
            if name == "*" { star = max(star ?? 0, q) } else { explicit[name] = max(explicit[name] ?? 0, q) }
        }
        self.explicit = explicit
        self.star = star
    }

    init(stringLiteral value: String) { self.init(value) }

    /// The q-value the client gives `coding` (lowercase), through `*` when it is not named; 0 when refused.
    func q(_ coding: String) -> Double { explicit[coding] ?? star ?? 0 }
}
