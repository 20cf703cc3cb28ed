/// One line of flow YAML: `[…]`, `{…}`, quoted and plain scalars.
struct YAMLFlow {
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

    /// Skips blanks, and the newlines that stand for empty lines in a collection over several lines.
    mutating func space() { while at < end && (chars[at] == YAMLByte.space || chars[at] == YAMLByte.lf) { at += 1 } }

    mutating func value() throws(YAMLReader.Failure) -> ConfigJSON {
        space()
        guard at < end else { return .null }
        switch chars[at] {
        case YAMLByte.bracket:
            at += 1
            nesting += 1
            defer { nesting -= 1 }
            var items: [ConfigJSON] = []
            space()
            if at < end && chars[at] == YAMLByte.closeBracket { at += 1; return .array(items) }
            while true {
                items.append(try value())
                space()
                guard at < end else { throw YAMLReader.Failure(line: line, why: "an unclosed [") }
                if chars[at] == YAMLByte.comma { at += 1; continue }
                if chars[at] == YAMLByte.closeBracket { at += 1; return .array(items) }
                throw YAMLReader.Failure(line: line, why: "expected , or ] in a flow sequence")
            }
        case YAMLByte.brace:
            at += 1
            nesting += 1
            defer { nesting -= 1 }
            var members: [ConfigJSON.Member] = []
            space()
            if at < end && chars[at] == YAMLByte.closeBrace { at += 1; return .object(members) }
            while true {
                space()
                let key: String
                if at < end && (chars[at] == YAMLByte.quote || chars[at] == YAMLByte.apostrophe) {
                    guard case .string(let s) = try quotedValue() else { throw YAMLReader.Failure(line: line, why: "a key") }
                    key = s
                } else {
                    let start = at
                    while at < end && chars[at] != YAMLByte.colon && chars[at] != YAMLByte.comma && chars[at] != YAMLByte.closeBrace { at += 1 }
                    key = String(decoding: chars[start..<trimmedEnd(start, at)], as: UTF8.self)
                }
                space()
                var v = ConfigJSON.null
                if at < end && chars[at] == YAMLByte.colon {
                    at += 1
                    v = try value()
                }
                members.append(.init(name: key, value: v))
                space()
                guard at < end else { throw YAMLReader.Failure(line: line, why: "an unclosed {") }
                if chars[at] == YAMLByte.comma { at += 1; continue }
                if chars[at] == YAMLByte.closeBrace { at += 1; return .object(members) }
                throw YAMLReader.Failure(line: line, why: "expected , or } in a flow mapping")
            }
        case YAMLByte.quote, YAMLByte.apostrophe:
            return try quotedValue()
        case YAMLByte.ampersand, YAMLByte.star:
            throw YAMLReader.Failure(line: line, why: "anchors and aliases are not read")
        case YAMLByte.bang:
            throw YAMLReader.Failure(line: line, why: "tags are not read")
        default:
            // Inside a flow collection a plain scalar ends at , ] or }; outside it, at the line's end.
            let start = at
            if nesting > 0 {
                while at < end && chars[at] != YAMLByte.comma && chars[at] != YAMLByte.closeBracket && chars[at] != YAMLByte.closeBrace { at += 1 }
            } else {
                at = end
            }
            return Self.plain(chars[start..<trimmedEnd(start, at)])
        }
    }

    /// `to`, moved back over trailing blanks, no further than `from`.
    private func trimmedEnd(_ from: Int, _ to: Int) -> Int {
        var e = to
        while e > from && (chars[e - 1] == YAMLByte.space || chars[e - 1] == YAMLByte.tab || chars[e - 1] == YAMLByte.lf) { e -= 1 }
        return e
    }

    mutating func quotedValue() throws(YAMLReader.Failure) -> ConfigJSON {
        let q = chars[at]
        at += 1
        var out: [UInt8] = []
        while at < end {
            let c = chars[at]
            at += 1
            if q == YAMLByte.apostrophe {
                if c == YAMLByte.apostrophe {
                    if at < end && chars[at] == YAMLByte.apostrophe { out.append(YAMLByte.apostrophe); at += 1; continue }
                    return .string(String(decoding: out, as: UTF8.self))
                }
                out.append(c)
                continue
            }
            if c == YAMLByte.quote { return .string(String(decoding: out, as: UTF8.self)) }
            guard c == YAMLByte.backslash else { out.append(c); continue }
            guard at < end else { break }
            let e = chars[at]
            at += 1
            if let byte = Self.escaped[e] {
                out.append(byte)
                continue
            }
            if let scalar = Self.escapedScalar[e] {
                UTF8.encode(scalar) { out.append($0) }
                continue
            }
            switch e {
            case UInt8(ascii: "u"), UInt8(ascii: "x"), UInt8(ascii: "U"):
                let scalar = try hexEscape(e)
                UTF8.encode(scalar) { out.append($0) }
            default:
                // The escaped character whole, all of its UTF-8 bytes.
                var next = at
                while next < end && chars[next] & 0xC0 == 0x80 { next += 1 }
                throw YAMLReader.Failure(line: line, why: "an unknown escape \\\(String(decoding: chars[(at - 1)..<next], as: UTF8.self))")
            }
        }
        throw YAMLReader.Failure(line: line, why: "an unclosed quote")
    }

    /// YAML 1.2's one-character escapes (§5.7) that stand for one ASCII byte.
    private static let escaped: [UInt8: UInt8] = [
        UInt8(ascii: "0"): 0x00, UInt8(ascii: "a"): 0x07, UInt8(ascii: "b"): 0x08, UInt8(ascii: "t"): 0x09, YAMLByte.tab: 0x09,
        UInt8(ascii: "n"): 0x0A, UInt8(ascii: "v"): 0x0B, UInt8(ascii: "f"): 0x0C, UInt8(ascii: "r"): 0x0D, UInt8(ascii: "e"): 0x1B,
        YAMLByte.space: 0x20, YAMLByte.quote: 0x22, UInt8(ascii: "/"): 0x2F, YAMLByte.backslash: 0x5C,
    ]
    /// And those that stand for a character beyond ASCII: `\_` is how PyYAML writes a no-break space.
    private static let escapedScalar: [UInt8: Unicode.Scalar] = [
        UInt8(ascii: "N"): "\u{85}", UInt8(ascii: "_"): "\u{A0}", UInt8(ascii: "L"): "\u{2028}", UInt8(ascii: "P"): "\u{2029}",
    ]

    /// The character of a `\x`, `\u` or `\U` escape (`kind`), whose digits start at `at`. A UTF-16
    /// surrogate pair written as two `\u` escapes (as JSON writes one) is one character; a lone
    /// surrogate is none.
    private mutating func hexEscape(_ kind: UInt8) throws(YAMLReader.Failure) -> Unicode.Scalar {
        let count = kind == UInt8(ascii: "x") ? 2 : (kind == UInt8(ascii: "u") ? 4 : 8)
        guard at + count <= end, let v = Self.hex(chars[at..<at + count]) else { throw badEscape(kind) }
        at += count
        if let scalar = Unicode.Scalar(v) { return scalar }
        guard kind == UInt8(ascii: "u") else { throw badEscape(kind) }
        guard v <= 0xDBFF, at + 6 <= end, chars[at] == YAMLByte.backslash, chars[at + 1] == UInt8(ascii: "u"),
              let low = Self.hex(chars[at + 2..<at + 6]), (0xDC00...0xDFFF).contains(low),
              let scalar = Unicode.Scalar(0x10000 + ((v - 0xD800) << 10) + (low - 0xDC00)) else {
            throw YAMLReader.Failure(line: line, why: "a lone UTF-16 surrogate \\u\(String(decoding: chars[at - 4..<at], as: UTF8.self))")
        }
        at += 6
        return scalar
    }

    private func badEscape(_ kind: UInt8) -> YAMLReader.Failure {
        YAMLReader.Failure(line: line, why: "a bad \\\(Character(Unicode.Scalar(kind))) escape")
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
        if s.first == YAMLByte.plus, isJSONNumber(s.dropFirst()) { return .number(String(decoding: s.dropFirst(), as: UTF8.self)) }
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
