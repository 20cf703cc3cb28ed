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
        MediaType.withUTF8(code) { code in
            MediaType.withUTF8(message) { message in
                MediaType.withUTF8(data) { data in
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

/// The single-pass scanner: an explicit container stack instead of recursion, so depth costs bits, not frames.
enum ScanCore {
    /// Which envelope member a top-level key named.
    enum Field: UInt8 {
        case none, code, message, data
    }

    /// Validates the whole buffer; with `names`, also requires a top-level object and records its envelope members.
    static func run(_ buffer: UnsafeBufferPointer<UInt8>, maxDepth: Int, names: EnvelopeNames?, members: inout EnvelopeMembers) -> Bool {
        guard let base = buffer.baseAddress else { return false }
        let n = buffer.count
        var i = 0
        // One UTF-8 BOM may be ignored (RFC 8259 §8.1); offsets still count it.
        if n >= 3 && base[0] == 0xEF && base[1] == 0xBB && base[2] == 0xBF { i = 3 }
        i = skipWhitespace(base, n, i)
        guard i < n else { return false }
        if names != nil && base[i] != UInt8(ascii: "{") { return false }
        let depthLimit = max(0, maxDepth)
        // A document cannot nest deeper than it has bytes, so this bounds the stack for any maxDepth.
        let words = min(depthLimit, n) / 64 + 1
        return withUnsafeTemporaryAllocation(of: UInt64.self, capacity: words) { stack in
            stack.initialize(repeating: 0)
            guard let names else { return scan(base, n, i, depthLimit, stack.baseAddress!, nil) }
            var top = TopLevel(names: names)
            let ok = withUnsafeMutablePointer(to: &top) { scan(base, n, i, depthLimit, stack.baseAddress!, $0) }
            members = top.members
            return ok
        }
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

    /// The value/after-value loop; `i` starts at the first byte of the top-level value.
    private static func scan(
        _ base: UnsafePointer<UInt8>, _ n: Int, _ start: Int, _ maxDepth: Int,
        _ stack: UnsafeMutablePointer<UInt64>, _ top: UnsafeMutablePointer<TopLevel>?
    ) -> Bool {
        var i = start
        var depth = 0
        var inObject = false
        // Set when the next thing is an object member's `"name":`; one inline site for all names
        // keeps the index in a register (a called helper would need it in memory).
        var wantKey = false

        nextValue: while true {
            if wantKey {
                guard i < n, base[i] == UInt8(ascii: "\"") else { return false }
                let nameStart = i &+ 1
                i = scanString(base, n, nameStart)
                guard i >= 0 else { return false }
                if depth == 1, let top {
                    top.pointee.field = match(base, nameStart, i &- 1, top.pointee.names)
                }
                // Compact JSON puts the colon right after the name; only look for whitespace when it does not.
                if i < n && base[i] != UInt8(ascii: ":") { i = skipWhitespace(base, n, i) }
                guard i < n, base[i] == UInt8(ascii: ":") else { return false }
                i = skipWhitespace(base, n, i &+ 1)
                if depth == 1, let top { top.pointee.fieldStart = i }
            }
            // Here i is at the first byte of a value (whitespace already skipped).
            guard i < n else { return false }
            let c = base[i]
            if c == UInt8(ascii: "\"") {
                i = scanString(base, n, i &+ 1)
                guard i >= 0 else { return false }
            } else if c &- UInt8(ascii: "0") < 10 || c == UInt8(ascii: "-") {
                guard scanNumber(base, n, &i) else { return false }
            } else if c | 0x20 == UInt8(ascii: "{") {
                // '{' is 0x7B and '[' is 0x5B: they differ only in bit 0x20.
                depth &+= 1
                if depth > maxDepth { return false }
                inObject = c == UInt8(ascii: "{")
                let bit = UInt64(1) << UInt64((depth &- 1) & 63)
                if inObject {
                    stack[(depth &- 1) >> 6] |= bit
                } else {
                    stack[(depth &- 1) >> 6] &= ~bit
                }
                i = skipWhitespace(base, n, i &+ 1)
                guard i < n else { return false }
                if base[i] != c &+ 2 {
                    // Not closed at once ('}' and ']' are two above their openers): read the first member.
                    wantKey = inObject
                    continue nextValue
                }
                i &+= 1
                depth &-= 1
                inObject = isObject(stack, depth)
            } else if c == UInt8(ascii: "t") {
                guard literal(base, n, &i, 0x7472_7565, 4) else { return false }  // "true"
            } else if c == UInt8(ascii: "f") {
                guard n &- i >= 5, base[i &+ 4] == UInt8(ascii: "e") else { return false }
                guard literal(base, n, &i, 0x6661_6C73, 5) else { return false }  // "fals" + the 'e' above
            } else if c == UInt8(ascii: "n") {
                guard literal(base, n, &i, 0x6E75_6C6C, 4) else { return false }  // "null"
            } else {
                return false
            }

            // A value just ended at i; close containers until one wants another value.
            while true {
                if depth == 0 {
                    return skipWhitespace(base, n, i) == n
                }
                if depth == 1, let top, top.pointee.field != .none {
                    guard record(top.pointee.field, top.pointee.fieldStart..<i, &top.pointee.members) else { return false }
                    top.pointee.field = .none
                }
                i = skipWhitespace(base, n, i)
                guard i < n else { return false }
                let d = base[i]
                if d == UInt8(ascii: ",") {
                    i = skipWhitespace(base, n, i &+ 1)
                    wantKey = inObject
                    continue nextValue
                }
                guard d == (inObject ? UInt8(ascii: "}") : UInt8(ascii: "]")) else { return false }
                i &+= 1
                depth &-= 1
                inObject = isObject(stack, depth)
            }
        }
    }

    /// Whether the container at nesting `depth` (1-based) is an object; false at depth 0.
    @inline(__always)
    private static func isObject(_ stack: UnsafeMutablePointer<UInt64>, _ depth: Int) -> Bool {
        guard depth > 0 else { return false }
        return stack[(depth &- 1) >> 6] & (UInt64(1) << UInt64((depth &- 1) & 63)) != 0
    }

    /// Stores a top-level member's range; false when that member was already seen.
    private static func record(_ field: Field, _ range: Range<Int>, _ members: inout EnvelopeMembers) -> Bool {
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
    private static func match(_ base: UnsafePointer<UInt8>, _ start: Int, _ end: Int, _ names: EnvelopeNames) -> Field {
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
