/// Where and why a body is not one JSON text (RFC 8259): the byte offset and the kind of fault.
public struct ScanError: Sendable, Equatable, CustomStringConvertible {
    /// The kind of fault.
    public enum Kind: Sendable, Equatable {
        /// Nothing but whitespace (or nothing at all).
        case empty
        /// The first byte of the text cannot start any JSON value (an HTML page, plain text).
        case notJSON
        /// A byte the grammar does not allow where it stands.
        case invalid
        /// The text ends inside a value.
        case cutShort
        /// One whole value, then more than whitespace (NDJSON, a second document).
        case trailingData
        /// Containers nested deeper than the limit.
        case tooDeep(Int)
    }

    /// The kind of fault.
    public let kind: Kind
    /// Offset of the offending byte from the start of the body (a BOM counts).
    public let offset: Int
    /// The offending byte, when there is one.
    public let byte: UInt8?

    /// Peel's words for it, as logged and put in the problem's `reason`.
    public var description: String {
        switch kind {
        case .empty: return "empty body"
        case .notJSON: return "not JSON at byte \(offset)" + Self.shown(byte)
        case .invalid: return "invalid JSON at byte \(offset)" + Self.shown(byte)
        case .cutShort: return "JSON cut short at byte \(offset)"
        case .trailingData: return "trailing data at byte \(offset)"
        case .tooDeep(let limit): return "nested deeper than \(limit) levels at byte \(offset)"
        }
    }

    /// ` (0x3c '<')` for a printable ASCII byte, ` (0x00)` for any other.
    static func shown(_ byte: UInt8?) -> String {
        guard let byte else { return "" }
        let hex = String(byte, radix: 16)
        let code = "0x" + (hex.count < 2 ? "0" + hex : hex)
        if byte >= 0x20 && byte < 0x7F && byte != UInt8(ascii: "'") { return " (\(code) '\(Character(Unicode.Scalar(byte)))')" }
        return " (\(code))"
    }
}

/// What the diagnosis found.
enum Diagnosis: Equatable {
    /// Not one JSON text.
    case error(ScanError)
    /// Valid JSON whose top level is not an object (`an array`, `a string`, …).
    case notObject(String)
    /// A top-level member named like an envelope member appears twice.
    case duplicate(String)
    /// Nested deeper than the limit inside this member of the top-level object.
    case tooDeepIn(ScanError, member: String)
    /// A valid JSON object with each envelope member at most once.
    case valid
}

/// A plain, slow, strict RFC 8259 walk that names the first fault and its offset. The fast scanner
/// (ScanCore) decides; this runs only once it refused a body, to say why, so it favours
/// clarity over speed. Pure: bytes in, a diagnosis out.
enum ScanDiagnosis {
    /// The first fault in `body`; with `names`, also a non-object top level and duplicate envelope members.
    static func diagnose(_ body: UnsafeBufferPointer<UInt8>, maxDepth: Int, names: EnvelopeNames?) -> Diagnosis {
        guard let base = body.baseAddress, body.count > 0 else { return .error(ScanError(kind: .empty, offset: 0, byte: nil)) }
        var walk = Walk(base: base, n: body.count, maxDepth: max(0, maxDepth), names: names)
        return walk.run()
    }

    private struct Walk {
        let base: UnsafePointer<UInt8>
        let n: Int
        let maxDepth: Int
        let names: EnvelopeNames?
        var i = 0
        /// true for an object, false for an array, innermost last.
        var stack: [Bool] = []
        /// The name (as written) of the top-level member being read.
        var topMember: Range<Int>?
        var seen: Set<UInt8> = []

        init(base: UnsafePointer<UInt8>, n: Int, maxDepth: Int, names: EnvelopeNames?) {
            self.base = base
            self.n = n
            self.maxDepth = maxDepth
            self.names = names
        }

        func fault(_ kind: ScanError.Kind, _ at: Int) -> Diagnosis {
            .error(ScanError(kind: kind, offset: at, byte: at < n ? base[at] : nil))
        }

        mutating func skipSpace() {
            while i < n, base[i] == 0x20 || base[i] == 0x0A || base[i] == 0x0D || base[i] == 0x09 { i += 1 }
        }

        mutating func run() -> Diagnosis {
            if n >= 3 && base[0] == 0xEF && base[1] == 0xBB && base[2] == 0xBF { i = 3 }
            skipSpace()
            guard i < n else { return fault(.empty, i) }
            let first = base[i]
            let starts: [UInt8] = Array("{[\"-0123456789tfn".utf8)
            guard starts.contains(first) else { return fault(.notJSON, i) }
            if let bad = value() { return bad }
            skipSpace()
            if i < n { return fault(.trailingData, i) }
            guard names == nil || first == UInt8(ascii: "{") else {
                switch first {
                case UInt8(ascii: "["): return .notObject("a JSON array")
                case UInt8(ascii: "\""): return .notObject("a JSON string")
                case UInt8(ascii: "t"), UInt8(ascii: "f"): return .notObject("a JSON boolean")
                case UInt8(ascii: "n"): return .notObject("JSON null")
                default: return .notObject("a JSON number")
                }
            }
            return .valid
        }

        /// One value and everything nested in it; nil when whole and valid.
        mutating func value() -> Diagnosis? {
            var expectValue = true
            while true {
                skipSpace()
                if expectValue {
                    guard i < n else { return fault(.cutShort, i) }
                    let c = base[i]
                    switch c {
                    case UInt8(ascii: "{"), UInt8(ascii: "["):
                        if stack.count >= maxDepth {
                            // Inside an envelope, say which top-level member holds the depth.
                            if let m = topMember, names != nil, stack.first == true {
                                return .tooDeepIn(ScanError(kind: .tooDeep(maxDepth), offset: i, byte: nil),
                                                  member: String(decoding: UnsafeBufferPointer(rebasing: UnsafeBufferPointer(start: base, count: n)[m]), as: UTF8.self))
                            }
                            return fault(.tooDeep(maxDepth), i)
                        }
                        stack.append(c == UInt8(ascii: "{"))
                        i += 1
                        skipSpace()
                        guard i < n else { return fault(.cutShort, i) }
                        if base[i] == c + 2 {  // '}' and ']' are two above their openers
                            i += 1
                            stack.removeLast()
                            expectValue = false
                            continue
                        }
                        if c == UInt8(ascii: "{") {
                            if let bad = key() { return bad }
                        }
                        continue
                    case UInt8(ascii: "\""):
                        if let bad = string() { return bad }
                    case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                        if let bad = number() { return bad }
                    case UInt8(ascii: "t"): if let bad = literal("true") { return bad }
                    case UInt8(ascii: "f"): if let bad = literal("false") { return bad }
                    case UInt8(ascii: "n"): if let bad = literal("null") { return bad }
                    default: return fault(.invalid, i)
                    }
                    expectValue = false
                    continue
                }
                // After a value.
                guard let inObject = stack.last else { return nil }
                guard i < n else { return fault(.cutShort, i) }
                let c = base[i]
                if c == UInt8(ascii: ",") {
                    i += 1
                    if inObject {
                        skipSpace()
                        if let bad = key() { return bad }
                    }
                    expectValue = true
                } else if c == (inObject ? UInt8(ascii: "}") : UInt8(ascii: "]")) {
                    i += 1
                    stack.removeLast()
                } else {
                    return fault(.invalid, i)
                }
            }
        }

        /// A member name and its colon; a repeated envelope member at the top level is a fault.
        mutating func key() -> Diagnosis? {
            guard i < n else { return fault(.cutShort, i) }
            guard base[i] == UInt8(ascii: "\"") else { return fault(.invalid, i) }
            let start = i + 1
            if let bad = string() { return bad }
            if stack.count == 1 { topMember = start..<(i - 1) }
            if stack.count == 1, let names {
                let field = ScanCore.match(base, start, i - 1, names)
                if field != 0 && !seen.insert(field).inserted {
                    let name = String(decoding: UnsafeBufferPointer(start: base + start, count: i - 1 - start), as: UTF8.self)
                    return .duplicate(name)
                }
            }
            skipSpace()
            guard i < n else { return fault(.cutShort, i) }
            guard base[i] == UInt8(ascii: ":") else { return fault(.invalid, i) }
            i += 1
            return nil
        }

        /// A string from its opening quote at `i`; `i` ends after the closing one.
        mutating func string() -> Diagnosis? {
            i += 1
            while true {
                guard i < n else { return fault(.cutShort, i) }
                let c = base[i]
                if c == UInt8(ascii: "\"") {
                    i += 1
                    return nil
                }
                if c < 0x20 { return fault(.invalid, i) }
                if c == UInt8(ascii: "\\") {
                    i += 1
                    guard i < n else { return fault(.cutShort, i) }
                    let e = base[i]
                    if e == UInt8(ascii: "u") {
                        // Any four hex digits, surrogates paired or lone included (RFC 8259 §7, §8.2).
                        guard hex4() != nil else { return fault(i < n ? .invalid : .cutShort, i) }
                    } else if !Array("\"\\/bfnrt".utf8).contains(e) {
                        return fault(.invalid, i)
                    }
                    i += 1
                    continue
                }
                if c < 0x80 {
                    i += 1
                    continue
                }
                if let bad = utf8() { return bad }
            }
        }

        /// One multi-byte UTF-8 sequence at `i` (RFC 3629: no overlongs, no surrogates, at most U+10FFFF).
        mutating func utf8() -> Diagnosis? {
            let c = base[i]
            let count: Int
            var low: UInt8 = 0x80
            var high: UInt8 = 0xBF
            switch c {
            case 0xC2...0xDF: count = 1
            case 0xE0: count = 2; low = 0xA0
            case 0xE1...0xEC, 0xEE, 0xEF: count = 2
            case 0xED: count = 2; high = 0x9F
            case 0xF0: count = 3; low = 0x90
            case 0xF1...0xF3: count = 3
            case 0xF4: count = 3; high = 0x8F
            default: return fault(.invalid, i)
            }
            for k in 1...count {
                guard i + k < n else { return fault(.cutShort, i + k) }
                let b = base[i + k]
                let (lo, hi) = k == 1 ? (low, high) : (UInt8(0x80), UInt8(0xBF))
                guard b >= lo && b <= hi else { return fault(.invalid, i + k) }
            }
            i += count + 1
            return nil
        }

        /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?` at `i`.
        mutating func number() -> Diagnosis? {
            if base[i] == UInt8(ascii: "-") { i += 1 }
            guard i < n else { return fault(.cutShort, i) }
            if base[i] == UInt8(ascii: "0") {
                i += 1
            } else if isDigit(base[i]) {
                while i < n && isDigit(base[i]) { i += 1 }
            } else {
                return fault(.invalid, i)
            }
            if i < n && base[i] == UInt8(ascii: ".") {
                i += 1
                guard i < n else { return fault(.cutShort, i) }
                guard isDigit(base[i]) else { return fault(.invalid, i) }
                while i < n && isDigit(base[i]) { i += 1 }
            }
            if i < n && (base[i] == UInt8(ascii: "e") || base[i] == UInt8(ascii: "E")) {
                i += 1
                if i < n && (base[i] == UInt8(ascii: "+") || base[i] == UInt8(ascii: "-")) { i += 1 }
                guard i < n else { return fault(.cutShort, i) }
                guard isDigit(base[i]) else { return fault(.invalid, i) }
                while i < n && isDigit(base[i]) { i += 1 }
            }
            return nil
        }

        mutating func literal(_ word: StaticString) -> Diagnosis? {
            let bytes = UnsafeBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount)
            for b in bytes {
                guard i < n else { return fault(.cutShort, i) }
                guard base[i] == b else { return fault(.invalid, i) }
                i += 1
            }
            return nil
        }

        /// Four hex digits after `i` (which is at the `u`), leaving `i` on the last; nil at the first bad or missing one.
        mutating func hex4() -> UInt32? {
            var unit: UInt32 = 0
            for _ in 0..<4 {
                i += 1
                guard i < n, isHex(base[i]) else { return nil }
                let b = base[i]
                unit = unit << 4 | UInt32(isDigit(b) ? b - UInt8(ascii: "0") : (b | 0x20) - UInt8(ascii: "a") + 10)
            }
            return unit
        }

        func isDigit(_ b: UInt8) -> Bool { b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }
        func isHex(_ b: UInt8) -> Bool { isDigit(b) || (b | 0x20 >= UInt8(ascii: "a") && b | 0x20 <= UInt8(ascii: "f")) }
    }
}

extension Envelope {
    /// Why `body` is not a well-formed envelope, in Peel's words (`not JSON at byte 0 (0x3c '<')`,
    /// `trailing data at byte 1234`, `duplicate member "code"`): never the body itself. Only for
    /// bodies the scan refused.
    static func diagnose(_ body: UnsafeBufferPointer<UInt8>, config: EnvelopeConfig) -> String {
        let maxDepth = config.maxDepth
        let diagnosis = (config.compiled.outer ?? config.compiled.scope).with { names in
            ScanDiagnosis.diagnose(body, maxDepth: maxDepth, names: names)
        }
        switch diagnosis {
        case .error(let e): return e.description
        case .notObject(let what): return "not an object (\(what))"
        case .duplicate(let name): return "duplicate member \"\(name)\""
        case .tooDeepIn(let e, let member): return "\(e.description) in member \"\(member)\""
        case .valid: return "not a well-formed envelope"
        }
    }
}
