import Glibc
import PeelEnvelope
import PeelIO
import Synchronization

/// JSON-string escaping for log lines and small documents (RFC 8259 §7).
func jsonEscaped(_ s: String) -> String { JSONString.quoted(s) }

/// Seconds on the monotonic clock (vDSO, no syscall).
func monotonicNow() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// Seconds since 1970 on the wall clock.
func wallNow() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// RFC 3339 UTC time with milliseconds.
func rfc3339(_ t: Double) -> String {
    var secs = time_t(t)
    var tmv = tm()
    gmtime_r(&secs, &tmv)
    let ms = Int((t - Double(secs)) * 1000)
    func two(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
    let msText = ms < 10 ? "00\(ms)" : ms < 100 ? "0\(ms)" : "\(ms)"
    return "\(tmv.tm_year + 1900)-\(two(tmv.tm_mon + 1))-\(two(tmv.tm_mday))T\(two(tmv.tm_hour)):\(two(tmv.tm_min)):\(two(tmv.tm_sec)).\(msText)Z"
}

/// The two logs' writers: lines go to a thread of their own through a bounded queue, so a
/// stalled stdout or stderr never blocks an event loop; lines that do not fit are dropped and counted.
public enum LogSinks {
    /// The access log's writer (stdout), holding `GatewayConfig().logs.buffer` until `configure`.
    public static let access = LogWriter(fd: 1, capacity: GatewayConfig().logs.buffer)
    /// The event log's writer (stderr), or the access log's when both are one open file (`2>&1`),
    /// so that one thread writes every line of that file and lines never interleave.
    public static let event: LogWriter = LogWriter.sameFile(1, 2) ? access : LogWriter(fd: 2, capacity: GatewayConfig().logs.buffer)

    /// Bytes each log may hold while its sink does not take them (`--log-buffer`); a writer that
    /// serves both logs holds both logs' share.
    public static func configure(buffer: Int) {
        access.capacity = event === access ? 2 * buffer : buffer
        event.capacity = access.capacity
        access.widenPipe(to: buffer)
        if event !== access { event.widenPipe(to: buffer) }
    }
    /// Event lines dropped: counted on their own even when both logs share a writer.
    static let eventDropped = Atomic<Int>(0)
    /// Access lines dropped.
    static var accessDropped: Int { access.dropped - (event === access ? eventDropped.load(ordering: .relaxed) : 0) }

    /// Waits up to `timeout` seconds for both logs to be written out (before the process exits).
    public static func flush(timeout: Double = 2) {
        access.flush(timeout: timeout)
        if event !== access { event.flush(timeout: timeout) }
    }
}

/// Lifecycle events (start, transitions, shutdown) as JSON lines on stderr.
public enum EventLog {
    /// Writes one event line; `fields` values must already be JSON.
    public static func emit(_ event: String, _ fields: [(String, String)] = []) {
        var line = "{\"time\":\"\(rfc3339(wallNow()))\",\"event\":\(jsonEscaped(event))"
        for (k, v) in fields { line += ",\(jsonEscaped(k)):\(v)" }
        line += "}\n"
        if !LogSinks.event.submit(Array(line.utf8), lines: 1) { LogSinks.eventDropped.add(1, ordering: .relaxed) }
    }
}

/// One worker's access log: lines gather in a buffer handed to the access log's writer in batches of
/// whole lines (at the latest every 0.1 s, Worker's timer), so a call costs no lock or syscall.
final class AccessLog {
    private var buffer: [UInt8] = []
    private var lines = 0
    private let limit = 4096

    init() { buffer.reserveCapacity(limit) }

    func append(_ line: String) {
        buffer.append(contentsOf: line.utf8)
        buffer.append(0x0A)
        lines += 1
        if buffer.count >= limit { flush() }
    }

    func flush() {
        guard !buffer.isEmpty else { return }
        LogSinks.access.submit(buffer, lines: lines)
        buffer.removeAll(keepingCapacity: true)
        lines = 0
    }
}
