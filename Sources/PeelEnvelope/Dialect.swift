/// A member of an object, or of objects nested in it: `msg`, `error.message`. Each step names an
/// object member; a step whose value is not an object (when a later step follows) is a malformed
/// envelope.
public struct MemberPath: Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The member names from the outside in; never empty, no step empty.
    public var steps: [String]

    /// Splits a dotted path; nil when a step is empty (`a..b`, `.a`, ``).
    public init?(dotted: String) {
        let parts = dotted.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard !parts.isEmpty, !parts.contains(where: \.isEmpty) else { return nil }
        steps = parts
    }

    /// A path from a literal known to be well formed (a malformed literal is a programming error).
    public init(stringLiteral value: String) { self.init(dotted: value)! }

    /// The top-level member the path starts at.
    public var head: String { steps[0] }

    /// The dotted text.
    public var description: String { steps.joined(separator: ".") }
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
    /// The code member; nil for dialects without one.
    public var code: MemberPath?
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
    /// Where a failure's field errors are; nil: none.
    public var fieldErrors: FieldErrorRule?
    /// Whether a 5xx's words read by the well-known failure shapes reach the client; by default they
    /// stay in the access log, since a 5xx body may hold a stack trace or SQL.
    public var exposes5xxMessages = false

    /// Creates a dialect.
    public init(preset: String, code: MemberPath?, success: SuccessRule, successCodes: CodeSet = CodeSet(),
                authCodes: CodeSet = CodeSet(), codeStatus: CodeStatusMap = CodeStatusMap(), messages: [MemberPath],
                payload: PayloadRule, siblings: Siblings = .drop, ignore: [String] = [], extras: [MemberPath] = []) {
        self.preset = preset
        self.code = code
        self.success = success
        self.successCodes = successCodes
        self.authCodes = authCodes
        self.codeStatus = codeStatus
        self.messages = messages
        self.payload = payload
        self.siblings = siblings
        self.ignore = ignore
        self.extras = extras
    }

    /// The most names a dialect may look for in one object: they are matched in the scan loop.
    public static let maxNames = 16

    /// The part of a dialect a problem is in, so a configuration error names the option that set it.
    public enum Part: Sendable {
        case code, message, payload, codes, other
    }

    /// Why the dialect cannot work, and which part; nil when it can.
    public func problem() -> (part: Part, why: String)? {
        if case .code = success, code == nil { return (.code, "success by code needs a code member") }
        if case .codeOrAbsent = success, code == nil { return (.code, "success by code needs a code member") }
        if case .pattern(let suffix, let failure) = payload {
            if suffix.isEmpty { return (.payload, "payload pattern must be *SUFFIX with a non-empty suffix") }
            if let failure, failure.isEmpty { return (.payload, "payload pattern failure member must not be empty") }
        }
        // One member plays one role: a code read as a message, or a flag read as a code, would fail
        // every answer. Nested paths may share a head (`error.code`, `error.message` under `error`).
        let rule = success.path
        if let code, messages.contains(code) { return (.message, "code and message must be different members (\(code))") }
        if let code, let rule, code == rule { return (.code, "code and \(rule) must be different members") }
        if let rule, messages.contains(rule) { return (.message, "message and \(rule) must be different members") }
        for name in ignore where name == code?.head || name == rule?.head || messages.contains(where: { $0.head == name }) {
            return (.other, "\(name) is ignored and read at once")
        }
        if Set(extras).count != extras.count { return (.other, "an extra is named twice") }
        // An extra may be the payload itself: JSend's `data` is the answer on success and the
        // detail of a `fail`.
        if case .member(let p) = payload {
            let taken = [code?.head, rule?.head].compactMap { $0 } + messages.map(\.head) + ignore
            if taken.contains(p.head) { return (.payload, "payload member \(p.head) is also an envelope member") }
        }
        if scopeNames.count > Dialect.maxNames { return (.other, "more than \(Dialect.maxNames) envelope members") }
        if !successCodes.isDisjoint(with: authCodes) { return (.codes, "auth codes overlap success codes") }
        return nil
    }

    /// Top-level names of every envelope member other than the payload.
    var roleHeads: [String] {
        var heads: [String] = []
        if let code { heads.append(code.head) }
        if let m = success.member { heads.append(m) }
        heads += messages.map(\.head) + extras.map(\.head)
        // A pattern dialect's envelope is the matched member; what sits beside it at the top level
        // (`sign`, `sign_type`) is never part of the answer, so its ignore list only documents them.
        if case .pattern = payload { return heads }
        return heads + ignore
    }

    /// The names looked for in the envelope object, each once, in a fixed order.
    var scopeNames: [String] {
        var names: [String] = []
        var all = roleHeads
        if case .member(let p) = payload { all.insert(p.head, at: 0) }
        for n in all where !names.contains(n) { names.append(n) }
        return names
    }
}
