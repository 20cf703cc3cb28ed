import PeelEnvelope

extension ConfigJSON {
    /// The value as JSON text, members in their order and numbers as they were written (a
    /// document's `1.0` stays `1.0`), indented by two spaces per level.
    var text: String {
        var out: [UInt8] = []
        write(into: &out, indent: 0)
        out.append(0x0A)
        return String(decoding: out, as: UTF8.self)
    }

    private func write(into out: inout [UInt8], indent: Int) {
        switch self {
        case .null: out += "null".utf8
        case .bool(let b): out += (b ? "true" : "false").utf8
        case .number(let n): out += n.utf8
        case .string(let s): out += JSONString.quoted(s).utf8
        case .array(let items):
            if items.isEmpty { return out += "[]".utf8 }
            out.append(0x5B)
            for (i, item) in items.enumerated() {
                if i > 0 { out.append(0x2C) }
                Self.newline(&out, indent + 1)
                item.write(into: &out, indent: indent + 1)
            }
            Self.newline(&out, indent)
            out.append(0x5D)
        case .object(let members):
            if members.isEmpty { return out += "{}".utf8 }
            out.append(0x7B)
            for (i, m) in members.enumerated() {
                if i > 0 { out.append(0x2C) }
                Self.newline(&out, indent + 1)
                out += JSONString.quoted(m.name).utf8
                out += ": ".utf8
                m.value.write(into: &out, indent: indent + 1)
            }
            Self.newline(&out, indent)
            out.append(0x7D)
        }
    }

    private static func newline(_ out: inout [UInt8], _ indent: Int) {
        out.append(0x0A)
        out += repeatElement(0x20, count: indent * 2)
    }

    /// This object with member `name` set to `value` (replaced in place, or added last).
    func setting(_ name: String, _ value: ConfigJSON) -> ConfigJSON {
        guard case .object(var members) = self else { return self }
        if let i = members.firstIndex(where: { $0.name == name }) { members[i].value = value } else { members.append(Member(name: name, value: value)) }
        return .object(members)
    }

    /// This object without member `name`.
    func removing(_ name: String) -> ConfigJSON {
        guard case .object(let members) = self else { return self }
        return .object(members.filter { $0.name != name })
    }

    /// The members of an object (empty for anything else).
    var members: [Member] {
        if case .object(let m) = self { return m }
        return []
    }

    /// An object from (name, value) pairs, in order.
    static func obj(_ pairs: KeyValuePairs<String, ConfigJSON>) -> ConfigJSON {
        .object(pairs.map { Member(name: $0.key, value: $0.value) })
    }
}
