/// The three envelope members, read from a body that passed the strict scan.
struct Envelope: Equatable {
    /// The business code.
    var code: Int64
    /// The message, when present and non-empty.
    var message: String?
    /// Byte range of data's raw value, when present.
    var data: Range<Int>?

    /// Reads the envelope from a whole body; nil when the body is not a well-formed envelope.
    static func read(_ body: UnsafeBufferPointer<UInt8>, config: EnvelopeConfig) -> Envelope? {
        var members = EnvelopeMembers()
        // Only the pieces the scan needs go into the closures; capturing the whole config copies it.
        let maxDepth = config.maxDepth
        let scanned = EnvelopeNames.with(code: config.codeField, message: config.messageField, data: config.dataField) { names in
            ScanCore.run(body, maxDepth: maxDepth, names: names, members: &members)
        }
        guard scanned, let base = body.baseAddress,
            let codeRange = members.code,
            let code = integer(base, codeRange)
        else { return nil }
        var message: String?
        if let range = members.message {
            guard base[range.lowerBound] == UInt8(ascii: "\"") else { return nil }
            let decoded = string(base, range)
            // An empty message says nothing, so the client gets Peel's own text instead.
            message = decoded.isEmpty ? nil : decoded
        }
        return Envelope(code: code, message: message, data: members.data)
    }

    /// The code in a validated raw value: a JSON integer, or a string holding exactly one.
    static func integer(_ base: UnsafePointer<UInt8>, _ range: Range<Int>) -> Int64? {
        guard base[range.lowerBound] == UInt8(ascii: "\"") else {
            return integer(UnsafeBufferPointer(start: base + range.lowerBound, count: range.count))
        }
        let start = range.lowerBound + 1
        let end = range.upperBound - 1
        // "\u0030" is still "0"; decode first so escapes are judged by what they mean.
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: max(1, end - start)) { scratch in
            let written = StringDecoder.decode(base, start, end, into: scratch.baseAddress!)
            return integer(UnsafeBufferPointer(start: scratch.baseAddress!, count: written))
        }
    }

    /// Parses `-?(0|[1-9][0-9]*)` into an Int64; nil for fractions, exponents, signs, spaces or overflow.
    static func integer(_ text: UnsafeBufferPointer<UInt8>) -> Int64? {
        // A string code follows the JSON integer grammar too, so "0" and "-3" pass and " 3", "+3", "03" do not.
        var i = 0
        let negative = i < text.count && text[i] == UInt8(ascii: "-")
        if negative { i += 1 }
        guard i < text.count else { return nil }
        if text[i] == UInt8(ascii: "0") {
            return i + 1 == text.count ? 0 : nil
        }
        var magnitude: UInt64 = 0
        while i < text.count {
            let digit = text[i] &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            let (times10, overflowA) = magnitude.multipliedReportingOverflow(by: 10)
            let (sum, overflowB) = times10.addingReportingOverflow(UInt64(digit))
            guard !overflowA, !overflowB else { return nil }
            magnitude = sum
            i += 1
        }
        if negative {
            guard magnitude <= UInt64(Int64.max) + 1 else { return nil }
            return magnitude == UInt64(Int64.max) + 1 ? Int64.min : -Int64(magnitude)
        }
        guard magnitude <= UInt64(Int64.max) else { return nil }
        return Int64(magnitude)
    }

    /// The text of a validated raw string value (quotes included in `range`).
    static func string(_ base: UnsafePointer<UInt8>, _ range: Range<Int>) -> String {
        let start = range.lowerBound + 1
        let end = range.upperBound - 1
        guard start < end else { return "" }
        return String(unsafeUninitializedCapacity: end - start) { out in
            StringDecoder.decode(base, start, end, into: out.baseAddress!)
        }
    }
}
