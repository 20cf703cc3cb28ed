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
    case rest(RestOfObject)
}

/// The rest of an envelope object once the envelope's own members are cut out: `{`, then `runs`
/// (ranges of the body, each one or more whole members with their separators, no comma or
/// whitespace at either end) joined by `,`, then `}`.
public struct RestOfObject: Sendable, Equatable {
    /// The body's ranges that are kept, in order.
    public let runs: [Range<Int>]

    /// Bytes of the answer: the runs, the braces and a comma between runs.
    public var count: Int {
        var n = 2 + runs.count - 1
        for r in runs { n += r.count }
        return n
    }

    /// The answer's bytes, copied from `body` (the buffer the runs were read from).
    public func bytes(in body: UnsafeBufferPointer<UInt8>) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(count)
        out.append(UInt8(ascii: "{"))
        for (i, r) in runs.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: body[r]))
        }
        out.append(UInt8(ascii: "}"))
        return out
    }
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
