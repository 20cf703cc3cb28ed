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
/// are noted as ranges while the body is walked and written out once, into room for each key's
/// longest encoding: a validation answer may hold thousands, and a field map's key is encoded only
/// as it is written. The array is bounded (`maxEntries`, `maxBytes`); what is past it is counted.
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
    /// Field errors left out past `maxEntries` or `maxBytes`, for the problem to say so.
    private(set) var omitted = 0
    /// The finished array's size so far, at most (each key at its longest encoding).
    private var projected = 2
    /// The most entries one problem carries: a field's messages are meant for a form, and a body
    /// could otherwise name a long key in front of very many messages.
    static let maxEntries = 10_000
    /// The most bytes the `errors` array may take (each entry repeats its pointer).
    static let maxBytes = 1 << 20
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
        var size = 12 &+ detail.count
        switch place {
        case .none: break
        case .pointer: size &+= 14 &+ (pointerChanged ? pointer.count : lastPointer.count) &+ (key.map { Self.encodedBound($0.range.count) } ?? 0)
        case .parameter(let name): size &+= 15 &+ name.utf8.count &* 6
        }
        guard entries.count < Self.maxEntries, projected &+ size <= Self.maxBytes else {
            omitted &+= 1
            return
        }
        projected &+= size
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
        guard let key else { return pointer.count }
        self.key = nil
        return append(UnsafeBufferPointer(start: base + key.range.lowerBound, count: key.range.count), dotted: key.dotted)
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
        append(segment, dotted: false)
    }

    /// Appends an array index as a reference token.
    @discardableResult
    mutating func push(index: Int) -> Int {
        let mark = pointer.count
        pointer.append(UInt8(ascii: "/"))
        pointer.append(contentsOf: String(index).utf8)
        return mark
    }

    /// Appends the tokens of a JSON string's content at `raw` (quotes excluded), unescaped first;
    /// `dotted` splits a property path on `.`, `[` and `]` (Laravel's `items.0.name`, Spring's and
    /// Google's `items[0].name`, Stripe's `card[number]`).
    @discardableResult
    mutating func push(_ base: UnsafePointer<UInt8>, name raw: Range<Int>, dotted: Bool) -> Int {
        FieldErrorList.withUnescaped(base, raw) { append($0, dotted: dotted) }
    }

    /// Appends `text`'s tokens as `encode` writes them (the one encoder of keys); returns the mark.
    private mutating func append(_ text: UnsafeBufferPointer<UInt8>, dotted: Bool) -> Int {
        let mark = pointer.count
        guard let source = text.baseAddress else {
            if !dotted { pointer.append(UInt8(ascii: "/")) }
            return mark
        }
        pointer.append(contentsOf: repeatElement(0, count: FieldErrorList.encodedBound(text.count)))
        let n = pointer.withUnsafeMutableBufferPointer { out in
            FieldErrorList.encode(source, text.count, 0..<text.count, dotted: dotted, into: out.baseAddress! + mark)
        }
        pointer.removeSubrange((mark &+ n)...)
        return mark
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
