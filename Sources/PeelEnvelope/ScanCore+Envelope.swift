// The envelope side of the scan: which top-level members to find, and where they were found.

/// UTF-8 names of the envelope members to pick out at the top level, borrowed for one scan.
struct EnvelopeNames {
    /// Member holding the code.
    var code: UnsafeBufferPointer<UInt8>
    /// Member holding the message.
    var message: UnsafeBufferPointer<UInt8>
    /// Member holding the data.
    var data: UnsafeBufferPointer<UInt8>

    /// Lends the configured names as UTF-8 buffers to body, without copying contiguous strings.
    static func with<R>(code: String, message: String, data: String, _ body: (EnvelopeNames) -> R) -> R {
        withUTF8Bytes(code) { code in
            withUTF8Bytes(message) { message in
                withUTF8Bytes(data) { data in
                    body(EnvelopeNames(code: code, message: message, data: data))
                }
            }
        }
    }
}

/// Byte ranges of the envelope members' raw values, as offsets into the scanned buffer.
struct EnvelopeMembers: Equatable {
    /// Raw value of the code member.
    var code: Range<Int>?
    /// Raw value of the message member.
    var message: Range<Int>?
    /// Raw value of the data member.
    var data: Range<Int>?
}

extension ScanCore {
    /// Which envelope member a top-level key named.
    enum Field: UInt8 {
        case none, code, message, data
    }

    /// Bookkeeping for the top-level object's envelope members, kept behind a pointer so the
    /// scan loop's registers stay free for the bytes; it is touched only at depth 1.
    struct TopLevel {
        /// The names being looked for.
        var names: EnvelopeNames
        /// What was found so far.
        var members = EnvelopeMembers()
        /// The member whose value is being scanned.
        var field = Field.none
        /// Where that value starts.
        var fieldStart = 0
    }

    /// Stores a top-level member's range; false when that member was already seen.
    static func record(_ field: Field, _ range: Range<Int>, _ members: inout EnvelopeMembers) -> Bool {
        // Duplicate envelope members are ambiguous (RFC 8259 §4: names SHOULD be unique), so they fail the envelope.
        switch field {
        case .none:
            return true
        case .code:
            guard members.code == nil else { return false }
            members.code = range
        case .message:
            guard members.message == nil else { return false }
            members.message = range
        case .data:
            guard members.data == nil else { return false }
            members.data = range
        }
        return true
    }

    /// Which envelope member the validated name in base[start..<end] is, compared after unescaping.
    @inline(never)
    static func match(_ base: UnsafePointer<UInt8>, _ start: Int, _ end: Int, _ names: EnvelopeNames) -> Field {
        let raw = UnsafeBufferPointer(start: base + start, count: end - start)
        guard raw.contains(UInt8(ascii: "\\")) else { return match(raw, names) }
        // Unescaping never lengthens a string, so the raw length is enough room.
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: max(1, end - start)) { scratch in
            let written = StringDecoder.decode(base, start, end, into: scratch.baseAddress!)
            return match(UnsafeBufferPointer(start: scratch.baseAddress!, count: written), names)
        }
    }

    /// Which envelope member an unescaped name is; code first, then message, then data.
    private static func match(_ name: UnsafeBufferPointer<UInt8>, _ names: EnvelopeNames) -> Field {
        // Names compare by code units, not canonical equivalence, as RFC 8259 §8.3 recommends.
        if equal(name, names.code) { return .code }
        if equal(name, names.message) { return .message }
        if equal(name, names.data) { return .data }
        return .none
    }

    /// Byte equality of two buffers.
    @inline(__always)
    private static func equal(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Bool {
        guard a.count == b.count else { return false }
        var k = 0
        while k < a.count {
            if a[k] != b[k] { return false }
            k += 1
        }
        return true
    }
}
