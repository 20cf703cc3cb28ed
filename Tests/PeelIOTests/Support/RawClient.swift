import Glibc

/// How a read from the server stopped.
enum ReadEnd: Error, Equatable {
    /// The server closed (FIN).
    case eof
    /// The server reset the connection (RST).
    case reset
    /// Nothing arrived within the receive timeout.
    case timeout
    /// Some other errno.
    case failed(Int32)
}

/// Failures of the test client other than the connection ending.
enum ClientError: Error, Equatable {
    case connect(Int32)
    case send(Int32)
    case malformed(String)
}

/// One response as read off the wire.
struct WireResponse {
    var status: Int
    var headers: [(String, String)]
    var body: [UInt8]

    func header(_ name: String) -> String? {
        headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }

    var text: String { String(decoding: body, as: UTF8.self) }
}

/// A blocking TCP client that sends exact bytes and reports exactly how the server answered or hung up.
final class RawClient {
    private let fd: Int32
    /// Bytes received and not yet consumed by a read call.
    private(set) var buffer: [UInt8] = []

    /// Connects to 127.0.0.1:`port`; reads give up after `timeout` seconds of silence.
    init(port: Int, timeout: Double = 5) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ClientError.connect(errno) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        if rc != 0 {
            let e = errno
            close(fd)
            throw ClientError.connect(e)
        }
        setTimeout(timeout)
    }

    deinit { close(fd) }

    /// Sets the receive timeout in seconds.
    func setTimeout(_ seconds: Double) {
        var tv = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - Double(Int(seconds))) * 1_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Sends every byte.
    func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 {
                if errno == EINTR { continue }
                throw ClientError.send(errno)
            }
            offset += n
        }
    }

    /// Sends text as UTF-8.
    func send(_ text: String) throws { try send(Array(text.utf8)) }

    /// Reads once more into the buffer.
    @discardableResult
    func fill() throws(ReadEnd) -> Int {
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n > 0 {
                buffer += chunk[0..<n]
                return n
            }
            if n == 0 { throw .eof }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: throw .timeout
            case ECONNRESET: throw .reset
            case let e: throw .failed(e)
            }
        }
    }

    /// Reads until the server stops sending; returns the bytes and how it stopped.
    func readToEnd() -> (bytes: [UInt8], end: ReadEnd) {
        while true {
            do {
                try fill()
            } catch {
                let bytes = buffer
                buffer = []
                return (bytes, error)
            }
        }
    }

    /// Takes `count` bytes, reading as needed.
    func take(_ count: Int) throws -> [UInt8] {
        while buffer.count < count { try fill() }
        let out = Array(buffer[0..<count])
        buffer.removeFirst(count)
        return out
    }

    /// Takes one CRLF-terminated line, without the CRLF.
    func line() throws -> [UInt8] {
        while true {
            if let lf = buffer.firstIndex(of: 10), lf > 0, buffer[lf - 1] == 13 {
                let out = Array(buffer[0..<(lf - 1)])
                buffer.removeFirst(lf + 1)
                return out
            }
            try fill()
        }
    }

    /// Reads the status line and header section.
    func readHead() throws -> (status: Int, headers: [(String, String)]) {
        let statusLine = String(decoding: try line(), as: UTF8.self)
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]) else {
            throw ClientError.malformed("status line \(statusLine)")
        }
        var headers: [(String, String)] = []
        while true {
            let text = String(decoding: try line(), as: UTF8.self)
            if text.isEmpty { break }
            guard let colon = text.firstIndex(of: ":") else { throw ClientError.malformed("field \(text)") }
            let value = text[text.index(after: colon)...].drop { $0 == " " }
            headers.append((String(text[..<colon]), String(value)))
        }
        return (status, headers)
    }

    /// Reads one response; `forHead` means the body is absent whatever Content-Length says.
    func readResponse(forHead: Bool = false) throws -> WireResponse {
        var (status, headers) = try readHead()
        while (100..<200).contains(status) { (status, headers) = try readHead() }
        var response = WireResponse(status: status, headers: headers, body: [])
        if forHead || status == 204 || status == 304 { return response }
        if response.header("Transfer-Encoding")?.lowercased() == "chunked" {
            while true {
                let sizeLine = String(decoding: try line(), as: UTF8.self)
                guard let size = Int(sizeLine.split(separator: ";")[0], radix: 16) else {
                    throw ClientError.malformed("chunk size \(sizeLine)")
                }
                if size == 0 {
                    while try !line().isEmpty {}
                    break
                }
                response.body += try take(size)
                guard try take(2) == [13, 10] else { throw ClientError.malformed("chunk end") }
            }
        } else if let length = response.header("Content-Length").flatMap({ Int($0) }) {
            response.body = try take(length)
        } else {
            let (rest, _) = readToEnd()
            response.body = rest
        }
        return response
    }

    /// Sends a GET with the usual headers and reads the answer.
    func get(_ target: String, headers: [(String, String)] = []) throws -> WireResponse {
        try send(RawClient.request("GET", target, headers: headers))
        return try readResponse()
    }

    /// A request's bytes; adds Host and, for a body, Content-Length unless given.
    static func request(_ method: String, _ target: String, version: String = "HTTP/1.1",
                        headers: [(String, String)] = [], body: [UInt8] = []) -> [UInt8] {
        var text = "\(method) \(target) \(version)\r\n"
        if !headers.contains(where: { $0.0.lowercased() == "host" }) { text += "Host: 127.0.0.1\r\n" }
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        let framed = headers.contains { ["content-length", "transfer-encoding"].contains($0.0.lowercased()) }
        if !body.isEmpty && !framed { text += "Content-Length: \(body.count)\r\n" }
        text += "\r\n"
        return Array(text.utf8) + body
    }
}
