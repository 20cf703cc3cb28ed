/// A dialect prepared once per configuration for scanning: its name tables and which slot holds each
/// role's member. A class, so a call holds it with one reference however many parts it has.
final class CompiledDialect: Sendable {
    /// The dialect itself.
    let dialect: Dialect
    /// The names looked for in the envelope object.
    let scope: NameTable
    /// Pattern dialects: the top-level names (the failure member, then the suffix's slot).
    let outer: NameTable?
    /// Slot of each code path's head.
    let codes: [Int]
    /// Slot of the success rule's member.
    let rule: Int?
    /// Slot of each message path's head.
    let messages: [Int]
    /// Slot of the payload path's head.
    let payload: Int?
    /// Slot of each extra's head.
    let extras: [Int]
    /// Slot of the auth flag's head.
    let authFlag: Int?
    /// Slots of the members a rest-of-object answer leaves out (`Dialect.roleHeads`).
    let cuts: [Int]

    /// The default dialect's, shared by every configuration that keeps it.
    static let peel = CompiledDialect(.peel)

    init(_ d: Dialect) {
        dialect = d
        let names = d.scopeNames
        let slot = { (name: String) in names.firstIndex(of: name) }
        scope = NameTable(names)
        codes = d.codes.map { slot($0.head)! }
        rule = d.success.member.flatMap(slot)
        messages = d.messages.map { slot($0.head)! }
        extras = d.extras.map { slot($0.head)! }
        authFlag = d.authFlag.map { slot($0.head)! }
        cuts = d.roleHeads.map { slot($0)! }.reduce(into: []) { if !$0.contains($1) { $0.append($1) } }
        if case .member(let p) = d.payload { payload = slot(p.head) } else { payload = nil }
        if case .pattern(let suffix, let failure) = d.payload {
            outer = NameTable(failure.map { [$0] } ?? [], suffix: suffix)
        } else {
            outer = nil
        }
    }
}

/// A member copied byte-exact into a problem's `upstream` object.
public struct UpstreamMember: Hashable, Sendable {
    /// The dialect's path for it (`sub_code`, `error.details`).
    public var name: String
    /// The member's raw JSON value.
    public var raw: [UInt8]

    /// Creates a member.
    public init(name: String, raw: [UInt8]) {
        self.name = name
        self.raw = raw
    }
}

/// What a success carries to the client.
enum Payload: Equatable {
    /// Nothing: 204.
    case none
    /// These bytes of the body, verbatim.
    case range(Range<Int>)
    /// The rest of an object, each member's bytes verbatim.
    case built([UInt8])
}

/// What an envelope says under a dialect.
struct Envelope {
    /// What the predicate decided.
    enum Judgement: Equatable {
        case success(Payload)
        case failure
        /// JSend `error`: the server failed, not the request.
        case error
    }

    /// The code, as the upstream wrote it.
    var code: EnvelopeCode?
    /// The first present, non-empty message.
    var message: String?
    /// The dialect's extras that were present.
    var extras: [UpstreamMember]
    /// Success or failure.
    var judgement: Judgement
    /// The envelope object's bounds in the body (an Alipay `*_response` object's, for a pattern).
    var object: Range<Int>
    /// Whether the dialect's auth flag is `true` (ABP's `unAuthorizedRequest`).
    var authFlagged = false

    /// An envelope, or why the body is not one (nil: the scan refused it, and the slow walk says why).
    enum Reading {
        case envelope(Envelope)
        case malformed(String?)
    }

    /// Reads a whole body under the config's dialect.
    static func read(_ body: UnsafeBufferPointer<UInt8>, config: EnvelopeConfig) -> Reading {
        let compiled = config.compiled
        var members = EnvelopeMembers()
        let maxDepth = config.maxDepth
        let scanned = (compiled.outer ?? compiled.scope).with { names in
            ScanCore.run(body, maxDepth: maxDepth, names: names, members: &members)
        }
        guard scanned, let base = body.baseAddress else { return .malformed(nil) }
        var object = topObject(base, body.count)
        if let outer = compiled.outer, case .pattern(let suffix, let failure) = compiled.dialect.payload {
            // The failure member first: `error_response` also ends with `_response`.
            guard let span = (failure == nil ? nil : members[0]) ?? members[outer.count] else {
                return .malformed("no member named *\(suffix)" + (failure.map { " or \($0)" } ?? ""))
            }
            guard base[span.value.lowerBound] == UInt8(ascii: "{") else {
                return .malformed("\(memberName(base, span)) is not an object")
            }
            object = span.value
            guard let inner = compiled.scope.with({ ValidJSON.members(base, object, $0) }) else {
                let slot = compiled.scope.with { ValidJSON.duplicate(base, object, $0) }
                let name = slot.map { compiled.dialect.scopeNames[$0] } ?? "?"
                return .malformed("duplicate member \"\(memberName(base, span)).\(name)\"")
            }
            members = inner
        }
        // The reader borrows the members where they lie: copying them per slot read costs more
        // than the whole judgement.
        return withUnsafePointer(to: &members) { members -> Reading in
            do throws(EnvelopeFault) {
                return .envelope(try EnvelopeReader(base: base, object: object, members: members, compiled: compiled).read())
            } catch {
                return .malformed(error.reason)
            }
        }
    }

    /// The top-level object's bounds in a body the scan accepted with names (so it is an object).
    static func topObject(_ base: UnsafePointer<UInt8>, _ n: Int) -> Range<Int> {
        var start = n >= 3 && base[0] == 0xEF && base[1] == 0xBB && base[2] == 0xBF ? 3 : 0
        start = ScanCore.skipWhitespace(base, n, start)
        var end = n
        while end > start, base[end &- 1] <= 0x20 { end &-= 1 }
        return start..<end
    }

    /// A member's name as written (escapes kept), for reasons.
    static func memberName(_ base: UnsafePointer<UInt8>, _ span: MemberSpan) -> String {
        let end = ValidJSON.stringEnd(base, span.keyStart &+ 1) &- 1
        return String(decoding: UnsafeBufferPointer(start: base + span.keyStart + 1, count: end - span.keyStart - 1), as: UTF8.self)
    }

    /// The code in a validated raw value: a JSON integer, or a string holding exactly one.
    static func integer(_ base: UnsafePointer<UInt8>, _ range: Range<Int>) -> Int64? {
        guard base[range.lowerBound] == UInt8(ascii: "\"") else {
            return integer(UnsafeBufferPointer(start: base + range.lowerBound, count: range.count))
        }
        return EnvelopeCode.string(string(base, range)).integerValue
    }

    /// Parses `-?(0|[1-9][0-9]*)` into an Int64; nil for fractions, exponents, signs, spaces or overflow.
    static func integer(_ text: UnsafeBufferPointer<UInt8>) -> Int64? {
        var i = 0
        let negative = i < text.count && text[i] == UInt8(ascii: "-")
        if negative { i += 1 }
        guard i < text.count else { return nil }
        if text[i] == UInt8(ascii: "0") {
            return i + 1 == text.count ? 0 : nil
        }
        var magnitude: UInt64 = 0
        while i < text.count {
            let digit = text[i] &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            let (times10, overflowA) = magnitude.multipliedReportingOverflow(by: 10)
            let (sum, overflowB) = times10.addingReportingOverflow(UInt64(digit))
            guard !overflowA, !overflowB else { return nil }
            magnitude = sum
            i += 1
        }
        if negative {
            guard magnitude <= UInt64(Int64.max) + 1 else { return nil }
            return magnitude == UInt64(Int64.max) + 1 ? Int64.min : -Int64(magnitude)
        }
        guard magnitude <= UInt64(Int64.max) else { return nil }
        return Int64(magnitude)
    }

    /// The text of a validated raw string value (quotes included in `range`).
    static func string(_ base: UnsafePointer<UInt8>, _ range: Range<Int>) -> String {
        let start = range.lowerBound + 1
        let end = range.upperBound - 1
        guard start < end else { return "" }
        return String(unsafeUninitializedCapacity: end - start) { out in
            StringDecoder.decode(base, start, end, into: out.baseAddress!)
        }
    }
}

/// Why an object that is valid JSON is still not an envelope of the dialect.
struct EnvelopeFault: Error {
    /// Peel's words (`code missing`, `error.message is not a string`).
    var reason: String
}

/// Applies one dialect to one object the scan accepted: code, message, extras, predicate, payload.
struct EnvelopeReader {
    let base: UnsafePointer<UInt8>
    /// The envelope object's bounds.
    let object: Range<Int>
    /// Its members the dialect names.
    let members: UnsafePointer<EnvelopeMembers>
    let compiled: CompiledDialect

    var dialect: Dialect { compiled.dialect }

    func read() throws(EnvelopeFault) -> Envelope {
        let code = try readCode()
        let message = try readMessage()
        var extras: [UpstreamMember] = []
        for (k, path) in dialect.extras.enumerated() {
            // `null` is absence here too: ABP's `"targetUrl":null` says nothing.
            if let r = try value(path, slot: compiled.extras[k]), base[r.lowerBound] != UInt8(ascii: "n") {
                extras.append(UpstreamMember(name: path.description, raw: Array(UnsafeBufferPointer(start: base + r.lowerBound, count: r.count))))
            }
        }
        let judgement: Envelope.Judgement
        switch try succeeded(code) {
        case true?: judgement = .success(try payload())
        case false?: judgement = .failure
        case nil: judgement = .error
        }
        var flagged = false
        if let path = dialect.authFlag, let r = try value(path, slot: compiled.authFlag) {
            // Only `true` says so: ABP writes `false` on every other answer.
            flagged = base[r.lowerBound] == UInt8(ascii: "t")
        }
        return Envelope(code: code, message: message, extras: extras, judgement: judgement, object: object, authFlagged: flagged)
    }

    /// The raw value at `path`, whose head is in `slot`; nil when absent. A step into a value of
    /// the wrong kind is a fault when `strict` (the payload's path: its bytes would be lost), else
    /// the member is absent (`error.code` when `error` is `false` or a string); so is an index past
    /// an array's end.
    func value(_ path: MemberPath, slot: Int?, strict: Bool = false) throws(EnvelopeFault) -> Range<Int>? {
        guard let slot, let span = members.pointee[slot] else { return nil }
        var r = span.value
        for (k, step) in path.steps.enumerated().dropFirst() {
            // `"error": null` holds no `error.code`: null is absence (Strapi sends `"data": null`).
            if base[r.lowerBound] == UInt8(ascii: "n") { return nil }
            if let index = path.index(k) {
                guard base[r.lowerBound] == UInt8(ascii: "[") else {
                    if !strict { return nil }
                    throw EnvelopeFault(reason: "\(path.steps[..<k].joined(separator: ".")) is not an array")
                }
                guard let element = ValidJSON.element(base, r, index) else { return nil }
                r = element
                continue
            }
            guard base[r.lowerBound] == UInt8(ascii: "{") else {
                if !strict { return nil }
                throw EnvelopeFault(reason: "\(path.steps[..<k].joined(separator: ".")) is not an object")
            }
            switch ValidJSON.member(base, r, step) {
            case .absent: return nil
            case .duplicate: throw EnvelopeFault(reason: "duplicate member \"\(path.steps[...k].joined(separator: "."))\"")
            case .found(let v): r = v
            }
        }
        return r
    }

    /// The first present code among the dialect's code paths.
    func readCode() throws(EnvelopeFault) -> EnvelopeCode? {
        for (k, path) in dialect.codes.enumerated() {
            guard let r = try value(path, slot: compiled.codes[k]) else { continue }
            let first = base[r.lowerBound]
            // Jackson and most serialisers write an unset code as null: it is absent.
            if first == UInt8(ascii: "n") { continue }
            if first == UInt8(ascii: "\"") { return .string(Envelope.string(base, r)) }
            if first == UInt8(ascii: "-") || first &- UInt8(ascii: "0") < 10,
               let n = Envelope.integer(UnsafeBufferPointer(start: base + r.lowerBound, count: r.count)) {
                return .integer(n)
            }
            throw EnvelopeFault(reason: "\(path) is not an integer or a string")
        }
        return nil
    }

    func readMessage() throws(EnvelopeFault) -> String? {
        for (k, path) in dialect.messages.enumerated() {
            guard let r = try value(path, slot: compiled.messages[k]) else { continue }
            let first = base[r.lowerBound]
            if first == UInt8(ascii: "n") { continue }
            guard first == UInt8(ascii: "\"") else { throw EnvelopeFault(reason: "\(path) is not a string") }
            // An empty message says nothing: the next path, or Peel's own text.
            let text = Envelope.string(base, r)
            if !text.isEmpty { return text }
        }
        return nil
    }

    /// true: success; false: failure; nil: JSend's `error` (the server failed).
    func succeeded(_ code: EnvelopeCode?) throws(EnvelopeFault) -> Bool? {
        switch dialect.success {
        case .code:
            guard let code else { throw EnvelopeFault(reason: dialect.codes.map(\.description).joined(separator: " or ") + " missing") }
            return dialect.successCodes.contains(code)
        case .codeOrAbsent:
            guard let code else { return true }
            return dialect.successCodes.contains(code)
        case .httpStatus:
            // The judge reads an envelope under this rule only from a non-2xx, which fails whatever it says.
            return true
        case .flag(let name):
            guard let r = try value(name, slot: compiled.rule) else {
                throw EnvelopeFault(reason: "\(name) missing")
            }
            switch base[r.lowerBound] {
            case UInt8(ascii: "t"): return true
            case UInt8(ascii: "f"): return false
            default: throw EnvelopeFault(reason: "\(name) is not a boolean")
            }
        case .status(let name):
            guard let r = try value(name, slot: compiled.rule) else {
                throw EnvelopeFault(reason: "\(name) missing")
            }
            guard base[r.lowerBound] == UInt8(ascii: "\"") else { throw EnvelopeFault(reason: "\(name) is not a string") }
            switch Envelope.string(base, r) {
            case "success": return true
            case "fail": return false
            case "error": return nil
            default: throw EnvelopeFault(reason: "\(name) is not success, fail or error")
            }
        case .errorMember(let name):
            guard let r = try value(name, slot: compiled.rule) else { return true }
            return isNothing(r)
        }
    }

    /// Whether a raw value says nothing: `null`, `false`, `""`, `{}` or `[]` (with any inner whitespace).
    func isNothing(_ r: Range<Int>) -> Bool {
        switch base[r.lowerBound] {
        case UInt8(ascii: "n"), UInt8(ascii: "f"): return true
        case UInt8(ascii: "\""): return r.count == 2
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            return ScanCore.skipWhitespace(base, r.upperBound, r.lowerBound &+ 1) == r.upperBound &- 1
        default: return false
        }
    }

    /// What a success sends: the payload member, or the rest of the object (SPEC: no byte dropped
    /// without a rule), or nothing when the envelope holds only its own members.
    func payload() throws(EnvelopeFault) -> Payload {
        guard case .member(let path) = dialect.payload else { return rest(keeping: nil) }
        if let r = try value(path, slot: compiled.payload, strict: true) {
            if dialect.siblings == .keep && others() > 0 { return rest(keeping: compiled.payload) }
            return .range(r)
        }
        // A path's head without its last step (`result` without `result.data`) is not the
        // payload, so it stays in the rest like any member the dialect does not name.
        if let slot = compiled.payload, members.pointee[slot] != nil { return rest(keeping: slot) }
        return others() > 0 ? rest(keeping: nil) : .none
    }

    /// How many members a rest-of-object answer would hold besides the payload member.
    func others() -> Int {
        var taken = 0
        for k in compiled.cuts where members.pointee[k] != nil { taken &+= 1 }
        if let p = compiled.payload, !compiled.cuts.contains(p), members.pointee[p] != nil { taken &+= 1 }
        return members.pointee.count &- taken
    }

    /// The object minus every envelope member but `kept`, each remaining member's bytes verbatim
    /// and in the upstream's order; the object's own bytes when nothing is taken out.
    func rest(keeping kept: Int?) -> Payload {
        var cuts: [Range<Int>] = []
        for k in compiled.cuts where k != kept {
            if let s = members.pointee[k] { cuts.append(s.keyStart..<s.value.upperBound) }
        }
        if cuts.isEmpty { return members.pointee.count == 0 ? .none : .range(object) }
        cuts.sort { $0.lowerBound < $1.lowerBound }
        var out: [UInt8] = []
        out.reserveCapacity(object.count)
        out.append(UInt8(ascii: "{"))
        var cursor = object.lowerBound &+ 1
        for cut in cuts {
            append(cursor..<cut.lowerBound, to: &out)
            cursor = cut.upperBound
        }
        append(cursor..<(object.upperBound &- 1), to: &out)
        if out.count == 1 { return .none }
        out.append(UInt8(ascii: "}"))
        return .built(out)
    }

    /// Appends the members between two envelope members: the run without the separators that
    /// joined it to them, after a comma when something came before.
    private func append(_ run: Range<Int>, to out: inout [UInt8]) {
        var a = run.lowerBound
        var b = run.upperBound
        a = ScanCore.skipWhitespace(base, b, a)
        if a < b && base[a] == UInt8(ascii: ",") { a = ScanCore.skipWhitespace(base, b, a &+ 1) }
        while b > a && base[b &- 1] <= 0x20 { b &-= 1 }
        if b > a && base[b &- 1] == UInt8(ascii: ",") {
            b &-= 1
            while b > a && base[b &- 1] <= 0x20 { b &-= 1 }
        }
        guard a < b else { return }
        if out.count > 1 { out.append(UInt8(ascii: ",")) }
        out.append(contentsOf: UnsafeBufferPointer(start: base + a, count: b &- a))
    }
}
