/// Names of the envelope members to pick out at the top level of the document.
struct EnvelopeNames {
    /// Member holding the code.
    var code: String
    /// Member holding the message.
    var message: String
    /// Member holding the data.
    var data: String
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
            return scan(base, n, i, depthLimit, stack.baseAddress!, names, &members)
        }
    }

    /// The value/after-value loop; `i` starts at the first byte of the top-level value.
    private static func scan(
        _ base: UnsafePointer<UInt8>, _ n: Int, _ start: Int, _ maxDepth: Int,
        _ stack: UnsafeMutablePointer<UInt64>, _ names: EnvelopeNames?, _ members: inout EnvelopeMembers
    ) -> Bool {
        var i = start
        var depth = 0
        var inObject = false
        var field = Field.none
        var fieldStart = 0

        nextValue: while true {
            // Here i is at the first byte of a value (whitespace already skipped).
            guard i < n else { return false }
            let c = base[i]
            switch c {
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                depth += 1
                if depth > maxDepth { return false }
                inObject = c == UInt8(ascii: "{")
                let bit = UInt64(1) << UInt64((depth - 1) & 63)
                if inObject {
                    stack[(depth - 1) >> 6] |= bit
                } else {
                    stack[(depth - 1) >> 6] &= ~bit
                }
                i = skipWhitespace(base, n, i + 1)
                guard i < n else { return false }
                let closer = inObject ? UInt8(ascii: "}") : UInt8(ascii: "]")
                if base[i] == closer {
                    i += 1
                    depth -= 1
                    inObject = isObject(stack, depth)
                } else if inObject {
                    guard key(base, n, &i, depth, names, &field, &fieldStart) else { return false }
                    continue nextValue
                } else {
                    continue nextValue
                }
            case UInt8(ascii: "\""):
                i += 1
                var escaped = false
                guard scanString(base, n, &i, &escaped) else { return false }
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                guard scanNumber(base, n, &i) else { return false }
            case UInt8(ascii: "t"):
                guard literal(base, n, &i, 0x7472_7565, 4) else { return false }  // "true"
            case UInt8(ascii: "f"):
                guard i + 4 < n, base[i + 4] == UInt8(ascii: "e") else { return false }
                guard literal(base, n, &i, 0x6661_6C73, 4) else { return false }  // "fals"
                i += 1
            case UInt8(ascii: "n"):
                guard literal(base, n, &i, 0x6E75_6C6C, 4) else { return false }  // "null"
            default:
                return false
            }

            // A value just ended at i; close containers until one wants another value.
            while true {
                if depth == 0 {
                    return skipWhitespace(base, n, i) == n
                }
                if depth == 1 && field != .none {
                    guard record(field, fieldStart..<i, &members) else { return false }
                    field = .none
                }
                i = skipWhitespace(base, n, i)
                guard i < n else { return false }
                let d = base[i]
                if d == UInt8(ascii: ",") {
                    i = skipWhitespace(base, n, i + 1)
                    if inObject {
                        guard key(base, n, &i, depth, names, &field, &fieldStart) else { return false }
                    }
                    continue nextValue
                }
                guard d == (inObject ? UInt8(ascii: "}") : UInt8(ascii: "]")) else { return false }
                i += 1
                depth -= 1
                inObject = isObject(stack, depth)
            }
        }
    }

    /// Whether the container at nesting `depth` (1-based) is an object; false at depth 0.
    @inline(__always)
    private static func isObject(_ stack: UnsafeMutablePointer<UInt64>, _ depth: Int) -> Bool {
        guard depth > 0 else { return false }
        return stack[(depth - 1) >> 6] & (UInt64(1) << UInt64((depth - 1) & 63)) != 0
    }

    /// Scans `"name"` ws `:` ws, leaving i at the member's value; at the top level, notes which envelope member starts there.
    @inline(__always)
    private static func key(
        _ base: UnsafePointer<UInt8>, _ n: Int, _ i: inout Int, _ depth: Int,
        _ names: EnvelopeNames?, _ field: inout Field, _ fieldStart: inout Int
    ) -> Bool {
        guard i < n, base[i] == UInt8(ascii: "\"") else { return false }
        i += 1
        let nameStart = i
        var escaped = false
        guard scanString(base, n, &i, &escaped) else { return false }
        if depth == 1, let names {
            field = match(base, nameStart, i - 1, escaped: escaped, names)
        }
        i = skipWhitespace(base, n, i)
        guard i < n, base[i] == UInt8(ascii: ":") else { return false }
        i = skipWhitespace(base, n, i + 1)
        if depth == 1 { fieldStart = i }
        return true
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
    private static func match(_ base: UnsafePointer<UInt8>, _ start: Int, _ end: Int, escaped: Bool, _ names: EnvelopeNames) -> Field {
        guard escaped else {
            return match(UnsafeBufferPointer(start: base + start, count: end - start), names)
        }
        // Unescaping never lengthens a string, so the raw length is enough room.
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: max(1, end - start)) { scratch in
            let written = StringDecoder.decode(base, start, end, into: scratch.baseAddress!)
            return match(UnsafeBufferPointer(start: scratch.baseAddress!, count: written), names)
        }
    }

    /// Which envelope member an unescaped name is; code first, then message, then data.
    private static func match(_ name: UnsafeBufferPointer<UInt8>, _ names: EnvelopeNames) -> Field {
        // Names compare by code units, not canonical equivalence, as RFC 8259 §8.3 recommends.
        if names.code.utf8.elementsEqual(name) { return .code }
        if names.message.utf8.elementsEqual(name) { return .message }
        if names.data.utf8.elementsEqual(name) { return .data }
        return .none
    }
}
