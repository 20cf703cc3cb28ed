// Where Peel's parser and the demo's parser differ by design. Each rule excuses one refusal by one
// side of a request the other side accepted, and only after checking, from the accepted request and
// its raw bytes, that the request really has the property the rule is about. Everything else that
// differs is a bug in one of them: a different boundary or body is request smuggling.
@testable import DemoParser

/// One message's raw bytes as sent, split where RFC 9112 frames it. Only built for a message some
/// reader accepted, so its head is there and every line in it ends with CRLF.
struct RawMessage {
    var requestLine: ArraySlice<UInt8> = []
    var fieldLines: [ArraySlice<UInt8>] = []
    /// Body framing and trailers as sent.
    var afterHead: ArraySlice<UInt8> = []

    init(_ bytes: ArraySlice<UInt8>) {
        var i = bytes.startIndex
        while i + 1 < bytes.endIndex && bytes[i] == 0x0D && bytes[i + 1] == 0x0A { i += 2 }
        var lines: [ArraySlice<UInt8>] = []
        var from = i
        while i + 1 < bytes.endIndex {
            if bytes[i] == 0x0D && bytes[i + 1] == 0x0A {
                if i == from {
                    afterHead = bytes[(i + 2)...]
                    break
                }
                lines.append(bytes[from..<i])
                i += 2
                from = i
            } else {
                i += 1
            }
        }
        requestLine = lines.first ?? []
        fieldLines = Array(lines.dropFirst())
    }

    /// The CRLF-separated lines after the head (chunk-size lines among chunk data and trailers).
    var bodyLines: [ArraySlice<UInt8>] { afterHead.split(separator: 0x0A, omittingEmptySubsequences: false).map { $0.last == 0x0D ? $0.dropLast() : $0 } }
}

private func isHex(_ b: UInt8) -> Bool {
    (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x46) || (b >= 0x61 && b <= 0x66)
}

/// The limits both parsers were given, and how many stream bytes followed the last common boundary.
struct Context {
    var limits: HTTP1Parser.Limits
    var demoMaxHead: Int
    /// Bytes from the start of the message in question to the end of the input.
    var remaining: Int
}

enum Differences {
    /// Why the demo may refuse a request Peel accepted (`m`, raw bytes `raw`), or nil.
    static func demoRefusal(_ r: RequestRefusal, accepted m: Message, raw: RawMessage, _ c: Context) -> String? {
        switch r.reason {
        case "missing Host", "more than one Host":
            // The demo is an origin server and enforces RFC 9112 §3.2's Host rule; Peel forwards and
            // leaves Host to the route (the gateway sets its own towards the upstream).
            let hosts = m.values("host").count
            return (m.version == "HTTP/1.1" && hosts != 1) || hosts > 1 ? "Host rule" : nil
        case "invalid request target form", "invalid request target":
            // The demo checks the target's form (RFC 9112 §3.2) and refuses obs-text in it; Peel takes
            // any run of non-control bytes and leaves the target to routing.
            return (try? HTTPGrammar.requestLine(raw.requestLine)) == nil ? "target form" : nil
        case "invalid Content-Length":
            // The demo caps Content-Length at 12 characters; Peel reads any digit run up to 2^50, so
            // leading zeros past 12 digits are refused by the demo alone.
            return m.values("content-length").contains { $0.utf8.count > 12 && $0.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 } }
                ? "long Content-Length" : nil
        case "invalid chunk size":
            // RFC 9112 §7.1.1: BWS after the size may only precede ";". Peel starts the (dropped)
            // extension at the first SP/HTAB and reads no further, so `5 x` is size 5 to Peel and
            // refused by the demo. The size is the same either way: no framing difference.
            let sloppy = raw.bodyLines.contains { line in
                let digits = line.prefix(while: isHex)
                let rest = line.dropFirst(digits.count)
                guard !digits.isEmpty, let ws = rest.first, ws == 0x20 || ws == 0x09 else { return false }
                let after = rest.drop { $0 == 0x20 || $0 == 0x09 }
                return !after.isEmpty && after.first != UInt8(ascii: ";")
            }
            return sloppy && isChunkedHeadOK(m, raw) ? "chunk extension syntax" : nil
        case "field line without colon", "invalid field name", "invalid byte in field value", "obsolete line folding":
            // Trailer fields: the demo checks them like header fields (then drops them), Peel only
            // refuses controls and obs-fold in them (then drops them). A head the demo accepts puts the
            // refusal in the trailer section.
            return isChunkedHeadOK(m, raw) ? "trailer field syntax" : nil
        default:
            // The demo counts head bytes from the request line, Peel from the first byte it holds
            // (empty lines before the request line included), and the demo bounds trailers by maxHead.
            if r.status == 431 && c.remaining > c.demoMaxHead { return "head size accounting" }
            if r.reason == "chunk size line too long" && c.remaining > 4096 { return "chunk line limit" }
            return nil
        }
    }

    /// Why Peel may refuse a request the demo accepted, or nil.
    static func peelRefusal(_ e: RequestError, accepted m: Message, raw: RawMessage, _ c: Context) -> String? {
        switch e {
        case .malformed(.badVersion):
            // The demo answers HTTP/1.2 to 1.9 as 1.1 (RFC 9110 §6.2); Peel knows only 1.0 and 1.1.
            let v = raw.requestLine.split(separator: 0x20, omittingEmptySubsequences: false).last ?? []
            return v.count == 8 && v.starts(with: "HTTP/1.".utf8) && v.last! >= UInt8(ascii: "2") ? "HTTP/1.x minor" : nil
        case .malformed(.badTransferEncoding):
            // Demo bug (see asciiKeepAlive): its Unicode lowercasing reads `chun\u{212A}ed` (KELVIN
            // SIGN) as chunked. Peel compares bytes and refuses any coding but ASCII `chunked`.
            return m.values("transfer-encoding").contains { $0.utf8.contains { $0 >= 0x80 } } ? "demo: Unicode case folding" : nil
        case .malformed(.bodyNotAllowed):
            // Peel cannot forward a body on HEAD or TRACE (curl would not send it); the demo reads it.
            return m.method == "HEAD" || m.method == "TRACE" ? "body on HEAD/TRACE" : nil
        case .expectationFailed:
            // Peel answers an unknown expectation 417 (RFC 9110 §10.1.1 allows it); the demo ignores
            // it. Peel looks at every Expect field (each a list), in HTTP/1.1 only.
            guard m.version == "HTTP/1.1" else { return nil }
            return m.values("expect").contains(where: { !onlyContinue($0) }) ? "Expect" : nil
        case .malformed(.badChunk):
            // Peel allows 12 hex digits in a chunk size, the demo 15 (leading zeros make the difference).
            let long = raw.bodyLines.contains { $0.prefix(while: isHex).count > 12 }
            return long ? "chunk size digits" : nil
        case .headTooLarge:
            // See the demo's 431; and Peel alone limits the number of fields.
            return c.remaining > c.limits.maxHead || m.fields.count >= c.limits.maxFields ? "head size accounting" : nil
        case .targetTooLong:
            // Only Peel limits the request line.
            return c.remaining > c.limits.maxRequestLine ? "request line limit" : nil
        default:
            return nil
        }
    }

    /// The accepted message is chunked and the demo's grammar accepts its head, so a refusal by the
    /// demo came from the body or trailers.
    private static func isChunkedHeadOK(_ m: Message, _ raw: RawMessage) -> Bool {
        guard !m.values("transfer-encoding").isEmpty else { return false }
        guard let head = try? HTTPGrammar.head([raw.requestLine] + raw.fieldLines, maxBody: Int.max) else { return false }
        return head.framing == .chunked
    }
}

/// True when an Expect value is a list of nothing but `100-continue` (ASCII case-insensitive), as
/// Peel's machine reads it.
func onlyContinue(_ value: String) -> Bool {
    let items: [Substring] = value.utf8.split(separator: UInt8(ascii: ",")).map { item in
        var t = Substring(item)
        while let f = t.first, f == " " || f == "\t" { t = t.dropFirst() }
        while let l = t.last, l == " " || l == "\t" { t = t.dropLast() }
        return t
    }.filter { !$0.isEmpty }
    return !items.isEmpty && items.allSatisfy { $0.utf8.elementsEqual("100-continue".utf8) || $0.lowercased() == "100-continue" }
}
