/// An envelope code as the upstream wrote it: a JSON integer (`200`) or a JSON string (`"00000"`).
/// Codes are JSON scalars, not numbers: `"00000"` (the Alibaba Java manual's success) is not `0`.
public enum EnvelopeCode: Hashable, Sendable, CustomStringConvertible, ExpressibleByIntegerLiteral, ExpressibleByStringLiteral {
    /// A JSON integer within 64 bits.
    case integer(Int64)
    /// A JSON string, unescaped.
    case string(String)

    /// Creates an integer code from a literal.
    public init(integerLiteral value: Int64) { self = .integer(value) }
    /// Creates a string code from a literal.
    public init(stringLiteral value: String) { self = .string(value) }

    /// The code as JSON text: `200` or `"00000"`.
    public var json: String {
        switch self {
        case .integer(let n): String(n)
        case .string(let s): JSONString.quoted(s)
        }
    }

    public var description: String { json }

    /// The integer a string code names when it is exactly that integer's decimal text (`"0"`, `"-3"`;
    /// not `"00"`, `"+3"`, `"-0"` or `" 3"`); an integer code's own value.
    public var integerValue: Int64? {
        switch self {
        case .integer(let n): return n
        case .string(let s):
            guard let n = Int64(s), String(n) == s else { return nil }
            return n
        }
    }

    /// Parses one code as written in a flag or an environment variable: a JSON integer (`200`,
    /// `-1`) or a JSON string in double quotes (`"00000"`); nil for anything else (`00000`, `1e3`,
    /// `0x10`, `A0230`), which the caller refuses rather than guess.
    public static func parse(flag text: String) -> EnvelopeCode? {
        let bytes = Array(text.utf8)
        if bytes.count >= 2, bytes.first == UInt8(ascii: "\""), bytes.last == UInt8(ascii: "\"") {
            let inner = bytes[1..<(bytes.count - 1)]
            // No escapes: a code is a short name, and a quote or backslash inside one is a typo.
            guard !inner.contains(UInt8(ascii: "\"")), !inner.contains(UInt8(ascii: "\\")),
                  !inner.contains(where: { $0 < 0x20 }) else { return nil }
            return .string(String(decoding: inner, as: UTF8.self))
        }
        return bytes.withUnsafeBufferPointer { Envelope.integer($0) }.map { .integer($0) }
    }
}

/// A list of codes. An integer matches the same integer and a string holding exactly its decimal
/// text (`0` matches `0` and `"0"`); a string matches that exact string only; a string ending with
/// `*` is a prefix and matches every string code that starts with what comes before it
/// (`"AuthFailure.*"`: Tencent Cloud's dozen `AuthFailure.…` codes). Names compare by code units.
public struct CodeSet: Hashable, Sendable {
    /// Integer members.
    public private(set) var integers: Set<Int64> = []
    /// String members.
    public private(set) var strings: Set<String> = []
    /// Prefixes of string members, without their `*`.
    public private(set) var prefixes: Set<String> = []

    /// Creates a set from codes.
    public init(_ codes: [EnvelopeCode] = []) {
        for code in codes { insert(code) }
    }

    /// Adds a code; a string ending with `*` adds a prefix.
    public mutating func insert(_ code: EnvelopeCode) {
        switch code {
        case .integer(let n): integers.insert(n)
        case .string(let s):
            if s.utf8.last == UInt8(ascii: "*") {
                prefixes.insert(String(s.dropLast()))
            } else {
                strings.insert(s)
            }
        }
    }

    /// Whether the upstream's code is in the set.
    public func contains(_ code: EnvelopeCode) -> Bool {
        switch code {
        case .integer(let n):
            return integers.contains(n)
        case .string(let s):
            if strings.contains(s) { return true }
            if !prefixes.isEmpty && prefixes.contains(where: { s.utf8.starts(with: $0.utf8) }) { return true }
            guard !integers.isEmpty, let n = code.integerValue else { return false }
            return integers.contains(n)
        }
    }

    /// Whether no upstream code could match both sets.
    public func isDisjoint(with other: CodeSet) -> Bool {
        guard integers.isDisjoint(with: other.integers), strings.isDisjoint(with: other.strings) else { return false }
        // "200" in one set and 200 in the other both match an upstream "200".
        let crossA = strings.contains { s in EnvelopeCode.string(s).integerValue.map(other.integers.contains) ?? false }
        let crossB = other.strings.contains { s in EnvelopeCode.string(s).integerValue.map(integers.contains) ?? false }
        return !crossA && !crossB && !overlapsByPrefix(other) && !other.overlapsByPrefix(self)
    }

    /// Whether one of this set's prefixes matches a code the other set matches: a string of its, an
    /// integer's decimal text (an upstream `"401"` matches `401`), or every code of one of its
    /// prefixes (one prefix starts with the other).
    private func overlapsByPrefix(_ other: CodeSet) -> Bool {
        prefixes.contains { p in
            other.strings.contains { $0.utf8.starts(with: p.utf8) }
                || other.integers.contains { String($0).utf8.starts(with: p.utf8) }
                || other.prefixes.contains { $0.utf8.starts(with: p.utf8) || p.utf8.starts(with: $0.utf8) }
        }
    }

    /// Whether the set is empty.
    public var isEmpty: Bool { integers.isEmpty && strings.isEmpty && prefixes.isEmpty }

    /// Members in a stable order: integers ascending, then strings, then prefixes as written (`"AuthFailure.*"`).
    public var sorted: [EnvelopeCode] {
        integers.sorted().map { .integer($0) } + strings.sorted().map { .string($0) } + prefixes.sorted().map { .string($0 + "*") }
    }

    /// The set as a JSON array.
    public var json: String { "[" + sorted.map(\.json).joined(separator: ",") + "]" }
}

/// Business code → HTTP status, keyed like `CodeSet` matches: a string code finds its own entry,
/// else the entry of the integer it spells exactly.
public struct CodeStatusMap: Hashable, Sendable {
    /// The entries.
    public var entries: [EnvelopeCode: Int] = [:]

    /// Creates a map.
    public init(_ entries: [EnvelopeCode: Int] = [:]) { self.entries = entries }

    /// The status for an upstream code, if the map has one.
    public func status(for code: EnvelopeCode) -> Int? {
        if let s = entries[code] { return s }
        if case .string = code, let n = code.integerValue { return entries[.integer(n)] }
        return nil
    }

    /// The map as a JSON object, keys in `CodeSet` order (a map key is always a JSON string).
    public var json: String {
        let keys = CodeSet(Array(entries.keys)).sorted
        return "{" + keys.map { k -> String in
            let name: String
            switch k {
            case .integer(let n): name = String(n)
            case .string(let s): name = s
            }
            return JSONString.quoted(name) + ":" + String(entries[k]!)
        }.joined(separator: ",") + "}"
    }
}
