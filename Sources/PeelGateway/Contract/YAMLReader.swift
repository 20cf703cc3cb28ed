/// The YAML that OpenAPI documents are written in, read into the same tree as JSON: block mappings
/// and sequences by indentation, flow collections, plain, quoted and block scalars, comments.
/// Anchors, aliases, tags and several documents in one stream are refused with their line: a
/// document that needs them is not read rather than read wrong. Scalars resolve as YAML 1.2's core
/// schema does (`null`, `~`, `true`, `false`, numbers); a number keeps the text it was written as.
///
/// It reads UTF-8 bytes: every character YAML's syntax gives a meaning to is ASCII, and no byte of
/// a multi-byte UTF-8 sequence is, so a line is a pair of offsets and only a key or a scalar's
/// value becomes a `String` (a 5 MB document is read in a pass over its bytes, not its Characters).
struct YAMLReader {
    /// Why a text could not be read, with its 1-based line.
    struct Failure: Error, CustomStringConvertible {
        let line: Int
        let why: String
        var description: String { "YAML line \(line): \(why)" }
    }

    /// One line that holds content: where its text starts (after the indentation) and ends (before
    /// a comment and trailing blanks) in `bytes`.
    private struct Line {
        let number: Int
        let indent: Int
        let start: Int
        let end: Int
    }

    private let bytes: [UInt8]
    private var lines: [Line] = []
    private var i = 0
    /// Block nodes open now; a text nested deeper than `maxDepth` is refused rather than recursed into.
    private var depth = 0
    static let maxDepth = 512
    /// Every raw line's start and end (line feed and carriage return left out), for block scalars,
    /// whose comments and blank lines are content.
    private var raw: [(start: Int, end: Int)] = []

    private init(bytes: [UInt8]) { self.bytes = bytes }

    static func read(_ text: String) throws(Failure) -> ConfigJSON { try read(Array(text.utf8)) }

    /// Reads UTF-8 `bytes` (validated by the caller).
    static func read(_ bytes: [UInt8]) throws(Failure) -> ConfigJSON {
        var r = YAMLReader(bytes: bytes)
        try r.splitLines()
        guard !r.lines.isEmpty else { throw Failure(line: 1, why: "the text is empty") }
        let value = try r.block(indent: r.lines[0].indent)
        if r.i < r.lines.count { throw Failure(line: r.lines[r.i].number, why: "unexpected indentation") }
        return value
    }

    /// Fills `raw` and `lines`; blank and comment-only lines hold no content.
    private mutating func splitLines() throws(Failure) {
        let count = bytes.count
        var start = 0
        while start <= count {
            var end = start
            while end < count && bytes[end] != Byte.lf { end += 1 }
            let next = end + 1
            if end > start && bytes[end - 1] == Byte.cr { end -= 1 }
            // A text ending in a line feed has no line after it (as a split keeps an empty last part,
            // which holds no content either way).
            raw.append((start, end))
            let n = raw.count
            let content = Self.commentStart(bytes, start, end)
            var first = start
            while first < content && bytes[first] == Byte.space { first += 1 }
            var last = content
            while last > first && (bytes[last - 1] == Byte.space || bytes[last - 1] == Byte.tab) { last -= 1 }
            if last > first {
                if bytes[start] == Byte.tab { throw Failure(line: n, why: "indentation with a tab") }
                let marker = last - first == 3 ? bytes[first] : 0
                let three = marker != 0 && bytes[first + 1] == marker && bytes[first + 2] == marker
                if three && marker == Byte.dash && lines.isEmpty {
                    // The first document's start marker.
                } else if three && (marker == Byte.dash || marker == Byte.dot) {
                    throw Failure(line: n, why: "a second document in one stream")
                } else {
                    lines.append(Line(number: n, indent: first - start, start: first, end: last))
                }
            }
            start = next
        }
    }

    /// The block node whose lines start at `indent`.
    private mutating func block(indent: Int) throws(Failure) -> ConfigJSON {
        let first = lines[i]
        depth += 1
        defer { depth -= 1 }
        if depth > Self.maxDepth { throw Failure(line: first.number, why: "nested deeper than \(Self.maxDepth) levels") }
        if opensSequenceEntry(first) { return try sequence(indent: indent) }
        if keyColon(first.start, first.end) != nil { return try mapping(indent: indent) }
        // A scalar or flow collection alone on its lines.
        i += 1
        return try scalarOrFlow(first.start, first.end, line: first.number, continued: .alone(indent: indent))
    }

    private mutating func mapping(indent: Int) throws(Failure) -> ConfigJSON {
        var members: [ConfigJSON.Member] = []
        var names = UniqueNames()
        while i < lines.count && lines[i].indent == indent {
            let line = lines[i]
            guard let (keyEnd, rest) = keyColon(line.start, line.end) else { throw Failure(line: line.number, why: "expected `key: value`") }
            let name = try keyText(line.start, keyEnd, line: line.number)
            if !names.insert(name, among: members) { throw Failure(line: line.number, why: "the key \(name) appears twice") }
            i += 1
            members.append(.init(name: name, value: try value(after: rest, end: line.end, parentIndent: indent, line: line.number)))
        }
        if i < lines.count && lines[i].indent > indent { throw Failure(line: lines[i].number, why: "unexpected indentation") }
        return .object(members)
    }

    private mutating func sequence(indent: Int) throws(Failure) -> ConfigJSON {
        var items: [ConfigJSON] = []
        while i < lines.count && lines[i].indent == indent && opensSequenceEntry(lines[i]) {
            let line = lines[i]
            var rest = line.start + 1
            while rest < line.end && bytes[rest] == Byte.space { rest += 1 }
            if rest == line.end {
                i += 1
                items.append(try value(after: rest, end: rest, parentIndent: indent, line: line.number))
            } else if keyColon(rest, line.end) != nil || startsWithDashSpace(rest, line.end) {
                // `- key: value` opens a mapping (or a sequence) whose lines are indented as its first key.
                let inner = line.indent + (rest - line.start)
                lines[i] = Line(number: line.number, indent: inner, start: rest, end: line.end)
                items.append(try block(indent: inner))
            } else {
                i += 1
                items.append(try value(after: rest, end: line.end, parentIndent: indent, line: line.number))
            }
        }
        return .array(items)
    }

    /// The value after `key:` or `- ` (the text from `rest` to `end`): inline, a block scalar, or
    /// the more indented lines below.
    private mutating func value(after rest: Int, end: Int, parentIndent: Int, line: Int) throws(Failure) -> ConfigJSON {
        if rest < end {
            switch bytes[rest] {
            case Byte.pipe, Byte.greater: return try blockScalar(rest, end, parentIndent: parentIndent, line: line)
            case Byte.ampersand, Byte.star: throw Failure(line: line, why: "anchors and aliases are not read")
            case Byte.bang: throw Failure(line: line, why: "tags are not read")
            default: break
            }
            // A plain or quoted scalar may go on over more indented lines.
            return try scalarOrFlow(rest, end, line: line, continued: .after(parentIndent: parentIndent))
        }
        guard i < lines.count, lines[i].indent > parentIndent || (lines[i].indent == parentIndent && startsWithDashSpace(lines[i])) else {
            return .null
        }
        return try block(indent: lines[i].indent)
    }

    /// `|` (lines kept) or `>` (lines folded), with `-` to drop the final newline and `+` to keep
    /// the trailing empty lines; `header` to `headerEnd` is the indicator and what follows it.
    private mutating func blockScalar(_ header: Int, _ headerEnd: Int, parentIndent: Int, line: Int) throws(Failure) -> ConfigJSON {
        let folded = bytes[header] == Byte.greater
        let indicators = bytes[header..<headerEnd]
        let strip = indicators.contains(Byte.dash)
        let keep = indicators.contains(Byte.plus)
        // The raw lines after the header up to the first non-blank line indented no deeper than
        // the parent, each without the block's indentation (an empty range for a blank one).
        var body: [(start: Int, end: Int)] = []
        var n = line
        var contentIndent: Int?
        while n < raw.count {
            let (s, e) = raw[n]
            var spaces = s
            while spaces < e && bytes[spaces] == Byte.space { spaces += 1 }
            if spaces == e {
                body.append((e, e))
                n += 1
                continue
            }
            let indent = spaces - s
            if indent <= parentIndent { break }
            if contentIndent == nil { contentIndent = indent }
            guard let contentIndent, indent >= contentIndent else { break }
            body.append((s + contentIndent, e))
            n += 1
        }
        while i < lines.count && lines[i].number <= n { i += 1 }
        var trailing = 0
        while let last = body.last, last.start == last.end { body.removeLast(); trailing += 1 }
        var text: [UInt8] = []
        for (k, l) in body.enumerated() {
            if k > 0 {
                let previous = body[k - 1]
                if !folded {
                    text.append(Byte.lf)
                } else if l.start == l.end {
                    // Folded: two lines of text become one with a space; each empty line between
                    // them is a newline; more indented lines keep theirs.
                    text.append(Byte.lf)
                } else if previous.start != previous.end {
                    text.append(bytes[l.start] == Byte.space || bytes[previous.start] == Byte.space ? Byte.lf : Byte.space)
                }
            }
            text += bytes[l.start..<l.end]
        }
        if !strip && !body.isEmpty { text.append(Byte.lf) }
        if keep { text += repeatElement(Byte.lf, count: trailing) }
        return .string(String(decoding: text, as: UTF8.self))
    }

    /// Which lines go on a scalar or flow collection.
    private enum Continuation {
        /// One alone on its lines at `indent`: the next lines at least as indented that are not
        /// mapping entries.
        case alone(indent: Int)
        /// One after `key:` or `- `: the next lines indented deeper than the entry that are neither
        /// mapping nor sequence entries.
        case after(parentIndent: Int)
    }

    /// Whether the line at `i` goes on the scalar or flow collection before it.
    private func continues(_ c: Continuation) -> Bool {
        guard i < lines.count else { return false }
        let l = lines[i]
        switch c {
        case .alone(let indent): return l.indent >= indent && keyColon(l.start, l.end) == nil
        case .after(let parentIndent): return l.indent > parentIndent && keyColon(l.start, l.end) == nil && !startsWithDashSpace(l)
        }
    }

    /// A scalar, or a flow collection (`[a, b]`, `{a: 1}`), from one logical line: the text from
    /// `start` to `end`, then each following line that `continued` takes, joined by a space.
    private mutating func scalarOrFlow(_ start: Int, _ end: Int, line: Int, continued: Continuation) throws(Failure) -> ConfigJSON {
        guard continues(continued) else { return try Self.scalarOrFlow(bytes[start..<end], line: line) }
        var text = Array(bytes[start..<end])
        let doubleQuoted = bytes[start] == Byte.quote
        while continues(continued) {
            // A line break folds into a space, but in a double-quoted scalar one escaped by a
            // backslash joins the lines with nothing (YAML 1.2 §7.3.1; PyYAML breaks long ones so).
            if doubleQuoted && Self.endsInEscape(text) { text.removeLast() } else { text.append(Byte.space) }
            text += bytes[lines[i].start..<lines[i].end]
            i += 1
        }
        return try Self.scalarOrFlow(text[...], line: line)
    }

    /// Whether the text ends in a backslash that is not itself escaped.
    private static func endsInEscape(_ text: [UInt8]) -> Bool {
        var k = text.count
        while k > 0 && text[k - 1] == Byte.backslash { k -= 1 }
        return (text.count - k) % 2 == 1
    }

    private static func scalarOrFlow(_ text: ArraySlice<UInt8>, line: Int) throws(Failure) -> ConfigJSON {
        var flow = FlowParser(chars: text, line: line)
        let v = try flow.value()
        flow.space()
        guard flow.at == text.endIndex else {
            throw Failure(line: line, why: "unexpected text after a value: \(String(decoding: text[flow.at...], as: UTF8.self))")
        }
        return v
    }

    /// Whether the line is `-` alone or starts with `- `: it opens a sequence entry.
    private func opensSequenceEntry(_ line: Line) -> Bool {
        bytes[line.start] == Byte.dash && (line.start + 1 == line.end || bytes[line.start + 1] == Byte.space)
    }

    /// Whether the line starts with `- `: an entry with a value on its line, which ends a scalar
    /// and follows a key at the key's own indentation.
    private func startsWithDashSpace(_ line: Line) -> Bool { startsWithDashSpace(line.start, line.end) }

    private func startsWithDashSpace(_ start: Int, _ end: Int) -> Bool {
        start + 1 < end && bytes[start] == Byte.dash && bytes[start + 1] == Byte.space
    }

    /// Where the key ends and what follows `key: ` starts, when the text is a mapping entry: at the
    /// first `:` followed by a blank or the end, outside a quoted key; never for a flow collection.
    private func keyColon(_ start: Int, _ end: Int) -> (keyEnd: Int, rest: Int)? {
        guard start < end else { return nil }
        var k = start
        let first = bytes[start]
        if first == Byte.bracket || first == Byte.brace { return nil }
        if first == Byte.quote || first == Byte.apostrophe {
            k = Self.closingQuote(bytes, start, end) ?? end
        }
        while k < end {
            if bytes[k] == Byte.colon && (k + 1 == end || bytes[k + 1] == Byte.space) {
                var rest = k + 1
                while rest < end && bytes[rest] == Byte.space { rest += 1 }
                return (k, rest)
            }
            k += 1
        }
        return nil
    }

    private func keyText(_ start: Int, _ end: Int, line: Int) throws(Failure) -> String {
        var e = end
        while e > start && (bytes[e - 1] == Byte.space || bytes[e - 1] == Byte.tab) { e -= 1 }
        if bytes[start] == Byte.quote || bytes[start] == Byte.apostrophe {
            var flow = FlowParser(chars: bytes[start..<e], line: line)
            if case .string(let s) = try flow.quotedValue() { return s }
        }
        return String(decoding: bytes[start..<e], as: UTF8.self)
    }

    /// Just past the quote that closes the one at `start`: `''` inside single quotes and a
    /// backslash's escape inside double quotes do not close them. Nil when none does.
    static func closingQuote(_ bytes: [UInt8], _ start: Int, _ end: Int) -> Int? {
        let q = bytes[start]
        var k = start + 1
        while k < end {
            let c = bytes[k]
            if q == Byte.quote && c == Byte.backslash {
                k += 2
                continue
            }
            if c == q {
                if q == Byte.apostrophe && k + 1 < end && bytes[k + 1] == Byte.apostrophe {
                    k += 2
                    continue
                }
                return k + 1
            }
            k += 1
        }
        return nil
    }

    /// Where the line's comment starts (or `end`): a `#` at its start or after a blank, outside
    /// quotes; a quote opens at the line's start or after a blank, `[`, `{`, `,` or `:`.
    static func commentStart(_ bytes: [UInt8], _ start: Int, _ end: Int) -> Int {
        var previous = Byte.space
        var k = start
        while k < end {
            let c = bytes[k]
            if c == Byte.hash && (previous == Byte.space || previous == Byte.tab) { return k }
            if (c == Byte.quote || c == Byte.apostrophe) && (previous == Byte.space || previous == Byte.bracket
                || previous == Byte.brace || previous == Byte.comma || previous == Byte.colon) {
                guard let closed = closingQuote(bytes, k, end) else { return end }
                previous = c
                k = closed
                continue
            }
            previous = c
            k += 1
        }
        return end
    }
}

/// The ASCII bytes YAML's syntax reads.
private enum Byte {
    static let tab: UInt8 = 0x09, lf: UInt8 = 0x0A, cr: UInt8 = 0x0D, space: UInt8 = 0x20, bang: UInt8 = 0x21
    static let quote: UInt8 = 0x22, hash: UInt8 = 0x23, ampersand: UInt8 = 0x26, apostrophe: UInt8 = 0x27
    static let star: UInt8 = 0x2A, plus: UInt8 = 0x2B, comma: UInt8 = 0x2C, dash: UInt8 = 0x2D, dot: UInt8 = 0x2E
    static let colon: UInt8 = 0x3A, greater: UInt8 = 0x3E, bracket: UInt8 = 0x5B, backslash: UInt8 = 0x5C
    static let closeBracket: UInt8 = 0x5D, brace: UInt8 = 0x7B, pipe: UInt8 = 0x7C, closeBrace: UInt8 = 0x7D
}

/// One line of flow YAML: `[…]`, `{…}`, quoted and plain scalars.
private struct FlowParser {
    let chars: ArraySlice<UInt8>
    let line: Int
    var at: Int
    /// Flow collections open at `at`: inside one, a plain scalar ends at `,`, `]` or `}`.
    private var nesting = 0

    init(chars: ArraySlice<UInt8>, line: Int) {
        self.chars = chars
        self.line = line
        at = chars.startIndex
    }

    private var end: Int { chars.endIndex }

    mutating func space() { while at < end && chars[at] == Byte.space { at += 1 } }

    mutating func value() throws(YAMLReader.Failure) -> ConfigJSON {
        space()
        guard at < end else { return .null }
        switch chars[at] {
        case Byte.bracket:
            at += 1
            nesting += 1
            defer { nesting -= 1 }
            var items: [ConfigJSON] = []
            space()
            if at < end && chars[at] == Byte.closeBracket { at += 1; return .array(items) }
            while true {
                items.append(try value())
                space()
                guard at < end else { throw YAMLReader.Failure(line: line, why: "an unclosed [") }
                if chars[at] == Byte.comma { at += 1; continue }
                if chars[at] == Byte.closeBracket { at += 1; return .array(items) }
                throw YAMLReader.Failure(line: line, why: "expected , or ] in a flow sequence")
            }
        case Byte.brace:
            at += 1
            nesting += 1
            defer { nesting -= 1 }
            var members: [ConfigJSON.Member] = []
            space()
            if at < end && chars[at] == Byte.closeBrace { at += 1; return .object(members) }
            while true {
                space()
                let key: String
                if at < end && (chars[at] == Byte.quote || chars[at] == Byte.apostrophe) {
                    guard case .string(let s) = try quotedValue() else { throw YAMLReader.Failure(line: line, why: "a key") }
                    key = s
                } else {
                    let start = at
                    while at < end && chars[at] != Byte.colon && chars[at] != Byte.comma && chars[at] != Byte.closeBrace { at += 1 }
                    key = String(decoding: chars[start..<trimmedEnd(start, at)], as: UTF8.self)
                }
                space()
                var v = ConfigJSON.null
                if at < end && chars[at] == Byte.colon {
                    at += 1
                    v = try value()
                }
                members.append(.init(name: key, value: v))
                space()
                guard at < end else { throw YAMLReader.Failure(line: line, why: "an unclosed {") }
                if chars[at] == Byte.comma { at += 1; continue }
                if chars[at] == Byte.closeBrace { at += 1; return .object(members) }
                throw YAMLReader.Failure(line: line, why: "expected , or } in a flow mapping")
            }
        case Byte.quote, Byte.apostrophe:
            return try quotedValue()
        case Byte.ampersand, Byte.star:
            throw YAMLReader.Failure(line: line, why: "anchors and aliases are not read")
        case Byte.bang:
            throw YAMLReader.Failure(line: line, why: "tags are not read")
        default:
            // Inside a flow collection a plain scalar ends at , ] or }; outside it, at the line's end.
            let start = at
            if nesting > 0 {
                while at < end && chars[at] != Byte.comma && chars[at] != Byte.closeBracket && chars[at] != Byte.closeBrace { at += 1 }
            } else {
                at = end
            }
            return Self.plain(chars[start..<trimmedEnd(start, at)])
        }
    }

    /// `to`, moved back over trailing blanks, no further than `from`.
    private func trimmedEnd(_ from: Int, _ to: Int) -> Int {
        var e = to
        while e > from && (chars[e - 1] == Byte.space || chars[e - 1] == Byte.tab) { e -= 1 }
        return e
    }

    mutating func quotedValue() throws(YAMLReader.Failure) -> ConfigJSON {
        let q = chars[at]
        at += 1
        var out: [UInt8] = []
        while at < end {
            let c = chars[at]
            at += 1
            if q == Byte.apostrophe {
                if c == Byte.apostrophe {
                    if at < end && chars[at] == Byte.apostrophe { out.append(Byte.apostrophe); at += 1; continue }
                    return .string(String(decoding: out, as: UTF8.self))
                }
                out.append(c)
                continue
            }
            if c == Byte.quote { return .string(String(decoding: out, as: UTF8.self)) }
            guard c == Byte.backslash else { out.append(c); continue }
            guard at < end else { break }
            let e = chars[at]
            at += 1
            switch e {
            case UInt8(ascii: "n"): out.append(Byte.lf)
            case UInt8(ascii: "t"): out.append(Byte.tab)
            case UInt8(ascii: "r"): out.append(Byte.cr)
            case UInt8(ascii: "0"): out.append(0)
            case UInt8(ascii: "/"), Byte.backslash, Byte.quote, Byte.space: out.append(e)
            case UInt8(ascii: "u"), UInt8(ascii: "x"), UInt8(ascii: "U"):
                let count = e == UInt8(ascii: "x") ? 2 : (e == UInt8(ascii: "u") ? 4 : 8)
                guard at + count <= end, let v = Self.hex(chars[at..<at + count]), let scalar = Unicode.Scalar(v) else {
                    throw YAMLReader.Failure(line: line, why: "a bad \\\(Character(Unicode.Scalar(e))) escape")
                }
                UTF8.encode(scalar) { out.append($0) }
                at += count
            default:
                // The escaped character whole, all of its UTF-8 bytes.
                var next = at
                while next < end && chars[next] & 0xC0 == 0x80 { next += 1 }
                throw YAMLReader.Failure(line: line, why: "an unknown escape \\\(String(decoding: chars[(at - 1)..<next], as: UTF8.self))")
            }
        }
        throw YAMLReader.Failure(line: line, why: "an unclosed quote")
    }

    /// The value of hex digits (nil for anything else).
    private static func hex(_ digits: ArraySlice<UInt8>) -> UInt32? {
        var v: UInt32 = 0
        for d in digits {
            switch d {
            case 0x30...0x39: v = v << 4 | UInt32(d - 0x30)
            case 0x41...0x46: v = v << 4 | UInt32(d - 0x41 + 10)
            case 0x61...0x66: v = v << 4 | UInt32(d - 0x61 + 10)
            default: return nil
            }
        }
        return v
    }

    /// A plain scalar as YAML 1.2's core schema resolves it.
    static func plain(_ s: ArraySlice<UInt8>) -> ConfigJSON {
        if s.count <= 5 {
            switch String(decoding: s, as: UTF8.self) {
            case "", "~", "null", "Null", "NULL": return .null
            case "true", "True", "TRUE": return .bool(true)
            case "false", "False", "FALSE": return .bool(false)
            default: break
            }
        }
        if isJSONNumber(s) { return .number(String(decoding: s, as: UTF8.self)) }
        if s.first == Byte.plus, isJSONNumber(s.dropFirst()) { return .number(String(decoding: s.dropFirst(), as: UTF8.self)) }
        return .string(String(decoding: s, as: UTF8.self))
    }

    /// Whether `s` is a number JSON can carry as written (RFC 8259 §6).
    static func isJSONNumber(_ s: ArraySlice<UInt8>) -> Bool {
        var c = s
        if c.first == 0x2D { c = c.dropFirst() }
        guard let f = c.first, f >= 0x30 && f <= 0x39 else { return false }
        if f == 0x30 && c.count > 1 && c[c.startIndex + 1] >= 0x30 && c[c.startIndex + 1] <= 0x39 { return false }
        var sawDot = false, sawExp = false, digitAfter = true
        for b in c {
            switch b {
            case 0x30...0x39: digitAfter = true
            case 0x2E where !sawDot && !sawExp: sawDot = true; digitAfter = false
            case 0x65, 0x45: guard !sawExp, digitAfter else { return false }; sawExp = true; digitAfter = false
            case 0x2B, 0x2D: guard sawExp, !digitAfter else { return false }
            default: return false
            }
        }
        return digitAfter
    }
}
