import CCurl

/// The request header lines of one upstream call, written straight into the handle's `HeaderBlock`
/// (no String and no allocation per line).
public struct UpstreamHeaderList {
    let block: HeaderBlock

    init(block: HeaderBlock) { self.block = block }

    /// Adds a client's field as `Name: value`.
    public mutating func append(_ field: HeaderField) {
        block.add(field.name, field.value)
    }

    /// Adds `Name: value`; `Name:` alone stops curl from sending a field it would add itself.
    public mutating func append(_ name: String, _ value: String) {
        // Native strings are contiguous: read in place, with no copy to make them so.
        let done: Void?? = name.utf8.withContiguousStorageIfAvailable { n in
            value.utf8.withContiguousStorageIfAvailable { v in block.add(UnsafeRawBufferPointer(n), UnsafeRawBufferPointer(v)) }
        }
        if done == nil || done! == nil {
            var name = name
            var value = value
            name.withUTF8 { n in value.withUTF8 { v in block.add(UnsafeRawBufferPointer(n), UnsafeRawBufferPointer(v)) } }
        }
    }

    /// Adds one whole line as curl takes it.
    public mutating func append(line: String) {
        block.add(line: line)
    }
}

/// One easy handle's request header lines as curl reads them (CURLOPT_HTTPHEADER), in two buffers
/// the handle keeps from transfer to transfer: the NUL-terminated lines, and the list nodes that
/// point into them. `curl_slist_append` cost a `strdup` and a node `malloc` per line, and their
/// `free`s after each call (about 28 allocator calls per forwarded request, callgrind). curl only
/// reads the list, for as long as the transfer runs (a re-send reads it again), so the block is
/// reset only when the handle is unhooked. Bounded by what a request may carry (64 KiB of head,
/// 256 fields) plus Peel's own lines; a block grown past 64 KiB is shrunk when it is reset.
final class HeaderBlock {
    private var bytes: UnsafeMutableRawPointer
    private var capacity = 1024
    private var used = 0
    /// Where each line starts in `bytes`.
    private var starts: [Int] = []
    private var nodes: UnsafeMutablePointer<curl_slist>
    private var nodeCapacity = 32

    init() {
        bytes = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 1)
        nodes = UnsafeMutablePointer<curl_slist>.allocate(capacity: nodeCapacity)
        starts.reserveCapacity(nodeCapacity)
    }

    deinit {
        bytes.deallocate()
        nodes.deallocate()
    }

    /// Forgets the lines (the transfer that read them is over).
    func reset() {
        used = 0
        starts.removeAll(keepingCapacity: true)
        if capacity > 65_536 {
            bytes.deallocate()
            capacity = 1024
            bytes = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 1)
        }
    }

    /// Adds `name: value`, or `name:` for an empty value.
    func add(_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) {
        reserve(name.count + value.count + 3)
        starts.append(used)
        put(name)
        bytes.storeBytes(of: 0x3A, toByteOffset: used, as: UInt8.self)
        used += 1
        if value.count > 0 {
            bytes.storeBytes(of: 0x20, toByteOffset: used, as: UInt8.self)
            used += 1
            put(value)
        }
        bytes.storeBytes(of: 0, toByteOffset: used, as: UInt8.self)
        used += 1
    }

    /// Adds one whole line.
    func add(line: String) {
        var line = line
        line.withUTF8 { l in
            reserve(l.count + 1)
            starts.append(used)
            put(UnsafeRawBufferPointer(l))
            bytes.storeBytes(of: 0, toByteOffset: used, as: UInt8.self)
            used += 1
        }
    }

    /// The lines as curl's list (nil when there are none), valid until the next `add` or `reset`.
    func list() -> UnsafeMutablePointer<curl_slist>? {
        guard !starts.isEmpty else { return nil }
        if starts.count > nodeCapacity {
            nodes.deallocate()
            nodeCapacity = max(starts.count, nodeCapacity * 2)
            nodes = UnsafeMutablePointer<curl_slist>.allocate(capacity: nodeCapacity)
        }
        let base = bytes.assumingMemoryBound(to: CChar.self)
        for (i, start) in starts.enumerated() {
            let next = i + 1 < starts.count ? nodes + i + 1 : nil
            (nodes + i).initialize(to: curl_slist(data: base + start, next: next))
        }
        return nodes
    }

    /// The lines, in order (tests).
    var lines: [String] {
        starts.map { String(cString: (bytes + $0).assumingMemoryBound(to: CChar.self)) }
    }

    private func put(_ b: UnsafeRawBufferPointer) {
        guard let p = b.baseAddress, b.count > 0 else { return }
        (bytes + used).copyMemory(from: p, byteCount: b.count)
        used += b.count
    }

    /// Room for `n` more bytes; the lines move, which is why nodes are built only in `list()`.
    private func reserve(_ n: Int) {
        guard used + n > capacity else { return }
        let size = max(used + n, capacity * 2)
        let grown = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 1)
        grown.copyMemory(from: bytes, byteCount: used)
        bytes.deallocate()
        bytes = grown
        capacity = size
    }
}

/// A reusable buffer in which the request target is assembled before curl copies it.
final class LineScratch {
    /// The line being assembled.
    private var buffer = UnsafeMutablePointer<CChar>.allocate(capacity: 256)
    /// `buffer`'s size in bytes.
    private var capacity = 256

    deinit { buffer.deallocate() }

    /// Writes `base` + `path[?query]` NUL-terminated and hands it to `use`. Bytes above 0x7F in the
    /// base and the path are %-encoded (lowercase hex) and the query is left as it is, as curl did
    /// with whole URLs.
    func target<R>(base: String, path: String, query: String?, _ use: (UnsafePointer<CChar>) -> R) -> R {
        var base = base
        var path = path
        var rest = query ?? ""
        return base.withUTF8 { b in
            path.withUTF8 { p in
                rest.withUTF8 { q in
                    reserve((b.count + p.count) * 3 + q.count + 2)
                    let raw = UnsafeMutableRawPointer(buffer)
                    var at = encode(b, into: raw, at: 0)
                    at = encode(p, into: raw, at: at)
                    if query != nil {
                        raw.storeBytes(of: 0x3F, toByteOffset: at, as: UInt8.self)
                        if let start = q.baseAddress { (raw + at + 1).copyMemory(from: start, byteCount: q.count) }
                        at += 1 + q.count
                    }
                    raw.storeBytes(of: 0, toByteOffset: at, as: UInt8.self)
                    return use(buffer)
                }
            }
        }
    }

    /// Copies `bytes` to `raw` from `at`, %-encoding those above 0x7F; returns the end offset.
    private func encode(_ bytes: UnsafeBufferPointer<UInt8>, into raw: UnsafeMutableRawPointer, at start: Int) -> Int {
        var at = start
        for b in bytes {
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
        return at
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

}
