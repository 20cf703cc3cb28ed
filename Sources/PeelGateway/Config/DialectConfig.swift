import Foundation
import PeelEnvelope

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
            case "field_errors":
                d.fieldErrors = value == .null ? nil : try fieldErrors(value, at)
            case "expose_5xx_messages":
                guard case .bool(let b) = value else { throw ConfigError(option: at, problem: "must be true or false") }
                d.exposes5xxMessages = b
            default:
                throw ConfigError(option: at, problem: "unknown key (preset, code, success, success_codes, auth_codes, auth_flag, code_status, message, payload, siblings, ignore, extras, field_errors, expose_5xx_messages)")
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
        if case .httpStatus = d.success {
            // A 2xx body is the answer whole: what says where a payload is, or what to leave out of
            // one, has nothing to do; what a failure envelope holds needs a code or a message to read it.
            if !given.contains("payload") { d.payload = .rest }
            if !given.contains("siblings") { d.siblings = .drop }
            if !given.contains("ignore") { d.ignore = [] }
            if d.codes.isEmpty && d.messages.isEmpty {
                if !given.contains("extras") { d.extras = [] }
                if !given.contains("auth_flag") { d.authFlag = nil }
                if !given.contains("field_errors") { d.fieldErrors = nil }
            }
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

    /// A field-error location: a member path, or `{"path": PATH, "message": NAME, "field": NAME}`
    /// naming the members of each error object in a list.
    static func fieldErrors(_ value: ConfigJSON, _ o: String) throws(ConfigError) -> FieldErrorRule {
        if value.string != nil { return FieldErrorRule(path: try path(value, o)) }
        guard case .object(let m) = value, let p = value["path"] else {
            throw ConfigError(option: o, problem: "must be a member path or {\"path\": PATH, \"message\": NAME, \"field\": NAME}")
        }
        var rule = FieldErrorRule(path: try path(p, "\(o).path"))
        for member in m where member.name != "path" {
            guard member.name == "message" || member.name == "field" else {
                throw ConfigError(option: "\(o).\(member.name)", problem: "unknown key (path, message, field)")
            }
            guard let name = member.value.string, !name.isEmpty else {
                throw ConfigError(option: "\(o).\(member.name)", problem: "must be a member name")
            }
            if member.name == "message" { rule.message = name } else { rule.field = name }
        }
        return rule
    }

    /// `code`, `code_or_absent`, `status`, `{"flag": NAME}`, `{"status": NAME}` or `{"error": NAME}`.
    static func success(_ value: ConfigJSON, _ o: String) throws(ConfigError) -> SuccessRule {
        if let s = value.string {
            switch s {
            case "code": return .code
            case "code_or_absent": return .codeOrAbsent
            case "status": return .httpStatus
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
        throw ConfigError(option: o, problem: "must be code, code_or_absent, status, {\"flag\": PATH}, {\"status\": PATH} or {\"error\": PATH} (a member name or a dotted path)")
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
        case .httpStatus: success = q("status")
        }
        fields.append("\"success\":" + success)
        switch d.success {
        case .code, .codeOrAbsent: fields.append("\"success_codes\":" + d.successCodes.json)
        case .flag, .status, .errorMember, .httpStatus: break
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
        if let f = d.fieldErrors {
            var rule = ["\"path\":" + q(f.path.description)]
            if let m = f.message { rule.append("\"message\":" + q(m)) }
            if let n = f.field { rule.append("\"field\":" + q(n)) }
            fields.append("\"field_errors\":{" + rule.joined(separator: ",") + "}")
        }
        if d.exposes5xxMessages { fields.append("\"expose_5xx_messages\":true") }
        return "{" + fields.joined(separator: ",") + "}"
    }
}
