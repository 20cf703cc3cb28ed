import Foundation
import PeelEnvelope

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

/// What the field and code options (`--code-field`, `--success-codes`, …) change in the chosen
/// dialect. They apply after `dialect`, whichever source set either, so that `--dialect ruoyi
/// --auth-codes +403` means RuoYi's dialect with one more auth code.
struct DialectOverrides: Sendable, Equatable {
    var code: MemberPath?
    var message: MemberPath?
    var data: MemberPath?
    var successCodes: CodeListChange?
    var authCodes: CodeListChange?
    var codeStatus: CodeStatusMap?
    /// Where each change came from (`--auth-codes`, `peel.json: auth_codes`), by the dialect key it changes.
    var origins: [String: String] = [:]

    /// The dialect with these changes.
    func applied(to base: Dialect) -> Dialect {
        var d = base
        if let code { d.code = code }
        if let message { d.messages = [message] }
        if let data { d.payload = .member(data) }
        if let successCodes { d.successCodes = successCodes.applied(to: d.successCodes) }
        if let authCodes { d.authCodes = authCodes.applied(to: d.authCodes) }
        if let codeStatus { d.codeStatus = codeStatus }
        return d
    }
}

/// Where a dialect was described: the option or key path (`--dialect`, `peel.json: routes[1].dialect`),
/// and whether it was an object whose keys can be named (`peel.json: dialect.success_codes`).
struct DialectOrigin: Sendable, Equatable {
    var option: String
    var object: Bool

    /// The key path of one of its parts.
    func at(_ part: Dialect.Part) -> String {
        guard object, let key = part.key else { return option }
        return "\(option).\(key)"
    }
}

/// Reads dialects and codes from flags, the environment and the config file, and shows them.
enum DialectConfig {
    /// Refuses a dialect that cannot work or holds a setting that can never take effect, naming
    /// the option or key that set the part at fault: a field or code option when one changed it,
    /// else the dialect's own key path.
    static func check(_ d: Dialect, _ origin: DialectOrigin, overrides: DialectOverrides? = nil) throws(ConfigError) {
        guard let (part, why) = d.problem() else { return }
        let option = part.key.flatMap { overrides?.origins[$0] } ?? origin.at(part)
        throw ConfigError(option: option, problem: why)
    }

    /// The presets' names, for errors.
    static var presetNames: String { Dialect.presets.map(\.preset).joined(separator: ", ") }

    /// A preset by name, or the error that lists them.
    static func preset(_ name: String, _ o: String) throws(ConfigError) -> Dialect {
        guard let d = Dialect.preset(named: name) else {
            throw ConfigError(option: o, problem: "\(name) is not a dialect (presets: \(presetNames))")
        }
        return d
    }

    /// The `dialect` option: a preset's name, or (in the config file) an object.
    static func dialect(_ v: ConfigValue, _ o: String) throws(ConfigError) -> Dialect {
        switch v {
        case .text(let name): return try preset(name, o)
        case .map(let object): return try decode(object, o)
        case .list, .array: throw ConfigError(option: o, problem: "must be a preset's name or an object")
        }
    }

    /// A dialect described in the config file; unknown keys are refused with their path.
    static func decode(_ object: [ConfigJSON.Member], _ o: String) throws(ConfigError) -> Dialect {
        var d = Dialect.peel
        let json = ConfigJSON.object(object)
        var presetName = "peel"
        if let p = json["preset"] {
            guard let name = p.string else { throw ConfigError(option: "\(o).preset", problem: "must be a string") }
            d = try preset(name, "\(o).preset")
            presetName = name
        }
        for member in object.sorted(by: { $0.name < $1.name }) {
            let value = member.value
            let at = "\(o).\(member.name)"
            switch member.name {
            case "preset": break
            case "code":
                d.codes = try paths(value, at, orNull: true)
            case "success": d.success = try success(value, at)
            case "success_codes": d.successCodes = try codes(ConfigLoader.fileValue(value) ?? .array([]), at).applied(to: d.successCodes)
            case "auth_codes": d.authCodes = try codes(ConfigLoader.fileValue(value) ?? .array([]), at, prefixes: true).applied(to: d.authCodes)
            case "code_status": d.codeStatus = try codeStatus(ConfigLoader.fileValue(value) ?? .map([]), at)
            case "message": d.messages = try paths(value, at)
            case "payload": d.payload = try payload(value, at)
            case "siblings":
                guard let s = value.string, let rule = Siblings(rawValue: s) else {
                    throw ConfigError(option: at, problem: "must be drop or keep")
                }
                d.siblings = rule
            case "ignore":
                guard case .array(let list) = value else { throw ConfigError(option: at, problem: "must be a list of member names") }
                d.ignore = try list.enumerated().map { (k, v) throws(ConfigError) in
                    guard let s = v.string, !s.isEmpty else { throw ConfigError(option: "\(at)[\(k)]", problem: "must be a member name") }
                    return s
                }
            case "auth_flag": d.authFlag = value == .null ? nil : try path(value, at)
            case "extras":
                guard case .array(let list) = value else { throw ConfigError(option: at, problem: "must be a list of member paths") }
                d.extras = try list.enumerated().map { (k, v) throws(ConfigError) in try path(v, "\(at)[\(k)]") }
            default:
                throw ConfigError(option: at, problem: "unknown key (preset, code, success, success_codes, auth_codes, auth_flag, code_status, message, payload, siblings, ignore, extras)")
            }
        }
        d.preset = presetName
        return try settled(d, given: Set(object.map(\.name)), o)
    }

    /// The dialect without what its preset brought that the keys given make meaningless (a flag
    /// rule leaves a preset's success codes nothing to do); a key given for nothing is refused.
    static func settled(_ dialect: Dialect, given: Set<String>, _ o: String) throws(ConfigError) -> Dialect {
        var d = dialect
        let readsCode = if case .code = d.success { true } else if case .codeOrAbsent = d.success { true } else { false }
        if !readsCode && !given.contains("success_codes") { d.successCodes = CodeSet() }
        if d.codes.isEmpty && !given.contains("auth_codes") { d.authCodes = CodeSet() }
        if d.codes.isEmpty && !given.contains("code_status") { d.codeStatus = CodeStatusMap() }
        if case .member = d.payload {} else {
            // `siblings` says what happens beside a payload member; there is none.
            if given.contains("siblings") {
                throw ConfigError(option: "\(o).siblings", problem: "never used: siblings apply beside a payload member, and the payload is not one")
            }
            d.siblings = .drop
            if case .pattern = d.payload, !given.contains("ignore") { d.ignore = [] }
        }
        return d
    }

    /// A member path (`msg`, `error.message`, `errors.0.message`).
    static func path(_ value: ConfigJSON, _ o: String) throws(ConfigError) -> MemberPath {
        guard let s = value.string else {
            throw ConfigError(option: o, problem: "must be a member name or a dotted path (error.message)")
        }
        guard let p = MemberPath(dotted: s) else {
            let why = MemberPath.refusal(s) ?? "it is not one"
            throw ConfigError(option: o, problem: "must be a member name or a dotted path (error.message, errors.0.message): \(why)")
        }
        return p
    }

    /// One path, or a list of them tried in order (`["name", "error"]`); `null` for none when `orNull`.
    static func paths(_ value: ConfigJSON, _ o: String, orNull: Bool = false) throws(ConfigError) -> [MemberPath] {
        switch value {
        case .null where orNull: return []
        case .array(let list):
            if list.isEmpty && orNull { throw ConfigError(option: o, problem: "must name at least one member (null for none)") }
            return try list.enumerated().map { (k, v) throws(ConfigError) in try path(v, "\(o)[\(k)]") }
        default: return [try path(value, o)]
        }
    }

    /// Paths as the config file writes them: a string when one, a list when several (`null` for none when `orNull`).
    static func json(_ paths: [MemberPath], orNull: Bool = false) -> String {
        let q = ConfigLoader.q
        if paths.isEmpty && orNull { return "null" }
        if paths.count == 1 && orNull { return q(paths[0].description) }
        return "[" + paths.map { q($0.description) }.joined(separator: ",") + "]"
    }

    /// `code`, `code_or_absent`, `{"flag": NAME}`, `{"status": NAME}` or `{"error": NAME}`.
    static func success(_ value: ConfigJSON, _ o: String) throws(ConfigError) -> SuccessRule {
        if let s = value.string {
            switch s {
            case "code": return .code
            case "code_or_absent": return .codeOrAbsent
            default: break
            }
        } else if case .object(let m) = value, m.count == 1, ["flag", "status", "error"].contains(m[0].name) {
            let path = try path(m[0].value, "\(o).\(m[0].name)")
            switch m[0].name {
            case "flag": return .flag(path)
            case "status": return .status(path)
            default: return .errorMember(path)
            }
        }
        throw ConfigError(option: o, problem: "must be code, code_or_absent, {\"flag\": PATH}, {\"status\": PATH} or {\"error\": PATH} (a member name or a dotted path)")
    }

    /// A member path, `{"rest": true}`, or `{"pattern": "*SUFFIX", "failure": NAME}`.
    static func payload(_ value: ConfigJSON, _ o: String) throws(ConfigError) -> PayloadRule {
        if value.string != nil { return .member(try path(value, o)) }
        if case .object(let m) = value {
            if m.count == 1, value["rest"] == .bool(true) { return .rest }
            if let pattern = value["pattern"]?.string, m.allSatisfy({ ["pattern", "failure"].contains($0.name) }) {
                guard pattern.hasPrefix("*"), pattern.count > 1, !pattern.dropFirst().contains("*") else {
                    throw ConfigError(option: "\(o).pattern", problem: "must be *SUFFIX, like *_response")
                }
                var failure: String?
                if let f = value["failure"] {
                    guard let name = f.string, !name.isEmpty else { throw ConfigError(option: "\(o).failure", problem: "must be a member name") }
                    failure = name
                }
                return .pattern(suffix: String(pattern.dropFirst()), failure: failure)
            }
        }
        throw ConfigError(option: o, problem: "must be a member path, {\"rest\": true} or {\"pattern\": \"*_response\", \"failure\": \"error_response\"}")
    }

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

    /// A code list change as the config file writes it: a list, or one that starts with `"+"`.
    static func json(_ change: CodeListChange) -> String {
        switch change {
        case .replace(let codes): return "[" + codes.map(\.json).joined(separator: ",") + "]"
        case .add(let codes): return "[\"+\"" + codes.map { "," + $0.json }.joined() + "]"
        }
    }

    /// The effective dialect as a config-file object, which reads back as the same dialect: the
    /// keys that take effect under it, each once (no success codes beside a flag rule).
    static func json(_ d: Dialect) -> String {
        let q = ConfigLoader.q
        var fields: [String] = ["\"preset\":" + q(d.preset)]
        fields.append("\"code\":" + json(d.codes, orNull: true))
        let success: String
        switch d.success {
        case .code: success = q("code")
        case .codeOrAbsent: success = q("code_or_absent")
        case .flag(let m): success = "{\"flag\":\(q(m.description))}"
        case .status(let m): success = "{\"status\":\(q(m.description))}"
        case .errorMember(let m): success = "{\"error\":\(q(m.description))}"
        }
        fields.append("\"success\":" + success)
        switch d.success {
        case .code, .codeOrAbsent: fields.append("\"success_codes\":" + d.successCodes.json)
        case .flag, .status, .errorMember: break
        }
        if !d.codes.isEmpty {
            fields.append("\"auth_codes\":" + d.authCodes.json)
            fields.append("\"code_status\":" + d.codeStatus.json)
        }
        fields.append("\"message\":[" + d.messages.map { q($0.description) }.joined(separator: ",") + "]")
        let payload: String
        switch d.payload {
        case .member(let p): payload = q(p.description)
        case .rest: payload = "{\"rest\":true}"
        case .pattern(let suffix, let failure):
            payload = "{\"pattern\":\(q("*" + suffix))" + (failure.map { ",\"failure\":\(q($0))" } ?? "") + "}"
        }
        fields.append("\"payload\":" + payload)
        if case .member = d.payload { fields.append("\"siblings\":" + q(d.siblings.rawValue)) }
        if case .pattern = d.payload {} else { fields.append("\"ignore\":[" + d.ignore.map(q).joined(separator: ",") + "]") }
        fields.append("\"extras\":[" + d.extras.map { q($0.description) }.joined(separator: ",") + "]")
        // Shown where it says something: set, or taken away from a preset that has one.
        if d.authFlag != nil || Dialect.preset(named: d.preset)?.authFlag != nil {
            fields.append("\"auth_flag\":" + (d.authFlag.map { q($0.description) } ?? "null"))
        }
        return "{" + fields.joined(separator: ",") + "}"
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
