// RFC 9457's `errors` member, built from the field errors an upstream wrote in its framework's own
// shape: one `{"detail": …, "pointer": "#/…"}` per message, in the upstream's order. Written
// straight into one buffer as the body is walked: a validation answer may hold thousands.

/// Where one field error points.
enum FieldPlace {
    /// Not tied to a field (DRF's `non_field_errors`, NestJS's message lists).
    case none
    /// The pointer built so far (`FieldErrorList.pointer`).
    case pointer
    /// A query, path, header or cookie parameter: its name, as bytes to escape.
    case parameter(String)
}

/// The `errors` array under construction, and the JSON Pointer of the member being read. Entries
/// are noted as ranges while the body is walked and written out once, at their exact size: a
/// validation answer may hold thousands, and a field map's key is encoded only as it is written.
struct FieldErrorList {
    /// One entry: its message's raw bytes in the body, and where it points.
    private struct Entry {
        var detail: Range<Int>
        /// Bytes of `places`: the pointer's prefix (without `#`), or the parameter's JSON string.
        var place: Range<Int>
        /// A map key after the prefix, raw in the body (quotes excluded; no escapes), or empty.
        var key: Range<Int>
        var kind: UInt8
        var dotted: Bool
    }
    private static let noPlace: UInt8 = 0, pointerPlace: UInt8 = 1, parameterPlace: UInt8 = 2, keyedPlace: UInt8 = 3

    /// The body the entries' messages are in, and its length.
    let base: UnsafePointer<UInt8>
    let end: Int
    private var entries: [Entry] = []
    /// The pointers and parameter names the entries use, one after another.
    private var places: [UInt8] = []
    /// `pointer` changed since its last copy into `places` (else that copy is shared).
    private var pointerChanged = true
    private var lastPointer = 0..<0
    /// How many entries.
    var count: Int { entries.count }
    /// The first entry's message, raw (quotes included), for a problem whose body has no message.
    var firstDetail: Range<Int>? { entries.first?.detail }
    /// The pointer of the member being read, percent-encoded for a URI fragment (RFC 6901 §6),
    /// without the leading `#`.
    var pointer: [UInt8] = [] {
        didSet { pointerChanged = true }
    }
    /// The map key being read, not yet in `pointer`: raw in the body, without escapes.
    var key: (range: Range<Int>, dotted: Bool)?

    init(_ base: UnsafePointer<UInt8>, count: Int) {
        self.base = base
        end = count
    }

    /// Appends one entry whose message is the raw JSON string at `detail` (quotes included), copied
    /// as the upstream wrote it; a value that is not a string is not a message and is skipped.
    mutating func add(_ base: UnsafePointer<UInt8>, detail: Range<Int>, place: FieldPlace) {
        // An empty message says nothing, like an envelope's (`""` is two bytes with its quotes).
        guard base[detail.lowerBound] == UInt8(ascii: "\""), detail.count > 2 else { return }
        switch place {
        case .none:
            entries.append(Entry(detail: detail, place: 0..<0, key: 0..<0, kind: Self.noPlace, dotted: false))
        case .pointer:
            if pointerChanged {
                let start = places.count
                places.append(contentsOf: pointer)
                lastPointer = start..<places.count
                pointerChanged = false
            }
            if let key {
                entries.append(Entry(detail: detail, place: lastPointer, key: key.range, kind: Self.keyedPlace, dotted: key.dotted))
            } else {
                entries.append(Entry(detail: detail, place: lastPointer, key: 0..<0, kind: Self.pointerPlace, dotted: false))
            }
        case .parameter(let name):
            var w = ProblemWriter()
            w.string(name)
            let start = places.count
            places.append(contentsOf: w.bytes)
            entries.append(Entry(detail: detail, place: start..<places.count, key: 0..<0, kind: Self.parameterPlace, dotted: false))
        }
    }

    /// Moves the pending key into `pointer` (before reading below it); returns the mark to pop to.
    mutating func settleKey() -> Int {
        let mark = pointer.count
        if let key {
            let body = base
            let limit = end
            let bound = FieldErrorList.encodedBound(key.range.count)
            pointer.append(contentsOf: repeatElement(0, count: bound))
            let n = pointer.withUnsafeMutableBufferPointer { out in
                FieldErrorList.encode(body, limit, key.range, dotted: key.dotted, into: out.baseAddress! + mark)
            }
            pointer.removeSubrange((mark &+ n)...)
            self.key = nil
        }
        return mark
    }

    /// The finished array, or nil when no entry was added. Keys are encoded as they are written,
    /// into room for their longest encoding (the array is rendered into the problem and dropped).
    func finished() -> [UInt8]? {
        guard !entries.isEmpty else { return nil }
        let detailKey: StaticString = "{\"detail\":"
        let pointerKey: StaticString = ",\"pointer\":\"#"
        let parameterKey: StaticString = ",\"parameter\":"
        var total = 1
        for e in entries {
            total &+= detailKey.utf8CodeUnitCount &+ e.detail.count &+ 2
            switch e.kind {
            case Self.pointerPlace: total &+= pointerKey.utf8CodeUnitCount &+ e.place.count &+ 1
            case Self.keyedPlace:
                total &+= pointerKey.utf8CodeUnitCount &+ e.place.count &+ 1 &+ FieldErrorList.encodedBound(e.key.count)
            case Self.parameterPlace: total &+= parameterKey.utf8CodeUnitCount &+ e.place.count
            default: break
            }
        }
        return places.withUnsafeBufferPointer { places in
            [UInt8](unsafeUninitializedCapacity: total) { out, written in
                var o = out.baseAddress!
                func put(_ p: UnsafePointer<UInt8>, _ n: Int) {
                    o.update(from: p, count: n)
                    o += n
                }
                func put(_ s: StaticString) { put(s.utf8Start, s.utf8CodeUnitCount) }
                o.pointee = UInt8(ascii: "[")
                o += 1
                for (k, e) in entries.enumerated() {
                    if k > 0 {
                        o.pointee = UInt8(ascii: ",")
                        o += 1
                    }
                    put(detailKey)
                    put(base + e.detail.lowerBound, e.detail.count)
                    if e.kind == Self.pointerPlace || e.kind == Self.keyedPlace {
                        put(pointerKey)
                        if !e.place.isEmpty { put(places.baseAddress! + e.place.lowerBound, e.place.count) }
                        if e.kind == Self.keyedPlace { o += FieldErrorList.encode(base, end, e.key, dotted: e.dotted, into: o) }
                        o.pointee = UInt8(ascii: "\"")
                        o += 1
                    } else if e.kind == Self.parameterPlace {
                        put(parameterKey)
                        put(places.baseAddress! + e.place.lowerBound, e.place.count)
                    }
                    o.pointee = UInt8(ascii: "}")
                    o += 1
                }
                o.pointee = UInt8(ascii: "]")
                written = o + 1 - out.baseAddress!
            }
        }
    }

    /// The reference tokens of a raw key without escapes, `~`/`/` escaped and the rest
    /// percent-encoded for a fragment; split on `.`, `[` and `]` when `dotted` (empty parts
    /// skipped). Writes them at `out`, which has room for `encodedBound`; returns their length.
    static func encode(_ base: UnsafePointer<UInt8>, _ limit: Int, _ key: Range<Int>, dotted: Bool,
                       into out: UnsafeMutablePointer<UInt8>) -> Int {
        if dotted, let n = encodePlainDotted(base, limit, key, into: out) { return n }
        var n = 0
        var k = key.lowerBound
        let end = key.upperBound
        guard dotted else {
            out[0] = UInt8(ascii: "/")
            n = 1
            while k < end {
                n = escape(base[k], out, n)
                k &+= 1
            }
            return n
        }
        while k < end {
            var b = base[k]
            if isSeparator(b) {
                k &+= 1
                continue
            }
            // One part: a `/`, then its bytes up to the next separator.
            out[n] = UInt8(ascii: "/")
            n &+= 1
            while true {
                if isPlain(b) {
                    out[n] = b
                    n &+= 1
                } else if isSeparator(b) {
                    break
                } else {
                    n = escape(b, out, n)
                }
                k &+= 1
                if k == end { break }
                b = base[k]
            }
        }
        return n
    }

    /// `encode` for the common dotted key (`items.0.name`): 4 to 16 bytes of letters, digits, `_`
    /// and `-` in parts joined by single dots, read and written 16 bytes at once (the source has 17
    /// readable bytes, the output room for `encodedBound`, at least 17); nil for any other key.
    @inline(__always)
    static func encodePlainDotted(_ base: UnsafePointer<UInt8>, _ limit: Int, _ key: Range<Int>,
                                  into out: UnsafeMutablePointer<UInt8>) -> Int? {
        let c = key.count
        guard c >= 4, c <= 16, key.lowerBound &+ 17 <= limit, base[key.lowerBound] != UInt8(ascii: "."),
              base[key.upperBound &- 1] != UInt8(ascii: ".") else { return nil }
        let v = UnsafeRawPointer(base + key.lowerBound).loadUnaligned(as: SIMD16<UInt8>.self)
        let next = UnsafeRawPointer(base + key.lowerBound + 1).loadUnaligned(as: SIMD16<UInt8>.self)
        let lanes = SIMD16<UInt8>(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
        let inKey = lanes .< SIMD16<UInt8>(repeating: UInt8(c))
        let dot = SIMD16<UInt8>(repeating: 0x2E)
        let isDot = v .== dot
        let letter = ((v | SIMD16<UInt8>(repeating: 0x20)) &- SIMD16<UInt8>(repeating: 0x61)) .< SIMD16<UInt8>(repeating: 26)
        let digit = (v &- SIMD16<UInt8>(repeating: 0x30)) .< SIMD16<UInt8>(repeating: 10)
        let mark = (v .== SIMD16<UInt8>(repeating: 0x5F)) .| (v .== SIMD16<UInt8>(repeating: 0x2D))
        // A lane in the key that is none of these, or a dot followed by a dot, sends the key the long way.
        let bad = inKey .& ((.!(letter .| digit .| mark .| isDot)) .| (isDot .& (next .== dot)))
        let halves = unsafeBitCast(bad, to: SIMD2<UInt64>.self)
        guard halves[0] | halves[1] == 0 else { return nil }
        out[0] = UInt8(ascii: "/")
        UnsafeMutableRawPointer(out + 1).storeBytes(of: v.replacing(with: SIMD16<UInt8>(repeating: 0x2F), where: isDot),
                                                    as: SIMD16<UInt8>.self)
        return c &+ 1
    }

    /// A byte a dotted key splits on.
    @inline(__always)
    static func isSeparator(_ b: UInt8) -> Bool {
        b == UInt8(ascii: ".") || b == UInt8(ascii: "[") || b == UInt8(ascii: "]")
    }

    /// `fragmentSafe` but for `.`, which a dotted key splits on.
    @inline(__always)
    static func isPlain(_ b: UInt8) -> Bool {
        // One mask word chosen without a branch: digits and letters alternate unpredictably.
        let word = b & 64 == 0 ? safeLow & ~(1 << 0x2E) : safeHigh
        return b < 128 && word >> UInt64(b & 63) & 1 != 0
    }

    /// Writes one byte of a reference token at `out[n]`, escaped; returns the new length.
    @inline(__always)
    static func escape(_ b: UInt8, _ out: UnsafeMutablePointer<UInt8>, _ n: Int) -> Int {
        if fragmentSafe(b) {
            out[n] = b
            return n &+ 1
        }
        switch b {
        case UInt8(ascii: "~"):
            out[n] = UInt8(ascii: "~")
            out[n &+ 1] = UInt8(ascii: "0")
            return n &+ 2
        case UInt8(ascii: "/"):
            out[n] = UInt8(ascii: "~")
            out[n &+ 1] = UInt8(ascii: "1")
            return n &+ 2
        default:
            out[n] = UInt8(ascii: "%")
            out[n &+ 1] = hex(b >> 4)
            out[n &+ 2] = hex(b & 0xF)
            return n &+ 3
        }
    }

    /// The most bytes `encode` may write for a key of `count` bytes: each byte percent-encoded,
    /// and a `/` before each.
    static func encodedBound(_ count: Int) -> Int { count &* 4 &+ 1 }

    /// Room for about as many entries as a field-error source of `n` bytes may hold.
    mutating func reserve(_ n: Int) {
        entries.reserveCapacity(n / 40)
        places.reserveCapacity(n / 4)
    }

    // MARK: Pointer segments

    /// Appends one reference token: `~` and `/` escaped (RFC 6901 §3), then every byte a URI fragment
    /// may not hold percent-encoded (RFC 6901 §6, RFC 3986 §3.5). Returns the length to pop back to.
    @discardableResult
    mutating func push(segment: UnsafeBufferPointer<UInt8>) -> Int {
        let mark = pointer.count
        pointer.append(UInt8(ascii: "/"))
        append(token: segment)
        return mark
    }

    /// Appends a token's bytes, escaped; runs of bytes that stand for themselves in one copy.
    private mutating func append(token: UnsafeBufferPointer<UInt8>) {
        var run = 0
        var k = 0
        while k < token.count {
            let b = token[k]
            if FieldErrorList.fragmentSafe(b) {
                k &+= 1
                continue
            }
            if k > run { pointer.append(contentsOf: UnsafeBufferPointer(rebasing: token[run..<k])) }
            switch b {
            case UInt8(ascii: "~"): pointer.append(UInt8(ascii: "~")); pointer.append(UInt8(ascii: "0"))
            case UInt8(ascii: "/"): pointer.append(UInt8(ascii: "~")); pointer.append(UInt8(ascii: "1"))
            default:
                pointer.append(UInt8(ascii: "%"))
                pointer.append(FieldErrorList.hex(b >> 4))
                pointer.append(FieldErrorList.hex(b & 0xF))
            }
            k &+= 1
            run = k
        }
        if k > run { pointer.append(contentsOf: UnsafeBufferPointer(rebasing: token[run..<k])) }
    }

    /// Appends an array index as a reference token.
    @discardableResult
    mutating func push(index: Int) -> Int {
        let mark = pointer.count
        pointer.append(UInt8(ascii: "/"))
        pointer.append(contentsOf: String(index).utf8)
        return mark
    }

    /// Appends the segments of a JSON string's content at `raw` (quotes excluded), unescaped first.
    @discardableResult
    mutating func push(_ base: UnsafePointer<UInt8>, name raw: Range<Int>, dotted: Bool) -> Int {
        let mark = pointer.count
        FieldErrorList.withUnescaped(base, raw) { text in
            if dotted { pushDotted(text) } else { push(segment: text) }
        }
        return mark
    }

    /// Splits a property path on `.`, `[` and `]` (Laravel's `items.0.name`, Spring's and Google's
    /// `items[0].name`, Stripe's `card[number]`) and appends each non-empty part.
    mutating func pushDotted(_ text: UnsafeBufferPointer<UInt8>) {
        var start = 0
        for k in 0...text.count {
            let atEnd = k == text.count
            let c = atEnd ? 0 : text[k]
            guard atEnd || c == UInt8(ascii: ".") || c == UInt8(ascii: "[") || c == UInt8(ascii: "]") else { continue }
            if k > start { push(segment: UnsafeBufferPointer(rebasing: text[start..<k])) }
            start = k &+ 1
        }
    }

    /// Appends a JSON Pointer the upstream already wrote (`/data/attributes/email`, JSON:API's
    /// `source.pointer`; `#/age`, RFC 9457's): its tokens are kept, bytes a fragment may not hold
    /// are percent-encoded. A pointer behind `#` is already a fragment (RFC 6901 §6): its
    /// `%XX` escapes stay; in a bare pointer (§5) a `%` is a percent sign like any other.
    mutating func pushPointer(_ base: UnsafePointer<UInt8>, _ raw: Range<Int>) {
        FieldErrorList.withUnescaped(base, raw) { text in
            var k = 0
            let fragment = k < text.count && text[k] == UInt8(ascii: "#")
            if fragment { k = 1 }
            while k < text.count {
                let b = text[k]
                if FieldErrorList.fragmentSafe(b) || b == UInt8(ascii: "~") || b == UInt8(ascii: "/") {
                    pointer.append(b)
                } else if fragment && b == UInt8(ascii: "%") && k &+ 2 < text.count && FieldErrorList.isHex(text[k &+ 1])
                            && FieldErrorList.isHex(text[k &+ 2]) {
                    // Already percent-encoded: kept as written.
                    pointer.append(b)
                } else {
                    pointer.append(UInt8(ascii: "%"))
                    pointer.append(FieldErrorList.hex(b >> 4))
                    pointer.append(FieldErrorList.hex(b & 0xF))
                }
                k &+= 1
            }
        }
    }

    /// Lends the unescaped bytes of a JSON string's content (quotes excluded).
    static func withUnescaped<R>(_ base: UnsafePointer<UInt8>, _ raw: Range<Int>, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        var escaped = false
        for k in raw where base[k] == UInt8(ascii: "\\") {
            escaped = true
            break
        }
        guard escaped else { return body(UnsafeBufferPointer(start: base + raw.lowerBound, count: raw.count)) }
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: raw.count) { out in
            let n = StringDecoder.decode(base, raw.lowerBound, raw.upperBound, into: out.baseAddress!)
            return body(UnsafeBufferPointer(start: out.baseAddress, count: n))
        }
    }

    /// Whether a byte stands for itself in a URI fragment (RFC 3986 §3.5: pchar, `/` and `?`),
    /// leaving out `~` and `/`, which a reference token escapes, and `%`, which always is encoded.
    @inline(__always)
    static func fragmentSafe(_ b: UInt8) -> Bool {
        let word = b & 64 == 0 ? safeLow : safeHigh
        return b < 128 && word >> UInt64(b & 63) & 1 != 0
    }

    /// `fragmentSafe` for bytes 0–63 (`!$&'()*+,-.` `0-9` `:;=?`) and 64–127 (`@`, letters, `_`), as bits.
    private static let safeLow: UInt64 = 0xAFFF7FD200000000
    private static let safeHigh: UInt64 = 0x07FFFFFE87FFFFFF

    /// Whether a byte is a hex digit (RFC 3986 §2.1's HEXDIG, either case).
    static func isHex(_ b: UInt8) -> Bool {
        b &- UInt8(ascii: "0") < 10 || (b | 0x20) &- UInt8(ascii: "a") < 6
    }

    static func hex(_ v: UInt8) -> UInt8 {
        v < 10 ? UInt8(ascii: "0") &+ v : UInt8(ascii: "A") &+ v &- 10
    }
}

/// Readers for the field-error shapes of common frameworks, over a body the scan has validated.
struct FieldErrorReader {
    let base: UnsafePointer<UInt8>
    var list: FieldErrorList

    init(_ base: UnsafePointer<UInt8>, count: Int) {
        self.base = base
        list = FieldErrorList(base, count: count)
    }

    /// The content of a raw string value (quotes excluded).
    func content(_ r: Range<Int>) -> Range<Int> { (r.lowerBound &+ 1)..<(r.upperBound &- 1) }

    func isString(_ r: Range<Int>) -> Bool { base[r.lowerBound] == UInt8(ascii: "\"") }
    func isObject(_ r: Range<Int>) -> Bool { base[r.lowerBound] == UInt8(ascii: "{") }
    func isArray(_ r: Range<Int>) -> Bool { base[r.lowerBound] == UInt8(ascii: "[") }

    /// A map of field → messages (Laravel, Rails, ASP.NET Core, DRF, JSend's `fail` data): each value
    /// a message, a list of messages, or (DRF's nested serializers) a nested map or a list of them.
    /// `dotted` splits keys on `.` and brackets (Laravel's `items.0.name`); DRF nests instead.
    /// `nonField` names the key whose messages point at the map itself (`non_field_errors`).
    mutating func map(_ object: Range<Int>, dotted: Bool, nonField: Bool) {
        if list.count == 0 { list.reserve(object.count) }
        _ = map(at: object.lowerBound, object.upperBound, dotted: dotted, nonField: nonField)
    }

    /// `map` over the object that opens at `i`, in a buffer that ends at `n`; returns the index
    /// just past it. Values are read as they are met, so each byte of a big map is walked once.
    mutating func map(at i: Int, _ n: Int, dotted: Bool, nonField: Bool) -> Int {
        let atTop = list.pointer.isEmpty
        var j = ScanCore.skipWhitespace(base, n, i &+ 1)
        guard base[j] == UInt8(ascii: "\"") else { return j &+ 1 }
        while true {
            let nameStart = j &+ 1
            var escaped = false
            let afterName = ValidJSON.stringEnd(base, n, nameStart, escaped: &escaped)
            let name = nameStart..<(afterName &- 1)
            j = ScanCore.skipWhitespace(base, n, ScanCore.skipWhitespace(base, n, afterName) &+ 1)
            if nonField && isNonField(name) {
                let end = ValidJSON.end(base, n, j)
                messages(j..<end, place: atTop ? .none : .pointer)
                j = end
            } else {
                var key = name
                // System.Text.Json names a member by its JSON path (`$.items[0].name`), and ASP.NET
                // Core's validation problems carry it so.
                if dotted && key.count > 0 && base[key.lowerBound] == UInt8(ascii: "$") { key = (key.lowerBound &+ 1)..<key.upperBound }
                if escaped {
                    let mark = list.push(base, name: key, dotted: dotted)
                    j = nested(at: j, n, dotted: dotted)
                    list.pointer.removeSubrange(mark...)
                } else {
                    // Encoded only as the entries are written, unless something nests below it.
                    list.key = (key, dotted)
                    j = nested(at: j, n, dotted: dotted)
                    list.key = nil
                }
            }
            j = ScanCore.skipWhitespace(base, n, j)
            guard base[j] == UInt8(ascii: ",") else { return j &+ 1 }
            j = ScanCore.skipWhitespace(base, n, j &+ 1)
        }
    }

    /// One map value at `i`: messages, a nested map, or a list of nested maps (DRF's `many=True`);
    /// returns the index just past it.
    private mutating func nested(at i: Int, _ n: Int, dotted: Bool) -> Int {
        switch base[i] {
        case UInt8(ascii: "\""):
            let end = ValidJSON.stringEnd(base, n, i &+ 1)
            list.add(base, detail: i..<end, place: .pointer)
            return end
        case UInt8(ascii: "{"):
            let mark = list.settleKey()
            defer { list.pointer.removeSubrange(mark...) }
            return map(at: i, n, dotted: dotted, nonField: true)
        case UInt8(ascii: "["):
            var j = ScanCore.skipWhitespace(base, n, i &+ 1)
            guard base[j] != UInt8(ascii: "]") else { return j &+ 1 }
            var index = 0
            while true {
                let end: Int
                switch base[j] {
                case UInt8(ascii: "\""):
                    end = ValidJSON.stringEnd(base, n, j &+ 1)
                    list.add(base, detail: j..<end, place: .pointer)
                case UInt8(ascii: "{"):
                    end = ValidJSON.end(base, n, j)
                    if let message = member(j..<end, Self.messageKeys) {
                        // DRF's `get_full_details()`: `{"message": …, "code": …}` per message.
                        list.add(base, detail: message, place: .pointer)
                    } else {
                        let pending = list.key
                        let mark = list.settleKey()
                        list.push(index: index)
                        _ = map(at: j, n, dotted: dotted, nonField: true)
                        list.pointer.removeSubrange(mark...)
                        list.key = pending
                    }
                default:
                    end = ValidJSON.end(base, n, j)
                }
                index &+= 1
                j = ScanCore.skipWhitespace(base, n, end)
                guard base[j] == UInt8(ascii: ",") else { return j &+ 1 }
                j = ScanCore.skipWhitespace(base, n, j &+ 1)
            }
        default:
            return ValidJSON.end(base, n, i)
        }
    }

    /// Whether `object` is a field map as DRF writes one: every value a list of messages, a nested
    /// map, or a list of nested maps, down to strings; any other value (a number, a flag, `null`)
    /// says the body is something else.
    func isFieldMap(_ object: Range<Int>, depth: Int = 0) -> Bool {
        guard depth < 32 else { return false }
        var ok = true
        var any = false
        ValidJSON.walk(base, object) { _, _, value in
            any = true
            ok = self.isFieldValue(value, depth: depth)
            return ok
        }
        return ok && any
    }

    private func isFieldValue(_ value: Range<Int>, depth: Int) -> Bool {
        if isObject(value) { return isFieldMap(value, depth: depth &+ 1) }
        guard isArray(value) else { return false }
        var ok = true
        ValidJSON.elements(base, value) { item in
            ok = self.isString(item) || (self.isObject(item) && (ValidJSON.isEmptyObject(self.base, item)
                                                                 || self.isFieldMap(item, depth: depth &+ 1)))
            return ok
        }
        return ok
    }

    /// Adds every string in `value` (one message, or a list of them) at `place`.
    mutating func messages(_ value: Range<Int>, place: FieldPlace) {
        if isString(value) { return list.add(base, detail: value, place: place) }
        guard isArray(value) else { return }
        ValidJSON.elements(base, value) { item in
            self.list.add(self.base, detail: item, place: place)
            return true
        }
    }

    /// A list of error objects (Spring's `errors`, express-validator, Microsoft's and Google's
    /// details, FastAPI's `detail`, JSON:API, ABP's `validationErrors`), each with a message under
    /// one of `messageKeys` (or `messageKey`) and its field under one of the place keys; an item
    /// that is a bare string is a message tied to no field.
    mutating func list(_ array: Range<Int>, messageKey: String? = nil, fieldKey: String? = nil, requirePlace: Bool = false) {
        let messageKeys = messageKey.map { [$0] } ?? Self.messageKeys
        if list.count == 0 { list.reserve(array.count) }
        ValidJSON.elements(base, array) { item in
            if self.isString(item) {
                if !requirePlace { self.list.add(self.base, detail: item, place: .none) }
                return true
            }
            guard self.isObject(item), let message = self.member(item, messageKeys) else { return true }
            let place = self.place(of: item, fieldKey: fieldKey)
            if requirePlace, case .none = place { return true }
            self.list.add(self.base, detail: message, place: place)
            self.list.pointer.removeAll(keepingCapacity: true)
            return true
        }
    }

    /// Where one error object points: FastAPI's `loc`, JSON:API's `source`, an RFC 9457 `pointer`,
    /// ABP's `members`, or a property path under `field`, `path`, `target`, `param` or `property`
    /// (express-validator's `location` says when it is a parameter rather than a body member).
    private mutating func place(of item: Range<Int>, fieldKey: String?) -> FieldPlace {
        list.pointer.removeAll(keepingCapacity: true)
        if let fieldKey {
            guard let f = member(item, [fieldKey]) else { return .none }
            return field(f)
        }
        if let loc = member(item, ["loc"]), isArray(loc) { return fastAPI(loc) }
        if let source = member(item, ["source"]), isObject(source) {
            if let p = member(source, ["pointer"]), isString(p) {
                list.pushPointer(base, content(p))
                return .pointer
            }
            if let p = member(source, ["parameter"]), isString(p) { return .parameter(text(p)) }
            return .none
        }
        if let p = member(item, ["pointer"]), isString(p) {
            list.pushPointer(base, content(p))
            return .pointer
        }
        if let members = member(item, ["members"]), isArray(members) {
            var first: Range<Int>?
            ValidJSON.elements(base, members) { m in
                first = m
                return false
            }
            if let first { return field(first) }
            return .none
        }
        guard let f = member(item, ["field", "path", "target", "param", "property"]) else { return .none }
        if let location = member(item, ["location"]), isString(location) {
            switch text(location) {
            case "query", "params", "headers", "cookies": return isString(f) ? .parameter(text(f)) : .none
            default: break
            }
        }
        return field(f)
    }

    /// A property path string as a pointer; anything else points nowhere.
    private mutating func field(_ f: Range<Int>) -> FieldPlace {
        guard isString(f) else { return .none }
        list.push(base, name: content(f), dotted: true)
        return .pointer
    }

    /// FastAPI (pydantic) `loc`: `["body", "items", 0, "name"]` points into the body; a first step
    /// of `query`, `path`, `header` or `cookie` names a parameter.
    private mutating func fastAPI(_ loc: Range<Int>) -> FieldPlace {
        var steps: [Range<Int>] = []
        ValidJSON.elements(base, loc) { step in
            steps.append(step)
            return true
        }
        guard let first = steps.first, isString(first) else { return .none }
        switch text(first) {
        case "body":
            for step in steps.dropFirst() {
                if isString(step) {
                    list.push(base, name: content(step), dotted: false)
                } else {
                    list.push(segment: UnsafeBufferPointer(start: base + step.lowerBound, count: step.count))
                }
            }
            return .pointer
        case "query", "path", "header", "cookie":
            let names = steps.dropFirst().map { isString($0) ? text($0) : String(decoding: UnsafeBufferPointer(start: base + $0.lowerBound, count: $0.count), as: UTF8.self) }
            return names.isEmpty ? .none : .parameter(names.joined(separator: "."))
        default:
            return .none
        }
    }

    /// The keys an error object's message goes by, most specific first.
    static let messageKeys = ["message", "msg", "defaultMessage", "description", "detail", "title"]

    /// The first of `names` present as a member of `object` (a string or any value).
    func member(_ object: Range<Int>, _ names: [String]) -> Range<Int>? {
        var found: [Range<Int>?] = Array(repeating: nil, count: names.count)
        ValidJSON.walk(base, object) { nameStart, nameEnd, value in
            // Names compared as text, escapes decoded (`"m\u0073g"` is `msg`).
            FieldErrorList.withUnescaped(self.base, nameStart..<nameEnd) { text in
                for (k, name) in names.enumerated() where found[k] == nil && name.utf8.count == text.count {
                    if name.utf8.elementsEqual(text) { found[k] = value }
                }
            }
            return true
        }
        for f in found {
            if let f, !(isString(f) && f.count == 2) { return f }
        }
        return nil
    }

    /// Whether a member name is DRF's `non_field_errors`.
    private func isNonField(_ name: Range<Int>) -> Bool {
        FieldErrorList.withUnescaped(base, name) { "non_field_errors".utf8.elementsEqual($0) }
    }

    /// The text of a raw string value.
    func text(_ r: Range<Int>) -> String { Envelope.string(base, r) }
}

extension ValidJSON {
    /// Whether the object spanning `object` has no member.
    static func isEmptyObject(_ base: UnsafePointer<UInt8>, _ object: Range<Int>) -> Bool {
        ScanCore.skipWhitespace(base, object.upperBound, object.lowerBound &+ 1) == object.upperBound &- 1
    }

    /// Calls `visit` with each element of the array spanning `array`; stops when it returns false.
    static func elements(_ base: UnsafePointer<UInt8>, _ array: Range<Int>, _ visit: (Range<Int>) -> Bool) {
        let n = array.upperBound
        var i = ScanCore.skipWhitespace(base, n, array.lowerBound &+ 1)
        guard base[i] != UInt8(ascii: "]") else { return }
        while true {
            let valueEnd = end(base, n, i)
            guard visit(i..<valueEnd) else { return }
            i = ScanCore.skipWhitespace(base, n, valueEnd)
            guard base[i] == UInt8(ascii: ",") else { return }
            i = ScanCore.skipWhitespace(base, n, i &+ 1)
        }
    }
}
