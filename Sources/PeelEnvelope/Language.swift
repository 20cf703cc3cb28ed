/// Language of Peel's own problem texts, chosen from the client's Accept-Language.
public enum Language: Sendable {
    /// English, the default.
    case english
    /// Simplified Chinese, the seed's language.
    case chinese

    /// Picks Chinese when the highest-weighted language range is `zh` or `zh-*`, else English.
    public init(acceptLanguage: String?) {
        guard var header = acceptLanguage else {
            self = .english
            return
        }
        self = header.withUTF8 { AcceptLanguage.prefersChinese($0) } ? .chinese : .english
    }
}

/// Accept-Language parsing over the header's bytes (RFC 9110 §12.5.4, §12.4.2).
enum AcceptLanguage {
    /// Whether the first range with the highest q-value has primary subtag `zh`.
    static func prefersChinese(_ header: UnsafeBufferPointer<UInt8>) -> Bool {
        var bestWeight = 0
        var bestIsChinese = false
        var start = 0
        while start <= header.count {
            var end = start
            while end < header.count && header[end] != UInt8(ascii: ",") { end += 1 }
            // Ties keep the earlier range: RFC 9110 leaves ordering open, listing order is the client's intent.
            if let (weight, isChinese) = element(header, start, end), weight > bestWeight {
                bestWeight = weight
                bestIsChinese = isChinese
            }
            start = end + 1
        }
        return bestIsChinese
    }

    /// Weight in thousandths and zh-ness of one list element; nil when malformed or empty.
    private static func element(_ b: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int) -> (Int, Bool)? {
        var rangeEnd = start
        while rangeEnd < end && b[rangeEnd] != UInt8(ascii: ";") { rangeEnd += 1 }
        let (lo, hi) = trimmed(b, start, rangeEnd)
        // Empty elements are allowed in HTTP lists (RFC 9110 §5.6.1) and carry nothing.
        guard lo < hi, let isChinese = languageRange(b, lo, hi) else { return nil }
        var weight = 1000
        var cursor = rangeEnd
        while cursor < end {
            let paramStart = cursor + 1
            var paramEnd = paramStart
            while paramEnd < end && b[paramEnd] != UInt8(ascii: ";") { paramEnd += 1 }
            let (plo, phi) = trimmed(b, paramStart, paramEnd)
            // Parameter names are case-insensitive (RFC 9110 §5.6.6); only the weight is defined here.
            if phi - plo >= 2 && b[plo] | 0x20 == UInt8(ascii: "q") && b[plo + 1] == UInt8(ascii: "=") {
                guard let q = qvalue(b, plo + 2, phi) else { return nil }
                weight = q
            }
            cursor = paramEnd
        }
        // q=0 means "not acceptable" (RFC 9110 §12.4.2), so it can never be the preference.
        return weight > 0 ? (weight, isChinese) : nil
    }

    /// Whether a well-formed language range is zh/zh-*; nil when it breaks the RFC 4647 grammar.
    private static func languageRange(_ b: UnsafeBufferPointer<UInt8>, _ lo: Int, _ hi: Int) -> Bool? {
        if hi - lo == 1 && b[lo] == UInt8(ascii: "*") { return false }
        var subtagStart = lo
        var i = lo
        var primaryEnd = -1
        while i <= hi {
            // Underscore is accepted as a separator: sloppy clients send `zh_CN`, and the intent is clear.
            if i == hi || b[i] == UInt8(ascii: "-") || b[i] == UInt8(ascii: "_") {
                let length = i - subtagStart
                guard length >= 1 && length <= 8 else { return nil }
                if primaryEnd < 0 { primaryEnd = i }
                subtagStart = i + 1
            } else {
                let c = b[i] | 0x20
                let isAlpha = c >= UInt8(ascii: "a") && c <= UInt8(ascii: "z")
                let isDigit = b[i] >= UInt8(ascii: "0") && b[i] <= UInt8(ascii: "9")
                // The primary subtag is letters only; later subtags may hold digits.
                guard isAlpha || (isDigit && primaryEnd >= 0) else { return nil }
            }
            i += 1
        }
        return primaryEnd - lo == 2 && b[lo] | 0x20 == UInt8(ascii: "z") && b[lo + 1] | 0x20 == UInt8(ascii: "h")
    }

    /// A qvalue in thousandths: `0[.ddd]` or `1[.000]` (RFC 9110 §12.4.2); nil otherwise.
    private static func qvalue(_ b: UnsafeBufferPointer<UInt8>, _ lo: Int, _ hi: Int) -> Int? {
        guard lo < hi else { return nil }
        let whole = b[lo]
        guard whole == UInt8(ascii: "0") || whole == UInt8(ascii: "1") else { return nil }
        var value = whole == UInt8(ascii: "1") ? 1000 : 0
        if hi - lo == 1 { return value }
        guard b[lo + 1] == UInt8(ascii: "."), hi - lo - 2 <= 3 else { return nil }
        var scale = 100
        for i in (lo + 2)..<hi {
            let digit = Int(b[i]) - Int(UInt8(ascii: "0"))
            guard digit >= 0 && digit <= 9 else { return nil }
            value += digit * scale
            scale /= 10
        }
        return value <= 1000 ? value : nil
    }

    /// The bounds of b[lo..<hi] without surrounding spaces and tabs (OWS).
    private static func trimmed(_ b: UnsafeBufferPointer<UInt8>, _ lo: Int, _ hi: Int) -> (Int, Int) {
        var lo = lo
        var hi = hi
        while lo < hi && (b[lo] == 0x20 || b[lo] == 0x09) { lo += 1 }
        while hi > lo && (b[hi - 1] == 0x20 || b[hi - 1] == 0x09) { hi -= 1 }
        return (lo, hi)
    }
}
