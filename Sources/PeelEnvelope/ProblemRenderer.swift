/// Renders an RFC 9457 `application/problem+json` body with members in Peel's fixed order.
public func renderProblem(_ problem: Problem, requestId: String, language: Language, typeBase: String) -> [UInt8] {
    var out = ProblemWriter()
    // RFC 9457 §3.1 members first (type, title, status, detail), then extension members (§3.2).
    out.bytes.append(UInt8(ascii: "{"))
    out.member("type", first: true)
    out.string(typeBase, problem.kind.rawValue)
    out.member("title")
    out.string(problem.kind.title)
    out.member("status")
    out.integer(Int64(problem.status))
    out.member("detail")
    out.string(problem.detail ?? problem.kind.detail(in: language))
    out.member("code")
    out.code(problem.code)
    out.member("kind")
    out.string(problem.kind.rawValue)
    out.member("request_id")
    out.string(requestId)
    if let upstreamStatus = problem.upstreamStatus {
        out.member("upstream_status")
        out.integer(Int64(upstreamStatus))
    }
    if let reason = problem.reason {
        out.member("reason")
        out.string(reason)
    }
    if let errors = problem.errors {
        // RFC 9457 §3: field errors as `{detail, pointer}` objects, built or kept byte for byte.
        out.member("errors")
        out.bytes.append(contentsOf: errors)
        if problem.errorsOmitted > 0 {
            out.member("errors_omitted")
            out.integer(Int64(problem.errorsOmitted))
        }
    }
    if !problem.upstream.isEmpty {
        // RFC 9457 §3.2: one extension member holds what the upstream said beyond code and message.
        out.member("upstream")
        out.bytes.append(UInt8(ascii: "{"))
        for (k, m) in problem.upstream.enumerated() {
            if k > 0 { out.bytes.append(UInt8(ascii: ",")) }
            out.string(m.name)
            out.bytes.append(UInt8(ascii: ":"))
            out.bytes.append(contentsOf: m.raw)
        }
        out.bytes.append(UInt8(ascii: "}"))
    }
    out.bytes.append(UInt8(ascii: "}"))
    return out.bytes
}

/// Appends JSON tokens to a byte array.
struct ProblemWriter {
    /// The document so far.
    var bytes: [UInt8] = []

    /// Starts with room for a typical problem document.
    init() {
        bytes.reserveCapacity(320)
    }

    /// Appends `,"name":` (no comma for the first member); names are plain ASCII literals.
    mutating func member(_ name: StaticString, first: Bool = false) {
        if !first { bytes.append(UInt8(ascii: ",")) }
        bytes.append(UInt8(ascii: "\""))
        name.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
    }

    /// Appends the concatenation of the parts as one JSON string.
    mutating func string(_ parts: String...) {
        bytes.append(UInt8(ascii: "\""))
        for part in parts { escape(part) }
        bytes.append(UInt8(ascii: "\""))
    }

    /// Appends a string's UTF-8 with the escapes RFC 8259 §7 requires; non-ASCII stays raw UTF-8.
    private mutating func escape(_ text: String) {
        for c in text.utf8 {
            switch c {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                bytes.append(UInt8(ascii: "\\"))
                bytes.append(c)
            case 0x08: appendEscape(UInt8(ascii: "b"))
            case 0x09: appendEscape(UInt8(ascii: "t"))
            case 0x0A: appendEscape(UInt8(ascii: "n"))
            case 0x0C: appendEscape(UInt8(ascii: "f"))
            case 0x0D: appendEscape(UInt8(ascii: "r"))
            case 0x00..<0x20:
                appendEscape(UInt8(ascii: "u"))
                bytes.append(UInt8(ascii: "0"))
                bytes.append(UInt8(ascii: "0"))
                bytes.append(hexDigit(c >> 4))
                bytes.append(hexDigit(c & 0xF))
            default:
                bytes.append(c)
            }
        }
    }

    /// The lowercase hex digit for a value 0...15.
    private func hexDigit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "a") + value - 10
    }

    /// Appends a backslash and the escape letter.
    private mutating func appendEscape(_ letter: UInt8) {
        bytes.append(UInt8(ascii: "\\"))
        bytes.append(letter)
    }

    /// Appends a code as the upstream wrote it: a number, a string, or `null`.
    mutating func code(_ code: EnvelopeCode?) {
        switch code {
        case .integer(let n)?: integer(n)
        case .string(let s)?: string(s)
        case nil: bytes.append(contentsOf: [0x6E, 0x75, 0x6C, 0x6C])  // null
        }
    }

    /// Appends a decimal integer.
    mutating func integer(_ value: Int64) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        // Work on the magnitude as UInt64 so Int64.min does not overflow.
        let magnitude = value.magnitude
        var divisor: UInt64 = 1
        while magnitude / divisor >= 10 { divisor *= 10 }
        while divisor > 0 {
            bytes.append(UInt8(ascii: "0") + UInt8(magnitude / divisor % 10))
            divisor /= 10
        }
    }
}

/// JSON string literals for the rest of Peel (logs, status documents, the demo's bodies), written
/// by the same escaper as problem documents.
public enum JSONString {
    /// `text` as a JSON string literal with the escapes RFC 8259 §7 requires; non-ASCII stays UTF-8.
    public static func quoted(_ text: String) -> String {
        var w = ProblemWriter()
        w.string(text)
        return String(decoding: w.bytes, as: UTF8.self)
    }
}
