import CEvent
import Glibc

/// The response header fields being set for one answer; valid only inside `respond`'s closure.
///
/// evhttp formats every output field with its own `printf` and copies each one three times (node,
/// name, value). Only the fields evhttp itself looks up (Date, Content-Type, Content-Length,
/// Connection, Transfer-Encoding) go through `evhttp_add_header`; all others are written as ready
/// `Name: value` lines into one block that becomes the value of the Date field, so evhttp prints
/// them in one go. Each line is checked the way `evhttp_add_header` checks a field: no CR, LF or NUL.
public struct ReplyHeaders {
    private let list: UnsafeMutablePointer<evkeyvalq>?
    private let block: HeaderBlock
    /// True once a Content-Length was added.
    private(set) var hasLength = false

    init(list: UnsafeMutablePointer<evkeyvalq>?, block: HeaderBlock) {
        self.list = list
        self.block = block
        block.reset()
    }

    /// Adds `name: value`.
    public mutating func add(_ name: String, _ value: String) {
        var name = name
        var value = value
        name.withUTF8 { n in
            value.withUTF8 { v in add(UnsafeRawBufferPointer(n), UnsafeRawBufferPointer(v)) }
        }
    }

    /// Copies the upstream's fields except those named in `dropping`, without a String per field.
    public mutating func add(_ fields: ResponseHeaders, dropping: HeaderNameSet) {
        fields.forEachField { f in
            if !f.isIn(dropping) { add(f.name, f.value) }
        }
    }

    private mutating func add(_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) {
        switch HeaderNameSet.readByEvhttp.index(of: name) {
        case nil:
            block.appendLine(name, value)
        case 0?:
            // The first Date becomes the block's field name; later ones are ordinary lines.
            if !block.takeDate(value) { block.appendLine(name, value) }
        case let which?:
            if which == 1 { hasLength = true }
            block.withCStrings(name, value) { n, v in _ = evhttp_add_header(list, n, v) }
        }
    }

    /// Hands the block to evhttp as one field, `Date: <date>\r\n<lines>`; `date` is used when no Date was added.
    func finish(date: UnsafeRawBufferPointer) {
        guard let list, let node = block.node(date: date) else { return }
        // TAILQ_INSERT_TAIL(list, node, next), as evhttp_add_header does; evhttp frees the node with
        // the request (key and value with free(), which is what allocated them).
        node.pointee.next.tqe_next = nil
        node.pointee.next.tqe_prev = list.pointee.tqh_last
        list.pointee.tqh_last.pointee = node
        list.pointee.tqh_last = UnsafeMutableRawPointer(node).advanced(by: HeaderBlock.nextOffset)
            .assumingMemoryBound(to: UnsafeMutablePointer<evkeyval>?.self)
    }
}

extension HeaderNameSet {
    /// Fields evhttp looks up in a reply; Date first, Content-Length second (see `ReplyHeaders.add`).
    static let readByEvhttp = HeaderNameSet(["date", "content-length", "content-type", "connection", "transfer-encoding"])
}

/// A reusable buffer in which one reply's header lines are assembled (one per server, loop thread only).
final class HeaderBlock {
    static let nextOffset = MemoryLayout<evkeyval>.offset(of: \evkeyval.next)!
    private var bytes = UnsafeMutablePointer<UInt8>.allocate(capacity: 1024)
    private var capacity = 1024
    private var count = 0
    private var date = UnsafeMutablePointer<UInt8>.allocate(capacity: 256)
    private var dateCount = -1
    private var scratchBytes = UnsafeMutableRawPointer.allocate(byteCount: 256, alignment: 1)
    private var scratchCapacity = 256

    deinit {
        bytes.deallocate()
        date.deallocate()
        scratchBytes.deallocate()
    }

    func reset() {
        count = 0
        dateCount = -1
    }

    private func reserve(_ n: Int) {
        guard count + n > capacity else { return }
        let grown = UnsafeMutablePointer<UInt8>.allocate(capacity: max(count + n, capacity * 2))
        grown.update(from: bytes, count: count)
        bytes.deallocate()
        bytes = grown
        capacity = max(count + n, capacity * 2)
    }

    private static func isFieldSafe(_ b: UnsafeRawBufferPointer) -> Bool {
        for c in b where c == 0x0D || c == 0x0A || c == 0 { return false }
        return true
    }

    /// Appends `name: value\r\n`; a field that would break the head is dropped, as evhttp drops it.
    func appendLine(_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) {
        guard !name.isEmpty, Self.isFieldSafe(name), Self.isFieldSafe(value) else { return }
        reserve(name.count + value.count + 4)
        let p = UnsafeMutableRawPointer(bytes + count)
        p.copyMemory(from: name.baseAddress!, byteCount: name.count)
        p.storeBytes(of: 0x3A, toByteOffset: name.count, as: UInt8.self)
        p.storeBytes(of: 0x20, toByteOffset: name.count + 1, as: UInt8.self)
        if let v = value.baseAddress { (p + name.count + 2).copyMemory(from: v, byteCount: value.count) }
        p.storeBytes(of: 0x0D, toByteOffset: name.count + 2 + value.count, as: UInt8.self)
        p.storeBytes(of: 0x0A, toByteOffset: name.count + 3 + value.count, as: UInt8.self)
        count += name.count + value.count + 4
    }

    /// Keeps `value` as the reply's Date unless one is kept already or it does not fit.
    func takeDate(_ value: UnsafeRawBufferPointer) -> Bool {
        guard dateCount < 0, !value.isEmpty, value.count <= 256, Self.isFieldSafe(value) else { return false }
        UnsafeMutableRawPointer(date).copyMemory(from: value.baseAddress!, byteCount: value.count)
        dateCount = value.count
        return true
    }

    /// Calls `body` with NUL-terminated copies of `name` and `value`.
    func withCStrings(_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer,
                      _ body: (UnsafePointer<CChar>, UnsafePointer<CChar>) -> Void) {
        let n = name.count + value.count + 2
        if n > scratchCapacity {
            scratchBytes.deallocate()
            scratchCapacity = max(n, scratchCapacity * 2)
            scratchBytes = UnsafeMutableRawPointer.allocate(byteCount: scratchCapacity, alignment: 1)
        }
        let scratch = scratchBytes
        if let p = name.baseAddress { scratch.copyMemory(from: p, byteCount: name.count) }
        scratch.storeBytes(of: 0, toByteOffset: name.count, as: UInt8.self)
        if let p = value.baseAddress { (scratch + name.count + 1).copyMemory(from: p, byteCount: value.count) }
        scratch.storeBytes(of: 0, toByteOffset: n - 1, as: UInt8.self)
        body(scratch.assumingMemoryBound(to: CChar.self), (scratch + name.count + 1).assumingMemoryBound(to: CChar.self))
    }

    /// A malloc'd evkeyval `Date: <date>[\r\n<lines without the last CRLF>]`, or nil when out of memory.
    func node(date fallback: UnsafeRawBufferPointer) -> UnsafeMutablePointer<evkeyval>? {
        let dateBytes = dateCount >= 0 ? UnsafeRawBufferPointer(start: date, count: dateCount) : fallback
        let total = dateBytes.count + (count > 0 ? count : 0)
        guard let value = malloc(total + 1), let key = strdup("Date") else { return nil }
        guard let node = calloc(1, MemoryLayout<evkeyval>.size)?.assumingMemoryBound(to: evkeyval.self) else {
            free(value)
            free(key)
            return nil
        }
        value.copyMemory(from: dateBytes.baseAddress!, byteCount: dateBytes.count)
        var at = dateBytes.count
        if count > 0 {
            // CRLF, then every line but the last one's CRLF (evhttp prints that one).
            value.storeBytes(of: 0x0D, toByteOffset: at, as: UInt8.self)
            value.storeBytes(of: 0x0A, toByteOffset: at + 1, as: UInt8.self)
            (value + at + 2).copyMemory(from: bytes, byteCount: count - 2)
            at += count
        }
        value.storeBytes(of: 0, toByteOffset: at, as: UInt8.self)
        node.pointee.key = key
        node.pointee.value = value.assumingMemoryBound(to: CChar.self)
        return node
    }
}

/// A reply body evhttp sends straight from the Swift array that holds it (evbuffer_add_reference),
/// instead of copying it into the connection's buffer.
final class ReplyBody {
    // Below this a copy into evbuffer's current chain is cheaper than a reference chain.
    static let referenceThreshold = 8192

    let bytes: [UInt8]

    private init(_ bytes: [UInt8]) { self.bytes = bytes }

    static func add(_ body: [UInt8], _ range: Range<Int>, to buffer: OpaquePointer) {
        let box = ReplyBody(body)
        // `bytes` is a let in a class: never mutated, so its storage stays where it is until the box
        // goes, and the box is released only by evbuffer's cleanup once the bytes are sent or dropped.
        let base = box.bytes.withUnsafeBytes { $0.baseAddress! } + range.lowerBound
        let retained = Unmanaged.passRetained(box)
        let rc = evbuffer_add_reference(buffer, base, range.count, { _, _, extra in
            Unmanaged<ReplyBody>.fromOpaque(extra!).release()
        }, retained.toOpaque())
        if rc != 0 {
            retained.release()
            _ = body.withUnsafeBytes { evbuffer_add(buffer, $0.baseAddress! + range.lowerBound, range.count) }
        }
    }
}
