import CCurl

/// The request header lines of one upstream call, built straight into curl's list (no String per line).
public struct UpstreamHeaderList {
    /// curl's list so far; the transfer owns it once sent.
    var list: UnsafeMutablePointer<curl_slist>?
    /// The client's buffer the lines are assembled in.
    let scratch: LineScratch

    /// An empty list.
    init(scratch: LineScratch) { self.scratch = scratch }

    /// Adds a client's field as `Name: value`.
    public mutating func append(_ field: HeaderField) {
        list = scratch.line(field.name, field.value) { curl_slist_append(list, $0) } ?? list
    }

    /// Adds `Name: value`; `Name:` alone stops curl from sending a field it would add itself.
    public mutating func append(_ name: String, _ value: String) {
        var name = name
        var value = value
        name.withUTF8 { n in
            value.withUTF8 { v in
                list = scratch.line(UnsafeRawBufferPointer(n), UnsafeRawBufferPointer(v)) { curl_slist_append(list, $0) } ?? list
            }
        }
    }

    /// Adds one whole line as curl takes it.
    public mutating func append(line: String) {
        list = curl_slist_append(list, line) ?? list
    }
}

/// A reusable buffer in which header lines are assembled before curl copies them.
final class LineScratch {
    /// The line being assembled.
    private var buffer = UnsafeMutablePointer<CChar>.allocate(capacity: 256)
    /// `buffer`'s size in bytes.
    private var capacity = 256

    deinit { buffer.deallocate() }

    /// Writes `path[?query]` NUL-terminated and hands it to `use`. Bytes above 0x7F in the path are
    /// %-encoded (lowercase hex) and the query is left as it is, as curl did with whole URLs.
    func target<R>(path: String, query: String?, _ use: (UnsafePointer<CChar>) -> R) -> R {
        var path = path
        var rest = query ?? ""
        return path.withUTF8 { p in
            rest.withUTF8 { q in
                reserve(p.count * 3 + q.count + 2)
                let raw = UnsafeMutableRawPointer(buffer)
                var at = 0
                for b in p {
                    if b < 0x80 {
                        raw.storeBytes(of: b, toByteOffset: at, as: UInt8.self)
                        at += 1
                    } else {
                        raw.storeBytes(of: 0x25, toByteOffset: at, as: UInt8.self)
                        raw.storeBytes(of: Self.hex[Int(b >> 4)], toByteOffset: at + 1, as: UInt8.self)
                        raw.storeBytes(of: Self.hex[Int(b & 15)], toByteOffset: at + 2, as: UInt8.self)
                        at += 3
                    }
                }
                if query != nil {
                    raw.storeBytes(of: 0x3F, toByteOffset: at, as: UInt8.self)
                    if let base = q.baseAddress { (raw + at + 1).copyMemory(from: base, byteCount: q.count) }
                    at += 1 + q.count
                }
                raw.storeBytes(of: 0, toByteOffset: at, as: UInt8.self)
                return use(buffer)
            }
        }
    }

    /// Lowercase hex digits for %-encoding.
    private static let hex = Array("0123456789abcdef".utf8)

    /// Grows `buffer` to at least `n` bytes (its contents are not kept).
    private func reserve(_ n: Int) {
        if n > capacity {
            buffer.deallocate()
            capacity = max(n, capacity * 2)
            buffer = UnsafeMutablePointer<CChar>.allocate(capacity: capacity)
        }
    }

    /// Writes `name: value` (or `name:` for an empty value) NUL-terminated and hands it to `use`.
    func line<R>(_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer,
                 _ use: (UnsafePointer<CChar>) -> R) -> R {
        reserve(name.count + value.count + 3)
        let raw = UnsafeMutableRawPointer(buffer)
        if let p = name.baseAddress { raw.copyMemory(from: p, byteCount: name.count) }
        var at = name.count
        raw.storeBytes(of: 0x3A, toByteOffset: at, as: UInt8.self)
        at += 1
        if value.count > 0 {
            raw.storeBytes(of: 0x20, toByteOffset: at, as: UInt8.self)
            at += 1
            raw.advanced(by: at).copyMemory(from: value.baseAddress!, byteCount: value.count)
            at += value.count
        }
        raw.storeBytes(of: 0, toByteOffset: at, as: UInt8.self)
        return use(buffer)
    }
}
