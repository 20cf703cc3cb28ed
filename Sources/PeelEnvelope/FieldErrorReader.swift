// Readers for the field-error shapes of common frameworks: maps of field → messages and lists of
// error objects, walked once over a body the strict scan has validated, into a `FieldErrorList`.

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
        _ = map(at: object.lowerBound, object.upperBound, dotted: dotted, nonField: nonField, depth: 0)
    }

    /// How deep field maps nest before the rest is skipped: nested serializers go a few levels, and
    /// each level is walked twice (once for a message, once as a map).
    static let maxDepth = 16

    /// `map` over the object that opens at `i`, in a buffer that ends at `n`; returns the index
    /// just past it. Values are read as they are met, so each byte of a big map is walked once.
    mutating func map(at i: Int, _ n: Int, dotted: Bool, nonField: Bool, depth: Int) -> Int {
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
                    j = nested(at: j, n, dotted: dotted, depth: depth)
                    list.pointer.removeSubrange(mark...)
                } else {
                    // Encoded only as the entries are written, unless something nests below it.
                    list.key = (key, dotted)
                    j = nested(at: j, n, dotted: dotted, depth: depth)
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
    private mutating func nested(at i: Int, _ n: Int, dotted: Bool, depth: Int) -> Int {
        switch base[i] {
        case UInt8(ascii: "\""):
            let end = ValidJSON.stringEnd(base, n, i &+ 1)
            list.add(base, detail: i..<end, place: .pointer)
            return end
        case UInt8(ascii: "{"):
            guard depth < Self.maxDepth else { return ValidJSON.end(base, n, i) }
            let mark = list.settleKey()
            defer { list.pointer.removeSubrange(mark...) }
            return map(at: i, n, dotted: dotted, nonField: true, depth: depth &+ 1)
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
                    let (message, after) = messageMember(at: j, n)
                    end = after
                    if let message {
                        // DRF's `get_full_details()`: `{"message": …, "code": …}` per message.
                        list.add(base, detail: message, place: .pointer)
                    } else if depth < Self.maxDepth {
                        let pending = list.key
                        let mark = list.settleKey()
                        list.push(index: index)
                        _ = map(at: j, n, dotted: dotted, nonField: true, depth: depth &+ 1)
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

    /// The message of the error object that opens at `i` (its first `messageKeys` member holding a
    /// non-empty string, by the keys' order), and the index just past the object: one walk.
    private func messageMember(at i: Int, _ n: Int) -> (Range<Int>?, Int) {
        var best: (rank: Int, value: Range<Int>)?
        var j = ScanCore.skipWhitespace(base, n, i &+ 1)
        guard base[j] == UInt8(ascii: "\"") else { return (nil, j &+ 1) }
        while true {
            let nameStart = j &+ 1
            let afterName = ValidJSON.stringEnd(base, n, nameStart)
            let valueStart = ScanCore.skipWhitespace(base, n, ScanCore.skipWhitespace(base, n, afterName) &+ 1)
            let valueEnd = ValidJSON.end(base, n, valueStart)
            if base[valueStart] == UInt8(ascii: "\""), valueEnd &- valueStart > 2 {
                let rank = FieldErrorList.withUnescaped(base, nameStart..<(afterName &- 1)) { name in
                    Self.messageKeys.firstIndex { $0.utf8.elementsEqual(name) }
                }
                if let rank, rank < (best?.rank ?? Int.max) { best = (rank, valueStart..<valueEnd) }
            }
            j = ScanCore.skipWhitespace(base, n, valueEnd)
            guard base[j] == UInt8(ascii: ",") else { return (best?.value, j &+ 1) }
            j = ScanCore.skipWhitespace(base, n, j &+ 1)
        }
    }

    /// Whether `object` is a field map as DRF writes one: every value a list of messages, a nested
    /// map, or a list of nested maps, down to strings; any other value (a number, a flag, `null`)
    /// says the body is something else.
    func isFieldMap(_ object: Range<Int>, depth: Int = 0) -> Bool {
        // Deeper levels are not read (`maxDepth`), so they do not decide what the body is.
        guard depth < Self.maxDepth else { return true }
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
