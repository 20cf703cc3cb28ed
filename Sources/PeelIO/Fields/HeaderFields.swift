import Glibc

/// Header names compared without ASCII case against raw bytes, so the hot path builds no String per
/// field (RFC 9110 §5.1: field names are case-insensitive).
public struct HeaderNameSet: Sendable {
    private let names: [[UInt8]]
    // Bit n is set when some name is n bytes long: most fields are rejected by length alone.
    private let lengths: UInt64

    /// Creates the set; `index(of:)` answers positions in this order.
    public init<S: Sequence>(_ names: S) where S.Element == String {
        let lowered = names.map { Array($0.lowercased().utf8) }
        var lengths: UInt64 = 0
        for n in lowered { lengths |= n.count < 64 ? 1 << UInt64(n.count) : 1 << 63 }
        self.names = lowered
        self.lengths = lengths
    }

    /// Whether `name` is in the set.
    public func contains(_ name: String) -> Bool {
        var name = name
        return name.withUTF8 { index(of: UnsafeRawBufferPointer($0)) } != nil
    }

    func index(of name: UnsafeRawBufferPointer) -> Int? {
        let n = name.count
        if lengths & (n < 64 ? 1 << UInt64(n) : 1 << 63) == 0 { return nil }
        for i in names.indices where names[i].count == n {
            if names[i].withUnsafeBufferPointer({ Self.equalsLowercased(name, $0) }) { return i }
        }
        return nil
    }

    static func equalsLowercased(_ a: UnsafeRawBufferPointer, _ lower: UnsafeBufferPointer<UInt8>) -> Bool {
        guard a.count == lower.count else { return false }
        for i in 0..<a.count {
            var c = a[i]
            if c &- 0x41 < 26 { c |= 0x20 }
            if c != lower[i] { return false }
        }
        return true
    }
}

/// One header field borrowed from a parsed message; valid only inside the closure that received it.
public struct HeaderField {
    // Request fields are slices of the request buffer (not NUL-terminated); copy before handing to C.
    let name: UnsafeRawBufferPointer
    let value: UnsafeRawBufferPointer
    /// The name's token, identified when the field was read (`.other` for names Peel does not act on).
    public let token: FieldToken

    /// The name as sent.
    public var nameString: String { String(decoding: name, as: UTF8.self) }
    /// The value as sent (without surrounding whitespace).
    public var valueString: String { String(decoding: value, as: UTF8.self) }
    /// The name's position in `set`, or nil when it is not there.
    public func index(in set: HeaderNameSet) -> Int? { set.index(of: name) }
    /// Whether the name is in `set`.
    public func isIn(_ set: HeaderNameSet) -> Bool { set.index(of: name) != nil }
    /// Whether the token is in `set`.
    @inline(__always)
    public func isIn(_ set: FieldSet) -> Bool { set.contains(token) }
    /// Whether the value, without ASCII case, equals `lowercased`.
    public func valueEquals(_ lowercased: StaticString) -> Bool {
        Self.equalsLowercased(value, lowercased)
    }


    static func equalsLowercased(_ a: UnsafeRawBufferPointer, _ lowercased: StaticString) -> Bool {
        lowercased.withUTF8Buffer { HeaderNameSet.equalsLowercased(a, $0) }
    }
}

/// tchar (RFC 9110 §5.6.2): the bytes a field name may hold. The one token-character table
/// Peel's HTTP code uses (the request parser's too), as two words of bits: `!#$%&'*+-.^_`|~`,
/// digits and letters. (The demo's parser keeps its own on purpose: it is the fuzzer's second
/// opinion.)
@inline(__always)
public func isTokenByte(_ b: UInt8) -> Bool {
    let low: UInt64 = 0x03FF_6CFA_0000_0000, high: UInt64 = 0x57FF_FFFF_C7FF_FFFE
    return b < 64 ? (low >> UInt64(b)) & 1 != 0 : b < 128 && (high >> UInt64(b - 64)) & 1 != 0
}

/// The final response's header fields as received from the upstream, kept as one byte block
/// (`name NUL value NUL …`) instead of a String pair per field.
public struct ResponseHeaders: Sendable, Hashable {
    private var storage: [UInt8] = []
    /// Number of fields.
    public private(set) var count = 0
    /// The tokens of the fields present: `has` without a walk, and walks skipped when nothing they
    /// look for is there.
    public private(set) var present = FieldSet([])

    /// Creates an empty block.
    public init() {}

    /// Creates a block from pairs (tests, synthetic answers, stored ones decoded). A field whose
    /// name is not a token or whose value holds CR, LF or NUL is left out, as the collector refuses
    /// them from the wire: every block holds only fields the reply writer may copy unchecked.
    public init(_ pairs: [(String, String)]) {
        let collector = HeaderCollector()
        for (n, v) in pairs {
            guard !n.isEmpty, n.utf8.allSatisfy(isTokenByte), !v.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 })
            else { continue }
            var n = n
            var v = v
            n.withUTF8 { nb in
                v.withUTF8 { vb in
                    let name = UnsafeRawBufferPointer(nb)
                    collector.append(name, UnsafeRawBufferPointer(vb), token: FieldToken.identify(name))
                }
            }
        }
        self = collector.take()
    }

    fileprivate init(storage: [UInt8], count: Int, present: FieldSet) {
        self.storage = storage
        self.count = count
        self.present = present
    }

    /// These fields without any the `Connection` field names: connection options are hop-by-hop and
    /// a proxy removes them before forwarding (RFC 9110 §7.6.1). Unchanged (and nothing allocated)
    /// when it names none but `keep-alive` and `close`, which nearly every upstream sends: `close`
    /// names no field, and `Keep-Alive` is hop-by-hop and dropped by the gateway anyway.
    func droppingConnectionOptions() -> ResponseHeaders {
        var named: Set<[UInt8]> = []
        guard present.contains(.connection) else { return self }
        forEachField { f in
            guard f.token == .connection else { return }
            HeaderTokens.forEach(f.value) { option in
                if HeaderField.equalsLowercased(option, "keep-alive") || HeaderField.equalsLowercased(option, "close") { return }
                var o = Array(option)
                for i in o.indices where o[i] &- 0x41 < 26 { o[i] |= 0x20 }
                named.insert(o)
            }
        }
        if named.isEmpty { return self }
        var kept: [UInt8] = []
        var keptCount = 0
        var keptPresent = FieldSet([])
        forEachField { f in
            var lower = Array(f.name)
            for i in lower.indices where lower[i] &- 0x41 < 26 { lower[i] |= 0x20 }
            if named.contains(lower) { return }
            kept.append(f.token.rawValue)
            keptPresent.insert(f.token)
            kept += f.name
            kept.append(0)
            kept += f.value
            kept.append(0)
            keptCount += 1
        }
        return ResponseHeaders(storage: kept, count: keptCount, present: keptPresent)
    }

    /// The first value of `lowercasedName`, if present.
    public func first(_ lowercasedName: StaticString) -> String? {
        var found: String? = nil
        forEachField { f in
            if found == nil, HeaderField.equalsLowercased(f.name, lowercasedName) { found = f.valueString }
        }
        return found
    }

    /// The first value of the field `token` names, if present.
    public func first(_ token: FieldToken) -> String? {
        guard present.contains(token) else { return nil }
        return storage.withUnsafeBytes { Self.firstValue($0, token) }
    }

    /// Whether a field `token` names is present.
    @inline(__always)
    public func has(_ token: FieldToken) -> Bool { present.contains(token) }

    /// The fields as String pairs, in order.
    public var pairs: [(String, String)] {
        var out: [(String, String)] = []
        out.reserveCapacity(count)
        forEachField { out.append(($0.nameString, $0.valueString)) }
        return out
    }

    /// Calls `body` with each field, in order.
    public func forEachField(_ body: (HeaderField) -> Void) {
        storage.withUnsafeBytes { Self.walk($0, body) }
    }

    /// The first value in `all` of the field `token` names: the walk stops there, and names are not
    /// read (the token byte says which field it is).
    static func firstValue(_ all: UnsafeRawBufferPointer, _ token: FieldToken) -> String? {
        guard let base = all.baseAddress else { return nil }
        var i = 0
        while i < all.count {
            let here = all[i] == token.rawValue
            let nameStart = i + 1
            let valueStart = nameStart + strlen(base.advanced(by: nameStart).assumingMemoryBound(to: CChar.self)) + 1
            let valueCount = strlen(base.advanced(by: valueStart).assumingMemoryBound(to: CChar.self))
            if here {
                return String(decoding: UnsafeRawBufferPointer(start: base + valueStart, count: valueCount), as: UTF8.self)
            }
            i = valueStart + valueCount + 1
        }
        return nil
    }

    /// Calls `body` with each field in `all` (`token name NUL value NUL`, the token one byte), in order.
    static func walk(_ all: UnsafeRawBufferPointer, _ body: (HeaderField) -> Void) {
        guard let base = all.baseAddress else { return }
        var i = 0
        while i < all.count {
            let token = FieldToken(rawValue: all[i]) ?? .other
            let nameStart = i + 1
            let nameCount = strlen(base.advanced(by: nameStart).assumingMemoryBound(to: CChar.self))
            let valueStart = nameStart + nameCount + 1
            let valueCount = strlen(base.advanced(by: valueStart).assumingMemoryBound(to: CChar.self))
            body(HeaderField(name: UnsafeRawBufferPointer(start: base + nameStart, count: nameCount),
                             value: UnsafeRawBufferPointer(start: base + valueStart, count: valueCount), token: token))
            i = valueStart + valueCount + 1
        }
    }
}

/// A response's head while curl delivers its body, read in place: valid only during the call it is
/// handed to (`copy()` keeps it), so deciding about a body costs no copy of the head.
public struct ResponseHeadView {
    let collector: HeaderCollector

    /// The fields as a value that outlives the call.
    public func copy() -> ResponseHeaders { collector.snapshot() }
}

/// Collects one response's header lines as curl's header callback hands them over (RFC 9112 §2.1,
/// §5), and checks them before anything can be relayed; one per pooled handle, its buffer reused
/// from transfer to transfer.
final class HeaderCollector {
    /// Largest upstream head, status lines of interim answers included: 64 KiB, like a client's.
    static let maxHeadBytes = 64 * 1024
    /// Most fields in an upstream head, interim answers included: 256, like a client's.
    static let maxFields = 256

    private var bytes = UnsafeMutableRawPointer.allocate(byteCount: 1024, alignment: 1)
    private var capacity = 1024
    private var used = 0
    private var fields = 0
    /// The tokens of the fields collected so far.
    private(set) var present = FieldSet([])
    private var complete = false
    private var headBytes = 0
    private var fieldsSeen = 0
    /// True after an interim (1xx) status line, until the next status line.
    private var awaitingFinal = false
    /// True once any status line arrived: the upstream answered (a failure after this is its answer
    /// breaking, not the upstream being unreachable).
    private(set) var statusSeen = false
    /// Why the head was refused, once `addLine` returned false.
    private(set) var violation: String?
    /// True once the final (non-interim) head is whole: its empty line arrived, the body has not.
    var finalHeadComplete: Bool { complete && !awaitingFinal && statusSeen }
    /// The final head's facts, read once when its empty line arrives; nil until then.
    private(set) var facts: ResponseFacts?
    /// The final status line's code.
    private var status = 0
    /// Where the first value of each field `ResponseFacts` reads starts in `bytes` (0: none yet;
    /// a value never starts at 0, a token byte and a name come first).
    private var factOffsets = (type: 0, length: 0, coding: 0, disposition: 0)
    /// Whether a `Connection` field names anything but `keep-alive` and `close` (which nearly every
    /// upstream sends, and which name no field Peel relays), noted as the field comes.
    private var connectionNamesAField = false
    /// The token of the field taken last (a folded line continues it).
    private var lastToken = FieldToken.other

    /// Notes whether a Connection value names anything but `keep-alive` and `close`.
    private func noteConnectionOptions(_ value: UnsafeRawBufferPointer) {
        guard !connectionNamesAField else { return }
        HeaderTokens.forEach(value) { option in
            if !HeaderField.equalsLowercased(option, "keep-alive") && !HeaderField.equalsLowercased(option, "close") {
                connectionNamesAField = true
            }
        }
    }

    deinit { bytes.deallocate() }

    /// Forgets everything, for a new transfer.
    func reset() {
        startResponse()
        headBytes = 0
        fieldsSeen = 0
        statusSeen = false
        awaitingFinal = false
        violation = nil
    }

    /// Forgets the fields (a new response after a 1xx).
    private func startResponse() {
        used = 0
        fields = 0
        present = FieldSet([])
        complete = false
        facts = nil
        factOffsets = (0, 0, 0, 0)
        connectionNamesAField = false
    }

    /// The facts of the head collected so far, from the offsets noted as its fields came; from
    /// the head as relayed when its `Connection` names one of those fields (RFC 9110 §7.6.1: they
    /// are dropped, so nothing may be decided by them).
    private func readFacts() -> ResponseFacts {
        if connectionNamesAField {
            let relayed = snapshot()
            if relayed.count != fields { return ResponseFacts(status: status, headers: relayed) }
        }
        func value(_ at: Int) -> String? {
            guard at > 0 else { return nil }
            return String(cString: (bytes + at).assumingMemoryBound(to: CChar.self))
        }
        var length: Int? = nil
        if factOffsets.length > 0 {
            let start = (bytes + factOffsets.length).assumingMemoryBound(to: UInt8.self)
            length = ResponseFacts.length(UnsafeBufferPointer(start: start, count: strlen(UnsafeRawPointer(start).assumingMemoryBound(to: CChar.self))))
        }
        return ResponseFacts(status: status, contentType: value(factOffsets.type), length: length,
                             contentEncoding: value(factOffsets.coding), contentDisposition: value(factOffsets.disposition))
    }

    /// The fields so far, without those the upstream named in `Connection`, kept for `take()`
    /// (a streamed answer's head is relayed before the transfer ends).
    func snapshot() -> ResponseHeaders {
        let all = ResponseHeaders(storage: Array(UnsafeRawBufferPointer(start: bytes, count: used)), count: fields, present: present)
        // Whether Connection names a field was noted as the fields came: no second walk for the
        // `keep-alive` nearly every upstream sends.
        return connectionNamesAField ? all.droppingConnectionOptions() : all
    }

    /// Calls `body` with each field collected so far, in place.
    func forEachField(_ body: (HeaderField) -> Void) {
        ResponseHeaders.walk(UnsafeRawBufferPointer(start: bytes, count: used), body)
    }


    /// The fields collected so far, as a value the response can carry, without those the upstream
    /// named in `Connection`.
    func take() -> ResponseHeaders {
        let all = snapshot()
        reset()
        return all
    }

    /// Takes one raw line; false (and `violation` set) when the head must not be relayed, which makes
    /// the header callback abort the transfer and curl close the connection.
    func addLine(_ line: UnsafeRawBufferPointer) -> Bool {
        guard let base = line.baseAddress else { return true }
        // Trailer fields arrive after the final head; they are not the response's header fields and are dropped.
        if complete && !awaitingFinal { return true }
        headBytes += line.count
        if headBytes > Self.maxHeadBytes { return refuse("the upstream's head is over 64 KiB") }
        var end = line.count
        // One line ending: LF, or CR LF (RFC 9112 §2.2); any other CR is inside the line.
        if end > 0 && line[end - 1] == 0x0A { end -= 1 }
        if end > 0 && line[end - 1] == 0x0D { end -= 1 }
        if !statusSeen || complete {
            // The first line, or the one after an interim head, is a status line; curl has checked
            // that it starts with "HTTP/".
            return statusLine(base, end)
        }
        if end == 0 {
            complete = true
            if !awaitingFinal { facts = readFacts() }
            return true
        }
        if line[0] == 0x20 || line[0] == 0x09 {
            // obs-fold (RFC 9112 §5.2): a proxy replaces it with SP.
            guard fields > 0 else { return refuse("the upstream's head starts with a folded line") }
            let value = Self.trimmed(base, 0, end)
            if let bad = Self.badValue(value) { return refuse(bad) }
            if lastToken == .connection { noteConnectionOptions(value) }
            used -= 1
            var space: UInt8 = 0x20
            withUnsafeBytes(of: &space) { put($0) }
            putTerminated(value)
            return true
        }
        guard let colonPointer = memchr(base, 0x3A, end) else { return refuse("the upstream sent a header line without a colon") }
        let colon = UnsafeRawPointer(colonPointer) - base
        var nameEnd = colon
        // Whitespace before the colon: a proxy removes it before forwarding (RFC 9112 §5.1).
        while nameEnd > 0 && (line[nameEnd - 1] == 0x20 || line[nameEnd - 1] == 0x09) { nameEnd -= 1 }
        let name = UnsafeRawBufferPointer(start: base, count: nameEnd)
        // Checked and identified in one pass: the one place an upstream field's name is read.
        var pack = NamePack()
        for k in 0..<nameEnd {
            let b = name[k]
            guard isTokenByte(b) else { return refuse("the upstream sent a field name that is not an RFC 9110 token") }
            pack.add(b, at: k)
        }
        guard nameEnd > 0 else { return refuse("the upstream sent a field name that is not an RFC 9110 token") }
        let value = Self.trimmed(base, colon + 1, end)
        if let bad = Self.badValue(value) { return refuse(bad) }
        fieldsSeen += 1
        if fieldsSeen > Self.maxFields { return refuse("the upstream's head has more than 256 fields") }
        append(name, value, token: FieldToken.identify(pack, length: nameEnd))
        return true
    }

    /// A status line (RFC 9112 §4): only 100, 102 and 103 may come before the final answer. Peel
    /// strips `Upgrade` from every request, so a 101 is never legitimate, and the bytes after it
    /// would be another protocol (or a forged answer) read as this one's body.
    private func statusLine(_ base: UnsafeRawPointer, _ end: Int) -> Bool {
        statusSeen = true
        startResponse()
        let line = UnsafeRawBufferPointer(start: base, count: end)
        guard end >= 5, memcmp(base, "HTTP/", 5) == 0 else { return refuse("the upstream sent no status line") }
        // "HTTP/1.1 200": the code is the three digits after the version and one space.
        guard end >= 12, line[8] == 0x20, line[9...11].allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), end == 12 || line[12] == 0x20 else {
            return refuse("the upstream sent a malformed status line")
        }
        let code = Int(line[9] - 0x30) * 100 + Int(line[10] - 0x30) * 10 + Int(line[11] - 0x30)
        switch code {
        case 100, 102, 103:
            awaitingFinal = true
            return true
        case 101:
            return refuse("the upstream switched protocols (101), which Peel never asks for")
        case 104...199:
            return refuse("the upstream sent an unknown interim status \(code)")
        case 200...599:
            awaitingFinal = false
            status = code
            return true
        default:
            return refuse("the upstream sent status \(code), outside 100-599 (RFC 9110 §15)")
        }
    }

    private func refuse(_ why: String) -> Bool {
        violation = why
        return false
    }

    /// Why `value` may not be relayed: CR, LF and NUL in a field value are invalid and dangerous, and
    /// a recipient must reject them or replace them with SP (RFC 9110 §5.5); an intermediary rejects.
    static func badValue(_ value: UnsafeRawBufferPointer) -> String? {
        guard let base = value.baseAddress else { return nil }
        // Eight bytes at a time: a word with no byte below 0x0E (the usual case: text) is passed
        // with one test; a word that has one is looked at byte by byte.
        var i = 0
        let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
        while i + 8 <= value.count {
            let w = base.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            if (w &- ones &* 0x0E) & ~w & highs != 0 { break }
            i += 8
        }
        while i < value.count {
            let b = value[i]
            if b <= 0x0D && (b == 0x0D || b == 0x0A || b == 0x00) {
                return "the upstream sent a field value with \(b == 0 ? "NUL" : b == 0x0D ? "CR" : "LF") in it"
            }
            i += 1
        }
        return nil
    }

    /// Adds one field.
    func append(_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer, token: FieldToken) {
        var t = token.rawValue
        withUnsafeBytes(of: &t) { put($0) }
        // An assignment, not a mutating call on the property: no dynamic exclusivity check per field.
        present = present.inserting(token)
        putTerminated(name)
        switch token {
        case .contentType where factOffsets.type == 0: factOffsets.type = used
        case .contentLength where factOffsets.length == 0: factOffsets.length = used
        case .contentEncoding where factOffsets.coding == 0: factOffsets.coding = used
        case .contentDisposition where factOffsets.disposition == 0: factOffsets.disposition = used
        case .connection: noteConnectionOptions(value)
        default: break
        }
        lastToken = token
        putTerminated(value)
        fields += 1
    }

    private func put(_ b: UnsafeRawBufferPointer) {
        if used + b.count + 1 > capacity {
            let grown = UnsafeMutableRawPointer.allocate(byteCount: max(used + b.count + 1, capacity * 2), alignment: 1)
            grown.copyMemory(from: bytes, byteCount: used)
            bytes.deallocate()
            bytes = grown
            capacity = max(used + b.count + 1, capacity * 2)
        }
        if let p = b.baseAddress { (bytes + used).copyMemory(from: p, byteCount: b.count) }
        used += b.count
    }

    /// Appends `b` and its NUL. Callers hand over checked bytes only: a name of token characters, a
    /// value `badValue` passed (no NUL, CR or LF), or a pair `ResponseHeaders.init` checked.
    private func putTerminated(_ b: UnsafeRawBufferPointer) {
        put(b)
        bytes.storeBytes(of: 0, toByteOffset: used, as: UInt8.self)
        used += 1
    }

    private static func trimmed(_ base: UnsafeRawPointer, _ from: Int, _ to: Int) -> UnsafeRawBufferPointer {
        var a = from
        var b = to
        while a < b && (base.load(fromByteOffset: a, as: UInt8.self) == 0x20 || base.load(fromByteOffset: a, as: UInt8.self) == 0x09) {
            a += 1
        }
        while b > a && (base.load(fromByteOffset: b - 1, as: UInt8.self) == 0x20 || base.load(fromByteOffset: b - 1, as: UInt8.self) == 0x09) {
            b -= 1
        }
        return UnsafeRawBufferPointer(start: base + a, count: b - a)
    }
}
