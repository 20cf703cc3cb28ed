import PeelIO

/// Why a value read from the shared store was not served (counted by reason).
public enum OfflineStoreRejection: String, Error, Sendable, CaseIterable {
    /// Not a value Peel wrote: wrong magic, truncated, or inconsistent lengths.
    case garbage
    /// Written by another format version.
    case version
    /// Longer than `--offline-store-max-entry`.
    case tooLarge = "too_large"
}

/// A value decoded from the shared store: the record, and the Vary fields it was stored under.
public struct OfflineStoreValue: Sendable {
    /// The stored answer (`storedAt` in wall-clock seconds: replicas and restarts share it).
    public var record: OfflineCacheRecord
    /// The request fields the answer's Vary named, lowercased.
    public var vary: [String]
    /// Each of their values as the storing request had them, as a keyed hash (never in clear).
    public var varyHashes: [[UInt8]]
}

/// Keys and values of the shared offline store, pure: no I/O.
///
/// Keys are `peel:oc:1:` + hex HMAC-SHA-256 of the cache key (Host, target, Accept-Language, the
/// key fields' names and values, each length-prefixed so no two keys encode alike), keyed with the
/// `--offline-store-secret-file` secret: a key never holds a token, a cookie or a path, and without
/// the secret nobody can tell which key is whose. Vary is checked on read: the value carries the
/// Vary names and an HMAC of each value the storing request had (an `Authorization` named by Vary
/// is never stored in clear either).
///
/// Value format, version 1 (integers big-endian; `str` = u32 length + bytes):
/// `"PEELOC"` · u8 version · u16 status · u64 storedAt (IEEE 754 bits, wall seconds) ·
/// u8 flags (1 content type, 2 ETag, 4 Last-Modified) · the flagged strs · u16 vary count ·
/// per Vary: str name, 32-byte HMAC · u16 field count · per field: str name, str value ·
/// str body · 32-byte HMAC-SHA-256 (the secret) of the store key and every byte before it. Nothing
/// may follow. Request credentials are never part of it. The MAC (version 2) means that whoever can
/// write to Redis but lacks the secret cannot plant an answer (a value made with another secret SET
/// over alice's key), nor move one user's value onto another user's key.
public struct OfflineStoreCodec: Sendable {
    /// The format this build writes and reads.
    public static let version: UInt8 = 2
    static let magic = Array("PEELOC".utf8)
    /// Every key starts with this, so an operator can find (and drop) Peel's keys.
    public static let keyPrefix = "peel:oc:1:"

    private let hash: KeyedHash
    /// Largest value written or read, in bytes (`--offline-store-max-entry`).
    public let maxEntry: Int

    /// A codec keyed with `secret`, bounding values to `maxEntry` bytes.
    public init(secret: [UInt8], maxEntry: Int) {
        hash = KeyedHash(secret: secret)
        self.maxEntry = maxEntry
    }

    /// The store key for a cache key.
    public func key(_ k: OfflineCacheKey) -> [UInt8] {
        var m: [UInt8] = Array("peel offline cache key 1".utf8)
        Self.put(&m, k.host)
        Self.put(&m, k.target)
        Self.putOptional(&m, k.acceptLanguage)
        Self.u32(&m, k.fieldNames.count)
        for (name, value) in zip(k.fieldNames, k.user) {
            Self.put(&m, name)
            Self.putOptional(&m, value)
        }
        return Array(Self.keyPrefix.utf8) + Self.hex(hash.mac(m))
    }

    /// The keyed hash of one Vary field's value (nil: the request had none).
    public func varyHash(name: String, value: String?) -> [UInt8] {
        var m: [UInt8] = Array("peel offline cache vary 1".utf8)
        Self.put(&m, name)
        Self.putOptional(&m, value)
        return hash.mac(m)
    }

    /// The value for a record; nil when it would be longer than `maxEntry`.
    public func encode(_ r: OfflineCacheRecord, vary: [String], varyHashes: [[UInt8]], under key: [UInt8]) -> [UInt8]? {
        var out = Self.magic
        out.reserveCapacity(64 + r.body.count + r.fields.count * 32)
        out.append(Self.version)
        Self.u16(&out, r.status)
        Self.u64(&out, r.storedAt.bitPattern)
        out.append((r.contentType != nil ? 1 : 0) | (r.etag != nil ? 2 : 0) | (r.lastModified != nil ? 4 : 0))
        if let t = r.contentType { Self.put(&out, t) }
        if let e = r.etag { Self.put(&out, e) }
        if let l = r.lastModified { Self.put(&out, l) }
        Self.u16(&out, vary.count)
        for (name, h) in zip(vary, varyHashes) {
            Self.put(&out, name)
            out += h
        }
        let pairs = r.fields.pairs
        Self.u16(&out, pairs.count)
        for (n, v) in pairs {
            Self.put(&out, n)
            Self.put(&out, v)
        }
        Self.u32(&out, r.body.count)
        out += r.body
        out += hash.mac(key + out)
        return out.count <= maxEntry ? out : nil
    }

    /// Reads a value; any departure from the format is a rejection, never a guess.
    public func decode(_ value: [UInt8], under key: [UInt8]) -> Result<OfflineStoreValue, OfflineStoreRejection> {
        if value.count > maxEntry { return .failure(.tooLarge) }
        var r = Reader(bytes: value)
        guard r.take(Self.magic.count) == Self.magic, let version = r.u8() else { return .failure(.garbage) }
        guard version == Self.version else { return .failure(.version) }
        // A value that does not authenticate under this key is garbage, whoever wrote it.
        guard value.count >= Self.magic.count + 1 + 32 else { return .failure(.garbage) }
        let bytes = Array(value.dropLast(32))
        guard hash.mac(key + bytes) == Array(value.suffix(32)) else { return .failure(.garbage) }
        r = Reader(bytes: bytes)
        _ = r.take(Self.magic.count + 1)
        // Peel only stores 2xx answers (not 206) and 304 validators: any other status is not its.
        guard let status = r.u16(), (200...299).contains(status) && status != 206 || status == 304, let bits = r.u64(),
              let flags = r.u8(), flags & ~7 == 0 else {
            return .failure(.garbage)
        }
        let storedAt = Double(bitPattern: bits)
        guard storedAt.isFinite else { return .failure(.garbage) }
        var contentType: String?, etag: String?, lastModified: String?
        if flags & 1 != 0 { guard let s = r.string() else { return .failure(.garbage) }; contentType = s }
        if flags & 2 != 0 { guard let s = r.string() else { return .failure(.garbage) }; etag = s }
        if flags & 4 != 0 { guard let s = r.string() else { return .failure(.garbage) }; lastModified = s }
        guard let varyCount = r.u16() else { return .failure(.garbage) }
        var vary: [String] = [], hashes: [[UInt8]] = []
        for _ in 0..<varyCount {
            guard let name = r.string(), let h = r.take(32) else { return .failure(.garbage) }
            vary.append(name)
            hashes.append(h)
        }
        guard let fieldCount = r.u16() else { return .failure(.garbage) }
        var pairs: [(String, String)] = []
        for _ in 0..<fieldCount {
            // Field names and values go back on the wire: nothing a header block may not hold.
            guard let n = r.string(), let v = r.string(), !n.isEmpty, n.utf8.allSatisfy(isTokenByte),
                  v.utf8.allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }) else { return .failure(.garbage) }
            pairs.append((n, v))
        }
        guard let bodyCount = r.u32(), let body = r.take(bodyCount), r.atEnd else { return .failure(.garbage) }
        let record = OfflineCacheRecord(status: status, fields: ResponseHeaders(pairs), contentType: contentType, body: body,
                                        storedAt: storedAt, etag: etag, lastModified: lastModified)
        return .success(OfflineStoreValue(record: record, vary: vary, varyHashes: hashes))
    }

    // MARK: encoding

    private static func u16(_ out: inout [UInt8], _ v: Int) {
        out.append(UInt8(truncatingIfNeeded: v >> 8))
        out.append(UInt8(truncatingIfNeeded: v))
    }

    private static func u32(_ out: inout [UInt8], _ v: Int) {
        for shift in stride(from: 24, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: v >> shift)) }
    }

    private static func u64(_ out: inout [UInt8], _ v: UInt64) {
        for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: v >> UInt64(shift))) }
    }

    private static func put(_ out: inout [UInt8], _ s: String) {
        u32(&out, s.utf8.count)
        out += s.utf8
    }

    private static func putOptional(_ out: inout [UInt8], _ s: String?) {
        if let s {
            out.append(1)
            put(&out, s)
        } else {
            out.append(0)
        }
    }

    private static func hex(_ bytes: [UInt8]) -> [UInt8] {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 15)])
        }
        return out
    }

    /// A bounds-checked cursor over a value.
    private struct Reader {
        let bytes: [UInt8]
        var at = 0

        var atEnd: Bool { at == bytes.count }

        mutating func take(_ n: Int) -> [UInt8]? {
            guard n >= 0, bytes.count - at >= n else { return nil }
            defer { at += n }
            return Array(bytes[at..<at + n])
        }

        mutating func u8() -> UInt8? { take(1)?[0] }

        mutating func u16() -> Int? { take(2).map { Int($0[0]) << 8 | Int($0[1]) } }

        mutating func u32() -> Int? { take(4).map { $0.reduce(0) { $0 << 8 | Int($1) } } }

        mutating func u64() -> UInt64? { take(8).map { $0.reduce(0) { $0 << 8 | UInt64($1) } } }

        mutating func string() -> String? {
            guard let n = u32(), let b = take(n) else { return nil }
            // Peel wrote valid UTF-8; anything else was not written by Peel.
            guard let s = String(validating: b, as: UTF8.self) else { return nil }
            return s
        }
    }
}
