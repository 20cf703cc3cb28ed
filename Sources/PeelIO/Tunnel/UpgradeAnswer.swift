/// The upstream's answer to an upgrade request, read as its bytes arrive (RFC 9112): interim heads
/// dropped, then the answer's head; a 101 ends the reading there (the bytes after it are the
/// tunnel's), any other answer is read whole, by its length, chunked or to the close. Each byte is
/// looked at a bounded number of times however the answer is cut into reads (`examined` counts
/// them): a read resumes where the last one stopped.
struct UpgradeAnswer {
    /// What the bytes so far make.
    enum Progress: Equatable {
        /// More bytes are needed.
        case needMore
        /// A 101 head came: `head` holds it, `early` the bytes after it.
        case switched
        /// A non-101 answer is whole: `head` holds its head, this its body.
        case whole([UInt8])
        /// The bytes never make an answer.
        case broken(UpstreamFailure)
    }

    /// A parsed head: status, fields in order, and where the head ended in `input`.
    struct Head {
        let status: Int
        let fields: [(name: String, value: String)]
        let end: Int
    }

    /// Largest upstream answer head, as for calls.
    static let maxHead = 64 * 1024

    /// Every byte read so far.
    private(set) var input: [UInt8] = []
    /// The answer's head (after any interim ones), once it came.
    private(set) var head: Head?
    /// Bytes looked at so far, counted once per look.
    private(set) var examined = 0
    private let maxBody: Int
    /// Where the head being read starts (after dropped interim heads), and where its scan resumes.
    private var headStart = 0
    private var scanned = 0
    private var chunks: ChunkedDecoder?
    private var finished: Progress?

    /// A reader for an answer whose body may be at most `maxBody` bytes.
    init(maxBody: Int) { self.maxBody = maxBody }

    /// The bytes after a 101's head (the upstream's first frames).
    var early: ArraySlice<UInt8> { head.map { input[$0.end...] } ?? [] }

    /// Takes the next bytes read from the upstream.
    mutating func take(_ bytes: UnsafeRawBufferPointer) -> Progress {
        if let finished { return finished }
        let before = input.count
        input.append(contentsOf: bytes)
        let progress = advance(from: before)
        if progress != .needMore { finished = progress }
        return progress
    }

    /// The upstream closed: the end of a body that runs to the close, else an answer cut short.
    mutating func ended() -> Progress {
        if let finished { return finished }
        if let h = head, h.status != 101, Self.runsToClose(h.status, h.fields) { return .whole(Array(input[h.end...])) }
        return .broken(head == nil && input.isEmpty
                       ? .reset("the upstream closed the connection before answering the upgrade")
                       : .protocolError("the upstream's answer to the upgrade was cut short"))
    }

    private mutating func advance(from before: Int) -> Progress {
        while head == nil {
            guard let end = findHeadEnd() else {
                return input.count - headStart > Self.maxHead ? .broken(.protocolError("the upstream's head is over 64 KiB")) : .needMore
            }
            guard let parsed = Self.parseHead(input[headStart..<end]) else {
                return .broken(.protocolError("the upstream's answer to the upgrade is not an HTTP/1.1 head"))
            }
            // An interim answer other than 101 (RFC 9110 §15.2) is dropped; the next head is the answer.
            if parsed.status >= 100 && parsed.status < 200 && parsed.status != 101 {
                headStart = end
                scanned = end
                continue
            }
            head = Head(status: parsed.status, fields: parsed.fields, end: end)
            if parsed.status == 101 { return .switched }
            if Self.isChunked(parsed.fields) && parsed.status != 204 && parsed.status != 304 { chunks = ChunkedDecoder() }
            return body(newFrom: end)
        }
        return body(newFrom: max(before, head!.end))
    }

    /// The body's progress once `input[from...]` is new to it.
    private mutating func body(newFrom from: Int) -> Progress {
        guard let h = head else { return .needMore }
        if input.count - h.end > maxBody { return .broken(.tooLarge) }
        if chunks != nil {
            let state = chunks!.feed(input[from...])
            examined += input.count - from
            switch state {
            case .needMore: return .needMore
            case .broken(let why): return .broken(.protocolError(why))
            case .whole(let body): return .whole(body)
            }
        }
        switch Self.body(of: h.status, h.fields, input[h.end...]) {
        case .needMore: return .needMore
        case .broken(let why): return .broken(.protocolError(why))
        case .whole(let body): return .whole(body)
        }
    }

    /// The end of the head being read (after its empty line), resuming the scan where it stopped.
    private mutating func findHeadEnd() -> Int? {
        var i = max(scanned, headStart + 3)
        while i < input.count {
            examined += 1
            if input[i] == 0x0A && input[i - 1] == 0x0D && input[i - 2] == 0x0A && input[i - 3] == 0x0D { return i + 1 }
            i += 1
        }
        scanned = i
        return nil
    }

    // MARK: reading an HTTP/1.1 answer (RFC 9112)

    /// The status and fields of a head (status line, field lines, empty line); nil when it is not
    /// one. Names and values are held to the rules the collector holds a call's answer to: names
    /// RFC 9110 tokens, values without CR, LF or NUL (§5.5).
    static func parseHead(_ bytes: ArraySlice<UInt8>) -> (status: Int, fields: [(name: String, value: String)])? {
        let text = String(decoding: bytes, as: UTF8.self)
        // CR LF is one Character to Swift.
        var lines = text.split(separator: "\r\n", omittingEmptySubsequences: false)
        guard !lines.isEmpty else { return nil }
        let statusLine = lines.removeFirst()
        let parts = statusLine.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[0] == "HTTP/1.1" || parts[0] == "HTTP/1.0", parts[1].count == 3,
              let status = Int(parts[1]), status >= 100 else { return nil }
        var fields: [(name: String, value: String)] = []
        for line in lines where !line.isEmpty {
            guard let colon = line.firstIndex(of: ":"), colon != line.startIndex else { return nil }
            let name = String(line[..<colon])
            guard name.utf8.allSatisfy(isTokenByte) else { return nil }
            var value = trimmedOWS(line[line.index(after: colon)...])
            guard value.withUTF8({ HeaderCollector.badValue(UnsafeRawBufferPointer($0)) }) == nil else { return nil }
            fields.append((name, value))
        }
        return (status, fields)
    }

    enum Body: Equatable {
        case needMore
        case whole([UInt8])
        case broken(String)
    }

    /// A non-101 answer's body from all the bytes after its head (RFC 9112 §6.3), when it is not
    /// chunked (a chunked one goes through a `ChunkedDecoder` as it arrives).
    static func body(of status: Int, _ fields: [(name: String, value: String)], _ rest: ArraySlice<UInt8>) -> Body {
        if status == 204 || status == 304 { return .whole([]) }
        if let length = fields.first(where: { $0.name.lowercased() == "content-length" }) {
            guard let n = Int(length.value), n >= 0 else { return .broken("the upstream's Content-Length is not a number") }
            return rest.count >= n ? .whole(Array(rest.prefix(n))) : .needMore
        }
        return .needMore
    }

    static func isChunked(_ fields: [(name: String, value: String)]) -> Bool {
        fields.contains { $0.name.lowercased() == "transfer-encoding" && $0.value.lowercased().contains("chunked") }
    }

    /// Whether the body ends with the connection (no length, not chunked).
    static func runsToClose(_ status: Int, _ fields: [(name: String, value: String)]) -> Bool {
        !fields.contains { let n = $0.name.lowercased(); return n == "content-length" || n == "transfer-encoding" }
            && status != 204 && status != 304
    }
}

/// A chunked body's decoder (RFC 9112 §7.1), fed the bytes as they arrive: it keeps its place
/// between feeds, so each byte is looked at once and data is copied once.
struct ChunkedDecoder {
    private enum State {
        /// Reading chunk-size's hex digits (`digits` so far), then its extensions up to CR LF.
        case size(value: Int, digits: Int, inExtension: Bool, sawCR: Bool)
        /// Copying `left` data bytes.
        case data(left: Int)
        /// The CR LF after a chunk's data; `sawCR` once its CR came.
        case dataEnd(sawCR: Bool)
        /// Trailer lines up to the empty one; `length` of the current line, `sawCR` pending.
        case trailer(length: Int, sawCR: Bool)
        case done
    }

    private var state = State.size(value: 0, digits: 0, inExtension: false, sawCR: false)
    private var out: [UInt8] = []

    /// Takes the next bytes of the body.
    mutating func feed(_ b: ArraySlice<UInt8>) -> UpgradeAnswer.Body {
        let broken = UpgradeAnswer.Body.broken("the upstream's chunked framing is broken")
        var i = b.startIndex
        while i < b.endIndex {
            switch state {
            case .done:
                return .whole(out)
            case .data(let left):
                let n = min(left, b.endIndex - i)
                out.append(contentsOf: b[i..<(i + n)])
                i += n
                state = left == n ? .dataEnd(sawCR: false) : .data(left: left - n)
            case .dataEnd(let sawCR):
                let c = b[i]
                i += 1
                if !sawCR && c == 0x0D { state = .dataEnd(sawCR: true) } else if sawCR && c == 0x0A {
                    state = .size(value: 0, digits: 0, inExtension: false, sawCR: false)
                } else { return broken }
            case .size(let value, let digits, let inExtension, let sawCR):
                let c = b[i]
                i += 1
                if sawCR && c == 0x0A {
                    // chunk-size = 1*HEXDIG: at least one digit.
                    guard digits > 0 else { return broken }
                    state = value == 0 ? .trailer(length: 0, sawCR: false) : .data(left: value)
                } else if sawCR && !inExtension {
                    // A CR that does not end the line, among the digits: no hex digit.
                    return broken
                } else if c == 0x0D {
                    state = .size(value: value, digits: digits, inExtension: inExtension, sawCR: true)
                } else if inExtension || c == 0x3B || c == 0x20 || c == 0x09 {
                    // chunk-ext (and whitespace before it) is not read.
                    state = .size(value: value, digits: digits, inExtension: true, sawCR: false)
                } else if let d = Self.hexValue(c), digits < 15 {
                    // At most 15 digits, so that the size fits an Int; no sign.
                    state = .size(value: value * 16 + d, digits: digits + 1, inExtension: false, sawCR: false)
                } else {
                    return broken
                }
            case .trailer(let length, let sawCR):
                let c = b[i]
                i += 1
                if sawCR && c == 0x0A {
                    if length == 0 {
                        state = .done
                        return .whole(out)
                    }
                    state = .trailer(length: 0, sawCR: false)
                } else if c == 0x0D {
                    state = .trailer(length: length + (sawCR ? 1 : 0), sawCR: true)
                } else {
                    state = .trailer(length: length + (sawCR ? 2 : 1), sawCR: false)
                }
            }
        }
        if case .done = state { return .whole(out) }
        return .needMore
    }

    private static func hexValue(_ c: UInt8) -> Int? {
        switch c {
        case 0x30...0x39: return Int(c - 0x30)
        case 0x41...0x46: return Int(c - 0x41 + 10)
        case 0x61...0x66: return Int(c - 0x61 + 10)
        default: return nil
        }
    }
}

/// `s` without optional whitespace at either end (RFC 9110 §5.6.3).
private func trimmedOWS(_ s: Substring) -> String {
    var v = s[...]
    while let f = v.first, f == " " || f == "\t" { v = v.dropFirst() }
    while let l = v.last, l == " " || l == "\t" { v = v.dropLast() }
    return String(v)
}
