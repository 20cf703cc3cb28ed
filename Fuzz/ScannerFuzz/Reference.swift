// A slow, deliberately plain JSON reader used only as the fuzzer's oracle. It shares no code with
// ScanCore: UTF-8 is checked by the standard library, the grammar is walked recursively over
// Unicode scalars, and strings are decoded scalar by scalar.

/// One top-level member as the reference reader saw it.
struct ReferenceMember {
    /// The decoded member name as UTF-8.
    var name: [UInt8]
    /// The raw value's byte range in the original buffer.
    var range: Range<Int>
    /// The decoded value when it is a string.
    var string: String?
}

/// Recursive-descent reader over Unicode scalars.
struct ReferenceReader {
    private let scalars: [Unicode.Scalar]
    /// Byte offset in the original buffer of each scalar, plus one entry for the end.
    private let offsets: [Int]
    private var i = 0
    private let maxDepth: Int
    /// Top-level members when the document is an object.
    private(set) var members: [ReferenceMember] = []
    /// Whether the top-level value is an object.
    private(set) var isObject = false

    /// Reads `bytes`; nil when they are not one JSON text.
    static func read(_ bytes: [UInt8], maxDepth: Int) -> ReferenceReader? {
        var start = 0
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { start = 3 }
        guard let text = String(validating: bytes[start...], as: UTF8.self) else { return nil }
        var reader = ReferenceReader(text: text, start: start, maxDepth: maxDepth)
        reader.skipSpace()
        guard reader.i < reader.scalars.count else { return nil }
        reader.isObject = reader.scalars[reader.i] == "{"
        guard reader.value(depth: 0) else { return nil }
        reader.skipSpace()
        return reader.i == reader.scalars.count ? reader : nil
    }

    private init(text: String, start: Int, maxDepth: Int) {
        var scalars: [Unicode.Scalar] = []
        var offsets: [Int] = []
        var offset = start
        for scalar in text.unicodeScalars {
            scalars.append(scalar)
            offsets.append(offset)
            offset += UTF8.width(scalar)
        }
        offsets.append(offset)
        self.scalars = scalars
        self.offsets = offsets
        self.maxDepth = maxDepth
    }

    private var current: Unicode.Scalar? { i < scalars.count ? scalars[i] : nil }

    private mutating func skipSpace() {
        while let c = current, c == " " || c == "\t" || c == "\n" || c == "\r" { i += 1 }
    }

    private mutating func value(depth: Int) -> Bool {
        guard let c = current else { return false }
        switch c {
        case "{": return object(depth: depth + 1)
        case "[": return array(depth: depth + 1)
        case "\"": return string() != nil
        case "t": return word("true")
        case "f": return word("false")
        case "n": return word("null")
        default: return number()
        }
    }

    private mutating func word(_ text: String) -> Bool {
        for scalar in text.unicodeScalars {
            guard current == scalar else { return false }
            i += 1
        }
        return true
    }

    private mutating func object(depth: Int) -> Bool {
        guard depth <= maxDepth else { return false }
        i += 1
        skipSpace()
        if current == "}" {
            i += 1
            return true
        }
        while true {
            skipSpace()
            guard current == "\"", let name = string() else { return false }
            skipSpace()
            guard current == ":" else { return false }
            i += 1
            skipSpace()
            let start = i
            let isString = current == "\""
            guard value(depth: depth) else { return false }
            if depth == 1 {
                var decoded: String?
                if isString {
                    var probe = self
                    probe.i = start
                    decoded = probe.string()
                }
                members.append(ReferenceMember(name: Array(name.utf8), range: offsets[start]..<offsets[i], string: decoded))
            }
            skipSpace()
            if current == "," {
                i += 1
                continue
            }
            guard current == "}" else { return false }
            i += 1
            return true
        }
    }

    private mutating func array(depth: Int) -> Bool {
        guard depth <= maxDepth else { return false }
        i += 1
        skipSpace()
        if current == "]" {
            i += 1
            return true
        }
        while true {
            skipSpace()
            guard value(depth: depth) else { return false }
            skipSpace()
            if current == "," {
                i += 1
                continue
            }
            guard current == "]" else { return false }
            i += 1
            return true
        }
    }

    private mutating func hex4() -> UInt32? {
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let c = current, let digit = Int(String(c), radix: 16) else { return nil }
            value = value * 16 + UInt32(digit)
            i += 1
        }
        return value
    }

    /// Decodes a string at the opening quote; nil when malformed.
    private mutating func string() -> String? {
        i += 1
        var out = String.UnicodeScalarView()
        while true {
            guard let c = current else { return nil }
            i += 1
            if c == "\"" { return String(out) }
            if c.value < 0x20 { return nil }
            if c != "\\" {
                out.append(c)
                continue
            }
            guard let e = current else { return nil }
            i += 1
            switch e {
            case "\"": out.append("\"")
            case "\\": out.append("\\")
            case "/": out.append("/")
            case "b": out.append("\u{8}")
            case "f": out.append("\u{C}")
            case "n": out.append("\n")
            case "r": out.append("\r")
            case "t": out.append("\t")
            case "u":
                guard let unit = hex4() else { return nil }
                // RFC 8259 §8.2: a lone surrogate escape is grammar; it names no character (U+FFFD here).
                let resume = i
                if (0xD800...0xDBFF).contains(unit), current == "\\" {
                    i += 1
                    if current == "u" {
                        i += 1
                        if let low = hex4(), (0xDC00...0xDFFF).contains(low) {
                            out.append(Unicode.Scalar(0x10000 + (unit - 0xD800) * 0x400 + (low - 0xDC00))!)
                            continue
                        }
                    }
                }
                i = resume
                out.append(Unicode.Scalar(unit) ?? "\u{FFFD}")
            default: return nil
            }
        }
    }

    private mutating func number() -> Bool {
        let digits: ClosedRange<Unicode.Scalar> = "0"..."9"
        if current == "-" { i += 1 }
        guard let first = current, digits.contains(first) else { return false }
        i += 1
        if first != "0" {
            while let c = current, digits.contains(c) { i += 1 }
        }
        if current == "." {
            i += 1
            guard let c = current, digits.contains(c) else { return false }
            while let c = current, digits.contains(c) { i += 1 }
        }
        if current == "e" || current == "E" {
            i += 1
            if current == "+" || current == "-" { i += 1 }
            guard let c = current, digits.contains(c) else { return false }
            while let c = current, digits.contains(c) { i += 1 }
        }
        return true
    }
}
