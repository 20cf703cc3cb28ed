// The SOCK_* constants reach Swift through libevent's headers: Glibc's module leaves them out.
import CEvent
import Glibc

/// A small blocking HTTP/1.1 client over one TCP socket, for `peel healthcheck` and for tests that
/// must send bytes no well-behaved client would (smuggling probes, slow headers, hang-ups).
public final class BlockingClient {
    /// A parsed response.
    public struct Response: Sendable {
        /// Status code.
        public var status: Int
        /// Header fields in order.
        public var headers: [(String, String)]
        /// Body bytes (de-chunked).
        public var body: [UInt8]
        /// First value of a header, case-insensitive.
        public func header(_ name: String) -> String? {
            let l = name.lowercased()
            return headers.first { $0.0.lowercased() == l }?.1
        }
        /// Body as UTF-8 text.
        public var text: String { String(decoding: body, as: UTF8.self) }
    }

    /// Why a call failed.
    public enum Failure: Error, Equatable {
        case connect(Int32)
        case timeout
        case closed
        case malformed(String)
    }

    private var fd: Int32
    private var buffer: [UInt8] = []

    /// Connects to `host:port` (numeric IPv4/IPv6 or a name) with a receive/send timeout; with
    /// `from`, the socket is bound to that numeric local address first (tests that need a second
    /// client address use 127.0.0.2: loopback is all of 127.0.0.0/8).
    public init(host: String, port: Int, timeout: Double = 5, from local: String? = nil) throws(Failure) {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &list) == 0, let ai = list else { throw .connect(EINVAL) }
        defer { freeaddrinfo(list) }
        fd = socket(ai.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .connect(errno) }
        var tv = timeval.peel(timeout)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        if let local {
            var lhints = addrinfo()
            lhints.ai_socktype = Int32(SOCK_STREAM.rawValue)
            lhints.ai_flags = AI_NUMERICHOST
            var llist: UnsafeMutablePointer<addrinfo>?
            guard getaddrinfo(local, "0", &lhints, &llist) == 0, let la = llist else {
                Glibc.close(fd)
                fd = -1
                throw .connect(EINVAL)
            }
            defer { freeaddrinfo(llist) }
            if bind(fd, la.pointee.ai_addr, la.pointee.ai_addrlen) != 0 {
                let e = errno
                Glibc.close(fd)
                fd = -1
                throw .connect(e)
            }
        }
        if connect(fd, ai.pointee.ai_addr, ai.pointee.ai_addrlen) != 0 {
            let e = errno
            Glibc.close(fd)
            fd = -1
            throw .connect(e)
        }
    }

    deinit { if fd >= 0 { Glibc.close(fd) } }

    /// Sends raw bytes.
    public func send(_ bytes: [UInt8]) throws(Failure) {
        var off = 0
        while off < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + off, $0.count - off, Int32(MSG_NOSIGNAL)) }
            if n <= 0 {
                if n < 0 && errno == EINTR { continue }
                throw .closed
            }
            off += n
        }
    }

    /// Sends a string as bytes.
    public func send(_ text: String) throws(Failure) { try send(Array(text.utf8)) }

    /// Half-closes the sending side (the peer sees EOF).
    public func shutdownWrite() { shutdown(fd, Int32(SHUT_WR)) }

    /// Closes now; with `reset`, sends RST instead of FIN.
    public func close(reset: Bool = false) {
        guard fd >= 0 else { return }
        if reset {
            var l = linger(l_onoff: 1, l_linger: 0)
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, socklen_t(MemoryLayout<linger>.size))
        }
        Glibc.close(fd)
        fd = -1
    }

    private func fill() throws(Failure) {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, 65536, 0) }
        if n < 0 {
            if errno == EAGAIN || errno == EWOULDBLOCK { throw .timeout }
            throw .closed
        }
        if n == 0 { throw .closed }
        buffer.append(contentsOf: chunk[0..<n])
    }

    /// True when the peer has closed (reads EOF within `timeout`) with nothing more to read.
    public func peerClosed(within timeout: Double) -> Bool {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&p, 1, Int32(timeout * 1000)) > 0 else { return false }
        var b: UInt8 = 0
        return recv(fd, &b, 1, Int32(MSG_PEEK)) <= 0
    }

    /// True when bytes (or the end of the stream) can be read within `timeout`.
    public func readable(within timeout: Double) -> Bool {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&p, 1, Int32(timeout * 1000)) > 0
    }

    private func readLine() throws(Failure) -> String {
        while true {
            if let i = buffer.firstIndex(of: 0x0A) {
                var line = Array(buffer[..<i])
                buffer.removeFirst(i + 1)
                if line.last == 0x0D { line.removeLast() }
                return String(decoding: line, as: UTF8.self)
            }
            if buffer.count > 1 << 20 { throw .malformed("line too long") }
            try fill()
        }
    }

    private func readExactly(_ n: Int) throws(Failure) -> [UInt8] {
        while buffer.count < n { try fill() }
        let out = Array(buffer[..<n])
        buffer.removeFirst(n)
        return out
    }

    /// Reads raw bytes (framing included) until `marker` has arrived; returns everything up to and
    /// including it. For streamed answers, whose body never ends.
    public func readUntil(_ marker: String) throws(Failure) -> String {
        let m = Array(marker.utf8)
        while true {
            if buffer.count >= m.count {
                for i in 0...(buffer.count - m.count) where buffer[i..<(i + m.count)].elementsEqual(m) {
                    let out = Array(buffer[..<(i + m.count)])
                    buffer.removeFirst(i + m.count)
                    return String(decoding: out, as: UTF8.self)
                }
            }
            if buffer.count > 1 << 20 { throw .malformed("marker not found in 1 MiB") }
            try fill()
        }
    }

    /// Reads one response; `head` says the request was HEAD (no body follows).
    public func readResponse(head: Bool = false) throws(Failure) -> Response {
        var status = 0
        var headers: [(String, String)] = []
        repeat {
            let statusLine = try readLine()
            let parts = statusLine.split(separator: " ", maxSplits: 2)
            guard parts.count >= 2, parts[0].hasPrefix("HTTP/"), let s = Int(parts[1]) else {
                throw .malformed("status line: \(statusLine)")
            }
            status = s
            headers = []
            while true {
                let line = try readLine()
                if line.isEmpty { break }
                guard let colon = line.firstIndex(of: ":") else { throw .malformed("header: \(line)") }
                let value = line[line.index(after: colon)...].drop { $0 == " " || $0 == "\t" }
                headers.append((String(line[..<colon]), String(value)))
            }
        } while status >= 100 && status < 200
        var r = Response(status: status, headers: headers, body: [])
        if head || status == 204 || status == 304 { return r }
        if r.header("transfer-encoding")?.lowercased() == "chunked" {
            while true {
                let sizeLine = try readLine()
                guard let size = Int(sizeLine.split(separator: ";").first ?? "", radix: 16) else { throw .malformed("chunk size") }
                if size == 0 {
                    while try !readLine().isEmpty {}
                    break
                }
                r.body += try readExactly(size)
                _ = try readLine()
            }
        } else if let cl = r.header("content-length"), let n = Int(cl) {
            r.body = try readExactly(n)
        } else {
            while true {
                do { try fill() } catch .closed { break }
            }
            r.body = buffer
            buffer = []
        }
        return r
    }

    /// One GET on a new connection; nil on any failure.
    public static func get(host: String, port: Int, path: String, timeout: Double = 2) -> Response? {
        do {
            let c = try BlockingClient(host: host, port: port, timeout: timeout)
            try c.send("GET \(path) HTTP/1.1\r\nHost: \(host):\(port)\r\nConnection: close\r\n\r\n")
            return try c.readResponse()
        } catch {
            return nil
        }
    }
}
