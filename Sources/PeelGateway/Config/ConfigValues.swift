import Foundation
import PeelEnvelope
import PeelIO

// How option values are read (numbers, sizes, times, lists, addresses) and shown (JSON fragments).
extension ConfigLoader {
    // MARK: value parsers

    static func text(_ v: ConfigValue, _ o: String) throws(ConfigError) -> String {
        switch v {
        case .text(let t): return t
        case .list(let l): return l.joined(separator: ",")
        case .array(let a): return stringItems(a).joined(separator: ",")
        case .map: throw ConfigError(option: o, problem: "must be a string, not an object")
        }
    }

    /// The offline cache's key field names (the option's, or a route's): lowercased field names,
    /// each once, none the cache reads for its own rules (a key of one would stop it being read).
    static func keyFieldNames(_ given: [String], _ o: String) throws(ConfigError) -> [String] {
        var names: [String] = []
        for n in given {
            let lower = n.lowercased()
            guard !lower.isEmpty, lower.utf8.allSatisfy(isTokenByte) else {
                throw ConfigError(option: o, problem: "\(n) is not a field name")
            }
            guard !["cache-control", "pragma", "if-none-match", "if-modified-since"].contains(lower) else {
                throw ConfigError(option: o, problem: "\(n) is read for the cache's rules and cannot be a key field")
            }
            if !names.contains(lower) { names.append(lower) }
        }
        return names
    }

    static func onOff(_ v: ConfigValue, _ o: String) throws(ConfigError) -> Bool {
        switch try text(v, o) {
        case "on", "true": return true
        case "off", "false": return false
        default: throw ConfigError(option: o, problem: "must be on or off")
        }
    }

    /// Whether `s` is a serialised origin (`scheme://host[:port]`, RFC 6454 §6.2): what browsers send in Origin.
    static func isOrigin(_ s: String) -> Bool {
        guard let r = s.range(of: "://") else { return false }
        let scheme = s[..<r.lowerBound]
        let authority = s[r.upperBound...]
        guard !scheme.isEmpty, scheme.allSatisfy({ $0.isLetter || $0.isNumber || "+-.".contains($0) }), !authority.isEmpty else { return false }
        return !authority.contains(where: { "/?#@ ".contains($0) })
    }

    /// A CA bundle that can be read (`--ca-file`, a group's `ca_file`): one that cannot would fail
    /// every https call as a TLS failure and take upstreams offline for Peel's own mistake.
    static func readableCAFile(_ path: String, _ o: String) throws(ConfigError) -> String {
        guard !path.isEmpty, FileManager.default.isReadableFile(atPath: path) else {
            throw ConfigError(option: o, problem: path.isEmpty ? "must not be empty" : "cannot read \(path)")
        }
        return path
    }

    /// An upstream URL curl's URL parser takes (`--upstream`, a group's endpoints): one it refuses
    /// would fail every worker's start or reload.
    static func curlAccepts(_ url: UpstreamURL, _ o: String) throws(ConfigError) -> UpstreamURL {
        do throws(PeelIOError) {
            _ = try UpstreamEndpoint(origin: url.origin)
        } catch {
            throw ConfigError(option: o, problem: "curl's URL parser refuses it")
        }
        return url
    }

    static func nonEmpty(_ v: ConfigValue, _ o: String) throws(ConfigError) -> String {
        let t = try text(v, o)
        if t.isEmpty { throw ConfigError(option: o, problem: "must not be empty") }
        return t
    }

    /// A list value. One that begins with `+` (`+application/x-ndjson`, `["+401"]`) adds its items to
    /// `base`, the option's default, instead of replacing it; repeats are dropped.
    static func list(_ v: ConfigValue, _ o: String, default base: [String] = []) throws(ConfigError) -> [String] {
        var items: [String]
        switch v {
        case .list(let l): items = l.map { $0.trimmingCharacters(in: .whitespaces) }
        case .array(let a): items = stringItems(a).map { $0.trimmingCharacters(in: .whitespaces) }
        case .text(let t): items = t.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        case .map: throw ConfigError(option: o, problem: "must be a list, not an object")
        }
        guard let first = items.first, first.hasPrefix("+") else { return items.filter { !$0.isEmpty } }
        items[0] = String(first.dropFirst()).trimmingCharacters(in: .whitespaces)
        var out = base
        for item in items where !item.isEmpty && !out.contains(item) { out.append(item) }
        if out.count == base.count && items.allSatisfy(\.isEmpty) {
            throw ConfigError(option: o, problem: "+ must be followed by what to add")
        }
        return out
    }

    /// Whether `s` is an RFC 9110 token (a field name).
    static func isToken(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.allSatisfy { b in
            (b >= 0x30 && b <= 0x39) || (b | 0x20 >= 0x61 && b | 0x20 <= 0x7A) || "!#$%&'*+-.^_`|~".utf8.contains(b)
        }
    }

    static func hostPort(_ v: ConfigValue, _ o: String) throws(ConfigError) -> HostPort {
        let t = try text(v, o)
        guard let hp = HostPort(parsing: t) else { throw ConfigError(option: o, problem: "\(t) is not HOST:PORT") }
        return hp
    }

    static func integer(_ v: ConfigValue, _ o: String, _ range: ClosedRange<Int>) throws(ConfigError) -> Int {
        let t = try text(v, o)
        guard let n = Int(t) else { throw ConfigError(option: o, problem: "\(t) is not a whole number") }
        guard range.contains(n) else { throw ConfigError(option: o, problem: "must be \(range.lowerBound)-\(range.upperBound)") }
        return n
    }

    /// A byte count with an optional unit: `64MiB`, `512 KiB`, `1GB`, `1048576`. IEC units are powers
    /// of 1024, SI ones of 1000 (IEC 80000-13), case-insensitive.
    static func byteSize(_ v: ConfigValue, _ o: String) throws(ConfigError) -> Int {
        let t = try text(v, o).trimmingCharacters(in: .whitespaces)
        let digits = t.prefix { $0.isASCII && $0.isNumber }
        let unit = t.dropFirst(digits.count).trimmingCharacters(in: .whitespaces).lowercased()
        let factors: [String: Int] = ["": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1 << 10, "m": 1_000_000, "mb": 1_000_000,
                                      "mib": 1 << 20, "g": 1_000_000_000, "gb": 1_000_000_000, "gib": 1 << 30]
        guard let n = Int(digits), let f = factors[unit] else {
            throw ConfigError(option: o, problem: "\(t) is not a size in bytes (like 67108864 or 64MiB)")
        }
        let (bytes, overflow) = n.multipliedReportingOverflow(by: f)
        guard !overflow, bytes <= 1 << 40 else { throw ConfigError(option: o, problem: "must be at most 1 TiB") }
        return bytes
    }

    /// Seconds, at least `minimum` (1 ms unless said otherwise), or exactly 0 when `allowZero`. Below
    /// 1 ms a time would become 0 ms, which curl and libevent read as "no limit".
    static func seconds(_ v: ConfigValue, _ o: String, allowZero: Bool = false, minimum: Double = 0.001) throws(ConfigError) -> Double {
        let t = try text(v, o)
        guard let d = Double(t), d.isFinite else { throw ConfigError(option: o, problem: "\(t) is not a number of seconds") }
        if allowZero && d == 0 { return 0 }
        guard d >= minimum else {
            throw ConfigError(option: o, problem: "must be \(allowZero ? "0 or " : "")at least \(num(minimum)) seconds")
        }
        guard d <= 86_400 else { throw ConfigError(option: o, problem: "must be at most 86400 seconds") }
        return d
    }

    /// A config-file array's items as text: numbers as written, strings as they are.
    static func stringItems(_ a: [ConfigJSON]) -> [String] {
        a.map { v in
            switch v {
            case .string(let s), .number(let s): s
            case .bool(let b): b ? "true" : "false"
            case .null: "null"
            case .array, .object: v.kind
            }
        }
    }

    /// A member name or dotted path.
    static func memberPath(_ v: ConfigValue, _ o: String) throws(ConfigError) -> MemberPath {
        let t = try nonEmpty(v, o)
        guard let p = MemberPath(dotted: t) else {
            throw ConfigError(option: o, problem: "\(t) is not a member name or a dotted path: \(MemberPath.refusal(t) ?? "")")
        }
        return p
    }

    // MARK: showing values (JSON fragments)

    /// A JSON string (RFC 8259 §7): control characters are escaped too, so check-config output parses.
    static func q(_ s: String) -> String { JSONString.quoted(s) }

    /// Why `t` is not an origin-form request target (RFC 9112 §3.2.1, RFC 3986 §3.3 and §3.4:
    /// pchar, "/" and "?", `%` only before two hex digits); nil when it is one.
    static func originFormProblem(_ t: String) -> String? {
        let bytes = Array(t.utf8)
        var i = 0
        while i < bytes.count {
            let b = bytes[i]
            if b == UInt8(ascii: "%") {
                guard i + 2 < bytes.count, isHex(bytes[i + 1]), isHex(bytes[i + 2]) else {
                    return "% must be followed by two hex digits"
                }
                i += 3
                continue
            }
            let allowed = (b >= 0x61 && b <= 0x7A) || (b >= 0x41 && b <= 0x5A) || (b >= 0x30 && b <= 0x39)
                || "-._~!$&'()*+,;=:@/?".utf8.contains(b)
            guard allowed else {
                return b < 0x20 || b == 0x7F ? "has a control character: not an origin-form target"
                    : "has \(b == 0x20 ? "a space" : "'\(String(decoding: [b], as: UTF8.self))'"): not an origin-form target (percent-encode it)"
            }
            i += 1
        }
        return nil
    }

    static func isHex(_ b: UInt8) -> Bool {
        (b >= 0x30 && b <= 0x39) || (b >= 0x61 && b <= 0x66) || (b >= 0x41 && b <= 0x46)
    }
    static func num(_ d: Double) -> String { "\(d)" }
    static func strs(_ a: [String]) -> String { "[" + a.map(q).joined(separator: ",") + "]" }
}
