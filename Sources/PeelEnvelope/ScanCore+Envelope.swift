// The envelope side of the scan: which top-level members to find, and where they were found.

/// The member names a dialect looks for in one object, packed once when the dialect is set: the
/// scan borrows them without copying or allocating.
struct NameTable: Hashable, Sendable {
    /// The names' UTF-8, one after another.
    var bytes: [UInt8] = []
    /// Where each name starts in `bytes`, plus the end of the last.
    var offsets: [Int] = [0]
    /// A name suffix (`_response` for `*_response`) whose matches share the slot after the names.
    var suffix: [UInt8] = []

    /// A table of exact names and an optional suffix pattern.
    init(_ names: [String], suffix: String? = nil) {
        for name in names {
            bytes += Array(name.utf8)
            offsets.append(bytes.count)
        }
        self.suffix = suffix.map { Array($0.utf8) } ?? []
    }

    /// How many exact names.
    var count: Int { offsets.count - 1 }

    /// Lends the table to one scan.
    func with<R>(_ body: (EnvelopeNames) -> R) -> R {
        bytes.withUnsafeBufferPointer { b in
            offsets.withUnsafeBufferPointer { o in
                suffix.withUnsafeBufferPointer { s in
                    body(EnvelopeNames(bytes: b.baseAddress ?? UnsafePointer(bitPattern: 1)!, offsets: o.baseAddress!,
                                       count: o.count - 1, suffix: s))
                }
            }
        }
    }
}

/// The names of one `NameTable`, borrowed for one scan.
struct EnvelopeNames {
    /// The names' UTF-8, one after another.
    var bytes: UnsafePointer<UInt8>
    /// `count + 1` offsets into `bytes`.
    var offsets: UnsafePointer<Int>
    /// How many exact names.
    var count: Int
    /// The suffix pattern; empty for none.
    var suffix: UnsafeBufferPointer<UInt8>

    /// Lends `code`, `message` and `data` as a table (the default dialect's names), for tests and tools.
    static func with<R>(code: String, message: String, data: String, _ body: (EnvelopeNames) -> R) -> R {
        NameTable([data, code, message]).with(body)
    }
}

/// Where one envelope member was found: its name's opening quote and its raw value.
struct MemberSpan: Equatable {
    /// Offset of the name's opening quote.
    var keyStart: Int
    /// The raw value.
    var value: Range<Int>
}

/// What the scan found of an object's envelope members, as offsets into the scanned buffer.
struct EnvelopeMembers: Equatable {
    /// One slot per name in the table, then one for the suffix pattern; keyStart -1 when not found.
    var slots = InlineArray<17, MemberSpan>(repeating: MemberSpan(keyStart: -1, value: 0..<0))
    /// How many members the object has, envelope or not.
    var count = 0
    /// How many slots are filled.
    var found = 0

    /// The span in slot k, if found.
    subscript(_ k: Int) -> MemberSpan? {
        let s = slots[k]
        return s.keyStart < 0 ? nil : s
    }

    static func == (a: EnvelopeMembers, b: EnvelopeMembers) -> Bool {
        guard a.count == b.count else { return false }
        for k in a.slots.indices where a.slots[k] != b.slots[k] { return false }
        return true
    }

    /// Stores a member's span in its slot; false when that slot was already filled.
    @inline(__always)
    mutating func record(_ field: ScanCore.Field, keyStart: Int, _ range: Range<Int>) -> Bool {
        // Duplicate envelope members are ambiguous (RFC 8259 §4: names SHOULD be unique), so they fail the envelope.
        let k = Int(field) &- 1
        guard slots[k].keyStart < 0 else { return false }
        slots[k] = MemberSpan(keyStart: keyStart, value: range)
        found &+= 1
        return true
    }
}

extension ScanCore {
    /// Which envelope member a top-level key named: 0 for none, else its slot + 1.
    typealias Field = UInt8

    /// Bookkeeping for the top-level object's envelope members, kept behind a pointer so the
    /// scan loop's registers stay free for the bytes; it is touched only at depth 1.
    struct TopLevel {
        /// The names being looked for.
        var names: EnvelopeNames
        /// What was found so far.
        var members = EnvelopeMembers()
        /// The member whose value is being scanned.
        var field: Field = 0
        /// Where that member's name starts (its opening quote).
        var keyStart = 0
        /// Where that value starts.
        var fieldStart = 0

        /// Notes a top-level member whose validated name is base[start..<end].
        @inline(__always)
        mutating func begin(_ base: UnsafePointer<UInt8>, _ start: Int, _ end: Int) {
            members.count &+= 1
            keyStart = start &- 1
            field = match(base, start, end, names)
        }

        /// Records the member begun last, whose value ended at `end`; false on a duplicate.
        @inline(__always)
        mutating func end(_ end: Int) -> Bool {
            guard field != 0 else { return true }
            defer { field = 0 }
            return members.record(field, keyStart: keyStart, fieldStart..<end)
        }
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

    /// Which envelope member an unescaped name is: an exact name first, then the suffix pattern.
    private static func match(_ name: UnsafeBufferPointer<UInt8>, _ names: EnvelopeNames) -> Field {
        // Names compare by code units, not canonical equivalence, as RFC 8259 §8.3 recommends.
        var k = 0
        while k < names.count {
            let start = names.offsets[k]
            let length = names.offsets[k &+ 1] &- start
            if length == name.count && equal(name.baseAddress, names.bytes + start, length) { return Field(k &+ 1) }
            k &+= 1
        }
        let suffix = names.suffix
        // `*Response` also matches `Response` itself (Tencent Cloud API 3.0): the name ends that way.
        if !suffix.isEmpty && name.count >= suffix.count
            && equal(name.baseAddress! + (name.count - suffix.count), suffix.baseAddress!, suffix.count)
        {
            return Field(names.count &+ 1)
        }
        return 0
    }

    /// Byte equality of two runs of `count` bytes.
    @inline(__always)
    private static func equal(_ a: UnsafePointer<UInt8>?, _ b: UnsafePointer<UInt8>, _ count: Int) -> Bool {
        guard let a else { return count == 0 }
        var k = 0
        while k < count {
            if a[k] != b[k] { return false }
            k &+= 1
        }
        return true
    }
}
