// A small tree-building reference for the one-pass dialect judge, and a generator of envelopes
// shaped like the presets' backends and of failure bodies shaped like common frameworks' (issue 33:
// the well-known failure shapes, RFC 9457 field errors, 401 and 5xx rules, the `status` success
// rule). The failure rules are a second implementation, written from the contract over the tree,
// so a slip in FailureShapes.swift or FieldErrors.swift shows up as a disagreement. Shared by DialectReferenceTests and the fuzzer (Fuzz/ScannerFuzz,
// built as one module with the library, hence the conditional import). It uses only the public API
// and shares no code with the scanner: the tree is built by plain recursive descent.
#if !PEEL_FUZZ
import PeelEnvelope
#endif

/// A parsed JSON value with the byte range it came from.
indirect enum RefNode {
    case object([RefMember], Range<Int>)
    case array([RefNode], Range<Int>)
    case string(String, Range<Int>)
    case number(String, Range<Int>)
    case bool(Bool, Range<Int>)
    case null(Range<Int>)

    var range: Range<Int> {
        switch self {
        case .object(_, let r), .array(_, let r), .string(_, let r), .number(_, let r), .bool(_, let r), .null(let r): r
        }
    }

    var members: [RefMember]? {
        if case .object(let m, _) = self { return m }
        return nil
    }
}

/// One object member.
struct RefMember {
    var name: String
    var value: RefNode
}

/// Recursive descent over bytes the caller knows to be one valid JSON text.
struct RefTree {
    let b: [UInt8]
    var i = 0

    static func parse(_ bytes: [UInt8]) -> RefNode? {
        var t = RefTree(b: bytes)
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { t.i = 3 }
        t.space()
        guard t.i < bytes.count else { return nil }
        return t.value()
    }

    mutating func space() {
        while i < b.count, b[i] == 0x20 || b[i] == 0x09 || b[i] == 0x0A || b[i] == 0x0D { i += 1 }
    }

    mutating func value() -> RefNode? {
        guard i < b.count else { return nil }
        let start = i
        switch b[i] {
        case UInt8(ascii: "{"):
            i += 1
            space()
            var members: [RefMember] = []
            if b[i] == UInt8(ascii: "}") {
                i += 1
                return .object([], start..<i)
            }
            while true {
                space()
                guard case .string(let name, _)? = value() else { return nil }
                space()
                i += 1  // ':'
                space()
                guard let v = value() else { return nil }
                members.append(RefMember(name: name, value: v))
                space()
                if b[i] == UInt8(ascii: ",") {
                    i += 1
                    continue
                }
                i += 1  // '}'
                return .object(members, start..<i)
            }
        case UInt8(ascii: "["):
            i += 1
            space()
            if b[i] == UInt8(ascii: "]") {
                i += 1
                return .array([], start..<i)
            }
            var items: [RefNode] = []
            while true {
                space()
                guard let item = value() else { return nil }
                items.append(item)
                space()
                if b[i] == UInt8(ascii: ",") {
                    i += 1
                    continue
                }
                i += 1
                return .array(items, start..<i)
            }
        case UInt8(ascii: "\""):
            i += 1
            var units: [UInt16] = []
            var utf8: [UInt8] = []
            func flush() {
                if !units.isEmpty {
                    utf8 += Array(String(decoding: units, as: UTF16.self).utf8)
                    units = []
                }
            }
            while b[i] != UInt8(ascii: "\"") {
                if b[i] == UInt8(ascii: "\\") {
                    let e = b[i + 1]
                    i += 2
                    if e == UInt8(ascii: "u") {
                        let hex = String(decoding: b[i..<(i + 4)], as: UTF8.self)
                        units.append(UInt16(hex, radix: 16)!)
                        i += 4
                        continue
                    }
                    flush()
                    switch e {
                    case UInt8(ascii: "b"): utf8.append(8)
                    case UInt8(ascii: "f"): utf8.append(12)
                    case UInt8(ascii: "n"): utf8.append(10)
                    case UInt8(ascii: "r"): utf8.append(13)
                    case UInt8(ascii: "t"): utf8.append(9)
                    default: utf8.append(e)
                    }
                } else {
                    flush()
                    utf8.append(b[i])
                    i += 1
                }
            }
            flush()
            i += 1
            return .string(String(decoding: utf8, as: UTF8.self), start..<i)
        case UInt8(ascii: "t"):
            i += 4
            return .bool(true, start..<i)
        case UInt8(ascii: "f"):
            i += 5
            return .bool(false, start..<i)
        case UInt8(ascii: "n"):
            i += 4
            return .null(start..<i)
        default:
            while i < b.count, !(b[i] == UInt8(ascii: ",") || b[i] == UInt8(ascii: "}") || b[i] == UInt8(ascii: "]") || b[i] <= 0x20) {
                i += 1
            }
            return .number(String(decoding: b[start..<i], as: UTF8.self), start..<i)
        }
    }
}

/// What the reference expects: a verdict without reasons, and for a rest-of-object success the
/// members (name, raw bytes) in order instead of exact bytes.
enum RefExpectation: Equatable {
    case verdict(Verdict)
    case members(status: Int, [String])
}

/// The reference judge: the issue's rules, read off a tree.
struct DialectReference {
    let bytes: [UInt8]
    let dialect: Dialect
    let config: EnvelopeConfig
    /// The upstream's Content-Type: `application/problem+json` marks an RFC 9457 problem.
    var contentType: String? = "application/json"

    func raw(_ n: RefNode) -> String { String(decoding: bytes[n.range], as: UTF8.self) }

    struct Malformed: Error {}

    /// The issue's code matching, written out apart from `CodeSet.contains`: an integer matches an
    /// upstream integer or its exact decimal text; a string matches itself; a prefix matches the
    /// string codes whose UTF-8 starts with it.
    static func matches(_ set: CodeSet, _ code: EnvelopeCode) -> Bool {
        switch code {
        case .integer(let n): return set.integers.contains(n)
        case .string(let s):
            if set.strings.contains(s) { return true }
            if set.prefixes.contains(where: { Array(s.utf8).starts(with: Array($0.utf8)) }) { return true }
            return set.integers.contains { String($0) == s }
        }
    }

    /// The members of an object named exactly `name`; more than one is malformed.
    func member(_ members: [RefMember], _ name: String) throws(Malformed) -> RefNode? {
        let found = members.filter { $0.name == name }
        if found.count > 1 { throw Malformed() }
        return found.first?.value
    }

    /// The node at `path`; a step of digits past the head indexes an array (past its end: absent);
    /// a step into a value of the wrong kind is absent, or malformed when `strict` (payloads).
    func value(_ members: [RefMember], _ path: MemberPath, strict: Bool = false) throws(Malformed) -> RefNode? {
        var node = try member(members, path.head)
        for step in path.steps.dropFirst() {
            guard let n = node else { return nil }
            if case .null = n { return nil }
            if step.allSatisfy({ ("0"..."9").contains($0) }), let index = Int(step) {
                guard case .array(let elements, _) = n else {
                    if strict { throw Malformed() }
                    return nil
                }
                node = index < elements.count ? elements[index] : nil
                continue
            }
            guard let m = n.members else {
                if strict { throw Malformed() }
                return nil
            }
            node = try member(m, step)
        }
        return node
    }

    /// Names a success's rest-of-object answer leaves out: code, success rule, messages and ignored
    /// members (a pattern dialect's ignore list names top-level members, never in its answer).
    var cutNames: [String] {
        var names = dialect.codes.map(\.head) + dialect.messages.map(\.head)
        switch dialect.success {
        case .flag(let m), .status(let m), .errorMember(let m): names.append(m.head)
        default: break
        }
        if let flag = dialect.authFlag { names.append(flag.head) }
        if case .pattern = dialect.payload {} else { names += dialect.ignore }
        return names
    }

    /// Names the dialect reads in its envelope object: a second member of one of them is malformed.
    var envelopeNames: [String] { cutNames + dialect.extras.map(\.head) }

    struct Read {
        var code: EnvelopeCode?
        var message: String?
        var extras: [UpstreamMember]
        var verdict: Bool?  // true success, false failure, nil JSend error
        var scope: [RefMember]
        var authFlagged = false

        /// The issue's auth rule: an auth code, or the auth flag on anything but a 403.
        func isAuth(_ d: Dialect, status: Int) -> Bool {
            if let code, DialectReference.matches(d.authCodes, code) { return true }
            return authFlagged && status != 403
        }
    }

    func read(_ root: RefNode) throws(Malformed) -> Read {
        guard var scope = root.members else { throw Malformed() }
        if case .pattern(let suffix, let failure) = dialect.payload {
            let matches = scope.filter { $0.name != failure && $0.name.hasSuffix(suffix) && $0.name.utf8.count >= suffix.utf8.count }
            if matches.count > 1 { throw Malformed() }
            var chosen = matches.first?.value
            if let failure, let f = try member(scope, failure) { chosen = f }
            guard let inner = chosen?.members else { throw Malformed() }
            scope = inner
        }
        var names = envelopeNames
        if case .member(let p) = dialect.payload { names.append(p.head) }
        for n in Set(names) where scope.filter({ $0.name == n }).count > 1 { throw Malformed() }

        var code: EnvelopeCode?
        for path in dialect.codes {
            guard let n = try value(scope, path) else { continue }
            switch n {
            case .null: continue
            case .string(let s, _): code = .string(s)
            case .number(let t, _):
                guard !t.contains("."), !t.contains("e"), !t.contains("E"), let v = Int64(t) else { throw Malformed() }
                code = .integer(v)
            default: throw Malformed()
            }
            break
        }
        var message: String?
        for path in dialect.messages {
            guard let n = try value(scope, path) else { continue }
            if case .null = n { continue }
            guard case .string(let s, _) = n else { throw Malformed() }
            if !s.isEmpty {
                message = s
                break
            }
        }
        var extras: [UpstreamMember] = []
        for path in dialect.extras {
            guard let n = try value(scope, path) else { continue }
            if case .null = n { continue }
            extras.append(UpstreamMember(name: path.description, raw: Array(bytes[n.range])))
        }
        var verdict: Bool?
        switch dialect.success {
        case .code:
            guard let code else { throw Malformed() }
            verdict = DialectReference.matches(dialect.successCodes, code)
        case .codeOrAbsent:
            verdict = code.map { DialectReference.matches(dialect.successCodes, $0) } ?? true
        case .httpStatus:
            verdict = true
        case .flag(let name):
            guard case .bool(let v, _)? = try value(scope, name) else { throw Malformed() }
            verdict = v
        case .status(let name):
            guard case .string(let s, _)? = try value(scope, name) else { throw Malformed() }
            switch s {
            case "success": verdict = true
            case "fail": verdict = false
            case "error": verdict = nil
            default: throw Malformed()
            }
        case .errorMember(let name):
            switch try value(scope, name) {
            case nil, .null?, .bool(false, _)?: verdict = true
            case .string(let s, _)?: verdict = s.isEmpty
            case .object(let m, _)?: verdict = m.isEmpty
            case .array(let items, _)?: verdict = items.isEmpty
            default: verdict = false
            }
        }
        var flagged = false
        if let path = dialect.authFlag, case .bool(true, _)? = try value(scope, path) { flagged = true }
        return Read(code: code, message: message, extras: extras, verdict: verdict, scope: scope, authFlagged: flagged)
    }

    /// The members a rest-of-object answer holds, as `name=raw`.
    func rest(_ scope: [RefMember], keeping kept: String?) -> [String] {
        let cut = Set(cutNames + ([dialect.payload].compactMap { p -> String? in
            if case .member(let path) = p { return path.head }
            return nil
        })).subtracting(kept.map { [$0] } ?? [])
        return scope.filter { !cut.contains($0.name) }.map { "\($0.name)=\(raw($0.value))" }
    }

    func expectation(status: Int) -> RefExpectation { explain(status: status).expected }

    /// The expected answer, and the well-known failure shape that read the body, if one did.
    func explain(status: Int) -> (expected: RefExpectation, shape: String?) {
        let valid = JSONScanner.validate(bytes, maxDepth: config.maxDepth)
        let root = valid ? RefTree.parse(bytes) : nil
        var reading: Read?
        if let root { reading = try? read(root) }
        guard (200...299).contains(status) else {
            let (p, shape) = failure(root, reading, status: status)
            return (.verdict(.problem(p)), shape)
        }
        if case .httpStatus = dialect.success {
            // The status decides: any JSON text is the answer as it is (after a BOM), nothing is relayed as nothing.
            if bytes.isEmpty { return (.verdict(.passthrough), nil) }
            guard valid else { return (.verdict(.problem(Problem(kind: .badUpstreamFormat, upstreamStatus: status))), nil) }
            return (.verdict(.unwrap(status: status, data: (bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0)..<bytes.count)), nil)
        }
        return (success(reading, status: status), nil)
    }

    /// A 2xx under a dialect that reads an envelope.
    func success(_ reading: Read?, status: Int) -> RefExpectation {
        guard let r = reading else { return .verdict(.problem(Problem(kind: .badUpstreamFormat, upstreamStatus: status))) }
        switch r.verdict {
        case true?:
            let named = Set(cutNames + { if case .member(let p) = dialect.payload { return [p.head] } else { return [] } }())
            let others = r.scope.filter { !named.contains($0.name) }
            let members: [String]
            switch dialect.payload {
            case .member(let path):
                guard let found = try? value(r.scope, path, strict: true) as RefNode?? else {
                    return .verdict(.problem(Problem(kind: .badUpstreamFormat, upstreamStatus: status)))
                }
                if let n = found {
                    if !others.isEmpty && dialect.siblings == .keep {
                        members = rest(r.scope, keeping: path.head)
                    } else {
                        return .verdict(.unwrap(status: status, data: n.range))
                    }
                } else if (try? member(r.scope, path.head)) != nil, r.scope.contains(where: { $0.name == path.head }) {
                    members = rest(r.scope, keeping: path.head)
                } else if others.isEmpty {
                    return .verdict(.unwrap(status: 204, data: nil))
                } else {
                    members = rest(r.scope, keeping: nil)
                }
            case .rest, .pattern:
                members = rest(r.scope, keeping: nil)
            }
            return members.isEmpty ? .verdict(.unwrap(status: 204, data: nil)) : .members(status: status, members)
        case false?:
            let errors = dialectFieldErrors(r.scope)
            if r.isAuth(dialect, status: status) {
                return .verdict(.problem(Problem(kind: .authExpired, code: r.code, detail: r.message, upstreamStatus: status, upstream: r.extras,
                                                 errors: errors)))
            }
            let st = r.code.flatMap { dialect.codeStatus.status(for: $0) } ?? config.businessStatus
            return .verdict(.problem(Problem(kind: .businessError, status: st, code: r.code, detail: r.message, upstreamStatus: status,
                                             upstream: r.extras, errors: errors)))
        case nil:
            let errors = dialectFieldErrors(r.scope)
            if r.isAuth(dialect, status: status) {
                return .verdict(.problem(Problem(kind: .authExpired, code: r.code, detail: r.message, upstreamStatus: status, upstream: r.extras,
                                                 errors: errors)))
            }
            return .verdict(.problem(Problem(kind: .upstreamError, status: 502, code: r.code ?? -104, detail: r.message,
                                             upstreamStatus: status, upstream: r.extras, errors: errors)))
        }
    }

    /// What the one-pass judge did, in the reference's terms; nil when its rest-of-object answer is
    /// not one JSON object.
    func actual(status: Int) -> RefExpectation? {
        let v = judge(UpstreamAnswer(status: status, contentType: contentType, path: "/", isHead: false), body: bytes, config: config)
        switch v {
        case .unwrapRest(let s, let body):
            guard JSONScanner.validate(body), let members = RefTree.parse(body)?.members else { return nil }
            return .members(status: s, members.map { "\($0.name)=\(String(decoding: body[$0.value.range], as: UTF8.self))" })
        case .problem(var p):
            p.reason = nil
            return .verdict(.problem(p))
        default:
            return .verdict(v)
        }
    }

    /// Nil when the judge and the reference agree on `status`; else what differs.
    func disagreement(status: Int) -> String? {
        let expected = expectation(status: status)
        guard var got = actual(status: status) else { return "\(dialect.preset): the rest-of-object answer is not a JSON object" }
        // With nothing to cut, the judge sends the object's own bytes: read them as members.
        if case .members = expected, case .verdict(.unwrap(let s, let r?)) = got {
            let sub = Array(bytes[r])
            if let m = RefTree.parse(sub)?.members {
                got = .members(status: s, m.map { "\($0.name)=\(String(decoding: sub[$0.value.range], as: UTF8.self))" })
            }
        }
        return expected == got ? nil : "\(dialect.preset) status \(status): judge \(Self.describe(got)), reference \(Self.describe(expected))"
    }

    /// An expectation in few words, with raw bytes as text.
    static func describe(_ e: RefExpectation) -> String {
        guard case .verdict(.problem(let p)) = e else { return "\(e)" }
        var parts = ["\(p.kind.rawValue) \(p.status)", "code \(p.code.map(\.json) ?? "null")"]
        if let d = p.detail { parts.append("detail \(d.debugDescription)") }
        if let u = p.upstreamStatus { parts.append("upstream_status \(u)") }
        if !p.upstream.isEmpty {
            parts.append("upstream {" + p.upstream.map { "\($0.name)=\(String(decoding: $0.raw, as: UTF8.self))" }.joined(separator: ", ") + "}")
        }
        if let e = p.errors { parts.append("errors " + String(decoding: e, as: UTF8.self)) }
        if let m = p.privateMessage { parts.append("private \(m.debugDescription)") }
        return parts.joined(separator: "; ")
    }
}

/// Builds envelopes shaped like the presets' backends from a stream of choices.
struct EnvelopeGenerator {
    var state: UInt64

    init(seed: UInt64) { state = seed &* 0x9E37_79B9_7F4A_7C15 | 1 }

    init(bytes: [UInt8]) {
        var h: UInt64 = 0xCBF2_9CE4_8422_2325
        for b in bytes { h = (h ^ UInt64(b)) &* 0x100_0000_01B3 }
        self.init(seed: h)
    }

    mutating func next(_ n: Int) -> Int {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return Int(state % UInt64(max(n, 1)))
    }

    mutating func pick<T>(_ items: [T]) -> T { items[next(items.count)] }

    static let names = ["code", "msg", "message", "errcode", "errmsg", "data", "result", "success", "status", "error", "errorCode",
                        "errorMessage", "showType", "sub_code", "sub_msg", "timestamp", "sign", "sign_type",
                        "alipay_trade_query_response", "error_response", "x_response", "token", "rows", "total", "co\\u0064e", "other"]

    mutating func scalar() -> String {
        pick(["0", "200", "7", "401", "-1", "1.10", "12345678901234567890", "1e3", "\"00000\"", "\"10000\"", "\"20001\"", "\"A0230\"",
              "\"0\"", "\"200\"", "\"success\"", "\"fail\"", "\"error\"", "\"ok\"", "\"\"", "\"\\u4f60\\ud83d\\ude00\\n\"", "true",
              "false", "null", "\"40004\"", "42001", "40013"])
    }

    mutating func value(depth: Int) -> String {
        switch next(depth > 2 ? 1 : 5) {
        case 0: return scalar()
        case 1: return "[" + (0..<next(3)).map { _ in value(depth: depth + 1) }.joined(separator: ",") + "]"
        case 2: return "{}"
        default: return object(depth: depth + 1)
        }
    }

    mutating func object(depth: Int) -> String {
        let ws = pick(["", "", " ", "\n  "])
        let count = next(6)
        let members = (0..<count).map { _ in "\"\(pick(Self.names))\"" + pick([":", " : "]) + value(depth: depth) }
        return "{" + ws + members.joined(separator: "," + ws) + ws + "}"
    }

    mutating func envelope() -> [UInt8] { Array(object(depth: 0).utf8) }

    /// An envelope made mostly of the dialect's own members and codes, so every outcome is reached:
    /// half the time with each member at its whole path (`Response.Error.Code`, `errors.0.message`),
    /// else with the last step of each path at the top level.
    mutating func envelope(for d: Dialect) -> [UInt8] {
        if next(2) == 0 { return nestedEnvelope(for: d) }
        var members: [String] = []
        let codes = (d.successCodes.sorted + d.authCodes.sorted).map(\.json) + ["1001", "\"B0001\"", "500"]
        for code in d.codes where next(5) > 0 { members.append("\"\(code.steps.last!)\":" + (next(4) > 0 ? pick(codes) : scalar())) }
        for m in d.messages where next(2) == 0 { members.append("\"\(m.steps.last!)\":" + pick(["\"ok\"", "\"余额不足\"", "null", "\"\""])) }
        switch d.success {
        case .flag(let f) where next(6) > 0: members.append("\"\(f)\":" + pick(["true", "false"]))
        case .status(let f) where next(6) > 0: members.append("\"\(f)\":" + pick(["\"success\"", "\"fail\"", "\"error\""]))
        default: break
        }
        for e in d.extras where next(3) == 0 { members.append("\"\(e.steps.last!)\":" + value(depth: 1)) }
        for i in d.ignore where next(3) == 0 { members.append("\"\(i)\":" + scalar()) }
        var payloadTaken = false
        if let rule = d.fieldErrors, next(2) == 0 {
            // The dialect's own field-error location, holding a map, a list, one message or null.
            let message = rule.message ?? pick(["message", "msg", "defaultMessage"])
            let fieldName = rule.field ?? pick(["field", "path", "param"])
            let item = { (g: inout EnvelopeGenerator) -> String in
                "{\"\(fieldName)\":\(g.field()),\"\(message)\":\(g.words())}"
            }
            var value: String
            switch next(5) {
            case 0: value = fieldMap(depth: 1, nonField: true)
            case 1: value = words()
            case 2: value = "null"
            default:
                var items: [String] = []
                for _ in 0..<next(4) { items.append(next(5) == 0 ? words() : item(&self)) }
                value = Self.jsonList(items)
            }
            for step in rule.path.steps.dropFirst().reversed() { value = "{\"\(step)\":\(value)}" }
            members.append("\"\(rule.path.head)\":" + value)
            if case .member(let p) = d.payload, p.head == rule.path.head { payloadTaken = true }
        }
        if case .member(let p) = d.payload, !payloadTaken, next(3) > 0 { members.append("\"\(p.head)\":" + value(depth: 1)) }
        for _ in 0..<next(3) { members.append("\"\(pick(Self.names))\":" + value(depth: 1)) }
        // Shuffle: envelope members first, last, or between the others.
        for k in stride(from: members.count - 1, to: 0, by: -1) { members.swapAt(k, next(k + 1)) }
        let ws = pick(["", "", " ", "\n  "])
        var body = "{" + ws + members.joined(separator: "," + ws) + ws + "}"
        if case .errorMember(let e) = d.success, let code = d.code, let message = d.messages.first {
            let inner = next(3) == 0 ? "null" : "{\"\(code.steps.last!)\":\(pick(codes)),\"\(message.steps.last!)\":\"boom\"}"
            body = next(2) == 0 ? "{\"\(e)\":\(inner),\"data\":\(value(depth: 1))}" : body
        }
        if case .pattern(let suffix, let failure) = d.payload {
            let name = next(3) == 0 ? (failure ?? "x" + suffix) : pick(["alipay_trade_query", "x", "a_b"]) + suffix
            body = "{\"\(name)\":\(body)" + (next(2) == 0 ? ",\"sign\":\"s\"" : "") + "}"
        }
        return Array(body.utf8)
    }

    /// An envelope whose members sit at the dialect's paths, objects and arrays built around them.
    mutating func nestedEnvelope(for d: Dialect) -> [UInt8] {
        var entries: [([String], String)] = []
        let codes = (d.successCodes.sorted + d.authCodes.sorted).map(\.json) + ["1001", "\"B0001\"", "500", "\"AuthFailure.X\""]
        for code in d.codes where next(3) > 0 { entries.append((code.steps, next(4) > 0 ? pick(codes) : scalar())) }
        for m in d.messages where next(2) == 0 { entries.append((m.steps, pick(["\"ok\"", "\"余额不足\"", "null", "\"\""]))) }
        switch d.success {
        case .flag(let f) where next(6) > 0: entries.append((f.steps, pick(["true", "false"])))
        case .status(let f) where next(6) > 0: entries.append((f.steps, pick(["\"success\"", "\"fail\"", "\"error\""])))
        case .errorMember(let e) where next(4) == 0: entries.append((e.steps, pick(["null", "{}", "false", "[]", "\"x\""])))
        default: break
        }
        if let flag = d.authFlag, next(2) == 0 { entries.append((flag.steps, pick(["true", "false", "null", "\"true\""]))) }
        for e in d.extras where next(3) == 0 { entries.append((e.steps, value(depth: 1))) }
        for i in d.ignore where next(3) == 0 { entries.append(([i], scalar())) }
        if case .member(let p) = d.payload {
            if next(3) == 0 { entries.append((p.steps, value(depth: 1))) }
            if next(2) == 0 { entries.append((p.steps + [pick(Self.names)], value(depth: 1))) }
        }
        for _ in 0..<next(3) { entries.append(([pick(Self.names)], value(depth: 1))) }
        for k in stride(from: entries.count - 1, to: 0, by: -1) { entries.swapAt(k, next(k + 1)) }
        var body = build(entries)
        if case .pattern(let suffix, let failure) = d.payload {
            let name = next(3) == 0 ? (failure ?? suffix) : pick(["alipay_trade_query", "", "a_b"]) + suffix
            body = "{\"\(name)\":\(body)" + (next(2) == 0 ? ",\"sign\":\"s\"" : "") + "}"
        }
        return Array(body.utf8)
    }

    /// One object from (path, value) entries: a value at a path wins over members below it; a
    /// member whose next steps are all digits is an array (missing elements are `{}`).
    mutating func build(_ entries: [([String], String)]) -> String {
        var order: [String] = []
        var groups: [String: [([String], String)]] = [:]
        for (steps, v) in entries {
            if groups[steps[0]] == nil { order.append(steps[0]) }
            groups[steps[0], default: []].append((Array(steps.dropFirst()), v))
        }
        let ws = pick(["", "", " ", "\n  "])
        let members = order.map { name -> String in
            let inner = groups[name]!
            if let leaf = inner.first(where: { $0.0.isEmpty }) { return "\"\(name)\":" + leaf.1 }
            let indices = inner.compactMap { Int($0.0[0]) }
            guard indices.count == inner.count, let last = indices.max() else { return "\"\(name)\":" + build(inner) }
            let elements = (0...last).map { k -> String in
                let here = inner.filter { Int($0.0[0]) == k }.map { (Array($0.0.dropFirst()), $0.1) }
                if here.isEmpty { return "{}" }
                if let leaf = here.first(where: { $0.0.isEmpty }) { return leaf.1 }
                return build(here)
            }
            return "\"\(name)\":[" + elements.joined(separator: ",") + "]"
        }
        return "{" + ws + members.joined(separator: "," + ws) + ws + "}"
    }
}

// MARK: Failure bodies, field errors and the status rule

/// One field error the reference expects in RFC 9457's `errors`: the message's raw JSON string
/// (quotes included, as the upstream wrote it) and what it is about.
struct RefFieldError: Equatable {
    enum About: Equatable {
        /// Tied to no field.
        case nothing
        /// A member of the request body, as unescaped reference tokens from the root.
        case tokens([[UInt8]])
        /// A pointer the upstream wrote itself (JSON:API `source.pointer`, an RFC 9457 `pointer`).
        case written([UInt8])
        /// A query, path, header or cookie parameter.
        case parameter(String)
    }

    var raw: [UInt8]
    var about: About

    /// Bytes a URI fragment holds as they are (RFC 3986 §3.5: pchar, `/`, `?`).
    static func plainInFragment(_ c: UInt8) -> Bool {
        if (0x30...0x39).contains(c) || (0x41...0x5A).contains(c) || (0x61...0x7A).contains(c) { return true }
        return Array("-._~!$&'()*+,;=:@/?".utf8).contains(c)
    }

    static func percent(_ c: UInt8) -> [UInt8] {
        let digits = Array("0123456789ABCDEF".utf8)
        return [UInt8(ascii: "%"), digits[Int(c >> 4)], digits[Int(c & 15)]]
    }

    static func isHex(_ c: UInt8) -> Bool {
        (0x30...0x39).contains(c) || (0x41...0x46).contains(c) || (0x61...0x66).contains(c)
    }

    /// `#` and the pointer in URI fragment form (RFC 6901 §6).
    static func fragment(_ about: About) -> [UInt8]? {
        switch about {
        case .nothing, .parameter: return nil
        case .tokens(let tokens):
            var out: [UInt8] = [UInt8(ascii: "#")]
            for token in tokens {
                out.append(UInt8(ascii: "/"))
                // §3 first: `~` and `/` become `~0` and `~1`; then whatever a fragment may not hold.
                var escaped: [UInt8] = []
                for c in token {
                    if c == UInt8(ascii: "~") { escaped += Array("~0".utf8) } else if c == UInt8(ascii: "/") { escaped += Array("~1".utf8) } else { escaped.append(c) }
                }
                for c in escaped { out += plainInFragment(c) ? [c] : percent(c) }
            }
            return out
        case .written(let text):
            // A pointer behind `#` is already a fragment: its valid percent-escapes stay. A bare JSON
            // Pointer is plain text: its `%` is a percent sign like any other.
            let isFragment = text.first == UInt8(ascii: "#")
            let t = Array(isFragment ? text.dropFirst() : text[...])
            var out: [UInt8] = [UInt8(ascii: "#")]
            var k = 0
            while k < t.count {
                let c = t[k]
                if plainInFragment(c) {
                    out.append(c)
                } else if isFragment && c == UInt8(ascii: "%") && k + 2 < t.count && isHex(t[k + 1]) && isHex(t[k + 2]) {
                    out.append(c)
                } else {
                    out += percent(c)
                }
                k += 1
            }
            return out
        }
    }

    /// A JSON string as Peel writes one: the escapes RFC 8259 requires, lowercase hex, UTF-8 raw.
    static func jsonString(_ s: String) -> [UInt8] {
        var out: [UInt8] = [UInt8(ascii: "\"")]
        for c in s.utf8 {
            switch c {
            case UInt8(ascii: "\""): out += Array("\\\"".utf8)
            case UInt8(ascii: "\\"): out += Array("\\\\".utf8)
            case 0x08: out += Array("\\b".utf8)
            case 0x09: out += Array("\\t".utf8)
            case 0x0A: out += Array("\\n".utf8)
            case 0x0C: out += Array("\\f".utf8)
            case 0x0D: out += Array("\\r".utf8)
            case 0..<0x20:
                let digits = Array("0123456789abcdef".utf8)
                out += Array("\\u00".utf8) + [digits[Int(c >> 4)], digits[Int(c & 15)]]
            default: out.append(c)
            }
        }
        return out + [UInt8(ascii: "\"")]
    }

    var json: [UInt8] {
        var out = Array("{\"detail\":".utf8) + raw
        if let f = Self.fragment(about) {
            out += Array(",\"pointer\":\"".utf8) + f + [UInt8(ascii: "\"")]
        } else if case .parameter(let name) = about {
            out += Array(",\"parameter\":".utf8) + Self.jsonString(name)
        }
        return out + [UInt8(ascii: "}")]
    }

    static func array(_ list: [RefFieldError]) -> [UInt8]? {
        guard !list.isEmpty else { return nil }
        return [UInt8(ascii: "[")] + Array(list.map(\.json).joined(separator: [UInt8(ascii: ",")])) + [UInt8(ascii: "]")]
    }
}

/// What the reference read from a failure body.
struct RefWords {
    var shape: String?
    var code: EnvelopeCode?
    var message: String?
    var fieldErrors: [RefFieldError] = []
    /// An upstream problem's own `errors` array, copied as it is.
    var ownErrors: [UInt8]?
    var upstream: [UpstreamMember] = []

    var errors: [UInt8]? { ownErrors ?? RefFieldError.array(fieldErrors) }
}

extension RefNode {
    var text: String? {
        if case .string(let s, _) = self { return s }
        return nil
    }
    var isString: Bool { text != nil }
    var isNumber: Bool {
        if case .number = self { return true }
        return false
    }
    var items: [RefNode]? {
        if case .array(let a, _) = self { return a }
        return nil
    }
    var isEmptyString: Bool { text == "" }
    /// A string that says something.
    var words: String? { text.flatMap { $0.isEmpty ? nil : $0 } }
}

/// Field errors, read from a tree the way each framework writes them.
struct RefFieldErrorReading {
    let raw: (RefNode) -> [UInt8]
    var found: [RefFieldError] = []

    static let messageNames = ["message", "msg", "defaultMessage", "description", "detail", "title"]

    /// The first of `names`, in that order, whose first occurrence is present and not `""`.
    static func first(_ members: [RefMember], _ names: [String]) -> RefNode? {
        for n in names {
            if let m = members.first(where: { $0.name == n }), !m.value.isEmptyString { return m.value }
        }
        return nil
    }

    mutating func note(_ n: RefNode, _ about: RefFieldError.About) {
        guard let w = n.text, !w.isEmpty else { return }
        found.append(RefFieldError(raw: raw(n), about: about))
    }

    /// A property path: parts between `.`, `[` and `]`, empty parts dropped.
    static func pathTokens(_ s: String) -> [[UInt8]] {
        var tokens: [[UInt8]] = []
        var part: [UInt8] = []
        for c in s.utf8 {
            if c == UInt8(ascii: ".") || c == UInt8(ascii: "[") || c == UInt8(ascii: "]") {
                if !part.isEmpty { tokens.append(part) }
                part = []
            } else {
                part.append(c)
            }
        }
        if !part.isEmpty { tokens.append(part) }
        return tokens
    }

    /// A field map (Laravel, Rails, ASP.NET Core, DRF) under the tokens `at`.
    mutating func fieldMap(_ members: [RefMember], at: [[UInt8]], split: Bool, nonField: Bool) {
        for m in members {
            if nonField && m.name == "non_field_errors" {
                let about: RefFieldError.About = at.isEmpty ? .nothing : .tokens(at)
                if let list = m.value.items { for item in list { note(item, about) } } else { note(m.value, about) }
                continue
            }
            var here = at
            if split {
                var name = m.name
                if name.hasPrefix("$") { name.removeFirst() }
                here += Self.pathTokens(name)
            } else {
                here.append(Array(m.name.utf8))
            }
            fieldValue(m.value, at: here, split: split)
        }
    }

    mutating func fieldValue(_ v: RefNode, at: [[UInt8]], split: Bool) {
        switch v {
        case .string: note(v, .tokens(at))
        case .object(let inner, _): fieldMap(inner, at: at, split: split, nonField: true)
        case .array(let list, _):
            for (k, item) in list.enumerated() {
                if item.isString {
                    note(item, .tokens(at))
                } else if let inner = item.members {
                    if let m = Self.first(inner, Self.messageNames) {
                        note(m, .tokens(at))
                    } else {
                        fieldMap(inner, at: at + [Array(String(k).utf8)], split: split, nonField: true)
                    }
                }
            }
        default: break
        }
    }

    /// Whether an object is a DRF serializer's error map all the way down.
    static func isDRFMap(_ members: [RefMember], depth: Int = 0) -> Bool {
        guard depth < 32, !members.isEmpty else { return false }
        return members.allSatisfy { m in
            if let inner = m.value.members { return isDRFMap(inner, depth: depth + 1) }
            guard let list = m.value.items else { return false }
            return list.allSatisfy { item in
                if item.isString { return true }
                guard let inner = item.members else { return false }
                return inner.isEmpty || isDRFMap(inner, depth: depth + 1)
            }
        }
    }

    /// A list of error objects (or bare messages): each object's message under `messageNames`
    /// and its place, found the usual ways unless `fieldName` says where.
    mutating func errorList(_ list: [RefNode], messageNames: [String] = messageNames, fieldName: String? = nil, placed: Bool = false) {
        for item in list {
            if item.isString {
                if !placed { note(item, .nothing) }
                continue
            }
            guard let inner = item.members, let message = Self.first(inner, messageNames) else { continue }
            let about = place(inner, fieldName: fieldName)
            if placed && about == .nothing { continue }
            note(message, about)
        }
    }

    func place(_ inner: [RefMember], fieldName: String?) -> RefFieldError.About {
        func property(_ n: RefNode) -> RefFieldError.About {
            guard let s = n.text else { return .nothing }
            return .tokens(Self.pathTokens(s))
        }
        if let fieldName {
            return Self.first(inner, [fieldName]).map(property) ?? .nothing
        }
        if let loc = Self.first(inner, ["loc"])?.items { return fastAPI(loc) }
        if let source = Self.first(inner, ["source"])?.members {
            if let p = Self.first(source, ["pointer"]), let s = p.text { return .written(Array(s.utf8)) }
            if let p = Self.first(source, ["parameter"]), let s = p.text { return .parameter(s) }
            return .nothing
        }
        if let p = Self.first(inner, ["pointer"]), let s = p.text { return .written(Array(s.utf8)) }
        if let list = Self.first(inner, ["members"])?.items {
            return list.first.map(property) ?? .nothing
        }
        guard let f = Self.first(inner, ["field", "path", "target", "param", "property"]) else { return .nothing }
        if let location = Self.first(inner, ["location"])?.text, ["query", "params", "headers", "cookies"].contains(location) {
            return f.text.map { .parameter($0) } ?? .nothing
        }
        return property(f)
    }

    /// FastAPI's `loc`: where in the request the error is.
    func fastAPI(_ loc: [RefNode]) -> RefFieldError.About {
        guard let head = loc.first?.text else { return .nothing }
        let rest = loc.dropFirst().map { $0.text ?? String(decoding: raw($0), as: UTF8.self) }
        switch head {
        case "body": return .tokens(rest.map { Array($0.utf8) })
        case "query", "path", "header", "cookie": return rest.isEmpty ? .nothing : .parameter(rest.joined(separator: "."))
        default: return .nothing
        }
    }
}

extension DialectReference {
    /// Custom dialects the reference and the fuzzer judge under besides the presets: the seed's
    /// envelope with a field-error location and 5xx words shown, and `rest` with 5xx words shown.
    static let customDialects: [Dialect] = {
        var fields = Dialect.peel
        fields.preset = "peel+field_errors"
        fields.fieldErrors = FieldErrorRule(path: "errors")
        fields.exposes5xxMessages = true
        var exposed = Dialect.rest
        exposed.preset = "rest+expose_5xx_messages"
        exposed.exposes5xxMessages = true
        var listed = Dialect.jsend
        listed.preset = "jsend+field_errors"
        listed.fieldErrors = FieldErrorRule(path: "data.errors", message: "reason", field: "name")
        return [fields, exposed, listed]
    }()

    static var allDialects: [Dialect] { Dialect.presets + customDialects }

    func reading() -> RefFieldErrorReading { RefFieldErrorReading(raw: { Array(self.bytes[$0.range]) }) }

    func text(_ n: RefNode) -> String? { n.words }

    /// A code as the upstream wrote it: a string, or an integer that fits in 64 bits.
    func code(_ n: RefNode?) -> EnvelopeCode? {
        switch n {
        case .string(let s, _)?: return .string(s)
        case .number(let t, _)?:
            let digits = t.hasPrefix("-") ? String(t.dropFirst()) : t
            guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }), digits == "0" || !digits.hasPrefix("0"),
                  let v = Int64(t) else { return nil }
            return .integer(v)
        default: return nil
        }
    }

    /// The dialect's own field errors in an envelope it read.
    func dialectFieldErrors(_ scope: [RefMember]) -> [UInt8]? {
        guard let rule = dialect.fieldErrors else { return nil }
        var node: RefNode = .object(scope, 0..<0)
        for step in rule.path.steps {
            // A member named twice on the way: which one the backend meant is unknown.
            if let m = node.members, let found = m.first(where: { $0.name == step }) {
                guard m.filter({ $0.name == step }).count == 1 else { return nil }
                node = found.value
            } else if let list = node.items, let k = Int(step), k >= 0, k < list.count {
                node = list[k]
            } else {
                return nil
            }
        }
        var r = reading()
        switch node {
        case .object(let m, _): r.fieldMap(m, at: [], split: true, nonField: true)
        case .array(let list, _): r.errorList(list, messageNames: rule.message.map { [$0] } ?? RefFieldErrorReading.messageNames, fieldName: rule.field)
        case .string: r.note(node, .nothing)
        default: return nil
        }
        return RefFieldError.array(r.found)
    }

    /// The names the well-known shapes read at the top level; one of them twice and no shape reads the body.
    static let shapeNames: Set<String> = ["type", "title", "status", "detail", "instance", "errors", "error", "error_description",
                                          "message", "msg", "code", "reason", "metadata", "timestamp", "path", "name",
                                          "description", "statusCode"]

    static let oauthErrors: Set<String> = ["invalid_request", "invalid_client", "invalid_grant", "unauthorized_client",
                                           "unsupported_grant_type", "invalid_scope", "access_denied", "unsupported_response_type",
                                           "server_error", "temporarily_unavailable", "invalid_token", "insufficient_scope"]

    /// The body's members other than `taken`, byte for byte.
    func others(_ members: [RefMember], _ taken: Set<String>) -> [UpstreamMember] {
        members.filter { !taken.contains($0.name) }.map { UpstreamMember(name: $0.name, raw: Array(bytes[$0.value.range])) }
    }

    /// The words of a failure body by the first well-known shape it matches, most specific first.
    func shapes(_ top: [RefMember], problemType: Bool) -> RefWords? {
        for name in Self.shapeNames where top.filter({ $0.name == name }).count > 1 { return nil }
        func get(_ name: String) -> RefNode? { top.first { $0.name == name }?.value }
        // A message of the shape's own, else the first field error's.
        func finish(_ shape: String, code: (String, EnvelopeCode?)? = nil, message: (String, String?)? = nil,
                    fields: (String, RefFieldErrorReading)? = nil, drop: [String] = []) -> RefWords {
            var taken = Set(drop)
            var w = RefWords(shape: shape)
            if let code, let c = code.1 {
                w.code = c
                taken.insert(code.0)
            }
            if let message, let m = message.1 {
                w.message = m
                taken.insert(message.0)
            }
            if let fields, !fields.1.found.isEmpty {
                w.fieldErrors = fields.1.found
                taken.insert(fields.0)
            }
            if w.message == nil, let first = w.fieldErrors.first { w.message = RefTree.parse(first.raw)?.text }
            w.upstream = others(top, taken)
            return w
        }
        let type = get("type"), title = get("title"), detail = get("detail"), status = get("status")
        let error = get("error"), errors = get("errors"), message = get("message")

        // RFC 9457 / RFC 7807.
        // A `type` that is a URI reference (RFC 9457 §3.1.1: it has a `:` or starts with `/`) with a
        // numeric `status` is a problem too; `{"type":"error","status":500,…}` is not.
        let typeIsURI = type.flatMap(text).map { $0.contains(":") || $0.hasPrefix("/") } ?? false
        if problemType || (type?.isString == true && (title?.isString == true || detail?.isString == true))
            || (title?.isString == true && status?.isNumber == true) || (typeIsURI && status?.isNumber == true) {
            let said = detail.flatMap(text)
            var w = finish("problem", code: ("code", code(get("code"))), message: said != nil ? ("detail", said) : ("title", title.flatMap(text)),
                           drop: ["status"])
            if let errors, errors.items != nil {
                w.ownErrors = Array(bytes[errors.range])
                w.upstream.removeAll { $0.name == "errors" }
            } else if let map = errors?.members {
                var r = reading()
                r.fieldMap(map, at: [], split: true, nonField: false)
                if !r.found.isEmpty {
                    w.fieldErrors = r.found
                    w.upstream.removeAll { $0.name == "errors" }
                    if w.message == nil { w.message = RefTree.parse(r.found[0].raw)?.text }
                }
            }
            return w
        }
        // Google, Microsoft, Stripe: `{"error": {…}}`.
        if let inner = error?.members, RefFieldErrorReading.first(inner, ["message", "code", "status"]) != nil {
            func firstNamed(_ n: String) -> Int? { inner.firstIndex { $0.name == n } }
            var taken: Set<Int> = []
            var w = RefWords(shape: "error-object")
            if let k = firstNamed("message"), let m = text(inner[k].value) {
                w.message = m
                taken.insert(k)
            }
            if let k = firstNamed("status"), inner[k].value.isString {
                w.code = code(inner[k].value)
                taken.insert(k)
            } else if let k = firstNamed("code"), let c = code(inner[k].value) {
                w.code = c
                taken.insert(k)
            }
            var r = reading()
            if let k = firstNamed("details"), let details = inner[k].value.items {
                for d in details {
                    if let m = d.members, let v = RefFieldErrorReading.first(m, ["fieldViolations", "field_violations"])?.items {
                        r.errorList(v, messageNames: ["description"], fieldName: "field")
                    }
                }
                if r.found.isEmpty { r.errorList(details, messageNames: ["message"], fieldName: "target", placed: true) }
                if !r.found.isEmpty { taken.insert(k) }
            }
            if r.found.isEmpty, let p = firstNamed("param"), let param = inner[p].value.text,
               let k = firstNamed("message"), w.message != nil {
                r.found.append(RefFieldError(raw: Array(bytes[inner[k].value.range]), about: .tokens(RefFieldErrorReading.pathTokens(param))))
                taken.insert(p)
            }
            w.fieldErrors = r.found
            if w.message == nil, let first = r.found.first { w.message = RefTree.parse(first.raw)?.text }
            w.upstream = inner.enumerated().filter { !taken.contains($0.offset) }.map {
                UpstreamMember(name: $0.element.name, raw: Array(bytes[$0.element.value.range]))
            } + others(top, ["error"])
            return w
        }
        // OAuth 2.0.
        if let e = error?.text, get("error_description") != nil || Self.oauthErrors.contains(e) {
            return finish("oauth", code: ("error", .string(e)), message: ("error_description", get("error_description").flatMap(text)))
        }
        // Spring Boot.
        if get("timestamp") != nil, status?.isNumber == true, get("path") != nil {
            var r = reading()
            if let list = errors?.items { r.errorList(list) }
            if let m = message.flatMap(text) { return finish("spring", message: ("message", m), fields: ("errors", r), drop: ["status"]) }
            return finish("spring", message: ("error", error.flatMap(text)), fields: ("errors", r), drop: ["status"])
        }
        // go-kratos: the numeric code repeats the status, the reason is the code.
        if let reason = get("reason"), reason.isString, get("code")?.isNumber == true, message != nil {
            return finish("kratos", code: ("reason", code(reason)), message: ("message", message.flatMap(text)), drop: ["code"])
        }
        // Flask.
        if get("description")?.isString == true, get("name")?.isString == true, get("code")?.isNumber == true {
            return finish("flask", message: ("description", get("description").flatMap(text)), drop: ["code"])
        }
        // FastAPI.
        if let list = detail?.items {
            var r = reading()
            r.errorList(list)
            return finish("fastapi", fields: ("detail", r))
        }
        // Laravel, Rails.
        if let map = errors?.members {
            var r = reading()
            r.fieldMap(map, at: [], split: true, nonField: false)
            return finish("laravel", code: ("code", code(get("code"))), message: ("message", message.flatMap(text)), fields: ("errors", r))
        }
        // NestJS.
        if get("statusCode")?.isNumber == true, let message {
            var r = reading()
            if let list = message.items { for item in list { r.note(item, .nothing) } }
            return finish("nestjs", code: ("code", code(get("code"))), message: ("message", text(message)), fields: ("message", r),
                          drop: ["statusCode"])
        }
        // JSON:API, GraphQL, express-validator.
        if let list = errors?.items, let firstError = list.first?.members {
            var r = reading()
            r.errorList(list, placed: true)
            var c = code(RefFieldErrorReading.first(firstError, ["code"]))
            if c == nil, let ext = RefFieldErrorReading.first(firstError, ["extensions"])?.members {
                c = code(RefFieldErrorReading.first(ext, ["code"]))
            }
            var w = finish("errors-array", drop: ["errors"])
            w.message = RefFieldErrorReading.first(firstError, ["message", "detail", "title", "msg"]).flatMap(text)
            w.code = c
            w.fieldErrors = r.found
            if w.message == nil, let first = r.found.first { w.message = RefTree.parse(first.raw)?.text }
            return w
        }
        if let d = detail, d.isString {
            return finish("drf", code: ("code", code(get("code"))), message: ("detail", text(d)))
        }
        if let m = message.flatMap(text) {
            return finish("message", code: ("code", code(get("code"))), message: ("message", m))
        }
        if let m = get("msg").flatMap(text) {
            return finish("message", code: ("code", code(get("code"))), message: ("msg", m))
        }
        if let e = error, e.isString {
            return finish("error", code: ("code", code(get("code"))), message: ("error", text(e)))
        }
        guard RefFieldErrorReading.isDRFMap(top) else { return nil }
        var r = reading()
        r.fieldMap(top, at: [], split: false, nonField: true)
        guard let first = r.found.first else { return nil }
        return RefWords(shape: "drf", message: RefTree.parse(first.raw)?.text, fieldErrors: r.found)
    }

    /// The problem for an upstream non-2xx, and the shape that read it (nil: the dialect or nothing).
    func failure(_ root: RefNode?, _ r: Read?, status: Int) -> (Problem, String?) {
        let shown = (400...499).contains(status) ? status : 502
        if let r, r.code != nil || r.message != nil {
            let errors = dialectFieldErrors(r.scope)
            if status == 401 || r.isAuth(dialect, status: status) {
                return (Problem(kind: .authExpired, code: r.code, detail: r.message, upstreamStatus: status, upstream: r.extras, errors: errors), nil)
            }
            return (Problem(kind: .upstreamError, status: shown, code: r.code ?? -104, detail: r.message, upstreamStatus: status,
                            upstream: r.extras, errors: errors), nil)
        }
        let problemType = contentType.map { $0.lowercased().hasPrefix("application/problem+json") } ?? false
        if let top = root?.members, let w = shapes(top, problemType: problemType) {
            if status == 401 {
                return (Problem(kind: .authExpired, code: w.code, detail: w.message, upstreamStatus: status, upstream: w.upstream,
                                errors: w.errors), w.shape)
            }
            if !(400...499).contains(status) && !dialect.exposes5xxMessages {
                var p = Problem(kind: .upstreamError, status: 502, upstreamStatus: status)
                p.privateMessage = w.message
                return (p, w.shape)
            }
            return (Problem(kind: .upstreamError, status: shown, code: w.code ?? -104, detail: w.message, upstreamStatus: status,
                            upstream: w.upstream, errors: w.errors), w.shape)
        }
        let extras = r?.extras ?? []
        if status == 401 { return (Problem(kind: .authExpired, upstreamStatus: status, upstream: extras), nil) }
        return (Problem(kind: .upstreamError, status: shown, upstreamStatus: status, upstream: extras), nil)
    }
}

extension EnvelopeGenerator {
    /// Messages as backends write them: escapes, non-ASCII, surrogate pairs, and the empty one.
    mutating func words() -> String {
        pick(["\"The email field is required.\"", "\"余额不足\"", "\"caf\\u00e9 \\\"quoted\\\" \\\\ back\\/slash\"", "\"line\\nbreak\\t\"",
              "\"\\ud83d\\ude00 emoji\"", "\"\"", "\"Ünïcödé ✓\"", "\"must not be blank\"", "\"Your current balance is 30, but that costs 50.\"",
              "\"\\u0000nul\"", "\"lone \\ud800 surrogate\""])
    }

    /// Field names and property paths, some of which a pointer must escape.
    mutating func field() -> String {
        pick(["\"email\"", "\"items.0.name\"", "\"a/b\"", "\"m~n\"", "\"weird key\"", "\"größe\"", "\"$.items[0].name\"", "\"card[number]\"",
              "\"100%\"", "\"q\\\"x\"", "\"\"", "\"a..b\"", "\"x?y#z\"", "\"user.address.zip\"", "\"non_field_errors\"", "\"\\u002Fslash\"", "\"\\udc00x\""])
    }

    mutating func someCode() -> String {
        pick(["400", "\"INVALID_ARGUMENT\"", "12345678901234567890", "-7", "1.5", "\"E\\u0031\"", "true", "null", "0", "\"not_found\""])
    }

    static func jsonList(_ items: [String]) -> String { "[" + items.joined(separator: ",") + "]" }

    mutating func messages() -> String {
        let n = next(4)
        var items: [String] = []
        for _ in 0..<n { items.append(words()) }
        return "[" + items.joined(separator: ",") + "]"
    }

    /// A map of fields to messages: Laravel's and Rails' flat one, DRF's nested ones.
    mutating func fieldMap(depth: Int, nonField: Bool) -> String {
        var members: [String] = []
        for _ in 0..<(1 + next(3)) {
            let value: String
            switch next(depth > 1 ? 2 : 5) {
            case 0: value = messages()
            case 1: value = words()
            case 2: value = fieldMap(depth: depth + 1, nonField: nonField)
            case 3: value = "[" + fieldMap(depth: depth + 1, nonField: nonField) + ",{}]"
            default: value = "[{\"message\":\(words()),\"code\":\"invalid\"}]"
            }
            members.append(field() + ":" + value)
        }
        if nonField && next(3) == 0 { members.insert("\"non_field_errors\":" + messages(), at: next(members.count + 1)) }
        return "{" + members.joined(separator: ",") + "}"
    }

    mutating func jsonAPIPointer() -> String {
        pick(["\"/data/attributes/email\"", "\"/data/attributes/first~1name\"", "\"#/age\"", "\"/data/a b\"", "\"/data/100%\"",
              "\"/é\"", "\"#/a%20b\"", "\"#/100%zz\"", "\"/data/a%20b\"", "\"#/a%2fb%C3%A9\"", "\"\"", "\"/data/q\\\"x\""])
    }

    mutating func fastAPILoc() -> String {
        pick(["[\"body\",\"items\",0,\"name\"]", "[\"body\"]", "[\"query\",\"page\"]", "[\"path\",\"id\"]", "[\"header\",\"x-token\"]",
              "[\"cookie\",\"session\"]", "[\"query\"]", "[\"body\",\"a/b\",\"m~n\"]", "[0]", "[\"other\",\"x\"]", "[\"query\",\"filter\",1]",
              "[]", "[\"body\",\"größe\"]"])
    }

    /// A failure body in one of the shapes common frameworks answer with, named by `shape`.
    mutating func failureBody() -> (shape: String, body: [UInt8], problemType: Bool) {
        var members: [String] = []
        var problemType = false
        let shape = pick(["problem", "google", "microsoft", "stripe", "oauth", "spring", "kratos", "flask", "fastapi", "laravel",
                          "rails", "nestjs", "jsonapi", "graphql", "express", "drf-detail", "drf-map", "message", "msg", "error", "random"])
        func maybe(_ m: String, _ p: Int = 2) -> [String] { next(p) == 0 ? [] : [m] }
        switch shape {
        case "problem":
            problemType = next(3) == 0
            members += maybe("\"type\":\"https://example.com/probs/out-of-credit\"", 4)
            members += maybe("\"title\":" + words(), 3)
            members += maybe("\"status\":" + pick(["400", "\"400\"", "422"]), 3)
            members += maybe("\"detail\":" + words(), 3)
            members += maybe("\"instance\":\"/account/12345/msgs/abc\"")
            members += maybe("\"balance\":30,\"accounts\":[\"/account/12345\",\"/account/67890\"]")
            members += maybe("\"code\":" + someCode())
            switch next(5) {
            case 0: members.append("\"errors\":" + Self.jsonList((0..<(next(3))).map { _ in "{\"detail\":\(words()),\"pointer\":\"#/age\"}" }))
            case 1: members.append("\"errors\":{\"$.items[0].name\":" + messages() + "," + field() + ":" + messages() + "}")
            case 2: members.append("\"errors\":{}")
            default: break
            }
        case "google":
            var inner = ["\"code\":400"] + maybe("\"message\":" + words(), 3) + maybe("\"status\":\"INVALID_ARGUMENT\"")
            inner.append("\"details\":[" + (next(2) == 0 ? "{\"@type\":\"type.googleapis.com/google.rpc.ErrorInfo\",\"reason\":\"X\"}," : "")
                         + "{\"@type\":\"type.googleapis.com/google.rpc.BadRequest\",\"fieldViolations\":"
                         + Self.jsonList((0..<(next(3))).map { _ in "{\"field\":\(field()),\"description\":\(words())}" }) + "}]")
            members.append("\"error\":{" + inner.joined(separator: ",") + "}")
        case "microsoft":
            let details = Self.jsonList((0..<(next(3))).map { _ in "{\"code\":\"NullValue\"," + (next(3) == 0 ? "" : "\"target\":\(field()),") + "\"message\":\(words())}" })
            members.append("\"error\":{\"code\":\"BadArgument\",\"message\":\(words()),\"target\":\"name\",\"details\":\(details),"
                           + "\"innererror\":{\"code\":\"PasswordError\"}}")
        case "stripe":
            members.append("\"error\":{\"type\":\"invalid_request_error\"," + (next(2) == 0 ? "\"code\":\"parameter_missing\"," : "")
                           + "\"message\":\(words())," + (next(3) == 0 ? "" : "\"param\":\(field()),")
                           + "\"doc_url\":\"https://stripe.com/docs/error-codes/parameter-missing\"}")
            members += maybe("\"request_log_url\":\"https://dashboard.stripe.com/logs/req_1\"")
        case "oauth":
            members.append("\"error\":" + pick(["\"invalid_token\"", "\"invalid_grant\"", "\"insufficient_scope\"", "\"custom_thing\""]))
            members += maybe("\"error_description\":" + words())
            members += maybe("\"error_uri\":\"https://example.com/docs/errors\"", 3)
        case "spring":
            members.append("\"timestamp\":\"2024-05-01T10:00:00.000+00:00\"")
            members.append("\"status\":" + pick(["400", "404", "500"]))
            members.append("\"error\":" + pick(["\"Bad Request\"", "\"Not Found\"", "\"\""]))
            members += maybe("\"message\":" + words())
            if next(2) == 0 {
                members.append("\"errors\":" + Self.jsonList((0..<(next(3))).map { _ in
                    "{\"codes\":[\"NotBlank.user.email\",\"NotBlank\"],\"arguments\":null,\"defaultMessage\":\(words()),"
                        + "\"objectName\":\"user\",\"field\":\(field()),\"rejectedValue\":null,\"bindingFailure\":false,\"code\":\"NotBlank\"}"
                }))
            }
            members.append("\"path\":\"/api/users\"")
        case "kratos":
            members += ["\"code\":" + pick(["400", "404", "500"]), "\"reason\":" + pick(["\"USER_NOT_FOUND\"", "\"\""]), "\"message\":" + words()]
            members += maybe("\"metadata\":{\"user\":\"42\"}")
        case "flask":
            members += ["\"code\":" + pick(["400", "404"]), "\"name\":\"Not Found\"", "\"description\":" + words()]
        case "fastapi":
            members.append("\"detail\":" + Self.jsonList((0..<(next(4))).map { _ in
                next(6) == 0 ? words() : "{\"type\":\"missing\",\"loc\":\(fastAPILoc()),\"msg\":\(words()),\"input\":null}"
            }))
        case "laravel":
            members += maybe("\"message\":" + words(), 4)
            members.append("\"errors\":" + (next(5) == 0 ? "{}" : fieldMap(depth: 2, nonField: false)))
        case "rails":
            members.append("\"errors\":{" + field() + ":" + pick([messages(), words()]) + "}")
            members += maybe("\"code\":" + someCode(), 3)
        case "nestjs":
            members += ["\"statusCode\":" + pick(["400", "401", "500"]), "\"message\":" + pick([messages(), words()])]
            members += maybe("\"error\":\"Bad Request\"")
        case "jsonapi":
            members.append("\"errors\":" + Self.jsonList((0..<(next(3))).map { _ in
                "{\"status\":\"422\"," + (next(2) == 0 ? "\"code\":\(someCode())," : "")
                    + pick(["\"source\":{\"pointer\":\(jsonAPIPointer())},", "\"source\":{\"parameter\":\"include\"},", "\"source\":{},", ""])
                    + "\"title\":\(words()),\"detail\":\(words())}"
            }))
            members += maybe("\"jsonapi\":{\"version\":\"1.1\"}", 3)
        case "graphql":
            members.append("\"errors\":" + Self.jsonList((0..<(1 + next(2))).map { _ in
                "{\"message\":\(words()),\"locations\":[{\"line\":2,\"column\":3}],\"path\":[\"user\",0,\"name\"]"
                    + (next(2) == 0 ? ",\"extensions\":{\"code\":\(pick(["\"UNAUTHENTICATED\"", "\"BAD_USER_INPUT\"", "401"]))}" : "") + "}"
            }))
            members += maybe("\"data\":null")
        case "express":
            members.append("\"errors\":" + Self.jsonList((0..<(next(3))).map { _ in
                "{\"type\":\"field\",\"value\":\"x\",\"msg\":\(words()),\"path\":\(field()),\"location\":\(pick(["\"body\"", "\"query\"", "\"params\"", "\"cookies\""]))}"
            }))
        case "drf-detail":
            members.append("\"detail\":" + words())
            members += maybe("\"code\":" + pick(["\"not_authenticated\"", "\"token_not_valid\"", "401"]))
        case "drf-map":
            return (shape, Array(fieldMap(depth: 0, nonField: true).utf8), false)
        case "message":
            members.append("\"message\":" + words())
            members += maybe("\"code\":" + someCode())
            members += maybe("\"trace_id\":\"abc\"", 3)
        case "msg":
            members.append("\"msg\":" + words())
            members += maybe("\"code\":" + someCode(), 3)
        case "error":
            members.append("\"error\":" + pick(["\"Something went wrong\"", "\"not_found\"", "\"\"", "\"出错了\""]))
            members += maybe("\"code\":" + someCode(), 3)
        default:
            return (shape, envelope(), false)
        }
        // Now and then a member twice, in another order, or spaced out.
        if !members.isEmpty && next(12) == 0 { members.append(pick(members)) }
        if next(8) == 0 { members.reverse() }
        let ws = pick(["", "", " ", "\n  "])
        var body = "{" + ws + members.joined(separator: "," + ws) + ws + "}"
        // A name the shapes read, spelled with an escape: still the same name.
        if next(5) == 0 {
            let name = pick(["message", "code", "detail", "errors", "error", "msg", "field", "loc", "non_field_errors", "pointer", "status",
                             "error_description", "statusCode", "defaultMessage", "source"])
            let escaped = "\"" + String(name.dropLast()) + "\\u00" + String(name.utf8.last!, radix: 16) + "\":"
            if let r = body.firstRange(of: "\"" + name + "\":") { body.replaceSubrange(r, with: escaped) }
        }
        // Whitespace deep inside too (in strings it only changes their text): the nested walks must skip it.
        if next(4) == 0 {
            let comma = pick([" ,\t", ",\n   "])
            var spaced = ""
            for c in body {
                switch c {
                case ",": spaced += comma
                case ":": spaced += " : "
                case "[": spaced += "[ "
                case "{": spaced += "{\r\n"
                default: spaced.append(c)
                }
            }
            body = spaced
        }
        if next(16) == 0 { body = "\u{FEFF}" + body }
        return (shape, Array(body.utf8), problemType)
    }

    /// A 2xx body for the status rule: any JSON text, nothing, or something that is not JSON.
    mutating func statusRuleBody() -> [UInt8] {
        Array((next(3) == 0 ? "" : pick(["", "[]", "[1,{\"a\":2}]", "\"text\"", " 42 ", "true", "null", "{\"id\":1,\"name\":\"x\"}", "\u{FEFF}{\"a\":1}",
                    "<html>oops</html>", "{\"a\":", "\u{FEFF}", "  ", "12345678901234567890"])).utf8)
    }
}
