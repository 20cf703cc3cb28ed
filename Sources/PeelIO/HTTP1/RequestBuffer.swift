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
        self.capacity = max(capacity, 64)
        base = UnsafeMutableRawPointer.allocate(byteCount: self.capacity, alignment: 16)
    }

    deinit { base.deallocate() }

    /// The bytes received, for parsing.
    var bytes: UnsafeMutableRawBufferPointer { UnsafeMutableRawBufferPointer(start: base, count: count) }

    /// Free space after the received bytes.
    var free: UnsafeMutableRawBufferPointer { UnsafeMutableRawBufferPointer(start: base + count, count: capacity - count) }

    /// Grows so that `total` bytes fit (never shrinks).
    func reserve(total: Int) {
        guard total > capacity else { return }
        let grown = UnsafeMutableRawPointer.allocate(byteCount: total, alignment: 16)
        grown.copyMemory(from: base, byteCount: count)
        base.deallocate()
        base = grown
        capacity = total
    }

    /// Appends `bytes`, growing as needed (tests and leftovers).
    func append(_ bytes: UnsafeRawBufferPointer) {
        guard let p = bytes.baseAddress, bytes.count > 0 else { return }
        reserve(total: max(count + bytes.count, capacity))
        (base + count).copyMemory(from: p, byteCount: bytes.count)
        count += bytes.count
    }

    /// The bytes in `range` as a String (method, target, field values).
    func string(_ range: Range<Int>) -> String {
        String(decoding: UnsafeRawBufferPointer(start: base + range.lowerBound, count: range.count), as: UTF8.self)
    }

    /// The bytes in `range`, borrowed.
    func slice(_ range: Range<Int>) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: base + range.lowerBound, count: range.count)
    }
}
