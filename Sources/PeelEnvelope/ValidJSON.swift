// Walks over JSON the strict scan has already accepted: no checks, only the structure. Used for the
// few steps below the top level a dialect names (`error.message`, an Alipay `*_response` object),
// and for whole failure bodies read by the well-known shapes, 16 bytes a step where it can.

/// Steps over values in a buffer that passed `ScanCore.run`.
enum ValidJSON {
    /// What looking for one member of an object found.
    enum Lookup {
        case absent
        case found(Range<Int>)
        case duplicate
    }

    /// The index just past the value that starts at `i` (no whitespace before it).
    static func end(_ base: UnsafePointer<UInt8>, _ n: Int, _ i: Int) -> Int {
        let c = base[i]
        if c == UInt8(ascii: "\"") { return stringEnd(base, n, i &+ 1) }
        if c == UInt8(ascii: "{") || c == UInt8(ascii: "[") {
            var depth = 0
            var j = i
            let quote = SIMD16<UInt8>(repeating: 0x22)
            // `{` `}` `[` `]` are 0x7B 0x7D 0x5B 0x5D: with bit 5 cleared, 0x5B or 0x5D.
            let fold = SIMD16<UInt8>(repeating: 0xDF)
            let open = SIMD16<UInt8>(repeating: 0x5B)
            let close = SIMD16<UInt8>(repeating: 0x5D)
            while true {
                // Skip 16 bytes at a time to the next quote or bracket.
                while n &- j >= 16 {
                    let v = UnsafeRawPointer(base + j).loadUnaligned(as: SIMD16<UInt8>.self)
                    let f = v & fold
                    let halves = unsafeBitCast((v .== quote) .| (f .== open) .| (f .== close), to: SIMD2<UInt64>.self)
                    let low = UInt64(littleEndian: halves[0])
                    let high = UInt64(littleEndian: halves[1])
                    if low | high == 0 {
                        j &+= 16
                        continue
                    }
                    j &+= low != 0 ? low.trailingZeroBitCount >> 3 : 8 &+ high.trailingZeroBitCount >> 3
                    break
                }
                let b = base[j]
                if b == UInt8(ascii: "\"") {
                    j = stringEnd(base, n, j &+ 1)
                    continue
                }
                if b == UInt8(ascii: "{") || b == UInt8(ascii: "[") {
                    depth &+= 1
                } else if b == UInt8(ascii: "}") || b == UInt8(ascii: "]") {
                    depth &-= 1
                    if depth == 0 { return j &+ 1 }
                }
                j &+= 1
            }
        }
        var j = i
        while j < n {
            let b = base[j]
            if b == UInt8(ascii: ",") || b == UInt8(ascii: "}") || b == UInt8(ascii: "]") || b <= 0x20 { break }
            j &+= 1
        }
        return j
    }

    /// `stringEnd`, and whether the string holds an escape (a name that must be decoded first).
    @inline(__always)
    static func stringEnd(_ base: UnsafePointer<UInt8>, _ n: Int, _ i: Int, escaped: inout Bool) -> Int {
        var j = i
        let quote = SIMD16<UInt8>(repeating: 0x22)
        let backslash = SIMD16<UInt8>(repeating: 0x5C)
        while n &- j >= 16 {
            let v = UnsafeRawPointer(base + j).loadUnaligned(as: SIMD16<UInt8>.self)
            let halves = unsafeBitCast((v .== quote) .| (v .== backslash), to: SIMD2<UInt64>.self)
            let low = UInt64(littleEndian: halves[0])
            let high = UInt64(littleEndian: halves[1])
            guard low | high != 0 else {
                j &+= 16
                continue
            }
            j &+= low != 0 ? low.trailingZeroBitCount >> 3 : 8 &+ high.trailingZeroBitCount >> 3
            if base[j] == UInt8(ascii: "\"") { return j &+ 1 }
            escaped = true
            j &+= 2
        }
        while true {
            let b = base[j]
            if b == UInt8(ascii: "\"") { return j &+ 1 }
            if b == UInt8(ascii: "\\") {
                escaped = true
                j &+= 2
            } else {
                j &+= 1
            }
        }
    }

    /// The index just past the closing quote of a string whose content starts at `i`, in a buffer
    /// of `n` bytes: 16 bytes a step while that many are left (a failure body's field errors are
    /// mostly string bytes).
    @inline(__always)
    static func stringEnd(_ base: UnsafePointer<UInt8>, _ n: Int, _ i: Int) -> Int {
        var escaped = false
        return stringEnd(base, n, i, escaped: &escaped)
    }

    /// The index just past the closing quote of a string whose content starts at `i`.
    @inline(__always)
    static func stringEnd(_ base: UnsafePointer<UInt8>, _ i: Int) -> Int {
        var j = i
        while true {
            let b = base[j]
            if b == UInt8(ascii: "\"") { return j &+ 1 }
            j &+= b == UInt8(ascii: "\\") ? 2 : 1
        }
    }

    /// The envelope members of the object spanning `object`, matched against `names` as the scan
    /// matches the top level; nil when one of them appears twice.
    static func members(_ base: UnsafePointer<UInt8>, _ object: Range<Int>, _ names: EnvelopeNames) -> EnvelopeMembers? {
        var top = ScanCore.TopLevel(names: names)
        var ok = true
        walk(base, object) { nameStart, nameEnd, value in
            top.begin(base, nameStart, nameEnd)
            top.fieldStart = value.lowerBound
            ok = top.end(value.upperBound)
            return ok
        }
        return ok ? top.members : nil
    }

    /// The slot of the first envelope member that appears twice in the object spanning `object`.
    static func duplicate(_ base: UnsafePointer<UInt8>, _ object: Range<Int>, _ names: EnvelopeNames) -> Int? {
        var top = ScanCore.TopLevel(names: names)
        var slot: Int?
        walk(base, object) { nameStart, nameEnd, value in
            top.begin(base, nameStart, nameEnd)
            let field = top.field
            top.fieldStart = value.lowerBound
            if top.end(value.upperBound) { return true }
            slot = Int(field) - 1
            return false
        }
        return slot
    }

    /// The value of the member named `name` in the object spanning `object`.
    static func member(_ base: UnsafePointer<UInt8>, _ object: Range<Int>, _ name: String) -> Lookup {
        NameTable([name]).with { names in
            guard let found = members(base, object, names) else { return .duplicate }
            return found[0].map { .found($0.value) } ?? .absent
        }
    }

    /// The element at `index` of the array spanning `array`; nil when the array is shorter.
    static func element(_ base: UnsafePointer<UInt8>, _ array: Range<Int>, _ index: Int) -> Range<Int>? {
        let n = array.upperBound
        var i = ScanCore.skipWhitespace(base, n, array.lowerBound &+ 1)
        var k = 0
        while base[i] != UInt8(ascii: "]") {
            let valueEnd = end(base, n, i)
            if k == index { return i..<valueEnd }
            i = ScanCore.skipWhitespace(base, n, valueEnd)
            guard base[i] == UInt8(ascii: ",") else { return nil }
            i = ScanCore.skipWhitespace(base, n, i &+ 1)
            k &+= 1
        }
        return nil
    }

    /// Calls `visit(nameStart, nameEnd, value)` for each member of the object spanning `object`
    /// (name bounds exclude the quotes); stops when `visit` returns false.
    static func walk(_ base: UnsafePointer<UInt8>, _ object: Range<Int>, _ visit: (Int, Int, Range<Int>) -> Bool) {
        let n = object.upperBound
        var i = ScanCore.skipWhitespace(base, n, object.lowerBound &+ 1)
        while base[i] == UInt8(ascii: "\"") {
            let nameStart = i &+ 1
            let afterName = stringEnd(base, n, nameStart)
            // Past the name, its colon and the whitespace around it.
            i = ScanCore.skipWhitespace(base, n, ScanCore.skipWhitespace(base, n, afterName) &+ 1)
            let valueEnd = end(base, n, i)
            guard visit(nameStart, afterName &- 1, i..<valueEnd) else { return }
            i = ScanCore.skipWhitespace(base, n, valueEnd)
            guard base[i] == UInt8(ascii: ",") else { return }
            i = ScanCore.skipWhitespace(base, n, i &+ 1)
        }
    }
}

extension ValidJSON {
    /// The value at `path` below the object spanning `object`: each step a member of an object, or
    /// (a step of digits) an element of an array; nil when a step is absent or `null` is reached.
    static func lookup(_ base: UnsafePointer<UInt8>, _ object: Range<Int>, _ path: MemberPath) -> Range<Int>? {
        var r = object
        for step in path.steps {
            switch base[r.lowerBound] {
            case UInt8(ascii: "{"):
                guard case .found(let v) = member(base, r, step) else { return nil }
                r = v
            case UInt8(ascii: "["):
                guard let index = Int(step), index >= 0 else { return nil }
                var k = 0
                var found: Range<Int>?
                elements(base, r) { v in
                    if k == index { found = v }
                    k &+= 1
                    return found == nil
                }
                guard let found else { return nil }
                r = found
            default:
                return nil
            }
        }
        return base[r.lowerBound] == UInt8(ascii: "n") ? nil : r
    }
}
