import Glibc

/// One connection's output head under construction, reused from answer to answer.
final class ReplyHead {
    private var storage: UnsafeMutableRawPointer
    private var capacity = 512
    // Bytes before `start` are sent; a partial send moves `start` instead of the bytes behind it.
    private var start = 0
    private var end = 0
    /// The bytes not yet sent.
    var bytes: UnsafeMutableRawPointer { storage + start }
    /// How many bytes are not yet sent.
    var count: Int { end - start }
    /// A Date field was added (the upstream's, kept).
    private(set) var hasDate = false

    init() { storage = UnsafeMutableRawPointer.allocate(byteCount: 512, alignment: 1) }
    deinit { storage.deallocate() }

    /// Starts a head after any bytes already queued (a `100 Continue`).
    func begin(status: Int) {
        hasDate = false
        put("HTTP/1.1 ")
        putNumber(status)
        put(" ")
        put(ReasonPhrase.of(status))
        put("\r\n")
    }

    /// Adds the shaped fields as they are (`ReplyFields` kept only what a head may carry).
    func fields(_ f: ReplyFields) {
        hasDate = f.hasDate
        f.withLines { append($0) }
    }

    /// Ends the head: Date (when none was kept), Content-Length when the status allows a body, and
    /// the connection's fate.
    func end(date: UnsafeRawBufferPointer, contentLength: Int?, connection: StaticString?, chunked: Bool = false) {
        if !hasDate {
            put("Date: ")
            append(date)
            put("\r\n")
        }
        if let contentLength {
            put("Content-Length: ")
            putNumber(contentLength)
            put("\r\n")
        }
        if chunked { put("Transfer-Encoding: chunked\r\n") }
        if let connection {
            put("Connection: ")
            put(connection)
            put("\r\n")
        }
        put("\r\n")
    }

    /// Appends one chunk of a chunked body (RFC 9112 §7.1): size in hex, CRLF, data, CRLF.
    func chunk(_ data: UnsafeRawBufferPointer) {
        guard data.count > 0 else { return }
        var hex: (UInt64, UInt64) = (0, 0)
        var n = data.count
        var k = 0
        withUnsafeMutableBytes(of: &hex) { d in
            repeat {
                d[15 - k] = Self.hexDigits[n & 15]
                n >>= 4
                k += 1
            } while n > 0 && k < 16
            append(UnsafeRawBufferPointer(rebasing: d[(16 - k)...]))
        }
        put("\r\n")
        append(data)
        put("\r\n")
    }

    /// Appends raw bytes as they are (a close-delimited body).
    func raw(_ data: UnsafeRawBufferPointer) { append(data) }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Appends raw bytes (an interim `100 Continue`).
    func put(_ s: StaticString) {
        s.withUTF8Buffer { append(UnsafeRawBufferPointer($0)) }
    }

    private func putNumber(_ v: Int) {
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)
        var n = max(0, v)
        var k = 0
        withUnsafeMutableBytes(of: &digits) { d in
            repeat {
                d[23 - k] = 0x30 + UInt8(n % 10)
                n /= 10
                k += 1
            } while n > 0 && k < 24
            append(UnsafeRawBufferPointer(rebasing: d[(24 - k)...]))
        }
    }

    private func append(_ b: UnsafeRawBufferPointer) {
        guard let p = b.baseAddress, b.count > 0 else { return }
        reserve(b.count)
        (storage + end).copyMemory(from: p, byteCount: b.count)
        end += b.count
    }

    private func reserve(_ n: Int) {
        guard end + n > capacity else { return }
        // Sent bytes at the front are reclaimed first; the array grows only when that is not enough.
        let pending = end - start
        if start > 0 {
            storage.copyMemory(from: storage + start, byteCount: pending)
            start = 0
            end = pending
            if end + n <= capacity { return }
        }
        let size = max(end + n, capacity * 2)
        let grown = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 1)
        grown.copyMemory(from: storage, byteCount: end)
        storage.deallocate()
        storage = grown
        capacity = size
    }

    /// Marks `n` bytes as sent.
    func consume(_ n: Int) {
        start += min(n, end - start)
        if start == end {
            start = 0
            end = 0
        }
    }

    /// Gives back memory after an unusually large head or stream.
    func shrinkIfIdle() {
        guard end == 0, capacity > 16_384 else { return }
        storage.deallocate()
        capacity = 512
        storage = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 1)
    }
}

/// The current time as an IMF-fixdate (RFC 9110 §5.6.7), formatted at most once per second per loop.
final class HTTPDate {
    private var second = -1
    private var text = [UInt8](repeating: 0, count: 29)
    private static let days = Array("SunMonTueWedThuFriSat".utf8)
    private static let months = Array("JanFebMarAprMayJunJulAugSepOctNovDec".utf8)

    /// Calls `body` with the date for wall-clock second `now`.
    func with<R>(now: Int, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        if now != second {
            second = now
            format(now)
        }
        return text.withUnsafeBytes(body)
    }

    private func format(_ seconds: Int) {
        var t = time_t(seconds)
        var parts = tm()
        gmtime_r(&t, &parts)
        func two(_ v: Int32, _ at: Int) {
            text[at] = 0x30 + UInt8(v / 10 % 10)
            text[at + 1] = 0x30 + UInt8(v % 10)
        }
        let d = Int(parts.tm_wday) * 3
        let m = Int(parts.tm_mon) * 3
        text[0] = Self.days[d]; text[1] = Self.days[d + 1]; text[2] = Self.days[d + 2]
        text[3] = 0x2C; text[4] = 0x20
        two(parts.tm_mday, 5)
        text[7] = 0x20
        text[8] = Self.months[m]; text[9] = Self.months[m + 1]; text[10] = Self.months[m + 2]
        text[11] = 0x20
        let year = parts.tm_year + 1900
        two(year / 100, 12)
        two(year % 100, 14)
        text[16] = 0x20
        two(parts.tm_hour, 17)
        text[19] = 0x3A
        two(parts.tm_min, 20)
        text[22] = 0x3A
        two(parts.tm_sec, 23)
        text[25] = 0x20; text[26] = 0x47; text[27] = 0x4D; text[28] = 0x54
    }
}
