/// A member of an object, or of values nested in it: `msg`, `error.message`, `errors.0.message`.
/// The first step names a top-level member; each later step names an object member, or, when it is
/// digits (`0`, `12`), an array element. A step into a value of the wrong kind (when a later step
/// follows) is a malformed envelope for the payload and absence for every other member.
public struct MemberPath: Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The steps from the outside in; never empty, no step empty.
    public var steps: [String]

    /// Splits a dotted path; nil when `refusal(dotted)` says why it is not one.
    public init?(dotted: String) {
        guard MemberPath.refusal(dotted) == nil else { return nil }
        steps = dotted.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
    }

    /// A path from a literal known to be well formed (a malformed literal is a programming error).
    public init(stringLiteral value: String) { self.init(dotted: value)! }

    /// Why a dotted text is not a member path (an empty step, brackets, an index written with a sign
    /// or a leading zero, or one too large); nil when it is one.
    public static func refusal(_ dotted: String) -> String? {
        let parts = dotted.split(separator: ".", omittingEmptySubsequences: false)
        if parts.contains(where: \.isEmpty) { return "a step is empty" }
        for (k, part) in parts.enumerated() {
            if part.contains("[") || part.contains("]") {
                return "\(part) has brackets: an array element is a step of digits (errors.0.code)"
            }
            // The head is always a member name (`{"0": …}`); below it, digits index an array.
            guard k > 0 else { continue }
            let digits = part.drop { $0 == "+" || $0 == "-" }
            guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else { continue }
            if digits.count != part.count { return "\(part) has a sign: an array index is 0, 1, 2, …" }
            if part.count > 1 && part.first == "0" { return "\(part) has a leading zero: an array index is 0, 1, 2, …" }
            if Int32(part) == nil { return "\(part) is too large for an array index" }
        }
        return nil
    }

    /// The array index step `k` names, or nil when it names an object member (the head always does).
    public func index(_ k: Int) -> Int? {
        guard k > 0, let first = steps[k].utf8.first, first &- UInt8(ascii: "0") < 10 else { return nil }
        return Int(steps[k])
    }

    /// The top-level member the path starts at.
    public var head: String { steps[0] }

    /// The dotted text.
    public var description: String { steps.joined(separator: ".") }

    /// Whether `other` is this path or lies inside it (`Response.Error.Code` inside `Response`).
    public func contains(_ other: MemberPath) -> Bool { other.steps.starts(with: steps) }
}

/// What marks an envelope as a success.
public enum SuccessRule: Hashable, Sendable {
    /// The code is present and in the success list (the seed's `code == 0`).
    case code
    /// The code is absent, or in the success list (WeChat `errcode`, Baidu `error_code`).
    case codeOrAbsent
    /// This boolean member is `true` (`success`, `ok`, `meta.ok`); `false` is a failure.
    case flag(MemberPath)
    /// This member is the JSend status: `"success"`; `"fail"` and `"error"` are failures.
    case status(MemberPath)
    /// This member (`error`, `errors`) is absent, `null`, `false` or empty; anything else is a failure.
    case errorMember(MemberPath)
    /// The HTTP status alone (REST backends without an envelope): any JSON on a 2xx is the answer.
    case httpStatus

    /// The member the rule reads besides the code, if any.
    public var path: MemberPath? {
        switch self {
        case .code, .codeOrAbsent, .httpStatus: nil
        case .flag(let m), .status(let m), .errorMember(let m): m
        }
    }

    /// The top-level member the rule reads, if any.
    var member: String? { path?.head }
}

/// Where the payload is.
public enum PayloadRule: Hashable, Sendable {
    /// A member or a dotted path (`data`, `result`, `Response`).
    case member(MemberPath)
    /// The object minus the dialect's envelope members (WeChat, Slack, RuoYi's `rows`/`total`).
    case rest
    /// The top-level member whose name ends with `suffix` (`*_response`), or `failure` when present
    /// (`error_response`): that object is the envelope, and the answer is its rest (Alipay, Taobao, JD).
    case pattern(suffix: String, failure: String?)
}

/// What happens to members beside a present payload member.
public enum Siblings: String, Hashable, Sendable {
    /// The payload alone (the seed's rule).
    case drop
    /// The rest of the object, the payload member included.
    case keep
}

/// Where a failure's field errors are and how each is written, for RFC 9457's `errors`.
public struct FieldErrorRule: Hashable, Sendable {
    /// The member holding them (`errors`, `error.validationErrors`): a map of field → messages, or a
    /// list of error objects or messages.
    public var path: MemberPath
    /// In a list, the member of each error object holding its message; nil: the usual names
    /// (`message`, `msg`, `defaultMessage`, `description`, `detail`, `title`).
    public var message: String?
    /// In a list, the member of each error object naming its field; nil: the usual names (`field`,
    /// `path`, `target`, `param`, `property`, `members`, `loc`, `source.pointer`).
    public var field: String?

    /// Creates a rule.
    public init(path: MemberPath, message: String? = nil, field: String? = nil) {
        self.path = path
        self.message = message
        self.field = field
    }
}

/// A declarative description of one backend's envelope: where the code is and what type it has,
/// what marks success, where the message and the payload are. `Dialect.presets` names the common
/// ones; flags and the config file override their parts.
public struct Dialect: Hashable, Sendable {
    /// The preset this dialect is or starts from (`peel`, `ruoyi`, …).
    public var preset: String
    /// The code members: the first present one is the code (PayPal answers `name`, its OAuth
    /// endpoint `error`); empty for dialects without one.
    public var codes: [MemberPath]
    /// The first code member (nil: none); setting it makes it the only one.
    public var code: MemberPath? {
        get { codes.first }
        set { codes = newValue.map { [$0] } ?? [] }
    }
    /// What marks success.
    public var success: SuccessRule
    /// Codes meaning success (for `.code` and `.codeOrAbsent`).
    public var successCodes: CodeSet
    /// Codes meaning "token expired": the failure is `auth-expired` (401), whatever the predicate.
    public var authCodes: CodeSet
    /// Business code → HTTP status for business errors.
    public var codeStatus: CodeStatusMap
    /// Where the message is: the first present, non-empty string wins.
    public var messages: [MemberPath]
    /// Where the payload is.
    public var payload: PayloadRule
    /// What happens to members beside a present payload member.
    public var siblings: Siblings
    /// Top-level members that are envelope, not payload (`timestamp`, `sign`).
    public var ignore: [String]
    /// Members copied byte-exact into a problem's `upstream` object (`sub_code`, `showType`).
    public var extras: [MemberPath]
    /// A boolean member that, `true` on a failure, means the user must sign in again (ABP's
    /// `unAuthorizedRequest`); the judge reads it as `auth-expired` unless the status is 403.
    public var authFlag: MemberPath?
    /// Where a failure's field errors are; nil: none.
    public var fieldErrors: FieldErrorRule?
    /// Whether a 5xx's words read by the well-known failure shapes reach the client; by default they
    /// stay in the access log, since a 5xx body may hold a stack trace or SQL.
    public var exposes5xxMessages = false

    /// Creates a dialect.
    public init(preset: String, code: MemberPath?, success: SuccessRule, successCodes: CodeSet = CodeSet(),
                authCodes: CodeSet = CodeSet(), codeStatus: CodeStatusMap = CodeStatusMap(), messages: [MemberPath],
                payload: PayloadRule, siblings: Siblings = .drop, ignore: [String] = [], extras: [MemberPath] = [],
                authFlag: MemberPath? = nil) {
        self.preset = preset
        self.codes = code.map { [$0] } ?? []
        self.success = success
        self.successCodes = successCodes
        self.authCodes = authCodes
        self.codeStatus = codeStatus
        self.messages = messages
        self.payload = payload
        self.siblings = siblings
        self.ignore = ignore
        self.extras = extras
        self.authFlag = authFlag
    }

    /// The most names a dialect may look for in one object: they are matched in the scan loop.
    public static let maxNames = 16

    /// The part of a dialect a problem is in, so a configuration error names the key or option
    /// that set it (`dialect.success_codes`, `--auth-codes`).
    public enum Part: String, Sendable {
        case code, success, message, payload, siblings, ignore, extras, other
        case successCodes = "success_codes", authCodes = "auth_codes", codeStatus = "code_status", authFlag = "auth_flag"
        case fieldErrors = "field_errors"

        /// The config file key that sets this part; nil for `other`.
        public var key: String? { self == .other ? nil : rawValue }
    }

    /// The success rule as the config file writes it, for reasons.
    var successText: String {
        switch success {
        case .code: "\"code\""
        case .codeOrAbsent: "\"code_or_absent\""
        case .flag(let m): "{\"flag\": \"\(m)\"}"
        case .status(let m): "{\"status\": \"\(m)\"}"
        case .errorMember(let m): "{\"error\": \"\(m)\"}"
        case .httpStatus: "\"status\""
        }
    }

    /// Why the dialect cannot work, or holds a setting that can never take effect, and which part;
    /// nil when every part can work.
    public func problem() -> (part: Part, why: String)? {
        if let why = unusedSetting() { return why }
        if case .pattern(let suffix, let failure) = payload {
            if suffix.isEmpty { return (.payload, "payload pattern must be *SUFFIX with a non-empty suffix") }
            if let failure, failure.isEmpty { return (.payload, "payload pattern failure member must not be empty") }
        }
        // One member plays one role: a code read as a message, or a flag read as a code, would fail
        // every answer. Nested paths may share a head (`error.code`, `error.message` under `error`).
        let rule = success.path
        if Set(codes).count != codes.count { return (.code, "a code member is named twice") }
        if Set(messages).count != messages.count { return (.message, "a message member is named twice") }
        for code in codes {
            if messages.contains(code) { return (.message, "code and message must be different members (\(code))") }
            if let rule, code == rule { return (.code, "code and \(rule) must be different members") }
        }
        if let rule, messages.contains(rule) { return (.message, "message and \(rule) must be different members") }
        if let authFlag {
            let others = codes + messages + [rule].compactMap { $0 }
            if others.contains(authFlag) { return (.authFlag, "\(authFlag) already plays another role (code, message or success)") }
        }
        if Set(ignore).count != ignore.count { return (.ignore, "a member is ignored twice") }
        let readHeads = codes.map(\.head) + [rule?.head, authFlag?.head].compactMap { $0 } + messages.map(\.head)
        for name in ignore where readHeads.contains(name) {
            return (.ignore, "\(name) is read as the code, message or success member: a success leaves it out already")
        }
        if Set(extras).count != extras.count { return (.extras, "an extra is named twice") }
        // An extra may be the payload itself: JSend's `data` is the answer on success and the
        // detail of a `fail`.
        if case .member(let p) = payload {
            if ignore.contains(p.head) { return (.payload, "payload member \(p.head) is also ignored") }
            let roles = codes + messages + [rule, authFlag].compactMap { $0 }
            for r in roles where r.head == p.head {
                // Inside the payload only under the error member, which a success does not have:
                // Tencent Cloud's Response.Error.Code under the payload Response.
                if case .errorMember(let e) = success, e != p, p.contains(e), e.contains(r) { continue }
                return (.payload, "payload member \(p.head) is also an envelope member (\(r))")
            }
        }
        if scopeNames.count > Dialect.maxNames { return (.other, "more than \(Dialect.maxNames) envelope members") }
        if !successCodes.isDisjoint(with: authCodes) { return (.authCodes, "auth codes overlap success codes") }
        return nil
    }

    /// A setting that can never take effect under the rest of the dialect, and why.
    func unusedSetting() -> (part: Part, why: String)? {
        switch success {
        case .code, .codeOrAbsent:
            if codes.isEmpty { return (.code, "success by code needs a code member") }
            if case .code = success, successCodes.isEmpty {
                return (.successCodes, "needs at least one success code when success is \"code\"")
            }
        case .flag, .status, .errorMember, .httpStatus:
            if !successCodes.isEmpty { return (.successCodes, "never used: success is \(successText), not a code") }
        }
        if !successCodes.prefixes.isEmpty { return (.successCodes, "prefixes (\"X*\") are for auth codes only") }
        if authCodes.prefixes.contains("") { return (.authCodes, "\"*\" would match every string code") }
        if codes.isEmpty {
            if !authCodes.isEmpty { return (.authCodes, "never used: the dialect has no code member") }
            if !codeStatus.entries.isEmpty { return (.codeStatus, "never used: the dialect has no code member") }
        }
        let readsCode = if case .code = success { true } else if case .codeOrAbsent = success { true } else { false }
        for code in CodeSet(Array(codeStatus.entries.keys)).sorted {
            if authCodes.contains(code) { return (.codeStatus, "\(code.json) is an auth code: its answer is always 401") }
            if readsCode && successCodes.contains(code) { return (.codeStatus, "\(code.json) is a success code: it is never a business error") }
        }
        switch payload {
        case .member: break
        case .rest, .pattern:
            if siblings == .keep { return (.siblings, "never used: siblings apply beside a payload member, and the payload is not one") }
        }
        if case .pattern = payload, !ignore.isEmpty {
            return (.ignore, "never used: a pattern dialect's answer is the matched member; top-level members are never in it")
        }
        if case .httpStatus = success {
            let whole = "never used: under success \"status\" a 2xx body is the answer whole"
            if case .rest = payload {} else { return (.payload, whole) }
            if !ignore.isEmpty { return (.ignore, whole) }
            if !codeStatus.entries.isEmpty { return (.codeStatus, "never used: under success \"status\" the HTTP status says what failed") }
            if codes.isEmpty && messages.isEmpty {
                let unread = "never used: with no code or message member the dialect reads no failure envelope (the well-known shapes read it)"
                if !extras.isEmpty { return (.extras, unread) }
                if authFlag != nil { return (.authFlag, unread) }
                if fieldErrors != nil { return (.fieldErrors, unread) }
            }
        }
        return nil
    }

    /// Top-level names of the members a success's rest-of-object answer leaves out: the code, the
    /// success rule's, message and ignored members. Extras are not among them: they are copied into
    /// a failure's problem and stay in a success (Slack's `response_metadata` beside the list).
    var roleHeads: [String] {
        var heads = codes.map(\.head)
        if let m = success.member { heads.append(m) }
        heads += messages.map(\.head)
        if let authFlag { heads.append(authFlag.head) }
        if case .pattern = payload { return heads }
        return heads + ignore
    }

    /// The names looked for in the envelope object, each once, in a fixed order.
    var scopeNames: [String] {
        var names: [String] = []
        var all = roleHeads + extras.map(\.head)
        if case .member(let p) = payload { all.insert(p.head, at: 0) }
        for n in all where !names.contains(n) { names.append(n) }
        return names
    }
}
