/// An incremental RFC 9112 framing check over the raw bytes a client sends, run before evhttp
/// parses them. evhttp 2.1 accepts things RFC 9112 says to refuse (bare LF, obs-fold, NUL in a
/// field) and ignores bodies on GET/DELETE/OPTIONS, which would make Peel and its client disagree
/// on where a request ends. Pure: no pointers beyond the bytes it is fed.
struct HTTP1Framing {
    /// Why a request was refused.
    enum Violation: String, Equatable, Sendable {
        case bareLF = "bare LF line ending"
        case controlCharacter = "control character in the request head"
        case obsFold = "obsolete line folding"
        case badRequestLine = "malformed request line"
        case badVersion = "unsupported HTTP version"
        case badFieldName = "malformed header field name"
        case spaceBeforeColon = "whitespace between header name and colon"
        case badContentLength = "invalid Content-Length"
        case duplicateContentLength = "more than one Content-Length"
        case lengthAndChunked = "both Transfer-Encoding and Content-Length"
        case badTransferEncoding = "Transfer-Encoding must be exactly chunked"
        case bodyNotAllowed = "a body on a method Peel cannot forward one with"
        case badChunk = "malformed chunked body"
    }

    private enum State {
        case lineStart          // before a request line (empty lines allowed)
        case requestLine
        case fieldStart         // first byte of a header line, or the blank line
        case fieldName
        case fieldValue
        case body(Int)
        case chunkSize
        case chunkExtension
        case chunkData(Int)
        case chunkDataEnd       // CR LF after chunk data
        case trailerStart
        case trailerLine
    }

    private var state = State.lineStart
    private var afterCR = false
    // request line
    private var spaces = 0
    private var methodLength = 0
    private var methodBits: UInt64 = 0
    private var targetLength = 0
    private var version: UInt64 = 0
    private var versionLength = 0
    // header fields
    private var nameLength = 0
    private var nameBits: [UInt8] = []
    private var field = Field.other
    private var valueStarted = false
    private var valueTrailingSpace = false
    private var contentLengths = 0
    private var contentLength = 0
    private var chunked = false
    private var transferEncoding = false
    private var teValue: [UInt8] = []
    // chunks
    private var chunkSize = 0
    private var chunkDigits = 0

    private enum Field { case contentLength, transferEncoding, other }

    /// Bytes of the current (or last) request head, CR LF included.
    private(set) var headBytes = 0

    /// True while a request head is arriving (for the header deadline).
    var inHead: Bool {
        switch state {
        case .requestLine, .fieldStart, .fieldName, .fieldValue: return true
        default: return false
        }
    }

    init() {
        nameBits.reserveCapacity(24)
        teValue.reserveCapacity(32)
    }

    private static func isTchar(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"),
             UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"),
             UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }

    private static let head = pack("HEAD"), trace = pack("TRACE")
    private static let http11 = pack("HTTP/1.1"), http10 = pack("HTTP/1.0")

    private static func pack(_ s: String) -> UInt64 {
        var v: UInt64 = 0
        for b in s.utf8 { v = v << 8 | UInt64(b) }
        return v
    }

    /// Feeds the next bytes; returns the first violation, after which the stream is refused.
    mutating func feed(_ bytes: UnsafeRawBufferPointer) -> Violation? {
        var i = 0
        let n = bytes.count
        while i < n {
            if !afterCR {
                // Most of a head is field values and the target: runs of plain bytes that need no
                // per-byte state, skipped in a tight loop (profiling showed the per-byte path).
                i = skipPlainRun(bytes, from: i)
                if i == n { break }
            }
            let b = bytes[i]
            i += 1
            switch state {
            case .body(let left):
                // Skip the body in one step: its bytes are opaque.
                let take = min(left, n - i + 1)
                i += take - 1
                state = left - take == 0 ? .lineStart : .body(left - take)
                continue
            case .chunkData(let left):
                let take = min(left, n - i + 1)
                i += take - 1
                state = left - take == 0 ? .chunkDataEnd : .chunkData(left - take)
                continue
            default:
                break
            }
            if inHead { headBytes &+= 1 }
            // Line endings: CR must be followed by LF; LF alone is refused (RFC 9112 §2.2).
            if afterCR {
                guard b == 0x0A else { return .bareLF }
                afterCR = false
                if let v = endOfLine() { return v }
                continue
            }
            if b == 0x0D { afterCR = true; continue }
            if b == 0x0A { return .bareLF }
            if let v = byte(b) { return v }
        }
        return nil
    }

    /// Consumes a run of bytes that change nothing but counters: an ordinary field's value (no CTL but
    /// HTAB, RFC 9110 §5.5) or the request target (no SP, no CTL); returns where the run stops.
    private mutating func skipPlainRun(_ bytes: UnsafeRawBufferPointer, from start: Int) -> Int {
        var j = start
        let n = bytes.count
        switch state {
        case .fieldValue where field == .other:
            while j < n {
                let c = bytes[j]
                guard (c >= 0x20 && c != 0x7F) || c == 0x09 else { break }
                j += 1
            }
        case .requestLine where spaces == 1:
            while j < n {
                let c = bytes[j]
                guard c > 0x20 && c != 0x7F else { break }
                j += 1
            }
            targetLength += j - start
        default:
            return start
        }
        headBytes &+= j - start
        return j
    }

    private mutating func byte(_ b: UInt8) -> Violation? {
        switch state {
        case .lineStart:
            state = .requestLine
            headBytes = 1
            spaces = 0; methodLength = 0; methodBits = 0; targetLength = 0; version = 0; versionLength = 0
            return requestLineByte(b)
        case .requestLine:
            return requestLineByte(b)
        case .fieldStart:
            if b == 0x20 || b == 0x09 { return .obsFold }
            state = .fieldName
            nameLength = 0
            nameBits.removeAll(keepingCapacity: true)
            return fieldNameByte(b)
        case .fieldName:
            return fieldNameByte(b)
        case .fieldValue:
            if b < 0x20 && b != 0x09 || b == 0x7F { return .controlCharacter }
            let ows = b == 0x20 || b == 0x09
            if !valueStarted && ows { return nil }
            if !ows, valueStarted, valueTrailingSpace, field != .other {
                // Interior whitespace is meaningless in these two fields; keep it simple and strict.
                return field == .contentLength ? .badContentLength : .badTransferEncoding
            }
            valueStarted = true
            if ows { valueTrailingSpace = true; return nil }
            valueTrailingSpace = false
            switch field {
            case .contentLength:
                guard b >= 0x30 && b <= 0x39 else { return .badContentLength }
                let (m, o1) = contentLength.multipliedReportingOverflow(by: 10)
                let (s, o2) = m.addingReportingOverflow(Int(b - 0x30))
                if o1 || o2 || s > 1 << 50 { return .badContentLength }
                contentLength = s
            case .transferEncoding:
                if teValue.count < 32 { teValue.append(b | 0x20) } else { return .badTransferEncoding }
            case .other:
                break
            }
            return nil
        case .chunkSize:
            if let d = hexValue(b) {
                chunkDigits += 1
                if chunkDigits > 12 { return .badChunk }
                chunkSize = chunkSize << 4 | d
                return nil
            }
            if chunkDigits == 0 { return .badChunk }
            if b == UInt8(ascii: ";") || b == 0x20 || b == 0x09 { state = .chunkExtension; return nil }
            return .badChunk
        case .chunkExtension:
            if b < 0x20 && b != 0x09 || b == 0x7F { return .badChunk }
            return nil
        case .chunkDataEnd:
            return .badChunk
        case .trailerStart:
            if b == 0x20 || b == 0x09 { return .obsFold }
            state = .trailerLine
            return nil
        case .trailerLine:
            if b < 0x20 && b != 0x09 || b == 0x7F { return .controlCharacter }
            return nil
        case .body, .chunkData:
            return nil
        }
    }

    private mutating func requestLineByte(_ b: UInt8) -> Violation? {
        if b < 0x20 || b == 0x7F { return .controlCharacter }
        if b == 0x20 {
            spaces += 1
            if spaces > 2 || (spaces == 1 && methodLength == 0) || (spaces == 2 && targetLength == 0) { return .badRequestLine }
            return nil
        }
        switch spaces {
        case 0:
            guard Self.isTchar(b) else { return .badRequestLine }
            methodLength += 1
            if methodLength <= 8 { methodBits = methodBits << 8 | UInt64(b) }
        case 1:
            targetLength += 1
        default:
            versionLength += 1
            if versionLength > 8 { return .badVersion }
            version = version << 8 | UInt64(b)
        }
        return nil
    }

    private mutating func fieldNameByte(_ b: UInt8) -> Violation? {
        if b == UInt8(ascii: ":") {
            if nameLength == 0 { return .badFieldName }
            state = .fieldValue
            valueStarted = false
            valueTrailingSpace = false
            if nameBits.count == 14 && nameBits.elementsEqual("content-length".utf8) {
                field = .contentLength
                contentLengths += 1
                if contentLengths > 1 { return .duplicateContentLength }
                contentLength = 0
            } else if nameBits.count == 17 && nameBits.elementsEqual("transfer-encoding".utf8) {
                field = .transferEncoding
                if transferEncoding { teValue.append(UInt8(ascii: ",")) }
                transferEncoding = true
            } else {
                field = .other
            }
            return nil
        }
        if b == 0x20 || b == 0x09 { return .spaceBeforeColon }
        guard Self.isTchar(b) else { return .badFieldName }
        nameLength += 1
        if nameBits.count < 18 { nameBits.append(b | 0x20) }
        return nil
    }

    private mutating func endOfLine() -> Violation? {
        switch state {
        case .lineStart:
            return nil  // empty lines before a request line are ignored (RFC 9112 §2.2)
        case .requestLine:
            guard spaces == 2, versionLength == 8 else { return .badRequestLine }
            guard version == Self.http11 || version == Self.http10 else { return .badVersion }
            state = .fieldStart
            contentLengths = 0; contentLength = 0; transferEncoding = false
            teValue.removeAll(keepingCapacity: true)
            return nil
        case .fieldName:
            return .badFieldName
        case .fieldValue:
            if field == .contentLength && !valueStarted { return .badContentLength }
            state = .fieldStart
            return nil
        case .fieldStart:
            return endOfHead()
        case .chunkSize, .chunkExtension:
            if chunkDigits == 0 { return .badChunk }
            if chunkSize == 0 {
                state = .trailerStart
            } else {
                state = .chunkData(chunkSize)
            }
            return nil
        case .chunkDataEnd:
            state = .chunkSize
            chunkSize = 0
            chunkDigits = 0
            return nil
        case .trailerStart:
            state = .lineStart
            return nil
        case .trailerLine:
            state = .trailerStart
            return nil
        case .body, .chunkData:
            return nil
        }
    }

    private mutating func endOfHead() -> Violation? {
        // libevent 2.1.12 reads a body for every method but HEAD and TRACE; for those it would parse the
        // body as the next request.
        let bodyMethod = !(methodLength <= 8 && (methodBits == Self.head || methodBits == Self.trace))
        if transferEncoding {
            if contentLengths > 0 { return .lengthAndChunked }
            guard teValue.elementsEqual("chunked".utf8), version == Self.http11 else { return .badTransferEncoding }
            guard bodyMethod else { return .bodyNotAllowed }
            state = .chunkSize
            chunkSize = 0
            chunkDigits = 0
            return nil
        }
        if contentLength > 0 {
            guard bodyMethod else { return .bodyNotAllowed }
            state = .body(contentLength)
            return nil
        }
        state = .lineStart
        return nil
    }

    private func hexValue(_ b: UInt8) -> Int? {
        switch b {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return Int(b - 0x30)
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return Int(b - 0x61 + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return Int(b - 0x41 + 10)
        default: return nil
        }
    }
}
