import CCrypto

/// HMAC-SHA-256 (RFC 2104, FIPS 180-4) with one secret, through OpenSSL's libcrypto: the shared
/// offline store's keys, so that a key never holds a credential, a cookie or a path in clear.
public struct KeyedHash: Sendable {
    private let secret: [UInt8]

    /// A hash keyed with `secret` (any length; RFC 2104 §3 recommends at least the output size).
    public init(secret: [UInt8]) { self.secret = secret }

    /// The 32-byte MAC of `message`.
    public func mac(_ message: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let ok = secret.withUnsafeBufferPointer { key in
            message.withUnsafeBufferPointer { msg in
                out.withUnsafeMutableBufferPointer { o in
                    HMAC(EVP_sha256(), key.baseAddress, Int32(key.count), msg.baseAddress, msg.count, o.baseAddress, &length)
                }
            }
        }
        // libcrypto fails here only without memory; a zero MAC would make every key collide.
        precondition(ok != nil && length == 32, "HMAC-SHA-256 failed")
        return out
    }
}
