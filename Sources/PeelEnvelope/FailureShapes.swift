// The error bodies common frameworks answer with, read when the route's dialect reads no envelope
// from a failure: the message the backend meant for the user, its code, its field errors, and
// what else it said. shared/DIALECTS.md ("Failure shapes") lists where each shape is documented.

/// Whether `n` bytes at `a` and `b` are the same.
@inline(__always)
func memoryEqual(_ a: UnsafePointer<UInt8>, _ b: UnsafePointer<UInt8>, _ n: Int) -> Bool {
    var k = 0
    while k < n {
        if a[k] != b[k] { return false }
        k &+= 1
    }
    return true
}

/// Reads a failure body by the well-known shapes.
enum FailureShapes {
    /// The words of the object spanning `object` in a validated body, by the first shape it
    /// matches; nil when none does or a member a shape reads appears twice.
    /// `checked`: the body already passed the strict scan (else it is scanned first). `errors`:
    /// whether the field errors are written out (not for words the client will not see).
    static func read(_ body: UnsafeBufferPointer<UInt8>, _ object: Range<Int>, maxDepth: Int, checked: Bool,
                     problemType: Bool, errors: Bool = true) -> FailureWords? {
        var top = TopMembers(body.baseAddress!, count: body.count)
        top.buildErrors = errors
        if !checked {
            var members = EnvelopeMembers()
            guard ScanCore.run(body, maxDepth: maxDepth, names: nil, members: &members) else { return nil }
        }
        guard top.collect(object) else { return nil }
        return top.read(object, problemType: problemType)
    }
}

/// The top-level members of a failure body: every member in order, and the ones shapes read by name.
private struct TopMembers {
    /// The names shapes look for.
    enum Name: Int, CaseIterable {
        case type, title, status, detail, instance, errors, error, errorDescription, message, msg, code, reason,
             metadata, timestamp, path, name, description, statusCode
        var text: String {
            switch self {
            case .errorDescription: "error_description"
            default: String(describing: self)
            }
        }
    }

    let base: UnsafePointer<UInt8>
    /// Every member: name content (quotes excluded) and value.
    var all: [(name: Range<Int>, value: Range<Int>)] = []
    /// Index into `all` of each named member.
    var slot = [Int](repeating: -1, count: Name.allCases.count)
    var reader: FieldErrorReader

    init(_ base: UnsafePointer<UInt8>, count: Int) {
        self.base = base
        reader = FieldErrorReader(base, count: count)
    }

    /// The names by length, for matching a member's name without decoding it.
    static let byLength: [[(name: Name, bytes: [UInt8])]] = {
        var table = [[(name: Name, bytes: [UInt8])]](repeating: [], count: 18)
        for n in Name.allCases { table[n.text.utf8.count].append((n, Array(n.text.utf8))) }
        return table
    }()

    /// The shape name a member's name (unescaped) spells exactly, if any.
    static func match(_ name: UnsafeBufferPointer<UInt8>) -> Name? {
        guard name.count < byLength.count else { return nil }
        for candidate in byLength[name.count]
        where candidate.bytes.withUnsafeBufferPointer({ memoryEqual($0.baseAddress!, name.baseAddress!, name.count) }) {
            return candidate.name
        }
        return nil
    }

    /// The field-error map in an `errors` object, read as the walk passes it (Laravel, ASP.NET Core).
    var errorsMap: FieldErrorReader?
    /// Whether field errors are written out into the words.
    var buildErrors = true

    /// The finished `errors` array of `list` and how many entries it left out; nothing when the
    /// words are for the log alone.
    func built(_ list: FieldErrorList?) -> (errors: [UInt8]?, omitted: Int) {
        guard buildErrors, let list else { return (nil, 0) }
        return (list.finished(), list.omitted)
    }

    /// Records the members in one walk over a checked body; false when a named one appears twice
    /// (which one the backend meant is unknown). An `errors` object is read as a field-error map
    /// on the way, since it may be most of the body and is walked once that way.
    mutating func collect(_ object: Range<Int>) -> Bool {
        let n = object.upperBound
        var i = ScanCore.skipWhitespace(base, n, object.lowerBound &+ 1)
        while base[i] == UInt8(ascii: "\"") {
            let nameStart = i &+ 1
            var escaped = false
            let afterName = ValidJSON.stringEnd(base, n, nameStart, escaped: &escaped)
            let name = nameStart..<(afterName &- 1)
            let valueStart = ScanCore.skipWhitespace(base, n, ScanCore.skipWhitespace(base, n, afterName) &+ 1)
            var valueEnd = -1
            // Compared as text: `"co\u0064e"` is `code` (RFC 8259 §8.3), and a duplicate of it too.
            let named = escaped ? FieldErrorList.withUnescaped(base, name) { TopMembers.match($0) }
                                : TopMembers.match(UnsafeBufferPointer(start: base + name.lowerBound, count: name.count))
            if let named {
                guard slot[named.rawValue] < 0 else { return false }
                slot[named.rawValue] = all.count
                if named == .errors && base[valueStart] == UInt8(ascii: "{") {
                    var r = reader
                    r.list.reserve(n &- valueStart)
                    valueEnd = r.map(at: valueStart, n, dotted: true, nonField: false, depth: 0)
                    errorsMap = r
                }
            }
            if valueEnd < 0 { valueEnd = ValidJSON.end(base, n, valueStart) }
            all.append((name, valueStart..<valueEnd))
            i = ScanCore.skipWhitespace(base, n, valueEnd)
            guard base[i] == UInt8(ascii: ",") else { break }
            i = ScanCore.skipWhitespace(base, n, i &+ 1)
        }
        return true
    }

    func value(_ n: Name) -> Range<Int>? { slot[n.rawValue] < 0 ? nil : all[slot[n.rawValue]].value }
    func isString(_ r: Range<Int>?) -> Bool { r.map { base[$0.lowerBound] == UInt8(ascii: "\"") } ?? false }
    func isNumber(_ r: Range<Int>?) -> Bool {
        r.map { base[$0.lowerBound] == UInt8(ascii: "-") || base[$0.lowerBound] &- UInt8(ascii: "0") < 10 } ?? false
    }
    func isObject(_ r: Range<Int>?) -> Bool { r.map { base[$0.lowerBound] == UInt8(ascii: "{") } ?? false }
    func isArray(_ r: Range<Int>?) -> Bool { r.map { base[$0.lowerBound] == UInt8(ascii: "[") } ?? false }
    /// Whether a `type` member is a URI reference, as a problem's is (RFC 9457 §3.1.1): it has a
    /// scheme's `:` or starts with `/`; `"error"` or `"validation"` is some other body's word.
    func typeIsURI(_ r: Range<Int>?) -> Bool {
        guard let r, isString(r) else { return false }
        let text = Envelope.string(base, r)
        return text.contains(":") || text.hasPrefix("/")
    }

    /// A non-empty string's text.
    func message(_ r: Range<Int>?) -> String? {
        guard let r, isString(r), r.count > 2 else { return nil }
        return Envelope.string(base, r)
    }
    /// A code member: a string as written, an integer within 64 bits; nil for anything else.
    func code(_ r: Range<Int>?) -> EnvelopeCode? {
        guard let r else { return nil }
        if isString(r) { return .string(Envelope.string(base, r)) }
        guard isNumber(r), let n = Envelope.integer(UnsafeBufferPointer(start: base + r.lowerBound, count: r.count)) else { return nil }
        return .integer(n)
    }

    /// The members not taken, byte for byte, for `upstream`.
    func kept(except taken: [Name]) -> [UpstreamMember] {
        let skip = Set(taken.compactMap { slot[$0.rawValue] < 0 ? nil : slot[$0.rawValue] })
        var out: [UpstreamMember] = []
        for (k, m) in all.enumerated() where !skip.contains(k) {
            let name = Envelope.string(base, (m.name.lowerBound &- 1)..<(m.name.upperBound &+ 1))
            out.append(UpstreamMember(name: name, raw: Array(UnsafeBufferPointer(start: base + m.value.lowerBound, count: m.value.count))))
        }
        return out
    }

    /// The words, with the message taken from the first field error when the shape has none. A
    /// member leaves `upstream` only when Peel took something from it: the code, the message, the
    /// field errors, or a status the upstream status already says (`mirrors`).
    func words(_ shape: FailureShape, code: EnvelopeCode?, codeFrom: [Name] = [], message: String?, messageFrom: [Name] = [],
               errors: FieldErrorList? = nil, errorsFrom: [Name] = [], mirrors: [Name] = []) -> FailureWords {
        var text = message
        if text == nil, let first = errors?.firstDetail, first.count > 2 { text = Envelope.string(base, first) }
        var taken = mirrors
        if code != nil { taken += codeFrom }
        if message != nil { taken += messageFrom }
        if let errors, errors.count > 0 { taken += errorsFrom }
        var w = FailureWords(code: code, message: text, upstream: kept(except: taken), shape: shape)
        (w.errors, w.errorsOmitted) = built(errors)
        return w
    }

    /// OAuth 2.0 error codes: RFC 6749 §4.1.2.1 and §5.2, RFC 6750 §3.1.
    static let oauthCodes: Set<String> = [
        "invalid_request", "invalid_client", "invalid_grant", "unauthorized_client", "unsupported_grant_type",
        "invalid_scope", "access_denied", "unsupported_response_type", "server_error", "temporarily_unavailable",
        "invalid_token", "insufficient_scope",
    ]

    mutating func read(_ object: Range<Int>, problemType: Bool) -> FailureWords? {
        // RFC 9457 §3: `type` and `title` identify a problem; `status` and `detail` accompany them.
        let type = value(.type), title = value(.title), detail = value(.detail), status = value(.status)
        if problemType || (isString(type) && (isString(title) || isString(detail))) || (isString(title) && isNumber(status))
            || (isNumber(status) && typeIsURI(type)) {
            return problem()
        }
        let error = value(.error)
        if isObject(error), let e = error, reader.member(e, ["message", "code", "status"]) != nil { return errorObject(e) }
        if isString(error), let e = error,
           value(.errorDescription) != nil || TopMembers.oauthCodes.contains(Envelope.string(base, e)) {
            return words(.oauth, code: code(error), codeFrom: [.error], message: message(value(.errorDescription)),
                         messageFrom: [.errorDescription])
        }
        if value(.timestamp) != nil && isNumber(status) && value(.path) != nil { return spring() }
        if isString(value(.reason)) && isNumber(value(.code)) && value(.message) != nil {
            // kratos' numeric `code` is the HTTP status again; its `reason` is the code.
            return words(.kratos, code: code(value(.reason)), codeFrom: [.reason], message: message(value(.message)),
                         messageFrom: [.message], mirrors: [.code])
        }
        if isString(value(.description)) && isString(value(.name)) && isNumber(value(.code)) {
            // Flask's `code` is the HTTP status again.
            return words(.flask, code: nil, message: message(value(.description)), messageFrom: [.description], mirrors: [.code])
        }
        if isArray(detail), let d = detail {
            var r = reader
            r.list(d)
            return words(.fastapi, code: nil, message: nil, errors: r.list, errorsFrom: [.detail])
        }
        if isObject(value(.errors)), let r = errorsMap {
            return words(.laravel, code: code(value(.code)), codeFrom: [.code], message: message(value(.message)),
                         messageFrom: [.message], errors: r.list, errorsFrom: [.errors])
        }
        if isNumber(value(.statusCode)), let m = value(.message) {
            var r = reader
            if isArray(m) { r.messages(m, place: .none) }
            return words(.nestjs, code: code(value(.code)), codeFrom: [.code], message: message(m), messageFrom: [.message],
                         errors: r.list, errorsFrom: [.message], mirrors: [.statusCode])
        }
        if isArray(value(.errors)), let e = value(.errors), let first = firstElement(e), isObject(first) {
            return errorsArray(e, first)
        }
        if isString(detail) {
            return words(.drf, code: code(value(.code)), codeFrom: [.code], message: message(detail), messageFrom: [.detail])
        }
        if let m = message(value(.message)) {
            return words(.message, code: code(value(.code)), codeFrom: [.code], message: m, messageFrom: [.message])
        }
        if let m = message(value(.msg)) {
            return words(.message, code: code(value(.code)), codeFrom: [.code], message: m, messageFrom: [.msg])
        }
        if isString(error) {
            return words(.error, code: code(value(.code)), codeFrom: [.code], message: message(error), messageFrom: [.error])
        }
        return drfFieldMap(object)
    }

    /// An RFC 9457 problem: `detail`, else `title`, is the message; its own `errors` array is kept
    /// as it is (§3), an `errors` map (ASP.NET Core's validation problem) is converted; `status`
    /// is the upstream status again.
    func problem() -> FailureWords {
        let detail = message(value(.detail))
        let text = detail ?? message(value(.title))
        var taken: [Name] = [.status]
        if text != nil { taken.append(detail == nil ? .title : .detail) }
        let code = code(value(.code))
        if code != nil { taken.append(.code) }
        var errors: [UInt8]?
        var first: String?
        var omitted = 0
        if let e = value(.errors) {
            if isArray(e) {
                errors = Array(UnsafeBufferPointer(start: base + e.lowerBound, count: e.count))
                taken.append(.errors)
            } else if isObject(e), let r = errorsMap, r.list.count > 0 {
                taken.append(.errors)
                first = r.list.firstDetail.map { Envelope.string(base, $0) }
                (errors, omitted) = built(r.list)
            }
        }
        var w = FailureWords(code: code, message: text ?? first, errors: errors, upstream: kept(except: taken), shape: .problem)
        w.errorsOmitted = omitted
        return w
    }

    /// `{"error": {…}}`: the code is the error's string code where it has one (Google's `status`,
    /// Microsoft's `code`), else its number; field errors from Google's `BadRequest` details, from
    /// Microsoft's details' `target`, or Stripe's `param`. The error's other members are kept, then
    /// the body's own beside it.
    func errorObject(_ e: Range<Int>) -> FailureWords {
        var r = reader
        var inner: [(name: Range<Int>, value: Range<Int>)] = []
        ValidJSON.walk(base, e) { s, t, v in
            inner.append((s..<t, v))
            return true
        }
        func find(_ name: String) -> Int? {
            inner.firstIndex { FieldErrorList.withUnescaped(base, $0.name) { name.utf8.elementsEqual($0) } }
        }
        var taken: Set<Int> = []
        let messageAt = find("message")
        let text = messageAt.flatMap { message(inner[$0].value) }
        if let k = messageAt, text != nil { taken.insert(k) }
        var code: EnvelopeCode?
        if let k = find("status"), isString(inner[k].value) {
            code = self.code(inner[k].value)
            taken.insert(k)
        } else if let k = find("code"), let c = self.code(inner[k].value) {
            code = c
            taken.insert(k)
        }
        if let k = find("details"), isArray(inner[k].value) {
            ValidJSON.elements(base, inner[k].value) { item in
                guard self.isObject(item) else { return true }
                if let violations = r.member(item, ["fieldViolations", "field_violations"]), self.isArray(violations) {
                    r.list(violations, messageKey: "description", fieldKey: "field")
                }
                return true
            }
            if r.list.count == 0 { r.list(inner[k].value, messageKey: "message", fieldKey: "target", requirePlace: true) }
            if r.list.count > 0 { taken.insert(k) }
        }
        if r.list.count == 0, let p = find("param"), let m = messageAt, text != nil, isString(inner[p].value) {
            // Stripe: the parameter the error is about (`card[number]`), with the error's message.
            r.list.push(base, name: reader.content(inner[p].value), dotted: true)
            r.list.add(base, detail: inner[m].value, place: .pointer)
            taken.insert(p)
        }
        var upstream: [UpstreamMember] = []
        for (k, m) in inner.enumerated() where !taken.contains(k) {
            upstream.append(UpstreamMember(name: Envelope.string(base, (m.name.lowerBound &- 1)..<(m.name.upperBound &+ 1)),
                                           raw: Array(UnsafeBufferPointer(start: base + m.value.lowerBound, count: m.value.count))))
        }
        upstream += kept(except: [.error])
        // Google's BadRequest often has no `message` of its own: its first violation says what is wrong.
        let said = text ?? r.list.firstDetail.map { Envelope.string(base, $0) }
        var w = FailureWords(code: code, message: said, upstream: upstream, shape: .errorObject)
        (w.errors, w.errorsOmitted) = built(r.list)
        return w
    }

    /// Spring Boot: `message` when the application includes it, else the reason phrase in `error`;
    /// binding `errors` with `field` and `defaultMessage`.
    func spring() -> FailureWords {
        var r = reader
        if isArray(value(.errors)), let e = value(.errors) { r.list(e) }
        if let m = message(value(.message)) {
            return words(.spring, code: nil, message: m, messageFrom: [.message], errors: r.list, errorsFrom: [.errors],
                         mirrors: [.status])
        }
        return words(.spring, code: nil, message: message(value(.error)), messageFrom: [.error], errors: r.list,
                     errorsFrom: [.errors], mirrors: [.status])
    }

    /// JSON:API, GraphQL and express-validator lists: the first error's message and code; field
    /// errors from each error that names its place.
    func errorsArray(_ e: Range<Int>, _ first: Range<Int>) -> FailureWords {
        var r = reader
        r.list(e, requirePlace: true)
        let text = r.member(first, ["message", "detail", "title", "msg"]).flatMap(message)
        var code = r.member(first, ["code"]).flatMap(self.code)
        if code == nil, let ext = r.member(first, ["extensions"]), isObject(ext) { code = r.member(ext, ["code"]).flatMap(self.code) }
        var w = words(.errorsArray, code: code, message: text, mirrors: [.errors])
        (w.errors, w.errorsOmitted) = built(r.list)
        // A first error without words of its own: the first field error's message, as for every shape.
        if w.message == nil, let first = r.list.firstDetail { w.message = Envelope.string(base, first) }
        return w
    }

    /// DRF's serializer errors: every member a list of messages or a nested map; `non_field_errors`
    /// points nowhere.
    func drfFieldMap(_ object: Range<Int>) -> FailureWords? {
        var r = reader
        guard r.isFieldMap(object) else { return nil }
        r.map(object, dotted: false, nonField: true)
        guard r.list.count > 0 else { return nil }
        let text = r.list.firstDetail.map { Envelope.string(base, $0) }
        var w = FailureWords(code: nil, message: text, upstream: [], shape: .drf)
        (w.errors, w.errorsOmitted) = built(r.list)
        return w
    }

    func firstElement(_ array: Range<Int>) -> Range<Int>? {
        var first: Range<Int>?
        ValidJSON.elements(base, array) { v in
            first = v
            return false
        }
        return first
    }
}
