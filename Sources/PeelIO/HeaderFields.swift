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

    /// The name as sent.
    public var nameString: String { String(decoding: name, as: UTF8.self) }
    /// The value as sent (without surrounding whitespace).
    public var valueString: String { String(decoding: value, as: UTF8.self) }
    /// The name's position in `set`, or nil when it is not there.
    public func index(in set: HeaderNameSet) -> Int? { set.index(of: name) }
    /// Whether the name is in `set`.
    public func isIn(_ set: HeaderNameSet) -> Bool { set.index(of: name) != nil }
    /// Whether the value, without ASCII case, equals `lowercased`.
    public func valueEquals(_ lowercased: StaticString) -> Bool {
        Self.equalsLowercased(value, lowercased)
    }


    static func equalsLowercased(_ a: UnsafeRawBufferPointer, _ lowercased: StaticString) -> Bool {
        lowercased.withUTF8Buffer { HeaderNameSet.equalsLowercased(a, $0) }
    }
}

/// The final response's header fields as received from the upstream, kept as one byte block
/// (`name NUL value NUL …`) instead of a String pair per field.
public struct ResponseHeaders: Sendable {
    private var storage: [UInt8] = []
    /// Number of fields.
    public private(set) var count = 0

    /// Creates an empty block.
    public init() {}

    /// Creates a block from pairs (tests and synthetic answers).
    public init(_ pairs: [(String, String)]) {
        let collector = HeaderCollector()
        for (n, v) in pairs {
            var n = n
            var v = v
            n.withUTF8 { nb in v.withUTF8 { vb in collector.append(UnsafeRawBufferPointer(nb), UnsafeRawBufferPointer(vb)) } }
        }
        self = collector.take()
    }

    fileprivate init(storage: [UInt8], count: Int) {
        self.storage = storage
        self.count = count
    }

    /// The first value of `lowercasedName`, if present.
    public func first(_ lowercasedName: StaticString) -> String? {
        var found: String? = nil
        forEachField { f in
            if found == nil, HeaderField.equalsLowercased(f.name, lowercasedName) { found = f.valueString }
        }
        return found
    }

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

    /// Calls `body` with each NUL-terminated name/value pair in `all`, in order.
    static func walk(_ all: UnsafeRawBufferPointer, _ body: (HeaderField) -> Void) {
        guard let base = all.baseAddress else { return }
        var i = 0
        while i < all.count {
            let nameCount = strlen(base.advanced(by: i).assumingMemoryBound(to: CChar.self))
            let valueStart = i + nameCount + 1
            let valueCount = strlen(base.advanced(by: valueStart).assumingMemoryBound(to: CChar.self))
            body(HeaderField(name: UnsafeRawBufferPointer(start: base + i, count: nameCount),
                             value: UnsafeRawBufferPointer(start: base + valueStart, count: valueCount)))
            i = valueStart + valueCount + 1
        }
    }
}

/// A response's head while curl delivers its body, read in place: valid only during the call it is
/// handed to (`copy()` keeps it), so deciding about a body costs no copy of the head.
public struct ResponseHeadView {
    let collector: HeaderCollector

    /// The first value of `lowercasedName`, if present.
    public func first(_ lowercasedName: StaticString) -> String? {
        var found: String? = nil
        collector.forEachField { f in
            if found == nil, HeaderField.equalsLowercased(f.name, lowercasedName) { found = f.valueString }
        }
        return found
    }

    /// The fields as a value that outlives the call.
    public func copy() -> ResponseHeaders { collector.snapshot() }
}

/// Collects one response's header lines as curl's header callback hands them over (RFC 9112 §2.1,
/// §5); one per pooled handle, its buffer reused from transfer to transfer.
final class HeaderCollector {
    private var bytes = UnsafeMutableRawPointer.allocate(byteCount: 1024, alignment: 1)
    private var capacity = 1024
    private var used = 0
    private var fields = 0
    private var complete = false

    deinit { bytes.deallocate() }

    /// Forgets everything (a new transfer, or a new response after a 1xx).
    func reset() {
        used = 0
        fields = 0
        complete = false
    }

    /// The fields so far, kept for `take()`.
    func snapshot() -> ResponseHeaders {
        ResponseHeaders(storage: Array(UnsafeRawBufferPointer(start: bytes, count: used)), count: fields)
    }

    /// Calls `body` with each field collected so far, in place.
    func forEachField(_ body: (HeaderField) -> Void) {
        ResponseHeaders.walk(UnsafeRawBufferPointer(start: bytes, count: used), body)
    }

    /// The fields collected so far, as a value the response can carry.
    func take() -> ResponseHeaders {
        let out = ResponseHeaders(storage: Array(UnsafeRawBufferPointer(start: bytes, count: used)), count: fields)
        reset()
        return out
    }

    /// Takes one raw line.
    func addLine(_ line: UnsafeRawBufferPointer) {
        guard let base = line.baseAddress else { return }
        var end = line.count
        while end > 0 && (line[end - 1] == 0x0A || line[end - 1] == 0x0D) { end -= 1 }
        if end >= 5 && memcmp(base, "HTTP/", 5) == 0 {
            // A status line starts a new response: only the final one's fields count (1xx are dropped).
            reset()
            return
        }
        if end == 0 {
            complete = true
            return
        }
        // Trailer fields arrive after the head; they are not the response's header fields.
        if complete { return }
        if line[0] == 0x20 || line[0] == 0x09 {
            // obs-fold (RFC 9112 §5.2): a proxy replaces it with SP.
            guard fields > 0 else { return }
            used -= 1
            var space: UInt8 = 0x20
            withUnsafeBytes(of: &space) { put($0) }
            putTerminated(Self.trimmed(base, 0, end))
            return
        }
        guard let colonPointer = memchr(base, 0x3A, end) else { return }
        let colon = UnsafeRawPointer(colonPointer) - base
        guard colon > 0 else { return }
        var nameEnd = colon
        while nameEnd > 0 && (line[nameEnd - 1] == 0x20 || line[nameEnd - 1] == 0x09) { nameEnd -= 1 }
        append(UnsafeRawBufferPointer(start: base, count: nameEnd), Self.trimmed(base, colon + 1, end))
    }

    /// Adds one field.
    func append(_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) {
        putTerminated(name)
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

    private func putTerminated(_ b: UnsafeRawBufferPointer) {
        let start = used
        put(b)
        // A NUL inside a field would cut it short in C; it is never valid there (RFC 9110 §5.5).
        if b.count > 0, memchr(bytes + start, 0, b.count) != nil {
            for i in start..<used where bytes.load(fromByteOffset: i, as: UInt8.self) == 0 {
                bytes.storeBytes(of: 0x20, toByteOffset: i, as: UInt8.self)
            }
        }
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
