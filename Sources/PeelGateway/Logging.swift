import PeelEnvelope
import Glibc

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

/// Lifecycle events (start, transitions, shutdown) as JSON lines on stderr.
public enum EventLog {
    /// Writes one event line; `fields` values must already be JSON.
    public static func emit(_ event: String, _ fields: [(String, String)] = []) {
        var line = "{\"time\":\"\(rfc3339(wallNow()))\",\"event\":\(jsonEscaped(event))"
        for (k, v) in fields { line += ",\(jsonEscaped(k)):\(v)" }
        line += "}\n"
        writeAll(2, Array(line.utf8))
    }
}

func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
    bytes.withUnsafeBytes { raw in
        var off = 0
        while off < raw.count {
            let n = write(fd, raw.baseAddress! + off, raw.count - off)
            if n < 0 {
                if errno == EINTR { continue }
                return
            }
            off += n
        }
    }
}

/// One worker's access log: lines gather in a buffer written to stdout in whole-line writes of at
/// most PIPE_BUF bytes, so lines from different workers never interleave.
final class AccessLog {
    private var buffer: [UInt8] = []
    private let limit = 4096

    init() { buffer.reserveCapacity(limit) }

    func append(_ line: String) {
        let bytes = line.utf8
        if buffer.count + bytes.count + 1 > limit { flush() }
        buffer.append(contentsOf: bytes)
        buffer.append(0x0A)
        if buffer.count >= limit { flush() }
    }

    func flush() {
        guard !buffer.isEmpty else { return }
        writeAll(1, buffer)
        buffer.removeAll(keepingCapacity: true)
    }
}
