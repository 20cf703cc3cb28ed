/// Peel's HTTP/1.1 request parser: one pass over the bytes a client sends, each byte read once.
/// It enforces RFC 9112's framing rules (a request either has one meaning or is refused), records
/// where the method, target and fields lie in the request's buffer, and de-chunks a chunked body in
/// place. Pure: no pointers beyond the buffer it is handed, no I/O, no clock.
///
/// Why strict: a proxy that reads a request differently from the server behind it can be made to
/// smuggle a second request inside the first (RFC 9112 §6.3, §11.2). Every lenient reading that
/// libevent's evhttp had (bare LF, obs-fold, NUL in a field, bodies on GET ignored), which Peel
/// used before it had this parser, is refused here.
struct HTTP1Parser {
    typealias Violation = FramingViolation

    /// Bounds the parser enforces while reading.
    struct Limits: Sendable {
        /// Largest request head, request line and fields with their CRLFs (default 64 KiB; 431 above).
        var maxHead = 65_536
        /// Largest request line (default 8 KiB, nginx's; 414 above).
        var maxRequestLine = 8_192
        /// Largest body, declared or de-chunked (default 10 MiB; 413 above).
        var maxBody = 10_485_760
        /// Most header fields in one request (default 256; 431 above).
        var maxFields = 256
    }

    /// Where one header field lies in the request buffer; the value without surrounding whitespace.
    struct FieldRange: Equatable, Sendable {
        var nameStart: Int32
        var nameEnd: Int32
        var valueStart: Int32
        var valueEnd: Int32
        /// The name's token, identified once as the name was read.
        var token = FieldToken.other
    }

    /// What a call to `parse` got to.
    enum Progress: Equatable {
        /// The message is not complete yet.
        case needMore
        /// The whole message (head and body) is in; `messageEnd` says where the next one starts.
        case complete
        /// The request is refused; the connection cannot be read further.
        case refused(RequestError)
    }

    private enum State {
        case lineStart          // before a request line (empty lines allowed)
        case requestLine
        case fieldStart         // first byte of a header line, or the blank line
        case fieldName
        case fieldValue
        case fixedBody          // Content-Length bytes; completion is a matter of count
        case chunkSize
        case chunkSizeSpace     // whitespace after the size: only more of it or ';' may follow
        case chunkExtension
        case chunkData(Int)
        case chunkDataEnd       // CR LF after chunk data
        case trailerStart
        case trailerName
        case trailerLine
        case done
    }

    private enum Field { case contentLength, transferEncoding, connection, expect, other }

    let limits: Limits
    private var state = State.lineStart
    private var afterCR = false
    private var pos = 0
    private var crAt = 0
    // request line
    private var spaces = 0
    private var methodBits: UInt64 = 0
    private var versionBits: UInt64 = 0
    private var versionLength = 0
    // header fields
    private var nameBits = NamePack()
    private var field = Field.other
    private var contentLengths = 0
    private var transferEncoding = false
    private var teValue: [UInt8] = []
    // chunks
    private var trailerBytes = 0
    private var chunkSize = 0
    private var chunkDigits = 0

    /// Where the request line starts (after any empty lines).
    private(set) var requestStart = 0
    /// The method's bytes.
    private(set) var methodRange = 0..<0
    /// The request target's bytes.
    private(set) var targetRange = 0..<0
    /// HTTP/1.x minor version (0 or 1).
    private(set) var minorVersion = 1
    /// The fields, in order as sent.
    private(set) var fields: [FieldRange] = []
    /// Index in `fields` of each `Connection` field seen.
    private(set) var connectionFields: [Int] = []
    /// Index in `fields` of each `Expect` field seen.
    private(set) var expectFields: [Int] = []
    /// True once the whole head is in.
    private(set) var headComplete = false
    /// Where the head ends (just after its blank line).
    private(set) var headEnd = 0
    /// The declared Content-Length, 0 when none.
    private(set) var contentLength = 0
    /// True for a chunked body.
    private(set) var chunked = false
    /// Where the (de-chunked) body ends; it starts at `headEnd`.
    private(set) var bodyEnd = 0
    /// Where the next message starts, once `complete`.
    private(set) var messageEnd = 0
    /// De-chunked body bytes moved out of the buffer (to a spool file) by `bodyMovedOut`.
    private(set) var bodyMoved = 0

    /// A parser for one message at a time.
    init(limits: Limits = Limits()) {
        self.limits = limits
        teValue.reserveCapacity(32)
        fields.reserveCapacity(16)
    }

    /// True while a request head is arriving (some of it, not all).
    var inHead: Bool {
        switch state {
        case .requestLine, .fieldStart, .fieldName, .fieldValue: return true
        default: return false
        }
    }

    /// True between a CR and the LF that must follow it.
    var awaitingLF: Bool { afterCR }

    /// True before any byte of the current message other than empty lines. A caller that drops the
    /// empty lines read so far must not while `awaitingLF`: it would lose the CR (the fuzz target
    /// found `\r` | `\nGET ...` refused as a bare LF, and `\r` | `GET ...` accepted without its CR).
    var atMessageStart: Bool {
        if case .lineStart = state { return true }
        return false
    }

    /// Bytes of the body received so far (de-chunked).
    var bodyReceived: Int { headComplete ? (chunked ? bodyMoved + bodyEnd - headEnd : max(0, pos - headEnd)) : 0 }

    /// After `compactChunked`, the de-chunked bytes `headEnd..<bodyEnd` were taken out of the buffer
    /// (into the body's spool file) and the buffer cut back to the head: parsing goes on at
    /// `headEnd`, and the bytes still count toward `maxBody`. False (and nothing changes) unless
    /// every byte read so far is parsed and compacted, as `compactChunked` leaves a body in progress.
    mutating func bodyMovedOut() -> Bool {
        guard chunked, headComplete, pos == bodyEnd else { return false }
        if case .done = state { return false }
        bodyMoved += bodyEnd - headEnd
        bodyEnd = headEnd
        pos = headEnd
        return true
    }

    /// Forgets the message; the next `parse` reads a new one from offset 0 of its buffer.
    mutating func reset() {
        state = .lineStart
        afterCR = false
        pos = 0
        requestStart = 0
        methodRange = 0..<0
        targetRange = 0..<0
        minorVersion = 1
        fields.removeAll(keepingCapacity: true)
        connectionFields.removeAll(keepingCapacity: true)
        expectFields.removeAll(keepingCapacity: true)
        headComplete = false
        headEnd = 0
        contentLength = 0
        chunked = false
        bodyEnd = 0
        messageEnd = 0
        bodyMoved = 0
    }

    @inline(__always)
    private static func isTchar(_ b: UInt8) -> Bool { isTokenByte(b) }

    private static let head = pack("HEAD"), trace = pack("TRACE")
    private static let http11 = pack("HTTP/1.1"), http10 = pack("HTTP/1.0"), http20 = pack("HTTP/2.0")
    /// `PRI`, the HTTP/2 preface's method (RFC 9113 §3.4), packed like `methodBits`.
    private static let priMethod: UInt64 = 0x50_52_49

    private static func pack(_ s: String) -> UInt64 {
        var v: UInt64 = 0
        for b in s.utf8 { v = v << 8 | UInt64(b) }
        return v
    }


    /// Reads what has arrived of the current message: `buffer` holds it from offset 0 (its first
    /// byte) to the last byte received. Resumes where the previous call stopped; chunked bodies are
    /// moved down in place, so bytes after `pos` may be rewritten.
    mutating func parse(_ buffer: UnsafeMutableRawBufferPointer) -> Progress {
        let n = buffer.count
        var i = pos
        defer { pos = i }
        while i < n {
            switch state {
            case .fixedBody:
                // Opaque: complete once enough bytes are there.
                if n >= headEnd + contentLength {
                    i = headEnd + contentLength
                    bodyEnd = i
                    return finish(at: i)
                }
                i = n
                return .needMore
            case .chunkData(let left):
                let take = min(left, n - i)
                if bodyEnd != i, let base = buffer.baseAddress {
                    (base + bodyEnd).copyMemory(from: base + i, byteCount: take)
                }
                bodyEnd += take
                i += take
                state = left == take ? .chunkDataEnd : .chunkData(left - take)
                continue
            case .done:
                return .complete
            default:
                break
            }
            if !afterCR {
                // Most of a head is field values and the target: runs of plain bytes that need no
                // per-byte state, skipped in a tight loop (profiling showed the per-byte path).
                i = skipPlainRun(buffer, from: i)
                if i == n { break }
            }
            let b = buffer[i]
            i += 1
            // Line endings: CR must be followed by LF; LF alone is refused (RFC 9112 §2.2).
            if afterCR {
                guard b == 0x0A else { return .refused(.malformed(.bareLF)) }
                afterCR = false
                if let r = endOfLine(buffer, lineEnd: crAt, next: i) { return r }
                if case .done = state { return .complete }
                if case .fixedBody = state { continue }
                continue
            }
            if b == 0x0D {
                afterCR = true
                crAt = i - 1
                if let r = checkHeadSize(i) { return r }
                continue
            }
            if b == 0x0A { return .refused(.malformed(.bareLF)) }
            if b == 0x16, case .lineStart = state {
                // A TLS record header (RFC 8446 §5.1): handshake (0x16), then legacy version 0x03 0x0x.
                // Told apart from a stray control character, which the request line refuses below.
                if n - i < 2 { i -= 1; return .needMore }
                if buffer[i] == 0x03 && buffer[i + 1] <= 0x04 { return .refused(.tlsHandshake) }
            }
            if let r = byte(b, at: i - 1) { return r }
        }
        if let r = checkHeadSize(i) { return r }
        return .needMore
    }

    // The head's bounds, empty lines before it included (else endless CRLFs would grow the buffer).
    /// After `parse` returned `needMore` on a chunked body, moves the bytes not parsed yet down to the
    /// end of the de-chunked body, so chunk framing never accumulates in the buffer; returns the
    /// buffer's new count. Only chunk states use absolute offsets of earlier bytes, and none is kept.
    mutating func compactChunked(_ buffer: UnsafeMutableRawBufferPointer) -> Int {
        guard chunked, headComplete, pos > bodyEnd, let base = buffer.baseAddress else { return buffer.count }
        switch state {
        case .chunkSize, .chunkSizeSpace, .chunkExtension, .chunkData, .chunkDataEnd, .trailerStart, .trailerName, .trailerLine:
            break
        default: return buffer.count
        }
        let rest = buffer.count - pos
        if rest > 0 { (base + bodyEnd).copyMemory(from: base + pos, byteCount: rest) }
        pos = bodyEnd
        return bodyEnd + rest
    }

    private func checkHeadSize(_ i: Int) -> Progress? {
        switch state {
        case .requestLine:
            if i - requestStart > limits.maxRequestLine { return .refused(.targetTooLong) }
        case .lineStart, .fieldStart, .fieldName, .fieldValue:
            break
        default:
            return nil
        }
        return i > limits.maxHead ? .refused(.headTooLarge) : nil
    }

    private mutating func finish(at end: Int) -> Progress {
        messageEnd = end
        state = .done
        return .complete
    }

    /// Consumes a run of bytes that need no per-byte state change: an ordinary field's value (no CTL
    /// but HTAB, RFC 9110 §5.5), the request target (no SP, no CTL), or a field name's token
    /// characters (packed for the names Peel acts on); returns where the run stops.
    private mutating func skipPlainRun(_ bytes: UnsafeMutableRawBufferPointer, from start: Int) -> Int {
        var j = start
        let n = bytes.count
        switch state {
        case .fieldName:
            let nameStart = Int(fields[fields.count - 1].nameStart)
            var words = nameBits
            while j < n {
                let c = bytes[j]
                guard Self.isTchar(c) else { break }
                words.add(c, at: j - nameStart)
                j += 1
            }
            nameBits = words
        case .fieldValue where field != .contentLength && field != .transferEncoding:
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
        default:
            return start
        }
        return j
    }

    private mutating func byte(_ b: UInt8, at i: Int) -> Progress? {
        switch state {
        case .trailerStart, .trailerName, .trailerLine:
            // The trailer section is bounded like a head (it is read and dropped, never kept).
            trailerBytes += 1
            if trailerBytes > limits.maxHead { return .refused(.headTooLarge) }
        default:
            break
        }
        switch state {
        case .lineStart:
            state = .requestLine
            requestStart = i
            spaces = 0; methodBits = 0; versionBits = 0; versionLength = 0
            return requestLineByte(b, at: i)
        case .requestLine:
            return requestLineByte(b, at: i)
        case .fieldStart:
            if b == 0x20 || b == 0x09 { return .refused(.malformed(.obsFold)) }
            if fields.count >= limits.maxFields { return .refused(.headTooLarge) }
            state = .fieldName
            nameBits = NamePack()
            let at = Int32(truncatingIfNeeded: i)
            fields.append(FieldRange(nameStart: at, nameEnd: at, valueStart: at, valueEnd: at))
            return fieldNameByte(b, at: i)
        case .fieldName:
            return fieldNameByte(b, at: i)
        case .fieldValue:
            if b < 0x20 && b != 0x09 || b == 0x7F { return .refused(.malformed(.controlCharacter)) }
            switch field {
            case .contentLength:
                // Digits only, with optional whitespace around them (checked at the line's end).
                if b == 0x20 || b == 0x09 || (b >= 0x30 && b <= 0x39) { return nil }
                return .refused(.malformed(.badContentLength))
            case .transferEncoding:
                if b == 0x20 || b == 0x09 { return nil }
                if teValue.count < 32 { teValue.append(b | 0x20) } else { return .refused(.malformed(.badTransferEncoding)) }
                return nil
            default:
                return nil
            }
        case .chunkSize:
            if let d = Self.hexValue(b) {
                chunkDigits += 1
                if chunkDigits > 12 { return .refused(.malformed(.badChunk)) }
                chunkSize = chunkSize << 4 | d
                return nil
            }
            if chunkDigits == 0 { return .refused(.malformed(.badChunk)) }
            // Chunk extensions (RFC 9112 §7.1.1: BWS ";" name [= value]) are read and dropped.
            if b == UInt8(ascii: ";") { state = .chunkExtension; return nil }
            if b == 0x20 || b == 0x09 { state = .chunkSizeSpace; return nil }
            return .refused(.malformed(.badChunk))
        case .chunkSizeSpace:
            if b == UInt8(ascii: ";") { state = .chunkExtension; return nil }
            if b == 0x20 || b == 0x09 { return nil }
            return .refused(.malformed(.badChunk))
        case .chunkExtension:
            if b < 0x20 && b != 0x09 || b == 0x7F { return .refused(.malformed(.badChunk)) }
            return nil
        case .chunkDataEnd:
            return .refused(.malformed(.badChunk))
        case .trailerStart:
            if b == 0x20 || b == 0x09 { return .refused(.malformed(.obsFold)) }
            guard Self.isTchar(b) else { return .refused(.malformed(.badFieldName)) }
            state = .trailerName
            return nil
        case .trailerName:
            // A trailer line is a field line like any other (RFC 9112 §7.1.2): token, colon, value.
            if b == UInt8(ascii: ":") { state = .trailerLine; return nil }
            if b == 0x20 || b == 0x09 { return .refused(.malformed(.spaceBeforeColon)) }
            guard Self.isTchar(b) else { return .refused(.malformed(.badFieldName)) }
            return nil
        case .trailerLine:
            if b < 0x20 && b != 0x09 || b == 0x7F { return .refused(.malformed(.controlCharacter)) }
            return nil
        case .fixedBody, .chunkData, .done:
            return nil
        }
    }

    private mutating func requestLineByte(_ b: UInt8, at i: Int) -> Progress? {
        if b < 0x20 || b == 0x7F { return .refused(.malformed(.controlCharacter)) }
        if b == 0x20 {
            spaces += 1
            switch spaces {
            case 1:
                if i == requestStart { return .refused(.malformed(.badRequestLine)) }
                methodRange = requestStart..<i
                targetRange = (i + 1)..<(i + 1)
            case 2:
                if i == targetRange.lowerBound { return .refused(.malformed(.badRequestLine)) }
                targetRange = targetRange.lowerBound..<i
            default:
                return .refused(.malformed(.badRequestLine))
            }
            return nil
        }
        switch spaces {
        case 0:
            guard Self.isTchar(b) else { return .refused(.malformed(.badRequestLine)) }
            if i - requestStart < 8 { methodBits = methodBits << 8 | UInt64(b) } else { methodBits = .max }
        case 1:
            break
        default:
            versionLength += 1
            if versionLength > 8 { return .refused(.malformed(.badVersion)) }
            versionBits = versionBits << 8 | UInt64(b)
        }
        return nil
    }

    private mutating func fieldNameByte(_ b: UInt8, at i: Int) -> Progress? {
        let f = fields.count - 1
        if b == UInt8(ascii: ":") {
            let length = i - Int(fields[f].nameStart)
            if length == 0 { return .refused(.malformed(.badFieldName)) }
            fields[f].nameEnd = Int32(truncatingIfNeeded: i)
            fields[f].valueStart = Int32(truncatingIfNeeded: i + 1)
            state = .fieldValue
            // The one place a request field's name is identified; every later stage reads the token.
            let token = FieldToken.identify(nameBits, length: length)
            fields[f].token = token
            switch token {
            case .contentLength:
                field = .contentLength
                contentLengths += 1
                if contentLengths > 1 { return .refused(.malformed(.duplicateContentLength)) }
            case .transferEncoding:
                field = .transferEncoding
                if transferEncoding { teValue.append(UInt8(ascii: ",")) }
                transferEncoding = true
            case .connection:
                field = .connection
                connectionFields.append(f)
            case .expect:
                field = .expect
                expectFields.append(f)
            default:
                field = .other
            }
            return nil
        }
        if b == 0x20 || b == 0x09 { return .refused(.malformed(.spaceBeforeColon)) }
        guard Self.isTchar(b) else { return .refused(.malformed(.badFieldName)) }
        nameBits.add(b, at: i - Int(fields[f].nameStart))
        return nil
    }

    private mutating func endOfLine(_ buffer: UnsafeMutableRawBufferPointer, lineEnd: Int, next: Int) -> Progress? {
        switch state {
        case .lineStart:
            return nil  // empty lines before a request line are ignored (RFC 9112 §2.2)
        case .requestLine:
            guard spaces == 2, versionLength == 8 else { return .refused(.malformed(.badRequestLine)) }
            if versionBits == Self.http11 {
                minorVersion = 1
            } else if versionBits == Self.http10 {
                minorVersion = 0
            } else if versionBits >> 8 == Self.http11 >> 8, versionBits & 0xFF >= 0x32, versionBits & 0xFF <= 0x39 {
                // RFC 9110 §2.5: a later 1.x minor version is answered as the highest one supported.
                minorVersion = 1
            } else if methodBits == Self.priMethod && versionBits == Self.http20 {
                // The start of an HTTP/2 client's connection preface (prior knowledge, RFC 9113 §3.3).
                return .refused(.http2Preface)
            } else {
                return .refused(.malformed(.badVersion))
            }
            state = .fieldStart
            contentLengths = 0; contentLength = 0; transferEncoding = false
            teValue.removeAll(keepingCapacity: true)
            return nil
        case .fieldName:
            return .refused(.malformed(.badFieldName))
        case .fieldValue:
            let f = fields.count - 1
            // The value without the optional whitespace around it (RFC 9110 §5.5).
            var a = Int(fields[f].valueStart)
            var z = lineEnd
            while a < z && (buffer[a] == 0x20 || buffer[a] == 0x09) { a += 1 }
            while z > a && (buffer[z - 1] == 0x20 || buffer[z - 1] == 0x09) { z -= 1 }
            fields[f].valueStart = Int32(truncatingIfNeeded: a)
            fields[f].valueEnd = Int32(truncatingIfNeeded: z)
            if field == .contentLength {
                // One run of digits; interior whitespace (`1 2`) and an empty value are refused.
                guard a < z else { return .refused(.malformed(.badContentLength)) }
                var v = 0
                for k in a..<z {
                    let d = buffer[k]
                    guard d >= 0x30 && d <= 0x39 else { return .refused(.malformed(.badContentLength)) }
                    let (m, o1) = v.multipliedReportingOverflow(by: 10)
                    let (s, o2) = m.addingReportingOverflow(Int(d - 0x30))
                    if o1 || o2 || s > 1 << 50 { return .refused(.malformed(.badContentLength)) }
                    v = s
                }
                contentLength = v
            } else if field == .transferEncoding {
                // Whitespace inside the coding list is meaningless; refuse it rather than guess.
                for k in a..<z where buffer[k] == 0x20 || buffer[k] == 0x09 {
                    if k > a && buffer[k - 1] != UInt8(ascii: ",") { return .refused(.malformed(.badTransferEncoding)) }
                }
            }
            state = .fieldStart
            return nil
        case .fieldStart:
            return endOfHead(next)
        case .chunkSize, .chunkSizeSpace, .chunkExtension:
            if chunkDigits == 0 { return .refused(.malformed(.badChunk)) }
            if chunkSize == 0 {
                trailerBytes = 0
                state = .trailerStart
            } else {
                if bodyMoved + bodyEnd - headEnd + chunkSize > limits.maxBody { return .refused(.bodyTooLarge) }
                state = .chunkData(chunkSize)
            }
            return nil
        case .chunkDataEnd:
            state = .chunkSize
            chunkSize = 0
            chunkDigits = 0
            return nil
        case .trailerStart:
            // Trailer fields are read and dropped: the body is forwarded with a Content-Length.
            return finish(at: next)
        case .trailerName:
            return .refused(.malformed(.badFieldName))
        case .trailerLine:
            state = .trailerStart
            return nil
        case .fixedBody, .chunkData, .done:
            return nil
        }
    }

    private mutating func endOfHead(_ next: Int) -> Progress? {
        headComplete = true
        headEnd = next
        bodyEnd = next
        // A body on HEAD or TRACE cannot be forwarded: a lenient reader would take it for the next request.
        let noBody = methodBits == Self.head || methodBits == Self.trace
        if transferEncoding {
            if contentLengths > 0 { return .refused(.malformed(.lengthAndChunked)) }
            // RFC 9112 §6.3: chunked must be the final (here: the only) coding; HTTP/1.0 has none.
            guard teValue.elementsEqual("chunked".utf8), minorVersion == 1 else { return .refused(.malformed(.badTransferEncoding)) }
            guard !noBody else { return .refused(.malformed(.bodyNotAllowed)) }
            chunked = true
            state = .chunkSize
            chunkSize = 0
            chunkDigits = 0
            return nil
        }
        if contentLength > 0 {
            guard !noBody else { return .refused(.malformed(.bodyNotAllowed)) }
            if contentLength > limits.maxBody { return .refused(.bodyTooLarge) }
            state = .fixedBody
            return nil
        }
        return finish(at: next)
    }

    private static func hexValue(_ b: UInt8) -> Int? {
        switch b {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return Int(b - 0x30)
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return Int(b - 0x61 + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return Int(b - 0x41 + 10)
        default: return nil
        }
    }
}
