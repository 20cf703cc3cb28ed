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
        /// Whether it goes on with a quoted scalar or flow collection a line above opened.
        let continued: Bool
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
        var state = YAMLLineScan.State()
        // While set, the lines deeper than this column (and blank ones) are a block scalar's text:
        // nothing in them opens a quote or a flow collection for the lines after.
        var blockOwner: Int?
        while start <= count {
            var end = start
            while end < count && bytes[end] != YAMLByte.lf { end += 1 }
            let next = end + 1
            if end > start && bytes[end - 1] == YAMLByte.cr { end -= 1 }
            // A text ending in a line feed has no line after it (as a split keeps an empty last part,
            // which holds no content either way).
            raw.append((start, end))
            let n = raw.count
            var first = start
            while first < end && bytes[first] == YAMLByte.space { first += 1 }
            if let owner = blockOwner, first == end || first - start > owner {
                var alone = YAMLLineScan.State()
                let content = YAMLLineScan.scan(bytes, start, end, &alone).content
                try addLine(n, start, first, content, continued: false, inDoubleQuotes: false)
            } else {
                let continued = state.open
                let scanned = YAMLLineScan.scan(bytes, start, end, &state)
                blockOwner = scanned.blockOwner
                try addLine(n, start, first, scanned.content, continued: continued, inDoubleQuotes: state.quote == YAMLByte.quote)
            }
            start = next
        }
    }

    /// Adds the line `n` (its raw text from `start`, its content from `first` to `content`, which
    /// ends `inDoubleQuotes` when a double-quoted scalar goes on after it) unless it holds nothing.
    private mutating func addLine(_ n: Int, _ start: Int, _ first: Int, _ content: Int, continued: Bool, inDoubleQuotes: Bool) throws(Failure) {
        var last = content
        while last > first && (bytes[last - 1] == YAMLByte.space || bytes[last - 1] == YAMLByte.tab) { last -= 1 }
        // An escaped blank that ends a line inside double quotes is text, not trailing space.
        if inDoubleQuotes && last > first && last < content && Self.endsInEscape(bytes[first..<last]) { last += 1 }
        guard last > first else { return }
        if continued {
            // Inside a quoted scalar or flow collection over several lines: no indentation and no
            // document marker, whatever the text.
            lines.append(Line(number: n, indent: first - start, start: first, end: last, continued: true))
            return
        }
        if bytes[start] == YAMLByte.tab { throw Failure(line: n, why: "indentation with a tab") }
        let marker = last - first == 3 ? bytes[first] : 0
        let three = marker != 0 && bytes[first + 1] == marker && bytes[first + 2] == marker
        if three && marker == YAMLByte.dash && lines.isEmpty {
            // The first document's start marker.
        } else if three && (marker == YAMLByte.dash || marker == YAMLByte.dot) {
            throw Failure(line: n, why: "a second document in one stream")
        } else {
            lines.append(Line(number: n, indent: first - start, start: first, end: last, continued: false))
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
            while rest < line.end && bytes[rest] == YAMLByte.space { rest += 1 }
            if rest == line.end {
                i += 1
                items.append(try value(after: rest, end: rest, parentIndent: indent, line: line.number))
            } else if keyColon(rest, line.end) != nil || startsWithDashSpace(rest, line.end) {
                // `- key: value` opens a mapping (or a sequence) whose lines are indented as its first key.
                let inner = line.indent + (rest - line.start)
                lines[i] = Line(number: line.number, indent: inner, start: rest, end: line.end, continued: false)
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
            case YAMLByte.pipe, YAMLByte.greater: return try blockScalar(rest, end, parentIndent: parentIndent, line: line)
            case YAMLByte.ampersand, YAMLByte.star: throw Failure(line: line, why: "anchors and aliases are not read")
            case YAMLByte.bang: throw Failure(line: line, why: "tags are not read")
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
        let folded = bytes[header] == YAMLByte.greater
        let indicators = bytes[header..<headerEnd]
        let strip = indicators.contains(YAMLByte.dash)
        let keep = indicators.contains(YAMLByte.plus)
        // An indentation indicator (`|2`) says how much deeper than the parent the content is,
        // where its first line starts with spaces of its own (YAML 1.2 §8.1.1.1).
        let stated = indicators.first { $0 >= 0x31 && $0 <= 0x39 }.map { parentIndent + Int($0 - 0x30) }
        // The raw lines after the header up to the first non-blank line indented no deeper than
        // the parent, each without the block's indentation (an empty range for a blank one).
        var body: [(start: Int, end: Int)] = []
        var n = line
        var contentIndent = stated
        while n < raw.count {
            let (s, e) = raw[n]
            var spaces = s
            while spaces < e && bytes[spaces] == YAMLByte.space { spaces += 1 }
            if spaces == e {
                // A blank line deeper than the content keeps its spaces beyond the indentation.
                if let contentIndent, spaces - s > contentIndent { body.append((s + contentIndent, e)) } else { body.append((e, e)) }
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
        // Between two lines of text, their line break and one per empty line between them; folded,
        // two lines that neither start with a blank become one, with a space when nothing is between
        // them (as PyYAML folds: a more indented line keeps its breaks, and the empty lines' too).
        var empty = 0
        var previous: (start: Int, end: Int)?
        for l in body {
            if l.start == l.end {
                empty += 1
                continue
            }
            if let p = previous {
                if folded && !Self.startsWithBlank(bytes, p) && !Self.startsWithBlank(bytes, l) {
                    if empty == 0 { text.append(YAMLByte.space) }
                } else {
                    text.append(YAMLByte.lf)
                }
            }
            text += repeatElement(YAMLByte.lf, count: empty)
            text += bytes[l.start..<l.end]
            empty = 0
            previous = l
        }
        if !strip && !body.isEmpty { text.append(YAMLByte.lf) }
        if keep { text += repeatElement(YAMLByte.lf, count: trailing) }
        return .string(String(decoding: text, as: UTF8.self))
    }

    private static func startsWithBlank(_ bytes: [UInt8], _ line: (start: Int, end: Int)) -> Bool {
        bytes[line.start] == YAMLByte.space || bytes[line.start] == YAMLByte.tab
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
        if l.continued { return true }
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
        let doubleQuoted = bytes[start] == YAMLByte.quote
        var previous = line
        while continues(continued) {
            // A line break folds into a space, but each empty line after it is a newline (YAML 1.2
            // §6.5: PyYAML writes a string's "\n" so), and in a double-quoted scalar a break
            // escaped by a backslash joins the lines with nothing (§7.3.1: PyYAML breaks long ones so).
            let empty = emptyLines(after: previous, before: lines[i].number)
            if empty > 0 {
                text += repeatElement(YAMLByte.lf, count: empty)
            } else if doubleQuoted && Self.endsInEscape(text) {
                text.removeLast()
            } else {
                text.append(YAMLByte.space)
            }
            text += bytes[lines[i].start..<lines[i].end]
            previous = lines[i].number
            i += 1
        }
        return try Self.scalarOrFlow(text[...], line: line)
    }

    /// How many lines lie between the 1-based lines `a` and `b`, when all of them are empty (blank
    /// but for spaces and tabs); 0 when one holds anything, a comment too.
    private func emptyLines(after a: Int, before b: Int) -> Int {
        for n in a..<(b - 1) {
            let (s, e) = raw[n]
            if bytes[s..<e].contains(where: { $0 != YAMLByte.space && $0 != YAMLByte.tab }) { return 0 }
        }
        return b - 1 - a
    }

    /// Whether the text ends in a backslash that is not itself escaped.
    private static func endsInEscape<C: BidirectionalCollection<UInt8>>(_ text: C) -> Bool {
        var run = 0
        var k = text.endIndex
        while k > text.startIndex {
            k = text.index(before: k)
            guard text[k] == YAMLByte.backslash else { break }
            run += 1
        }
        return run % 2 == 1
    }

    private static func scalarOrFlow(_ text: ArraySlice<UInt8>, line: Int) throws(Failure) -> ConfigJSON {
        var flow = YAMLFlow(chars: text, line: line)
        let v = try flow.value()
        flow.space()
        guard flow.at == text.endIndex else {
            throw Failure(line: line, why: "unexpected text after a value: \(String(decoding: text[flow.at...], as: UTF8.self))")
        }
        return v
    }

    /// Whether the line is `-` alone or starts with `- `: it opens a sequence entry.
    private func opensSequenceEntry(_ line: Line) -> Bool {
        bytes[line.start] == YAMLByte.dash && (line.start + 1 == line.end || bytes[line.start + 1] == YAMLByte.space)
    }

    /// Whether the line starts with `- `: an entry with a value on its line, which ends a scalar
    /// and follows a key at the key's own indentation.
    private func startsWithDashSpace(_ line: Line) -> Bool { startsWithDashSpace(line.start, line.end) }

    private func startsWithDashSpace(_ start: Int, _ end: Int) -> Bool {
        start + 1 < end && bytes[start] == YAMLByte.dash && bytes[start + 1] == YAMLByte.space
    }

    /// Where the key ends and what follows `key: ` starts, when the text is a mapping entry: at the
    /// first `:` followed by a blank or the end, outside a quoted key; never for a flow collection.
    private func keyColon(_ start: Int, _ end: Int) -> (keyEnd: Int, rest: Int)? {
        guard start < end else { return nil }
        var k = start
        let first = bytes[start]
        if first == YAMLByte.bracket || first == YAMLByte.brace { return nil }
        if first == YAMLByte.quote || first == YAMLByte.apostrophe {
            k = YAMLLineScan.closingQuote(bytes, start, end) ?? end
        }
        while k < end {
            if bytes[k] == YAMLByte.colon && (k + 1 == end || bytes[k + 1] == YAMLByte.space) {
                var rest = k + 1
                while rest < end && bytes[rest] == YAMLByte.space { rest += 1 }
                return (k, rest)
            }
            k += 1
        }
        return nil
    }

    private func keyText(_ start: Int, _ end: Int, line: Int) throws(Failure) -> String {
        var e = end
        while e > start && (bytes[e - 1] == YAMLByte.space || bytes[e - 1] == YAMLByte.tab) { e -= 1 }
        if bytes[start] == YAMLByte.quote || bytes[start] == YAMLByte.apostrophe {
            var flow = YAMLFlow(chars: bytes[start..<e], line: line)
            if case .string(let s) = try flow.quotedValue() { return s }
        }
        return String(decoding: bytes[start..<e], as: UTF8.self)
    }
}

/// The ASCII bytes YAML's syntax reads.
enum YAMLByte {
    static let tab: UInt8 = 0x09, lf: UInt8 = 0x0A, cr: UInt8 = 0x0D, space: UInt8 = 0x20, bang: UInt8 = 0x21
    static let quote: UInt8 = 0x22, hash: UInt8 = 0x23, ampersand: UInt8 = 0x26, apostrophe: UInt8 = 0x27
    static let star: UInt8 = 0x2A, plus: UInt8 = 0x2B, comma: UInt8 = 0x2C, dash: UInt8 = 0x2D, dot: UInt8 = 0x2E
    static let colon: UInt8 = 0x3A, greater: UInt8 = 0x3E, bracket: UInt8 = 0x5B, backslash: UInt8 = 0x5C
    static let closeBracket: UInt8 = 0x5D, brace: UInt8 = 0x7B, pipe: UInt8 = 0x7C, closeBrace: UInt8 = 0x7D
}
