/// A reply's header fields as finished `Name: value` lines: the shaper builds them whole and the
/// writer copies them into the head as they are, so no code of the gateway runs while a head is
/// written. A field whose name or value would break the head (CR, LF, NUL) is dropped, and so are
/// the fields the writer owns: Content-Length and Transfer-Encoding (it frames the body itself) and
/// Connection (the connection layer states the connection's fate once). The first Date is kept.
public struct ReplyFields {
    /// The field lines, each ending in CRLF, in the first `count` bytes; the rest is room for more.
    /// Written through one pointer per line (Array's append costs a check per piece).
    private var storage: [UInt8]
    private var count = 0
    /// A Date field was added (the upstream's, kept): the writer adds none.
    private(set) var hasDate = false

    /// No fields; room for `capacity` bytes of lines before the first growth.
    public init(capacity: Int = 0) {
        storage = [UInt8](repeating: 0, count: capacity)
    }

    /// Fields from (name, value) pairs (Peel's own small answers).
    public init(_ pairs: [(String, String)]) {
        storage = []
        for (name, value) in pairs { add(name, value) }
    }

    /// Adds `name: value`, its token identified here.
    public mutating func add(_ name: String, _ value: String) {
        var name = name
        var value = value
        name.withUTF8 { n in
            value.withUTF8 { v in
                let name = UnsafeRawBufferPointer(n)
                line(name, UnsafeRawBufferPointer(v), token: FieldToken.identify(name), checked: false)
            }
        }
    }

    /// Adds `name: value` under a token already known (Peel's own fields).
    public mutating func add(_ token: FieldToken, _ name: StaticString, _ value: String) {
        var value = value
        name.withUTF8Buffer { n in
            value.withUTF8 { v in line(UnsafeRawBufferPointer(n), UnsafeRawBufferPointer(v), token: token, checked: false) }
        }
    }

    /// Adds one upstream field as it is: its token was identified and its value checked when it
    /// was collected (every `ResponseHeaders` holds only safe fields).
    public mutating func add(_ field: HeaderField) {
        line(field.name, field.value, token: field.token, checked: true)
    }

    /// Copies the upstream's fields except those whose token is in `dropping`, without a String per field.
    public mutating func add(_ fields: ResponseHeaders, dropping: FieldSet) {
        fields.forEachField { f in
            if !f.isIn(dropping) { line(f.name, f.value, token: f.token, checked: true) }
        }
    }

    /// The fields as (name, value) pairs, in order: for tests and diagnostics, never the write path.
    public var pairs: [(String, String)] {
        var out: [(String, String)] = []
        for text in storage[..<count].split(separator: 0x0A).map({ String(decoding: $0.dropLast(), as: UTF8.self) }) {
            guard let colon = text.firstIndex(of: ":") else { continue }
            out.append((String(text[..<colon]), String(text[text.index(colon, offsetBy: 2)...])))
        }
        return out
    }

    /// Adds one field line, unless the writer owns that field or it would break the head. `checked`
    /// fields (the upstream's, checked once when collected) skip the CR/LF/NUL scan.
    private mutating func line(_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer, token: FieldToken, checked: Bool) {
        guard checked || (!name.isEmpty && Self.isSafe(name) && Self.isSafe(value)) else { return }
        switch token {
        case .contentLength, .transferEncoding, .connection:
            return
        case .date:
            if hasDate { return }
            hasDate = true
        default:
            break
        }
        let n = name.count + value.count + 4
        if count + n > storage.count { storage.append(contentsOf: repeatElement(0, count: max(n, storage.count, 256))) }
        storage.withUnsafeMutableBytes { out in
            guard let base = out.baseAddress else { return }
            var at = base + count
            if let p = name.baseAddress { at.copyMemory(from: p, byteCount: name.count) }
            at += name.count
            at.storeBytes(of: 0x3A, as: UInt8.self)  // ": "
            (at + 1).storeBytes(of: 0x20, as: UInt8.self)
            at += 2
            if let p = value.baseAddress { at.copyMemory(from: p, byteCount: value.count) }
            at += value.count
            at.storeBytes(of: 0x0D, as: UInt8.self)  // CRLF
            (at + 1).storeBytes(of: 0x0A, as: UInt8.self)
        }
        count += n
    }

    /// Calls `body` with the lines as written.
    func withLines<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        storage.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
    }

    private static func isSafe(_ b: UnsafeRawBufferPointer) -> Bool {
        for c in b where c == 0x0D || c == 0x0A || c == 0 { return false }
        return true
    }
}
