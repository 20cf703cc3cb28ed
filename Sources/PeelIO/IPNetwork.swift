import Glibc

/// An IPv4 or IPv6 network in CIDR form (`10.0.0.0/8`, `fd00::/8`; a bare address is a /32 or /128).
/// An IPv4-mapped IPv6 range (`::ffff:10.0.0.0/104`) is the IPv4 network it maps, since
/// `address(_:)` gives mapped addresses as their IPv4 bytes.
public struct IPNetwork: Sendable, Equatable, CustomStringConvertible {
    /// The network's address bytes (4 or 16), host bits cleared.
    public let bytes: [UInt8]
    /// Leading bits that must match.
    public let prefix: Int
    /// As written back (`10.0.0.0/8`).
    public let description: String

    /// Why a text is not a network, in words that say the fix.
    public struct Invalid: Error, Equatable, CustomStringConvertible {
        public let description: String
    }

    /// Parses `text`; nil when it is not an address with an optional `/prefix` in range.
    public init?(_ text: String) {
        guard case .success(let network) = IPNetwork.parse(text) else { return nil }
        self = network
    }

    private init(bytes: [UInt8], prefix: Int, description: String) {
        self.bytes = bytes
        self.prefix = prefix
        self.description = description
    }

    /// Parses `text`, or says what is wrong with it: not an address, a prefix out of range or
    /// written with a leading zero (`/08`, which some parsers read as octal), or host bits set
    /// (`10.0.0.1/8`: the operator meant either `10.0.0.0/8` or `10.0.0.1/32`; nginx warns,
    /// Envoy refuses).
    public static func parse(_ text: String) -> Result<IPNetwork, Invalid> {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        let addressText = String(parts[0])
        guard let address = IPNetwork.address(addressText) else {
            return .failure(Invalid(description: "\(text) is not an address or CIDR (10.0.0.0/8, fd00::/8)"))
        }
        // A mapped address counts in IPv4 bits: `::ffff:a.b.c.d/n` covers the IPv4 /(n - 96).
        let mapped = address.count == 4 && addressText.contains(":")
        let written = mapped ? 128 : address.count * 8
        var prefix = written
        if parts.count == 2 {
            let p = parts[1]
            guard !p.isEmpty, p.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let n = Int(p), n <= written else {
                return .failure(Invalid(description: "\(text): the prefix must be a number from 0 to \(written)"))
            }
            if p.count > 1 && p.hasPrefix("0") {
                return .failure(Invalid(description: "\(text): the prefix has a leading zero; write \(addressText)/\(n)"))
            }
            prefix = n
        }
        if mapped {
            guard prefix >= 96 else {
                return .failure(Invalid(description: "\(text): an IPv4-mapped range needs a prefix of at least 96 (::ffff:0:0/96 is all of IPv4)"))
            }
            prefix -= 96
        }
        var masked = address
        for i in 0..<masked.count {
            let keep = max(0, min(8, prefix - i * 8))
            masked[i] &= keep == 8 ? 0xFF : ~(UInt8(0xFF) >> UInt8(keep))
        }
        if masked != address {
            let network = IPNetwork.text(masked, mapped: mapped)
            return .failure(Invalid(description: "\(text) has host bits set; write \(network)/\(parts[1]) for the network, or \(addressText) for the one address"))
        }
        return .success(IPNetwork(bytes: masked, prefix: prefix, description: parts.count == 2 ? text : text + "/\(written)"))
    }

    /// True when `address` (bytes as `address(_:)` gives them) is inside this network.
    public func contains(_ address: [UInt8]) -> Bool {
        guard address.count == bytes.count else { return false }
        var left = prefix
        for i in 0..<bytes.count where left > 0 {
            let n = min(8, left)
            let mask: UInt8 = n == 8 ? 0xFF : ~(UInt8(0xFF) >> UInt8(n))
            if address[i] & mask != bytes[i] { return false }
            left -= n
        }
        return true
    }

    /// The bytes of a textual IPv4 (4) or IPv6 (16) address (inet_pton), nil when it is neither. An
    /// IPv4-mapped IPv6 address (`::ffff:10.0.0.1`, what a dual-stack listener reports) gives its 4 IPv4
    /// bytes, so IPv4 networks match it.
    public static func address(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            return withUnsafeBytes(of: &v4) { Array($0) }
        }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, text, &v6) == 1 else { return nil }
        let b = withUnsafeBytes(of: &v6) { Array($0) }
        if b[0..<10].allSatisfy({ $0 == 0 }) && b[10] == 0xFF && b[11] == 0xFF { return Array(b[12..<16]) }
        return b
    }

    /// An address's bytes as text (inet_ntop); a mapped one as `::ffff:a.b.c.d` when `mapped`.
    static func text(_ bytes: [UInt8], mapped: Bool = false) -> String {
        let dotted = bytes.count == 4 ? bytes.map(String.init).joined(separator: ".") : nil
        if let dotted { return mapped ? "::ffff:" + dotted : dotted }
        var v6 = in6_addr()
        withUnsafeMutableBytes(of: &v6) { $0.copyBytes(from: bytes.prefix(16)) }
        var out = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        guard inet_ntop(AF_INET6, &v6, &out, socklen_t(out.count)) != nil else { return "" }
        return String(decoding: out.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Whose share a client address counts against (per-client bounds: event streams, the memory
    /// budget): its IPv4 address, or the /64 of its IPv6 one, since SLAAC hands one host a whole
    /// /64 and counting single addresses would let it take every share. An IPv4-mapped address
    /// counts as the IPv4 client it is; text that is no address stands for itself.
    public static func clientGroup(_ address: String) -> String {
        guard let bytes = IPNetwork.address(address) else { return address }
        if bytes.count == 4 { return text(bytes) }
        return text(Array(bytes.prefix(8)) + [UInt8](repeating: 0, count: 8)) + "/64"
    }

    /// True when `address` (text) is inside any of `networks`.
    public static func any(_ networks: [IPNetwork], contain address: String) -> Bool {
        guard !networks.isEmpty, let a = IPNetwork.address(address) else { return false }
        return networks.contains { $0.contains(a) }
    }

    /// The client behind a trusted `peer`: X-Forwarded-For walked from the right past every trusted
    /// hop, the first untrusted one (nginx realip with `real_ip_recursive on`). All trusted: the
    /// leftmost. An entry that is not an address ends the walk at the hop after it, which a trusted
    /// proxy vouched for, so no forged text ever becomes the client.
    public static func realClient(peer: String, forwardedFor: String?, trusted: [IPNetwork]) -> String {
        guard let forwardedFor else { return peer }
        var client = peer
        for hop in forwardedFor.split(separator: ",").reversed() {
            let a = hop.trimmingOWS()
            guard IPNetwork.address(a) != nil else { return client }
            client = a
            if !IPNetwork.any(trusted, contain: a) { return a }
        }
        return client
    }
}

extension Substring {
    /// Without the spaces and tabs around it (RFC 9110 §5.6.3's OWS).
    func trimmingOWS() -> String {
        var s = self[...]
        while let f = s.first, f == " " || f == "\t" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" { s = s.dropLast() }
        return String(s)
    }
}
