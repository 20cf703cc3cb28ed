/// The YAML that OpenAPI documents are written in, read into the same tree as JSON: block mappings
/// and sequences by indentation, flow collections, plain, quoted and block scalars, comments.
/// Anchors, aliases, tags and several documents in one stream are refused with their line: a
/// document that needs them is not read rather than read wrong. Scalars resolve as YAML 1.2's core
/// schema does (`null`, `~`, `true`, `false`, numbers); a number keeps the text it was written as.
struct YAMLReader {
    /// Why a text could not be read, with its 1-based line.
    struct Failure: Error, CustomStringConvertible {
        let line: Int
        let why: String
        var description: String { "YAML line \(line): \(why)" }
    }

    private struct Line {
        let number: Int
        let indent: Int
        /// The content after the indentation, comments removed.
        let text: Substring
    }

    private var lines: [Line] = []
    private var i = 0
    /// Block nodes open now; a text nested deeper than `maxDepth` is refused rather than recursed into.
    private var depth = 0
    static let maxDepth = 512
    /// Every raw line, for block scalars (whose comments and blank lines are content).
    private var raw: [Substring] = []

    static func read(_ text: String) throws(Failure) -> ConfigJSON {
        var r = YAMLReader()
        r.raw = text.split(separator: "\n", omittingEmptySubsequences: false).map { $0.hasSuffix("\r") ? $0.dropLast() : $0 }
        for (n, line) in r.raw.enumerated() {
            let content = Self.strippingComment(line)
            let trimmed = content.drop { $0 == " " }
            if trimmed.allSatisfy({ $0 == " " || $0 == "\t" }) { continue }
            if line.hasPrefix("\t") { throw Failure(line: n + 1, why: "indentation with a tab") }
            if trimmed == "---" && r.lines.isEmpty { continue }
            if trimmed == "---" || trimmed == "..." { throw Failure(line: n + 1, why: "a second document in one stream") }
            r.lines.append(Line(number: n + 1, indent: content.count - trimmed.count, text: Substring(trimmed.trimmingTrailingSpaces)))
        }
        guard !r.lines.isEmpty else { throw Failure(line: 1, why: "the text is empty") }
        let value = try r.block(indent: r.lines[0].indent)
        if r.i < r.lines.count { throw Failure(line: r.lines[r.i].number, why: "unexpected indentation") }
        return value
    }

    /// The block node whose lines start at `indent`.
    private mutating func block(indent: Int) throws(Failure) -> ConfigJSON {
        let first = lines[i]
        depth += 1
        defer { depth -= 1 }
        if depth > Self.maxDepth { throw Failure(line: first.number, why: "nested deeper than \(Self.maxDepth) levels") }
        if first.text.hasPrefix("- ") || first.text == "-" { return try sequence(indent: indent) }
        if Self.keyColon(first.text) != nil { return try mapping(indent: indent) }
        // A scalar or flow collection alone on its lines.
        i += 1
        var text = String(first.text)
        while i < lines.count && lines[i].indent > indent - 1 && lines[i].indent >= indent && Self.keyColon(lines[i].text) == nil {
            text += " " + lines[i].text
            i += 1
        }
        return try scalarOrFlow(Substring(text), line: first.number)
    }

    private mutating func mapping(indent: Int) throws(Failure) -> ConfigJSON {
        var members: [ConfigJSON.Member] = []
        while i < lines.count && lines[i].indent == indent {
            let line = lines[i]
            guard let (key, rest) = Self.keyColon(line.text) else { throw Failure(line: line.number, why: "expected `key: value`") }
            let name = try Self.keyText(key, line: line.number)
            if members.contains(where: { $0.name == name }) { throw Failure(line: line.number, why: "the key \(name) appears twice") }
            i += 1
            members.append(.init(name: name, value: try value(after: rest, parentIndent: indent, line: line.number)))
        }
        if i < lines.count && lines[i].indent > indent { throw Failure(line: lines[i].number, why: "unexpected indentation") }
        return .object(members)
    }

    private mutating func sequence(indent: Int) throws(Failure) -> ConfigJSON {
        var items: [ConfigJSON] = []
        while i < lines.count && lines[i].indent == indent && (lines[i].text.hasPrefix("- ") || lines[i].text == "-") {
            let line = lines[i]
            let rest = line.text.dropFirst(1).drop { $0 == " " }
            if rest.isEmpty {
                i += 1
                items.append(try value(after: "", parentIndent: indent, line: line.number))
            } else if Self.keyColon(rest) != nil || rest.hasPrefix("- ") {
                // `- key: value` opens a mapping (or a sequence) whose lines are indented as its first key.
                let inner = line.indent + (line.text.count - rest.count)
                lines[i] = Line(number: line.number, indent: inner, text: rest)
                items.append(try block(indent: inner))
            } else {
                i += 1
                items.append(try value(after: rest, parentIndent: indent, line: line.number))
            }
        }
        return .array(items)
    }

    /// The value after `key:` or `- `: inline, a block scalar, or the more indented lines below.
    private mutating func value(after rest: Substring, parentIndent: Int, line: Int) throws(Failure) -> ConfigJSON {
        if rest.hasPrefix("|") || rest.hasPrefix(">") { return try blockScalar(rest, parentIndent: parentIndent, line: line) }
        if rest.hasPrefix("&") || rest.hasPrefix("*") { throw Failure(line: line, why: "anchors and aliases are not read") }
        if rest.hasPrefix("!") { throw Failure(line: line, why: "tags are not read") }
        if !rest.isEmpty {
            var text = String(rest)
            // A plain or quoted scalar may go on over more indented lines.
            while i < lines.count && lines[i].indent > parentIndent && Self.keyColon(lines[i].text) == nil && !lines[i].text.hasPrefix("- ") {
                text += " " + lines[i].text
                i += 1
            }
            return try scalarOrFlow(Substring(text), line: line)
        }
        guard i < lines.count, lines[i].indent > parentIndent || (lines[i].indent == parentIndent && lines[i].text.hasPrefix("- ")) else {
            return .null
        }
        return try block(indent: lines[i].indent)
    }

    /// `|` (lines kept) or `>` (lines folded), with `-` to drop the final newline.
    private mutating func blockScalar(_ header: Substring, parentIndent: Int, line: Int) throws(Failure) -> ConfigJSON {
        let folded = header.hasPrefix(">")
        let strip = header.contains("-")
        let keep = header.contains("+")
        var body: [Substring] = []
        // Raw lines after the header up to the first non-blank line indented no deeper than the parent.
        var n = line
        var contentIndent: Int?
        while n < raw.count {
            let l = raw[n]
            let spaces = l.prefix { $0 == " " }.count
            if l.allSatisfy({ $0 == " " }) {
                body.append("")
                n += 1
                continue
            }
            if spaces <= parentIndent { break }
            if contentIndent == nil { contentIndent = spaces }
            guard spaces >= contentIndent! else { break }
            body.append(l.dropFirst(contentIndent!))
            n += 1
        }
        while i < lines.count && lines[i].number <= n { i += 1 }
        var trailing = 0
        while let last = body.last, last.isEmpty { body.removeLast(); trailing += 1 }
        var text = ""
        if folded {
            // Two lines of text fold into one with a space; each empty line between them is a
            // newline; more indented lines keep theirs.
            for (k, l) in body.enumerated() {
                if k > 0 {
                    let previous = body[k - 1]
                    if l.isEmpty {
                        text += "\n"
                    } else if !previous.isEmpty {
                        text += l.hasPrefix(" ") || previous.hasPrefix(" ") ? "\n" : " "
                    }
                }
                text += l
            }
        } else {
            text = body.joined(separator: "\n")
        }
        if !strip && !body.isEmpty { text += "\n" }
        if keep { text += String(repeating: "\n", count: trailing) }
        return .string(text)
    }

    /// A scalar, or a flow collection (`[a, b]`, `{a: 1}`), from one logical line.
    private func scalarOrFlow(_ text: Substring, line: Int) throws(Failure) -> ConfigJSON {
        var flow = FlowParser(chars: Array(text), line: line)
        let v = try flow.value()
        flow.space()
        guard flow.at == flow.chars.count else { throw Failure(line: line, why: "unexpected text after a value: \(String(flow.chars[flow.at...]))") }
        return v
    }

    /// `key` and what follows `key: ` when the line is a mapping entry.
    static func keyColon(_ text: Substring) -> (Substring, Substring)? {
        var quote: Character?
        var k = text.startIndex
        while k < text.endIndex {
            let c = text[k]
            if let q = quote {
                if c == q { quote = nil }
            } else if (c == "\"" || c == "'") && k == text.startIndex {
                quote = c
            } else if c == "[" || c == "{" {
                if k == text.startIndex { return nil }
            } else if c == ":" {
                let next = text.index(after: k)
                if next == text.endIndex || text[next] == " " {
                    return (text[..<k], next == text.endIndex ? "" : text[next...].drop { $0 == " " })
                }
            }
            k = text.index(after: k)
        }
        return nil
    }

    private static func keyText(_ key: Substring, line: Int) throws(Failure) -> String {
        let k = key.trimmingTrailingSpaces
        if k.hasPrefix("\"") || k.hasPrefix("'") {
            var flow = FlowParser(chars: Array(k), line: line)
            guard case .string(let s) = try flow.quotedValue() else { return String(k) }
            return s
        }
        return String(k)
    }

    /// The line without a comment: a `#` at its start or after a space, outside quotes.
    static func strippingComment(_ line: Substring) -> Substring {
        var quote: Character?
        var previous: Character = " "
        for k in line.indices {
            let c = line[k]
            if let q = quote {
                if c == q { quote = nil }
            } else if c == "\"" || c == "'" {
                if previous == " " || previous == "[" || previous == "{" || previous == "," || previous == ":" { quote = c }
            } else if c == "#" && (previous == " " || previous == "\t") {
                return line[..<k]
            } else if c == "#" && k == line.startIndex {
                return line[..<k]
            }
            previous = c
        }
        return line
    }
}

/// One line of flow YAML: `[…]`, `{…}`, quoted and plain scalars.
private struct FlowParser {
    let chars: [Character]
    let line: Int
    var at = 0

    mutating func space() { while at < chars.count && chars[at] == " " { at += 1 } }

    mutating func value() throws(YAMLReader.Failure) -> ConfigJSON {
        space()
        guard at < chars.count else { return .null }
        switch chars[at] {
        case "[":
            at += 1
            var items: [ConfigJSON] = []
            space()
            if at < chars.count && chars[at] == "]" { at += 1; return .array(items) }
            while true {
                items.append(try value())
                space()
                guard at < chars.count else { throw YAMLReader.Failure(line: line, why: "an unclosed [") }
                if chars[at] == "," { at += 1; continue }
                if chars[at] == "]" { at += 1; return .array(items) }
                throw YAMLReader.Failure(line: line, why: "expected , or ] in a flow sequence")
            }
        case "{":
            at += 1
            var members: [ConfigJSON.Member] = []
            space()
            if at < chars.count && chars[at] == "}" { at += 1; return .object(members) }
            while true {
                space()
                let key: String
                if at < chars.count && (chars[at] == "\"" || chars[at] == "'") {
                    guard case .string(let s) = try quotedValue() else { throw YAMLReader.Failure(line: line, why: "a key") }
                    key = s
                } else {
                    let start = at
                    while at < chars.count && chars[at] != ":" && chars[at] != "," && chars[at] != "}" { at += 1 }
                    key = String(chars[start..<at]).trimmingTrailingSpaces
                }
                space()
                var v = ConfigJSON.null
                if at < chars.count && chars[at] == ":" {
                    at += 1
                    v = try value()
                }
                members.append(.init(name: key, value: v))
                space()
                guard at < chars.count else { throw YAMLReader.Failure(line: line, why: "an unclosed {") }
                if chars[at] == "," { at += 1; continue }
                if chars[at] == "}" { at += 1; return .object(members) }
                throw YAMLReader.Failure(line: line, why: "expected , or } in a flow mapping")
            }
        case "\"", "'":
            return try quotedValue()
        case "&", "*":
            throw YAMLReader.Failure(line: line, why: "anchors and aliases are not read")
        case "!":
            throw YAMLReader.Failure(line: line, why: "tags are not read")
        default:
            // Inside a flow collection a plain scalar ends at , ] or }; outside it, at the line's end.
            let nested = chars[..<at].contains { $0 == "[" || $0 == "{" }
            let start = at
            while at < chars.count && !(nested && (chars[at] == "," || chars[at] == "]" || chars[at] == "}")) { at += 1 }
            return Self.plain(String(chars[start..<at]).trimmingTrailingSpaces)
        }
    }

    mutating func quotedValue() throws(YAMLReader.Failure) -> ConfigJSON {
        let q = chars[at]
        at += 1
        var out = ""
        while at < chars.count {
            let c = chars[at]
            at += 1
            if q == "'" {
                if c == "'" {
                    if at < chars.count && chars[at] == "'" { out.append("'"); at += 1; continue }
                    return .string(out)
                }
                out.append(c)
                continue
            }
            if c == "\"" { return .string(out) }
            guard c == "\\" else { out.append(c); continue }
            guard at < chars.count else { break }
            let e = chars[at]
            at += 1
            switch e {
            case "n": out.append("\n")
            case "t": out.append("\t")
            case "r": out.append("\r")
            case "0": out.append("\0")
            case "/", "\\", "\"", " ": out.append(e)
            case "u", "x", "U":
                let count = e == "x" ? 2 : (e == "u" ? 4 : 8)
                guard at + count <= chars.count, let v = UInt32(String(chars[at..<at + count]), radix: 16), let scalar = Unicode.Scalar(v)
                else { throw YAMLReader.Failure(line: line, why: "a bad \\\(e) escape") }
                out.unicodeScalars.append(scalar)
                at += count
            default: throw YAMLReader.Failure(line: line, why: "an unknown escape \\\(e)")
            }
        }
        throw YAMLReader.Failure(line: line, why: "an unclosed quote")
    }

    /// A plain scalar as YAML 1.2's core schema resolves it.
    static func plain(_ s: String) -> ConfigJSON {
        switch s {
        case "", "~", "null", "Null", "NULL": return .null
        case "true", "True", "TRUE": return .bool(true)
        case "false", "False", "FALSE": return .bool(false)
        default: break
        }
        if isJSONNumber(s) { return .number(s) }
        if s.hasPrefix("+"), isJSONNumber(String(s.dropFirst())) { return .number(String(s.dropFirst())) }
        return .string(s)
    }

    /// Whether `s` is a number JSON can carry as written (RFC 8259 §6).
    static func isJSONNumber(_ s: String) -> Bool {
        var c = Array(s.utf8)[...]
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

private extension StringProtocol {
    var trimmingTrailingSpaces: String {
        var s = String(self)
        while s.last == " " || s.last == "\t" { s.removeLast() }
        return s
    }
}
