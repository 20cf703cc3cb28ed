// A small tree-building reference for the one-pass dialect judge, and a generator of envelopes
// shaped like the presets' backends. Shared by DialectReferenceTests and the fuzzer (Fuzz/ScannerFuzz,
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
            var elements: [RefNode] = []
            if b[i] == UInt8(ascii: "]") {
                i += 1
                return .array([], start..<i)
            }
            while true {
                space()
                guard let element = value() else { return nil }
                elements.append(element)
                space()
                if b[i] == UInt8(ascii: ",") {
                    i += 1
                    continue
                }
                i += 1
                return .array(elements, start..<i)
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

/// The reference judge: the rules, read off a tree.
struct DialectReference {
    let bytes: [UInt8]
    let dialect: Dialect
    let config: EnvelopeConfig

    func raw(_ n: RefNode) -> String { String(decoding: bytes[n.range], as: UTF8.self) }

    struct Malformed: Error {}

    /// The code matching, written out apart from `CodeSet.contains`: an integer matches an
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

        /// The auth rule: an auth code, or the auth flag on anything but a 403.
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
            case .array(let elements, _)?: verdict = elements.isEmpty
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

    func expectation(status: Int) -> RefExpectation {
        let valid = JSONScanner.validate(bytes, maxDepth: config.maxDepth)
        let root = valid ? RefTree.parse(bytes) : nil
        var reading: Read?
        if let root { reading = try? read(root) }
        guard (200...299).contains(status) else {
            guard let r = reading else {
                return .verdict(.problem(Problem(kind: .upstreamError, status: (400...499).contains(status) ? status : 502,
                                                 upstreamStatus: status)))
            }
            if r.isAuth(dialect, status: status) {
                return .verdict(.problem(Problem(kind: .authExpired, code: r.code, detail: r.message, upstreamStatus: status, upstream: r.extras)))
            }
            return .verdict(.problem(Problem(kind: .upstreamError, status: (400...499).contains(status) ? status : 502,
                                             code: r.code ?? -104, detail: r.message, upstreamStatus: status, upstream: r.extras)))
        }
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
            if r.isAuth(dialect, status: status) {
                return .verdict(.problem(Problem(kind: .authExpired, code: r.code, detail: r.message, upstreamStatus: status, upstream: r.extras)))
            }
            let st = r.code.flatMap { dialect.codeStatus.status(for: $0) } ?? config.businessStatus
            return .verdict(.problem(Problem(kind: .businessError, status: st, code: r.code, detail: r.message, upstreamStatus: status,
                                             upstream: r.extras)))
        case nil:
            if r.isAuth(dialect, status: status) {
                return .verdict(.problem(Problem(kind: .authExpired, code: r.code, detail: r.message, upstreamStatus: status, upstream: r.extras)))
            }
            return .verdict(.problem(Problem(kind: .upstreamError, status: 502, code: r.code ?? -104, detail: r.message,
                                             upstreamStatus: status, upstream: r.extras)))
        }
    }

    /// What the one-pass judge did, in the reference's terms; nil when its rest-of-object answer is
    /// not one JSON object.
    func actual(status: Int) -> RefExpectation? {
        let v = judge(UpstreamAnswer(status: status, contentType: "application/json", path: "/", isHead: false), body: bytes, config: config)
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
        return expected == got ? nil : "\(dialect.preset) status \(status): judge \(got), reference \(expected)"
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
        if case .member(let p) = d.payload, next(3) > 0 { members.append("\"\(p.head)\":" + value(depth: 1)) }
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
