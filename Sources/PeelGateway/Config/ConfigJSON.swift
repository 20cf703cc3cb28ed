import PeelEnvelope

/// A JSON value from the config file with its type kept: a string stays a string (`"00000"` is not
/// `0`), a number keeps the text it was written as, and an object keeps its members in order.
/// Parsed after the strict scanner accepted the file (RFC 8259), so the parser needs no error paths
/// of its own beyond duplicate names, which RFC 8259 §4 leaves open and Peel refuses.
indirect enum ConfigJSON: Equatable, Sendable {
    /// One object member.
    struct Member: Equatable, Sendable {
        var name: String
        var value: ConfigJSON
    }

    case object([Member])
    case array([ConfigJSON])
    case string(String)
    /// A number as written (`10`, `2.5`, `1e3`).
    case number(String)
    case bool(Bool)
    case null

    /// The value of member `name`, when this is an object that has it.
    subscript(_ name: String) -> ConfigJSON? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.name == name }?.value
    }

    /// The text of a string value.
    var string: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    /// A short name for the kind of value, for errors (`a list`, `an object`).
    var kind: String {
        switch self {
        case .object: "an object"
        case .array: "a list"
        case .string: "a string"
        case .number: "a number"
        case .bool: "true or false"
        case .null: "null"
        }
    }

    /// Parses a text the strict scanner accepted; the error names the first duplicate member's path.
    static func parse(_ bytes: [UInt8]) -> Result<ConfigJSON, DuplicateName> {
        var parser = Parser(bytes: bytes)
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { parser.i = 3 }
        do throws(DuplicateName) {
            parser.space()
            return .success(try parser.value(path: ""))
        } catch {
            return .failure(error)
        }
    }

    /// A member name that appears twice in one object, with the path to it (`routes[1].prefix`).
    struct DuplicateName: Error {
        var path: String
    }

    /// Recursive descent over validated bytes.
    private struct Parser {
        let bytes: [UInt8]
        var i = 0

        mutating func space() {
            while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x09 || bytes[i] == 0x0A || bytes[i] == 0x0D { i += 1 }
        }

        mutating func value(path: String) throws(DuplicateName) -> ConfigJSON {
            switch bytes[i] {
            case UInt8(ascii: "{"):
                i += 1
                space()
                var members: [Member] = []
                var names = UniqueNames()
                while bytes[i] != UInt8(ascii: "}") {
                    let name = string()
                    let at = path.isEmpty ? name : path + "." + name
                    if !names.insert(name, among: members) { throw DuplicateName(path: at) }
                    space()
                    i += 1  // ':'
                    space()
                    members.append(Member(name: name, value: try value(path: at)))
                    space()
                    if bytes[i] == UInt8(ascii: ",") {
                        i += 1
                        space()
                    }
                }
                i += 1
                return .object(members)
            case UInt8(ascii: "["):
                i += 1
                space()
                var items: [ConfigJSON] = []
                while bytes[i] != UInt8(ascii: "]") {
                    items.append(try value(path: "\(path)[\(items.count)]"))
                    space()
                    if bytes[i] == UInt8(ascii: ",") {
                        i += 1
                        space()
                    }
                }
                i += 1
                return .array(items)
            case UInt8(ascii: "\""):
                return .string(string())
            case UInt8(ascii: "t"):
                i += 4
                return .bool(true)
            case UInt8(ascii: "f"):
                i += 5
                return .bool(false)
            case UInt8(ascii: "n"):
                i += 4
                return .null
            default:
                let start = i
                while i < bytes.count, !(bytes[i] == UInt8(ascii: ",") || bytes[i] == UInt8(ascii: "}")
                    || bytes[i] == UInt8(ascii: "]") || bytes[i] <= 0x20) { i += 1 }
                return .number(String(decoding: bytes[start..<i], as: UTF8.self))
            }
        }

        /// A string at its opening quote, unescaped (RFC 8259 §7; a lone surrogate becomes U+FFFD).
        mutating func string() -> String {
            i += 1
            var units: [UInt16] = []
            var out: [UInt8] = []
            func flush() {
                if !units.isEmpty {
                    out += Array(String(decoding: units, as: UTF16.self).utf8)
                    units = []
                }
            }
            while bytes[i] != UInt8(ascii: "\"") {
                guard bytes[i] == UInt8(ascii: "\\") else {
                    flush()
                    out.append(bytes[i])
                    i += 1
                    continue
                }
                let e = bytes[i + 1]
                i += 2
                if e == UInt8(ascii: "u") {
                    units.append(UInt16(String(decoding: bytes[i..<(i + 4)], as: UTF8.self), radix: 16) ?? 0xFFFD)
                    i += 4
                    continue
                }
                flush()
                switch e {
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                default: out.append(e)
                }
            }
            flush()
            i += 1
            return String(decoding: out, as: UTF8.self)
        }
    }
}

/// A mapping's member names seen so far: compared one by one while there are few, hashed once
/// there are many (a document's `paths` and `schemas` hold thousands).
struct UniqueNames {
    private var seen: Set<String>?
    private static let hashedFrom = 16

    /// Whether `name` is new among `members` (the names seen so far); remembers it.
    mutating func insert(_ name: String, among members: [ConfigJSON.Member]) -> Bool {
        if seen == nil {
            guard members.count >= Self.hashedFrom else { return !members.contains { $0.name == name } }
            seen = Set(members.map(\.name))
        }
        return seen!.insert(name).inserted
    }
}

