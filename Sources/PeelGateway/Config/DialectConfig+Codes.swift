import Foundation
import PeelEnvelope

// Code lists and the code → status map as flags, the environment and the config file write them.

/// A change to a code list: a list replaces the dialect's, a list that starts with `+` adds to it.
enum CodeListChange: Sendable, Equatable {
    case replace([EnvelopeCode])
    case add([EnvelopeCode])

    /// The list after the change.
    func applied(to base: CodeSet) -> CodeSet {
        switch self {
        case .replace(let codes): return CodeSet(codes)
        case .add(let codes):
            var set = base
            for c in codes { set.insert(c) }
            return set
        }
    }
}

extension DialectConfig {
    /// A code list: from a flag or the environment, integers and double-quoted strings separated by
    /// commas (`0,"00000"`); from the config file, a JSON array of integers and strings. A leading
    /// `+` adds to the dialect's list (`+403`, `["+", 403]`).
    /// An empty list is a statement (`"auth_codes": []`: no auth codes); `+` with nothing is not.
    /// With `prefixes` (auth codes), a string ending with `*` is a prefix (`"AuthFailure.*"`).
    static func codes(_ v: ConfigValue, _ o: String, allowEmpty: Bool = true, prefixes: Bool = false) throws(ConfigError) -> CodeListChange {
        var add = false
        var codes: [EnvelopeCode] = []
        switch v {
        case .map: throw ConfigError(option: o, problem: "must be a list of codes, not an object")
        case .text, .list:
            var text = v.flagText.trimmingCharacters(in: .whitespaces)
            if text.hasPrefix("+") {
                add = true
                text = String(text.dropFirst())
            }
            for item in splitCodes(text) {
                let trimmed = item.trimmingCharacters(in: .whitespaces)
                if trimmed.isEmpty { continue }
                codes.append(try flagCode(trimmed, o))
            }
        case .array(let items):
            var rest = items[...]
            if let first = rest.first?.string, first.hasPrefix("+") {
                add = true
                rest = rest.dropFirst()
                let after = String(first.dropFirst())
                if !after.isEmpty { codes.append(try flagCode(after, o)) }
            }
            for (k, item) in rest.enumerated() {
                codes.append(try fileCode(item, "\(o)[\(k + items.count - rest.count)]"))
            }
        }
        if codes.isEmpty && (add || !allowEmpty) {
            throw ConfigError(option: o, problem: add ? "+ must be followed by what to add" : "needs at least one code")
        }
        for (k, code) in codes.enumerated() {
            guard case .string(let s) = code, s.hasSuffix("*") else { continue }
            let at = v.isArray ? "\(o)[\(k + (add && !v.plusHasCode ? 1 : 0))]" : o
            guard prefixes else {
                throw ConfigError(option: at, problem: "\(code.json) is a prefix: prefixes are for auth codes only")
            }
            if s == "*" { throw ConfigError(option: at, problem: "\"*\" would match every string code: write what the codes start with (\"AuthFailure.*\")") }
        }
        return add ? .add(codes) : .replace(codes)
    }

    /// One code in flag syntax, or the error that says how to write one.
    static func flagCode(_ text: String, _ o: String) throws(ConfigError) -> EnvelopeCode {
        guard let code = EnvelopeCode.parse(flag: text) else {
            throw ConfigError(option: o, problem: "\(text) is not a code: write an integer (200) or a string in double quotes (\"\(text)\")")
        }
        return code
    }

    /// One code in a JSON array: an integer within 64 bits (as written: no fraction or exponent), or a string.
    static func fileCode(_ item: ConfigJSON, _ o: String) throws(ConfigError) -> EnvelopeCode {
        switch item {
        case .string(let s): return .string(s)
        case .number(let t):
            if case .integer(let n)? = EnvelopeCode.parse(flag: t) { return .integer(n) }
            throw ConfigError(option: o, problem: "\(t) is not a code: an integer within 64 bits or a string")
        default:
            throw ConfigError(option: o, problem: "\(item.kind) is not a code: an integer or a string")
        }
    }

    /// Splits a flag's code list on the commas outside double quotes.
    static func splitCodes(_ text: String) -> [String] {
        var items: [String] = []
        var current = ""
        var quoted = false
        for ch in text {
            if ch == "\"" { quoted.toggle() }
            if ch == "," && !quoted {
                items.append(current)
                current = ""
            } else {
                current.append(ch)
            }
        }
        items.append(current)
        return items
    }

    /// The code → status map: `1001=409,"A0230"=401` from a flag; `{"1001": 409, "A0230": 401}` from
    /// the file, where a key that is a canonical decimal integer means that integer.
    static func codeStatus(_ v: ConfigValue, _ o: String) throws(ConfigError) -> CodeStatusMap {
        var m: [EnvelopeCode: Int] = [:]
        switch v {
        case .map(let d):
            for member in d {
                let k = member.name
                guard case .number(let t) = member.value, let st = Int(t), (400...599).contains(st) else {
                    throw ConfigError(option: "\(o).\(k)", problem: "status must be a number 400-599")
                }
                let code: EnvelopeCode = EnvelopeCode.string(k).integerValue.map { .integer($0) } ?? .string(k)
                m[code] = st
            }
        case .array:
            throw ConfigError(option: o, problem: "must be an object ({\"1001\": 409}), not a list")
        case .text, .list:
            for item in splitCodes(v.flagText) {
                let trimmed = item.trimmingCharacters(in: .whitespaces)
                if trimmed.isEmpty { continue }
                guard let eq = trimmed.lastIndex(of: "=") else { throw ConfigError(option: o, problem: "\(trimmed) is not CODE=STATUS") }
                var code = try flagCode(String(trimmed[..<eq]).trimmingCharacters(in: .whitespaces), o)
                // As in the config file: a key that spells a decimal integer means that integer.
                if case .string = code, let n = code.integerValue { code = .integer(n) }
                guard let st = Int(trimmed[trimmed.index(after: eq)...].trimmingCharacters(in: .whitespaces)), (400...599).contains(st) else {
                    throw ConfigError(option: o, problem: "status for \(code) must be 400-599")
                }
                m[code] = st
            }
        }
        return CodeStatusMap(m)
    }

}

extension ConfigValue {
    /// Whether the value is a config file's JSON object.
    var isMap: Bool {
        if case .map = self { return true }
        return false
    }

    /// Whether the value is a config file's JSON array.
    var isArray: Bool {
        if case .array = self { return true }
        return false
    }

    /// Whether a list that adds carries its first code in its `+` item (`["+403"]`, not `["+", 403]`).
    var plusHasCode: Bool {
        if case .array(let items) = self, let first = items.first?.string { return first.count > 1 }
        return false
    }

    /// The value as flag text: a list's items joined by commas.
    var flagText: String {
        switch self {
        case .text(let t): return t
        case .list(let l): return l.joined(separator: ",")
        case .array(let a): return ConfigLoader.stringItems(a).joined(separator: ",")
        case .map: return ""
        }
    }
}
