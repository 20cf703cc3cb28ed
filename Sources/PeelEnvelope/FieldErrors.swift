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

/// The `errors` array under construction, and the JSON Pointer of the member being read.
struct FieldErrorList {
    /// `[{…},{…}` so far; `]` is added by `finished`.
    private(set) var bytes: [UInt8] = []
    /// How many entries.
    private(set) var count = 0
    /// The first entry's message, raw (quotes included), for a problem whose body has no message.
    private(set) var firstDetail: Range<Int>?
    /// The pointer of the member being read, percent-encoded for a URI fragment (RFC 6901 §6),
    /// without the leading `#`.
    var pointer: [UInt8] = []

    /// Appends one entry whose message is the raw JSON string at `detail` (quotes included), copied
    /// as the upstream wrote it; a value that is not a string is not a message and is skipped.
    mutating func add(_ base: UnsafePointer<UInt8>, detail: Range<Int>, place: FieldPlace) {
        // An empty message says nothing, like an envelope's (`""` is two bytes with its quotes).
        guard base[detail.lowerBound] == UInt8(ascii: "\""), detail.count > 2 else { return }
        bytes.append(count == 0 ? UInt8(ascii: "[") : UInt8(ascii: ","))
        append("{\"detail\":")
        bytes.append(contentsOf: UnsafeBufferPointer(start: base + detail.lowerBound, count: detail.count))
        switch place {
        case .none: break
        case .pointer:
            append(",\"pointer\":\"#")
            bytes.append(contentsOf: pointer)
            bytes.append(UInt8(ascii: "\""))
        case .parameter(let name):
            var w = ProblemWriter()
            w.string(name)
            append(",\"parameter\":")
            bytes.append(contentsOf: w.bytes)
        }
        bytes.append(UInt8(ascii: "}"))
        if count == 0 { firstDetail = detail }
        count &+= 1
    }

    /// The finished array, or nil when no entry was added.
    func finished() -> [UInt8]? {
        count == 0 ? nil : bytes + [UInt8(ascii: "]")]
    }

    private mutating func append(_ s: StaticString) {
        s.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    // MARK: Pointer segments

    /// Appends one reference token: `~` and `/` escaped (RFC 6901 §3), then every byte a URI fragment
    /// may not hold percent-encoded (RFC 6901 §6, RFC 3986 §3.5). Returns the length to pop back to.
    @discardableResult
    mutating func push<C: Collection>(segment: C) -> Int where C.Element == UInt8 {
        let mark = pointer.count
        pointer.append(UInt8(ascii: "/"))
        for b in segment {
            switch b {
            case UInt8(ascii: "~"): pointer.append(UInt8(ascii: "~")); pointer.append(UInt8(ascii: "0"))
            case UInt8(ascii: "/"): pointer.append(UInt8(ascii: "~")); pointer.append(UInt8(ascii: "1"))
            default:
                if FieldErrorList.fragmentSafe(b) {
                    pointer.append(b)
                } else {
                    pointer.append(UInt8(ascii: "%"))
                    pointer.append(FieldErrorList.hex(b >> 4))
                    pointer.append(FieldErrorList.hex(b & 0xF))
                }
            }
        }
        return mark
    }

    /// Appends an array index as a reference token.
    @discardableResult
    mutating func push(index: Int) -> Int {
        push(segment: Array(String(index).utf8))
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
    /// are percent-encoded.
    mutating func pushPointer(_ base: UnsafePointer<UInt8>, _ raw: Range<Int>) {
        FieldErrorList.withUnescaped(base, raw) { text in
            var k = 0
            if k < text.count && text[k] == UInt8(ascii: "#") { k = 1 }
            while k < text.count {
                let b = text[k]
                if FieldErrorList.fragmentSafe(b) || b == UInt8(ascii: "~") || b == UInt8(ascii: "/") {
                    pointer.append(b)
                } else if b == UInt8(ascii: "%") && k &+ 2 < text.count {
                    // Already percent-encoded (a `#/…` pointer is a fragment): kept as written.
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
    static func fragmentSafe(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"),
             UInt8(ascii: "'"), UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","),
             UInt8(ascii: ";"), UInt8(ascii: "="), UInt8(ascii: ":"), UInt8(ascii: "@"), UInt8(ascii: "?"):
            return true
        default:
            return false
        }
    }

    private static func hex(_ v: UInt8) -> UInt8 {
        v < 10 ? UInt8(ascii: "0") &+ v : UInt8(ascii: "A") &+ v &- 10
    }
}

/// Readers for the field-error shapes of common frameworks, over a body the scan has validated.
struct FieldErrorReader {
    let base: UnsafePointer<UInt8>
    var list = FieldErrorList()

    init(_ base: UnsafePointer<UInt8>) { self.base = base }

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
        let atTop = list.pointer.isEmpty
        ValidJSON.walk(base, object) { nameStart, nameEnd, value in
            let name = nameStart..<nameEnd
            if nonField && self.isNonField(name) {
                self.messages(value, place: atTop ? .none : .pointer)
                return true
            }
            var key = name
            // System.Text.Json names a member by its JSON path (`$.items[0].name`), ASP.NET Core's
            // validation problems carry it so.
            if dotted && key.count > 0 && self.base[key.lowerBound] == UInt8(ascii: "$") { key = (key.lowerBound &+ 1)..<key.upperBound }
            let mark = self.list.push(self.base, name: key, dotted: dotted)
            self.nested(value, dotted: dotted)
            self.list.pointer.removeSubrange(mark...)
            return true
        }
    }

    /// One map value: messages, a nested map, or a list of nested maps (DRF's `many=True`).
    private mutating func nested(_ value: Range<Int>, dotted: Bool) {
        if isString(value) { return list.add(base, detail: value, place: .pointer) }
        if isObject(value) { return map(value, dotted: dotted, nonField: true) }
        guard isArray(value) else { return }
        var index = 0
        ValidJSON.elements(base, value) { item in
            if self.isString(item) {
                self.list.add(self.base, detail: item, place: .pointer)
            } else if self.isObject(item) {
                if let message = self.member(item, Self.messageKeys) {
                    // DRF's `get_full_details()`: `{"message": …, "code": …}` per message.
                    self.list.add(self.base, detail: message, place: .pointer)
                } else {
                    let mark = self.list.push(index: index)
                    self.map(item, dotted: dotted, nonField: true)
                    self.list.pointer.removeSubrange(mark...)
                }
            }
            index &+= 1
            return true
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
            let n = nameEnd &- nameStart
            for (k, name) in names.enumerated() where found[k] == nil && name.utf8.count == n {
                if name.utf8.elementsEqual(UnsafeBufferPointer(start: self.base + nameStart, count: n)) { found[k] = value }
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
        "non_field_errors".utf8.elementsEqual(UnsafeBufferPointer(start: base + name.lowerBound, count: name.count))
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
