/// Component names a generator accepts, and components nothing references any more.
enum ComponentNames {
    /// OpenAPI 3.1 §4.8.7: component names match `^[a-zA-Z0-9\.\-_]+$`.
    static func isClean(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2E || c == 0x2D || c == 0x5F
        }
    }

    /// `name` with each run of other characters made one `_`, none at the ends
    /// (`CommonResult«PageResult«UserRespVO»»` → `CommonResult_PageResult_UserRespVO`).
    static func cleaned(_ name: String) -> String {
        var out = ""
        var pending = false
        for ch in name.unicodeScalars {
            if ch.isASCII, isClean(String(ch)) {
                if pending && !out.isEmpty { out.append("_") }
                pending = false
                out.unicodeScalars.append(ch)
            } else {
                pending = true
            }
        }
        return out.isEmpty ? "Schema" : out
    }

    /// A JSON pointer token as written in a `$ref` (RFC 6901 §4, after percent-decoding a fragment).
    static func unescape(_ token: String) -> String {
        let decoded = token.removingPercentEncodingForRef ?? token
        return decoded.replacingOccurrences(of: "~1", with: "/").replacingOccurrences(of: "~0", with: "~")
    }

    /// The document with every component section's names cleaned (kept unique) and every `$ref`
    /// to them rewritten.
    static func clean(_ doc: ConfigJSON) -> ConfigJSON {
        guard let components = doc["components"] else { return doc }
        var renamed: [String: String] = [:]  // "#/components/section/old" (unescaped) → new ref
        var sections: [ConfigJSON.Member] = []
        for section in components.members {
            guard case .object(let entries) = section.value else {
                sections.append(section)
                continue
            }
            var taken = Set(entries.map(\.name).filter(isClean))
            var out: [ConfigJSON.Member] = []
            for entry in entries {
                var name = entry.name
                if !isClean(name) {
                    let base = cleaned(name)
                    name = base
                    var n = 2
                    while taken.contains(name) { name = "\(base)_\(n)"; n += 1 }
                    taken.insert(name)
                    renamed["#/components/\(section.name)/\(entry.name)"] = "#/components/\(section.name)/\(name)"
                }
                out.append(.init(name: name, value: entry.value))
            }
            sections.append(.init(name: section.name, value: .object(out)))
        }
        let doc = doc.setting("components", .object(sections))
        guard !renamed.isEmpty else { return doc }
        return rewritingRefs(doc) { ref in
            guard let (section, name, rest) = split(ref), let new = renamed["#/components/\(section)/\(name)"] else { return ref }
            return new + rest
        }
    }

    /// A local component reference's section, component name (unescaped) and the rest of its
    /// pointer (`#/components/schemas/User/properties/id` → `schemas`, `User`, `/properties/id`).
    static func split(_ ref: String) -> (section: String, name: String, rest: String)? {
        guard ref.hasPrefix("#/components/") else { return nil }
        let tokens = ref.dropFirst("#/components/".count).split(separator: "/", maxSplits: 2, omittingEmptySubsequences: false)
        guard tokens.count >= 2 else { return nil }
        return (String(tokens[0]), unescape(String(tokens[1])), tokens.count == 3 ? "/" + tokens[2] : "")
    }

    /// Every `$ref` string in `value`, passed through `change`.
    static func rewritingRefs(_ value: ConfigJSON, _ change: (String) -> String) -> ConfigJSON {
        switch value {
        case .object(let members):
            return .object(members.map { m in
                if m.name == "$ref", case .string(let ref) = m.value { return .init(name: m.name, value: .string(change(ref))) }
                return .init(name: m.name, value: rewritingRefs(m.value, change))
            })
        case .array(let items): return .array(items.map { rewritingRefs($0, change) })
        default: return value
        }
    }

    /// The document without the components nothing reaches from its paths, webhooks or security
    /// requirements, followed transitively; security schemes always stay.
    static func pruned(_ doc: ConfigJSON) -> ConfigJSON {
        guard let components = doc["components"] else { return doc }
        var reached: Set<String> = []
        var queue: [ConfigJSON] = []
        for root in ["paths", "webhooks"] { if let v = doc[root] { queue.append(v) } }
        func refs(in value: ConfigJSON, _ found: inout [String]) {
            switch value {
            case .object(let members):
                for m in members {
                    if m.name == "$ref", case .string(let ref) = m.value { found.append(ref) } else { refs(in: m.value, &found) }
                }
            case .array(let items): for item in items { refs(in: item, &found) }
            default: break
            }
        }
        // Each section's entries by name, looked up once per reference (a document holds thousands).
        var entries: [String: [String: ConfigJSON]] = [:]
        for section in components.members {
            var byName: [String: ConfigJSON] = [:]
            for entry in section.value.members where byName[entry.name] == nil { byName[entry.name] = entry.value }
            if entries[section.name] == nil { entries[section.name] = byName }
        }
        while let next = queue.popLast() {
            var found: [String] = []
            refs(in: next, &found)
            for ref in found {
                guard let (section, name, _) = split(ref), reached.insert("#/components/\(section)/\(name)").inserted,
                      let target = entries[section]?[name] else { continue }
                queue.append(target)
            }
        }
        var sections: [ConfigJSON.Member] = []
        for section in components.members {
            guard section.name != "securitySchemes", case .object(let entries) = section.value else {
                sections.append(section)
                continue
            }
            let kept = entries.filter { reached.contains("#/components/\(section.name)/\($0.name)") }
            if !kept.isEmpty { sections.append(.init(name: section.name, value: .object(kept))) }
        }
        return doc.setting("components", .object(sections))
    }
}

extension String {
    /// Percent-decoded, as a URI fragment's pointer is (RFC 6901 §6); nil when an escape is broken.
    var removingPercentEncodingForRef: String? {
        guard utf8.contains(0x25) else { return self }
        var bytes: [UInt8] = []
        var it = Array(utf8)[...]
        while let c = it.popFirst() {
            if c == 0x25 {
                guard it.count >= 2, let hi = Self.hex(it.popFirst()!), let lo = Self.hex(it.popFirst()!) else { return nil }
                bytes.append(hi << 4 | lo)
            } else {
                bytes.append(c)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hex(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: c - 0x30
        case 0x41...0x46: c - 0x37
        case 0x61...0x66: c - 0x57
        default: nil
        }
    }
}
