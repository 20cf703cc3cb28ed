import Glibc

/// The memory one request is read into: its head and body side by side, so the parser's ranges and
/// the body curl sends from stay valid as long as this object lives. A connection reads into one;
/// when a request is complete the buffer goes with it to its exchange, and the connection starts a
/// new one with whatever bytes followed (pipelining).
final class RequestBuffer {
    /// Bytes a new buffer can hold before it grows (most requests fit).
    static let initialCapacity = 4096

    private(set) var base: UnsafeMutableRawPointer
    private(set) var capacity: Int
    /// Bytes received so far.
    var count = 0

    init(capacity: Int = RequestBuffer.initialCapacity) {
        // A small first allocation; when even that fails the buffer is empty and every read stops.
        let size = max(capacity, 64)
        if let p = malloc(size) {
            base = p
            self.capacity = size
        } else {
            base = UnsafeMutableRawPointer(bitPattern: 16)!
            self.capacity = 0
        }
    }

    deinit { if capacity > 0 { Glibc.free(base) } }

    /// The bytes received, for parsing.
    var bytes: UnsafeMutableRawBufferPointer { UnsafeMutableRawBufferPointer(start: base, count: count) }

    /// Free space after the received bytes.
    var free: UnsafeMutableRawBufferPointer { UnsafeMutableRawBufferPointer(start: base + count, count: capacity - count) }

    /// Grows so that `total` bytes fit (never shrinks); false when memory ran out (nothing changed).
    /// Sizes come from peers, so a failed allocation is an answer, not a crash.
    @discardableResult
    func reserve(total: Int) -> Bool {
        guard total > capacity else { return true }
        guard let grown = capacity > 0 ? realloc(base, total) : malloc(total) else { return false }
        base = grown
        capacity = total
        return true
    }

    /// Appends `bytes`, growing as needed (tests and leftovers).
    func append(_ bytes: UnsafeRawBufferPointer) {
        guard let p = bytes.baseAddress, bytes.count > 0 else { return }
        guard reserve(total: max(count + bytes.count, capacity)) else { return }
        (base + count).copyMemory(from: p, byteCount: bytes.count)
        count += bytes.count
    }

    /// The bytes in `range` as a String (method, target, field values).
    func string(_ range: Range<Int>) -> String {
        String(decoding: UnsafeRawBufferPointer(start: base + range.lowerBound, count: range.count), as: UTF8.self)
    }

    /// The request target in `range` as a String, bytes outside well-formed UTF-8 percent-encoded
    /// (`TargetText`).
    func target(_ range: Range<Int>) -> String {
        TargetText.string(slice(range))
    }

    /// The bytes in `range`, borrowed.
    func slice(_ range: Range<Int>) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: base + range.lowerBound, count: range.count)
    }
}
