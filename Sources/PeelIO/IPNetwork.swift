import Glibc

/// An IPv4 or IPv6 network in CIDR form (`10.0.0.0/8`, `fd00::/8`; a bare address is a /32 or /128).
public struct IPNetwork: Sendable, Equatable, CustomStringConvertible {
    /// The network's address bytes (4 or 16), host bits cleared.
    public let bytes: [UInt8]
    /// Leading bits that must match.
    public let prefix: Int
    /// As written back (`10.0.0.0/8`).
    public let description: String

    /// Parses `text`; nil when it is not an address with an optional `/prefix` in range.
    public init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let address = IPNetwork.address(String(parts[0])) else { return nil }
        let bits = address.count * 8
        var prefix = bits
        if parts.count == 2 {
            guard let p = Int(parts[1]), p >= 0, p <= bits, !parts[1].hasPrefix("+") else { return nil }
            prefix = p
        }
        var masked = address
        for i in 0..<masked.count {
            let keep = max(0, min(8, prefix - i * 8))
            masked[i] &= keep == 8 ? 0xFF : ~(UInt8(0xFF) >> UInt8(keep))
        }
        bytes = masked
        self.prefix = prefix
        description = parts.count == 2 ? text : text + "/\(bits)"
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

    /// True when `address` (text) is inside any of `networks`.
    public static func any(_ networks: [IPNetwork], contain address: String) -> Bool {
        guard !networks.isEmpty, let a = IPNetwork.address(address) else { return false }
        return networks.contains { $0.contains(a) }
    }
}
