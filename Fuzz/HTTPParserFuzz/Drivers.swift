// The three readers the fuzz target runs over the same bytes: Peel's HTTP1Parser driven directly
// (the way ConnectionMachine drives it), Peel's ConnectionMachine itself, and the demo's
// independent RequestParser. Each yields the same comparable record.
@testable import DemoParser

/// One header field as a reader reports it (value without surrounding whitespace).
struct Field: Equatable {
    var name: String
    var value: String
}

/// One complete request, in a form both parsers can be compared in.
struct Message: Equatable {
    var method: String
    var target: String
    /// `HTTP/1.0` or `HTTP/1.1`.
    var version: String
    var fields: [Field]
    /// De-chunked.
    var body: [UInt8]
    var keepAlive: Bool
    /// Stream offset just past the message (where the next one starts): the smuggling check.
    var end: Int

    /// Every value of a field, matched without case.
    func values(_ name: String) -> [String] { fields.filter { $0.name.lowercased() == name }.map(\.value) }
}

/// How a reader's run over the stream ended.
enum Ending<Refusal: Equatable>: Equatable {
    /// All bytes read, the last request (if any) incomplete.
    case needMore
    /// The reader refused the request after the last accepted one.
    case refused(Refusal)
    /// The last request said the connection closes; nothing after it is read.
    case closed
}

struct Outcome<Refusal: Equatable>: Equatable {
    var messages: [Message] = []
    var ending: Ending<Refusal> = .needMore
}

/// Stops the run with a message libFuzzer prints beside the crashing input.
func disagree(_ what: String, _ stream: [UInt8]) -> Never {
    fatalError("\(what)\n  on \(stream.count) bytes: \(String(decoding: stream.prefix(400), as: UTF8.self).debugDescription)")
}

private func text(_ buffer: RequestBuffer, _ range: Range<Int>) -> String { buffer.string(range) }

/// RFC 9112 §9.3, as ConnectionMachine reads `Connection` (its own rule, so the two cannot drift).
private func keepAlive(_ p: HTTP1Parser, _ buffer: RequestBuffer) -> Bool { ConnectionMachine.keepAlive(p, buffer) }

private func message(_ buffer: RequestBuffer, method: Range<Int>, target: Range<Int>, minor: Int,
                     fields: [HTTP1Parser.FieldRange], body: Range<Int>, keepAlive: Bool, end: Int) -> Message {
    Message(
        method: text(buffer, method), target: text(buffer, target), version: "HTTP/1.\(minor)",
        fields: fields.map {
            Field(name: text(buffer, Int($0.nameStart)..<Int($0.nameEnd)), value: text(buffer, Int($0.valueStart)..<Int($0.valueEnd)))
        },
        body: Array(buffer.slice(body)), keepAlive: keepAlive, end: end)
}

private func isTchar(_ b: UInt8) -> Bool {
    switch b {
    case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: return true
    default: return Array("!#$%&'*+-.^_`|~".utf8).contains(b)
    }
}

/// What must hold of the parser's state after any `parse` call over `buffer`.
private func checkInvariants(_ p: HTTP1Parser, _ progress: HTTP1Parser.Progress, _ buffer: RequestBuffer,
                             _ limits: HTTP1Parser.Limits, _ stream: [UInt8]) {
    let n = buffer.count
    func check(_ ok: Bool, _ what: String) { if !ok { disagree("parser invariant: \(what)", stream) } }
    check(p.bodyReceived >= 0, "bodyReceived \(p.bodyReceived) negative")
    guard p.headComplete else { return }
    check(p.requestStart >= 0 && p.requestStart == p.methodRange.lowerBound, "method does not start the request")
    check(!p.methodRange.isEmpty && p.methodRange.upperBound < p.targetRange.lowerBound, "method range \(p.methodRange)")
    check(!p.targetRange.isEmpty && p.targetRange.upperBound <= p.headEnd, "target range \(p.targetRange)")
    check(p.headEnd <= p.bodyEnd && p.bodyEnd <= n, "body \(p.headEnd)..<\(p.bodyEnd) outside 0..<\(n)")
    check(p.bodyEnd - p.headEnd <= limits.maxBody, "body over maxBody")
    check(p.minorVersion == 0 || p.minorVersion == 1, "minor version \(p.minorVersion)")
    check(!p.chunked || p.contentLength == 0, "chunked with a Content-Length")
    guard case .complete = progress else { return }
    check(p.bodyEnd <= p.messageEnd && p.messageEnd <= n, "messageEnd \(p.messageEnd) outside \(p.bodyEnd)...\(n)")
    if !p.chunked {
        check(p.bodyEnd - p.headEnd == p.contentLength, "fixed body \(p.bodyEnd - p.headEnd) != Content-Length \(p.contentLength)")
        check(p.messageEnd == p.bodyEnd, "fixed body message ends after its body")
    }
    check(p.fields.count <= limits.maxFields, "\(p.fields.count) fields")
    var previous = p.targetRange.upperBound
    let bytes = buffer.bytes
    for f in p.fields {
        let (ns, ne, vs, ve) = (Int(f.nameStart), Int(f.nameEnd), Int(f.valueStart), Int(f.valueEnd))
        check(previous < ns && ns < ne && ne < vs && vs <= ve && ve <= p.headEnd - 4, "field range \(f) after \(previous)")
        check(bytes[ne] == UInt8(ascii: ":"), "field name not followed by a colon")
        check((ns..<ne).allSatisfy { isTchar(bytes[$0]) }, "field name not a token")
        check(vs == ve || (bytes[vs] != 0x20 && bytes[vs] != 0x09 && bytes[ve - 1] != 0x20 && bytes[ve - 1] != 0x09),
              "field value not trimmed")
        check((vs..<ve).allSatisfy { bytes[$0] >= 0x20 && bytes[$0] != 0x7F || bytes[$0] == 0x09 }, "control byte in field value")
        previous = ve
    }
    for f in p.connectionFields { check(f < p.fields.count, "connection field index") }
    for f in p.expectFields { check(f < p.fields.count, "expect field index") }
}

/// Peel's parser driven as ConnectionMachine drives it (append, parse, drop empty lines, compact a
/// chunked body, start a new buffer with the bytes after a complete request), with the invariants
/// checked after every call.
func runPeel(_ stream: [UInt8], pieces: [Range<Int>], limits: HTTP1Parser.Limits) -> Outcome<RequestError> {
    var out = Outcome<RequestError>()
    var parser = HTTP1Parser(limits: limits)
    var buffer = RequestBuffer()
    var start = 0       // stream offset of the buffer's first byte
    var compacted = 0   // chunk framing bytes compactChunked removed from this buffer
    for piece in pieces {
        stream[piece].withUnsafeBytes { buffer.append($0) }
        parsing: while true {
            let progress = parser.parse(buffer.bytes)
            checkInvariants(parser, progress, buffer, limits, stream)
            switch progress {
            case .refused(let e):
                out.ending = .refused(e)
                return out
            case .needMore:
                if parser.atMessageStart {
                    if buffer.count > 0 && !parser.inHead && !parser.awaitingLF {
                        start += buffer.count
                        buffer.count = 0
                        parser.reset()
                    }
                } else if parser.headComplete && parser.chunked {
                    let before = buffer.count
                    buffer.count = parser.compactChunked(buffer.bytes)
                    compacted += before - buffer.count
                }
                break parsing
            case .complete:
                let end = start + compacted + parser.messageEnd
                let m = message(buffer, method: parser.methodRange, target: parser.targetRange, minor: parser.minorVersion,
                                fields: parser.fields, body: parser.headEnd..<parser.bodyEnd,
                                keepAlive: keepAlive(parser, buffer), end: end)
                out.messages.append(m)
                if !m.keepAlive {
                    out.ending = .closed
                    return out
                }
                let next = RequestBuffer()
                if buffer.count > parser.messageEnd {
                    next.append(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(buffer.bytes)[parser.messageEnd...]))
                }
                buffer = next
                start = end
                compacted = 0
                parser.reset()
            }
        }
    }
    return out
}

/// Peel's ConnectionMachine fed through `readSpace`/`received` as the socket shell feeds it. With
/// `deferReplies`, each request is answered only after the next piece arrived, so pipelined bytes are
/// read ahead while a request waits.
func runMachine(_ stream: [UInt8], pieces: [Range<Int>], limits: ConnectionLimits, deferReplies: Bool) -> Outcome<RequestError> {
    var out = Outcome<RequestError>()
    var machine = ConnectionMachine(limits: limits, now: 0)
    var delivered = 0
    var replyOwed = false

    // Follows actions until the machine waits for input; false once the run is over.
    func handle(_ first: ConnectionMachine.Action, mayDefer: Bool) -> Bool {
        var action = first
        while true {
            switch action {
            case .dispatch(let r):
                out.messages.append(message(r.buffer, method: r.method, target: r.target, minor: r.minorVersion, fields: r.fields,
                                            body: r.body, keepAlive: r.keepAlive, end: delivered - machine.buffer.count))
                if mayDefer && r.keepAlive {
                    replyOwed = true
                    return true
                }
                _ = machine.replyStarted(closing: false, now: 0)
                action = machine.replyFinished(now: 0)
            case .refuse(let e):
                out.ending = .refused(e)
                return false
            case .close, .linger:
                // Only a request that ends the connection gets here (no timers, no end of input); the
                // machine lingers (reads out) after such an answer rather than closing at once.
                guard case .some(let last) = out.messages.last, !last.keepAlive else {
                    disagree("machine closed without a closing request", stream)
                }
                out.ending = .closed
                return false
            case .none, .sendContinue:
                return true
            case .probe, .cancel:
                disagree("machine answered \(action) to plain input", stream)
            }
        }
    }

    for piece in pieces {
        var rest = stream[piece]
        while !rest.isEmpty {
            guard let space = machine.readSpace(), space.count > 0 else {
                disagree("machine offers no room to read in phase \(machine.phase)", stream)
            }
            let n = min(space.count, rest.count)
            rest.withUnsafeBytes { space.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: n) }
            rest = rest.dropFirst(n)
            delivered += n
            if !handle(machine.received(n, now: 0), mayDefer: deferReplies) { return out }
        }
        if replyOwed {
            replyOwed = false
            _ = machine.replyStarted(closing: false, now: 0)
            if !handle(machine.replyFinished(now: 0), mayDefer: false) { return out }
        }
    }
    return out
}

/// Demo bug, normalised here: HTTPGrammar.tokens splits and lowercases field values as Swift
/// Strings, Unicode-aware, so U+212A KELVIN SIGN lowercases to "k" (`Connection: \u{212A}eep-alive`
/// keeps an HTTP/1.0 connection) and a comma followed by a combining mark is one Character, not a
/// separator (`Connection: close,\u{301}x` does not close). RFC 9110 list tokens are ASCII and
/// compared without ASCII case; for a Connection field with non-ASCII bytes, keep-alive is decided
/// that way (nil: the demo's own answer stands).
private func asciiKeepAlive(_ fields: [Field], version: String) -> Bool? {
    let values = fields.filter { $0.name.lowercased() == "connection" }.map { Array($0.value.utf8) }
    guard values.contains(where: { $0.contains { $0 >= 0x80 } }) else { return nil }
    let tokens = values.flatMap { $0.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false) }.map { token in
        token.drop { $0 == 0x20 || $0 == 0x09 }.reversed().drop { $0 == 0x20 || $0 == 0x09 }.reversed()
            .map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }
    }
    if tokens.contains(Array("close".utf8)) { return false }
    return version == "HTTP/1.1" || tokens.contains(Array("keep-alive".utf8))
}

/// The demo server's parser over the same pieces.
func runDemo(_ stream: [UInt8], pieces: [Range<Int>], maxHead: Int, maxBody: Int) -> Outcome<RequestRefusal> {
    var out = Outcome<RequestRefusal>()
    var parser = RequestParser(maxHead: maxHead, maxBody: maxBody)
    var appended = 0
    for piece in pieces {
        parser.append(stream[piece])
        appended += piece.count
        while true {
            switch parser.next() {
            case .needMore:
                break
            case .refused(let r):
                out.ending = .refused(r)
                return out
            case .request(let r):
                let fields = r.headers.map { Field(name: $0.0, value: $0.1) }
                out.messages.append(Message(method: r.method, target: r.target, version: r.version, fields: fields, body: r.body,
                                            keepAlive: asciiKeepAlive(fields, version: r.version) ?? r.keepAlive,
                                            end: appended - parser.buffered))
                // The parser reads on either way; it is the demo's connection that closes.
                if !out.messages[out.messages.count - 1].keepAlive {
                    out.ending = .closed
                    return out
                }
                continue
            }
            break
        }
    }
    return out
}
