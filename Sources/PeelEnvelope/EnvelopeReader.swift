// Applying one dialect to one envelope object the scan accepted: the code, the message, the
// extras, the success rule and the payload, each read where the dialect says it is.

/// Why an object that is valid JSON is still not an envelope of the dialect.
struct EnvelopeFault: Error {
    /// Peel's words (`code missing`, `error.message is not a string`).
    var reason: String
}

/// Applies one dialect to one object the scan accepted: code, message, extras, predicate, payload.
struct EnvelopeReader {
    let base: UnsafePointer<UInt8>
    /// The envelope object's bounds.
    let object: Range<Int>
    /// Its members the dialect names.
    let members: UnsafePointer<EnvelopeMembers>
    let compiled: CompiledDialect

    var dialect: Dialect { compiled.dialect }

    func read() throws(EnvelopeFault) -> Envelope {
        let code = try readCode()
        let message = try readMessage()
        var extras: [UpstreamMember] = []
        for (k, path) in dialect.extras.enumerated() {
            // `null` is absence here too: ABP's `"targetUrl":null` says nothing.
            if let r = try value(path, slot: compiled.extras[k]), base[r.lowerBound] != UInt8(ascii: "n") {
                extras.append(UpstreamMember(name: path.description, raw: Array(UnsafeBufferPointer(start: base + r.lowerBound, count: r.count))))
            }
        }
        let judgement: Envelope.Judgement
        switch try succeeded(code) {
        case true?: judgement = .success(try payload())
        case false?: judgement = .failure
        case nil: judgement = .error
        }
        var flagged = false
        if let path = dialect.authFlag, let r = try value(path, slot: compiled.authFlag) {
            // Only `true` says so: ABP writes `false` on every other answer.
            flagged = base[r.lowerBound] == UInt8(ascii: "t")
        }
        return Envelope(code: code, message: message, extras: extras, judgement: judgement, object: object, authFlagged: flagged)
    }

    /// The raw value at `path`, whose head is in `slot`; nil when absent. A step into a value of
    /// the wrong kind is a fault when `strict` (the payload's path: its bytes would be lost), else
    /// the member is absent (`error.code` when `error` is `false` or a string); so is an index past
    /// an array's end.
    func value(_ path: MemberPath, slot: Int?, strict: Bool = false) throws(EnvelopeFault) -> Range<Int>? {
        guard let slot, let span = members.pointee[slot] else { return nil }
        var r = span.value
        for (k, step) in path.steps.enumerated().dropFirst() {
            // `"error": null` holds no `error.code`: null is absence (Strapi sends `"data": null`).
            if base[r.lowerBound] == UInt8(ascii: "n") { return nil }
            if let index = path.index(k) {
                guard base[r.lowerBound] == UInt8(ascii: "[") else {
                    if !strict { return nil }
                    throw EnvelopeFault(reason: "\(path.steps[..<k].joined(separator: ".")) is not an array")
                }
                guard let element = ValidJSON.element(base, r, index) else { return nil }
                r = element
                continue
            }
            guard base[r.lowerBound] == UInt8(ascii: "{") else {
                if !strict { return nil }
                throw EnvelopeFault(reason: "\(path.steps[..<k].joined(separator: ".")) is not an object")
            }
            switch ValidJSON.member(base, r, step) {
            case .absent: return nil
            case .duplicate: throw EnvelopeFault(reason: "duplicate member \"\(path.steps[...k].joined(separator: "."))\"")
            case .found(let v): r = v
            }
        }
        return r
    }

    /// The first present code among the dialect's code paths.
    func readCode() throws(EnvelopeFault) -> EnvelopeCode? {
        for (k, path) in dialect.codes.enumerated() {
            guard let r = try value(path, slot: compiled.codes[k]) else { continue }
            let first = base[r.lowerBound]
            // Jackson and most serialisers write an unset code as null: it is absent.
            if first == UInt8(ascii: "n") { continue }
            if first == UInt8(ascii: "\"") { return .string(Envelope.string(base, r)) }
            if first == UInt8(ascii: "-") || first &- UInt8(ascii: "0") < 10,
               let n = Envelope.integer(UnsafeBufferPointer(start: base + r.lowerBound, count: r.count)) {
                return .integer(n)
            }
            throw EnvelopeFault(reason: "\(path) is not an integer or a string")
        }
        return nil
    }

    func readMessage() throws(EnvelopeFault) -> String? {
        for (k, path) in dialect.messages.enumerated() {
            guard let r = try value(path, slot: compiled.messages[k]) else { continue }
            let first = base[r.lowerBound]
            if first == UInt8(ascii: "n") { continue }
            guard first == UInt8(ascii: "\"") else { throw EnvelopeFault(reason: "\(path) is not a string") }
            // An empty message says nothing: the next path, or Peel's own text.
            let text = Envelope.string(base, r)
            if !text.isEmpty { return text }
        }
        return nil
    }

    /// true: success; false: failure; nil: JSend's `error` (the server failed).
    func succeeded(_ code: EnvelopeCode?) throws(EnvelopeFault) -> Bool? {
        switch dialect.success {
        case .code:
            guard let code else { throw EnvelopeFault(reason: dialect.codes.map(\.description).joined(separator: " or ") + " missing") }
            return dialect.successCodes.contains(code)
        case .codeOrAbsent:
            guard let code else { return true }
            return dialect.successCodes.contains(code)
        case .httpStatus:
            // The judge reads an envelope under this rule only from a non-2xx, which fails whatever it says.
            return true
        case .flag(let name):
            guard let r = try value(name, slot: compiled.rule) else {
                throw EnvelopeFault(reason: "\(name) missing")
            }
            switch base[r.lowerBound] {
            case UInt8(ascii: "t"): return true
            case UInt8(ascii: "f"): return false
            default: throw EnvelopeFault(reason: "\(name) is not a boolean")
            }
        case .status(let name):
            guard let r = try value(name, slot: compiled.rule) else {
                throw EnvelopeFault(reason: "\(name) missing")
            }
            guard base[r.lowerBound] == UInt8(ascii: "\"") else { throw EnvelopeFault(reason: "\(name) is not a string") }
            switch Envelope.string(base, r) {
            case "success": return true
            case "fail": return false
            case "error": return nil
            default: throw EnvelopeFault(reason: "\(name) is not success, fail or error")
            }
        case .errorMember(let name):
            guard let r = try value(name, slot: compiled.rule) else { return true }
            return isNothing(r)
        }
    }

    /// Whether a raw value says nothing: `null`, `false`, `""`, `{}` or `[]` (with any inner whitespace).
    func isNothing(_ r: Range<Int>) -> Bool {
        switch base[r.lowerBound] {
        case UInt8(ascii: "n"), UInt8(ascii: "f"): return true
        case UInt8(ascii: "\""): return r.count == 2
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            return ScanCore.skipWhitespace(base, r.upperBound, r.lowerBound &+ 1) == r.upperBound &- 1
        default: return false
        }
    }

    /// What a success sends: the payload member, or the rest of the object (SPEC: no byte dropped
    /// without a rule), or nothing when the envelope holds only its own members.
    func payload() throws(EnvelopeFault) -> Payload {
        guard case .member(let path) = dialect.payload else { return rest(keeping: nil) }
        if let r = try value(path, slot: compiled.payload, strict: true) {
            if dialect.siblings == .keep && others() > 0 { return rest(keeping: compiled.payload) }
            return .range(r)
        }
        // A path's head without its last step (`result` without `result.data`) is not the
        // payload, so it stays in the rest like any member the dialect does not name.
        if let slot = compiled.payload, members.pointee[slot] != nil { return rest(keeping: slot) }
        return others() > 0 ? rest(keeping: nil) : .none
    }

    /// How many members a rest-of-object answer would hold besides the payload member.
    func others() -> Int {
        var taken = 0
        for k in compiled.cuts where members.pointee[k] != nil { taken &+= 1 }
        if let p = compiled.payload, !compiled.cuts.contains(p), members.pointee[p] != nil { taken &+= 1 }
        return members.pointee.count &- taken
    }

    /// The object minus every envelope member but `kept`, each remaining member's bytes verbatim
    /// and in the upstream's order; the object's own bytes when nothing is taken out.
    func rest(keeping kept: Int?) -> Payload {
        var cuts: [Range<Int>] = []
        for k in compiled.cuts where k != kept {
            if let s = members.pointee[k] { cuts.append(s.keyStart..<s.value.upperBound) }
        }
        if cuts.isEmpty { return members.pointee.count == 0 ? .none : .range(object) }
        cuts.sort { $0.lowerBound < $1.lowerBound }
        var runs: [Range<Int>] = []
        var cursor = object.lowerBound &+ 1
        for cut in cuts {
            if let run = trimmed(cursor..<cut.lowerBound) { runs.append(run) }
            cursor = cut.upperBound
        }
        if let run = trimmed(cursor..<(object.upperBound &- 1)) { runs.append(run) }
        return runs.isEmpty ? .none : .rest(RestOfObject(runs: runs))
    }

    /// Appends the members between two envelope members: the run without the separators that
    /// joined it to them, after a comma when something came before.
    /// `run` without the whitespace and the comma at either end; nil when nothing else is left.
    private func trimmed(_ run: Range<Int>) -> Range<Int>? {
        var a = run.lowerBound
        var b = run.upperBound
        a = ScanCore.skipWhitespace(base, b, a)
        if a < b && base[a] == UInt8(ascii: ",") { a = ScanCore.skipWhitespace(base, b, a &+ 1) }
        while b > a && base[b &- 1] <= 0x20 { b &-= 1 }
        if b > a && base[b &- 1] == UInt8(ascii: ",") {
            b &-= 1
            while b > a && base[b &- 1] <= 0x20 { b &-= 1 }
        }
        return a < b ? a..<b : nil
    }
}
