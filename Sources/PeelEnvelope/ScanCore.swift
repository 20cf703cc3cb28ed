/// The single-pass scanner: an explicit container stack instead of recursion, so depth costs bits, not frames.
enum ScanCore {
    /// Validates the whole buffer; with `names`, also requires a top-level object and records its envelope members.
    static func run(
        _ buffer: UnsafeBufferPointer<UInt8>, maxDepth: Int, names: EnvelopeNames?, members: inout EnvelopeMembers,
        path: Path = .automatic
    ) -> Bool {
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
        let chosen = scanner(path, n)
        switch chosen {
        case .tokens:
            break
        case .sse2:
            return runBlocks(base, n, depthLimit, words, names, &members)
        case .avx2, .avx512:
            return runKernel(chosen, base, n, depthLimit, words, names, &members)
        }
        return withUnsafeTemporaryAllocation(of: UInt64.self, capacity: words) { stack in
            stack.initialize(repeating: 0)
            guard let names else { return scan(base, n, i, depthLimit, stack.baseAddress!, nil) }
            var top = TopLevel(names: names)
            let ok = withUnsafeMutablePointer(to: &top) { scan(base, n, i, depthLimit, stack.baseAddress!, $0) }
            members = top.members
            return ok
        }
    }

    /// The value/after-value loop; `i` starts at the first byte of the top-level value.
    private static func scan(
        _ base: UnsafePointer<UInt8>, _ n: Int, _ start: Int, _ maxDepth: Int,
        _ stack: UnsafeMutablePointer<UInt64>, _ top: UnsafeMutablePointer<TopLevel>?
    ) -> Bool {
        var i = start
        var c = base[start]
        var depth = 0
        var inObject = false
        // Set when the next thing is an object member's `"name":`; one inline site for all names
        // keeps the index in a register (a called helper would need it in memory).
        var wantKey = false

        // Invariant at the loop head: c is base[i], or 0 when i == n (NUL never starts a token).
        nextValue: while true {
            if wantKey {
                guard c == UInt8(ascii: "\"") else { return false }
                let nameStart = i &+ 1
                i = scanString(base, n, nameStart)
                guard i >= 0 else { return false }
                if depth == 1, let top {
                    top.pointee.begin(base, nameStart, i &- 1)
                }
                // Compact JSON puts the colon and the value right after the name: two loads, no loops.
                if n &- i >= 2 && base[i] == UInt8(ascii: ":") && base[i &+ 1] > 0x20 {
                    i &+= 1
                    c = base[i]
                } else {
                    (i, c) = token(base, n, i)
                    guard c == UInt8(ascii: ":") else { return false }
                    (i, c) = token(base, n, i &+ 1)
                }
                if depth == 1, let top { top.pointee.fieldStart = i }
            }
            if c == UInt8(ascii: "\"") {
                i = scanString(base, n, i &+ 1)
                guard i >= 0 else { return false }
            } else if c &- UInt8(ascii: "0") < 10 || c == UInt8(ascii: "-") {
                guard scanNumber(base, n, &i, c) else { return false }
            } else if c | 0x20 == UInt8(ascii: "{") {
                // '{' is 0x7B and '[' is 0x5B: they differ only in bit 0x20.
                depth &+= 1
                if depth > maxDepth { return false }
                inObject = c == UInt8(ascii: "{")
                setKind(stack, depth, object: inObject)
                let opener = c
                (i, c) = token(base, n, i &+ 1)
                if c != opener &+ 2 {
                    // Not closed at once ('}' and ']' are two above their openers): read the first member.
                    wantKey = inObject
                    continue nextValue
                }
                i &+= 1
                depth &-= 1
                inObject = isObject(stack, depth)
            } else {
                guard scanLiteral(base, n, &i, c) else { return false }
            }

            // A value just ended at i; close containers until one wants another value.
            while true {
                if depth <= 1 {
                    if depth == 0 { return token(base, n, i).0 == n }
                    if let top, top.pointee.field != 0 {
                        guard top.pointee.end(i) else { return false }
                    }
                }
                // Compact JSON again: a comma and the next value's first byte, or the closer, right here.
                if n &- i >= 2 && base[i] == UInt8(ascii: ",") && base[i &+ 1] > 0x20 {
                    i &+= 1
                    c = base[i]
                    wantKey = inObject
                    continue nextValue
                }
                (i, c) = token(base, n, i)
                if c == UInt8(ascii: ",") {
                    (i, c) = token(base, n, i &+ 1)
                    wantKey = inObject
                    continue nextValue
                }
                guard c == (inObject ? UInt8(ascii: "}") : UInt8(ascii: "]")) else { return false }
                i &+= 1
                depth &-= 1
                inObject = isObject(stack, depth)
            }
        }
    }

    /// Records whether the container opened at nesting `depth` (1-based) is an object or an array.
    @inline(__always)
    static func setKind(_ stack: UnsafeMutablePointer<UInt64>, _ depth: Int, object: Bool) {
        let bit = UInt64(1) << UInt64((depth &- 1) & 63)
        if object {
            stack[(depth &- 1) >> 6] |= bit
        } else {
            stack[(depth &- 1) >> 6] &= ~bit
        }
    }

    /// Whether the container at nesting `depth` (1-based) is an object; false at depth 0.
    @inline(__always)
    static func isObject(_ stack: UnsafeMutablePointer<UInt64>, _ depth: Int) -> Bool {
        guard depth > 0 else { return false }
        return stack[(depth &- 1) >> 6] & (UInt64(1) << UInt64((depth &- 1) & 63)) != 0
    }
}
